//! A server worker's view of the others (`workers = N`, `workers.rs`):
//! the mailboxes that carry packets to the worker owning their connection
//! and the shared ownership tables.
//!
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

use mpdccp_proto::auth::{PeerId, PeerTable};
use mpdccp_proto::conn::{ConnectionHandle, Endpoint, Incoming, PacketType, WireProfile};
use mpdccp_proto::Instant;

use super::routes::LearnedRoutes;
use super::status::StatusHead;
use super::status_doc::StatusDoc;
use super::transport::Peer;
use super::{DaemonStats, TunMtuPolicy};
use crate::tun::Tun;

/// Handed-over packets waiting per worker; beyond, new ones are dropped.
const MAILBOX: usize = 4096;
/// Join remotes held for other workers, per worker of the server.
const REMOTES_PER_WORKER: usize = 16_384;

/// A packet for the worker that owns its connection.
pub(super) enum Handoff {
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
pub(super) enum Control {
    Status(SyncSender<StatusDoc>),
    Close,
}

/// A non-blocking eventfd: a worker's "you have mail".
pub(super) struct Wake(OwnedFd);

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
    pub(super) fn ring(&self) {
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

pub(super) struct Mailbox {
    packets: SyncSender<Handoff>,
    pub(super) control: Sender<Control>,
    pub(super) wake: Arc<Wake>,
}

/// What the workers share: mailboxes and the ownership tables.
pub(super) struct Shared {
    pub(super) mail: Vec<Mailbox>,
    remotes: RwLock<HashMap<Peer, usize>>,
    /// `remotes.len()`, read without the lock (usually 0: single-path clients).
    remotes_len: AtomicUsize,
    tokens: RwLock<HashMap<u32, usize>>,
    inner: RwLock<HashMap<IpAddr, usize>>,
    peers: RwLock<HashMap<PeerId, usize>>,
    /// Connections per worker (the single-client fallback route needs all).
    conns: Vec<AtomicUsize>,
    /// Each worker's smallest PLPMTU and the TUN MTU in force.
    pub(super) mtu: Mutex<(Vec<Option<u32>>, u32)>,
    wire_profile: WireProfile,
    max_clients: usize,
}

/// One worker's view of the others (`serve.rs`'s `Workers::Shard`).
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
    /// nobody's yet: a new connection stays here). `ep`: our endpoint;
    /// `rx` keeps what was parsed here for it.
    pub(super) fn steer_datagram(
        &mut self,
        stats: &mut DaemonStats,
        peer: &Peer,
        rx: &mut Incoming<'_>,
        ep: &Endpoint<Peer>,
    ) -> bool {
        let data = rx.data();
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
            if self.shared.mail.len() < 2 || ep.claims_rebinding(rx) {
                return false;
            }
            return self.pass_stray(stats, *peer, data.to_vec(), 1);
        }
        let Some(join) = self.join_token(rx) else {
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
    fn join_token(&self, rx: &mut Incoming<'_>) -> Option<u32> {
        let seg = rx.parse(self.shared.wire_profile).ok()?;
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

    /// Names this worker in its status document's head.
    pub(super) fn status_extra(&self, head: &mut StatusHead) {
        head.worker = Some(self.id as u64);
        head.mailbox_capacity = Some(MAILBOX as u64);
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// What the main thread asked a worker since its last wake-up.
pub(super) struct Requests {
    pub close: bool,
    pub status: Vec<SyncSender<StatusDoc>>,
}

/// The shared tables and every worker's [`Shard`], for `n` workers.
pub(super) fn group(
    n: usize,
    wire_profile: WireProfile,
    max_clients: usize,
    tun_mtu: u32,
) -> io::Result<(Arc<Shared>, Vec<Shard>)> {
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
        mtu: Mutex::new((vec![None; n], tun_mtu)),
        wire_profile,
        max_clients,
    });
    let shards = inboxes
        .into_iter()
        .enumerate()
        .map(|(id, (packets, control, wake))| Shard {
            id,
            shared: shared.clone(),
            packets,
            control,
            wake,
            to_wake: vec![false; n],
            tokens: HashMap::new(),
            joined: HashMap::new(),
            published: HashSet::new(),
        })
        .collect();
    Ok((shared, shards))
}

impl Shared {
    /// Asks every worker to close.
    pub(super) fn close_all(&self) {
        for m in &self.mail {
            let _ = m.control.send(Control::Close);
            m.wake.ring();
        }
    }
}

impl Shard {
    /// Takes the main thread's requests and what other workers handed
    /// over, at most one mailbox's worth per wake-up (the rest rings
    /// again): datagrams go to `ep` (a stray one is passed on unless `ep`
    /// claims it), packets from another worker's TUN queue to `inner`.
    pub(super) fn take_mail(
        &mut self,
        ep: &mut Endpoint<Peer>,
        stats: &mut DaemonStats,
        now: Instant,
        mut inner: impl FnMut(&mut Endpoint<Peer>, &mut DaemonStats, &[u8]),
    ) -> Requests {
        self.wake.clear();
        let mut req = Requests {
            close: false,
            status: Vec::new(),
        };
        while let Ok(c) = self.control.try_recv() {
            match c {
                Control::Close => req.close = true,
                Control::Status(reply) => req.status.push(reply),
            }
        }
        let mut taken = 0;
        while taken < MAILBOX {
            let Ok(h) = self.packets.try_recv() else {
                break;
            };
            stats.handoffs_received += 1;
            taken += 1;
            match h {
                Handoff::Datagram { peer, data, stray } => {
                    self.take_datagram(ep, stats, now, peer, data, stray)
                }
                Handoff::Inner(pkt) => inner(ep, stats, &pkt),
            }
        }
        if taken == MAILBOX {
            self.wake.ring();
        }
        req
    }

    fn take_datagram(
        &mut self,
        ep: &mut Endpoint<Peer>,
        stats: &mut DaemonStats,
        now: Instant,
        peer: Peer,
        data: Vec<u8>,
        stray: Option<u8>,
    ) {
        let n = self.shared.mail.len();
        let mut rx = Incoming::new(&data);
        if let Some(hops) = stray.filter(|&k| usize::from(k) + 1 < n) {
            let ours = ep.route(&peer).is_some() || ep.claims_rebinding(&mut rx);
            if !ours {
                self.pass_stray(stats, peer, data, hops + 1);
                return;
            }
        }
        match ep.handle_incoming(now, peer, None, &mut rx) {
            Some(c) => {
                let j = self.joined.entry(c).or_default();
                if !j.contains(&peer) {
                    j.push(peer);
                }
                // A moved path, now ours: its next datagrams come straight
                // here from the worker they reach.
                if stray.is_some() && ep.route(&peer).is_some() {
                    let mut t = write(&self.shared.remotes);
                    if t.len() < REMOTES_PER_WORKER * n {
                        t.insert(peer, self.id);
                    }
                    self.shared.remotes_len.store(t.len(), Ordering::Relaxed);
                }
            }
            // A refused join: its remote is nobody's.
            None if ep.route(&peer).is_none() => {
                let mut t = write(&self.shared.remotes);
                if t.get(&peer) == Some(&self.id) {
                    t.remove(&peer);
                }
                self.shared.remotes_len.store(t.len(), Ordering::Relaxed);
            }
            None => {}
        }
    }
}
