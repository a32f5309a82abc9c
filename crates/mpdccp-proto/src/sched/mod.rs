//! Schedulers: which path(s) carry the next packet.
//!
//! The connection keeps a bounded send queue in front of the scheduler. Each
//! time it could send, it rebuilds the [`PathView`]s and asks the scheduler for
//! a decision for the packet at the head of the queue:
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
//! Every scheduler is built from a [`SchedulerConfig`] by [`build`]; the names
//! are listed in [`SCHEDULER_NAMES`] (plus the 3GPP ATSSS steering-mode
//! aliases of [`ATSSS_ALIASES`], TS 23.501 §5.32.8).
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

use std::fmt::{self, Debug};
use std::time::Duration;

mod acpf;
mod cpf;
mod ecf;
mod handover;
mod otias;
mod ratio;
mod redundant;
mod rr;
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
}

pub trait Scheduler: Send + Debug {
    /// The name used in config and results ("cpf", "rr", ...).
    fn name(&self) -> &'static str;

    /// Choose path(s) for `pkt`. `out` arrives empty; leave it empty to hold.
    /// `paths` lists every path of the connection, in `PathId` order.
    fn select(&mut self, now: Instant, pkt: &PacketMeta, paths: &[PathView], out: &mut Vec<PathId>);

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
    /// (`ConnectionConfig::fail_after_rtos_with_backup` does not apply).
    fn duplicates_every_packet(&self) -> bool {
        false
    }
}

/// Scheduler names accepted by [`build`] (config, CLI and results use these).
pub const SCHEDULER_NAMES: &[&str] = &[
    "cpf",
    "rr",
    "srtt",
    "ratio",
    "redundant",
    "otias",
    "handover",
    "acpf",
    "ecf",
];

/// 3GPP ATSSS steering modes (TS 23.501 §5.32.8) and the scheduler each maps to.
pub const ATSSS_ALIASES: &[(&str, &str)] = &[
    ("active-standby", "handover"),
    ("smallest-delay", "srtt"),
    ("load-balancing", "ratio"),
    ("priority-based", "cpf"),
];

/// Settings for every scheduler; each reads the fields it needs.
/// `Default` gives CPF with the documented defaults (zero = "use the default").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerConfig {
    /// Scheduler name (see [`SCHEDULER_NAMES`], [`ATSSS_ALIASES`]); "" = "cpf".
    pub name: String,
    /// `ratio`: weight of each path, by position in the `PathId`-ordered path
    /// list (the order paths were configured in). Empty = equal weights; a
    /// path beyond the list gets weight 0 (used only to spill).
    pub weights: Vec<u32>,
    /// `rr`: packets sent on one path before moving to the next; 0 = 1.
    pub rr_burst: u32,
    /// `acpf`: standing queueing delay (SRTT − min RTT) tolerated on a path
    /// before spilling; zero = `max(min_rtt / 4, 1 ms)` per path.
    pub acpf_queue_delay: Duration,
    /// `otias`: windows' worth of packets a full path may queue; 0 = 2.
    pub otias_max_queue_rounds: u32,
    /// `handover`: how long a returning higher-priority path must stay usable
    /// before traffic switches back to it; zero = at once.
    pub handover_switch_back_delay: Duration,
}

impl SchedulerConfig {
    /// Config for `name` with every other field at its default.
    pub fn named(name: &str) -> Self {
        SchedulerConfig {
            name: name.to_owned(),
            ..SchedulerConfig::default()
        }
    }

    /// The canonical scheduler name this config selects (aliases resolved).
    pub fn canonical_name(&self) -> Option<&'static str> {
        canonical(&self.name)
    }
}

/// `build` was given a name it does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownName(pub String);

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown scheduler `{}` (expected one of ", self.0)?;
        for (i, n) in SCHEDULER_NAMES.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(n)?;
        }
        for (alias, _) in ATSSS_ALIASES {
            write!(f, ", {alias}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownName {}

/// Resolve `name` (case-insensitive, `_` accepted for `-`) to a canonical name.
fn canonical(name: &str) -> Option<&'static str> {
    let name = name.trim();
    if name.is_empty() {
        return Some("cpf");
    }
    let norm =
        |s: &str| s.eq_ignore_ascii_case(name) || s.replace('-', "_").eq_ignore_ascii_case(name);
    if let Some(n) = SCHEDULER_NAMES.iter().find(|n| norm(n)) {
        return Some(n);
    }
    ATSSS_ALIASES
        .iter()
        .find(|(alias, _)| norm(alias))
        .and_then(|(_, target)| SCHEDULER_NAMES.iter().find(|n| *n == target))
        .copied()
}

/// Build the scheduler `config.name` selects.
pub fn build(config: &SchedulerConfig) -> Result<Box<dyn Scheduler>, UnknownName> {
    let unknown = || UnknownName(config.name.clone());
    Ok(match canonical(&config.name).ok_or_else(unknown)? {
        "cpf" => Box::new(Cpf::new()),
        "rr" => Box::new(RoundRobin::new(config.rr_burst)),
        "srtt" => Box::new(MinSrtt::new()),
        "ratio" => Box::new(Ratio::new(&config.weights)),
        "redundant" => Box::new(Redundant::new()),
        "otias" => Box::new(Otias::new(config.otias_max_queue_rounds)),
        "handover" => Box::new(Handover::new(config.handover_switch_back_delay)),
        "acpf" => Box::new(Acpf::new(config.acpf_queue_delay)),
        "ecf" => Box::new(Ecf::new()),
        _ => return Err(unknown()),
    })
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
