//! `[fleet]`: one gateway host of several behind an anycast service
//! address (docs/FLEET.md). The host
//! * puts its `host_id` in the top byte of its connection identifiers, so
//!   a join ECMP sends to another host is answered with a Reset there
//!   (`mpdccp_proto::conn::Endpoint::set_fleet_host`);
//! * advertises its own `unicast_address` to every connection once it is
//!   established (RFC 9897 §3.2.8 MP_ADDADDR with MP_HMAC, no port: the
//!   client keeps the port of its first subflow), where a client with
//!   `join_advertised_address = true` sends its joins;
//! * with `route_protocol` set, installs kernel routes that a routing
//!   daemon (BIRD 2) learns by that protocol number and announces: the
//!   service address while the host serves, and each connected peer's
//!   `allowed_ips` while it is connected. They go through the TUN, so the
//!   kernel deletes them when the daemon dies and its TUN goes.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use anyhow::bail;
use mpdccp_proto::auth::{IpPrefix, PeerId};
use mpdccp_proto::conn::{ConnectionHandle, Endpoint};
use mpdccp_proto::Instant;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::iproute;

/// `[fleet]` of `mpdccp server`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// This host's id, 1..=255, unique in the fleet (the top byte of its
    /// connection identifiers).
    pub host_id: u8,
    /// The anycast address every host announces; clients' first subflows
    /// go there (their configured `server`).
    pub service_address: IpAddr,
    /// This host's own address, advertised to each connection for its
    /// joins; routed to this host only.
    pub unicast_address: IpAddr,
    /// Kernel route protocol number (e.g. 200; `ip route … proto N`) of
    /// the routes for BIRD to announce; none = no routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_protocol: Option<u8>,
}

impl FleetConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.host_id == 0 {
            bail!("[fleet] host_id: 1..=255 (0 means no host id)");
        }
        if self.service_address == self.unicast_address {
            bail!("[fleet] unicast_address must differ from service_address (joins must reach this host only)");
        }
        if self.unicast_address.is_unspecified() || self.service_address.is_unspecified() {
            bail!("[fleet] addresses must be specific");
        }
        if self.service_address.is_ipv4() != self.unicast_address.is_ipv4() {
            bail!("[fleet] service_address and unicast_address must be of one family");
        }
        // The kernel's own numbers (redirect, kernel, boot, static) would
        // mix our routes with others' (rtnetlink(7)).
        if self.route_protocol.is_some_and(|p| p <= 4) {
            bail!("[fleet] route_protocol: 5..=255 (0–4 are the kernel's)");
        }
        Ok(())
    }
}

/// A fleet host's runtime: what it advertised and the routes it holds.
pub(super) struct Fleet {
    unicast: SocketAddr,
    service: IpAddr,
    routes: Option<KernelRoutes>,
    /// Connections of each peer (a reconnecting peer's new connection
    /// comes up before its old one is gone): its routes stay while > 0.
    peer_conns: BTreeMap<PeerId, usize>,
    conn_peer: BTreeMap<ConnectionHandle, PeerId>,
    service_announced: bool,
}

impl Fleet {
    pub(super) fn new(cfg: &FleetConfig, tun: &str) -> Fleet {
        Fleet {
            unicast: SocketAddr::new(cfg.unicast_address, 0),
            service: cfg.service_address,
            routes: cfg.route_protocol.map(|p| KernelRoutes {
                proto: p.to_string(),
                dev: tun.to_string(),
            }),
            peer_conns: BTreeMap::new(),
            conn_peer: BTreeMap::new(),
            service_announced: false,
        }
    }

    /// The host serves: its service address is announced.
    pub(super) fn announce_service(&mut self) {
        if let Some(r) = &self.routes {
            r.add(&IpPrefix::host(self.service));
            self.service_announced = true;
            info!(service = %self.service, "fleet: service address announced");
        }
    }

    /// The host stops serving (its connections closed, SIGTERM): the
    /// service address is withdrawn, so the routers send new clients
    /// elsewhere. Not earlier: each connection's first subflow runs over
    /// the service address, and its MP_CLOSE handshake needs it.
    fn withdraw_service(&mut self) {
        if let (Some(r), true) = (&self.routes, self.service_announced) {
            r.del(&IpPrefix::host(self.service));
            self.service_announced = false;
            info!(service = %self.service, "fleet: service address withdrawn");
        }
    }

    /// Connection `h` is established: tell it our unicast address, and
    /// route its peer's prefixes here.
    pub(super) fn connected<K: Ord + Clone>(
        &mut self,
        now: Instant,
        ep: &mut Endpoint<K>,
        h: ConnectionHandle,
        peer: Option<(PeerId, &[IpPrefix])>,
    ) {
        if let Some(c) = ep.connection_mut(h) {
            if let Err(e) = c.advertise_address(now, self.unicast) {
                warn!(
                    conn = h.0,
                    "fleet: cannot advertise {}: {e}",
                    self.unicast.ip()
                );
            }
        }
        let Some((p, prefixes)) = peer else { return };
        self.conn_peer.insert(h, p);
        let n = self.peer_conns.entry(p).or_insert(0);
        *n += 1;
        if *n == 1 {
            if let Some(r) = &self.routes {
                prefixes.iter().for_each(|x| r.add(x));
            }
        }
    }

    /// Connection `h` closed: its peer's prefixes are withdrawn once it
    /// has no connection here.
    pub(super) fn closed(
        &mut self,
        h: ConnectionHandle,
        prefixes_of: impl Fn(PeerId) -> Vec<IpPrefix>,
    ) {
        let Some(p) = self.conn_peer.remove(&h) else {
            return;
        };
        let n = self.peer_conns.entry(p).or_insert(1);
        *n -= 1;
        if *n == 0 {
            self.peer_conns.remove(&p);
            if let Some(r) = &self.routes {
                prefixes_of(p).iter().for_each(|x| r.del(x));
            }
        }
    }
}

impl Drop for Fleet {
    /// The server loop ended (drained, or the close grace over).
    fn drop(&mut self) {
        self.withdraw_service();
    }
}

/// Routes through the TUN with our protocol number (`ip route`; one fork
/// per peer event — a host with tens of thousands of peers would use
/// rtnetlink directly).
struct KernelRoutes {
    proto: String,
    dev: String,
}

impl KernelRoutes {
    fn add(&self, p: &IpPrefix) {
        let dst = p.to_string();
        let args = [
            "route",
            "replace",
            &dst,
            "dev",
            &self.dev,
            "proto",
            &self.proto,
        ];
        if let Err(e) = iproute::ip(&args) {
            warn!("fleet: route {dst} not installed: {e:#}");
        }
    }
    fn del(&self, p: &IpPrefix) {
        let dst = p.to_string();
        let args = ["route", "del", &dst, "dev", &self.dev, "proto", &self.proto];
        if let Err(e) = iproute::ip(&args) {
            warn!("fleet: route {dst} not removed: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FleetConfig {
        FleetConfig {
            host_id: 1,
            service_address: "192.0.2.10".parse().unwrap(),
            unicast_address: "198.51.100.1".parse().unwrap(),
            route_protocol: Some(200),
        }
    }

    #[test]
    fn mistakes_are_refused() {
        assert!(cfg().validate().is_ok());
        let mut c = cfg();
        c.host_id = 0;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.unicast_address = c.service_address;
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.unicast_address = "2001:db8::1".parse().unwrap();
        assert!(c.validate().is_err());
        let mut c = cfg();
        c.route_protocol = Some(3);
        assert!(c.validate().is_err());
    }
}
