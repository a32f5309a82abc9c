//! Every reorder strategy with scripted arrivals.

use std::time::Duration;

use crate::common::views;
use mpdccp_proto::reorder::{
    self, Delivered, FastLoss, PathReceiveState, Reorder, ReorderConfig, ReorderItem, ReorderKind,
};
use mpdccp_proto::{Instant, PathId, PathState, PathView};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
fn at(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn build(name: &str, f: impl FnOnce(&mut ReorderConfig)) -> Box<dyn Reorder> {
    let mut c = ReorderConfig::from(name.parse::<ReorderKind>().unwrap());
    c.initial_seq = Some(0);
    f(&mut c);
    reorder::build(&c)
}

fn item(seq: u64, path: u32, now: Instant) -> ReorderItem {
    ReorderItem {
        seq,
        path: PathId(path),
        arrival: now,
        payload: vec![seq as u8; 100],
    }
}

fn push(r: &mut dyn Reorder, now: Instant, seq: u64, path: u32, paths: &[PathView]) {
    r.push(now, item(seq, path, now), paths, &[]);
}

fn drain(r: &mut dyn Reorder, now: Instant) -> Vec<Delivered> {
    std::iter::from_fn(|| r.pop(now)).collect()
}

fn seqs(d: &[Delivered]) -> Vec<u64> {
    d.iter().map(|d| d.seq).collect()
}

#[test]
fn passive_delivers_in_arrival_order_and_drops_duplicates() {
    let mut r = build("passive", |_| {});
    for (t, s) in [(0, 0), (1, 2), (2, 1), (3, 2), (4, 3)] {
        push(r.as_mut(), at(t), s, 0, &[]);
    }
    let d = drain(r.as_mut(), at(5));
    assert_eq!(seqs(&d), [0, 2, 1, 3]);
    assert_eq!(
        d.iter().map(|d| d.after_gap).collect::<Vec<_>>(),
        [false, true, true, false]
    );
    assert!(d.iter().all(|d| d.held.is_zero()));
    let st = r.stats();
    assert_eq!((st.received, st.delivered, st.duplicates), (5, 4, 1));
    assert_eq!(r.poll_timeout(), None);
}

/// Two paths 50 ms apart in one-way delay, packets alternate between them
/// every millisecond; the event loop honours `poll_timeout`.
fn run_two_paths(r: &mut dyn Reorder, lost: &[u64], n: u64) -> (Vec<Delivered>, Vec<Instant>) {
    run_two_paths_seen_as(r, lost, n, [10, 60], [10, 60])
}

/// As [`run_two_paths`], with the one-way delays the packets really take
/// (`actual_ms`) and those the receiver's path estimates show
/// (`estimated_ms`).
fn run_two_paths_seen_as(
    r: &mut dyn Reorder,
    lost: &[u64],
    n: u64,
    estimated_ms: [u64; 2],
    actual_ms: [u64; 2],
) -> (Vec<Delivered>, Vec<Instant>) {
    let paths = views(&estimated_ms);
    let mut arrivals: Vec<(Instant, u64, u32)> = (0..n)
        .filter(|s| !lost.contains(s))
        .map(|s| {
            let p = (s % 2) as u32;
            (at(s) + ms(actual_ms[p as usize]), s, p)
        })
        .collect();
    arrivals.sort();
    let mut out = Vec::new();
    let mut times = Vec::new();
    let mut i = 0;
    loop {
        let next_arrival = arrivals.get(i).map(|a| a.0);
        let next_timer = r.poll_timeout();
        let now = match (next_arrival, next_timer) {
            (None, None) => break,
            (a, t) => a.unwrap_or(Instant::MAX).min(t.unwrap_or(Instant::MAX)),
        };
        if next_timer.is_some_and(|t| t <= now) {
            r.handle_timeout(now);
        }
        if next_arrival == Some(now) {
            let (t, s, p) = arrivals[i];
            r.push(t, item(s, p, t), &paths, &[]);
            i += 1;
        }
        for d in std::iter::from_fn(|| r.pop(now)) {
            out.push(d);
            times.push(now);
        }
    }
    (out, times)
}

#[test]
fn active_strategies_deliver_in_order_when_paths_differ_by_50ms() {
    for name in [
        "active-fixed",
        "active-adaptive",
        "equalized",
        "delay-equalization",
    ] {
        let mut r = build(name, |c| c.timeout = ms(60));
        let (d, _) = run_two_paths(r.as_mut(), &[], 200);
        assert_eq!(seqs(&d), (0..200).collect::<Vec<_>>(), "{name}");
        assert!(d.iter().all(|d| !d.after_gap), "{name}");
        let st = r.stats();
        assert_eq!(
            st.gaps_timed_out + st.gaps_fast_lost + st.late,
            0,
            "{name}: {st:?}"
        );
        assert_eq!(st.held_pkts, 0);
    }
    // Passive, for contrast, reorders.
    let mut r = build("passive", |_| {});
    let (d, _) = run_two_paths(r.as_mut(), &[], 200);
    assert_ne!(seqs(&d), (0..200).collect::<Vec<_>>());
}

#[test]
fn delay_equalization_holds_the_fast_path_by_the_delay_difference() {
    let mut r = build("delay-equalization", |_| {});
    let (d, times) = run_two_paths(r.as_mut(), &[], 20);
    for (d, t) in d.iter().zip(&times) {
        // Every packet leaves 60 ms after it was sent (at `seq` ms).
        assert_eq!(*t, at(d.seq) + ms(60), "seq {}", d.seq);
        let expected_hold = if d.path == PathId(0) {
            ms(50)
        } else {
            Duration::ZERO
        };
        assert_eq!(d.held, expected_hold);
    }
}

#[test]
fn fixed_timeout_gives_up_on_a_lost_packet_exactly_at_its_deadline() {
    let mut r = build("active-fixed", |c| {
        c.timeout = ms(50);
        c.fast_loss = FastLoss::Off;
    });
    push(r.as_mut(), at(0), 0, 0, &[]);
    assert_eq!(seqs(&drain(r.as_mut(), at(0))), [0]);
    // 1 is lost; 2 arrives at 10 ms, 3 at 12 ms.
    push(r.as_mut(), at(10), 2, 0, &[]);
    push(r.as_mut(), at(12), 3, 0, &[]);
    assert!(drain(r.as_mut(), at(12)).is_empty());
    assert_eq!(r.poll_timeout(), Some(at(60)), "deadline of packet 2");
    r.handle_timeout(at(60) - Duration::from_nanos(1));
    assert!(drain(r.as_mut(), at(60) - Duration::from_nanos(1)).is_empty());
    r.handle_timeout(at(60));
    let d = drain(r.as_mut(), at(60));
    assert_eq!(seqs(&d), [2, 3]);
    assert!(d[0].after_gap && !d[1].after_gap);
    assert_eq!(d[0].held, ms(50));
    assert_eq!(d[1].held, ms(48));
    let st = r.stats();
    assert_eq!((st.gaps_timed_out, st.held_pkts, st.held_bytes), (1, 0, 0));
    assert_eq!(r.poll_timeout(), None);
    // The lost packet shows up after all: late, delivered once, out of order.
    push(r.as_mut(), at(70), 1, 0, &[]);
    let d = drain(r.as_mut(), at(70));
    assert_eq!(seqs(&d), [1]);
    assert!(d[0].after_gap);
    push(r.as_mut(), at(71), 1, 0, &[]);
    assert!(drain(r.as_mut(), at(71)).is_empty());
    let st = r.stats();
    assert_eq!((st.late, st.duplicates, st.delivered), (1, 1, 4));
}

#[test]
fn late_packets_can_be_dropped_instead() {
    let mut r = build("active-fixed", |c| {
        c.timeout = ms(50);
        c.drop_late = true;
        c.fast_loss = FastLoss::Off;
    });
    push(r.as_mut(), at(0), 1, 0, &[]);
    r.handle_timeout(at(50));
    assert_eq!(seqs(&drain(r.as_mut(), at(50))), [1]);
    push(r.as_mut(), at(60), 0, 0, &[]);
    assert!(drain(r.as_mut(), at(60)).is_empty());
    assert_eq!(r.stats().late, 1);
}

#[test]
fn adaptive_and_equalized_timeouts_follow_path_latency() {
    let paths = views(&[10, 60]);
    // adaptive: 60 − 10 + 5 ms offset, whatever path the packet came on.
    for path in [0, 1] {
        let mut r = build("active-adaptive", |c| c.fast_loss = FastLoss::Off);
        push(r.as_mut(), at(100), 1, path, &paths);
        assert_eq!(r.poll_timeout(), Some(at(155)));
    }
    // equalized: per arrival path, slowest minus this path's, plus offset.
    for (path, deadline) in [(0, 155), (1, 105)] {
        let mut r = build("equalized", |c| c.fast_loss = FastLoss::Off);
        push(r.as_mut(), at(100), 1, path, &paths);
        assert_eq!(r.poll_timeout(), Some(at(deadline)));
    }
    // The cap: a 2 s path against a 10 ms one is held at most max_timeout.
    let far = views(&[10, 2000]);
    let mut r = build("active-adaptive", |c| {
        c.max_timeout = ms(300);
        c.fast_loss = FastLoss::Off;
    });
    push(r.as_mut(), at(0), 1, 0, &far);
    assert_eq!(r.poll_timeout(), Some(at(300)));
    // No offset, explicit.
    let mut r = build("active-adaptive", |c| {
        c.no_offset = true;
        c.fast_loss = FastLoss::Off;
    });
    push(r.as_mut(), at(0), 1, 0, &paths);
    assert_eq!(r.poll_timeout(), Some(at(50)));
    // No latency known yet: the fixed timeout.
    let mut r = build("active-adaptive", |c| {
        c.timeout = ms(33);
        c.fast_loss = FastLoss::Off;
    });
    push(r.as_mut(), at(0), 1, 0, &[]);
    assert_eq!(r.poll_timeout(), Some(at(33)));
    // A failed path's latency does not count.
    let mut failed = views(&[10, 60]);
    failed[1].state = PathState::Failed;
    let mut r = build("active-adaptive", |c| c.fast_loss = FastLoss::Off);
    push(r.as_mut(), at(0), 1, 0, &failed);
    assert_eq!(r.poll_timeout(), Some(at(5)));
}

#[test]
fn duplicates_from_redundant_paths_are_delivered_once() {
    for name in ReorderKind::ALL.iter().map(|k| k.name()) {
        let mut r = build(name, |c| c.timeout = ms(100));
        let paths = views(&[10, 30]);
        let mut got = Vec::new();
        // Every seq on both paths; path 1 copies arrive 20 ms later.
        for s in 0..50u64 {
            push(r.as_mut(), at(s), s, 0, &paths);
            got.extend(drain(r.as_mut(), at(s)));
        }
        for s in 0..50u64 {
            push(r.as_mut(), at(s + 20), s, 1, &paths);
            r.handle_timeout(at(s + 20));
            got.extend(drain(r.as_mut(), at(s + 20)));
        }
        r.handle_timeout(at(1000));
        got.extend(drain(r.as_mut(), at(1000)));
        assert_eq!(seqs(&got), (0..50).collect::<Vec<_>>(), "{name}");
        assert_eq!(r.stats().duplicates, 50, "{name}");
    }
}

#[test]
fn overflow_forces_delivery_and_is_counted() {
    let mut r = build("active-fixed", |c| {
        c.max_hold_pkts = 4;
        c.timeout = Duration::from_secs(10);
        c.fast_loss = FastLoss::Off;
    });
    // 0 is missing; 1..=4 fill the buffer.
    for s in 1..=4 {
        push(r.as_mut(), at(s), s, 0, &[]);
        assert!(drain(r.as_mut(), at(s)).is_empty());
    }
    assert_eq!(r.stats().held_pkts, 4);
    // 6: one too many — the oldest gap is given up, 1..=4 released in order.
    push(r.as_mut(), at(6), 6, 0, &[]);
    let d = drain(r.as_mut(), at(6));
    assert_eq!(seqs(&d), [1, 2, 3, 4]);
    let st = r.stats();
    assert_eq!(
        (st.overflow_releases, st.gaps_overflow, st.held_pkts),
        (1, 1, 1)
    );
    assert_eq!(st.gaps_timed_out, 0);
    // Byte cap: 250 bytes, 100-byte packets → at most 2 held.
    let mut r = build("active-fixed", |c| {
        c.max_hold_bytes = 250;
        c.timeout = Duration::from_secs(10);
        c.fast_loss = FastLoss::Off;
    });
    for s in 1..=3 {
        push(r.as_mut(), at(s), s * 2, 0, &[]);
        assert!(r.stats().held_bytes <= 250);
    }
    let st = r.stats();
    assert_eq!((st.overflow_releases, st.held_pkts), (1, 2));
    assert_eq!(seqs(&drain(r.as_mut(), at(3))), [2]);
}

#[test]
fn fast_loss_when_every_active_path_has_delivered_beyond_the_gap() {
    let paths = views(&[10, 60]);
    let mut r = build("active-fixed", |c| c.timeout = ms(500));
    // 0 on path 0, 1 on path 1, 2 lost (was on path 0), 3 on path 1, 4 on path 0.
    push(r.as_mut(), at(0), 0, 0, &paths);
    push(r.as_mut(), at(1), 1, 1, &paths);
    push(r.as_mut(), at(2), 3, 1, &paths);
    // Path 0 has delivered only 0 so far: 2 may still come on it.
    assert_eq!(seqs(&drain(r.as_mut(), at(2))), [0, 1]);
    assert_eq!(r.stats().held_pkts, 1);
    push(r.as_mut(), at(3), 4, 0, &paths);
    // Both paths are past 2: it is lost, no need to wait 500 ms.
    let d = drain(r.as_mut(), at(3));
    assert_eq!(seqs(&d), [3, 4]);
    assert!(d[0].after_gap);
    let st = r.stats();
    assert_eq!((st.gaps_fast_lost, st.gaps_timed_out), (1, 0));
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn fast_loss_waits_for_a_path_that_could_still_deliver_the_gap() {
    let mut paths = views(&[10, 60, 20]);
    let mut r = build("active-fixed", |c| c.timeout = ms(500));
    push(r.as_mut(), at(0), 1, 0, &paths);
    push(r.as_mut(), at(1), 2, 1, &paths);
    // Path 2 is active and has delivered nothing: 0 may be on it.
    assert!(drain(r.as_mut(), at(1)).is_empty());
    // Path 2 fails: no longer waited for.
    paths[2].state = PathState::Failed;
    push(r.as_mut(), at(2), 3, 0, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(2))), [1, 2, 3]);
    assert_eq!(r.stats().gaps_fast_lost, 1);
}

#[test]
fn strict_fast_loss_uses_the_per_path_dccp_sequence_state() {
    let paths = views(&[10, 60]);
    // What the connection reports: highest MP_SEQ per path and whether the
    // path's DCCP sequence numbers show a hole.
    let rx = |h0: u64, h1: u64, in_order1: bool| {
        [
            PathReceiveState {
                path: PathId(0),
                highest_seq: Some(h0),
                in_order: true,
            },
            PathReceiveState {
                path: PathId(1),
                highest_seq: Some(h1),
                in_order: in_order1,
            },
        ]
    };
    // Path 1 shows a DCCP hole: the missing 2 may be reordered inside it — wait.
    let mut r = build("active-fixed", |c| {
        c.timeout = ms(500);
        c.fast_loss = FastLoss::Strict;
    });
    r.push(at(0), item(0, 0, at(0)), &paths, &rx(0, 0, true));
    r.push(at(1), item(1, 1, at(1)), &paths, &rx(0, 1, true));
    r.push(at(2), item(3, 1, at(2)), &paths, &rx(0, 3, false));
    r.push(at(3), item(4, 0, at(3)), &paths, &rx(4, 3, false));
    assert_eq!(seqs(&drain(r.as_mut(), at(3))), [0, 1]);
    assert_eq!(r.poll_timeout(), Some(at(502)));
    // The hole on path 1 is filled by a DCCP-level packet (an ack-only, say):
    // its sequence shows no hole, so 2 was never sent on it — lost.
    r.push(at(4), item(5, 1, at(4)), &paths, &rx(4, 5, true));
    assert_eq!(seqs(&drain(r.as_mut(), at(4))), [3, 4, 5]);
    assert_eq!(r.stats().gaps_fast_lost, 1);
    // The same arrivals under the FIFO rule: lost as soon as both paths are past 2.
    let mut r = build("active-fixed", |c| c.timeout = ms(500));
    r.push(at(0), item(0, 0, at(0)), &paths, &rx(0, 0, true));
    r.push(at(1), item(1, 1, at(1)), &paths, &rx(0, 1, true));
    r.push(at(2), item(3, 1, at(2)), &paths, &rx(0, 3, false));
    r.push(at(3), item(4, 0, at(3)), &paths, &rx(4, 3, false));
    assert_eq!(seqs(&drain(r.as_mut(), at(3))), [0, 1, 3, 4]);
    assert_eq!(r.stats().gaps_fast_lost, 1);
}

#[test]
fn every_name_parses_builds_and_reports_itself_and_others_are_rejected() {
    for kind in ReorderKind::ALL {
        let parsed: ReorderKind = kind.name().parse().unwrap();
        assert_eq!(parsed, *kind);
        assert_eq!(
            reorder::build(&ReorderConfig::from(parsed)).name(),
            kind.name()
        );
    }
    assert_eq!(reorder::build(&ReorderConfig::default()).name(), "passive");
    assert_eq!(
        "Active_Fixed".parse::<ReorderKind>(),
        Ok(ReorderKind::ActiveFixed)
    );
    let err = "magic".parse::<ReorderKind>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown reorder strategy `magic` (expected one of passive, active-fixed, \
         active-adaptive, equalized, delay-equalization, per-flow)"
    );
}

/// `active-adaptive` learns the reordering extent from arrivals when the
/// path estimates miss it (a standing queue in the data direction that
/// SRTT/2 does not show): the estimates say 10 and 20 ms one-way, packets
/// really take 10 and 60 ms. The first gaps are given up after the
/// formula's 15 ms and their packets arrive late; each late packet is a
/// sample, and from then on gaps are held until filled — for at most
/// 5/4 of the 50 ms extent plus the 5 ms offset. `active-fixed` at the same
/// 15 ms, for contrast, delivers late all the way through.
#[test]
fn active_adaptive_learns_an_extent_its_path_estimates_miss() {
    let n = 2_000;
    let late_after = |d: &[Delivered], from: u64| {
        let mut high = None;
        let mut late = 0;
        for x in d.iter().filter(|x| x.seq >= from) {
            if high.is_some_and(|h| x.seq < h) {
                late += 1;
            }
            high = Some(high.map_or(x.seq, |h: u64| h.max(x.seq)));
        }
        late
    };
    let mut adaptive = build("active-adaptive", |_| {});
    let (d, _) = run_two_paths_seen_as(adaptive.as_mut(), &[], n, [10, 20], [10, 60]);
    assert_eq!(d.len() as u64, n);
    let st = adaptive.stats();
    assert!(
        st.late > 0 && st.late < 60,
        "learning needs a few late packets: {st:?}"
    );
    assert_eq!(late_after(&d, 200), 0, "{st:?}");
    let longest = d.iter().map(|x| x.held).max().unwrap();
    assert!(longest <= ms(50 * 5 / 4 + 5 + 1), "held {longest:?}");

    let mut fixed = build("active-fixed", |c| c.timeout = ms(15));
    let (d, _) = run_two_paths_seen_as(fixed.as_mut(), &[], n, [10, 20], [10, 60]);
    assert!(late_after(&d, 200) > 800, "{:?}", fixed.stats());
}
