//! CUBIC (RFC 9438) with HyStart++ (RFC 9406), in packets.
//!
//! The window core is shared with Coupled CUBIC, which scales the window it
//! uses by its coupling factor, or replaces congestion avoidance by LIA's
//! increase on small-BDP paths; plain CUBIC uses neither.

use std::time::Duration;

use super::round::RoundTracker;
use super::validation::CwndValidation;
use super::{
    rfc3390_initial_window_pkts, AckEvent, CcConfig, CongestionController, CoupledView, LossEvent,
    SentPacket, SlowStartExit,
};
use crate::time::Instant;

/// RFC 9438 §5.1: C = 0.4.
pub const CUBIC_C: f64 = 0.4;
/// RFC 9438 §4.6: β_cubic = 0.7.
pub const CUBIC_BETA: f64 = 0.7;
/// RFC 9438 §4.3: α_cubic = 3(1−β)/(1+β) ≈ 0.529, the additive increase
/// that makes the Reno-friendly estimate match Reno's average rate.
pub const CUBIC_ALPHA: f64 = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);

/// RFC 9438 §4.2 eq. 2: K = cbrt((W_max − cwnd_epoch)/C), seconds.
pub fn cubic_k(w_max_pkts: f64, cwnd_epoch_pkts: f64) -> f64 {
    ((w_max_pkts - cwnd_epoch_pkts) / CUBIC_C).cbrt()
}

/// RFC 9438 §4.2 eq. 1: W_cubic(t) = C·(t − K)³ + W_max, packets.
pub fn w_cubic(t_s: f64, k_s: f64, w_max_pkts: f64) -> f64 {
    CUBIC_C * (t_s - k_s).powi(3) + w_max_pkts
}

/// RFC 9406 §4.2 constants.
pub mod hystart {
    use std::time::Duration;
    pub const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
    pub const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
    pub const MIN_RTT_DIVISOR: u32 = 8;
    pub const N_RTT_SAMPLE: u32 = 8;
    pub const CSS_GROWTH_DIVISOR: f64 = 4.0;
    pub const CSS_ROUNDS: u32 = 5;
    /// Per-ack growth cap L without pacing (packets); infinite when paced.
    pub const L_NON_PACED: f64 = 8.0;
    /// Linux's HyStart tests the delay only from this window on (packets;
    /// `hystart_low_window`, Ha & Rhee 2011).
    pub const LINUX_LOW_WINDOW: f64 = 16.0;
}

/// RFC 9406 §4.2: RttThresh = max(MIN_RTT_THRESH,
/// min(lastRoundMinRTT / MIN_RTT_DIVISOR, MAX_RTT_THRESH)).
pub fn hystart_rtt_thresh(last_round_min_rtt: Duration) -> Duration {
    (last_round_min_rtt / hystart::MIN_RTT_DIVISOR)
        .min(hystart::MAX_RTT_THRESH)
        .max(hystart::MIN_RTT_THRESH)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum HyStartPhase {
    SlowStart,
    /// Conservative slow start, with the RTT that triggered it and the
    /// rounds spent in it.
    Css {
        baseline_min_rtt: Duration,
        rounds: u32,
    },
    /// Initial slow start is over (loss, CSS done, or disabled).
    Done,
}

#[derive(Clone, Debug)]
struct HyStart {
    phase: HyStartPhase,
    last_round_min_rtt: Option<Duration>,
    current_round_min_rtt: Option<Duration>,
    samples: u32,
    /// L of RFC 9406 §4.2.
    limit_pkts: f64,
    /// Linux's HyStart instead of RFC 9406 (`SlowStartExit::Linux`),
    /// with the smallest RTT seen since the flow began.
    linux: bool,
    min_rtt_ever: Option<Duration>,
}

impl HyStart {
    /// RFC 9406 §4.2 (or Linux's test, [`HyStart::linux_exit`]), once per
    /// ack in slow start at window `cwnd`. Returns the window increase for
    /// `acked` packets, and whether to end slow start now (CSS_ROUNDS
    /// rounds of CSS completed; Linux: the delay test fired).
    fn on_ack(
        &mut self,
        new_round: bool,
        rtt: Option<Duration>,
        acked: f64,
        cwnd: f64,
    ) -> (f64, bool) {
        if self.linux {
            let exit = self.linux_exit(new_round, rtt, cwnd);
            return if exit {
                (0.0, true)
            } else {
                (acked.min(self.limit_pkts), false)
            };
        }
        if new_round {
            self.last_round_min_rtt = self.current_round_min_rtt;
            self.current_round_min_rtt = None;
            self.samples = 0;
            if let HyStartPhase::Css { rounds, .. } = &mut self.phase {
                *rounds += 1;
                if *rounds >= hystart::CSS_ROUNDS {
                    self.phase = HyStartPhase::Done;
                    return (0.0, true);
                }
            }
        }
        if let Some(rtt) = rtt {
            self.current_round_min_rtt =
                Some(self.current_round_min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.samples += 1;
        }
        let enough = self.samples >= hystart::N_RTT_SAMPLE;
        match (
            self.phase,
            self.current_round_min_rtt,
            self.last_round_min_rtt,
        ) {
            (HyStartPhase::SlowStart, Some(cur), Some(last))
                if enough && cur >= last + hystart_rtt_thresh(last) =>
            {
                self.phase = HyStartPhase::Css {
                    baseline_min_rtt: cur,
                    rounds: 0,
                };
            }
            // The RTT increase was spurious: resume slow start.
            (
                HyStartPhase::Css {
                    baseline_min_rtt, ..
                },
                Some(cur),
                _,
            ) if enough && cur < baseline_min_rtt => {
                self.phase = HyStartPhase::SlowStart;
            }
            _ => {}
        }
        let step = acked.min(self.limit_pkts);
        match self.phase {
            HyStartPhase::Css { .. } => (step / hystart::CSS_GROWTH_DIVISOR, false),
            _ => (step, false),
        }
    }

    /// Whether Linux's HyStart delay test (Ha & Rhee, "Taming the
    /// elephants", Computer Networks 2011; `tcp_cubic`'s default) ends slow
    /// start now: the smallest of a round's first `N_RTT_SAMPLE` RTTs
    /// against the smallest RTT since the flow began, plus the same
    /// clamped eighth as RFC 9406, from `LINUX_LOW_WINDOW` packets on. Slow
    /// start then ends at once (ssthresh = cwnd), with no conservative slow
    /// start to take back a spurious rise — what kernel TCP through the
    /// tunnel does when the first detours lengthen its RTT
    /// (docs/AGGREGATION.md, "The real tunnel's TCP ramp"). The ACK-train
    /// test is not modelled.
    fn linux_exit(&mut self, new_round: bool, rtt: Option<Duration>, cwnd: f64) -> bool {
        if new_round {
            self.current_round_min_rtt = None;
            self.samples = 0;
        }
        if let Some(rtt) = rtt {
            self.min_rtt_ever = Some(self.min_rtt_ever.map_or(rtt, |m| m.min(rtt)));
            if self.samples < hystart::N_RTT_SAMPLE {
                self.current_round_min_rtt =
                    Some(self.current_round_min_rtt.map_or(rtt, |m| m.min(rtt)));
                self.samples += 1;
            }
        }
        if let (Some(cur), Some(ever)) = (self.current_round_min_rtt, self.min_rtt_ever) {
            let enough = self.samples >= hystart::N_RTT_SAMPLE;
            if enough && cwnd >= hystart::LINUX_LOW_WINDOW && cur >= ever + hystart_rtt_thresh(ever)
            {
                self.phase = HyStartPhase::Done;
                return true;
            }
        }
        false
    }
}

/// How a [`CubicCore`] grows in congestion avoidance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum CaRule {
    /// RFC 9438 §4.2–4.5 with each acknowledged packet counted `coupling`
    /// times (1 = CUBIC; Coupled CUBIC counts 1/scale so that its W_CUBIC
    /// sees the acks of a window W_CUBIC while it sends scale·W_CUBIC).
    Cubic { coupling: f64 },
    /// A fixed increase per acknowledged packet (LIA, RFC 6356 §3).
    Linear { per_pkt: f64 },
}

/// The CUBIC window state machine (RFC 9438 §4).
#[derive(Clone, Debug)]
pub(crate) struct CubicCore {
    pub cwnd: f64,
    pub ssthresh: f64,
    /// W_max: window just before the last reduction (after fast
    /// convergence, §4.7).
    pub w_max: f64,
    /// cwnd when ssthresh was last set (`cwnd_prior`, §4.6).
    cwnd_prior: f64,
    k_s: f64,
    /// Start of the current congestion-avoidance epoch.
    t_epoch: Option<Instant>,
    /// Reno-friendly estimate W_est (§4.3).
    w_est: f64,
    recovery_start: Option<Instant>,
    cwnd_limited: bool,
    last_send_time: Option<Instant>,
    pub srtt: Duration,
    hystart: Option<HyStart>,
    rounds: RoundTracker,
    fast_convergence: bool,
    /// The window in use is `window_scale × cwnd` (Coupled CUBIC scales its
    /// CUBIC window; 1 otherwise).
    pub window_scale: f64,
    pub min_cwnd: f64,
    pub max_cwnd: f64,
    /// RFC 7661 idle rule (see `validation`), on the window in use.
    pub validation: CwndValidation,
}

impl CubicCore {
    pub fn new(config: &CcConfig) -> Self {
        let min_cwnd = config.min_cwnd_pkts.max(1) as f64;
        let max_cwnd = (config.max_cwnd_pkts as f64).max(min_cwnd);
        let iw = config
            .initial_cwnd_pkts
            .unwrap_or_else(|| rfc3390_initial_window_pkts(config.mss_bytes));
        CubicCore {
            cwnd: (iw as f64).clamp(min_cwnd, max_cwnd),
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            cwnd_prior: 0.0,
            k_s: 0.0,
            t_epoch: None,
            w_est: 0.0,
            recovery_start: None,
            cwnd_limited: false,
            last_send_time: None,
            srtt: Duration::ZERO,
            hystart: (config.hystart != SlowStartExit::LossOnly).then_some(HyStart {
                phase: HyStartPhase::SlowStart,
                last_round_min_rtt: None,
                current_round_min_rtt: None,
                samples: 0,
                limit_pkts: if config.pacing {
                    f64::INFINITY
                } else {
                    hystart::L_NON_PACED
                },
                linux: config.hystart == SlowStartExit::Linux,
                min_rtt_ever: None,
            }),
            rounds: RoundTracker::default(),
            fast_convergence: config.cubic_fast_convergence,
            window_scale: 1.0,
            min_cwnd,
            max_cwnd,
            validation: CwndValidation::new(config.cwnd_validation, iw)
                .with_peak_rule(config.cwnd_validation_peak),
        }
    }

    /// RFC 7661 / RFC 4341 §5.1: a window idle for more than an RTO decays
    /// to its restart window (`validation`). The window in use is
    /// `window_scale × cwnd`; a decay also starts a new epoch, so growth
    /// resumes from the decayed window towards W_max (RFC 9438 §4.2).
    pub fn validate_idle(&mut self, now: Instant) {
        if !self.validation.may_be_idle() {
            return;
        }
        let scale = if self.window_scale > 0.0 {
            self.window_scale
        } else {
            1.0
        };
        let window = scale * self.cwnd;
        if let Some(r) = self
            .validation
            .check_idle(now, window, scale * self.ssthresh)
        {
            self.cwnd = r.cwnd / scale;
            self.ssthresh = self.ssthresh.max(r.ssthresh_floor / scale);
            self.clamp();
            self.t_epoch = None;
        }
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    pub fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.validate_idle(now);
        self.validation.on_packet_sent(now, pkt.in_flight_pkts);
        // RFC 9438 §5.8: an idle period must not count as epoch time, or the
        // window would jump on restart; shift the epoch by the idle gap. Only
        // an application-limited sender idles (an empty flight of a
        // cwnd-limited sender is a burst that was acked at once).
        if pkt.in_flight_pkts <= 1 && !self.cwnd_limited {
            if let (Some(epoch), Some(last)) = (self.t_epoch, self.last_send_time) {
                self.t_epoch = Some(epoch + (now - last));
            }
        }
        self.last_send_time = Some(now);
        self.rounds.on_packet_sent(now);
        let in_flight = pkt.in_flight_pkts as f64;
        let window = (self.window_scale * self.cwnd).floor();
        self.cwnd_limited =
            in_flight >= window || (self.in_slow_start() && 2.0 * in_flight >= window);
    }

    /// One acknowledgement; congestion avoidance follows `ca`.
    pub fn on_ack(&mut self, now: Instant, ack: &AckEvent, ca: CaRule) {
        self.validation.on_ack(now, ack);
        if !ack.srtt.is_zero() {
            self.srtt = ack.srtt;
        }
        let new_round = self.rounds.on_ack(ack.largest_acked_sent_time);
        if !self.cwnd_limited {
            return;
        }
        let mut acked = ack.acked_pkts as f64;
        if self.in_slow_start() {
            let room = (self.ssthresh - self.cwnd).max(0.0);
            let increase = match &mut self.hystart {
                Some(hs) if hs.phase != HyStartPhase::Done => {
                    let (increase, exit) = hs.on_ack(new_round, ack.rtt, acked, self.cwnd);
                    if exit {
                        // RFC 9406 §4.2: after CSS_ROUNDS, enter congestion
                        // avoidance with ssthresh = cwnd (Linux: at once).
                        self.ssthresh = self.cwnd;
                        self.cwnd_prior = self.cwnd;
                    }
                    acked = 0.0;
                    increase
                }
                _ => {
                    let step = acked.min(room);
                    acked -= step;
                    step
                }
            };
            self.cwnd = (self.cwnd + increase.min(room)).min(self.max_cwnd);
        }
        if acked > 0.0 && !self.in_slow_start() {
            match ca {
                CaRule::Cubic { coupling } => self.congestion_avoidance(now, acked, coupling),
                CaRule::Linear { per_pkt } => {
                    // A Reno-like (LIA) increase; the next CUBIC epoch
                    // starts afresh from whatever window this leaves.
                    self.t_epoch = None;
                    if per_pkt.is_finite() && per_pkt > 0.0 {
                        self.cwnd += acked * per_pkt;
                    }
                    self.clamp();
                }
            }
        }
    }

    /// RFC 9438 §4.2–4.5.
    pub fn congestion_avoidance(&mut self, now: Instant, acked: f64, coupling: f64) {
        let t_epoch = match self.t_epoch {
            Some(t) => t,
            None => {
                self.t_epoch = Some(now);
                self.w_est = self.cwnd;
                if self.w_max <= self.cwnd {
                    // §4.8 / no reduction since slow start: K = 0 and
                    // W_max = the window at the start of this epoch.
                    self.w_max = self.cwnd;
                    self.k_s = 0.0;
                } else {
                    self.k_s = cubic_k(self.w_max, self.cwnd);
                }
                now
            }
        };
        let t = (now - t_epoch).as_secs_f64();
        let rtt = self.srtt.as_secs_f64();
        // §4.3: the Reno-friendly estimate, with α = 1 once W_est has
        // reached the window it had before the last reduction.
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            CUBIC_ALPHA
        };
        self.w_est += coupling * alpha * acked / self.cwnd;
        let w_now = w_cubic(t, self.k_s, self.w_max);
        if w_now < self.w_est {
            // §4.3: Reno-friendly region.
            self.cwnd = self.w_est;
        } else {
            // §4.4/§4.5: concave and convex regions; target clamped to
            // [cwnd, 1.5 cwnd].
            let target = w_cubic(t + rtt, self.k_s, self.w_max).clamp(self.cwnd, 1.5 * self.cwnd);
            // Never past the target, however many acks one call counts.
            let increase = coupling * acked * (target - self.cwnd) / self.cwnd;
            self.cwnd = if increase > target - self.cwnd {
                target
            } else {
                self.cwnd + increase
            };
        }
        self.clamp();
    }

    /// True (and remembers `now`) if this loss starts a new congestion event
    /// (§4.6: one reduction per window of data).
    pub fn new_congestion_event(&mut self, now: Instant, largest_lost_sent_time: Instant) -> bool {
        if !super::starts_congestion_event(&mut self.recovery_start, now, largest_lost_sent_time) {
            return false;
        }
        if let Some(hs) = &mut self.hystart {
            // RFC 9406 §4.2: a loss ends slow start and CSS.
            hs.phase = HyStartPhase::Done;
        }
        true
    }

    /// §4.6 and §4.7: multiplicative decrease with fast convergence.
    pub fn reduce(&mut self) {
        self.cwnd_prior = self.cwnd;
        self.w_max = if self.fast_convergence && self.cwnd < self.w_max {
            // §4.7: fast convergence, W_max = cwnd·(1+β)/2.
            self.cwnd * (1.0 + CUBIC_BETA) / 2.0
        } else {
            self.cwnd
        };
        self.cwnd = (self.cwnd * CUBIC_BETA).max(2.0);
        self.clamp();
        self.ssthresh = self.cwnd.max(2.0);
        self.t_epoch = None;
    }

    /// Halving for the LIA mode of Coupled CUBIC (RFC 6356 §3: as Reno).
    pub fn halve(&mut self) {
        self.cwnd_prior = self.cwnd;
        self.w_max = self.cwnd;
        self.cwnd /= 2.0;
        self.clamp();
        self.ssthresh = self.cwnd.max(2.0);
        self.t_epoch = None;
    }

    /// §4.8: on RTO, ssthresh from β and cwnd = 1; the next epoch starts
    /// with K = 0 and W_max = its initial window.
    pub fn on_rto(&mut self, now: Instant) {
        self.cwnd_prior = self.cwnd;
        self.ssthresh = (self.cwnd * CUBIC_BETA).max(2.0);
        self.cwnd = self.min_cwnd;
        self.w_max = 0.0;
        self.t_epoch = None;
        self.recovery_start = Some(now);
        if let Some(hs) = &mut self.hystart {
            hs.phase = HyStartPhase::Done;
        }
    }

    pub fn clamp(&mut self) {
        if !self.cwnd.is_finite() {
            self.cwnd = self.min_cwnd;
        }
        self.cwnd = self.cwnd.clamp(self.min_cwnd, self.max_cwnd);
    }

    pub fn cwnd_pkts(&self) -> u32 {
        // `as` truncates toward zero and saturates (NaN -> 0), which equals
        // `floor() as u32` for every f64; it avoids a libm call per view.
        (self.window_scale * self.cwnd).clamp(self.min_cwnd, self.max_cwnd) as u32
    }

    pub fn ssthresh_pkts(&self) -> Option<u32> {
        self.ssthresh
            .is_finite()
            .then(|| self.ssthresh.min(u32::MAX as f64) as u32)
    }

    pub fn state(&self) -> &'static str {
        match &self.hystart {
            Some(hs) if matches!(hs.phase, HyStartPhase::Css { .. }) && self.in_slow_start() => {
                "conservative_slow_start"
            }
            _ if self.in_slow_start() => "slow_start",
            _ => "congestion_avoidance",
        }
    }

    /// Linux-style pacing for window controllers: 2× cwnd/srtt in slow
    /// start, 1.2× after.
    pub fn pacing_rate(&self, mss_bytes: u32) -> Option<u64> {
        let srtt = self.srtt.as_secs_f64();
        if srtt <= 0.0 {
            return None;
        }
        let gain = if self.in_slow_start() { 2.0 } else { 1.2 };
        let rate = gain * self.window_scale * self.cwnd * mss_bytes as f64 / srtt;
        Some((rate.min(u64::MAX as f64 / 2.0) as u64).max(1))
    }
}

/// CUBIC congestion control, RFC 9438.
#[derive(Clone, Debug)]
pub struct Cubic {
    core: CubicCore,
    pacing: bool,
    mss_bytes: u32,
}

impl Cubic {
    pub fn new(config: &CcConfig) -> Self {
        Cubic {
            core: CubicCore::new(config),
            pacing: config.pacing,
            mss_bytes: config.mss_bytes.max(1),
        }
    }

    /// W_max, packets (for tests and the path view).
    pub fn w_max_pkts(&self) -> f64 {
        self.core.w_max
    }
}

impl CongestionController for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.core.on_packet_sent(now, pkt);
    }

    fn reads_coupled_view(&self) -> bool {
        false
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, _paths: CoupledView<'_>) {
        self.core.on_ack(now, ack, CaRule::Cubic { coupling: 1.0 });
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
        self.core.validation.set_in_flight(loss.in_flight_pkts);
        if self
            .core
            .new_congestion_event(now, loss.largest_lost_sent_time)
        {
            self.core.reduce();
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.core.on_rto(now);
    }

    fn cwnd_pkts(&self) -> u32 {
        self.core.cwnd_pkts()
    }

    fn validate_window(&mut self, now: Instant) {
        self.core.validate_idle(now);
    }

    fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        self.core.validation.pipe_ack_pkts(now)
    }

    fn pacing_rate_bytes_per_s(&self) -> Option<u64> {
        if self.pacing {
            self.core.pacing_rate(self.mss_bytes)
        } else {
            None
        }
    }

    fn state(&self) -> &'static str {
        self.core.state()
    }

    fn ssthresh_pkts(&self) -> Option<u32> {
        self.core.ssthresh_pkts()
    }
}
