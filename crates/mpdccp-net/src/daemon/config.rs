//! Daemon configuration files (TOML) for `mpdccp server` and `mpdccp client`.
//!
//! Every field is documented here and in the crate README; unknown fields are
//! an error so a typo cannot silently fall back to a default.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_proto::conn::{ConnectionConfig, TunnelSettings};
use serde::{Deserialize, Serialize};

use crate::mtu::MtuPlan;

/// The TUN interface at one end of the tunnel.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TunConfig {
    /// Interface name (≤ 15 bytes).
    pub name: String,
    /// Addresses with prefix length, IPv4 and/or IPv6 (`"10.99.0.1/24"`, `"fd99::1/64"`).
    pub addresses: Vec<String>,
    /// Routes (`"10.200.0.0/16"`, `"default"`) sent into the tunnel.
    pub routes: Vec<String>,
    /// Tunnel MTU; 0 = computed from `path_mtu` minus all headers.
    pub mtu: u32,
}

impl Default for TunConfig {
    fn default() -> Self {
        TunConfig {
            name: "mpdccp0".into(),
            addresses: Vec::new(),
            routes: Vec::new(),
            mtu: 0,
        }
    }
}

/// The `[tunnel]` table: the tunnel settings every driver shares (the
/// core's [`TunnelSettings`], the same keys and defaults as a scenario's
/// `[tunnel]`: `cc`, `scheduler`, `reorder`, `reorder_timeout_ms`, `weights`,
/// `send_queue_pkts`, `send_queue_bytes`, `mss_bytes`, `multipath`) plus
/// what only the real tunnel has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TunnelConfig {
    #[serde(flatten)]
    pub settings: TunnelSettings,
    /// Most paths (subflows) per connection.
    pub max_paths: usize,
    /// Smallest MTU of any path's network (outer IP packets), bytes.
    pub path_mtu: u32,
    /// Kernel send/receive buffer of each UDP (or native DCCP raw) socket, bytes. Packets waiting
    /// here are invisible to congestion control: a large buffer hides a slow
    /// receiver behind queueing delay (and reordering timeouts) instead of
    /// loss. Root may exceed net.core.rmem_max.
    pub socket_buffer_bytes: usize,
    /// A subflow silent this long is probed with a DCCP-Sync (answered by
    /// SyncAck), again every interval; 0 = no keepalives.
    pub keepalive_ms: u64,
    /// A subflow silent this long (keepalives unanswered) while another
    /// path of the connection is heard from is closed and its slot freed:
    /// covers a peer that lost an interface without sending MP_REMOVEADDR.
    /// 0 = never.
    pub path_idle_timeout_ms: u64,
    /// The whole connection closes after this long without a packet on any
    /// path (a client then reconnects; a server frees the slot). 0 = never.
    pub idle_timeout_ms: u64,
    /// Kernel offloads on the data path: UDP GSO/GRO on the path sockets
    /// and TSO/GRO-style super-packets on the TUN (`IFF_VNET_HDR`). false =
    /// one kernel packet per datagram (for comparison and old kernels).
    pub offload: bool,
    /// Most equal-sized DCCP packets the core hands out as one UDP GSO
    /// train (with `offload`).
    pub gso_segments: usize,
}

impl Default for TunnelConfig {
    fn default() -> Self {
        TunnelConfig {
            settings: TunnelSettings::default(),
            max_paths: ConnectionConfig::default().max_paths,
            path_mtu: 1500,
            socket_buffer_bytes: 256 << 10,
            keepalive_ms: 2_000,
            path_idle_timeout_ms: 15_000,
            idle_timeout_ms: 120_000,
            offload: true,
            gso_segments: 32,
        }
    }
}

impl TunnelConfig {
    /// The core's settings: the shared tunnel settings mapped as the
    /// simulator maps them, sized by the TUN MTU of `plan` (the controllers
    /// count in TUN-MTU packets; a DCCP packet is at most the TUN MTU plus
    /// the core's header budget, which is the path MTU minus outer IP and
    /// UDP), plus the daemon's timers, path limit and GSO.
    pub fn connection_config(&self, plan: &MtuPlan) -> ConnectionConfig {
        ConnectionConfig {
            max_paths: self.max_paths,
            keepalive_interval: ms_opt(self.keepalive_ms),
            path_idle_timeout: ms_opt(self.path_idle_timeout_ms),
            idle_timeout: ms_opt(self.idle_timeout_ms),
            max_gso_segments: if self.offload {
                self.gso_segments.clamp(1, 64)
            } else {
                1
            },
            ..self.settings.connection_config(plan.tun_mtu as usize)
        }
    }
}

/// Operations: control socket, metrics.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpsConfig {
    /// Unix socket for `mpdccp status` (JSON).
    pub control_socket: PathBuf,
    /// Optional Prometheus text endpoint, e.g. `"127.0.0.1:9190"`.
    pub prometheus: Option<SocketAddr>,
}

impl Default for OpsConfig {
    fn default() -> Self {
        OpsConfig {
            control_socket: PathBuf::from("/run/mpdccp.sock"),
            prometheus: None,
        }
    }
}

/// How a path's DCCP packets travel (issue #15 part 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// DCCP-in-UDP (RFC 6773): one UDP socket per path, GSO/GRO, NAT-friendly.
    #[default]
    Udp,
    /// Native DCCP, IP protocol 33, through a raw socket bound to the
    /// path's source address (needs CAP_NET_RAW; no UDP header, so the
    /// tunnel MTU is 8 bytes larger; RFC 4340 §9.1 checksum over the real
    /// addresses).
    Dccp,
    /// U-DCCP (draft-amend-tsvwg-dccp-udp-header-conversion-01): the DCCP
    /// header rearranged into a UDP header, through a UDP socket to the
    /// server's `udccp_listen` port; no encapsulation bytes, NAT-friendly.
    #[serde(rename = "udccp")]
    UDccp,
}

impl Transport {
    /// Bytes of encapsulation between the outer IP header and DCCP.
    pub fn encap_bytes(self) -> u32 {
        match self {
            Transport::Udp => crate::mtu::UDP_HEADER_BYTES,
            Transport::Dccp | Transport::UDccp => 0,
        }
    }
}

/// One access network of the client.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientPath {
    /// Name used in logs and status (default: the interface).
    pub name: String,
    /// Interface the path's socket is bound to (SO_BINDTODEVICE).
    pub interface: String,
    /// Source address; default: the interface's first address of the server's family.
    pub source: Option<IpAddr>,
    /// Server address:port reached over this path; default: `server`.
    pub remote: Option<SocketAddr>,
    /// RFC 9897 MP_PRIO: 0 unused, 1 standby, 2 secondary, 3..=15 primary.
    pub priority: u8,
    /// `"udp"` (default), `"dccp"` (native; the port of `remote` is unused)
    /// or `"udccp"` (`remote` is the server's `udccp_listen` address).
    pub transport: Transport,
}

impl Default for ClientPath {
    fn default() -> Self {
        ClientPath {
            name: String::new(),
            interface: String::new(),
            source: None,
            remote: None,
            priority: 3,
            transport: Transport::Udp,
        }
    }
}

/// `mpdccp client --config FILE`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// Default server address:port for every path.
    pub server: Option<SocketAddr>,
    #[serde(default)]
    pub tun: TunConfig,
    #[serde(default)]
    pub tunnel: TunnelConfig,
    #[serde(default)]
    pub ops: OpsConfig,
    /// The access networks, in order (path index = position).
    #[serde(default)]
    pub path: Vec<ClientPath>,
    /// First rejoin delay after an interface returns, ms (doubles per failure, up to 30 s).
    #[serde(default = "default_rejoin_ms")]
    pub rejoin_backoff_ms: u64,
    /// Seed of the core's randomness (keys, nonces, initial sequence numbers);
    /// 0 = from the OS.
    #[serde(default)]
    pub seed: u64,
}

fn default_rejoin_ms() -> u64 {
    200
}

/// `mpdccp server --config FILE`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// UDP address:port to listen on (RFC 6773 encapsulation; one port for all clients).
    pub listen: SocketAddr,
    #[serde(default)]
    pub tun: TunConfig,
    #[serde(default)]
    pub tunnel: TunnelConfig,
    #[serde(default)]
    pub ops: OpsConfig,
    /// Local addresses on which to accept native DCCP (IP protocol 33) as
    /// well, one raw socket each (a raw socket only sees packets to its
    /// address, and the checksum needs it). Empty = UDP only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dccp_listen: Vec<IpAddr>,
    /// UDP address:port on which to accept U-DCCP as well (every datagram
    /// to it is U-DCCP, handshake included; docs/INTEROP.md). None = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udccp_listen: Option<SocketAddr>,
    /// Most clients at once.
    #[serde(default = "default_max_clients")]
    pub max_clients: usize,
    /// Most inner addresses learned per server (routing of TUN packets to clients).
    #[serde(default = "default_max_routes")]
    pub max_learned_addresses: usize,
    #[serde(default)]
    pub seed: u64,
}

impl ServerConfig {
    pub const DEFAULT_MAX_CLIENTS: usize = 256;
    pub const DEFAULT_MAX_LEARNED_ADDRESSES: usize = 65_536;
}

fn default_max_clients() -> usize {
    ServerConfig::DEFAULT_MAX_CLIENTS
}
fn default_max_routes() -> usize {
    ServerConfig::DEFAULT_MAX_LEARNED_ADDRESSES
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

impl ClientConfig {
    pub fn load(path: &Path) -> anyhow::Result<ClientConfig> {
        Self::from_toml_str(&read(path)?).with_context(|| format!("{}", path.display()))
    }

    /// Parses and validates a client configuration.
    pub fn from_toml_str(text: &str) -> anyhow::Result<ClientConfig> {
        let c: ClientConfig = toml::from_str(text)?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.path.is_empty() {
            bail!("client config needs at least one [[path]]");
        }
        for (i, p) in self.path.iter().enumerate() {
            if p.interface.is_empty() {
                bail!("path {i}: `interface` is required");
            }
            if p.remote.is_none() && self.server.is_none() {
                bail!("path {i}: no `remote` and no top-level `server`");
            }
            if p.priority > 15 {
                bail!("path {i}: priority must be 0..=15");
            }
            if p.source.is_some_and(|a| a.is_unspecified()) {
                bail!("path {i}: `source` must be a specific address");
            }
        }
        validate_common(&self.tun, &self.tunnel)
    }

    /// Encapsulation bytes the TUN MTU must leave room for: the largest of
    /// any path's transport (a packet may be sent on any path).
    pub fn encap_bytes(&self) -> u32 {
        self.path
            .iter()
            .map(|p| p.transport.encap_bytes())
            .max()
            .unwrap_or(crate::mtu::UDP_HEADER_BYTES)
    }

    /// Display name of path `i`.
    pub fn path_name(&self, i: usize) -> String {
        let p = &self.path[i];
        if p.name.is_empty() {
            p.interface.clone()
        } else {
            p.name.clone()
        }
    }
}

impl ServerConfig {
    pub fn load(path: &Path) -> anyhow::Result<ServerConfig> {
        Self::from_toml_str(&read(path)?).with_context(|| format!("{}", path.display()))
    }

    /// Parses and validates a server configuration.
    pub fn from_toml_str(text: &str) -> anyhow::Result<ServerConfig> {
        let c: ServerConfig = toml::from_str(text)?;
        for a in &c.dccp_listen {
            if a.is_unspecified() {
                bail!("dccp_listen: {a}: native DCCP needs specific addresses (checksum pseudo-header)");
            }
        }
        validate_common(&c.tun, &c.tunnel)?;
        Ok(c)
    }
}

fn validate_common(tun: &TunConfig, tunnel: &TunnelConfig) -> anyhow::Result<()> {
    if tun.name.is_empty() || tun.name.len() > 15 {
        bail!("tun.name must have 1..=15 bytes");
    }
    for a in &tun.addresses {
        parse_cidr(a)?;
    }
    if let Err(e) = tunnel.settings.validate(None) {
        bail!("tunnel: {e}");
    }
    let (ka, pit, it) = (
        tunnel.keepalive_ms,
        tunnel.path_idle_timeout_ms,
        tunnel.idle_timeout_ms,
    );
    // An idle path must get at least two keepalives before it can expire.
    if pit != 0 && (ka == 0 || ka.saturating_mul(2) > pit) {
        bail!("tunnel.path_idle_timeout_ms ({pit}) needs keepalive_ms (now {ka}) set to at most half of it");
    }
    if it != 0 && ka != 0 && ka.saturating_mul(2) > it {
        bail!("tunnel.idle_timeout_ms ({it}) must be at least twice keepalive_ms ({ka})");
    }
    if tunnel.path_mtu < 576 {
        bail!("tunnel.path_mtu must be >= 576");
    }
    Ok(())
}

/// Parses `"addr/len"`.
/// Milliseconds, 0 = off.
fn ms_opt(ms: u64) -> Option<Duration> {
    (ms != 0).then(|| Duration::from_millis(ms))
}

pub fn parse_cidr(s: &str) -> anyhow::Result<(IpAddr, u8)> {
    let (a, l) = s
        .split_once('/')
        .with_context(|| format!("`{s}`: expected ADDRESS/PREFIX"))?;
    let ip: IpAddr = a.parse().with_context(|| format!("`{s}`: bad address"))?;
    let len: u8 = l
        .parse()
        .with_context(|| format!("`{s}`: bad prefix length"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    if len > max {
        bail!("`{s}`: prefix length > {max}");
    }
    Ok((ip, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_config_parses_and_rejects_typos() {
        let ok = r#"
            server = "10.1.2.2:6773"
            [tun]
            name = "mpd0"
            addresses = ["10.99.0.2/24", "fd99::2/64"]
            [tunnel]
            cc = "ccid2"
            [[path]]
            interface = "p1"
            [[path]]
            interface = "p2"
            remote = "10.2.2.2:6773"
            priority = 2
        "#;
        let c: ClientConfig = toml::from_str(ok).unwrap();
        c.validate().unwrap();
        assert_eq!(c.path.len(), 2);
        assert_eq!(c.path[0].priority, 3);
        assert_eq!(c.path_name(1), "p2");
        let typo = ok.replace("priority = 2", "priorty = 2");
        assert!(toml::from_str::<ClientConfig>(&typo).is_err());
        let tunnel_typo = ok.replace("cc = \"ccid2\"", "cc = \"ccid2\"\nkeepalive = 5");
        let err = toml::from_str::<ClientConfig>(&tunnel_typo).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `keepalive`"),
            "{err}"
        );
    }

    /// An unknown name in the `[tunnel]` table is an error that lists the
    /// valid names, for each kind.
    #[test]
    fn unknown_names_are_errors_listing_the_valid_ones() {
        let base = "listen = \"0.0.0.0:6773\"\n[tunnel]\n";
        for (key, needle, listed) in [
            (
                "cc",
                "unknown congestion control `nope`",
                "ccid2, ccid5, cubic",
            ),
            ("scheduler", "unknown scheduler `nope`", "cpf, rr, srtt"),
            (
                "reorder",
                "unknown reorder strategy `nope`",
                "passive, active-fixed",
            ),
        ] {
            let err = ServerConfig::from_toml_str(&format!("{base}{key} = \"nope\"\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle) && err.contains(listed), "{key}: {err}");
        }
        let c = ServerConfig::from_toml_str(&format!("{base}scheduler = \"active-standby\"\n"))
            .unwrap();
        assert_eq!(c.tunnel.settings.scheduler.name(), "handover");
    }

    /// The typed tables survive `toml::to_string` and back (the testbed
    /// writes the daemons' files this way).
    #[test]
    fn configs_round_trip_through_toml() {
        let mut c: ClientConfig = toml::from_str(
            "server = \"10.1.2.2:6773\"\n[tunnel]\ncc = \"bbr3\"\nweights = [3, 1]\nreorder_timeout_ms = 15\n[[path]]\ninterface = \"p1\"\n",
        )
        .unwrap();
        c.tunnel.keepalive_ms = 700;
        let back = ClientConfig::from_toml_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back.tunnel, c.tunnel);
        assert_eq!(back.tunnel.settings.weights, [3, 1]);
        assert_eq!(back.tunnel.settings.reorder_timeout_ms, Some(15.0));
        assert_eq!(back.path[0].interface, "p1");
    }

    #[test]
    fn udccp_transport_and_listener() {
        let text =
            "server = \"10.1.2.2:6774\"\n[[path]]\ninterface = \"p1\"\ntransport = \"udccp\"\n";
        let c = ClientConfig::from_toml_str(text).unwrap();
        assert_eq!(c.path[0].transport, Transport::UDccp);
        assert_eq!(c.encap_bytes(), 0, "U-DCCP adds no header");
        let back = toml::to_string(&c).unwrap();
        assert!(back.contains("transport = \"udccp\""), "{back}");
        let s = ServerConfig::from_toml_str(
            "listen = \"0.0.0.0:6773\"\nudccp_listen = \"0.0.0.0:6774\"\n",
        )
        .unwrap();
        assert_eq!(s.udccp_listen, Some("0.0.0.0:6774".parse().unwrap()));
        assert!(ClientConfig::from_toml_str(&text.replace("udccp", "u-dccp")).is_err());
    }

    #[test]
    fn transport_per_path_and_server_dccp_listen() {
        let text = "server = \"10.1.2.2:6773\"\n[[path]]\ninterface = \"p1\"\ntransport = \"dccp\"\n[[path]]\ninterface = \"p2\"\n";
        let c = ClientConfig::from_toml_str(text).unwrap();
        assert_eq!(c.path[0].transport, Transport::Dccp);
        assert_eq!(c.path[1].transport, Transport::Udp);
        // One UDP path keeps the UDP header in the budget; all-native frees it.
        assert_eq!(c.encap_bytes(), 8);
        let native =
            ClientConfig::from_toml_str(&text.replace("p2\"\n", "p2\"\ntransport = \"dccp\"\n"))
                .unwrap();
        assert_eq!(native.encap_bytes(), 0);
        assert!(ClientConfig::from_toml_str(&text.replace("\"dccp\"", "\"sctp\"")).is_err());
        let s = ServerConfig::from_toml_str(
            "listen = \"0.0.0.0:6773\"\ndccp_listen = [\"10.1.2.2\", \"fd00::2\"]\n",
        )
        .unwrap();
        assert_eq!(s.dccp_listen.len(), 2);
        assert!(ServerConfig::from_toml_str(
            "listen = \"0.0.0.0:6773\"\ndccp_listen = [\"0.0.0.0\"]\n"
        )
        .is_err());
    }

    #[test]
    fn cidr() {
        assert!(parse_cidr("10.0.0.1/24").is_ok());
        assert!(parse_cidr("fd00::1/64").is_ok());
        assert!(parse_cidr("10.0.0.1/33").is_err());
        assert!(parse_cidr("10.0.0.1").is_err());
    }
}
