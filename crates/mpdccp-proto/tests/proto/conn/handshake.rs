//! Handshake, joins and data over the N-path harness.

use std::time::Duration;

use crate::common;
use mpdccp_proto::harness::{Harness, HarnessConfig, Side};
use mpdccp_proto::sched::SchedulerConfig;
use mpdccp_proto::{Event, PathId, PathState};

/// Three clean paths of 10, 30 and 20 ms.
fn three_paths() -> HarnessConfig {
    HarnessConfig {
        paths: common::links(&[10, 30, 20]),
        ..Default::default()
    }
}

#[test]
fn handshake_then_two_joins() {
    let mut h = Harness::new(three_paths());
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    assert!(h.client.is_established(), "client established");
    assert!(h.server.is_established(), "server established");
    assert_eq!(h.client.is_multipath(), Some(true));
    assert_eq!(h.server.remote_ci(), Some(h.client.local_ci()));
    assert_eq!(h.client.remote_ci(), Some(h.server.local_ci()));
    assert!(h.client_events.contains(&Event::Connected));
    assert!(h.server_events.contains(&Event::Connected));
    h.open_path(1);
    h.open_path(2);
    h.drive_for(Duration::from_millis(300));
    for side in [Side::Client, Side::Server] {
        let paths = h.conn(side).paths();
        assert_eq!(paths.len(), 3, "{side:?}");
        assert!(
            paths.iter().all(|p| p.state == PathState::Active),
            "{side:?} {paths:?}"
        );
        for id in 0..3 {
            assert!(h.events(side).contains(&Event::PathEstablished(PathId(id))));
        }
    }
    let s = h.server.stats();
    assert_eq!(
        s.auth.join_bad_hmac + s.auth.join_unknown_token + s.rx.rx_seq_invalid,
        0
    );
}

#[test]
fn data_over_two_paths_is_delivered_exactly_once() {
    let mut cfg = three_paths();
    // Round robin so that both paths carry data whatever their RTTs.
    for c in [&mut cfg.client, &mut cfg.server] {
        c.scheduler =
            SchedulerConfig::from("rr".parse::<mpdccp_proto::sched::SchedulerKind>().unwrap());
    }
    let mut h = Harness::new(cfg);
    h.open_paths(2, Duration::from_millis(200));
    let n = 2000u32;
    let mut sent = 0u32;
    // Offer 1000-byte packets every 100 µs (80 Mbit/s) for 200 ms, both ways.
    while sent < n {
        let now = h.now;
        for side in [Side::Client, Side::Server] {
            let mut pkt = vec![0u8; 1000];
            pkt[..4].copy_from_slice(&sent.to_be_bytes());
            pkt[4] = side as u8;
            let _ = h.conn(side).send(now, &pkt);
        }
        sent += 1;
        h.drive_for(Duration::from_micros(100));
    }
    h.drive_for(Duration::from_secs(2));
    for side in [Side::Client, Side::Server] {
        let got = h.delivered(side.peer());
        let mut ids: Vec<u32> = got
            .iter()
            .map(|(_, d)| u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
            .collect();
        let total = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), total, "no duplicates ({side:?})");
        let stats = h.conn(side).stats();
        let dropped =
            stats.send_queue.send_queue_dropped_newest + stats.send_queue.send_queue_dropped_oldest;
        // Unreliable transport: everything accepted reaches the peer unless lost.
        assert_eq!(
            total as u64 + stats.loss.lost_pkts,
            n as u64 - dropped,
            "{side:?}: delivered {total}, lost {}, dropped {dropped}",
            stats.loss.lost_pkts
        );
        assert!(total > 1900, "{side:?} delivered {total}");
        assert_eq!(stats.loss.lost_pkts, 0, "no loss on loss-free links");
        // Both paths carried data.
        for p in 0..2 {
            let ps = h.conn(side).path_stats(PathId(p)).unwrap();
            assert!(ps.tx_data_pkts > 20, "{side:?} path {p}: {ps:?}");
        }
    }
}

#[test]
fn gso_batches_carry_equal_size_datagrams_and_deliver_exactly_once() {
    let mut cfg = three_paths();
    cfg.client.max_gso_segments = 8;
    let mut h = Harness::new(cfg);
    h.open_paths(2, Duration::from_millis(200));
    // Bursts of equal-size packets.
    for burst in 0..50u32 {
        let now = h.now;
        for k in 0..20u32 {
            let mut pkt = vec![0u8; 800];
            pkt[..4].copy_from_slice(&(burst * 20 + k).to_be_bytes());
            h.client.send(now, &pkt).unwrap();
        }
        h.drive_for(Duration::from_millis(10));
    }
    h.drive_for(Duration::from_secs(1));
    assert!(h.gso_batches > 10, "GSO batches formed: {}", h.gso_batches);
    assert!(h.gso_segments >= 2 * h.gso_batches);
    let mut ids: Vec<u32> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..1000).collect::<Vec<_>>(),
        "every packet exactly once"
    );
    assert_eq!(h.client.stats().loss.lost_pkts, 0);
}
