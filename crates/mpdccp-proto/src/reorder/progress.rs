//! Per-path delivery progress and the fast-loss bound both gap-tracking
//! reorderers (`active-*`, `per-flow`) share: on a path that delivers in
//! order (FIFO), an MP_SEQ below the highest one it delivered will not
//! arrive on it any more, so once every active path is past a gap the gap
//! is lost (RFC 9897 §3.6 leaves loss detection to the receiver; the
//! reordering draft's "fast loss detection").

use super::{FastLoss, PathReceiveState};
use crate::path::{PathId, PathState, PathView};
use crate::time::Instant;

/// What one path delivered: its highest MP_SEQ and when it last
/// delivered anything.
#[derive(Clone, Copy, Debug)]
struct PathMark {
    path: PathId,
    highest: u64,
    last_at: Instant,
}

/// Every path's [`PathMark`], kept in `PathId` order.
#[derive(Clone, Debug, Default)]
pub(super) struct PathProgress {
    marks: Vec<PathMark>,
}

impl PathProgress {
    /// Records that `path` delivered `seq` at `now`.
    pub(super) fn note(&mut self, path: PathId, seq: u64, now: Instant) {
        match self.marks.binary_search_by_key(&path, |m| m.path) {
            Ok(i) => {
                let m = &mut self.marks[i];
                m.highest = m.highest.max(seq);
                m.last_at = m.last_at.max(now);
            }
            Err(i) => self.marks.insert(
                i,
                PathMark {
                    path,
                    highest: seq,
                    last_at: now,
                },
            ),
        }
    }

    /// The last time a path that may still deliver an MP_SEQ below `end`
    /// (its highest delivered is below `end − 1`: a path delivers in
    /// order) delivered anything after `since` — the last sign that the
    /// missing number can still be in flight behind that path's queue.
    /// `None` when no such path delivered since `since`.
    pub(super) fn behind_and_moving(&self, end: u64, since: Instant) -> Option<Instant> {
        self.marks
            .iter()
            .filter(|m| m.highest.saturating_add(1) < end && m.last_at > since)
            .map(|m| m.last_at)
            .max()
    }

    /// Forgets paths the connection no longer has (closed subflows are
    /// reaped; a rejoining path comes back under a new id), so a flapping
    /// interface does not grow the table without bound. Only past a slack,
    /// so callers passing a partial view lose nothing.
    pub(super) fn forget_gone(&mut self, paths: &[PathView]) {
        if self.marks.len() > paths.len() + 16 {
            self.marks.retain(|m| paths.iter().any(|v| v.id == m.path));
        }
    }

    /// Highest MP_SEQ known delivered through `path` (own record and the
    /// connection's), and whether its DCCP sequence shows no hole. Lookups
    /// are hinted: `cursor` walks `marks` (both in `PathId` order) and
    /// `hint` is where `path` probably is in `rx` (the connection lists
    /// paths in the same order in `paths` and `rx`).
    fn of(
        &self,
        path: PathId,
        rx: &[PathReceiveState],
        hint: usize,
        cursor: &mut usize,
    ) -> (Option<u64>, bool) {
        while self.marks.get(*cursor).is_some_and(|m| m.path < path) {
            *cursor += 1;
        }
        let own = match self.marks.get(*cursor) {
            Some(m) if m.path == path => Some(m.highest),
            // Not in PathId order after all: search.
            _ => self
                .marks
                .iter()
                .find(|m| m.path == path)
                .map(|m| m.highest),
        };
        let r = rx
            .get(hint)
            .filter(|r| r.path == path)
            .or_else(|| rx.iter().find(|r| r.path == path));
        let highest = match (own, r.and_then(|r| r.highest_seq)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        (highest, r.is_some_and(|r| r.in_order))
    }

    /// The fast-loss bound: every MP_SEQ below it that is still missing is
    /// lost. It is the lowest highest-delivered MP_SEQ over the active paths
    /// (failed and closed ones are not waited for; without a path view,
    /// every path in `rx`), and exists only when every such path has
    /// delivered something — and, in `Strict` mode, shows no hole of its
    /// own that could be the gap.
    pub(super) fn fast_loss_bound(
        &self,
        mode: FastLoss,
        paths: &[PathView],
        rx: &[PathReceiveState],
    ) -> Option<u64> {
        if mode == FastLoss::Off {
            return None;
        }
        let strict = mode == FastLoss::Strict;
        let mut bound: Option<u64> = None;
        let mut consider = |(highest, in_order): (Option<u64>, bool)| -> bool {
            match highest {
                Some(h) if !strict || in_order => {
                    bound = Some(bound.map_or(h, |b| b.min(h)));
                    true
                }
                // A path that delivered nothing yet (or, strictly, has a
                // hole that may be the gap) may still deliver it.
                _ => false,
            }
        };
        let mut cursor = 0;
        let all = if !paths.is_empty() {
            paths
                .iter()
                .enumerate()
                .filter(|(_, p)| p.state == PathState::Active)
                .all(|(i, p)| consider(self.of(p.id, rx, i, &mut cursor)))
        } else if !rx.is_empty() {
            rx.iter()
                .enumerate()
                .all(|(i, r)| consider(self.of(r.path, rx, i, &mut cursor)))
        } else {
            // Nothing tells us which paths exist: cannot prove anything.
            false
        };
        if all {
            bound
        } else {
            None
        }
    }
}
