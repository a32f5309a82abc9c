//! Receiver reordering: deliver packets in connection-level (MP_SEQ) order, or
//! not, and decide how long a gap may hold delivery.
//!
//! The connection unwraps 48-bit MP_SEQ values to 64-bit sequence numbers
//! before they reach a reorderer. The connection calls [`Reorder::push`] for
//! each arriving data packet, then drains [`Reorder::pop`]; it arms a timer at
//! [`Reorder::poll_timeout`] and calls [`Reorder::handle_timeout`] when it
//! fires, so a deadline expires on time even if no other packet arrives.

use std::fmt::Debug;

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
pub struct ReorderStats {
    pub received: u64,
    pub delivered: u64,
    /// Exact duplicates (redundant scheduling, retransmitted joins) dropped.
    pub duplicates: u64,
    /// Packets arriving below the delivery point after it moved past them.
    pub late: u64,
    /// Gaps given up on when their deadline passed.
    pub gaps_timed_out: u64,
    /// Gaps declared lost early (fast loss detection).
    pub gaps_fast_lost: u64,
    /// Deliveries forced because the buffer cap was reached.
    pub overflow_releases: u64,
    /// Packets currently held.
    pub held_pkts: u64,
    pub held_bytes: u64,
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

    /// Next packet ready for delivery at `now`, if any.
    fn pop(&mut self, now: Instant) -> Option<Delivered>;

    /// Earliest deadline at which held packets must be released.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Release what is due at `now` (then drain with [`Reorder::pop`]).
    fn handle_timeout(&mut self, now: Instant);

    fn stats(&self) -> ReorderStats;
}
