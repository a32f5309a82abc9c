//! `per-flow` — reordering per inner flow: a gap holds only the flow it may
//! belong to, and no longer than the paths' measured delay difference.
//!
//! One connection-level sequence (MP_SEQ) carries every inner flow, so a
//! connection-level reorderer (`active-*`) holds a small real-time flow
//! behind a gap of a bulk flow, while `passive` hands a bulk flow spread
//! over two paths reordered to its loss detection (QUIC's packet threshold
//! of 3, RFC 9002 §6.1.1; a dupack TCP) — measured on two equal 30 Mbit/s
//! paths, every loss a QUIC-like inner flow saw was spurious. So a gap in
//! one flow must not hold another flow's packets, and the hold time is
//! bounded by the paths' measured delay difference.
//!
//! The receiver does not know which flow a missing MP_SEQ belongs to, so:
//!
//! * Packets are keyed by their inner flow (hash of the inner IP header's
//!   5-tuple, the one the send queue's FQ-CoDel uses, RFC 8290 §4.1.1).
//! * A flow whose packets all arrived on one path within the last
//!   [`SPREAD_MEMORY`] ("one-path") is not held, or, with
//!   `ReorderConfig::one_path_detours` (on with the window delay bound),
//!   held only behind a gap that is likely its own: each path delivers in order (one access link; the
//!   scheduler hands a path increasing MP_SEQs), but the sender may detour
//!   a lone packet of it to a slower path (ACPF's first stage when the
//!   fast path is at its window), which then arrives after the flow's
//!   later packets — to a QUIC inner flow that is a spurious loss (packet
//!   threshold 3, RFC 9002 §6.1.1). The flow's MP_SEQ stride (one packet
//!   of it per `stride` connection-level numbers, learnt from arrivals)
//!   estimates its share of the numbers, so of `m` numbers missing between
//!   its last delivery and this packet about `m / stride` are its own;
//!   the packet is held when that is at least one half. A flow alone in
//!   the tunnel (stride 1) is held behind any gap, a sparse real-time flow
//!   beside a bulk one (stride ~50) only behind a burst of dozens, so a
//!   gap of another flow does not hold it. A one-path TCP flow (inner IP
//!   protocol 6) is never held: its RACK reordering window absorbs a lone
//!   detour (RFC 8985 §6.2), and a hold would only delay it. With
//!   `one_path_detours` a sparse flow (at most an eighth of the bytes:
//!   voice, games) is never held: the sender keeps it on the fastest path
//!   (`sched/acpf.rs`), and its delay matters more than its order.
//! * A flow seen on two paths ("spread") holds a packet only while an MP_SEQ
//!   between the flow's last delivered one and the packet's is missing;
//!   MP_SEQs below the flow's last delivery cannot be its own in-order
//!   packets any more.
//! * A TCP flow spread over paths that saw no loss (no given-up gap) for
//!   [`EQUALISE_LOSS_MEMORY`] is, with `ReorderConfig::equalise_spread_tcp`,
//!   also delivered no earlier than its packet's arrival plus that path's
//!   base one-way delay deficit to the slowest path the flow used, gap or
//!   not: an inner BBR sees one RTT, and a probe that reaches the slower
//!   path no longer reads to it as less bandwidth. A loss-limited flow is
//!   left alone (its rate falls with its RTT).
//! * Each held packet waits at most `min(max(max − min, 5/4 · extent) +
//!   offset, max_timeout)`, the `active-adaptive` bound: `max − min` the
//!   spread of the active paths' one-way latencies, `extent` the
//!   reordering extent in time measured from arrivals
//!   ([`super::extent`]); a missing MP_SEQ is given up after the same time
//!   (or at once when fast loss detection proves it lost, [`FastLoss`]).
//!
//! Bounded state against hostile input: at most [`MAX_FLOWS`] flows (the
//! least recently seen idle flow is forgotten; when every flow holds
//! packets, new ones share one overflow flow), at most [`MAX_GAPS`] missing
//! ranges (the oldest is given up), and the `max_hold_pkts` /
//! `max_hold_bytes` caps of every strategy. Unparseable packets (non-IP,
//! truncated) share one flow.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use super::dedup::{DedupWindow, Seen};
use super::extent::Extent;
use super::progress::PathProgress;
use super::{
    Delivered, FastLoss, PathReceiveState, Reorder, ReorderConfig, ReorderItem, ReorderStats,
};
use crate::inner;
use crate::path::{PathId, PathState, PathView};
use crate::time::Instant;

/// Flows tracked at once (a fixed cap: hostile input cannot grow it).
pub const MAX_FLOWS: usize = 1024;
/// Missing MP_SEQ ranges tracked at once; beyond it the lowest is given up.
pub const MAX_GAPS: usize = 1024;
/// A flow that used a second path within this long counts as spread over
/// paths (and is held behind gaps).
pub const SPREAD_MEMORY: Duration = Duration::from_secs(1);
/// Gaps counted at most when estimating how many missing MP_SEQs of a
/// range are a one-path flow's (bounds the work per packet).
const COUNT_GAPS: usize = 64;
/// Key of the flow shared by packets that find the table full of flows
/// holding packets.
const OVERFLOW_FLOW: u64 = 0;
/// Fixed seed of the flow hash: the key only groups packets, a collision
/// merges two flows (they are then reordered together), nothing worse.
const FLOW_SEED: u64 = 0x6d70_6463_6370_7266;

#[derive(Clone, Debug)]
struct Gap {
    /// Missing range `[start, end)` (`start` is the map key).
    end: u64,
    /// Arrival of the first packet that overtook it.
    since: Instant,
    /// Given up at this time.
    deadline: Instant,
    /// The hold bound when it opened: the silence it is waited for after
    /// the last sign that a path behind it is still delivering.
    wait: Duration,
    /// Waited for past its first deadline ([`PerFlow::still_coming`]).
    extended: bool,
}

#[derive(Clone, Debug)]
struct Held {
    item: ReorderItem,
    deadline: Instant,
    /// Not delivered before this (a spread TCP flow's delay equalisation,
    /// `PerFlow::equalised`), blocked by a gap or not.
    not_before: Instant,
}

/// Paths remembered per flow for delay equalisation.
const PATHS_SEEN: usize = 8;
/// A TCP flow delivered past a given-up gap within this long is not
/// equalised (`PerFlow::equalised`): its controller is loss-limited, and
/// under loss a loss-based TCP's rate falls with its RTT (Mathis et al.,
/// CCR 1997: rate ∝ 1 / (RTT · √p)). Shorter memories let a flow flip in
/// and out of equalisation (1 s: 31 of 48 subset cells, 10 s: 36, 30 s:
/// 37, none: 33; main 34; docs/AGGREGATION.md).
pub const EQUALISE_LOSS_MEMORY: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, Default)]
struct Flow {
    /// Highest MP_SEQ delivered of this flow.
    last: Option<u64>,
    held: BTreeMap<u64, Held>,
    last_path: Option<PathId>,
    /// Spread over paths until then.
    spread_until: Option<Instant>,
    last_seen: Option<Instant>,
    /// MP_SEQs per packet of this flow (× 8, an EWMA with gain 1/8 of the
    /// numbers that arrived between two consecutive packets of it, plus
    /// one): its share of the connection sequence is `8 / stride8`.
    stride8: Option<u64>,
    /// How often holding this flow while it was on one path did not pay
    /// off (× 256, an EWMA with gain 1/4; paying off = its own detour filled
    /// the gap, or a packet of it came late when it was not held). Starts
    /// at 0.
    futile8: u32,
    /// The current hold is a one-path hold not judged yet.
    one_path_hold: bool,
    /// An inner TCP flow (by its last packet's IP protocol): never held
    /// while on one path (see [`PerFlow::holds`]).
    tcp: bool,
    /// `PerFlow::arrived_bytes` after this flow's previous packet.
    bytes_mark: Option<u64>,
    /// Last arrival per path (at most [`PATHS_SEEN`]).
    paths_seen: Vec<(PathId, Instant)>,
    /// Last delivery after a given-up gap.
    last_loss: Option<Instant>,
    /// Highest inner TCP sequence number of a data segment delivered.
    tcp_high: Option<u32>,
    /// Connection bytes per byte of this flow (× 8, an EWMA with gain 1/8
    /// of the bytes that arrived since its previous packet over its
    /// packet's size): its share of the connection's bytes is
    /// `8 / byte_stride8`.
    byte_stride8: Option<u64>,
}

/// A flow carrying at most 1 / `SPARSE_SHARE` of the connection's bytes is
/// sparse (RFC 8290 §4.1.2's notion at the sender: it builds no queue).
const SPARSE_SHARE: u64 = 8;

/// `Flow::futile8` below which a one-path flow is held: after three futile
/// holds in a row (0 → 64 → 112 → 148) it is not, until late packets of
/// it show that holding would have kept its order.
const FUTILE_MAX: u32 = 128;

impl Flow {
    /// A one-path hold ended (`useful`: its own packet filled the gap), or
    /// a late packet of it showed a hold was missed (useful). A gap that is
    /// a loss on the fast path, not a detour (the `lossy` mix's 0.3 %),
    /// only stalls the flow until fast loss detection or the deadline.
    /// RACK adapts its reordering window to such evidence (RFC 8985 §6.2).
    fn judge(&mut self, useful: bool) {
        if useful {
            self.futile8 -= self.futile8 / 4;
        } else {
            self.futile8 += (256 - self.futile8) / 4;
        }
    }

    fn spread(&self, now: Instant) -> bool {
        self.spread_until.is_some_and(|t| t > now)
    }

    /// One of its packets, `payload`, was delivered in MP_SEQ order
    /// (`after_gap`: past a given-up gap). Returns whether it was a TCP
    /// data segment that does not advance the flow's highest sequence
    /// number: sent again by the inner sender, for a loss the receiver's
    /// gaps miss (a drop in the sending daemon's queue) or one the tunnel
    /// caused (counted; equalisation does not read it: the simulator's
    /// inner BBR retransmits too, docs/AGGREGATION.md "Retransmissions do
    /// not tell BBR from CUBIC").
    fn note_delivery(&mut self, after_gap: bool, payload: &[u8], now: Instant) -> bool {
        if after_gap {
            self.last_loss = Some(now);
        }
        // Only a TCP flow's packets are read again (the flow key already
        // read the protocol).
        let Some(seq) = self.tcp.then(|| inner::tcp_data_seq(payload)).flatten() else {
            return false;
        };
        // Serial number arithmetic (RFC 1982): at or before the highest.
        let resent = self
            .tcp_high
            .is_some_and(|high| seq.wrapping_sub(high) as i32 <= 0);
        if !resent {
            self.tcp_high = Some(seq);
        }
        resent
    }

    /// A packet of it arrived on `path` at `now`.
    fn saw_path(&mut self, path: PathId, now: Instant) {
        if let Some(e) = self.paths_seen.iter_mut().find(|(p, _)| *p == path) {
            e.1 = now;
            return;
        }
        if self.paths_seen.len() >= PATHS_SEEN {
            if let Some(oldest) = self
                .paths_seen
                .iter()
                .enumerate()
                .min_by_key(|(_, (p, t))| (*t, *p))
                .map(|(i, _)| i)
            {
                self.paths_seen.swap_remove(oldest);
            }
        }
        self.paths_seen.push((path, now));
    }

    /// A packet of `len` bytes arrived, `arrived` the connection's bytes so
    /// far (this packet included): a sample of the flow's byte share.
    fn sample_share(&mut self, arrived: u64, len: usize) {
        if let Some(mark) = self.bytes_mark {
            let len = u64::try_from(len.max(1)).unwrap_or(u64::MAX);
            let sample = (arrived.saturating_sub(mark) / len).clamp(1, 1 << 20);
            self.byte_stride8 = Some(match self.byte_stride8 {
                Some(s) => s - s / 8 + sample,
                None => sample * 8,
            });
        }
        self.bytes_mark = Some(arrived);
    }

    /// A sparse flow: at most [`SPARSE_SHARE`] of the connection's bytes
    /// (a voice, game or control flow beside a bulk one).
    fn sparse(&self) -> bool {
        self.byte_stride8.is_some_and(|s8| s8 >= 8 * SPARSE_SHARE)
    }

    /// A delivery of `seq` after `last` with `missing` MP_SEQs between
    /// them still missing: a stride sample of the numbers that arrived.
    fn sample_stride(&mut self, seq: u64, missing: u64) {
        let Some(last) = self.last else { return };
        let sample = seq
            .saturating_sub(last)
            .saturating_sub(missing)
            .clamp(1, 1 << 20);
        self.stride8 = Some(match self.stride8 {
            Some(s) => s - s / 8 + sample,
            None => sample * 8,
        });
    }
}

#[derive(Clone, Debug)]
pub struct PerFlow {
    timeout: Duration,
    max_timeout: Duration,
    offset: Duration,
    max_hold_pkts: usize,
    max_hold_bytes: usize,
    drop_late: bool,
    fast_loss: FastLoss,
    one_path_detours: bool,
    equalise: bool,
    dedup: DedupWindow,
    /// Every MP_SEQ below it arrived or was given up.
    floor: Option<u64>,
    /// Highest MP_SEQ arrived.
    top: Option<u64>,
    gaps: BTreeMap<u64, Gap>,
    flows: BTreeMap<u64, Flow>,
    /// Keys of flows holding packets.
    holding: BTreeSet<u64>,
    held_pkts: usize,
    held_bytes: usize,
    ready: VecDeque<Delivered>,
    /// Highest MP_SEQ seen per path (PathId order), for fast loss detection.
    progress: PathProgress,
    /// Payload bytes of every packet that reached a flow (for the flows'
    /// byte shares).
    arrived_bytes: u64,
    extent: Extent,
    /// End of the highest missing range given up so far: a flow whose last
    /// delivery is below it may have lost a packet there (`after_gap`).
    given_up_to: u64,
    stats: ReorderStats,
}

impl PerFlow {
    pub fn new(config: &ReorderConfig) -> Self {
        PerFlow {
            timeout: config.timeout(),
            max_timeout: config.max_timeout(),
            offset: config.offset(),
            max_hold_pkts: config.max_hold_pkts(),
            max_hold_bytes: config.max_hold_bytes(),
            drop_late: config.drop_late,
            fast_loss: config.fast_loss,
            one_path_detours: config.one_path_detours,
            equalise: config.equalise_spread_tcp,
            dedup: DedupWindow::new(config.dup_window()),
            floor: config.initial_seq,
            top: None,
            gaps: BTreeMap::new(),
            flows: BTreeMap::new(),
            holding: BTreeSet::new(),
            held_pkts: 0,
            held_bytes: 0,
            ready: VecDeque::new(),
            progress: PathProgress::default(),
            arrived_bytes: 0,
            extent: Extent::default(),
            given_up_to: 0,
            stats: ReorderStats::default(),
        }
    }

    /// Number of flows tracked (for tests of the cap).
    pub fn flows_tracked(&self) -> usize {
        self.flows.len()
    }

    /// Number of missing ranges tracked (for tests of the cap).
    pub fn gaps_tracked(&self) -> usize {
        self.gaps.len()
    }

    /// Longest a packet may be held (and a missing MP_SEQ waited for): the
    /// spread of the active paths' one-way latencies, or the learnt
    /// reordering extent if larger, plus `offset`, capped.
    pub fn hold_bound(&self, now: Instant, paths: &[PathView]) -> Duration {
        let lat = |p: &PathView| p.owd.or(p.srtt.map(|s| s / 2));
        let mut span: Option<(Duration, Duration)> = None;
        for p in paths.iter().filter(|p| p.state == PathState::Active) {
            if let Some(l) = lat(p) {
                span = Some(span.map_or((l, l), |(lo, hi)| (lo.min(l), hi.max(l))));
            }
        }
        let learnt = self.extent.at(now) * 5 / 4;
        match span {
            Some((lo, hi)) => ((hi - lo).max(learnt) + self.offset).min(self.max_timeout),
            None => self
                .timeout
                .max((learnt + self.offset).min(self.max_timeout)),
        }
    }

    /// MP_SEQs missing in `[lo, hi)` (at most [`COUNT_GAPS`] gaps counted).
    fn missing_count(&self, lo: u64, hi: u64) -> u64 {
        if lo >= hi {
            return 0;
        }
        self.gaps
            .range(..hi)
            .rev()
            .take_while(|(_, g)| g.end > lo)
            .take(COUNT_GAPS)
            .map(|(&s, g)| g.end.min(hi) - s.max(lo))
            .sum()
    }

    /// Does a gap in `[lo, seq)` hold the flow's packet `seq`? A flow spread
    /// over paths: any gap may be its own. A one-path flow: only when its
    /// share of the missing numbers (`missing / stride`) is at least one
    /// half — a lone detour of its own packet to a slower path, not
    /// another flow's traffic there (module doc), and only with
    /// `one_path_detours`. Unknown stride: not held. Never a one-path TCP
    /// flow: Linux's TCP waits a reordering window (RACK, RFC 8985 §6.2,
    /// min_rtt / 4 and growing with DSACKs) before it calls a packet lost,
    /// so a lone detour costs it nothing, while a hold delays every packet
    /// behind the gap. A QUIC flow's packet threshold of 3 (RFC 9002
    /// §6.1.1) declares the detoured packet lost: it is held. Never a
    /// sparse flow (at most an eighth of the bytes) with `one_path_detours`:
    /// a voice or game flow lives by its delay and reorders in its own
    /// jitter buffer, while a hold behind a bulk flow's gap costs it up to
    /// the paths' delay spread.
    fn holds(&self, flow: &Flow, lo: u64, seq: u64, now: Instant) -> bool {
        if self.one_path_detours && flow.sparse() {
            return false;
        }
        if flow.spread(now) {
            return self.missing_in(lo, seq, flow.tcp);
        }
        self.one_path_detours
            && !flow.tcp
            && flow.futile8 < FUTILE_MAX
            && flow
                .stride8
                .is_some_and(|s8| self.missing_count(lo, seq).saturating_mul(16) >= s8)
    }

    /// True when an MP_SEQ in `[lo, hi)` is missing that a flow waits for:
    /// a TCP flow does not wait past a gap's first deadline
    /// ([`Self::still_coming`]: its RACK reordering window absorbs the
    /// late packet, RFC 8985 §6.2, while a longer hold only delays it).
    fn missing_in(&self, lo: u64, hi: u64, tcp: bool) -> bool {
        lo < hi
            && self
                .gaps
                .range(..hi)
                .rev()
                .take_while(|(_, g)| g.end > lo)
                .any(|(_, g)| !(tcp && g.extended))
    }

    fn recompute_floor(&mut self) {
        if let Some((&s, _)) = self.gaps.first_key_value() {
            self.floor = Some(s);
        } else if let Some(t) = self.top {
            self.floor = Some(t.saturating_add(1));
        }
    }

    /// `seq` arrived inside a gap: remove it from the gap. Returns when the
    /// gap was opened (a reordering-extent sample).
    fn fill(&mut self, seq: u64) -> Option<Instant> {
        let (&start, _) = self.gaps.range(..=seq).next_back()?;
        let g = self.gaps.get(&start)?;
        if seq >= g.end {
            return None;
        }
        let g = self.gaps.remove(&start)?;
        if start < seq {
            self.gaps.insert(
                start,
                Gap {
                    end: seq,
                    since: g.since,
                    deadline: g.deadline,
                    wait: g.wait,
                    extended: g.extended,
                },
            );
        }
        if seq + 1 < g.end {
            self.gaps.insert(seq + 1, g.clone());
        }
        Some(g.since)
    }

    /// Give up every missing MP_SEQ below `bound` (fast loss).
    fn lose_below(&mut self, bound: u64) {
        while let Some(e) = self.gaps.first_entry() {
            let start = *e.key();
            if start >= bound {
                break;
            }
            let end = e.get().end;
            if end <= bound {
                e.remove();
                self.stats.gaps_fast_lost += end - start;
                self.given_up_to = self.given_up_to.max(end);
            } else {
                let g = e.remove();
                self.stats.gaps_fast_lost += bound - start;
                self.given_up_to = self.given_up_to.max(bound);
                self.gaps.insert(bound, g);
                break;
            }
        }
    }

    /// Give up gaps whose deadline passed, and the lowest ones over the cap.
    /// A gap behind a path that is still delivering older numbers is
    /// waited for longer ([`Self::still_coming`]).
    fn expire_gaps(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .gaps
            .iter()
            .filter(|(_, g)| g.deadline <= now)
            .map(|(&s, _)| s)
            .collect();
        for s in due {
            if self.still_coming(s, now) {
                continue;
            }
            if let Some(g) = self.gaps.remove(&s) {
                self.stats.gaps_timed_out += g.end - s;
                self.given_up_to = self.given_up_to.max(g.end);
                self.extent.gave_up(s, g.end, g.since);
            }
        }
        while self.gaps.len() > MAX_GAPS {
            if let Some((s, g)) = self.gaps.pop_first() {
                self.stats.gaps_overflow += g.end - s;
                self.given_up_to = self.given_up_to.max(g.end);
            }
        }
    }

    /// A due gap that a path may still deliver: some path whose highest
    /// delivered MP_SEQ is below the gap's top kept delivering after the
    /// gap opened — each path delivers in order, so the missing number may
    /// sit in that path's queue (a lone detour to a slower path whose
    /// queue just grew: its latency estimate lags the queue, and a QUIC
    /// inner flow takes the packet the hold gave up on as lost, RFC 9002
    /// §6.1). Waited for until that path falls silent for the gap's
    /// `wait`, at most `max_timeout` after it opened; the packets held
    /// behind it wait as long. A real loss on the fast path is still found
    /// at once when the slower path delivers past it (fast loss).
    fn still_coming(&mut self, start: u64, now: Instant) -> bool {
        let Some(g) = self.gaps.get_mut(&start) else {
            return false;
        };
        let Some(last) = self.progress.behind_and_moving(g.end, g.since) else {
            return false;
        };
        let deadline = (last + g.wait).min(g.since + self.max_timeout);
        if deadline <= now {
            return false;
        }
        g.deadline = deadline;
        g.extended = true;
        let end = g.end;
        self.stats.gaps_extended += 1;
        for k in &self.holding {
            if let Some(f) = self.flows.get_mut(k).filter(|f| !f.tcp) {
                for (_, h) in f.held.range_mut(end..) {
                    h.deadline = h.deadline.max(deadline);
                }
            }
        }
        true
    }

    /// The flow `key` belongs in, making room in the table if needed.
    fn flow_slot(&mut self, key: u64) -> u64 {
        if self.flows.contains_key(&key) || self.flows.len() < MAX_FLOWS {
            return key;
        }
        // Forget the least recently seen flow that holds nothing.
        let victim = self
            .flows
            .iter()
            .filter(|(&k, f)| f.held.is_empty() && k != OVERFLOW_FLOW)
            .min_by_key(|(&k, f)| (f.last_seen, k))
            .map(|(&k, _)| k);
        match victim {
            Some(v) => {
                self.flows.remove(&v);
                key
            }
            None => OVERFLOW_FLOW,
        }
    }

    fn deliver(&mut self, item: ReorderItem, now: Instant, after_gap: bool) {
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

    /// Release the held head packets of flow `key` that no gap blocks any
    /// more, whose deadline passed, or (`force`, overflow) the first one.
    fn release_flow(&mut self, key: u64, now: Instant, mut force: bool) {
        let floor = self.floor.unwrap_or(0);
        while let Some(flow) = self.flows.get(&key) {
            let Some((&seq, h)) = flow.held.first_key_value() else {
                break;
            };
            let lo = flow.last.map_or(floor, |l| l.saturating_add(1));
            let blocked = self.missing_in(lo, seq, flow.tcp);
            if ((blocked && h.deadline > now) || h.not_before > now) && !force {
                break;
            }
            force = false;
            let missing = self.missing_count(lo, seq);
            let Some(flow) = self.flows.get_mut(&key) else {
                break;
            };
            let Some((_, h)) = flow.held.pop_first() else {
                break;
            };
            if flow.last.is_some_and(|l| seq > l) {
                flow.sample_stride(seq, missing);
            }
            flow.last = Some(flow.last.map_or(seq, |l| l.max(seq)));
            self.held_pkts -= 1;
            self.held_bytes -= h.item.payload.len();
            let after_gap = blocked || self.given_up_to > lo;
            if flow.note_delivery(after_gap, &h.item.payload, now) {
                self.stats.inner_tcp_resent += 1;
            }
            self.deliver(h.item, now, after_gap);
        }
        if let Some(f) = self.flows.get_mut(&key) {
            if f.held.is_empty() && f.one_path_hold {
                // Released without its own packet filling the gap.
                f.one_path_hold = false;
                f.judge(false);
            }
        }
        if self.flows.get(&key).is_none_or(|f| f.held.is_empty()) {
            self.holding.remove(&key);
        }
    }

    fn release_all(&mut self, now: Instant) {
        self.expire_gaps(now);
        self.recompute_floor();
        let keys: Vec<u64> = self.holding.iter().copied().collect();
        for k in keys {
            self.release_flow(k, now, false);
        }
    }

    /// A packet whose MP_SEQ is in no open gap: a duplicate, or late (its
    /// gap was given up): delivered out of order unless `drop_late`.
    fn not_in_a_gap(&mut self, seen: Seen, item: ReorderItem, now: Instant) {
        match seen {
            Seen::Duplicate => self.stats.duplicates += 1,
            Seen::TooOld => self.stats.late += 1,
            Seen::New => {
                self.stats.late += 1;
                self.extent.late(now, item.seq);
                if !self.drop_late {
                    self.deliver(item, now, true);
                }
            }
        }
    }

    /// A late packet (its gap given up while a lower gap is still open)
    /// whose flow still holds an earlier packet joins that hold, counted
    /// late: delivered now, it would overtake its own flow's earlier
    /// packets, the reordering the hold exists to prevent. Gaps expire one
    /// by one, so a higher gap can be given up before a lower one when the
    /// hold bound shrank between them. Returns the packet when its flow
    /// holds nothing below it.
    fn join_own_hold(&mut self, now: Instant, item: ReorderItem) -> Option<ReorderItem> {
        let (hash, _) = inner::flow_key(&item.payload, FLOW_SEED);
        let key = self.flow_slot(hash);
        let flow = self.flows.get_mut(&key)?;
        if flow
            .held
            .first_key_value()
            .is_none_or(|(&h, _)| h > item.seq)
        {
            return Some(item);
        }
        self.stats.late += 1;
        self.extent.late(now, item.seq);
        // Due at once: only the earlier packets of its flow keep it.
        self.hold(key, item, now, now);
        None
    }

    /// Holds `item` in flow `key` until `deadline` (or its gaps close).
    fn hold(&mut self, key: u64, item: ReorderItem, deadline: Instant, not_before: Instant) {
        self.held_pkts += 1;
        self.held_bytes += item.payload.len();
        if let Some(f) = self.flows.get_mut(&key) {
            f.held.insert(
                item.seq,
                Held {
                    item,
                    deadline,
                    not_before,
                },
            );
        }
        self.holding.insert(key);
    }

    fn admit(
        &mut self,
        now: Instant,
        item: ReorderItem,
        paths: &[PathView],
        rx: &[PathReceiveState],
    ) {
        self.stats.received += 1;
        if let Some(item) = self.admit_to_sequence(now, item, paths, rx) {
            self.admit_to_flow(now, item, paths);
        }
    }

    /// The connection-wide bookkeeping of one arrival: its MP_SEQ fills a
    /// gap or opens one above the top; losses and expired gaps move the
    /// floor. `None` when it was handled here (late, a duplicate, or below
    /// the floor); otherwise its flow decides next.
    fn admit_to_sequence(
        &mut self,
        now: Instant,
        item: ReorderItem,
        paths: &[PathView],
        rx: &[PathReceiveState],
    ) -> Option<ReorderItem> {
        let seq = item.seq;
        if seq == u64::MAX {
            // Never produced by the 48-bit unwrap; refusing it keeps ranges finite.
            self.stats.late += 1;
            return None;
        }
        let floor = *self.floor.get_or_insert(seq);
        let seen = self.dedup.insert(seq);
        if seq < floor {
            self.not_in_a_gap(seen, item, now);
            return None;
        }
        // At or above the floor the gaps are the truth: a seq is new when
        // above the top or inside a gap.
        match self.top {
            Some(t) if seq <= t => match self.fill(seq) {
                Some(since) => self
                    .extent
                    .sample(now, now.saturating_duration_since(since)),
                None => {
                    // Arrived already, or its gap was given up while a
                    // lower one is still open.
                    let item = match seen {
                        Seen::New if !self.drop_late => self.join_own_hold(now, item),
                        _ => Some(item),
                    };
                    if let Some(item) = item {
                        self.not_in_a_gap(seen, item, now);
                    }
                    return None;
                }
            },
            _ => {
                let from = self.top.map_or(floor, |t| t + 1);
                if from < seq {
                    let wait = self.hold_bound(now, paths);
                    self.gaps.insert(
                        from,
                        Gap {
                            end: seq,
                            since: now,
                            deadline: now + wait,
                            wait,
                            extended: false,
                        },
                    );
                }
                self.top = Some(seq);
            }
        }
        self.progress.note(item.path, seq, now);
        if let Some(b) = self.progress.fast_loss_bound(self.fast_loss, paths, rx) {
            self.lose_below(b);
        }
        self.expire_gaps(now);
        self.recompute_floor();
        Some(item)
    }

    /// Delivers `item` or holds it in its inner flow: held only behind the
    /// flow's own earlier packets still missing (or while the flow holds).
    fn admit_to_flow(&mut self, now: Instant, item: ReorderItem, paths: &[PathView]) {
        let seq = item.seq;
        let (hash, protocol) = inner::flow_key(&item.payload, FLOW_SEED);
        let key = self.flow_slot(hash);
        let flow = self.flows.entry(key).or_default();
        flow.last_seen = Some(now);
        flow.tcp = protocol == Some(inner::TCP);
        self.arrived_bytes = self.arrived_bytes.saturating_add(item.payload.len() as u64);
        flow.sample_share(self.arrived_bytes, item.payload.len());
        if flow.last_path.is_some_and(|p| p != item.path) {
            flow.spread_until = Some(now + SPREAD_MEMORY);
        }
        flow.last_path = Some(item.path);
        flow.saw_path(item.path, now);
        let last = flow.last;
        let holding = !flow.held.is_empty();
        let lo = last.map_or(u64::MAX, |l| l.saturating_add(1));
        if last.is_some_and(|l| seq < l) {
            // Overtaken by a later packet of its own flow already delivered
            // (counted late: the flow's delivery point moved past it). A
            // hold would have kept its order: evidence for holding.
            if let Some(f) = self.flows.get_mut(&key) {
                f.judge(true);
            }
            self.stats.late += 1;
            self.deliver(item, now, true);
            return;
        }
        let (held_back, not_before) = match self.flows.get(&key) {
            Some(f) => (
                self.holds(f, lo, seq, now),
                self.equalised(f, &item, now, paths),
            ),
            None => (false, now),
        };
        if !holding && !held_back && not_before <= now {
            let missing = self.missing_count(lo, seq);
            let after_gap = last.is_some() && self.given_up_to > lo;
            if let Some(f) = self.flows.get_mut(&key) {
                f.sample_stride(seq, missing);
                f.last = Some(seq);
                if f.note_delivery(after_gap, &item.payload, now) {
                    self.stats.inner_tcp_resent += 1;
                }
            }
            self.deliver(item, now, after_gap);
            return;
        }
        if let Some(f) = self.flows.get_mut(&key) {
            let own_fill = f.held.first_key_value().is_some_and(|(&h, _)| seq < h);
            if holding && f.one_path_hold && own_fill {
                // Its own packet fills the gap it is held behind.
                f.one_path_hold = false;
                f.judge(true);
            } else if !holding && !f.spread(now) {
                f.one_path_hold = true;
            }
        }
        let deadline = item.arrival + self.hold_bound(now, paths);
        self.hold(key, item, deadline, not_before);
    }

    /// When a packet of a TCP flow spread over paths may be delivered at
    /// the earliest: its arrival plus its path's base one-way delay deficit
    /// to the slowest active path the flow used within [`SPREAD_MEMORY`]
    /// (`min_rtt / 2` each), unless the flow saw a loss within
    /// [`EQUALISE_LOSS_MEMORY`]. An inner BBR then sees one RTT, not two:
    /// with two, a probe that reaches the slower path lowers its rate
    /// samples (more in flight, a longer RTT) and it reads the detour as
    /// less bandwidth (docs/AGGREGATION.md, "An inner BBR sees one RTT").
    fn equalised(
        &self,
        flow: &Flow,
        item: &ReorderItem,
        now: Instant,
        paths: &[PathView],
    ) -> Instant {
        let lost_lately = flow
            .last_loss
            .is_some_and(|t| now.saturating_duration_since(t) < EQUALISE_LOSS_MEMORY);
        if !self.equalise || !flow.tcp || !flow.spread(now) || lost_lately {
            return item.arrival;
        }
        let base = |id: PathId| {
            paths
                .iter()
                .find(|p| p.id == id && p.state == PathState::Active)
                .and_then(|p| p.min_rtt)
                .map(|r| r / 2)
        };
        let Some(own) = base(item.path) else {
            return item.arrival;
        };
        let slowest = flow
            .paths_seen
            .iter()
            .filter(|(_, t)| now.saturating_duration_since(*t) < SPREAD_MEMORY)
            .filter_map(|(p, _)| base(*p))
            .max()
            .unwrap_or(own);
        item.arrival + slowest.saturating_sub(own)
    }
}

impl Reorder for PerFlow {
    fn name(&self) -> &'static str {
        "per-flow"
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
        self.release_all(now);
        // Bounded memory: force out the head with the lowest MP_SEQ.
        while self.held_pkts > self.max_hold_pkts || self.held_bytes > self.max_hold_bytes {
            let victim = self
                .holding
                .iter()
                .filter_map(|k| {
                    let f = self.flows.get(k)?;
                    f.held.first_key_value().map(|(s, _)| (*s, *k))
                })
                .min();
            let Some((_, k)) = victim else { break };
            self.stats.overflow_releases += 1;
            self.release_flow(k, now, true);
        }
    }

    fn pop(&mut self, now: Instant) -> Option<Delivered> {
        if self.ready.is_empty() && self.poll_timeout().is_some_and(|t| t <= now) {
            self.release_all(now);
        }
        let d = self.ready.pop_front()?;
        self.stats.delivered += 1;
        Some(d)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // A held head goes at its own deadline or when the gaps below it
        // are given up, whichever is first.
        // A head held for equalisation goes at its `not_before` when no
        // gap blocks it, else at the later of the two.
        let floor = self.floor.unwrap_or(0);
        let heads = self
            .holding
            .iter()
            .filter_map(|k| {
                let f = self.flows.get(k)?;
                let (&seq, h) = f.held.first_key_value()?;
                let lo = f.last.map_or(floor, |l| l.saturating_add(1));
                Some(if self.missing_in(lo, seq, f.tcp) {
                    h.deadline.max(h.not_before)
                } else {
                    h.not_before
                })
            })
            .min()?;
        let gaps = self.gaps.values().map(|g| g.deadline).min();
        Some(gaps.map_or(heads, |g| g.min(heads)))
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.release_all(now);
    }

    fn stats(&self) -> ReorderStats {
        ReorderStats {
            held_pkts: self.held_pkts as u64,
            held_bytes: self.held_bytes as u64,
            ..self.stats
        }
    }
}
