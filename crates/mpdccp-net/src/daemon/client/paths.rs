//! The client's path manager (the rules: `client.rs`): each configured
//! access network, its socket and its subflow, following the interface.

use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;

use mpdccp_proto::conn::{PathConfig, Transmit};
use mpdccp_proto::path::priority;
use mpdccp_proto::{Instant, PathId, PathState};
use tracing::{debug, info, warn};

use super::super::config::Transport;
use super::super::iface::iface_state;
use super::super::transport::PathLink;
use super::super::DaemonStats;
use super::Client;
use crate::udp::SendBatch;

const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a re-homed path's old subflow stays open, unused, after its
/// replacement is up: at least this, and at least [`RETIRE_GRACE_RTTS`]
/// of its smoothed RTT, so that the server hears the MP_PRIO 0 and what it
/// already sent there arrives before the subflow is closed. Its closing
/// handshake gets as long again.
const RETIRE_GRACE: Duration = Duration::from_millis(200);
const RETIRE_GRACE_RTTS: u32 = 4;

/// A path's subflow being replaced (make-before-break): it carries the
/// path's traffic while the path's new subflow joins elsewhere.
pub(super) struct Retiring {
    pub(super) id: PathId,
    pub(super) socket: PathLink,
    pub(super) target: SocketAddr,
    pub(super) batch: SendBatch,
    /// Set once the replacement is established (the subflow is then
    /// unused, MP_PRIO 0): when to close it, then when to forget it.
    pub(super) due: Option<Instant>,
    pub(super) grace: Duration,
    /// Its DCCP-Close handshake has begun.
    pub(super) closing: bool,
}

/// One configured access network and its subflow.
pub(super) struct PathRt {
    pub(super) name: String,
    pub(super) iface: String,
    pub(super) remote: SocketAddr,
    /// Where the current subflow goes: `remote`, or for a join the
    /// address the server advertised (`join_advertised_address`).
    pub(super) target: SocketAddr,
    pub(super) source: Option<IpAddr>,
    pub(super) priority: u8,
    pub(super) transport: Transport,
    /// Interface usable (up, with an address of the server's family).
    pub(super) usable: bool,
    pub(super) socket: Option<PathLink>,
    pub(super) batch: SendBatch,
    /// Subflow in the core, while joined.
    pub(super) id: Option<PathId>,
    pub(super) established: bool,
    pub(super) next_try: Instant,
    pub(super) backoff: Duration,
    /// Subflows this path lost while established (the core closed them:
    /// expired, reset or withdrawn by the server) and rejoined.
    pub(super) lost: u64,
    /// The subflow this path's current one replaces, until it is closed.
    pub(super) retiring: Option<Retiring>,
}

impl PathRt {
    /// Room in this path's send batch for the core to write its next
    /// transmit into, when this is a plain UDP path (a transmit is queued
    /// there as the core wrote it; U-DCCP rewrites it, native DCCP sends
    /// at once). A full batch is sent first.
    pub(super) fn send_slot(&mut self, stats: &mut DaemonStats) -> Option<&mut [u8]> {
        let sock = self.socket.as_ref().and_then(|l| l.plain_udp())?;
        if self.batch.is_full() {
            super::super::flush_batch(sock, &mut self.batch, stats);
        }
        Some(self.batch.next_buf())
    }

    /// Queues the transmit `t` that the core wrote at
    /// [`send_slot`](Self::send_slot), for this path's current subflow.
    pub(super) fn commit_slot(&mut self, stats: &mut DaemonStats, t: &Transmit) {
        super::super::commit_transmit(&mut self.batch, stats, t.size, t.segment_size, self.target);
    }

    /// Tries again after the backoff, which doubles (up to 30 s).
    pub(super) fn retry_later(&mut self, now: Instant) {
        self.next_try = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Forgets the subflow and its socket.
    pub(super) fn detach(&mut self) {
        self.id = None;
        self.socket = None;
        self.established = false;
    }

    /// The socket, send batch and destination of subflow `id`, if it is
    /// this path's (current or retiring).
    pub(super) fn sender(&mut self, id: PathId) -> Option<(&PathLink, &mut SendBatch, SocketAddr)> {
        if self.id == Some(id) {
            let sock = self.socket.as_ref()?;
            return Some((sock, &mut self.batch, self.target));
        }
        let r = self.retiring.as_mut().filter(|r| r.id == id)?;
        Some((&r.socket, &mut r.batch, r.target))
    }

    /// Whether the retiring subflow's grace is over.
    pub(super) fn retire_due(&self, now: Instant) -> bool {
        self.retiring
            .as_ref()
            .and_then(|r| r.due)
            .is_some_and(|t| t <= now)
    }

    /// Keeps the established subflow as the retiring one and frees the
    /// path for a new subflow, joined at once.
    fn start_retiring(&mut self, now: Instant) {
        let (Some(id), Some(socket)) = (self.id.take(), self.socket.take()) else {
            return;
        };
        let batch = std::mem::replace(&mut self.batch, SendBatch::new(super::super::BATCH));
        self.retiring = Some(Retiring {
            id,
            socket,
            target: self.target,
            batch,
            due: None,
            grace: RETIRE_GRACE,
            closing: false,
        });
        self.established = false;
        self.next_try = now;
    }
}

impl Client {
    pub(super) fn path_established(&mut self, now: Instant, id: PathId) {
        let Some(p) = self.paths.iter_mut().find(|p| p.id == Some(id)) else {
            return;
        };
        info!(path = %p.name, %id, "path established");
        p.established = true;
        p.backoff = self.base_backoff;
        self.stats.path_up_events += 1;
        if let Some(r) = &mut p.retiring {
            // Make-before-break: the replacement is up, so the old
            // subflow takes no new packets at either end (MP_PRIO 0,
            // "do not use", RFC 9897 §3.2.9) and closes once what is in
            // flight on it has arrived.
            let srtt = self
                .conn
                .paths()
                .iter()
                .find(|v| v.id == r.id)
                .and_then(|v| v.srtt);
            r.grace = srtt.map_or(RETIRE_GRACE, |s| (s * RETIRE_GRACE_RTTS).max(RETIRE_GRACE));
            let grace = r.grace;
            info!(path = %p.name, old = %r.id, new = %id, from = %r.target, to = %p.target, ?grace, "re-homed: the old subflow is unused and closes after the grace");
            self.conn.set_priority(now, r.id, priority::UNUSED);
            r.due = Some(now + grace);
        }
        if self.fleet.follow {
            // The path manager's next turn may re-home subflows.
            self.next_check = Instant::ZERO;
        }
    }

    pub(super) fn path_failed(&mut self, now: Instant, id: PathId) {
        let Some(p) = self.paths.iter_mut().find(|p| p.id == Some(id)) else {
            return;
        };
        if !p.established && !self.conn.is_established() {
            // The first subflow's handshake: the connection closes with it
            // and reconnects (`closed`).
            debug!(path = %p.name, %id, "handshake failed");
            p.id = None;
            p.socket = None;
        } else if !p.established {
            // The join itself failed: retry later, with a longer wait.
            warn!(path = %p.name, %id, "join failed; retrying in {:?}", p.backoff);
            p.id = None;
            p.socket = None;
            p.retry_later(now);
        } else {
            warn!(path = %p.name, %id, "path failing");
            // If the core closed the subflow (a Reset, maybe one an on-path
            // attacker forged), `rejoin_if_closed` rejoins at the path
            // manager's next turn: run it now, not at the next `RECHECK`
            // (up to 1 s), so a forgery costs the path milliseconds.
            self.next_check = Instant::ZERO;
        }
    }

    /// Brings paths up and down to match their interfaces.
    pub(super) fn manage_paths(&mut self, now: Instant) {
        let conn = &self.conn;
        self.path_names.retain(|id, _| conn.has_path(*id));
        self.rehome_subflows(now);
        // Taken out for the loop (no allocation): each path changes the
        // connection and the stats.
        let mut paths = std::mem::take(&mut self.paths);
        for p in &mut paths {
            self.manage_path(now, p);
        }
        self.paths = paths;
    }

    fn manage_path(&mut self, now: Instant, p: &mut PathRt) {
        self.close_retiring(now, p);
        self.rejoin_if_closed(now, p);
        let st = iface_state(&p.iface);
        if !self.follow_interface(now, p, st.usable_for(p.remote.ip())) {
            return;
        }
        if !p.usable || p.id.is_some() || now < p.next_try {
            return;
        }
        // The first subflow (MP_KEY) may go on any path; joins need an established connection.
        let first = self.conn.paths().is_empty();
        if !first && !self.conn.is_established() {
            return;
        }
        let target = if first {
            p.remote
        } else {
            match self.join_target(now, p.remote) {
                Some(t) => t,
                None => {
                    // Until the server's MP_ADDADDR (or the wait's end).
                    p.next_try = self.fleet.wait_until.unwrap_or(now);
                    return;
                }
            }
        };
        let local_ip = p.source.or(match p.remote.ip() {
            IpAddr::V4(_) => st.ipv4.map(IpAddr::V4),
            IpAddr::V6(_) => st.ipv6.map(IpAddr::V6),
        });
        p.target = target;
        self.join(now, p, local_ip, first);
    }

    /// A subflow the core closed on its own (expired by
    /// `path_idle_timeout`, reset or withdrawn by the server) while the
    /// interface stays up: drop the socket and rejoin after a backoff, as
    /// for an interface that came back.
    fn rejoin_if_closed(&mut self, now: Instant, p: &mut PathRt) {
        let Some(id) = p.id else { return };
        let alive = self
            .conn
            .paths()
            .iter()
            .any(|v| v.id == id && v.state != PathState::Closed);
        if alive || self.conn.is_closed() {
            return;
        }
        info!(path = %p.name, %id, "subflow closed by the core; rejoining");
        self.conn.set_path_down(now, id);
        let was_established = p.established;
        p.detach();
        if was_established {
            p.lost += 1;
            p.backoff = self.base_backoff;
            // A path that worked was closed by the core (a Reset, maybe a
            // forged one): rejoin at once, so a forgery costs the path
            // milliseconds; a join that fails from here backs off as before.
            p.next_try = now;
            return;
        }
        p.retry_later(now);
    }

    /// Follows the interface going down or becoming usable; `false`: it
    /// just went down (nothing more to do for the path now).
    fn follow_interface(&mut self, now: Instant, p: &mut PathRt, usable: bool) -> bool {
        if p.usable && !usable {
            info!(path = %p.name, iface = %p.iface, "interface down: path marked down");
            self.stats.path_down_events += 1;
            if let Some(id) = p.id.take() {
                self.conn.set_path_down(now, id);
            }
            if let Some(r) = p.retiring.take() {
                self.conn.set_path_down(now, r.id);
            }
            p.detach();
            p.usable = false;
            p.backoff = self.base_backoff;
            return false;
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
        true
    }

    /// Where a join goes: with `join_advertised_address`, the address the
    /// server advertised (the port of the first subflow unless it named
    /// one, RFC 9897 §3.2.8), or `None` while it may still come.
    fn join_target(&mut self, now: Instant, remote: SocketAddr) -> Option<SocketAddr> {
        let f = &mut self.fleet;
        if !f.follow {
            return Some(remote);
        }
        let wait_until = *f.wait_until.get_or_insert(now + super::ADDRESS_WAIT);
        match f.advertised {
            Some(a) if a.port() == 0 => Some(SocketAddr::new(a.ip(), remote.port())),
            Some(a) => Some(a),
            None if now < wait_until => None,
            None => Some(remote),
        }
    }

    /// The server advertised an address (MP_ADDADDR, its MP_HMAC
    /// verified by the core): with `join_advertised_address` the first one
    /// is where joins go, and waiting paths try at once.
    pub(super) fn address_advertised(&mut self, now: Instant, addr: SocketAddr) {
        if !self.fleet.follow || self.fleet.advertised.is_some() {
            return;
        }
        info!(%addr, "server advertised its address: joins go there");
        self.fleet.advertised = Some(addr);
        for p in self.paths.iter_mut().filter(|p| p.id.is_none()) {
            p.next_try = p.next_try.min(now);
        }
        self.next_check = now;
    }

    /// With `join_advertised_address`: every established subflow still
    /// at the anycast service address is moved to the advertised one,
    /// make-before-break — its path opens a new subflow there (MP_JOIN,
    /// RFC 9897 §3.2.2) from the same interface, and the old one closes
    /// once the new one is up (`path_established`, `close_retiring`).
    /// This holds for a path alone as for several, so no subflow is ever
    /// taken down before its replacement carries traffic. Left on the
    /// service address, a subflow would follow the routers' ECMP hash,
    /// which moves flows when a host joins or leaves the fleet
    /// (hash-threshold, RFC 2992): it would land on a host that does not
    /// know it.
    fn rehome_subflows(&mut self, now: Instant) {
        let Some(adv) = self.fleet.advertised else {
            return;
        };
        if !self.fleet.follow {
            return;
        }
        for p in &mut self.paths {
            let Some(id) = p.id else { continue };
            if p.established && p.target.ip() != adv.ip() && p.retiring.is_none() {
                info!(path = %p.name, %id, from = %p.target, to = %adv.ip(), "re-homing a subflow from the service address to the advertised one (make-before-break)");
                p.start_retiring(now);
            }
        }
    }

    /// Ends the path's retiring subflow once its grace is over: a
    /// DCCP-Close exchange on it (RFC 9897 §3.2.8: a working subflow with
    /// a valid address MUST be closed so, not with MP_REMOVEADDR), its
    /// socket kept for one more grace to carry the handshake. Then it is
    /// forgotten; if the handshake has not ended by then, the server is
    /// told with MP_REMOVEADDR over the new subflow (`set_path_down`). A
    /// retiring subflow the core closed itself (expired, reset) is
    /// forgotten at once.
    fn close_retiring(&mut self, now: Instant, p: &mut PathRt) {
        let due = p.retire_due(now);
        let Some(r) = &mut p.retiring else { return };
        let id = r.id;
        let alive = || {
            self.conn
                .paths()
                .iter()
                .any(|v| v.id == id && v.state != PathState::Closed)
        };
        if !r.closing && !alive() {
            info!(path = %p.name, id = %r.id, "the re-homed path's old subflow closed by the core");
        } else if !due {
            return;
        } else if !r.closing {
            info!(path = %p.name, id = %r.id, remote = %r.target, "closing the re-homed path's old subflow (DCCP-Close)");
            self.conn.remove_path(now, r.id);
            r.closing = true;
            r.due = Some(now + r.grace);
            return;
        }
        let r = p.retiring.take().expect("checked");
        self.conn.set_path_down(now, r.id);
    }

    /// Opens the path's socket and adds its subflow to the connection.
    fn join(&mut self, now: Instant, p: &mut PathRt, local_ip: Option<IpAddr>, first: bool) {
        let opened = PathLink::open(
            p.transport,
            &p.iface,
            local_ip,
            p.target,
            self.sock_buf,
            self.offload,
        );
        let sock = match opened {
            Ok(s) => s,
            Err(e) => {
                warn!(path = %p.name, "cannot open socket: {e}");
                p.retry_later(now);
                return;
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
                info!(path = %p.name, %id, local = %sock.local_addr(), remote = %p.target, first, "path joining");
                self.stats.joins_started += 1;
                self.path_names.insert(id, (p.name.clone(), p.target));
                p.id = Some(id);
                p.socket = Some(sock);
                p.established = false;
            }
            Err(e) => {
                warn!(path = %p.name, "add_path: {e}");
                p.retry_later(now);
            }
        }
    }
}
