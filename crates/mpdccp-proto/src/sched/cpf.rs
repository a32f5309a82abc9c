//! `cpf` — cheapest pipe first.
//!
//! The default MP-DCCP scheduler (Amend et al., "A Framework for Multiaccess
//! Support for Unreliable Internet Traffic using Multipath DCCP", LCN 2019):
//! fill the preferred path while its congestion window (and pacing budget)
//! has room, then spill to the next. Preference is the RFC 9897 MP_PRIO
//! (higher first), then the lower smoothed RTT, then the lower `PathId`.
//! Because full paths are skipped, traffic spills over exactly when the
//! preferred path's window is full and returns as soon as it frees.

use super::{eligible, srtt_rank, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

/// Cheapest pipe first. Stateless.
#[derive(Clone, Debug, Default)]
pub struct Cpf;

impl Cpf {
    pub fn new() -> Self {
        Cpf
    }
}

/// The CPF choice among paths with room, without touching any state; shared
/// with `acpf`, which narrows "room" further.
pub(crate) fn cheapest(
    paths: &[PathView],
    mut room: impl FnMut(&PathView) -> bool,
) -> Option<&PathView> {
    let no_standby = standby_excluded(paths);
    let mut best: Option<&PathView> = None;
    for p in paths {
        if !eligible(p, no_standby) || !room(p) {
            continue;
        }
        best = match best {
            // Strictly better only: ties keep the lower PathId (paths arrive in PathId order).
            Some(b) if !better(p, b) => Some(b),
            _ => Some(p),
        };
    }
    best
}

/// CPF order: higher MP_PRIO, then lower SRTT.
pub(crate) fn better(a: &PathView, b: &PathView) -> bool {
    (std::cmp::Reverse(a.priority), srtt_rank(a)) < (std::cmp::Reverse(b.priority), srtt_rank(b))
}

impl Scheduler for Cpf {
    fn name(&self) -> &'static str {
        "cpf"
    }

    /// Stateless; picks among `ready`/`can_send` paths only.
    fn holds_unless_a_path_can_send(&self) -> bool {
        true
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        if let Some(p) = cheapest(paths, |p| p.can_send(now)) {
            out.push(p.id);
        }
    }
}
