//! The bounded send queue in front of the scheduler. DCCP is unreliable and
//! the tunnel must never buffer without bound: when full, either the newest
//! packet (the one being sent) or the oldest queued packet is dropped.
//! Buffers are recycled through a small pool so the steady state does not
//! allocate per packet.

use std::collections::VecDeque;
use std::time::Duration;

use super::aqm::{CoDel, CoDelConfig};
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
    /// Packets older than this are dropped at the head (none = no limit).
    max_delay: Option<Duration>,
    /// CoDel at the head (none = off).
    codel: Option<CoDel>,
}

/// Packets [`SendQueue::shed_head`] dropped, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shed {
    pub expired: u64,
    pub codel: u64,
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
            max_delay: None,
            codel: None,
        }
    }

    /// Bounds the queue in time: packets older than `max_delay` are
    /// dropped, and CoDel manages the standing delay (see `conn/aqm.rs`).
    pub fn with_time_limits(
        mut self,
        max_delay: Option<Duration>,
        codel: Option<CoDelConfig>,
    ) -> Self {
        self.max_delay = max_delay;
        self.codel = codel.map(CoDel::new);
        self
    }

    /// Drops head packets that waited too long (the age limit), then those
    /// CoDel decides to drop, before the head is offered to the scheduler.
    /// Copies of a multi-path decision never wait here, so every dropped
    /// packet is one the peer never gets a number for.
    pub fn shed_head(&mut self, now: Instant) -> Shed {
        let mut shed = Shed::default();
        while let Some(head) = self.q.front() {
            let sojourn = now.saturating_duration_since(head.enqueued);
            let expired = self.max_delay.is_some_and(|m| sojourn > m);
            let above_one = self.bytes > head.data.len();
            let codel = !expired
                && self
                    .codel
                    .as_mut()
                    .is_some_and(|c| c.drop_head(now, sojourn, above_one));
            if !(expired || codel) {
                break;
            }
            let old = self.pop().expect("head exists");
            self.recycle(old.data);
            if expired {
                shed.expired += 1;
            } else {
                shed.codel += 1;
            }
        }
        if self.q.is_empty() {
            if let Some(c) = &mut self.codel {
                c.on_empty();
            }
        }
        shed
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

    /// Drops the packets longer than `max_len`; returns how many.
    pub fn drop_longer_than(&mut self, max_len: usize) -> usize {
        let n = self.q.len();
        self.q.retain(|q| q.data.len() <= max_len);
        self.bytes = self.q.iter().map(|q| q.data.len()).sum();
        n - self.q.len()
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

    #[test]
    fn packets_older_than_the_age_limit_are_shed_at_the_head() {
        let ms = Duration::from_millis;
        let mut q = SendQueue::new(100, 100_000, DropPolicy::DropNewest)
            .with_time_limits(Some(ms(500)), None);
        let t = Instant::ZERO;
        q.push(t, b"old");
        q.push(t + ms(300), b"newer");
        assert_eq!(q.shed_head(t + ms(500)), Shed::default());
        assert_eq!(
            q.shed_head(t + ms(501)),
            Shed {
                expired: 1,
                codel: 0
            }
        );
        assert_eq!(q.front().unwrap().data, b"newer");
        assert_eq!(q.bytes(), 5);
        assert_eq!(
            q.shed_head(t + ms(900)),
            Shed {
                expired: 1,
                codel: 0
            }
        );
        assert_eq!(q.len(), 0);
    }

    /// A standing queue of 20 ms sojourn under CoDel's defaults: the first
    /// drop after 100 ms above target, never the last packet.
    #[test]
    fn codel_sheds_a_standing_queue_but_not_its_last_packet() {
        let ms = Duration::from_millis;
        let mut q = SendQueue::new(1000, 1_000_000, DropPolicy::DropNewest)
            .with_time_limits(None, Some(CoDelConfig::default()));
        let t0 = Instant::ZERO;
        let mut shed = 0;
        // One packet in, one out every ms, 20 in the queue: sojourn 20 ms.
        for k in 0..20u64 {
            q.push(t0 + ms(k), b"p");
        }
        for k in 20..400u64 {
            let now = t0 + ms(k);
            q.push(now, b"p");
            let s = q.shed_head(now);
            assert_eq!(s.expired, 0);
            if s.codel > 0 && shed == 0 {
                assert!(
                    k >= 120,
                    "first drop at {k} ms, before an interval above target"
                );
            }
            shed += s.codel;
            q.pop();
        }
        assert!((3..30).contains(&shed), "{shed} drops");
        // One packet left with a huge sojourn: kept.
        q.clear();
        q.push(t0, b"p");
        assert_eq!(q.shed_head(t0 + ms(10_000)).codel, 0);
        assert_eq!(q.len(), 1);
    }
}
