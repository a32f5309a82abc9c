//! The event queue: a binary heap of `(time, sequence number)` entries.
//!
//! Every schedulable component (a connection's timer, a link's next delivery,
//! a traffic source's next action, the sampling tick) is a [`Target`] with
//! one live deadline. Re-arming a target bumps its generation; entries whose
//! generation is stale are skipped when popped, so re-arming never needs a
//! heap search. Ties in time are broken by the insertion sequence number, which
//! makes the order of simultaneous events — and so every result — deterministic.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mpdccp_proto::Instant;

/// Index of a schedulable component (assigned by the engine).
pub type Target = usize;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    target: u32,
    generation: u32,
}

/// Up to this many targets, `pop_until` scans the live deadlines instead
/// of keeping a heap: a scenario has a dozen or so, and a scan of them
/// costs less than a heap push plus a pop (with its stale entries).
const SCAN_MAX_TARGETS: usize = 32;

/// Deadlines of a fixed set of targets, ordered by `(time, seq)`.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    /// Per target: the live deadline and its generation.
    armed: Vec<(Option<Instant>, u32)>,
    /// Scan mode, per target: its live deadline's `(time, seq)` as one
    /// number (`u128::MAX` when disarmed), so the scan is a `min`.
    keys: Vec<u128>,
    next_seq: u64,
    /// Few targets: no heap, `pop_until` scans `keys` (same order).
    scan: bool,
}

impl EventQueue {
    pub fn new(targets: usize) -> Self {
        let scan = targets <= SCAN_MAX_TARGETS;
        EventQueue {
            heap: BinaryHeap::with_capacity(if scan { 0 } else { 4 * targets + 16 }),
            armed: vec![(None, 0); targets],
            keys: vec![u128::MAX; targets],
            next_seq: 0,
            scan,
        }
    }

    /// Arm `target` at `at` (replacing its previous deadline), or disarm it
    /// with `None`. Re-arming at the same time is a no-op, so the tie order
    /// of an already queued entry is kept.
    pub fn set(&mut self, target: Target, at: Option<Instant>) {
        let slot = &mut self.armed[target];
        if slot.0 == at {
            return;
        }
        slot.1 = slot.1.wrapping_add(1);
        slot.0 = at;
        if self.scan {
            self.keys[target] = u128::MAX;
        }
        if let Some(at) = at {
            self.next_seq += 1;
            if self.scan {
                self.keys[target] = (u128::from(at.as_nanos()) << 64) | u128::from(self.next_seq);
                return;
            }
            self.heap.push(Reverse(Entry {
                at,
                seq: self.next_seq,
                target: target as u32,
                generation: slot.1,
            }));
            // Re-arming leaves the old entry behind (skipped when popped); a
            // timer re-armed per packet would grow the heap without bound and
            // slow every pop, so drop stale entries once they dominate.
            if self.heap.len() > 4 * self.armed.len() + 64 {
                let armed = &self.armed;
                self.heap.retain(|Reverse(e)| {
                    let slot = armed[e.target as usize];
                    slot.1 == e.generation && slot.0 == Some(e.at)
                });
            }
        }
    }

    /// The live deadline of `target`.
    pub fn deadline(&self, target: Target) -> Option<Instant> {
        self.armed[target].0
    }

    /// Remove and return the earliest live deadline at or before `until`.
    /// The target is disarmed; its handler re-arms it as needed.
    pub fn pop_until(&mut self, until: Instant) -> Option<(Instant, Target)> {
        if self.scan {
            // The live entry least in `(time, seq)`: the heap's order.
            let (mut t, mut key) = (0, u128::MAX);
            for (i, &k) in self.keys.iter().enumerate() {
                if k < key {
                    (t, key) = (i, k);
                }
            }
            let at = self.armed[t].0.filter(|_| key != u128::MAX)?;
            if at > until {
                return None;
            }
            self.armed[t].0 = None;
            self.keys[t] = u128::MAX;
            return Some((at, t));
        }
        while let Some(Reverse(e)) = self.heap.peek().copied() {
            let slot = &mut self.armed[e.target as usize];
            if slot.1 != e.generation || slot.0 != Some(e.at) {
                self.heap.pop();
                continue;
            }
            if e.at > until {
                return None;
            }
            self.heap.pop();
            slot.0 = None;
            return Some((e.at, e.target as usize));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order_and_skips_rearmed_entries() {
        let mut q = EventQueue::new(4);
        let t = Instant::from_millis;
        q.set(0, Some(t(5)));
        q.set(1, Some(t(3)));
        q.set(2, Some(t(5)));
        q.set(3, Some(t(1)));
        q.set(3, Some(t(7))); // re-armed: the t=1 entry is stale
        q.set(1, None); // disarmed
        assert_eq!(q.pop_until(t(100)), Some((t(5), 0)));
        assert_eq!(q.pop_until(t(100)), Some((t(5), 2)));
        assert_eq!(q.pop_until(t(6)), None);
        assert_eq!(q.pop_until(t(100)), Some((t(7), 3)));
        assert_eq!(q.pop_until(t(100)), None);
    }

    #[test]
    fn scan_and_heap_pop_in_the_same_order() {
        let t = Instant::from_millis;
        let n = SCAN_MAX_TARGETS + 1;
        let mut scan = EventQueue::new(4);
        let mut heap = EventQueue::new(n);
        assert!(scan.scan && !heap.scan);
        // A fixed pseudo-random mix of arms, re-arms (same and other
        // times), disarms and pops over 4 targets.
        let mut x = 12345u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let target = (x >> 33) as usize % 4;
            let at = match (x >> 40) % 8 {
                0 => None,
                k => Some(t(k % 5)),
            };
            if (x >> 50).is_multiple_of(3) {
                let until = t((x >> 20) % 6);
                assert_eq!(scan.pop_until(until), heap.pop_until(until));
            } else {
                scan.set(target, at);
                heap.set(target, at);
            }
        }
    }

    #[test]
    fn stale_entries_of_a_rearmed_timer_do_not_accumulate() {
        // The heap mode (the scan keeps no entries).
        let targets = SCAN_MAX_TARGETS + 1;
        let mut q = EventQueue::new(targets);
        let t = Instant::from_millis;
        q.set(1, Some(t(50)));
        for k in 0..10_000 {
            q.set(0, Some(t(100 + k)));
            q.set(2, Some(t(200 + k)));
        }
        assert!(
            q.heap.len() <= 4 * targets + 64 + 1,
            "heap holds {}",
            q.heap.len()
        );
        assert_eq!(q.pop_until(t(1_000_000)), Some((t(50), 1)));
        assert_eq!(q.pop_until(t(1_000_000)), Some((t(10_099), 0)));
        assert_eq!(q.pop_until(t(1_000_000)), Some((t(10_199), 2)));
        assert_eq!(q.pop_until(t(1_000_000)), None);
    }
}
