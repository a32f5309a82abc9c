//! `redundant` — every packet on every usable path.
//!
//! One MP_SEQ for all copies; the receiver's duplicate window delivers it once
//! (see `reorder`). Operators buy redundancy against loss: a packet is lost
//! only when every copy is, so with independent losses p₁, p₂ the delivered
//! loss is p₁·p₂. Every copy therefore goes out: as soon as one path has
//! room the packet leaves there, and the copies for full paths wait in those
//! paths' bounded queues (one cwnd of packets; the connection drops a copy
//! beyond that and counts it in `ConnStats::send_queue.sched_copies_dropped`).
//! While no path has room the packet is held in the connection's queue.
//! Standby paths follow the module rule.

use super::{eligible, ready, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct Redundant;

impl Redundant {
    pub fn new() -> Self {
        Redundant
    }
}

impl Scheduler for Redundant {
    fn name(&self) -> &'static str {
        "redundant"
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        if !paths.iter().any(ready(paths, now)) {
            return;
        }
        let no_standby = standby_excluded(paths);
        out.extend(
            paths
                .iter()
                .filter(|p| eligible(p, no_standby))
                .map(|p| p.id),
        );
    }

    fn duplicates_every_packet(&self) -> bool {
        true
    }
}
