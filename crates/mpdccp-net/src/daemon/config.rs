//! Daemon configuration files (TOML) for `mpdccp server` and `mpdccp client`.
//!
//! Every field is documented here and in the crate README; unknown fields are
//! an error so a typo cannot silently fall back to a default.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_proto::conn::ConnectionConfig;
use mpdccp_proto::reorder::ReorderConfig;
use mpdccp_proto::sched::SchedulerConfig;
use serde::{Deserialize, Serialize};

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

/// Multipath DCCP settings (the core's `ConnectionConfig`, by name).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TunnelConfig {
    /// Congestion control per path: ccid2 | ccid5 | cubic | bbr3 | lia | olia | balia | coupled-cubic.
    pub cc: String,
    /// Scheduler: cpf | rr | srtt | ratio | redundant | otias | handover | acpf …
    pub scheduler: String,
    /// Weights for weighted schedulers (`ratio`), one per path in path order.
    pub weights: Vec<u32>,
    /// Receiver reordering: passive | active-fixed | active-adaptive | equalized …
    pub reorder: String,
    /// Reordering timeout, ms.
    pub reorder_timeout_ms: u64,
    /// Bounded send queue in front of the scheduler, packets.
    pub send_queue_pkts: usize,
    /// Most paths (subflows) per connection.
    pub max_paths: usize,
    /// Smallest MTU of any path's network (outer IP packets), bytes.
    pub path_mtu: u32,
    /// false = plain single-path DCCP (no Multipath Capable feature).
    pub multipath: bool,
    /// Kernel send/receive buffer of each UDP socket, bytes. Packets waiting
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
            cc: "ccid2".into(),
            scheduler: "cpf".into(),
            weights: Vec::new(),
            reorder: "active-fixed".into(),
            reorder_timeout_ms: 15,
            send_queue_pkts: 1000,
            max_paths: 8,
            path_mtu: 1500,
            multipath: true,
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
    /// The core's settings; `mss_bytes` from the MTU plan.
    pub fn connection_config(&self, mss_bytes: u32) -> ConnectionConfig {
        ConnectionConfig {
            cc: self.cc.clone(),
            scheduler: SchedulerConfig {
                name: self.scheduler.clone(),
                weights: self.weights.clone(),
                ..Default::default()
            },
            reorder: ReorderConfig {
                name: self.reorder.clone(),
                timeout: Duration::from_millis(self.reorder_timeout_ms),
                ..Default::default()
            },
            send_queue_pkts: self.send_queue_pkts,
            send_queue_bytes: self.send_queue_pkts.saturating_mul(mss_bytes as usize),
            max_paths: self.max_paths,
            mss_bytes,
            multipath: self.multipath,
            keepalive_interval: ms_opt(self.keepalive_ms),
            path_idle_timeout: ms_opt(self.path_idle_timeout_ms),
            idle_timeout: ms_opt(self.idle_timeout_ms),
            max_gso_segments: if self.offload {
                self.gso_segments.clamp(1, 64)
            } else {
                1
            },
            ..Default::default()
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

/// One access network of the client.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientPath {
    /// Name used in logs and status (default: the interface).
    pub name: String,
    /// Interface the path's UDP socket is bound to (SO_BINDTODEVICE).
    pub interface: String,
    /// Source address; default: the interface's first address of the server's family.
    pub source: Option<IpAddr>,
    /// Server address:port reached over this path; default: `server`.
    pub remote: Option<SocketAddr>,
    /// RFC 9897 MP_PRIO: 0 unused, 1 standby, 2 secondary, 3..=15 primary.
    pub priority: u8,
}

impl Default for ClientPath {
    fn default() -> Self {
        ClientPath {
            name: String::new(),
            interface: String::new(),
            source: None,
            remote: None,
            priority: 3,
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
    /// Most clients at once.
    #[serde(default = "default_max_clients")]
    pub max_clients: usize,
    /// Most inner addresses learned per server (routing of TUN packets to clients).
    #[serde(default = "default_max_routes")]
    pub max_learned_addresses: usize,
    #[serde(default)]
    pub seed: u64,
}

fn default_max_clients() -> usize {
    256
}
fn default_max_routes() -> usize {
    65_536
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

impl ClientConfig {
    pub fn load(path: &Path) -> anyhow::Result<ClientConfig> {
        let c: ClientConfig =
            toml::from_str(&read(path)?).with_context(|| format!("{}", path.display()))?;
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
        }
        validate_common(&self.tun, &self.tunnel)
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
        let c: ServerConfig =
            toml::from_str(&read(path)?).with_context(|| format!("{}", path.display()))?;
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
    if !mpdccp_proto::cc::CC_NAMES.contains(&tunnel.cc.as_str()) {
        bail!(
            "tunnel.cc: unknown congestion control `{}` (expected one of {})",
            tunnel.cc,
            mpdccp_proto::cc::CC_NAMES.join(", ")
        );
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
        let bad_cc = ok.replace("\"ccid2\"", "\"nope\"");
        let c: ClientConfig = toml::from_str(&bad_cc).unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("unknown congestion control"));
    }

    #[test]
    fn cidr() {
        assert!(parse_cidr("10.0.0.1/24").is_ok());
        assert!(parse_cidr("fd00::1/64").is_ok());
        assert!(parse_cidr("10.0.0.1/33").is_err());
        assert!(parse_cidr("10.0.0.1").is_err());
    }
}
