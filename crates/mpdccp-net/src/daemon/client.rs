//! `mpdccp client`: the CPE end. One socket per configured access network
//! (UDP — carrying U-DCCP for `transport = "udccp"` — or a raw protocol-33
//! socket for `transport = "dccp"`), bound to its
//! interface; a path manager that follows the interfaces.
//!
//! Path manager rules:
//! * at start, the first usable path opens the connection (MP_KEY); the
//!   others join (MP_JOIN) once it is established — whichever path is up
//!   first, so the connection never depends on a particular path;
//! * an interface that goes down (or loses its address) is reported to the
//!   core at once (`set_path_down`) and its socket closed;
//! * when it comes back, the path rejoins after a backoff (doubling on each
//!   failed attempt up to 30 s, reset once the join succeeds), as a new
//!   subflow with a fresh `PathId` and a fresh UDP port;
//! * a configured interface that appears later joins the same way;
//! * if the whole connection closes (server gone), a new one is made; one
//!   that closes before it was established (refused) waits twice as long
//!   each time, up to a minute, and warns at most every 30 s.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use mpdccp_proto::auth::InitiatorConfig;
use mpdccp_proto::conn::{Connection, ConnectionConfig, Event, PathConfig, Role, StuckTimerGuard};
use mpdccp_proto::{Instant, PathId, PathState};
use serde_json::{json, Value};
use tracing::{debug, info, warn};

use super::backoff::{Reconnect, RECONNECT_CAP};
use super::config::{AuthMode, ClientConfig, Transport};
use super::dead_peer::{DeadPeer, Pulse, DEAD_AFTER};
use super::iface::{iface_state, LinkWatcher};
use super::keyfile;
use super::ops::{conn_json, OpsServer, PathLabel};
use super::status_doc::StatusDoc;
use super::warn::PacketWarning;
use super::{
    flush_batch, open_tun, queue_transmit, DaemonStats, PollSet, SignalPipe, TunSetup, TunWriter,
    BATCH,
};
use crate::clock;
use crate::raw::RawDccpSocket;
use crate::tun::Tun;
use crate::udp::{PathSocket, PathSocketConfig, RecvBatch, SendBatch};

const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Interfaces are re-checked at least this often even without netlink events.
const RECHECK: Duration = Duration::from_secs(1);
/// How often the client asks whether its connection is dead (`dead_peer`).
const DEAD_CHECK: Duration = Duration::from_millis(100);
/// How long a graceful close may take before the daemon exits anyway.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// A path's socket: DCCP-in-UDP, native DCCP (raw, protocol 33) or U-DCCP.
enum PathSock {
    Udp(PathSocket),
    Dccp(RawDccpSocket),
    UDccp(PathSocket),
}

impl PathSock {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            PathSock::Udp(s) | PathSock::UDccp(s) => s.as_raw_fd(),
            PathSock::Dccp(s) => s.as_raw_fd(),
        }
    }

    fn local_addr(&self) -> String {
        match self {
            PathSock::Udp(s) | PathSock::UDccp(s) => s.local_addr().to_string(),
            PathSock::Dccp(s) => s.local_addr().to_string(),
        }
    }
}

struct PathRt {
    name: String,
    iface: String,
    remote: SocketAddr,
    source: Option<IpAddr>,
    priority: u8,
    transport: Transport,
    /// Interface usable (up, with an address of the server's family).
    usable: bool,
    socket: Option<PathSock>,
    batch: SendBatch,
    /// Subflow in the core, while joined.
    id: Option<PathId>,
    established: bool,
    next_try: Instant,
    backoff: Duration,
    /// Subflows this path lost while established (the core closed them:
    /// expired, reset or withdrawn by the server) and rejoined.
    lost: u64,
}

/// The client's handshake keys in the authenticated modes.
fn client_auth(config: &ClientConfig) -> anyhow::Result<Option<InitiatorConfig>> {
    match config.auth_mode() {
        AuthMode::Open => {
            warn!("auth = \"open\": RFC 9897 key type 0, keys in clear, the server is not authenticated");
            Ok(None)
        }
        _ => Ok(Some(keyfile::initiator_config(
            config.private_key_file.as_deref().expect("validated"),
            config.server_public_key.as_deref().expect("validated"),
            config.psk_file.as_deref(),
        )?)),
    }
}

/// A client connection; in the authenticated modes it runs the Noise
/// handshake, its Init stamped with the wall clock (replay protection).
fn new_connection(
    cfg: &ConnectionConfig,
    auth: Option<&InitiatorConfig>,
    now: Instant,
    seed: u64,
) -> anyhow::Result<Connection> {
    let mut c = Connection::try_new(Role::Client, cfg.clone(), now, seed)?;
    if let Some(a) = auth {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        c.enable_client_auth(a.clone(), unix, now)?;
    }
    Ok(c)
}

/// What to check when a connection attempt got no answer at all (the core
/// closes it with "handshake timed out" after its Request retransmissions):
/// an authenticated server answers nothing to a client it does not list or
/// whose Init was made for another server key.
fn no_answer_hint(reason: &str, was_connected: bool, authenticated: bool) -> &'static str {
    if was_connected || reason != "handshake timed out" {
        ""
    } else if authenticated {
        ": the server did not answer our handshake — check that it is reachable (UDP), that server_public_key is its public key, and that its [[peer]] list has this client's public key (`mpdccp pubkey < client.key`)"
    } else {
        ": the server did not answer our handshake — check that it is reachable (UDP) and listening"
    }
}

/// Runs the client until SIGTERM/SIGINT (or `close` on the control socket).
pub fn run(config: ClientConfig) -> anyhow::Result<()> {
    clock::set_precise_timers();
    // A path whose interface does not exist is a typo far more often than
    // a modem that has not appeared yet; without this the client would
    // wait for it silently. (An interface that exists but is down is
    // waited for: that is what the path manager is for.)
    for p in &config.path {
        if !super::iface::iface_state(&p.interface).exists {
            anyhow::bail!(
                "[[path]] interface {:?} does not exist (see `ip link`)",
                p.interface
            );
        }
    }
    let ipv6_outer = config
        .path
        .iter()
        .any(|p| p.remote.or(config.server).is_some_and(|r| r.is_ipv6()));
    // DPLPMTUD searches up to `path_mtu`, bounded by the MTU of every
    // configured interface that exists now (RFC 8899 §5.1.2 MAX_PLPMTU).
    let plpmtud_max_ip = config.tunnel.plpmtud.then(|| {
        config
            .path
            .iter()
            .filter_map(|p| super::iface::iface_mtu(&p.interface))
            .fold(config.tunnel.path_mtu, u32::min)
    });
    let (tun, plan, mtu_policy) = open_tun(&TunSetup {
        tun: &config.tun,
        path_mtu: config.tunnel.path_mtu,
        ipv6_outer,
        encap_bytes: config.encap_bytes(),
        offload: config.tunnel.offload,
        protected: config.auth_mode() == AuthMode::Protected,
        plpmtud_max_ip,
    })?;
    let mut conn_cfg = config.tunnel.connection_config(&plan);
    conn_cfg.plpmtud = mtu_policy.plpmtud;
    if config.auth_mode() == AuthMode::Protected {
        // The DCCP packet stays as large as the path allows; the TUN MTU
        // (hence the largest tunnelled packet) gave way for the AEAD.
        conn_cfg.mss_bytes += mpdccp_proto::conn::PROTECTION_OVERHEAD as u32;
    }
    let auth = client_auth(&config)?;
    conn_cfg.protect_payload = config.auth_mode() == AuthMode::Protected;
    // Check the settings before touching the network.
    new_connection(&conn_cfg, auth.as_ref(), clock::now(), 1)
        .map_err(|e| anyhow::anyhow!("tunnel settings: {e}"))?;
    let ops = OpsServer::bind(&config.ops.control_socket, config.ops.prometheus)?;
    let signals = SignalPipe::new()?;
    let watcher = LinkWatcher::new().context("netlink")?;
    super::notify::ready(&format!("tunnel {} up", tun.name()));
    let base_backoff = Duration::from_millis(config.rejoin_backoff_ms.max(1));
    let seed = super::os_seed(config.seed);

    let mut paths: Vec<PathRt> = config
        .path
        .iter()
        .enumerate()
        .map(|(i, p)| PathRt {
            name: config.path_name(i),
            iface: p.interface.clone(),
            remote: p
                .remote
                .or(config.server)
                .expect("validated: remote or server is set"),
            source: p.source,
            priority: p.priority,
            transport: p.transport,
            usable: false,
            socket: None,
            batch: SendBatch::new(BATCH),
            id: None,
            established: false,
            next_try: Instant::ZERO,
            backoff: base_backoff,
            lost: 0,
        })
        .collect();

    let mut d = Client {
        sock_buf: config.tunnel.socket_buffer_bytes,
        conn: new_connection(&conn_cfg, auth.as_ref(), clock::now(), seed)?,
        conn_gen: 0,
        next_path_id: 0,
        stats: DaemonStats::default(),
        tun,
        started: clock::now(),
        tun_mtu: mtu_policy.tun_mtu(None),
        mtu_policy,
        path_names: Default::default(),
    };
    let offload = config.tunnel.offload;
    let mut rx = super::recv_batch(offload);
    let mut txbuf = vec![0u8; 65_536];
    let mut tunbuf = vec![0u8; 65_536 + crate::offload::VNET_HDR_LEN];
    let mut segbuf = vec![0u8; 65_536];
    let mut rawbuf = vec![0u8; 65_536];
    let mut tun_writer = TunWriter::new();
    let mut poll = PollSet::with_capacity(8 + paths.len())
        .with_busy_poll(Duration::from_micros(config.tunnel.busy_poll_us));
    let mut closing: Option<Instant> = None;
    let mut next_check = Instant::ZERO;
    let mut reconnect_at: Option<Instant> = None;
    let mut reconnect = Reconnect::new(base_backoff, RECONNECT_CAP);
    let mut connected_once = false;
    let mut dead = DeadPeer::default();
    let mut next_dead_check = Instant::ZERO;

    // A deadline handle_timeout cannot advance is a bug; never spin on it.
    let mut timer_guard = StuckTimerGuard::new();
    loop {
        let now = clock::now();
        // Path manager.
        if now >= next_check
            || paths
                .iter()
                .any(|p| p.usable && p.id.is_none() && p.next_try <= now)
        {
            if closing.is_none() {
                d.manage_paths(now, &mut paths, base_backoff);
                // UDP GRO on every (new) path socket; idempotent.
                for p in &paths {
                    if let Some(PathSock::Udp(s) | PathSock::UDccp(s)) = &p.socket {
                        s.set_gro(offload);
                    }
                }
            }
            next_check = now + RECHECK;
        }
        // Timers.
        if d.conn.poll_timeout().is_some_and(|t| t <= now) {
            d.conn.handle_timeout(now);
            timer_guard.handled(now);
        }
        // Events.
        while let Some(ev) = d.conn.poll_event() {
            match ev {
                Event::Delivered { data, .. } => tun_writer.write(&d.tun, &mut d.stats, &data),
                Event::Connected => {
                    info!("connected");
                    connected_once = true;
                }
                Event::PathEstablished(id) => {
                    if let Some(p) = paths.iter_mut().find(|p| p.id == Some(id)) {
                        info!(path = %p.name, %id, "path established");
                        p.established = true;
                        p.backoff = base_backoff;
                        d.stats.path_up_events += 1;
                    }
                }
                Event::PathFailed(id) | Event::PathClosed(id) => {
                    if let Some(p) = paths.iter_mut().find(|p| p.id == Some(id)) {
                        if !p.established && !d.conn.is_established() {
                            // The first subflow's handshake: the connection
                            // closes with it and reconnects (below).
                            debug!(path = %p.name, %id, "handshake failed");
                            p.id = None;
                            p.socket = None;
                        } else if !p.established {
                            // The join itself failed: retry later, with a longer wait.
                            warn!(path = %p.name, %id, "join failed; retrying in {:?}", p.backoff);
                            p.id = None;
                            p.socket = None;
                            p.next_try = now + p.backoff;
                            p.backoff = (p.backoff * 2).min(MAX_BACKOFF);
                        } else {
                            warn!(path = %p.name, %id, "path failing");
                        }
                    }
                }
                Event::PlpmtuChanged { path, plpmtu } => {
                    let name = d
                        .path_names
                        .get(&path)
                        .map_or_else(|| path.to_string(), |(n, _)| n.clone());
                    info!(path = %name, %path, plpmtu, "smallest PLPMTU changed (DCCP packet bytes)");
                    d.tun_mtu = super::follow_plpmtu(
                        &d.tun,
                        &d.mtu_policy,
                        d.tun_mtu,
                        d.conn.plpmtu(),
                        &name,
                    );
                }
                Event::Closed { reason } => {
                    if closing.is_some() {
                        info!(%reason, "connection closed");
                    } else {
                        // Refused or unreachable: back off, warn rate-limited.
                        let hint = no_answer_hint(&reason, connected_once, auth.is_some());
                        let retry = reconnect.closed(now, connected_once);
                        connected_once = false;
                        let (wait, failures) = (retry.wait, retry.failures);
                        match retry.warn {
                            Some(suppressed) => {
                                warn!(%reason, failures, suppressed, "connection closed{hint}; reconnecting in {wait:?}")
                            }
                            None => {
                                debug!(%reason, failures, "connection closed; reconnecting in {wait:?}")
                            }
                        }
                        reconnect_at = Some(now + wait);
                    }
                }
                other => debug!(?other, "event"),
            }
        }
        tun_writer.flush(&d.tun, &mut d.stats);
        if closing.is_none() && reconnect_at.is_none() && now >= next_dead_check {
            next_dead_check = now + DEAD_CHECK;
            let stats = d.conn.stats();
            let pulse = Pulse {
                established: d.conn.is_established(),
                any_active: d.conn.paths().iter().any(|v| v.state == PathState::Active),
                rx: stats.rx_datagrams,
                tx: stats.tx_datagrams,
            };
            if dead.check(now, pulse) {
                warn!("the server has been silent for {DEAD_AFTER:?}: new handshake");
                d.stats.dead_reconnects += 1;
                reconnect_at = Some(now);
            }
        }
        if closing.is_some() && (d.conn.is_closed() || closing.is_some_and(|t| now >= t)) {
            d.flush(now, &mut paths, &mut txbuf);
            break;
        }
        if let Some(t) = reconnect_at {
            if now >= t && closing.is_none() {
                reconnect_at = None;
                dead.reset();
                d.conn_gen += 1;
                d.conn =
                    new_connection(&conn_cfg, auth.as_ref(), now, seed.wrapping_add(d.conn_gen))?;
                // The new connection's paths search again from the base.
                d.tun_mtu =
                    super::follow_plpmtu(&d.tun, &d.mtu_policy, d.tun_mtu, None, "reconnect");
                for p in paths.iter_mut() {
                    p.id = None;
                    p.socket = None;
                    p.established = false;
                    p.next_try = now;
                }
                next_check = now;
                continue;
            }
        }
        d.flush(now, &mut paths, &mut txbuf);

        // Wait.
        poll.clear();
        let i_tun = poll.add(d.tun.as_raw_fd());
        let i_sig = poll.add(signals.as_raw_fd());
        let i_nl = poll.add(watcher.as_raw_fd());
        let i_ops = poll.add(ops.wake_fd());
        let mut i_sock = [usize::MAX; 16];
        for (k, p) in paths.iter().enumerate().take(16) {
            if let Some(s) = &p.socket {
                i_sock[k] = poll.add(s.as_raw_fd());
            }
        }
        let mut deadline = next_check;
        if let Some(t) = timer_guard.wake_at(d.conn.poll_timeout()) {
            deadline = deadline.min(t);
        }
        for p in &paths {
            if p.usable && p.id.is_none() {
                deadline = deadline.min(p.next_try);
            }
        }
        if let Some(t) = reconnect_at {
            deadline = deadline.min(t);
        }
        if let Some(t) = closing {
            deadline = deadline.min(t);
        }
        poll.wait(clock::now(), Some(deadline))?;
        let now = clock::now();

        if poll.readable(i_sig) && signals.take() && closing.is_none() {
            info!("signal: closing gracefully (MP_CLOSE)");
            super::notify::stopping();
            d.conn.close(now);
            closing = Some(now + CLOSE_GRACE);
        }
        if poll.readable(i_nl) && watcher.drain() {
            next_check = now;
        }
        if poll.readable(i_ops) {
            let status = || StatusDoc::from(d.status(&paths));
            if ops.handle_requests(&status) && closing.is_none() {
                d.conn.close(now);
                closing = Some(now + CLOSE_GRACE);
            }
        }
        for (k, p) in paths.iter_mut().enumerate().take(16) {
            if i_sock[k] != usize::MAX && poll.readable(i_sock[k]) {
                d.handle_socket(p, &mut rx, &mut rawbuf);
            }
        }
        if poll.readable(i_tun) && closing.is_none() {
            d.handle_tun(clock::now(), &mut tunbuf, &mut segbuf);
        }
    }
    Ok(())
}

struct Client {
    sock_buf: usize,
    conn: Connection,
    conn_gen: u64,
    next_path_id: u32,
    stats: DaemonStats,
    tun: Tun,
    started: Instant,
    /// The TUN MTU in force; with DPLPMTUD it follows the connection's
    /// smallest PLPMTU (`mtu_policy`).
    tun_mtu: u32,
    mtu_policy: super::TunMtuPolicy,
    /// Subflow → its configured path's name and server address, kept
    /// while the core knows the subflow (closed ones too: a path keeps its
    /// name after close).
    path_names: std::collections::BTreeMap<PathId, (String, SocketAddr)>,
}

impl Client {
    /// Brings paths up and down to match their interfaces.
    fn manage_paths(&mut self, now: Instant, paths: &mut [PathRt], base_backoff: Duration) {
        let conn = &self.conn;
        self.path_names.retain(|id, _| conn.has_path(*id));
        for p in paths.iter_mut() {
            // A subflow the core closed on its own (expired by
            // `path_idle_timeout`, reset or withdrawn by the server) while
            // the interface stays up: drop the socket and rejoin after a
            // backoff, as for an interface that came back.
            if let Some(id) = p.id {
                let alive = self
                    .conn
                    .paths()
                    .iter()
                    .any(|v| v.id == id && v.state != PathState::Closed);
                if !alive && !self.conn.is_closed() {
                    info!(path = %p.name, %id, "subflow closed by the core; rejoining");
                    self.conn.set_path_down(now, id);
                    p.id = None;
                    p.socket = None;
                    if p.established {
                        p.lost += 1;
                        p.backoff = base_backoff;
                    }
                    p.established = false;
                    p.next_try = now + p.backoff;
                    p.backoff = (p.backoff * 2).min(MAX_BACKOFF);
                }
            }
            let st = iface_state(&p.iface);
            let usable = st.usable_for(p.remote.ip());
            if p.usable && !usable {
                info!(path = %p.name, iface = %p.iface, "interface down: path marked down");
                self.stats.path_down_events += 1;
                if let Some(id) = p.id.take() {
                    self.conn.set_path_down(now, id);
                }
                p.socket = None;
                p.established = false;
                p.usable = false;
                p.backoff = base_backoff;
                continue;
            }
            if !p.usable && usable {
                info!(path = %p.name, iface = %p.iface, "interface usable");
                p.usable = true;
                // A returning interface waits one backoff (links flap when they return).
                p.next_try = if self.stats.path_down_events == 0 {
                    now
                } else {
                    now + p.backoff
                };
            }
            if !p.usable || p.id.is_some() || now < p.next_try {
                continue;
            }
            // The first subflow (MP_KEY) may go on any path; joins need an established connection.
            let first = self.conn.paths().is_empty();
            if !first && !self.conn.is_established() {
                continue;
            }
            let local_ip = p.source.or(match p.remote.ip() {
                IpAddr::V4(_) => st.ipv4.map(IpAddr::V4),
                IpAddr::V6(_) => st.ipv6.map(IpAddr::V6),
            });
            let sock = match self.open_socket(p, local_ip) {
                Ok(s) => s,
                Err(e) => {
                    warn!(path = %p.name, "cannot open socket: {e}");
                    p.next_try = now + p.backoff;
                    p.backoff = (p.backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            let id = PathId(self.next_path_id);
            self.next_path_id += 1;
            // No addresses for the DCCP checksum pseudo-header: the server's
            // `Endpoint` does not learn its local address per datagram, so
            // both ends checksum with unspecified addresses (the outer UDP
            // checksum still covers every byte, RFC 6773 §4). A native DCCP
            // path's raw socket fills and verifies the checksum over the
            // real addresses instead (RFC 4340 §9.1, `native.rs`).
            let cfg = PathConfig {
                priority: p.priority,
                local: None,
                remote: None,
            };
            match self.conn.add_path(now, id, cfg) {
                Ok(()) => {
                    info!(path = %p.name, %id, local = %sock.local_addr(), remote = %p.remote, first, "path joining");
                    self.stats.joins_started += 1;
                    self.path_names.insert(id, (p.name.clone(), p.remote));
                    p.id = Some(id);
                    p.socket = Some(sock);
                    p.established = false;
                }
                Err(e) => {
                    warn!(path = %p.name, "add_path: {e}");
                    p.next_try = now + p.backoff;
                    p.backoff = (p.backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// The path's socket for its transport. Native DCCP needs the local
    /// address (it enters every checksum, RFC 4340 §9.1).
    fn open_socket(&self, p: &PathRt, local_ip: Option<IpAddr>) -> std::io::Result<PathSock> {
        let sock_cfg = PathSocketConfig {
            device: Some(p.iface.clone()),
            local: local_ip.map(|ip| SocketAddr::new(ip, 0)),
            buffer_bytes: self.sock_buf,
        };
        match p.transport {
            Transport::Udp => PathSocket::bind(&sock_cfg, p.remote).map(PathSock::Udp),
            Transport::UDccp => PathSocket::bind(&sock_cfg, p.remote).map(PathSock::UDccp),
            Transport::Dccp => {
                let local = local_ip.ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::AddrNotAvailable,
                        "native DCCP: the interface has no address of the server's family",
                    )
                })?;
                super::native::open(local, Some(&p.iface), self.sock_buf).map(PathSock::Dccp)
            }
        }
    }

    fn handle_socket(&mut self, p: &mut PathRt, rx: &mut RecvBatch, rawbuf: &mut [u8]) {
        let (Some(sock), Some(id)) = (&mut p.socket, p.id) else {
            return;
        };
        let conn = &mut self.conn;
        let remote = p.remote;
        match sock {
            PathSock::Udp(sock) => {
                let local = sock.local_addr();
                super::drain_socket(sock, rx, &mut self.stats, |stats, now, from, _, data| {
                    if from != remote {
                        stats.udp_rx_foreign += 1;
                        stats.warnings.warn(
                            PacketWarning::Foreign,
                            now,
                            format_args!("udp {local}: datagram from {from}, not the server {remote}: dropped (a server on a wildcard address answering from another address?)"),
                        );
                        return;
                    }
                    conn.handle_datagram(now, id, data);
                })
            }
            PathSock::UDccp(sock) => super::udccp::drain(
                sock,
                rx,
                rawbuf,
                &mut self.stats,
                |stats, now, from, data| {
                    if from != remote {
                        stats.udp_rx_foreign += 1;
                        return;
                    }
                    conn.handle_datagram(now, id, data);
                },
            ),
            // The raw socket sees every DCCP packet to its address: only
            // the server's count (ports are the core's, not a socket's).
            PathSock::Dccp(sock) => super::native::drain(
                sock,
                rawbuf,
                &mut self.stats,
                |stats, now, from, _, data| {
                    if from != remote.ip() {
                        stats.udp_rx_foreign += 1;
                        stats.warnings.warn(
                            PacketWarning::Foreign,
                            now,
                            format_args!(
                                "dccp: packet from {from}, not the server {remote}: dropped"
                            ),
                        );
                        return;
                    }
                    conn.handle_datagram(now, id, data);
                },
            ),
        }
    }

    fn handle_tun(&mut self, now: Instant, buf: &mut [u8], seg: &mut [u8]) {
        let conn = &mut self.conn;
        super::drain_tun(&self.tun, buf, seg, &mut self.stats, |stats, pkt| {
            if super::inner_dst(pkt).is_none() {
                stats.tun_rx_malformed += 1;
            } else if conn.send(now, pkt).is_err() {
                stats.send_rejected += 1;
            }
        });
    }

    /// Sends everything the core has for the network: datagrams and GSO
    /// trains queue per path, one `sendmmsg` per path at the end.
    fn flush(&mut self, now: Instant, paths: &mut [PathRt], buf: &mut [u8]) {
        let cap = buf.len().min(super::TRAIN_BUF_BYTES);
        while let Some(t) = self.conn.poll_transmit(now, &mut buf[..cap]) {
            let Some(p) = paths.iter_mut().find(|p| p.id == Some(t.path)) else {
                self.stats.udp_tx_no_socket += 1;
                continue;
            };
            match &p.socket {
                Some(PathSock::Udp(sock)) => queue_transmit(
                    sock,
                    &mut p.batch,
                    &mut self.stats,
                    &buf[..t.size],
                    t.segment_size,
                    p.remote,
                ),
                Some(PathSock::UDccp(sock)) => super::udccp::queue(
                    sock,
                    &mut p.batch,
                    &mut self.stats,
                    &mut buf[..t.size],
                    t.segment_size,
                    p.remote,
                ),
                Some(PathSock::Dccp(sock)) => super::native::send(
                    sock,
                    &mut buf[..t.size],
                    t.segment_size,
                    p.remote.ip(),
                    &mut self.stats,
                ),
                None => self.stats.udp_tx_no_socket += 1,
            }
        }
        for p in paths.iter_mut() {
            if let Some(PathSock::Udp(sock) | PathSock::UDccp(sock)) = &p.socket {
                flush_batch(sock, &mut p.batch, &mut self.stats);
            } else {
                p.batch.clear();
            }
        }
    }

    fn status(&self, paths: &[PathRt]) -> Value {
        let label_of = |id: u32| match self.path_names.get(&PathId(id)) {
            Some((name, remote)) => PathLabel {
                name: Some(name.clone()),
                remote: Some(remote.to_string()),
            },
            None => PathLabel::default(),
        };
        let cfg_paths: Vec<Value> = paths
            .iter()
            .map(|p| {
                json!({
                    "name": p.name, "interface": p.iface, "remote": p.remote.to_string(),
                    "transport": p.transport,
                    "usable": p.usable, "path_id": p.id.map(|i| i.0), "established": p.established,
                    "lost_subflows": p.lost,
                    "local": p.socket.as_ref().map(PathSock::local_addr),
                })
            })
            .collect();
        json!({
            "role": "client",
            "uptime_s": (clock::now() - self.started).as_secs_f64(),
            "tun": {"name": self.tun.name(), "mtu": self.tun_mtu},
            "tun_mtu": self.tun_mtu,
            "plpmtud": self.mtu_policy.plpmtud.is_some(),
            "daemon": super::stats_json_with_drops(
                &self.stats,
                Some(
                    paths
                        .iter()
                        .filter_map(|p| match &p.socket {
                            Some(PathSock::Udp(s) | PathSock::UDccp(s)) => s.rx_drops(),
                            _ => None,
                        })
                        .sum(),
                ),
            ),
            "configured_paths": cfg_paths,
            "connections": [conn_json(&self.conn, self.conn_gen, &label_of)],
        })
    }
}

/// For `mpdccp status`: where a client's control socket is by default.
pub fn default_control_socket() -> PathBuf {
    PathBuf::from("/run/mpdccp.sock")
}

#[cfg(test)]
mod hint_tests {
    use super::no_answer_hint;

    #[test]
    fn a_handshake_without_any_answer_names_the_keys_to_check() {
        let h = no_answer_hint("handshake timed out", false, true);
        assert!(
            h.contains("server_public_key") && h.contains("[[peer]]"),
            "{h}"
        );
        assert!(!no_answer_hint("handshake timed out", false, false).contains("server_public_key"));
        // A refusal or a connection that worked before is another story.
        assert_eq!(
            no_answer_hint("connection refused (reset code TooBusy)", false, true),
            ""
        );
        assert_eq!(no_answer_hint("handshake timed out", true, true), "");
    }
}
