//! Flow queuing for the send queue: FQ-CoDel (RFC 8290).
//!
//! Why: one FIFO in front of the scheduler makes every tunnelled flow wait
//! behind the backlog of the busiest one (a bulk TCP transfer keeps it
//! full), and a full FIFO refuses the ping or the VoIP packet as readily as
//! the bulk flow's. Here each inner flow (hashed by its 5-tuple) has its own
//! queue and CoDel, served by deficit round robin with sparse (new) flows
//! first, and overflow takes the head of the fattest flow. The host's
//! kernel may have no fq_codel qdisc, and the daemon drains its TUN into
//! this queue anyway, so this is where the isolation has to be.
//!
//! `SendQueue` (`conn/queue.rs`) keeps the totals, the bounds and the
//! buffer pool; this module keeps the buckets and the two lists.

use std::collections::{BTreeMap, VecDeque};

use super::aqm::CoDel;
use super::queued::Queued;
use crate::inner::flow_hash;

/// Default number of buckets (RFC 8290 §4.1 / §5.1: 1024).
pub const DEFAULT_FLOWS: usize = 1024;
/// Most buckets a queue accepts (indices are `u32`; memory stays bounded).
const MAX_FLOWS: usize = 65_536;

/// Which list a bucket is on (RFC 8290 §4.1.2–4.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    Inactive,
    New,
    Old,
}

#[derive(Debug)]
struct Flow {
    q: VecDeque<Queued>,
    bytes: usize,
    /// DRR credit in bytes (RFC 8290 §4.2).
    deficit: i64,
    list: List,
    codel: Option<CoDel>,
}

/// The buckets are sparse: a bucket has state (a `Flow`) only while it is
/// on a list or its CoDel remembers something (a drop rate to resume). An
/// inactive bucket with a CoDel like a new one behaves exactly as a fresh
/// bucket, so its state is returned to the free list: a connection with
/// one flow holds one `Flow`, not 1024 (≈ 140 kB per client on a server).
#[derive(Debug)]
pub(crate) struct FlowQueues {
    /// Bucket → index in `flows`, or `NO_SLOT`.
    slot_of: Vec<u32>,
    flows: Vec<Flow>,
    free: Vec<u32>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    quantum: i64,
    /// A new bucket's CoDel.
    codel: Option<CoDel>,
    seed: u64,
    /// Byte shares of the buckets that took packets lately (at most
    /// [`SHARE_BUCKETS`]): which flows are sparse.
    shares: BTreeMap<u32, Share>,
    /// Bytes of every packet pushed (the shares' clock).
    pushed_bytes: u64,
}

/// A bucket's share of the bytes pushed.
#[derive(Clone, Copy, Debug)]
struct Share {
    /// `pushed_bytes` after its last packet.
    mark: u64,
    /// Bytes pushed per byte of its own (× 8, an EWMA with gain 1/8 up and
    /// 1/64 down, at most [`MAX_STRIDE8`]); 0 = one packet seen.
    ///
    /// Why slow down: while the bulk flow beside a real-time one pauses
    /// (a TCP waiting for its acks), every sample of the real-time flow is
    /// one. With gain 1/8 down a dozen such packets (20 ms of a 1 Mbit/s
    /// stream) make it "not sparse", `acpf` then spills some of its packets
    /// to the slow path, and the receiver holds the flow behind each: on
    /// the `trace` mix its one-way delay p95 is 38–49 ms (goal 36); with
    /// 1/64, 25–28 ms.
    stride8: u64,
}

/// Cap of [`Share::stride8`] (a stride of 32, four times the sparse
/// limit): a flow idle for long that starts a bulk transfer is "sparse"
/// for about 90 packets, not for as long as its first gap was large.
const MAX_STRIDE8: u64 = 8 * 32;

/// Buckets whose share is remembered (the least recently pushed is
/// forgotten beyond it): a bound on per-connection state.
const SHARE_BUCKETS: usize = 64;
/// A flow with at most 1 / `SPARSE_SHARE` of the bytes is sparse.
const SPARSE_SHARE: u64 = 8;

const NO_SLOT: u32 = u32::MAX;

impl FlowQueues {
    /// `flows` buckets (clamped to 1..=65536), DRR `quantum` bytes (one
    /// MTU-sized packet, RFC 8290 §4.2), per-flow CoDel from `codel`'s
    /// parameters (a fresh state per bucket), hash key `seed`.
    pub fn new(flows: usize, quantum: usize, codel: Option<&CoDel>, seed: u64) -> Self {
        let n = flows.clamp(1, MAX_FLOWS);
        FlowQueues {
            slot_of: vec![NO_SLOT; n],
            flows: Vec::new(),
            free: Vec::new(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            quantum: i64::try_from(quantum.max(1)).unwrap_or(i64::MAX / 4),
            codel: codel.cloned(),
            seed,
            shares: BTreeMap::new(),
            pushed_bytes: 0,
        }
    }

    /// Replaces every bucket's CoDel (parameters set after construction).
    pub fn set_codel(&mut self, codel: Option<&CoDel>) {
        self.codel = codel.cloned();
        for f in &mut self.flows {
            f.codel = codel.cloned();
        }
    }

    /// Buckets that hold state now (for tests and memory accounting).
    pub fn buckets_with_state(&self) -> usize {
        self.flows.len() - self.free.len()
    }

    /// The state of bucket `f`, if it has any.
    fn flow(&self, f: usize) -> Option<&Flow> {
        let s = *self.slot_of.get(f)?;
        (s != NO_SLOT).then(|| &self.flows[s as usize])
    }

    /// The state of bucket `f`; only for buckets on a list (which have one).
    fn listed(&mut self, f: usize) -> &mut Flow {
        let s = self.slot_of[f];
        debug_assert_ne!(s, NO_SLOT, "bucket {f} is listed, so it has state");
        &mut self.flows[s as usize]
    }

    /// The state of bucket `f`, made fresh if it had none.
    fn flow_or_new(&mut self, f: usize) -> &mut Flow {
        if self.slot_of[f] == NO_SLOT {
            let fresh = Flow {
                q: VecDeque::new(),
                bytes: 0,
                deficit: 0,
                list: List::Inactive,
                codel: self.codel.clone(),
            };
            let s = match self.free.pop() {
                Some(s) => {
                    self.flows[s as usize] = fresh;
                    s
                }
                None => {
                    self.flows.push(fresh);
                    (self.flows.len() - 1) as u32
                }
            };
            self.slot_of[f] = s;
        }
        let s = self.slot_of[f] as usize;
        &mut self.flows[s]
    }

    /// Returns bucket `f`'s state to the free list if it is inactive and
    /// remembers nothing a fresh one would not.
    fn forget_if_idle(&mut self, f: usize) {
        let s = self.slot_of[f];
        if s == NO_SLOT {
            return;
        }
        let flow = &mut self.flows[s as usize];
        if flow.list == List::Inactive
            && flow.q.is_empty()
            && flow.codel.as_ref().is_none_or(CoDel::is_like_new)
        {
            // Drop the queue's storage too: an idle client keeps nothing.
            flow.q = VecDeque::new();
            self.slot_of[f] = NO_SLOT;
            self.free.push(s);
        }
    }

    /// The bucket of `packet` (RFC 8290 §4.1.1: a hash of the 5-tuple).
    pub fn bucket(&self, packet: &[u8]) -> usize {
        let h = flow_hash(packet, self.seed);
        // Multiply-high: uniform over the buckets without a division.
        ((u128::from(h) * self.slot_of.len() as u128) >> 64) as usize
    }

    /// Appends to bucket `f`; a bucket not on either list becomes a new
    /// flow with a full quantum (RFC 8290 §4.1.1).
    pub fn push_back(&mut self, f: usize, item: Queued) {
        self.note_share(f, item.data.len());
        self.add(f, item, false);
    }

    /// A packet of `len` bytes arrives for bucket `f`: a sample of its share.
    fn note_share(&mut self, f: usize, len: usize) {
        let len = u64::try_from(len.max(1)).unwrap_or(u64::MAX);
        self.pushed_bytes = self.pushed_bytes.saturating_add(len);
        let now = self.pushed_bytes;
        let key = f as u32;
        if !self.shares.contains_key(&key) && self.shares.len() >= SHARE_BUCKETS {
            let oldest = self
                .shares
                .iter()
                .min_by_key(|(_, s)| s.mark)
                .map(|(&k, _)| k);
            if let Some(k) = oldest {
                self.shares.remove(&k);
            }
        }
        let share = self.shares.entry(key).or_insert(Share {
            mark: now,
            stride8: 0,
        });
        if share.mark != now {
            let sample = (now.saturating_sub(share.mark) / len).clamp(1, 1 << 20);
            let stride8 = match share.stride8 {
                0 => sample * 8,
                s if sample * 8 >= s => s - s / 8 + sample,
                s => s - s / 64 + sample / 8,
            };
            share.stride8 = stride8.min(MAX_STRIDE8);
            share.mark = now;
        }
    }

    /// Puts a packet back at the head of bucket `f` (taken back from a path).
    pub fn push_front(&mut self, f: usize, item: Queued) {
        self.add(f, item, true);
    }

    fn add(&mut self, f: usize, item: Queued, front: bool) {
        let quantum = self.quantum;
        let flow = self.flow_or_new(f);
        flow.bytes += item.data.len();
        if front {
            flow.q.push_front(item);
        } else {
            flow.q.push_back(item);
        }
        if flow.list == List::Inactive {
            flow.list = List::New;
            flow.deficit = quantum;
            self.new_flows.push_back(f as u32);
        }
        self.settle();
    }

    /// The bucket whose head goes next, if any packet is queued.
    pub fn current(&self) -> Option<usize> {
        let f = self.new_flows.front().or(self.old_flows.front())?;
        Some(*f as usize)
    }

    pub fn front(&self) -> Option<&Queued> {
        self.flow(self.current()?)?.q.front()
    }

    /// The head's flow carries at most 1 / [`SPARSE_SHARE`] of the bytes
    /// pushed lately: a sparse flow (a voice or game flow beside a bulk
    /// one), which deficit round robin serves before the others' backlog
    /// (RFC 8290 §4.1.2). Measured by bytes, not by an empty bucket: an
    /// ack-clocked bulk flow through a short queue finds its bucket empty
    /// at most arrivals too.
    pub fn head_is_sparse(&self) -> bool {
        self.current().is_some_and(|f| self.is_sparse(f))
    }

    /// Bucket `f` carries at most 1 / [`SPARSE_SHARE`] of the bytes pushed
    /// lately ([`Self::head_is_sparse`]).
    pub fn is_sparse(&self, f: usize) -> bool {
        self.shares
            .get(&(f as u32))
            .is_some_and(|s| s.stride8 >= 8 * SPARSE_SHARE)
    }

    /// The current bucket's head, its bucket's bytes, and its CoDel, for
    /// the head-drop decisions of `SendQueue::shed_head`.
    /// The head is mutable so that CoDel can mark it instead of dropping it.
    pub fn head_for_aqm(&mut self) -> Option<(&mut Queued, usize, Option<&mut CoDel>)> {
        let f = self.current()?;
        let flow = self.listed(f);
        let head = flow.q.front_mut()?;
        Some((head, flow.bytes, flow.codel.as_mut()))
    }

    /// Dequeues the current bucket's head and charges it to the bucket's
    /// deficit (RFC 8290 §4.2).
    pub fn pop(&mut self) -> Option<Queued> {
        let f = self.current()?;
        let item = self.take_head(f)?;
        self.listed(f).deficit -= item.data.len() as i64;
        self.settle();
        Some(item)
    }

    /// Drops the current bucket's head without charging its deficit (an
    /// AQM drop is not service).
    pub fn drop_current_head(&mut self) -> Option<Queued> {
        let f = self.current()?;
        let item = self.take_head(f)?;
        self.settle();
        Some(item)
    }

    /// Drops the head of the bucket holding the most bytes (RFC 8290
    /// §4.1.1); returns it and its bucket.
    pub fn drop_fattest_head(&mut self) -> Option<(usize, Queued)> {
        // Only buckets on a list can hold packets; ties go to the first.
        let mut fat: Option<(usize, usize)> = None;
        for &f in self.new_flows.iter().chain(self.old_flows.iter()) {
            let b = self.flow(f as usize).map_or(0, |x| x.bytes);
            if fat.is_none_or(|(_, fb)| b > fb) {
                fat = Some((f as usize, b));
            }
        }
        let (f, _) = fat.filter(|&(_, b)| b > 0)?;
        let item = self.take_head(f)?;
        self.settle();
        Some((f, item))
    }

    pub fn flow_len(&self, f: usize) -> usize {
        self.flow(f).map_or(0, |x| x.q.len())
    }

    fn take_head(&mut self, f: usize) -> Option<Queued> {
        let s = *self.slot_of.get(f)?;
        let flow = self.flows.get_mut(s as usize)?;
        let item = flow.q.pop_front()?;
        flow.bytes -= item.data.len();
        if flow.q.is_empty() {
            // RFC 8289 §5.4: an empty queue ends "above target".
            if let Some(c) = &mut flow.codel {
                c.on_empty();
            }
        }
        Some(item)
    }

    /// Keeps only packets for which `keep` holds; returns the dropped ones
    /// (count, bytes) and hands their buffers to `recycle`.
    pub fn retain(
        &mut self,
        mut keep: impl FnMut(&Queued) -> bool,
        mut recycle: impl FnMut(Vec<u8>),
    ) -> (usize, usize) {
        let (mut n, mut bytes) = (0, 0);
        // Free slots hold empty queues: visiting them changes nothing.
        for flow in &mut self.flows {
            let mut kept = VecDeque::with_capacity(flow.q.len());
            for item in flow.q.drain(..) {
                if keep(&item) {
                    kept.push_back(item);
                } else {
                    n += 1;
                    bytes += item.data.len();
                    flow.bytes -= item.data.len();
                    recycle(item.data);
                }
            }
            flow.q = kept;
        }
        self.settle();
        (n, bytes)
    }

    /// Brings the lists to the state RFC 8290 §4.2's dequeue would reach
    /// before taking a packet: the head of the new list, else of the old
    /// list, is a non-empty bucket with credit left. A bucket out of credit
    /// gets a quantum and goes to the end of the old list; an empty new
    /// bucket goes to the old list (so a flow cannot stay "new" by
    /// emptying), an empty old one leaves the lists. Terminates: each step
    /// either moves an empty bucket towards inactive or adds a quantum.
    fn settle(&mut self) {
        loop {
            let (f, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&f), _) => (f as usize, true),
                (None, Some(&f)) => (f as usize, false),
                (None, None) => return,
            };
            let s = self.slot_of[f];
            debug_assert_ne!(s, NO_SLOT, "bucket {f} is listed, so it has state");
            let flow = &mut self.flows[s as usize];
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            if flow.deficit <= 0 {
                flow.deficit += self.quantum;
                list.pop_front();
                flow.list = List::Old;
                self.old_flows.push_back(f as u32);
            } else if flow.q.is_empty() {
                list.pop_front();
                if from_new {
                    flow.list = List::Old;
                    self.old_flows.push_back(f as u32);
                } else {
                    flow.list = List::Inactive;
                    self.forget_if_idle(f);
                }
            } else {
                return;
            }
        }
    }

    /// Empties every bucket, handing each buffer to `recycle`; returns how
    /// many packets there were.
    pub fn clear(&mut self, mut recycle: impl FnMut(Vec<u8>)) -> usize {
        let mut n = 0;
        for flow in &mut self.flows {
            for item in flow.q.drain(..) {
                n += 1;
                recycle(item.data);
            }
            flow.bytes = 0;
            flow.deficit = 0;
            flow.list = List::Inactive;
            if let Some(c) = &mut flow.codel {
                c.on_empty();
            }
        }
        self.new_flows.clear();
        self.old_flows.clear();
        for f in 0..self.slot_of.len() {
            self.forget_if_idle(f);
        }
        n
    }
}

#[cfg(test)]
#[path = "fq_tests.rs"]
mod tests;
