//! An inner TCP flow: a bulk sender with its own end-to-end congestion
//! control (the receiver is in `tcp_rx.rs`).
//!
//! Segment-granular (one sequence number per full-size segment), like the
//! kernel's packet-counting TCP. What it implements:
//!
//! * cumulative acks plus up to three SACK blocks per ack (RFC 2018),
//!   timestamps echoed for RTT samples (RFC 7323 §4);
//! * one ack per segment, or delayed acks as RFC 5681 §4.2 and RFC 1122
//!   §4.2.3.2 describe (and Linux and ns-3 do by default): an ack for every
//!   second in-order segment, at most [`DELAYED_ACK_TIMEOUT`](super::tcp_rx::DELAYED_ACK_TIMEOUT) late, and at
//!   once for an out-of-order, duplicate or gap-filling segment. The engine
//!   chooses (see `sim.rs`): a TCP acking every segment answers each ack with
//!   exactly one segment, a packet pattern a drop-tail FIFO without timing
//!   noise rewards over any sender that emits pairs (`scenarios/README.md`, E4).
//! * a SACK scoreboard; lost segments are retransmitted before new data, and
//!   the amount in flight is RFC 6675's `pipe`. Loss detection is one of
//!   (`LossDetection`): RACK-TLP (RFC 8985, Linux's default; `rack.rs`) —
//!   a segment is lost once a later-sent one is delivered and an RTT plus a
//!   reordering window has passed, with tail loss probes (§7) and DSACK
//!   from the receiver to widen the window; or RFC 6675's DupThresh — lost
//!   once `DUPTHRESH` segments above it are SACKed (§4 `IsLost`);
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
    CongestionController, DeliveryRateEstimator, LossEvent, PacketRateState, RttEstimator,
    SentPacket,
};
use mpdccp_proto::Instant;

pub use mpdccp_model::scenario::LossDetection;

mod recovery;
#[cfg(test)]
mod tests;

use recovery::is_dsack;

use crate::flow::ack_event::SenderAck;
use crate::flow::rack::{Rack, DUPTHRESH};
use crate::packet::{FlowPkt, PktKind};

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
    /// Tail loss probes sent (RFC 8985 §7).
    pub tlp_count: u64,
    /// Acknowledgements carrying a DSACK block (RFC 2883).
    pub dsack_count: u64,
    /// Segments declared lost whose first transmission was delivered
    /// before any retransmission (reordering taken for loss).
    pub spurious_lost_pkts: u64,
    /// Window reductions undone because DSACKs showed every retransmission
    /// of the episode spurious (RFC 3708 §3).
    pub undo_count: u64,
}

/// The controller as it was before a loss episode's reduction, kept until
/// DSACKs show whether the episode's retransmissions were all spurious
/// (RFC 3708 §3, Linux `tcp_try_undo_dsack`: `undo_marker`,
/// `undo_retrans`). RACK mode only, as Linux pairs it with RACK.
#[derive(Debug)]
struct Undo {
    prior: Box<dyn CongestionController>,
    /// `snd_una` when the episode began (Linux `undo_marker`): only a
    /// DSACK above it reports one of the episode's retransmissions.
    marker: u64,
    /// Retransmissions of the episode not yet reported duplicate.
    retrans: u32,
    /// The episode's recovery ended; late DSACKs may still undo it.
    ended: bool,
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
    detection: LossDetection,
    rack: Rack,
    /// RFC 8985 §6.2 Step 5: when the next segment passes its RACK deadline.
    rack_deadline: Option<Instant>,
    /// RFC 8985 §7: the probe timeout, and a probe due.
    pto_deadline: Option<Instant>,
    probe_pending: bool,
    /// RFC 8985 §7.4 TLPHighRxt (with TLPRxtOut) and the probe's send time.
    tlp_high_rxt: Option<(u64, Instant)>,
    /// In loss recovery until `snd_una` reaches this (RACK mode only).
    recovery_point: Option<u64>,
    /// SACKed segments above `snd_una`.
    sacked_count: u64,
    undo: Option<Undo>,
    /// Newly delivered segments of one ack, for RACK (reused).
    delivered: Vec<(u64, Instant, bool)>,
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
        detection: LossDetection,
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
            detection,
            rack: Rack::default(),
            rack_deadline: None,
            pto_deadline: None,
            probe_pending: false,
            tlp_high_rxt: None,
            recovery_point: None,
            sacked_count: 0,
            undo: None,
            delivered: Vec::new(),
            stats: TcpStats::default(),
        }
    }

    pub fn loss_detection(&self) -> LossDetection {
        self.detection
    }
    /// RACK's current reordering window.
    pub fn reo_wnd(&self) -> Duration {
        self.rack.reo_wnd
    }

    /// Segments sent so far (new data).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
    pub fn seg_bytes(&self) -> u32 {
        self.seg_bytes
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
        if self.probe_pending {
            self.probe_pending = false;
            if let Some(p) = self.send_probe(now) {
                return Some(p);
            }
        }
        if now < self.next_send_time || self.pipe >= self.cc.cwnd_pkts() {
            return None;
        }
        let seq = match self.next_retransmission() {
            Some(seq) => seq,
            None if self.has_new_data(now) => self.next_seq,
            None => return None,
        };
        Some(self.transmit(now, seq))
    }

    fn transmit(&mut self, now: Instant, seq: u64) -> FlowPkt {
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
            if let Some(u) = self.undo.as_mut() {
                u.retrans += 1;
            }
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
        self.arm_pto(now);
        FlowPkt::data(self.flow, seq, now, self.seg_bytes)
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
        let mut t = [self.rto_deadline, self.rack_deadline, self.pto_deadline]
            .into_iter()
            .flatten()
            .min();
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
        if self.rack_deadline.is_some_and(|d| d <= now) {
            // RFC 8985 §6.2 Step 5: the reordering timer.
            self.rack_deadline = None;
            self.rack_detect_loss(now);
        }
        if self.pto_deadline.is_some_and(|d| d <= now) {
            // §7.3: the probe goes out instead of the RTO, which restarts.
            self.pto_deadline = None;
            self.probe_pending = true;
            self.rto_deadline = Some(now + self.rtt.rto() * self.rto_backoff);
        }
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
        // A timeout is not undone (Linux undoes it only by F-RTO).
        self.undo = None;
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
        if self.detection == LossDetection::Rack {
            self.recovery_point = Some(self.next_seq);
            self.rack_deadline = None;
            self.pto_deadline = None;
            self.probe_pending = false;
            // The RTO ends any probe episode.
            self.tlp_high_rxt = None;
        }
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
        let rack = self.detection == LossDetection::Rack;
        let dsack = is_dsack(ack);
        if dsack {
            self.stats.dsack_count += 1;
            if let Some(&(a, b)) = ack.ranges().first() {
                self.undo_if_all_spurious(a, b);
            }
        }
        self.delivered.clear();
        let cum = ack.seq.min(self.next_seq);
        let advanced = cum > self.snd_una;
        let mut acked_pkts = self.ack_cumulative(now, cum, rack);
        let (sacked_pkts, sack_changed) = self.ack_selective(now, ack, rack);
        acked_pkts += sacked_pkts;
        if acked_pkts > 0 {
            self.on_acked(now, ack, acked_pkts, prior_in_flight);
        }
        if rack {
            self.rack_on_ack(now, ack, dsack, advanced || sack_changed);
        } else if sack_changed {
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
        if rack {
            self.arm_pto(now);
        }
    }

    /// The cumulative part of an ACK up to `cum`: every segment below it
    /// leaves the scoreboard; returns how many it newly acknowledged.
    fn ack_cumulative(&mut self, now: Instant, cum: u64, rack: bool) -> u32 {
        let mut acked_pkts = 0u32;
        while self.snd_una < cum {
            // Invariant: snd_una < cum <= next_seq, so the scoreboard is non-empty.
            let s = self.segs.pop_front().expect("scoreboard holds snd_una");
            self.snd_una += 1;
            if s.lost && !s.sacked {
                self.lost_pending = self.lost_pending.saturating_sub(1);
                if !s.retransmitted {
                    self.stats.spurious_lost_pkts += 1;
                }
            }
            if !s.sacked {
                self.deliver(now, &s);
                acked_pkts += 1;
                if rack {
                    self.delivered
                        .push((self.snd_una - 1, s.rs.sent_time, s.retransmitted));
                }
            } else {
                self.sacked_count -= 1;
            }
        }
        acked_pkts
    }

    /// The selective part of an ACK: segments in its SACK ranges are
    /// marked; returns how many it newly acknowledged and whether any was.
    fn ack_selective(&mut self, now: Instant, ack: &FlowPkt, rack: bool) -> (u32, bool) {
        let mut acked_pkts = 0u32;
        let mut sack_changed = false;
        for &(a, b) in ack.ranges() {
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
                        if !s.retransmitted {
                            self.stats.spurious_lost_pkts += 1;
                        }
                    }
                    self.deliver(now, &s);
                    acked_pkts += 1;
                    sack_changed = true;
                    self.sacked_count += 1;
                    if rack {
                        self.delivered.push((seq, s.rs.sent_time, s.retransmitted));
                    }
                    self.highest_sacked = Some(self.highest_sacked.map_or(seq, |h| h.max(seq)));
                }
                seq += 1;
            }
        }
        (acked_pkts, sack_changed)
    }

    /// `acked_pkts` newly acknowledged: an RTT sample and the controller's
    /// ACK event.
    fn on_acked(&mut self, now: Instant, ack: &FlowPkt, acked_pkts: u32, prior_in_flight: u32) {
        // RFC 7323 §4.3: the echoed timestamp gives a valid sample even for
        // retransmissions.
        let sample = now.checked_duration_since(ack.sent_at);
        if let Some(rtt) = sample {
            self.rtt.on_sample(rtt);
        }
        self.stats.acked_pkts += u64::from(acked_pkts);
        let ev = SenderAck {
            acked_pkts,
            pkt_bytes: self.seg_bytes,
            prior_in_flight,
            in_flight: self.pipe,
            rtt_sample: sample,
            largest_acked_sent_time: ack.sent_at,
            lost_pkts_total: self.stats.lost_pkts,
        }
        .into_event(&self.rtt, &mut self.rate);
        self.cc.on_ack(now, &ev, &[]);
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
        self.declare_lost(now, lost_pkts, from, largest_lost_sent_time);
    }

    /// Segments just marked lost (`lost_pkts` of them, the first at or
    /// after `first`) leave `pipe`, wait for retransmission and reach the
    /// controller as one loss event: the same for DupThresh and RACK.
    pub(super) fn declare_lost(
        &mut self,
        now: Instant,
        lost_pkts: u32,
        first: u64,
        largest_lost_sent_time: Instant,
    ) {
        self.pipe = self.pipe.saturating_sub(lost_pkts);
        self.lost_pending += u64::from(lost_pkts);
        self.retx_scan = self.retx_scan.min(first);
        self.stats.lost_pkts += u64::from(lost_pkts);
        let ev = LossEvent {
            lost_pkts,
            lost_bytes: u64::from(lost_pkts) * u64::from(self.seg_bytes),
            in_flight_pkts: self.pipe,
            largest_lost_sent_time,
            delivered_pkts: self.rate.delivered_pkts(),
        };
        self.remember_for_undo();
        self.cc.on_loss(now, &ev, &[]);
    }

    /// A loss episode begins (or goes on): keep the controller as it is
    /// before its first reduction. Only a window-based controller: a
    /// paced one (BBR) hardly reduces on loss, and Linux's BBR undo keeps
    /// its model (`bbr_undo_cwnd`), where a copy would roll it back.
    fn remember_for_undo(&mut self) {
        if self.detection != LossDetection::Rack || self.cc.pacing_rate_bytes_per_s().is_some() {
            return;
        }
        if self.undo.as_ref().is_none_or(|u| u.ended) {
            self.undo = Some(Undo {
                prior: self.cc.clone_box(),
                marker: self.snd_una,
                retrans: 0,
                ended: false,
            });
        }
    }

    /// A DSACK for segments `a..b` came in. When they lie in the episode
    /// (at or above its marker), that many of its retransmissions were
    /// duplicates; when none is left, the reduction was for reordering:
    /// restore the controller (RFC 3708 §3 with RFC 4015's response, as
    /// Linux `tcp_check_dsack` and `tcp_undo_cwnd_reduction`).
    fn undo_if_all_spurious(&mut self, a: u64, b: u64) {
        let Some(u) = self.undo.as_mut() else {
            return;
        };
        if u.retrans == 0 || a < u.marker {
            return;
        }
        let dup = u32::try_from(b.saturating_sub(a))
            .unwrap_or(u32::MAX)
            .max(1);
        u.retrans = u.retrans.saturating_sub(dup);
        if u.retrans == 0 {
            if let Some(u) = self.undo.take() {
                self.cc = u.prior;
                self.stats.undo_count += 1;
            }
        }
    }
}
