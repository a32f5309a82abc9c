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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mpdccp_proto::auth::InitiatorConfig;
use mpdccp_proto::conn::{Connection, ConnectionConfig, Event, Role};
use mpdccp_proto::{Instant, PathId, PathState};
use tracing::{debug, info, warn};

use super::backoff::{Reconnect, RECONNECT_CAP};
use super::config::{AuthMode, ClientConfig};
use super::dead_peer::{DeadPeer, Pulse, Verdict, DEAD_AFTER, DEAD_AFTER_RTTS};
use super::driver::{drive, Control, Daemon, Step};
use super::iface::{iface_state, LinkWatcher};
use super::keyfile;
use super::ops::{conn_status, OpsServer, PathLabel};
use super::plan::{run_plan, RunPlan};
use super::status::{ConfiguredPath, StatusHead};
use super::status_doc::StatusDoc;
use super::transport::PathLink;
use super::tun_reader::{Budget, TunReader};
use paths::PathRt;

mod paths;
use super::{DaemonStats, PollSet, SignalPipe, TunMtuPolicy, TunWriter, BATCH, TUN_PKTS_PER_WAKE};
use crate::clock;
use crate::tun::Tun;
use crate::udp::{RecvBatch, SendBatch};

/// Interfaces are re-checked at least this often even without netlink events.
const RECHECK: Duration = Duration::from_secs(1);
/// How often the client asks whether its connection is dead (`dead_peer`).
const DEAD_CHECK: Duration = Duration::from_millis(100);
/// Paths the poll set watches (sockets beyond are not read).
const MAX_POLLED_PATHS: usize = 16;

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
    super::request_sched_slice(config.tunnel.sched_slice_us);
    // A path whose interface does not exist is a typo far more often than
    // a modem that has not appeared yet; without this the client would
    // wait for it silently. (An interface that exists but is down is
    // waited for: that is what the path manager is for.)
    for p in &config.path {
        if !iface_state(&p.interface).exists {
            anyhow::bail!(
                "[[path]] interface {:?} does not exist (see `ip link`)",
                p.interface
            );
        }
    }
    let setup = config.tun_setup(super::iface::iface_mtu);
    let plan = run_plan(&setup, &config.tunnel)?;
    let tun = super::open_tun_queues(&setup, &plan, 1)?.remove(0);
    let auth = client_auth(&config)?;
    // Check the keys before touching the network.
    new_connection(&plan.conn, auth.as_ref(), clock::now(), 1)
        .map_err(|e| anyhow::anyhow!("tunnel settings: {e}"))?;
    let ops = OpsServer::bind(&config.ops.control_socket, config.ops.prometheus)?;
    let signals = SignalPipe::new()?;
    let watcher = LinkWatcher::new().context("netlink")?;
    super::notify::ready(&format!("tunnel {} up", tun.name()));
    let mut d = Client::new(&config, plan, auth, tun, watcher)?;
    let control = Control::Main {
        signals: &signals,
        ops: &ops,
    };
    drive(
        &mut d,
        control,
        Duration::from_micros(config.tunnel.busy_poll_us),
    )
}

/// When to make a new connection: after a close (backoff) or when the
/// server went silent (`dead_peer`).
struct Redial {
    at: Option<Instant>,
    backoff: Reconnect,
    /// The current connection got established (resets the backoff).
    connected_once: bool,
    dead: DeadPeer,
    next_dead_check: Instant,
}

/// `join_advertised_address`: joins go to the address the server
/// advertised on this connection (docs/FLEET.md).
struct FleetJoin {
    follow: bool,
    advertised: Option<SocketAddr>,
    /// Joins wait for the advertisement until then: 1 s after the
    /// connection was first seen open (`None` before; a path may see it
    /// open before the `Connected` event is read).
    wait_until: Option<Instant>,
}

/// How long joins wait for the server's MP_ADDADDR: it comes one RTT
/// after the connection opens (with the server's first Ack).
pub(super) const ADDRESS_WAIT: Duration = Duration::from_secs(1);

/// The client's packet thread: its connection, paths and buffers.
struct Client {
    conn: Connection,
    /// What every connection of this client is made with (`plan.rs`).
    conn_cfg: ConnectionConfig,
    auth: Option<InitiatorConfig>,
    seed: u64,
    conn_gen: u64,
    next_path_id: u32,
    paths: Vec<PathRt>,
    base_backoff: Duration,
    sock_buf: usize,
    offload: bool,
    redial: Redial,
    fleet: FleetJoin,
    stats: DaemonStats,
    /// Read and written by this thread; read by `tun_reader`'s standby
    /// thread when this one is late.
    tun: Arc<Tun>,
    tun_reader: TunReader,
    /// Read errors of the TUN reader already warned about.
    tun_read_errors: u64,
    tun_writer: TunWriter,
    started: Instant,
    /// The TUN MTU in force; with DPLPMTUD it follows the connection's
    /// smallest PLPMTU (`mtu_policy`).
    tun_mtu: u32,
    mtu_policy: TunMtuPolicy,
    /// Subflow → its configured path's name and server address, kept
    /// while the core knows the subflow (closed ones too: a path keeps its
    /// name after close).
    path_names: BTreeMap<PathId, (String, SocketAddr)>,
    watcher: LinkWatcher,
    next_check: Instant,
    /// Receive slots, the transmit buffer and the U-DCCP / raw scratch
    /// buffer, allocated once.
    rx: RecvBatch,
    txbuf: Vec<u8>,
    rawbuf: Vec<u8>,
    /// Poll indices of the last `register`: netlink, each path's socket.
    i_nl: usize,
    i_sock: [usize; MAX_POLLED_PATHS],
    /// Each path's retiring subflow's socket (`paths::Retiring`).
    i_retiring: [usize; MAX_POLLED_PATHS],
}

impl PathRt {
    /// Path `i` of `config` before its first dial: no socket, not usable.
    fn from_config(config: &ClientConfig, i: usize, backoff: Duration) -> PathRt {
        let p = &config.path[i];
        let remote = p
            .remote
            .or(config.server)
            .expect("validated: remote or server is set");
        PathRt {
            name: config.path_name(i),
            iface: p.interface.clone(),
            remote,
            target: remote,
            source: p.source,
            priority: p.priority,
            transport: p.transport,
            usable: false,
            socket: None,
            batch: SendBatch::new(BATCH),
            id: None,
            established: false,
            next_try: Instant::ZERO,
            backoff,
            lost: 0,
            retiring: None,
        }
    }
}

impl Client {
    fn new(
        config: &ClientConfig,
        plan: RunPlan,
        auth: Option<InitiatorConfig>,
        tun: Tun,
        watcher: LinkWatcher,
    ) -> anyhow::Result<Client> {
        let base_backoff = Duration::from_millis(config.rejoin_backoff_ms.max(1));
        let seed = super::os_seed(config.seed);
        let paths = (0..config.path.len())
            .map(|i| PathRt::from_config(config, i, base_backoff))
            .collect();
        let offload = config.tunnel.offload;
        let tun = Arc::new(tun);
        let tun_reader = TunReader::spawn(tun.clone()).context("TUN reader thread")?;
        Ok(Client {
            conn: new_connection(&plan.conn, auth.as_ref(), clock::now(), seed)?,
            conn_cfg: plan.conn,
            auth,
            seed,
            conn_gen: 0,
            next_path_id: 0,
            paths,
            base_backoff,
            sock_buf: config.tunnel.socket_buffer_bytes,
            offload,
            redial: Redial {
                at: None,
                backoff: Reconnect::new(base_backoff, RECONNECT_CAP),
                connected_once: false,
                dead: DeadPeer::default(),
                next_dead_check: Instant::ZERO,
            },
            fleet: FleetJoin {
                follow: config.join_advertised_address,
                advertised: None,
                wait_until: None,
            },
            stats: DaemonStats::default(),
            tun,
            tun_reader,
            tun_read_errors: 0,
            tun_writer: TunWriter::new(),
            started: clock::now(),
            tun_mtu: plan.tun_mtu.tun_mtu(None),
            mtu_policy: plan.tun_mtu,
            path_names: BTreeMap::new(),
            watcher,
            next_check: Instant::ZERO,
            rx: super::recv_batch(offload),
            txbuf: vec![0u8; 65_536],
            rawbuf: vec![0u8; 65_536],
            i_nl: usize::MAX,
            i_sock: [usize::MAX; MAX_POLLED_PATHS],
            i_retiring: [usize::MAX; MAX_POLLED_PATHS],
        })
    }

    fn handle_events(&mut self, now: Instant, closing: bool) {
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Delivered { data, .. } => {
                    self.tun_writer.write(&self.tun, &mut self.stats, &data);
                    // Its next payload reuses the buffer: no allocation.
                    self.conn.recycle_delivered(data);
                }
                Event::Connected => {
                    info!("connected");
                    self.redial.connected_once = true;
                    self.fleet.wait_until.get_or_insert(now + ADDRESS_WAIT);
                }
                Event::AddressAdded { addr, .. } => self.address_advertised(now, addr),
                Event::PathEstablished(id) => self.path_established(now, id),
                Event::PathFailed(id) | Event::PathClosed(id) => self.path_failed(now, id),
                Event::PlpmtuChanged { path, plpmtu } => self.plpmtu_changed(path, plpmtu),
                Event::Closed { reason } => self.closed(now, closing, &reason),
                other => debug!(?other, "event"),
            }
        }
        self.tun_writer.flush(&self.tun, &mut self.stats);
    }

    fn plpmtu_changed(&mut self, path: PathId, plpmtu: u32) {
        let name = self
            .path_names
            .get(&path)
            .map_or_else(|| path.to_string(), |(n, _)| n.clone());
        info!(path = %name, %path, plpmtu, "smallest PLPMTU changed (DCCP packet bytes)");
        let min = self.conn.plpmtu_converged();
        self.tun_mtu = super::follow_plpmtu(&self.tun, &self.mtu_policy, self.tun_mtu, min, &name);
    }

    /// The connection closed: when the daemon is not closing, refused or
    /// unreachable; back off, warn rate-limited.
    fn closed(&mut self, now: Instant, closing: bool, reason: &str) {
        if closing {
            info!(%reason, "connection closed");
            return;
        }
        let r = &mut self.redial;
        let hint = no_answer_hint(reason, r.connected_once, self.auth.is_some());
        let retry = r.backoff.closed(now, r.connected_once);
        r.connected_once = false;
        let (wait, failures) = (retry.wait, retry.failures);
        match retry.warn {
            Some(suppressed) => {
                warn!(%reason, failures, suppressed, "connection closed{hint}; reconnecting in {wait:?}")
            }
            None => debug!(%reason, failures, "connection closed; reconnecting in {wait:?}"),
        }
        r.at = Some(now + wait);
    }

    /// Asks `dead_peer` every [`DEAD_CHECK`] whether the server went
    /// silent: probes the paths or starts over when it says so.
    fn check_dead(&mut self, now: Instant) {
        let r = &mut self.redial;
        if r.at.is_some() || now < r.next_dead_check {
            return;
        }
        r.next_dead_check = now + DEAD_CHECK;
        let stats = self.conn.stats();
        let paths = self.conn.paths();
        let active = || paths.iter().filter(|v| v.state == PathState::Active);
        let pulse = Pulse {
            established: self.conn.is_established(),
            any_active: active().next().is_some(),
            rx: stats.traffic.rx_datagrams,
            tx: stats.traffic.tx_datagrams,
            rx_data: stats.traffic.rx_data_pkts,
            syncs: stats.traffic.syncs_sent,
            // The fastest Active path's: a failing path's RTT, inflated
            // by back-off or a flood, must not stretch the wait.
            srtt: active().filter_map(|v| v.srtt).min(),
        };
        match r.dead.check(now, pulse) {
            Verdict::Alive => {}
            Verdict::Probe => {
                self.conn.probe_paths(now);
            }
            Verdict::Dead => {
                warn!("the server has been silent (at least {DEAD_AFTER:?}, {DEAD_AFTER_RTTS} round trips): new handshake");
                self.stats.dead_reconnects += 1;
                r.at = Some(now);
            }
        }
    }

    /// A new connection in place of the closed (or dead) one; every path
    /// joins it afresh.
    fn redial(&mut self, now: Instant) -> anyhow::Result<()> {
        // The server may be slow rather than gone: an authenticated
        // MP_FAST_CLOSE (RFC 9897 §3.2.3) on the old subflows lets it drop
        // the session and withdraw the peer's routes at once. Otherwise a
        // fleet host would announce the peer's prefix beside the host of
        // the new session until its own timeout.
        if self.conn.is_established() {
            self.conn.fast_close(now);
            self.flush(now);
        }
        self.redial.at = None;
        self.redial.dead.reset();
        self.conn_gen += 1;
        let seed = self.seed.wrapping_add(self.conn_gen);
        self.conn = new_connection(&self.conn_cfg, self.auth.as_ref(), now, seed)?;
        // The new connection's paths search again from the base.
        self.tun_mtu =
            super::follow_plpmtu(&self.tun, &self.mtu_policy, self.tun_mtu, None, "reconnect");
        // The new connection starts at the configured (service) address.
        self.fleet.advertised = None;
        self.fleet.wait_until = None;
        for p in &mut self.paths {
            p.detach();
            p.retiring = None;
            p.next_try = now;
        }
        self.next_check = now;
        Ok(())
    }

    /// Sends everything the core has for the network: datagrams and GSO
    /// trains queue per path, one `sendmmsg` per path at the end.
    fn flush(&mut self, now: Instant) {
        let cap = self.txbuf.len().min(super::TRAIN_BUF_BYTES);
        // With one path and nothing retiring every transmit is that path's:
        // the core writes (and seals) it right in the path's send batch,
        // one copy per packet less. Otherwise it goes through `txbuf`.
        let only = self.sole_udp_path();
        loop {
            let slot = only.and_then(|k| self.paths[k].send_slot(&mut self.stats));
            let in_slot = slot.is_some();
            let buf = match slot {
                Some(s) => s,
                None => &mut self.txbuf[..],
            };
            let cap = buf.len().min(cap);
            let Some(t) = self.conn.poll_transmit(now, &mut buf[..cap]) else {
                break;
            };
            if let (true, Some(k)) = (in_slot, only) {
                if self.paths[k].id == Some(t.path) {
                    self.paths[k].commit_slot(&mut self.stats, &t);
                    continue;
                }
                // Not that path's after all: sent from `txbuf` as usual.
                let data = &self.paths[k].batch.next_buf()[..t.size];
                self.txbuf[..t.size].copy_from_slice(data);
            }
            match self.paths.iter_mut().find_map(|p| p.sender(t.path)) {
                Some((sock, batch, target)) => {
                    let data = &mut self.txbuf[..t.size];
                    sock.transmit(batch, &mut self.stats, data, t.segment_size, target)
                }
                None => self.stats.udp_tx_no_socket += 1,
            }
        }
        for p in &mut self.paths {
            match &p.socket {
                Some(sock) => sock.flush(&mut p.batch, &mut self.stats),
                None => p.batch.clear(),
            }
            if let Some(r) = &mut p.retiring {
                r.socket.flush(&mut r.batch, &mut self.stats);
            }
        }
    }

    /// The one path with a socket, when it is a UDP path and no subflow is
    /// retiring (`flush` then writes into its send batch directly).
    fn sole_udp_path(&self) -> Option<usize> {
        let mut with_socket = self
            .paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.socket.is_some());
        let (k, p) = with_socket.next()?;
        let alone = with_socket.next().is_none() && self.paths.iter().all(|p| p.retiring.is_none());
        (alone && p.socket.as_ref().is_some_and(|l| l.plain_udp().is_some())).then_some(k)
    }

    /// A TUN that fails to read (not merely empty) makes the standby thread pause;
    /// said at most once per [`RECHECK`].
    fn warn_tun_read_errors(&mut self) {
        let errors = self.tun_reader.standby_counts().1;
        if errors > self.tun_read_errors {
            warn!(
                errors = errors - self.tun_read_errors,
                "TUN {}: read errors",
                self.tun.name()
            );
            self.tun_read_errors = errors;
        }
    }

    fn status_doc(&self) -> StatusDoc {
        let label_of = |id: u32| match self.path_names.get(&PathId(id)) {
            Some((name, remote)) => PathLabel {
                name: Some(name.clone()),
                remote: Some(remote.to_string()),
                transport: self
                    .paths
                    .iter()
                    .find(|p| &p.name == name)
                    .map(|p| p.transport.name()),
            },
            None => PathLabel::default(),
        };
        let cfg_paths: Vec<ConfiguredPath> = self
            .paths
            .iter()
            .map(|p| ConfiguredPath {
                name: p.name.clone(),
                interface: p.iface.clone(),
                remote: p.remote.to_string(),
                transport: p.transport,
                usable: p.usable,
                path_id: p.id.map(|i| i.0),
                established: p.established,
                lost_subflows: p.lost,
                local: p.socket.as_ref().map(PathLink::local_addr),
            })
            .collect();
        let drops = self
            .paths
            .iter()
            .filter_map(|p| p.socket.as_ref()?.rx_drops())
            .sum();
        let mut conn = conn_status(&self.conn, self.conn_gen, &label_of);
        conn.settings.auth = Some(
            super::auth_mode_name(self.auth.is_some(), self.conn.config().protect_payload).into(),
        );
        let mut doc = StatusDoc::new(StatusHead {
            configured_paths: Some(cfg_paths),
            ..super::status_head(
                "client",
                self.started,
                &self.tun,
                self.tun_mtu,
                &self.mtu_policy,
                &self.stats,
                Some(drops),
            )
        });
        doc.push_connection(&conn);
        doc
    }
}

impl Daemon for Client {
    const SIGNAL_CLOSE: &'static str = "closing gracefully (MP_CLOSE)";

    /// The path manager: at least every [`RECHECK`], at once after a
    /// netlink event or when a path's backoff is over.
    fn prepare(&mut self, now: Instant, closing: bool) {
        let due = self
            .paths
            .iter()
            .any(|p| (p.usable && p.id.is_none() && p.next_try <= now) || p.retire_due(now));
        if now >= self.next_check || due {
            if !closing {
                self.manage_paths(now);
            }
            self.next_check = now + RECHECK;
            self.warn_tun_read_errors();
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.conn.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.conn.handle_timeout(now);
    }

    fn work(&mut self, now: Instant, closing: bool) -> anyhow::Result<Step> {
        self.handle_events(now, closing);
        if !closing {
            self.check_dead(now);
            if self.redial.at.is_some_and(|t| now >= t) {
                self.redial(now)?;
                return Ok(Step::Again);
            }
        }
        self.flush(now);
        Ok(Step::Wait)
    }

    fn drained(&self) -> bool {
        self.conn.is_closed()
    }

    fn deadline(&self) -> Option<Instant> {
        let waiting = self.paths.iter().filter(|p| p.usable && p.id.is_none());
        let next_try = waiting.map(|p| p.next_try).min();
        let retire = self
            .paths
            .iter()
            .filter_map(|p| p.retiring.as_ref()?.due)
            .min();
        // A quiet spell after data is looked at every DEAD_CHECK, even
        // when no packet or core timer wakes the loop (`dead_peer`).
        let r = &self.redial;
        let dead_check = (r.at.is_none() && r.dead.watching()).then_some(r.next_dead_check);
        [
            Some(self.next_check),
            next_try,
            retire,
            self.redial.at,
            dead_check,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn tun_fd(&self) -> RawFd {
        self.tun.as_raw_fd()
    }

    fn tun_handoff_fd(&self) -> Option<RawFd> {
        Some(self.tun_reader.handoff_fd())
    }

    fn register(&mut self, poll: &mut PollSet) {
        self.i_nl = poll.add(self.watcher.as_raw_fd());
        self.i_sock = [usize::MAX; MAX_POLLED_PATHS];
        self.i_retiring = [usize::MAX; MAX_POLLED_PATHS];
        for (k, p) in self.paths.iter().enumerate().take(MAX_POLLED_PATHS) {
            if let Some(s) = &p.socket {
                self.i_sock[k] = poll.add(s.as_raw_fd());
            }
            if let Some(r) = &p.retiring {
                self.i_retiring[k] = poll.add(r.socket.as_raw_fd());
            }
        }
    }

    fn on_ready(&mut self, poll: &PollSet, now: Instant) {
        if poll.readable(self.i_nl) && self.watcher.drain() {
            self.next_check = now;
        }
        let (conn, stats) = (&mut self.conn, &mut self.stats);
        let (rx, rawbuf) = (&mut self.rx, &mut self.rawbuf);
        for (k, p) in self.paths.iter_mut().enumerate().take(MAX_POLLED_PATHS) {
            if let (true, Some(sock), Some(id)) =
                (poll.readable(self.i_sock[k]), &mut p.socket, p.id)
            {
                sock.drain(p.target, rx, rawbuf, stats, |now, data| {
                    conn.handle_datagram(now, id, data);
                });
            }
            if let (true, Some(r)) = (poll.readable(self.i_retiring[k]), &mut p.retiring) {
                let id = r.id;
                r.socket.drain(r.target, rx, rawbuf, stats, |now, data| {
                    conn.handle_datagram(now, id, data);
                });
            }
        }
    }

    /// What the standby thread read, then the TUN, up to
    /// [`TUN_PKTS_PER_WAKE`] packets per wake-up.
    fn handle_tun(&mut self, now: Instant, buf: &mut [u8], seg: &mut [u8]) {
        let (conn, stats) = (&mut self.conn, &mut self.stats);
        let offload = self.tun.offload();
        let mut send = |stats: &mut DaemonStats, pkt: &[u8]| {
            if super::inner_dst(pkt).is_none() {
                stats.tun_rx_malformed += 1;
            } else if conn.send(now, pkt).is_err() {
                stats.send_rejected += 1;
            }
        };
        // As `drain_tun` reads: BATCH frames, TUN_PKTS_PER_WAKE packets.
        let budget = Budget {
            frames: BATCH,
            pkts: TUN_PKTS_PER_WAKE,
        };
        self.tun_reader.take(budget, buf, |frame| {
            super::take_tun_frame(offload, frame, seg, stats, &mut send)
        });
        self.stats.tun_rx_late_frames = self.tun_reader.standby_counts().0;
    }

    fn close(&mut self, now: Instant) {
        // Closing: no more probes or verdicts (nor wake-ups for them).
        self.redial.dead.reset();
        self.conn.close(now);
    }

    fn status(&self) -> StatusDoc {
        self.status_doc()
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
