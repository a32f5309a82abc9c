//! The bounded send queue in front of the scheduler. DCCP is unreliable and
//! the tunnel must never buffer without bound: when full, either the newest
//! packet (the one being sent) or the oldest queued packet is dropped.
//! Buffers are recycled through a small pool so the steady state does not
//! allocate per packet. Optionally the queue is one queue per inner flow
//! (FQ-CoDel, `conn/fq.rs`); then a full queue drops the head of the
//! fattest flow instead.

use std::collections::VecDeque;
use std::time::Duration;

use super::aqm::{CoDel, CoDelConfig};
use super::fq::FlowQueues;
use super::queued::Queued;
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
pub(crate) struct SendQueue {
    /// The single FIFO (unused with `fq`).
    q: VecDeque<Queued>,
    /// Flow queues instead of `q` (none = the FIFO).
    fq: Option<FlowQueues>,
    /// Totals over whichever holds the packets.
    len: usize,
    bytes: usize,
    max_pkts: usize,
    max_bytes: usize,
    policy: DropPolicy,
    pool: Vec<Vec<u8>>,
    /// Packets older than this are dropped at the head (none = no limit).
    max_delay: Option<Duration>,
    /// CoDel at the head (none = off); with `fq`, the template of each
    /// flow's own.
    codel: Option<CoDel>,
}

/// Packets [`SendQueue::shed_head`] dropped, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shed {
    pub expired: u64,
    pub codel: u64,
    /// Heads CoDel marked CE instead of dropping (flow queues only).
    pub ecn_marked: u64,
}

/// Outcome of [`SendQueue::push`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PushOutcome {
    Queued,
    /// Queued after dropping this many older packets.
    QueuedDroppedOldest(usize),
    /// Flow queues were full: this many packets left the head of the
    /// fattest flow (RFC 8290 §4.1.1); `queued` = false when the packet
    /// being sent was among them (its flow was the fattest and had only it).
    DroppedFattest {
        dropped: usize,
        queued: bool,
    },
    Rejected,
}

const POOL_MAX: usize = 256;

impl SendQueue {
    pub fn new(max_pkts: usize, max_bytes: usize, policy: DropPolicy) -> Self {
        SendQueue {
            q: VecDeque::new(),
            fq: None,
            len: 0,
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
        if let Some(fq) = &mut self.fq {
            fq.set_codel(self.codel.as_ref());
        }
        self
    }

    /// One queue per inner flow (FQ-CoDel, RFC 8290; `conn/fq.rs`):
    /// `flows` hash buckets, DRR `quantum` bytes, hash key `seed`; each
    /// flow gets its own CoDel with the parameters of `with_time_limits`.
    /// `flows` = 0 keeps the single FIFO. Call on an empty queue.
    pub fn with_flow_queues(mut self, flows: usize, quantum: usize, seed: u64) -> Self {
        debug_assert_eq!(self.len, 0);
        self.fq = (flows > 0).then(|| FlowQueues::new(flows, quantum, self.codel.as_ref(), seed));
        self
    }

    /// Flow-queue buckets holding state now (0 with one FIFO): those with
    /// packets, plus those whose CoDel remembers a drop rate.
    pub fn flow_states(&self) -> usize {
        self.fq.as_ref().map_or(0, FlowQueues::buckets_with_state)
    }

    /// [`Self::shed_head_allowing`] without a hold.
    #[cfg(test)]
    pub fn shed_head(&mut self, now: Instant) -> Shed {
        self.shed_head_allowing(now, Duration::ZERO)
    }

    /// Drops head packets that waited too long (the age limit), then those
    /// CoDel decides to drop, before the head is offered to the scheduler.
    /// Copies of a multi-path decision never wait here, so every dropped
    /// packet is one the peer never gets a number for. CoDel judges the
    /// sojourn beyond `hold`: the time the scheduler chose to hold the head
    /// for a faster path while a slower one had room
    /// (`sched::spill::hold_allowance`); the age limit counts all of it.
    pub fn shed_head_allowing(&mut self, now: Instant, hold: Duration) -> Shed {
        if self.fq.is_some() {
            return self.shed_flow_heads(now, hold);
        }
        let mut shed = Shed::default();
        // Neither an age limit nor CoDel: nothing is ever shed (asked on
        // every scheduling turn).
        if self.max_delay.is_none() && self.codel.is_none() {
            return shed;
        }
        while let Some(head) = self.q.front() {
            let sojourn = now.saturating_duration_since(head.enqueued);
            let expired = self.max_delay.is_some_and(|m| sojourn > m);
            let above_one = self.bytes > head.data.len();
            let codel = !expired
                && self
                    .codel
                    .as_mut()
                    .is_some_and(|c| c.drop_head(now, sojourn.saturating_sub(hold), above_one));
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

    /// `shed_head` with flow queues: the age limit and the flow's own CoDel
    /// judge the head of the flow that goes next (RFC 8290 §4.2: CoDel
    /// runs at dequeue, per flow, on the flow's sojourn and backlog); a
    /// flow emptied by drops yields to the next.
    fn shed_flow_heads(&mut self, now: Instant, hold: Duration) -> Shed {
        let mut shed = Shed::default();
        let Some(fq) = self.fq.as_mut() else {
            return shed;
        };
        while let Some((head, flow_bytes, codel)) = fq.head_for_aqm() {
            let sojourn = now.saturating_duration_since(head.enqueued);
            let expired = self.max_delay.is_some_and(|m| sojourn > m);
            let above_one = flow_bytes > head.data.len();
            let codel = !expired
                && codel.is_some_and(|c| c.drop_head(now, sojourn.saturating_sub(hold), above_one));
            if !(expired || codel) {
                break;
            }
            // As Linux's fq_codel (ecn on by default; RFC 8290 §5.2): an
            // ECN-capable packet CoDel would drop is marked CE and sent.
            if codel && super::ecn::mark_ce(&mut head.data) {
                shed.ecn_marked += 1;
                break;
            }
            let old = fq.drop_current_head().expect("head exists");
            self.len -= 1;
            self.bytes -= old.data.len();
            pool_put(&mut self.pool, old.data);
            if expired {
                shed.expired += 1;
            } else {
                shed.codel += 1;
            }
        }
        shed
    }

    pub fn len(&self) -> usize {
        self.len
    }
    /// A plain FIFO without CoDel: a packet appended (none dropped for
    /// room) leaves the head and what shedding does to it unchanged (the
    /// age limit reads the head alone; CoDel reads the backlog too, and
    /// flow queues may serve the new packet's flow first).
    pub fn appends_keep_head(&self) -> bool {
        self.fq.is_none() && self.codel.is_none()
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    pub fn front(&self) -> Option<&Queued> {
        match &self.fq {
            Some(fq) => fq.front(),
            None => self.q.front(),
        }
    }

    /// The head belongs to a sparse flow, served before the others' backlog
    /// (flow queuing only; a FIFO serves everything ahead of it first).
    pub fn head_is_sparse(&self) -> bool {
        self.fq.as_ref().is_some_and(|fq| fq.head_is_sparse())
    }

    pub fn push(&mut self, now: Instant, packet: &[u8]) -> PushOutcome {
        if packet.len() > self.max_bytes {
            return PushOutcome::Rejected;
        }
        if self.fq.is_some() {
            return self.push_flow(now, packet);
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
                                self.len -= 1;
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
        let item = self.queued(now, packet);
        self.q.push_back(item);
        if dropped > 0 {
            PushOutcome::QueuedDroppedOldest(dropped)
        } else {
            PushOutcome::Queued
        }
    }

    /// A pooled buffer holding `packet`, counted in the totals.
    fn queued(&mut self, now: Instant, packet: &[u8]) -> Queued {
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(packet);
        self.len += 1;
        self.bytes += data.len();
        Queued {
            data,
            enqueued: now,
            copy: false,
        }
    }

    /// `push` with flow queues: the packet joins its flow, then while a
    /// bound is exceeded the fattest flow loses its head (RFC 8290 §4.1.1),
    /// so a flow that keeps the queue full pays for it, not a sparse one.
    fn push_flow(&mut self, now: Instant, packet: &[u8]) -> PushOutcome {
        let item = self.queued(now, packet);
        let Some(fq) = self.fq.as_mut() else {
            return PushOutcome::Rejected;
        };
        let f = fq.bucket(packet);
        fq.push_back(f, item);
        let (mut dropped, mut queued) = (0, true);
        while self.len > self.max_pkts || self.bytes > self.max_bytes {
            let Some((g, old)) = fq.drop_fattest_head() else {
                break;
            };
            self.len -= 1;
            self.bytes -= old.data.len();
            pool_put(&mut self.pool, old.data);
            // Heads go first: the new packet (at its flow's tail) is the
            // one dropped exactly when its flow just emptied.
            if g == f && queued && fq.flow_len(f) == 0 {
                queued = false;
            } else {
                dropped += 1;
            }
        }
        if dropped == 0 && queued {
            PushOutcome::Queued
        } else {
            PushOutcome::DroppedFattest { dropped, queued }
        }
    }

    pub fn pop(&mut self) -> Option<Queued> {
        let q = match &mut self.fq {
            Some(fq) => fq.pop()?,
            None => self.q.pop_front()?,
        };
        self.len -= 1;
        self.bytes -= q.data.len();
        Some(q)
    }

    /// Puts packets back at the head (e.g. taken back from a path that went
    /// down), ignoring limits: they were admitted once already. With flow
    /// queues, at the head of the packet's flow.
    pub fn push_front(&mut self, q: Queued) {
        self.len += 1;
        self.bytes += q.data.len();
        match &mut self.fq {
            Some(fq) => {
                let f = fq.bucket(&q.data);
                fq.push_front(f, q);
            }
            None => self.q.push_front(q),
        }
    }

    /// Returns a buffer to the pool.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        pool_put(&mut self.pool, buf);
    }

    /// Drops the packets longer than `max_len`; returns how many.
    pub fn drop_longer_than(&mut self, max_len: usize) -> usize {
        if let Some(fq) = &mut self.fq {
            let pool = &mut self.pool;
            let (n, bytes) = fq.retain(|q| q.data.len() <= max_len, |buf| pool_put(pool, buf));
            self.len -= n;
            self.bytes -= bytes;
            return n;
        }
        let n = self.q.len();
        self.q.retain(|q| q.data.len() <= max_len);
        self.bytes = self.q.iter().map(|q| q.data.len()).sum();
        self.len = self.q.len();
        n - self.q.len()
    }

    pub fn clear(&mut self) -> usize {
        if let Some(fq) = &mut self.fq {
            let pool = &mut self.pool;
            let n = fq.clear(|buf| pool_put(pool, buf));
            self.len = 0;
            self.bytes = 0;
            return n;
        }
        let n = self.q.len();
        while let Some(q) = self.pop() {
            self.recycle(q.data);
        }
        n
    }
}

fn pool_put(pool: &mut Vec<Vec<u8>>, buf: Vec<u8>) {
    if pool.len() < POOL_MAX {
        pool.push(buf);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::conn::aqm::CoDelConfig;
    use crate::time::Instant;

    use super::{DropPolicy, PushOutcome, SendQueue, Shed};

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
                codel: 0,
                ecn_marked: 0
            }
        );
        assert_eq!(q.front().unwrap().data, b"newer");
        assert_eq!(q.bytes(), 5);
        assert_eq!(
            q.shed_head(t + ms(900)),
            Shed {
                expired: 1,
                codel: 0,
                ecn_marked: 0
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

    /// The scheduler's hold is not congestion: a 20 ms standing sojourn
    /// with an 18 ms hold is 2 ms to CoDel (below its 5 ms target), so
    /// nothing is dropped; the age limit still counts the whole sojourn.
    #[test]
    fn codel_does_not_count_the_schedulers_hold() {
        let ms = Duration::from_millis;
        for flows in [false, true] {
            let mut q = SendQueue::new(1000, 1_000_000, DropPolicy::DropNewest)
                .with_time_limits(Some(ms(19)), Some(CoDelConfig::default()));
            if flows {
                q = q.with_flow_queues(64, 1500, 7);
            }
            let t0 = Instant::ZERO;
            for k in 0..18u64 {
                q.push(t0 + ms(k), &[0x45; 20]);
            }
            for k in 18..400u64 {
                let now = t0 + ms(k);
                q.push(now, &[0x45; 20]);
                assert_eq!(
                    q.shed_head_allowing(now, ms(18)),
                    Shed::default(),
                    "at {k} ms"
                );
                q.pop();
            }
            // Two more ms of waiting: past the 19 ms age limit, hold or not.
            let now = t0 + ms(402);
            assert!(
                q.shed_head_allowing(now, ms(18)).expired > 0,
                "flows {flows}"
            );
        }
    }
}
