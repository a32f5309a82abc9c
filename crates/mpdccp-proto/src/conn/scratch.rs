//! Buffers a connection reuses from one call to the next. They hold no
//! state between calls that matters to the protocol: each use clears or
//! refills them; they only spare an allocation per packet or per
//! scheduling round.

use crate::cc::CcSnapshot;
use crate::path::{PathId, PathView};
use crate::reorder::PathReceiveState;

#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The paths' views for the scheduler.
    pub(super) views: Vec<PathView>,
    /// Controller snapshots for a coupled controller.
    pub(super) snaps: Vec<CcSnapshot>,
    /// The paths' receive states for the reorderer.
    pub(super) rx_states: Vec<PathReceiveState>,
    /// The scheduler's answer.
    pub(super) sched_out: Vec<PathId>,
    /// DCCP numbers a subflow reported lost (connection retransmission).
    pub(super) lost_scratch: Vec<u64>,
    /// A datagram held back from a GSO batch.
    pub(super) held_buf: Vec<u8>,
    /// Buffers of delivered payloads handed back by the application
    /// ([`Connection::recycle_delivered`](super::Connection::recycle_delivered)):
    /// a received payload is copied into a warm buffer instead of a fresh
    /// allocation.
    pub(super) rx_pool: Vec<Vec<u8>>,
}
