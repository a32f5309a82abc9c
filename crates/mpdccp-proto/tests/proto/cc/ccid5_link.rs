//! CCID5 (BBRv1) driven through `Connection` over the N-path harness must
//! use a fixed link as well as it does in cc's own closed loop
//! (`tests/proto/cc/link.rs`), with CCID2 as the control: one backlogged 10 Mbit/s path,
//! and the E2-like two-path case (15 Mbit/s CBR under CPF).

use std::time::Duration;

use mpdccp_proto::conn::DATA_HEADER_MAX;
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec};
use mpdccp_proto::path::priority;
use mpdccp_proto::sched::SchedulerConfig;
use mpdccp_proto::{ConnectionConfig, Instant, PathId};

const LINK_BPS: u64 = 10_000_000;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A 10 Mbit/s path, 5 ms one-way delay, 150 kB drop-tail buffer.
fn link() -> LinkSpec {
    LinkSpec {
        delay: ms(5),
        rate_bps: Some(LINK_BPS),
        buffer_bytes: 150_000,
        ..Default::default()
    }
}

/// Path 1 primary, the others secondary (E2: CPF fills path 1 first).
fn harness(cc: &str, paths: usize, pkt_bytes: usize) -> Harness {
    let client = ConnectionConfig {
        cc: cc.parse().unwrap(),
        mss_bytes: (pkt_bytes + DATA_HEADER_MAX) as u32,
        scheduler: SchedulerConfig::from(
            "cpf".parse::<mpdccp_proto::sched::SchedulerKind>().unwrap(),
        ),
        ..ConnectionConfig::default()
    };
    let server = client.clone();
    let mut h = Harness::new(HarnessConfig {
        client,
        server,
        paths: (0..paths)
            .map(|i| LinkSpec {
                priority: if i == 0 {
                    priority::PRIMARY
                } else {
                    priority::SECONDARY
                },
                ..link()
            })
            .collect(),
        seed: 11,
    });
    h.open_path(0);
    h.drive_for(ms(100));
    for i in 1..paths {
        h.open_path(i);
    }
    h.drive_for(ms(200));
    assert!(h.client.is_established() && h.server.is_established());
    h
}

/// Data packets the client put on path `p` (those that crossed it).
fn tx_data(h: &Harness, p: u32) -> u64 {
    h.client.path_stats(PathId(p)).map_or(0, |s| s.tx_data_pkts)
}

/// What a run measured over its steady-state window.
#[derive(Debug)]
struct Measured {
    /// Goodput per path, Mbit/s (tunnelled bytes sent on the path; the link
    /// never drops more than a few of them, checked separately).
    path_mbps: Vec<f64>,
    /// Delivered to the server, Mbit/s.
    delivered_mbps: f64,
    /// 95th percentile of the client's smoothed RTT per path, sampled every 250 µs.
    srtt_p95_ms: Vec<f64>,
}

/// Offers traffic for `warmup + window`: `cbr_bps = None` keeps the send
/// queue non-empty (backlogged), `Some(r)` offers constant bit rate `r`.
fn run(
    h: &mut Harness,
    pkt_bytes: usize,
    cbr_bps: Option<u64>,
    warmup: Duration,
    window: Duration,
) -> Measured {
    let paths = h.specs.len();
    let pkt = vec![0x45u8; pkt_bytes];
    let start = h.now;
    let measure_from = start + warmup;
    let end = measure_from + window;
    let gap = cbr_bps.map(|r| Duration::from_nanos(pkt_bytes as u64 * 8 * 1_000_000_000 / r));
    let mut next_pkt = start;
    let mut tx0 = vec![0u64; paths];
    let mut delivered0 = 0usize;
    let mut measuring = false;
    let mut srtt: Vec<Vec<f64>> = vec![Vec::new(); paths];
    let step = Duration::from_micros(250);
    while h.now < end {
        if !measuring && h.now >= measure_from {
            measuring = true;
            for (p, t) in tx0.iter_mut().enumerate() {
                *t = tx_data(h, p as u32);
            }
            delivered0 = h.delivered(mpdccp_proto::harness::Side::Server).len();
        }
        match gap {
            None => {
                while h.client.send_queue_len() < 200 {
                    let _ = h.client.send(h.now, &pkt);
                }
            }
            Some(g) => {
                while next_pkt <= h.now {
                    let _ = h.client.send(h.now, &pkt);
                    next_pkt += g;
                }
            }
        }
        let to = match gap {
            Some(_) => next_pkt.min(h.now + step),
            None => h.now + step,
        };
        h.drive_until(to);
        if measuring {
            for (p, v) in h.client.paths().iter().enumerate() {
                if let Some(r) = v.srtt {
                    srtt[p].push(r.as_secs_f64() * 1e3);
                }
            }
        }
    }
    let secs = window.as_secs_f64();
    let mbps = |pkts: u64| pkts as f64 * pkt_bytes as f64 * 8.0 / secs / 1e6;
    let path_mbps = (0..paths)
        .map(|p| mbps(tx_data(h, p as u32) - tx0[p]))
        .collect();
    let delivered = h.delivered(mpdccp_proto::harness::Side::Server).len() - delivered0;
    let srtt_p95_ms = srtt
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v.get((v.len() * 95 / 100).min(v.len().saturating_sub(1)))
                .copied()
                .unwrap_or(f64::NAN)
        })
        .collect();
    Measured {
        path_mbps,
        delivered_mbps: mbps(delivered as u64),
        srtt_p95_ms,
    }
}

fn at(h: &Harness) -> Instant {
    h.now
}

fn single_path(cc: &str) -> Measured {
    let mut h = harness(cc, 1, 1200);
    let m = run(
        &mut h,
        1200,
        None,
        Duration::from_secs(3),
        Duration::from_secs(6),
    );
    eprintln!(
        "{cc} single path at {:?}: {m:?} views {:?}",
        at(&h),
        h.client.paths()
    );
    m
}

/// E2 (scenarios/README.md, `scenarios/e2-*.toml`): 15 Mbit/s CBR of 1400-byte packets over two paths
/// that run at 1 Gbit/s for 5 s and then drop to 10 Mbit/s; measured 2–5 s
/// after the drop and over the end state (the last 5 s of 20).
fn two_path_cbr(cc: &str) -> (Measured, Measured) {
    let mut h = harness(cc, 2, 1400);
    for s in &mut h.specs {
        s.rate_bps = Some(1_000_000_000);
    }
    let _ = run(&mut h, 1400, Some(15_000_000), Duration::ZERO, ms(5000));
    for s in &mut h.specs {
        s.rate_bps = Some(LINK_BPS);
    }
    let d = run(&mut h, 1400, Some(15_000_000), ms(2000), ms(3000));
    eprintln!("{cc} 2-5 s after the drop: {d:?}");
    let m = run(&mut h, 1400, Some(15_000_000), ms(5_000), ms(5000));
    eprintln!(
        "{cc} two paths, 15 Mbit/s CBR, CPF: {m:?} views {:?}",
        h.client.paths()
    );
    (d, m)
}

/// 1200-byte payloads in ≤1336-byte DCCP packets (+ 8 B UDP on a real
/// path, not modelled): 9.5 Mbit/s of payload is ~90 % of the link's
/// packet rate, which a rate-based controller must reach.
#[test]
fn ccid5_fills_a_single_backlogged_path_without_a_standing_queue() {
    let m = single_path("ccid5");
    assert!(
        m.delivered_mbps >= 9.5,
        "ccid5 delivered {:.2} Mbit/s of 10: {m:?}",
        m.delivered_mbps
    );
    // BBR keeps at most ~one BDP of queue: 10 ms base RTT + ~1 BDP.
    assert!(m.srtt_p95_ms[0] <= 35.0, "ccid5 RTT p95: {m:?}");
}

#[test]
fn ccid2_fills_a_single_backlogged_path() {
    let m = single_path("ccid2");
    assert!(
        m.delivered_mbps >= 9.5,
        "ccid2 delivered {:.2} Mbit/s of 10: {m:?}",
        m.delivered_mbps
    );
    // Loss-based: fills the drop-tail buffer (150 kB = 120 ms at 10 Mbit/s).
    assert!(m.srtt_p95_ms[0] > 35.0, "ccid2 RTT p95: {m:?}");
}

/// E2: CPF fills the primary path before spilling ~5 Mbit/s onto the
/// secondary. CCID5 must leave STARTUP soon after the drop (its samples are
/// not application limited while CPF spills for want of room on path 1), so
/// path 1 carries no multi-BDP standing queue 2 s later (CCID5 paper §3.3.1).
#[test]
fn ccid5_under_cpf_fills_path_one_first() {
    let (d, m) = two_path_cbr("ccid5");
    assert!(
        d.srtt_p95_ms[0] <= 35.0,
        "ccid5 path 1 RTT after the drop: {d:?}"
    );
    assert!(m.path_mbps[0] >= 9.3, "ccid5 path 1: {m:?}");
    assert!(m.delivered_mbps >= 14.0, "ccid5 total: {m:?}");
}

#[test]
fn ccid2_under_cpf_fills_path_one_first() {
    let (d, m) = two_path_cbr("ccid2");
    // Loss-based: path 1's buffer fills before CPF spills.
    assert!(
        d.srtt_p95_ms[0] > 35.0,
        "ccid2 path 1 RTT after the drop: {d:?}"
    );
    assert!(m.path_mbps[0] >= 9.3, "ccid2 path 1: {m:?}");
    assert!(m.delivered_mbps >= 14.0, "ccid2 total: {m:?}");
}
