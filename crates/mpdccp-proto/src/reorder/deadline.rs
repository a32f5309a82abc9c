//! The timer wheel of the active reorderers: deadlines of held packets.
//!
//! A path's deadlines are almost always non-decreasing (arrivals are in time
//! order and a path's wait changes only with its latency estimate), so each
//! arrival path keeps a FIFO and the earliest deadline is the least of a few
//! FIFO fronts — O(1) per packet instead of a heap's O(log n). A deadline
//! that would break a FIFO's order goes to a small heap instead, so the
//! result stays exact. Entries of packets released early are not searched
//! for: the caller drops stale fronts (`drop_stale`) and rebuilds when stale
//! entries dominate, which bounds memory.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::path::PathId;
use crate::time::Instant;

/// FIFOs kept; packets of further paths (a peer opening many) use the heap.
const MAX_FIFOS: usize = 16;

#[derive(Clone, Debug, Default)]
pub(crate) struct DeadlineQueue {
    /// Per arrival path (PathId order): (deadline, seq), deadline-ordered.
    fifos: Vec<(PathId, VecDeque<(Instant, u64)>)>,
    /// Out-of-order deadlines.
    spill: BinaryHeap<Reverse<(Instant, u64)>>,
    len: usize,
}

impl DeadlineQueue {
    pub(crate) fn push(&mut self, path: PathId, deadline: Instant, seq: u64) {
        self.len += 1;
        let i = match self.fifos.binary_search_by_key(&path, |(p, _)| *p) {
            Ok(i) => i,
            Err(_) if self.fifos.len() >= MAX_FIFOS => {
                self.spill.push(Reverse((deadline, seq)));
                return;
            }
            Err(i) => {
                self.fifos.insert(i, (path, VecDeque::new()));
                i
            }
        };
        let q = &mut self.fifos[i].1;
        if q.back().is_none_or(|&(t, _)| t <= deadline) {
            q.push_back((deadline, seq));
        } else {
            self.spill.push(Reverse((deadline, seq)));
        }
    }

    /// Earliest entry: `Some(fifo index)` or `None` for the heap.
    fn min_source(&self) -> Option<(Instant, u64, Option<usize>)> {
        let mut best = self.spill.peek().map(|&Reverse((t, s))| (t, s, None));
        for (i, (_, q)) in self.fifos.iter().enumerate() {
            if let Some(&(t, s)) = q.front() {
                if best.is_none_or(|(bt, bs, _)| (t, s) < (bt, bs)) {
                    best = Some((t, s, Some(i)));
                }
            }
        }
        best
    }

    /// The earliest (deadline, seq); exact once `drop_stale` ran.
    pub(crate) fn peek(&self) -> Option<(Instant, u64)> {
        self.min_source().map(|(t, s, _)| (t, s))
    }

    pub(crate) fn pop(&mut self) -> Option<(Instant, u64)> {
        let (t, s, src) = self.min_source()?;
        match src {
            Some(i) => {
                self.fifos[i].1.pop_front();
            }
            None => {
                self.spill.pop();
            }
        }
        self.len -= 1;
        Some((t, s))
    }

    /// Drop leading entries whose packet is gone (`seq < next`).
    pub(crate) fn drop_stale(&mut self, next: u64) {
        for (_, q) in &mut self.fifos {
            while q.front().is_some_and(|&(_, s)| s < next) {
                q.pop_front();
                self.len -= 1;
            }
        }
        while self.spill.peek().is_some_and(|&Reverse((_, s))| s < next) {
            self.spill.pop();
            self.len -= 1;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Replace every entry by `live` (path, deadline, seq), e.g. after many
    /// early releases left stale entries behind.
    pub(crate) fn rebuild(&mut self, live: impl Iterator<Item = (PathId, Instant, u64)>) {
        for (_, q) in &mut self.fifos {
            q.clear();
        }
        self.spill.clear();
        self.len = 0;
        for (p, t, s) in live {
            self.push(p, t, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_deadline_across_fifos_and_spill() {
        let mut q = DeadlineQueue::default();
        let t = Instant::from_millis;
        q.push(PathId(1), t(30), 1);
        q.push(PathId(0), t(20), 2);
        q.push(PathId(1), t(40), 3);
        q.push(PathId(1), t(10), 4); // out of order for path 1: heap
        assert_eq!(q.len(), 4);
        assert_eq!(q.pop(), Some((t(10), 4)));
        assert_eq!(q.pop(), Some((t(20), 2)));
        q.drop_stale(1); // nothing below 1
        assert_eq!(q.peek(), Some((t(30), 1)));
        q.drop_stale(3); // seqs below 3 released early
        assert_eq!(q.peek(), Some((t(40), 3)));
        assert_eq!(q.len(), 1);
        q.rebuild([(PathId(7), t(5), 9)].into_iter());
        assert_eq!((q.len(), q.pop(), q.pop()), (1, Some((t(5), 9)), None));
    }
}
