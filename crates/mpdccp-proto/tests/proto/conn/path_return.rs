//! Failover without a link event: a blackholed path (link up,
//! every packet lost for 10 s) is probed while it is failed, so it carries
//! data again soon after it returns: within one RTT + 0.5 s (the
//! goal). The probe spacing is the subflow's RTO, capped at
//! `max_probe_interval`.

use std::time::Duration;

use mpdccp_proto::conn::LossConfig;
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, Event, Instant, PathId};

const A: PathId = PathId(0);
const B: PathId = PathId(1);

const OUTAGE_END_MS: u64 = 12_000;

/// Path A (5 ms one-way) blackholed from 2 s to `back`, path B (15 ms)
/// up; 4 Mbit/s each way; returns the time from A's return to the first
/// data packet that crosses A again (client → server).
fn return_time(max_probe_interval: Duration, back: Instant, seed: u64) -> Duration {
    let cfg = ConnectionConfig {
        loss: LossConfig {
            max_probe_interval,
            ..Default::default()
        },
        ..Default::default()
    };
    let link = |ms: u64, outages| LinkSpec {
        delay: Duration::from_millis(ms),
        rate_bps: Some(20_000_000),
        buffer_bytes: 60_000,
        outages,
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        client: cfg.clone(),
        server: cfg,
        paths: vec![
            link(5, vec![(Instant::from_millis(2_000), back)]),
            link(15, vec![]),
        ],
        seed,
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    let gap = Duration::from_millis(2);
    while h.now < back + Duration::from_millis(3_000) {
        for side in [Side::Client, Side::Server] {
            let now = h.now;
            let _ = h.conn(side).send(now, &[7u8; 1000]);
        }
        h.drive_for(gap);
    }
    let first = h
        .wire
        .iter()
        .filter(|r| r.path == A && r.from == Side::Client && !r.dropped && r.time >= back)
        .find(|r| {
            matches!(
                inspect::packet_type(&r.bytes),
                Some(PacketType::Data | PacketType::DataAck)
            )
        })
        .map(|r| r.time)
        .expect("data crosses path A again");
    // A must really have failed during the outage (and come back after it),
    // and its traffic gone to B meanwhile.
    let failed_at = h
        .events(Side::Client)
        .iter()
        .position(|e| *e == Event::PathFailed(A))
        .expect("path A failed during the outage");
    assert!(
        h.events(Side::Client)[failed_at..].contains(&Event::PathEstablished(A)),
        "path A came back"
    );
    let on_b_during = h
        .wire
        .iter()
        .filter(|r| r.path == B && r.from == Side::Client && !r.dropped)
        .filter(|r| r.time > Instant::from_millis(2_500) && r.time < back)
        .count();
    assert!(
        on_b_during > 500,
        "{on_b_during} packets on B during the outage"
    );
    first.saturating_duration_since(back)
}

#[test]
fn a_returning_path_carries_data_within_the_probe_cap_plus_an_rtt() {
    for cap_ms in [1000u64, 250] {
        let cap = Duration::from_millis(cap_ms);
        // Outages of 3 s to 3.9 s: the return falls at every phase of the probes.
        let times: Vec<Duration> = (0..10u64)
            .map(|k| return_time(cap, Instant::from_millis(OUTAGE_END_MS + 97 * k), k))
            .collect();
        let worst = *times.iter().max().expect("runs");
        println!("max_probe_interval {cap_ms} ms: data on the returned path after {times:?}, worst {worst:?}");
        // The goal: data within one RTT (10 ms on A) + 0.5 s; and
        // never later than the cap + one RTT + the ack delay and slack.
        assert!(
            worst <= Duration::from_millis(510),
            "{worst:?} for cap {cap:?}"
        );
        assert!(
            worst <= cap + Duration::from_millis(60),
            "{worst:?} for cap {cap:?}"
        );
    }
}
