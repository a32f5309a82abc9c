//! Connection-level retransmission of packets a subflow reports lost
//! (docs/AGGREGATION.md, the `lossy` mix).
//!
//! DCCP never resends a sequence number (RFC 4340 §3.1), but RFC 9897
//! leaves it to the sender how it uses its subflows: a packet whose subflow
//! declared it lost (RFC 4341 §5, three later packets acknowledged) may be
//! sent again, on the same or another path, under its original MP_SEQ. The
//! receiver's duplicate window (`reorder/dedup.rs`) drops the copy if the
//! first one did arrive after all, so a spurious loss costs a packet, never
//! a double delivery. On a path with random loss this repairs the hole in
//! about one RTT, before or while the inner flow notices it.
//!
//! Bounded three ways: a packet is resent at most once (the resent copy is
//! not remembered again), only while it is younger than `max_age` (older, the
//! inner flow has repaired or abandoned it), and only while the resent
//! packets stay within `budget_pct` of the data packets sent (plus a small
//! burst), so a congested path's losses cannot double its load.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::path::PathId;
use crate::time::Instant;

/// Packets a burst may resend beyond the budget's share.
const BURST_PKTS: u64 = 8;

/// The `retransmit_*` tunnel settings in core units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetransmitConfig {
    /// Oldest packet (since it was first sent) still worth resending.
    pub max_age: Duration,
    /// Resent packets at most this percentage of data packets sent (plus
    /// `BURST_PKTS`).
    pub budget_pct: f64,
    /// Packets remembered at most (the oldest is forgotten first).
    pub max_pkts: usize,
}

impl Default for RetransmitConfig {
    fn default() -> Self {
        RetransmitConfig {
            max_age: Duration::from_millis(50),
            budget_pct: 5.0,
            max_pkts: 2048,
        }
    }
}

/// Why a lost packet was not resent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Not remembered: already resent once, acknowledged long ago,
    /// forgotten for room, or a redundant copy.
    Unknown,
    /// Older than `max_age`.
    TooOld,
    /// The budget is spent.
    OverBudget,
}

/// What [`RetransmitStore::take_lost`] gives: the MP_SEQ and payload to
/// resend, or why not and the payload (if it was still kept) to recycle.
pub(crate) type Taken = Result<(u64, Vec<u8>), (Skip, Option<Vec<u8>>)>;

struct Entry {
    mp_seq: u64,
    sent: Instant,
    data: Vec<u8>,
}

/// Copies of the data packets in flight, by (path, DCCP sequence number).
pub(crate) struct RetransmitStore {
    config: RetransmitConfig,
    by_key: BTreeMap<(PathId, u64), Entry>,
    /// Keys in sending order (some already taken), for eviction by age/room.
    order: VecDeque<(PathId, u64)>,
    remembered: u64,
    resent: u64,
}

impl RetransmitStore {
    pub(crate) fn new(config: RetransmitConfig) -> Self {
        RetransmitStore {
            config,
            by_key: BTreeMap::new(),
            order: VecDeque::new(),
            remembered: 0,
            resent: 0,
        }
    }

    /// A data packet left on `path` as DCCP `seq` carrying `mp_seq`. Keeps
    /// `data`; returns buffers it no longer needs (for recycling).
    pub(crate) fn remember(
        &mut self,
        now: Instant,
        path: PathId,
        seq: u64,
        mp_seq: u64,
        data: Vec<u8>,
        mut recycle: impl FnMut(Vec<u8>),
    ) {
        self.evict(now, &mut recycle);
        while self.by_key.len() >= self.config.max_pkts.max(1) {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if let Some(e) = self.by_key.remove(&k) {
                recycle(e.data);
            }
        }
        let entry = Entry {
            mp_seq,
            sent: now,
            data,
        };
        if let Some(old) = self.by_key.insert((path, seq), entry) {
            recycle(old.data);
        }
        self.order.push_back((path, seq));
        self.remembered += 1;
    }

    /// Drops entries older than `max_age` from the front.
    fn evict(&mut self, now: Instant, recycle: &mut impl FnMut(Vec<u8>)) {
        while let Some(k) = self.order.front().copied() {
            match self.by_key.get(&k) {
                Some(e) if now.saturating_duration_since(e.sent) <= self.config.max_age => break,
                Some(_) => {
                    if let Some(e) = self.by_key.remove(&k) {
                        recycle(e.data);
                    }
                }
                None => {}
            }
            self.order.pop_front();
        }
    }

    /// The subflow `path` declared DCCP `seq` lost: its MP_SEQ and payload
    /// to send once more, or why not. The entry is gone either way, so a
    /// packet is resent at most once.
    pub(crate) fn take_lost(&mut self, now: Instant, path: PathId, seq: u64) -> Taken {
        let Some(e) = self.by_key.remove(&(path, seq)) else {
            return Err((Skip::Unknown, None));
        };
        if now.saturating_duration_since(e.sent) > self.config.max_age {
            return Err((Skip::TooOld, Some(e.data)));
        }
        let share = (self.remembered as f64 * self.config.budget_pct.max(0.0) / 100.0) as u64;
        if self.resent >= share + BURST_PKTS {
            return Err((Skip::OverBudget, Some(e.data)));
        }
        self.resent += 1;
        Ok((e.mp_seq, e.data))
    }

    /// Packets a path's subflow will never report again (it failed or
    /// closed): forgotten.
    pub(crate) fn forget_path(&mut self, path: PathId, mut recycle: impl FnMut(Vec<u8>)) {
        let keys: Vec<_> = self
            .by_key
            .range((path, 0)..=(path, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            if let Some(e) = self.by_key.remove(&k) {
                recycle(e.data);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

impl super::Connection {
    /// After an ack on path `i`: resends what its subflow just declared
    /// lost, each packet on the usable path with the smallest SRTT (the
    /// same path when it is that one), ahead of that path's queue.
    pub(super) fn retransmit_lost(&mut self, now: Instant, i: usize) {
        let Some(store) = self.retx.as_mut() else {
            return;
        };
        let mut lost = std::mem::take(&mut self.scratch.lost_scratch);
        self.paths[i].take_lost_seqs(&mut lost);
        let path = self.paths[i].id();
        for seq in lost.drain(..) {
            match store.take_lost(now, path, seq) {
                Ok((mp_seq, data)) => {
                    let to = fastest_usable(&self.paths).unwrap_or(i);
                    let item = super::queued::Queued {
                        data,
                        enqueued: now,
                        // Never reinjected under a new MP_SEQ, never
                        // remembered again: resent at most once.
                        copy: true,
                    };
                    self.paths[to].assign_first(mp_seq, item);
                    self.stats.loss.conn_retransmitted_pkts += 1;
                }
                Err((why, data)) => {
                    match why {
                        Skip::TooOld => self.stats.loss.conn_retransmit_too_old += 1,
                        Skip::OverBudget => self.stats.loss.conn_retransmit_over_budget += 1,
                        Skip::Unknown => {}
                    }
                    if let Some(b) = data {
                        self.queue.recycle(b);
                    }
                }
            }
        }
        self.scratch.lost_scratch = lost;
    }

    /// A data packet left on path `i` as DCCP `seq` with `mp_seq`: kept
    /// for a possible retransmission (a redundant or resent copy is not),
    /// else its buffer is recycled.
    pub(super) fn after_data_sent(
        &mut self,
        now: Instant,
        i: usize,
        seq: u64,
        mp_seq: u64,
        q: super::queued::Queued,
    ) {
        match self.retx.as_mut() {
            Some(store) if !q.copy && self.negotiation.is_multipath() => {
                let queue = &mut self.queue;
                store.remember(now, self.paths[i].id(), seq, mp_seq, q.data, |b| {
                    queue.recycle(b)
                });
            }
            _ => self.queue.recycle(q.data),
        }
    }

    /// Path `i` will report no more losses (it failed, closed or went down).
    pub(super) fn forget_sent_on(&mut self, i: usize) {
        if let Some(store) = self.retx.as_mut() {
            let queue = &mut self.queue;
            store.forget_path(self.paths[i].id(), |b| queue.recycle(b));
        }
    }
}

/// Index of the usable path with the smallest SRTT (ties: the first).
fn fastest_usable(paths: &[super::subflow::Subflow]) -> Option<usize> {
    paths
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_usable())
        .filter_map(|(k, p)| p.view().srtt.map(|s| (s, k)))
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::path::PathId;
    use crate::time::Instant;

    use super::{RetransmitConfig, RetransmitStore, Skip, BURST_PKTS};

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn store(budget_pct: f64, max_pkts: usize) -> RetransmitStore {
        RetransmitStore::new(RetransmitConfig {
            max_age: Duration::from_millis(50),
            budget_pct,
            max_pkts,
        })
    }

    #[test]
    fn a_lost_packet_is_resent_once_with_its_mp_seq() {
        let mut s = store(5.0, 64);
        let a = PathId(0);
        s.remember(t(0), a, 7, 1000, vec![1, 2, 3], |_| {});
        assert_eq!(s.take_lost(t(12), a, 7), Ok((1000, vec![1, 2, 3])));
        // Reported lost again (e.g. by a later ack): nothing to resend.
        assert_eq!(s.take_lost(t(13), a, 7), Err((Skip::Unknown, None)));
        // A packet of another path with the same DCCP number is not it.
        s.remember(t(14), PathId(1), 7, 1001, vec![9], |_| {});
        assert_eq!(s.take_lost(t(15), a, 7), Err((Skip::Unknown, None)));
    }

    #[test]
    fn an_old_packet_is_not_resent() {
        let mut s = store(100.0, 64);
        let a = PathId(0);
        s.remember(t(0), a, 1, 10, vec![1], |_| {});
        s.remember(t(0), a, 2, 11, vec![2], |_| {});
        assert_eq!(s.take_lost(t(51), a, 1), Err((Skip::TooOld, Some(vec![1]))));
        // Age eviction when later packets are remembered.
        let mut freed = Vec::new();
        s.remember(t(60), a, 3, 12, vec![3], |b| freed.push(b));
        assert_eq!(freed, vec![vec![2]]);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn the_budget_bounds_resends() {
        // 5 % of 200 packets = 10, plus the burst of 8: 18 resends, no more.
        let mut s = store(5.0, 1000);
        let a = PathId(0);
        for seq in 0..200 {
            s.remember(t(0), a, seq, seq + 500, vec![0], |_| {});
        }
        let ok = (0..200)
            .filter(|&seq| s.take_lost(t(10), a, seq).is_ok())
            .count();
        assert_eq!(ok as u64, 200 * 5 / 100 + BURST_PKTS);
    }

    #[test]
    fn room_is_bounded_oldest_forgotten_first() {
        let mut s = store(100.0, 4);
        let a = PathId(0);
        let mut freed = 0;
        for seq in 0..10 {
            s.remember(t(0), a, seq, seq, vec![0; 10], |_| freed += 1);
        }
        assert_eq!(s.len(), 4);
        assert_eq!(freed, 6);
        assert_eq!(s.take_lost(t(1), a, 0), Err((Skip::Unknown, None)));
        assert!(s.take_lost(t(1), a, 9).is_ok());
        s.forget_path(a, |_| {});
        assert_eq!(s.len(), 0);
    }
}
