//! Congestion window validation after idle periods, shared by the
//! loss-based controllers (CCID2, Reno, CUBIC, LIA/OLIA/BALIA, Coupled
//! CUBIC); the BBR family has its own idle restart.
//!
//! Two halves, one per face of the same missing rule:
//! - **Application-limited**: a window the sender does not fill does not
//!   grow (each controller's `cwnd_limited`, RFC 7661 §4.3, RFC 4341 §5.1).
//! - **Idle** (this module): RFC 4341 §5.1 has a CCID2 sender follow TCP's
//!   congestion window validation (RFC 2861, since replaced by RFC 7661):
//!   after more than an RTO without sending, the window is worth less.
//!
//! The rule, with its restart window (what the first send after idle may
//! put in flight at once):
//! - **pipeACK** (RFC 7661 §4.2): packets acknowledged per sample of one
//!   smoothed RTT; pipeACK is the largest of the last [`PIPEACK_SAMPLES`]
//!   samples (a sampling period of at least three RTTs). It is what the path
//!   delivered in one round trip while in use.
//! - **Decay**: idle (nothing in flight) for `n` RTOs since the last send,
//!   cwnd halves `n` times (RFC 2861 §3, as RFC 4341 §5.1 asks), but not
//!   below the restart window `RW = min(cwnd, max(IW, pipeACK))` — with
//!   `CcConfig::cwnd_validation_peak`, `min(cwnd, max(IW, 2·pipeACK_peak))`
//!   — and ssthresh becomes `max(ssthresh, 3/4·cwnd)` first so slow start
//!   climbs back towards the old window (RFC 2861 §3).
//! - Why this restart window: RFC 2861's RW = min(IW, cwnd) makes a video
//!   keyframe after idle wait several round trips (236 ms at cwnd 3).
//!   RFC 7661 §4.3 keeps the whole cwnd for the non-validated period.
//!   The default keeps what the path delivered per round trip lately; the
//!   peak rule keeps the part of cwnd that RFC 7661 calls validated: its validated
//!   phase is `pipeACK ≥ ½·cwnd` (§3, §4.1), so a window up to twice what
//!   the path delivered in one round trip was validated, and more was not
//!   (measured: 394 packets with at most 163 in flight — a slow start's
//!   overshoot, 2·163 = 326 kept).
//! - Which pipeACK (peak rule): `pipeACK_peak`, the largest sample of the last NVP, not
//!   only of the last three. RFC 7661 §4.3 keeps cwnd through the whole
//!   non-validated period and does not tell idle from rate-limited periods;
//!   a video stream is both: a keyframe burst fills the window, then the
//!   steady frames use a tenth of it, then the play pauses. The last three
//!   samples describe the steady frames, so after a pause the window fell
//!   to them and the next keyframe waited three to four round trips in
//!   slow start (keyframe after 5 s idle: 125 ms on the real
//!   tunnel, 70 ms within the play; 88–90 ms with the peak rule). Not the
//!   default: a secondary path that idles beside a busy one then restarts
//!   with a larger window, which costs the simulator's lossy/quic/lia
//!   (0.98 → 0.87 of the best path; docs/AGGREGATION.md).
//! - The validation expires: a pipeACK older than the non-validated period
//!   (NVP, 300 s, RFC 7661 §5) is forgotten, and RW falls to IW.
//!
//! Deterministic: time is the `now` argument; the RTO comes from RFC 6298
//! applied to the RTT samples of the acknowledgements (as the transport's).

use std::time::Duration;

use super::{AckEvent, RttEstimator};
use crate::time::Instant;

/// Samples (of one SRTT each) over which pipeACK is the maximum.
pub const PIPEACK_SAMPLES: usize = 3;

/// RFC 7661 §3/§4.1: the validated phase is `pipeACK ≥ ½·cwnd`, so a
/// window up to this many times pipeACK is validated.
pub const VALIDATED_PER_PIPE_ACK: f64 = 2.0;

/// RFC 7661 §5: the non-validated period.
pub const NVP: Duration = Duration::from_secs(300);

/// What a controller must do after an idle period: set cwnd to `cwnd` and
/// ssthresh to at least `ssthresh_floor`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Restart {
    pub cwnd: f64,
    pub ssthresh_floor: f64,
}

/// Per-path state of the idle rule. See the module docs.
#[derive(Clone, Debug)]
pub struct CwndValidation {
    enabled: bool,
    /// Restart at 2 · pipeACK_peak (`CcConfig::cwnd_validation_peak`);
    /// off: at pipeACK, the rule before it.
    peak_rule: bool,
    initial_window: f64,
    rtt: RttEstimator,
    sample_start: Option<Instant>,
    sample_acked: u64,
    /// Completed samples, newest last: (end time, packets acked).
    samples: [(Instant, u64); PIPEACK_SAMPLES],
    filled: usize,
    /// The largest sample of the last NVP (end time, packets acked); an
    /// older peak gives way to the next sample.
    peak: Option<(Instant, u64)>,
    last_send: Option<Instant>,
    in_flight: u32,
}

impl CwndValidation {
    pub fn new(enabled: bool, initial_window_pkts: u32) -> Self {
        CwndValidation {
            enabled,
            peak_rule: false,
            initial_window: initial_window_pkts.max(1) as f64,
            // The transport's RFC 6298 bounds (conn/subflow: 1 s initial,
            // 200 ms floor, 60 s ceiling).
            rtt: RttEstimator::new(
                Duration::from_secs(1),
                Duration::from_millis(200),
                Duration::from_secs(60),
            ),
            sample_start: None,
            sample_acked: 0,
            samples: [(Instant::ZERO, 0); PIPEACK_SAMPLES],
            filled: 0,
            peak: None,
            last_send: None,
            in_flight: 0,
        }
    }

    /// Restart at 2 · pipeACK_peak instead of pipeACK (see the module docs).
    pub fn with_peak_rule(mut self, on: bool) -> Self {
        self.peak_rule = on;
        self
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The RTO the idle rule counts in.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    pub fn on_packet_sent(&mut self, now: Instant, in_flight_pkts: u32) {
        self.last_send = Some(now);
        self.in_flight = in_flight_pkts;
    }

    pub fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        self.in_flight = ack.in_flight_pkts;
        if let Some(rtt) = ack.rtt {
            self.rtt.on_sample(rtt);
        }
        let srtt = self.rtt.srtt().unwrap_or(ack.srtt);
        // RFC 7661 §4.2: one pipeACK sample per RTT of acknowledgements; a
        // sample closes at the first ack at least an SRTT after it opened.
        let start = *self.sample_start.get_or_insert(now);
        if !srtt.is_zero() && now - start >= srtt {
            self.samples.rotate_left(1);
            self.samples[PIPEACK_SAMPLES - 1] = (now, self.sample_acked);
            self.filled = (self.filled + 1).min(PIPEACK_SAMPLES);
            if self
                .peak
                .is_none_or(|(t, v)| self.sample_acked >= v || now - t > NVP)
            {
                self.peak = Some((now, self.sample_acked));
            }
            self.sample_acked = 0;
            self.sample_start = Some(now);
        }
        self.sample_acked += ack.acked_pkts as u64;
    }

    /// Packets in flight after a loss or an RTO (the transport's count).
    pub fn set_in_flight(&mut self, in_flight_pkts: u32) {
        self.in_flight = in_flight_pkts;
    }

    /// pipeACK at `now` (RFC 7661 §4.2), packets: `None` before the first
    /// sample and once the newest is older than the NVP.
    /// The sample still open (less than an SRTT of acks) counts too: what
    /// was acknowledged within less than a round trip was carried in one.
    pub fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        let open = self.sample_start.filter(|_| self.sample_acked > 0);
        let newest = open.or(self.samples[PIPEACK_SAMPLES - 1..].first().map(|s| s.0));
        if (self.filled == 0 && open.is_none()) || newest.is_some_and(|t| now - t > NVP) {
            return None;
        }
        let closed = self.samples[PIPEACK_SAMPLES - self.filled..]
            .iter()
            .map(|s| s.1);
        closed.chain(open.map(|_| self.sample_acked)).max()
    }

    /// pipeACK_peak at `now`, packets: the larger of pipeACK and the peak
    /// sample of the last NVP (see the module docs).
    pub fn validated_pkts(&self, now: Instant) -> Option<u64> {
        let peak = self.peak.filter(|(t, _)| now - *t <= NVP).map(|p| p.1);
        self.pipe_ack_pkts(now).max(peak)
    }

    /// The restart window RW at `now` for a window of `cwnd` packets: the
    /// largest window RFC 7661 §4.1 counts as validated, 2·pipeACK_peak.
    pub fn restart_window(&self, now: Instant, cwnd: f64) -> f64 {
        let validated = if self.peak_rule {
            VALIDATED_PER_PIPE_ACK * self.validated_pkts(now).unwrap_or(0) as f64
        } else {
            self.pipe_ack_pkts(now).unwrap_or(0) as f64
        };
        self.initial_window.max(validated).min(cwnd)
    }

    /// Whether [`Self::check_idle`] can act at all: only after an idle
    /// start with nothing in flight (the callers skip building its
    /// arguments otherwise; it is asked on every scheduling turn).
    pub fn may_be_idle(&self) -> bool {
        self.enabled && self.in_flight == 0 && self.last_send.is_some()
    }

    /// The idle rule at `now` for a controller at `cwnd`: `Some` when the
    /// window must decay (and the idle period counts as ended, so the decay
    /// is applied once per idle period's RTOs).
    pub fn check_idle(&mut self, now: Instant, cwnd: f64, ssthresh: f64) -> Option<Restart> {
        if !self.enabled || self.in_flight > 0 {
            return None;
        }
        let last = self.last_send?;
        let rto = self.rto();
        let idle = now - last;
        if idle <= rto {
            return None;
        }
        let rtos = (idle.as_nanos() / rto.as_nanos().max(1)).min(64) as i32;
        let rw = self.restart_window(now, cwnd);
        let decayed = (cwnd * 0.5f64.powi(rtos)).max(rw);
        // Count the RTOs just applied as spent: the next check halves again
        // only after a further RTO of idle (RFC 2861 §3 per-RTO halving).
        self.last_send = Some(last + rto * rtos as u32);
        if decayed >= cwnd {
            return None;
        }
        Some(Restart {
            cwnd: decayed,
            ssthresh_floor: if ssthresh.is_finite() {
                ssthresh.max(0.75 * cwnd)
            } else {
                ssthresh
            },
        })
    }
}
