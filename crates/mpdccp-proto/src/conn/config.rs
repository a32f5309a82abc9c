//! The settings a driver gives a [`super::Connection`] and its paths.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cc::{CcConfig, CcKind};
use crate::reorder::ReorderConfig;
use crate::sched::SchedulerConfig;
use crate::wire::WireProfile;

use super::aqm::CoDelConfig;
use super::queue::DropPolicy;
use super::SERVICE_CODE;

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
    /// Fill in the DCCP checksum of each unsealed packet sent (RFC 4340
    /// §9); false only where no one reads it: the simulator's links never
    /// corrupt a bit and its receivers do not verify (ns-3 leaves its
    /// checksums off by default too). The field is then zero.
    pub fill_checksums: bool,
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
            fill_checksums: true,
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
    /// [`TunnelSettings`](super::TunnelSettings)' `aqm`, is FQ-CoDel); RFC 8290 suggests 1024
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
