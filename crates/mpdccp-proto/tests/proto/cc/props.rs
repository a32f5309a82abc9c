//! Property tests: random sequences of sends, acks, losses, RTOs and idle
//! gaps (and random coupled views) pushed into every controller.
//! Invariants: the window stays within [min, max] configured packets, no
//! NaN or infinity reaches a snapshot, a pacing rate is positive when given,
//! the send quantum is at least one packet, and nothing panics.

use std::time::Duration;

use mpdccp_proto::cc::{self, AckEvent, CcConfig, CcSnapshot, LossEvent, RateSample, SentPacket};
use mpdccp_proto::{Instant, PathId};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Send {
        in_flight: u32,
        app_limited: bool,
    },
    Ack {
        acked: u32,
        in_flight: u32,
        rtt_us: u64,
        rate: Option<(u64, u64, u64, bool)>,
    },
    Loss {
        lost: u32,
        in_flight: u32,
        sent_ago_us: u64,
    },
    Rto,
    Ecn {
        ce: u32,
        in_flight: u32,
    },
    Idle {
        gap_ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..5000, any::<bool>()).prop_map(|(in_flight, app_limited)| Op::Send { in_flight, app_limited }),
        4 => (
            0u32..64,
            0u32..5000,
            1u64..2_000_000,
            proptest::option::of((0u64..10_000, 0u64..5_000_000, 0u64..100_000, any::<bool>()))
        )
            .prop_map(|(acked, in_flight, rtt_us, rate)| Op::Ack { acked, in_flight, rtt_us, rate }),
        1 => (0u32..100, 0u32..5000, 0u64..3_000_000)
            .prop_map(|(lost, in_flight, sent_ago_us)| Op::Loss { lost, in_flight, sent_ago_us }),
        1 => Just(Op::Rto),
        1 => (0u32..64, 0u32..5000).prop_map(|(ce, in_flight)| Op::Ecn { ce, in_flight }),
        1 => (0u64..20_000).prop_map(|gap_ms| Op::Idle { gap_ms }),
    ]
}

fn other_paths() -> impl Strategy<Value = Vec<CcSnapshot>> {
    proptest::collection::vec(
        (
            0.0f64..1e6,
            0u64..2_000_000,
            any::<bool>(),
            0.0f64..1e7,
            0.0f64..1e7,
            0.0f64..1e6,
        )
            .prop_map(|(cwnd, srtt_us, established, l1, l2, vreno)| CcSnapshot {
                path: PathId(7),
                cwnd_pkts: cwnd,
                srtt: Duration::from_micros(srtt_us),
                established,
                olia_l1_pkts: l1,
                olia_l2_pkts: l2,
                virtual_reno_cwnd_pkts: vreno,
                virtual_reno_is_cubic: l1 > l2,
            }),
        0..4,
    )
}

fn check(c: &dyn cc::CongestionController, config: &CcConfig) -> Result<(), TestCaseError> {
    let w = c.cwnd_pkts();
    prop_assert!(
        w >= config.min_cwnd_pkts.max(1),
        "{}: cwnd {w} below floor",
        c.name()
    );
    prop_assert!(
        w <= config.max_cwnd_pkts.max(4),
        "{}: cwnd {w} above max",
        c.name()
    );
    if let Some(rate) = c.pacing_rate_bytes_per_s() {
        prop_assert!(rate > 0, "{}: pacing rate 0", c.name());
    }
    prop_assert!(c.send_quantum_pkts() >= 1);
    prop_assert!(!c.state().is_empty());
    let s = c.snapshot(PathId(0), Duration::from_millis(10), true);
    prop_assert!(
        s.cwnd_pkts.is_finite() && s.cwnd_pkts >= 0.0,
        "{}: {s:?}",
        c.name()
    );
    prop_assert!(s.virtual_reno_cwnd_pkts.is_finite(), "{}: {s:?}", c.name());
    prop_assert!(s.olia_l1_pkts.is_finite() && s.olia_l2_pkts.is_finite());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn controllers_keep_their_invariants(
        ops in proptest::collection::vec(op(), 1..300),
        others in other_paths(),
        min_cwnd in 1u32..5,
        iw in proptest::option::of(1u32..100),
        mss in 1u32..70_000,
        seed in any::<u64>(),
        pacing in any::<bool>(),
    ) {
        let config = CcConfig {
            mss_bytes: mss,
            initial_cwnd_pkts: iw,
            min_cwnd_pkts: min_cwnd,
            max_cwnd_pkts: 100_000,
            seed,
            pacing,
            ..CcConfig::default()
        };
        for name in cc::CcKind::valid_names() {
            let mut c = build_cc(name, &config).unwrap();
            let mut now = Instant::from_millis(1);
            let mut seq = 0u64;
            let mut delivered = 0u64;
            check(c.as_ref(), &config)?;
            for op in &ops {
                now += Duration::from_micros(50);
                let mut view = vec![c.snapshot(PathId(0), Duration::from_millis(10), true)];
                view.extend_from_slice(&others);
                match *op {
                    Op::Send { in_flight, app_limited } => {
                        seq += 1;
                        c.on_packet_sent(now, &SentPacket { seq, bytes: mss, in_flight_pkts: in_flight, app_limited });
                    }
                    Op::Ack { acked, in_flight, rtt_us, rate } => {
                        delivered += acked as u64;
                        let rtt = Duration::from_micros(rtt_us);
                        c.on_ack(now, &AckEvent {
                            acked_pkts: acked,
                            acked_bytes: acked as u64 * mss as u64,
                            prior_in_flight_pkts: in_flight.saturating_add(acked),
                            in_flight_pkts: in_flight,
                            rtt: Some(rtt),
                            srtt: rtt,
                            min_rtt: rtt / 2,
                            rate: rate.map(|(pkts, interval_us, prior, app)| RateSample {
                                delivered_pkts: pkts,
                                delivered_bytes: pkts * mss as u64,
                                interval: Duration::from_micros(interval_us),
                                prior_delivered_pkts: prior,
                                is_app_limited: app,
                                rtt,
                            }),
                            delivered_pkts: delivered,
                            lost_pkts_total: 0,
                            largest_acked_sent_time: now.saturating_sub(rtt),
                        }, &view);
                    }
                    Op::Loss { lost, in_flight, sent_ago_us } => {
                        c.on_loss(now, &LossEvent {
                            lost_pkts: lost,
                            lost_bytes: lost as u64 * mss as u64,
                            in_flight_pkts: in_flight,
                            largest_lost_sent_time: now.saturating_sub(Duration::from_micros(sent_ago_us)),
                            delivered_pkts: delivered,
                        }, &view);
                    }
                    Op::Rto => c.on_rto(now),
                    Op::Ecn { ce, in_flight } => {
                        let rtt = Duration::from_millis(30);
                        c.on_ecn(now, ce, &AckEvent {
                            acked_pkts: ce,
                            acked_bytes: ce as u64 * mss as u64,
                            prior_in_flight_pkts: in_flight.saturating_add(ce),
                            in_flight_pkts: in_flight,
                            rtt: Some(rtt),
                            srtt: rtt,
                            min_rtt: rtt,
                            rate: None,
                            delivered_pkts: delivered,
                            lost_pkts_total: 0,
                            largest_acked_sent_time: now.saturating_sub(rtt),
                        }, &view);
                    }
                    Op::Idle { gap_ms } => now += Duration::from_millis(gap_ms),
                }
                check(c.as_ref(), &config)?;
            }
        }
    }
}

/// Same events, same seed ⇒ same decisions (no clocks, no OS randomness).
#[test]
fn controllers_are_deterministic() {
    for name in cc::CcKind::valid_names() {
        let run = || {
            let mut c = build_cc(
                name,
                &CcConfig {
                    seed: 5,
                    ..CcConfig::default()
                },
            )
            .unwrap();
            let mut out = Vec::new();
            for i in 0..2000u64 {
                let now = Instant::from_millis(i);
                c.on_packet_sent(
                    now,
                    &SentPacket {
                        seq: i,
                        bytes: 1400,
                        in_flight_pkts: c.cwnd_pkts(),
                        app_limited: false,
                    },
                );
                let rtt = Duration::from_millis(20 + i % 7);
                c.on_ack(
                    now,
                    &AckEvent {
                        acked_pkts: 1,
                        acked_bytes: 1400,
                        prior_in_flight_pkts: c.cwnd_pkts(),
                        in_flight_pkts: c.cwnd_pkts() - 1,
                        rtt: Some(rtt),
                        srtt: rtt,
                        min_rtt: Duration::from_millis(20),
                        rate: Some(RateSample {
                            delivered_pkts: 10,
                            delivered_bytes: 14_000,
                            interval: Duration::from_millis(20),
                            prior_delivered_pkts: i.saturating_sub(10),
                            is_app_limited: false,
                            rtt,
                        }),
                        delivered_pkts: i,
                        lost_pkts_total: 0,
                        largest_acked_sent_time: now.saturating_sub(rtt),
                    },
                    &[],
                );
                out.push((c.cwnd_pkts(), c.pacing_rate_bytes_per_s(), c.state()));
            }
            out
        };
        assert_eq!(run(), run(), "{name}");
    }
}

/// The controller called `name` (names parse into [`cc::CcKind`], the
/// factory of the built-in controllers).
fn build_cc(
    name: &str,
    config: &CcConfig,
) -> Result<Box<dyn cc::CongestionController>, mpdccp_proto::UnknownName> {
    use mpdccp_proto::cc::ControllerFactory;
    Ok(name.parse::<cc::CcKind>()?.build(config))
}
