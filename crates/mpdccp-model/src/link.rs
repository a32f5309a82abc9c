//! One direction of one path, sans-IO: the link model shared by the simulator
//! (virtual clock) and `mpdccp netem` (wall clock, see [`crate::netem`]).
//!
//! Model, in the order a packet meets it:
//! 1. **Outage** (`down`): a packet pushed in `[from_s, to_s)` is dropped
//!    ([`LinkDrop::Down`]); at `from_s`, every packet still queued, being
//!    serialized or propagating is lost (counted in [`LinkStats::flushed_pkts`]).
//! 2. **Random loss**: with probability `loss`, from a ChaCha8 stream seeded at
//!    construction (one draw per pushed packet, only when `loss > 0`).
//! 3. **Drop-tail buffer**: the packet is refused if the bytes not yet fully
//!    serialized (including the packet being serialized) plus its own length
//!    would exceed `buffer_bytes`.
//! 4. **Serialization**, FIFO, at the piecewise-constant rate in force. A packet
//!    that starts under one rate and finishes under another finishes exactly when
//!    the schedule implies: the bits served are integrated across rate changes in
//!    exact integer arithmetic (bit·ns), so 1500 B at 12 Mbit/s takes exactly
//!    1 ms. Rate 0 holds packets until a later positive rate. In trace mode
//!    (mahimahi), packets leave at 1500-byte delivery opportunities instead (see
//!    [`Trace`]); an opportunity unused when it comes is lost, partly used ones
//!    carry the rest of their bytes to packets already queued at that time.
//! 5. **Propagation**: the delay in force when the packet's last bit leaves.
//!    Delivery order stays FIFO even when the delay drops (a packet never
//!    overtakes an earlier one: it is delivered at the later of its own time and
//!    its predecessor's), as on a real wire.
//!
//! Because the schedule is known in advance, each packet's departure and
//! delivery times are computed once, at `push`; `push` and `poll_deliver` are
//! amortized O(1) (O(len / 1500) in trace mode). Time never goes backwards: an
//! earlier `now` than already seen is taken as the latest one seen.
//!
//! All schedule times are relative to [`Instant::ZERO`].

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use mpdccp_proto::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::{Direction, PathSpec, Trace};

/// Why [`Link::push`] refused a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkDrop {
    /// The drop-tail buffer is full.
    BufferFull,
    /// Random loss.
    RandomLoss,
    /// The path is down (outage).
    Down,
}

impl fmt::Display for LinkDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkDrop::BufferFull => "buffer full",
            LinkDrop::RandomLoss => "random loss",
            LinkDrop::Down => "path down",
        })
    }
}

/// Counters. Every pushed packet is, at any time, exactly one of: delivered,
/// dropped (buffer, loss, down), flushed by an outage, or still in the link:
/// `pushed_pkts == delivered_pkts + dropped_pkts() + link.in_flight_pkts()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    pub pushed_pkts: u64,
    pub pushed_bytes: u64,
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub dropped_buffer_pkts: u64,
    pub dropped_buffer_bytes: u64,
    pub dropped_loss_pkts: u64,
    pub dropped_loss_bytes: u64,
    /// Pushed while the path was down.
    pub dropped_down_pkts: u64,
    pub dropped_down_bytes: u64,
    /// Queued or propagating when an outage began.
    pub flushed_pkts: u64,
    pub flushed_bytes: u64,
    /// Largest buffer occupancy seen (bytes not yet serialized).
    pub max_queue_bytes: usize,
}

impl LinkStats {
    /// Every packet that will never be delivered.
    pub fn dropped_pkts(&self) -> u64 {
        self.dropped_buffer_pkts
            + self.dropped_loss_pkts
            + self.dropped_down_pkts
            + self.flushed_pkts
    }
}

/// A delivered packet with what happened to it on the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery<P> {
    pub pkt: P,
    pub len_bytes: usize,
    /// When it was pushed.
    pub sent_at: Instant,
    /// Time spent waiting in the buffer before its serialization began
    /// (in trace mode: before the first delivery opportunity it used).
    pub queue_delay: Duration,
    /// When its last bit left the bottleneck.
    pub departed_at: Instant,
    /// When it arrived at the far end (`<=` the `now` it was polled at).
    pub delivered_at: Instant,
}

/// One direction of one path. `P` is the caller's packet (bytes, an id, …).
#[derive(Debug)]
pub struct Link<P> {
    /// `(from, bit/s)`, first at zero; empty means rate 0 forever.
    rate: Vec<(Instant, u64)>,
    rate_idx: usize,
    trace: Option<TraceCursor>,
    delay: Vec<(Instant, Duration)>,
    delay_idx: usize,
    outages: Vec<(Instant, Instant)>,
    /// First outage whose start has not been applied yet.
    outage_idx: usize,
    /// The latest end of the outages applied so far: down while `now` is before it.
    down_until: Instant,
    buffer_bytes: usize,
    loss: f64,
    rng: ChaCha8Rng,
    queue: VecDeque<Entry<P>>,
    /// The first `departed` entries have left the bottleneck (propagating).
    departed: usize,
    queued_bytes: usize,
    /// When the last accepted packet finishes serialization.
    busy_until: Instant,
    /// When the last accepted packet is delivered (FIFO floor).
    last_delivery: Instant,
    now: Instant,
    stats: LinkStats,
}

#[derive(Debug)]
struct Entry<P> {
    pkt: P,
    len: usize,
    sent_at: Instant,
    start_at: Instant,
    depart_at: Instant,
    deliver_at: Instant,
}

/// Position in a looping mahimahi trace.
#[derive(Debug)]
struct TraceCursor {
    trace: Arc<Trace>,
    /// Link time of the trace's time 0 (`PathSpec::trace_start_s`): no
    /// opportunity before it.
    start: Duration,
    /// Global index (across loops) of the opportunity the last packet finished in.
    last_opp: Option<u64>,
    /// Bytes still free in that opportunity.
    left_bytes: usize,
}

impl<P> Link<P> {
    /// The up direction (client to server) of `spec`.
    pub fn new(spec: &PathSpec, seed: u64) -> Self {
        Self::with_direction(spec, Direction::Up, seed)
    }

    /// One direction of `spec`: the direction picks the trace file in trace
    /// mode; rate, delay, buffer, loss and outages are the same both ways.
    /// Use different seeds for the two directions.
    pub fn with_direction(spec: &PathSpec, dir: Direction, seed: u64) -> Self {
        let trace = spec.trace(dir).map(|t| TraceCursor {
            trace: t.clone(),
            start: Duration::from_secs_f64(spec.trace_start_s.max(0.0)),
            last_opp: None,
            left_bytes: 0,
        });
        // Schedules of a validated spec are already ordered; sorting keeps the
        // cursor arithmetic sound for specs built in code.
        let mut rate = spec.rate_schedule_bps();
        rate.sort_by_key(|r| r.0);
        if let Some(first) = rate.first_mut() {
            first.0 = Instant::ZERO;
        }
        let mut delay = spec.delay_schedule();
        delay.sort_by_key(|d| d.0);
        let mut outages: Vec<(Instant, Instant)> = spec
            .down
            .iter()
            .map(|o| {
                (
                    Instant::from_secs_f64(o.from_s),
                    Instant::from_secs_f64(o.to_s),
                )
            })
            .collect();
        outages.sort();
        Link {
            rate,
            rate_idx: 0,
            trace,
            delay,
            delay_idx: 0,
            outages,
            outage_idx: 0,
            down_until: Instant::ZERO,
            buffer_bytes: spec.buffer_bytes,
            loss: if spec.loss.is_finite() {
                spec.loss.clamp(0.0, 1.0)
            } else {
                0.0
            },
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: VecDeque::new(),
            departed: 0,
            queued_bytes: 0,
            busy_until: Instant::ZERO,
            last_delivery: Instant::ZERO,
            now: Instant::ZERO,
            stats: LinkStats::default(),
        }
    }

    /// Offers a packet to the link at `now`. On `Err`, the packet is dropped
    /// (and counted); on `Ok`, it will come out of [`Link::poll_deliver`] unless
    /// an outage begins before it arrives.
    pub fn push(&mut self, now: Instant, pkt: P, len_bytes: usize) -> Result<(), LinkDrop> {
        self.handle_timeout(now);
        let now = self.now;
        let len64 = len_bytes as u64;
        self.stats.pushed_pkts += 1;
        self.stats.pushed_bytes += len64;
        let down = now < self.down_until;
        if down {
            self.stats.dropped_down_pkts += 1;
            self.stats.dropped_down_bytes += len64;
            return Err(LinkDrop::Down);
        }
        if self.loss > 0.0 && self.rng.gen::<f64>() < self.loss {
            self.stats.dropped_loss_pkts += 1;
            self.stats.dropped_loss_bytes += len64;
            return Err(LinkDrop::RandomLoss);
        }
        if self.queued_bytes.saturating_add(len_bytes) > self.buffer_bytes {
            self.stats.dropped_buffer_pkts += 1;
            self.stats.dropped_buffer_bytes += len64;
            return Err(LinkDrop::BufferFull);
        }
        let (start_at, depart_at) = match self.trace.as_mut() {
            Some(cursor) => cursor.serve(now, len_bytes),
            None => {
                let start = now.max(self.busy_until);
                (start, self.serve_at_rate(start, len_bytes))
            }
        };
        let deliver_at = if depart_at == Instant::MAX {
            Instant::MAX
        } else {
            (depart_at + self.delay_at(depart_at)).max(self.last_delivery)
        };
        self.busy_until = depart_at;
        self.last_delivery = deliver_at;
        self.queue.push_back(Entry {
            pkt,
            len: len_bytes,
            sent_at: now,
            start_at,
            depart_at,
            deliver_at,
        });
        self.queued_bytes += len_bytes;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes);
        self.mark_departed(now);
        Ok(())
    }

    /// The next packet whose delivery time has come, in FIFO order.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<P> {
        self.poll_delivery(now).map(|d| d.pkt)
    }

    /// Like [`Link::poll_deliver`], with the packet's queueing delay and times.
    pub fn poll_delivery(&mut self, now: Instant) -> Option<Delivery<P>> {
        self.handle_timeout(now);
        if self.queue.front()?.deliver_at > self.now {
            return None;
        }
        let e = self.queue.pop_front()?;
        // deliver_at >= depart_at, so a deliverable entry has departed and was
        // counted in `departed` by `mark_departed`.
        self.departed = self.departed.saturating_sub(1);
        self.stats.delivered_pkts += 1;
        self.stats.delivered_bytes += e.len as u64;
        Some(Delivery {
            pkt: e.pkt,
            len_bytes: e.len,
            sent_at: e.sent_at,
            queue_delay: e.start_at.saturating_duration_since(e.sent_at),
            departed_at: e.depart_at,
            delivered_at: e.deliver_at,
        })
    }

    /// The `k`-th packet in the link (0: the next to be delivered), without
    /// taking it: a driver can fetch its data ahead of the delivery.
    pub fn peek(&self, k: usize) -> Option<&P> {
        self.queue.get(k).map(|e| &e.pkt)
    }

    /// Appends every packet deliverable at `now` to `out`; returns how many.
    /// For batch drivers (`netem`).
    pub fn poll_deliver_batch(&mut self, now: Instant, out: &mut Vec<P>) -> usize {
        let mut n = 0;
        while let Some(p) = self.poll_deliver(now) {
            out.push(p);
            n += 1;
        }
        n
    }

    /// When the link next needs attention: the next delivery, or the start of
    /// the next outage if packets are in the link (they will be flushed then).
    /// `None` when nothing is in the link (or nothing can ever leave it).
    pub fn next_event(&self) -> Option<Instant> {
        let front = self.queue.front()?.deliver_at;
        let outage = self
            .outages
            .get(self.outage_idx)
            .map(|o| o.0)
            .unwrap_or(Instant::MAX);
        let t = front.min(outage);
        (t != Instant::MAX).then_some(t)
    }

    /// Advances the link's clock to `now`: applies outage starts and moves
    /// serialized packets from the buffer to the wire. `push` and `poll_*` do
    /// this themselves; call it before reading [`Link::queue_bytes`] at a time
    /// of your choosing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        while let Some(&(from, to)) = self.outages.get(self.outage_idx) {
            if from > self.now {
                break;
            }
            self.outage_idx += 1;
            self.down_until = self.down_until.max(to);
            self.flush(from);
        }
        self.mark_departed(self.now);
    }

    /// Bytes in the buffer (not yet fully serialized) as of the last call.
    pub fn queue_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Packets in the buffer (not yet fully serialized) as of the last call.
    pub fn queue_pkts(&self) -> usize {
        self.queue.len() - self.departed
    }

    /// Packets accepted and not yet delivered or flushed (buffer + wire).
    pub fn in_flight_pkts(&self) -> usize {
        self.queue.len()
    }

    /// Whether the path is in an outage at `now`.
    pub fn is_down(&self, now: Instant) -> bool {
        self.outages
            .iter()
            .any(|&(from, to)| from <= now && now < to)
    }

    /// The serialization rate in force at `now` in bit/s (0 for trace links).
    pub fn rate_bps(&self, now: Instant) -> u64 {
        if self.trace.is_some() {
            return 0;
        }
        let i = self.rate.partition_point(|&(at, _)| at <= now);
        i.checked_sub(1).map(|i| self.rate[i].1).unwrap_or(0)
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// The one-way propagation delay for a packet leaving at `t`.
    fn delay_at(&mut self, t: Instant) -> Duration {
        // Departures are non-decreasing, so the cursor only moves forward.
        while self
            .delay
            .get(self.delay_idx + 1)
            .is_some_and(|&(at, _)| at <= t)
        {
            self.delay_idx += 1;
        }
        self.delay
            .get(self.delay_idx)
            .map(|d| d.1)
            .unwrap_or(Duration::ZERO)
    }

    /// When `len` bytes whose serialization starts at `start` have left:
    /// integrates the rate schedule in bit·ns so the result is exact to the ns.
    fn serve_at_rate(&mut self, start: Instant, len: usize) -> Instant {
        while self
            .rate
            .get(self.rate_idx + 1)
            .is_some_and(|&(at, _)| at <= start)
        {
            self.rate_idx += 1;
        }
        // Work left, in bit·ns (bits × 1e9): a segment of rate r bit/s serves
        // r bit·ns per ns.
        let mut work = len as u128 * 8 * 1_000_000_000;
        let mut t = start;
        let mut i = self.rate_idx;
        while let Some(&(_, r)) = self.rate.get(i) {
            let seg_end = self.rate.get(i + 1).map(|s| s.0);
            if r > 0 {
                // u128 division is a libcall; a packet's work fits u64.
                let needed_ns = match u64::try_from(work) {
                    Ok(w) => u128::from(w.div_ceil(r)),
                    Err(_) => work.div_ceil(r as u128),
                };
                let available_ns = seg_end.map(|e| (e.as_nanos() - t.as_nanos()) as u128);
                match available_ns {
                    Some(avail) if avail < needed_ns => work -= avail * r as u128,
                    _ => {
                        let end = t.as_nanos() as u128 + needed_ns;
                        return Instant::from_nanos(u64::try_from(end).unwrap_or(u64::MAX));
                    }
                }
            }
            match seg_end {
                Some(e) => t = e,
                None => break,
            }
            i += 1;
        }
        // Rate 0 forever after `start` (or no rate at all).
        Instant::MAX
    }

    /// An outage begins at `at`: everything that would arrive after `at` is lost.
    fn flush(&mut self, at: Instant) {
        while self.queue.back().is_some_and(|e| e.deliver_at > at) {
            if let Some(e) = self.queue.pop_back() {
                self.stats.flushed_pkts += 1;
                self.stats.flushed_bytes += e.len as u64;
            }
        }
        // Survivors arrive by `at`, so they left the bottleneck by `at` too.
        self.departed = self.queue.len();
        self.queued_bytes = 0;
        self.busy_until = self.busy_until.min(at);
        self.last_delivery = self.last_delivery.min(at);
        if let Some(c) = self.trace.as_mut() {
            c.left_bytes = 0;
        }
    }

    fn mark_departed(&mut self, now: Instant) {
        while let Some(e) = self.queue.get(self.departed) {
            if e.depart_at > now {
                break;
            }
            self.queued_bytes -= e.len;
            self.departed += 1;
        }
    }
}

impl TraceCursor {
    /// mahimahi semantics: a packet arriving at `arrival` is carried by the
    /// delivery opportunities at or after `arrival`, 1500 bytes each, after the
    /// packets ahead of it. Returns (first opportunity used, last one used).
    fn serve(&mut self, arrival: Instant, len: usize) -> (Instant, Instant) {
        let mut remaining = len;
        // The rest of the opportunity the previous packet ended in, if it has
        // not passed yet when this packet arrives.
        let mut k = match self.last_opp {
            Some(k) if self.left_bytes > 0 && self.opp_time(k) >= arrival => k,
            Some(k) => (k + 1).max(self.first_opp_at_or_after(arrival)),
            None => self.first_opp_at_or_after(arrival),
        };
        let mut left = if Some(k) == self.last_opp {
            self.left_bytes
        } else {
            Trace::OPPORTUNITY_BYTES
        };
        let first = self.opp_time(k);
        loop {
            let take = left.min(remaining);
            remaining -= take;
            left -= take;
            if remaining == 0 {
                break;
            }
            k += 1;
            left = Trace::OPPORTUNITY_BYTES;
        }
        self.last_opp = Some(k);
        self.left_bytes = left;
        (first, self.opp_time(k))
    }

    fn opp_time(&self, k: u64) -> Instant {
        let n = self.trace.opportunities_ms.len() as u64;
        // n >= 1 and period >= 1 are guaranteed by `Trace::parse`.
        let cycle = k / n.max(1);
        let idx = (k % n.max(1)) as usize;
        let ms = cycle
            .saturating_mul(self.trace.period_ms)
            .saturating_add(self.trace.opportunities_ms.get(idx).copied().unwrap_or(0));
        Instant::from_millis(ms) + self.start
    }

    fn first_opp_at_or_after(&self, t: Instant) -> u64 {
        let t = t.saturating_sub(self.start);
        let n = self.trace.opportunities_ms.len() as u64;
        let period_ns = self.trace.period_ms.max(1) * 1_000_000;
        let cycle = t.as_nanos() / period_ns;
        let within = t.as_nanos() - cycle * period_ns;
        let i = self
            .trace
            .opportunities_ms
            .partition_point(|&ms| ms * 1_000_000 < within) as u64;
        cycle * n + i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DelayPoint, Outage, RatePoint};

    fn spec(mbps: f64, delay_ms: f64, buffer_bytes: usize) -> PathSpec {
        PathSpec {
            name: "p".into(),
            delay_ms,
            buffer_bytes,
            rate: vec![RatePoint { at_s: 0.0, mbps }],
            ..PathSpec::default()
        }
    }

    fn ms(x: u64) -> Instant {
        Instant::from_millis(x)
    }

    fn us(x: u64) -> Instant {
        Instant::from_micros(x)
    }

    #[test]
    fn serialization_plus_delay_is_exact() {
        // 1500 B at 12 Mbit/s = 12000 bit / 12e6 bit/s = 1 ms, plus 5 ms.
        let mut l = Link::new(&spec(12.0, 5.0, 100_000), 1);
        l.push(ms(0), 1u32, 1500).unwrap();
        l.push(ms(0), 2u32, 1500).unwrap();
        assert_eq!(l.queue_bytes(), 3000);
        assert_eq!(l.next_event(), Some(ms(6)));
        assert_eq!(l.poll_deliver(Instant::from_nanos(5_999_999)), None);
        let d = l.poll_delivery(ms(6)).unwrap();
        assert_eq!(
            (d.pkt, d.departed_at, d.delivered_at, d.queue_delay),
            (1, ms(1), ms(6), Duration::ZERO)
        );
        assert_eq!(l.queue_bytes(), 0, "packet 2 left the bottleneck at 2 ms");
        assert_eq!(l.next_event(), Some(ms(7)));
        let d = l.poll_delivery(ms(10)).unwrap();
        // Packet 2 waited 1 ms behind packet 1, left at 2 ms, arrived at 7 ms.
        assert_eq!(
            (d.pkt, d.delivered_at, d.queue_delay),
            (2, ms(7), Duration::from_millis(1))
        );
        assert_eq!(l.queue_bytes(), 0);
        assert_eq!(l.next_event(), None);
    }

    #[test]
    fn rate_change_mid_packet_integrates_both_rates() {
        // 12 Mbit/s until 0.5 ms, then 6 Mbit/s. 1500 B = 12000 bit: 6000 bit in
        // the first 0.5 ms, the other 6000 bit at 6 Mbit/s take 1 ms: done at 1.5 ms.
        let mut s = spec(12.0, 0.0, 100_000);
        s.rate.push(RatePoint {
            at_s: 0.0005,
            mbps: 6.0,
        });
        let mut l = Link::new(&s, 1);
        l.push(ms(0), (), 1500).unwrap();
        assert_eq!(l.next_event(), Some(us(1500)));
        // A rate that drops to zero holds the packet until the rate comes back.
        let mut s = spec(12.0, 2.0, 100_000);
        s.rate = vec![
            RatePoint {
                at_s: 0.0,
                mbps: 12.0,
            },
            RatePoint {
                at_s: 0.0005,
                mbps: 0.0,
            },
            RatePoint {
                at_s: 0.010,
                mbps: 24.0,
            },
        ];
        let mut l = Link::new(&s, 1);
        l.push(ms(0), (), 1500).unwrap();
        // 6000 bit by 0.5 ms; nothing until 10 ms; 6000 bit at 24 Mbit/s = 0.25 ms.
        assert_eq!(l.next_event(), Some(us(10_250) + Duration::from_millis(2)));
        // Rate zero forever: never delivered, no event.
        let mut l = Link::new(&spec(0.0, 0.0, 10_000), 1);
        l.push(ms(0), (), 100).unwrap();
        assert_eq!(l.next_event(), None);
        assert_eq!(l.poll_deliver(Instant::from_secs_f64(1e6)), None);
    }

    #[test]
    fn idle_link_starts_serializing_on_arrival() {
        let mut l = Link::new(&spec(12.0, 5.0, 100_000), 1);
        l.push(ms(100), (), 1500).unwrap();
        let d = l.poll_delivery(ms(200)).unwrap();
        assert_eq!(
            (d.sent_at, d.departed_at, d.delivered_at),
            (ms(100), ms(101), ms(106))
        );
    }

    #[test]
    fn drop_tail_at_the_buffer_limit() {
        let mut l = Link::new(&spec(12.0, 0.0, 4500), 1);
        for i in 0..3 {
            l.push(ms(0), i, 1500).unwrap();
        }
        assert_eq!(l.push(ms(0), 3, 1500), Err(LinkDrop::BufferFull));
        assert_eq!(l.push(ms(0), 4, 1), Err(LinkDrop::BufferFull));
        assert_eq!((l.queue_bytes(), l.queue_pkts()), (4500, 3));
        // After 1 ms the first packet has left the bottleneck: room for one more.
        l.push(ms(1), 5, 1500).unwrap();
        assert_eq!(l.push(ms(1), 6, 1500), Err(LinkDrop::BufferFull));
        let st = l.stats();
        assert_eq!(
            (
                st.dropped_buffer_pkts,
                st.dropped_buffer_bytes,
                st.max_queue_bytes
            ),
            (3, 3001, 4500)
        );
        let mut got = Vec::new();
        l.poll_deliver_batch(ms(100), &mut got);
        assert_eq!(got, vec![0, 1, 2, 5]);
    }

    #[test]
    fn loss_rate_within_binomial_bounds_and_seeded() {
        let mut s = spec(10_000.0, 0.0, usize::MAX);
        s.loss = 0.1;
        let n = 100_000u64;
        let run = |seed| {
            let mut l = Link::new(&s, seed);
            let mut pattern = Vec::new();
            for i in 0..n {
                pattern.push(l.push(us(i), i, 100).is_err());
            }
            (l.stats().dropped_loss_pkts, pattern)
        };
        let (lost, a) = run(7);
        // Binomial(n, 0.1): sd = sqrt(n p (1-p)) ~ 94.9; allow 5 sd.
        let sd = (n as f64 * 0.1 * 0.9).sqrt();
        assert!((lost as f64 - 10_000.0).abs() < 5.0 * sd, "lost {lost}");
        assert_eq!(run(7).1, a, "same seed, same losses");
        assert_ne!(run(8).1, a, "another seed, other losses");
    }

    #[test]
    fn outage_drops_arrivals_and_flushes_the_link() {
        let mut s = spec(12.0, 5.0, 100_000);
        s.down = vec![Outage {
            from_s: 0.010,
            to_s: 0.020,
        }];
        let mut l = Link::new(&s, 1);
        // Delivered at 6 ms: before the outage.
        l.push(ms(0), 1, 1500).unwrap();
        // Leaves at 8 ms, would arrive at 13 ms: in flight at 10 ms, lost.
        l.push(ms(7), 2, 1500).unwrap();
        // Serializing from 9.5 ms, would leave at 10.5 ms: flushed.
        l.push(us(9_500), 3, 1500).unwrap();
        assert_eq!(l.next_event(), Some(ms(6)));
        assert_eq!(l.poll_deliver(ms(6)), Some(1));
        assert_eq!(
            l.next_event(),
            Some(ms(10)),
            "the outage start needs attention"
        );
        assert_eq!(l.push(ms(15), 4, 100), Err(LinkDrop::Down));
        assert_eq!(l.poll_deliver(ms(30)), None);
        let st = l.stats();
        assert_eq!(
            (st.flushed_pkts, st.dropped_down_pkts, st.delivered_pkts),
            (2, 1, 1)
        );
        assert_eq!(l.queue_bytes(), 0);
        // After the outage the link works again, from an idle state.
        l.push(ms(30), 5, 1500).unwrap();
        let d = l.poll_delivery(ms(36)).unwrap();
        assert_eq!((d.pkt, d.delivered_at), (5, ms(36)));
    }

    #[test]
    fn delay_schedule_keeps_fifo_order() {
        // Delay drops from 50 ms to 5 ms at t = 10 ms.
        let mut s = spec(12.0, 50.0, 100_000);
        s.delay = vec![DelayPoint {
            at_s: 0.010,
            ms: 5.0,
        }];
        let mut l = Link::new(&s, 1);
        l.push(ms(8), 1, 1500).unwrap(); // leaves 9 ms, arrives 59 ms
        l.push(ms(10), 2, 1500).unwrap(); // leaves 11 ms, would arrive 16 ms: held to 59 ms
        l.push(ms(100), 3, 1500).unwrap(); // leaves 101, arrives 106
        let mut got = Vec::new();
        while let Some(t) = l.next_event() {
            let d = l.poll_delivery(t).unwrap();
            got.push((d.pkt, d.delivered_at));
        }
        assert_eq!(got, vec![(1, ms(59)), (2, ms(59)), (3, ms(106))]);
    }

    fn trace_spec(lines: &str) -> PathSpec {
        let mut s = spec(1.0, 0.0, usize::MAX);
        s.trace_up = Some("t".into());
        s.set_trace(Direction::Up, Trace::parse(lines).unwrap());
        s
    }

    #[test]
    fn trace_link_uses_opportunities() {
        // Opportunities at 2, 2, 5 ms, period 5 ms (then 7, 7, 10, ...).
        let mut l = Link::new(&trace_spec("2\n2\n5\n"), 1);
        l.push(ms(0), 'a', 1500).unwrap(); // opportunity 2 ms
        l.push(ms(0), 'b', 1000).unwrap(); // second opportunity at 2 ms, 500 B left
        l.push(ms(1), 'c', 400).unwrap(); // fits in the rest of it: 2 ms
        l.push(ms(3), 'd', 400).unwrap(); // 100 B left at 2 ms have passed: 5 ms
        l.push(ms(3), 'e', 2000).unwrap(); // rest of 5 ms (1100 B) + 7 ms
        let mut got = Vec::new();
        while let Some(t) = l.next_event() {
            let d = l.poll_delivery(t).unwrap();
            got.push((d.pkt, d.delivered_at));
        }
        assert_eq!(
            got,
            vec![
                ('a', ms(2)),
                ('b', ms(2)),
                ('c', ms(2)),
                ('d', ms(5)),
                ('e', ms(7))
            ]
        );
        // Unused opportunities are lost: an arrival at 11 ms waits for 12 ms.
        l.push(ms(11), 'f', 10).unwrap();
        assert_eq!(l.next_event(), Some(ms(12)));
        // The down direction has no trace: it uses the rate (1 Mbit/s).
        let mut down: Link<()> = Link::with_direction(&trace_spec("1\n"), Direction::Down, 1);
        down.push(ms(0), (), 125).unwrap();
        assert_eq!(down.next_event(), Some(ms(1)));
    }

    #[test]
    fn a_trace_started_later_replays_the_same_opportunities_that_much_later() {
        // The same pushes, 3 s later on a link whose trace starts at 3 s,
        // are served exactly 3 s later (the testbed's set-up shift); before
        // the trace's start there is no opportunity at all.
        let run = |start_s: f64, shift: u64| {
            let mut s = trace_spec("2\n2\n5\n9\n");
            s.trace_start_s = start_s;
            let mut l = Link::new(&s, 1);
            let mut got = Vec::new();
            for (k, at) in [0u64, 0, 1, 3, 3, 11, 12].into_iter().enumerate() {
                l.push(ms(at + shift), k, 700 + 300 * k).unwrap();
            }
            while let Some(t) = l.next_event() {
                let d = l.poll_delivery(t).unwrap();
                got.push((d.pkt, d.delivered_at.as_nanos() - shift * 1_000_000));
            }
            got
        };
        let base = run(0.0, 0);
        assert_eq!(run(3.0, 3_000), base);
        assert_ne!(run(0.0, 3_000), base, "the trace differs 3 s in");
        let mut s = trace_spec("2\n2\n5\n");
        s.trace_start_s = 3.0;
        let mut l = Link::new(&s, 1);
        l.push(ms(0), (), 100).unwrap();
        assert_eq!(l.next_event(), Some(ms(3_002)));
    }

    #[test]
    fn trace_link_throughput_equals_trace_rate() {
        // 3 opportunities per 10 ms = 3.6 Mbit/s; keep the link backlogged with
        // 1000-byte packets for 10 s (1000 periods).
        let s = trace_spec("1\n4\n10\n");
        let rate = s.trace(Direction::Up).unwrap().rate_bps();
        assert_eq!(rate, 3_600_000.0);
        let mut l = Link::new(&s, 1);
        let mut delivered_bytes = 0u64;
        let end = ms(10_000);
        let mut t = Instant::ZERO;
        while t < end {
            while l.queue_bytes() < 20_000 {
                l.push(t, (), 1000).unwrap();
            }
            while let Some(d) = l.poll_delivery(t) {
                delivered_bytes += d.len_bytes as u64;
            }
            t += Duration::from_micros(500);
        }
        let measured = delivered_bytes as f64 * 8.0 / 10.0;
        assert!(
            (measured - rate).abs() / rate < 0.002,
            "measured {measured} vs {rate}"
        );
    }

    #[test]
    fn late_calls_with_earlier_now_do_not_rewind() {
        let mut l = Link::new(&spec(12.0, 0.0, 100_000), 1);
        l.push(ms(10), 1, 1500).unwrap();
        l.push(ms(5), 2, 1500).unwrap(); // taken as 10 ms
        let d = l.poll_delivery(ms(20)).unwrap();
        assert_eq!(d.delivered_at, ms(11));
        let d = l.poll_delivery(ms(20)).unwrap();
        assert_eq!((d.sent_at, d.delivered_at), (ms(10), ms(12)));
    }
}
