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
        }
    }

    /// Brings paths up and down to match their interfaces.
    pub(super) fn manage_paths(&mut self, now: Instant) {
        let conn = &self.conn;
        self.path_names.retain(|id, _| conn.has_path(*id));
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
        let local_ip = p.source.or(match p.remote.ip() {
            IpAddr::V4(_) => st.ipv4.map(IpAddr::V4),
            IpAddr::V6(_) => st.ipv6.map(IpAddr::V6),
        });
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

    /// Opens the path's socket and adds its subflow to the connection.
    fn join(&mut self, now: Instant, p: &mut PathRt, local_ip: Option<IpAddr>, first: bool) {
        let opened = PathLink::open(
            p.transport,
            &p.iface,
            local_ip,
            p.remote,
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
                info!(path = %p.name, %id, local = %sock.local_addr(), remote = %p.remote, first, "path joining");
                self.stats.joins_started += 1;
                self.path_names.insert(id, (p.name.clone(), p.remote));
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
