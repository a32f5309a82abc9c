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

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cc::{CcSnapshot, ControllerFactory};
use crate::path::{PathId, PathView};
use crate::reorder::{self, PathReceiveState, Reorder, ReorderItem};
use crate::sched::{self, PacketMeta, Scheduler};
use crate::time::Instant;

pub mod ackvec;
pub mod codec;
mod config;
mod endpoint;
pub mod keys;
mod queue;
pub mod seq;
mod subflow;

pub use codec::PacketType;
pub use config::{
    ConnectionConfig, PathConfig, Role, TunnelSettings, DEFAULT_MSS_BYTES,
    DEFAULT_SEND_QUEUE_BYTES, DEFAULT_SEND_QUEUE_PKTS,
};
pub use endpoint::{ConnectionHandle, Endpoint, EndpointConfig, EndpointStats};
pub use queue::DropPolicy;
pub use subflow::PathStats;

use crate::wire::mp::subtype as mp;
use crate::wire::option::kind as opt;
use crate::wire::{FeatureNum, ResetCode, WireError};
use codec::{ConfirmItem, MpAddAddr, MpJoin, MpKey, MpRemoveAddr, Segment};
use keys::ConnKeys;
use queue::{PushOutcome, Queued, SendQueue};
use seq::{unwrap48, SEQ_MASK};
use subflow::{SubState, Subflow};

/// Service Code carried in Requests (RFC 4340 §8.1.2): ASCII "MPDC".
pub const SERVICE_CODE: u32 = 0x4D50_4443;

/// Upper bound of the DCCP header on a data packet built by this crate
/// (generic header, ack subheader, Ack Vector, MP_SEQ, MP_RTT, feature
/// changes and confirmations); `mss_bytes` minus this is the largest
/// tunnelled packet [`Connection::send`] accepts.
pub const DATA_HEADER_MAX: usize = 136;

/// Consistent implausible MP_SEQ packets that confirm a renumbering.
const MP_SEQ_RESYNC_PKTS: u32 = 16;

/// MP_SEQ this far behind the highest seen cannot come from a slow path.
const MP_SEQ_MAX_LAG: u64 = 1 << 24;

/// MP_REMOVEADDR (id, nonce) pairs remembered against replays.
const REMOVEADDR_SEEN_MAX: usize = 256;

/// Ack Vector cells per packet at most (bounds the header, RFC 4340 §11.4).
const ACKVEC_MAX_CELLS: usize = 48;

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

/// Counters: every rejection and drop has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ConnStats {
    pub rx_datagrams: u64,
    pub rx_bytes: u64,
    pub tx_datagrams: u64,
    pub tx_bytes: u64,
    pub tx_data_pkts: u64,
    pub rx_data_pkts: u64,
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    /// Malformed datagrams (parse errors other than checksum).
    pub rx_malformed: u64,
    pub rx_bad_checksum: u64,
    /// Datagrams for a path this connection does not know.
    pub rx_unknown_path: u64,
    /// Packets outside the sequence/ack validity windows (answered with Sync).
    pub rx_seq_invalid: u64,
    /// Packets of a type not expected in the subflow's state.
    pub rx_unexpected: u64,
    /// Duplicate DCCP sequence numbers.
    pub rx_duplicate: u64,
    /// Data packets without MP_SEQ on a multipath connection.
    pub rx_missing_mp_seq: u64,
    /// Data that arrived on a closing/closed connection.
    pub rx_data_after_close: u64,
    pub syncs_sent: u64,
    pub syncacks_sent: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    /// MP_JOIN with a path token (CI) we do not know.
    pub join_unknown_token: u64,
    /// MP_JOIN handshakes failing MP_HMAC verification (either side).
    pub join_bad_hmac: u64,
    /// Joins refused because `max_paths` subflows exist.
    pub join_too_busy: u64,
    /// Joins refused because multipath is not in use.
    pub join_not_multipath: u64,
    /// MP_KEY echoes that did not match the keys exchanged.
    pub bad_key_echo: u64,
    /// MP_CLOSE / MP_FAST_CLOSE carrying the wrong key (ignored).
    pub bad_close_key: u64,
    pub addaddr_bad_hmac: u64,
    pub removeaddr_bad_hmac: u64,
    /// MP option retransmissions that were never confirmed.
    pub mp_option_unconfirmed: u64,
    /// Multipath requested but the peer answered as plain DCCP.
    pub fallbacks: u64,
    pub send_queue_dropped_newest: u64,
    pub send_queue_dropped_oldest: u64,
    pub send_rejected_closed: u64,
    pub send_rejected_too_large: u64,
    /// Queued packets discarded when the connection closed.
    pub send_queue_discarded: u64,
    /// Packets re-queued from a path that failed or went down.
    pub reinjected_pkts: u64,
    /// Datagrams that did not fit the caller's buffer.
    pub tx_buffer_too_small: u64,
    /// Lost packets (all paths, CCID2 detection and RTO).
    pub lost_pkts: u64,
    pub rtos: u64,
    pub handshake_timeouts: u64,
    /// Requests on a new path refused while the connection is closing.
    pub rx_request_refused: u64,
    /// Data with an implausible MP_SEQ jump (dropped).
    pub rx_mp_seq_implausible: u64,
    /// MP_SEQ resynchronisations after a run of consistent jumps.
    pub mp_seq_resyncs: u64,
    /// Server subflows dropped after `respond_timeout` in RESPOND.
    pub respond_timeouts: u64,
    /// Subflows closed because the peer withdrew their address
    /// (MP_REMOVEADDR, HMAC verified).
    pub paths_removed_by_peer: u64,
    /// MP_REMOVEADDR we sent for subflows whose interface went down.
    pub removeaddr_sent: u64,
    /// MP_REMOVEADDR (id, nonce) seen before: a retransmission (confirmed
    /// again) or a replay (never closes anything a second time).
    pub removeaddr_duplicate: u64,
    /// Subflows expired after `path_idle_timeout` of silence.
    pub paths_expired: u64,
    /// Closed subflows forgotten (their slot free for a new one).
    pub paths_reaped: u64,
    /// Keepalive probes (Sync) sent on silent subflows.
    pub keepalives_sent: u64,
    /// Connections closed after `idle_timeout` of silence on every subflow.
    pub idle_timeouts: u64,
}

impl ConnStats {
    /// Every datagram or option dropped as malformed, forged, unexpected
    /// or refused — the sum a test or an alarm watches to see hostile
    /// input being rejected (each has its own counter above).
    pub fn rejected_input(&self) -> u64 {
        self.rx_malformed
            + self.rx_bad_checksum
            + self.rx_unknown_path
            + self.rx_seq_invalid
            + self.rx_unexpected
            + self.rx_duplicate
            + self.rx_missing_mp_seq
            + self.rx_data_after_close
            + self.join_unknown_token
            + self.join_bad_hmac
            + self.join_too_busy
            + self.join_not_multipath
            + self.bad_key_echo
            + self.bad_close_key
            + self.addaddr_bad_hmac
            + self.removeaddr_bad_hmac
            + self.rx_request_refused
    }
}

/// Meta-connection life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    Handshaking,
    Established,
    Closing,
    Closed,
}

/// An address we advertise (MP_ADDADDR) or withdraw (MP_REMOVEADDR).
#[derive(Clone, Debug)]
struct Advert {
    id: u8,
    addr: SocketAddr,
    nonce: u32,
    remove: bool,
    confirmed: bool,
    tries: u32,
    retx_at: Instant,
}

/// One MP-DCCP connection with its subflows.
pub struct Connection {
    role: Role,
    config: ConnectionConfig,
    rng: ChaCha8Rng,
    state: ConnState,
    /// Sorted by id.
    paths: Vec<Subflow>,
    scheduler: Box<dyn Scheduler>,
    reorder: Box<dyn Reorder>,
    queue: SendQueue,
    /// None until the first subflow negotiated; Some(false) = plain DCCP.
    mp: Option<bool>,
    local_key: [u8; 8],
    remote_key: Option<[u8; 8]>,
    local_ci: u32,
    remote_ci: Option<u32>,
    next_addr_id: u8,
    next_mp_seq: u64,
    rx_mp_ref: Option<u64>,
    plain_rx_seq: u64,
    adverts: Vec<Advert>,
    remote_addrs: BTreeMap<u8, SocketAddr>,
    /// We sent MP_CLOSE (graceful) — peers' subflows close with it.
    closing_mp: bool,
    close_reason: Option<String>,
    closed_event_sent: bool,
    connected_event_sent: bool,
    events: VecDeque<Event>,
    stats: ConnStats,
    views: Vec<PathView>,
    snaps: Vec<CcSnapshot>,
    rx_states: Vec<PathReceiveState>,
    sched_out: Vec<PathId>,
    rr_next: usize,
    /// Latest `now` seen on any input (timers in the past are not re-armed).
    last_now: Instant,
    /// A datagram built for a GSO batch that did not match its segment size.
    held: Option<(PathId, usize)>,
    held_buf: Vec<u8>,
    /// A far-ahead MP_SEQ and how many consistent ones followed it.
    mp_jump_probe: Option<(u64, u32)>,
    /// A subflow was ever created (a server closes when its only attempt died).
    ever_had_path: bool,
    /// MP_REMOVEADDR (address id, nonce) pairs acted on, newest last
    /// (bounded): a replayed withdrawal must not close a later subflow
    /// that reuses the address id.
    removeaddr_seen: VecDeque<(u8, u32)>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.role)
            .field("state", &self.state)
            .field("mp", &self.mp)
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
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let local_key: [u8; 8] = rng.gen();
        let local_ci: u32 = rng.gen::<u32>().max(1);
        let next_mp_seq = config
            .initial_mp_seq
            .map_or_else(|| rng.gen::<u64>() & SEQ_MASK, |s| s & SEQ_MASK);
        Ok(Connection {
            role,
            queue: SendQueue::new(
                config.send_queue_pkts,
                config.send_queue_bytes,
                config.drop_policy,
            ),
            config,
            rng,
            state: ConnState::Handshaking,
            paths: Vec::new(),
            scheduler,
            reorder,
            mp: None,
            local_key,
            remote_key: None,
            local_ci,
            remote_ci: None,
            next_addr_id: 1,
            next_mp_seq,
            rx_mp_ref: None,
            plain_rx_seq: 0,
            adverts: Vec::new(),
            remote_addrs: BTreeMap::new(),
            closing_mp: false,
            close_reason: None,
            closed_event_sent: false,
            connected_event_sent: false,
            events: VecDeque::new(),
            stats: ConnStats::default(),
            views: Vec::new(),
            snaps: Vec::new(),
            rx_states: Vec::new(),
            sched_out: Vec::new(),
            rr_next: 0,
            last_now: Instant::ZERO,
            held: None,
            held_buf: Vec::new(),
            mp_jump_probe: None,
            ever_had_path: false,
            removeaddr_seen: VecDeque::new(),
        })
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Our connection identifier (the token peers put in MP_JOIN).
    pub fn local_ci(&self) -> u32 {
        self.local_ci
    }
    /// The peer's connection identifier, once known.
    pub fn remote_ci(&self) -> Option<u32> {
        self.remote_ci
    }
    /// `Some(true)` multipath, `Some(false)` plain-DCCP fallback, `None`
    /// not negotiated yet.
    pub fn is_multipath(&self) -> Option<bool> {
        self.mp
    }
    /// The configuration in force.
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// Client: opens a subflow on `id` (the first one runs the MP_KEY
    /// handshake, later ones MP_JOIN). Server: normally not needed — a
    /// Request on an unknown path creates it.
    pub fn add_path(&mut self, now: Instant, id: PathId, cfg: PathConfig) -> Result<(), ConnError> {
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
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
        let first = self.paths.is_empty() && self.mp.is_none();
        if !first {
            match self.mp {
                Some(true) => {}
                Some(false) => return Err(ConnError::NotMultipath),
                None => return Err(ConnError::NotEstablished),
            }
            if self.live_paths() >= self.config.max_paths {
                return Err(ConnError::TooManyPaths(self.config.max_paths));
            }
        }
        let mut sf = self.new_subflow(id, cfg);
        sf.initiator = true;
        sf.join = !first;
        sf.state = SubState::Request;
        sf.retx_at = Some(now);
        sf.local_nonce = self.rng.gen::<u32>().max(1);
        sf.local_addr_id = self.alloc_addr_id();
        sf.last_rx_at = now;
        self.insert_path(sf);
        Ok(())
    }

    /// Graceful close of one subflow (DCCP-Close without MP_CLOSE).
    pub fn remove_path(&mut self, now: Instant, id: PathId) {
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
        let Some(i) = self.idx(id) else { return };
        let sf = &self.paths[i];
        let peer_knows = sf.announced || sf.have_isr || sf.retx_tries > 0;
        let was_gone = sf.is_gone();
        // The initial subflow's address is id 0 (it carried MP_KEY, not
        // MP_JOIN); joins announced their own id.
        let addr_id = if sf.join { sf.local_addr_id } else { 0 };
        self.drop_subflow(now, i);
        if peer_knows && !was_gone && self.state == ConnState::Established && self.mp == Some(true)
        {
            self.withdraw_path_address(now, addr_id);
        }
        self.check_closed();
    }

    /// Queues MP_REMOVEADDR for `addr_id` (retransmitted on the open
    /// subflows until MP_CONFIRM or `mp_option_max_tries`).
    fn withdraw_path_address(&mut self, now: Instant, addr_id: u8) {
        let nonce = self.rng.gen();
        self.adverts
            .retain(|a| !(a.id == addr_id && a.remove && !a.confirmed));
        self.adverts.push(Advert {
            id: addr_id,
            addr: SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
            nonce,
            remove: true,
            confirmed: false,
            tries: 0,
            retx_at: now,
        });
        self.stats.removeaddr_sent += 1;
    }

    /// Closes subflow `i` at once, without a handshake (its address is
    /// gone or it is silent): queued packets go back to the connection
    /// queue, every timer of it stops, `PathClosed` is reported once.
    fn drop_subflow(&mut self, now: Instant, i: usize) {
        self.reinject(i);
        let sf = &mut self.paths[i];
        let id = sf.id;
        let was_gone = sf.is_gone();
        sf.state = SubState::Closed;
        sf.pend = Default::default();
        sf.retx_at = None;
        sf.rto_at = None;
        sf.ack_due = None;
        sf.timewait_until = None;
        sf.probe_at = None;
        sf.failed = false;
        sf.closed_at = Some(sf.closed_at.unwrap_or(now));
        if !was_gone {
            self.events.push_back(Event::PathClosed(id));
        }
    }

    /// Sets the priority of a path for our scheduler and tells the peer
    /// with MP_PRIO (retransmitted until MP_CONFIRM).
    pub fn set_priority(&mut self, now: Instant, id: PathId, prio: u8) {
        let Some(i) = self.idx(id) else { return };
        let prio = prio.min(crate::path::priority::MAX);
        let sf = &mut self.paths[i];
        sf.priority = prio;
        if self.mp == Some(true) {
            sf.pend.prio = Some(prio);
            sf.pend.prio_retx_at = Some(now);
            sf.pend.prio_tries = 0;
        }
    }

    /// Advertises a local address to the peer (MP_ADDADDR with nonce and
    /// MP_HMAC, retransmitted until confirmed). Returns its address id.
    pub fn advertise_address(&mut self, now: Instant, addr: SocketAddr) -> Result<u8, ConnError> {
        if self.mp != Some(true) {
            return Err(if self.mp.is_none() {
                ConnError::NotEstablished
            } else {
                ConnError::NotMultipath
            });
        }
        let id = self.alloc_addr_id();
        let nonce = self.rng.gen();
        self.adverts.push(Advert {
            id,
            addr,
            nonce,
            remove: false,
            confirmed: false,
            tries: 0,
            retx_at: now,
        });
        Ok(id)
    }

    /// Withdraws an address advertised before (MP_REMOVEADDR).
    pub fn withdraw_address(&mut self, now: Instant, id: u8) -> Result<(), ConnError> {
        let nonce = self.rng.gen();
        let Some(a) = self.adverts.iter_mut().find(|a| a.id == id) else {
            return Err(ConnError::Config(format!("no advertised address {id}")));
        };
        a.remove = true;
        a.confirmed = false;
        a.tries = 0;
        a.nonce = nonce;
        a.retx_at = now;
        Ok(())
    }

    /// Addresses the peer advertised, by address id.
    pub fn remote_addresses(&self) -> Vec<(u8, SocketAddr)> {
        self.remote_addrs.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// Queues one tunnelled IP packet.
    pub fn send(&mut self, now: Instant, packet: &[u8]) -> Result<(), SendError> {
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
            self.stats.send_rejected_closed += 1;
            return Err(SendError::Closed);
        }
        if packet.len() + DATA_HEADER_MAX > self.config.mss_bytes as usize {
            self.stats.send_rejected_too_large += 1;
            return Err(SendError::TooLarge);
        }
        match self.queue.push(now, packet) {
            PushOutcome::Queued => Ok(()),
            PushOutcome::QueuedDroppedOldest(n) => {
                self.stats.send_queue_dropped_oldest += n as u64;
                Ok(())
            }
            PushOutcome::Rejected => {
                self.stats.send_queue_dropped_newest += 1;
                Err(SendError::QueueFull)
            }
        }
    }

    /// Packets waiting in the send queue.
    pub fn send_queue_len(&self) -> usize {
        self.queue.len()
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
            let c = &mut self.paths[i].cfg;
            c.local = local.or(c.local);
            c.remote = remote.or(c.remote);
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
            let c = &mut self.paths[i].cfg;
            c.local = c.local.or(Some(local));
            c.remote = c.remote.or(Some(remote));
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
        self.last_now = self.last_now.max(now);
        self.stats.rx_datagrams += 1;
        self.stats.rx_bytes += data.len() as u64;
        let mut idx = self.idx(path);
        if self.state == ConnState::Closed {
            // A closed connection still answers a retransmitted Close (our
            // Reset was lost) so the peer can finish (RFC 4340 §8.3).
            if let (Some(i), Ok(seg)) = (idx, Segment::parse(data, None)) {
                let sf = &mut self.paths[i];
                if matches!(seg.ptype, PacketType::Close | PacketType::CloseReq)
                    && sf.have_isr
                    && sf.pend.reset.is_none()
                {
                    sf.gsr = sf.gsr.max(sf.unwrap_seq(seg.seq));
                    sf.pend.reset = Some(ResetCode::Closed);
                }
            }
            return;
        }
        let addrs = idx.and_then(|i| {
            let c = &self.paths[i].cfg;
            match (c.remote, c.local) {
                (Some(r), Some(l)) if self.config.verify_checksums => Some((r.ip(), l.ip())),
                _ => None,
            }
        });
        let seg = match Segment::parse(data, addrs) {
            Ok(s) => s,
            Err(WireError::BadChecksum) => {
                self.stats.rx_bad_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.rx_malformed += 1;
                return;
            }
        };
        // A fresh Request on a path whose previous subflow is gone starts over.
        if let Some(i) = idx {
            if self.role == Role::Server
                && seg.ptype == PacketType::Request
                && self.paths[i].state == SubState::Closed
                && self.paths[i].pend.reset.is_none()
            {
                self.paths.remove(i);
                idx = None;
            }
        }
        match idx {
            Some(i) => {
                self.paths[i].stats.rx_pkts += 1;
                self.paths[i].stats.rx_bytes += data.len() as u64;
                self.handle_segment(now, i, &seg);
            }
            None if self.role == Role::Server && seg.ptype == PacketType::Request => {
                self.accept_request(now, path, &seg)
            }
            None => self.stats.rx_unknown_path += 1,
        }
        self.check_closed();
        self.reap();
    }

    /// Processes timers; call when [`Connection::poll_timeout`] is reached.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        self.reap();
        for i in 0..self.paths.len() {
            self.subflow_timers(now, i);
        }
        self.check_liveness(now);
        self.reorder.handle_timeout(now);
        self.drain_reorder(now);
        for a in &mut self.adverts {
            if !a.confirmed && a.tries >= self.config.mp_option_max_tries && a.retx_at <= now {
                a.confirmed = true; // give up
                self.stats.mp_option_unconfirmed += 1;
            }
        }
        self.check_closed();
        self.reap();
    }

    /// The next packet to send, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.last_now = self.last_now.max(now);
        // A datagram set aside by the previous GSO batch goes first.
        if let Some((path, n)) = self.held.take() {
            if buf.len() >= n {
                buf[..n].copy_from_slice(&self.held_buf[..n]);
                return Some(Transmit {
                    path,
                    size: n,
                    segment_size: None,
                });
            }
            self.held = Some((path, n));
            return None;
        }
        if self.state == ConnState::Closed && self.paths.iter().all(|p| !p.has_pending_reset()) {
            return None;
        }
        self.schedule(now);
        let n = self.paths.len();
        for k in 0..n {
            let i = (self.rr_next + k) % n;
            let Some(size) = self.emit_on(now, i, buf, false) else {
                continue;
            };
            self.rr_next = (i + 1) % n.max(1);
            self.count_tx(i, size);
            let id = self.paths[i].id;
            // GSO batch: more data packets of the same size for this path.
            let mut total = size;
            let mut segments = 1;
            let mss = self.config.mss_bytes as usize;
            while segments < self.config.max_gso_segments && buf.len() - total >= mss {
                self.schedule(now);
                let Some(m) = self.emit_on(now, i, &mut buf[total..], true) else {
                    break;
                };
                self.count_tx(i, m);
                if m == size {
                    total += m;
                    segments += 1;
                } else if m < size {
                    // The last segment may be shorter.
                    total += m;
                    segments += 1;
                    break;
                } else {
                    // Larger: it goes out alone on the next call.
                    self.held_buf.clear();
                    self.held_buf.extend_from_slice(&buf[total..total + m]);
                    self.held = Some((id, m));
                    break;
                }
            }
            return Some(Transmit {
                path: id,
                size: total,
                segment_size: (segments > 1).then_some(size),
            });
        }
        None
    }

    fn count_tx(&mut self, i: usize, size: usize) {
        self.stats.tx_datagrams += 1;
        self.stats.tx_bytes += size as u64;
        let sf = &mut self.paths[i];
        sf.stats.tx_pkts += 1;
        sf.stats.tx_bytes += size as u64;
    }

    /// When [`Connection::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut upd = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        let backlog = self.queue.len() > 0;
        for sf in &self.paths {
            upd(sf.retx_at);
            if sf.pipe > 0 {
                upd(sf.rto_at);
            }
            upd(sf.ack_due);
            upd(sf.timewait_until);
            if sf.failed && sf.is_open() {
                upd(sf.probe_at);
            }
            if sf.pend.prio.is_some() {
                upd(sf.pend.prio_retx_at);
            }
            // The pacer's next release matters only while data waits, the
            // window has room and the release is still in the future
            // (a past one is already sendable: no timer needed).
            if (backlog || !sf.queue.is_empty())
                && sf.cc.pacing_rate_bytes_per_s().is_some()
                && sf.is_open()
                && sf.cwnd_room()
                && sf.next_send_at > self.last_now
            {
                upd(Some(sf.next_send_at));
            }
        }
        // MP options go out on an open subflow: without one, no timer (a
        // past deadline nobody can serve would spin the driver).
        if self.state == ConnState::Established && self.paths.iter().any(|p| p.is_open()) {
            for a in &self.adverts {
                if !a.confirmed {
                    upd(Some(a.retx_at));
                }
            }
        }
        upd(self.liveness_timeout());
        upd(self.reorder.poll_timeout());
        if backlog {
            upd(self.scheduler.poll_timeout());
        }
        t
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Graceful close: DCCP-Close with MP_CLOSE on every subflow.
    pub fn close(&mut self, now: Instant) {
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
            return;
        }
        self.state = ConnState::Closing;
        self.closing_mp = self.mp == Some(true);
        self.close_reason.get_or_insert_with(|| "closed".into());
        self.discard_queue();
        for i in 0..self.paths.len() {
            self.begin_subflow_close(now, i);
        }
        self.check_closed();
    }

    /// Fast close: DCCP-Reset (code 13) with MP_FAST_CLOSE on every subflow;
    /// the connection is closed at once.
    pub fn fast_close(&mut self, _now: Instant) {
        if self.state == ConnState::Closed {
            return;
        }
        self.close_reason = Some("fast close".into());
        self.discard_queue();
        for sf in &mut self.paths {
            if sf.state != SubState::Closed && sf.have_isr {
                sf.pend = Default::default();
                sf.pend.reset = Some(ResetCode::MpFastClose);
            }
            sf.state = SubState::Closed;
            sf.retx_at = None;
            sf.rto_at = None;
            sf.queue.clear();
        }
        self.state = ConnState::Closing;
        self.check_closed();
    }

    /// The uniform per-path view, in `PathId` order.
    pub fn paths(&self) -> Vec<PathView> {
        self.paths.iter().map(|p| p.view()).collect()
    }

    /// Counters of one path.
    pub fn path_stats(&self, id: PathId) -> Option<PathStats> {
        self.idx(id).map(|i| self.paths[i].stats)
    }

    /// Slow-start threshold of a path's controller, if it has one.
    pub fn path_ssthresh(&self, id: PathId) -> Option<u32> {
        self.idx(id).and_then(|i| self.paths[i].cc.ssthresh_pkts())
    }

    pub fn stats(&self) -> ConnStats {
        let mut s = self.stats;
        for p in &self.paths {
            s.lost_pkts += p.stats.lost_pkts;
            s.rtos += p.stats.rtos;
        }
        s
    }

    /// The reorderer's counters.
    pub fn reorder_stats(&self) -> reorder::ReorderStats {
        self.reorder.stats()
    }

    pub fn is_established(&self) -> bool {
        self.state == ConnState::Established
    }

    pub fn is_closed(&self) -> bool {
        self.state == ConnState::Closed
    }

    // ---------------------------------------------------------------------
    // Internals: paths
    // ---------------------------------------------------------------------

    fn idx(&self, id: PathId) -> Option<usize> {
        self.paths.binary_search_by_key(&id, |p| p.id).ok()
    }

    fn insert_path(&mut self, sf: Subflow) -> usize {
        self.ever_had_path = true;
        let pos = self.paths.partition_point(|p| p.id < sf.id);
        self.paths.insert(pos, sf);
        pos
    }

    fn live_paths(&self) -> usize {
        self.paths.iter().filter(|p| !p.is_gone()).count()
    }

    /// The next address id not used by a live subflow or a pending
    /// advertisement (ids wrap after 255; a reused id must not make a
    /// late MP_REMOVEADDR close a new subflow).
    fn alloc_addr_id(&mut self) -> u8 {
        let mut id = self.next_addr_id;
        for _ in 0..255 {
            id = self.next_addr_id;
            self.next_addr_id = self.next_addr_id.wrapping_add(1).max(1);
            let used = self
                .paths
                .iter()
                .any(|p| !p.is_gone() && p.local_addr_id == id)
                || self
                    .adverts
                    .iter()
                    .any(|a| a.id == id && !(a.remove && a.confirmed));
            if !used {
                break;
            }
        }
        id
    }

    fn new_subflow(&mut self, id: PathId, cfg: PathConfig) -> Subflow {
        let mut ccfg = self.config.cc_config.clone();
        ccfg.seed = self.rng.gen();
        let cc = self.config.cc.build(&ccfg);
        let iss = self.rng.gen::<u64>() & (SEQ_MASK >> 1);
        Subflow::new(id, cfg, iss, cc, &self.config)
    }

    fn d_keys(&self) -> Option<ConnKeys> {
        Some(ConnKeys {
            local: self.local_key,
            remote: self.remote_key?,
        })
    }

    /// Moves packets waiting on path `i` back to the head of the send queue.
    fn reinject(&mut self, i: usize) {
        while let Some((_, q)) = self.paths[i].queue.pop_back() {
            self.stats.reinjected_pkts += 1;
            self.queue.push_front(q);
        }
    }

    fn discard_queue(&mut self) {
        self.stats.send_queue_discarded += self.queue.clear() as u64;
        for sf in &mut self.paths {
            self.stats.send_queue_discarded += sf.queue.len() as u64;
            sf.queue.clear();
        }
    }

    fn begin_subflow_close(&mut self, now: Instant, i: usize) {
        let server = self.role == Role::Server;
        let sf = &mut self.paths[i];
        match sf.state {
            // RFC 4340 §8.3: a server asks the client to close (CloseReq) so
            // that the client, not the server, holds TIMEWAIT.
            SubState::Open if server => {
                sf.state = SubState::CloseReq;
                sf.pend.closereq = true;
                sf.retx_tries = 0;
                sf.retx_interval = self.config.handshake_rto.max(sf.rtt.rto());
                sf.retx_at = Some(now);
            }
            SubState::Open | SubState::PartOpen | SubState::Respond => {
                sf.state = SubState::Closing;
                sf.pend.close = true;
                sf.retx_tries = 0;
                sf.retx_interval = self.config.handshake_rto.max(sf.rtt.rto());
                sf.retx_at = Some(now);
            }
            SubState::Request => {
                sf.state = SubState::Closed;
                sf.retx_at = None;
                self.events.push_back(Event::PathClosed(sf.id));
            }
            _ => {}
        }
    }

    fn fail_path(&mut self, i: usize, reset: Option<ResetCode>) {
        let sf = &mut self.paths[i];
        sf.state = SubState::Closed;
        sf.retx_at = None;
        sf.rto_at = None;
        sf.pend = Default::default();
        if sf.have_isr {
            sf.pend.reset = reset;
        }
        let id = sf.id;
        self.reinject(i);
        self.events.push_back(Event::PathFailed(id));
    }

    fn check_closed(&mut self) {
        match self.state {
            ConnState::Closing => {
                if self.paths.iter().all(|p| p.is_gone()) {
                    self.finish_close();
                }
            }
            ConnState::Handshaking => {
                // Every subflow attempt died before the connection opened.
                if self.ever_had_path && self.paths.iter().all(|p| p.state == SubState::Closed) {
                    self.close_reason
                        .get_or_insert_with(|| "handshake failed".into());
                    self.finish_close();
                }
            }
            ConnState::Established => {
                // All subflows gone for good: nothing can carry data any more.
                if self.ever_had_path && self.paths.iter().all(|p| p.is_gone()) {
                    self.close_reason
                        .get_or_insert_with(|| "all subflows closed".into());
                    self.finish_close();
                }
            }
            ConnState::Closed => {}
        }
    }

    /// Forgets subflows that are closed and owe nothing: at once those
    /// that died before ever opening (refused or timed-out handshakes:
    /// forged Requests leave no state), after `closed_path_linger` the
    /// others, so a path that went down and rejoined as a new subflow does
    /// not hold a slot (nor scheduler/reorder state) for ever. Confirmed
    /// or abandoned withdrawals are forgotten too.
    fn reap(&mut self) {
        let now = self.last_now;
        let linger = self.config.closed_path_linger;
        for p in &mut self.paths {
            if p.state == SubState::Closed && p.closed_at.is_none() {
                p.closed_at = Some(now);
            }
        }
        let before = self.paths.len();
        let mut reaped = 0;
        self.paths.retain(|p| {
            let done = p.state == SubState::Closed && p.pend.reset.is_none() && p.queue.is_empty();
            let forget = done && (!p.announced || p.closed_at.is_some_and(|t| now >= t + linger));
            if forget && p.announced {
                reaped += 1;
            }
            !forget
        });
        self.stats.paths_reaped += reaped;
        if self.paths.len() != before {
            self.rr_next = 0;
        }
        self.adverts.retain(|a| !(a.remove && a.confirmed));
    }

    /// RFC 9897 §3.2.9: the peer withdrew address `addr_id`; every
    /// subflow bound to it is closed at once (the address is gone, so no
    /// closing handshake could complete).
    fn close_paths_of_address(&mut self, now: Instant, addr_id: u8) {
        for j in 0..self.paths.len() {
            let p = &self.paths[j];
            if p.remote_addr_id == addr_id && !p.is_gone() {
                self.drop_subflow(now, j);
                self.stats.paths_removed_by_peer += 1;
            }
        }
    }

    /// Keepalives, path expiry and the connection idle timeout (each only
    /// when configured). A path expires only when another was heard from
    /// more recently, so the most recently heard path is never expired by
    /// this rule (and its timer never stays armed in the past).
    fn check_liveness(&mut self, now: Instant) {
        if self.state != ConnState::Established {
            return;
        }
        let last_any = self
            .paths
            .iter()
            .filter(|p| !p.is_gone())
            .map(|p| p.last_rx_at)
            .max();
        if let (Some(t), Some(last)) = (self.config.idle_timeout, last_any) {
            if now >= last + t {
                self.stats.idle_timeouts += 1;
                self.close_reason = Some(format!("idle timeout ({t:?} without a packet)"));
                self.discard_queue();
                for i in 0..self.paths.len() {
                    self.drop_subflow(now, i);
                }
                self.finish_close();
                return;
            }
        }
        if let Some(t) = self.config.path_idle_timeout {
            for i in 0..self.paths.len() {
                if self.expiry_due(i, t).is_some_and(|at| at <= now) {
                    self.drop_subflow(now, i);
                    self.stats.paths_expired += 1;
                }
            }
        }
        if let Some(k) = self.config.keepalive_interval {
            for sf in &mut self.paths {
                if keepalive_due(sf, k).is_some_and(|at| at <= now) {
                    sf.pend.sync = Some(sf.gsr & SEQ_MASK);
                    sf.keepalive_at = Some(now);
                    self.stats.keepalives_sent += 1;
                }
            }
        }
    }

    /// When subflow `i` expires under `path_idle_timeout` = `t`, if it can.
    fn expiry_due(&self, i: usize, t: Duration) -> Option<Instant> {
        let sf = &self.paths[i];
        if !matches!(sf.state, SubState::Open | SubState::PartOpen) {
            return None;
        }
        let newer = self
            .paths
            .iter()
            .any(|p| p.id != sf.id && !p.is_gone() && p.last_rx_at > sf.last_rx_at);
        newer.then(|| sf.last_rx_at + t)
    }

    /// Timers of [`Connection::check_liveness`], for `poll_timeout`.
    fn liveness_timeout(&self) -> Option<Instant> {
        if self.state != ConnState::Established {
            return None;
        }
        let mut t: Option<Instant> = None;
        let mut upd = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        if let Some(idle) = self.config.idle_timeout {
            upd(self
                .paths
                .iter()
                .filter(|p| !p.is_gone())
                .map(|p| p.last_rx_at + idle)
                .max());
        }
        if let Some(pt) = self.config.path_idle_timeout {
            for i in 0..self.paths.len() {
                upd(self.expiry_due(i, pt));
            }
        }
        if let Some(k) = self.config.keepalive_interval {
            for sf in &self.paths {
                upd(keepalive_due(sf, k));
            }
        }
        t
    }

    /// True when a subflow with this id exists.
    pub fn has_path(&self, id: PathId) -> bool {
        self.idx(id).is_some()
    }

    fn finish_close(&mut self) {
        self.state = ConnState::Closed;
        self.discard_queue();
        if !self.closed_event_sent {
            self.closed_event_sent = true;
            let reason = self.close_reason.clone().unwrap_or_else(|| "closed".into());
            self.events.push_back(Event::Closed { reason });
        }
    }

    fn mark_open(&mut self, i: usize) {
        let sf = &mut self.paths[i];
        sf.state = SubState::Open;
        sf.retx_at = None;
        sf.retx_tries = 0;
        sf.pend.handshake_ack = false;
        if !sf.announced {
            sf.announced = true;
            let id = sf.id;
            if !self.connected_event_sent {
                self.connected_event_sent = true;
                if self.state == ConnState::Handshaking {
                    self.state = ConnState::Established;
                }
                self.events.push_back(Event::Connected);
            }
            self.events.push_back(Event::PathEstablished(id));
        }
    }

    // ---------------------------------------------------------------------
    // Internals: input
    // ---------------------------------------------------------------------

    fn accept_request(&mut self, now: Instant, path: PathId, seg: &Segment<'_>) {
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
            self.stats.rx_request_refused += 1;
            return;
        }
        let cfg = PathConfig::default();
        let mut sf = self.new_subflow(path, cfg);
        sf.last_rx_at = now;
        sf.set_isr(seg.seq);
        sf.remote_addr_id = 0;
        let mut reset = None;
        if let Some(j) = seg.mp.join {
            if self.mp != Some(true) {
                self.stats.join_not_multipath += 1;
                reset = Some(ResetCode::ConnectionRefused);
            } else if j.token != self.local_ci {
                // RFC 9897 §3.2.2: unknown path token → Reset.
                self.stats.join_unknown_token += 1;
                reset = Some(ResetCode::NoConnection);
            } else if self.live_paths() >= self.config.max_paths {
                self.stats.join_too_busy += 1;
                reset = Some(ResetCode::TooBusy);
            } else {
                sf.join = true;
                sf.remote_nonce = j.nonce;
                sf.remote_addr_id = j.addr_id;
                sf.local_nonce = self.rng.gen::<u32>().max(1);
                sf.local_addr_id = self.alloc_addr_id();
            }
        } else if self.paths.iter().any(|p| !p.join && !p.is_gone()) || self.mp.is_some() {
            // A second initial handshake on an existing connection.
            self.stats.rx_unexpected += 1;
            reset = Some(ResetCode::ConnectionRefused);
        } else {
            let wants_mp = seg
                .feat(opt::CHANGE_L, FeatureNum::MultipathCapable)
                .is_some_and(|f| f.has_value)
                && seg.mp.key.is_some_and(|k| k.plain);
            if self.config.multipath && wants_mp {
                // Invariant: wants_mp checked key is Some.
                let k = seg.mp.key.expect("checked above");
                self.remote_key = Some(k.key);
                self.remote_ci = Some(k.ci);
                self.mp = Some(true);
            } else {
                if self.config.multipath {
                    self.stats.fallbacks += 1;
                }
                self.mp = Some(false);
            }
        }
        if let Some(code) = reset {
            sf.state = SubState::Closed;
            sf.pend.reset = Some(code);
            self.stats.resets_sent += 0;
        } else {
            sf.state = SubState::Respond;
            sf.pend.response = true;
            sf.retx_at = Some(now + self.config.respond_timeout);
            // RFC 4340 §6: features the client asked us to confirm.
            if let Some(f) = seg.feat(opt::CHANGE_L, FeatureNum::SequenceWindow) {
                sf.seq_window = sf.seq_window.max(f.value.clamp(32, 1 << 46));
            }
        }
        self.insert_path(sf);
    }

    fn handle_segment(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let state = self.paths[i].state;
        if state == SubState::Closed || state == SubState::TimeWait {
            let sf = &mut self.paths[i];
            if matches!(seg.ptype, PacketType::Close | PacketType::CloseReq)
                && sf.have_isr
                && sf.pend.reset.is_none()
            {
                sf.gsr = sf.gsr.max(sf.unwrap_seq(seg.seq));
                sf.pend.reset = Some(ResetCode::Closed);
            }
            // Nothing is expected on a closed subflow; count everything.
            self.stats.rx_unexpected += 1;
            return;
        }
        if state == SubState::Request {
            self.handle_in_request(now, i, seg);
            return;
        }
        // Sequence and acknowledgement validity (RFC 4340 §7.5.3).
        let sf = &self.paths[i];
        // X=0 packets carry 24-bit numbers: extend them first (RFC 4340 §7.6).
        let (wseq, wack) = if seg.short_seq {
            (
                crate::wire::seq::extend_short(seg.seq, sf.gsr & SEQ_MASK),
                seg.ack
                    .map(|a| crate::wire::seq::extend_short(a, sf.gss & SEQ_MASK)),
            )
        } else {
            (seg.seq, seg.ack)
        };
        let seqn = sf.unwrap_seq(wseq);
        let ackn = wack.map(|a| sf.unwrap_ack(a));
        let (swl, swh) = sf.seq_window();
        let (awl, awh) = sf.ack_window();
        let ack_ok = |lo: u64| ackn.is_none_or(|a| a >= lo && a <= awh);
        let valid = match seg.ptype {
            PacketType::CloseReq | PacketType::Close | PacketType::Reset => {
                seqn > sf.gsr && seqn <= swh && ack_ok(sf.gar.max(awl))
            }
            PacketType::Sync | PacketType::SyncAck => seqn >= swl && ack_ok(awl),
            PacketType::Request => seqn >= swl && seqn <= swh,
            _ => seqn >= swl && seqn <= swh && ack_ok(awl),
        };
        if !valid {
            self.stats.rx_seq_invalid += 1;
            let sf = &mut self.paths[i];
            // RFC 4340 §7.5.4: answer with Sync (rate-limited), except to
            // Sync/SyncAck/Reset (no storms on forged resets).
            let limited = sf
                .last_sync_sent
                .is_some_and(|t| now - t < Duration::from_millis(100));
            if !matches!(seg.ptype, PacketType::Sync | PacketType::SyncAck) && !limited {
                sf.pend.sync = Some(seg.seq);
            }
            return;
        }
        {
            let sf = &mut self.paths[i];
            // Liveness: only packets that passed the validity checks count.
            sf.last_rx_at = sf.last_rx_at.max(now);
            if !sf.on_packet_received(now, seqn) {
                self.stats.rx_duplicate += 1;
                if seg.ptype.carries_data() {
                    return;
                }
            }
        }
        match seg.ptype {
            PacketType::Request => {
                // Retransmitted Request: repeat the Response.
                if state == SubState::Respond {
                    self.paths[i].pend.response = true;
                } else {
                    self.stats.rx_unexpected += 1;
                }
            }
            PacketType::Response => {
                if state == SubState::PartOpen {
                    // Our Ack was lost: repeat it.
                    self.paths[i].pend.handshake_ack = true;
                } else {
                    self.stats.rx_unexpected += 1;
                }
            }
            PacketType::Reset => self.handle_reset(now, i, seg),
            PacketType::Sync => {
                let sf = &mut self.paths[i];
                sf.pend.syncack = Some(seg.seq);
                if let Some(a) = ackn {
                    sf.gar = sf.gar.max(a);
                }
            }
            PacketType::SyncAck => {
                let sf = &mut self.paths[i];
                if sf.failed {
                    sf.failed = false;
                    sf.rto_count = 0;
                    sf.probe_at = None;
                    let id = sf.id;
                    self.events.push_back(Event::PathEstablished(id));
                }
            }
            PacketType::CloseReq => {
                self.handle_close_key(seg);
                let sf = &mut self.paths[i];
                sf.state = SubState::Closing;
                sf.pend.close = true;
                sf.retx_tries = 0;
                sf.retx_at = Some(now);
            }
            PacketType::Close => self.handle_close(now, i, seg),
            PacketType::Ack | PacketType::DataAck | PacketType::Data => {
                self.handle_ack_or_data(now, i, seg, ackn)
            }
        }
    }

    fn handle_in_request(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let sf = &self.paths[i];
        let ack_valid = seg.ack.is_some_and(|a| {
            let a = sf.unwrap_ack(a);
            a >= sf.iss && a <= sf.gss
        });
        match seg.ptype {
            PacketType::Reset if ack_valid => {
                self.stats.resets_received += 1;
                let first = !self.paths[i].join;
                let id = self.paths[i].id;
                self.fail_path(i, None);
                if first {
                    self.close_reason = Some(format!(
                        "connection refused (reset code {:?})",
                        seg.reset_code
                    ));
                }
                let _ = id;
            }
            PacketType::Response if ack_valid => self.handle_response(now, i, seg),
            _ => self.stats.rx_unexpected += 1,
        }
    }

    fn handle_response(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        {
            let sf = &mut self.paths[i];
            sf.set_isr(seg.seq);
            if let Some(a) = seg.ack {
                sf.gar = sf.unwrap_ack(a);
                sf.on_handshake_ack(now, sf.gar);
            }
        }
        let join = self.paths[i].join;
        if !join {
            let confirmed = seg
                .feat(opt::CONFIRM_R, FeatureNum::MultipathCapable)
                .is_some_and(|f| f.has_value);
            match seg.mp.key {
                Some(k) if self.config.multipath && confirmed && k.plain => {
                    self.remote_key = Some(k.key);
                    self.remote_ci = Some(k.ci);
                    self.mp = Some(true);
                }
                _ => {
                    if self.config.multipath {
                        self.stats.fallbacks += 1;
                    }
                    self.mp = Some(false);
                }
            }
        } else {
            // RFC 9897 §3.2.2: verify HMAC(d-keyB, RB‖RA) from the server.
            let ok = match (seg.mp.join, seg.mp.hmac, self.d_keys()) {
                (Some(j), Some(h), Some(k)) => {
                    let ra = self.paths[i].local_nonce;
                    keys::verify_join_hmac(&k.d_key_remote(), j.nonce, ra, &h).then_some(j)
                }
                _ => None,
            };
            match ok {
                Some(j) => {
                    let sf = &mut self.paths[i];
                    sf.remote_nonce = j.nonce;
                    sf.remote_addr_id = j.addr_id;
                }
                None => {
                    self.stats.join_bad_hmac += 1;
                    self.fail_path(i, Some(ResetCode::OptionError));
                    return;
                }
            }
        }
        let sf = &mut self.paths[i];
        sf.rx.record(sf.gsr);
        sf.state = SubState::PartOpen;
        sf.pend.handshake_ack = true;
        sf.retx_tries = 0;
        sf.retx_interval = self.config.handshake_rto;
        sf.retx_at = Some(now);
        // The Response-to-Request time is an RTT sample (RFC 4340 §8.1).
        let _ = now;
    }

    fn handle_ack_or_data(&mut self, now: Instant, i: usize, seg: &Segment<'_>, ackn: Option<u64>) {
        let state = self.paths[i].state;
        match state {
            SubState::Respond => {
                if seg.ptype == PacketType::Data {
                    self.stats.rx_unexpected += 1;
                    return;
                }
                if !self.verify_third_packet(i, seg) {
                    return;
                }
                if let Some(a) = ackn {
                    self.paths[i].on_handshake_ack(now, a);
                }
                self.mark_open(i);
                // The 4th packet of the handshake: lets the client leave PARTOPEN.
                self.paths[i].ack_now = true;
            }
            SubState::PartOpen => {
                self.mark_open(i);
            }
            SubState::Open if seg.ptype == PacketType::Ack => {
                // The peer repeats its third handshake packet (MP_HMAC of a
                // join, or the MP_KEY echo): our OPEN-confirming Ack was
                // lost and it is still in PARTOPEN (RFC 4340 §8.1.5).
                let sf = &self.paths[i];
                let repeat = (sf.join
                    && seg.mp.hmac.is_some()
                    && seg.mp.addaddr.is_none()
                    && seg.mp.removeaddr.is_none())
                    || seg.mp.key.is_some_and(|k| k.peer_key.is_some());
                if repeat && !sf.initiator {
                    self.paths[i].ack_now = true;
                }
            }
            _ => {}
        }
        // Options that matter in OPEN.
        self.handle_open_options(now, i, seg);
        if let Some(a) = ackn {
            self.snapshots();
            let sf = &mut self.paths[i];
            // Elapsed Time is in 10 µs units (RFC 4340 §13.2).
            let ack_delay = seg
                .elapsed_10us
                .map(|e| Duration::from_micros(u64::from(e) * 10));
            let recovered = sf.on_ack(now, a, seg.ack_vector, ack_delay, &self.snaps);
            if recovered {
                let id = sf.id;
                self.events.push_back(Event::PathEstablished(id));
            }
        }
        if seg.ptype.carries_data() {
            self.paths[i].on_data_received(now, self.config.ack_delay);
            self.handle_payload(now, i, seg);
        }
    }

    /// Server side of the third handshake packet: MP_KEY echo (first
    /// subflow) or MP_HMAC = HMAC(d-keyA, RA‖RB) (join).
    fn verify_third_packet(&mut self, i: usize, seg: &Segment<'_>) -> bool {
        if self.mp != Some(true) {
            return true;
        }
        let sf = &self.paths[i];
        if sf.join {
            let ok = match (seg.mp.hmac, self.d_keys()) {
                (Some(h), Some(k)) => {
                    keys::verify_join_hmac(&k.d_key_remote(), sf.remote_nonce, sf.local_nonce, &h)
                }
                _ => false,
            };
            if !ok {
                self.stats.join_bad_hmac += 1;
                let sf = &mut self.paths[i];
                sf.state = SubState::Closed;
                sf.pend = Default::default();
                sf.pend.reset = Some(ResetCode::OptionError);
                return false;
            }
        } else if let Some(k) = seg.mp.key {
            if Some(k.key) != self.remote_key || k.peer_key.is_some_and(|p| p != self.local_key) {
                self.stats.bad_key_echo += 1;
                let sf = &mut self.paths[i];
                sf.state = SubState::Closed;
                sf.pend = Default::default();
                sf.pend.reset = Some(ResetCode::OptionError);
                self.close_reason = Some("MP_KEY mismatch".into());
                return false;
            }
        }
        true
    }

    fn handle_open_options(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let _ = now;
        // Ack Ratio (RFC 4341 §6.1.2): the HC-sender changes it with
        // Change L; we (HC-receiver) confirm with Confirm R.
        if let Some(f) = seg.feat(opt::CHANGE_L, FeatureNum::AckRatio) {
            let sf = &mut self.paths[i];
            sf.ack_ratio_rx = (f.value as u32).clamp(1, 1 << 15);
            sf.pend.confirm_ack_ratio = Some(f.value);
        }
        if let Some(f) = seg.feat(opt::CONFIRM_R, FeatureNum::AckRatio) {
            let sf = &mut self.paths[i];
            if f.value == sf.ack_ratio_tx as u64 {
                sf.ack_ratio_unconfirmed = false;
            }
        }
        if self.mp != Some(true) {
            return;
        }
        let m = &seg.mp;
        if let Some(r) = m.rtt {
            let age = Duration::from_millis(r.age_ms as u64);
            // Raw and smoothed reports stand in for our own estimate until
            // we have one; min/max reports are not an RTT estimate.
            if matches!(r.kind, 0 | 3) && age < Duration::from_secs(10) {
                self.paths[i].peer_rtt = Some(Duration::from_millis(r.rtt_ms as u64));
            }
        }
        if let Some(p) = m.prio {
            let sf = &mut self.paths[i];
            let changed = sf.priority != p;
            sf.priority = p;
            let item = ConfirmItem {
                kind: mp::PRIO,
                id: p,
                ..ConfirmItem::default()
            };
            if !sf.pend.confirms.contains(&item) && sf.pend.confirms.len() < 8 {
                sf.pend.confirms.push(item);
            }
            sf.ack_now = true;
            if changed {
                let id = sf.id;
                self.events.push_back(Event::PriorityChanged {
                    path: id,
                    priority: p,
                });
            }
        }
        for c in m.confirms() {
            match c.kind {
                mp::PRIO => {
                    let sf = &mut self.paths[i];
                    if sf.pend.prio == Some(c.id) {
                        sf.pend.prio = None;
                        sf.pend.prio_retx_at = None;
                    }
                }
                mp::ADDADDR | mp::REMOVEADDR => {
                    let remove = c.kind == mp::REMOVEADDR;
                    if let Some(a) = self.adverts.iter_mut().find(|a| {
                        a.id == c.id && a.remove == remove && a.nonce == c.nonce && !a.confirmed
                    }) {
                        a.confirmed = true;
                        let id = a.id;
                        self.events.push_back(Event::AddressConfirmed { id });
                    }
                }
                _ => {}
            }
        }
        if let (Some(a), Some(h), Some(k)) = (m.addaddr, m.hmac, self.d_keys()) {
            if verify_addaddr(&k.d_key_remote(), &a, &h) {
                let addr = SocketAddr::new(a.ip, a.port.unwrap_or(0));
                if self.remote_addrs.insert(a.addr_id, addr) != Some(addr) {
                    self.events.push_back(Event::AddressAdded {
                        id: a.addr_id,
                        addr,
                    });
                }
                let sf = &mut self.paths[i];
                let item = ConfirmItem {
                    kind: mp::ADDADDR,
                    id: a.addr_id,
                    nonce: a.nonce,
                    addr: Some((a.ip, a.port)),
                };
                if sf.pend.confirms.len() < 8 {
                    sf.pend.confirms.push(item);
                }
                sf.ack_now = true;
            } else {
                self.stats.addaddr_bad_hmac += 1;
            }
        } else if m.addaddr.is_some() {
            self.stats.addaddr_bad_hmac += 1;
        }
        if let (Some(r), Some(h), Some(k)) = (m.removeaddr, m.hmac, self.d_keys()) {
            if verify_removeaddr(&k.d_key_remote(), &r, &h) {
                if self.remote_addrs.remove(&r.addr_id).is_some() {
                    self.events
                        .push_back(Event::AddressRemoved { id: r.addr_id });
                }
                // The MP_HMAC covers only id and nonce, so an observer could
                // replay it later; act on each (id, nonce) once.
                if self.removeaddr_seen.contains(&(r.addr_id, r.nonce)) {
                    self.stats.removeaddr_duplicate += 1;
                } else {
                    if self.removeaddr_seen.len() >= REMOVEADDR_SEEN_MAX {
                        self.removeaddr_seen.pop_front();
                    }
                    self.removeaddr_seen.push_back((r.addr_id, r.nonce));
                    self.close_paths_of_address(now, r.addr_id);
                }
                let sf = &mut self.paths[i];
                if sf.pend.confirms.len() < 8 {
                    sf.pend.confirms.push(ConfirmItem {
                        kind: mp::REMOVEADDR,
                        id: r.addr_id,
                        nonce: r.nonce,
                        addr: None,
                    });
                }
                sf.ack_now = true;
            } else {
                self.stats.removeaddr_bad_hmac += 1;
            }
        } else if m.removeaddr.is_some() {
            self.stats.removeaddr_bad_hmac += 1;
        }
    }

    fn handle_payload(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.stats.rx_data_pkts += 1;
        self.paths[i].stats.rx_data_pkts += 1;
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
            self.stats.rx_data_after_close += 1;
            return;
        }
        if self.mp != Some(true) {
            // Plain DCCP: arrival order, local numbering.
            self.plain_rx_seq += 1;
            self.stats.delivered_pkts += 1;
            self.stats.delivered_bytes += seg.payload.len() as u64;
            self.events.push_back(Event::Delivered {
                seq: self.plain_rx_seq,
                data: seg.payload.to_vec(),
            });
            return;
        }
        let Some(wire) = seg.mp.seq else {
            self.stats.rx_missing_mp_seq += 1;
            return;
        };
        let seq = match self.rx_mp_ref {
            None => wire,
            Some(r) => unwrap48(r, wire),
        };
        if let Some(r) = self.rx_mp_ref {
            let jump = self.config.max_mp_seq_jump.max(1);
            // Far ahead of the highest MP_SEQ seen, or absurdly far behind
            // it (behind by less is just a slow path: the reorderer judges).
            let implausible = seq > r.saturating_add(jump) || r - seq.min(r) > MP_SEQ_MAX_LAG;
            if implausible {
                // One forged or corrupt MP_SEQ must not drag the numbering
                // away; a run of mutually consistent packets (a genuine
                // renumbering, or a forged first reference) resynchronises.
                let n = match self.mp_jump_probe {
                    Some((p, n)) if p.abs_diff(seq) <= jump => n + 1,
                    _ => 1,
                };
                if n < MP_SEQ_RESYNC_PKTS {
                    self.mp_jump_probe = Some((seq, n));
                    self.stats.rx_mp_seq_implausible += 1;
                    return;
                }
                self.mp_jump_probe = None;
                self.stats.mp_seq_resyncs += 1;
                self.rx_mp_ref = Some(seq);
                self.reorder = reorder::build(&self.config.reorder);
            }
        }
        self.rx_mp_ref = Some(self.rx_mp_ref.map_or(seq, |r| r.max(seq)));
        let sf = &mut self.paths[i];
        sf.highest_mp_seq = Some(sf.highest_mp_seq.map_or(seq, |h| h.max(seq)));
        let path = sf.id;
        self.rebuild_views();
        self.rx_states.clear();
        for p in &self.paths {
            self.rx_states.push(PathReceiveState {
                path: p.id,
                highest_seq: p.highest_mp_seq,
                in_order: !p.ack_now,
            });
        }
        self.reorder.push(
            now,
            ReorderItem {
                seq,
                path,
                arrival: now,
                payload: seg.payload.to_vec(),
            },
            &self.views,
            &self.rx_states,
        );
        self.drain_reorder(now);
    }

    fn drain_reorder(&mut self, now: Instant) {
        while let Some(d) = self.reorder.pop(now) {
            self.stats.delivered_pkts += 1;
            self.stats.delivered_bytes += d.payload.len() as u64;
            self.events.push_back(Event::Delivered {
                seq: d.seq,
                data: d.payload,
            });
        }
    }

    fn handle_reset(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.stats.resets_received += 1;
        if seg.reset_code == ResetCode::MpFastClose {
            if seg.mp.fast_close.is_some_and(|k| k == self.local_key) {
                self.close_reason = Some("fast close by peer".into());
                self.discard_queue();
                for sf in &mut self.paths {
                    if sf.state != SubState::Closed {
                        sf.state = SubState::Closed;
                        sf.pend = Default::default();
                        sf.retx_at = None;
                        sf.rto_at = None;
                        self.events.push_back(Event::PathClosed(sf.id));
                    }
                }
                self.finish_close();
                return;
            }
            if seg.mp.fast_close.is_some() {
                self.stats.bad_close_key += 1;
            }
        }
        let sf = &mut self.paths[i];
        let id = sf.id;
        let was = sf.state;
        sf.pend = Default::default();
        sf.retx_at = None;
        sf.rto_at = None;
        if was == SubState::Closing {
            sf.state = SubState::TimeWait;
            sf.timewait_until = Some(now + self.config.timewait);
            self.events.push_back(Event::PathClosed(id));
        } else {
            sf.state = SubState::Closed;
            self.reinject(i);
            if was == SubState::Respond {
                // The peer gave up on this handshake.
            } else if was == SubState::PartOpen {
                self.events.push_back(Event::PathFailed(id));
            } else {
                self.events.push_back(Event::PathClosed(id));
            }
        }
    }

    fn handle_close(&mut self, _now: Instant, i: usize, seg: &Segment<'_>) {
        self.handle_close_key(seg);
        let sf = &mut self.paths[i];
        let id = sf.id;
        sf.pend = Default::default();
        sf.pend.reset = Some(ResetCode::Closed);
        sf.retx_at = None;
        sf.rto_at = None;
        sf.state = SubState::Closed;
        self.reinject(i);
        self.events.push_back(Event::PathClosed(id));
    }

    /// MP_CLOSE (RFC 9897 §3.2.11) with our key closes the whole connection.
    fn handle_close_key(&mut self, seg: &Segment<'_>) {
        if let Some(k) = seg.mp.close {
            if k == self.local_key {
                if !matches!(self.state, ConnState::Closing | ConnState::Closed) {
                    self.close_reason = Some("closed by peer".into());
                    self.state = ConnState::Closing;
                    self.discard_queue();
                }
            } else {
                self.stats.bad_close_key += 1;
            }
        }
    }

    // ---------------------------------------------------------------------
    // Internals: timers
    // ---------------------------------------------------------------------

    fn subflow_timers(&mut self, now: Instant, i: usize) {
        let max_tries = self.config.max_handshake_tries;
        let sf = &mut self.paths[i];
        if sf.retx_at.is_some_and(|t| t <= now) {
            match sf.state {
                SubState::Request | SubState::PartOpen if sf.retx_tries >= max_tries => {
                    self.stats.handshake_timeouts += 1;
                    let first = !sf.join;
                    let reset = (sf.state == SubState::PartOpen).then_some(ResetCode::Aborted);
                    self.fail_path(i, reset);
                    if first && self.state == ConnState::Handshaking {
                        self.close_reason = Some("handshake timed out".into());
                    }
                    return;
                }
                SubState::PartOpen => sf.pend.handshake_ack = true,
                SubState::Respond => {
                    // RFC 4340 §8.1.3: give up on a handshake that never
                    // completed (spoofed Requests hold no state for long).
                    self.stats.respond_timeouts += 1;
                    sf.state = SubState::Closed;
                    sf.retx_at = None;
                    sf.pend = Default::default();
                    return;
                }
                SubState::Closing | SubState::CloseReq if sf.retx_tries >= max_tries => {
                    sf.state = SubState::Closed;
                    sf.retx_at = None;
                    let id = sf.id;
                    self.events.push_back(Event::PathClosed(id));
                    return;
                }
                SubState::Closing => sf.pend.close = true,
                SubState::CloseReq => sf.pend.closereq = true,
                _ => {}
            }
        }
        let id = sf.id;
        let backup_up = self
            .paths
            .iter()
            .any(|p| p.id != id && p.is_open() && !p.failed && p.priority != 0);
        let fail_after = if backup_up {
            self.config.fail_after_rtos_with_backup
        } else {
            self.config.fail_after_rtos
        };
        let sf = &mut self.paths[i];
        if sf.pipe > 0 && sf.rto_at.is_some_and(|t| t <= now) && sf.on_rto(now, fail_after.max(1)) {
            {
                let id = sf.id;
                self.events.push_back(Event::PathFailed(id));
                self.reinject(i);
            }
        }
        let sf = &mut self.paths[i];
        if sf.ack_due.is_some_and(|t| t <= now) {
            sf.ack_now = true;
            sf.ack_due = None;
        }
        if sf.failed && sf.is_open() && sf.probe_at.is_some_and(|t| t <= now) {
            // Probe the failed path with a Sync; a SyncAck revives it.
            sf.pend.sync = Some(sf.gsr & SEQ_MASK);
            let next = (sf.rto()).min(self.config.max_probe_interval);
            sf.probe_at = Some(now + next);
        }
        if sf.timewait_until.is_some_and(|t| t <= now) {
            sf.timewait_until = None;
            sf.state = SubState::Closed;
        }
    }

    // ---------------------------------------------------------------------
    // Internals: output
    // ---------------------------------------------------------------------

    fn rebuild_views(&mut self) {
        self.views.clear();
        for p in &self.paths {
            self.views.push(p.view());
        }
    }

    fn snapshots(&mut self) {
        self.snaps.clear();
        for p in &self.paths {
            self.snaps.push(p.snapshot());
        }
    }

    /// Hands queued packets to paths as the scheduler decides; MP_SEQ is
    /// assigned here, in application order.
    fn schedule(&mut self, now: Instant) {
        if self.queue.len() == 0 || !self.paths.iter().any(|p| p.is_open() && !p.failed) {
            return;
        }
        // Within this loop only the per-path queues change, so a view is
        // refreshed when its path takes a packet, not rebuilt for every path.
        self.rebuild_views();
        for _ in 0..64 {
            let Some(head) = self.queue.front() else {
                break;
            };
            let meta = PacketMeta {
                len: head.data.len(),
                queued_pkts: self.queue.len(),
                queued_bytes: self.queue.bytes(),
            };
            self.sched_out.clear();
            self.scheduler
                .select(now, &meta, &self.views, &mut self.sched_out);
            // A usable path that could not take this packet (window or pacer)
            // has more demand than it carries: not application limited.
            for (k, v) in self.views.iter().enumerate() {
                if v.is_usable() && !v.can_send(now) && !self.sched_out.contains(&v.id) {
                    self.paths[k].blocked_at = Some(now);
                }
            }
            // Keep only paths that can carry data and are not hopelessly backlogged.
            let paths = &self.paths;
            self.sched_out.retain(|id| {
                paths
                    .binary_search_by_key(id, |p| p.id)
                    .ok()
                    .is_some_and(|i| {
                        let p = &paths[i];
                        p.is_open() && !p.failed && (p.queue.len() as u32) < p.cc.cwnd_pkts().max(1)
                    })
            });
            self.sched_out.dedup();
            if self.sched_out.is_empty() {
                break;
            }
            // Invariant: head existed above and nothing popped since.
            let q = self.queue.pop().expect("head exists");
            let seq = if self.mp == Some(true) {
                let s = self.next_mp_seq;
                self.next_mp_seq += 1;
                s
            } else {
                0
            };
            let n = self.sched_out.len();
            let mut q = Some(q);
            for k in 0..n {
                let id = self.sched_out[k];
                // Invariant: retained ids exist.
                let i = self.idx(id).expect("retained path exists");
                let item = if k + 1 == n {
                    q.take().expect("moved once")
                } else {
                    let src = q.as_ref().expect("still owned");
                    Queued {
                        data: src.data.clone(),
                        enqueued: src.enqueued,
                    }
                };
                self.paths[i].queue.push_back((seq, item));
                self.views[i] = self.paths[i].view();
            }
            self.scheduler.on_scheduled(now, &meta, &self.sched_out);
        }
    }

    fn base_segment<'a>(sf: &Subflow, ptype: PacketType, seq: u64) -> Segment<'a> {
        let mut s = Segment::new(ptype, seq & SEQ_MASK);
        s.src_port = sf.cfg.local.map_or(4242, |a| a.port());
        s.dst_port = sf.cfg.remote.map_or(4242, |a| a.port());
        if ptype.has_ack() {
            s.ack = Some(sf.gsr & SEQ_MASK);
        }
        s
    }

    /// Builds the next packet due on path `i`, if any.
    /// With `data_only`, only a data packet (for a GSO batch) is built.
    fn emit_on(
        &mut self,
        now: Instant,
        i: usize,
        buf: &mut [u8],
        data_only: bool,
    ) -> Option<usize> {
        let mp_on = self.mp == Some(true);
        let keys = self.d_keys();
        let sf = &mut self.paths[i];
        let addrs = codec::path_ips(sf.cfg.local, sf.cfg.remote);
        if data_only
            && !(sf.state == SubState::Open
                && sf.pend.reset.is_none()
                && sf.pend.sync.is_none()
                && sf.pend.syncack.is_none()
                && !sf.failed
                && !sf.queue.is_empty()
                && sf.cwnd_room()
                && sf.pacing_ok(now))
        {
            return None;
        }

        // 1. Reset (refusals, closes, fast close).
        if let Some(code) = sf.pend.reset.take() {
            let seq = sf.next_seq();
            let mut s = Self::base_segment(sf, PacketType::Reset, seq);
            s.reset_code = code;
            if code == ResetCode::MpFastClose {
                s.mp.fast_close = self.remote_key;
            }
            self.stats.resets_sent += 1;
            return self.finish_emit(s, addrs, buf);
        }
        match sf.state {
            SubState::Request => {
                if sf.retx_at.is_none_or(|t| t > now) {
                    return None;
                }
                sf.retx_tries += 1;
                sf.retx_at = Some(now + retx_backoff(sf.retx_interval, sf.retx_tries));
                let seq = sf.next_seq();
                sf.hs_probe = Some((seq, now));
                let mut s = Self::base_segment(sf, PacketType::Request, seq);
                s.service_code = self.config.service_code;
                s.push_feat(opt::CHANGE_L, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CHANGE_R, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CHANGE_R, FeatureNum::SendAckVector, Some(1));
                s.push_feat(
                    opt::CHANGE_L,
                    FeatureNum::SequenceWindow,
                    Some(sf.seq_window),
                );
                if self.config.multipath {
                    if !sf.join {
                        s.push_feat(opt::CHANGE_L, FeatureNum::MultipathCapable, Some(0));
                        s.mp.key = Some(MpKey {
                            plain: true,
                            ci: self.local_ci,
                            key: self.local_key,
                            peer_key: None,
                        });
                    } else {
                        s.mp.join = Some(MpJoin {
                            addr_id: sf.local_addr_id,
                            token: self.remote_ci.unwrap_or(0),
                            nonce: sf.local_nonce,
                        });
                    }
                }
                return self.finish_emit(s, addrs, buf);
            }
            SubState::Respond if sf.pend.response => {
                sf.pend.response = false;
                let seq = sf.next_seq();
                sf.hs_probe = Some((seq, now));
                let mut s = Self::base_segment(sf, PacketType::Response, seq);
                s.service_code = self.config.service_code;
                s.push_feat(opt::CONFIRM_L, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CONFIRM_R, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CONFIRM_L, FeatureNum::SendAckVector, Some(1));
                s.push_feat(
                    opt::CONFIRM_R,
                    FeatureNum::SequenceWindow,
                    Some(sf.seq_window),
                );
                if mp_on {
                    if !sf.join {
                        s.push_feat(opt::CONFIRM_R, FeatureNum::MultipathCapable, Some(0));
                        s.mp.key = Some(MpKey {
                            plain: true,
                            ci: self.local_ci,
                            key: self.local_key,
                            peer_key: None,
                        });
                    } else if let Some(k) = keys {
                        s.mp.join = Some(MpJoin {
                            addr_id: sf.local_addr_id,
                            token: self.remote_ci.unwrap_or(0),
                            nonce: sf.local_nonce,
                        });
                        // B: HMAC(d-keyB, RB‖RA).
                        s.mp.hmac = Some(keys::join_hmac(
                            &k.d_key_local(),
                            sf.local_nonce,
                            sf.remote_nonce,
                        ));
                    }
                } else if !sf.join {
                    // Feature 10 not understood / refused: empty Confirm
                    // (RFC 4340 §6.6.7) tells the client to fall back.
                    s.push_feat(opt::CONFIRM_R, FeatureNum::MultipathCapable, None);
                }
                return self.finish_emit(s, addrs, buf);
            }
            SubState::PartOpen if sf.pend.handshake_ack => {
                sf.pend.handshake_ack = false;
                sf.retx_tries += 1;
                sf.retx_at = Some(now + retx_backoff(sf.retx_interval, sf.retx_tries));
                let seq = sf.next_seq();
                let mut s = Self::base_segment(sf, PacketType::Ack, seq);
                let av = sf.rx.encode(
                    sf.ack_cover(self.config.ackvec_cover_pkts),
                    ACKVEC_MAX_CELLS,
                );
                if mp_on {
                    if !sf.join {
                        s.mp.key = Some(MpKey {
                            plain: true,
                            ci: self.local_ci,
                            key: self.local_key,
                            peer_key: self.remote_key,
                        });
                    } else if let Some(k) = keys {
                        // A: HMAC(d-keyA, RA‖RB).
                        s.mp.hmac = Some(keys::join_hmac(
                            &k.d_key_local(),
                            sf.local_nonce,
                            sf.remote_nonce,
                        ));
                    }
                }
                sf.on_ack_sent();
                s.ack_vector_out = Some(av);
                let r = self.finish_emit(s, addrs, buf);
                return r;
            }
            SubState::CloseReq if sf.pend.closereq => {
                sf.pend.closereq = false;
                sf.retx_tries += 1;
                sf.retx_at = Some(now + retx_backoff(sf.retx_interval, sf.retx_tries));
                let seq = sf.next_seq();
                let mut s = Self::base_segment(sf, PacketType::CloseReq, seq);
                if self.closing_mp {
                    s.mp.close = self.remote_key;
                }
                return self.finish_emit(s, addrs, buf);
            }
            SubState::Closing if sf.pend.close => {
                sf.pend.close = false;
                sf.retx_tries += 1;
                sf.retx_at = Some(now + retx_backoff(sf.retx_interval, sf.retx_tries));
                let seq = sf.next_seq();
                let mut s = Self::base_segment(sf, PacketType::Close, seq);
                if self.closing_mp {
                    s.mp.close = self.remote_key;
                }
                return self.finish_emit(s, addrs, buf);
            }
            _ => {}
        }
        if !sf.have_isr || !matches!(sf.state, SubState::Open | SubState::PartOpen) {
            return None;
        }
        // 2. Sync / SyncAck (RFC 4340 §7.5.4).
        if let Some(ack) = sf.pend.syncack.take() {
            let seq = sf.next_seq();
            let mut s = Self::base_segment(sf, PacketType::SyncAck, seq);
            s.ack = Some(ack);
            self.stats.syncacks_sent += 1;
            return self.finish_emit(s, addrs, buf);
        }
        if let Some(ack) = sf.pend.sync.take() {
            let seq = sf.next_seq();
            let mut s = Self::base_segment(sf, PacketType::Sync, seq);
            s.ack = Some(ack);
            sf.last_sync_sent = Some(now);
            self.stats.syncs_sent += 1;
            return self.finish_emit(s, addrs, buf);
        }
        if sf.state != SubState::Open {
            return None;
        }
        // 3. Data, when cwnd and the pacer allow.
        let data_ready = !sf.failed && !sf.queue.is_empty() && sf.cwnd_room() && sf.pacing_ok(now);
        // Connection-level MP options due on this path.
        let advert = if mp_on {
            self.adverts
                .iter()
                .position(|a| !a.confirmed && a.retx_at <= now)
        } else {
            None
        };
        let prio_due = sf.pend.prio.is_some() && sf.pend.prio_retx_at.is_some_and(|t| t <= now);
        let pure_ack =
            sf.wants_ack(now) || !sf.pend.confirms.is_empty() || prio_due || advert.is_some();
        if !data_ready && !pure_ack {
            return None;
        }
        let mut data = None;
        if data_ready {
            data = sf.queue.pop_front();
        }
        let ptype = if data.is_some() {
            PacketType::DataAck
        } else {
            PacketType::Ack
        };
        let seq = sf.next_seq();
        let mut s = Self::base_segment(sf, ptype, seq);
        let av = sf.rx.encode(
            sf.ack_cover(self.config.ackvec_cover_pkts),
            ACKVEC_MAX_CELLS,
        );
        s.ack_vector_out = Some(av);
        // A held pure ack says for how long, so the peer's RTT sample does
        // not carry our Ack Ratio / ack-timer wait (RFC 4340 §13.2). Data
        // packets leave it out: their size is budgeted to the MSS.
        if ptype == PacketType::Ack {
            s.elapsed_10us = sf.ack_elapsed_10us(now);
        }
        if let Some(v) = sf.pend.confirm_ack_ratio.take() {
            s.push_feat(opt::CONFIRM_R, FeatureNum::AckRatio, Some(v));
        }
        if let Some((mseq, q)) = &data {
            // Ack Ratio ≤ ceil(cwnd/2) (RFC 4341 §6.1.2).
            let want = sf.desired_ack_ratio(self.config.ack_ratio);
            if want != sf.ack_ratio_tx {
                sf.ack_ratio_tx = want;
                sf.ack_ratio_unconfirmed = true;
            }
            if sf.ack_ratio_unconfirmed {
                s.push_feat(
                    opt::CHANGE_L,
                    FeatureNum::AckRatio,
                    Some(sf.ack_ratio_tx as u64),
                );
            }
            if mp_on {
                s.mp.seq = Some(mseq & SEQ_MASK);
                let due = sf
                    .last_mp_rtt_sent
                    .is_none_or(|t| now - t >= self.config.mp_rtt_interval);
                if let (true, Some(srtt)) = (due, sf.rtt.srtt()) {
                    // RFC 9897 §3.2.7: cycle raw (with its age), min and
                    // smoothed RTT reports.
                    sf.last_mp_rtt_sent = Some(now);
                    let kind = sf.mp_rtt_next_kind;
                    sf.mp_rtt_next_kind = match kind {
                        0 => 1,
                        1 => 3,
                        _ => 0,
                    };
                    let ms = |d: Duration| d.as_millis().min(u32::MAX as u128) as u32;
                    let (rtt, age) = match kind {
                        0 => (
                            sf.rtt.latest().unwrap_or(srtt),
                            sf.last_rtt_sample_at.map_or(Duration::ZERO, |t| now - t),
                        ),
                        1 => (sf.rtt.min_rtt().unwrap_or(srtt), Duration::ZERO),
                        _ => (srtt, Duration::ZERO),
                    };
                    s.mp.rtt = Some(codec::MpRtt {
                        kind,
                        rtt_ms: ms(rtt),
                        age_ms: ms(age),
                    });
                }
            }
            s.payload = &q.data;
        }
        if mp_on {
            for c in sf.pend.confirms.drain(..) {
                if !s.mp.push_confirm(c) {
                    break;
                }
            }
            if prio_due {
                s.mp.prio = sf.pend.prio;
                sf.pend.prio_tries += 1;
                if sf.pend.prio_tries >= self.config.mp_option_max_tries {
                    sf.pend.prio = None;
                    sf.pend.prio_retx_at = None;
                    self.stats.mp_option_unconfirmed += 1;
                } else {
                    sf.pend.prio_retx_at = Some(now + self.config.mp_option_rto.max(sf.rtt.rto()));
                }
            }
            // ADDADDR/REMOVEADDR travel on pure Acks (their MP_HMAC would
            // clash with nothing else there).
            if let (Some(ai), Some(k), None) = (advert, keys, &data) {
                let rto = self.config.mp_option_rto.max(sf.rtt.rto());
                let a = &mut self.adverts[ai];
                a.tries += 1;
                a.retx_at = now + rto;
                if a.remove {
                    let r = MpRemoveAddr {
                        addr_id: a.id,
                        nonce: a.nonce,
                    };
                    s.mp.hmac = Some(removeaddr_hmac(&k.d_key_local(), &r));
                    s.mp.removeaddr = Some(r);
                } else {
                    let ad = MpAddAddr {
                        addr_id: a.id,
                        nonce: a.nonce,
                        ip: a.addr.ip(),
                        port: (a.addr.port() != 0).then_some(a.addr.port()),
                    };
                    s.mp.hmac = Some(addaddr_hmac(&k.d_key_local(), &ad));
                    s.mp.addaddr = Some(ad);
                }
            }
        }
        let sf = &mut self.paths[i];
        sf.on_ack_sent();
        let result = s.emit(buf, addrs);
        if let Some((_, q)) = data {
            let bytes = q.data.len() as u32;
            if result.is_some() {
                // Draft-cheng §3.4, per path: nothing waiting here or in the
                // connection queue, window not full, and no packet diverted
                // away from this path within the last round trip.
                let rtt = sf.rtt.srtt().unwrap_or(self.config.initial_rto);
                let app_limited = sf.queue.is_empty()
                    && self.queue.len() == 0
                    && sf.pipe + 1 < sf.cc.cwnd_pkts()
                    && sf.blocked_at.is_none_or(|t| now - t > rtt);
                sf.on_data_sent(now, seq, bytes, app_limited);
                self.stats.tx_data_pkts += 1;
            } else {
                self.stats.tx_buffer_too_small += 1;
            }
            self.queue.recycle(q.data);
        }
        if result.is_none() {
            self.stats.tx_buffer_too_small += 1;
        }
        result
    }

    fn finish_emit(
        &mut self,
        mut s: Segment<'_>,
        addrs: (IpAddr, IpAddr),
        buf: &mut [u8],
    ) -> Option<usize> {
        let r = s.emit(buf, addrs);
        if r.is_none() {
            self.stats.tx_buffer_too_small += 1;
        }
        r
    }
}

impl Subflow {
    fn has_pending_reset(&self) -> bool {
        self.pend.reset.is_some()
    }
}

/// MP_ADDADDR authentication (RFC 9897 §3.2.8): HMAC-SHA256 with the
/// sender's derived key over Address ID ‖ Nonce ‖ Address ‖ Port.
fn addaddr_hmac(d_key: &[u8; 16], a: &MpAddAddr) -> [u8; keys::HMAC_LEN] {
    let ip = ip_bytes(a.ip);
    let port = a.port.map(|p| p.to_be_bytes());
    keys::hmac20(
        d_key,
        &[
            &[a.addr_id],
            &a.nonce.to_be_bytes(),
            &ip[..ip_len(a.ip)],
            port.as_ref().map_or(&[][..], |p| &p[..]),
        ],
    )
}

fn verify_addaddr(d_key: &[u8; 16], a: &MpAddAddr, tag: &[u8; keys::HMAC_LEN]) -> bool {
    let ip = ip_bytes(a.ip);
    let port = a.port.map(|p| p.to_be_bytes());
    keys::verify20(
        d_key,
        &[
            &[a.addr_id],
            &a.nonce.to_be_bytes(),
            &ip[..ip_len(a.ip)],
            port.as_ref().map_or(&[][..], |p| &p[..]),
        ],
        tag,
    )
}

/// MP_REMOVEADDR authentication: HMAC over Address ID ‖ Nonce.
fn removeaddr_hmac(d_key: &[u8; 16], r: &MpRemoveAddr) -> [u8; keys::HMAC_LEN] {
    keys::hmac20(d_key, &[&[r.addr_id], &r.nonce.to_be_bytes()])
}

fn verify_removeaddr(d_key: &[u8; 16], r: &MpRemoveAddr, tag: &[u8; keys::HMAC_LEN]) -> bool {
    keys::verify20(d_key, &[&[r.addr_id], &r.nonce.to_be_bytes()], tag)
}

/// When an open, silent subflow is due a keepalive probe (`k` after the
/// last packet received and after the previous probe). Failed subflows
/// have their own probes.
fn keepalive_due(sf: &Subflow, k: Duration) -> Option<Instant> {
    if !sf.is_open() || sf.failed {
        return None;
    }
    let at = sf.last_rx_at + k;
    Some(sf.keepalive_at.map_or(at, |p| at.max(p + k)))
}

/// Exponential backoff of handshake/close retransmissions, each interval
/// capped at 4 s so a bounded number of tries ends in bounded time.
fn retx_backoff(base: Duration, tries: u32) -> Duration {
    (base * (1u32 << tries.saturating_sub(1).min(10))).min(Duration::from_secs(4))
}

fn ip_bytes(ip: IpAddr) -> [u8; 16] {
    let mut b = [0u8; 16];
    match ip {
        IpAddr::V4(v) => b[..4].copy_from_slice(&v.octets()),
        IpAddr::V6(v) => b.copy_from_slice(&v.octets()),
    }
    b
}

fn ip_len(ip: IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 16,
    }
}
