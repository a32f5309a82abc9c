//! Open mode's learned downstream routes: inner address → the client
//! connection that sent from it, bounded in total and per connection.
//!
//! * Per connection: at most `max_per_conn` addresses, so one client
//!   sending from 70 000 source addresses cannot fill the table and starve
//!   the next client (the total bound stays too).
//! * Sticky: an address another live connection sent from within
//!   `steal_after` is not moved, so two packets with a neighbour's source
//!   address no longer redirect the neighbour's downstream traffic. An
//!   owner that went quiet (a client that restarted) loses it after that.
//!
//! This is only damage control for the unauthenticated mode: the
//! authenticated mode routes by configured `allowed_ips` ([`PeerRoutes`],
//! docs/SECURITY.md §2).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use mpdccp_proto::auth::{PeerId, PeerTable, SourceVerdict};
use mpdccp_proto::conn::ConnectionHandle;
use mpdccp_proto::Instant;

/// Authenticated mode: inner addresses belong to the peers whose
/// `allowed_ips` cover them, nothing is learned from traffic. Upstream, a
/// packet whose source is not in its peer's prefixes is dropped before the
/// TUN; downstream, the destination's peer (longest prefix) gets it over
/// that peer's one connection.
#[derive(Debug)]
pub struct PeerRoutes {
    peers: PeerTable,
    conn_of: BTreeMap<PeerId, ConnectionHandle>,
    stats: PeerRouteStats,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PeerRouteStats {
    /// Upstream packets dropped: source outside the peer's `allowed_ips`.
    pub inner_source_refused: u64,
    /// Upstream packets dropped without a warning: a link-local or
    /// unspecified source outside `allowed_ips`, i.e. the client host's own
    /// chatter on its TUN (IPv6 DAD, router solicitations), not an attack.
    pub inner_link_local_dropped: u64,
    /// … of which the source belongs to another peer (spoofing a neighbour).
    pub inner_source_of_other_peer: u64,
    /// Downstream packets for a configured peer without a connection.
    pub peer_not_connected: u64,
    /// A peer's newer connection took over its routes.
    pub superseded: u64,
}

impl PeerRoutes {
    pub fn new(peers: PeerTable) -> PeerRoutes {
        PeerRoutes {
            peers,
            conn_of: BTreeMap::new(),
            stats: PeerRouteStats::default(),
        }
    }

    pub fn stats(&self) -> PeerRouteStats {
        self.stats
    }

    pub fn peers(&self) -> &PeerTable {
        &self.peers
    }

    /// Connection `h` of `peer` is established: it takes the peer's routes
    /// (a reconnecting peer supersedes its old connection).
    pub fn connected(&mut self, peer: PeerId, h: ConnectionHandle) {
        if self.conn_of.insert(peer, h).is_some_and(|old| old != h) {
            self.stats.superseded += 1;
        }
    }

    pub fn closed(&mut self, h: ConnectionHandle) {
        self.conn_of.retain(|_, c| *c != h);
    }

    /// May `peer` send from `src`? Counts the refusal.
    pub fn source_allowed(&mut self, peer: Option<PeerId>, src: IpAddr) -> bool {
        let verdict = peer.map(|p| self.peers.check_source(p, src));
        if verdict == Some(SourceVerdict::Allowed) {
            return true;
        }
        if is_link_local(src) {
            self.stats.inner_link_local_dropped += 1;
            return false;
        }
        self.stats.inner_source_refused += 1;
        if matches!(verdict, Some(SourceVerdict::OtherPeer(_))) {
            self.stats.inner_source_of_other_peer += 1;
        }
        false
    }

    /// The connection of the peer that owns `dst`.
    pub fn route(&mut self, dst: IpAddr) -> Option<ConnectionHandle> {
        let peer = self.peers.route(dst)?;
        let h = self.conn_of.get(&peer).copied();
        if h.is_none() {
            self.stats.peer_not_connected += 1;
        }
        h
    }
}

/// IPv6 link-local or unspecified, IPv4 link-local or unspecified: a
/// host's own link chatter.
pub(crate) fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(a) => a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80,
        IpAddr::V4(a) => a.is_link_local() || a.is_unspecified(),
    }
}

/// Default cap of learned addresses per connection.
pub const MAX_PER_CONNECTION: usize = 256;
/// How long an owner must be silent before another connection may take an address.
pub const STEAL_AFTER: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RouteStats {
    /// Addresses not learned: the table was full.
    pub refused_table_full: u64,
    /// Addresses not learned: the connection already owns its share.
    pub refused_connection_full: u64,
    /// Addresses not moved: another live connection owns them.
    pub refused_owned: u64,
    /// Addresses moved from a silent owner.
    pub moved: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learn {
    /// Already this connection's (refreshed) or newly learned.
    Ok,
    Moved,
    RefusedTableFull,
    RefusedConnectionFull,
    RefusedOwned,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    owner: ConnectionHandle,
    last_seen: Instant,
}

#[derive(Debug)]
pub struct LearnedRoutes {
    map: BTreeMap<IpAddr, Entry>,
    per_conn: BTreeMap<ConnectionHandle, usize>,
    max_total: usize,
    max_per_conn: usize,
    steal_after: Duration,
    stats: RouteStats,
}

impl LearnedRoutes {
    pub fn new(max_total: usize, max_per_conn: usize, steal_after: Duration) -> Self {
        LearnedRoutes {
            map: BTreeMap::new(),
            per_conn: BTreeMap::new(),
            max_total,
            max_per_conn,
            steal_after,
            stats: RouteStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn stats(&self) -> RouteStats {
        self.stats
    }

    pub fn owner(&self, dst: IpAddr) -> Option<ConnectionHandle> {
        self.map.get(&dst).map(|e| e.owner)
    }

    /// Connection `h` delivered a packet with inner source `src` at `now`.
    pub fn learn(&mut self, src: IpAddr, h: ConnectionHandle, now: Instant) -> Learn {
        let owned = self.per_conn.get(&h).copied().unwrap_or(0);
        let full = self.map.len() >= self.max_total;
        let verdict = match self.map.get_mut(&src) {
            Some(e) if e.owner == h => {
                e.last_seen = now;
                return Learn::Ok;
            }
            Some(e) if now.saturating_duration_since(e.last_seen) < self.steal_after => {
                Learn::RefusedOwned
            }
            _ if owned >= self.max_per_conn => Learn::RefusedConnectionFull,
            Some(_) => Learn::Moved,
            None if full => Learn::RefusedTableFull,
            None => Learn::Ok,
        };
        match verdict {
            Learn::RefusedOwned => self.stats.refused_owned += 1,
            Learn::RefusedConnectionFull => self.stats.refused_connection_full += 1,
            Learn::RefusedTableFull => self.stats.refused_table_full += 1,
            Learn::Moved | Learn::Ok => {
                let entry = Entry {
                    owner: h,
                    last_seen: now,
                };
                if let Some(old) = self.map.insert(src, entry) {
                    self.stats.moved += 1;
                    self.release(old.owner);
                }
                *self.per_conn.entry(h).or_insert(0) += 1;
            }
        }
        verdict
    }

    fn release(&mut self, h: ConnectionHandle) {
        if let Some(n) = self.per_conn.get_mut(&h) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_conn.remove(&h);
            }
        }
    }

    /// Connection `h` closed: its addresses are free.
    pub fn forget(&mut self, h: ConnectionHandle) {
        self.map.retain(|_, e| e.owner != h);
        self.per_conn.remove(&h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(i: u32) -> IpAddr {
        IpAddr::V4((0x0A00_0000 + i).into())
    }
    fn s(t: u64) -> Instant {
        Instant::from_secs_f64(t as f64)
    }

    #[test]
    fn a_neighbour_address_is_not_stolen_while_in_use() {
        let (a, b) = (ConnectionHandle(1), ConnectionHandle(2));
        let mut r = LearnedRoutes::new(100, 10, STEAL_AFTER);
        assert_eq!(r.learn(ip(5), a, s(0)), Learn::Ok);
        // B sends two packets from A's address: refused, A keeps it.
        assert_eq!(r.learn(ip(5), b, s(1)), Learn::RefusedOwned);
        assert_eq!(r.learn(ip(5), b, s(2)), Learn::RefusedOwned);
        assert_eq!(r.owner(ip(5)), Some(a));
        // A keeps using it: still refused 40 s later.
        assert_eq!(r.learn(ip(5), a, s(29)), Learn::Ok);
        assert_eq!(r.learn(ip(5), b, s(40)), Learn::RefusedOwned);
        // A silent for 30 s (a restarted client): the address moves.
        assert_eq!(r.learn(ip(5), b, s(59)), Learn::Moved);
        assert_eq!(r.owner(ip(5)), Some(b));
        assert_eq!(r.stats().refused_owned, 3);
        // A's closing frees what it still owned, not B's.
        r.forget(a);
        assert_eq!(r.owner(ip(5)), Some(b));
    }

    #[test]
    fn one_connection_cannot_fill_the_table() {
        let (a, b) = (ConnectionHandle(1), ConnectionHandle(2));
        let mut r = LearnedRoutes::new(1000, 64, STEAL_AFTER);
        for i in 0..70_000 {
            r.learn(ip(100 + i), a, s(0));
        }
        assert_eq!(r.len(), 64);
        assert_eq!(r.stats().refused_connection_full, 70_000 - 64);
        // The next client still gets its addresses.
        assert_eq!(r.learn(ip(1), b, s(1)), Learn::Ok);
        assert_eq!(r.owner(ip(1)), Some(b));
        // The total bound holds too.
        let mut small = LearnedRoutes::new(3, 64, STEAL_AFTER);
        for i in 0..3 {
            small.learn(ip(i), ConnectionHandle(u64::from(i)), s(0));
        }
        assert_eq!(small.learn(ip(9), b, s(0)), Learn::RefusedTableFull);
        // Forgetting a connection frees its share.
        r.forget(a);
        assert_eq!(r.len(), 1);
        assert_eq!(r.learn(ip(7), a, s(2)), Learn::Ok);
    }

    /// Two peers with their prefixes: neither may send from or receive
    /// for the other's addresses; a reconnect takes over the routes.
    #[test]
    fn peer_routes_follow_allowed_ips_only() {
        use mpdccp_proto::auth::{Peer, PeerLimits};
        let peer = |i: u8, p: &str| Peer {
            name: format!("p{i}"),
            public_key: [i; 32],
            psk: None,
            allowed_ips: vec![p.parse().unwrap()],
        };
        let t = PeerTable::new(
            vec![peer(1, "10.99.1.0/24"), peer(2, "10.99.2.0/24")],
            PeerLimits::default(),
        )
        .unwrap();
        let mut r = PeerRoutes::new(t);
        let (a, b) = (PeerId(0), PeerId(1));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        r.connected(a, ConnectionHandle(10));
        r.connected(b, ConnectionHandle(11));
        assert!(r.source_allowed(Some(a), ip("10.99.1.7")));
        assert!(!r.source_allowed(Some(a), ip("10.99.2.7")));
        assert!(!r.source_allowed(Some(a), ip("192.0.2.1")));
        assert!(!r.source_allowed(None, ip("10.99.1.7")));
        // A router solicitation from the client's fe80:: address and DAD
        // from :: are dropped too, but counted apart (no warning).
        assert!(!r.source_allowed(Some(a), ip("fe80::1")));
        assert!(!r.source_allowed(Some(a), ip("::")));
        assert_eq!(r.stats().inner_source_refused, 3);
        assert_eq!(r.stats().inner_link_local_dropped, 2);
        assert_eq!(r.stats().inner_source_of_other_peer, 1);
        assert_eq!(r.route(ip("10.99.2.9")), Some(ConnectionHandle(11)));
        assert_eq!(r.route(ip("10.99.3.9")), None);
        r.connected(b, ConnectionHandle(12));
        assert_eq!(r.route(ip("10.99.2.9")), Some(ConnectionHandle(12)));
        assert_eq!(r.stats().superseded, 1);
        r.closed(ConnectionHandle(12));
        assert_eq!(r.route(ip("10.99.2.9")), None);
        assert_eq!(r.stats().peer_not_connected, 1);
    }
}
