//! Every scheduler against hand-built path views: which path (or none), and why.

use std::time::Duration;

use mpdccp_proto::path::priority;
use mpdccp_proto::sched::{
    self, Acpf, Cpf, Ecf, Handover, MinSrtt, Otias, PacketMeta, Ratio, Redundant, RoundRobin,
    Scheduler, SchedulerConfig, SchedulerKind,
};
use mpdccp_proto::{Instant, PathId, PathState, PathView};

const PKT: PacketMeta = PacketMeta {
    len: 1200,
    queued_pkts: 1,
    queued_bytes: 1200,
    sparse: false,
};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// An active path: priority, SRTT (ms), cwnd and packets in flight.
fn path(id: u32, prio: u8, srtt_ms: u64, cwnd: u32, in_flight: u32) -> PathView {
    PathView {
        priority: prio,
        srtt: Some(ms(srtt_ms)),
        min_rtt: Some(ms(srtt_ms)),
        cwnd_pkts: cwnd,
        in_flight_pkts: in_flight,
        ..PathView::new(PathId(id))
    }
}

fn pick(s: &mut dyn Scheduler, now: Instant, paths: &[PathView]) -> Vec<u32> {
    pick_with(s, now, &PKT, paths)
}

fn pick_with(
    s: &mut dyn Scheduler,
    now: Instant,
    pkt: &PacketMeta,
    paths: &[PathView],
) -> Vec<u32> {
    let mut out = Vec::new();
    s.select(now, pkt, paths, &mut out);
    out.iter().map(|p| p.0).collect()
}

const T0: Instant = Instant::ZERO;

#[test]
fn cpf_prefers_priority_then_lowest_rtt() {
    let mut s = Cpf::new();
    // Higher MP_PRIO wins even with a much larger RTT.
    let paths = [path(0, 2, 10, 10, 0), path(1, 3, 80, 10, 0)];
    assert_eq!(pick(&mut s, T0, &paths), [1]);
    // Same priority: lower SRTT.
    let paths = [path(0, 3, 40, 10, 0), path(1, 3, 20, 10, 0)];
    assert_eq!(pick(&mut s, T0, &paths), [1]);
    // Full tie: lower PathId.
    let paths = [path(0, 3, 20, 10, 0), path(1, 3, 20, 10, 0)];
    assert_eq!(pick(&mut s, T0, &paths), [0]);
}

#[test]
fn cpf_spills_exactly_when_cwnd_is_full_and_returns_when_it_frees() {
    let mut s = Cpf::new();
    let mut paths = [path(0, 3, 10, 10, 0), path(1, 2, 30, 10, 0)];
    for in_flight in 0..10 {
        paths[0].in_flight_pkts = in_flight;
        assert_eq!(pick(&mut s, T0, &paths), [0], "room at {in_flight}/10");
    }
    paths[0].in_flight_pkts = 10;
    assert_eq!(pick(&mut s, T0, &paths), [1], "path 0 full: spill");
    // Packets queued to a path count against its window too.
    paths[0].in_flight_pkts = 7;
    paths[0].queued_pkts = 3;
    assert_eq!(pick(&mut s, T0, &paths), [1]);
    paths[0].queued_pkts = 2;
    assert_eq!(
        pick(&mut s, T0, &paths),
        [0],
        "one slot freed: back to path 0"
    );
    // Pacing budget: path 0 may not send before t = 5 ms.
    paths[0].next_send_time = Some(Instant::from_millis(5));
    assert_eq!(pick(&mut s, Instant::from_millis(4), &paths), [1]);
    assert_eq!(pick(&mut s, Instant::from_millis(5), &paths), [0]);
    // Everything full: hold.
    paths[0].next_send_time = None;
    paths[0].in_flight_pkts = 10;
    paths[1].in_flight_pkts = 10;
    assert!(pick(&mut s, T0, &paths).is_empty());
}

#[test]
fn standby_and_unused_paths() {
    let mut s = Cpf::new();
    // A full primary does not push traffic to a standby path (backup).
    let mut paths = [path(0, 3, 10, 10, 10), path(1, priority::STANDBY, 5, 10, 0)];
    assert!(pick(&mut s, T0, &paths).is_empty());
    // The standby carries traffic once the primary is no longer usable.
    paths[0].state = PathState::Failed;
    assert_eq!(pick(&mut s, T0, &paths), [1]);
    // MP_PRIO 0 = never use; establishing/closed paths neither.
    let paths = [
        path(0, priority::UNUSED, 1, 10, 0),
        PathView {
            state: PathState::Establishing,
            ..path(1, 3, 1, 10, 0)
        },
        PathView {
            state: PathState::Closed,
            ..path(2, 3, 1, 10, 0)
        },
    ];
    for kind in SchedulerKind::ALL {
        let mut s = sched::build(&SchedulerConfig::from(*kind));
        assert!(
            pick(s.as_mut(), T0, &paths).is_empty(),
            "{kind} used an unusable path"
        );
    }
}

#[test]
fn rr_rotates_with_burst_and_skips_full_paths() {
    let mut s = RoundRobin::new(2);
    let mut paths = [
        path(0, 3, 10, 100, 0),
        path(1, 3, 50, 100, 0),
        path(2, 2, 90, 100, 0),
    ];
    let seq: Vec<u32> = (0..8).flat_map(|_| pick(&mut s, T0, &paths)).collect();
    assert_eq!(seq, [0, 0, 1, 1, 2, 2, 0, 0]);
    // Path 1 full: its turn is skipped.
    paths[1].in_flight_pkts = 100;
    let seq: Vec<u32> = (0..6).flat_map(|_| pick(&mut s, T0, &paths)).collect();
    assert_eq!(seq, [2, 2, 0, 0, 2, 2]);
    // Burst 0 means 1.
    let mut s = RoundRobin::new(0);
    paths[1].in_flight_pkts = 0;
    let seq: Vec<u32> = (0..4).flat_map(|_| pick(&mut s, T0, &paths)).collect();
    assert_eq!(seq, [0, 1, 2, 0]);
}

#[test]
fn srtt_picks_lowest_rtt_with_room() {
    let mut s = MinSrtt::new();
    let mut paths = [
        path(0, 3, 40, 10, 0),
        path(1, 2, 15, 10, 0),
        path(2, 3, 25, 10, 0),
    ];
    // Priority does not matter, delay does (ATSSS smallest-delay).
    assert_eq!(pick(&mut s, T0, &paths), [1]);
    paths[1].in_flight_pkts = 10;
    assert_eq!(pick(&mut s, T0, &paths), [2]);
    // A path without an RTT sample ranks last.
    paths[2].srtt = None;
    assert_eq!(pick(&mut s, T0, &paths), [0]);
}

#[test]
fn ratio_80_20_over_10000_decisions_within_one_percent() {
    let mut s = Ratio::new(&[80, 20]);
    let paths = [path(0, 3, 10, 1000, 0), path(1, 3, 30, 1000, 0)];
    let mut count = [0u32; 2];
    for _ in 0..10_000 {
        for p in pick(&mut s, T0, &paths) {
            count[p as usize] += 1;
        }
    }
    assert_eq!(count[0] + count[1], 10_000);
    let share = f64::from(count[0]) / 10_000.0;
    assert!((share - 0.8).abs() < 0.01, "share {share}");
    // The credit scheme is exact, not just close.
    assert_eq!(count, [8000, 2000]);
}

#[test]
fn ratio_spills_from_a_full_path_and_catches_up_within_the_cap() {
    let mut s = Ratio::new(&[1, 1]);
    let mut paths = [path(0, 3, 10, 1000, 0), path(1, 3, 10, 1000, 0)];
    paths[0].in_flight_pkts = 1000;
    // Path 0 full: everything goes to path 1 (no hold).
    for _ in 0..50 {
        assert_eq!(pick(&mut s, T0, &paths), [1]);
    }
    // Path 0 frees: it is paid back its capped credit (4 rounds of weight 2),
    // then the split is 1:1 again.
    paths[0].in_flight_pkts = 0;
    let seq: Vec<u32> = (0..20).flat_map(|_| pick(&mut s, T0, &paths)).collect();
    let zeros = seq.iter().filter(|&&p| p == 0).count();
    assert!(seq[..4].iter().all(|&p| p == 0), "catch-up first: {seq:?}");
    assert!((12..=16).contains(&zeros), "bounded catch-up: {seq:?}");
    // A path beyond the weight list gets weight 0: only spill.
    let mut s = Ratio::new(&[5]);
    let mut paths = [path(0, 3, 10, 10, 0), path(1, 3, 10, 10, 0)];
    assert!((0..20).all(|_| pick(&mut s, T0, &paths) == [0]));
    paths[0].in_flight_pkts = 10;
    assert_eq!(pick(&mut s, T0, &paths), [1]);
}

#[test]
fn redundant_sends_on_every_usable_path_once_one_has_room() {
    let mut s = Redundant::new();
    let mut paths = [
        path(0, 3, 10, 10, 0),
        path(1, 2, 30, 10, 0),
        path(2, 3, 60, 10, 0),
    ];
    assert_eq!(pick(&mut s, T0, &paths), [0, 1, 2]);
    // A full path still gets its copy (it waits in that path's queue).
    paths[1].in_flight_pkts = 10;
    assert_eq!(pick(&mut s, T0, &paths), [0, 1, 2]);
    // No path with room: the packet is held.
    paths[0].in_flight_pkts = 10;
    paths[2].in_flight_pkts = 10;
    assert!(pick(&mut s, T0, &paths).is_empty());
    // A standby path follows the module rule.
    paths[0].in_flight_pkts = 0;
    paths[1].priority = 1;
    assert_eq!(pick(&mut s, T0, &paths), [0, 2]);
}

#[test]
fn otias_picks_the_earliest_estimated_arrival_even_on_a_full_path() {
    let s = Otias::new(2);
    // Fast path full (one RTT round to wait: 10 + 5 ms) beats a slow path
    // with room (50 ms one way).
    let fast_full = path(0, 3, 10, 10, 10);
    let slow = path(1, 3, 100, 10, 0);
    assert_eq!(s.estimated_arrival(T0, &fast_full), ms(15));
    assert_eq!(s.estimated_arrival(T0, &slow), ms(50));
    let mut sched = Otias::new(2);
    assert_eq!(
        pick(&mut sched, T0, &[fast_full.clone(), slow.clone()]),
        [0]
    );
    // 15 queued behind a full window of 10: (25 − 10) / 10 + 1 = 2 rounds.
    let deep = PathView {
        queued_pkts: 15,
        ..fast_full.clone()
    };
    assert_eq!(s.estimated_arrival(T0, &deep), ms(25));
    let medium = path(1, 3, 30, 10, 0); // 15 ms one way
    assert_eq!(pick(&mut sched, T0, &[deep.clone(), medium]), [1]);
    // The per-path queue is bounded at 2 windows: a full queue is not used.
    let capped = PathView {
        queued_pkts: 20,
        ..fast_full
    };
    assert_eq!(pick(&mut sched, T0, &[capped, slow]), [1]);
    // A measured one-way delay replaces SRTT/2.
    let asym = PathView {
        owd: Some(ms(2)),
        ..path(0, 3, 10, 10, 0)
    };
    assert_eq!(s.estimated_arrival(T0, &asym), ms(2));
}

#[test]
fn handover_switches_on_failure_and_back_on_return() {
    let mut s = Handover::new(Duration::ZERO);
    let mut paths = [path(0, 3, 30, 10, 0), path(1, 2, 10, 10, 0)];
    assert_eq!(
        pick(&mut s, T0, &paths),
        [0],
        "highest priority, not lowest RTT"
    );
    // No spill: a full active path holds the packet.
    paths[0].in_flight_pkts = 10;
    assert!(pick(&mut s, T0, &paths).is_empty());
    paths[0].in_flight_pkts = 0;
    paths[0].state = PathState::Failed;
    assert_eq!(pick(&mut s, T0, &paths), [1], "switch on failure");
    assert_eq!(s.switches(), 1);
    paths[0].state = PathState::Active;
    assert_eq!(pick(&mut s, T0, &paths), [0], "switch back on return");
    assert_eq!(s.switches(), 2);
    // A lower-priority path never preempts; an equal one does not either.
    paths[1].priority = 3;
    paths[1].srtt = Some(ms(1));
    assert_eq!(pick(&mut s, T0, &paths), [0]);
}

#[test]
fn handover_switch_back_waits_for_the_hysteresis_delay() {
    let mut s = Handover::new(ms(500));
    let mut paths = [path(0, 3, 30, 10, 0), path(1, 2, 10, 10, 0)];
    assert_eq!(pick(&mut s, T0, &paths), [0]);
    paths[0].state = PathState::Failed;
    assert_eq!(
        pick(&mut s, Instant::from_millis(100), &paths),
        [1],
        "failure: at once"
    );
    paths[0].state = PathState::Active;
    assert_eq!(pick(&mut s, Instant::from_millis(200), &paths), [1]);
    assert_eq!(s.poll_timeout(), Some(Instant::from_millis(700)));
    assert_eq!(pick(&mut s, Instant::from_millis(699), &paths), [1]);
    assert_eq!(pick(&mut s, Instant::from_millis(700), &paths), [0]);
    assert_eq!(s.poll_timeout(), None);
    // Flapping restarts the clock.
    paths[0].state = PathState::Failed;
    assert_eq!(pick(&mut s, Instant::from_millis(800), &paths), [1]);
    paths[0].state = PathState::Active;
    assert_eq!(pick(&mut s, Instant::from_millis(900), &paths), [1]);
    paths[0].state = PathState::Failed;
    assert_eq!(pick(&mut s, Instant::from_millis(1000), &paths), [1]);
    paths[0].state = PathState::Active;
    assert_eq!(pick(&mut s, Instant::from_millis(1300), &paths), [1]);
    assert_eq!(pick(&mut s, Instant::from_millis(1800), &paths), [0]);
}

#[test]
fn acpf_limits_the_primary_queue_and_does_not_underflow_at_300ms() {
    let acpf = Acpf::new(Duration::ZERO);
    // SRTT below the windowed min RTT (a fresh sample): no underflow, full window.
    let p = PathView {
        srtt: Some(ms(300)),
        min_rtt: Some(ms(310)),
        ..path(0, 3, 300, 100, 0)
    };
    assert_eq!(acpf.effective_window(&p), 100);
    // 20 ms of queue on a 280 ms path is below the target (70 ms): full window.
    let p = PathView {
        srtt: Some(ms(300)),
        min_rtt: Some(ms(280)),
        ..path(0, 3, 300, 100, 0)
    };
    assert_eq!(acpf.effective_window(&p), 100);
    // RTT doubled by queueing: window × (300 + 75) / 600 = 62.5 → 62.
    let primary = PathView {
        srtt: Some(ms(600)),
        min_rtt: Some(ms(300)),
        ..path(0, 3, 600, 100, 62)
    };
    assert_eq!(acpf.effective_window(&primary), 62);
    let secondary = path(1, 2, 50, 10, 0);
    let mut s = Acpf::new(Duration::ZERO);
    let mut cpf = Cpf::new();
    let paths = [primary.clone(), secondary.clone()];
    assert_eq!(
        pick(&mut cpf, T0, &paths),
        [0],
        "CPF keeps filling the queue"
    );
    assert_eq!(pick(&mut s, T0, &paths), [1], "ACPF spills early");
    // Below the effective window the primary is used.
    let paths = [
        PathView {
            in_flight_pkts: 61,
            ..primary.clone()
        },
        secondary.clone(),
    ];
    assert_eq!(pick(&mut s, T0, &paths), [0]);
    // When the secondary is full as well, the primary's remaining window is used.
    let paths = [
        primary,
        PathView {
            in_flight_pkts: 10,
            ..secondary
        },
    ];
    assert_eq!(pick(&mut s, T0, &paths), [0]);
    // Extreme values: no panic, no overflow.
    let huge = PathView {
        srtt: Some(Duration::from_secs(3600)),
        min_rtt: Some(Duration::from_nanos(1)),
        cwnd_pkts: u32::MAX,
        ..PathView::new(PathId(0))
    };
    assert!(acpf.effective_window(&huge) >= 1);
    // A fixed target: 10 ms.
    let fixed = Acpf::new(ms(10));
    let p = PathView {
        srtt: Some(ms(320)),
        min_rtt: Some(ms(300)),
        ..path(0, 3, 300, 100, 0)
    };
    assert_eq!(fixed.effective_window(&p), 96); // 100 × 310 / 320 = 96.9
}

#[test]
fn ecf_waits_for_the_fast_path_when_that_completes_sooner() {
    let mut s = Ecf::new();
    let fast = path(0, 3, 10, 10, 0);
    let slow = path(1, 3, 100, 10, 0);
    assert_eq!(pick(&mut s, T0, &[fast.clone(), slow.clone()]), [0]);
    let fast_full = PathView {
        in_flight_pkts: 10,
        ..fast
    };
    // 5 queued: the fast path drains them in 1.5 × 10 ms < 100 ms, and the
    // slow path would need 0.5 × 100 ms ≥ 2 × 10 ms: wait.
    let pkt = PacketMeta {
        queued_pkts: 5,
        ..PKT
    };
    assert!(pick_with(&mut s, T0, &pkt, &[fast_full.clone(), slow.clone()]).is_empty());
    assert!(s.is_waiting());
    // 1000 queued: the fast path alone needs 101 rounds: use the slow path.
    let pkt = PacketMeta {
        queued_pkts: 1000,
        ..PKT
    };
    assert_eq!(
        pick_with(&mut s, T0, &pkt, &[fast_full.clone(), slow.clone()]),
        [1]
    );
    assert!(!s.is_waiting());
    // 1 queued on a slow path that is nearly as fast: the second condition
    // fails ((1/10) × 12 ms < 20 ms), so the slow path is used.
    let near = path(1, 3, 12, 10, 0);
    let pkt = PacketMeta {
        queued_pkts: 1,
        ..PKT
    };
    assert_eq!(pick_with(&mut s, T0, &pkt, &[fast_full, near]), [1]);
}

#[test]
fn every_name_and_alias_parses_and_builds_and_others_are_rejected() {
    for kind in SchedulerKind::ALL {
        let parsed: SchedulerKind = kind.name().parse().unwrap();
        assert_eq!(
            sched::build(&SchedulerConfig::from(parsed)).name(),
            kind.name()
        );
        assert_eq!(parsed.to_string(), kind.name());
    }
    // The 3GPP ATSSS steering modes (TS 23.501 §5.32.8).
    for (alias, target) in [
        ("active-standby", "handover"),
        ("smallest-delay", "srtt"),
        ("load-balancing", "ratio"),
        ("priority-based", "cpf"),
    ] {
        let kind: SchedulerKind = alias.parse().unwrap();
        assert_eq!(sched::build(&SchedulerConfig::from(kind)).name(), target);
    }
    assert_eq!(sched::build(&SchedulerConfig::default()).name(), "cpf");
    assert_eq!(
        "Active_Standby".parse::<SchedulerKind>(),
        Ok(SchedulerKind::Handover)
    );
    let msg = "blest".parse::<SchedulerKind>().unwrap_err().to_string();
    assert!(
        msg.starts_with("unknown scheduler `blest` (expected one of cpf, rr"),
        "{msg}"
    );
    assert!(msg.contains("active-standby"), "{msg}");
}

#[test]
fn ratio_forgets_a_closed_path_and_keeps_the_split_of_the_rest() {
    let mut s = Ratio::new(&[2, 1, 1]);
    let all = [
        path(0, 3, 10, 1000, 0),
        path(1, 3, 10, 1000, 0),
        path(2, 3, 10, 1000, 0),
    ];
    for _ in 0..40 {
        pick(&mut s, T0, &all);
    }
    // Path 1 leaves the list altogether (the connection normally keeps
    // closed paths listed, state Closed, so positions stay put): its credit
    // is forgotten, positions shift and the weights read [2, 1] for paths 0
    // and 2 — an exact 2:1 split.
    let rest = [all[0].clone(), all[2].clone()];
    let mut count = [0u32; 3];
    for _ in 0..300 {
        for p in pick(&mut s, T0, &rest) {
            count[p as usize] += 1;
        }
    }
    assert_eq!(count, [200, 0, 100]);
}

/// The `asym` mix as the sender sees it: path 0 40 Mbit/s, RTT 24 ms, a
/// full window of 86 packets; path 1 8 Mbit/s, base RTT 70 ms, room.
/// Both at their effective windows, so ACPF is past its first stage.
fn asym_paths(slow_srtt_ms: u64) -> [PathView; 2] {
    let fast = path(0, 3, 24, 86, 86);
    let slow = PathView {
        min_rtt: Some(ms(70)),
        srtt: Some(ms(slow_srtt_ms)),
        ..path(1, 3, 70, 60, 50)
    };
    [fast, slow]
}

fn queued(k: usize) -> PacketMeta {
    PacketMeta {
        len: 1200,
        queued_pkts: k,
        queued_bytes: 1200 * k,
        sparse: false,
    }
}

#[test]
fn acpf_holds_rather_than_spill_to_a_path_that_delivers_later() {
    let mut s = Acpf::new(Duration::ZERO);
    // Slow path with a 50 ms standing queue (srtt 120 ms): its effective
    // window is 60 × 87.5 / 120 = 43 < 50 in flight; cwnd has room.
    let paths = asym_paths(120);
    assert_eq!(s.effective_window(&paths[1]), 43);
    // One packet waiting: the fast path frees a slot within 0.3 ms and
    // delivers in ~12 ms; the slow path in 60 ms. Hold.
    assert!(pick_with(&mut s, T0, &queued(1), &paths).is_empty());
    // The same with a 100-packet backlog (fast: 12 + 100·24/86 = 39.9 ms).
    assert!(pick_with(&mut s, T0, &queued(100), &paths).is_empty());
    // A 200-packet backlog waits 55.8 + 12 = 67.8 ms > 60 ms: spill.
    assert_eq!(pick_with(&mut s, T0, &queued(200), &paths), [1]);
    // With 20 ms of queue (srtt 90 ms, just over the 17.5 ms target, so at
    // its effective window of 59) the slow path (arrival 45 ms) takes a
    // packet once the fast path's backlog exceeds (45 − 12) · 86 / 24 =
    // 118.25 packets.
    let paths = asym_paths(90);
    let paths = [
        paths[0].clone(),
        PathView {
            in_flight_pkts: 60,
            cwnd_pkts: 61,
            ..paths[1].clone()
        },
    ];
    assert_eq!(s.effective_window(&paths[1]), 59);
    assert!(pick_with(&mut s, T0, &queued(118), &paths).is_empty());
    assert_eq!(pick_with(&mut s, T0, &queued(119), &paths), [1]);
    // Blind spilling (ACPF before the rule) takes the slow path at once.
    let mut blind = sched::build(&SchedulerConfig {
        acpf_blind_spill: true,
        ..SchedulerConfig::from(SchedulerKind::Acpf)
    });
    assert_eq!(
        pick_with(blind.as_mut(), T0, &queued(1), &asym_paths(120)),
        [1]
    );
    // Below its effective window the slow path is used as before: its
    // queue is within ACPF's target, and the fast path is full.
    let mut paths = asym_paths(70);
    paths[1].in_flight_pkts = 10;
    assert_eq!(pick_with(&mut s, T0, &queued(1), &paths), [1]);
    // A faster path of lower MP_PRIO is no reason to wait: CPF's order.
    let mut paths = asym_paths(120);
    paths[0].priority = 2;
    assert_eq!(pick_with(&mut s, T0, &queued(1), &paths), [1]);
    // The fast path with room is taken, whatever the backlog.
    let mut paths = asym_paths(120);
    paths[0].in_flight_pkts = 80;
    assert_eq!(pick_with(&mut s, T0, &queued(1), &paths), [0]);
}

/// The `asym` mix with a paced controller (CCID5 / BBRv3): the fast path
/// (40 Mbit/s = 5 MB/s, RTT 24 ms) is far below its window but its pacer
/// holds two queued packets until 0.28 ms from now; the slow ACK-clocked
/// path (RTT 70 ms) has room. ACPF's first stage must not count the paced
/// path as full and hand the packet to the slow path before any delay
/// comparison (that gave asym/ccid5 34.0 of 48 Mbit/s).
#[test]
fn acpf_waits_for_a_paced_fast_path_unless_its_pacer_backlog_delivers_later() {
    let mut s = Acpf::new(Duration::ZERO);
    let now = Instant::from_millis(100);
    let fast = PathView {
        queued_pkts: 2,
        mss_bytes: 1400,
        pacing_rate_bytes_per_s: Some(5_000_000),
        next_send_time: Some(now + Duration::from_micros(280)),
        ..path(0, 3, 24, 200, 60)
    };
    let slow = path(1, 3, 70, 60, 10);
    let paths = [fast.clone(), slow.clone()];
    assert!(!paths[0].can_send(now) && paths[0].has_cwnd_room());
    // Waiting: 12 ms + 0.28 ms + (2 + k) · 1400 B / 5 MB/s (0.28 ms a
    // packet) against 35 ms on the slow path: hold while k ≤ 79.
    assert!(pick_with(&mut s, now, &queued(1), &paths).is_empty());
    assert!(pick_with(&mut s, now, &queued(79), &paths).is_empty());
    assert_eq!(pick_with(&mut s, now, &queued(80), &paths), [1]);
    // Once the pacer has released, the fast path takes it directly.
    assert_eq!(
        pick_with(&mut s, now + Duration::from_millis(1), &queued(1), &paths),
        [0]
    );
    // Without pacing (an ACK-clocked path with no room) nothing changes:
    // the slow path below its effective window is used at once.
    let full = path(0, 3, 24, 86, 86);
    assert_eq!(
        pick_with(&mut s, now, &queued(1), &[full, slow.clone()]),
        [1]
    );
    // A lower-priority paced path is no reason to wait (CPF's order).
    let mut low = fast.clone();
    low.priority = 2;
    assert_eq!(pick_with(&mut s, now, &queued(1), &[low, slow]), [1]);
    // Blind spilling keeps the old first stage.
    let mut blind = sched::build(&SchedulerConfig {
        acpf_blind_spill: true,
        ..SchedulerConfig::from(SchedulerKind::Acpf)
    });
    assert_eq!(pick_with(blind.as_mut(), now, &queued(1), &paths), [1]);
}

/// A sparse flow's packet (a voice packet beside a bulk flow, served first
/// by flow queuing): the fast path above its effective window but with
/// window room takes it, where a bulk packet goes to the slow path with
/// room; with the fast path full it waits for it even behind a backlog that
/// sends bulk packets to the slow path (its own backlog is one packet).
#[test]
fn acpf_keeps_a_sparse_flow_on_the_fastest_path() {
    let mut s = Acpf::new(Duration::ZERO);
    let sparse = |k: usize| PacketMeta {
        sparse: true,
        ..queued(k)
    };
    // Fast path: 10 ms of queue over its 6 ms target (srtt 34, min 24):
    // effective window 86 · 30 / 34 = 75 < 80 in flight, cwnd room 6.
    // Slow path below its window.
    let mut paths = asym_paths(70);
    paths[0].srtt = Some(ms(34));
    paths[0].in_flight_pkts = 80;
    paths[1].in_flight_pkts = 10;
    assert_eq!(s.effective_window(&paths[0]), 75);
    assert_eq!(pick_with(&mut s, T0, &queued(1), &paths), [1]);
    assert_eq!(pick_with(&mut s, T0, &sparse(1), &paths), [0]);
    // Fast path full, slow path with a 50 ms queue: a 200-packet backlog
    // spills bulk packets, the sparse packet waits for the fast path.
    let paths = asym_paths(120);
    assert_eq!(pick_with(&mut s, T0, &queued(200), &paths), [1]);
    assert!(pick_with(&mut s, T0, &sparse(200), &paths).is_empty());
    // Unless the slow path delivers it sooner (fast path's own queue of
    // 300 packets: 12 + 301 · 24 / 86 = 96 ms > 60 ms).
    let mut paths = asym_paths(120);
    paths[0].queued_pkts = 300;
    assert_eq!(pick_with(&mut s, T0, &sparse(1), &paths), [1]);
}
