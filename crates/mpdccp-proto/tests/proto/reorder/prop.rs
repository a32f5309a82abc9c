//! Property test: arbitrary push / pop / timeout sequences against every
//! reorder strategy never panic, never exceed the caps, keep `poll_timeout`
//! exact, and account for every packet: each unique sequence number pushed is
//! delivered exactly once, or (with `drop_late`) dropped and counted late.

use std::collections::BTreeSet;
use std::time::Duration;

use mpdccp_proto::reorder::{
    self, FastLoss, PathReceiveState, ReorderConfig, ReorderItem, ReorderKind,
};
use mpdccp_proto::{Instant, PathId, PathState, PathView};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Push {
        seq: u64,
        path: u32,
        len: usize,
        dt_us: u64,
        in_order: bool,
    },
    Pop {
        dt_us: u64,
    },
    Timeout {
        dt_us: u64,
    },
    /// A path's latency estimate changes (deadlines stop being monotone).
    SetOwd {
        path: usize,
        owd_ms: Option<u64>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..400, 0u32..3, 0usize..3000, 0u64..20_000, any::<bool>())
            .prop_map(|(seq, path, len, dt_us, in_order)| Op::Push { seq, path, len, dt_us, in_order }),
        1 => (0u64..50_000).prop_map(|dt_us| Op::Pop { dt_us }),
        2 => (0u64..200_000).prop_map(|dt_us| Op::Timeout { dt_us }),
        1 => (0usize..3, proptest::option::of(0u64..300))
            .prop_map(|(path, owd_ms)| Op::SetOwd { path, owd_ms }),
    ]
}

#[derive(Clone, Debug)]
struct Setup {
    kind: ReorderKind,
    max_pkts: usize,
    max_bytes: usize,
    timeout_ms: u64,
    initial_seq: Option<u64>,
    drop_late: bool,
    /// Small windows make old duplicates undecidable (dropped, counted late).
    dup_window: usize,
    fast_loss: FastLoss,
    owd_ms: [Option<u64>; 3],
    failed: [bool; 3],
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        0..ReorderKind::ALL.len(),
        1usize..32,
        1usize..20_000,
        1u64..100,
        proptest::option::of(0u64..50),
        any::<bool>(),
        prop_oneof![
            Just(FastLoss::Off),
            Just(FastLoss::Fifo),
            Just(FastLoss::Strict)
        ],
        proptest::array::uniform3(proptest::option::of(0u64..300)),
        proptest::array::uniform3(any::<bool>()),
        prop_oneof![Just(0usize), 1usize..600],
    )
        .prop_map(
            |(
                n,
                max_pkts,
                max_bytes,
                timeout_ms,
                initial_seq,
                drop_late,
                fast_loss,
                owd_ms,
                failed,
                dup_window,
            )| Setup {
                kind: ReorderKind::ALL[n],
                max_pkts,
                max_bytes,
                timeout_ms,
                initial_seq,
                drop_late,
                fast_loss,
                owd_ms,
                failed,
                dup_window,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn every_packet_accounted_for(s in setup(), ops in proptest::collection::vec(op(), 1..300)) {
        let config = ReorderConfig {
            kind: s.kind,
            timeout: Duration::from_millis(s.timeout_ms),
            max_hold_pkts: s.max_pkts,
            max_hold_bytes: s.max_bytes,
            initial_seq: s.initial_seq,
            drop_late: s.drop_late,
            dup_window: s.dup_window,
            fast_loss: s.fast_loss,
            ..ReorderConfig::default()
        };
        let mut r = reorder::build(&config);
        let mut paths: Vec<PathView> = (0..3)
            .map(|i| PathView {
                owd: s.owd_ms[i].map(Duration::from_millis),
                state: if s.failed[i] { PathState::Failed } else { PathState::Active },
                ..PathView::new(PathId(i as u32))
            })
            .collect();
        let mut rx: Vec<PathReceiveState> = (0..3)
            .map(|i| PathReceiveState { path: PathId(i), highest_seq: None, in_order: true })
            .collect();
        let mut now = Instant::ZERO;
        let mut pushed = 0u64;
        let mut unique = BTreeSet::new();
        let mut delivered = BTreeSet::new();
        let mut max_delivered: Option<u64> = None;
        let mut backwards = 0u64;
        let mut drain = |r: &mut dyn reorder::Reorder, now: Instant| -> Result<(), TestCaseError> {
            while let Some(d) = r.pop(now) {
                prop_assert!(delivered.insert(d.seq), "seq {} delivered twice", d.seq);
                prop_assert!(d.held <= now.saturating_duration_since(d.arrival));
                if max_delivered.is_some_and(|m| d.seq < m) {
                    backwards += 1;
                }
                max_delivered = Some(max_delivered.map_or(d.seq, |m| m.max(d.seq)));
            }
            Ok(())
        };
        for op in ops {
            match op {
                Op::Push { seq, path, len, dt_us, in_order } => {
                    now += Duration::from_micros(dt_us);
                    let p = &mut rx[path as usize];
                    p.highest_seq = Some(p.highest_seq.map_or(seq, |h| h.max(seq)));
                    p.in_order = in_order;
                    pushed += 1;
                    unique.insert(seq);
                    let item = ReorderItem { seq, path: PathId(path), arrival: now, payload: vec![0; len] };
                    r.push(now, item, &paths, &rx);
                }
                Op::Pop { dt_us } => now += Duration::from_micros(dt_us),
                Op::SetOwd { path, owd_ms } => {
                    paths[path].owd = owd_ms.map(Duration::from_millis);
                    continue;
                }
                Op::Timeout { dt_us } => {
                    now += Duration::from_micros(dt_us);
                    if r.poll_timeout().is_some_and(|t| t <= now) {
                        r.handle_timeout(now);
                    }
                }
            }
            let st = r.stats();
            prop_assert!(st.held_pkts as usize <= s.max_pkts, "{st:?}");
            prop_assert!(st.held_bytes as usize <= s.max_bytes, "{st:?}");
            if !matches!(op, Op::Pop { .. }) {
                // Deadlines due at `now` were handled: the next one is later.
                prop_assert!(r.poll_timeout().is_none_or(|t| t > now), "stale deadline");
            }
            drain(r.as_mut(), now)?;
        }
        // Let every deadline pass (caps keep them finite).
        now += Duration::from_secs(3600);
        r.handle_timeout(now);
        drain(r.as_mut(), now)?;
        let st = r.stats();
        prop_assert_eq!(st.held_pkts, 0);
        prop_assert_eq!(st.held_bytes, 0);
        prop_assert_eq!(r.poll_timeout(), None);
        prop_assert!(delivered.is_subset(&unique));
        let undelivered = (unique.len() - delivered.len()) as u64;
        prop_assert_eq!(st.received, pushed);
        prop_assert_eq!(st.delivered, delivered.len() as u64);
        // Every arrival was delivered, a duplicate, or dropped as late.
        prop_assert!(undelivered <= st.late, "{undelivered} undelivered, {st:?}");
        prop_assert!(st.received >= st.delivered + st.duplicates, "{st:?}");
        prop_assert!(st.received <= st.delivered + st.duplicates + st.late, "{st:?}");
        if !s.drop_late && s.dup_window == 0 {
            // The default window spans every seq used here: nothing is
            // undecidable, so each unique seq is delivered exactly once.
            prop_assert_eq!(undelivered, 0, "{:?}", st);
            prop_assert_eq!(st.received, st.delivered + st.duplicates, "{:?}", st);
        }
        prop_assert_eq!(st.overflow_drops, 0);
        if s.kind != ReorderKind::Passive {
            // MP_SEQ order, except packets arriving after their gap was given up.
            prop_assert!(backwards <= st.late, "{backwards} out of order, {st:?}");
        }
    }
}
