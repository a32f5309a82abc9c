//! The additive-increase / multiplicative-decrease window shared by Reno and
//! the coupled Reno-like controllers (LIA, OLIA, BALIA), in packets.
//!
//! Keeping one implementation is what makes "one subflow of LIA behaves
//! exactly as Reno" (RFC 6356 §3) true bit for bit: only the congestion
//! avoidance increase differs between them.

use super::validation::CwndValidation;
use super::{AckEvent, CcConfig, SentPacket};
use crate::time::Instant;

#[derive(Clone, Debug)]
pub(crate) struct Aimd {
    /// Congestion window, packets (fractional: per-ack increases are < 1).
    pub cwnd: f64,
    pub ssthresh: f64,
    /// When the window was last reduced: losses of packets sent before this
    /// belong to the same congestion event (RFC 5681 §3.2, RFC 6582 §3.2:
    /// one reduction per window of data).
    recovery_start: Option<Instant>,
    /// The sender filled the window at its latest send (RFC 7661 §4.3: do not
    /// grow a window the sender does not use).
    cwnd_limited: bool,
    pub min_cwnd: f64,
    pub max_cwnd: f64,
    /// RFC 7661 idle rule (see `validation`).
    pub validation: CwndValidation,
}

impl Aimd {
    pub fn new(initial_cwnd_pkts: u32, config: &CcConfig) -> Self {
        let min_cwnd = config.min_cwnd_pkts.max(1) as f64;
        let max_cwnd = (config.max_cwnd_pkts as f64).max(min_cwnd);
        Aimd {
            cwnd: (initial_cwnd_pkts as f64).clamp(min_cwnd, max_cwnd),
            ssthresh: f64::INFINITY,
            recovery_start: None,
            cwnd_limited: false,
            min_cwnd,
            max_cwnd,
            validation: CwndValidation::new(config.cwnd_validation, initial_cwnd_pkts)
                .with_peak_rule(config.cwnd_validation_peak),
        }
    }

    /// RFC 7661 / RFC 4341 §5.1: a window idle for more than an RTO decays
    /// to its restart window. True when it did.
    pub fn validate_idle(&mut self, now: Instant) -> bool {
        if !self.validation.may_be_idle() {
            return false;
        }
        match self.validation.check_idle(now, self.cwnd, self.ssthresh) {
            Some(r) => {
                self.cwnd = r.cwnd.clamp(self.min_cwnd, self.max_cwnd);
                self.ssthresh = self.ssthresh.max(r.ssthresh_floor);
                true
            }
            None => false,
        }
    }

    /// Feeds the idle rule's pipeACK and RTO (call on every ack).
    pub fn note_ack(&mut self, now: Instant, ack: &AckEvent) {
        self.validation.on_ack(now, ack);
    }

    pub fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.validate_idle(now);
        self.validation.on_packet_sent(now, pkt.in_flight_pkts);
        let in_flight = pkt.in_flight_pkts as f64;
        // In slow start a window at least half used still doubles usefully
        // (Linux `tcp_is_cwnd_limited` uses the same rule).
        self.cwnd_limited = in_flight >= self.cwnd.floor()
            || (self.in_slow_start() && 2.0 * in_flight >= self.cwnd.floor());
    }

    pub fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// RFC 5681 §3.1: cwnd += acked while below ssthresh. Returns the acked
    /// packets left over once ssthresh is reached (they count towards
    /// congestion avoidance).
    pub fn slow_start(&mut self, acked_pkts: f64) -> f64 {
        let room = (self.ssthresh - self.cwnd).max(0.0);
        if acked_pkts <= room {
            self.cwnd += acked_pkts;
            0.0
        } else {
            self.cwnd += room;
            acked_pkts - room
        }
    }

    /// Adds `increase_pkts` and clamps to [min, max].
    pub fn grow(&mut self, increase_pkts: f64) {
        if increase_pkts.is_finite() && increase_pkts > 0.0 {
            self.cwnd = (self.cwnd + increase_pkts).min(self.max_cwnd);
        }
    }

    /// True (and remembers `now`) if a loss of a packet sent at
    /// `largest_lost_sent_time` starts a new congestion event.
    pub fn new_congestion_event(&mut self, now: Instant, largest_lost_sent_time: Instant) -> bool {
        super::starts_congestion_event(&mut self.recovery_start, now, largest_lost_sent_time)
    }

    /// Multiplies the window by `factor` (0.5 for Reno, RFC 5681 §3.1 eq. 4)
    /// and sets ssthresh to the result.
    pub fn reduce_to(&mut self, new_cwnd: f64) {
        let new_cwnd = if new_cwnd.is_finite() {
            new_cwnd
        } else {
            self.min_cwnd
        };
        self.cwnd = new_cwnd.clamp(self.min_cwnd, self.max_cwnd);
        self.ssthresh = self.cwnd.max(2.0);
    }

    /// RFC 5681 §3.1 eq. 4 and §3.2 (RTO): ssthresh = max(cwnd/2, 2),
    /// cwnd = 1 (the loss window), raised to the configured floor.
    pub fn on_rto(&mut self, now: Instant) {
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = self.min_cwnd;
        self.recovery_start = Some(now);
    }

    pub fn cwnd_pkts(&self) -> u32 {
        // Truncation equals `floor() as u32` for every f64 (see cubic.rs).
        self.cwnd.clamp(self.min_cwnd, self.max_cwnd) as u32
    }

    pub fn ssthresh_pkts(&self) -> Option<u32> {
        self.ssthresh
            .is_finite()
            .then(|| self.ssthresh.min(u32::MAX as f64) as u32)
    }

    pub fn state(&self) -> &'static str {
        if self.in_slow_start() {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }
}
