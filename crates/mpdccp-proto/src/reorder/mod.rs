//! Receiver reordering: deliver packets in connection-level (MP_SEQ) order, or
//! not, and decide how long a gap may hold delivery.
//!
//! The connection unwraps 48-bit MP_SEQ values to 64-bit sequence numbers
//! before they reach a reorderer. The connection calls [`Reorder::push`] for
//! each arriving data packet, then drains [`Reorder::pop`]; it arms a timer at
//! [`Reorder::poll_timeout`] and calls [`Reorder::handle_timeout`] when it
//! fires, so a deadline expires on time even if no other packet arrives.
//!
//! Strategies ([`ReorderKind`], built by [`build`] from a [`ReorderConfig`]):
//! * `passive` — arrival order, exact duplicates dropped;
//! * `active-fixed` — MP_SEQ order, a gap holds delivery at most `timeout`;
//! * `active-adaptive` — as fixed, timeout = slowest minus fastest path
//!   latency plus `offset`, capped at `max_timeout`;
//! * `equalized` — per arrival path: slowest path latency minus this path's
//!   (plus `offset`, capped);
//! * `delay-equalization` — every packet from a faster path is held until the
//!   slowest path's delay is matched, then released in MP_SEQ order;
//! * `per-flow` — per inner flow (5-tuple): a gap holds only a flow spread
//!   over paths whose packets it may be, at most the paths' latency spread
//!   (or learnt extent) plus `offset`, capped (see [`PerFlow`]).
//!
//! Guarantees of every strategy: memory is bounded (`max_hold_pkts`,
//! `max_hold_bytes`; overflow forces delivery and is counted), a sequence
//! number is delivered at most once (a bounded duplicate window; a packet too
//! old to be judged is dropped and counted `late`, never delivered twice),
//! and every deadline is reported by [`Reorder::poll_timeout`].

use std::fmt::Debug;
use std::time::Duration;

mod active;
mod dedup;
mod extent;
mod flow;
mod passive;
mod progress;

pub use active::{Active, ActiveMode};
pub use flow::{PerFlow, EQUALISE_LOSS_MEMORY, MAX_FLOWS, MAX_GAPS, SPREAD_MEMORY};
pub use passive::Passive;

use crate::path::{PathId, PathView};
use crate::time::Instant;

/// One data packet as it reaches the reorderer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReorderItem {
    /// Connection-level sequence number, unwrapped to 64 bits.
    pub seq: u64,
    /// Path it arrived on.
    pub path: PathId,
    /// When it arrived.
    pub arrival: Instant,
    /// The tunnelled packet.
    pub payload: Vec<u8>,
}

/// A packet released to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub seq: u64,
    pub path: PathId,
    pub arrival: Instant,
    /// Time spent held in the reorder buffer.
    pub held: std::time::Duration,
    /// True when released with a lower sequence number still missing
    /// (delivered out of order, or after giving up on a gap).
    pub after_gap: bool,
    pub payload: Vec<u8>,
}

/// Counters every reorderer keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReorderStats {
    pub received: u64,
    pub delivered: u64,
    /// Exact duplicates (redundant scheduling, retransmitted joins) dropped.
    pub duplicates: u64,
    /// Packets arriving below the delivery point after it moved past them.
    pub late: u64,
    /// Gaps given up on when their deadline passed (counted in missing
    /// sequence numbers).
    pub gaps_timed_out: u64,
    /// Gaps declared lost early (fast loss detection), in missing sequence
    /// numbers.
    pub gaps_fast_lost: u64,
    /// Times a due gap was waited for longer because a path that may still
    /// carry it kept delivering older numbers (`per-flow`).
    pub gaps_extended: u64,
    /// Deliveries forced because the buffer cap was reached.
    pub overflow_releases: u64,
    /// Packets currently held.
    pub held_pkts: u64,
    pub held_bytes: u64,
    /// Released packets discarded because the caller did not drain
    /// [`Reorder::pop`] before the ready queue reached the packet cap.
    pub overflow_drops: u64,
    /// Missing sequence numbers given up because the buffer cap forced
    /// delivery past them.
    pub gaps_overflow: u64,
    /// Inner TCP data segments delivered in MP_SEQ order that did not
    /// advance their flow's sequence number: the inner sender's
    /// retransmissions (`per-flow` only; what the inner flows lost on the
    /// way, including in the sending daemon's queue).
    pub inner_tcp_resent: u64,
}

/// Per-path receiver-side facts the connection supplies with each push: the
/// highest per-path DCCP sequence number seen lets fast loss detection prove a
/// gap is not on that path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathReceiveState {
    pub path: PathId,
    /// Highest connection-level seq delivered through this path so far.
    pub highest_seq: Option<u64>,
    /// True when the per-path DCCP sequence numbers show no packet of this
    /// path is missing (every DCCP seq up to the highest seen has arrived).
    pub in_order: bool,
}

pub trait Reorder: Send + Debug {
    /// The name used in config and results ("passive", "active-fixed", ...).
    fn name(&self) -> &'static str;

    /// A data packet arrived. `paths` gives the sender-side view the
    /// receiver has of each path (RTT, one-way delay estimates);
    /// `rx` the per-path receive state for fast loss detection.
    fn push(
        &mut self,
        now: Instant,
        item: ReorderItem,
        paths: &[PathView],
        rx: &[PathReceiveState],
    );

    /// False when [`Reorder::push`] ignores `paths` and `rx`: the
    /// connection then skips building them for every packet.
    fn reads_paths(&self) -> bool {
        true
    }

    /// Next packet ready for delivery at `now`, if any.
    fn pop(&mut self, now: Instant) -> Option<Delivered>;

    /// Earliest deadline at which held packets must be released.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Release what is due at `now` (then drain with [`Reorder::pop`]).
    fn handle_timeout(&mut self, now: Instant);

    fn stats(&self) -> ReorderStats;
}

crate::kind::named_kind! {
    /// The reordering strategies: the one list of their names (config, CLI,
    /// results).
    #[derive(Default)]
    pub enum ReorderKind ("reorder strategy") {
        #[default]
        Passive = "passive",
        ActiveFixed = "active-fixed",
        ActiveAdaptive = "active-adaptive",
        Equalized = "equalized",
        DelayEqualization = "delay-equalization",
        PerFlow = "per-flow",
    }
    aliases {}
}

pub use crate::kind::UnknownName;

/// Default gap timeout of `active-fixed`, and the fallback of the adaptive
/// strategies before any path latency is known.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// Default cap on any computed timeout.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_millis(500);
/// Default `offset` of the adaptive strategies (covers jitter).
pub const DEFAULT_OFFSET: Duration = Duration::from_millis(5);
/// Default buffer caps.
pub const DEFAULT_MAX_HOLD_PKTS: usize = 4096;
pub const DEFAULT_MAX_HOLD_BYTES: usize = 8 << 20;
/// Default duplicate-detection window, in sequence numbers.
pub const DEFAULT_DUP_WINDOW: usize = 16384;

/// Settings for every strategy; each reads the fields it needs. Zero values
/// mean "use the default" (the `DEFAULT_*` constants), so `Default` works.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReorderConfig {
    /// Which strategy.
    pub kind: ReorderKind,
    /// `active-fixed`: longest a gap holds delivery. 0 = [`DEFAULT_TIMEOUT`].
    /// Also the fallback of the adaptive strategies while no latency is known.
    pub timeout: Duration,
    /// Cap on the number of held packets; 0 = [`DEFAULT_MAX_HOLD_PKTS`].
    pub max_hold_pkts: usize,
    /// Cap on held payload bytes; 0 = [`DEFAULT_MAX_HOLD_BYTES`].
    pub max_hold_bytes: usize,
    /// Adaptive strategies: margin added to the latency difference (jitter);
    /// 0 = [`DEFAULT_OFFSET`]. Use [`ReorderConfig::no_offset`] for none.
    pub offset: Duration,
    /// Explicitly no offset (overrides `offset`).
    pub no_offset: bool,
    /// Adaptive strategies: cap on a computed timeout; 0 = [`DEFAULT_MAX_TIMEOUT`].
    pub max_timeout: Duration,
    /// Sequence numbers remembered for duplicate detection; 0 = [`DEFAULT_DUP_WINDOW`].
    pub dup_window: usize,
    /// First MP_SEQ the peer sends, when the connection knows it (RFC 9897
    /// starts at 0 after the handshake); `None` = learn from the first arrival.
    pub initial_seq: Option<u64>,
    /// Drop packets that arrive after their gap was given up (counted `late`)
    /// instead of delivering them out of order (the default, which spares an
    /// inner TCP a retransmission).
    pub drop_late: bool,
    /// Fast loss detection rule.
    pub fast_loss: FastLoss,
    /// `per-flow`: also hold a flow seen on one path only behind a gap that
    /// is likely its own packet detoured to a slower path ([`PerFlow`]).
    /// Worth it only while the sender keeps every path's queue short (the
    /// window delay bound): without it, the slower path's standing queue
    /// (150 ms on `asym`'s 8 Mbit/s path) makes a held flow wait behind it,
    /// and the spurious loss the detour causes is what keeps the inner flow
    /// off that path (measured: asym/quic 0.96 → 0.73 of the best path with
    /// this on and the bound off; 0.86 → 0.92 with both on).
    pub one_path_detours: bool,
    /// `per-flow`: a TCP flow spread over paths that saw no loss for
    /// [`EQUALISE_LOSS_MEMORY`] is delivered no earlier than the
    /// slowest path it used would deliver it ([`PerFlow`]). Assumes short
    /// path queues (the window delay bound): it adds base delays.
    pub equalise_spread_tcp: bool,
}

/// When a gap may be declared lost before its deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FastLoss {
    /// Only deadlines and overflow end a gap.
    Off,
    /// Each path is FIFO (one access link): a path that has delivered a
    /// higher MP_SEQ will not deliver the gap any more.
    #[default]
    Fifo,
    /// A path excludes the gap only when it has delivered a higher MP_SEQ
    /// and its DCCP sequence numbers show no hole
    /// ([`PathReceiveState::in_order`]): safe with reordering inside a path.
    Strict,
}

impl From<ReorderKind> for ReorderConfig {
    /// Config for `kind` with every other field at its default.
    fn from(kind: ReorderKind) -> Self {
        ReorderConfig {
            kind,
            ..ReorderConfig::default()
        }
    }
}

impl ReorderConfig {
    pub(crate) fn timeout(&self) -> Duration {
        nonzero_or(self.timeout, DEFAULT_TIMEOUT)
    }
    pub(crate) fn max_timeout(&self) -> Duration {
        nonzero_or(self.max_timeout, DEFAULT_MAX_TIMEOUT)
    }
    pub(crate) fn offset(&self) -> Duration {
        if self.no_offset {
            Duration::ZERO
        } else {
            nonzero_or(self.offset, DEFAULT_OFFSET)
        }
    }
    pub(crate) fn max_hold_pkts(&self) -> usize {
        if self.max_hold_pkts == 0 {
            DEFAULT_MAX_HOLD_PKTS
        } else {
            self.max_hold_pkts
        }
    }
    pub(crate) fn max_hold_bytes(&self) -> usize {
        if self.max_hold_bytes == 0 {
            DEFAULT_MAX_HOLD_BYTES
        } else {
            self.max_hold_bytes
        }
    }
    pub(crate) fn dup_window(&self) -> usize {
        if self.dup_window == 0 {
            DEFAULT_DUP_WINDOW
        } else {
            self.dup_window
        }
    }
}

/// Released packets kept for [`Reorder::pop`]: one push can release the whole
/// hold buffer plus the packet itself, so a caller that drains after every
/// push never loses one; a caller that never drains cannot grow memory.
pub(crate) fn ready_cap(max_hold_pkts: usize) -> usize {
    max_hold_pkts.saturating_mul(2).max(64)
}

/// Append a released packet to a ready queue bounded at `cap`: when full
/// (the caller is not draining [`Reorder::pop`]) the oldest is shed and
/// counted in `overflow_drops`, so memory never grows without bound.
pub(crate) fn push_ready(
    ready: &mut std::collections::VecDeque<Delivered>,
    cap: usize,
    stats: &mut ReorderStats,
    d: Delivered,
) {
    if ready.len() >= cap {
        ready.pop_front();
        stats.overflow_drops += 1;
    }
    ready.push_back(d);
}

fn nonzero_or(d: Duration, default: Duration) -> Duration {
    if d.is_zero() {
        default
    } else {
        d
    }
}

/// Build the strategy `config.kind` selects.
pub fn build(config: &ReorderConfig) -> Box<dyn Reorder> {
    match config.kind {
        ReorderKind::Passive => Box::new(Passive::new(config)),
        ReorderKind::ActiveFixed => Box::new(Active::new(ActiveMode::Fixed, config)),
        ReorderKind::ActiveAdaptive => Box::new(Active::new(ActiveMode::Adaptive, config)),
        ReorderKind::Equalized => Box::new(Active::new(ActiveMode::Equalized, config)),
        ReorderKind::DelayEqualization => {
            Box::new(Active::new(ActiveMode::DelayEqualization, config))
        }
        ReorderKind::PerFlow => Box::new(PerFlow::new(config)),
    }
}
