//! Schedulers: which path(s) carry the next packet.
//!
//! The connection keeps a bounded send queue in front of the scheduler. Each
//! time it could send, it builds one [`PathView`] per path and asks the
//! scheduler for a decision for each packet at the head of the queue in
//! turn. Between decisions only the chosen paths' queues change, so after
//! each assignment only those paths' views are refreshed. It builds no view
//! and asks nothing when the queue is empty, when no path is usable, or when
//! no path can send and the scheduler would then hold anyway
//! ([`Scheduler::holds_unless_a_path_can_send`]). A decision is:
//!
//! * no path (`out` left empty): hold the packet — every suitable path is full
//!   or paced; the connection asks again when a path frees up
//!   ([`Scheduler::poll_timeout`] lets time-driven schedulers wake it too);
//! * one path: the normal case;
//! * several paths: redundant transmission (one MP_SEQ; the receiver delivers
//!   the packet once).
//!
//! The MP_SEQ is assigned after the decision, in application order.
//!
//! Every scheduler is built from a [`SchedulerConfig`] by [`build`]; the
//! choices are the [`SchedulerKind`]s (their names include the 3GPP ATSSS
//! steering-mode aliases, TS 23.501 §5.32.8).
//!
//! Shared rules (every scheduler, unless its docs say otherwise):
//! * a path is *usable* when [`PathView::is_usable`] (Active, MP_PRIO ≠ 0);
//! * RFC 9897 MP_PRIO 1 marks a standby (backup) path: it is used only
//!   while no usable path of higher priority exists, the way MPTCP treats
//!   backup subflows (RFC 8684 §3.3.8);
//! * a path *has room* when [`PathView::can_send`] (cwnd and pacing budget);
//!   only paths with room are chosen — except by `otias`, whose point is to
//!   queue onto a full path when the packet still arrives first there;
//! * holding is a decision too: `handover` never spills, `ecf` may wait for
//!   its fastest path, and every scheduler holds when no path has room;
//! * decisions are deterministic: ties break towards the lower `PathId`; no
//!   allocation happens per decision (`out` is the caller's reused vector).
//! * Schedulers update their own state (round-robin position, ratio credit)
//!   inside `select`: a non-empty decision is assumed to be carried out.

use std::fmt::Debug;
use std::time::Duration;

mod acpf;
mod cpf;
mod ecf;
mod handover;
mod otias;
mod ratio;
mod redundant;
mod rr;
mod spill;
mod srtt;

pub use acpf::Acpf;
pub use cpf::Cpf;
pub use ecf::Ecf;
pub use handover::Handover;
pub use otias::Otias;
pub use ratio::Ratio;
pub use redundant::Redundant;
pub use rr::RoundRobin;
pub use srtt::MinSrtt;

use crate::path::{priority, PathId, PathView};
use crate::time::Instant;

/// What the scheduler knows about the packet it places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Size of the tunnelled packet, bytes.
    pub len: usize,
    /// Packets waiting in the connection's send queue, this one included.
    pub queued_pkts: usize,
    /// Bytes waiting in the connection's send queue, this one included.
    pub queued_bytes: usize,
    /// The packet's inner flow is sparse: at most an eighth of the bytes
    /// queued lately (a voice or game flow beside a bulk one), so flow
    /// queuing serves it before the backlog counted in `queued_pkts`
    /// (RFC 8290 §4.1.2). Always false without flow queuing.
    pub sparse: bool,
}

pub trait Scheduler: Send + Debug {
    /// The name used in config and results ("cpf", "rr", ...).
    fn name(&self) -> &'static str;

    /// Choose path(s) for `pkt`. `out` arrives empty; leave it empty to hold.
    /// `paths` lists every path of the connection, in `PathId` order.
    fn select(&mut self, now: Instant, pkt: &PacketMeta, paths: &[PathView], out: &mut Vec<PathId>);

    /// True when `select` keeps no state and picks only paths whose view
    /// `can_send(now)`: with no such path it holds the packet, and the
    /// connection may skip building views to ask it.
    fn holds_unless_a_path_can_send(&self) -> bool {
        false
    }

    /// How long the send queue's head may wait before this scheduler
    /// would send it on a slower path that has room now: holding it that
    /// long is the scheduler's choice, not congestion, so the send queue's
    /// CoDel does not count it (`spill::hold_allowance`). Zero for a
    /// scheduler that never holds a packet a path could take.
    fn hold_allowance(&self, _now: Instant, _paths: &[PathView]) -> Duration {
        Duration::ZERO
    }

    /// The decision was carried out: `pkt` was handed to `paths`.
    fn on_scheduled(&mut self, _now: Instant, _pkt: &PacketMeta, _paths: &[PathId]) {}

    /// A time at which the scheduler wants to be asked again even if no path
    /// state changed (e.g. a deferred decision of a head-of-line-aware scheduler).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// True when every packet goes out on every usable path. A lossy path
    /// then costs nothing to keep (its twin covers each loss), so the
    /// connection does not give it up early for a backup
    /// (`LossConfig::fail_after_rtos_with_backup` does not apply).
    fn duplicates_every_packet(&self) -> bool {
        false
    }
}

crate::kind::named_kind! {
    /// The schedulers: the one list of their names (config, CLI, results).
    /// The 3GPP ATSSS steering modes (TS 23.501 §5.32.8) are aliases of
    /// the scheduler each maps to.
    #[derive(Default)]
    pub enum SchedulerKind ("scheduler") {
        #[default]
        Cpf = "cpf",
        Rr = "rr",
        Srtt = "srtt",
        Ratio = "ratio",
        Redundant = "redundant",
        Otias = "otias",
        Handover = "handover",
        Acpf = "acpf",
        Ecf = "ecf",
    }
    aliases {
        "active-standby" => Handover,
        "smallest-delay" => Srtt,
        "load-balancing" => Ratio,
        "priority-based" => Cpf,
    }
}

pub use crate::kind::UnknownName;

/// Settings for every scheduler; each reads the fields it needs.
/// `Default` gives CPF with the documented defaults (zero = "use the default").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerConfig {
    /// Which scheduler.
    pub kind: SchedulerKind,
    /// `ratio`: weight of each path, by position in the `PathId`-ordered path
    /// list (the order paths were configured in). Empty = equal weights; a
    /// path beyond the list gets weight 0 (used only to spill).
    pub weights: Vec<u32>,
    /// `rr`: packets sent on one path before moving to the next; 0 = 1.
    pub rr_burst: u32,
    /// `acpf`: standing queueing delay (SRTT − min RTT) tolerated on a path
    /// before spilling; zero = `max(min_rtt / 4, 1 ms)` per path.
    pub acpf_queue_delay: Duration,
    /// `acpf`: once every path is at its effective window, spill to a slower
    /// path whenever it has room, without the delay check of `spill.rs`
    /// (the behaviour before it; `false`, the default, checks).
    pub acpf_blind_spill: bool,
    /// `otias`: windows' worth of packets a full path may queue; 0 = 2.
    pub otias_max_queue_rounds: u32,
    /// `handover`: how long a returning higher-priority path must stay usable
    /// before traffic switches back to it; zero = at once.
    pub handover_switch_back_delay: Duration,
}

impl From<SchedulerKind> for SchedulerConfig {
    /// Config for `kind` with every other field at its default.
    fn from(kind: SchedulerKind) -> Self {
        SchedulerConfig {
            kind,
            ..SchedulerConfig::default()
        }
    }
}

/// Build the scheduler `config.kind` selects.
pub fn build(config: &SchedulerConfig) -> Box<dyn Scheduler> {
    match config.kind {
        SchedulerKind::Cpf => Box::new(Cpf::new()),
        SchedulerKind::Rr => Box::new(RoundRobin::new(config.rr_burst)),
        SchedulerKind::Srtt => Box::new(MinSrtt::new()),
        SchedulerKind::Ratio => Box::new(Ratio::new(&config.weights)),
        SchedulerKind::Redundant => Box::new(Redundant::new()),
        SchedulerKind::Otias => Box::new(Otias::new(config.otias_max_queue_rounds)),
        SchedulerKind::Handover => Box::new(Handover::new(config.handover_switch_back_delay)),
        SchedulerKind::Acpf => {
            Box::new(Acpf::new(config.acpf_queue_delay).with_blind_spill(config.acpf_blind_spill))
        }
        SchedulerKind::Ecf => Box::new(Ecf::new()),
    }
}

/// True when some usable path has a priority above standby: standby paths
/// are then excluded (RFC 9897 MP_PRIO 1 = backup, cf. RFC 8684 §3.3.8).
pub(crate) fn standby_excluded(paths: &[PathView]) -> bool {
    paths
        .iter()
        .any(|p| p.is_usable() && p.priority > priority::STANDBY)
}

/// A path this scheduler may consider at all (usable, and not a standby path
/// while a better one is usable).
pub(crate) fn eligible(p: &PathView, standby_excluded: bool) -> bool {
    p.is_usable() && !(standby_excluded && p.priority <= priority::STANDBY)
}

/// The shared "usable path with room" test: eligible under the module rules
/// (standby excluded while a better path is usable) and [`PathView::can_send`]
/// at `now`. Computes the standby rule once per decision.
pub(crate) fn ready(paths: &[PathView], now: Instant) -> impl Fn(&PathView) -> bool + Copy {
    let no_standby = standby_excluded(paths);
    move |p: &PathView| eligible(p, no_standby) && p.can_send(now)
}

/// Smoothed RTT for ranking; a path without a sample ranks after every path
/// with one.
pub(crate) fn srtt_rank(p: &PathView) -> Duration {
    p.srtt.unwrap_or(Duration::MAX)
}
