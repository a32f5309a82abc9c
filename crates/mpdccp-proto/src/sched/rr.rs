//! `rr` — round robin over the paths with room, `burst` packets per turn.
//!
//! Order is `PathId` order. A path without room (cwnd or pacing) is skipped
//! for this turn, so a full path does not stall the others; a burst is cut
//! short when its path fills. Standby paths take part only when no better
//! path is usable (see the module rules).

use super::{eligible, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct RoundRobin {
    burst: u32,
    /// Path of the current turn and packets it has carried in this turn.
    current: Option<PathId>,
    sent_in_turn: u32,
}

impl RoundRobin {
    /// `burst` packets per path per turn; 0 means 1.
    pub fn new(burst: u32) -> Self {
        RoundRobin {
            burst: burst.max(1),
            current: None,
            sent_in_turn: 0,
        }
    }
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        "rr"
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        let no_standby = standby_excluded(paths);
        let ok = |p: &PathView| eligible(p, no_standby) && p.can_send(now);
        // Continue the current turn while its burst lasts and the path has room.
        if let Some(cur) = self.current {
            if self.sent_in_turn < self.burst && paths.iter().any(|p| p.id == cur && ok(p)) {
                self.sent_in_turn += 1;
                out.push(cur);
                return;
            }
        }
        // Next path after the current one (wrapping), in PathId order.
        let after = self.current;
        let next = paths
            .iter()
            .filter(|p| after.is_none_or(|c| p.id > c))
            .chain(paths.iter().filter(|p| after.is_some_and(|c| p.id <= c)))
            .find(|p| ok(p));
        if let Some(p) = next {
            self.current = Some(p.id);
            self.sent_in_turn = 1;
            out.push(p.id);
        }
    }
}
