//! Path outage, sequence-window violations and CCID2 loss detection.

use std::time::Duration;

use mpdccp_proto::conn::AckConfig;
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{Event, Instant, PathId};

#[test]
fn traffic_continues_on_the_other_path_during_an_outage() {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![
            LinkSpec {
                delay: Duration::from_millis(10),
                outages: vec![(Instant::from_millis(1000), Instant::from_millis(3000))],
                ..Default::default()
            },
            LinkSpec {
                delay: Duration::from_millis(20),
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.drive_until(Instant::from_millis(500));
    // 1 packet per ms from 0.5 s to 4.5 s, stamped with its send time.
    while h.now < Instant::from_millis(4500) {
        let now = h.now;
        let ms = now.as_nanos() / 1_000_000;
        let mut p = vec![0u8; 300];
        p[..8].copy_from_slice(&ms.to_be_bytes());
        h.client.send(now, &p).unwrap();
        h.drive_for(Duration::from_millis(1));
    }
    h.drive_for(Duration::from_secs(1));
    let sent_ms: Vec<u64> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| u64::from_be_bytes(d[..8].try_into().unwrap()))
        .collect();
    let in_window = |a: u64, b: u64| sent_ms.iter().filter(|&&t| t >= a && t < b).count();
    // Before the outage, and while path 0 is down (after detection).
    assert!(
        in_window(600, 1000) >= 390,
        "before: {}",
        in_window(600, 1000)
    );
    let during = in_window(1500, 3000);
    assert!(during >= 1450, "during the outage {during}/1500 delivered");
    assert!(
        in_window(3500, 4500) >= 990,
        "after: {}",
        in_window(3500, 4500)
    );
    // Path 0 was declared failed, and came back after the outage.
    let failed = h
        .client_events
        .iter()
        .position(|e| *e == Event::PathFailed(PathId(0)));
    let back = h
        .client_events
        .iter()
        .rposition(|e| *e == Event::PathEstablished(PathId(0)));
    assert!(failed.is_some(), "{:?}", h.client_events);
    assert!(back > failed, "path 0 recovered: {:?}", h.client_events);
    let lost = h.client.stats().loss.lost_pkts;
    assert!(
        lost > 0 && lost < 300,
        "only packets in flight on path 0 were lost: {lost}"
    );
}

#[test]
fn forged_far_ahead_packet_gets_a_sync_and_is_not_delivered() {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default()],
        ..Default::default()
    });
    h.record = true;
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    h.client.send(h.now, &[7u8; 100]).unwrap();
    h.drive_for(Duration::from_millis(100));
    // Replay the client's data packet with a sequence number far ahead.
    let w = h
        .wire
        .iter()
        .find(|w| {
            w.from == Side::Client && inspect::packet_type(&w.bytes) == Some(PacketType::DataAck)
        })
        .expect("a DataAck")
        .clone();
    let mut forged = w.bytes.clone();
    let seq = inspect::seq(&forged).unwrap();
    inspect::set_seq(&mut forged, seq + 1_000_000);
    inspect::fix_checksum(&mut forged, w.src.ip(), w.dst.ip());
    let before = h.wire.len();
    let now = h.now;
    h.server.handle_datagram(now, PathId(0), &forged);
    h.drive_for(Duration::from_millis(100));
    let s = h.server.stats();
    assert_eq!(s.rx.rx_seq_invalid, 1);
    assert_eq!(s.traffic.syncs_sent, 1);
    let sync = h.wire[before..]
        .iter()
        .find(|w| {
            w.from == Side::Server && inspect::packet_type(&w.bytes) == Some(PacketType::Sync)
        })
        .expect("server sent a Sync");
    // The Sync acknowledges the offending sequence number (RFC 4340 §7.5.4).
    let b = &sync.bytes;
    let ack = u64::from_be_bytes([0, 0, b[18], b[19], b[20], b[21], b[22], b[23]]);
    assert_eq!(ack, (seq + 1_000_000) & ((1 << 48) - 1));
    // The client never sent that number, so its ack check drops the Sync.
    assert_eq!(h.client.stats().traffic.syncacks_sent, 0);
    assert_eq!(h.client.stats().rx.rx_seq_invalid, 1);
    // The forged payload was not delivered; the connection is unharmed.
    assert_eq!(h.delivered(Side::Server).len(), 1);
    h.client.send(h.now, &[8u8; 100]).unwrap();
    h.drive_for(Duration::from_millis(100));
    assert_eq!(h.delivered(Side::Server).len(), 2, "connection unharmed");
}

#[test]
fn burst_loss_beyond_the_sequence_window_recovers_with_sync_syncack() {
    use mpdccp_proto::ConnectionConfig;
    // A small Sequence Window (RFC 4340 §7.5.2) and 80 consecutive lost
    // client packets: the next ones land beyond SWH = GSR + 3W/4.
    let small = ConnectionConfig {
        ack: AckConfig {
            seq_window_pkts: 100,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default()],
        client: small.clone(),
        server: small,
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    let send = |h: &mut Harness, k: u32| {
        let now = h.now;
        let _ = h.client.send(now, &k.to_be_bytes());
    };
    let mut k = 0u32;
    // Grow the window first, then let the pipe drain.
    for _ in 0..300 {
        for _ in 0..3 {
            send(&mut h, k);
            k += 1;
        }
        h.drive_for(Duration::from_millis(1));
    }
    h.drive_for(Duration::from_millis(100));
    let cwnd = h.client.paths()[0].cwnd_pkts;
    assert!(cwnd > 100, "cwnd {cwnd}");
    assert_eq!(h.server.stats().rx.rx_seq_invalid, 0, "in-window so far");
    let mut dropped = 0;
    h.tamper = Some(Box::new(move |side, _p, _b| {
        if side == Side::Client && dropped < 80 {
            dropped += 1;
            return false;
        }
        true
    }));
    // One burst: 80 lost, the rest arrive beyond SWH = GSR + 75.
    for _ in 0..100 {
        send(&mut h, k);
        k += 1;
    }
    h.drive_for(Duration::from_millis(5));
    let after_gap = k;
    for _ in 0..200 {
        send(&mut h, k);
        k += 1;
        h.drive_for(Duration::from_millis(1));
    }
    h.drive_for(Duration::from_millis(500));
    let s = h.server.stats();
    assert!(s.rx.rx_seq_invalid >= 1, "packets beyond SWH were refused");
    assert!(s.traffic.syncs_sent >= 1, "and answered with Sync");
    assert!(
        h.client.stats().traffic.syncacks_sent >= 1,
        "the client answered SyncAck"
    );
    // After resynchronisation the data after the gap flows again.
    let got: Vec<u32> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| u32::from_be_bytes(d[..4].try_into().unwrap()))
        .filter(|&x| x >= after_gap + 50)
        .collect();
    assert!(got.len() >= 140, "delivered after resync: {}", got.len());
    assert_eq!(h.client.stats().loss.rtos, 0, "recovered without a timeout");
}

#[test]
fn ccid2_detects_loss_from_the_ack_vector_and_halves_cwnd() {
    // A 20 Mbit/s bottleneck spaces packets, so every ack is its own event.
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec {
            delay: Duration::from_millis(20),
            rate_bps: Some(20_000_000),
            ..Default::default()
        }],
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    // Drop exactly the 200th client data packet.
    let mut n = 0;
    h.tamper = Some(Box::new(move |side, _p, bytes| {
        if side == Side::Client && inspect::packet_type(bytes) == Some(PacketType::DataAck) {
            n += 1;
            return n != 200;
        }
        true
    }));
    // (cwnd, lost) after every event.
    let mut trace: Vec<(u32, u64, Option<u32>)> = Vec::new();
    for _ in 0..1500 {
        let now = h.now;
        let _ = h.client.send(now, &[1u8; 500]);
        let _ = h.client.send(now, &[1u8; 500]);
        h.drive_until_pred(Duration::from_millis(1), |h| {
            trace.push((
                h.client.paths()[0].cwnd_pkts,
                h.client.stats().loss.lost_pkts,
                h.client.path_ssthresh(PathId(0)),
            ));
            false
        });
    }
    let s = h.client.stats();
    assert_eq!(
        s.loss.lost_pkts, 1,
        "exactly the dropped packet was declared lost"
    );
    assert_eq!(s.loss.rtos, 0, "detected by the Ack Vector, not by timeout");
    let k = trace.iter().position(|t| t.1 == 1).expect("loss detected");
    let before = trace[k - 1].0;
    let (after, _, ssthresh) = trace[k];
    assert!(before >= 8, "cwnd grew first: {before}");
    // The detecting ack may first grow cwnd by the ≤ 2 packets it acks
    // (Ack Ratio 2), then the window halves (RFC 4341 §5).
    assert!(
        after >= before / 2 && after <= (before + 2) / 2,
        "cwnd halved: {before} -> {after}"
    );
    assert_eq!(ssthresh, Some(after.max(2)), "ssthresh = halved cwnd");
}

/// Fraction of back-to-back (same-instant) departures among the client's
/// data packets in a bulk transfer with controller `cc`.
fn burstiness(cc: &str) -> (f64, usize) {
    use mpdccp_proto::ConnectionConfig;
    let conf = ConnectionConfig {
        cc: cc.parse().unwrap(),
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec {
            delay: Duration::from_millis(20),
            rate_bps: Some(10_000_000),
            buffer_bytes: 200_000,
            ..Default::default()
        }],
        client: conf.clone(),
        server: conf,
        ..Default::default()
    });
    h.record = true;
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    for _ in 0..2000 {
        let now = h.now;
        // Keep the queue full: the controller, not the source, sets the pace.
        while h.client.send_queue_len() < 50 {
            h.client.send(now, &[0u8; 1000]).unwrap();
        }
        h.drive_for(Duration::from_millis(1));
    }
    let times: Vec<Instant> = h
        .wire
        .iter()
        .filter(|w| {
            w.from == Side::Client
                && w.time > Instant::from_millis(1200)
                && inspect::packet_type(&w.bytes) == Some(PacketType::DataAck)
        })
        .map(|w| w.time)
        .collect();
    let same = times.windows(2).filter(|w| w[0] == w[1]).count();
    (same as f64 / times.len().max(1) as f64, times.len())
}

#[test]
fn a_pacing_controller_spreads_departures() {
    let (paced, n_paced) = burstiness("ccid5");
    let (unpaced, n_unpaced) = burstiness("ccid2");
    assert!(n_paced > 500 && n_unpaced > 500, "{n_paced} {n_unpaced}");
    assert!(
        paced < 0.05,
        "ccid5 (paced): {paced:.3} of departures back to back"
    );
    assert!(
        unpaced > 0.3,
        "ccid2 (window only): {unpaced:.3} back to back"
    );
}

/// Goodput (Mbit/s over 2–10 s) and p95 of the sender's smoothed RTT for
/// one backlogged 10 Mbit/s, 10 ms RTT path.
fn single_path_goodput(cc: &str) -> (f64, Duration) {
    use mpdccp_proto::ConnectionConfig;
    let conf = ConnectionConfig {
        cc: cc.parse().unwrap(),
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec {
            delay: Duration::from_millis(5),
            rate_bps: Some(10_000_000),
            buffer_bytes: 100_000,
            ..Default::default()
        }],
        client: conf.clone(),
        server: conf,
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    let mut srtts = Vec::new();
    let mut bytes_at_2s = 0;
    while h.now < Instant::from_millis(10_100) {
        let now = h.now;
        while h.client.send_queue_len() < 20 {
            h.client.send(now, &[0u8; 1200]).unwrap();
        }
        h.drive_for(Duration::from_millis(1));
        if h.now >= Instant::from_millis(2_100) {
            if bytes_at_2s == 0 {
                bytes_at_2s = h.server.stats().traffic.delivered_bytes;
            }
            if let Some(s) = h.client.paths()[0].srtt {
                srtts.push(s);
            }
        }
    }
    let bytes = h.server.stats().traffic.delivered_bytes - bytes_at_2s;
    srtts.sort_unstable();
    let p95 = srtts[srtts.len() * 95 / 100];
    (bytes as f64 * 8.0 / 8.0 / 1e6, p95)
}

#[test]
fn ccid5_fills_a_single_path_with_low_delay() {
    let (mbps, p95) = single_path_goodput("ccid5");
    // Payload goodput: 1200 of ~1240 bytes per packet on the wire.
    assert!(
        mbps >= 9.5 * 1200.0 / 1260.0,
        "ccid5 goodput {mbps:.2} Mbit/s"
    );
    assert!(p95 <= Duration::from_millis(35), "ccid5 srtt p95 {p95:?}");
}

#[test]
fn ccid2_fills_a_single_path() {
    let (mbps, _) = single_path_goodput("ccid2");
    assert!(
        mbps >= 9.0 * 1200.0 / 1260.0,
        "ccid2 goodput {mbps:.2} Mbit/s"
    );
}

/// Two 10 Mbit/s paths, 15 Mbit/s offered, CPF: the preferred (lower-RTT)
/// path must be full before CPF spills to the other. Returns the data rate
/// each path carried (Mbit/s of DCCP datagrams, 3–10 s).
fn cpf_split(cc: &str) -> (f64, f64) {
    use mpdccp_proto::ConnectionConfig;
    let conf = ConnectionConfig {
        cc: cc.parse().unwrap(),
        ..Default::default()
    };
    let link = |ms| LinkSpec {
        delay: Duration::from_millis(ms),
        rate_bps: Some(10_000_000),
        buffer_bytes: 100_000,
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![link(5), link(15)],
        client: conf.clone(),
        server: conf,
        ..Default::default()
    });
    h.open_paths(2, Duration::from_millis(200));
    // 15 Mbit/s of 1250-byte packets: 1.5 per ms.
    let mut sent_at_3s = (0, 0);
    let mut k = 0u64;
    while h.now < Instant::from_millis(10_300) {
        let now = h.now;
        let n = if k.is_multiple_of(2) { 1 } else { 2 };
        for _ in 0..n {
            let _ = h.client.send(now, &[0u8; 1250]);
        }
        k += 1;
        h.drive_for(Duration::from_millis(1));
        if sent_at_3s == (0, 0) && h.now >= Instant::from_millis(3_300) {
            sent_at_3s = (
                h.client.path_stats(PathId(0)).unwrap().tx_bytes,
                h.client.path_stats(PathId(1)).unwrap().tx_bytes,
            );
        }
    }
    let p0 = h.client.path_stats(PathId(0)).unwrap().tx_bytes - sent_at_3s.0;
    let p1 = h.client.path_stats(PathId(1)).unwrap().tx_bytes - sent_at_3s.1;
    (p0 as f64 * 8.0 / 7.0 / 1e6, p1 as f64 * 8.0 / 7.0 / 1e6)
}

#[test]
fn cpf_fills_the_preferred_path_before_spilling_with_a_paced_controller() {
    // BBR keeps the queue short, so path 0 stays the cheapest pipe and CPF
    // spills only what it cannot carry.
    let (p0, p1) = cpf_split("ccid5");
    assert!(
        p0 >= 9.3,
        "ccid5: preferred path carries {p0:.2} Mbit/s (other {p1:.2})"
    );
    assert!(
        p0 + p1 >= 14.5,
        "ccid5: total {:.2} Mbit/s of 15 offered",
        p0 + p1
    );
    // CCID2 fills path 0's buffer; CPF then balances the two paths by SRTT
    // (its definition of the cheapest pipe), but nothing offered is lost.
    let (q0, q1) = cpf_split("ccid2");
    assert!(
        q0 + q1 >= 14.5,
        "ccid2: total {:.2} Mbit/s of 15 offered",
        q0 + q1
    );
}

#[test]
fn ack_ratio_follows_half_the_window_and_is_confirmed() {
    use mpdccp_proto::conn::codec::Segment;
    use mpdccp_proto::wire::option::kind;
    use mpdccp_proto::wire::FeatureNum;
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec {
            delay: Duration::from_millis(10),
            outages: vec![(Instant::from_millis(1000), Instant::from_millis(1600))],
            ..Default::default()
        }],
        ..Default::default()
    });
    h.record = true;
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    while h.now < Instant::from_millis(3000) {
        let now = h.now;
        h.client.send(now, &[5u8; 300]).unwrap();
        h.drive_for(Duration::from_millis(2));
    }
    let feats = |from: Side, k: u8| -> Vec<(Instant, u64)> {
        h.wire
            .iter()
            .filter(|w| w.from == from && !w.dropped)
            .filter_map(|w| {
                let s = Segment::parse(&w.bytes, None).ok()?;
                s.feat(k, FeatureNum::AckRatio).map(|f| (w.time, f.value))
            })
            .collect()
    };
    let changes = feats(Side::Client, kind::CHANGE_L);
    let confirms = feats(Side::Server, kind::CONFIRM_R);
    // Default Ack Ratio 2 while cwnd >= 3, confirmed by the receiver.
    assert!(changes.iter().any(|c| c.1 == 2), "{changes:?}");
    assert!(confirms.iter().any(|c| c.1 == 2), "{confirms:?}");
    // The outage collapses cwnd to 1: Ack Ratio must drop to ceil(1/2) = 1.
    assert!(h.client.stats().loss.rtos >= 1);
    let after: Vec<_> = changes
        .iter()
        .filter(|c| c.0 >= Instant::from_millis(1000))
        .collect();
    assert!(after.iter().any(|c| c.1 == 1), "{after:?}");
    assert!(confirms.iter().any(|c| c.1 == 1), "{confirms:?}");
    // Never above ceil(cwnd/2) for the windows seen (cwnd >= 1): values 1 or 2.
    assert!(changes.iter().all(|c| c.1 == 1 || c.1 == 2));
}

/// A data packet that does not fit the caller's buffer is one datagram
/// that did not fit: counted once (it was counted twice).
#[test]
fn a_data_packet_too_big_for_the_buffer_is_counted_once() {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default()],
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(300));
    assert!(h.client.is_established());
    let before = h.client.stats().traffic.tx_buffer_too_small;
    let now = h.now;
    h.client.send(now, &[7u8; 1000]).expect("queued");
    let mut small = [0u8; 200];
    assert_eq!(h.client.poll_transmit(now, &mut small), None);
    assert_eq!(h.client.stats().traffic.tx_buffer_too_small, before + 1);
}
