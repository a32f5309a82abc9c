//! The tunnel's settings as users write them (a scenario's or a daemon's
//! `[tunnel]` table) and their one translation into the
//! [`ConnectionConfig`] every driver runs.

use std::time::Duration;

use crate::cc::CcKind;
use crate::reorder::{ReorderConfig, ReorderKind};
use crate::sched::{SchedulerConfig, SchedulerKind};

use super::aqm::CoDelConfig;
use super::config::{
    ConnectionConfig, LossConfig, SendQueueConfig, DEFAULT_SEND_QUEUE_BYTES,
    DEFAULT_SEND_QUEUE_FLOWS, DEFAULT_SEND_QUEUE_PKTS,
};
use super::DATA_HEADER_MAX;

/// The tunnel's settings as a user writes them: a scenario's `[tunnel]`
/// section and the daemons' `[tunnel]` table. The simulator, the daemon and
/// the testbed all turn them into a [`ConnectionConfig`] with
/// [`TunnelSettings::connection_config`]; the defaults here are the ones of
/// every driver.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(deny_unknown_fields, default)
)]
pub struct TunnelSettings {
    /// Per-subflow congestion control.
    pub cc: CcKind,
    /// Scheduler.
    pub scheduler: SchedulerKind,
    /// Receiver reordering.
    pub reorder: ReorderKind,
    /// Reordering timeout, ms (fixed, or the start value of the adaptive
    /// strategies); none = [`crate::reorder::DEFAULT_TIMEOUT`].
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub reorder_timeout_ms: Option<f64>,
    /// Per-path weights for the `ratio` scheduler, in path order.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub weights: Vec<u32>,
    /// Bounded send queue in front of the scheduler, packets.
    pub send_queue_pkts: usize,
    /// Same queue's limit in bytes; none = [`DEFAULT_SEND_QUEUE_BYTES`].
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub send_queue_bytes: Option<usize>,
    /// Largest DCCP packet (tunnelled packet plus headers), bytes; none =
    /// derived (see [`TunnelSettings::connection_config`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mss_bytes: Option<u32>,
    /// `false`: plain single-path DCCP on the first path (no MP-DCCP feature).
    pub multipath: bool,
    /// Queue management of the send queue: `"fq_codel"` (RFC 8290: a
    /// queue and a CoDel per inner flow, so a small real-time flow does not
    /// wait behind a bulk one), `"codel"` (RFC 8289 on one FIFO) or
    /// `"none"` (one FIFO bounded by `send_queue_pkts`/`_bytes` only).
    pub aqm: Aqm,
    /// CoDel's target sojourn time, ms; default 15 (RFC 8289's 5 ms is
    /// sized for a router whose link holds the flows' queue; here the
    /// window delay bound keeps the link's queue at a few ms, so a bulk
    /// inner flow's standing queue, which it needs to stay busy across its
    /// backoff, waits in its own FQ-CoDel queue instead: 258 of 320
    /// scorecard cells against 247 with 5 ms, docs/AGGREGATION.md). With
    /// `fq_codel` per flow (RFC 8290 §5.1), so a real-time flow beside it
    /// does not wait behind that queue.
    pub codel_target_ms: f64,
    /// CoDel's interval, ms (RFC 8289 default 100, about a worst-case RTT).
    pub codel_interval_ms: f64,
    /// With `fq_codel`: bytes a backlogged flow sends per round (DRR
    /// quantum, RFC 8290 §4.2); 0 = one full-sized packet (the RFC's).
    pub fq_quantum_bytes: usize,
    /// Resend, once and under its MP_SEQ, a packet a subflow declared lost
    /// while it is at most `retransmit_max_age_ms` old, within
    /// `retransmit_budget_pct` of the data packets sent (`conn/retransmit.rs`,
    /// docs/AGGREGATION.md "Random loss").
    pub retransmit_lost: bool,
    /// Oldest packet (since first sent) `retransmit_lost` resends, ms.
    pub retransmit_max_age_ms: f64,
    /// Resent packets at most this percentage of the data packets sent.
    pub retransmit_budget_pct: f64,
    /// Veno's loss discrimination (Fu & Liew, IEEE JSAC 21(2), 2003): a
    /// loss while the path's backlog estimate cwnd·(RTT − minRTT)/RTT is
    /// under 3 packets is random, not congestion; the controller does not
    /// reduce for it.
    pub tolerate_random_loss: bool,
    /// Congestion window validation after idle periods (RFC 7661 / RFC
    /// 4341 §5.1, `cc::validation`); `false` pins the behaviour of results
    /// published before it (a window kept whole across any idle period).
    /// Written out only when off, so older results' settings are unchanged.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_true"))]
    pub cwnd_validation: bool,
    /// With `cwnd_validation`: the restart window after idle is
    /// 2 · the peak pipeACK of the last 5 min (RFC 7661 §4.1's validated
    /// window, `cc::validation`) instead of the last three samples'
    /// pipeACK. A video keyframe after a pause then leaves at once (the
    /// real tunnel's video: after-idle p99 119 → 88–90 ms); off by default
    /// because it costs the simulator's lossy/quic/lia cell (0.98 → 0.87
    /// of the best path, docs/AGGREGATION.md). Written out only when on.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_false"))]
    pub cwnd_validation_peak: bool,
    /// Every path controller's initial window, packets (also the restart
    /// window after idle, RFC 5681 §4.1 / RFC 7661); unset = each
    /// controller's own (RFC 3390's 3 packets of ~1400 bytes for CCID2,
    /// CUBIC and the coupled ones, 10 for the BBR family). Written out
    /// only when set.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub initial_cwnd_pkts: Option<u32>,
    /// `acpf`: check, before spilling a packet to a slower path beyond its
    /// effective window, that it arrives there no later than by waiting for
    /// the fastest path (`sched/spill.rs`); `false` = spill blindly, as
    /// before. Written out only when off.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_true"))]
    pub delay_aware_spill: bool,
    /// Bound each subflow's window to its delivery rate × (min
    /// RTT + `window_delay_target_ms`), so the standing queue builds in the
    /// tunnel's send queue (its AQM) rather than in the path's buffer
    /// (`conn/subflow/delay_bound.rs`); with it `per-flow` reordering holds
    /// a one-path QUIC-like flow behind its own lone detour. The default
    /// since the aggregation scorecard showed no cell it loses (236 of 320
    /// cells against 209 without, docs/AGGREGATION.md). Written out only
    /// when off, so older results' settings are unchanged.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_true"))]
    pub window_delay_bound: bool,
    /// With `window_delay_bound` and `per-flow` reordering: an inner TCP
    /// flow spread over paths, with no loss seen for 30 s, is delivered no
    /// earlier than the slowest path it uses would deliver it (base
    /// delays), so the simulator's inner BBR sees one RTT and keeps the
    /// second path (`reorder/flow.rs`). Off by default: the receiver
    /// cannot tell a loss-based flow whose losses it does not see (the
    /// send queue's CoDel drops them), and kernel TCP CUBIC through the
    /// real tunnel lost up to 17 % with it, while kernel BBR gained
    /// nothing (docs/AGGREGATION.md "One RTT for a loss-free TCP flow").
    /// Written out only when on.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_false"))]
    pub equalise_tcp_delay: bool,
    /// The standing queue `window_delay_bound` tolerates on a path, ms;
    /// 0 = a quarter of the path's min RTT, within 1–5 ms. Written out only
    /// when set.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub window_delay_target_ms: f64,
}

#[cfg(feature = "serde")]
fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(feature = "serde")]
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

#[cfg(feature = "serde")]
fn is_true(b: &bool) -> bool {
    *b
}

/// Veno's backlog threshold β, packets (Fu & Liew 2003, §III).
pub const VENO_BACKLOG_PKTS: f64 = 3.0;

/// The `aqm` setting: what manages the send queue in front of the scheduler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Aqm {
    /// One FIFO, bounded in packets and bytes only (drop policy applies).
    None,
    /// CoDel (RFC 8289) on one FIFO.
    Codel,
    /// Flow queues with a CoDel each (RFC 8290).
    #[default]
    #[cfg_attr(feature = "serde", serde(rename = "fq_codel"))]
    FqCodel,
}

impl Aqm {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Aqm::None => "none",
            Aqm::Codel => "codel",
            Aqm::FqCodel => "fq_codel",
        }
    }
}

impl Default for TunnelSettings {
    /// The one set of defaults of the simulator, the testbed and the
    /// daemons, chosen with the aggregation benchmark (docs/AGGREGATION.md,
    /// "Defaults"): ACPF spills a bulk flow to a second path only when the
    /// first is full, so it aggregates without sending an inner flow over a
    /// much slower path early; `per-flow` reordering restores MP_SEQ order
    /// within an inner flow spread over paths, for at most the paths'
    /// delay difference, and never holds a flow that stays on one path
    /// (`passive` left a QUIC-like flow below one path's rate on two equal
    /// paths, every loss it saw spurious; a connection-level active
    /// strategy held the real-time flow behind the bulk flow's gaps, up to
    /// 17 × the faster path's RTT); FQ-CoDel keeps a small flow from
    /// waiting behind a bulk one in the send queue; tolerating random loss
    /// (a loss with no backlog does not cut the window) lifts every
    /// controller on the `lossy` mix and changes no other mix
    /// (docs/AGGREGATION.md "Random loss"); connection-level
    /// retransmission repairs a path's random loss within the time
    /// `per-flow` holds the gap, so the inner flow never sees it (with
    /// `passive` the inner flow had declared the loss before the repair
    /// arrived): the full matrix passes 204 of 320 cells with it, 193
    /// without, `lossy` TCP CUBIC through CCID2 0.98 × the best path
    /// instead of 0.56.
    fn default() -> Self {
        TunnelSettings {
            cc: CcKind::default(),
            scheduler: SchedulerKind::Acpf,
            reorder: ReorderKind::PerFlow,
            reorder_timeout_ms: None,
            weights: Vec::new(),
            send_queue_pkts: DEFAULT_SEND_QUEUE_PKTS,
            send_queue_bytes: None,
            mss_bytes: None,
            multipath: true,
            aqm: Aqm::FqCodel,
            codel_target_ms: 15.0,
            codel_interval_ms: 100.0,
            fq_quantum_bytes: 0,
            retransmit_lost: true,
            retransmit_max_age_ms: 50.0,
            retransmit_budget_pct: 5.0,
            tolerate_random_loss: true,
            cwnd_validation: true,
            cwnd_validation_peak: false,
            initial_cwnd_pkts: None,
            delay_aware_spill: true,
            window_delay_bound: true,
            equalise_tcp_delay: false,
            window_delay_target_ms: 0.0,
        }
    }
}

impl TunnelSettings {
    /// Checks the numbers; `paths` (when known) is the number of paths the
    /// `weights` must match.
    pub fn validate(&self, paths: Option<usize>) -> Result<(), String> {
        if let Some(t) = self.reorder_timeout_ms {
            if !(t.is_finite() && t >= 0.0) {
                return Err(format!("`reorder_timeout_ms` must be >= 0 (got {t})"));
            }
        }
        if let Some(n) = paths.filter(|&n| !self.weights.is_empty() && self.weights.len() != n) {
            return Err(format!(
                "`weights` has {} entries for {n} paths",
                self.weights.len()
            ));
        }
        if !self.weights.is_empty() && self.weights.iter().all(|&w| w == 0) {
            return Err("`weights` are all zero".into());
        }
        if let Some(iw) = self.initial_cwnd_pkts.filter(|&w| !(1..=1000).contains(&w)) {
            return Err(format!("`initial_cwnd_pkts` must be 1..=1000 (got {iw})"));
        }
        if self.send_queue_pkts == 0 {
            return Err("`send_queue_pkts` must be > 0".into());
        }
        if self.send_queue_bytes == Some(0) {
            return Err("`send_queue_bytes` must be > 0".into());
        }
        if self.mss_bytes.is_some_and(|m| !(100..=65_000).contains(&m)) {
            return Err("`mss_bytes` must be in 100..=65000".into());
        }
        let (target, interval) = (self.codel_target_ms, self.codel_interval_ms);
        if !(target.is_finite() && interval.is_finite() && target >= 0.0 && interval >= 1.0) {
            return Err(format!(
                "`codel_target_ms` must be >= 0 and `codel_interval_ms` >= 1 (got {target}, {interval})"
            ));
        }
        let (age, pct) = (self.retransmit_max_age_ms, self.retransmit_budget_pct);
        if !(age.is_finite() && pct.is_finite() && age >= 0.0 && (0.0..=100.0).contains(&pct)) {
            return Err(format!(
                "`retransmit_max_age_ms` must be >= 0 and `retransmit_budget_pct` in 0..=100 (got {age}, {pct})"
            ));
        }
        let w = self.window_delay_target_ms;
        if !(w.is_finite() && (0.0..=10_000.0).contains(&w)) {
            return Err(format!(
                "`window_delay_target_ms` must be in 0..=10000 (got {w})"
            ));
        }
        if self.fq_quantum_bytes > 1 << 20 {
            return Err("`fq_quantum_bytes` must be at most 1048576 (0 = one packet)".into());
        }
        Ok(())
    }

    /// The core's settings. `largest_packet_bytes` is the largest tunnelled
    /// packet (the daemon's TUN MTU, a scenario's largest tunnelled flow
    /// packet; 0 = unknown): the controllers count in packets of that size,
    /// and the largest DCCP packet is `mss_bytes` if set, else that packet
    /// plus the worst-case DCCP and MP option headers ([`DATA_HEADER_MAX`];
    /// on a daemon exactly the path MTU minus outer IP and UDP), or
    /// [`DEFAULT_MSS_BYTES`](super::DEFAULT_MSS_BYTES) when the size is unknown. Every other field
    /// keeps the core's default; a driver sets its own (timers, checksums,
    /// GSO) on top.
    pub fn connection_config(&self, largest_packet_bytes: usize) -> ConnectionConfig {
        let d = ConnectionConfig::default();
        let mut cc_config = d.cc_config.clone();
        cc_config.cwnd_validation = self.cwnd_validation;
        cc_config.cwnd_validation_peak = self.cwnd_validation_peak;
        cc_config.initial_cwnd_pkts = self.initial_cwnd_pkts.or(cc_config.initial_cwnd_pkts);
        let mut mss_bytes = d.mss_bytes;
        if largest_packet_bytes > 0 {
            cc_config.mss_bytes = u32::try_from(largest_packet_bytes).unwrap_or(u32::MAX);
            let need = largest_packet_bytes.saturating_add(DATA_HEADER_MAX);
            mss_bytes = u32::try_from(need).unwrap_or(u32::MAX);
        }
        // Unvalidated numbers (NaN, infinite) map to zero rather than panic.
        let ms = |ms: f64| Duration::try_from_secs_f64(ms / 1e3).unwrap_or(Duration::ZERO);
        let timeout = self.reorder_timeout_ms.map_or(Duration::ZERO, ms);
        ConnectionConfig {
            cc: self.cc,
            cc_config,
            scheduler: SchedulerConfig {
                kind: self.scheduler,
                weights: self.weights.clone(),
                acpf_blind_spill: !self.delay_aware_spill,
                ..SchedulerConfig::default()
            },
            reorder: ReorderConfig {
                kind: self.reorder,
                timeout,
                // Only with short path queues (`ReorderConfig::one_path_detours`).
                one_path_detours: self.window_delay_bound,
                // Base delays stand for the paths' delays only while their
                // queues are short.
                equalise_spread_tcp: self.equalise_tcp_delay && self.window_delay_bound,
                ..ReorderConfig::default()
            },
            mss_bytes: self.mss_bytes.unwrap_or(mss_bytes),
            multipath: self.multipath,
            window_delay_bound: self
                .window_delay_bound
                .then(|| ms(self.window_delay_target_ms.max(0.0))),
            send_queue: SendQueueConfig {
                pkts: self.send_queue_pkts,
                bytes: self.send_queue_bytes.unwrap_or(DEFAULT_SEND_QUEUE_BYTES),
                codel: (self.aqm != Aqm::None).then(|| CoDelConfig {
                    target: ms(self.codel_target_ms.max(0.0)),
                    interval: ms(self.codel_interval_ms.max(0.001)),
                }),
                flows: if self.aqm == Aqm::FqCodel {
                    DEFAULT_SEND_QUEUE_FLOWS
                } else {
                    0
                },
                flow_quantum: self.fq_quantum_bytes,
                ..SendQueueConfig::default()
            },
            loss: LossConfig {
                retransmit: self.retransmit_lost.then(|| super::RetransmitConfig {
                    max_age: ms(self.retransmit_max_age_ms.max(0.0)),
                    budget_pct: self.retransmit_budget_pct,
                    ..super::RetransmitConfig::default()
                }),
                random_loss_backlog_pkts: self.tolerate_random_loss.then_some(VENO_BACKLOG_PKTS),
                ..LossConfig::default()
            },
            ..d
        }
    }
}
