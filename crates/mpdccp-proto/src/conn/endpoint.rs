//! A server endpoint for many clients: demultiplexes datagrams to
//! connections by a driver-supplied remote-address key `K` (e.g. the UDP
//! source `SocketAddr`), creates connections for MP_KEY (or plain)
//! Requests, routes MP_JOIN Requests by their path token (the server's
//! connection identifier), and bounds the number of half-open connections so
//! a flood of Requests cannot exhaust memory.
//!
//! Timers and output scale with the connections that have work, not with
//! all of them: deadlines are kept in an ordered index (`poll_timeout` is its
//! first entry, `handle_timeout` pops the expired ones) and `poll_transmit`
//! asks only the connections touched since they last had nothing to send.
//! A server with 1 000 idle clients must not scan them all per packet.
//!
//! With an `auth::Gate` ([`Endpoint::enable_auth`], docs/SECURITY.md §3) a
//! Request creates a connection only when its Init (MP_KEY key type 255 +
//! MP_EXP) comes from a configured peer; under load the answer is a
//! stateless cookie reply in a Reset (code 9). Nothing else from an unknown
//! remote is answered (no reflection towards spoofed sources). In open mode
//! Resets to unknown remotes are rate limited.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::codec::{PacketType, ResetCode, Segment};
use super::{Connection, ConnectionConfig, Event, Incoming, Role, Transmit};
use crate::auth::framing;
use crate::auth::gate::{Admission, Gate, GateStats};
use crate::auth::{PeerId, ResponderStats, SessionKeys};
use crate::path::PathId;
use crate::time::Instant;

#[path = "rebind.rs"]
mod rebind;

/// The admission gate and how to get a key's UDP source (cookies bind to it).
type AuthGate<K> = (Gate<K>, fn(&K) -> SocketAddr);

/// Room for a stateless Reset with a cookie reply in MP_EXP (28 + 60).
const RESET_BUF: usize = 96;

/// Endpoint settings.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Settings of every accepted connection.
    pub conn: ConnectionConfig,
    /// Most connections at once (new Requests beyond get Reset 9).
    pub max_connections: usize,
    /// Most connections that have not reached OPEN yet.
    pub max_half_open: usize,
    /// Stateless Resets waiting to be sent, at most.
    pub max_pending_resets: usize,
    /// Open mode: stateless Resets to unknown remotes per second, at most
    /// (a spoofed source must not turn the server into a reflector).
    pub max_resets_per_sec: u32,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            conn: ConnectionConfig::default(),
            max_connections: 1024,
            max_half_open: 64,
            max_pending_resets: 64,
            max_resets_per_sec: 200,
        }
    }
}

/// Identifies a connection of an [`Endpoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionHandle(pub u64);

/// Endpoint counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct EndpointStats {
    pub accepted: u64,
    pub joins_routed: u64,
    pub unknown_token: u64,
    pub refused_half_open: u64,
    pub refused_max_connections: u64,
    /// Non-Request datagrams from unknown remotes.
    pub unknown_remote: u64,
    pub malformed: u64,
    pub resets_dropped: u64,
    /// Open mode: Resets not sent, over `max_resets_per_sec`.
    pub resets_rate_limited: u64,
    pub closed_connections: u64,
    /// Authenticated mode: Requests without a valid Init from a configured
    /// peer (bad mac1, unknown key, replay, rate limit…): dropped, no state.
    pub refused_unauthenticated: u64,
    /// A Request offering key type 255 next to another key type.
    pub downgrade_refused: u64,
    /// Stateless cookie replies sent under load.
    pub cookie_replies: u64,
    /// Datagrams from unknown remotes dropped without an answer.
    pub dropped_silently: u64,
    /// Connections closed because the same peer connected again.
    pub superseded: u64,
    /// A connection opened whose gate entry was gone (replaced, expired).
    pub confirm_orphaned: u64,
    /// NAT rebinding (`rebind.rs`): valid packets of a known subflow from
    /// a new remote that started (or renewed) a challenge of it.
    pub rebind_candidates: u64,
    /// New remotes whose challenge was answered: the path moved to them.
    pub rebinds_validated: u64,
    /// Datagrams from unknown remotes that claimed a known subflow (by
    /// its DCCP ports) and failed the checks, SyncAcks answering no
    /// challenge, candidates refused by the full table.
    pub rebind_rejected: u64,
    /// Fleet mode: joins naming another host's id in their CI, answered
    /// with a Reset (`fleet.rs`).
    pub join_other_host: u64,
    /// Requests for a new connection while closing (`stop_accepting`).
    pub refused_closing: u64,
}

/// A multi-client server endpoint. `K` is the driver's remote-address key.
pub struct Endpoint<K: Ord + Clone> {
    config: EndpointConfig,
    seed: u64,
    next_handle: u64,
    conns: BTreeMap<ConnectionHandle, Slot>,
    routes: BTreeMap<K, (ConnectionHandle, PathId)>,
    reverse: BTreeMap<(ConnectionHandle, PathId), K>,
    /// Connections by the identifier their joins carry ([`Connection::join_token`]).
    by_ci: BTreeMap<u32, ConnectionHandle>,
    resets: VecDeque<(K, [u8; RESET_BUF], usize)>,
    events: VecDeque<(ConnectionHandle, Event)>,
    stats: EndpointStats,
    /// `(deadline, handle)` of every connection not in `dirty`, as its
    /// `poll_timeout` was when it left `dirty` (its state, hence its
    /// deadline, cannot change without an input, which marks it dirty).
    timers: BTreeSet<(Instant, ConnectionHandle)>,
    /// Connections given an input (datagram, timeout, `send`,
    /// `connection_mut`) since `poll_transmit` last found nothing to send
    /// on them: they may have output, and their index entry may be stale.
    dirty: BTreeSet<ConnectionHandle>,
    /// Authenticated mode: the admission gate and the UDP source of a key.
    gate: Option<AuthGate<K>>,
    /// The peer each authenticated connection belongs to.
    peers: BTreeMap<ConnectionHandle, PeerId>,
    rng: ChaCha8Rng,
    /// Open mode's Reset budget: (window start, Resets in it).
    reset_window: (Instant, u32),
    /// NAT rebinding: subflows' DCCP ports, pending candidates.
    rebind: rebind::Rebind<K>,
    /// Fleet mode: this host's id, the top byte of its CIs (`fleet.rs`).
    fleet_host: Option<u8>,
    /// Closing (`stop_accepting`): no new connections.
    closing: bool,
    /// Whether two keys are the same path (`identify_paths`).
    same_path: Option<fn(&K, &K) -> bool>,
}

struct Slot {
    conn: Connection,
    next_path: u32,
    /// This connection's entry in `Endpoint::timers`.
    indexed: Option<Instant>,
}

impl<K: Ord + Clone> Endpoint<K> {
    pub fn new(config: EndpointConfig, seed: u64) -> Self {
        Endpoint {
            config,
            seed,
            next_handle: 0,
            conns: BTreeMap::new(),
            routes: BTreeMap::new(),
            reverse: BTreeMap::new(),
            by_ci: BTreeMap::new(),
            resets: VecDeque::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
            timers: BTreeSet::new(),
            dirty: BTreeSet::new(),
            gate: None,
            peers: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6175_7468),
            reset_window: (Instant::ZERO, 0),
            rebind: rebind::Rebind::default(),
            fleet_host: None,
            closing: false,
            same_path: None,
        }
    }

    /// `same(a, b)`: keys `a` and `b` are the same path (the same two
    /// addresses; ports aside). A join that opens on a path where the
    /// connection has another subflow may then retire it
    /// ([`Connection::retire_replaced`], authenticated modes only).
    pub fn identify_paths(&mut self, same: fn(&K, &K) -> bool) {
        self.same_path = Some(same);
    }

    /// The server is closing (SIGTERM, a fleet host draining): Requests
    /// for new connections are refused (Reset 9, Too Busy, where Resets
    /// are sent), so the connections being closed are the last.
    pub fn stop_accepting(&mut self) {
        self.closing = true;
    }

    /// Fleet mode (docs/FLEET.md): CIs carry `host` (1–255) in their top
    /// byte, and a join naming another host gets a Reset.
    pub fn set_fleet_host(&mut self, host: u8) {
        self.fleet_host = (host != 0).then_some(host);
    }

    /// Authenticated mode: only Requests the gate admits create connections.
    /// `source_of` gives the UDP source of a key (cookies bind to it).
    pub fn enable_auth(&mut self, gate: Gate<K>, source_of: fn(&K) -> SocketAddr) {
        self.gate = Some((gate, source_of));
    }

    /// The configured peer an authenticated connection belongs to (known
    /// once it is established).
    pub fn peer(&self, h: ConnectionHandle) -> Option<PeerId> {
        self.peers.get(&h).copied()
    }

    /// The gate's and the responder's counters (authenticated mode).
    pub fn auth_stats(&self) -> Option<(GateStats, ResponderStats)> {
        self.gate
            .as_ref()
            .map(|(g, _)| (g.stats(), g.responder().stats()))
    }

    /// The gate's peers (authenticated mode).
    pub fn peer_table(&self) -> Option<&crate::auth::PeerTable> {
        self.gate.as_ref().map(|(g, _)| g.responder().peers())
    }

    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.conns.get(&h).map(|s| &s.conn)
    }

    /// The caller may change the connection: it is treated as given an input.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let s = self.conns.get_mut(&h)?;
        self.dirty.insert(h);
        Some(&mut s.conn)
    }

    /// Handles of all live connections, in order.
    pub fn connections(&self) -> Vec<ConnectionHandle> {
        self.conns.keys().copied().collect()
    }

    /// Connections that `poll_transmit` / `poll_timeout` still look at one
    /// by one (given an input since they last had nothing to send); the
    /// rest cost O(log n) through the deadline index.
    pub fn connections_with_work(&self) -> usize {
        self.dirty.len()
    }

    /// The connection and path a remote key is routed to.
    pub fn route(&self, remote: &K) -> Option<(ConnectionHandle, PathId)> {
        self.routes.get(remote).copied()
    }

    /// The remote key a connection's path is routed from (for status).
    pub fn remote_of(&self, h: ConnectionHandle, path: PathId) -> Option<&K> {
        self.reverse.get(&(h, path))
    }

    /// Processes one datagram from `remote`; returns the connection it went to.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        remote: K,
        data: &[u8],
    ) -> Option<ConnectionHandle> {
        self.handle_datagram_from(now, remote, None, data)
    }

    /// As [`Endpoint::handle_datagram`], with the (local, remote) socket
    /// addresses the datagram travelled between: a path created by it takes
    /// them for its checksums' pseudo-header (the client verifies them).
    pub fn handle_datagram_from(
        &mut self,
        now: Instant,
        remote: K,
        addrs: Option<(SocketAddr, SocketAddr)>,
        data: &[u8],
    ) -> Option<ConnectionHandle> {
        self.handle_incoming(now, remote, addrs, &mut Incoming::new(data))
    }

    /// As [`Endpoint::handle_datagram_from`], with a datagram its receiver
    /// may have parsed already (a sharded server's steering): a datagram is
    /// parsed once on its way to the connection.
    pub fn handle_incoming(
        &mut self,
        now: Instant,
        remote: K,
        addrs: Option<(SocketAddr, SocketAddr)>,
        rx: &mut Incoming<'_>,
    ) -> Option<ConnectionHandle> {
        let h = self.dispatch(now, remote.clone(), rx)?;
        if let (Some((l, r)), Some(&(_, pid))) = (addrs, self.routes.get(&remote)) {
            if let Some(slot) = self.conns.get_mut(&h) {
                slot.conn.set_path_addresses(pid, Some(l), Some(r));
            }
        }
        Some(h)
    }

    fn dispatch(
        &mut self,
        now: Instant,
        remote: K,
        rx: &mut Incoming<'_>,
    ) -> Option<ConnectionHandle> {
        let data = rx.data();
        if let Some(&(h, pid)) = self.routes.get(&remote) {
            if self.deliver_routed(now, h, pid, data) {
                return Some(h);
            }
        }
        let seg = match rx.parse(self.config.conn.wire_profile) {
            Ok(s) => s,
            Err(_) => {
                self.stats.malformed += 1;
                return None;
            }
        };
        if seg.ptype != PacketType::Request {
            match self.try_rebind(now, &remote, seg, data) {
                rebind::Outcome::Accepted(h) => return Some(h),
                rebind::Outcome::Dropped => return None,
                rebind::Outcome::NoClaim => {}
            }
            self.stats.unknown_remote += 1;
            if seg.ptype != PacketType::Reset {
                self.queue_reset(now, remote, seg, ResetCode::NoConnection);
            }
            return None;
        }
        if let Some(j) = seg.mp.join {
            return self.route_join(now, remote, seg, j.token, data);
        }
        // A new connection.
        if self.refuses_new_connection(now, &remote, seg) {
            return None;
        }
        let admitted = match self.gate.is_some() {
            true => Some(self.admit(now, &remote, seg)?),
            false => None,
        };
        Some(self.accept_connection(now, remote, seg, data, admitted))
    }

    /// A datagram on a known route goes to its connection; false when the
    /// connection is gone.
    fn deliver_routed(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        pid: PathId,
        data: &[u8],
    ) -> bool {
        let contest = self.has_candidate(now, h, pid);
        let Some(slot) = self.conns.get_mut(&h) else {
            return false;
        };
        let failed = contest.then(|| rebind::not_the_peers(&slot.conn.stats));
        slot.conn.handle_datagram(now, pid, data);
        // A packet of the peer's on the routed key (in its window,
        // a duplicate or not): that path is alive, so its
        // candidate is no rebinding (`rebind.rs`).
        if failed.is_some_and(|f| rebind::not_the_peers(&slot.conn.stats) == f) {
            self.routed_heard(now, h, pid);
        }
        self.dirty.insert(h);
        self.collect(h);
        true
    }

    /// A join Request (MP_JOIN naming `token`): a new path of the
    /// connection it names, or a Reset when none here has that token.
    fn route_join(
        &mut self,
        now: Instant,
        remote: K,
        seg: &Segment<'_>,
        token: u32,
        data: &[u8],
    ) -> Option<ConnectionHandle> {
        let Some(&h) = self.by_ci.get(&token) else {
            if super::fleet::names_other_host(self.fleet_host, token) {
                // Answered in every mode: the client must learn that
                // ECMP sent its join to the wrong host (`fleet.rs`).
                self.stats.join_other_host += 1;
                self.rate_limited_reset(now, remote, seg, ResetCode::NoConnection);
            } else {
                self.stats.unknown_token += 1;
                self.queue_reset(now, remote, seg, ResetCode::NoConnection);
            }
            return None;
        };
        let slot = self.conns.get_mut(&h)?;
        let pid = PathId(slot.next_path);
        slot.next_path += 1;
        self.routes.insert(remote.clone(), (h, pid));
        self.reverse.insert((h, pid), remote);
        slot.conn.handle_parsed(now, pid, data, seg);
        self.note_ports(h, pid, seg);
        self.dirty.insert(h);
        self.stats.joins_routed += 1;
        self.collect(h);
        Some(h)
    }

    /// A new connection is refused (Reset 9, Too Busy) while draining, at
    /// `max_connections`, or at `max_half_open` handshakes in progress.
    fn refuses_new_connection(&mut self, now: Instant, remote: &K, seg: &Segment<'_>) -> bool {
        if self.closing {
            self.stats.refused_closing += 1;
        } else if self.conns.len() >= self.config.max_connections {
            self.stats.refused_max_connections += 1;
        } else if self
            .conns
            .values()
            .filter(|s| !s.conn.is_established() && !s.conn.is_closed())
            .count()
            >= self.config.max_half_open
        {
            self.stats.refused_half_open += 1;
        } else {
            return false;
        }
        self.queue_reset(now, remote.clone(), seg, ResetCode::TooBusy);
        true
    }

    /// Creates the server connection a first-subflow Request opens (path
    /// 0), with its seed, its fleet CI and, when the gate admitted it, the
    /// authenticated handshake's keys.
    fn accept_connection(
        &mut self,
        now: Instant,
        remote: K,
        seg: &Segment<'_>,
        data: &[u8],
        admitted: Option<(Box<SessionKeys>, [u8; crate::auth::handshake::RESPONSE_LEN])>,
    ) -> ConnectionHandle {
        let h = ConnectionHandle(self.next_handle);
        self.next_handle += 1;
        let seed = self
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(h.0);
        let mut conn = Connection::new(Role::Server, self.config.conn.clone(), now, seed);
        if let Some(host) = self.fleet_host {
            let mut ci = super::fleet::with_host(conn.local_ci(), host);
            while self.by_ci.contains_key(&ci) {
                ci = super::fleet::next_on_host(ci);
            }
            conn.set_local_ci(ci);
        }
        if let Some((keys, response)) = admitted {
            conn.preset_server_auth(*keys, response);
        }
        conn.handle_parsed(now, PathId(0), data, seg);
        self.by_ci.insert(conn.join_token(), h);
        self.routes.insert(remote.clone(), (h, PathId(0)));
        self.reverse.insert((h, PathId(0)), remote);
        self.note_ports(h, PathId(0), seg);
        self.conns.insert(
            h,
            Slot {
                conn,
                next_path: 1,
                indexed: None,
            },
        );
        self.dirty.insert(h);
        self.stats.accepted += 1;
        self.collect(h);
        h
    }

    /// Queues one tunnelled packet on a connection.
    pub fn send(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        packet: &[u8],
    ) -> Result<(), super::SendError> {
        match self.conns.get_mut(&h) {
            Some(s) => {
                self.dirty.insert(h);
                s.conn.send(now, packet)
            }
            None => Err(super::SendError::Closed),
        }
    }

    /// Fires the connections whose deadline is at or before `now`, in
    /// handle order: the expired index entries and the dirty connections
    /// (whose entries may be stale), O(k log n) for k of them.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some((g, _)) = &mut self.gate {
            g.expire(now);
        }
        let mut due: BTreeSet<ConnectionHandle> = self.dirty.clone();
        while let Some(&(t, h)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            if let Some(s) = self.conns.get_mut(&h) {
                s.indexed = None;
            }
            // Re-indexed when poll_transmit next finds it idle.
            self.dirty.insert(h);
            due.insert(h);
        }
        for h in due {
            if let Some(s) = self.conns.get_mut(&h) {
                if s.conn.poll_timeout().is_some_and(|t| t <= now) {
                    s.conn.handle_timeout(now);
                }
            }
            self.collect(h);
        }
        debug_assert!(
            self.poll_timeout().is_none_or(|t| t > now),
            "stuck timer after Endpoint::handle_timeout({now:?})"
        );
    }

    /// Next datagram to send, with the remote key it goes to.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<(K, Transmit)> {
        if let Some((k, b, n)) = self.resets.pop_front() {
            if buf.len() >= n {
                buf[..n].copy_from_slice(&b[..n]);
                return Some((
                    k,
                    Transmit {
                        path: PathId(u32::MAX),
                        size: n,
                        segment_size: None,
                    },
                ));
            }
        }
        let hs: Vec<_> = self.dirty.iter().copied().collect();
        for h in hs {
            let Some(s) = self.conns.get_mut(&h) else {
                self.dirty.remove(&h);
                continue;
            };
            if let Some(t) = s.conn.poll_transmit(now, buf) {
                // The key first: collecting may forget the connection (its
                // last packet, a Reset, has just been taken) and its routes.
                let to = self.destination(now, h, &t, buf);
                self.collect(h);
                if let Some(k) = to {
                    return Some((k, t));
                }
                continue;
            }
            self.collect(h);
            // Nothing to send: back in the index until its next input.
            self.reindex(h);
        }
        None
    }

    /// The earliest deadline: the index's first entry, or a dirty
    /// connection's own (O(log n + dirty)).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let gate = self.gate.as_ref().and_then(|(g, _)| g.poll_timeout());
        let dirty = self
            .dirty
            .iter()
            .filter_map(|h| self.conns.get(h)?.conn.poll_timeout());
        self.timers
            .first()
            .map(|e| e.0)
            .into_iter()
            .chain(dirty)
            .chain(gate)
            .min()
    }

    /// Takes `h` out of `dirty` and indexes its current deadline.
    fn reindex(&mut self, h: ConnectionHandle) {
        self.dirty.remove(&h);
        let Some(s) = self.conns.get_mut(&h) else {
            return;
        };
        let next = s.conn.poll_timeout();
        if next == s.indexed {
            return;
        }
        if let Some(old) = s.indexed {
            self.timers.remove(&(old, h));
        }
        if let Some(t) = next {
            self.timers.insert((t, h));
        }
        s.indexed = next;
    }

    pub fn poll_event(&mut self) -> Option<(ConnectionHandle, Event)> {
        self.events.pop_front()
    }

    /// Hands back the buffer of connection `h`'s [`Event::Delivered`] once
    /// read ([`Connection::recycle_delivered`]): its next received payloads
    /// reuse it instead of allocating. Not an input: `h` stays idle.
    pub fn recycle_delivered(&mut self, h: ConnectionHandle, buf: Vec<u8>) {
        if let Some(s) = self.conns.get_mut(&h) {
            s.conn.recycle_delivered(buf);
        }
    }

    /// Moves a connection's events out, drops routes of subflows the
    /// connection forgot (refused or expired joins), and forgets the
    /// connection once closed.
    fn collect(&mut self, h: ConnectionHandle) {
        let Some(s) = self.conns.get_mut(&h) else {
            return;
        };
        let gone: Vec<_> = self
            .reverse
            .range((h, PathId(0))..=(h, PathId(u32::MAX)))
            .filter(|((_, pid), _)| !s.conn.has_path(*pid))
            .map(|(k, _)| k.1)
            .collect();
        for pid in gone {
            self.unroute(h, pid);
        }
        let Some(s) = self.conns.get_mut(&h) else {
            return;
        };
        let mut closed = false;
        let mut connected = false;
        let mut opened = Vec::new();
        while let Some(e) = s.conn.poll_event() {
            match e {
                Event::Closed { .. } => closed = true,
                Event::Connected => connected = true,
                Event::PathEstablished(p) => opened.push(p),
                _ => {}
            }
            self.events.push_back((h, e));
        }
        if let Some(same) = self.same_path {
            for p in opened {
                self.retire_replaced(h, p, same);
            }
        }
        if connected {
            self.authenticated(h);
        }
        let Some(s) = self.conns.get_mut(&h) else {
            return;
        };
        if closed || s.conn.is_closed() {
            // Keep the connection until its final Resets have gone out
            // (the Reset answering a Close ends the client's close at once;
            // dropped here, the client retransmitted its Close 0.5 s later).
            if s.conn.poll_timeout().is_none() && !s.conn.owes_reset() {
                if let (Some((g, _)), Some(k)) = (&mut self.gate, self.reverse.get(&(h, PathId(0))))
                {
                    g.forget(k);
                }
                self.peers.remove(&h);
                let ci = s.conn.join_token();
                if let Some(t) = s.indexed {
                    self.timers.remove(&(t, h));
                }
                self.dirty.remove(&h);
                self.conns.remove(&h);
                self.by_ci.remove(&ci);
                let keys: Vec<_> = self
                    .reverse
                    .range((h, PathId(0))..=(h, PathId(u32::MAX)))
                    .map(|(k, _)| k.1)
                    .collect();
                for pid in keys {
                    self.unroute(h, pid);
                }
                self.stats.closed_connections += 1;
            }
        }
    }

    /// Path `p` of `h` opened: the connection's other subflows on the
    /// same path may be ones it replaces.
    fn retire_replaced(&mut self, h: ConnectionHandle, p: PathId, same: fn(&K, &K) -> bool) {
        let Some(kp) = self.reverse.get(&(h, p)) else {
            return;
        };
        let others: Vec<PathId> = self
            .reverse
            .range((h, PathId(0))..=(h, PathId(u32::MAX)))
            .filter(|((_, q), k)| *q != p && same(k, kp))
            .map(|((_, q), _)| *q)
            .collect();
        let Some(s) = self.conns.get_mut(&h) else {
            return;
        };
        for q in others {
            s.conn.retire_replaced(p, q);
        }
        while let Some(e) = s.conn.poll_event() {
            self.events.push_back((h, e));
        }
    }

    /// Authenticated mode: the gate's verdict on a new Request's Init. The
    /// keys and Response for the connection, or `None` (dropped silently,
    /// or answered with a stateless cookie reply).
    fn admit(
        &mut self,
        now: Instant,
        remote: &K,
        seg: &Segment<'_>,
    ) -> Option<(Box<SessionKeys>, [u8; crate::auth::handshake::RESPONSE_LEN])> {
        let (gate, source_of) = self.gate.as_mut()?;
        let offer = seg.mp.key.as_ref();
        let key = offer.and_then(|k| k.experimental());
        if key.is_some() && offer.is_some_and(|k| k.keys.len() > 1) {
            // RFC 9897 §6: never let a weaker key type be chosen instead.
            self.stats.downgrade_refused += 1;
            return None;
        }
        if !super::features::mp_version_agreed(seg, true) {
            // The keys and the Confirm ride in MP-DCCP options: a Request
            // that does not ask for multipath could only become a plain
            // connection no key proved. Refused before the gate, so its
            // Init's timestamp is not spent.
            self.stats.downgrade_refused += 1;
            return None;
        }
        let src = source_of(remote);
        let binding = super::authn::request_binding(seg);
        let verdict = framing::join(key, seg.mp.exp.as_deref())
            .and_then(|m| gate.on_init(remote.clone(), &m, &binding, src, now, &mut self.rng));
        match verdict {
            Ok(Admission::Respond { keys, response, .. }) => Some((keys, response)),
            Ok(Admission::Cookie(c)) => {
                self.stats.cookie_replies += 1;
                self.push_reset(remote.clone(), seg, ResetCode::TooBusy, Some(&c));
                None
            }
            Err(_) => {
                self.stats.refused_unauthenticated += 1;
                None
            }
        }
    }

    /// Authenticated mode: connection `h` verified its Confirm. The gate
    /// names its peer; the peer's previous connection is closed (a peer
    /// has one session). Without a gate entry the connection goes.
    fn authenticated(&mut self, h: ConnectionHandle) {
        let Some((gate, _)) = self.gate.as_mut() else {
            return;
        };
        let Some(key) = self.reverse.get(&(h, PathId(0))) else {
            return;
        };
        match gate.established(key) {
            Ok(a) => {
                self.peers.insert(h, a.peer);
                let old = a.replaces.and_then(|k| self.routes.get(&k)).map(|r| r.0);
                if let Some(old) = old.filter(|&o| o != h) {
                    self.stats.superseded += 1;
                    if let Some(s) = self.conns.get_mut(&old) {
                        s.conn.fast_close(Instant::ZERO);
                    }
                    // Its MP_FAST_CLOSE is output: poll_transmit must ask it.
                    self.dirty.insert(old);
                    self.peers.remove(&old);
                }
            }
            Err(_) => {
                self.stats.confirm_orphaned += 1;
                if let Some(s) = self.conns.get_mut(&h) {
                    s.conn.fast_close(Instant::ZERO);
                }
                self.dirty.insert(h);
            }
        }
    }

    /// RFC 4340 §8.3.1: a packet for no connection is answered with Reset,
    /// seq = its ack + 1 (0 if none), ack = its seq — in open mode only,
    /// and at most `max_resets_per_sec` (no reflector for spoofed
    /// sources). In authenticated mode unknown remotes get nothing.
    fn queue_reset(&mut self, now: Instant, remote: K, seg: &Segment<'_>, code: ResetCode) {
        if self.gate.is_some() {
            self.stats.dropped_silently += 1;
            return;
        }
        self.rate_limited_reset(now, remote, seg, code);
    }

    /// A stateless Reset within `max_resets_per_sec` (not a reflector).
    fn rate_limited_reset(&mut self, now: Instant, remote: K, seg: &Segment<'_>, code: ResetCode) {
        let (start, n) = &mut self.reset_window;
        if now.saturating_duration_since(*start) >= Duration::from_secs(1) {
            (*start, *n) = (now, 0);
        }
        if *n >= self.config.max_resets_per_sec {
            self.stats.resets_rate_limited += 1;
            return;
        }
        *n += 1;
        self.push_reset(remote, seg, code, None);
    }

    /// A stateless Reset answering `seg`, with `exp` (a cookie reply) as
    /// MP_EXP when given.
    fn push_reset(&mut self, remote: K, seg: &Segment<'_>, code: ResetCode, exp: Option<&[u8]>) {
        if self.resets.len() >= self.config.max_pending_resets {
            self.stats.resets_dropped += 1;
            return;
        }
        let mut s = Segment::new(PacketType::Reset, seg.ack.map_or(0, |a| a + 1));
        s.src_port = seg.dst_port;
        s.dst_port = seg.src_port;
        s.ack = Some(seg.seq);
        s.reset_code = code;
        s.mp.exp = exp.map(<[u8]>::to_vec);
        let mut b = [0u8; RESET_BUF];
        let un = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
        if let Some(n) = s.emit(&mut b, (un, un)) {
            self.resets.push_back((remote, b, n));
        }
    }
}
