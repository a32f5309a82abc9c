//! CCID5 = BBRv1 (draft-cardwell-iccrg-bbr-congestion-control-00, behaving
//! as Linux `tcp_bbr.c`), over DCCP as draft-romo-iccrg-ccid5 profiles it.
//!
//! Units: windows in packets, bandwidth in bytes per second of MSS-sized
//! packets (a packet rate; see `BwFilter`), times as `Duration`. Round trips are counted with the delivery-rate sample's
//! `prior_delivered_pkts` (draft §4.1.1.3), so the transport must feed the
//! [`super::DeliveryRateEstimator`] samples in every [`AckEvent`].
//!
//! CCID5 note (draft-romo-iccrg-ccid5 §4): acks are exactly those of CCID2
//! (Ack Vector, Ack Ratio); since PROBE_RTT holds cwnd at 4 packets the
//! transport must keep the Ack Ratio ≤ ceil(cwnd/2) = 2 there, or PROBE_RTT
//! starves of acks. The conn layer applies that rule to every controller.

use std::collections::VecDeque;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    AckEvent, CcConfig, CongestionController, CoupledView, LossEvent, RateSample, SentPacket,
};
use crate::time::Instant;

/// §4.2.3.2 / tcp_bbr.c `bbr_high_gain`: 2/ln 2, the smallest gain that
/// doubles the sending rate every round.
pub const HIGH_GAIN: f64 = 2.885;
/// §4.2.3.3: the inverse of the STARTUP gain drains the queue in one round.
pub const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// §4.2.3.4: cwnd gain in PROBE_BW.
pub const CWND_GAIN: f64 = 2.0;
/// §4.2.3.4: the eight-phase PROBE_BW pacing-gain cycle.
pub const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// §4.1.1.4: the max-bandwidth filter window, in rounds.
pub const BW_FILTER_ROUNDS: u64 = 10;
/// §4.1.2.3: the min-RTT filter window.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// §4.2.3.5: time spent in PROBE_RTT at the minimum window.
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// §4.2.3.5 / `bbr_cwnd_min_target`: the minimum window, packets.
pub const MIN_PIPE_CWND_PKTS: u32 = 4;
/// §4.2.3.2: full pipe = bandwidth grew < 25 % for three rounds.
const FULL_BW_THRESH: f64 = 1.25;
const FULL_BW_COUNT: u32 = 3;
/// tcp_bbr.c pacing margin: pace 1 % below the estimate to avoid a queue.
const PACING_MARGIN: f64 = 0.01;
/// Initial window when none is configured (tcp_bbr.c `TCP_INIT_CWND`).
pub(crate) const DEFAULT_IW_PKTS: u32 = 10;
/// ACK aggregation (tcp_bbr.c `bbr_update_ack_aggregation`): the extra
/// window that lets a sender keep sending while acks arrive in bursts
/// (Ack Ratio > 1, Wi-Fi/cellular aggregation) is the max excess of acked
/// over expected data in an "epoch", kept for 5–10 rounds, capped at 100 ms
/// of data and at cwnd, and used only after the pipe is full.
const EXTRA_ACKED_WIN_ROUNDS: u32 = 5;
const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);
const ACK_EPOCH_RESET_PKTS: f64 = (1 << 20) as f64;

/// Long-term ("policer") bandwidth detection, tcp_bbr.c `bbr_lt_bw_sampling`:
/// intervals of 4..16 rounds that end in loss with a loss rate ≥ 20 %; two
/// consecutive such intervals with bandwidth within 1/8 (or 4 kbit/s) mean a
/// token-bucket policer, whose rate is then used for 48 rounds.
const LT_INTERVAL_MIN_ROUNDS: u32 = 4;
const LT_LOSS_THRESH: f64 = 50.0 / 256.0;
const LT_BW_RATIO: f64 = 1.0 / 8.0;
const LT_BW_DIFF_BYTES_PER_S: f64 = 4000.0 / 8.0;
const LT_BW_MAX_ROUNDS: u32 = 48;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

impl BbrMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BbrMode::Startup => "startup",
            BbrMode::Drain => "drain",
            BbrMode::ProbeBw => "probe_bw",
            BbrMode::ProbeRtt => "probe_rtt",
        }
    }
}

/// Windowed maximum over the last `window` rounds (exact, bounded to one
/// entry per round by keeping only a decreasing staircase).
#[derive(Clone, Debug)]
pub(crate) struct WindowedMax {
    window: u64,
    samples: VecDeque<(u64, f64)>,
}

impl WindowedMax {
    pub fn new(window: u64) -> Self {
        WindowedMax {
            window,
            samples: VecDeque::new(),
        }
    }

    pub fn update(&mut self, round: u64, value: f64) {
        if !value.is_finite() {
            return;
        }
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        if self.samples.back().is_none_or(|&(r, _)| r != round) {
            self.samples.push_back((round, value));
        }
        self.expire(round);
    }

    pub fn expire(&mut self, round: u64) {
        while self
            .samples
            .front()
            .is_some_and(|&(r, _)| r + self.window <= round)
        {
            self.samples.pop_front();
        }
    }

    pub fn max(&self) -> f64 {
        self.samples.front().map_or(0.0, |&(_, v)| v)
    }
}

// --- model arithmetic shared with BBRv3 (`bbr3.rs`) -----------------------

/// The bandwidth model's max filter, in two units. The window is in packets
/// (CCID2's Ack Vector accounting, RFC 4341 §5, which CCID5 keeps), so the
/// BDP must come from a *packet* rate, as in tcp_bbr.c: `bbr_update_bw`
/// measures `rs->delivered` packets per interval and `bbr_bdp` is
/// `bw × min_rtt` in packets. A byte rate divided by the MSS instead
/// counts a path of small packets — a tunnel subflow carrying the inner
/// flows' acks, 80 bytes each — as a fraction of a packet per round trip:
/// its window stays at the quantization floor (6–8 packets), its samples
/// are window-limited rather than application-limited so the estimate never
/// rises, and the inner sender stalls for its acks while the tunnel's send
/// queue refuses them. The packet rate is kept scaled by the MSS ("bytes
/// per second of MSS-sized packets"), so with full-sized packets it is the
/// byte rate and the model arithmetic ([`bdp_pkts`]) is unchanged.
///
/// The pacer spends real bytes, and tunnel packets are often smaller than
/// the MSS: pacing at packets × MSS (tcp_bbr.c `bbr_rate_bytes_per_sec`,
/// harmless for TCP's full-sized segments) would overshoot the path by the
/// ratio MSS / packet size. So the filter also keeps the byte rate, and the
/// pacing rate is the model bandwidth scaled by byte rate / packet rate
/// ([`BwFilter::pacing_bw`]), the mean packet size of the same samples.
#[derive(Clone, Debug)]
pub(crate) struct BwFilter {
    pkts: WindowedMax,
    bytes: WindowedMax,
}

impl BwFilter {
    pub fn new(window: u64) -> Self {
        BwFilter {
            pkts: WindowedMax::new(window),
            bytes: WindowedMax::new(window),
        }
    }

    /// One delivery-rate sample at filter time `key` (a round or a
    /// cycle). An application-limited sample only counts when it raises
    /// the estimate (draft-cardwell-iccrg-bbr §4.1.1.5; draft-ietf-ccwg-bbr
    /// §4.5.2.3): while app limited the filter is frozen, old maximum
    /// included. Returns the sample in model units.
    pub fn update(&mut self, key: u64, rs: &RateSample, mss_bytes: f64) -> f64 {
        let bw = rs.delivery_rate_pkts_per_s() * mss_bytes;
        let byte_bw = rs.delivery_rate_bytes_per_s();
        if !rs.is_app_limited || bw >= self.pkts.max() {
            self.pkts.update(key, bw);
        }
        if !rs.is_app_limited || byte_bw >= self.bytes.max() {
            self.bytes.update(key, byte_bw);
        }
        bw
    }

    pub fn expire(&mut self, key: u64) {
        self.pkts.expire(key);
        self.bytes.expire(key);
    }

    /// The max packet rate × MSS: what the window is sized from.
    pub fn max(&self) -> f64 {
        self.pkts.max()
    }

    /// `model_bw` (a packet rate × MSS, possibly bounded below the filter's
    /// max) as bytes per second of the packets actually sent: scaled by the
    /// byte rate over the packet rate of the filter's maxima. Unscaled
    /// before any sample.
    pub fn pacing_bw(&self, model_bw: f64) -> f64 {
        let (pkts, bytes) = (self.pkts.max(), self.bytes.max());
        if pkts > 0.0 && bytes > 0.0 {
            model_bw * (bytes / pkts)
        } else {
            model_bw
        }
    }
}

/// Initial pacing rate, bytes/s: `gain × cwnd × mss / rtt` (draft §4.2.1
/// BBRInitPacingRate; tcp_bbr.c `bbr_init_pacing_rate_from_rtt`).
pub(crate) fn initial_pacing_rate(gain: f64, cwnd_pkts: u32, mss_bytes: f64, rtt: Duration) -> f64 {
    let rtt = rtt.as_secs_f64().max(1e-6);
    gain * f64::from(cwnd_pkts) * mss_bytes / rtt
}

/// BDP × gain in packets (draft §4.2.3.2 BBRInflight; BBRv3's
/// BBRBDPMultiple); the default IW before any RTT sample.
pub(crate) fn bdp_pkts(min_rtt: Option<Duration>, bw: f64, gain: f64, mss_bytes: f64) -> f64 {
    match min_rtt {
        None => f64::from(DEFAULT_IW_PKTS),
        Some(rtt) => (bw * rtt.as_secs_f64() * gain / mss_bytes).ceil(),
    }
}

/// The new pacing rate for `gain × bw`, paced `PACING_MARGIN` below the
/// estimate, or `None` to keep the current one: before the pipe is known
/// full the rate is never lowered, so a low early sample cannot throttle
/// STARTUP (draft §4.2.1 BBRSetPacingRateWithGain).
pub(crate) fn gained_pacing_rate(
    current: f64,
    bw: f64,
    gain: f64,
    full_bw_reached: bool,
) -> Option<f64> {
    if bw <= 0.0 || !bw.is_finite() {
        return None;
    }
    let rate = gain * bw * (1.0 - PACING_MARGIN);
    (full_bw_reached || rate > current).then_some(rate)
}

/// Pacing rate as reported to the transport: whole bytes/s, at least 1.
pub(crate) fn reported_pacing_rate(pacing_rate: f64) -> u64 {
    (pacing_rate.min(u64::MAX as f64 / 2.0) as u64).max(1)
}

/// tcp_bbr.c `bbr_tso_segs_goal` / BBRv3 BBRSetSendQuantum: about
/// 1 ms of data at the pacing rate, between 2 packets (1 below 1.2 Mbit/s)
/// and 64 KB.
pub(crate) fn send_quantum_pkts(pacing_rate: f64, mss_bytes: f64) -> u32 {
    let min_segs = if pacing_rate < 1.2e6 / 8.0 { 1 } else { 2 };
    let bytes = (pacing_rate * 1e-3).min(65536.0);
    let max_segs = ((65536.0 / mss_bytes) as u32).max(min_segs);
    ((bytes / mss_bytes) as u32).clamp(min_segs, max_segs)
}

/// draft §4.2.3.6 BBRSaveCwnd: remember the window to restore after
/// recovery or PROBE_RTT; while already in either, keep the larger one.
pub(crate) fn saved_cwnd(prior_cwnd: u32, cwnd: u32, in_recovery_or_probe_rtt: bool) -> u32 {
    if in_recovery_or_probe_rtt {
        prior_cwnd.max(cwnd)
    } else {
        cwnd
    }
}

/// The min-RTT filter update shared by BBRv1 and BBRv3: whether the
/// sample `rtt` replaces the estimate `min` (`expired`: its window ran
/// out). `free_probe` (`CcConfig::bbr_app_limited_probe` and an
/// application-limited sample): the sender did not fill the pipe, so
/// there is no self-made queue for PROBE_RTT to drain and the sample is
/// what PROBE_RTT would measure; it then re-confirms an equal minimum (the
/// draft's `<=` in BBRUpdateRTprop, §4.1.2.3; Linux's strict `<` needs
/// timing noise to ever refresh). The caller skips PROBE_RTT when such a
/// sample refreshed the filter.
pub(crate) fn refreshes_min_rtt(
    min: Option<Duration>,
    rtt: Duration,
    expired: bool,
    free_probe: bool,
) -> bool {
    expired || min.is_none_or(|m| rtt < m || (free_probe && rtt == m))
}

/// What the PROBE_RTT hold decided for one ack (see [`probe_rtt_hold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeRttStep {
    /// Nothing to do yet.
    Wait,
    /// The flight reached the PROBE_RTT window: the hold began; the caller
    /// starts a new round so "one round" is measured from here.
    HoldStarted,
    /// The hold is over: the caller exits PROBE_RTT.
    Done,
}

/// The PROBE_RTT hold shared by BBRv1 and BBRv3 (draft §4.2.3.5 /
/// draft-ietf-ccwg-bbr BBRHandleProbeRTT): once the flight is down to the
/// PROBE_RTT window (`at_target`), hold for max(`PROBE_RTT_DURATION`, one
/// round trip), then exit.
pub(crate) fn probe_rtt_hold(
    done_stamp: &mut Option<Instant>,
    round_done: &mut bool,
    now: Instant,
    at_target: bool,
    round_start: bool,
) -> ProbeRttStep {
    match *done_stamp {
        None if at_target => {
            *done_stamp = Some(now + PROBE_RTT_DURATION);
            *round_done = false;
            ProbeRttStep::HoldStarted
        }
        Some(done) => {
            if round_start {
                *round_done = true;
            }
            if *round_done && now > done {
                ProbeRttStep::Done
            } else {
                ProbeRttStep::Wait
            }
        }
        None => ProbeRttStep::Wait,
    }
}

/// Restarting from idle inside PROBE_RTT (tcp_bbr.c `bbr_check_probe_rtt_done`
/// from CA_EVENT_TX_START): true when the hold has already run its course.
pub(crate) fn probe_rtt_hold_over(
    done_stamp: Option<Instant>,
    round_done: bool,
    now: Instant,
) -> bool {
    done_stamp.is_some_and(|done| round_done && now > done)
}

/// Round-trip counting by delivered packets, shared by BBRv1 and BBRv3
/// (draft-cardwell-iccrg-bbr §4.1.1.3; draft-ietf-ccwg-bbr §4.5.1
/// BBRUpdateRound): a round ends when a packet sent after it began is
/// acknowledged.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoundCounter {
    /// Rounds so far.
    pub count: u64,
    /// This ack started a new round.
    pub start: bool,
    next_round_delivered: u64,
}

impl RoundCounter {
    /// Feeds one ack: returns its rate sample when it is usable (a nonzero
    /// interval and delivery), after counting the round it may end.
    pub fn update(&mut self, ack: &AckEvent, delivered_pkts: u64) -> Option<RateSample> {
        self.start = false;
        let rs = ack.rate?;
        if rs.interval.is_zero() || rs.delivered_pkts == 0 {
            return None;
        }
        if rs.prior_delivered_pkts >= self.next_round_delivered {
            self.next_round_delivered = delivered_pkts;
            self.count += 1;
            self.start = true;
        }
        Some(rs)
    }

    /// Makes the current round end with the ack of the next packet sent
    /// (BBRStartRound).
    pub fn start_new(&mut self, delivered_pkts: u64) {
        self.next_round_delivered = delivered_pkts;
    }
}

/// STARTUP's full-pipe estimator (draft-cardwell-iccrg-bbr §4.2.3.2
/// BBRCheckFullPipe; draft-ietf-ccwg-bbr §4.3.1.2
/// BBRCheckStartupFullBandwidth): the pipe is full once the max bandwidth
/// grew less than 25 % in three rounds without an app-limited sample.
///
/// With `queue_fills_pipe` (`CcConfig::bbr_queue_fills_pipe`) a round whose
/// app-limited sample carries a queue — its RTT at least
/// [`QUEUED_RTT_RATIO`] × the min RTT — counts too: the bottleneck held
/// packets back, so the path, not the sender, set that delivery rate. A
/// tunnel subflow fed by an inner TCP is app limited in almost every round
/// (it forwards each packet as it comes) while the inner TCP's window fills
/// the link; the drafts' rule then never sees a full pipe, and the real
/// 20+20 pair's CCID5 subflow stayed in STARTUP for whole runs, pacing at
/// 2.89 × the link (docs/AGGREGATION.md "STARTUP that never ends").
#[derive(Clone, Debug, Default)]
pub(crate) struct FullPipe {
    full_bw: f64,
    full_bw_count: u32,
    queue_fills_pipe: bool,
}

/// RTT over min RTT from which a sample shows a standing queue: the same
/// 25 % margin as the full-pipe test's growth threshold.
pub(crate) const QUEUED_RTT_RATIO: f64 = 1.25;

impl FullPipe {
    pub fn new(queue_fills_pipe: bool) -> Self {
        FullPipe {
            queue_fills_pipe,
            ..FullPipe::default()
        }
    }

    /// Feeds one ack; true when it shows the pipe full (call only while
    /// the pipe is not yet known full).
    pub fn check(&mut self, ack: &AckEvent, round_start: bool, max_bw: f64) -> bool {
        if !round_start {
            return false;
        }
        let counts = match ack.rate {
            None => true,
            Some(r) if !r.is_app_limited => true,
            Some(r) => {
                self.queue_fills_pipe
                    && !ack.min_rtt.is_zero()
                    && r.rtt.as_secs_f64() >= QUEUED_RTT_RATIO * ack.min_rtt.as_secs_f64()
            }
        };
        if !counts {
            return false;
        }
        if max_bw >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = max_bw;
            self.full_bw_count = 0;
            return false;
        }
        self.full_bw_count += 1;
        self.full_bw_count >= FULL_BW_COUNT
    }

    /// After an RTO: measure growth again from the current bandwidth.
    pub fn restart(&mut self) {
        self.full_bw = 0.0;
    }
}

/// The congestion window and the loss-recovery state that modulates it,
/// shared by BBRv1 and BBRv3 (draft-cardwell-iccrg-bbr §4.2.3.6;
/// draft-ietf-ccwg-bbr §4.6.4.3-4.6.4.4): on entering recovery, one round
/// of packet conservation; on leaving it, restore the saved window.
#[derive(Clone, Debug)]
pub(crate) struct RecoveryWindow {
    pub cwnd: u32,
    pub prior_cwnd: u32,
    pub min_cwnd: u32,
    pub max_cwnd: u32,
    pub in_recovery: bool,
    recovery_start: Instant,
    pub packet_conservation: bool,
}

impl RecoveryWindow {
    /// The configured limits and the initial window (tcp_bbr.c
    /// `TCP_INIT_CWND` unless configured).
    pub fn new(config: &CcConfig) -> Self {
        let min_cwnd = config.min_cwnd_pkts.max(1);
        let max_cwnd = config.max_cwnd_pkts.max(MIN_PIPE_CWND_PKTS).max(min_cwnd);
        let iw = config
            .initial_cwnd_pkts
            .unwrap_or(DEFAULT_IW_PKTS)
            .clamp(min_cwnd, max_cwnd);
        RecoveryWindow {
            cwnd: iw,
            prior_cwnd: 0,
            min_cwnd,
            max_cwnd,
            in_recovery: false,
            recovery_start: Instant::ZERO,
            packet_conservation: false,
        }
    }

    /// BBRSaveCwnd (draft-cardwell-iccrg-bbr §4.2.3.6).
    pub fn save(&mut self, in_probe_rtt: bool) {
        let holding = self.in_recovery || in_probe_rtt;
        self.prior_cwnd = saved_cwnd(self.prior_cwnd, self.cwnd, holding);
    }

    /// BBRRestoreCwnd (draft-cardwell-iccrg-bbr §4.2.3.6).
    pub fn restore(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// Recovery (or the RTO loss state) ends with the ack of a packet sent
    /// after it began; the saved window comes back.
    pub fn handle_ack(&mut self, largest_acked_sent_time: Instant) {
        if self.in_recovery && largest_acked_sent_time > self.recovery_start {
            self.in_recovery = false;
            self.packet_conservation = false;
            self.restore();
        }
    }

    /// Each lost packet leaves the network and the window; the first loss
    /// enters recovery with packet conservation (cwnd = flight + 1). True
    /// when recovery began here: the caller starts a new round so that
    /// conservation lasts one round.
    pub fn handle_loss(
        &mut self,
        now: Instant,
        lost_pkts: u32,
        in_flight_pkts: u32,
        in_probe_rtt: bool,
    ) -> bool {
        self.cwnd = self.cwnd.saturating_sub(lost_pkts).max(1);
        if self.in_recovery {
            return false;
        }
        self.save(in_probe_rtt);
        self.in_recovery = true;
        self.recovery_start = now;
        self.packet_conservation = true;
        self.cwnd = in_flight_pkts.saturating_add(1);
        true
    }

    /// On an RTO: save the window and fall to the transport's 1-packet loss
    /// window (RFC 5681 §3.1), without packet conservation.
    pub fn handle_rto(&mut self, now: Instant, in_probe_rtt: bool) {
        self.save(in_probe_rtt);
        self.in_recovery = true;
        self.recovery_start = now;
        self.packet_conservation = false;
        self.cwnd = self.min_cwnd.max(1);
    }

    /// BBRSetCwnd's growth (draft-cardwell-iccrg-bbr §4.2.3.6): conserve
    /// packets in the first round of recovery; else grow by the acked
    /// packets up to `target_pkts` once the pipe is full, and without bound
    /// before (while below the target or the first IW is undelivered).
    pub fn grow(
        &mut self,
        acked_pkts: u32,
        in_flight_pkts: u32,
        target_pkts: f64,
        full_bw_reached: bool,
        delivered_pkts: u64,
    ) {
        if acked_pkts == 0 {
            return;
        }
        if self.packet_conservation {
            self.cwnd = self.cwnd.max(in_flight_pkts.saturating_add(acked_pkts));
            return;
        }
        let target = target_pkts.min(u32::MAX as f64) as u32;
        let grown = self.cwnd.saturating_add(acked_pkts);
        if full_bw_reached {
            self.cwnd = grown.min(target);
        } else if self.cwnd < target || delivered_pkts < DEFAULT_IW_PKTS as u64 {
            self.cwnd = grown;
        }
        self.cwnd = self.cwnd.max(MIN_PIPE_CWND_PKTS);
    }

    /// The configured limits.
    pub fn clamp(&mut self) {
        self.cwnd = self.cwnd.clamp(self.min_cwnd, self.max_cwnd);
    }
}

#[derive(Clone, Debug, Default)]
struct LongTermBw {
    sampling: bool,
    rounds: u32,
    use_bw: bool,
    bw: f64,
    last_delivered: u64,
    last_lost: u64,
    last_stamp: Instant,
}

/// BBRv1 (`ccid5`; `bbr` for inner TCP flows).
#[derive(Clone, Debug)]
pub struct Bbr {
    mss_bytes: f64,
    mode: BbrMode,
    rng: ChaCha8Rng,

    // Model.
    bw_filter: BwFilter,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    lt: LongTermBw,

    // Rounds (§4.1.1.3).
    round: RoundCounter,

    // Full pipe (§4.2.3.2).
    full_pipe: FullPipe,
    full_bw_reached: bool,
    startup_exit_round: Option<u64>,
    max_bw_at_startup_exit: f64,

    // PROBE_BW cycle (§4.2.3.4).
    cycle_idx: usize,
    cycle_stamp: Instant,

    // PROBE_RTT (§4.2.3.5).
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    idle_restart: bool,
    /// `CcConfig::bbr_app_limited_probe`.
    app_limited_probe: bool,

    pacing_gain: f64,
    cwnd_gain: f64,
    pacing_rate: f64,
    has_seen_rtt: bool,

    // The window and loss recovery (§4.2.3.6): packet conservation for one
    // round, then restore the window saved on entry.
    win: RecoveryWindow,

    delivered: u64,
    lost: u64,
    last_app_limited: bool,

    // ACK aggregation: two windows of max extra acked packets.
    extra_acked: [f64; 2],
    extra_acked_idx: usize,
    extra_acked_win_rounds: u32,
    ack_epoch_start: Instant,
    ack_epoch_acked: f64,
}

impl Bbr {
    pub fn new(config: &CcConfig) -> Self {
        let mss = config.mss_bytes.max(1) as f64;
        let mut bbr = Bbr {
            mss_bytes: mss,
            mode: BbrMode::Startup,
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            bw_filter: BwFilter::new(BW_FILTER_ROUNDS),
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            lt: LongTermBw::default(),
            round: RoundCounter::default(),
            full_pipe: FullPipe::new(config.bbr_queue_fills_pipe),
            full_bw_reached: false,
            startup_exit_round: None,
            max_bw_at_startup_exit: 0.0,
            cycle_idx: 0,
            cycle_stamp: Instant::ZERO,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            idle_restart: false,
            app_limited_probe: config.bbr_app_limited_probe,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: 0.0,
            has_seen_rtt: false,
            win: RecoveryWindow::new(config),
            delivered: 0,
            lost: 0,
            last_app_limited: false,
            extra_acked: [0.0; 2],
            extra_acked_idx: 0,
            extra_acked_win_rounds: 0,
            ack_epoch_start: Instant::ZERO,
            ack_epoch_acked: 0.0,
        };
        // §4.2.1: before an RTT sample, pace at high_gain·IW per 1 ms.
        bbr.init_pacing_rate(Duration::from_millis(1));
        bbr
    }

    pub fn mode(&self) -> BbrMode {
        self.mode
    }
    /// The bandwidth estimate in use (long-term bandwidth when policed),
    /// a packet rate × MSS (see `BwFilter`).
    pub fn bw_bytes_per_s(&self) -> f64 {
        if self.lt.use_bw {
            self.lt.bw
        } else {
            self.bw_filter.max()
        }
    }
    /// The windowed-max filter output.
    pub fn max_bw_bytes_per_s(&self) -> f64 {
        self.bw_filter.max()
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    pub fn round_count(&self) -> u64 {
        self.round.count
    }
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }
    /// The round in which STARTUP ended and the max bandwidth at that time.
    pub fn startup_exit(&self) -> Option<(u64, f64)> {
        self.startup_exit_round
            .map(|r| (r, self.max_bw_at_startup_exit))
    }
    pub fn long_term_bw_bytes_per_s(&self) -> Option<f64> {
        self.lt.use_bw.then_some(self.lt.bw)
    }

    fn init_pacing_rate(&mut self, rtt: Duration) {
        self.pacing_rate = initial_pacing_rate(HIGH_GAIN, self.win.cwnd, self.mss_bytes, rtt);
    }

    /// BDP × gain in packets (§4.2.3.2 BBRInflight); IW before any RTT.
    fn bdp_pkts(&self, bw: f64, gain: f64) -> f64 {
        bdp_pkts(self.min_rtt, bw, gain, self.mss_bytes)
    }

    /// tcp_bbr.c `bbr_quantization_budget`: room for the send quanta in
    /// flight at the sender, receiver and in between, rounded up to an even
    /// count, plus 2 while probing up so the gain can take effect.
    fn quantization_budget(&self, cwnd: f64) -> f64 {
        let mut w = cwnd + 3.0 * self.send_quantum_pkts() as f64;
        w = (w / 2.0).ceil() * 2.0;
        if self.mode == BbrMode::ProbeBw && self.cycle_idx == 0 {
            w += 2.0;
        }
        w
    }

    fn inflight_pkts(&self, bw: f64, gain: f64) -> f64 {
        self.quantization_budget(self.bdp_pkts(bw, gain))
    }

    /// §4.2.3.6 BBRSaveCwnd.
    fn save_cwnd(&mut self) {
        self.win.save(self.mode == BbrMode::ProbeRtt);
    }

    /// tcp_bbr.c `bbr_reset_probe_bw_mode`: enter PROBE_BW at a random
    /// phase other than the 3/4 drain phase.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = BbrMode::ProbeBw;
        let r = self.rng.gen_range(0..7usize);
        self.cycle_idx = (PACING_GAIN_CYCLE.len() - 1 - r) % PACING_GAIN_CYCLE.len();
        self.advance_cycle_phase(now);
    }

    fn reset_mode(&mut self, now: Instant) {
        if self.full_bw_reached {
            self.enter_probe_bw(now);
        } else {
            self.mode = BbrMode::Startup;
        }
    }

    fn advance_cycle_phase(&mut self, now: Instant) {
        self.cycle_idx = (self.cycle_idx + 1) % PACING_GAIN_CYCLE.len();
        self.cycle_stamp = now;
    }

    /// tcp_bbr.c `bbr_is_next_cycle_phase` (§4.2.3.4).
    fn is_next_cycle_phase(&self, now: Instant, prior_in_flight: u32, losses: bool) -> bool {
        let full_length = self
            .min_rtt
            .is_some_and(|rtt| now.saturating_duration_since(self.cycle_stamp) > rtt);
        let gain = self.pacing_gain;
        let bw = self.bw_bytes_per_s();
        let inflight = prior_in_flight as f64;
        if gain == 1.0 {
            full_length
        } else if gain > 1.0 {
            // Probe until the pipe holds gain × BDP (or losses say it
            // cannot).
            full_length && (losses || inflight >= self.inflight_pkts(bw, gain))
        } else {
            // Drain until the queue we made is gone.
            full_length || inflight <= self.inflight_pkts(bw, 1.0)
        }
    }

    fn update_gains(&mut self) {
        let (p, c) = match self.mode {
            BbrMode::Startup => (HIGH_GAIN, HIGH_GAIN),
            BbrMode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            BbrMode::ProbeBw => (
                if self.lt.use_bw {
                    1.0
                } else {
                    PACING_GAIN_CYCLE[self.cycle_idx]
                },
                CWND_GAIN,
            ),
            BbrMode::ProbeRtt => (1.0, 1.0),
        };
        self.pacing_gain = p;
        self.cwnd_gain = c;
    }

    /// §4.2.1 BBRSetPacingRateWithGain: never lower the rate before the pipe
    /// is known full (a low early sample must not throttle STARTUP).
    fn set_pacing_rate(&mut self, bw: f64, gain: f64) {
        let bw = self.bw_filter.pacing_bw(bw);
        if let Some(rate) = gained_pacing_rate(self.pacing_rate, bw, gain, self.full_bw_reached) {
            self.pacing_rate = rate;
        }
    }

    // --- long-term bandwidth (policer) detection -------------------------

    fn lt_reset_interval(&mut self, now: Instant) {
        self.lt.last_stamp = now;
        self.lt.last_delivered = self.delivered;
        self.lt.last_lost = self.lost;
        self.lt.rounds = 0;
    }

    fn lt_reset(&mut self, now: Instant) {
        self.lt.bw = 0.0;
        self.lt.use_bw = false;
        self.lt.sampling = false;
        self.lt_reset_interval(now);
    }

    fn lt_interval_done(&mut self, now: Instant, bw: f64) {
        if self.lt.bw > 0.0 {
            let diff = (bw - self.lt.bw).abs();
            if diff <= LT_BW_RATIO * self.lt.bw || diff <= LT_BW_DIFF_BYTES_PER_S {
                // Two consistent lossy intervals: a policer. Use the
                // average of both.
                self.lt.bw = (bw + self.lt.bw) / 2.0;
                self.lt.use_bw = true;
                self.pacing_gain = 1.0;
                self.lt.rounds = 0;
                return;
            }
        }
        self.lt.bw = bw;
        self.lt_reset_interval(now);
    }

    fn lt_sampling(&mut self, now: Instant, losses: bool, app_limited: bool) {
        if self.lt.use_bw {
            if self.mode == BbrMode::ProbeBw && self.round.start {
                self.lt.rounds += 1;
                if self.lt.rounds >= LT_BW_MAX_ROUNDS {
                    self.lt_reset(now);
                    self.enter_probe_bw(now);
                }
            }
            return;
        }
        if !self.lt.sampling {
            // Intervals start at a loss, when a policer would be dropping.
            if !losses {
                return;
            }
            self.lt_reset_interval(now);
            self.lt.sampling = true;
        }
        if app_limited {
            self.lt_reset(now);
            return;
        }
        if self.round.start {
            self.lt.rounds += 1;
        }
        if self.lt.rounds < LT_INTERVAL_MIN_ROUNDS {
            return;
        }
        if self.lt.rounds > 4 * LT_INTERVAL_MIN_ROUNDS {
            self.lt_reset(now);
            return;
        }
        // Intervals end at a loss.
        if !losses {
            return;
        }
        let lost = self.lost - self.lt.last_lost;
        let delivered = self.delivered - self.lt.last_delivered;
        if delivered == 0 || (lost as f64) < LT_LOSS_THRESH * delivered as f64 {
            return;
        }
        let t = now
            .saturating_duration_since(self.lt.last_stamp)
            .as_secs_f64();
        if t < 1e-3 {
            return;
        }
        let bw = delivered as f64 * self.mss_bytes / t;
        self.lt_interval_done(now, bw);
    }

    // --- the per-ack model update (tcp_bbr.c `bbr_update_model`) ---------

    fn update_bw(&mut self, now: Instant, ack: &AckEvent) {
        // §4.1.1.3: a round ends when a packet sent after the round began
        // is acknowledged.
        let Some(rs) = self.round.update(ack, self.delivered) else {
            return;
        };
        if self.round.start {
            self.win.packet_conservation = false;
        }
        self.lt_sampling(now, false, rs.is_app_limited);
        self.bw_filter.update(self.round.count, &rs, self.mss_bytes);
    }

    fn check_full_bw_reached(&mut self, ack: &AckEvent) {
        let max = self.bw_filter.max();
        if !self.full_bw_reached && self.full_pipe.check(ack, self.round.start, max) {
            self.full_bw_reached = true;
            self.startup_exit_round = Some(self.round.count);
            self.max_bw_at_startup_exit = max;
        }
    }

    fn check_drain(&mut self, now: Instant, ack: &AckEvent) {
        if self.mode == BbrMode::Startup && self.full_bw_reached {
            self.mode = BbrMode::Drain;
        }
        if self.mode == BbrMode::Drain
            && (ack.in_flight_pkts as f64) <= self.inflight_pkts(self.bw_bytes_per_s(), 1.0)
        {
            self.enter_probe_bw(now);
        }
    }

    fn update_min_rtt(&mut self, now: Instant, ack: &AckEvent) {
        // (No estimate yet is not an expired one: a flow may start at any
        // `now`.)
        let expired = self.min_rtt.is_some() && now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        // An application-limited path probes for free (`refreshes_min_rtt`):
        // once the filter expired such a sample replaces it without the
        // 200 ms at 4 packets. A backlogged path keeps Linux's rule. In a
        // multipath tunnel this keeps an idle backup path from probing at
        // the moment traffic moves onto it (E5: scenarios/README.md).
        let free_probe = self.app_limited_probe && ack.rate.is_some_and(|r| r.is_app_limited);
        let mut probed = false;
        if let Some(rtt) = ack.rtt {
            if refreshes_min_rtt(self.min_rtt, rtt, expired, free_probe) {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
                probed = free_probe;
            }
        }
        if expired && !probed && !self.idle_restart && self.mode != BbrMode::ProbeRtt {
            // §4.2.3.5: no lower RTT for 10 s — drain the queue to measure.
            self.mode = BbrMode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
        }
        if self.mode == BbrMode::ProbeRtt {
            // Hold for max(200 ms, one round).
            match probe_rtt_hold(
                &mut self.probe_rtt_done_stamp,
                &mut self.probe_rtt_round_done,
                now,
                ack.in_flight_pkts <= MIN_PIPE_CWND_PKTS,
                self.round.start,
            ) {
                ProbeRttStep::HoldStarted => self.round.start_new(self.delivered),
                ProbeRttStep::Done => self.exit_probe_rtt(now),
                ProbeRttStep::Wait => {}
            }
        }
        if ack.acked_pkts > 0 {
            self.idle_restart = false;
        }
    }

    fn exit_probe_rtt(&mut self, now: Instant) {
        self.min_rtt_stamp = now;
        self.win.restore();
        self.reset_mode(now);
    }

    fn update_ack_aggregation(&mut self, now: Instant, ack: &AckEvent) {
        let valid = ack
            .rate
            .is_some_and(|r| !r.interval.is_zero() && r.delivered_pkts > 0);
        if ack.acked_pkts == 0 || !valid {
            return;
        }
        if self.round.start {
            self.extra_acked_win_rounds += 1;
            if self.extra_acked_win_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                self.extra_acked_win_rounds = 0;
                self.extra_acked_idx ^= 1;
                self.extra_acked[self.extra_acked_idx] = 0.0;
            }
        }
        let bw_pps = self.bw_bytes_per_s() / self.mss_bytes;
        let epoch = now
            .saturating_duration_since(self.ack_epoch_start)
            .as_secs_f64();
        let mut expected = bw_pps * epoch;
        let acked = ack.acked_pkts as f64;
        // A slow ack rate (or an ancient epoch) starts a new epoch.
        if self.ack_epoch_acked <= expected || self.ack_epoch_acked + acked >= ACK_EPOCH_RESET_PKTS
        {
            self.ack_epoch_acked = 0.0;
            self.ack_epoch_start = now;
            expected = 0.0;
        }
        self.ack_epoch_acked += acked;
        let extra = (self.ack_epoch_acked - expected).min(self.win.cwnd as f64);
        let slot = &mut self.extra_acked[self.extra_acked_idx];
        if extra > *slot {
            *slot = extra;
        }
    }

    fn ack_aggregation_cwnd(&self) -> f64 {
        if !self.full_bw_reached {
            return 0.0;
        }
        let max_aggr = self.bw_bytes_per_s() * EXTRA_ACKED_MAX.as_secs_f64() / self.mss_bytes;
        self.extra_acked[0].max(self.extra_acked[1]).min(max_aggr)
    }

    /// §4.2.3.6 BBRSetCwnd.
    fn set_cwnd(&mut self, ack: &AckEvent) {
        let bdp = self.bdp_pkts(self.bw_bytes_per_s(), self.cwnd_gain);
        let target = self.quantization_budget(bdp + self.ack_aggregation_cwnd().ceil());
        self.win.grow(
            ack.acked_pkts,
            ack.in_flight_pkts,
            target,
            self.full_bw_reached,
            self.delivered,
        );
        self.bound_cwnd();
    }

    /// The configured limits, and PROBE_RTT's minimum window (§4.2.3.5).
    fn bound_cwnd(&mut self) {
        self.win.clamp();
        if self.mode == BbrMode::ProbeRtt {
            self.win.cwnd = self.win.cwnd.min(MIN_PIPE_CWND_PKTS.max(self.win.min_cwnd));
        }
    }
}

impl CongestionController for Bbr {
    fn name(&self) -> &'static str {
        "ccid5"
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        // tcp_bbr.c CA_EVENT_TX_START: restarting from idle after an
        // application-limited period.
        if pkt.in_flight_pkts <= 1 && self.last_app_limited {
            self.idle_restart = true;
            if self.mode == BbrMode::ProbeBw {
                // §4.2.1: pace at the estimated rate, not the probe gain.
                let bw = self.bw_bytes_per_s();
                self.set_pacing_rate(bw, 1.0);
            } else if self.mode == BbrMode::ProbeRtt
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
        self.update_bw(now, ack);
        self.update_ack_aggregation(now, ack);
        if self.mode == BbrMode::ProbeBw
            && self.is_next_cycle_phase(now, ack.prior_in_flight_pkts, false)
        {
            self.advance_cycle_phase(now);
        }
        self.check_full_bw_reached(ack);
        self.check_drain(now, ack);
        self.update_min_rtt(now, ack);
        self.update_gains();
        let bw = self.bw_bytes_per_s();
        self.set_pacing_rate(bw, self.pacing_gain);
        self.set_cwnd(ack);
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
        self.lost += loss.lost_pkts as u64;
        self.delivered = self.delivered.max(loss.delivered_pkts);
        // §4.2.3.6: each lost packet leaves the network; the first loss
        // starts packet conservation for one round of recovery.
        let in_probe_rtt = self.mode == BbrMode::ProbeRtt;
        if self
            .win
            .handle_loss(now, loss.lost_pkts, loss.in_flight_pkts, in_probe_rtt)
        {
            self.round.start_new(self.delivered);
        }
        // A lossy PROBE_BW gain phase ends early (`bbr_is_next_cycle_phase`).
        if self.mode == BbrMode::ProbeBw
            && self.pacing_gain > 1.0
            && self.is_next_cycle_phase(now, loss.in_flight_pkts, true)
        {
            self.advance_cycle_phase(now);
            self.update_gains();
        }
        self.lt_sampling(now, true, false);
        self.bound_cwnd();
    }

    fn on_rto(&mut self, now: Instant) {
        // tcp_bbr.c on TCP_CA_Loss: save the window, restart full-pipe
        // detection of the current bandwidth, count it as a lossy round;
        // the transport's loss window is 1 packet (RFC 5681 §3.1).
        self.win.handle_rto(now, self.mode == BbrMode::ProbeRtt);
        self.full_pipe.restart();
        self.round.start = true;
        self.lost += 1;
        self.lt_sampling(now, true, false);
    }

    /// PROBE_RTT's small flight is not the path's capacity: its samples
    /// are marked application limited (tcp_bbr.c `bbr_update_min_rtt`).
    fn marks_app_limited(&self) -> bool {
        self.mode == BbrMode::ProbeRtt
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

    /// BBRv1 (Linux `tcp_bbr.c`) does not react to ECN marks.
    fn on_ecn(&mut self, _now: Instant, _ce_pkts: u32, _ack: &AckEvent, _paths: CoupledView<'_>) {}

    fn cwnd_pkts(&self) -> u32 {
        self.win.cwnd
    }

    fn pacing_rate_bytes_per_s(&self) -> Option<u64> {
        Some(reported_pacing_rate(self.pacing_rate))
    }

    /// tcp_bbr.c `bbr_tso_segs_goal`: about 1 ms of data at the pacing rate,
    /// between 2 packets (1 below 1.2 Mbit/s) and 64 KB.
    fn send_quantum_pkts(&self) -> u32 {
        send_quantum_pkts(self.pacing_rate, self.mss_bytes)
    }

    fn state(&self) -> &'static str {
        self.mode.as_str()
    }
}

#[cfg(test)]
#[path = "bbr_tests.rs"]
mod tests;
