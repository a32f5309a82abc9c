//! BBRv3 (`bbr3`) per draft-ietf-ccwg-bbr: the model-based controller of
//! BBRv1 plus loss- and ECN-aware bounds on the model.
//!
//! Model (draft §4.5): `max_bw` is a windowed max over the last two
//! PROBE_BW cycles; `bw_lo`/`inflight_lo` are short-term lower bounds cut
//! by β = 0.7 in rounds with loss (or ECN marks), `inflight_hi` a long-term
//! upper bound learned when a round's loss rate exceeds 2 % (or its CE rate
//! 50 %). PROBE_BW cycles DOWN → CRUISE → REFILL → UP (§4.3.3); UP grows
//! `inflight_hi` with an exponentially rising slope until loss or ECN says
//! stop. Units: packets, bytes per second of MSS-sized packets (a packet
//! rate; `bbr::BwFilter`), `Duration`.
//!
//! Simplifications, all documented at the code: per-packet `tx_in_flight`
//! and `lost` of the draft are approximated per round (losses in the round
//! against the flight at loss time); ACK-aggregation headroom
//! (`extra_acked`) is not modelled.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::bbr::{
    bdp_pkts, gained_pacing_rate, initial_pacing_rate, probe_rtt_hold, probe_rtt_hold_over,
    refreshes_min_rtt, reported_pacing_rate, send_quantum_pkts, BwFilter, FullPipe, ProbeRttStep,
    RecoveryWindow, RoundCounter,
};
use super::{AckEvent, CcConfig, CongestionController, CoupledView, LossEvent, SentPacket};
use crate::time::Instant;

/// §2.7 / §4.3.1.1: STARTUP pacing gain 4·ln 2 ≈ 2.77, cwnd gain 2.
pub const STARTUP_PACING_GAIN: f64 = 2.77;
pub const STARTUP_CWND_GAIN: f64 = 2.0;
/// §4.3.2: DRAIN pacing gain.
pub const DRAIN_PACING_GAIN: f64 = 0.35;
/// §4.3.3: PROBE_BW gains.
pub const PROBE_DOWN_PACING_GAIN: f64 = 0.9;
pub const PROBE_UP_PACING_GAIN: f64 = 1.25;
pub const DEFAULT_CWND_GAIN: f64 = 2.0;
pub const PROBE_UP_CWND_GAIN: f64 = 2.25;
/// §2.7: loss-rate ceiling per round, multiplicative cut, headroom.
pub const LOSS_THRESH: f64 = 0.02;
pub const BETA: f64 = 0.7;
pub const HEADROOM: f64 = 0.15;
/// ECN: CE-marked fraction of a round above which inflight is too high.
pub const ECN_THRESH: f64 = 0.5;
/// ECN: share of the CE-fraction EWMA cut from inflight_lo per round.
const ECN_FACTOR: f64 = 1.0 / 3.0;
/// ECN: EWMA gain for the CE fraction.
const ECN_ALPHA_GAIN: f64 = 1.0 / 16.0;
pub const MIN_PIPE_CWND_PKTS: u32 = super::bbr::MIN_PIPE_CWND_PKTS;
/// §4.3.1.2: STARTUP also ends after this many loss events in a lossy round.
const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// §4.5.2.2: max_bw covers the last two PROBE_BW cycles.
const MAX_BW_FILTER_CYCLES: u64 = 2;
/// §4.3.4: min RTT window and the (shorter) ProbeRTT scheduling window.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
pub const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// §4.3.4: ProbeRTT holds cwnd at half the BDP.
pub const PROBE_RTT_CWND_GAIN: f64 = 0.5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bbr3State {
    Startup,
    Drain,
    ProbeBwDown,
    ProbeBwCruise,
    ProbeBwRefill,
    ProbeBwUp,
    ProbeRtt,
}

impl Bbr3State {
    pub fn as_str(self) -> &'static str {
        match self {
            Bbr3State::Startup => "startup",
            Bbr3State::Drain => "drain",
            Bbr3State::ProbeBwDown => "probe_bw_down",
            Bbr3State::ProbeBwCruise => "probe_bw_cruise",
            Bbr3State::ProbeBwRefill => "probe_bw_refill",
            Bbr3State::ProbeBwUp => "probe_bw_up",
            Bbr3State::ProbeRtt => "probe_rtt",
        }
    }
    fn is_probe_bw(self) -> bool {
        matches!(
            self,
            Bbr3State::ProbeBwDown
                | Bbr3State::ProbeBwCruise
                | Bbr3State::ProbeBwRefill
                | Bbr3State::ProbeBwUp
        )
    }
}

/// BBRv3.
#[derive(Clone, Debug)]
pub struct Bbr3 {
    mss_bytes: f64,
    state: Bbr3State,
    rng: ChaCha8Rng,

    // Model (§4.5).
    max_bw_filter: BwFilter,
    cycle_count: u64,
    bw_lo: f64,
    inflight_hi: f64,
    inflight_lo: f64,
    /// Max delivery rate and delivered packets seen in the latest round.
    bw_latest: f64,
    inflight_latest: f64,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Instant,

    // Rounds.
    round: RoundCounter,

    // Per-round congestion signals.
    loss_in_round: bool,
    lost_in_round: u32,
    loss_events_in_round: u32,
    delivered_in_round: u64,
    ce_in_round: u32,
    ecn_alpha: f64,

    // STARTUP.
    full_pipe: FullPipe,
    full_bw_reached: bool,

    // PROBE_BW (§4.3.3).
    cycle_stamp: Instant,
    bw_probe_wait: Duration,
    rounds_since_bw_probe: u64,
    probe_up_cnt: f64,
    probe_up_acks: f64,
    probe_up_rounds: u32,
    /// REFILL has run one full round.
    refill_round_start: u64,
    /// draft-ietf-ccwg-bbr `BBR.is_bw_probe_sample`: the acks now arriving
    /// are for data sent while probing bandwidth (UP), so their loss or CE
    /// rate says the probe went too high. Only such samples may cut
    /// `inflight_hi` (HandleLostPacket returns early otherwise), once per
    /// probe.
    bw_probe_sample: bool,
    /// `ACKS_PROBE_STOPPING`: the probe ended (DOWN or PROBE_RTT began);
    /// the next round start ends its samples.
    probe_stopping: bool,

    // PROBE_RTT (§4.3.4).
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    idle_restart: bool,

    pacing_gain: f64,
    cwnd_gain: f64,
    pacing_rate: f64,
    has_seen_rtt: bool,
    /// The window and loss recovery (§4.6.4).
    win: RecoveryWindow,
    delivered: u64,
    last_app_limited: bool,
    /// `CcConfig::bbr_app_limited_probe`.
    app_limited_probe: bool,
}

impl Bbr3 {
    pub fn new(config: &CcConfig) -> Self {
        let mut b = Bbr3 {
            mss_bytes: config.mss_bytes.max(1) as f64,
            state: Bbr3State::Startup,
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            max_bw_filter: BwFilter::new(MAX_BW_FILTER_CYCLES),
            cycle_count: 0,
            bw_lo: f64::INFINITY,
            inflight_hi: f64::INFINITY,
            inflight_lo: f64::INFINITY,
            bw_latest: 0.0,
            inflight_latest: 0.0,
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: Instant::ZERO,
            round: RoundCounter::default(),
            loss_in_round: false,
            lost_in_round: 0,
            loss_events_in_round: 0,
            delivered_in_round: 0,
            ce_in_round: 0,
            ecn_alpha: 0.0,
            full_pipe: FullPipe::new(config.bbr_queue_fills_pipe),
            full_bw_reached: false,
            cycle_stamp: Instant::ZERO,
            bw_probe_wait: Duration::from_secs(2),
            rounds_since_bw_probe: 0,
            probe_up_cnt: f64::INFINITY,
            probe_up_acks: 0.0,
            probe_up_rounds: 0,
            refill_round_start: 0,
            bw_probe_sample: false,
            probe_stopping: false,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            idle_restart: false,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: STARTUP_CWND_GAIN,
            pacing_rate: 0.0,
            has_seen_rtt: false,
            win: RecoveryWindow::new(config),
            delivered: 0,
            last_app_limited: false,
            app_limited_probe: config.bbr_app_limited_probe,
        };
        b.init_pacing_rate(Duration::from_millis(1));
        b
    }

    pub fn bbr_state(&self) -> Bbr3State {
        self.state
    }
    pub fn max_bw_bytes_per_s(&self) -> f64 {
        self.max_bw_filter.max()
    }
    /// §4.5.2.4: the bandwidth the model uses, min(max_bw, bw_lo).
    pub fn bw_bytes_per_s(&self) -> f64 {
        self.max_bw_filter.max().min(self.bw_lo)
    }
    pub fn inflight_hi_pkts(&self) -> Option<f64> {
        self.inflight_hi.is_finite().then_some(self.inflight_hi)
    }
    pub fn inflight_lo_pkts(&self) -> Option<f64> {
        self.inflight_lo.is_finite().then_some(self.inflight_lo)
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }

    /// draft-ietf-ccwg-bbr BBRInitPacingRate.
    fn init_pacing_rate(&mut self, rtt: Duration) {
        self.pacing_rate =
            initial_pacing_rate(STARTUP_PACING_GAIN, self.win.cwnd, self.mss_bytes, rtt);
    }

    /// draft-ietf-ccwg-bbr BBRBDPMultiple (the IW before any RTT sample).
    fn bdp_pkts(&self, bw: f64, gain: f64) -> f64 {
        bdp_pkts(self.min_rtt, bw, gain, self.mss_bytes)
    }

    /// §4.6.4.2 BBRQuantizationBudget.
    fn quantization_budget(&self, inflight: f64) -> f64 {
        let mut w = inflight.max(3.0 * self.send_quantum_pkts() as f64);
        w = w.max(MIN_PIPE_CWND_PKTS as f64);
        if self.state == Bbr3State::ProbeBwUp {
            w += 2.0;
        }
        w
    }

    /// §4.6.4.2 BBRInflight(bw, gain).
    fn inflight_pkts(&self, bw: f64, gain: f64) -> f64 {
        self.quantization_budget(self.bdp_pkts(bw, gain))
    }

    /// §4.5.6 BBRTargetInflight: min(BDP, cwnd).
    fn target_inflight(&self) -> f64 {
        self.bdp_pkts(self.bw_bytes_per_s(), 1.0)
            .min(self.win.cwnd as f64)
    }

    /// §4.3.3.6 BBRInflightWithHeadroom: leave 15 % of inflight_hi free for
    /// cross traffic.
    fn inflight_with_headroom(&self) -> f64 {
        if !self.inflight_hi.is_finite() {
            return f64::INFINITY;
        }
        let headroom = (HEADROOM * self.inflight_hi).max(1.0);
        (self.inflight_hi - headroom).max(MIN_PIPE_CWND_PKTS as f64)
    }

    /// draft-ietf-ccwg-bbr BBRSaveCwnd.
    fn save_cwnd(&mut self) {
        self.win.save(self.state == Bbr3State::ProbeRtt);
    }

    fn start_round(&mut self) {
        self.round.start_new(self.delivered);
    }

    fn reset_lower_bounds(&mut self) {
        self.bw_lo = f64::INFINITY;
        self.inflight_lo = f64::INFINITY;
    }

    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.lost_in_round = 0;
        self.loss_events_in_round = 0;
        self.ce_in_round = 0;
        self.bw_latest = 0.0;
        self.inflight_latest = 0.0;
    }

    // --- PROBE_BW phases (§4.3.3) ----------------------------------------

    fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_stopping = true;
        self.probe_up_cnt = f64::INFINITY;
        // §4.3.3.5 BBRPickProbeWait: 2–3 s, and a Reno-coexistence round
        // count, before the next probe.
        self.rounds_since_bw_probe = self.rng.gen_range(0..2u64);
        self.bw_probe_wait = Duration::from_millis(2000 + self.rng.gen_range(0..1000u64));
        self.cycle_stamp = now;
        self.start_round();
        self.state = Bbr3State::ProbeBwDown;
    }

    fn start_probe_bw_cruise(&mut self) {
        self.state = Bbr3State::ProbeBwCruise;
    }

    fn start_probe_bw_refill(&mut self) {
        self.reset_lower_bounds();
        self.probe_up_rounds = 0;
        self.probe_up_acks = 0.0;
        self.start_round();
        self.refill_round_start = self.round.count;
        self.state = Bbr3State::ProbeBwRefill;
    }

    fn start_probe_bw_up(&mut self, now: Instant) {
        self.start_round();
        self.reset_congestion_signals();
        self.cycle_stamp = now;
        self.state = Bbr3State::ProbeBwUp;
        self.raise_inflight_hi_slope();
    }

    /// §4.3.3.4 BBRRaiseInflightHiSlope: 1, 2, 4, … packets of growth per
    /// round while probing up.
    fn raise_inflight_hi_slope(&mut self) {
        let growth_this_round = (1u64 << self.probe_up_rounds.min(30)) as f64;
        self.probe_up_rounds = (self.probe_up_rounds + 1).min(30);
        self.probe_up_cnt = (self.win.cwnd as f64 / growth_this_round).max(1.0);
    }

    /// §4.3.3.4 BBRProbeInflightHiUpward.
    fn probe_inflight_hi_upward(&mut self, acked: u32, cwnd_limited: bool) {
        if !cwnd_limited
            || !self.inflight_hi.is_finite()
            || (self.win.cwnd as f64) < self.inflight_hi
        {
            return;
        }
        self.probe_up_acks += acked as f64;
        if self.probe_up_acks >= self.probe_up_cnt {
            let delta = (self.probe_up_acks / self.probe_up_cnt).floor();
            self.probe_up_acks -= delta * self.probe_up_cnt;
            self.inflight_hi += delta;
        }
        if self.round.start {
            self.raise_inflight_hi_slope();
        }
    }

    fn has_elapsed_in_phase(&self, now: Instant, d: Duration) -> bool {
        now > self.cycle_stamp + d
    }

    /// §4.3.3.5 BBRIsRenoCoexistenceProbeTime: probe at least as often as
    /// a Reno flow would refill a BDP (capped at 63 rounds).
    fn is_reno_coexistence_probe_time(&self) -> bool {
        let rounds = self.target_inflight().min(63.0);
        self.rounds_since_bw_probe as f64 >= rounds
    }

    fn check_time_to_probe_bw(&mut self, now: Instant) -> bool {
        if self.has_elapsed_in_phase(now, self.bw_probe_wait)
            || self.is_reno_coexistence_probe_time()
        {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    fn check_time_to_cruise(&self, in_flight: f64) -> bool {
        if in_flight > self.inflight_with_headroom() {
            return false;
        }
        in_flight <= self.inflight_pkts(self.max_bw_filter.max(), 1.0)
    }

    fn update_probe_bw_cycle_phase(&mut self, now: Instant, ack: &AckEvent) {
        if !self.full_bw_reached || !self.state.is_probe_bw() {
            return;
        }
        let cwnd_limited = ack.prior_in_flight_pkts >= self.win.cwnd;
        self.probe_inflight_hi_upward(ack.acked_pkts, cwnd_limited);
        let in_flight = ack.in_flight_pkts as f64;
        match self.state {
            Bbr3State::ProbeBwDown => {
                if self.check_time_to_probe_bw(now) {
                    return;
                }
                if self.check_time_to_cruise(in_flight) {
                    self.start_probe_bw_cruise();
                }
            }
            Bbr3State::ProbeBwCruise => {
                self.check_time_to_probe_bw(now);
            }
            // One round of refilling the pipe at gain 1, then probe.
            Bbr3State::ProbeBwRefill
                if self.round.start && self.round.count > self.refill_round_start =>
            {
                self.bw_probe_sample = true;
                self.start_probe_bw_up(now);
            }
            Bbr3State::ProbeBwUp => {
                let rtt = self.min_rtt.unwrap_or(Duration::ZERO);
                if self.has_elapsed_in_phase(now, rtt)
                    && in_flight
                        >= self.inflight_pkts(self.max_bw_filter.max(), PROBE_UP_PACING_GAIN)
                {
                    self.advance_max_bw_filter();
                    self.start_probe_bw_down(now);
                }
            }
            _ => {}
        }
    }

    /// §4.5.2.2: max_bw forgets samples older than two probe cycles.
    fn advance_max_bw_filter(&mut self) {
        self.cycle_count += 1;
        self.max_bw_filter.expire(self.cycle_count);
    }

    // --- congestion signals (§4.5.6–4.5.10) --------------------------------

    /// §4.5.10.2 IsInflightTooHigh, per round: losses above 2 % of the
    /// flight, or CE marks on more than half of the round's deliveries.
    ///
    /// The loss rate is judged over at least `1 / LOSS_THRESH` = 50 packets:
    /// a rate above 2 % cannot be told from fewer. Over a flight of N < 50
    /// packets one loss is already 1/N > 2 %, so a single random loss (the
    /// `lossy` mix: 0.3 % on a 28-packet BDP, one lost packet in about one
    /// round of twelve) would read as "inflight too high" in nearly every
    /// probe and pin inflight_hi at 0.7 × BDP, the cruise window at 0.85 of
    /// that — 60 % of the path. A queue overflow while probing (gain 1.25)
    /// drops a burst, so it still ends the probe.
    fn inflight_too_high(&self, in_flight: f64) -> bool {
        let judged_over = in_flight.max(1.0 / LOSS_THRESH);
        let lossy = self.lost_in_round > 0 && self.lost_in_round as f64 > LOSS_THRESH * judged_over;
        let marked = self.ce_in_round > 0
            && self.delivered_in_round > 0
            && self.ce_in_round as f64 > ECN_THRESH * self.delivered_in_round as f64;
        lossy || marked
    }

    /// §4.5.10.2 BBRHandleInflightTooHigh.
    fn handle_inflight_too_high(&mut self, now: Instant, tx_in_flight: f64, app_limited: bool) {
        // Only react once per probe.
        self.bw_probe_sample = false;
        if !app_limited {
            // Whole packets: the window is an integer bounded by inflight_hi
            // (`bound_cwnd`), and BBRProbeInflightHiUpward grows inflight_hi
            // only once cwnd ≥ inflight_hi. A fractional bound (β × BDP,
            // e.g. 19.6) capped cwnd at 19 < 19.6, so inflight_hi never grew
            // again and the path stayed at 0.7 × BDP for the rest of the
            // connection (`lossy` mix, path a: 17 of 30 Mbit/s).
            self.inflight_hi = tx_in_flight.max(self.target_inflight() * BETA).ceil();
        }
        if self.state == Bbr3State::ProbeBwUp {
            self.advance_max_bw_filter();
            self.start_probe_bw_down(now);
        }
    }

    /// §4.3.1.3 BBRCheckStartupHighLoss (and its ECN analogue): too much
    /// loss or CE marking in STARTUP means the pipe is full; inflight_hi
    /// starts at max(BDP, the latest round's delivery), then DRAIN.
    fn exit_startup_on_congestion(&mut self) {
        self.full_bw_reached = true;
        self.inflight_hi = self
            .bdp_pkts(self.max_bw_filter.max(), 1.0)
            .max(self.inflight_latest)
            .max(MIN_PIPE_CWND_PKTS as f64);
        self.state = Bbr3State::Drain;
    }

    fn is_probing_bw(&self) -> bool {
        matches!(
            self.state,
            Bbr3State::Startup | Bbr3State::ProbeBwRefill | Bbr3State::ProbeBwUp
        )
    }

    /// At the end of a round: §4.5.10.3 BBRAdaptLowerBoundsFromCongestion
    /// (β cut of bw_lo / inflight_lo after a lossy round) and the ECN cut of
    /// inflight_lo by ecn_alpha/3.
    fn end_round_signals(&mut self) {
        if self.delivered_in_round > 0 {
            let ce_frac = self.ce_in_round as f64 / self.delivered_in_round as f64;
            self.ecn_alpha += ECN_ALPHA_GAIN * (ce_frac.min(1.0) - self.ecn_alpha);
        }
        if !self.is_probing_bw() {
            if self.loss_in_round {
                if !self.bw_lo.is_finite() {
                    self.bw_lo = self.max_bw_filter.max();
                }
                if !self.inflight_lo.is_finite() {
                    self.inflight_lo = self.win.cwnd as f64;
                }
                self.bw_lo = self.bw_latest.max(BETA * self.bw_lo);
                self.inflight_lo = self.inflight_latest.max(BETA * self.inflight_lo);
            }
            if self.ce_in_round > 0 {
                let base = if self.inflight_lo.is_finite() {
                    self.inflight_lo
                } else {
                    self.win.cwnd as f64
                };
                self.inflight_lo = base * (1.0 - ECN_FACTOR * self.ecn_alpha);
            }
        }
        self.loss_in_round = false;
        self.lost_in_round = 0;
        self.loss_events_in_round = 0;
        self.ce_in_round = 0;
        self.delivered_in_round = 0;
    }

    // --- per-ack model update ---------------------------------------------

    fn update_round_and_bw(&mut self, ack: &AckEvent) {
        let Some(rs) = self.round.update(ack, self.delivered) else {
            return;
        };
        if self.round.start {
            self.rounds_since_bw_probe += 1;
            self.win.packet_conservation = false;
        }
        // A packet rate × MSS, as BBRv1 (`bbr::BwFilter`): the window is in
        // packets, so the BDP must count packets (draft §4.5.2 measures
        // bytes because its window is in bytes).
        let bw = self
            .max_bw_filter
            .update(self.cycle_count, &rs, self.mss_bytes);
        self.bw_latest = self.bw_latest.max(bw);
        self.inflight_latest = self.inflight_latest.max(rs.delivered_pkts as f64);
    }

    fn check_startup_done(&mut self, ack: &AckEvent) {
        if self.state != Bbr3State::Startup {
            return;
        }
        let max = self.max_bw_filter.max();
        if !self.full_bw_reached && self.full_pipe.check(ack, self.round.start, max) {
            self.full_bw_reached = true;
        }
        if self.full_bw_reached {
            self.state = Bbr3State::Drain;
        }
    }

    fn check_drain(&mut self, now: Instant, ack: &AckEvent) {
        if self.state == Bbr3State::Drain
            && (ack.in_flight_pkts as f64) <= self.inflight_pkts(self.bw_bytes_per_s(), 1.0)
        {
            self.start_probe_bw_down(now);
        }
    }

    fn update_min_rtt(&mut self, now: Instant, ack: &AckEvent) {
        // §4.3.4: ProbeRTT is scheduled by a 5 s window; min_rtt keeps 10 s.
        let probe_expired = self.probe_rtt_min_delay.is_some()
            && now > self.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
        // An application-limited sample probes for free, as in CCID5
        // (`refreshes_min_rtt`): once the window expired it replaces the
        // minimum without halving the window for ProbeRTT.
        let free_probe = self.app_limited_probe && ack.rate.is_some_and(|r| r.is_app_limited);
        let mut probed = false;
        if let Some(rtt) = ack.rtt {
            if refreshes_min_rtt(self.probe_rtt_min_delay, rtt, probe_expired, free_probe) {
                self.probe_rtt_min_delay = Some(rtt);
                self.probe_rtt_min_stamp = now;
                probed = free_probe;
            }
        }
        let min_expired = self.min_rtt.is_some() && now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if let Some(d) = self.probe_rtt_min_delay {
            if self.min_rtt.is_none_or(|m| d < m) || min_expired {
                self.min_rtt = Some(d);
                self.min_rtt_stamp = self.probe_rtt_min_stamp;
            }
        }
        if probe_expired && !probed && !self.idle_restart && self.state != Bbr3State::ProbeRtt {
            self.state = Bbr3State::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.probe_stopping = true;
            self.start_round();
        }
        if self.state == Bbr3State::ProbeRtt {
            let at_target = ack.in_flight_pkts as f64 <= self.probe_rtt_cwnd();
            match probe_rtt_hold(
                &mut self.probe_rtt_done_stamp,
                &mut self.probe_rtt_round_done,
                now,
                at_target,
                self.round.start,
            ) {
                ProbeRttStep::HoldStarted => self.start_round(),
                ProbeRttStep::Done => self.exit_probe_rtt(now),
                ProbeRttStep::Wait => {}
            }
        }
        if ack.acked_pkts > 0 {
            self.idle_restart = false;
        }
    }

    /// §4.3.4.4 BBRProbeRTTCwnd: half a BDP, at least 4 packets.
    fn probe_rtt_cwnd(&self) -> f64 {
        self.bdp_pkts(self.bw_bytes_per_s(), PROBE_RTT_CWND_GAIN)
            .max(MIN_PIPE_CWND_PKTS as f64)
    }

    /// §4.3.4.5 BBRExitProbeRTT.
    fn exit_probe_rtt(&mut self, now: Instant) {
        self.reset_lower_bounds();
        self.probe_rtt_min_stamp = now;
        self.win.restore();
        if self.full_bw_reached {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.state = Bbr3State::Startup;
        }
    }

    fn update_gains(&mut self) {
        let (p, c) = match self.state {
            Bbr3State::Startup => (STARTUP_PACING_GAIN, STARTUP_CWND_GAIN),
            Bbr3State::Drain => (DRAIN_PACING_GAIN, STARTUP_CWND_GAIN),
            Bbr3State::ProbeBwDown => (PROBE_DOWN_PACING_GAIN, DEFAULT_CWND_GAIN),
            Bbr3State::ProbeBwCruise | Bbr3State::ProbeBwRefill => (1.0, DEFAULT_CWND_GAIN),
            Bbr3State::ProbeBwUp => (PROBE_UP_PACING_GAIN, PROBE_UP_CWND_GAIN),
            Bbr3State::ProbeRtt => (1.0, PROBE_RTT_CWND_GAIN),
        };
        self.pacing_gain = p;
        self.cwnd_gain = c;
    }

    /// draft-ietf-ccwg-bbr BBRSetPacingRateWithGain.
    fn set_pacing_rate(&mut self, gain: f64) {
        // In bytes per second of the packets actually sent (`BwFilter`).
        let bw = self.max_bw_filter.pacing_bw(self.bw_bytes_per_s());
        if let Some(rate) = gained_pacing_rate(self.pacing_rate, bw, gain, self.full_bw_reached) {
            self.pacing_rate = rate;
        }
    }

    /// §4.6.4.4–4.6.4.6 BBRSetCwnd with the ProbeRTT and model bounds.
    fn set_cwnd(&mut self, ack: &AckEvent) {
        let max_inflight = self.inflight_pkts(self.bw_bytes_per_s(), self.cwnd_gain);
        self.win.grow(
            ack.acked_pkts,
            ack.in_flight_pkts,
            max_inflight,
            self.full_bw_reached,
            self.delivered,
        );
        self.bound_cwnd();
    }

    fn bound_cwnd(&mut self) {
        let mut cap = f64::INFINITY;
        if self.state.is_probe_bw() && self.state != Bbr3State::ProbeBwCruise {
            cap = self.inflight_hi;
        } else if matches!(self.state, Bbr3State::ProbeRtt | Bbr3State::ProbeBwCruise) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo).max(MIN_PIPE_CWND_PKTS as f64);
        if self.state == Bbr3State::ProbeRtt {
            cap = cap.min(self.probe_rtt_cwnd());
        }
        if cap.is_finite() {
            self.win.cwnd = self.win.cwnd.min(cap as u32);
        }
        self.win.clamp();
    }
}

impl CongestionController for Bbr3 {
    fn name(&self) -> &'static str {
        "bbr3"
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        if pkt.in_flight_pkts <= 1 && self.last_app_limited {
            // §4.4.2: restarting from idle — pace at the estimated rate.
            self.idle_restart = true;
            if self.state.is_probe_bw() {
                self.set_pacing_rate(1.0);
            } else if self.state == Bbr3State::ProbeRtt
                && probe_rtt_hold_over(self.probe_rtt_done_stamp, self.probe_rtt_round_done, now)
            {
                self.exit_probe_rtt(now);
            }
        }
        self.last_app_limited = pkt.app_limited;
    }

    fn reads_coupled_view(&self) -> bool {
        false
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, _paths: CoupledView<'_>) {
        self.delivered = ack.delivered_pkts;
        if !self.has_seen_rtt && !ack.srtt.is_zero() {
            self.has_seen_rtt = true;
            self.init_pacing_rate(ack.srtt);
        }
        self.win.handle_ack(ack.largest_acked_sent_time);
        self.update_round_and_bw(ack);
        if self.round.start {
            self.end_round_signals();
            // AdaptLongTermModel: a round after the probe stopped, the
            // acks are no longer for data the probe sent.
            if self.probe_stopping {
                self.probe_stopping = false;
                self.bw_probe_sample = false;
            }
        }
        self.delivered_in_round += ack.acked_pkts as u64;
        self.check_startup_done(ack);
        self.check_drain(now, ack);
        self.update_probe_bw_cycle_phase(now, ack);
        self.update_min_rtt(now, ack);
        self.update_gains();
        self.set_pacing_rate(self.pacing_gain);
        self.set_cwnd(ack);
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
        self.delivered = self.delivered.max(loss.delivered_pkts);
        self.loss_in_round = true;
        self.lost_in_round = self.lost_in_round.saturating_add(loss.lost_pkts);
        self.loss_events_in_round += 1;
        // The flight the lost packets shared (draft: rs.tx_in_flight).
        let tx_in_flight = loss.in_flight_pkts as f64 + loss.lost_pkts as f64;
        if self.inflight_too_high(tx_in_flight) {
            if self.state == Bbr3State::Startup
                && self.loss_events_in_round >= STARTUP_FULL_LOSS_COUNT
            {
                self.exit_startup_on_congestion();
            } else if self.state != Bbr3State::Startup && self.bw_probe_sample {
                // draft-ietf-ccwg-bbr HandleLostPacket: a loss outside a
                // bandwidth probe (CRUISE, DOWN, REFILL, PROBE_RTT) is not
                // evidence that the probe's flight was too high, and cutting
                // inflight_hi for it would cap the window at 0.85 × that
                // flight until the next probe. Random loss on a path whose
                // flight is under 50 packets is over 2 % of a round at its
                // first drop, so this cut fired at nearly every loss. Those
                // rounds still cut the short-term bounds (bw_lo,
                // inflight_lo; `end_round_signals`).
                self.handle_inflight_too_high(now, tx_in_flight, false);
            }
        }
        // §4.6.4.3 packet conservation on entering recovery.
        let in_probe_rtt = self.state == Bbr3State::ProbeRtt;
        if self
            .win
            .handle_loss(now, loss.lost_pkts, loss.in_flight_pkts, in_probe_rtt)
        {
            self.start_round();
        }
        self.update_gains();
        self.bound_cwnd();
    }

    fn on_rto(&mut self, now: Instant) {
        // draft-ietf-ccwg-bbr BBROnEnterRTO ("Modulating cwnd in Loss
        // Recovery"): save the window, count the round as lossy, restart
        // full-pipe detection, and fall to the transport's 1-packet loss
        // window (RFC 5681 §3.1).
        self.win.handle_rto(now, self.state == Bbr3State::ProbeRtt);
        self.loss_in_round = true;
        self.full_pipe.restart();
    }

    /// PROBE_RTT's small flight is not the path's capacity: its samples
    /// are marked application limited (draft-ietf-ccwg-bbr BBRHandleProbeRTT (MarkConnectionAppLimited)).
    fn marks_app_limited(&self) -> bool {
        self.state == Bbr3State::ProbeRtt
    }

    /// tcp_bbr.c `bbr_init_pacing_rate_from_rtt`: with the handshake's RTT
    /// the initial window is paced at high_gain × IW / RTT (spread over
    /// RTT/2.885) instead of the 1 ms fallback, so the rate samples of the
    /// next rounds grow smoothly.
    fn on_initial_rtt(&mut self, _now: Instant, rtt: Duration) {
        if !self.has_seen_rtt && !rtt.is_zero() {
            self.has_seen_rtt = true;
            self.init_pacing_rate(rtt);
        }
    }

    /// ECN-aware (draft-ietf-ccwg-bbr, ECN): CE marks count per round; a
    /// round with more than half its deliveries marked means inflight is
    /// too high, and marks cut inflight_lo at the round end.
    fn on_ecn(&mut self, now: Instant, ce_pkts: u32, ack: &AckEvent, _paths: CoupledView<'_>) {
        if ce_pkts == 0 {
            return;
        }
        self.ce_in_round = self.ce_in_round.saturating_add(ce_pkts);
        let tx_in_flight = ack.prior_in_flight_pkts as f64;
        if self.inflight_too_high(tx_in_flight) {
            if self.state == Bbr3State::Startup {
                self.exit_startup_on_congestion();
            } else if self.bw_probe_sample {
                // As for loss (`on_loss`): only a probe's samples.
                let app_limited = ack.rate.is_some_and(|r| r.is_app_limited);
                self.handle_inflight_too_high(now, tx_in_flight, app_limited);
            }
            self.update_gains();
            self.bound_cwnd();
        }
    }

    fn cwnd_pkts(&self) -> u32 {
        self.win.cwnd
    }

    fn pacing_rate_bytes_per_s(&self) -> Option<u64> {
        Some(reported_pacing_rate(self.pacing_rate))
    }

    /// §4.6.3 BBRSetSendQuantum: ~1 ms at the pacing rate, 1–2 packets
    /// minimum, 64 KB maximum.
    fn send_quantum_pkts(&self) -> u32 {
        send_quantum_pkts(self.pacing_rate, self.mss_bytes)
    }

    fn state(&self) -> &'static str {
        self.state.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::RateSample;

    const MSS: u32 = 1500;

    /// A BBRv3 in PROBE_BW with a 25-packet BDP (10 ms, 2 500 packets/s)
    /// and a 25-packet window.
    fn probing(now: Instant) -> Bbr3 {
        let mut b = Bbr3::new(&CcConfig {
            mss_bytes: MSS,
            ..CcConfig::default()
        });
        b.full_bw_reached = true;
        b.min_rtt = Some(Duration::from_millis(10));
        b.probe_rtt_min_delay = b.min_rtt;
        b.probe_rtt_min_stamp = now;
        b.min_rtt_stamp = now;
        let rs = RateSample {
            delivered_pkts: 25,
            delivered_bytes: 25 * u64::from(MSS),
            interval: Duration::from_millis(10),
            prior_delivered_pkts: 0,
            is_app_limited: false,
            rtt: Duration::from_millis(10),
        };
        b.max_bw_filter.update(0, &rs, f64::from(MSS));
        b.win.cwnd = 25;
        b.start_probe_bw_up(now);
        b
    }

    /// The acknowledgement of one packet of a window-limited flight.
    fn ack(b: &Bbr3, delivered: u64) -> AckEvent {
        let cwnd = b.cwnd_pkts();
        AckEvent {
            acked_pkts: 1,
            acked_bytes: u64::from(MSS),
            prior_in_flight_pkts: cwnd,
            in_flight_pkts: cwnd - 1,
            rtt: Some(Duration::from_millis(10)),
            srtt: Duration::from_millis(10),
            min_rtt: Duration::from_millis(10),
            rate: Some(RateSample {
                delivered_pkts: u64::from(cwnd),
                delivered_bytes: u64::from(cwnd) * u64::from(MSS),
                interval: Duration::from_millis(10),
                prior_delivered_pkts: delivered.saturating_sub(u64::from(cwnd)),
                is_app_limited: false,
                rtt: Duration::from_millis(10),
            }),
            delivered_pkts: delivered,
            lost_pkts_total: 0,
            largest_acked_sent_time: Instant::ZERO,
        }
    }

    /// inflight_hi learnt from a lossy probe of a small (application-
    /// limited) flight is β × min(BDP, cwnd) = 0.7 × 25 = 17.5 packets. It
    /// must be a whole number: the window is an integer capped by it, and
    /// BBRProbeInflightHiUpward (draft-ietf-ccwg-bbr §4.3.3.4) grows it only
    /// once cwnd ≥ inflight_hi. With 17.5 the window stopped at 17 and
    /// inflight_hi never grew again.
    #[test]
    fn inflight_hi_learnt_below_the_bdp_grows_again_when_the_window_is_full() {
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let mut b = probing(t0);
        b.handle_inflight_too_high(t0, 10.0, false);
        let learnt = b.inflight_hi_pkts().unwrap();
        assert!((17.5..=18.0).contains(&learnt), "β × 25 = {learnt}");
        // Probe up again with a window-limited sender.
        b.start_probe_bw_up(t0);
        b.bw_probe_sample = false;
        let mut now = t0;
        let mut delivered = 1000;
        for _ in 0..400 {
            now += Duration::from_micros(400);
            delivered += 1;
            let ev = ack(&b, delivered);
            b.on_ack(now, &ev, &[]);
        }
        let grown = b.inflight_hi_pkts().unwrap();
        assert!(
            grown >= learnt + 8.0,
            "inflight_hi {learnt} -> {grown} after 16 window-limited rounds"
        );
        assert!(b.cwnd_pkts() as f64 >= grown - 1.0);
        assert_eq!(learnt, 18.0, "β × 25 in whole packets");
    }
}
