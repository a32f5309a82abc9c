//! One server packet loop: the whole server with `workers = 1`, one
//! worker's share with more (`workers.rs`, `shard.rs`). It owns an
//! `Endpoint` (the core's demultiplexer: datagrams by remote address,
//! MP_JOINs by token), a queue of the one TUN and its sockets
//! (`transport::Listeners`), and runs in the shared loop (`driver.rs`).
//!
//! A packet read from the TUN goes to the client that owns its inner
//! destination address: in open mode learned from the inner source
//! addresses that client sent (bounded in total and per client, sticky
//! against a neighbour's claims, see `routes.rs`; with a single client
//! everything goes to it); with `auth = "authenticated"` or `"protected"`
//! (docs/SECURITY.md) the endpoint admits configured peers only (Noise IK
//! in MP_KEY key type 255), an inner source outside the peer's
//! `allowed_ips` never reaches the TUN, and downstream packets go to the
//! peer whose prefixes hold the destination.

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use mpdccp_proto::auth::gate::Gate;
use mpdccp_proto::auth::{LogThrottle, PeerTable, Responder, ResponderConfig};
use mpdccp_proto::conn::{
    ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Incoming,
};
use mpdccp_proto::{Instant, PathId};
use rand_chacha::rand_core::SeedableRng;
use tracing::{debug, info, warn};

use super::config::{AuthMode, ServerConfig};
use super::driver::{Daemon, Step};
use super::fleet::Fleet;
use super::keyfile;
use super::ops::{conn_status, PathLabel};
use super::routes::{Learn, LearnedRoutes, PeerRoutes, MAX_PER_CONNECTION, STEAL_AFTER};
use super::shard::Shard;
use super::status::{AuthStatus, Counters, StatusHead};
use super::status_doc::StatusDoc;
use super::transport::{Listeners, Peer};
use super::warn::PacketWarning;
use super::{inner_dst, inner_src, DaemonStats, PollSet, TunMtuPolicy, TunWriter, BATCH};
use crate::clock;
use crate::tun::Tun;
use crate::udp::{RecvBatch, SendBatch};

/// How the server admits inner packets and routes them back.
pub(super) enum Routing {
    /// `auth = "open"`: to the connection that sent from the destination
    /// (`Server::owners`), or the only one.
    Learned,
    /// The authenticated modes: by the configured peers' `allowed_ips`.
    Peers(PeerRoutes),
}

impl Routing {
    fn peer_table(&self) -> Option<&PeerTable> {
        match self {
            Routing::Learned => None,
            Routing::Peers(r) => Some(r.peers()),
        }
    }
}

/// Whether this loop is the whole server. One value per packet thread, so
/// the variants' size difference costs nothing; boxing the shard would add
/// an indirection to every datagram a worker steers.
#[allow(clippy::large_enum_variant)]
pub(super) enum Workers {
    /// `workers = 1`.
    One,
    /// `workers > 1`: this loop is one of them; its view of the others.
    Shard(Shard),
}

impl Workers {
    fn shard(&mut self) -> Option<&mut Shard> {
        match self {
            Workers::One => None,
            Workers::Shard(sh) => Some(sh),
        }
    }
    fn shard_ref(&self) -> Option<&Shard> {
        match self {
            Workers::One => None,
            Workers::Shard(sh) => Some(sh),
        }
    }
}

/// The endpoint for the configured mode: in the authenticated modes with
/// the gate (server key, peers, `[limits]`) and the peers' routes.
/// With `workers` > 1 each worker's endpoint gets its share of the
/// half-open limit (rounded up); `max_clients` is checked over all
/// workers before a Request reaches an endpoint (`Shard::steer_datagram`).
pub(super) fn endpoint(
    config: &ServerConfig,
    conn: ConnectionConfig,
    workers: usize,
) -> anyhow::Result<(Endpoint<Peer>, Routing)> {
    let mode = config.auth_mode();
    let limits = &config.limits;
    let ep_cfg = EndpointConfig {
        conn,
        max_connections: config.max_clients,
        max_half_open: limits.open_half_open.div_ceil(workers),
        max_resets_per_sec: limits.resets_per_sec,
        // Cookie replies under a flood go out from here (no state each).
        max_pending_resets: 1024,
    };
    let mut ep = Endpoint::new(ep_cfg, super::os_seed(config.seed));
    if let Some(f) = &config.fleet {
        ep.set_fleet_host(f.host_id);
    }
    if mode == AuthMode::Open {
        if !config.listen.ip().is_loopback() {
            warn!(listen = %config.listen, "auth = \"open\": any host that reaches this port gets a tunnel (RFC 9897 key type 0, keys in clear)");
        }
        return Ok((ep, Routing::Learned));
    }
    let key_file = config.private_key_file.as_deref().expect("validated");
    let peers = keyfile::peer_table(&config.peer)?;
    let responder_cfg = ResponderConfig {
        static_private: keyfile::read_secret_key(key_file)?,
        peers: peers.clone(),
        rate: limits.rate(),
        load_inits_per_sec: limits.load_inits_per_sec,
    };
    // The cookie secret from the OS, whatever `seed` says.
    let mut rng = rand_chacha::ChaCha20Rng::from_seed(keyfile::generate_private_key()?);
    let gate = Gate::new(Responder::new(responder_cfg, &mut rng), limits.gate());
    ep.enable_auth(gate, Peer::addr);
    ep.identify_paths(Peer::same_path);
    info!(mode = ?mode, peers = peers.len(), "authenticated mode: configured peers only");
    Ok((ep, Routing::Peers(PeerRoutes::new(peers))))
}
/// Sends a packet from the TUN on the connection that owns its inner
/// destination; with workers, one another worker owns is handed to it
/// (`shard`; `None` for a packet already handed over: no ping-pong).
fn route_inner(
    ep: &mut Endpoint<Peer>,
    owners: &LearnedRoutes,
    routing: &mut Routing,
    shard: Option<&mut Shard>,
    stats: &mut DaemonStats,
    now: Instant,
    pkt: &[u8],
) {
    let Some(dst) = inner_dst(pkt) else {
        stats.tun_rx_malformed += 1;
        return;
    };
    let h = match (&mut *routing, owners.owner(dst)) {
        // Authenticated: the configured prefixes only.
        (Routing::Peers(r), _) => r.route(dst),
        (Routing::Learned, Some(h)) => Some(h),
        (Routing::Learned, None) => {
            let conns = ep.connections();
            // The only client of the whole server (with workers: of all).
            let only = shard.as_ref().is_none_or(|sh| sh.total_connections() == 1);
            (conns.len() == 1 && only).then(|| conns[0])
        }
    };
    let Some(h) = h else {
        let table = routing.peer_table();
        if shard.is_some_and(|sh| sh.steer_inner(stats, dst, table, pkt)) {
            return;
        }
        stats.no_route += 1;
        return;
    };
    if ep.send(now, h, pkt).is_err() {
        stats.send_rejected += 1;
    }
}

/// One server packet loop's state.
pub(super) struct Server {
    ep: Endpoint<Peer>,
    routing: Routing,
    /// Refusal counters at the last log line, and its throttle.
    refusals_logged: u64,
    refusal_log: LogThrottle,
    /// Open mode: inner address → the client connection that sent from it.
    owners: LearnedRoutes,
    stats: DaemonStats,
    tun: Tun,
    tun_writer: TunWriter,
    started: Instant,
    /// The TUN MTU in force; with DPLPMTUD the smallest over the
    /// connections' PLPMTUs (`mtu_policy`).
    tun_mtu: u32,
    mtu_policy: TunMtuPolicy,
    links: Listeners,
    /// Receive slots, the `sendmmsg` batch and the U-DCCP / raw scratch
    /// buffer, allocated once.
    rx: RecvBatch,
    batch: SendBatch,
    rawbuf: Vec<u8>,
    workers: Workers,
    /// Poll index of a worker's mailbox.
    i_mail: Option<usize>,
    /// `[fleet]`: address advertisement and routes (`fleet.rs`).
    fleet: Option<Fleet>,
}

impl Server {
    pub(super) fn new(
        config: &ServerConfig,
        (ep, routing): (Endpoint<Peer>, Routing),
        tun: Tun,
        mtu_policy: TunMtuPolicy,
        links: Listeners,
        workers: Workers,
    ) -> Server {
        let mut fleet = config.fleet.as_ref().map(|f| Fleet::new(f, tun.name()));
        if let Some(f) = &mut fleet {
            f.announce_service();
        }
        Server {
            fleet,
            ep,
            routing,
            refusals_logged: 0,
            refusal_log: LogThrottle::new(Duration::from_secs(10)),
            owners: LearnedRoutes::new(
                config.max_learned_addresses,
                MAX_PER_CONNECTION,
                STEAL_AFTER,
            ),
            stats: DaemonStats::default(),
            tun,
            tun_writer: TunWriter::new(),
            started: clock::now(),
            tun_mtu: mtu_policy.tun_mtu(None),
            mtu_policy,
            links,
            rx: super::recv_batch(config.tunnel.offload),
            batch: SendBatch::new(BATCH),
            rawbuf: vec![0u8; 65_536],
            workers,
            i_mail: None,
        }
    }

    /// The smallest PLPMTU over the open connections that have one.
    fn min_plpmtu(&self) -> Option<u32> {
        self.ep
            .connections()
            .into_iter()
            .filter_map(|h| self.ep.connection(h))
            .filter(|c| !c.is_closed())
            .filter_map(|c| c.plpmtu_converged())
            .min()
    }

    fn handle_events(&mut self) {
        let mut mtu_cause: Option<String> = None;
        while let Some((h, ev)) = self.ep.poll_event() {
            match ev {
                Event::Delivered { data, .. } => {
                    self.deliver(h, &data);
                    // Its next payload reuses the buffer: no allocation.
                    self.ep.recycle_delivered(h, data);
                }
                Event::Connected => self.connected(h),
                Event::PathEstablished(p) => {
                    self.stats.path_up_events += 1;
                    info!(conn = h.0, path = %p, "path established");
                }
                Event::PathFailed(p) => warn!(conn = h.0, path = %p, "path failing"),
                Event::PathClosed(p) => info!(conn = h.0, path = %p, "path closed"),
                Event::PlpmtuChanged { path, plpmtu } => {
                    info!(conn = h.0, %path, plpmtu, "connection's smallest PLPMTU changed (DCCP packet bytes)");
                    mtu_cause = Some(format!("conn {} {path}", h.0));
                }
                Event::Closed { reason } => {
                    mtu_cause = Some(format!("conn {} closed", h.0));
                    info!(conn = h.0, %reason, "connection closed");
                    self.closed(h);
                }
                other => debug!(conn = h.0, ?other, "event"),
            }
        }
        self.tun_writer.flush(&self.tun, &mut self.stats);
        if let Some(sh) = self.workers.shard_ref() {
            sh.set_connections(self.ep.connections().len());
        }
        if let Some(cause) = mtu_cause {
            let min = self.min_plpmtu();
            self.tun_mtu = match self.workers.shard_ref() {
                // The TUN is shared: the smallest over every worker's.
                Some(sh) => sh.follow_plpmtu(&self.tun, &self.mtu_policy, min, &cause),
                None => {
                    super::follow_plpmtu(&self.tun, &self.mtu_policy, self.tun_mtu, min, &cause)
                }
            };
        }
    }

    /// A packet connection `h` delivered: to the TUN if its inner source
    /// is the peer's (authenticated), learning the source (open mode).
    fn deliver(&mut self, h: ConnectionHandle, data: &[u8]) {
        match &mut self.routing {
            Routing::Peers(r) => {
                let allowed =
                    inner_src(data).is_some_and(|src| r.source_allowed(self.ep.peer(h), src));
                if !allowed {
                    let now = clock::now();
                    // The client's own IPv6 link-local chatter (DAD,
                    // router solicitations) is counted, not warned of.
                    let chatter = inner_src(data).is_some_and(super::routes::is_link_local);
                    if let Some(suppressed) = (!chatter)
                        .then(|| self.stats.warnings.allow(PacketWarning::InnerSource, now))
                        .flatten()
                    {
                        let peer = self.peer_name(h).unwrap_or("?");
                        let src = inner_src(data).map_or("?".into(), |a| a.to_string());
                        warn!(%peer, conn = h.0, %src, suppressed, "inner source outside the peer's allowed_ips: dropped");
                    }
                    return;
                }
            }
            Routing::Learned => {
                if let Some(src) = inner_src(data) {
                    self.learn(h, src);
                }
            }
        }
        self.tun_writer.write(&self.tun, &mut self.stats, data);
    }

    fn learn(&mut self, h: ConnectionHandle, src: std::net::IpAddr) {
        let now = clock::now();
        let learned = self.owners.learn(src, h, now);
        if let (Some(sh), Learn::Ok | Learn::Moved) = (self.workers.shard(), learned) {
            sh.learned(src);
        }
        if !matches!(learned, Learn::Ok | Learn::Moved) {
            let w = &mut self.stats.warnings;
            if let Some(suppressed) = w.allow(PacketWarning::Route, now) {
                warn!(conn = h.0, %src, ?learned, suppressed, "inner source address not learned");
            }
        }
    }

    fn connected(&mut self, h: ConnectionHandle) {
        let peer = self.ep.peer(h);
        if let Some(sh) = self.workers.shard() {
            let token = self.ep.connection(h).map(|c| c.join_token());
            sh.connected(h, token, peer);
        }
        if let Some(f) = &mut self.fleet {
            let table = self.ep.peer_table();
            let prefixes = peer
                .and_then(|p| table?.get(p))
                .map(|x| x.allowed_ips.clone())
                .unwrap_or_default();
            f.connected(
                clock::now(),
                &mut self.ep,
                h,
                peer.map(|p| (p, &prefixes[..])),
            );
        }
        if let (Routing::Peers(r), Some(p)) = (&mut self.routing, peer) {
            r.connected(p, h);
            let name = r.peers().get(p).map_or("?", |x| x.name.as_str());
            info!(peer = %name, conn = h.0, "peer connected");
        } else {
            info!(conn = h.0, "client connected");
        }
    }

    fn closed(&mut self, h: ConnectionHandle) {
        if let Some(f) = &mut self.fleet {
            let table = self.ep.peer_table();
            f.closed(h, |p| {
                table
                    .and_then(|t| t.get(p))
                    .map(|x| x.allowed_ips.clone())
                    .unwrap_or_default()
            });
        }
        self.owners.forget(h);
        if let Routing::Peers(r) = &mut self.routing {
            r.closed(h);
        }
        if let Some(sh) = self.workers.shard() {
            sh.closed(h, &self.owners);
        }
    }

    /// Sends the core's output: datagrams and GSO trains are written
    /// straight into the `sendmmsg` batch (no copy), flushed when full and
    /// at the end; native DCCP and U-DCCP ones leave from the batch slot
    /// at once (`Listeners::send`).
    fn flush(&mut self, now: Instant) {
        loop {
            if self.batch.is_full() {
                self.links.flush(&mut self.batch, &mut self.stats);
            }
            let buf = self.batch.next_buf();
            let cap = buf.len().min(super::TRAIN_BUF_BYTES);
            let Some((to, t)) = self.ep.poll_transmit(now, &mut buf[..cap]) else {
                break;
            };
            let (size, seg) = (t.size, t.segment_size);
            self.links
                .send(to, size, seg, &mut self.batch, &mut self.stats);
        }
        self.links.flush(&mut self.batch, &mut self.stats);
    }

    /// The configured name of the peer connection `h`'s handshake proved
    /// (authenticated modes).
    fn peer_name(&self, h: ConnectionHandle) -> Option<&str> {
        let p = self.ep.peer(h)?;
        Some(self.ep.peer_table()?.get(p)?.name.as_str())
    }

    /// A path's stable name and remote address, for status and metrics
    /// ([`transport::path_name`]).
    fn path_label(&self, h: ConnectionHandle, id: u32) -> PathLabel {
        let peer_name = self.peer_name(h);
        match self.ep.remote_of(h, PathId(id)) {
            Some(link) => {
                let (name, remote) = super::transport::path_name(peer_name, id, link);
                PathLabel {
                    name: Some(name),
                    remote: Some(remote),
                    transport: Some(link.transport_name()),
                }
            }
            None => PathLabel::default(),
        }
    }

    /// One warning per interval when handshakes or packets were refused
    /// (each limit has its counter in `status`).
    fn log_refusals(&mut self, now: Instant) {
        let e = self.ep.stats();
        let mut total = e.refused_unauthenticated
            + e.cookie_replies
            + e.refused_half_open
            + e.refused_max_connections
            + e.resets_rate_limited
            + e.downgrade_refused;
        if let Some((g, _)) = self.ep.auth_stats() {
            total += g.half_open_full + g.half_open_replaced + g.half_open_expired;
        }
        if let Routing::Peers(r) = &self.routing {
            total += r.stats().inner_source_refused;
        }
        if total == self.refusals_logged {
            return;
        }
        // `new` counts the refused packets since the last line; the
        // throttle's own count (calls, one per loop turn) means nothing here.
        if self.refusal_log.allow(now).is_some() {
            let new = total - self.refusals_logged;
            self.refusals_logged = total;
            warn!(
                new,
                unauthenticated = e.refused_unauthenticated,
                cookies = e.cookie_replies,
                half_open = e.refused_half_open,
                max_clients = e.refused_max_connections,
                resets_limited = e.resets_rate_limited,
                "refusals since the last report (see `mpdccp status`)"
            );
        }
    }

    /// The handshake gate's and responder's counters, named as the
    /// status document has them.
    fn auth_status(&self) -> AuthStatus {
        let Some((g, r)) = self.ep.auth_stats() else {
            return AuthStatus::Open;
        };
        let routes = match &self.routing {
            Routing::Peers(p) => Some(Counters::of(&p.stats())),
            Routing::Learned => None,
        };
        AuthStatus::Authenticated {
            peers: self.routing.peer_table().map_or(0, |t| t.len() as u64),
            routes,
            gate: Counters::from_pairs([
                ("half_open", g.half_open_created),
                ("half_open_replaced", g.half_open_replaced),
                ("half_open_full", g.half_open_full),
                ("half_open_expired", g.half_open_expired),
                ("confirmed", g.confirmed),
                ("confirm_failed", g.confirm_failed),
                ("sessions_replaced", g.sessions_replaced),
            ]),
            handshake: Counters::from_pairs([
                ("inits", r.inits),
                ("malformed", r.malformed),
                ("bad_mac1", r.bad_mac1),
                ("cookie_replies", r.cookie_replies),
                ("handshake_failed", r.handshake_failed),
                ("unknown_peer", r.unknown_peer),
                ("replayed", r.replayed),
                ("accepted", r.accepted),
                ("rate_limited", r.rate.limited),
                ("rate_table_full", r.rate.table_full),
            ]),
        }
    }

    /// The status document; each connection's entry is serialized as it
    /// is built (`status_doc.rs`).
    fn status_doc(&self) -> StatusDoc {
        let mut doc = StatusDoc::new(StatusHead {
            endpoint: Some(Counters::of(&self.ep.stats())),
            learned_addresses: Some(self.owners.len() as u64),
            learned_routes: Some(Counters::of(&self.owners.stats())),
            auth: Some(self.auth_status()),
            ..super::status_head(
                "server",
                self.started,
                &self.tun,
                self.tun_mtu,
                &self.mtu_policy,
                &self.stats,
                self.links.udp.rx_drops(),
            )
        });
        // A worker names itself, and its handles are unique across
        // workers as handle × N + worker.
        if let Some(sh) = self.workers.shard_ref() {
            sh.status_extra(&mut doc.head);
        }
        let shard = self.workers.shard_ref().map(|sh| sh.position());
        for h in self.ep.connections() {
            let Some(c) = self.ep.connection(h) else {
                continue;
            };
            let label = |id: u32| self.path_label(h, id);
            let mut entry = conn_status(c, h.0, &label);
            // Authenticated modes: the configured peer the handshake proved.
            entry.peer.identity = self.peer_name(h).map(str::to_owned);
            let auth = self.ep.auth_stats().is_some();
            let protect = c.config().protect_payload;
            entry.settings.auth = Some(super::auth_mode_name(auth, protect).into());
            if let Some((w, n)) = shard {
                entry.handle = h.0 * n as u64 + w as u64;
                entry.worker = Some(w);
            }
            doc.push_connection(&entry);
        }
        doc
    }
}

impl Daemon for Server {
    const SIGNAL_CLOSE: &'static str = "closing all connections gracefully (MP_CLOSE)";

    fn poll_timeout(&self) -> Option<Instant> {
        self.ep.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.ep.handle_timeout(now);
    }

    fn work(&mut self, now: Instant, _closing: bool) -> anyhow::Result<Step> {
        self.handle_events();
        self.log_refusals(now);
        self.flush(now);
        if let Some(sh) = self.workers.shard() {
            sh.wake_owners();
        }
        Ok(Step::Wait)
    }

    fn drained(&self) -> bool {
        self.ep.connections().is_empty()
    }

    fn tun_fd(&self) -> RawFd {
        self.tun.as_raw_fd()
    }

    fn register(&mut self, poll: &mut PollSet) {
        self.i_mail = self.workers.shard_ref().map(|sh| poll.add(sh.wake_fd()));
        self.links.register(poll);
    }

    /// A worker's mailbox: packets other workers handed over, and the main
    /// thread's status and close requests.
    fn take_requests(&mut self, poll: &PollSet, now: Instant) -> bool {
        let (Some(i), Workers::Shard(sh)) = (self.i_mail, &mut self.workers) else {
            return false;
        };
        if !poll.readable(i) {
            return false;
        }
        let (owners, routing) = (&self.owners, &mut self.routing);
        let req = sh.take_mail(&mut self.ep, &mut self.stats, now, |ep, stats, pkt| {
            route_inner(ep, owners, routing, None, stats, now, pkt);
        });
        for reply in req.status {
            let _ = reply.try_send(self.status_doc());
        }
        req.close
    }

    fn on_ready(&mut self, poll: &PollSet, _now: Instant) {
        let (ep, workers) = (&mut self.ep, &mut self.workers);
        let (rx, scratch) = (&mut self.rx, &mut self.rawbuf);
        self.links.drain_ready(
            poll,
            rx,
            scratch,
            &mut self.stats,
            |stats, now, peer, data| {
                // Another worker's connection: passed on, not answered
                // here. What steering parsed, the endpoint reuses.
                let mut rx = Incoming::new(data);
                let steered = workers
                    .shard()
                    .is_some_and(|sh| sh.steer_datagram(stats, &peer, &mut rx, ep));
                if !steered {
                    ep.handle_incoming(now, peer, None, &mut rx);
                }
            },
        );
    }

    fn handle_tun(&mut self, now: Instant, buf: &mut [u8], seg: &mut [u8]) {
        let (ep, owners, routing) = (&mut self.ep, &self.owners, &mut self.routing);
        let workers = &mut self.workers;
        super::drain_tun(&self.tun, buf, seg, &mut self.stats, |stats, pkt| {
            route_inner(ep, owners, routing, workers.shard(), stats, now, pkt);
        });
    }

    fn close(&mut self, now: Instant) {
        // The connections being closed are the last; a fleet host
        // withdraws its service address when they are (`Fleet`'s drop):
        // until then their first subflows still need it.
        self.ep.stop_accepting();
        for h in self.ep.connections() {
            if let Some(c) = self.ep.connection_mut(h) {
                c.close(now);
            }
        }
    }

    fn status(&self) -> StatusDoc {
        self.status_doc()
    }
}
