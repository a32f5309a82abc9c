//! The client's path manager (the rules: `client.rs`): each configured
//! access network, its socket and its subflow, following the interface.

use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;

use mpdccp_proto::conn::PathConfig;
use mpdccp_proto::{Instant, PathId, PathState};
use tracing::{debug, info, warn};

use super::super::config::Transport;
use super::super::iface::iface_state;
use super::super::transport::PathLink;
use super::Client;
use crate::udp::SendBatch;

const MAX_BACKOFF: Duration = Duration::from_secs(30);

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
}

impl PathRt {
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
}

impl Client {
    pub(super) fn path_established(&mut self, id: PathId) {
        if let Some(p) = self.paths.iter_mut().find(|p| p.id == Some(id)) {
            info!(path = %p.name, %id, "path established");
            p.established = true;
            p.backoff = self.base_backoff;
            self.stats.path_up_events += 1;
            if self.fleet.follow {
                // The path manager's next turn may move the first subflow.
                self.next_check = Instant::ZERO;
            }
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
            // If the core closed the subflow (a Reset, maybe forged, issue
            // #28), `rejoin_if_closed` rejoins at the path manager's next
            // turn: run it now, not at the next `RECHECK` (up to 1 s).
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
            // forged one, issue #28): rejoin at once; a join that fails
            // from here backs off as before.
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

    /// With `join_advertised_address`: once a join to the advertised
    /// address is established, every subflow still at the anycast service
    /// address is moved there too — taken down (MP_REMOVEADDR to the
    /// server) and rejoined at once. Left on the service address, it would
    /// follow the routers' ECMP hash, which moves flows when a host joins
    /// or leaves the fleet (hash-threshold, RFC 2992): it would land on a
    /// host that does not know it.
    fn rehome_subflows(&mut self, now: Instant) {
        let Some(adv) = self.fleet.advertised else {
            return;
        };
        let homed = |p: &PathRt| p.established && p.target.ip() == adv.ip();
        if !self.fleet.follow {
            return;
        }
        // With no subflow at the advertised address yet (a join gave up
        // waiting for the MP_ADDADDR and the hash happened to reach the
        // owner), one stays up while the others move; the last follows
        // once one of them is established there.
        let mut keep_one = !self.paths.iter().any(homed);
        for p in &mut self.paths {
            let Some(id) = p.id else { continue };
            if p.established && p.target.ip() != adv.ip() {
                if std::mem::take(&mut keep_one) {
                    continue;
                }
                info!(path = %p.name, %id, from = %p.target, to = %adv.ip(), "moving a subflow from the service address to the advertised one");
                self.conn.set_path_down(now, id);
                p.detach();
                p.next_try = now;
            }
        }
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
