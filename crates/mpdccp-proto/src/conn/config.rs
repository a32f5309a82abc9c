//! The settings a driver gives a [`super::Connection`] and its paths.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cc::{CcConfig, CcKind};
use crate::reorder::{ReorderConfig, ReorderKind};
use crate::sched::{SchedulerConfig, SchedulerKind};
use crate::wire::WireProfile;

use super::aqm::CoDelConfig;
use super::queue::DropPolicy;
use super::{DATA_HEADER_MAX, SERVICE_CODE};

/// Default bound of the send queue in front of the scheduler, packets.
pub const DEFAULT_SEND_QUEUE_PKTS: usize = 1000;
/// Default bound of the same queue, bytes.
pub const DEFAULT_SEND_QUEUE_BYTES: usize = 2_000_000;
/// Buckets of the send queue's flow queues when on (RFC 8290 §5.1).
pub const DEFAULT_SEND_QUEUE_FLOWS: usize = super::fq::DEFAULT_FLOWS;
/// Default largest DCCP packet, bytes.
pub const DEFAULT_MSS_BYTES: u32 = 1500;

/// Connection settings, in parts that belong together. Build with
/// `ConnectionConfig { loss: LossConfig { fail_after_rtos: 5, ..Default::default() },
/// ..Default::default() }`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionConfig {
    /// Congestion control of every subflow; the factory of its controllers.
    pub cc: CcKind,
    pub cc_config: CcConfig,
    pub scheduler: SchedulerConfig,
    pub reorder: ReorderConfig,
    /// Largest DCCP packet (header + tunnelled packet), bytes.
    pub mss_bytes: u32,
    /// Queue-delay bound on each subflow's usable window, every controller
    /// (`conn/subflow/delay_bound.rs`): in flight at most the max-filtered
    /// delivery rate × (min RTT + target); the value is the target, zero =
    /// `min_rtt / 4` within 1–5 ms. None = the controller's window alone.
    pub window_delay_bound: Option<Duration>,
    /// DPLPMTUD (RFC 8899) on every subflow (`conn/plpmtu.rs`); `None` =
    /// off, every path assumed to carry `mss_bytes` (the simulator's
    /// default, so published results stay as they were).
    pub plpmtud: Option<super::PlpmtudConfig>,
    /// false = plain single-path DCCP (no Multipath Capable feature).
    pub multipath: bool,
    /// Verify DCCP checksums when the path's addresses are known.
    pub verify_checksums: bool,
    pub service_code: u32,
    /// Data packets of equal size `poll_transmit` may batch for one path
    /// (UDP GSO); 1 = one datagram per `Transmit`.
    pub max_gso_segments: usize,
    /// Authenticated mode only: seal every data payload per path with the
    /// handshake's payload keys (docs/SECURITY.md §5).
    pub protect_payload: bool,
    /// Layout of option 46 and the join/address derivations this
    /// connection speaks (`wire/profile.rs`): RFC 9897 by default, or a
    /// reference kernel's (docs/INTEROP.md) to interoperate with it.
    pub wire_profile: WireProfile,
    /// The send queue in front of the scheduler.
    pub send_queue: SendQueueConfig,
    /// Loss handling: RTO, path failure and probing, retransmission.
    pub loss: LossConfig,
    /// Sequence window and acknowledgements (RFC 4340 §7.5, RFC 4341 §6).
    pub ack: AckConfig,
    /// Path management and MP options (RFC 9897 §3).
    pub mp: MpConfig,
    /// Handshake, idle and close timers of the connection and its paths.
    pub lifetime: LifetimeConfig,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            cc: CcKind::default(),
            cc_config: CcConfig::default(),
            scheduler: SchedulerConfig::default(),
            reorder: ReorderConfig::default(),
            mss_bytes: DEFAULT_MSS_BYTES,
            window_delay_bound: None,
            plpmtud: None,
            multipath: true,
            verify_checksums: true,
            service_code: SERVICE_CODE,
            max_gso_segments: 1,
            protect_payload: false,
            wire_profile: WireProfile::Rfc9897,
            send_queue: SendQueueConfig::default(),
            loss: LossConfig::default(),
            ack: AckConfig::default(),
            mp: MpConfig::default(),
            lifetime: LifetimeConfig::default(),
        }
    }
}

/// The bounded send queue in front of the scheduler (`conn/queue.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct SendQueueConfig {
    /// Bound in packets.
    pub pkts: usize,
    /// Bound in bytes.
    pub bytes: usize,
    pub drop_policy: DropPolicy,
    /// Packets that waited longer than this in the send queue are dropped
    /// before they are scheduled (none = no age limit).
    pub max_delay: Option<Duration>,
    /// CoDel (RFC 8289) on the send queue (none = off; `conn/aqm.rs`).
    pub codel: Option<CoDelConfig>,
    /// Flow queuing (FQ-CoDel, RFC 8290; `conn/fq.rs`): the send queue
    /// becomes this many hash buckets of inner flows (5-tuple), served by
    /// deficit round robin (quantum `mss_bytes`) with new, sparse flows
    /// first; each flow has its own CoDel with `codel`'s parameters, and a
    /// full queue drops the fattest flow's head instead of `drop_policy`.
    /// 0 = one FIFO (the core's default; a tunnel's default,
    /// [`TunnelSettings`]' `aqm`, is FQ-CoDel); RFC 8290 suggests 1024
    /// ([`DEFAULT_SEND_QUEUE_FLOWS`]).
    pub flows: usize,
    /// The flow queues' DRR quantum, bytes (RFC 8290 §4.2); 0 = one
    /// full-sized packet (`mss_bytes`, the RFC's choice). A larger one
    /// serves a bulk flow in longer runs (a TSO frame's segments stay
    /// together, so the receiver's TUN coalescing still merges them) at the
    /// cost of coarser sharing among backlogged flows.
    pub flow_quantum: usize,
}

impl Default for SendQueueConfig {
    fn default() -> Self {
        SendQueueConfig {
            pkts: DEFAULT_SEND_QUEUE_PKTS,
            bytes: DEFAULT_SEND_QUEUE_BYTES,
            drop_policy: DropPolicy::DropNewest,
            max_delay: None,
            codel: None,
            flows: 0,
            flow_quantum: 0,
        }
    }
}

/// Loss handling: the RTO, when a path counts as failed and how it is
/// probed back, and what is done about lost data.
#[derive(Clone, Debug, PartialEq)]
pub struct LossConfig {
    /// RTO before the first RTT sample (RFC 6298 §2.1 says 1 s).
    pub initial_rto: Duration,
    /// Consecutive RTOs before a path is reported failed when it is the
    /// only usable path.
    pub fail_after_rtos: u32,
    /// As `fail_after_rtos` while another path is up: failing over early
    /// costs little when traffic has somewhere to go (handover).
    pub fail_after_rtos_with_backup: u32,
    /// Largest interval between probes of a failed path.
    pub max_probe_interval: Duration,
    /// The first probe of a path failed by an RTO one un-backed-off RTO
    /// after the failure, not the doubled one (the published simulations
    /// ran without). The daemon sets it: a path a forged packet disturbed
    /// or a short outage took comes back one backoff sooner.
    /// One Sync per RTO (at least 200 ms) is within RFC 4340 §7.5.4.
    pub first_probe_at_base_rto: bool,
    /// Connection-level retransmission of packets a subflow declared lost
    /// (`conn/retransmit.rs`); none = off (the core's default).
    pub retransmit: Option<super::RetransmitConfig>,
    /// Random-loss tolerance (`conn/subflow/ccid2.rs`, Veno's test): a loss
    /// while the path's estimated backlog is below this many packets is not
    /// passed to the controller as congestion; none = every loss is.
    pub random_loss_backlog_pkts: Option<f64>,
}

impl Default for LossConfig {
    fn default() -> Self {
        LossConfig {
            initial_rto: Duration::from_secs(1),
            fail_after_rtos: 3,
            fail_after_rtos_with_backup: 1,
            max_probe_interval: Duration::from_secs(1),
            first_probe_at_base_rto: false,
            retransmit: None,
            random_loss_backlog_pkts: None,
        }
    }
}

/// Sequence validity and acknowledgements (RFC 4340 §7.5, §11; RFC 4341 §6).
#[derive(Clone, Debug, PartialEq)]
pub struct AckConfig {
    /// Sequence Window (RFC 4340 §7.5.2), packets. Must exceed the largest
    /// congestion window plus reordering, or valid packets trigger Syncs.
    pub seq_window_pkts: u64,
    /// Largest Ack Ratio asked of the peer (RFC 4341 §6.1.2 default 2).
    pub ratio: u32,
    /// Delayed-acknowledgement timer for fewer than Ack Ratio packets.
    pub delay: Duration,
    /// Sequence numbers an Ack Vector covers at most.
    pub ackvec_cover_pkts: u64,
}

impl Default for AckConfig {
    fn default() -> Self {
        AckConfig {
            seq_window_pkts: 10_000,
            ratio: 2,
            delay: Duration::from_millis(10),
            ackvec_cover_pkts: 64,
        }
    }
}

/// Path management and the MP options (RFC 9897 §3).
#[derive(Clone, Debug, PartialEq)]
pub struct MpConfig {
    /// Most subflows at once; a join beyond gets Reset 9 ("too busy").
    pub max_paths: usize,
    /// Retransmission interval of unconfirmed MP_ADDADDR/REMOVEADDR/PRIO.
    pub option_rto: Duration,
    /// Transmissions of MP_ADDADDR/REMOVEADDR/PRIO before giving up.
    pub option_max_tries: u32,
    /// Interval between MP_RTT reports on a busy path.
    pub rtt_interval: Duration,
    /// First MP_SEQ to send; `None` = random 48-bit value (RFC 9897 §3.2.5).
    pub initial_seq: Option<u64>,
    /// MP_SEQ more than this far ahead of the highest seen is implausible
    /// (dropped and counted) unless a run of consistent packets confirms
    /// the jump; keeps one forged MP_SEQ from pushing the reorderer ahead.
    pub max_seq_jump: u64,
}

impl Default for MpConfig {
    fn default() -> Self {
        MpConfig {
            max_paths: 8,
            option_rto: Duration::from_millis(300),
            option_max_tries: 10,
            rtt_interval: Duration::from_millis(500),
            initial_seq: None,
            max_seq_jump: 8192,
        }
    }
}

/// Timers of the connection's and its paths' lifetime: handshake and close
/// retransmission, liveness probes, idle expiry, TIMEWAIT.
#[derive(Clone, Debug, PartialEq)]
pub struct LifetimeConfig {
    /// First retransmission interval of Request, PARTOPEN Ack and Close
    /// (doubles each try; RFC 4340 §8.1.1).
    pub handshake_rto: Duration,
    /// Transmissions of Request / PARTOPEN Ack / Close before giving up.
    pub max_handshake_tries: u32,
    /// A server subflow stuck in RESPOND (no Ack to its Response) is
    /// dropped after this long (RFC 4340 §8.1.3 allows up to 4 MSL); bounds
    /// half-open state under Request floods.
    pub respond_timeout: Duration,
    /// Fresh path estimates: a usable subflow with nothing in
    /// flight and no RTT sample for this long is probed with a Sync (its
    /// SyncAck, sent at once by the peer, gives an RTT sample), again every
    /// interval while it idles; and a sample arriving after such a gap
    /// restarts SRTT/RTTVAR (RFC 6298 §2.2), since the queue the old
    /// estimate saw has drained. Without it a path whose SRTT a bulk
    /// transfer inflated keeps that SRTT for as long as the scheduler
    /// sends it nothing, and light traffic goes to the slower path.
    /// `None` = neither.
    pub rtt_probe_interval: Option<Duration>,
    /// A subflow from which nothing valid arrived for this long is probed
    /// with a Sync (the peer answers SyncAck), again every interval, so a
    /// quiet but working path (a standby, or one direction idle) proves it
    /// is alive. `None` = no keepalives.
    pub keepalive_interval: Option<Duration>,
    /// A subflow silent (nothing valid received, keepalives unanswered)
    /// for this long while another subflow of the connection is heard from
    /// is expired: closed without a handshake and forgotten, so a peer that
    /// lost an interface without telling us (no MP_REMOVEADDR) does not
    /// hold a path slot. `None` = never.
    pub path_idle_timeout: Option<Duration>,
    /// The whole connection is closed when nothing valid arrived on any
    /// subflow for this long. `None` = never.
    pub idle_timeout: Option<Duration>,
    /// Time in TIMEWAIT (RFC 4340 says 2 MSL; a tunnel uses much less).
    pub timewait: Duration,
    /// A CLOSED subflow stays in the path table this long (to answer a
    /// retransmitted Close, and for status) before it is forgotten and its
    /// slot reused.
    pub closed_path_linger: Duration,
}

impl Default for LifetimeConfig {
    fn default() -> Self {
        LifetimeConfig {
            handshake_rto: Duration::from_millis(500),
            max_handshake_tries: 7,
            respond_timeout: Duration::from_secs(30),
            rtt_probe_interval: Some(Duration::from_secs(1)),
            keepalive_interval: None,
            path_idle_timeout: None,
            idle_timeout: None,
            timewait: Duration::from_secs(1),
            closed_path_linger: Duration::from_secs(1),
        }
    }
}

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
            delay_aware_spill: true,
            window_delay_bound: true,
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
    /// [`DEFAULT_MSS_BYTES`] when the size is unknown. Every other field
    /// keeps the core's default; a driver sets its own (timers, checksums,
    /// GSO) on top.
    pub fn connection_config(&self, largest_packet_bytes: usize) -> ConnectionConfig {
        let d = ConnectionConfig::default();
        let mut cc_config = d.cc_config.clone();
        cc_config.cwnd_validation = self.cwnd_validation;
        cc_config.cwnd_validation_peak = self.cwnd_validation_peak;
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

/// Which end of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Per-path settings given by the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathConfig {
    /// MP_PRIO (see [`crate::path::priority`]).
    pub priority: u8,
    /// Local address: source of checksums' pseudo-header, pcap, ADDADDR.
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
}

impl Default for PathConfig {
    fn default() -> Self {
        PathConfig {
            priority: crate::path::priority::PRIMARY,
            local: None,
            remote: None,
        }
    }
}
