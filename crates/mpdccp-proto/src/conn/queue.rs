//! The bounded send queue in front of the scheduler. DCCP is unreliable and
//! the tunnel must never buffer without bound: when full, either the newest
//! packet (the one being sent) or the oldest queued packet is dropped.
//! Buffers are recycled through a small pool so the steady state does not
//! allocate per packet.

use std::collections::VecDeque;

use crate::time::Instant;

/// What to drop when the send queue is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DropPolicy {
    /// Refuse the packet being sent (tail drop).
    #[default]
    DropNewest,
    /// Drop the oldest queued packet to make room (head drop: fresher data
    /// for real-time traffic).
    DropOldest,
}

#[derive(Debug)]
pub(crate) struct Queued {
    pub data: Vec<u8>,
    pub enqueued: Instant,
    /// One of several copies of a multi-path (redundant) decision, all
    /// under one MP_SEQ: the other copies carry it, so it is never
    /// reinjected under a new MP_SEQ (the receiver could not recognise
    /// that as a duplicate).
    pub copy: bool,
}

#[derive(Debug)]
pub(crate) struct SendQueue {
    q: VecDeque<Queued>,
    bytes: usize,
    max_pkts: usize,
    max_bytes: usize,
    policy: DropPolicy,
    pool: Vec<Vec<u8>>,
}

/// Outcome of [`SendQueue::push`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PushOutcome {
    Queued,
    /// Queued after dropping this many older packets.
    QueuedDroppedOldest(usize),
    Rejected,
}

const POOL_MAX: usize = 256;

impl SendQueue {
    pub fn new(max_pkts: usize, max_bytes: usize, policy: DropPolicy) -> Self {
        SendQueue {
            q: VecDeque::new(),
            bytes: 0,
            max_pkts: max_pkts.max(1),
            max_bytes: max_bytes.max(1),
            policy,
            pool: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    pub fn front(&self) -> Option<&Queued> {
        self.q.front()
    }

    pub fn push(&mut self, now: Instant, packet: &[u8]) -> PushOutcome {
        if packet.len() > self.max_bytes {
            return PushOutcome::Rejected;
        }
        let full = |s: &Self| s.q.len() + 1 > s.max_pkts || s.bytes + packet.len() > s.max_bytes;
        let mut dropped = 0;
        if full(self) {
            match self.policy {
                DropPolicy::DropNewest => return PushOutcome::Rejected,
                DropPolicy::DropOldest => {
                    while full(self) {
                        match self.q.pop_front() {
                            Some(old) => {
                                self.bytes -= old.data.len();
                                self.recycle(old.data);
                                dropped += 1;
                            }
                            None => return PushOutcome::Rejected,
                        }
                    }
                }
            }
        }
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(packet);
        self.bytes += data.len();
        self.q.push_back(Queued {
            data,
            enqueued: now,
            copy: false,
        });
        if dropped > 0 {
            PushOutcome::QueuedDroppedOldest(dropped)
        } else {
            PushOutcome::Queued
        }
    }

    pub fn pop(&mut self) -> Option<Queued> {
        let q = self.q.pop_front()?;
        self.bytes -= q.data.len();
        Some(q)
    }

    /// Puts packets back at the head (e.g. taken back from a path that went
    /// down), ignoring limits: they were admitted once already.
    pub fn push_front(&mut self, q: Queued) {
        self.bytes += q.data.len();
        self.q.push_front(q);
    }

    /// Returns a buffer to the pool.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }

    pub fn clear(&mut self) -> usize {
        let n = self.q.len();
        while let Some(q) = self.pop() {
            self.recycle(q.data);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_with_both_policies() {
        let t = Instant::ZERO;
        let mut q = SendQueue::new(2, 1000, DropPolicy::DropNewest);
        assert_eq!(q.push(t, b"a"), PushOutcome::Queued);
        assert_eq!(q.push(t, b"b"), PushOutcome::Queued);
        assert_eq!(q.push(t, b"c"), PushOutcome::Rejected);
        assert_eq!(q.pop().unwrap().data, b"a");

        let mut q = SendQueue::new(10, 5, DropPolicy::DropOldest);
        q.push(t, b"aa");
        q.push(t, b"bb");
        assert_eq!(q.push(t, b"ccc"), PushOutcome::QueuedDroppedOldest(1));
        assert_eq!(q.bytes(), 5);
        assert_eq!(q.pop().unwrap().data, b"bb");
        assert_eq!(q.push(t, b"dddddd"), PushOutcome::Rejected);
    }
}
