//! Once seen in the lab: after a 0.5 s DSL outage the server kept 90 % of
//! a video stream on LTE for the rest of the run although DSL was active
//! again (it did not reproduce in a second run). A video-like downstream
//! (frames of 25 packets every 40 ms, 6 Mbit/s) over DSL (10 ms one way,
//! 20 Mbit/s) and LTE (30 ms, 20 Mbit/s) with the daemons' defaults; DSL
//! is blackholed for 0.5 s at many phases of the frame clock and seeds.
//! After DSL is back the scheduler must return the stream to it. (It does
//! in every one of the 24 runs: the condition of that one lab run was
//! not found here; see docs/OPERATIONS.md.)

use std::time::Duration;

use mpdccp_proto::conn::PacketType;
use mpdccp_proto::conn::TunnelSettings;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{Instant, PathId};

const DSL: PathId = PathId(0);

/// Share of the server's data packets on LTE in [from, to) ms, and the
/// DSL path's state at the end.
fn lte_share_after_outage(outage_at_ms: u64, seed: u64) -> (f64, String) {
    let mut cfg = TunnelSettings::default().connection_config(1400);
    cfg.lifetime.keepalive_interval = Some(Duration::from_secs(2));
    cfg.lifetime.path_idle_timeout = Some(Duration::from_secs(15));
    let link = |ms: u64, outages| LinkSpec {
        delay: Duration::from_millis(ms),
        rate_bps: Some(20_000_000),
        buffer_bytes: 100_000,
        outages,
        ..Default::default()
    };
    let start = Instant::from_millis(outage_at_ms);
    let end = Instant::from_millis(outage_at_ms + 500);
    let mut h = Harness::new(HarnessConfig {
        client: cfg.clone(),
        server: cfg,
        paths: vec![link(10, vec![(start, end)]), link(30, vec![])],
        seed,
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    let frame = Duration::from_millis(40);
    let until = end + Duration::from_secs(8);
    let mut next = h.now;
    while h.now < until {
        if h.now >= next {
            let now = h.now;
            for _ in 0..25 {
                let _ = h.conn(Side::Server).send(now, &[9u8; 1200]);
            }
            next += frame;
        }
        h.drive_for(Duration::from_millis(1));
    }
    let from = end + Duration::from_secs(3);
    let (mut dsl, mut all) = (0u64, 0u64);
    for r in h
        .wire
        .iter()
        .filter(|r| r.from == Side::Server && r.time >= from)
    {
        if matches!(
            inspect::packet_type(&r.bytes),
            Some(PacketType::Data | PacketType::DataAck)
        ) {
            all += 1;
            if r.path == DSL {
                dsl += 1;
            }
        }
    }
    // 5 s of a 25-packet frame every 40 ms: about 3 125 data packets.
    assert!(all > 2_500, "the stream was not carried: {all} packets");
    let state = format!("{:?}", h.conn(Side::Server).paths());
    h.wire.clear();
    (1.0 - dsl as f64 / all as f64, state)
}

#[test]
fn video_returns_to_dsl_after_a_half_second_outage() {
    let mut worst = (-1.0, 0, 0, String::new());
    for seed in 1..=3 {
        for k in 0..8 {
            let at = 3_000 + k * 5;
            let (lte, state) = lte_share_after_outage(at, seed);
            println!(
                "seed {seed} outage at {at} ms: LTE share {:.1} %",
                lte * 100.0
            );
            if lte > worst.0 {
                worst = (lte, seed, at, state);
            }
        }
    }
    println!(
        "worst {:.1} % (seed {}, outage at {} ms): {}",
        worst.0 * 100.0,
        worst.1,
        worst.2,
        worst.3
    );
    assert!(
        worst.0 < 0.5,
        "LTE kept {:.1} % (seed {}, outage at {} ms)",
        worst.0 * 100.0,
        worst.1,
        worst.2
    );
}
