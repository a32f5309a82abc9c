//! The active strategies: `active-fixed`, `active-adaptive`, `equalized` and
//! `delay-equalization` — one engine, differing only in how long a packet
//! may be held.
//!
//! Model (draft-amend-iccrg-multipath-reordering; Amend et al., LCN 2019):
//! packets are released in MP_SEQ order. A packet arriving behind a gap gets
//! a deadline `arrival + wait`; when any held packet's deadline passes,
//! every gap below it is given up and everything up to it is released, so no
//! packet is held longer than its own `wait`. `wait` per strategy, with
//! `lat(p)` a path's one-way latency (`owd`, else SRTT/2) and max/min taken
//! over active paths with a known latency:
//!
//! * `active-fixed`: `timeout`;
//! * `active-adaptive`: `min(max(max − min, 5/4 · extent) + offset,
//!   max_timeout)`, `extent` the reordering extent in time learnt from
//!   arrivals ([`super::extent`]);
//! * `equalized`: `min(max − lat(arrival path) + offset, max_timeout)`;
//! * `delay-equalization`: every packet (in order or not) is held
//!   `min(max − lat(arrival path), max_timeout)`, so all paths show the
//!   slowest path's delay; a gap below a due packet means loss.
//!
//! Without any latency estimate the adaptive strategies fall back to
//! `timeout` for packets behind a gap.
//!
//! Fast loss detection ([`FastLoss`]): missing sequence numbers below the
//! lowest "highest MP_SEQ delivered" of all active paths cannot arrive any
//! more on a FIFO path — the scheduler hands MP_SEQs to each path in
//! increasing order — so they are declared lost at once instead of waiting
//! for the deadline.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;

use super::dedup::{DedupWindow, Seen};
use super::extent::Extent;
use super::progress::PathProgress;
use super::{
    Delivered, FastLoss, PathReceiveState, Reorder, ReorderConfig, ReorderItem, ReorderStats,
};
use crate::path::{PathId, PathState, PathView};
use crate::time::Instant;

/// Which active strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActiveMode {
    Fixed,
    Adaptive,
    Equalized,
    DelayEqualization,
}

impl ActiveMode {
    pub fn name(self) -> &'static str {
        match self {
            ActiveMode::Fixed => "active-fixed",
            ActiveMode::Adaptive => "active-adaptive",
            ActiveMode::Equalized => "equalized",
            ActiveMode::DelayEqualization => "delay-equalization",
        }
    }
}

#[derive(Clone, Debug)]
struct Held {
    item: ReorderItem,
    deadline: Instant,
    /// Held even when it is next in order (delay equalization).
    hold_in_order: bool,
}

/// Why a gap is being skipped, for the counters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Skip {
    Deadline,
    Overflow,
}

#[derive(Clone, Debug)]
pub struct Active {
    mode: ActiveMode,
    timeout: Duration,
    max_timeout: Duration,
    offset: Duration,
    max_hold_pkts: usize,
    max_hold_bytes: usize,
    drop_late: bool,
    fast_loss: FastLoss,
    /// Delivery point: every seq below it was delivered or given up.
    next: Option<u64>,
    held: BTreeMap<u64, Held>,
    held_bytes: usize,
    /// Deadlines of held packets; entries of released packets are skipped
    /// lazily and the heap is rebuilt when stale entries dominate.
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    ready: VecDeque<Delivered>,
    dedup: DedupWindow,
    /// Highest MP_SEQ seen per path (PathId order), for fast loss detection.
    progress: PathProgress,
    /// Missing seqs below this are known lost (fast loss detection).
    lost_below: u64,
    /// A gap was skipped since the last release.
    gap_skipped: bool,
    /// Reordering extent learnt from arrivals (`active-adaptive` only).
    extent: Extent,
    stats: ReorderStats,
}

impl Active {
    pub fn new(mode: ActiveMode, config: &ReorderConfig) -> Self {
        Active {
            mode,
            timeout: config.timeout(),
            max_timeout: config.max_timeout(),
            offset: config.offset(),
            max_hold_pkts: config.max_hold_pkts(),
            max_hold_bytes: config.max_hold_bytes(),
            drop_late: config.drop_late,
            fast_loss: config.fast_loss,
            next: config.initial_seq,
            held: BTreeMap::new(),
            held_bytes: 0,
            deadlines: BinaryHeap::new(),
            ready: VecDeque::new(),
            dedup: DedupWindow::new(config.dup_window()),
            progress: PathProgress::default(),
            lost_below: 0,
            gap_skipped: false,
            extent: Extent::default(),
            stats: ReorderStats::default(),
        }
    }

    /// How long a packet arriving on `path` may be held, and whether it is
    /// held even when in order.
    fn wait_for(&self, now: Instant, path: PathId, paths: &[PathView]) -> (Duration, bool) {
        if self.mode == ActiveMode::Fixed {
            return (self.timeout, false);
        }
        let lat = |p: &PathView| p.owd.or(p.srtt.map(|s| s / 2));
        let mut max: Option<Duration> = None;
        let mut min: Option<Duration> = None;
        let mut own: Option<Duration> = None;
        for p in paths {
            let l = lat(p);
            if p.id == path {
                own = l;
            }
            if let (PathState::Active, Some(l)) = (p.state, l) {
                max = Some(max.map_or(l, |m| m.max(l)));
                min = Some(min.map_or(l, |m| m.min(l)));
            }
        }
        let capped = |d: Duration| d.min(self.max_timeout);
        match self.mode {
            ActiveMode::Fixed => (self.timeout, false),
            ActiveMode::Adaptive => {
                let learnt = self.extent.at(now) * 5 / 4;
                match (max, min) {
                    (Some(max), Some(min)) => (
                        capped(max.saturating_sub(min).max(learnt) + self.offset),
                        false,
                    ),
                    _ => (self.timeout.max(capped(learnt + self.offset)), false),
                }
            }
            ActiveMode::Equalized => match (max, own) {
                (Some(max), Some(own)) => (capped(max.saturating_sub(own) + self.offset), false),
                _ => (self.timeout, false),
            },
            ActiveMode::DelayEqualization => match (max, own) {
                (Some(max), Some(own)) => (capped(max.saturating_sub(own)), true),
                _ => (self.timeout, false),
            },
        }
    }

    fn queue_ready(&mut self, item: ReorderItem, now: Instant, after_gap: bool) {
        let d = Delivered {
            seq: item.seq,
            path: item.path,
            arrival: item.arrival,
            held: now.saturating_duration_since(item.arrival),
            after_gap,
            payload: item.payload,
        };
        let cap = super::ready_cap(self.max_hold_pkts);
        super::push_ready(&mut self.ready, cap, &mut self.stats, d);
    }

    /// Release what may go at `now`; gaps at or below `force_upto` are given
    /// up (counted by `reason`).
    fn release(&mut self, now: Instant, mut force_upto: Option<u64>, reason: Skip) {
        let Some(mut next) = self.next else { return };
        // Expired deadlines force everything up to the highest expired seq.
        let mut expired = false;
        while let Some(&Reverse((t, s))) = self.deadlines.peek() {
            if t > now {
                break;
            }
            self.deadlines.pop();
            // Held seqs are exactly those at or above `next` with an entry.
            if s >= next {
                force_upto = Some(force_upto.map_or(s, |f| f.max(s)));
                expired = true;
            }
        }
        while let Some(entry) = self.held.first_entry() {
            let seq = *entry.key();
            let forced = force_upto.is_some_and(|f| seq <= f);
            if seq > next {
                if forced {
                    let missing = seq - next;
                    if reason == Skip::Overflow && !expired {
                        self.stats.gaps_overflow += missing;
                    } else {
                        self.stats.gaps_timed_out += missing;
                        if self.mode == ActiveMode::Adaptive {
                            self.extent.gave_up(next, seq, entry.get().item.arrival);
                        }
                    }
                    next = seq;
                    self.gap_skipped = true;
                } else if self.lost_below > next {
                    let upto = self.lost_below.min(seq);
                    self.stats.gaps_fast_lost += upto - next;
                    next = upto;
                    self.gap_skipped = true;
                    if next < seq {
                        break;
                    }
                } else {
                    break;
                }
            }
            let h = entry.get();
            if h.hold_in_order && h.deadline > now && !forced {
                break;
            }
            let h = entry.remove();
            self.held_bytes -= h.item.payload.len();
            next = seq.saturating_add(1);
            let gap = std::mem::take(&mut self.gap_skipped);
            self.queue_ready(h.item, now, gap);
        }
        // Gaps with nothing held above them stay open: nothing waits on them.
        self.next = Some(next);
        self.tidy_deadlines();
    }

    /// A packet below `next`: a duplicate, or late (its gap was given up
    /// already), delivered now out of order unless late ones are dropped.
    fn admit_below_next(&mut self, now: Instant, item: ReorderItem) {
        let seq = item.seq;
        match self.dedup.insert(seq) {
            Seen::Duplicate => self.stats.duplicates += 1,
            Seen::TooOld => self.stats.late += 1,
            Seen::New => {
                self.stats.late += 1;
                if self.mode == ActiveMode::Adaptive {
                    self.extent.late(now, seq);
                }
                if !self.drop_late {
                    self.queue_ready(item, now, true);
                }
            }
        }
    }

    /// Classify one arriving packet: duplicate, late, delivered at once, or held.
    fn admit(
        &mut self,
        now: Instant,
        item: ReorderItem,
        paths: &[PathView],
        rx: &[PathReceiveState],
    ) {
        self.stats.received += 1;
        let seq = item.seq;
        if seq == u64::MAX {
            // Never produced by the 48-bit unwrap; refusing it keeps `next` finite.
            self.stats.late += 1;
            return;
        }
        let next = *self.next.get_or_insert(seq);
        if seq < next {
            self.admit_below_next(now, item);
            return;
        }
        // At or above `next` a seq was never delivered, so the window's
        // "seen" means "held now"; beyond the window only `held` can tell.
        let duplicate = match self.dedup.insert(seq) {
            Seen::Duplicate => true,
            Seen::New => false,
            Seen::TooOld => self.held.contains_key(&seq),
        };
        if duplicate {
            self.stats.duplicates += 1;
            return;
        }
        self.progress.note(item.path, seq, now);
        if seq == next && self.mode != ActiveMode::DelayEqualization {
            // The common case: in order, nothing to hold, no wait to compute.
            if self.mode == ActiveMode::Adaptive {
                // It fills a gap that held packets wait on: how long since
                // the first of them (lowest seq above it) overtook it.
                if let Some((_, h)) = self.held.first_key_value() {
                    let d = now.saturating_duration_since(h.item.arrival);
                    self.extent.sample(now, d);
                }
            }
            self.next = Some(seq + 1);
            let gap = std::mem::take(&mut self.gap_skipped);
            self.queue_ready(item, now, gap);
        } else {
            let (wait, hold_in_order) = self.wait_for(now, item.path, paths);
            let deadline = item.arrival + wait;
            if seq == next && (!hold_in_order || deadline <= now) {
                self.next = Some(seq + 1);
                let gap = std::mem::take(&mut self.gap_skipped);
                self.queue_ready(item, now, gap);
            } else {
                self.held_bytes += item.payload.len();
                self.deadlines.push(Reverse((deadline, seq)));
                self.held.insert(
                    seq,
                    Held {
                        item,
                        deadline,
                        hold_in_order,
                    },
                );
            }
        }
        // The loss bound matters only while something waits on a gap; it is
        // a function of the per-path highest seqs (always recorded above),
        // so computing it only then gives the same answer.
        if !self.held.is_empty() {
            if let Some(b) = self.progress.fast_loss_bound(self.fast_loss, paths, rx) {
                self.lost_below = self.lost_below.max(b);
            }
        }
    }

    /// Drop stale heap tops so `poll_timeout` is exact; rebuild the heap when
    /// stale entries outnumber live ones (bounded memory).
    fn tidy_deadlines(&mut self) {
        // Released seqs are below `next`; every entry at or above it is live.
        let next = self.next.unwrap_or(0);
        while let Some(&Reverse((_, s))) = self.deadlines.peek() {
            if s >= next {
                break;
            }
            self.deadlines.pop();
        }
        if self.deadlines.len() > 2 * self.held.len() + 64 {
            self.deadlines = self
                .held
                .iter()
                .map(|(&s, h)| Reverse((h.deadline, s)))
                .collect();
        }
    }
}

impl Reorder for Active {
    fn name(&self) -> &'static str {
        self.mode.name()
    }

    fn push(
        &mut self,
        now: Instant,
        item: ReorderItem,
        paths: &[PathView],
        rx: &[PathReceiveState],
    ) {
        self.progress.forget_gone(paths);
        self.admit(now, item, paths, rx);
        // Deadlines due by now expire here too, whatever became of this packet.
        self.release(now, None, Skip::Deadline);
        // Bounded memory: force the oldest out until under both caps.
        while self.held.len() > self.max_hold_pkts || self.held_bytes > self.max_hold_bytes {
            let Some((&head, _)) = self.held.first_key_value() else {
                break;
            };
            self.stats.overflow_releases += 1;
            self.release(now, Some(head), Skip::Overflow);
        }
    }

    fn pop(&mut self, now: Instant) -> Option<Delivered> {
        if self.ready.is_empty() && self.poll_timeout().is_some_and(|t| t <= now) {
            self.release(now, None, Skip::Deadline);
        }
        let d = self.ready.pop_front()?;
        self.stats.delivered += 1;
        Some(d)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((t, _))| *t)
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.release(now, None, Skip::Deadline);
    }

    fn stats(&self) -> ReorderStats {
        ReorderStats {
            held_pkts: self.held.len() as u64,
            held_bytes: self.held_bytes as u64,
            ..self.stats
        }
    }
}
