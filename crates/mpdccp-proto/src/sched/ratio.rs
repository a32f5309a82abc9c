//! `ratio` — fixed split by configured weights (3GPP ATSSS "load balancing",
//! TS 23.501 §5.32.8), still skipping paths without room.
//!
//! Credit scheme (smooth weighted round robin, as in deficit round robin,
//! Shreedhar & Varghese, SIGCOMM '95): on every decision each usable path
//! earns its weight in credit; the path with room holding the most credit is
//! chosen and pays the sum of the weights earned. Credits sum to zero, so
//! while every path has room the split over any `W` consecutive packets is
//! exact (and the packets interleave smoothly rather than in bursts). A path
//! that is full keeps earning, and is paid back when it frees; credit is
//! capped at `CREDIT_CAP_ROUNDS` rounds of weights so a long-full path cannot
//! later monopolise the connection — past the cap its share spills to the
//! others, which is the point of skipping full paths.

use super::{eligible, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

/// Credit (and debt) bound, in rounds of the total weight.
const CREDIT_CAP_ROUNDS: i64 = 4;

#[derive(Clone, Debug)]
pub struct Ratio {
    weights: Vec<u32>,
    /// Credit per path, `PathId` order; entries for vanished paths are pruned.
    credit: Vec<(PathId, i64)>,
}

impl Ratio {
    /// `weights[i]` applies to the i-th path of the `PathId`-ordered list;
    /// empty = equal weights; a path beyond the list gets 0 (spill only).
    pub fn new(weights: &[u32]) -> Self {
        Ratio {
            weights: weights.to_vec(),
            credit: Vec::new(),
        }
    }

    fn weight(&self, index: usize) -> i64 {
        if self.weights.is_empty() {
            1
        } else {
            i64::from(self.weights.get(index).copied().unwrap_or(0))
        }
    }

    /// Credit slot for `id`, inserted in `PathId` order when new (the vector
    /// grows only when a path appears, never per decision).
    fn slot(&mut self, id: PathId) -> usize {
        match self.credit.binary_search_by_key(&id, |(p, _)| *p) {
            Ok(i) => i,
            Err(i) => {
                self.credit.insert(i, (id, 0));
                i
            }
        }
    }
}

impl Scheduler for Ratio {
    fn name(&self) -> &'static str {
        "ratio"
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        let no_standby = standby_excluded(paths);
        // Forget paths that are gone (closed paths leave the list): a merge
        // walk, both lists being in PathId order (were `paths` not sorted,
        // the worst outcome is a credit reset).
        let mut j = 0;
        self.credit.retain(|(id, _)| {
            while paths.get(j).is_some_and(|p| p.id < *id) {
                j += 1;
            }
            paths.get(j).is_some_and(|p| p.id == *id)
        });
        let mut total: i64 = 0;
        let mut best: Option<(usize, i64, PathId)> = None; // (slot, credit, id)
        for (index, p) in paths.iter().enumerate() {
            if !eligible(p, no_standby) {
                continue;
            }
            let w = self.weight(index);
            total += w;
            let slot = self.slot(p.id);
            self.credit[slot].1 += w;
            let c = self.credit[slot].1;
            if p.can_send(now) && best.is_none_or(|(_, bc, _)| c > bc) {
                best = Some((slot, c, p.id));
            }
        }
        let Some((slot, _, id)) = best else {
            // Nothing can send: undo this round's earnings, no packet left.
            for (index, p) in paths.iter().enumerate() {
                if eligible(p, no_standby) {
                    let w = self.weight(index);
                    let slot = self.slot(p.id);
                    self.credit[slot].1 -= w;
                }
            }
            return;
        };
        self.credit[slot].1 -= total.max(1);
        let cap = CREDIT_CAP_ROUNDS * total.max(1);
        for (_, c) in &mut self.credit {
            *c = (*c).clamp(-cap, cap);
        }
        out.push(id);
    }
}
