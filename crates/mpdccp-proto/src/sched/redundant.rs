//! `redundant` — every packet on every path that can send it now.
//!
//! One MP_SEQ for all copies; the receiver's duplicate window delivers it once
//! (see `reorder`). A full path is skipped for this packet rather than
//! holding the others back: redundancy is for latency and loss, and the
//! fastest copy should leave at once. Standby paths follow the module rule.

use super::{eligible, standby_excluded, PacketMeta, Scheduler};
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
        let no_standby = standby_excluded(paths);
        out.extend(
            paths
                .iter()
                .filter(|p| eligible(p, no_standby) && p.can_send(now))
                .map(|p| p.id),
        );
    }
}
