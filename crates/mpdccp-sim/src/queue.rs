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

/// Deadlines of a fixed set of targets, ordered by `(time, seq)`.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    /// Per target: the live deadline and its generation.
    armed: Vec<(Option<Instant>, u32)>,
    next_seq: u64,
}

impl EventQueue {
    pub fn new(targets: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(4 * targets + 16),
            armed: vec![(None, 0); targets],
            next_seq: 0,
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
        if let Some(at) = at {
            self.next_seq += 1;
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
    fn stale_entries_of_a_rearmed_timer_do_not_accumulate() {
        let mut q = EventQueue::new(3);
        let t = Instant::from_millis;
        q.set(1, Some(t(50)));
        for k in 0..10_000 {
            q.set(0, Some(t(100 + k)));
            q.set(2, Some(t(200 + k)));
        }
        assert!(
            q.heap.len() <= 4 * 3 + 64 + 1,
            "heap holds {}",
            q.heap.len()
        );
        assert_eq!(q.pop_until(t(1_000_000)), Some((t(50), 1)));
        assert_eq!(q.pop_until(t(1_000_000)), Some((t(10_099), 0)));
        assert_eq!(q.pop_until(t(1_000_000)), Some((t(10_199), 2)));
        assert_eq!(q.pop_until(t(1_000_000)), None);
    }
}
