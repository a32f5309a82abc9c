//! Congestion control: one trait, many controllers.
//!
//! Controllers are transport-agnostic: they see packets (not DCCP headers), so
//! the same code is the per-subflow CC of the tunnel and the end-to-end CC of a
//! simulated inner TCP flow. Units: windows in packets, times as `Duration`,
//! rates in bytes per second, sizes in bytes.
//!
//! The transport (a DCCP subflow, or a simulated TCP sender) owns loss
//! detection and acknowledgement processing, keeps an [`RttEstimator`] and a
//! [`DeliveryRateEstimator`], and feeds the controller events in this order:
//!
//! 1. [`CongestionController::on_packet_sent`] for every data packet sent;
//! 2. per acknowledgement, [`CongestionController::on_ack`] with the packets it
//!    newly acknowledged and a delivery-rate sample;
//! 3. [`CongestionController::on_loss`] when packets are declared lost
//!    (CCID2: three later packets acknowledged, RFC 4341 §5);
//! 4. [`CongestionController::on_rto`] when the retransmission timer fires;
//! 5. [`CongestionController::on_ecn`] after `on_ack` when the acknowledged
//!    packets carried ECN CE marks.
//!
//! Two optional hooks a transport should honour: call
//! [`CongestionController::on_initial_rtt`] once with the handshake's RTT
//! before sending data, and after every ack, if
//! [`CongestionController::marks_app_limited`] is true, call
//! [`DeliveryRateEstimator::on_app_limited`] with the packets in flight.
//!
//! Coupled controllers (LIA, OLIA, BALIA, Coupled CUBIC) additionally read
//! `paths`, a read-only [`CoupledView`] of every path of their connection,
//! built from each controller's [`CongestionController::snapshot`];
//! uncoupled ones ignore it (and say so with
//! [`CongestionController::reads_coupled_view`], so none is built).
//!
//! | name | type | specification | paces |
//! |---|---|---|---|
//! | `ccid2` | [`Ccid2`] | RFC 4341 §5 (window arithmetic) | no |
//! | `reno` | [`Reno`] | RFC 5681 / RFC 6582 | no |
//! | `cubic` | [`Cubic`] | RFC 9438 + HyStart++ (RFC 9406) | optional ([`CcConfig::pacing`]) |
//! | `ccid5` (`bbr`) | [`Bbr`] | BBRv1: draft-cardwell-iccrg-bbr-congestion-control-00 as Linux `tcp_bbr.c`; draft-romo-iccrg-ccid5 | yes |
//! | `bbr3` | [`Bbr3`] | draft-ietf-ccwg-bbr (loss and ECN aware) | yes |
//! | `lia` / `olia` / `balia` | [`CoupledReno`] | RFC 6356; Khalili et al. 2013; Peng et al. 2016 | no |
//! | `coupled-cubic` | [`CoupledCubic`] | Lee, Kim, Kwon, Han, CSSE 45(1) 2023 | optional |
//!
//! Every controller is deterministic: no clock (time is the `now`
//! argument) and no OS randomness (BBR's random PROBE_BW phase comes from
//! [`CcConfig::seed`]).

use std::fmt::Debug;
use std::time::Duration;

use crate::path::PathId;
use crate::time::Instant;

mod aimd;
pub mod bbr;
pub mod bbr3;
mod ccid2;
pub mod coupled;
pub mod cubic;
mod rate;
mod reno;
mod round;
mod rtt;
pub mod validation;

pub use bbr::Bbr;
pub use bbr3::Bbr3;
pub use ccid2::Ccid2;
pub use coupled::{CoupledCubic, CoupledReno};
pub use cubic::Cubic;
pub use rate::{DeliveryRateEstimator, PacketRateState};
pub use reno::Reno;
pub use rtt::{AckDelayUse, RttEstimator};

crate::kind::named_kind! {
    /// The built-in congestion controllers: the one list of their names
    /// (config, CLI, results). `bbr` is accepted for `ccid5` (the name of
    /// BBRv1 for an inner TCP flow).
    #[derive(Default)]
    pub enum CcKind ("congestion control") {
        #[default]
        Ccid2 = "ccid2",
        Ccid5 = "ccid5",
        Cubic = "cubic",
        Bbr3 = "bbr3",
        Lia = "lia",
        Olia = "olia",
        Balia = "balia",
        CoupledCubic = "coupled-cubic",
        Reno = "reno",
    }
    aliases {
        "bbr" => Ccid5,
    }
}

pub use crate::kind::UnknownName;

/// Builds one controller per path from a configuration, as quinn's
/// `congestion::ControllerFactory` does: a connection keeps the factory and
/// asks it for a fresh controller whenever a subflow opens (each with its
/// own [`CcConfig::seed`]). [`CcKind`] is the factory of the built-in
/// controllers; building cannot fail, so there is no fallback to hide a
/// mistyped name (names are checked when they are parsed).
pub trait ControllerFactory: Debug + Send + Sync {
    fn build(&self, config: &CcConfig) -> Box<dyn CongestionController>;
}

impl ControllerFactory for CcKind {
    fn build(&self, config: &CcConfig) -> Box<dyn CongestionController> {
        match self {
            CcKind::Ccid2 => Box::new(Ccid2::new(config)),
            CcKind::Reno => Box::new(Reno::new(config)),
            CcKind::Cubic => Box::new(Cubic::new(config)),
            CcKind::Ccid5 => Box::new(Bbr::new(config)),
            CcKind::Bbr3 => Box::new(Bbr3::new(config)),
            CcKind::Lia => Box::new(CoupledReno::lia(config)),
            CcKind::Olia => Box::new(CoupledReno::olia(config)),
            CcKind::Balia => Box::new(CoupledReno::balia(config)),
            CcKind::CoupledCubic => Box::new(CoupledCubic::new(config)),
        }
    }
}

/// Largest Ack Ratio a receiver may use with a window of `cwnd_pkts`:
/// RFC 4341 §6.1.2 keeps it at most ceil(cwnd/2), so at least two acks
/// arrive per window — which also keeps BBR's PROBE_RTT (cwnd 4) fed with
/// acks, the caveat of draft-romo-iccrg-ccid5.
pub fn max_ack_ratio(cwnd_pkts: u32) -> u32 {
    cwnd_pkts.div_ceil(2).max(1)
}

/// Initial window in packets per RFC 3390 §1:
/// min(4·MSS, max(2·MSS, 4380 bytes)) — 4 / 3 / 2 packets for an MSS of
/// 536 / 1460 / 4000 bytes (RFC 4341 §5 adopts it for CCID2).
pub fn rfc3390_initial_window_pkts(mss_bytes: u32) -> u32 {
    let mss = mss_bytes.max(1) as u64;
    let bytes = (4 * mss).min((2 * mss).max(4380));
    (bytes / mss).max(1) as u32
}

/// The "one reduction per window of data" rule shared by the loss-based
/// controllers (RFC 5681 §3.2 / RFC 6582 recovery, RFC 4341 §5 "at most
/// once per window", RFC 9438 §4.6): a loss starts a new congestion event
/// unless the lost packet was sent before the current event began. On a new
/// event `recovery_start` becomes `now`.
pub(crate) fn starts_congestion_event(
    recovery_start: &mut Option<Instant>,
    now: Instant,
    largest_lost_sent_time: Instant,
) -> bool {
    if recovery_start.is_some_and(|start| largest_lost_sent_time <= start) {
        return false;
    }
    *recovery_start = Some(now);
    true
}

/// Settings shared by every controller; controller-specific knobs live in
/// their own config structs.
#[derive(Clone, Debug, PartialEq)]
pub struct CcConfig {
    /// Maximum segment (packet) size, bytes.
    pub mss_bytes: u32,
    /// Initial window in packets; `None` = the controller's own default
    /// (CCID2: RFC 3390 by MSS; BBR: 10).
    pub initial_cwnd_pkts: Option<u32>,
    /// Smallest window the controller may use, packets.
    pub min_cwnd_pkts: u32,
    /// Largest window, packets (guards memory on absurd inputs).
    pub max_cwnd_pkts: u32,
    /// Seed for controllers that randomise (BBR's first PROBE_BW phase);
    /// controllers never use OS randomness.
    pub seed: u64,
    /// Pace the window-based controllers (CUBIC, Coupled CUBIC) at
    /// cwnd/srtt × 2 in slow start and × 1.2 after (the Linux defaults).
    /// The BBR family always paces.
    pub pacing: bool,
    /// How CUBIC's initial slow start ends on a rising RTT.
    pub hystart: SlowStartExit,
    /// CUBIC fast convergence (RFC 9438 §4.7, a SHOULD). The response
    /// function of RFC 9438 §5.1 (Tables 1–2) is derived without it.
    pub cubic_fast_convergence: bool,
    /// Coupled CUBIC: an extra floor (packets) on the bandwidth-delay
    /// product from which a path runs coupled CUBIC instead of LIA (Lee et
    /// al. 2023). The boundary itself is derived, not configured: CUBIC's
    /// Reno crossover window ≈ 1.654·RTT^-1.5 at the path's min RTT (RFC 9438
    /// §5.1 response functions; below it CUBIC is Reno, so coupled CUBIC must
    /// be LIA; see `coupled::cubic_reno_crossover_window_pkts`). Default 0:
    /// no floor. (The former default, 100, had no source.)
    pub coupled_cubic_bdp_threshold_pkts: f64,
    /// BBR (ccid5, bbr3): an application-limited RTT sample counts as a
    /// PROBE_RTT measurement, so a path that does not fill its pipe never
    /// drops to PROBE_RTT's window (4 packets; BBRv3 half a BDP) to
    /// re-measure a queue it does not build (see `bbr::refreshes_min_rtt`).
    /// `false` is Linux `tcp_bbr.c` exactly (the simulator's inner TCP
    /// `bbr`, a baseline, runs that).
    pub bbr_app_limited_probe: bool,
    /// BBR (ccid5, bbr3): STARTUP's full-pipe test also counts a round
    /// whose app-limited sample shows a queue (RTT ≥ 1.25 × min RTT), so a
    /// subflow carrying an inner flow that fills the link leaves STARTUP
    /// (see `bbr::FullPipe`). `false` is the drafts' and Linux's rule (the
    /// simulator's inner TCP `bbr` runs that).
    pub bbr_queue_fills_pipe: bool,
    /// Congestion window validation after idle periods for the loss-based
    /// controllers (RFC 7661 / RFC 4341 §5.1, see [`validation`]): a window
    /// idle for more than an RTO decays to its restart window. `false` is
    /// the behaviour before it (a window kept whole however long the idle).
    pub cwnd_validation: bool,
    /// With `cwnd_validation`: restart at 2 · pipeACK_peak (RFC 7661 §4.1's
    /// validated window, the peak over the NVP) instead of pipeACK (see
    /// [`validation`]). `false` is the rule before it.
    pub cwnd_validation_peak: bool,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            mss_bytes: 1400,
            initial_cwnd_pkts: None,
            min_cwnd_pkts: 1,
            max_cwnd_pkts: 1_000_000,
            seed: 0,
            pacing: false,
            hystart: SlowStartExit::HyStartPlusPlus,
            cubic_fast_convergence: true,
            coupled_cubic_bdp_threshold_pkts: 0.0,
            bbr_app_limited_probe: true,
            bbr_queue_fills_pipe: true,
            cwnd_validation: true,
            cwnd_validation_peak: false,
        }
    }
}

/// CUBIC's slow-start exit on delay (`CcConfig::hystart`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowStartExit {
    /// Slow start ends at the first loss only.
    LossOnly,
    /// HyStart++ (RFC 9406): conservative slow start for up to five
    /// rounds once the RTT rises, resumed if it falls back.
    #[default]
    HyStartPlusPlus,
    /// Linux's HyStart delay test (slow start ends at the first RTT rise
    /// over the smallest RTT ever, no conservative slow start;
    /// `cubic.rs`), to model kernel TCP's CUBIC.
    Linux,
}

/// One data packet handed to the network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SentPacket {
    /// Transport sequence number (DCCP 48-bit seq, or TCP segment index).
    pub seq: u64,
    pub bytes: u32,
    /// Packets in flight after this one was sent.
    pub in_flight_pkts: u32,
    /// True when the sender had no more data queued after this packet and
    /// the window was not full (the application limited the rate).
    pub app_limited: bool,
}

/// A delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation §3.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSample {
    /// Packets delivered over `interval`.
    pub delivered_pkts: u64,
    /// Bytes delivered over `interval`.
    pub delivered_bytes: u64,
    /// max(send elapsed, ack elapsed).
    pub interval: Duration,
    /// The connection's delivered count when the newest acked packet was sent
    /// (BBR uses it to detect round boundaries).
    pub prior_delivered_pkts: u64,
    /// True if the sample was taken while the sender was application limited;
    /// such samples must not lower a bandwidth estimate.
    pub is_app_limited: bool,
    /// RTT of the newest acknowledged packet.
    pub rtt: Duration,
}

impl RateSample {
    /// Delivery rate in bytes per second; 0 for a zero interval.
    pub fn delivery_rate_bytes_per_s(&self) -> f64 {
        let secs = self.interval.as_secs_f64();
        if secs > 0.0 {
            self.delivered_bytes as f64 / secs
        } else {
            0.0
        }
    }
    /// Delivery rate in packets per second; 0 for a zero interval.
    pub fn delivery_rate_pkts_per_s(&self) -> f64 {
        let secs = self.interval.as_secs_f64();
        if secs > 0.0 {
            self.delivered_pkts as f64 / secs
        } else {
            0.0
        }
    }
}

/// What one acknowledgement newly acknowledged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckEvent {
    /// Packets newly acknowledged by this ack.
    pub acked_pkts: u32,
    pub acked_bytes: u64,
    /// Packets in flight before this ack was processed.
    pub prior_in_flight_pkts: u32,
    /// Packets in flight after it.
    pub in_flight_pkts: u32,
    /// RTT sample from the newest acknowledged packet, if valid.
    pub rtt: Option<Duration>,
    /// The transport's smoothed RTT after the sample.
    pub srtt: Duration,
    /// The transport's minimum RTT.
    pub min_rtt: Duration,
    /// Delivery-rate sample, when one could be formed.
    pub rate: Option<RateSample>,
    /// Total packets delivered on this path so far (after this ack).
    pub delivered_pkts: u64,
    /// Total packets declared lost on this path so far.
    pub lost_pkts_total: u64,
    /// Send time of the newest acknowledged packet.
    pub largest_acked_sent_time: Instant,
}

/// Packets declared lost in one detection pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossEvent {
    pub lost_pkts: u32,
    pub lost_bytes: u64,
    /// Packets in flight after removing the lost ones.
    pub in_flight_pkts: u32,
    /// Send time of the newest lost packet: a controller reduces at most once
    /// per window of data, e.g. not again for losses sent before its last
    /// reduction (RFC 4341 §5, RFC 9438 §4.6).
    pub largest_lost_sent_time: Instant,
    /// Total packets delivered on this path so far.
    pub delivered_pkts: u64,
}

/// The numbers other paths' coupled controllers need from this one.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CcSnapshot {
    pub path: PathId,
    /// Congestion window, packets (fractional windows allowed).
    pub cwnd_pkts: f64,
    /// Smoothed RTT; zero before the first sample.
    pub srtt: Duration,
    /// False while the path is not established or is failed; coupled
    /// algorithms only sum over established paths.
    pub established: bool,
    /// OLIA: bytes acked between the last two losses (l1) and since the last
    /// loss (l2), packets. Zero for other controllers.
    pub olia_l1_pkts: f64,
    pub olia_l2_pkts: f64,
    /// Coupled CUBIC: the virtual Reno window standing in for this path in
    /// LIA's alpha; equals `cwnd_pkts` for Reno-like paths.
    pub virtual_reno_cwnd_pkts: f64,
    /// True when `virtual_reno_cwnd_pkts` is the virtual Reno window of an
    /// (uncoupled) CUBIC window — a Coupled CUBIC subflow on a large-BDP
    /// path — rather than a real Reno-like window.
    pub virtual_reno_is_cubic: bool,
}

/// Read-only view over all paths of a connection, for coupled controllers.
pub type CoupledView<'a> = &'a [CcSnapshot];

/// A boxed copy of a controller. A transport that finds a window
/// reduction was caused by a spurious retransmission restores the copy it
/// took before the reduction (RFC 3708 §3; Linux `tcp_try_undo_dsack`).
/// Every controller that is `Clone` has it.
pub trait CcClone {
    fn clone_box(&self) -> Box<dyn CongestionController>;
}

impl<T: CongestionController + Clone + 'static> CcClone for T {
    fn clone_box(&self) -> Box<dyn CongestionController> {
        Box::new(self.clone())
    }
}

/// The congestion-control trait. See the module docs for the call order.
pub trait CongestionController: Send + Debug + CcClone {
    /// The name used in config and results (a [`CcKind`] name).
    fn name(&self) -> &'static str;

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket);

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, paths: CoupledView<'_>);

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, paths: CoupledView<'_>);

    /// The retransmission timer fired (RFC 6298 §5.5 semantics: collapse).
    fn on_rto(&mut self, now: Instant);

    /// `ce_pkts` of the packets acknowledged by `ack` (already passed to
    /// [`CongestionController::on_ack`]) arrived with ECN Congestion
    /// Experienced marks (RFC 4340 §12.2, RFC 3168). The default treats the
    /// marks as losses of packets sent at `ack.largest_acked_sent_time`
    /// (RFC 3168 §6.1.2, RFC 4341 §5: one reduction per window of data);
    /// ECN-aware controllers (BBRv3) override it, and BBRv1 ignores marks.
    fn on_ecn(&mut self, now: Instant, ce_pkts: u32, ack: &AckEvent, paths: CoupledView<'_>) {
        if ce_pkts == 0 {
            return;
        }
        let loss = LossEvent {
            lost_pkts: ce_pkts,
            lost_bytes: 0,
            in_flight_pkts: ack.in_flight_pkts,
            largest_lost_sent_time: ack.largest_acked_sent_time,
            delivered_pkts: ack.delivered_pkts,
        };
        self.on_loss(now, &loss, paths);
    }

    /// The transport measured `rtt` before any data was acknowledged (the
    /// DCCP Request/Response exchange, RFC 4340 §8.1.1; a TCP SYN/SYN-ACK).
    /// Call it once, before the first [`CongestionController::on_packet_sent`].
    /// Pacing controllers use it to pace the initial window over a round
    /// trip instead of bursting it (tcp_bbr.c `bbr_init_pacing_rate_from_rtt`
    /// reads the handshake's srtt); the default ignores it.
    fn on_initial_rtt(&mut self, _now: Instant, _rtt: Duration) {}

    /// True while the controller deliberately keeps the flight below what
    /// the path can carry (BBR's PROBE_RTT). After each acknowledgement the
    /// transport then calls [`DeliveryRateEstimator::on_app_limited`] with
    /// the packets in flight, so the low rate samples of this phase are
    /// marked application limited and cannot lower a bandwidth estimate
    /// (tcp_bbr.c `bbr_update_min_rtt` sets `tp->app_limited`).
    fn marks_app_limited(&self) -> bool {
        false
    }

    /// Whether `on_ack` and `on_loss` read their [`CoupledView`]. False
    /// lets the transport pass an empty view and skip building one per ack
    /// (uncoupled controllers ignore it).
    fn reads_coupled_view(&self) -> bool {
        true
    }

    /// Congestion window, whole packets (≥ the configured minimum).
    fn cwnd_pkts(&self) -> u32;

    /// Congestion window validation at `now` (RFC 7661, RFC 4341 §5.1; see
    /// [`validation`]): a controller idle for more than an RTO decays its
    /// window to its restart window. The transport calls it before it
    /// schedules and when its timers run, so the window it schedules by and
    /// the one status shows are both validated; sends check it as well.
    /// Default: nothing (the BBR family restarts from idle its own way).
    fn validate_window(&mut self, _now: Instant) {}

    /// RFC 7661 pipeACK at `now`, packets: what the path delivered per round
    /// trip over the last sampling period (`None`: no recent sample, or a
    /// controller without window validation).
    fn pipe_ack_pkts(&self, _now: Instant) -> Option<u64> {
        None
    }

    /// Pacing rate in bytes per second, or `None` if this controller does not
    /// pace. The transport releases packets no earlier than this allows.
    fn pacing_rate_bytes_per_s(&self) -> Option<u64> {
        None
    }

    /// Packets the pacer may release back to back (TSO-style send quantum).
    fn send_quantum_pkts(&self) -> u32 {
        1
    }

    /// Name of the current state ("slow_start", "congestion_avoidance",
    /// "startup", "probe_bw", ...).
    fn state(&self) -> &'static str;

    /// Slow-start threshold in packets, if the controller has one.
    fn ssthresh_pkts(&self) -> Option<u32> {
        None
    }

    /// What coupled peers read about this path.
    fn snapshot(&self, path: PathId, srtt: Duration, established: bool) -> CcSnapshot {
        let cwnd = self.cwnd_pkts() as f64;
        CcSnapshot {
            path,
            cwnd_pkts: cwnd,
            srtt,
            established,
            virtual_reno_cwnd_pkts: cwnd,
            ..CcSnapshot::default()
        }
    }
}
