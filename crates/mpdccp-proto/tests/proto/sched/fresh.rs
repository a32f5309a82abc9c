//! Paths that aggregate, sans-IO: the default configuration
//! (scheduler `cpf`, CCID2) on two emulated 20 Mbit/s paths of 10 ms and
//! 20 ms one-way delay.
//!
//! * a bulk flow reaches ≥ 90 % of the two paths' sum;
//! * after the bulk phase each path's SRTT returns to its base RTT within
//!   a few seconds of idling (idle-path RTT probes, RFC 6298 §2.2 restart
//!   of a stale estimate), where before it kept the queue-inflated value
//!   for as long as the path carried nothing;
//! * light traffic afterwards takes the lower-RTT path.

use std::time::Duration;

use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, PathId};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

const MBPS: u64 = 20;
const PAYLOAD: usize = 1300;

/// Two 20 Mbit/s paths, 10 ms and 20 ms one way; drop-tail buffers of
/// `buffers` bytes.
fn harness(buffers: [usize; 2], tweak: impl Fn(&mut ConnectionConfig)) -> Harness {
    let link = |delay: u64, buffer_bytes: usize| LinkSpec {
        delay: ms(delay),
        rate_bps: Some(MBPS * 1_000_000),
        buffer_bytes,
        ..Default::default()
    };
    let mut client = ConnectionConfig::default();
    tweak(&mut client);
    let server = client.clone();
    let mut h = Harness::new(HarnessConfig {
        client,
        server,
        paths: vec![link(10, buffers[0]), link(20, buffers[1])],
        seed: 13,
    });
    h.open_paths(2, ms(500));
    assert!(h.client.is_established() && h.server.is_established());
    assert_eq!(h.client.paths().len(), 2);
    h
}

/// Offers `mbps` of `PAYLOAD`-byte packets for `d` (the send queue drops
/// what does not fit). Returns the payload bytes the server delivered
/// meanwhile.
fn offer(h: &mut Harness, mbps: u64, d: Duration) -> u64 {
    let before: u64 = delivered_bytes(h);
    let per_ms = mbps as f64 * 1e6 / 8.0 / PAYLOAD as f64 / 1000.0;
    let end = h.now + d;
    let mut credit = 0.0;
    let pkt = vec![0x5au8; PAYLOAD];
    while h.now < end {
        credit += per_ms;
        while credit >= 1.0 {
            credit -= 1.0;
            let now = h.now;
            let _ = h.client.send(now, &pkt);
        }
        h.drive_for(ms(1));
    }
    delivered_bytes(h) - before
}

fn delivered_bytes(h: &Harness) -> u64 {
    h.delivered(Side::Server)
        .iter()
        .map(|(_, d)| d.len() as u64)
        .sum()
}

fn srtt_ms(h: &Harness, i: usize) -> f64 {
    h.client.paths()[i].srtt.expect("srtt").as_secs_f64() * 1e3
}

fn data_pkts(h: &Harness, path: u32) -> u64 {
    h.client
        .path_stats(PathId(path))
        .map_or(0, |s| s.tx_data_pkts)
}

#[test]
fn a_bulk_flow_over_two_equal_paths_reaches_90_percent_of_their_sum() {
    let mut h = harness([100_000, 100_000], |_| {});
    // Warm up (slow start on both paths), then measure 10 s.
    offer(&mut h, 50, ms(2000));
    let secs = 10;
    let bytes = offer(&mut h, 50, ms(secs * 1000));
    let mbps = bytes as f64 * 8.0 / secs as f64 / 1e6;
    let (p0, p1) = (data_pkts(&h, 0), data_pkts(&h, 1));
    println!("bulk: {mbps:.2} Mbit/s of payload over 2 x {MBPS} Mbit/s; data packets {p0} / {p1}");
    assert!(
        mbps >= 0.9 * 2.0 * MBPS as f64,
        "{mbps:.2} Mbit/s < 90 % of {}",
        2 * MBPS
    );
    // Both paths carried about half.
    assert!(p0.min(p1) * 10 >= p0.max(p1) * 8, "{p0} / {p1}");
}

/// Bulk, then idle: the 10 ms path's large buffer leaves it with the
/// higher SRTT (queue-inflated) when the bulk phase ends.
fn after_bulk(tweak: impl Fn(&mut ConnectionConfig)) -> Harness {
    let mut h = harness([150_000, 25_000], tweak);
    offer(&mut h, 50, ms(8000));
    // Drain what is queued (no new data).
    h.drive_for(ms(200));
    println!(
        "after bulk: srtt {:.1} / {:.1} ms",
        srtt_ms(&h, 0),
        srtt_ms(&h, 1)
    );
    assert!(
        srtt_ms(&h, 0) > srtt_ms(&h, 1),
        "the 10 ms path must end the bulk phase with the larger srtt for this test"
    );
    h
}

#[test]
fn srtt_returns_to_its_base_within_seconds_of_idling_and_light_traffic_takes_the_faster_path() {
    let mut h = after_bulk(|_| {});
    // Idle 3 s: both paths get probed and their estimates restart.
    h.drive_for(ms(3000));
    let (s0, s1) = (srtt_ms(&h, 0), srtt_ms(&h, 1));
    println!("after 3 s idle: srtt {s0:.1} / {s1:.1} ms");
    assert!(
        (20.0..=23.0).contains(&s0),
        "path 0 srtt {s0:.1} ms, base 20"
    );
    assert!(
        (40.0..=43.0).contains(&s1),
        "path 1 srtt {s1:.1} ms, base 40"
    );
    assert!(h.client.stats().traffic.rtt_probes_sent >= 2);
    // Light traffic: one packet every 100 ms for 2 s.
    let (a0, a1) = (data_pkts(&h, 0), data_pkts(&h, 1));
    for _ in 0..20 {
        let now = h.now;
        h.client.send(now, &[1u8; 100]).unwrap();
        h.drive_for(ms(100));
    }
    let (d0, d1) = (data_pkts(&h, 0) - a0, data_pkts(&h, 1) - a1);
    println!("light: data packets {d0} / {d1}");
    assert_eq!((d0, d1), (20, 0), "light traffic on the lower-RTT path");
}

#[test]
fn without_probes_the_inflated_srtt_stays_and_light_traffic_takes_the_slower_path() {
    // The behaviour without idle-path RTT probes, kept reachable (`rtt_probe_interval
    // = None`): what the test above guards against.
    let mut h = after_bulk(|c| c.lifetime.rtt_probe_interval = None);
    h.drive_for(ms(3000));
    let (a0, a1) = (data_pkts(&h, 0), data_pkts(&h, 1));
    for _ in 0..20 {
        let now = h.now;
        h.client.send(now, &[1u8; 100]).unwrap();
        h.drive_for(ms(100));
    }
    let (d0, d1) = (data_pkts(&h, 0) - a0, data_pkts(&h, 1) - a1);
    println!(
        "no probes: srtt {:.1} / {:.1} ms, light data packets {d0} / {d1}",
        srtt_ms(&h, 0),
        srtt_ms(&h, 1)
    );
    assert!(srtt_ms(&h, 0) > 30.0);
    assert_eq!((d0, d1), (0, 20));
}
