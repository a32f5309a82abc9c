//! A packet waiting in the send queue, as both queue disciplines hold it:
//! the FIFO (`queue.rs`) and the flow queues (`fq.rs`).

use crate::time::Instant;

#[derive(Debug)]
pub(crate) struct Queued {
    pub data: Vec<u8>,
    pub enqueued: Instant,
    /// One of several copies of a multi-path (redundant) decision, all
    /// under one MP_SEQ: the other copies carry it, so it is never
    /// reinjected under a new MP_SEQ (the receiver could not recognise
    /// that as a duplicate).
    pub copy: bool,
}
