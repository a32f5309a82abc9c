//! Property test: every scheduler, fed arbitrary (even absurd) path views,
//! never panics and only ever picks paths it may use (usable, with room,
//! and never a standby path while a better one is usable).

use std::time::Duration;

use mpdccp_proto::path::priority;
use mpdccp_proto::sched::{self, PacketMeta, SchedulerConfig, SchedulerKind};
use mpdccp_proto::{Instant, PathId, PathState, PathView};
use proptest::prelude::*;

fn view() -> impl Strategy<Value = PathView> {
    (
        (
            0u8..4,
            0u8..16,
            any::<u32>(),
            0u32..64,
            any::<u32>(),
            0u32..64,
        ),
        (
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            any::<u64>(),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(0u64..2_000_000_000),
        ),
    )
        .prop_map(
            |(
                (state, prio, cwnd, cwnd_small, in_flight, queued),
                (srtt, min_rtt, rttvar, owd, pacing, next),
            )| {
                let d = |ns: u64| Duration::from_nanos(ns);
                PathView {
                    state: [
                        PathState::Establishing,
                        PathState::Active,
                        PathState::Failed,
                        PathState::Closed,
                    ][state as usize % 4],
                    priority: prio,
                    // Mostly small windows so that "full" happens often.
                    cwnd_pkts: if cwnd % 4 == 0 { cwnd } else { cwnd_small },
                    in_flight_pkts: if in_flight % 4 == 0 {
                        in_flight
                    } else {
                        in_flight % 64
                    },
                    queued_pkts: queued,
                    srtt: srtt.map(d),
                    min_rtt: min_rtt.map(d),
                    rttvar: d(rttvar),
                    owd: owd.map(d),
                    pacing_rate_bytes_per_s: pacing,
                    next_send_time: next.map(Instant::from_nanos),
                    ..PathView::new(PathId(0))
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decisions_use_only_usable_paths(
        kind in 0..SchedulerKind::ALL.len(),
        weights in proptest::collection::vec(any::<u32>(), 0..6),
        rounds in proptest::collection::vec(
            (proptest::collection::vec(view(), 0..8), 0u64..2_000_000_000, any::<usize>()),
            1..40,
        ),
    ) {
        let kind = SchedulerKind::ALL[kind];
        let name = kind.name();
        let config = SchedulerConfig { kind, weights, rr_burst: 3, ..SchedulerConfig::default() };
        let mut s = sched::build(&config);
        let mut out = Vec::new();
        for (mut paths, now_ns, queued) in rounds {
            for (i, p) in paths.iter_mut().enumerate() {
                p.id = PathId(i as u32 * 3);
            }
            let now = Instant::from_nanos(now_ns);
            let pkt = PacketMeta { len: 1200, queued_pkts: queued, queued_bytes: queued.saturating_mul(1200) , sparse: false};
            out.clear();
            s.select(now, &pkt, &paths, &mut out);
            let _ = s.poll_timeout();
            let mut seen = out.clone();
            seen.sort();
            seen.dedup();
            prop_assert_eq!(seen.len(), out.len(), "{} picked a path twice", name);
            if name != "redundant" {
                prop_assert!(out.len() <= 1);
            }
            // RFC 9897 MP_PRIO 1 = standby: only while nothing better is usable.
            let better_usable = paths
                .iter()
                .any(|p| p.is_usable() && p.priority > priority::STANDBY);
            for id in &out {
                let p = paths.iter().find(|p| p.id == *id);
                prop_assert!(p.is_some(), "{} picked unknown {:?}", name, id);
                let p = p.unwrap();
                prop_assert!(p.is_usable(), "{} picked unusable {:?}", name, p);
                prop_assert!(
                    !better_usable || p.priority > priority::STANDBY,
                    "{} picked standby {:?} while a better path was usable", name, p
                );
                if name != "otias" && name != "redundant" {
                    // Only OTIAS (by arrival estimate) and redundant (every
                    // copy goes out, waiting in the path's queue) queue onto
                    // a full path by design.
                    prop_assert!(p.can_send(now), "{} picked a full path {:?}", name, p);
                }
            }
            if name == "redundant" && !out.is_empty() {
                // A copy leaves at once on some path with room.
                prop_assert!(
                    out.iter().any(|id| paths.iter().any(|p| p.id == *id && p.can_send(now))),
                    "redundant sent while no chosen path had room"
                );
            }
        }
    }
}
