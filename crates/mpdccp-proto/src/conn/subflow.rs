//! One DCCP subflow: RFC 4340 state, sequence/acknowledgement windows and the
//! CCID2 (RFC 4341) transport machinery — Ack Vector bookkeeping, loss after
//! three later acknowledgements, RTO, Ack Ratio, pacing — feeding a
//! [`CongestionController`].

use std::collections::VecDeque;
use std::time::Duration;

use super::ackvec::{self, RecvHistory};
use super::queue::Queued;
use super::seq::{unwrap48, SEQ_MASK};
use super::PathConfig;
use crate::cc::{
    AckDelayUse, AckEvent, CcSnapshot, CongestionController, DeliveryRateEstimator, LossEvent,
    PacketRateState, RttEstimator, SentPacket,
};
use crate::path::{PathId, PathState, PathView};
use crate::time::Instant;

/// RFC 4340 §8 states (LISTEN is implicit: a server creates the subflow when
/// a Request arrives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubState {
    Request,
    Respond,
    PartOpen,
    Open,
    CloseReq,
    Closing,
    TimeWait,
    Closed,
}

/// A data packet awaiting acknowledgement.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    pub seq: u64,
    pub bytes: u32,
    pub rate: PacketRateState,
    pub acked: bool,
    pub lost: bool,
}

/// Control items waiting for the next packet on this subflow.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingCtrl {
    pub response: bool,
    pub handshake_ack: bool,
    /// Sync to send, acknowledging this (wire) sequence number.
    pub sync: Option<u64>,
    pub syncack: Option<u64>,
    pub close: bool,
    pub closereq: bool,
    pub reset: Option<crate::wire::ResetCode>,
    /// MP_PRIO to (re)send until confirmed.
    pub prio: Option<u8>,
    pub prio_retx_at: Option<Instant>,
    pub prio_tries: u32,
    /// MP_CONFIRM items owed to the peer.
    pub confirms: Vec<super::codec::ConfirmItem>,
    /// Confirm R(Ack Ratio, v) owed.
    pub confirm_ack_ratio: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct Subflow {
    pub id: PathId,
    pub cfg: PathConfig,
    pub state: SubState,
    /// We sent the Request.
    pub initiator: bool,
    /// Joined with MP_JOIN (not the first subflow).
    pub join: bool,
    /// Believed broken after repeated timeouts.
    pub failed: bool,
    /// Reported `PathEstablished` already (for recovery events).
    pub announced: bool,
    pub mss_bytes: u32,

    // RFC 4340 §7: sequence state, unwrapped to 64 bits.
    pub iss: u64,
    pub gss: u64,
    pub isr: u64,
    pub gsr: u64,
    pub gar: u64,
    pub have_isr: bool,
    /// Sequence Window (RFC 4340 §7.5.2), same value both ways.
    pub seq_window: u64,
    pub rx: RecvHistory,

    // HC-receiver: acknowledgements we owe.
    pub data_since_ack: u32,
    pub ack_due: Option<Instant>,
    pub ack_now: bool,
    /// Ack Ratio the peer asked us to use.
    pub ack_ratio_rx: u32,
    /// Ack Ratio we ask the peer to use (RFC 4341 §6.1.2).
    pub ack_ratio_tx: u32,
    pub ack_ratio_unconfirmed: bool,
    /// GSR when each of the last two acknowledgements left: the Ack Vector
    /// reaches back to the older one, so one lost ack loses no information
    /// (a stand-in for RFC 4341 §6.1.4 acks-of-acks).
    pub acked_high: [u64; 2],
    /// When the packet numbered GSR arrived: the Elapsed Time our next
    /// acknowledgement reports (RFC 4340 §13.2).
    pub gsr_rx_at: Option<Instant>,

    // HC-sender (CCID2).
    pub sent: VecDeque<Sent>,
    pub pipe: u32,
    top_acked: [u64; 3],
    pub cc: Box<dyn CongestionController>,
    pub rtt: RttEstimator,
    pub rate: DeliveryRateEstimator,
    pub rto_at: Option<Instant>,
    pub rto_count: u32,
    pub next_send_at: Instant,
    pub lost_total: u64,
    pub loss_rate: f64,
    /// Latest delivery-rate sample not limited by the application.
    pub delivery_rate: Option<u64>,
    pub last_rtt_sample_at: Option<Instant>,
    /// Last time the scheduler had to send elsewhere because this path was
    /// blocked by its window or pacer.
    pub blocked_at: Option<Instant>,
    /// MP_RTT type to report next (cycles raw, min, smoothed).
    pub mp_rtt_next_kind: u8,

    // Handshake / close retransmission (RFC 4340 §8.1.1, §8.3).
    pub retx_at: Option<Instant>,
    pub retx_tries: u32,
    pub retx_interval: Duration,
    pub timewait_until: Option<Instant>,
    /// Sequence number and send time of our latest Request (client) or
    /// Response (server): the packet acknowledging exactly it gives the
    /// handshake RTT sample (RFC 4340 §8.1).
    pub hs_probe: Option<(u64, Instant)>,
    pub probe_at: Option<Instant>,
    pub last_sync_sent: Option<Instant>,

    pub pend: PendingCtrl,

    // MP-DCCP per-subflow state.
    pub local_nonce: u32,
    pub remote_nonce: u32,
    pub local_addr_id: u8,
    pub remote_addr_id: u8,
    pub priority: u8,
    pub last_mp_rtt_sent: Option<Instant>,
    pub peer_rtt: Option<Duration>,
    /// Highest MP_SEQ received on this path, for the reorderer.
    pub highest_mp_seq: Option<u64>,
    /// Packets the scheduler assigned here, waiting for cwnd or the pacer.
    pub queue: VecDeque<(u64, Queued)>,

    pub stats: PathStats,

    // Path lifecycle (owned by `conn/mod.rs`: keepalive, expiry, reaping).
    /// Last valid packet received on this subflow (or its creation).
    pub last_rx_at: Instant,
    /// Last keepalive probe (Sync) sent while the subflow was silent.
    pub keepalive_at: Option<Instant>,
    /// When the subflow was first seen CLOSED (it is forgotten a little later).
    pub closed_at: Option<Instant>,
}

/// Counters of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PathStats {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub tx_data_pkts: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub rx_data_pkts: u64,
    pub lost_pkts: u64,
    pub rtos: u64,
    pub acks_sent: u64,
    /// RTT samples taken from acknowledgements of data packets.
    pub rtt_samples: u64,
    /// Samples whose ack carried an Elapsed Time that was subtracted.
    pub rtt_ack_delay_used: u64,
    /// Elapsed Times not subtracted because the result would fall below the
    /// path's minimum RTT (forged, absurd, or a clock step at the peer).
    pub rtt_ack_delay_ignored: u64,
    /// Samples refused outright: the ack arrived "before" the packet left
    /// (a driver clock that went backwards).
    pub rtt_samples_rejected: u64,
}

impl Subflow {
    pub fn new(
        id: PathId,
        cfg: PathConfig,
        iss: u64,
        cc: Box<dyn CongestionController>,
        conf: &super::ConnectionConfig,
    ) -> Self {
        let iss = iss & SEQ_MASK;
        Subflow {
            id,
            priority: cfg.priority,
            cfg,
            state: SubState::Closed,
            initiator: false,
            join: false,
            failed: false,
            announced: false,
            mss_bytes: conf.mss_bytes,
            iss,
            gss: iss,
            isr: 0,
            gsr: 0,
            gar: iss,
            have_isr: false,
            seq_window: conf.seq_window_pkts.max(32),
            rx: RecvHistory::new(0),
            data_since_ack: 0,
            ack_due: None,
            ack_now: false,
            ack_ratio_rx: 1,
            ack_ratio_tx: conf.ack_ratio.max(1),
            ack_ratio_unconfirmed: conf.ack_ratio.max(1) != 1,
            acked_high: [0; 2],
            gsr_rx_at: None,
            sent: VecDeque::new(),
            pipe: 0,
            top_acked: [0; 3],
            cc,
            rtt: RttEstimator::new(
                conf.initial_rto,
                Duration::from_millis(200),
                Duration::from_secs(60),
            ),
            rate: DeliveryRateEstimator::new(),
            rto_at: None,
            rto_count: 0,
            next_send_at: Instant::ZERO,
            lost_total: 0,
            loss_rate: 0.0,
            delivery_rate: None,
            last_rtt_sample_at: None,
            blocked_at: None,
            mp_rtt_next_kind: 0,
            retx_at: None,
            retx_tries: 0,
            retx_interval: conf.handshake_rto,
            timewait_until: None,
            hs_probe: None,
            probe_at: None,
            last_sync_sent: None,
            pend: PendingCtrl::default(),
            local_nonce: 0,
            remote_nonce: 0,
            local_addr_id: 0,
            remote_addr_id: 0,
            last_mp_rtt_sent: None,
            peer_rtt: None,
            highest_mp_seq: None,
            queue: VecDeque::new(),
            stats: PathStats::default(),
            last_rx_at: Instant::ZERO,
            keepalive_at: None,
            closed_at: None,
        }
    }

    /// Next sequence number to send (and consumes it).
    pub fn next_seq(&mut self) -> u64 {
        self.gss += 1;
        self.gss
    }

    pub fn is_open(&self) -> bool {
        self.state == SubState::Open
    }

    pub fn is_gone(&self) -> bool {
        matches!(self.state, SubState::Closed | SubState::TimeWait)
    }

    pub fn path_state(&self) -> PathState {
        match self.state {
            SubState::Request | SubState::Respond | SubState::PartOpen => PathState::Establishing,
            SubState::Open if self.failed => PathState::Failed,
            SubState::Open => PathState::Active,
            _ => PathState::Closed,
        }
    }

    /// Records the peer's initial sequence number.
    pub fn set_isr(&mut self, wire_seq: u64) {
        self.isr = wire_seq;
        self.gsr = wire_seq;
        self.have_isr = true;
        self.rx = RecvHistory::new(wire_seq);
    }

    /// Unwraps a received 48-bit sequence number near GSR.
    pub fn unwrap_seq(&self, wire: u64) -> u64 {
        unwrap48(self.gsr, wire)
    }
    /// Unwraps a received 48-bit acknowledgement number near GSS.
    pub fn unwrap_ack(&self, wire: u64) -> u64 {
        unwrap48(self.gss, wire)
    }

    /// RFC 4340 §7.5.1 sequence validity window [SWL, SWH].
    pub fn seq_window(&self) -> (u64, u64) {
        let w = self.seq_window;
        let swl = (self.gsr + 1).saturating_sub(w / 4).max(self.isr);
        let swh = self.gsr + (3 * w).div_ceil(4);
        (swl, swh)
    }
    /// RFC 4340 §7.5.1 acknowledgement validity window [AWL, AWH].
    pub fn ack_window(&self) -> (u64, u64) {
        let awl = (self.gss + 1).saturating_sub(self.seq_window).max(self.iss);
        (awl, self.gss)
    }

    /// Sender side: one data packet leaves.
    pub fn on_data_sent(&mut self, now: Instant, seq: u64, bytes: u32, app_limited: bool) {
        let rs = self.rate.on_packet_sent(now, bytes, self.pipe);
        self.sent.push_back(Sent {
            seq,
            bytes,
            rate: rs,
            acked: false,
            lost: false,
        });
        self.pipe += 1;
        if app_limited {
            self.rate.on_app_limited(self.pipe);
        }
        self.cc.on_packet_sent(
            now,
            &SentPacket {
                seq,
                bytes,
                in_flight_pkts: self.pipe,
                app_limited,
            },
        );
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto());
        }
        if let Some(rate) = self.cc.pacing_rate_bytes_per_s().filter(|r| *r > 0) {
            let gap = Duration::from_nanos((bytes as u64).saturating_mul(1_000_000_000) / rate);
            // A token bucket one send quantum deep (plus half a gap, as
            // Linux `tcp_update_skb_after_send` allows for OS jitter): a
            // release that comes late — a coarse driver timer, or a packet
            // offered between two slots — keeps its credit instead of
            // losing it, which would cap the rate below the pacing rate.
            let quantum = self.cc.send_quantum_pkts().max(1);
            let depth = gap * (quantum - 1) + gap / 2;
            self.next_send_at = self.next_send_at.max(now.saturating_sub(depth)) + gap;
        }
        self.stats.tx_data_pkts += 1;
    }

    pub fn rto(&self) -> Duration {
        let backoff = 1u32 << self.rto_count.min(6);
        (self.rtt.rto() * backoff).min(Duration::from_secs(60))
    }

    /// Sender side: processes an acknowledgement (`ack` unwrapped) with its
    /// optional Ack Vector and the peer's Elapsed Time for `ack`. Returns
    /// true when the path came back from failure.
    ///
    /// RTT sampling (RFC 4340 §11.3, RFC 4341 §5): an ack names many packets
    /// but only the one numbered `ack` — the newest the peer had received
    /// when it acknowledged — gives a sample, and only when this ack is the
    /// first to acknowledge it (the packet was sent once: DCCP never
    /// resends a sequence number, and a packet already acknowledged, lost
    /// or forgotten after an RTO is not matched again). Elapsed Time is the
    /// peer's hold time of exactly that packet, so it may be subtracted
    /// (see [`RttEstimator::on_sample_with_ack_delay`]).
    pub fn on_ack(
        &mut self,
        now: Instant,
        ack: u64,
        cells: Option<&[u8]>,
        ack_delay: Option<Duration>,
        coupled: &[CcSnapshot],
    ) -> bool {
        if ack > self.gar {
            self.gar = ack;
        }
        let prior_in_flight = self.pipe;
        let mut acked_pkts = 0u32;
        let mut acked_bytes = 0u64;
        let mut rtt_sample = None;
        let mut newest_sent = Instant::ZERO;
        let Some(front_seq) = self.sent.front().map(|s| s.seq) else {
            return self.recover();
        };
        {
            let sent = &mut self.sent;
            let pipe = &mut self.pipe;
            let rate = &mut self.rate;
            let top = &mut self.top_acked;
            // Runs arrive newest first, so each run's start index is at most
            // the previous one's; and as numbers strictly increase, entry
            // `lo - front_seq` already has seq >= lo. Both bound the search
            // (an ack would otherwise binary-search the whole flight per run).
            let mut bound = sent.len();
            let mut mark = |hi: u64, lo: u64| {
                if hi < front_seq {
                    return;
                }
                let lo = lo.max(front_seq);
                // Index of the first entry with seq >= lo (entries sorted).
                let end = bound.min(usize::try_from(lo - front_seq).unwrap_or(usize::MAX));
                let start = first_at_or_above(sent, end, lo);
                bound = start;
                for s in sent.iter_mut().skip(start) {
                    if s.seq > hi {
                        break;
                    }
                    if s.acked || s.lost {
                        continue;
                    }
                    s.acked = true;
                    *pipe = pipe.saturating_sub(1);
                    acked_pkts += 1;
                    acked_bytes += s.bytes as u64;
                    rate.on_packet_delivered(now, &s.rate);
                    if s.seq == ack {
                        // None when the driver's clock went backwards.
                        rtt_sample = Some(now.checked_duration_since(s.rate.sent_time));
                    }
                    if s.rate.sent_time > newest_sent {
                        newest_sent = s.rate.sent_time;
                    }
                    insert_top(top, s.seq);
                }
            };
            match cells {
                Some(cells) => ackvec::for_each_run(ack, cells, |hi, lo, received| {
                    if received {
                        mark(hi, lo);
                    }
                }),
                None => mark(ack, ack),
            }
        }
        let rtt_sample = match rtt_sample {
            Some(Some(raw)) => {
                let (_, used) = self.rtt.on_sample_with_ack_delay(raw, ack_delay);
                self.last_rtt_sample_at = Some(now);
                self.stats.rtt_samples += 1;
                match used {
                    AckDelayUse::Used => self.stats.rtt_ack_delay_used += 1,
                    AckDelayUse::Ignored => self.stats.rtt_ack_delay_ignored += 1,
                    AckDelayUse::Absent => {}
                }
                // Controllers get the raw sample: their min-RTT filters
                // (BBR) must not see a peer-reported delay subtracted.
                Some(raw)
            }
            Some(None) => {
                self.stats.rtt_samples_rejected += 1;
                None
            }
            None => None,
        };
        let recovered = if acked_pkts > 0 {
            self.recover()
        } else {
            false
        };
        if acked_pkts > 0 {
            let sample = self.rate.take_sample(self.rtt.min_rtt());
            if let Some(rs) = sample {
                let r = rs.delivery_rate_bytes_per_s() as u64;
                // App-limited samples may only raise the estimate.
                if !rs.is_app_limited || self.delivery_rate.is_none_or(|d| r > d) {
                    self.delivery_rate = Some(r);
                }
            }
            let ev = AckEvent {
                acked_pkts,
                acked_bytes,
                prior_in_flight_pkts: prior_in_flight,
                in_flight_pkts: self.pipe,
                rtt: rtt_sample,
                srtt: self.rtt.srtt().unwrap_or(Duration::ZERO),
                min_rtt: self.rtt.min_rtt().unwrap_or(Duration::ZERO),
                rate: sample,
                delivered_pkts: self.rate.delivered_pkts(),
                lost_pkts_total: self.lost_total,
                largest_acked_sent_time: newest_sent,
            };
            self.cc.on_ack(now, &ev, coupled);
            self.loss_rate *= 1.0 - (acked_pkts as f64 / 64.0).min(1.0);
        }
        self.detect_losses(now, coupled);
        self.trim();
        // BBR's PROBE_RTT keeps the flight low on purpose: mark the samples
        // of this phase application limited (cc/mod.rs contract).
        if self.cc.marks_app_limited() {
            self.rate.on_app_limited(self.pipe);
        }
        if acked_pkts > 0 {
            self.rto_at = (self.pipe > 0).then(|| now + self.rto());
        }
        recovered
    }

    fn recover(&mut self) -> bool {
        self.rto_count = 0;
        self.probe_at = None;
        if self.failed {
            self.failed = false;
            return true;
        }
        false
    }

    /// RFC 4341 §5: a packet is lost when at least three packets sent after it
    /// have been acknowledged — i.e. its number is below the third-highest
    /// acknowledged number.
    fn detect_losses(&mut self, now: Instant, coupled: &[CcSnapshot]) {
        let thresh = self.top_acked[2];
        if thresh == 0 {
            return;
        }
        let mut lost = 0u32;
        let mut lost_bytes = 0u64;
        let mut newest = Instant::ZERO;
        for s in self.sent.iter_mut() {
            if s.seq >= thresh {
                break;
            }
            if !s.acked && !s.lost {
                s.lost = true;
                lost += 1;
                lost_bytes += s.bytes as u64;
                newest = newest.max(s.rate.sent_time);
            }
        }
        if lost > 0 {
            self.pipe = self.pipe.saturating_sub(lost);
            self.lost_total += lost as u64;
            self.stats.lost_pkts += lost as u64;
            self.loss_rate = (self.loss_rate + lost as f64 / 64.0).min(1.0);
            let ev = LossEvent {
                lost_pkts: lost,
                lost_bytes,
                in_flight_pkts: self.pipe,
                largest_lost_sent_time: newest,
                delivered_pkts: self.rate.delivered_pkts(),
            };
            self.cc.on_loss(now, &ev, coupled);
        }
    }

    fn trim(&mut self) {
        while self.sent.front().is_some_and(|s| s.acked || s.lost) {
            self.sent.pop_front();
        }
    }

    /// The retransmission timer fired: every packet in flight is lost and the
    /// controller collapses its window (RFC 4341 §5, RFC 6298 §5.5).
    /// Returns true when this timeout marks the path failed.
    pub fn on_rto(&mut self, now: Instant, fail_after: u32) -> bool {
        self.rto_at = None;
        let lost = self.sent.iter().filter(|s| !s.acked && !s.lost).count() as u64;
        self.sent.clear();
        self.pipe = 0;
        self.lost_total += lost;
        self.stats.lost_pkts += lost;
        self.stats.rtos += 1;
        self.top_acked = [0; 3];
        self.cc.on_rto(now);
        self.rto_count += 1;
        if !self.failed && self.rto_count >= fail_after {
            self.failed = true;
            self.probe_at = Some(now + self.rto());
            return true;
        }
        false
    }

    /// The handshake acknowledged `ack` at `now`: one RTT sample for the
    /// estimator and the controller's initial RTT (before any data).
    pub fn on_handshake_ack(&mut self, now: Instant, ack: u64) {
        if let Some((seq, sent)) = self.hs_probe.take() {
            if seq == ack {
                let Some(rtt) = now.checked_duration_since(sent) else {
                    self.stats.rtt_samples_rejected += 1;
                    return;
                };
                self.rtt.on_sample(rtt);
                self.last_rtt_sample_at = Some(now);
                self.cc.on_initial_rtt(now, rtt);
            }
        }
    }

    /// Ack Ratio to request from the peer: at most ceil(cwnd/2) and at most
    /// the configured value (RFC 4341 §6.1.2).
    pub fn desired_ack_ratio(&self, configured: u32) -> u32 {
        let half = self.cc.cwnd_pkts().div_ceil(2).max(1);
        configured.max(1).min(half)
    }

    /// Receiver side: a packet with (unwrapped) `seq` arrived at `now`;
    /// returns false for a duplicate.
    pub fn on_packet_received(&mut self, now: Instant, seq: u64) -> bool {
        let in_order = seq == self.gsr + 1;
        if seq > self.gsr {
            self.gsr = seq;
            self.gsr_rx_at = Some(now);
        }
        let fresh = self.rx.record(seq);
        if !in_order && fresh {
            // Reordering or loss: tell the sender quickly.
            self.ack_now = true;
        }
        fresh
    }

    /// Receiver side: a data-carrying packet arrived; schedules the ack.
    pub fn on_data_received(&mut self, now: Instant, ack_delay: Duration) {
        self.data_since_ack += 1;
        if self.data_since_ack >= self.ack_ratio_rx {
            self.ack_now = true;
        } else if self.ack_due.is_none() {
            self.ack_due = Some(now + ack_delay);
        }
    }

    /// Sequence numbers the next Ack Vector must cover.
    pub fn ack_cover(&self, min_cover: u64) -> u64 {
        let since = self.gsr.saturating_sub(self.acked_high[1]) + 1;
        since.max(min_cover)
    }

    /// Elapsed Time (RFC 4340 §13.2, 10 µs units) for an acknowledgement
    /// sent at `now`: how long ago the packet it acknowledges (GSR) arrived.
    /// Only when it is worth the option's bytes, i.e. the ack was held
    /// (Ack Ratio, ack timer) for at least [`ELAPSED_MIN`].
    pub fn ack_elapsed_10us(&self, now: Instant) -> Option<u32> {
        let held = now.checked_duration_since(self.gsr_rx_at?)?;
        (held >= ELAPSED_MIN).then(|| u32::try_from(held.as_micros() / 10).unwrap_or(u32::MAX))
    }

    /// An acknowledgement was just sent.
    pub fn on_ack_sent(&mut self) {
        self.acked_high = [self.gsr, self.acked_high[0]];
        self.data_since_ack = 0;
        self.ack_due = None;
        self.ack_now = false;
        self.stats.acks_sent += 1;
    }

    pub fn wants_ack(&self, now: Instant) -> bool {
        self.ack_now || self.ack_due.is_some_and(|t| t <= now)
    }

    pub fn cwnd_room(&self) -> bool {
        self.pipe < self.cc.cwnd_pkts().max(1)
    }

    pub fn pacing_ok(&self, now: Instant) -> bool {
        self.cc.pacing_rate_bytes_per_s().is_none() || self.next_send_at <= now
    }

    pub fn view(&self) -> PathView {
        let pacing = self.cc.pacing_rate_bytes_per_s();
        PathView {
            id: self.id,
            state: self.path_state(),
            priority: self.priority,
            cwnd_pkts: self.cc.cwnd_pkts(),
            in_flight_pkts: self.pipe,
            queued_pkts: self.queue.len() as u32,
            srtt: self.rtt.srtt().or(self.peer_rtt),
            min_rtt: self.rtt.min_rtt(),
            rttvar: self.rtt.rttvar(),
            owd: self.rtt.srtt().or(self.peer_rtt).map(|r| r / 2),
            pacing_rate_bytes_per_s: pacing,
            delivery_rate_bytes_per_s: self.delivery_rate,
            loss_rate: self.loss_rate,
            cc_state: self.cc.state(),
            // The per-path queue absorbs what the pacer holds back: report
            // the pacer as binding only once a small backlog waits, so a
            // paced path is not mistaken for a full one by schedulers.
            next_send_time: pacing
                .filter(|_| self.queue.len() >= PACED_BACKLOG_PKTS)
                .map(|_| self.next_send_at),
            mss_bytes: self.mss_bytes,
        }
    }

    pub fn snapshot(&self) -> CcSnapshot {
        self.cc.snapshot(
            self.id,
            self.rtt.srtt().unwrap_or(Duration::ZERO),
            self.is_open() && !self.failed,
        )
    }
}

/// Shortest hold worth reporting as Elapsed Time: below it the option's
/// bytes buy less precision than the sender's clock jitter.
pub(crate) const ELAPSED_MIN: Duration = Duration::from_millis(1);

/// Packets a paced path may hold in its own queue before schedulers see the
/// pacer as the binding constraint.
const PACED_BACKLOG_PKTS: usize = 2;

/// Index of the first entry among `sent[..end]` numbered `lo` or above, or
/// `end` when there is none (the caller knows `sent[end]`, if any, is).
fn first_at_or_above(sent: &VecDeque<Sent>, end: usize, lo: u64) -> usize {
    // Without holes in the numbering the answer is `end` itself: one check.
    if end == 0 || sent[end - 1].seq < lo {
        return end;
    }
    let (mut a, mut b) = (0, end - 1);
    while a < b {
        let m = a + (b - a) / 2;
        if sent[m].seq < lo {
            a = m + 1;
        } else {
            b = m;
        }
    }
    a
}

fn insert_top(top: &mut [u64; 3], seq: u64) {
    if seq > top[0] {
        top[2] = top[1];
        top[1] = top[0];
        top[0] = seq;
    } else if seq > top[1] && seq != top[0] {
        top[2] = top[1];
        top[1] = seq;
    } else if seq > top[2] && seq != top[1] && seq != top[0] {
        top[2] = seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::ConnectionConfig;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn subflow(iss: u64) -> Subflow {
        let conf = ConnectionConfig::default();
        let cc = crate::cc::ControllerFactory::build(&crate::cc::CcKind::Ccid2, &conf.cc_config);
        let mut sf = Subflow::new(PathId(0), PathConfig::default(), iss, cc, &conf);
        sf.state = SubState::Open;
        sf
    }

    /// Sends data packets, the k-th at `times_ms[k]`; returns their numbers.
    fn send(sf: &mut Subflow, times_ms: &[u64]) -> Vec<u64> {
        times_ms
            .iter()
            .map(|&t| {
                let seq = sf.next_seq();
                sf.on_data_sent(at(t), seq, 1000, false);
                seq
            })
            .collect()
    }

    /// One Ack Vector cell "received" covering `n` packets (RFC 4340 §11.4:
    /// state 0 in the top two bits, run length n-1 below).
    fn run(n: u8) -> [u8; 1] {
        [n - 1]
    }

    #[test]
    fn the_sample_is_the_packet_named_by_the_ack_and_only_its_first_ack() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 1, 2, 3, 4]);
        // One ack covers all five: the sample is from the newest (sent at
        // 4 ms), not the oldest (0 ms).
        sf.on_ack(at(30), s[4], Some(&run(5)), None, &[]);
        assert_eq!(sf.rtt.latest(), Some(MS * 26));
        assert_eq!(sf.stats.rtt_samples, 1);
        // The same ack number again (a later packet of the peer, nothing
        // newer received): no second sample from an already acked packet.
        sf.on_ack(at(60), s[4], Some(&run(5)), None, &[]);
        assert_eq!(sf.stats.rtt_samples, 1);
        assert_eq!(sf.rtt.min_rtt(), Some(MS * 26));
    }

    #[test]
    fn an_ack_naming_a_packet_without_a_send_record_gives_no_sample() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 1, 2]);
        // The peer's newest is our pure Ack (numbered after the data, not a
        // data packet): the data it also acknowledges was received earlier,
        // at a time we do not know.
        let pure_ack = sf.next_seq();
        sf.on_ack(at(9), pure_ack, Some(&run(4)), None, &[]);
        assert_eq!(sf.pipe, 0, "the data is acknowledged");
        assert_eq!(sf.stats.rtt_samples, 0);
        assert_eq!(sf.rtt.srtt(), None);
        let _ = s;
    }

    #[test]
    fn lost_or_timed_out_packets_acked_late_give_no_sample() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 1, 2, 3, 4, 5]);
        // 3, 4, 5 acknowledged one by one: 1 and 2 are lost (RFC 4341 §5).
        for (k, t) in [(3usize, 20u64), (4, 21), (5, 22)] {
            sf.on_ack(at(t), s[k], None, None, &[]);
        }
        assert_eq!(sf.stats.rtt_samples, 3);
        let min = sf.rtt.min_rtt();
        // A very late ack of the "lost" packet 1: no sample (it would
        // be far too large here, but a reordered ack of an old packet is
        // no measurement of the path either).
        sf.on_ack(at(500), s[1], None, None, &[]);
        assert_eq!(sf.stats.rtt_samples, 3);
        // After an RTO the flight is forgotten: a late ack matches nothing.
        let t = send(&mut sf, &[600, 601]);
        sf.on_rto(at(900), 10);
        sf.on_ack(at(901), t[1], None, None, &[]);
        assert_eq!(sf.stats.rtt_samples, 3);
        assert_eq!(sf.rtt.min_rtt(), min);
    }

    #[test]
    fn a_driver_clock_going_backwards_is_refused_not_a_zero_sample() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[50]);
        sf.on_ack(at(40), s[0], None, None, &[]);
        assert_eq!(sf.stats.rtt_samples, 0);
        assert_eq!(sf.stats.rtt_samples_rejected, 1);
        assert_eq!(sf.rtt.min_rtt(), None);
    }

    #[test]
    fn samples_across_the_48_bit_wrap() {
        // ISS three below 2^48: the flight straddles the wrap.
        let mut sf = subflow(SEQ_MASK - 2);
        let s = send(&mut sf, &[0, 1, 2, 3, 4, 5]);
        assert!(s[0] <= SEQ_MASK && s[5] > SEQ_MASK);
        for (k, &seq) in s.iter().enumerate() {
            // The peer echoes 48-bit numbers; unwrapping recovers ours.
            let ack = sf.unwrap_ack(seq & SEQ_MASK);
            assert_eq!(ack, seq);
            sf.on_ack(at(10 + k as u64), ack, None, None, &[]);
            assert_eq!(sf.rtt.latest(), Some(MS * 10), "packet {k}");
        }
        assert_eq!(sf.stats.rtt_samples, 6);
        assert_eq!(sf.rtt.min_rtt(), Some(MS * 10));
    }

    #[test]
    fn elapsed_time_is_subtracted_but_never_below_the_minimum() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 100, 200, 300]);
        sf.on_ack(at(10), s[0], None, None, &[]);
        // Held 8 ms by the peer: 18 - 8 = 10 (the path), used.
        sf.on_ack(at(118), s[1], None, Some(MS * 8), &[]);
        assert_eq!(sf.stats.rtt_ack_delay_used, 1);
        assert_eq!(sf.rtt.srtt(), Some(MS * 10));
        // A forged 17 ms (18 - 17 = 1 ms) and an absurd hour: ignored.
        sf.on_ack(at(218), s[2], None, Some(MS * 17), &[]);
        sf.on_ack(at(318), s[3], None, Some(Duration::from_secs(3600)), &[]);
        assert_eq!(sf.stats.rtt_ack_delay_ignored, 2);
        assert_eq!(sf.rtt.min_rtt(), Some(MS * 10));
        assert!(sf.rtt.srtt().unwrap() > MS * 10);
    }

    #[test]
    fn held_acks_report_how_long_they_were_held() {
        let mut sf = subflow(1000);
        sf.set_isr(5000);
        assert!(sf.on_packet_received(at(100), 5001));
        assert_eq!(sf.ack_elapsed_10us(at(100)), None, "not held");
        assert_eq!(sf.ack_elapsed_10us(at(110)), Some(1000));
        // An older packet arriving late does not move the reference.
        assert!(sf.on_packet_received(at(105), 5003));
        assert!(sf.on_packet_received(at(107), 5002));
        assert_eq!(sf.ack_elapsed_10us(at(110)), Some(500));
    }
}
