//! `workers = N` (issue #14): the server as N packet threads.
//!
//! Each worker is the single-threaded server loop (`server::serve`) with its
//! own `Endpoint`, its own UDP socket on the listen address (one
//! `SO_REUSEPORT` group) and its own queue of the TUN (`IFF_MULTI_QUEUE`).
//! The main thread keeps the signals and the ops socket and asks the workers
//! for their status over a channel.
//!
//! Steering: the group's classic-BPF program spreads datagrams over the
//! sockets by source address and port, and the TUN hands a flow's packets
//! to the queue that last wrote that flow; so a path's datagrams always
//! reach one worker, and downstream packets of a flow the client started
//! reach its owner. What reaches another worker is handed to the owner: a
//! bounded channel per worker (full: dropped, `handoff_dropped`) and an
//! eventfd in its poll set. Ownership is decided by whoever saw a thing
//! first, in rarely-written shared tables:
//! - a new connection stays with the worker its Request reached;
//! - its join token → that worker (written at `Connected`);
//! - a join's remote → the token's owner, written by the worker that hands
//!   the join over *before* it does, so that worker sends every later
//!   datagram of the path the same way (no race with the owner);
//! - inner addresses (open mode) and peers (authenticated) → the worker
//!   whose connection learned / holds them, for packets from the TUN;
//! - a non-Request from a remote nobody routed (a NAT rebinding) goes
//!   from worker to worker until an endpoint claims it
//!   (`Endpoint::claims_rebinding`); the last one answers it; the claimer
//!   then routes the new remote to itself.
//!
//! Limits: `max_clients` is checked over all workers before a Request
//! reaches an endpoint (workers accepting at the same instant may pass it
//! by a few); each endpoint gets `open_half_open / N` (rounded up); the
//! authenticated gate and its rate limits are per worker (a source address
//! and port always reaches one worker, so it meets one gate).

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use mpdccp_proto::auth::{PeerId, PeerTable};
use mpdccp_proto::conn::codec::Segment;
use mpdccp_proto::conn::{ConnectionConfig, ConnectionHandle, Endpoint, PacketType, WireProfile};
use mpdccp_proto::Instant;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::config::ServerConfig;
use super::ops::OpsServer;
use super::routes::LearnedRoutes;
use super::server::{route_inner, serve, Io, Peer, Server};
use super::status_doc::StatusDoc;
use super::{DaemonStats, PollSet, SignalPipe, TunMtuPolicy};
use crate::tun::Tun;
use crate::udp::{PathSocket, PathSocketConfig};
use status::status;

mod status;

/// Handed-over packets waiting per worker; beyond, new ones are dropped.
const MAILBOX: usize = 4096;
/// Join remotes held for other workers, per worker of the server.
const REMOTES_PER_WORKER: usize = 16_384;

/// A packet for the worker that owns its connection.
enum Handoff {
    /// `stray`: from a remote no worker had routed, not a Request (a path
    /// that moved, NAT rebinding): the workers it has visited; each passes
    /// it on unless its endpoint claims it, the last one answers it.
    Datagram {
        peer: Peer,
        data: Vec<u8>,
        stray: Option<u8>,
    },
    Inner(Vec<u8>),
}

/// From the main thread.
enum Control {
    Status(SyncSender<StatusDoc>),
    Close,
}

/// A non-blocking eventfd: a worker's "you have mail".
struct Wake(OwnedFd);

impl Wake {
    fn new() -> io::Result<Wake> {
        // SAFETY: plain flags; the fd is checked and owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd we own.
        Ok(Wake(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 readable bytes; a full counter (EAGAIN) is still readable.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
    fn clear(&self) {
        let mut b = [0u8; 8];
        // SAFETY: 8 writable bytes; non-blocking.
        unsafe { libc::read(self.0.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    }
}

struct Mailbox {
    packets: SyncSender<Handoff>,
    control: Sender<Control>,
    wake: Arc<Wake>,
}

/// What the workers share: mailboxes and the ownership tables.
struct Shared {
    mail: Vec<Mailbox>,
    remotes: RwLock<HashMap<Peer, usize>>,
    /// `remotes.len()`, read without the lock (usually 0: single-path clients).
    remotes_len: AtomicUsize,
    tokens: RwLock<HashMap<u32, usize>>,
    inner: RwLock<HashMap<IpAddr, usize>>,
    peers: RwLock<HashMap<PeerId, usize>>,
    /// Connections per worker (the single-client fallback route needs all).
    conns: Vec<AtomicUsize>,
    /// Each worker's smallest PLPMTU and the TUN MTU in force.
    mtu: Mutex<(Vec<Option<u32>>, u32)>,
    wire_profile: WireProfile,
    max_clients: usize,
}

/// One worker's view of the others (in `Server::shard`).
pub(super) struct Shard {
    id: usize,
    shared: Arc<Shared>,
    packets: Receiver<Handoff>,
    control: Receiver<Control>,
    wake: Arc<Wake>,
    /// Workers handed something since the last `wake_owners`.
    to_wake: Vec<bool>,
    tokens: HashMap<ConnectionHandle, u32>,
    /// Remotes of joins other workers handed to us, per connection.
    joined: HashMap<ConnectionHandle, Vec<Peer>>,
    /// Inner addresses this worker entered in `Shared::inner`.
    published: HashSet<IpAddr>,
}

impl Shard {
    pub(super) fn wake_fd(&self) -> RawFd {
        self.wake.0.as_raw_fd()
    }

    /// One eventfd write per owner per loop iteration, not per packet.
    pub(super) fn wake_owners(&mut self) {
        for (w, flag) in self.to_wake.iter_mut().enumerate() {
            if std::mem::take(flag) {
                self.shared.mail[w].wake.ring();
            }
        }
    }

    /// `false`: the owner's mailbox was full (or gone), dropped.
    fn hand(&mut self, stats: &mut DaemonStats, to: usize, h: Handoff) -> bool {
        match self.shared.mail[to].packets.try_send(h) {
            Ok(()) => {
                stats.handoffs += 1;
                self.to_wake[to] = true;
                true
            }
            // Never block nor grow on network input: drop and count.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                stats.handoff_dropped += 1;
                false
            }
        }
    }

    /// Hands a datagram to the worker owning its path; `false`: ours (or
    /// nobody's yet: a new connection stays here). `ep`: our endpoint.
    pub(super) fn steer_datagram(
        &mut self,
        stats: &mut DaemonStats,
        peer: &Peer,
        data: &[u8],
        ep: &Endpoint<Peer>,
    ) -> bool {
        if self.shared.remotes_len.load(Ordering::Relaxed) > 0 {
            let owner = read(&self.shared.remotes).get(peer).copied();
            if let Some(w) = owner {
                if w != self.id {
                    self.hand(
                        stats,
                        w,
                        Handoff::Datagram {
                            peer: *peer,
                            data: data.to_vec(),
                            stray: None,
                        },
                    );
                }
                return w != self.id;
            }
        }
        let request = mpdccp_proto::wire::Packet::new_checked(data)
            .is_ok_and(|p| p.packet_type() == PacketType::Request);
        if ep.route(peer).is_some() {
            return false;
        }
        if !request {
            // A path of ours that moved is claimed here; else the others ask.
            if self.shared.mail.len() < 2 || ep.claims_rebinding(data) {
                return false;
            }
            return self.pass_stray(stats, *peer, data.to_vec(), 1);
        }
        let Some(join) = self.join_token(data) else {
            return self.over_max_clients(stats);
        };
        let owner = read(&self.shared.tokens).get(&join).copied();
        let Some(w) = owner.filter(|&w| w != self.id) else {
            // Ours, or no connection's: our endpoint answers.
            return false;
        };
        let mut t = write(&self.shared.remotes);
        if t.len() >= REMOTES_PER_WORKER * self.shared.mail.len() {
            stats.handoff_dropped += 1;
            return true;
        }
        // Before the handoff: the path's later datagrams follow it.
        t.insert(*peer, w);
        self.shared.remotes_len.store(t.len(), Ordering::Relaxed);
        drop(t);
        let handed = Handoff::Datagram {
            peer: *peer,
            data: data.to_vec(),
            stray: None,
        };
        if !self.hand(stats, w, handed) {
            // Dropped: the owner will not learn of this remote, so nobody
            // would remove it; the client's retransmitted Request retries.
            let mut t = write(&self.shared.remotes);
            if t.get(peer) == Some(&w) {
                t.remove(peer);
            }
            self.shared.remotes_len.store(t.len(), Ordering::Relaxed);
        }
        true
    }

    /// Passes a stray datagram to the next worker; `hops`: workers that
    /// have seen it. Dropped (and counted) when that worker's queue is full.
    fn pass_stray(&mut self, stats: &mut DaemonStats, peer: Peer, data: Vec<u8>, hops: u8) -> bool {
        let next = (self.id + 1) % self.shared.mail.len();
        let h = Handoff::Datagram {
            peer,
            data,
            stray: Some(hops),
        };
        self.hand(stats, next, h);
        true
    }

    /// `max_clients` over all workers (each endpoint's own bound is the
    /// whole): a new connection's Request beyond it is dropped and counted
    /// (the client retries). A Request let through counts at once (the
    /// loop's recount corrects it), so workers accepting at the same
    /// instant pass the bound by `workers - 1` at most.
    fn over_max_clients(&self, stats: &mut DaemonStats) -> bool {
        if self.total_connections() >= self.shared.max_clients {
            stats.refused_max_clients += 1;
            return true;
        }
        self.shared.conns[self.id].fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The token a Request's MP_JOIN names, if it has one.
    fn join_token(&self, data: &[u8]) -> Option<u32> {
        let seg = Segment::parse_in(data, None, self.shared.wire_profile).ok()?;
        Some(seg.mp.join?.token)
    }

    /// Hands a TUN packet with no local route to the worker owning `dst`.
    pub(super) fn steer_inner(
        &mut self,
        stats: &mut DaemonStats,
        dst: IpAddr,
        peers: Option<&PeerTable>,
        pkt: &[u8],
    ) -> bool {
        let owner = match peers {
            Some(t) => t
                .route(dst)
                .and_then(|p| read(&self.shared.peers).get(&p).copied()),
            None => read(&self.shared.inner).get(&dst).copied().or_else(|| {
                // The server's only client, wherever it is.
                let c = &self.shared.conns;
                let total: usize = c.iter().map(|n| n.load(Ordering::Relaxed)).sum();
                (total == 1).then(|| c.iter().position(|n| n.load(Ordering::Relaxed) == 1))?
            }),
        };
        match owner {
            Some(w) if w != self.id => {
                self.hand(stats, w, Handoff::Inner(pkt.to_vec()));
                true
            }
            _ => false,
        }
    }

    pub(super) fn total_connections(&self) -> usize {
        self.shared
            .conns
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum()
    }

    pub(super) fn set_connections(&self, n: usize) {
        self.shared.conns[self.id].store(n, Ordering::Relaxed);
    }

    /// Open mode: `src` was learned by one of our connections. The first
    /// worker to claim an address keeps it until its connections forget it.
    pub(super) fn learned(&mut self, src: IpAddr) {
        if self.published.contains(&src) {
            return;
        }
        if *write(&self.shared.inner).entry(src).or_insert(self.id) == self.id {
            self.published.insert(src);
        }
    }

    pub(super) fn connected(
        &mut self,
        h: ConnectionHandle,
        token: Option<u32>,
        peer: Option<PeerId>,
    ) {
        if let Some(t) = token {
            write(&self.shared.tokens).insert(t, self.id);
            self.tokens.insert(h, t);
        }
        if let Some(p) = peer {
            // A peer's newest connection takes its routes, as `PeerRoutes`.
            write(&self.shared.peers).insert(p, self.id);
        }
    }

    /// Removes what connection `h` owned from the shared tables.
    pub(super) fn closed(&mut self, h: ConnectionHandle, owners: &LearnedRoutes) {
        let id = self.id;
        if let Some(t) = self.tokens.remove(&h) {
            let mut tokens = write(&self.shared.tokens);
            if tokens.get(&t) == Some(&id) {
                tokens.remove(&t);
            }
        }
        if let Some(remotes) = self.joined.remove(&h) {
            let mut t = write(&self.shared.remotes);
            for r in remotes {
                if t.get(&r) == Some(&id) {
                    t.remove(&r);
                }
            }
            self.shared.remotes_len.store(t.len(), Ordering::Relaxed);
        }
        let gone: Vec<IpAddr> = self
            .published
            .iter()
            .copied()
            .filter(|a| owners.owner(*a).is_none())
            .collect();
        if !gone.is_empty() {
            let mut t = write(&self.shared.inner);
            for a in gone {
                self.published.remove(&a);
                t.remove(&a);
            }
        }
        // A peer's entry stays: the next connection of the peer overwrites it.
    }

    /// The TUN is one device: its MTU follows the smallest PLPMTU over all
    /// workers' connections.
    pub(super) fn follow_plpmtu(
        &self,
        tun: &Tun,
        policy: &TunMtuPolicy,
        min: Option<u32>,
        cause: &str,
    ) -> u32 {
        let mut m = self.shared.mtu.lock().unwrap_or_else(|e| e.into_inner());
        m.0[self.id] = min;
        let all = m.0.iter().flatten().copied().min();
        m.1 = super::follow_plpmtu(tun, policy, m.1, all, cause);
        m.1
    }

    /// This worker's index and the number of workers.
    pub(super) fn position(&self) -> (usize, usize) {
        (self.id, self.shared.mail.len())
    }

    /// This worker's fields in its status document's head.
    pub(super) fn status_extra(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("worker".into(), json!(self.id));
        m.insert("mailbox_capacity".into(), json!(MAILBOX));
        m
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl Server {
    /// Takes what other workers handed over and the main thread's requests;
    /// `true`: close.
    pub(super) fn take_handoffs(&mut self, now: Instant) -> bool {
        let Some(sh) = self.shard.as_mut() else {
            return false;
        };
        sh.wake.clear();
        let mut close = false;
        let mut status = Vec::new();
        while let Ok(c) = sh.control.try_recv() {
            match c {
                Control::Close => close = true,
                Control::Status(reply) => status.push(reply),
            }
        }
        // At most one mailbox's worth per wake-up: the rest rings again.
        let mut taken = 0;
        for _ in 0..MAILBOX {
            let Some(sh) = self.shard.as_mut() else { break };
            let Ok(h) = sh.packets.try_recv() else { break };
            self.stats.handoffs_received += 1;
            taken += 1;
            match h {
                Handoff::Datagram { peer, data, stray } => {
                    let n = sh.shared.mail.len();
                    if let Some(hops) = stray.filter(|&k| usize::from(k) + 1 < n) {
                        let ours =
                            self.ep.route(&peer).is_some() || self.ep.claims_rebinding(&data);
                        if !ours {
                            sh.pass_stray(&mut self.stats, peer, data, hops + 1);
                            continue;
                        }
                    }
                    let routed = self.ep.handle_datagram(now, peer, &data);
                    let sh = self.shard.as_mut().expect("checked");
                    match routed {
                        Some(c) => {
                            let j = sh.joined.entry(c).or_default();
                            if !j.contains(&peer) {
                                j.push(peer);
                            }
                            // A moved path, now ours: its next datagrams
                            // come straight here from the worker they reach.
                            let routed_here = self.ep.route(&peer).is_some();
                            if stray.is_some() && routed_here {
                                let mut t = write(&sh.shared.remotes);
                                if t.len() < REMOTES_PER_WORKER * n {
                                    t.insert(peer, sh.id);
                                }
                                sh.shared.remotes_len.store(t.len(), Ordering::Relaxed);
                            }
                        }
                        // A refused join: its remote is nobody's.
                        None if self.ep.route(&peer).is_none() => {
                            let mut t = write(&sh.shared.remotes);
                            if t.get(&peer) == Some(&sh.id) {
                                t.remove(&peer);
                            }
                            sh.shared.remotes_len.store(t.len(), Ordering::Relaxed);
                        }
                        None => {}
                    }
                }
                Handoff::Inner(pkt) => {
                    let (ep, owners, peers) = (&mut self.ep, &self.owners, &mut self.peer_routes);
                    route_inner(ep, owners, peers, None, &mut self.stats, now, &pkt);
                }
            }
        }
        if let (Some(sh), true) = (self.shard.as_ref(), taken == MAILBOX) {
            sh.wake.ring();
        }
        for reply in status {
            let _ = reply.try_send(self.status());
        }
        close
    }
}

/// Binds the listening socket(s). With `n > 1`: first an exclusive bind
/// (no `SO_REUSEPORT`) as a probe, so a port another server holds — alone
/// or as a group of its own — fails here with `cannot bind udp ADDR` as it
/// does for one worker; then, the probe closed, `n` sockets in one
/// `SO_REUSEPORT` group, and the group's steering program, which only ever
/// picks one of these `n`: a socket that joins later (the kernel admits
/// only the same effective UID) receives nothing unless it replaces the
/// program (docs/SECURITY.md §7).
pub(super) fn bind_listeners(config: &ServerConfig, n: usize) -> anyhow::Result<Vec<PathSocket>> {
    let mut cfg = PathSocketConfig {
        device: None,
        local: Some(config.listen),
        buffer_bytes: config.tunnel.socket_buffer_bytes,
    };
    let probe = PathSocket::bind(&cfg, config.listen)?;
    if n == 1 {
        return Ok(vec![probe]);
    }
    // Port 0: the group takes the port the probe was given.
    cfg.local = Some(probe.local_addr());
    drop(probe);
    let mut socks = Vec::with_capacity(n);
    for _ in 0..n {
        socks.push(PathSocket::bind_reuseport(&cfg, config.listen)?);
    }
    crate::sockopt::attach_reuseport_steering(&socks[0], n as u32)
        .map_err(|e| anyhow::anyhow!("udp {}: reuseport steering program: {e}", config.listen))?;
    Ok(socks)
}

/// What `server::run` prepared for the workers.
pub(super) struct Setup {
    pub conn_cfg: ConnectionConfig,
    pub socks: Vec<PathSocket>,
    pub tuns: Vec<Tun>,
    pub mtu_policy: TunMtuPolicy,
}

/// Starts the workers and serves signals and the ops socket until closed.
pub(super) fn run(
    config: &ServerConfig,
    setup: Setup,
    ops: &OpsServer,
    signals: &SignalPipe,
) -> anyhow::Result<()> {
    let n = setup.socks.len();
    let mut mail = Vec::with_capacity(n);
    let mut inboxes = Vec::with_capacity(n);
    for _ in 0..n {
        let (ptx, prx) = mpsc::sync_channel(MAILBOX);
        let (ctx, crx) = mpsc::channel();
        let wake = Arc::new(Wake::new()?);
        mail.push(Mailbox {
            packets: ptx,
            control: ctx,
            wake: wake.clone(),
        });
        inboxes.push((prx, crx, wake));
    }
    let shared = Arc::new(Shared {
        mail,
        remotes: RwLock::default(),
        remotes_len: AtomicUsize::new(0),
        tokens: RwLock::default(),
        inner: RwLock::default(),
        peers: RwLock::default(),
        conns: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        mtu: Mutex::new((vec![None; n], setup.mtu_policy.tun_mtu(None))),
        wire_profile: setup.conn_cfg.wire_profile,
        max_clients: config.max_clients,
    });
    let started = crate::clock::now();
    let mut threads = Vec::with_capacity(n);
    let parts = setup.socks.into_iter().zip(setup.tuns).zip(inboxes);
    for (id, ((sock, tun), (packets, control, wake))) in parts.enumerate() {
        let (ep, peer_routes) = super::server::endpoint(config, setup.conn_cfg.clone(), n)?;
        let shard = Shard {
            id,
            shared: shared.clone(),
            packets,
            control,
            wake,
            to_wake: vec![false; n],
            tokens: HashMap::new(),
            joined: HashMap::new(),
            published: HashSet::new(),
        };
        let mut s = Server::new(config, ep, peer_routes, tun, setup.mtu_policy, Some(shard));
        let t = std::thread::Builder::new()
            .name(format!("mpdccp-w{id}"))
            .spawn(move || {
                let io = Io {
                    sock: &sock,
                    raw: Vec::new(),
                    udccp: None,
                    signals: None,
                    ops: None,
                };
                serve(&mut s, io)
            })?;
        threads.push(t);
    }
    info!(workers = n, "server workers started");
    let close_all = || {
        for m in &shared.mail {
            let _ = m.control.send(Control::Close);
            m.wake.ring();
        }
    };
    let mut closing = false;
    let mut poll = PollSet::with_capacity(2);
    loop {
        if threads.iter().all(|t| t.is_finished()) {
            break;
        }
        if !closing && threads.iter().any(|t| t.is_finished()) {
            warn!("a server worker stopped: closing the others");
            close_all();
            closing = true;
        }
        poll.clear();
        let i_sig = poll.add(signals.as_raw_fd());
        let i_ops = poll.add(ops.wake_fd());
        let now = crate::clock::now();
        poll.wait(now, Some(now + Duration::from_millis(200)))?;
        if poll.readable(i_sig) && signals.take() && !closing {
            info!("signal: closing all connections gracefully (MP_CLOSE)");
            super::notify::stopping();
            close_all();
            closing = true;
        }
        if poll.readable(i_ops) {
            let status = || status(&shared, started);
            if ops.handle_requests(&status) && !closing {
                close_all();
                closing = true;
            }
        }
    }
    let mut first_err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow::anyhow!("a server worker panicked"));
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}
