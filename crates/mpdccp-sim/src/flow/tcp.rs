//! An inner TCP flow: a bulk sender with its own end-to-end congestion
//! control, and its receiver.
//!
//! Segment-granular (one sequence number per full-size segment), like the
//! kernel's packet-counting TCP. What it implements:
//!
//! * cumulative acks plus up to three SACK blocks per ack (RFC 2018),
//!   timestamps echoed for RTT samples (RFC 7323 §4);
//! * one ack per segment, or delayed acks as RFC 5681 §4.2 and RFC 1122
//!   §4.2.3.2 describe (and Linux and ns-3 do by default): an ack for every
//!   second in-order segment, at most [`DELAYED_ACK_TIMEOUT`] late, and at
//!   once for an out-of-order, duplicate or gap-filling segment. The engine
//!   chooses (see `sim.rs`): a TCP acking every segment answers each ack with
//!   exactly one segment, a packet pattern a drop-tail FIFO without timing
//!   noise rewards over any sender that emits pairs (`scenarios/README.md`, E4).
//! * a SACK scoreboard; a segment is lost once `DUPTHRESH` segments above it
//!   are SACKed (RFC 6675 §4 `IsLost`), lost segments are retransmitted before
//!   new data, and the amount in flight is RFC 6675's `pipe`;
//! * the retransmission timer of RFC 6298 (min 200 ms as Linux, backoff ×2);
//!   on expiry every outstanding segment is marked lost (go-back-N as RFC 6298
//!   §5.4 with SACK scoreboard reset, RFC 6675 §5.1);
//! * delivery-rate sampling for rate-based controllers
//!   (`cc::DeliveryRateEstimator`), pacing when the controller paces, and an
//!   optional rate cap (a pacing floor).
//!
//! The controller (`reno`, `cubic`, `bbr`) comes from a `cc::CcKind` (the controller factory) and decides
//! the window; loss-reaction deduplication (once per window) is its business.

use std::collections::VecDeque;
use std::time::Duration;

use mpdccp_proto::cc::{
    AckEvent, CongestionController, DeliveryRateEstimator, LossEvent, PacketRateState,
    RttEstimator, SentPacket,
};
use mpdccp_proto::Instant;

use crate::packet::{FlowPkt, PktKind, ACK_BYTES, MAX_SACK_BLOCKS};

/// RFC 6675 DupThresh.
const DUPTHRESH: u64 = 3;

/// RFC 5681 §4.2: an ack SHOULD be generated for at least every second
/// full-sized segment.
pub const DELAYED_ACK_SEGMENTS: u32 = 2;

/// Longest an ack waits for a second segment: Linux's minimum delayed-ack
/// timeout (`TCP_DELACK_MIN`, 40 ms); RFC 5681 §4.2 allows up to 500 ms.
pub const DELAYED_ACK_TIMEOUT: Duration = Duration::from_millis(40);

#[derive(Clone, Copy, Debug)]
struct Seg {
    rs: PacketRateState,
    sacked: bool,
    /// Declared lost and not (yet) retransmitted.
    lost: bool,
    /// Counted in `pipe`.
    in_flight: bool,
    retransmitted: bool,
}

/// Counters of one TCP sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    pub sent_pkts: u64,
    pub retransmitted_pkts: u64,
    pub lost_pkts: u64,
    pub rto_count: u64,
    pub acked_pkts: u64,
}

/// The sending side of an inner TCP flow (always backlogged between start and stop).
#[derive(Debug)]
pub struct TcpSender {
    flow: u16,
    seg_bytes: u32,
    cc: Box<dyn CongestionController>,
    rtt: RttEstimator,
    rate: DeliveryRateEstimator,
    /// Scoreboard: `segs[i]` is sequence number `snd_una + i`.
    segs: VecDeque<Seg>,
    snd_una: u64,
    next_seq: u64,
    highest_sacked: Option<u64>,
    /// Every un-SACKed segment below this has been declared lost once.
    lost_mark_upto: u64,
    /// Lost segments awaiting retransmission, and where to look for them.
    lost_pending: u64,
    retx_scan: u64,
    pipe: u32,
    rto_deadline: Option<Instant>,
    rto_backoff: u32,
    /// Pacing / rate cap: earliest time of the next transmission.
    next_send_time: Instant,
    cap_bytes_per_s: Option<f64>,
    stop: Option<Instant>,
    pub stats: TcpStats,
}

impl TcpSender {
    /// `seg_bytes`: the full wire size of a segment (the tunnelled IP packet).
    pub fn new(
        flow: u16,
        seg_bytes: u32,
        cc: Box<dyn CongestionController>,
        cap_mbps: Option<f64>,
        start: Instant,
        stop: Option<Instant>,
    ) -> Self {
        TcpSender {
            flow,
            seg_bytes,
            cc,
            // RFC 6298 §2: initial RTO 1 s; Linux's 200 ms floor and 120 s cap.
            rtt: RttEstimator::new(
                Duration::from_secs(1),
                Duration::from_millis(200),
                Duration::from_secs(120),
            ),
            rate: DeliveryRateEstimator::new(),
            segs: VecDeque::new(),
            snd_una: 0,
            next_seq: 0,
            highest_sacked: None,
            lost_mark_upto: 0,
            lost_pending: 0,
            retx_scan: 0,
            pipe: 0,
            rto_deadline: None,
            rto_backoff: 1,
            next_send_time: start,
            cap_bytes_per_s: cap_mbps.filter(|m| *m > 0.0).map(|m| m * 1e6 / 8.0),
            stop,
            stats: TcpStats::default(),
        }
    }

    pub fn cwnd_pkts(&self) -> u32 {
        self.cc.cwnd_pkts()
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    pub fn in_flight_pkts(&self) -> u32 {
        self.pipe
    }
    pub fn cc_state(&self) -> &'static str {
        self.cc.state()
    }

    fn seg(&self, seq: u64) -> Option<&Seg> {
        seq.checked_sub(self.snd_una)
            .and_then(|i| self.segs.get(usize::try_from(i).ok()?))
    }
    fn seg_mut(&mut self, seq: u64) -> Option<&mut Seg> {
        let i = usize::try_from(seq.checked_sub(self.snd_una)?).ok()?;
        self.segs.get_mut(i)
    }

    fn has_new_data(&self, now: Instant) -> bool {
        self.stop.is_none_or(|s| now < s)
    }

    /// The next segment to transmit at `now`, if the window, the pacer and
    /// the application allow one.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<FlowPkt> {
        if now < self.next_send_time || self.pipe >= self.cc.cwnd_pkts() {
            return None;
        }
        let seq = match self.next_retransmission() {
            Some(seq) => seq,
            None if self.has_new_data(now) => self.next_seq,
            None => return None,
        };
        let rs = self.rate.on_packet_sent(now, self.seg_bytes, self.pipe);
        if seq == self.next_seq {
            self.segs.push_back(Seg {
                rs,
                sacked: false,
                lost: false,
                in_flight: true,
                retransmitted: false,
            });
            self.next_seq += 1;
        } else {
            // Invariant: next_retransmission returned a seq inside the scoreboard.
            let s = self.seg_mut(seq).expect("retransmission inside scoreboard");
            s.rs = rs;
            s.lost = false;
            s.in_flight = true;
            s.retransmitted = true;
            self.lost_pending -= 1;
            self.stats.retransmitted_pkts += 1;
        }
        self.pipe += 1;
        self.stats.sent_pkts += 1;
        self.cc.on_packet_sent(
            now,
            &SentPacket {
                seq,
                bytes: self.seg_bytes,
                in_flight_pkts: self.pipe,
                app_limited: false,
            },
        );
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rtt.rto() * self.rto_backoff);
        }
        self.advance_pacer(now);
        Some(FlowPkt::data(self.flow, seq, now, self.seg_bytes))
    }

    fn advance_pacer(&mut self, now: Instant) {
        let mut gap_s: f64 = 0.0;
        if let Some(rate) = self.cc.pacing_rate_bytes_per_s().filter(|r| *r > 0) {
            gap_s = self.seg_bytes as f64 / rate as f64;
        }
        if let Some(cap) = self.cap_bytes_per_s {
            let cap_gap = self.seg_bytes as f64 / cap;
            if cap_gap > gap_s {
                gap_s = cap_gap;
                if self.pipe < self.cc.cwnd_pkts() {
                    // The cap, not the window, limits: rate samples from now
                    // on must not lower a bandwidth estimate.
                    self.rate.on_app_limited(self.pipe);
                }
            }
        }
        if gap_s > 0.0 {
            // Pace from the later of now and the previous slot so bursts
            // after idle are not accumulated credit.
            let base = self.next_send_time.max(now);
            let base = if base > now + Duration::from_millis(1) {
                now
            } else {
                base
            };
            self.next_send_time = base + Duration::from_secs_f64(gap_s);
        }
    }

    fn next_retransmission(&mut self) -> Option<u64> {
        if self.lost_pending == 0 {
            return None;
        }
        let mut seq = self.retx_scan.max(self.snd_una);
        while seq < self.next_seq {
            let s = self.seg(seq)?;
            if s.lost && !s.sacked {
                self.retx_scan = seq + 1;
                return Some(seq);
            }
            seq += 1;
        }
        // Counter out of sync with the scoreboard: resynchronise rather than spin.
        self.lost_pending = 0;
        None
    }

    /// When the sender wants to be woken: the RTO, or the pacer if it is the
    /// only thing holding a transmission back.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let mut t = self.rto_deadline;
        let wants_to_send =
            self.pipe < self.cc.cwnd_pkts() && (self.lost_pending > 0 || self.has_new_data(now));
        if wants_to_send && self.next_send_time > now {
            t = Some(t.map_or(self.next_send_time, |r| r.min(self.next_send_time)));
        }
        if let Some(stop) = self.stop {
            if self.pipe == 0 && self.segs.is_empty() && now >= stop {
                return None;
            }
        }
        t
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.rto_deadline.is_some_and(|d| d <= now) {
            self.on_rto(now);
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.rto_deadline = None;
        if self.segs.is_empty() {
            return;
        }
        self.stats.rto_count += 1;
        self.cc.on_rto(now);
        let mut newly_lost = 0;
        for s in self.segs.iter_mut() {
            if !s.sacked && !s.lost {
                s.lost = true;
                s.in_flight = false;
                newly_lost += 1;
            }
        }
        self.stats.lost_pkts += newly_lost;
        self.lost_pending = self.segs.iter().filter(|s| s.lost && !s.sacked).count() as u64;
        self.pipe = 0;
        self.retx_scan = self.snd_una;
        self.lost_mark_upto = self.lost_mark_upto.max(self.next_seq);
        self.rto_backoff = (self.rto_backoff * 2).min(64);
        self.rto_deadline = Some(now + self.rtt.rto() * self.rto_backoff);
        self.next_send_time = now;
    }

    /// Process one acknowledgement.
    pub fn handle_ack(&mut self, now: Instant, ack: &FlowPkt) {
        if ack.kind != PktKind::Ack {
            return;
        }
        let prior_in_flight = self.pipe;
        let mut acked_pkts = 0u32;
        // Cumulative part.
        let cum = ack.seq.min(self.next_seq);
        let advanced = cum > self.snd_una;
        while self.snd_una < cum {
            // Invariant: snd_una < cum <= next_seq, so the scoreboard is non-empty.
            let s = self.segs.pop_front().expect("scoreboard holds snd_una");
            self.snd_una += 1;
            if s.lost && !s.sacked {
                self.lost_pending = self.lost_pending.saturating_sub(1);
            }
            if !s.sacked {
                self.deliver(now, &s);
                acked_pkts += 1;
            }
        }
        // Selective part.
        let mut sack_changed = false;
        for &(a, b) in ack.sack.iter().take(usize::from(ack.sack_len)) {
            let a = a.max(self.snd_una);
            let b = b.min(self.next_seq);
            let mut seq = a;
            while seq < b {
                let newly = match self.seg_mut(seq) {
                    Some(s) if !s.sacked => {
                        s.sacked = true;
                        let was_lost = s.lost;
                        s.lost = false;
                        Some((*s, was_lost))
                    }
                    _ => None,
                };
                if let Some((s, was_lost)) = newly {
                    if was_lost {
                        self.lost_pending = self.lost_pending.saturating_sub(1);
                    }
                    self.deliver(now, &s);
                    acked_pkts += 1;
                    sack_changed = true;
                    self.highest_sacked = Some(self.highest_sacked.map_or(seq, |h| h.max(seq)));
                }
                seq += 1;
            }
        }
        if acked_pkts > 0 {
            // RFC 7323 §4.3: the echoed timestamp gives a valid sample even for
            // retransmissions.
            let sample = now.checked_duration_since(ack.sent_at);
            if let Some(rtt) = sample {
                self.rtt.on_sample(rtt);
            }
            self.stats.acked_pkts += u64::from(acked_pkts);
            let rate = self.rate.take_sample(self.rtt.min_rtt());
            let ev = AckEvent {
                acked_pkts,
                acked_bytes: u64::from(acked_pkts) * u64::from(self.seg_bytes),
                prior_in_flight_pkts: prior_in_flight,
                in_flight_pkts: self.pipe,
                rtt: sample,
                srtt: self.rtt.srtt().unwrap_or_default(),
                min_rtt: self.rtt.min_rtt().unwrap_or_default(),
                rate,
                delivered_pkts: self.rate.delivered_pkts(),
                lost_pkts_total: self.stats.lost_pkts,
                largest_acked_sent_time: ack.sent_at,
            };
            self.cc.on_ack(now, &ev, &[]);
        }
        if sack_changed {
            self.detect_losses(now);
        }
        if advanced {
            self.rto_backoff = 1;
        }
        if self.segs.is_empty() {
            self.rto_deadline = None;
        } else if advanced || self.rto_deadline.is_none() {
            // RFC 6298 §5.3: restart the timer when new data is acknowledged.
            self.rto_deadline = Some(now + self.rtt.rto() * self.rto_backoff);
        }
    }

    fn deliver(&mut self, now: Instant, s: &Seg) {
        if s.in_flight {
            self.pipe = self.pipe.saturating_sub(1);
        }
        self.rate.on_packet_delivered(now, &s.rs);
    }

    /// RFC 6675 §4 IsLost: at least DUPTHRESH SACKed segments above.
    fn detect_losses(&mut self, now: Instant) {
        let Some(high) = self.highest_sacked else {
            return;
        };
        // Walk down from the highest SACKed segment until DUPTHRESH SACKed
        // segments are counted; everything un-SACKed below that point is lost.
        let mut count = 0;
        let mut seq = high + 1;
        let floor = self.snd_una.max(self.lost_mark_upto);
        while seq > floor && count < DUPTHRESH {
            seq -= 1;
            if self.seg(seq).is_some_and(|s| s.sacked) {
                count += 1;
            }
        }
        if count < DUPTHRESH {
            return;
        }
        let mut lost_pkts = 0u32;
        let mut largest_lost_sent_time = Instant::ZERO;
        let from = self.snd_una.max(self.lost_mark_upto);
        for q in from..seq {
            if let Some(s) = self.seg_mut(q) {
                if !s.sacked && s.in_flight {
                    s.in_flight = false;
                    s.lost = true;
                    lost_pkts += 1;
                    largest_lost_sent_time = largest_lost_sent_time.max(s.rs.sent_time);
                }
            }
        }
        self.lost_mark_upto = self.lost_mark_upto.max(seq);
        if lost_pkts == 0 {
            return;
        }
        self.pipe = self.pipe.saturating_sub(lost_pkts);
        self.lost_pending += u64::from(lost_pkts);
        self.retx_scan = self.retx_scan.min(from);
        self.stats.lost_pkts += u64::from(lost_pkts);
        let ev = LossEvent {
            lost_pkts,
            lost_bytes: u64::from(lost_pkts) * u64::from(self.seg_bytes),
            in_flight_pkts: self.pipe,
            largest_lost_sent_time,
            delivered_pkts: self.rate.delivered_pkts(),
        };
        self.cc.on_loss(now, &ev, &[]);
    }
}

/// The receiving side: reassembly state and acknowledgement generation.
#[derive(Debug, Default)]
pub struct TcpReceiver {
    flow: u16,
    rcv_next: u64,
    /// Out-of-order segments held, as sorted disjoint ranges `[start, end)`.
    ranges: Vec<(u64, u64)>,
    highest_seen: Option<u64>,
    /// Acknowledge every this many in-order segments (1 = every segment).
    ack_every: u32,
    /// In-order segments received since the last ack sent.
    unacked: u32,
    /// The ack held back (delayed ack), the receiver's latest state.
    pending: Option<FlowPkt>,
}

/// What the receiver made of one data segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// First arrival of this segment (not a duplicate).
    pub new: bool,
    /// It arrived after a segment with a higher sequence number.
    pub out_of_order: bool,
    /// Send the ack now; otherwise it is held (see [`TcpReceiver::take_pending_ack`]).
    pub ack_now: bool,
}

impl TcpReceiver {
    /// A receiver with delayed acks (every [`DELAYED_ACK_SEGMENTS`] segments).
    pub fn new(flow: u16) -> Self {
        Self::with_ack_every(flow, DELAYED_ACK_SEGMENTS)
    }

    /// A receiver acking every `n`-th in-order segment (1 = every segment).
    pub fn with_ack_every(flow: u16, n: u32) -> Self {
        TcpReceiver {
            flow,
            ack_every: n.max(1),
            ..Default::default()
        }
    }

    /// Acknowledge every `n`-th in-order segment from now on.
    pub fn set_ack_every(&mut self, n: u32) {
        self.ack_every = n.max(1);
    }

    /// The held ack, if any (the delayed-ack timer fired); the next ack
    /// counts segments afresh.
    pub fn take_pending_ack(&mut self) -> Option<FlowPkt> {
        self.unacked = 0;
        self.pending.take()
    }

    /// Segments delivered in order so far.
    pub fn delivered_in_order(&self) -> u64 {
        self.rcv_next
    }

    /// Accept one data segment; fills `ack` with the acknowledgement, to be
    /// sent now if [`Arrival::ack_now`], else held as the pending ack.
    pub fn handle_data(&mut self, pkt: &FlowPkt, ack: &mut FlowPkt) -> Arrival {
        let seq = pkt.seq;
        let out_of_order = self.highest_seen.is_some_and(|h| seq < h);
        let dup = seq < self.rcv_next || self.ranges.iter().any(|&(a, b)| a <= seq && seq < b);
        // RFC 5681 §4.2: ack at once a segment that is out of order (above a
        // hole), fills (part of) a hole, or is a duplicate.
        let in_sequence = !dup && seq == self.rcv_next && self.ranges.is_empty();
        if !dup {
            self.highest_seen = Some(self.highest_seen.map_or(seq, |h| h.max(seq)));
            if seq == self.rcv_next {
                self.rcv_next += 1;
                // Pull in a held range that is now contiguous.
                if let Some(&(a, b)) = self.ranges.first() {
                    if a == self.rcv_next {
                        self.rcv_next = b;
                        self.ranges.remove(0);
                    }
                }
            } else {
                self.insert_range(seq);
            }
        }
        *ack = FlowPkt {
            flow: self.flow,
            kind: PktKind::Ack,
            seq: self.rcv_next,
            sent_at: pkt.sent_at,
            len: ACK_BYTES,
            sack: [(0, 0); MAX_SACK_BLOCKS],
            sack_len: 0,
        };
        // RFC 2018 §4: the first block reports the most recent segment; then
        // the highest other blocks.
        let mut n = 0;
        if let Some(&r) = self.ranges.iter().find(|&&(a, b)| a <= seq && seq < b) {
            ack.sack[0] = r;
            n = 1;
        }
        for &r in self.ranges.iter().rev() {
            if n == MAX_SACK_BLOCKS {
                break;
            }
            if n > 0 && r == ack.sack[0] {
                continue;
            }
            ack.sack[n] = r;
            n += 1;
        }
        ack.sack_len = n as u8;
        let ack_now = if in_sequence {
            self.unacked += 1;
            self.unacked >= self.ack_every
        } else {
            true
        };
        if ack_now {
            self.unacked = 0;
            self.pending = None;
        } else {
            self.pending = Some(*ack);
        }
        Arrival {
            new: !dup,
            out_of_order: out_of_order && !dup,
            ack_now,
        }
    }

    fn insert_range(&mut self, seq: u64) {
        let i = self.ranges.partition_point(|&(_, b)| b < seq);
        // ranges[i] is the first range ending at or after seq.
        if i < self.ranges.len() && self.ranges[i].1 == seq {
            self.ranges[i].1 += 1;
            if i + 1 < self.ranges.len() && self.ranges[i + 1].0 == seq + 1 {
                self.ranges[i].1 = self.ranges[i + 1].1;
                self.ranges.remove(i + 1);
            }
        } else if i < self.ranges.len() && self.ranges[i].0 == seq + 1 {
            self.ranges[i].0 = seq;
        } else {
            self.ranges.insert(i, (seq, seq + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(seq: u64) -> FlowPkt {
        FlowPkt::data(1, seq, Instant::ZERO, 1000)
    }

    #[test]
    fn receiver_reports_holes_with_sack_blocks() {
        let mut r = TcpReceiver::new(1);
        let mut ack = data(0);
        r.handle_data(&data(0), &mut ack);
        assert_eq!((ack.seq, ack.sack_len), (1, 0));
        r.handle_data(&data(2), &mut ack);
        r.handle_data(&data(3), &mut ack);
        r.handle_data(&data(5), &mut ack);
        assert_eq!(ack.seq, 1);
        assert_eq!(&ack.sack[..2], &[(5, 6), (2, 4)]);
        let a = r.handle_data(&data(1), &mut ack);
        assert!(a.new && a.out_of_order);
        assert_eq!((ack.seq, ack.sack_len), (4, 1));
        r.handle_data(&data(4), &mut ack);
        assert_eq!((ack.seq, ack.sack_len), (6, 0));
        assert!(!r.handle_data(&data(2), &mut ack).new);
    }

    /// RFC 5681 §4.2: every second in-order segment is acked, a held ack
    /// is released by the timer, and out-of-order, gap-filling and
    /// duplicate segments are acked at once.
    #[test]
    fn receiver_delays_every_other_ack_but_not_around_holes() {
        let mut r = TcpReceiver::new(1);
        let mut ack = data(0);
        assert!(!r.handle_data(&data(0), &mut ack).ack_now);
        assert!(r.handle_data(&data(1), &mut ack).ack_now);
        assert!(r.take_pending_ack().is_none());
        assert!(!r.handle_data(&data(2), &mut ack).ack_now);
        let held = r.take_pending_ack().expect("segment 2 awaits its ack");
        assert_eq!(held.seq, 3);
        // Timer fired: the count starts again.
        assert!(!r.handle_data(&data(3), &mut ack).ack_now);
        assert!(r.handle_data(&data(4), &mut ack).ack_now);
        // A hole (5 missing): 6 and 7 are acked at once (duplicate acks for
        // fast retransmit), so is 5 filling the hole, and a duplicate.
        assert!(r.handle_data(&data(6), &mut ack).ack_now);
        assert!(r.handle_data(&data(7), &mut ack).ack_now);
        assert!(r.handle_data(&data(5), &mut ack).ack_now);
        assert_eq!(ack.seq, 8);
        assert!(r.handle_data(&data(5), &mut ack).ack_now);
        assert!(!r.handle_data(&data(8), &mut ack).ack_now);
        let mut every = TcpReceiver::with_ack_every(1, 1);
        assert!(every.handle_data(&data(0), &mut ack).ack_now);
    }
}

#[cfg(test)]
mod link_tests {
    //! The TCP endpoints alone over the model's links (the engine-level test
    //! is in `tests/`).
    use super::*;
    use mpdccp_model::link::Link;
    use mpdccp_model::scenario::{Direction, PathSpec, RatePoint};
    use mpdccp_proto::cc::{self, CcConfig, ControllerFactory};

    fn run(cc_name: &str, mbps: f64, loss: f64, secs: u64) -> (TcpSender, u64) {
        let spec = PathSpec {
            name: "p".into(),
            delay_ms: 5.0,
            buffer_bytes: 150_000,
            loss,
            rate: vec![RatePoint { at_s: 0.0, mbps }],
            ..PathSpec::default()
        };
        let mut up: Link<FlowPkt> = Link::with_direction(&spec, Direction::Up, 1);
        let mut down: Link<FlowPkt> = Link::with_direction(&spec, Direction::Down, 2);
        let cfg = CcConfig {
            mss_bytes: 1400,
            ..CcConfig::default()
        };
        let cc = cc_name
            .parse::<cc::CcKind>()
            .expect("a controller name")
            .build(&cfg);
        let end = Instant::from_millis(secs * 1000);
        let mut tx = TcpSender::new(1, 1400, cc, None, Instant::ZERO, Some(end));
        let mut rx = TcpReceiver::with_ack_every(1, 1);
        let mut now = Instant::ZERO;
        let mut ack = FlowPkt::data(1, 0, now, 0);
        while now < end {
            tx.handle_timeout(now);
            while let Some(p) = tx.poll_transmit(now) {
                let _ = up.push(now, p, p.len as usize);
            }
            while let Some(p) = up.poll_deliver(now) {
                rx.handle_data(&p, &mut ack);
                let _ = down.push(now, ack, ack.len as usize);
            }
            while let Some(a) = down.poll_deliver(now) {
                tx.handle_ack(now, &a);
            }
            while let Some(p) = tx.poll_transmit(now) {
                let _ = up.push(now, p, p.len as usize);
            }
            let next = [up.next_event(), down.next_event(), tx.poll_timeout(now)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            now = next.max(now + Duration::from_nanos(1)).min(end);
        }
        let delivered = rx.delivered_in_order();
        (tx, delivered)
    }

    #[test]
    fn reno_fills_a_clean_link() {
        let (tx, delivered) = run("reno", 10.0, 0.0, 20);
        let mbps = delivered as f64 * 1400.0 * 8.0 / 20.0 / 1e6;
        assert!(mbps >= 9.0, "goodput {mbps} Mbit/s, stats {:?}", tx.stats);
        // The buffer overflows in slow start: losses must have been repaired.
        assert!(tx.stats.retransmitted_pkts > 0, "{:?}", tx.stats);
    }

    #[test]
    fn reno_recovers_from_random_loss_without_stalling() {
        let (tx, delivered) = run("reno", 10.0, 0.01, 20);
        let mbps = delivered as f64 * 1400.0 * 8.0 / 20.0 / 1e6;
        // Mathis et al.: rate ≈ 1.22·MSS/(RTT·√p) ≈ 13.7 Mbit/s at 1 % and 10 ms,
        // so the link (10 Mbit/s) should stay mostly busy.
        assert!(mbps >= 5.0, "goodput {mbps} Mbit/s, stats {:?}", tx.stats);
        assert!(tx.stats.lost_pkts > 0);
    }
}
