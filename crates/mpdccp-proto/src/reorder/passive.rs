//! `passive` — deliver in arrival order; drop exact duplicates.
//!
//! No holding, so no deadlines; the only state is the duplicate window
//! (redundant scheduling sends one MP_SEQ on several paths).

use std::collections::VecDeque;
use std::time::Duration;

use super::dedup::{DedupWindow, Seen};
use super::{Delivered, PathReceiveState, Reorder, ReorderConfig, ReorderItem, ReorderStats};
use crate::path::PathView;
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct Passive {
    dedup: DedupWindow,
    /// Packets pushed but not yet popped (at most the ones of one push when
    /// the connection drains after each push; capped like a hold buffer).
    ready: VecDeque<Delivered>,
    max_ready_pkts: usize,
    /// Highest seq delivered, to flag out-of-order deliveries.
    highest: Option<u64>,
    stats: ReorderStats,
}

impl Passive {
    pub fn new(config: &ReorderConfig) -> Self {
        Passive {
            dedup: DedupWindow::new(config.dup_window()),
            ready: VecDeque::new(),
            max_ready_pkts: super::ready_cap(config.max_hold_pkts()),
            highest: None,
            stats: ReorderStats::default(),
        }
    }
}

impl Reorder for Passive {
    fn name(&self) -> &'static str {
        "passive"
    }

    fn reads_paths(&self) -> bool {
        false
    }

    fn push(
        &mut self,
        _now: Instant,
        item: ReorderItem,
        _paths: &[PathView],
        _rx: &[PathReceiveState],
    ) {
        self.stats.received += 1;
        match self.dedup.insert(item.seq) {
            Seen::New => {}
            Seen::Duplicate => {
                self.stats.duplicates += 1;
                return;
            }
            Seen::TooOld => {
                // Too old to know whether it was delivered: never risk twice.
                self.stats.late += 1;
                return;
            }
        }
        // In order = exactly the next number after the highest delivered.
        let after_gap = self.highest.is_some_and(|h| item.seq != h.wrapping_add(1));
        self.highest = Some(self.highest.map_or(item.seq, |h| h.max(item.seq)));
        let d = Delivered {
            seq: item.seq,
            path: item.path,
            arrival: item.arrival,
            held: Duration::ZERO,
            after_gap,
            payload: item.payload,
        };
        super::push_ready(&mut self.ready, self.max_ready_pkts, &mut self.stats, d);
    }

    fn pop(&mut self, _now: Instant) -> Option<Delivered> {
        let d = self.ready.pop_front()?;
        self.stats.delivered += 1;
        Some(d)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn stats(&self) -> ReorderStats {
        self.stats
    }
}
