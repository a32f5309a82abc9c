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

use std::fmt::Debug;

use crate::path::{PathId, PathView};
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
}
