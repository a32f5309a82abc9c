//! `mpdccp server`: the aggregation end. One UDP port for every client and
//! path (RFC 6773); the core's `Endpoint` demultiplexes datagrams by the
//! remote address and routes MP_JOINs by their token. One TUN for all
//! clients: a packet read from it goes to the client that owns its inner
//! destination address, learned from the inner source addresses that client
//! sent (bounded in total and per client, sticky against a neighbour's
//! claims, see `routes.rs`; with a single client everything goes to it).
//! With `dccp_listen`, native DCCP (IP protocol 33) is accepted too, on one
//! raw socket per listed address; its peers are keyed apart from UDP ones.
//! With `udccp_listen`, a second UDP socket speaks U-DCCP (`udccp.rs`).
//!
//! With `auth = "authenticated"` (docs/SECURITY.md) the endpoint admits
//! configured peers only (Noise IK in MP_KEY key type 255), an inner source
//! outside the peer's `allowed_ips` never reaches the TUN, and downstream
//! packets go to the peer whose prefixes hold the destination.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use mpdccp_proto::auth::gate::Gate;
use mpdccp_proto::auth::{LogThrottle, Responder, ResponderConfig};
use mpdccp_proto::conn::{
    ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, StuckTimerGuard,
};
use mpdccp_proto::{Instant, PathId};
use rand_chacha::rand_core::SeedableRng;
use serde_json::{json, Value};
use tracing::{debug, info, warn};

use super::config::{AuthMode, ServerConfig};
use super::keyfile;
use super::ops::{conn_json, stats_json, OpsServer, PathLabel};
use super::routes::{Learn, LearnedRoutes, PeerRoutes, MAX_PER_CONNECTION, STEAL_AFTER};
use super::status_doc::StatusDoc;
use super::warn::PacketWarning;
use super::{
    flush_batch, inner_dst, inner_src, open_tun_queues, DaemonStats, PollSet, SignalPipe, TunSetup,
    TunWriter, BATCH,
};
use crate::clock;
use crate::raw::RawDccpSocket;
use crate::tun::Tun;
use crate::udp::{PathSocket, RecvBatch, SendBatch};

const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Who a path's packets come from, the `Endpoint`'s demultiplexing key.
/// UDP peers by address and port (RFC 6773) and, on a wildcard listen
/// address, the local address they wrote to (answers leave from it, so a
/// server with several addresses answers each path from the one its client
/// knows); native DCCP peers by the local address they reached (which raw
/// socket answers), their address and the DCCP source port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Peer {
    Udp {
        remote: SocketAddr,
        local: Option<IpAddr>,
    },
    Dccp {
        local: IpAddr,
        remote: IpAddr,
        port: u16,
    },
    UDccp(SocketAddr),
}

/// Runs the server until SIGTERM/SIGINT (or `close` on the control socket).
pub fn run(config: ServerConfig) -> anyhow::Result<()> {
    clock::set_precise_timers();
    let n = config.workers.max(1);
    // The listening socket(s) first: a second server on this port fails
    // here, with the address in the error, before touching any TUN.
    let sock_buf = config.tunnel.socket_buffer_bytes;
    let socks = super::workers::bind_listeners(&config, n)?;
    // One TUN for all clients: it follows the smallest PLPMTU over the
    // connections (a downstream packet must fit the client it goes to, and
    // the TUN cannot tell clients apart), bounded below by the base size.
    let setup = TunSetup {
        tun: &config.tun,
        path_mtu: config.tunnel.path_mtu,
        ipv6_outer: config.listen.is_ipv6() || config.dccp_listen.iter().any(IpAddr::is_ipv6),
        // UDP is always served: its header stays in the budget.
        encap_bytes: crate::mtu::UDP_HEADER_BYTES,
        offload: config.tunnel.offload,
        protected: config.auth_mode() == AuthMode::Protected,
        plpmtud_max_ip: config.tunnel.plpmtud.then_some(config.tunnel.path_mtu),
    };
    let (mut tuns, plan, mtu_policy) = open_tun_queues(&setup, n)?;
    let mut conn_cfg = config.tunnel.connection_config(&plan);
    conn_cfg.plpmtud = mtu_policy.plpmtud;
    if config.auth_mode() == AuthMode::Protected {
        // The DCCP packet stays as large as the path allows; the TUN MTU
        // (hence the largest tunnelled packet) gave way for the AEAD.
        conn_cfg.mss_bytes += mpdccp_proto::conn::PROTECTION_OVERHEAD as u32;
    }
    conn_cfg.protect_payload = config.auth_mode() == AuthMode::Protected;
    mpdccp_proto::conn::Connection::try_new(
        mpdccp_proto::conn::Role::Server,
        conn_cfg.clone(),
        clock::now(),
        1,
    )
    .map_err(|e| anyhow::anyhow!("tunnel settings: {e}"))?;
    let udccp = super::udccp::bind_listener(config.udccp_listen, sock_buf, config.tunnel.offload)?;
    let mut raw: Vec<RawDccpSocket> = Vec::new();
    for &a in &config.dccp_listen {
        raw.push(super::native::open(a, None, sock_buf)?);
        info!(listen = %a, "server listening (native DCCP)");
        eprintln!("server listening on dccp {a}");
    }
    for sock in &socks {
        sock.set_gro(config.tunnel.offload);
    }
    let local = socks[0].local_addr();
    info!(listen = %local, workers = n, "server listening");
    eprintln!("server listening on udp {local}");
    let ops = OpsServer::bind(&config.ops.control_socket, config.ops.prometheus)?;
    let signals = SignalPipe::new()?;
    super::notify::ready(&format!("listening on udp {local}"));
    if n > 1 {
        let setup = super::workers::Setup {
            conn_cfg,
            socks,
            tuns,
            mtu_policy,
        };
        return super::workers::run(&config, setup, &ops, &signals);
    }
    let (ep, peer_routes) = endpoint(&config, conn_cfg, 1)?;
    let mut s = Server::new(&config, ep, peer_routes, tuns.remove(0), mtu_policy, None);
    let io = Io {
        sock: &socks[0],
        raw,
        udccp,
        signals: Some(&signals),
        ops: Some(&ops),
    };
    serve(&mut s, io)
}

/// What one packet loop reads besides the TUN. The signals and the ops
/// socket are the single-threaded server's; workers hear of them from the
/// main thread (`workers.rs`).
pub(super) struct Io<'a> {
    pub sock: &'a PathSocket,
    pub raw: Vec<RawDccpSocket>,
    pub udccp: Option<PathSocket>,
    pub signals: Option<&'a SignalPipe>,
    pub ops: Option<&'a OpsServer>,
}

/// One packet loop until closed (and the connections gone or the grace over).
pub(super) fn serve(s: &mut Server, mut io: Io) -> anyhow::Result<()> {
    // Read when a status is built (`udp_rx_socket_drops`), not per wake.
    s.path_socket = Some(io.sock.as_raw_fd());
    let mut rx = super::recv_batch(s.offload);
    let mut batch = SendBatch::new(BATCH);
    let mut tunbuf = vec![0u8; 65_536 + crate::offload::VNET_HDR_LEN];
    let mut segbuf = vec![0u8; 65_536];
    let mut rawbuf = vec![0u8; 65_536];
    let mut poll = PollSet::with_capacity(8 + io.raw.len()).with_busy_poll(s.busy_poll);
    let mut closing: Option<Instant> = None;
    // A deadline handle_timeout cannot advance is a bug; never spin on it.
    let mut timer_guard = StuckTimerGuard::new();

    loop {
        let now = clock::now();
        if s.ep.poll_timeout().is_some_and(|t| t <= now) {
            s.ep.handle_timeout(now);
            timer_guard.handled(now);
        }
        s.handle_events();
        s.log_refusals(now);
        s.flush(now, io.sock, &io.raw, io.udccp.as_ref(), &mut batch);
        if let Some(sh) = &mut s.shard {
            sh.wake_owners();
        }
        if let Some(t) = closing {
            if s.ep.connections().is_empty() || now >= t {
                break;
            }
        }
        poll.clear();
        let i_tun = poll.add(s.tun.as_raw_fd());
        let i_sock = poll.add(io.sock.as_raw_fd());
        let i_sig = io.signals.map(|x| poll.add(x.as_raw_fd()));
        let i_ops = io.ops.map(|o| poll.add(o.wake_fd()));
        let i_wake = s.shard.as_ref().map(|sh| poll.add(sh.wake_fd()));
        let i_raw: Vec<usize> = io.raw.iter().map(|r| poll.add(r.as_raw_fd())).collect();
        let i_udccp = io.udccp.as_ref().map(|u| poll.add(u.as_raw_fd()));
        let mut deadline = timer_guard.wake_at(s.ep.poll_timeout());
        if let Some(t) = closing {
            deadline = Some(deadline.map_or(t, |d| d.min(t)));
        }
        poll.wait(clock::now(), deadline)?;
        let now = clock::now();
        let ready = |i: Option<usize>| i.is_some_and(|i| poll.readable(i));
        if ready(i_sig) && io.signals.is_some_and(|x| x.take()) && closing.is_none() {
            info!("signal: closing all connections gracefully (MP_CLOSE)");
            super::notify::stopping();
            s.close_all(now);
            closing = Some(now + CLOSE_GRACE);
        }
        if let (Some(ops), true) = (io.ops, ready(i_ops)) {
            let status = || s.status();
            if ops.handle_requests(&status) && closing.is_none() {
                s.close_all(now);
                closing = Some(now + CLOSE_GRACE);
            }
        }
        if ready(i_wake) && s.take_handoffs(now) && closing.is_none() {
            s.close_all(now);
            closing = Some(now + CLOSE_GRACE);
        }
        if poll.readable(i_sock) {
            s.handle_socket(io.sock, &mut rx);
        }
        if let (Some(u), true) = (&io.udccp, ready(i_udccp)) {
            let ep = &mut s.ep;
            super::udccp::drain(u, &mut rx, &mut rawbuf, &mut s.stats, |_, now, from, d| {
                ep.handle_datagram(now, Peer::UDccp(from), d);
            });
        }
        for (r, &i) in io.raw.iter_mut().zip(&i_raw) {
            if poll.readable(i) {
                s.handle_raw(r, &mut rawbuf);
            }
        }
        if poll.readable(i_tun) && closing.is_none() {
            s.handle_tun(clock::now(), &mut tunbuf, &mut segbuf);
        }
    }
    Ok(())
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
) -> anyhow::Result<(Endpoint<Peer>, Option<PeerRoutes>)> {
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
    if mode == AuthMode::Open {
        if !config.listen.ip().is_loopback() {
            warn!(listen = %config.listen, "auth = \"open\": any host that reaches this port gets a tunnel (RFC 9897 key type 0, keys in clear)");
        }
        return Ok((ep, None));
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
    ep.enable_auth(gate, |p| match *p {
        Peer::Udp { remote, .. } | Peer::UDccp(remote) => remote,
        Peer::Dccp { remote, port, .. } => SocketAddr::new(remote, port),
    });
    info!(mode = ?mode, peers = peers.len(), "authenticated mode: configured peers only");
    Ok((ep, Some(PeerRoutes::new(peers))))
}

/// Sends a packet from the TUN on the connection that owns its inner
/// destination; with workers, one another worker owns is handed to it
/// (`shard`; `None` for a packet already handed over: no ping-pong).
pub(super) fn route_inner(
    ep: &mut Endpoint<Peer>,
    owners: &LearnedRoutes,
    peers: &mut Option<PeerRoutes>,
    shard: Option<&mut super::workers::Shard>,
    stats: &mut DaemonStats,
    now: Instant,
    pkt: &[u8],
) {
    let Some(dst) = inner_dst(pkt) else {
        stats.tun_rx_malformed += 1;
        return;
    };
    let h = match (peers.as_mut(), owners.owner(dst)) {
        // Authenticated: the configured prefixes only.
        (Some(r), _) => r.route(dst),
        (None, Some(h)) => Some(h),
        (None, None) => {
            let conns = ep.connections();
            // The only client of the whole server (with workers: of all).
            let only = shard.as_ref().is_none_or(|sh| sh.total_connections() == 1);
            (conns.len() == 1 && only).then(|| conns[0])
        }
    };
    let Some(h) = h else {
        let table = peers.as_ref().map(|r| r.peers());
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

/// IPv6 link-local or unspecified (a host's own link chatter).
fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(a) => a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80,
        IpAddr::V4(a) => a.is_link_local() || a.is_unspecified(),
    }
}

/// Refusal counters at the last log line.
#[derive(Default)]
struct Refusals {
    total: u64,
}

pub(super) struct Server {
    pub(super) ep: Endpoint<Peer>,
    /// Authenticated modes: routes by the peers' `allowed_ips`.
    pub(super) peer_routes: Option<PeerRoutes>,
    refusals: Refusals,
    refusal_log: LogThrottle,
    /// Open mode: inner address → the client connection that sent from it.
    pub(super) owners: LearnedRoutes,
    pub(super) stats: DaemonStats,
    pub(super) tun: Tun,
    tun_writer: TunWriter,
    started: Instant,
    /// The TUN MTU in force; with DPLPMTUD the smallest over the
    /// connections' PLPMTUs (`mtu_policy`).
    pub(super) tun_mtu: u32,
    mtu_policy: super::TunMtuPolicy,
    offload: bool,
    /// The UDP socket `serve` reads (for its kernel drop count in status).
    path_socket: Option<std::os::fd::RawFd>,
    /// `[tunnel] busy_poll_us`.
    busy_poll: Duration,
    /// `workers > 1`: this worker's share of the server (`workers.rs`).
    pub(super) shard: Option<super::workers::Shard>,
}

impl Server {
    pub(super) fn new(
        config: &ServerConfig,
        ep: Endpoint<Peer>,
        peer_routes: Option<PeerRoutes>,
        tun: Tun,
        mtu_policy: super::TunMtuPolicy,
        shard: Option<super::workers::Shard>,
    ) -> Server {
        Server {
            ep,
            peer_routes,
            refusals: Refusals::default(),
            owners: LearnedRoutes::new(
                config.max_learned_addresses,
                MAX_PER_CONNECTION,
                STEAL_AFTER,
            ),
            refusal_log: LogThrottle::new(Duration::from_secs(10)),
            stats: DaemonStats::default(),
            tun,
            tun_writer: TunWriter::new(),
            started: clock::now(),
            tun_mtu: mtu_policy.tun_mtu(None),
            mtu_policy,
            offload: config.tunnel.offload,
            path_socket: None,
            busy_poll: Duration::from_micros(config.tunnel.busy_poll_us),
            shard,
        }
    }

    pub(super) fn close_all(&mut self, now: Instant) {
        for h in self.ep.connections() {
            if let Some(c) = self.ep.connection_mut(h) {
                c.close(now);
            }
        }
    }

    /// The smallest PLPMTU over the open connections that have one.
    fn min_plpmtu(&self) -> Option<u32> {
        self.ep
            .connections()
            .into_iter()
            .filter_map(|h| self.ep.connection(h))
            .filter(|c| !c.is_closed())
            .filter_map(|c| c.plpmtu())
            .min()
    }

    fn handle_events(&mut self) {
        let mut mtu_cause: Option<String> = None;
        while let Some((h, ev)) = self.ep.poll_event() {
            match ev {
                Event::Delivered { data, .. } => {
                    if let Some(r) = &mut self.peer_routes {
                        let allowed = inner_src(&data)
                            .is_some_and(|src| r.source_allowed(self.ep.peer(h), src));
                        if !allowed {
                            let now = clock::now();
                            // The client's own IPv6 link-local chatter (DAD,
                            // router solicitations) is counted, not warned of.
                            let chatter = inner_src(&data).is_some_and(is_link_local);
                            if let Some(suppressed) = (!chatter)
                                .then(|| self.stats.warnings.allow(PacketWarning::InnerSource, now))
                                .flatten()
                            {
                                warn!(conn = h.0, src = ?inner_src(&data), suppressed, "inner source outside the peer's allowed_ips: dropped");
                            }
                            continue;
                        }
                    } else if let Some(src) = inner_src(&data) {
                        let now = clock::now();
                        let learned = self.owners.learn(src, h, now);
                        if let (Some(sh), Learn::Ok | Learn::Moved) = (&mut self.shard, learned) {
                            sh.learned(src);
                        }
                        if !matches!(learned, Learn::Ok | Learn::Moved) {
                            let w = &mut self.stats.warnings;
                            if let Some(suppressed) = w.allow(PacketWarning::Route, now) {
                                warn!(conn = h.0, %src, ?learned, suppressed, "inner source address not learned");
                            }
                        }
                    }
                    self.tun_writer.write(&self.tun, &mut self.stats, &data);
                }
                Event::Connected => {
                    let peer = self.ep.peer(h);
                    if let Some(sh) = &mut self.shard {
                        let token = self.ep.connection(h).map(|c| c.join_token());
                        sh.connected(h, token, peer);
                    }
                    if let (Some(r), Some(p)) = (&mut self.peer_routes, peer) {
                        r.connected(p, h);
                        let name = r.peers().get(p).map(|x| x.name.clone());
                        info!(conn = h.0, peer = ?name, "peer connected");
                    } else {
                        info!(conn = h.0, "client connected");
                    }
                }
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
                    self.owners.forget(h);
                    if let Some(r) = &mut self.peer_routes {
                        r.closed(h);
                    }
                    if let Some(sh) = &mut self.shard {
                        sh.closed(h, &self.owners);
                    }
                }
                other => debug!(conn = h.0, ?other, "event"),
            }
        }
        self.tun_writer.flush(&self.tun, &mut self.stats);
        if let Some(sh) = &self.shard {
            sh.set_connections(self.ep.connections().len());
        }
        if let Some(cause) = mtu_cause {
            let min = self.min_plpmtu();
            self.tun_mtu = match &self.shard {
                // The TUN is shared: the smallest over every worker's.
                Some(sh) => sh.follow_plpmtu(&self.tun, &self.mtu_policy, min, &cause),
                None => {
                    super::follow_plpmtu(&self.tun, &self.mtu_policy, self.tun_mtu, min, &cause)
                }
            };
        }
    }

    fn handle_socket(&mut self, sock: &PathSocket, rx: &mut RecvBatch) {
        let (ep, shard) = (&mut self.ep, &mut self.shard);
        super::drain_socket(
            sock,
            rx,
            &mut self.stats,
            |stats, now, remote, local, data| {
                let peer = Peer::Udp { remote, local };
                // Another worker's connection: passed on, not answered here.
                if shard
                    .as_mut()
                    .is_some_and(|sh| sh.steer_datagram(stats, &peer, data, ep))
                {
                    return;
                }
                ep.handle_datagram(now, peer, data);
            },
        );
    }

    fn handle_raw(&mut self, sock: &mut RawDccpSocket, buf: &mut [u8]) {
        let (ep, local) = (&mut self.ep, sock.local_addr());
        super::native::drain(sock, buf, &mut self.stats, |_, now, remote, port, data| {
            ep.handle_datagram(
                now,
                Peer::Dccp {
                    local,
                    remote,
                    port,
                },
                data,
            );
        });
    }

    fn handle_tun(&mut self, now: Instant, buf: &mut [u8], seg: &mut [u8]) {
        let (ep, owners, peers) = (&mut self.ep, &self.owners, &mut self.peer_routes);
        let shard = &mut self.shard;
        super::drain_tun(&self.tun, buf, seg, &mut self.stats, |stats, pkt| {
            route_inner(ep, owners, peers, shard.as_mut(), stats, now, pkt);
        });
    }

    /// Sends the core's output: datagrams and GSO trains are written
    /// straight into the `sendmmsg` batch (no copy), flushed when full and
    /// at the end.
    /// Native DCCP output is sent from the batch slot at once (raw
    /// sockets have neither `sendmmsg` batching worth it nor GSO).
    fn flush(
        &mut self,
        now: Instant,
        sock: &PathSocket,
        raw: &[RawDccpSocket],
        udccp: Option<&PathSocket>,
        batch: &mut SendBatch,
    ) {
        loop {
            if batch.is_full() {
                flush_batch(sock, batch, &mut self.stats);
            }
            let buf = batch.next_buf();
            let cap = buf.len().min(super::TRAIN_BUF_BYTES);
            let Some((to, t)) = self.ep.poll_transmit(now, &mut buf[..cap]) else {
                break;
            };
            let (to, from) = match to {
                Peer::Udp { remote, local } => (remote, local),
                Peer::Dccp { local, remote, .. } => {
                    match raw.iter().find(|r| r.local_addr() == local) {
                        Some(r) => super::native::send(
                            r,
                            &mut buf[..t.size],
                            t.segment_size,
                            remote,
                            &mut self.stats,
                        ),
                        None => self.stats.udp_tx_no_socket += 1,
                    }
                    continue;
                }
                // Converted in the batch slot; the listener sends it.
                Peer::UDccp(a) => {
                    match udccp {
                        Some(u) => super::udccp::queue_now(
                            u,
                            &mut buf[..t.size],
                            t.segment_size,
                            a,
                            &mut self.stats,
                        ),
                        None => self.stats.udp_tx_no_socket += 1,
                    }
                    continue;
                }
            };
            if t.segment_size.is_some_and(|s| s < t.size) {
                self.stats.udp_tx_gso_trains += 1;
            }
            batch.commit_from(t.size, to, t.segment_size, from);
        }
        flush_batch(sock, batch, &mut self.stats);
    }

    /// A path's stable name (the client's address, without the port a
    /// rejoin changes) and remote address, for status and metrics.
    fn path_label(&self, h: ConnectionHandle, id: u32) -> PathLabel {
        let (name, remote) = match self.ep.remote_of(h, PathId(id)) {
            Some(Peer::Udp { remote, .. }) => (remote.ip().to_string(), remote.to_string()),
            Some(Peer::Dccp { remote, port, .. }) => {
                (format!("dccp:{remote}"), format!("dccp:{remote}:{port}"))
            }
            Some(Peer::UDccp(remote)) => {
                (format!("udccp:{}", remote.ip()), format!("udccp:{remote}"))
            }
            None => return PathLabel::default(),
        };
        PathLabel {
            name: Some(name),
            remote: Some(remote),
        }
    }

    /// One warning per interval when handshakes or packets were refused
    /// (each limit has its counter in `status`; issue #11).
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
        if let Some(r) = &self.peer_routes {
            total += r.stats().inner_source_refused;
        }
        if total == self.refusals.total {
            return;
        }
        if let Some(suppressed) = self.refusal_log.allow(now) {
            let new = total - self.refusals.total;
            self.refusals.total = total;
            warn!(
                new,
                suppressed,
                unauthenticated = e.refused_unauthenticated,
                cookies = e.cookie_replies,
                half_open = e.refused_half_open,
                max_clients = e.refused_max_connections,
                resets_limited = e.resets_rate_limited,
                "refusals since the last report (see `mpdccp status`)"
            );
        }
    }

    fn auth_status(&self) -> Value {
        let Some((g, r)) = self.ep.auth_stats() else {
            return json!({"mode": "open"});
        };
        let routes = self.peer_routes.as_ref().map(|p| p.stats());
        json!({
            "mode": "authenticated",
            "peers": self.peer_routes.as_ref().map_or(0, |p| p.peers().len()),
            "routes": serde_json::to_value(routes).unwrap_or(Value::Null),
            "gate": {
                "half_open": g.half_open_created, "half_open_replaced": g.half_open_replaced,
                "half_open_full": g.half_open_full, "half_open_expired": g.half_open_expired,
                "confirmed": g.confirmed, "confirm_failed": g.confirm_failed,
                "sessions_replaced": g.sessions_replaced,
            },
            "handshake": {
                "inits": r.inits, "malformed": r.malformed, "bad_mac1": r.bad_mac1,
                "cookie_replies": r.cookie_replies, "handshake_failed": r.handshake_failed,
                "unknown_peer": r.unknown_peer, "replayed": r.replayed, "accepted": r.accepted,
                "rate_limited": r.rate.limited, "rate_table_full": r.rate.table_full,
            },
        })
    }

    /// The status document; each connection's entry is serialized as it
    /// is built (`status_doc.rs`).
    pub(super) fn status(&self) -> StatusDoc {
        let mut doc = StatusDoc::new(json!({
            "role": "server",
            "uptime_s": (clock::now() - self.started).as_secs_f64(),
            "tun": {"name": self.tun.name(), "mtu": self.tun_mtu},
            "tun_mtu": self.tun_mtu,
            "plpmtud": self.mtu_policy.plpmtud.is_some(),
            "daemon": super::stats_json_with_drops(
                &self.stats,
                self.path_socket.and_then(|fd| crate::sockopt::socket_drops(&fd)),
            ),
            "endpoint": stats_json(&self.ep.stats()),
            "learned_addresses": self.owners.len(),
            "learned_routes": serde_json::to_value(self.owners.stats()).unwrap_or(Value::Null),
            "auth": self.auth_status(),
        }));
        // A worker names itself, and its handles are unique across
        // workers as handle × N + worker.
        if let Some(sh) = &self.shard {
            doc.head.extend(sh.status_extra());
        }
        let shard = self.shard.as_ref().map(|sh| sh.position());
        for h in self.ep.connections() {
            let Some(c) = self.ep.connection(h) else {
                continue;
            };
            let label = |id: u32| self.path_label(h, id);
            let mut entry = conn_json(c, h.0, &label);
            // Authenticated modes: the configured peer the handshake proved.
            let peer = self.ep.peer(h).and_then(|p| {
                let table = self.ep.peer_table()?;
                Some(table.get(p)?.name.clone())
            });
            if let Some(name) = peer {
                entry["peer"]["identity"] = json!(name);
            }
            if let Some((w, n)) = shard {
                entry["handle"] = json!(h.0 * n as u64 + w as u64);
                entry["worker"] = json!(w);
            }
            doc.push_connection(&entry);
        }
        doc
    }
}
