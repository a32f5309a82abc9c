//! A QUIC-like bulk sender: one stream of fixed-size chunks over
//! unreliable datagrams, with the loss detection and congestion control of
//! RFC 9002 (the receiver is in `quic_rx.rs`).
//!
//! * Packet numbers are never reused: a lost chunk is sent again in a new
//!   packet (RFC 9000 §13.3), so every acknowledgement is unambiguous and
//!   every ack of the largest newly acknowledged packet is an RTT sample
//!   (RFC 9002 §5.1), less the peer's ACK Delay (§5.3).
//! * Loss detection (§6.1): a packet is lost once a later packet is
//!   acknowledged and either three packets above it are (kPacketThreshold)
//!   or 9/8 · max(smoothed RTT, latest RTT) has passed since it was sent
//!   (kTimeThreshold, at least kGranularity = 1 ms). Real stacks (quinn,
//!   aioquic) use these constants, so reordering by more than three packets
//!   is taken for loss here too.
//! * Probe timeout (§6.2): smoothed RTT + max(4·RTTVAR, 1 ms) +
//!   max_ack_delay, doubled per consecutive expiry; an expiry sends two
//!   ack-eliciting probes regardless of the window and declares nothing lost.
//! * Congestion control (§7): a `cc::CcKind` controller — NewReno (`reno`,
//!   aioquic's default, §7.3) or CUBIC — initial window 10 packets (§7.2),
//!   minimum 2 (kMinimumWindow); persistent congestion (§7.6) collapses
//!   the window to the minimum; pacing (§7.7) at 5/4 · cwnd / smoothed RTT
//!   with a burst of 10 packets, or the controller's own rate if it paces.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use mpdccp_proto::cc::{
    CongestionController, DeliveryRateEstimator, LossEvent, PacketRateState, RttEstimator,
    SentPacket,
};
use mpdccp_proto::Instant;

use crate::flow::ack_event::SenderAck;
use crate::flow::ranges::RangeSet;
use crate::packet::{FlowPkt, PktKind};

#[cfg(test)]
mod tests;

/// RFC 9002 §6.1.1 kPacketThreshold.
pub const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 §6.1.2 kTimeThreshold = 9/8.
const TIME_THRESHOLD_NUM: u32 = 9;
const TIME_THRESHOLD_DEN: u32 = 8;
/// RFC 9002 §6.1.2 kGranularity.
const GRANULARITY: Duration = Duration::from_millis(1);
/// RFC 9002 §6.2.2 kInitialRtt.
const INITIAL_RTT: Duration = Duration::from_millis(333);
/// RFC 9002 §7.6.1 kPersistentCongestionThreshold.
const PERSISTENT_CONGESTION_THRESHOLD: u32 = 3;
/// RFC 9000 §18.2 max_ack_delay default (quinn and aioquic use it).
pub const MAX_ACK_DELAY: Duration = Duration::from_millis(25);
/// RFC 9002 §7.2: initial window min(10·mds, max(14720 B, 2·mds)), which is
/// 10 packets for 1200–1472-byte datagrams; kMinimumWindow 2 packets.
pub const INITIAL_WINDOW_PKTS: u32 = 10;
pub const MINIMUM_WINDOW_PKTS: u32 = 2;
/// RFC 9002 §6.2.4: probes sent per PTO expiry (at most two).
const PTO_PROBES: u32 = 2;
/// RFC 9002 §7.7 pacing gain N = 5/4, and a burst allowance.
const PACING_GAIN: f64 = 1.25;
const PACING_BURST_PKTS: f64 = 10.0;

#[derive(Clone, Copy, Debug)]
struct Sent {
    rs: PacketRateState,
    chunk: u64,
    acked: bool,
    lost: bool,
    /// Counted in bytes in flight (not acked, not lost).
    in_flight: bool,
}

/// Counters of one QUIC sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuicStats {
    pub sent_pkts: u64,
    /// Packets that carried a chunk sent before.
    pub retransmitted_pkts: u64,
    pub lost_pkts: u64,
    /// Packets declared lost and acknowledged afterwards (RFC 9002 §6.1:
    /// the threshold was too small for the reordering).
    pub spurious_lost_pkts: u64,
    pub pto_count: u64,
    pub persistent_congestion: u64,
    pub acked_pkts: u64,
}

/// The sending side of a QUIC-like bulk flow.
#[derive(Debug)]
pub struct QuicSender {
    flow: u16,
    pkt_bytes: u32,
    cc: Box<dyn CongestionController>,
    rtt: RttEstimator,
    rate: DeliveryRateEstimator,
    /// `sent[i]` is packet number `base_pn + i`.
    sent: VecDeque<Sent>,
    base_pn: u64,
    next_pn: u64,
    next_chunk: u64,
    /// Chunks to send again, lowest first.
    retx: BTreeSet<u64>,
    chunks_acked: RangeSet,
    largest_acked: Option<u64>,
    in_flight: u32,
    /// §6.1.2 loss_time: when the earliest pending packet crosses the time threshold.
    loss_time: Option<Instant>,
    pto_backoff: u32,
    last_ack_eliciting: Option<Instant>,
    probes_pending: u32,
    first_rtt_sample: Option<Instant>,
    /// Pacer: tokens (packets) and when they were counted.
    tokens: f64,
    tokens_at: Instant,
    next_send_time: Instant,
    stop: Option<Instant>,
    pub stats: QuicStats,
}

impl QuicSender {
    /// `pkt_bytes`: the full wire size of a packet (the tunnelled IP packet).
    /// The controller should be built with [`MINIMUM_WINDOW_PKTS`] and
    /// [`INITIAL_WINDOW_PKTS`].
    pub fn new(
        flow: u16,
        pkt_bytes: u32,
        cc: Box<dyn CongestionController>,
        start: Instant,
        stop: Option<Instant>,
    ) -> Self {
        QuicSender {
            flow,
            pkt_bytes,
            cc,
            // The RTO bounds are unused: QUIC has a PTO instead (§6.2).
            rtt: RttEstimator::new(INITIAL_RTT * 3, GRANULARITY, Duration::from_secs(60)),
            rate: DeliveryRateEstimator::new(),
            sent: VecDeque::new(),
            base_pn: 0,
            next_pn: 0,
            next_chunk: 0,
            retx: BTreeSet::new(),
            chunks_acked: RangeSet::default(),
            largest_acked: None,
            in_flight: 0,
            loss_time: None,
            pto_backoff: 0,
            last_ack_eliciting: None,
            probes_pending: 0,
            first_rtt_sample: None,
            tokens: PACING_BURST_PKTS,
            tokens_at: start,
            next_send_time: start,
            stop,
            stats: QuicStats::default(),
        }
    }

    pub fn pkt_bytes(&self) -> u32 {
        self.pkt_bytes
    }
    pub fn cwnd_pkts(&self) -> u32 {
        self.cc.cwnd_pkts()
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    pub fn in_flight_pkts(&self) -> u32 {
        self.in_flight
    }
    /// Chunks of new data sent so far.
    pub fn chunks_sent(&self) -> u64 {
        self.next_chunk
    }
    /// Chunks the receiver has acknowledged (in packets) so far.
    pub fn chunks_acked_in_order(&self) -> u64 {
        self.chunks_acked.next()
    }

    fn has_new_data(&self, now: Instant) -> bool {
        self.stop.is_none_or(|s| now < s)
    }

    fn get(&self, pn: u64) -> Option<&Sent> {
        let i = usize::try_from(pn.checked_sub(self.base_pn)?).ok()?;
        self.sent.get(i)
    }

    /// The next chunk to send: a lost one first, then new data.
    fn next_chunk_to_send(&mut self, now: Instant, probe: bool) -> Option<u64> {
        while let Some(c) = self.retx.pop_first() {
            if !self.chunks_acked.contains(c) {
                return Some(c);
            }
        }
        if self.has_new_data(now) {
            return Some(self.next_chunk);
        }
        if probe {
            // §6.2.4: with nothing new, a probe repeats unacknowledged data.
            return self
                .sent
                .iter()
                .find(|s| s.in_flight && !self.chunks_acked.contains(s.chunk))
                .map(|s| s.chunk);
        }
        None
    }

    /// §7.7 pacing rate, bytes per second.
    fn pacing_rate(&self) -> Option<f64> {
        if let Some(r) = self.cc.pacing_rate_bytes_per_s().filter(|r| *r > 0) {
            return Some(r as f64);
        }
        let srtt = self.rtt.srtt()?.as_secs_f64().max(1e-6);
        Some(PACING_GAIN * f64::from(self.cc.cwnd_pkts()) * f64::from(self.pkt_bytes) / srtt)
    }

    /// The next packet to transmit at `now`, if the window, the pacer and
    /// the application allow one (probes ignore window and pacer).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<FlowPkt> {
        let probe = self.probes_pending > 0;
        if !probe && (now < self.next_send_time || self.in_flight >= self.cc.cwnd_pkts()) {
            return None;
        }
        let Some(chunk) = self.next_chunk_to_send(now, probe) else {
            self.probes_pending = 0;
            return None;
        };
        if probe {
            self.probes_pending -= 1;
        }
        if chunk == self.next_chunk {
            self.next_chunk += 1;
        } else {
            self.stats.retransmitted_pkts += 1;
        }
        let pn = self.next_pn;
        self.next_pn += 1;
        let rs = self
            .rate
            .on_packet_sent(now, self.pkt_bytes, self.in_flight);
        self.sent.push_back(Sent {
            rs,
            chunk,
            acked: false,
            lost: false,
            in_flight: true,
        });
        self.in_flight += 1;
        self.stats.sent_pkts += 1;
        self.last_ack_eliciting = Some(now);
        self.cc.on_packet_sent(
            now,
            &SentPacket {
                seq: pn,
                bytes: self.pkt_bytes,
                in_flight_pkts: self.in_flight,
                app_limited: false,
            },
        );
        self.advance_pacer(now);
        let mut pkt = FlowPkt::data(self.flow, pn, now, self.pkt_bytes);
        pkt.chunk = chunk;
        Some(pkt)
    }

    /// A token bucket: `PACING_BURST_PKTS` back to back, then one packet
    /// per `bytes / rate`.
    fn advance_pacer(&mut self, now: Instant) {
        let Some(rate) = self.pacing_rate() else {
            return;
        };
        let per_s = rate / f64::from(self.pkt_bytes);
        let elapsed = now.saturating_duration_since(self.tokens_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_s).min(PACING_BURST_PKTS) - 1.0;
        self.tokens_at = now;
        self.next_send_time = if self.tokens >= 0.0 {
            now
        } else {
            now + Duration::from_secs_f64(-self.tokens / per_s)
        };
    }

    /// RFC 9002 §6.2.1: the probe timeout, backed off.
    fn pto(&self) -> Duration {
        let srtt = self.rtt.srtt().unwrap_or(INITIAL_RTT);
        let rttvar = if self.rtt.srtt().is_some() {
            self.rtt.rttvar()
        } else {
            INITIAL_RTT / 2
        };
        (srtt + (rttvar * 4).max(GRANULARITY) + MAX_ACK_DELAY) * (1u32 << self.pto_backoff.min(16))
    }

    /// §6.2.1 / A.8: the loss-time timer if armed, else the PTO while
    /// anything is in flight; and the pacer when it holds a packet back.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let mut t = self.loss_time.or_else(|| {
            (self.in_flight > 0)
                .then(|| self.last_ack_eliciting.map(|l| l + self.pto()))
                .flatten()
        });
        let wants_to_send = self.in_flight < self.cc.cwnd_pkts()
            && (!self.retx.is_empty() || self.has_new_data(now));
        if wants_to_send && self.next_send_time > now {
            t = Some(t.map_or(self.next_send_time, |r| r.min(self.next_send_time)));
        }
        t
    }

    /// A.9 OnLossDetectionTimeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.loss_time.is_some_and(|t| t <= now) {
            self.detect_lost(now);
            return;
        }
        if self.loss_time.is_none()
            && self.in_flight > 0
            && self
                .last_ack_eliciting
                .is_some_and(|l| l + self.pto() <= now)
        {
            self.stats.pto_count += 1;
            self.pto_backoff += 1;
            self.probes_pending = PTO_PROBES;
        }
    }

    /// A.7 OnAckReceived.
    pub fn handle_ack(&mut self, now: Instant, ack: &FlowPkt) {
        if ack.kind != PktKind::Ack || ack.sack_len == 0 {
            return;
        }
        let prior_in_flight = self.in_flight;
        let largest = ack.ranges().iter().map(|r| r.1 - 1).max().unwrap_or(0);
        let largest = largest.min(self.next_pn.saturating_sub(1));
        let mut acked_pkts = 0u32;
        let mut largest_newly_acked: Option<(u64, Instant)> = None;
        for &(a, b) in ack.ranges() {
            let a = a.max(self.base_pn);
            let b = b.min(self.next_pn);
            for pn in a..b {
                let i = (pn - self.base_pn) as usize;
                let s = &mut self.sent[i];
                if s.acked {
                    continue;
                }
                s.acked = true;
                if s.lost {
                    self.stats.spurious_lost_pkts += 1;
                }
                let (was_in_flight, rs, chunk) = (s.in_flight, s.rs, s.chunk);
                s.in_flight = false;
                if was_in_flight {
                    self.in_flight -= 1;
                }
                self.rate.on_packet_delivered(now, &rs);
                self.chunks_acked.insert(chunk);
                acked_pkts += 1;
                if largest_newly_acked.is_none_or(|(p, _)| pn > p) {
                    largest_newly_acked = Some((pn, rs.sent_time));
                }
            }
        }
        self.largest_acked = Some(self.largest_acked.map_or(largest, |l| l.max(largest)));
        let Some((newest, newest_sent)) = largest_newly_acked else {
            return;
        };
        // §5.1: a sample only when the largest acknowledged is newly acked;
        // §5.3: less the peer's ack delay, capped at max_ack_delay.
        let mut sample = None;
        if newest == largest {
            let latest = now.saturating_duration_since(newest_sent);
            let delay = Duration::from_micros(u64::from(ack.ack_delay_us)).min(MAX_ACK_DELAY);
            self.rtt
                .on_sample_with_ack_delay_at(now, latest, Some(delay));
            self.first_rtt_sample.get_or_insert(now);
            sample = Some(latest);
        }
        self.stats.acked_pkts += u64::from(acked_pkts);
        let ev = SenderAck {
            acked_pkts,
            pkt_bytes: self.pkt_bytes,
            prior_in_flight,
            in_flight: self.in_flight,
            rtt_sample: sample,
            largest_acked_sent_time: newest_sent,
            lost_pkts_total: self.stats.lost_pkts,
        }
        .into_event(&self.rtt, &mut self.rate);
        self.cc.on_ack(now, &ev, &[]);
        if self.cc.marks_app_limited() {
            self.rate.on_app_limited(self.in_flight);
        }
        self.detect_lost(now);
        // §6.2.1: the backoff is reset when an acknowledgement arrives.
        self.pto_backoff = 0;
        self.forget_old(now);
    }

    /// Drops packets nobody will acknowledge any more from the front: acked
    /// ones, and lost ones kept long enough to notice a late acknowledgement.
    fn forget_old(&mut self, now: Instant) {
        let keep = self.rtt.srtt().unwrap_or(INITIAL_RTT) * 4;
        while let Some(s) = self.sent.front() {
            let old_lost = s.lost && now.saturating_duration_since(s.rs.sent_time) > keep;
            if !(s.acked || old_lost) {
                break;
            }
            self.sent.pop_front();
            self.base_pn += 1;
        }
    }

    /// §6.1 / A.10 DetectAndRemoveLostPackets, then §7.6 persistent congestion.
    fn detect_lost(&mut self, now: Instant) {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else {
            return;
        };
        let latest = self.rtt.latest().unwrap_or(INITIAL_RTT);
        let srtt = self.rtt.srtt().unwrap_or(INITIAL_RTT);
        let loss_delay =
            (latest.max(srtt) * TIME_THRESHOLD_NUM / TIME_THRESHOLD_DEN).max(GRANULARITY);
        let mut lost_pkts = 0u32;
        let mut first_lost = None;
        let mut largest_lost_sent_time = Instant::ZERO;
        let end = largest.saturating_sub(self.base_pn).saturating_add(1);
        let end = usize::try_from(end)
            .unwrap_or(usize::MAX)
            .min(self.sent.len());
        for i in 0..end {
            let pn = self.base_pn + i as u64;
            let s = &mut self.sent[i];
            if s.acked || s.lost || pn >= largest {
                continue;
            }
            let sent_time = s.rs.sent_time;
            if sent_time + loss_delay <= now || largest >= pn + PACKET_THRESHOLD {
                s.lost = true;
                s.in_flight = false;
                let chunk = s.chunk;
                self.in_flight -= 1;
                lost_pkts += 1;
                first_lost.get_or_insert(pn);
                largest_lost_sent_time = largest_lost_sent_time.max(sent_time);
                if !self.chunks_acked.contains(chunk) {
                    self.retx.insert(chunk);
                }
            } else {
                let t = sent_time + loss_delay;
                self.loss_time = Some(self.loss_time.map_or(t, |l| l.min(t)));
            }
        }
        if lost_pkts == 0 {
            return;
        }
        self.stats.lost_pkts += u64::from(lost_pkts);
        let ev = LossEvent {
            lost_pkts,
            lost_bytes: u64::from(lost_pkts) * u64::from(self.pkt_bytes),
            in_flight_pkts: self.in_flight,
            largest_lost_sent_time,
            delivered_pkts: self.rate.delivered_pkts(),
        };
        self.cc.on_loss(now, &ev, &[]);
        if self.persistent_congestion(end, first_lost.unwrap_or(largest)) {
            self.stats.persistent_congestion += 1;
            // §7.6.2: the window collapses to kMinimumWindow.
            self.cc.on_rto(now);
        }
    }

    /// §7.6.2: lost packets, all sent after the first RTT sample, spanning
    /// more than (smoothed RTT + max(4·RTTVAR, 1 ms) + max_ack_delay) × 3
    /// with no packet between them acknowledged or still outstanding; the
    /// run must end in this detection pass (`first_new` on), so one episode
    /// collapses the window once.
    fn persistent_congestion(&self, end: usize, first_new: u64) -> bool {
        let (Some(first_sample), Some(srtt)) = (self.first_rtt_sample, self.rtt.srtt()) else {
            return false;
        };
        let duration = (srtt + (self.rtt.rttvar() * 4).max(GRANULARITY) + MAX_ACK_DELAY)
            * PERSISTENT_CONGESTION_THRESHOLD;
        let mut run_start: Option<Instant> = None;
        for (i, s) in self.sent.iter().take(end).enumerate() {
            let t = s.rs.sent_time;
            if !s.lost || s.acked || t < first_sample {
                run_start = None;
                continue;
            }
            let start = *run_start.get_or_insert(t);
            let pn = self.base_pn + i as u64;
            if pn >= first_new && t.saturating_duration_since(start) > duration {
                return true;
            }
        }
        false
    }

    /// Whether packet `pn` has been declared lost (for tests).
    pub fn is_lost(&self, pn: u64) -> bool {
        self.get(pn).is_some_and(|s| s.lost)
    }
}
