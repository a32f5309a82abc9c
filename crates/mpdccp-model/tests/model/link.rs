//! Property tests of the link model: random push/poll sequences on random
//! paths keep FIFO order, never exceed the buffer, never deliver early, and
//! account for every packet as delivered, dropped or still in the link.

use std::time::Duration;

use mpdccp_model::scenario::{DelayPoint, Direction, Outage, PathSpec, RatePoint, Trace};
use mpdccp_model::{Link, LinkDrop};
use mpdccp_proto::Instant;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Push { after_us: u64, len: usize },
    Poll { after_us: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..3_000, 1usize..3000).prop_map(|(after_us, len)| Op::Push { after_us, len }),
        (0u64..20_000).prop_map(|after_us| Op::Poll { after_us }),
    ]
}

fn path() -> impl Strategy<Value = PathSpec> {
    (
        0.0f64..30.0,                                           // delay_ms
        prop::collection::vec((1u64..200, 0.0f64..30.0), 0..4), // delay changes (gap ms, ms)
        1_000usize..40_000,                                     // buffer
        prop_oneof![Just(0.0), 0.0f64..0.3],                    // loss
        prop::collection::vec((1u64..200, prop_oneof![Just(0.0), 0.5f64..50.0]), 0..5), // rate changes
        0.5f64..50.0,                                            // first rate
        prop::collection::vec((1u64..300, 1u64..100), 0..3),     // outages (gap ms, length ms)
        prop::option::of(prop::collection::vec(0u64..5, 1..20)), // trace increments
    )
        .prop_map(
            |(delay_ms, delays, buffer_bytes, loss, rates, first, outages, trace)| {
                let mut t = 0;
                let delay = delays
                    .into_iter()
                    .map(|(gap, ms)| {
                        t += gap;
                        DelayPoint {
                            at_s: t as f64 / 1e3,
                            ms,
                        }
                    })
                    .collect();
                let mut t = 0;
                let mut rate = vec![RatePoint {
                    at_s: 0.0,
                    mbps: first,
                }];
                rate.extend(rates.into_iter().map(|(gap, mbps)| {
                    t += gap;
                    RatePoint {
                        at_s: t as f64 / 1e3,
                        mbps,
                    }
                }));
                let mut t = 0;
                let down = outages
                    .into_iter()
                    .map(|(gap, len)| {
                        t += gap;
                        let o = Outage {
                            from_s: t as f64 / 1e3,
                            to_s: (t + len) as f64 / 1e3,
                        };
                        t += len;
                        o
                    })
                    .collect();
                let mut spec = PathSpec {
                    name: "p".into(),
                    delay_ms,
                    delay,
                    buffer_bytes,
                    loss,
                    rate,
                    down,
                    ..PathSpec::default()
                };
                if let Some(incs) = trace {
                    let mut ms = 0;
                    let lines: String = incs
                        .iter()
                        .map(|i| {
                            ms += i;
                            format!("{}\n", ms.max(1))
                        })
                        .collect();
                    spec.trace_up = Some("t".into());
                    spec.set_trace(
                        Direction::Up,
                        Trace::parse(&lines).expect("non-decreasing, last > 0"),
                    );
                }
                spec
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fifo_buffer_bound_and_conservation(spec in path(), ops in prop::collection::vec(op(), 1..300), seed in any::<u64>()) {
        let mut link: Link<(u64, usize, Instant)> = Link::new(&spec, seed);
        let mut now = Instant::ZERO;
        let mut next_id = 0u64;
        let mut last_delivered: Option<u64> = None;
        let mut last_delivered_at = Instant::ZERO;
        let mut accepted = 0u64;
        let mut refused = 0u64;
        let mut delivered = 0u64;
        let check_delivery = |d: mpdccp_model::Delivery<(u64, usize, Instant)>, now: Instant, last: &mut Option<u64>, last_at: &mut Instant| {
            let (id, len, sent) = d.pkt;
            // FIFO: ids of delivered packets increase.
            prop_assert!(last.is_none_or(|l| id > l), "{id} after {last:?}");
            *last = Some(id);
            // Never early, never before it was sent, times consistent.
            prop_assert!(d.delivered_at <= now);
            prop_assert!(d.delivered_at >= *last_at);
            *last_at = d.delivered_at;
            prop_assert_eq!(d.sent_at, sent);
            prop_assert_eq!(d.len_bytes, len);
            prop_assert!(d.departed_at <= d.delivered_at);
            prop_assert!(sent + d.queue_delay <= d.departed_at);
            // Never delivered out of an outage that began while it was in the link.
            for o in &spec.down {
                let (from, to) = (Instant::from_secs_f64(o.from_s), Instant::from_secs_f64(o.to_s));
                prop_assert!(!(sent < from && d.delivered_at > from), "crossed an outage start");
                prop_assert!(!(from <= sent && sent < to), "accepted during an outage");
            }
            Ok(())
        };
        for op in ops {
            match op {
                Op::Push { after_us, len } => {
                    now += Duration::from_micros(after_us);
                    let id = next_id;
                    next_id += 1;
                    match link.push(now, (id, len, now), len) {
                        Ok(()) => accepted += 1,
                        Err(e) => {
                            refused += 1;
                            if e == LinkDrop::RandomLoss { prop_assert!(spec.loss > 0.0); }
                        }
                    }
                }
                Op::Poll { after_us } => {
                    now += Duration::from_micros(after_us);
                    while let Some(d) = link.poll_delivery(now) {
                        delivered += 1;
                        check_delivery(d, now, &mut last_delivered, &mut last_delivered_at)?;
                    }
                    // Nothing deliverable is left behind.
                    prop_assert!(link.next_event().is_none_or(|t| t > now));
                }
            }
            prop_assert!(link.queue_bytes() <= spec.buffer_bytes);
            let st = link.stats();
            prop_assert!(st.max_queue_bytes <= spec.buffer_bytes);
            prop_assert_eq!(st.pushed_pkts, accepted + refused);
            prop_assert_eq!(st.pushed_pkts, st.delivered_pkts + st.dropped_pkts() + link.in_flight_pkts() as u64);
            prop_assert_eq!(st.delivered_pkts, delivered);
            prop_assert!(link.queue_pkts() <= link.in_flight_pkts());
        }
        // Drain: following next_event delivers everything that can be delivered.
        let mut steps = 0;
        while let Some(t) = link.next_event() {
            steps += 1;
            prop_assert!(steps < 100_000);
            // The link's clock never goes back: an overdue event is handled at `now`.
            now = now.max(t);
            while let Some(d) = link.poll_delivery(now) {
                delivered += 1;
                check_delivery(d, now, &mut last_delivered, &mut last_delivered_at)?;
            }
        }
        let st = link.stats();
        prop_assert_eq!(st.delivered_pkts, delivered);
        // Only packets stuck behind a rate of zero forever may remain.
        let zero_forever = spec.trace_up.is_none() && spec.rate.last().is_some_and(|r| r.mbps == 0.0);
        if !zero_forever {
            prop_assert_eq!(link.in_flight_pkts(), 0);
        }
        prop_assert_eq!(st.pushed_pkts, st.delivered_pkts + st.dropped_pkts() + link.in_flight_pkts() as u64);
    }
}
