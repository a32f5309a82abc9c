//! Connections: the MP-DCCP meta connection (keys, connection identifiers,
//! MP_SEQ, address IDs) and its DCCP subflows (state machine, sequence
//! windows, feature negotiation, CCID2 ack machinery).
//!
//! # Contract
//!
//! A [`Connection`] is sans-IO. The driver
//!
//! 1. feeds inputs: [`Connection::handle_datagram`] (one DCCP packet, i.e. a
//!    UDP payload under RFC 6773), [`Connection::handle_timeout`] when
//!    [`Connection::poll_timeout`] is reached, [`Connection::send`] (one
//!    tunnelled IP packet) and path-manager commands (`add_path`,
//!    `remove_path`, `set_path_down`, `set_priority`, `advertise_address`);
//! 2. then drains outputs: [`Connection::poll_transmit`] until `None`,
//!    [`Connection::poll_event`] until `None`, and re-reads
//!    [`Connection::poll_timeout`].
//!
//! Every input carries `now`; randomness comes from the seed given to
//! [`Connection::new`]. Hostile input never panics: each rejected or dropped
//! packet bumps a counter in [`ConnStats`].
//!
//! # Protocol summary
//!
//! * First subflow (RFC 9897 §3.3): Request carries `Change L(Multipath
//!   Capable)` and MP_KEY (key type 0, 64-bit key, connection identifier);
//!   the Response confirms the feature and carries the server's MP_KEY; the
//!   client's Ack echoes both keys; the server's Ack completes the 4-way
//!   handshake (client PARTOPEN → OPEN). If the server does not confirm
//!   feature 10 the connection falls back to plain single-path DCCP.
//! * Joins (RFC 9897 §3.2.2): Request with MP_JOIN (path token = the peer's
//!   CI, nonce RA); Response with MP_JOIN (nonce RB) and
//!   MP_HMAC = HMAC-SHA256(d-keyB, RB‖RA)[..20]; Ack with
//!   MP_HMAC = HMAC(d-keyA, RA‖RB)[..20]. An unknown token is answered with
//!   Reset (No Connection), a bad HMAC closes the subflow with Reset
//!   (Option Error), more than `max_paths` subflows with Reset 9 (Too Busy).
//! * Data: the scheduler picks path(s) for the head of the bounded send
//!   queue; MP_SEQ is assigned then, in application order, starting from a
//!   random 48-bit value and wrapping at 2^48. The receiver unwraps MP_SEQ to
//!   64 bits and hands packets to the reorderer.
//! * CCID2 per subflow (RFC 4341): Ack Vectors, Ack Ratio ≤ ceil(cwnd/2),
//!   loss when three later packets are acknowledged, RTO with a 200 ms floor.
//! * Path life cycle: `set_path_down` closes a subflow at once and tells the
//!   peer with MP_REMOVEADDR (RFC 9897 §3.2.9; address id 0 for the initial
//!   subflow, the MP_JOIN id otherwise) over the remaining subflows; the
//!   peer closes every subflow bound to that address (each authenticated
//!   (id, nonce) acted on once). Optional `keepalive_interval` probes silent
//!   subflows with Sync, `path_idle_timeout` expires a silent subflow while
//!   another is heard from, `idle_timeout` closes a silent connection.
//!   Closed subflows are forgotten after `closed_path_linger`, so a path
//!   that rejoins under a new `PathId` reuses the `max_paths` slot.

use std::collections::VecDeque;
use std::net::SocketAddr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cc::ControllerFactory;
use crate::path::{PathId, PathView};
use crate::reorder::{self, Reorder, ReorderItem};
use crate::sched::{self, PacketMeta, Scheduler};
use crate::time::Instant;

pub mod ackvec;
mod adverts;
mod aqm;
mod authn;
pub mod codec;
mod config;
mod ecn;
mod endpoint;
mod features;
mod fleet;
mod fq;
mod handshake;
mod identity;
mod incoming;
pub mod keys;
mod lifecycle;
mod liveness;
mod numbering;
mod plpmtu;
mod protection;
mod queue;
mod queued;
mod recv;
#[cfg(test)]
mod recv_path_tests;
mod retransmit;
mod schedule;
mod scratch;
pub mod seq;
mod stats;
mod subflow;
mod timer;
mod tunnel_settings;

pub use crate::wire::WireProfile;
pub use aqm::CoDelConfig;
pub use authn::AuthStats;
pub use codec::PacketType;
pub use config::{
    AckConfig, ConnectionConfig, LifetimeConfig, LossConfig, MpConfig, PathConfig, Role,
    SendQueueConfig, DEFAULT_MSS_BYTES, DEFAULT_SEND_QUEUE_BYTES, DEFAULT_SEND_QUEUE_FLOWS,
    DEFAULT_SEND_QUEUE_PKTS,
};
pub use endpoint::{ConnectionHandle, Endpoint, EndpointConfig, EndpointStats};
pub use incoming::Incoming;
pub use plpmtu::{
    PlpmtuState, PlpmtuStats, PlpmtudConfig, BASE_PLPMTU_IPV4, BASE_PLPMTU_IPV6, MAX_PROBES,
    PMTU_RAISE_TIMER, PROBE_TIMER,
};
pub use protection::PROTECTION_OVERHEAD;
pub use queue::DropPolicy;
pub use retransmit::RetransmitConfig;
pub use stats::{
    AuthRejects, ConnStats, LossStats, PathEvents, ReceiveRejects, SendQueueStats, TrafficStats,
};
pub use subflow::loss_window::{WindowedLoss, LOSS_WINDOW};
pub use subflow::PathStats;
pub use timer::ConnTimer;
pub use tunnel_settings::{Aqm, TunnelSettings};

use crate::wire::mp::subtype as mp;
use crate::wire::option::kind as opt;
use crate::wire::{FeatureNum, ResetCode, WireError};
use adverts::AddrBook;
use authn::AuthRole;
use codec::{ConfirmItem, KeyOffer, MpAddAddr, MpRemoveAddr, Segment};
use identity::Identity;
use keys::ConnKeys;
use lifecycle::{ConnLifecycle, ConnState};
use numbering::{Numbering, Received};
use queue::{PushOutcome, SendQueue};
use queued::Queued;
use seq::SEQ_MASK;
use subflow::{Fired, SubState, Subflow, TimerCtx};
use timer::{Earliest, TimerSink, TimerTable};

/// Service Code carried in Requests (RFC 4340 §8.1.2): ASCII "MPDC".
pub const SERVICE_CODE: u32 = 0x4D50_4443;

/// Upper bound of the DCCP header on a data packet built by this crate,
/// guaranteed when each data packet is built (`conn/subflow/data_header.rs`): the
/// generic header with the acknowledgement sub-header (24), MP_SEQ (9, RFC
/// 9897 §3.2.5 requires it on every data packet) and an Ack Vector of up to
/// 21 cells, or MP_RTT and an Ack Ratio change next to a short one. What
/// does not fit waits for a pure Ack; an Ack Vector that does not fit is
/// never cut (RFC 4340 §11.4): the data goes as DCCP-Data and the
/// acknowledgement on its own. `mss_bytes` minus this is the largest
/// tunnelled packet [`Connection::send`] accepts.
pub const DATA_HEADER_MAX: usize = 56;

/// MP_REMOVEADDR (id, nonce) pairs remembered against replays.
const REMOVEADDR_SEEN_MAX: usize = 256;
/// Recycled receive buffers kept (more are freed): enough for a burst.
const RX_POOL_MAX: usize = 64;

/// Output of [`Connection::poll_transmit`]: `buf[..size]` holds one datagram
/// for `path`, or several of `segment_size` bytes each (a GSO batch; the
/// last may be shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub size: usize,
    pub segment_size: Option<usize>,
}

/// What happened, for the application / driver.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The first subflow reached OPEN.
    Connected,
    /// A subflow reached OPEN, or came back after having failed.
    PathEstablished(PathId),
    /// A subflow could not be established, was refused, or is failing
    /// (repeated timeouts; it may come back with `PathEstablished`).
    PathFailed(PathId),
    /// A subflow is closed for good.
    PathClosed(PathId),
    /// A tunnelled packet, unchanged, with its (unwrapped) MP_SEQ.
    Delivered { seq: u64, data: Vec<u8> },
    /// The connection is closed; no more events follow.
    Closed { reason: String },
    /// The peer advertised an address (MP_ADDADDR, HMAC verified).
    AddressAdded { id: u8, addr: SocketAddr },
    /// The peer withdrew an address (MP_REMOVEADDR, HMAC verified).
    AddressRemoved { id: u8 },
    /// The peer confirmed our MP_ADDADDR / MP_REMOVEADDR with this id.
    AddressConfirmed { id: u8 },
    /// The peer set a path's priority (MP_PRIO).
    PriorityChanged { path: PathId, priority: u8 },
    /// The smallest PLPMTU (DCCP packet bytes, RFC 8899) across the open
    /// subflows changed, prompted by `path` ([`Connection::plpmtu`]).
    PlpmtuChanged { path: PathId, plpmtu: u32 },
}

/// Errors of path-manager commands.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    #[error("path {0} already exists")]
    PathExists(PathId),
    #[error("no such path {0}")]
    UnknownPath(PathId),
    #[error("too many paths (max {0})")]
    TooManyPaths(usize),
    #[error("multipath was not negotiated (plain DCCP fallback)")]
    NotMultipath,
    #[error("the connection is not established yet")]
    NotEstablished,
    #[error("the connection is closing or closed")]
    Closed,
    #[error("only the client opens subflows")]
    WrongRole,
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Errors of [`Connection::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("the connection is closing or closed")]
    Closed,
    #[error("send queue full; packet dropped")]
    QueueFull,
    #[error("packet larger than the path MSS allows")]
    TooLarge,
}

/// What the first subflow's handshake agreed (RFC 9897 §3.3: without the
/// peer's Confirm of Multipath Capable the connection is plain DCCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Negotiation {
    /// The first subflow has not negotiated yet.
    Pending,
    Multipath,
    /// Fallback to single-path DCCP.
    PlainDccp,
}

impl Negotiation {
    fn agreed(multipath: bool) -> Self {
        if multipath {
            Negotiation::Multipath
        } else {
            Negotiation::PlainDccp
        }
    }
    fn is_multipath(self) -> bool {
        self == Negotiation::Multipath
    }
    fn is_pending(self) -> bool {
        self == Negotiation::Pending
    }
    /// `Some(true)` multipath, `Some(false)` plain DCCP, `None` pending.
    fn as_option(self) -> Option<bool> {
        match self {
            Negotiation::Pending => None,
            Negotiation::Multipath => Some(true),
            Negotiation::PlainDccp => Some(false),
        }
    }
}

/// One MP-DCCP connection with its subflows.
pub struct Connection {
    role: Role,
    config: ConnectionConfig,
    rng: ChaCha8Rng,
    /// State, close reason, once-only events (`lifecycle.rs`).
    life: ConnLifecycle,
    /// Sorted by id.
    paths: Vec<Subflow>,
    scheduler: Box<dyn Scheduler>,
    reorder: Box<dyn Reorder>,
    queue: SendQueue,
    /// Multipath or plain DCCP, once the first subflow negotiated it.
    negotiation: Negotiation,
    /// Keys and connection identifiers (`identity.rs`).
    ident: Identity,
    /// MP_SEQ sent and received (`numbering.rs`).
    numbering: Numbering,
    /// Our advertised and the peer's addresses (`adverts.rs`).
    addrs: AddrBook,
    events: VecDeque<Event>,
    stats: ConnStats,
    /// Buffers reused between calls (`scratch.rs`).
    scratch: scratch::Scratch,
    rr_next: usize,
    /// Latest `now` seen on any input (timers in the past are not re-armed).
    last_now: Instant,
    /// A datagram built for a GSO batch that did not match its segment size.
    held: Option<(PathId, usize)>,
    /// The last `poll_transmit`'s `None` found every path blocked
    /// ([`Connection::repoll_would_idle`]): its instant and the count of
    /// packets dropped for room then. Every input but `send` clears it
    /// (a datagram, a timer, a path or close call may free a window).
    blocked_none: Option<(Instant, u64)>,
    /// Connection-level retransmission (`retransmit.rs`); none when off.
    retx: Option<retransmit::RetransmitStore>,
    /// Payload protection (`protection.rs`); `None` = payload in clear.
    protection: Option<Box<protection::Protection>>,
    /// Open mode (key type 0) or the authenticated handshake's side.
    auth: AuthRole,
    auth_stats: AuthStats,
    /// The smallest PLPMTU, and the smallest converged one
    /// ([`Connection::plpmtu_converged`]), when [`Event::PlpmtuChanged`]
    /// was last emitted (a change of either emits it).
    plpmtu_reported: (Option<u32>, Option<u32>),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.role)
            .field("state", &self.life.state())
            .field("negotiation", &self.negotiation)
            .field("paths", &self.paths.len())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A new connection (the configuration is typed: nothing to reject).
    pub fn new(role: Role, config: ConnectionConfig, now: Instant, seed: u64) -> Connection {
        Self::try_new(role, config, now, seed).expect("a typed configuration is valid")
    }

    /// As [`Connection::new`], for drivers that report configuration errors.
    pub fn try_new(
        role: Role,
        config: ConnectionConfig,
        _now: Instant,
        seed: u64,
    ) -> Result<Connection, ConnError> {
        let scheduler = sched::build(&config.scheduler);
        let reorder = reorder::build(&config.reorder);
        let retx = config.loss.retransmit.map(retransmit::RetransmitStore::new);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let local_key: [u8; 8] = rng.gen();
        let local_ci: u32 = rng.gen::<u32>().max(1);
        let next_mp_seq = config
            .mp
            .initial_seq
            .map_or_else(|| rng.gen::<u64>() & SEQ_MASK, |s| s & SEQ_MASK);
        Ok(Connection {
            role,
            queue: SendQueue::new(
                config.send_queue.pkts,
                config.send_queue.bytes,
                config.send_queue.drop_policy,
            )
            .with_time_limits(config.send_queue.max_delay, config.send_queue.codel)
            // The hash key: from the seed, without drawing from `rng` (the
            // simulator's runs stay as they were).
            .with_flow_queues(
                config.send_queue.flows,
                match config.send_queue.flow_quantum {
                    0 => config.mss_bytes as usize,
                    q => q,
                },
                seed ^ 0x6671_5f63_6f64_656c,
            ),
            config,
            rng,
            life: ConnLifecycle::default(),
            paths: Vec::new(),
            scheduler,
            reorder,
            negotiation: Negotiation::Pending,
            ident: Identity::new(local_key, local_ci),
            numbering: Numbering::new(next_mp_seq),
            addrs: AddrBook::default(),
            events: VecDeque::new(),
            stats: ConnStats::default(),
            rr_next: 0,
            last_now: Instant::ZERO,
            held: None,
            blocked_none: None,
            retx,
            scratch: scratch::Scratch::default(),
            protection: None,
            auth: AuthRole::Off,
            auth_stats: AuthStats::default(),
            plpmtu_reported: (None, None),
        })
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Our connection identifier (the token peers put in MP_JOIN).
    pub fn local_ci(&self) -> u32 {
        self.ident.local_ci
    }
    /// A fleet host's endpoint puts its host id in the CI before the
    /// first datagram (`fleet.rs`).
    pub(super) fn set_local_ci(&mut self, ci: u32) {
        self.ident.local_ci = ci;
    }
    /// The identifier a join to this connection names in its MP_JOIN (a
    /// server routes joins by it): the server's CI (RFC 9897 §3.2.2), or
    /// with the k5.10 reference profile the server's token, known once
    /// both keys are (docs/INTEROP.md).
    pub fn join_token(&self) -> u32 {
        self.join_ids().0
    }
    /// The peer's connection identifier, once known.
    pub fn remote_ci(&self) -> Option<u32> {
        self.ident.remote_ci
    }
    /// `Some(true)` multipath, `Some(false)` plain-DCCP fallback, `None`
    /// not negotiated yet.
    pub fn is_multipath(&self) -> Option<bool> {
        self.negotiation.as_option()
    }
    /// The configuration in force.
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// Client: opens a subflow on `id` (the first one runs the MP_KEY
    /// handshake, later ones MP_JOIN). Server: normally not needed — a
    /// Request on an unknown path creates it.
    pub fn add_path(&mut self, now: Instant, id: PathId, cfg: PathConfig) -> Result<(), ConnError> {
        self.blocked_none = None;
        if self.life.is_closing_or_closed() {
            return Err(ConnError::Closed);
        }
        if self.role != Role::Client {
            return Err(ConnError::WrongRole);
        }
        if let Some(i) = self.idx(id) {
            if !self.paths[i].is_gone() {
                return Err(ConnError::PathExists(id));
            }
            // A closed path id may be reopened (e.g. an interface came back).
            self.paths.remove(i);
        }
        let first = self.paths.is_empty() && self.negotiation.is_pending();
        if !first {
            match self.negotiation {
                Negotiation::Multipath => {}
                Negotiation::PlainDccp => return Err(ConnError::NotMultipath),
                Negotiation::Pending => return Err(ConnError::NotEstablished),
            }
            if self.live_paths() >= self.config.mp.max_paths {
                return Err(ConnError::TooManyPaths(self.config.mp.max_paths));
            }
        }
        let mut sf = self.new_subflow(id, cfg);
        let nonce = self.rng.gen::<u32>().max(1);
        let addr_id = self.alloc_addr_id();
        sf.start_request(now, !first, nonce, addr_id);
        self.insert_path(sf);
        Ok(())
    }

    /// Graceful close of one subflow (DCCP-Close without MP_CLOSE).
    pub fn remove_path(&mut self, now: Instant, id: PathId) {
        self.blocked_none = None;
        let Some(i) = self.idx(id) else { return };
        self.begin_subflow_close(now, i);
        self.reinject(i);
    }

    /// The interface is gone: stop using the path at once, re-queue what
    /// was waiting for it, and forget it without a closing handshake. The
    /// peer is told over the remaining subflows with MP_REMOVEADDR for the
    /// path's address id (RFC 9897 §3.2.9), so it closes its side at once
    /// instead of holding the subflow (and a `max_paths` slot).
    pub fn set_path_down(&mut self, now: Instant, id: PathId) {
        self.blocked_none = None;
        let Some(i) = self.idx(id) else { return };
        let sf = &self.paths[i];
        let peer_knows = sf.peer_knows_us();
        let was_gone = sf.is_gone();
        // The initial subflow's address is id 0 (it carried MP_KEY, not
        // MP_JOIN); joins announced their own id.
        let addr_id = if sf.is_join() { sf.local_addr_id() } else { 0 };
        self.drop_subflow(now, i);
        if peer_knows
            && !was_gone
            && self.life.state() == ConnState::Established
            && self.negotiation.is_multipath()
        {
            self.withdraw_path_address(now, addr_id);
        }
        self.check_closed();
    }

    /// Queues one tunnelled IP packet.
    pub fn send(&mut self, now: Instant, packet: &[u8]) -> Result<(), SendError> {
        if self.life.is_closing_or_closed() {
            self.stats.send_queue.send_rejected_closed += 1;
            return Err(SendError::Closed);
        }
        if packet.len() + DATA_HEADER_MAX + self.payload_overhead() > self.config.mss_bytes as usize
        {
            self.stats.send_queue.send_rejected_too_large += 1;
            return Err(SendError::TooLarge);
        }
        match self.queue.push(now, packet) {
            PushOutcome::Queued => Ok(()),
            PushOutcome::QueuedDroppedOldest(n) => {
                self.stats.send_queue.send_queue_dropped_oldest += n as u64;
                Ok(())
            }
            PushOutcome::DroppedFattest { dropped, queued } => {
                self.stats.send_queue.send_queue_dropped_fattest += dropped as u64;
                if queued {
                    Ok(())
                } else {
                    self.stats.send_queue.send_queue_dropped_newest += 1;
                    Err(SendError::QueueFull)
                }
            }
            PushOutcome::Rejected => {
                self.stats.send_queue.send_queue_dropped_newest += 1;
                Err(SendError::QueueFull)
            }
        }
    }

    /// Packets waiting in the send queue.
    pub fn send_queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Flow-queue buckets holding state (`send_queue.flows` > 0): one per
    /// inner flow with packets queued, plus those whose CoDel remembers a
    /// drop rate; an idle connection holds none.
    pub fn send_queue_flow_states(&self) -> usize {
        self.queue.flow_states()
    }

    /// Processes several received datagrams of one path.
    pub fn handle_datagrams<'a>(
        &mut self,
        now: Instant,
        path: PathId,
        datagrams: impl IntoIterator<Item = &'a [u8]>,
    ) {
        for d in datagrams {
            self.handle_datagram(now, path, d);
        }
    }

    /// Sets the addresses of a path (used for checksums' pseudo-header,
    /// pcap and ADDADDR). A server learns them from its driver this way.
    pub fn set_path_addresses(
        &mut self,
        id: PathId,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) {
        if let Some(i) = self.idx(id) {
            self.paths[i].set_addresses(local, remote, true);
        }
    }

    /// As [`Connection::handle_datagram`], also telling the addresses the
    /// datagram travelled between; a path created by this datagram (server)
    /// takes them as its addresses.
    pub fn handle_datagram_from(
        &mut self,
        now: Instant,
        path: PathId,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
    ) {
        self.handle_datagram(now, path, data);
        // A path this datagram created (or re-created after a closed
        // subflow) learns its addresses; configured ones are kept.
        if let Some(i) = self.idx(path) {
            self.paths[i].set_addresses(Some(local), Some(remote), false);
        }
    }

    /// Processes one received DCCP packet (a UDP payload under RFC 6773).
    ///
    /// `now` is the arrival time and feeds RTT samples: a driver must read
    /// it after the datagram was received (after `recvmmsg` returns), never
    /// before waiting or before a batch — a timestamp older than the
    /// arrival makes every RTT sample in the batch too short, below the
    /// path's real minimum. A late timestamp only lengthens samples.
    pub fn handle_datagram(&mut self, now: Instant, path: PathId, data: &[u8]) {
        self.receive(now, path, data, None);
    }

    /// As [`Connection::handle_datagram`], with `data` already parsed
    /// (without checksum verification) by the endpoint that routed it:
    /// parsed again only when this path verifies checksums.
    pub(crate) fn handle_parsed(
        &mut self,
        now: Instant,
        path: PathId,
        data: &[u8],
        seg: &Segment<'_>,
    ) {
        self.receive(now, path, data, Some(seg));
    }

    /// The receive path; `given`: `data` parsed without checksums.
    fn receive(&mut self, now: Instant, path: PathId, data: &[u8], given: Option<&Segment<'_>>) {
        self.blocked_none = None;
        self.last_now = self.last_now.max(now);
        self.stats.traffic.rx_datagrams += 1;
        self.stats.traffic.rx_bytes += data.len() as u64;
        let mut idx = self.idx(path);
        if self.life.state() == ConnState::Closed {
            // A closed connection still answers a retransmitted Close (our
            // Reset was lost) so the peer can finish (RFC 4340 §8.3).
            let Some(i) = idx else {
                return;
            };
            match given {
                Some(seg) => self.paths[i].answer_close_when_closed(now, seg, false),
                None => {
                    if let Ok(seg) = Segment::parse_in(data, None, self.config.wire_profile) {
                        self.paths[i].answer_close_when_closed(now, &seg, false);
                    }
                }
            }
            return;
        }
        let addrs = idx
            .filter(|_| self.config.verify_checksums)
            .and_then(|i| self.paths[i].rx_pseudo_addrs());
        // Parsed in place: a `Segment` is ~1 kB to move.
        let mut parsed;
        let seg = match (given, addrs) {
            (Some(seg), None) => seg,
            _ => {
                parsed = Segment::new(PacketType::Data, 0);
                match parsed.parse_from(data, addrs, self.config.wire_profile) {
                    Ok(()) => &parsed,
                    Err(WireError::BadChecksum) => {
                        self.stats.rx.rx_bad_checksum += 1;
                        return;
                    }
                    Err(_) => {
                        self.stats.rx.rx_malformed += 1;
                        return;
                    }
                }
            }
        };
        self.stats.rx.rx_options_ignored += u64::from(seg.ignored_opts);
        self.stats.rx.rx_bad_options +=
            u64::from(seg.bad_opts) + u64::from(seg.option_error.is_some());
        // A fresh Request on a path whose previous subflow is gone starts over.
        if let Some(i) = idx {
            if self.role == Role::Server
                && seg.ptype == PacketType::Request
                && self.paths[i].state() == SubState::Closed
                && !self.paths[i].has_pending_reset()
            {
                self.paths.remove(i);
                idx = None;
            }
        }
        match idx {
            Some(i) => {
                self.paths[i].count_rx(data.len());
                self.handle_segment_checked(now, i, seg, data);
            }
            None if self.role == Role::Server && seg.ptype == PacketType::Request => {
                self.accept_request(now, path, seg)
            }
            None => self.stats.rx.rx_unknown_path += 1,
        }
        self.check_closed();
        self.reap();
    }

    /// Processes timers; call when [`Connection::poll_timeout`] is reached.
    ///
    /// Afterwards [`Connection::poll_timeout`] is `None` or later than
    /// `now`: every fired timer is stopped, re-armed later, or turned into a
    /// packet owed to the next `poll_transmit`. A driver may sleep until the
    /// deadline with no guard against one that does not move
    /// (`tests/proto/conn/timer_invariant.rs` drives varied sessions against this).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.blocked_none = None;
        self.last_now = self.last_now.max(now);
        self.reap();
        self.note_active_paths();
        for i in 0..self.paths.len() {
            self.subflow_timers(now, i);
            self.paths[i].refresh(now);
        }
        self.check_liveness(now);
        self.reorder.handle_timeout(now);
        self.drain_reorder(now);
        self.fire_adverts(now);
        self.plpmtu_timers(now);
        self.check_closed();
        self.reap();
        debug_assert!(
            self.poll_timeout().is_none_or(|t| t > now),
            "stuck timer after handle_timeout({now:?}): {:?}",
            self.next_timer()
        );
    }

    /// When [`Connection::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Asked after every event: the minimum alone, not the table.
        let mut earliest = Earliest::default();
        self.collect_timers(&mut earliest);
        debug_assert_eq!(earliest.0, self.next_timer().map(|(_, at)| at));
        earliest.0
    }

    /// [`Connection::poll_timeout`] with the kind of deadline it is.
    pub fn next_timer(&self) -> Option<(ConnTimer, Instant)> {
        let mut table = TimerTable::default();
        self.collect_timers(&mut table);
        table.next()
    }

    /// Offers every deadline of the connection to `sink`, each under its
    /// kind (`timer.rs`).
    fn collect_timers(&self, sink: &mut impl TimerSink) {
        let backlog = self.queue.len() > 0;
        for sf in &self.paths {
            sink.merge(ConnTimer::Subflow, sf.poll_timeout(backlog, self.last_now));
        }
        sink.merge(ConnTimer::Advert, self.advert_timeout());
        self.liveness_timers(sink);
        sink.merge(ConnTimer::Plpmtu, self.plpmtu_timeout());
        sink.merge(ConnTimer::Reorder, self.reorder.poll_timeout());
        if backlog {
            sink.merge(ConnTimer::Scheduler, self.scheduler.poll_timeout());
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Hands back the buffer of an [`Event::Delivered`] once read: the
    /// next received payloads reuse it (optional; saves an allocation
    /// per packet).
    pub fn recycle_delivered(&mut self, mut buf: Vec<u8>) {
        if self.scratch.rx_pool.len() < RX_POOL_MAX {
            buf.clear();
            self.scratch.rx_pool.push(buf);
        }
    }

    /// Graceful close: DCCP-Close with MP_CLOSE on every subflow.
    pub fn close(&mut self, now: Instant) {
        self.blocked_none = None;
        if !self.life.begin_close(self.negotiation.is_multipath()) {
            return;
        }
        self.discard_queue();
        for i in 0..self.paths.len() {
            self.begin_subflow_close(now, i);
        }
        self.check_closed();
    }

    /// Fast close: DCCP-Reset (code 13) with MP_FAST_CLOSE on every subflow;
    /// the connection is closed at once.
    pub fn fast_close(&mut self, _now: Instant) {
        self.blocked_none = None;
        // Neither the queue nor the subflows read the state: marking it
        // first is the same as marking it after them.
        if !self.life.begin_fast_close("fast close") {
            return;
        }
        self.discard_queue();
        for sf in &mut self.paths {
            sf.fast_close();
        }
        self.check_closed();
    }

    /// The uniform per-path view, in `PathId` order.
    pub fn paths(&self) -> Vec<PathView> {
        self.paths.iter().map(|p| p.view()).collect()
    }

    /// Counters of one path.
    pub fn path_stats(&self, id: PathId) -> Option<PathStats> {
        self.idx(id).map(|i| *self.paths[i].stats())
    }

    /// Slow-start threshold of a path's controller, if it has one.
    pub fn path_ssthresh(&self, id: PathId) -> Option<u32> {
        self.idx(id).and_then(|i| self.paths[i].ssthresh_pkts())
    }

    /// A path's loss over the last ~[`LOSS_WINDOW`] up to the latest `now`
    /// this connection was driven with.
    pub fn path_windowed_loss(&self, id: PathId) -> Option<WindowedLoss> {
        self.idx(id)
            .map(|i| self.paths[i].windowed_loss(self.last_now))
    }

    /// A path's RFC 7661 pipeACK (packets delivered per round trip over
    /// its last sampling period) at the latest `now`; `None` for a
    /// controller without window validation or without a recent sample.
    pub fn path_pipe_ack(&self, id: PathId) -> Option<u64> {
        self.idx(id)
            .and_then(|i| self.paths[i].pipe_ack_pkts(self.last_now))
    }

    pub fn stats(&self) -> ConnStats {
        let mut s = self.stats;
        for p in &self.paths {
            s.loss.lost_pkts += p.stats().lost_pkts;
            s.loss.random_losses_tolerated += p.stats().random_losses_tolerated;
            s.loss.rtos += p.stats().rtos;
        }
        s
    }

    /// The reorderer's counters.
    pub fn reorder_stats(&self) -> reorder::ReorderStats {
        self.reorder.stats()
    }

    pub fn is_established(&self) -> bool {
        self.life.state() == ConnState::Established
    }

    pub fn is_closed(&self) -> bool {
        self.life.state() == ConnState::Closed
    }

    fn idx(&self, id: PathId) -> Option<usize> {
        self.paths.binary_search_by_key(&id, |p| p.id()).ok()
    }

    fn insert_path(&mut self, sf: Subflow) -> usize {
        self.life.path_created();
        let pos = self.paths.partition_point(|p| p.id() < sf.id());
        self.paths.insert(pos, sf);
        pos
    }

    fn live_paths(&self) -> usize {
        self.paths.iter().filter(|p| !p.is_gone()).count()
    }

    fn new_subflow(&mut self, id: PathId, cfg: PathConfig) -> Subflow {
        let mut ccfg = self.config.cc_config.clone();
        ccfg.seed = self.rng.gen();
        let cc = self.config.cc.build(&ccfg);
        let iss = self.rng.gen::<u64>() & (SEQ_MASK >> 1);
        Subflow::new(id, cfg, iss, cc, &self.config)
    }

    /// Moves the packets waiting on path `i` back to the connection's queue
    /// (newest first, so they keep their order); a redundant copy is
    /// dropped instead, as its twins carry its MP_SEQ.
    fn reinject(&mut self, i: usize) {
        self.forget_sent_on(i);
        while let Some((_, q)) = self.paths[i].unqueue_newest() {
            if q.copy {
                self.stats.send_queue.sched_copies_dropped += 1;
                self.queue.recycle(q.data);
                continue;
            }
            self.stats.loss.reinjected_pkts += 1;
            self.queue.push_front(q);
        }
    }

    fn discard_queue(&mut self) {
        self.stats.send_queue.send_queue_discarded += self.queue.clear() as u64;
        for sf in &mut self.paths {
            self.stats.send_queue.send_queue_discarded += sf.clear_queue() as u64;
        }
    }

    /// A subflow still owes its peer a Reset (e.g. the answer to a Close):
    /// a closed connection must be polled once more before it is dropped.
    pub fn owes_reset(&self) -> bool {
        self.paths.iter().any(|p| p.has_pending_reset())
    }

    /// True when a subflow with this id exists.
    pub fn has_path(&self, id: PathId) -> bool {
        self.idx(id).is_some()
    }
}
