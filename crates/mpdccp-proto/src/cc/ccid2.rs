//! CCID2, TCP-like congestion control for DCCP (RFC 4341), window in packets.
//!
//! The transport (the `conn` subflow) owns the Ack Vector, loss detection
//! (a packet is lost once three later packets are acknowledged, RFC 4341 §5)
//! and the RTO timer; this type owns only the window arithmetic.

use super::validation::CwndValidation;
use super::{
    rfc3390_initial_window_pkts, AckEvent, CcConfig, CongestionController, CoupledView, LossEvent,
    SentPacket,
};
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct Ccid2 {
    cwnd: u32,
    ssthresh: u32,
    /// Packets acknowledged in congestion avoidance since the last increase.
    ca_acked: u32,
    /// Time of the last halving: losses of packets sent before it are part
    /// of the same congestion event (RFC 4341 §5: halve at most once per
    /// window of data).
    recovery_start: Option<Instant>,
    cwnd_limited: bool,
    min_cwnd: u32,
    max_cwnd: u32,
    /// RFC 4341 §5.1 idle rule (see `validation`).
    validation: CwndValidation,
}

impl Ccid2 {
    pub fn new(config: &CcConfig) -> Self {
        let min_cwnd = config.min_cwnd_pkts.max(1);
        let max_cwnd = config.max_cwnd_pkts.max(min_cwnd);
        // RFC 4341 §5: initial cwnd per RFC 3390 (4 / 3 / 2 packets for
        // MSS 536 / 1460 / 4000 bytes).
        let iw = config
            .initial_cwnd_pkts
            .unwrap_or_else(|| rfc3390_initial_window_pkts(config.mss_bytes));
        Ccid2 {
            cwnd: iw.clamp(min_cwnd, max_cwnd),
            ssthresh: u32::MAX,
            ca_acked: 0,
            recovery_start: None,
            cwnd_limited: false,
            min_cwnd,
            max_cwnd,
            validation: CwndValidation::new(config.cwnd_validation, iw)
                .with_peak_rule(config.cwnd_validation_peak),
        }
    }

    /// RFC 4341 §5.1: after an idle period of more than an RTO the window
    /// decays to its restart window (`validation`), in whole packets.
    fn validate_idle(&mut self, now: Instant) {
        let ssthresh = if self.ssthresh == u32::MAX {
            f64::INFINITY
        } else {
            self.ssthresh as f64
        };
        if let Some(r) = self.validation.check_idle(now, self.cwnd as f64, ssthresh) {
            self.cwnd = (r.cwnd.ceil() as u32).clamp(self.min_cwnd, self.max_cwnd);
            if r.ssthresh_floor.is_finite() {
                self.ssthresh = self.ssthresh.max(r.ssthresh_floor.ceil() as u32);
            }
            self.ca_acked = 0;
        }
    }

    /// Largest Ack Ratio the receiver may use with this window: RFC 4341
    /// §6.1.2 keeps it at most ceil(cwnd/2) so that at least two acks arrive
    /// per window.
    pub fn max_ack_ratio(&self) -> u32 {
        super::max_ack_ratio(self.cwnd)
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
}

impl CongestionController for Ccid2 {
    fn name(&self) -> &'static str {
        "ccid2"
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.validate_idle(now);
        self.validation.on_packet_sent(now, pkt.in_flight_pkts);
        // RFC 4341 §5 defers to RFC 2861/7661 for application-limited
        // periods: only a window the sender fills may grow.
        self.cwnd_limited = pkt.in_flight_pkts >= self.cwnd
            || (self.in_slow_start() && pkt.in_flight_pkts.saturating_mul(2) >= self.cwnd);
    }

    fn reads_coupled_view(&self) -> bool {
        false
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, _paths: CoupledView<'_>) {
        self.validation.on_ack(now, ack);
        if !self.cwnd_limited {
            return;
        }
        let mut acked = ack.acked_pkts;
        if self.in_slow_start() {
            // RFC 4341 §5: slow start, cwnd += 1 per newly acked packet.
            let room = self.ssthresh - self.cwnd;
            let step = acked.min(room);
            self.cwnd = self.cwnd.saturating_add(step).min(self.max_cwnd);
            acked -= step;
        }
        if acked > 0 && !self.in_slow_start() {
            // RFC 4341 §5: congestion avoidance, cwnd += 1 per window of
            // acknowledged packets.
            self.ca_acked = self.ca_acked.saturating_add(acked);
            while self.ca_acked >= self.cwnd && self.cwnd < self.max_cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd += 1;
            }
            if self.cwnd >= self.max_cwnd {
                self.ca_acked = 0;
            }
        }
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
        self.validation.set_in_flight(loss.in_flight_pkts);
        if !super::starts_congestion_event(
            &mut self.recovery_start,
            now,
            loss.largest_lost_sent_time,
        ) {
            return;
        }
        // RFC 4341 §5: halve cwnd (and set ssthresh to it) on a lost or
        // ECN-marked packet.
        self.cwnd = (self.cwnd / 2).clamp(self.min_cwnd, self.max_cwnd);
        self.ssthresh = self.cwnd.max(2);
        self.ca_acked = 0;
    }

    fn on_rto(&mut self, now: Instant) {
        // RFC 4341 §5 (TCP's RFC 5681 §3.1): ssthresh = cwnd/2, cwnd = 1.
        self.ssthresh = (self.cwnd / 2).max(2);
        self.cwnd = self.min_cwnd;
        self.ca_acked = 0;
        self.recovery_start = Some(now);
    }

    fn cwnd_pkts(&self) -> u32 {
        self.cwnd
    }

    fn validate_window(&mut self, now: Instant) {
        self.validate_idle(now);
    }

    fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        self.validation.pipe_ack_pkts(now)
    }

    fn state(&self) -> &'static str {
        if self.in_slow_start() {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }

    fn ssthresh_pkts(&self) -> Option<u32> {
        (self.ssthresh != u32::MAX).then_some(self.ssthresh)
    }
}
