//! The timer invariant drivers rely on: after `handle_timeout(now)`,
//! `poll_timeout()` is `None` or later than `now`, for a `Connection`
//! and for an `Endpoint`; a driver could then sleep until the deadline
//! with no guard against one that never moves.
//!
//! Checked with plain `assert!`s (the tests run in release) after every
//! `handle_timeout` of sessions drawn at random: handshakes, data on
//! several paths, random loss and outages (paths fail and are probed back),
//! paths taken down and removed, priority changes, and closes, under every
//! scheduler and reordering strategy and with the optional timers
//! (keepalive, idle, path expiry, RTT probes, PLPMTUD). The `Harness` and
//! `EpNet` check it after every `handle_timeout`
//! (`harness::assert_timer_advanced`, `assert_endpoint_timer_advanced`).
//!
//! With PLPMTUD too: a black-hole confirmation round (RFC 8899 §4.3)
//! whose probes expired used to leave its deadline at `now` for
//! `poll_transmit` to serve
//! (`plpmtud_confirmation_round_leaves_no_deadline_at_now`); the drivers
//! carried a guard against it, which this invariant made unneeded.

use crate::common;

use std::time::Duration;

use common::EpNet;
use mpdccp_proto::conn::LifetimeConfig;
use mpdccp_proto::conn::PlpmtudConfig;
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::reorder::{ReorderConfig, ReorderKind};
use mpdccp_proto::sched::{SchedulerConfig, SchedulerKind};
use mpdccp_proto::{ConnectionConfig, EndpointConfig, Instant, PathId};
use proptest::prelude::*;

/// What happens next in a session.
#[derive(Clone, Debug)]
enum Step {
    /// The client opens path `0..3` (again: refused, harmlessly).
    Open(usize),
    /// `n` packets of `len` bytes from `side`.
    Send { side: Side, n: u32, len: usize },
    /// Virtual time passes.
    Drive(u64),
    /// The client takes a path down (its subflow closes).
    Down(usize),
    /// The client removes a path.
    Remove(usize),
    /// The client changes a path's priority (MP_PRIO).
    Prio(usize, u8),
    /// `side` closes the connection gracefully.
    Close(Side),
}

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![Just(Side::Client), Just(Side::Server)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0usize..3).prop_map(Step::Open),
        4 => (side(), 1u32..60, 20usize..1400).prop_map(|(side, n, len)| Step::Send { side, n, len }),
        4 => (1u64..3_000).prop_map(Step::Drive),
        1 => (0usize..3).prop_map(Step::Down),
        1 => (0usize..3).prop_map(Step::Remove),
        1 => (0usize..3, 0u8..16).prop_map(|(p, prio)| Step::Prio(p, prio)),
        1 => side().prop_map(Step::Close),
    ]
}

/// One emulated path: delay, loss, and perhaps an outage long enough to
/// fail the path.
fn link() -> impl Strategy<Value = LinkSpec> {
    (
        1u64..80,
        0.0f64..0.2,
        proptest::option::of((0u64..5_000, 1u64..6_000)),
        0u8..3,
    )
        .prop_map(|(delay, loss, outage, prio)| LinkSpec {
            delay: Duration::from_millis(delay),
            loss,
            outages: outage
                .map(|(at, len)| (Instant::from_millis(at), Instant::from_millis(at + len)))
                .into_iter()
                .collect(),
            priority: prio,
            rate_bps: (delay % 2 == 0).then_some(20_000_000),
            ..LinkSpec::default()
        })
}

/// One of `all` (every scheduler or every reordering strategy, so a new
/// kind is covered without touching this test).
fn kind<K: Copy + std::fmt::Debug>(all: &'static [K]) -> impl Strategy<Value = K> {
    (0..all.len()).prop_map(move |i| all[i])
}

/// The connection's settings, with the optional timers on or off.
#[derive(Clone, Debug)]
struct Knobs {
    scheduler: SchedulerKind,
    reorder: ReorderKind,
    keepalive: bool,
    idle: bool,
    path_expiry: bool,
    rtt_probes: bool,
    plpmtud: bool,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        kind(SchedulerKind::ALL),
        kind(ReorderKind::ALL),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(scheduler, reorder, keepalive, idle, path_expiry, rtt_probes, plpmtud)| Knobs {
                scheduler,
                reorder,
                keepalive,
                idle,
                path_expiry,
                rtt_probes,
                plpmtud,
            },
        )
}

fn config(k: &Knobs) -> ConnectionConfig {
    let ms = Duration::from_millis;
    ConnectionConfig {
        scheduler: SchedulerConfig::from(k.scheduler),
        reorder: ReorderConfig::from(k.reorder),
        plpmtud: k.plpmtud.then_some(PlpmtudConfig {
            base_bytes: 1000,
            max_bytes: 1400,
            probe_timer: ms(700),
            max_probes: 3,
            raise_timer: ms(5_000),
        }),
        lifetime: LifetimeConfig {
            keepalive_interval: k.keepalive.then_some(ms(500)),
            idle_timeout: k.idle.then_some(ms(4_000)),
            path_idle_timeout: k.path_expiry.then_some(ms(2_500)),
            rtt_probe_interval: k.rtt_probes.then_some(ms(300)),
            ..Default::default()
        },
        ..ConnectionConfig::default()
    }
}

fn run(h: &mut Harness, step: &Step) {
    let now = h.now;
    match *step {
        Step::Open(p) => h.open_path(p),
        Step::Send { side, n, len } => {
            for k in 0..n {
                let mut p = vec![0x5a; len];
                p[..4].copy_from_slice(&k.to_be_bytes());
                let now = h.now;
                // Refused sends (not open, queue full, closed) are fine.
                let _ = h.conn(side).send(now, &p);
                h.drive_for(Duration::from_millis(2));
            }
        }
        Step::Drive(ms) => h.drive_for(Duration::from_millis(ms)),
        Step::Down(p) => h.client.set_path_down(now, PathId(p as u32)),
        Step::Remove(p) => h.client.remove_path(now, PathId(p as u32)),
        Step::Prio(p, prio) => h.client.set_priority(now, PathId(p as u32), prio),
        Step::Close(side) => h.conn(side).close(now),
    }
}

/// A session of `steps` over `paths` (path 0 opened first), with every
/// timer run out at the end: retransmissions give up, closes finish.
fn session(knobs: &Knobs, paths: Vec<LinkSpec>, steps: &[Step], seed: u64) {
    let n = paths.len();
    let mut h = Harness::new(HarnessConfig {
        client: config(knobs),
        server: config(knobs),
        paths,
        seed,
    });
    h.open_path(0);
    for s in steps {
        if let Step::Open(p) | Step::Down(p) | Step::Remove(p) | Step::Prio(p, _) = *s {
            if p >= n {
                continue;
            }
        }
        run(&mut h, s);
    }
    h.drive_for(Duration::from_secs(30));
}

proptest! {
    // As many cases as the two properties (without and with PLPMTUD) had
    // before they became one.
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Two connections, the invariant asserted after every `handle_timeout`
    /// of either side (the `Harness` always checks it); in about half the
    /// sessions PLPMTUD searches and confirms on every path.
    #[test]
    fn connection_timers_advance_past_now(
        knobs in knobs(),
        paths in proptest::collection::vec(link(), 1..4),
        steps in proptest::collection::vec(step(), 1..25),
        seed in any::<u64>(),
    ) {
        session(&knobs, paths, &steps, seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A client and a server `Endpoint` (`EpNet` asserts the invariant
    /// after each `handle_timeout` of both), with junk from attackers that
    /// leaves half-open state behind.
    #[test]
    fn endpoint_timers_advance_past_now(
        knobs in knobs(),
        paths in 1u32..4,
        sends in proptest::collection::vec((1u32..30, 1u64..800), 0..8),
        junk in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..80), 0..6),
        close in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut net = EpNet::new(
            config(&knobs),
            EndpointConfig { conn: config(&knobs), ..EndpointConfig::default() },
            (seed, seed ^ 0x5eed),
        );
        net.connect(paths);
        for (key, bytes) in junk.iter().enumerate() {
            net.attack(key as u64, bytes);
        }
        for &(n, gap) in &sends {
            for k in 0..n {
                let now = net.now;
                let _ = net.client.send(now, &k.to_be_bytes().repeat(100));
            }
            net.run_for(Duration::from_millis(gap));
        }
        if close {
            let now = net.now;
            net.client.close(now);
        }
        net.run_for(Duration::from_secs(30));
    }
}

/// Found by the property test with PLPMTUD, shrunk to this: one path; an
/// outage of 2.1 s while data is sent makes the data time out again and
/// again, which starts a black-hole confirmation of the PLPMTU found (RFC
/// 8899 §4.3). When a confirmation round's two probes expired,
/// `Plpmtud::next_at` (the round's end) was left as it was, and
/// `poll_timeout` reported it (`ConnTimer::Plpmtu`) after
/// `handle_timeout(1.664 s)`: a driver sleeping on it would spin. Now a
/// passed deadline is cleared; `poll_transmit` still sends the round.
#[test]
fn plpmtud_confirmation_round_leaves_no_deadline_at_now() {
    let knobs = Knobs {
        scheduler: SchedulerKind::Cpf,
        reorder: ReorderKind::Passive,
        keepalive: false,
        idle: false,
        path_expiry: false,
        rtt_probes: false,
        plpmtud: true,
    };
    let outage = (Instant::from_millis(367), Instant::from_millis(2_487));
    let path = LinkSpec {
        delay: Duration::from_millis(1),
        outages: vec![outage],
        priority: 1,
        ..LinkSpec::default()
    };
    let steps = [
        Step::Drive(264),
        Step::Send {
            side: Side::Client,
            n: 56,
            len: 20,
        },
    ];
    session(&knobs, vec![path], &steps, 0);
}
