//! What a daemon runs, decided from its configuration alone before any
//! device or socket is opened: the TUN's MTU plan and the core's
//! `ConnectionConfig`. [`run_plan`] is the one place that configuration is
//! built, for the client and the server alike; `crates/mpdccp/tests/daemon/config_equivalence.rs`
//! compares its output with the simulator's mapping of the same settings.

use mpdccp_proto::conn::{Connection, ConnectionConfig, Role, PROTECTION_OVERHEAD};

use super::config::{AuthMode, ClientConfig, ServerConfig, TunnelConfig};
use super::{plan_tun, TunMtuPolicy, TunSetup};
use crate::clock;
use crate::mtu::MtuPlan;

/// The configuration a daemon runs with.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// Every connection of the daemon is made with this.
    pub conn: ConnectionConfig,
    /// The sizes the TUN MTU was planned from.
    pub mtu: MtuPlan,
    /// How the TUN MTU follows DPLPMTUD.
    pub tun_mtu: TunMtuPolicy,
}

/// The daemon's `ConnectionConfig`: the `[tunnel]` settings mapped as the
/// simulator maps them ([`TunnelConfig::connection_config`], sized by the
/// TUN's MTU plan), then what only a daemon has: DPLPMTUD on every path
/// (RFC 8899) and, with `auth = "protected"`, payload protection. The
/// settings are checked here (`tunnel settings: ...`), before the network
/// is touched.
pub fn run_plan(setup: &TunSetup, tunnel: &TunnelConfig) -> anyhow::Result<RunPlan> {
    let (mtu, tun_mtu) = plan_tun(setup)?;
    let mut conn = tunnel.connection_config(&mtu);
    conn.plpmtud = tun_mtu.plpmtud;
    if setup.protected {
        // The DCCP packet stays as large as the path allows; the TUN MTU
        // (hence the largest tunnelled packet) gave way for the AEAD.
        conn.mss_bytes += PROTECTION_OVERHEAD as u32;
    }
    conn.protect_payload = setup.protected;
    Connection::try_new(Role::Client, conn.clone(), clock::now(), 1)
        .map_err(|e| anyhow::anyhow!("tunnel settings: {e}"))?;
    Ok(RunPlan { conn, mtu, tun_mtu })
}

impl ClientConfig {
    /// The client's TUN: outer IPv6 when any path's server address is,
    /// room for the largest encapsulation of its paths' transports; with
    /// DPLPMTUD the search goes up to `path_mtu`, bounded by the MTU of
    /// every configured interface that `iface_mtu` knows (RFC 8899 §5.1.2
    /// MAX_PLPMTU).
    pub fn tun_setup(&self, iface_mtu: impl Fn(&str) -> Option<u32>) -> TunSetup<'_> {
        let ipv6_outer = self
            .path
            .iter()
            .any(|p| p.remote.or(self.server).is_some_and(|r| r.is_ipv6()));
        let plpmtud_max_ip = self.tunnel.plpmtud.then(|| {
            self.path
                .iter()
                .filter_map(|p| iface_mtu(&p.interface))
                .fold(self.tunnel.path_mtu, u32::min)
        });
        TunSetup {
            tun: &self.tun,
            path_mtu: self.tunnel.path_mtu,
            ipv6_outer,
            encap_bytes: self.encap_bytes(),
            offload: self.tunnel.offload,
            protected: self.auth_mode() == AuthMode::Protected,
            plpmtud_max_ip,
        }
    }
}

impl ServerConfig {
    /// The server's one TUN for all clients: it follows the smallest PLPMTU
    /// over the connections (a downstream packet must fit the client it
    /// goes to, and the TUN cannot tell clients apart).
    pub fn tun_setup(&self) -> TunSetup<'_> {
        TunSetup {
            tun: &self.tun,
            path_mtu: self.tunnel.path_mtu,
            ipv6_outer: self.listen.is_ipv6() || self.dccp_listen.iter().any(|a| a.is_ipv6()),
            // UDP is always served: its header stays in the budget.
            encap_bytes: crate::mtu::UDP_HEADER_BYTES,
            offload: self.tunnel.offload,
            protected: self.auth_mode() == AuthMode::Protected,
            plpmtud_max_ip: self.tunnel.plpmtud.then_some(self.tunnel.path_mtu),
        }
    }
}
