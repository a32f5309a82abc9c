//! RTT sampling end to end: over a path whose one-way delay is `d` in each
//! direction, no sample can be shorter than `2d` — whatever the loss,
//! reordering, Ack Ratio, held acks, Elapsed Time options (RFC 4340 §13.2),
//! or a forged Elapsed Time. The harness clock is exact, so the bound is
//! exact: the tolerance is zero.
//!
//! Oracles: `min_rtt >= 2d` (and close to it: the estimator does see the
//! path), `min_rtt <= srtt`, and `srtt` no larger than `2d` plus the worst
//! queueing, ack hold and reordering delay the scenario can add.

use std::time::Duration;

use mpdccp_proto::conn::AckConfig;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, PathId};
use rand::{Rng, SeedableRng};

const MS: Duration = Duration::from_millis(1);

struct Scenario {
    cc: &'static str,
    delay: Duration,
    rate_bps: Option<u64>,
    buffer_bytes: usize,
    loss: f64,
    reorder: f64,
    reorder_delay: Duration,
    ack_ratio: u32,
    /// Application packets per millisecond each way (client, server);
    /// a value below 1 is a probability per millisecond.
    load_pkts_per_ms: (f64, f64),
    run: Duration,
    seed: u64,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            cc: "ccid2",
            delay: 5 * MS,
            rate_bps: None,
            buffer_bytes: 1_000_000,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: 4 * MS,
            ack_ratio: 2,
            load_pkts_per_ms: (1.0, 0.0),
            run: Duration::from_secs(2),
            seed: 1,
        }
    }
}

impl Scenario {
    fn harness(&self) -> Harness {
        let conn = ConnectionConfig {
            cc: self.cc.parse().unwrap(),
            ack: AckConfig {
                ratio: self.ack_ratio,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut h = Harness::new(HarnessConfig {
            client: conn.clone(),
            server: conn,
            paths: vec![LinkSpec {
                delay: self.delay,
                rate_bps: self.rate_bps,
                buffer_bytes: self.buffer_bytes,
                loss: self.loss,
                reorder: self.reorder,
                reorder_delay: self.reorder_delay,
                ..Default::default()
            }],
            seed: self.seed,
        });
        h.open_path(0);
        assert!(
            h.drive_until_pred(Duration::from_secs(5), |h| h.client.is_established()
                && h.server.is_established()),
            "handshake"
        );
        h
    }

    /// Runs the load; calls `check` on the harness every millisecond.
    fn drive(&self, h: &mut Harness, mut check: impl FnMut(&Harness)) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ 0x7777);
        let end = h.now + self.run;
        let mut k = 0u32;
        while h.now < end {
            for (side, rate) in [
                (Side::Client, self.load_pkts_per_ms.0),
                (Side::Server, self.load_pkts_per_ms.1),
            ] {
                let mut n = rate.floor() as u32;
                if rng.gen::<f64>() < rate.fract() {
                    n += 1;
                }
                for _ in 0..n {
                    let mut p = vec![0u8; 1000];
                    p[..4].copy_from_slice(&k.to_be_bytes());
                    k += 1;
                    let now = h.now;
                    // A full send queue just drops: the load is open loop.
                    let _ = h.conn(side).send(now, &p);
                }
            }
            h.drive_for(MS);
            check(h);
        }
    }

    /// Worst extra delay over 2d any sample may carry: a full buffer, the
    /// ack timer (10 ms default) or Ack Ratio wait, a held-back packet,
    /// serialisation, plus one smoothing margin.
    fn srtt_ceiling(&self) -> Duration {
        let queue = self.rate_bps.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(self.buffer_bytes as f64 * 8.0 / r as f64)
        });
        2 * self.delay + queue + 10 * MS + self.reorder_delay + 5 * MS
    }
}

/// The invariants every sample must keep, checked on one side's path 0.
fn assert_sane(h: &Harness, side: Side, sc: &Scenario, what: &str) {
    let v = &h.conn_ref(side).paths()[0];
    let floor = 2 * sc.delay;
    if let Some(min) = v.min_rtt {
        assert!(min >= floor, "{what}: min_rtt {min:?} < 2d = {floor:?}");
        let srtt = v.srtt.expect("srtt with min_rtt");
        assert!(srtt >= min, "{what}: srtt {srtt:?} < min_rtt {min:?}");
        assert!(
            srtt <= sc.srtt_ceiling(),
            "{what}: srtt {srtt:?} > {:?}",
            sc.srtt_ceiling()
        );
    }
}

fn run_checked(sc: &Scenario, what: &str) -> Harness {
    let mut h = sc.harness();
    sc.drive(&mut h, |h| {
        assert_sane(h, Side::Client, sc, what);
        assert_sane(h, Side::Server, sc, what);
    });
    let v = &h.client.paths()[0];
    let stats = h.client.path_stats(PathId(0)).expect("path 0");
    assert!(stats.rtt_samples > 50, "{what}: {stats:?}");
    // The estimator also sees the path: some packet crosses an empty queue
    // and is acknowledged at once.
    let min = v.min_rtt.expect("samples");
    assert!(
        min <= 2 * sc.delay + 3 * MS,
        "{what}: min_rtt {min:?} far above 2d"
    );
    h
}

#[test]
fn no_sample_below_the_path_round_trip_ccid2_and_ccid5() {
    // A seeded family: delays, loss, reordering, Ack Ratio, bottleneck and
    // a reverse data stream (acks piggybacked on data) vary by seed.
    for cc in ["ccid2", "ccid5"] {
        for seed in 1..=4u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let sc = Scenario {
                cc,
                delay: [2, 5, 20][rng.gen_range(0..3)] * MS,
                rate_bps: rng.gen_bool(0.5).then_some(20_000_000),
                buffer_bytes: 40_000,
                loss: [0.0, 0.01, 0.03][rng.gen_range(0..3)],
                reorder: [0.0, 0.02, 0.1][rng.gen_range(0..3)],
                reorder_delay: rng.gen_range(1..8) * MS,
                ack_ratio: [1, 2, 4, 8][rng.gen_range(0..4)],
                load_pkts_per_ms: (3.0, [0.0, 0.3][rng.gen_range(0..2)]),
                seed,
                ..Default::default()
            };
            let what = format!(
                "{cc} seed {seed}: d {:?} rate {:?} loss {} reorder {}/{:?} ratio {}",
                sc.delay, sc.rate_bps, sc.loss, sc.reorder, sc.reorder_delay, sc.ack_ratio
            );
            let h = run_checked(&sc, &what);
            let delivered = h.delivered(Side::Server).len();
            // Even CCID2 at 3 % loss and 40 ms (Mathis: ~170 pkts/s).
            assert!(delivered > 200, "{what}: {delivered} delivered");
        }
    }
}

#[test]
fn held_acks_carry_elapsed_time_and_srtt_tracks_the_path() {
    // One packet every 25 ms with Ack Ratio 2: every ack waits for the
    // 10 ms ack timer. Without Elapsed Time SRTT would sit near 2d + 10 ms.
    for cc in ["ccid2", "ccid5"] {
        let sc = Scenario {
            cc,
            delay: 5 * MS,
            ack_ratio: 2,
            load_pkts_per_ms: (0.04, 0.0),
            run: Duration::from_secs(3),
            ..Default::default()
        };
        let mut h = sc.harness();
        h.record = true;
        sc.drive(&mut h, |h| assert_sane(h, Side::Client, &sc, cc));
        let held: Vec<u32> = h
            .wire
            .iter()
            .filter(|w| w.from == Side::Server)
            .filter_map(|w| inspect::elapsed_time(&w.bytes))
            .collect();
        assert!(
            held.len() > 50,
            "{cc}: {} acks with Elapsed Time",
            held.len()
        );
        // Held by the 10 ms ack timer (1000 units of 10 µs), or less when
        // a second packet came meanwhile and started the count earlier.
        let at_timer = held.iter().filter(|&&e| (990..=1000).contains(&e)).count();
        assert!(
            held.iter().all(|&e| (100..=1000).contains(&e)) && at_timer * 4 > held.len() * 3,
            "{cc}: {held:?}"
        );
        let v = &h.client.paths()[0];
        let stats = h.client.path_stats(PathId(0)).unwrap();
        assert!(stats.rtt_ack_delay_used > 50, "{cc}: {stats:?}");
        assert_eq!(stats.rtt_ack_delay_ignored, 0, "{cc}: {stats:?}");
        let srtt = v.srtt.unwrap();
        assert!(
            srtt >= 10 * MS && srtt <= 11 * MS,
            "{cc}: srtt {srtt:?} should be the path's 10 ms"
        );
    }
}

#[test]
fn forged_elapsed_time_cannot_pull_the_rtt_below_the_path() {
    // Every server→client packet with an ack gets a forged Elapsed Time:
    // zero, just below the raw sample, far beyond it, and the 32-bit
    // maximum (11.9 hours). The estimate must stay >= 2d; values that
    // would break it are counted and ignored.
    for (forged, expect_ignored) in [
        (0u32, false),
        (900, false),
        (1_500, true),
        (65_535, true),
        (u32::MAX, true),
    ] {
        for load in [0.04, 2.0] {
            let sc = Scenario {
                delay: 5 * MS,
                ack_ratio: 2,
                load_pkts_per_ms: (load, 0.0),
                ..Default::default()
            };
            let what = format!("forged {forged} load {load}");
            let mut h = sc.harness();
            h.tamper = Some(Box::new(move |side, path, bytes| {
                if side == Side::Server && inspect::set_elapsed_time(bytes, forged) {
                    let (c, s) = Harness::path_addrs(path.0 as usize);
                    inspect::fix_checksum(bytes, s.ip(), c.ip());
                }
                true
            }));
            sc.drive(&mut h, |h| assert_sane(h, Side::Client, &sc, &what));
            let v = &h.client.paths()[0];
            let stats = h.client.path_stats(PathId(0)).unwrap();
            assert!(stats.rtt_samples > 50, "{what}: {stats:?}");
            assert!(v.min_rtt.unwrap() >= 10 * MS, "{what}");
            if expect_ignored {
                assert!(
                    stats.rtt_ack_delay_ignored > stats.rtt_samples / 2,
                    "{what}: {stats:?}"
                );
            }
            // Traffic flows regardless.
            assert!(h.delivered(Side::Server).len() > 50, "{what}");
        }
    }
}

#[test]
fn each_subflow_samples_only_its_own_packets() {
    // Two paths, 5 ms and 30 ms one way, round-robin so both carry data
    // at once, with loss and reordering: if an ack were matched against
    // the other subflow's send times, the fast path would see a slow
    // sample or the slow path a fast one.
    for cc in ["ccid2", "ccid5"] {
        let mut conn = ConnectionConfig {
            cc: cc.parse().unwrap(),
            ack: AckConfig {
                ratio: 2,
                ..Default::default()
            },
            ..Default::default()
        };
        conn.scheduler.kind = "rr".parse().unwrap();
        let delays = [5 * MS, 30 * MS];
        let mut h = Harness::new(HarnessConfig {
            client: conn.clone(),
            server: conn,
            paths: delays
                .iter()
                .map(|&delay| LinkSpec {
                    delay,
                    rate_bps: Some(20_000_000),
                    buffer_bytes: 40_000,
                    loss: 0.01,
                    reorder: 0.05,
                    reorder_delay: 3 * MS,
                    ..Default::default()
                })
                .collect(),
            seed: 9,
        });
        h.open_path(0);
        h.drive_for(100 * MS);
        h.open_path(1);
        h.drive_for(300 * MS);
        assert_eq!(h.client.paths().len(), 2, "{cc}");
        for k in 0..2000u32 {
            for side in [Side::Client, Side::Server] {
                let mut p = vec![0u8; 1000];
                p[..4].copy_from_slice(&k.to_be_bytes());
                let now = h.now;
                let _ = h.conn(side).send(now, &p);
            }
            h.drive_for(MS);
            for side in [Side::Client, Side::Server] {
                for (i, v) in h.conn_ref(side).paths().iter().enumerate() {
                    let floor = 2 * delays[i];
                    if let (Some(min), Some(srtt)) = (v.min_rtt, v.srtt) {
                        assert!(min >= floor, "{cc} {side:?} path {i}: min {min:?}");
                        assert!(srtt >= min, "{cc} {side:?} path {i}: srtt {srtt:?}");
                        // Queue (16 ms) + ack timer + reordering + margin.
                        assert!(
                            srtt <= floor + 35 * MS,
                            "{cc} {side:?} path {i}: srtt {srtt:?}"
                        );
                    }
                }
            }
        }
        for side in [Side::Client, Side::Server] {
            for i in 0..2u32 {
                let st = h.conn_ref(side).path_stats(PathId(i)).unwrap();
                assert!(st.rtt_samples > 50, "{cc} {side:?} path {i}: {st:?}");
            }
        }
    }
}
