//! Daemon configuration files (TOML) for `mpdccp server` and `mpdccp client`.
//!
//! Every field is documented here and in the crate README; unknown fields are
//! an error so a typo cannot silently fall back to a default.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_proto::conn::{
    ConnectionConfig, LifetimeConfig, LossConfig, MpConfig, SendQueueConfig, TunnelSettings,
};
use mpdccp_proto::wire::WireProfile;
use serde::{Deserialize, Serialize};

use super::keyfile::PeerConfig;
use crate::mtu::MtuPlan;

/// Who may use the tunnel (docs/SECURITY.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// RFC 9897 key type 0: any host that reaches the port gets a tunnel,
    /// keys in clear. For labs and reference-kernel interop only.
    Open,
    /// Noise IK (MP_KEY key type 255): configured peers only, `allowed_ips`
    /// enforced, path keys secret.
    Authenticated,
    /// As `authenticated`, and every data payload sealed per path
    /// (ChaCha20-Poly1305 with a replay window).
    Protected,
}

impl AuthMode {
    /// The configuration name (`auth = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::Open => "open",
            AuthMode::Authenticated => "authenticated",
            AuthMode::Protected => "protected",
        }
    }
}

/// The `[limits]` table of the server: handshake and admission bounds,
/// each with a counter in `mpdccp status` and a rate-limited log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Authenticated: half-open handshakes in total.
    pub half_open: usize,
    /// Authenticated: half-open handshakes per peer (the oldest goes).
    pub half_open_per_peer: usize,
    /// Authenticated: lifetime of a half-open handshake, ms.
    pub half_open_lifetime_ms: u64,
    /// Authenticated: half-open handshakes above which Inits need a cookie.
    pub cookie_threshold: usize,
    /// Authenticated: Inits per second (passing mac1) above which every
    /// Init needs a cookie.
    pub load_inits_per_sec: u32,
    /// New handshakes per second from one source address (IPv4 /32, IPv6 /64).
    pub handshakes_per_sec: u32,
    /// Handshakes a quiet source may start back to back.
    pub handshake_burst: u32,
    /// Sources the handshake rate limiter tracks at most.
    pub rate_sources: usize,
    /// Open mode: connections that have not reached OPEN, at most.
    pub open_half_open: usize,
    /// Open mode: stateless Resets to unknown remotes per second.
    pub resets_per_sec: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let g = mpdccp_proto::auth::gate::GateConfig::default();
        let r = mpdccp_proto::auth::RateLimitConfig::default();
        let e = mpdccp_proto::conn::EndpointConfig::default();
        LimitsConfig {
            half_open: g.max_half_open,
            half_open_per_peer: g.max_half_open_per_peer,
            half_open_lifetime_ms: g.half_open_lifetime.as_millis() as u64,
            cookie_threshold: g.cookie_threshold,
            load_inits_per_sec: 1000,
            handshakes_per_sec: r.per_second,
            handshake_burst: r.burst,
            rate_sources: r.max_sources,
            open_half_open: e.max_half_open,
            resets_per_sec: e.max_resets_per_sec,
        }
    }
}

impl LimitsConfig {
    pub fn gate(&self) -> mpdccp_proto::auth::gate::GateConfig {
        mpdccp_proto::auth::gate::GateConfig {
            max_half_open: self.half_open,
            max_half_open_per_peer: self.half_open_per_peer.max(1),
            half_open_lifetime: Duration::from_millis(self.half_open_lifetime_ms),
            cookie_threshold: self.cookie_threshold,
        }
    }
    pub fn rate(&self) -> mpdccp_proto::auth::RateLimitConfig {
        mpdccp_proto::auth::RateLimitConfig {
            per_second: self.handshakes_per_sec,
            burst: self.handshake_burst,
            max_sources: self.rate_sources,
        }
    }
}

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
    /// Packets the kernel holds for the daemon to read (`ip link`'s
    /// `txqueuelen`; a TUN drops, it does not push back, when this is full).
    /// The kernel's 500 is 2.4 ms of 1200-byte datagrams at 2 Gbit/s, less
    /// than a scheduler time slice on a busy host; 0 = leave the kernel's.
    pub txqueuelen: u32,
}

/// The daemon's TUN queue, packets (see [`TunConfig::txqueuelen`]).
pub const DEFAULT_TUN_TXQUEUELEN: u32 = 2000;

impl Default for TunConfig {
    fn default() -> Self {
        TunConfig {
            name: "mpdccp0".into(),
            addresses: Vec::new(),
            routes: Vec::new(),
            mtu: 0,
            txqueuelen: DEFAULT_TUN_TXQUEUELEN,
        }
    }
}

/// The `[tunnel]` table: the tunnel settings every driver shares (the
/// core's [`TunnelSettings`], the same keys and defaults as a scenario's
/// `[tunnel]`: `cc`, `scheduler`, `reorder`, `reorder_timeout_ms`, `weights`,
/// `send_queue_pkts`, `send_queue_bytes`, `mss_bytes`, `multipath`, `aqm`,
/// `codel_target_ms`, `codel_interval_ms`, `fq_quantum_bytes`,
/// `retransmit_lost`, `retransmit_max_age_ms`, `retransmit_budget_pct`,
/// `tolerate_random_loss`) plus
/// what only the real tunnel has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TunnelConfig {
    #[serde(flatten)]
    pub settings: TunnelSettings,
    /// Most paths (subflows) per connection.
    pub max_paths: usize,
    /// Smallest MTU of any path's network (outer IP packets), bytes. With
    /// `plpmtud` the largest size searched for (bounded by the paths'
    /// interface MTUs), else the size every path is assumed to carry.
    pub path_mtu: u32,
    /// Datagram PLPMTU discovery (RFC 8899) on every path: padded
    /// DCCP-Sync probes (RFC 4340 §14.1), no reliance on ICMP. The TUN
    /// starts at the MTU the base size allows (RFC 8899 §5.1.2: 1200 over
    /// IPv4, 1280 over IPv6 outer packets; never below 1280 when the TUN
    /// has an IPv6 address and `path_mtu` allows it) and follows the
    /// smallest PLPMTU confirmed on the connection's paths. false = the TUN
    /// MTU is fixed from `path_mtu`.
    pub plpmtud: bool,
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
    /// Tunnelled packets that waited longer than this in the send queue
    /// are dropped instead of sent (a path was down, the peer restarted);
    /// 0 = no age limit.
    pub send_queue_max_delay_ms: u64,
    /// An idle usable path with no RTT sample for this long is probed with
    /// a DCCP-Sync so its SRTT stays fresh (docs/OPERATIONS.md, "Fresh path
    /// estimates"); 0 = never (a path's SRTT then changes only with data).
    pub rtt_probe_interval_ms: u64,
    /// Layout of option 46 and the key derivations: `"rfc9897"` (default),
    /// or the Telekom reference kernel's `"reference-k4.14"` /
    /// `"reference-k5.10"` (docs/INTEROP.md; open mode only, both ends alike).
    #[serde(with = "wire_profile_name")]
    pub wire_profile: WireProfile,
    /// Busy polling: after a packet the packet loop keeps polling its
    /// sockets and TUN without sleeping for this many microseconds, so the
    /// next packet (often the answer to the one just sent) finds it awake
    /// instead of paying a wake-up (tens of µs on a VM). Costs a core
    /// while traffic flows; 0 = off (the default).
    pub busy_poll_us: u64,
    /// The daemon's threads ask the kernel for this time slice, µs
    /// (`clock::request_slice`, Linux ≥ 6.12): a thread woken by a packet
    /// then preempts a long-running task at once instead of after its
    /// slice, so the TUN ring and the path's window do not fill while it
    /// waits; the CPU share is unchanged. 0 = the kernel's default.
    pub sched_slice_us: u64,
}

/// `wire_profile` as its configuration name (`WireProfile::name` / `FromStr`).
mod wire_profile_name {
    use mpdccp_proto::wire::WireProfile;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &WireProfile, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(p.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<WireProfile, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The `aqm` key of `[tunnel]`, a shared setting since the simulator has
/// the same send queue.
pub use mpdccp_proto::conn::Aqm;

impl Default for TunnelConfig {
    fn default() -> Self {
        TunnelConfig {
            // The shared defaults, never overridden here: a flattened table
            // takes its missing keys from `TunnelSettings::default()` anyway,
            // so an override would hold only for a file without `[tunnel]`.
            settings: TunnelSettings::default(),
            max_paths: MpConfig::default().max_paths,
            path_mtu: 1500,
            plpmtud: true,
            socket_buffer_bytes: 256 << 10,
            keepalive_ms: 2_000,
            path_idle_timeout_ms: 15_000,
            idle_timeout_ms: 120_000,
            offload: true,
            gso_segments: 32,
            send_queue_max_delay_ms: 500,
            rtt_probe_interval_ms: 1_000,
            wire_profile: WireProfile::Rfc9897,
            busy_poll_us: 0,
            sched_slice_us: 100,
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
        let base = self.settings.connection_config(plan.tun_mtu as usize);
        ConnectionConfig {
            max_gso_segments: if self.offload {
                self.gso_segments.clamp(1, 64)
            } else {
                1
            },
            wire_profile: self.wire_profile,
            send_queue: SendQueueConfig {
                max_delay: ms_opt(self.send_queue_max_delay_ms),
                ..base.send_queue
            },
            loss: LossConfig {
                // A path a forged packet disturbed comes back one backoff
                // sooner, so a forger costs the tunnel less; the simulator
                // keeps the published timing.
                first_probe_at_base_rto: true,
                ..base.loss
            },
            mp: MpConfig {
                max_paths: self.max_paths,
                ..base.mp
            },
            lifetime: LifetimeConfig {
                keepalive_interval: ms_opt(self.keepalive_ms),
                path_idle_timeout: ms_opt(self.path_idle_timeout_ms),
                idle_timeout: ms_opt(self.idle_timeout_ms),
                rtt_probe_interval: ms_opt(self.rtt_probe_interval_ms),
                ..base.lifetime
            },
            ..base
        }
    }
}

/// Operations: control socket, metrics.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpsConfig {
    /// Unix socket for `mpdccp status` (JSON).
    pub control_socket: PathBuf,
    /// Optional Prometheus text endpoint, e.g. `"127.0.0.1:9191"`.
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

/// How a path's DCCP packets travel.
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
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Dccp => "dccp",
            Transport::UDccp => "udccp",
        }
    }

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
    /// `"open"`, `"authenticated"` or `"protected"`; default: authenticated
    /// when `server_public_key` is set, else open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthMode>,
    /// This client's X25519 private key (base64, mode 0600; `mpdccp genkey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<PathBuf>,
    /// Joins go to the address the server advertises (MP_ADDADDR), waited
    /// for up to 1 s after the connection opens: a gateway fleet behind
    /// an anycast `server` address (docs/FLEET.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub join_advertised_address: bool,
    /// The server's public key (base64; `mpdccp pubkey < server.key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_public_key: Option<String>,
    /// Optional pre-shared key file (base64, mode 0600), as the server's peer entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk_file: Option<PathBuf>,
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
    /// Packet threads (`daemon/workers.rs`): 1 = one loop as always; N > 1
    /// = N workers, each with its own UDP socket (`SO_REUSEPORT` group),
    /// TUN queue (`IFF_MULTI_QUEUE`) and share of the connections. UDP only.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// Most inner addresses learned per server (routing of TUN packets to clients).
    #[serde(default = "default_max_routes")]
    pub max_learned_addresses: usize,
    #[serde(default)]
    pub seed: u64,
    /// `"open"`, `"authenticated"` or `"protected"`; required when `listen`
    /// is not a loopback address (open is the default only on loopback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthMode>,
    /// The server's X25519 private key (base64, mode 0600; `mpdccp genkey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<PathBuf>,
    /// The clients allowed in (authenticated modes): `[[peer]]` with
    /// `name`, `public_key`, `allowed_ips`, optional `psk_file`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer: Vec<PeerConfig>,
    #[serde(default)]
    pub limits: LimitsConfig,
    /// One host of a gateway fleet behind an anycast address
    /// (docs/FLEET.md, `fleet.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<super::fleet::FleetConfig>,
}

impl ServerConfig {
    /// 1 024: `mpdccp bench clients` measured 7.8 kB of server memory per client.
    pub const DEFAULT_MAX_CLIENTS: usize = 1024;
    pub const DEFAULT_MAX_LEARNED_ADDRESSES: usize = 65_536;
    /// More threads than this gain nothing on the hosts we measure.
    pub const MAX_WORKERS: usize = 64;
}

fn default_max_clients() -> usize {
    ServerConfig::DEFAULT_MAX_CLIENTS
}
fn default_workers() -> usize {
    1
}
fn default_max_routes() -> usize {
    ServerConfig::DEFAULT_MAX_LEARNED_ADDRESSES
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

impl ClientConfig {
    pub fn load(path: &Path) -> anyhow::Result<ClientConfig> {
        let mut c =
            Self::from_toml_str(&read(path)?).with_context(|| format!("{}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        super::keyfile::beside(dir, &mut c.private_key_file);
        super::keyfile::beside(dir, &mut c.psk_file);
        Ok(c)
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
        if self.auth_mode() != AuthMode::Open
            && (self.private_key_file.is_none() || self.server_public_key.is_none())
        {
            bail!(
                "auth = \"{}\" needs `private_key_file` and `server_public_key`",
                self.auth_mode().name()
            );
        }
        validate_profile(self.auth_mode(), &self.tunnel)?;
        validate_common(&self.tun, &self.tunnel)
    }

    /// The mode in force (see `auth`).
    pub fn auth_mode(&self) -> AuthMode {
        self.auth.unwrap_or(if self.server_public_key.is_some() {
            AuthMode::Authenticated
        } else {
            AuthMode::Open
        })
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
        let mut c =
            Self::from_toml_str(&read(path)?).with_context(|| format!("{}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        super::keyfile::beside(dir, &mut c.private_key_file);
        for p in &mut c.peer {
            super::keyfile::beside(dir, &mut p.psk_file);
        }
        Ok(c)
    }

    /// Parses and validates a server configuration.
    pub fn from_toml_str(text: &str) -> anyhow::Result<ServerConfig> {
        let c: ServerConfig = toml::from_str(text)?;
        for a in &c.dccp_listen {
            if a.is_unspecified() {
                bail!("dccp_listen: {a}: native DCCP needs specific addresses (checksum pseudo-header)");
            }
        }
        if !(1..=ServerConfig::MAX_WORKERS).contains(&c.workers) {
            bail!("workers = {}: 1..={}", c.workers, ServerConfig::MAX_WORKERS);
        }
        if c.workers > 1 && (!c.dccp_listen.is_empty() || c.udccp_listen.is_some()) {
            bail!("workers > 1 serves UDP (RFC 6773) only: no dccp_listen or udccp_listen");
        }
        c.validate_auth()?;
        validate_profile(c.auth_mode(), &c.tunnel)?;
        validate_common(&c.tun, &c.tunnel)?;
        if let Some(f) = &c.fleet {
            f.validate()?;
            // The host id travels in the CI; the k5.10 profile's joins carry a key hash instead.
            if c.tunnel.wire_profile == WireProfile::ReferenceK510 {
                bail!("[fleet] needs a wire profile with connection identifiers in MP_JOIN (not k5.10)");
            }
            if c.workers > 1 {
                bail!("[fleet] runs with workers = 1 for now");
            }
        }
        Ok(c)
    }

    /// The mode in force: `auth`, or open when listening on loopback only.
    pub fn auth_mode(&self) -> AuthMode {
        self.auth.unwrap_or(AuthMode::Open)
    }

    fn validate_auth(&self) -> anyhow::Result<()> {
        match self.auth {
            None if !self.listen.ip().is_loopback() || !self.dccp_listen.is_empty() => bail!(
                "listen = {}: a server reachable beyond loopback needs an explicit \
                 `auth`: \"authenticated\" (configured [[peer]]s, see docs/SECURITY.md) \
                 or \"open\" (RFC 9897 key type 0: any host gets a tunnel)",
                self.listen
            ),
            Some(AuthMode::Authenticated | AuthMode::Protected) => {
                if self.private_key_file.is_none() {
                    bail!(
                        "auth = \"{}\" needs `private_key_file`",
                        self.auth_mode().name()
                    );
                }
                if self.peer.is_empty() {
                    bail!(
                        "auth = \"{}\" needs at least one [[peer]]",
                        self.auth_mode().name()
                    );
                }
                let mut names: Vec<&str> = self.peer.iter().map(|p| p.name.as_str()).collect();
                names.sort_unstable();
                if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                    bail!("[[peer]] name {:?} appears twice", w[0]);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// The reference kernel's layouts carry plain keys (key type 0) only.
fn validate_profile(auth: AuthMode, tunnel: &TunnelConfig) -> anyhow::Result<()> {
    if tunnel.wire_profile != WireProfile::Rfc9897 && auth != AuthMode::Open {
        bail!(
            "tunnel.wire_profile = {:?} speaks the reference kernel's plain keys: it needs auth = \"open\"",
            tunnel.wire_profile.name()
        );
    }
    Ok(())
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
    use mpdccp_proto::conn::{CoDelConfig, DEFAULT_SEND_QUEUE_FLOWS};
    use mpdccp_proto::reorder::ReorderKind;
    use mpdccp_proto::sched::SchedulerKind;

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

    /// The daemon's tunnel defaults are the shared ones, one definition:
    /// the same whether `[tunnel]` is absent, partial or on either end; a
    /// key given still wins.
    #[test]
    fn the_daemon_defaults_are_the_shared_ones() {
        assert_eq!(TunnelConfig::default().settings, TunnelSettings::default());
        let client = |tunnel: &str| {
            format!("server = \"10.1.2.2:6773\"\n{tunnel}[[path]]\ninterface = \"p1\"\n")
        };
        for text in [client(""), client("[tunnel]\nkeepalive_ms = 3000\n")] {
            let c = ClientConfig::from_toml_str(&text).unwrap();
            assert_eq!(c.tunnel.settings, TunnelSettings::default(), "{text}");
        }
        let c =
            ClientConfig::from_toml_str(&client("[tunnel]\nreorder = \"active-fixed\"\n")).unwrap();
        assert_eq!(c.tunnel.settings.reorder, ReorderKind::ActiveFixed);
        assert_eq!(
            c.tunnel.settings.scheduler,
            TunnelSettings::default().scheduler
        );
        let s =
            ServerConfig::from_toml_str("listen = \"0.0.0.0:6773\"\nauth = \"open\"\n").unwrap();
        assert_eq!(s.tunnel.settings, TunnelSettings::default());
        // The benchmark's choice (docs/AGGREGATION.md, "Defaults").
        assert_eq!(s.tunnel.settings.scheduler, SchedulerKind::Acpf);
        assert_eq!(s.tunnel.settings.reorder, ReorderKind::PerFlow);
        assert_eq!(s.tunnel.settings.aqm, Aqm::FqCodel);
    }

    /// `rtt_probe_interval_ms` reaches the core: the default is the core's
    /// own (1 s), 0 turns the probes off, another value is taken as is.
    #[test]
    fn rtt_probe_interval_reaches_the_core() {
        let plan = crate::mtu::MtuPlan::new(1500, false, 32);
        let core = |tunnel: &str| {
            let text =
                format!("server = \"10.1.2.2:6773\"\n{tunnel}[[path]]\ninterface = \"p1\"\n");
            ClientConfig::from_toml_str(&text)
                .unwrap()
                .tunnel
                .connection_config(&plan)
                .lifetime
                .rtt_probe_interval
        };
        assert_eq!(
            core(""),
            ConnectionConfig::default().lifetime.rtt_probe_interval
        );
        assert_eq!(core(""), Some(Duration::from_secs(1)));
        assert_eq!(core("[tunnel]\nrtt_probe_interval_ms = 0\n"), None);
        assert_eq!(
            core("[tunnel]\nrtt_probe_interval_ms = 250\n"),
            Some(Duration::from_millis(250))
        );
    }

    /// `aqm` reaches the core: `fq_codel` (default) is flow queues with
    /// CoDel each, `codel` one FIFO with CoDel, `none` one bare FIFO; the
    /// CoDel parameters apply to both CoDel modes.
    #[test]
    fn aqm_reaches_the_core() {
        let plan = crate::mtu::MtuPlan::new(1500, false, 32);
        let core = |tunnel: &str| {
            let text =
                format!("server = \"10.1.2.2:6773\"\n{tunnel}[[path]]\ninterface = \"p1\"\n");
            let c = ClientConfig::from_toml_str(&text)
                .unwrap()
                .tunnel
                .connection_config(&plan);
            (c.send_queue.flows, c.send_queue.codel)
        };
        // The tunnel's default target is 15 ms, not RFC 8289's 5 ms (a
        // bulk flow's standing queue waits in its own flow queue,
        // `TunnelSettings::codel_target_ms`); the interval is the RFC's.
        let codel = Some(CoDelConfig {
            target: std::time::Duration::from_millis(15),
            ..CoDelConfig::default()
        });
        assert_eq!(core(""), (DEFAULT_SEND_QUEUE_FLOWS, codel));
        assert_eq!(DEFAULT_SEND_QUEUE_FLOWS, 1024);
        assert_eq!(
            core("[tunnel]\naqm = \"fq_codel\"\n"),
            (DEFAULT_SEND_QUEUE_FLOWS, codel)
        );
        assert_eq!(core("[tunnel]\naqm = \"codel\"\n"), (0, codel));
        assert_eq!(core("[tunnel]\naqm = \"none\"\n"), (0, None));
        let quantum = |tunnel: &str| {
            let text =
                format!("server = \"10.1.2.2:6773\"\n{tunnel}[[path]]\ninterface = \"p1\"\n");
            ClientConfig::from_toml_str(&text)
                .map(|c| c.tunnel.connection_config(&plan).send_queue.flow_quantum)
        };
        assert_eq!(quantum("").unwrap(), 0);
        assert_eq!(
            quantum("[tunnel]\nfq_quantum_bytes = 65536\n").unwrap(),
            65536
        );
        assert!(quantum("[tunnel]\nfq_quantum_bytes = 2000000\n").is_err());
        let (_, c) = core("[tunnel]\ncodel_target_ms = 2.5\n");
        assert_eq!(c.unwrap().target, Duration::from_micros(2500));
        let text = "server = \"10.1.2.2:6773\"\n[tunnel]\naqm = \"fq-codel\"\n\
                    [[path]]\ninterface = \"p1\"\n";
        assert!(ClientConfig::from_toml_str(text).is_err());
    }

    /// `wire_profile` reaches the core by name; the reference layouts need
    /// open mode; an unknown name lists the valid ones.
    #[test]
    fn wire_profile_reaches_the_core_and_needs_open_mode() {
        let server = |profile: &str, auth: &str| {
            format!(
                "listen = \"0.0.0.0:6773\"\nauth = \"{auth}\"\nprivate_key_file = \"/k\"\n\
                 [tunnel]\nwire_profile = \"{profile}\"\n\
                 [[peer]]\nname = \"a\"\npublic_key = \"x\"\nallowed_ips = []\n"
            )
        };
        let c = ServerConfig::from_toml_str(&server("reference-k4.14", "open")).unwrap();
        assert_eq!(c.tunnel.wire_profile, WireProfile::ReferenceK414);
        let plan = crate::daemon::mtu_plan(&c.tun, c.tunnel.path_mtu, false, 8);
        assert_eq!(
            c.tunnel.connection_config(&plan).wire_profile,
            WireProfile::ReferenceK414
        );
        let err = ServerConfig::from_toml_str(&server("reference-k5.10", "authenticated"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs auth = \"open\""), "{err}");
        let err = ServerConfig::from_toml_str(&server("k4", "open"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("reference-k4.14"), "{err}");
        // Round trip through the TOML the testbed writes.
        let text = toml::to_string(&c.tunnel).unwrap();
        assert!(
            text.contains("wire_profile = \"reference-k4.14\""),
            "{text}"
        );
    }

    /// An unknown name in the `[tunnel]` table is an error that lists the
    /// valid names, for each kind.
    #[test]
    fn unknown_names_are_errors_listing_the_valid_ones() {
        let base = "listen = \"0.0.0.0:6773\"\nauth = \"open\"\n[tunnel]\n";
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
    fn server_workers_default_one_and_bounded() {
        let base = "listen = \"0.0.0.0:6773\"\nauth = \"open\"\n";
        assert_eq!(ServerConfig::from_toml_str(base).unwrap().workers, 1);
        let two = ServerConfig::from_toml_str(&format!("{base}workers = 2\n")).unwrap();
        assert_eq!(two.workers, 2);
        assert!(ServerConfig::from_toml_str(&format!("{base}workers = 0\n")).is_err());
        assert!(ServerConfig::from_toml_str(&format!("{base}workers = 65\n")).is_err());
        // UDP only: the raw and U-DCCP listeners stay single-threaded.
        let udccp = format!("{base}workers = 2\nudccp_listen = \"0.0.0.0:6774\"\n");
        assert!(ServerConfig::from_toml_str(&udccp).is_err());
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
            "listen = \"0.0.0.0:6773\"\nauth = \"open\"\nudccp_listen = \"0.0.0.0:6774\"\n",
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
            "listen = \"0.0.0.0:6773\"\nauth = \"open\"\ndccp_listen = [\"10.1.2.2\", \"fd00::2\"]\n",
        )
        .unwrap();
        assert_eq!(s.dccp_listen.len(), 2);
        assert!(ServerConfig::from_toml_str(
            "listen = \"0.0.0.0:6773\"\nauth = \"open\"\ndccp_listen = [\"0.0.0.0\"]\n"
        )
        .is_err());
    }

    /// A server reachable beyond loopback must say who may connect; the
    /// authenticated modes need a key and peers; `[limits]` reach the gate.
    #[test]
    fn auth_is_explicit_beyond_loopback_and_needs_keys() {
        let err = ServerConfig::from_toml_str("listen = \"0.0.0.0:6773\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs an explicit `auth`"), "{err}");
        let lo = ServerConfig::from_toml_str("listen = \"127.0.0.1:6773\"\n").unwrap();
        assert_eq!(lo.auth_mode(), AuthMode::Open);
        let auth = "listen = \"0.0.0.0:6773\"\nauth = \"authenticated\"\n";
        let err = ServerConfig::from_toml_str(auth).unwrap_err().to_string();
        assert!(err.contains("private_key_file"), "{err}");
        let peer = "[[peer]]\nname = \"cpe1\"\npublic_key = \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"\nallowed_ips = [\"10.99.1.0/24\"]\n";
        let ok = format!("{auth}private_key_file = \"/etc/mpdccp/server.key\"\n[limits]\ncookie_threshold = 4\nhandshakes_per_sec = 7\n{peer}");
        let c = ServerConfig::from_toml_str(&ok).unwrap();
        assert_eq!(c.peer.len(), 1);
        assert_eq!(c.limits.gate().cookie_threshold, 4);
        assert_eq!(c.limits.rate().per_second, 7);
        assert_eq!(c.limits.gate().max_half_open_per_peer, 2);
        let twice = format!("{ok}{peer}");
        assert!(ServerConfig::from_toml_str(&twice).is_err());
        let back = ServerConfig::from_toml_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back.peer, c.peer);
        // Client: a server key means authenticated, which needs our key.
        let client = "server = \"10.1.2.2:6773\"\nserver_public_key = \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"\n[[path]]\ninterface = \"p1\"\n";
        let err = ClientConfig::from_toml_str(client).unwrap_err().to_string();
        assert!(err.contains("private_key_file"), "{err}");
        let c =
            ClientConfig::from_toml_str(&format!("private_key_file = \"/k\"\n{client}")).unwrap();
        assert_eq!(c.auth_mode(), AuthMode::Authenticated);
    }

    /// The shipped examples parse, and their keys and prefixes are valid.
    #[test]
    fn examples_parse_with_peers_and_keys() {
        let s =
            ServerConfig::from_toml_str(include_str!("../../../../deploy/examples/server.toml"))
                .unwrap();
        assert_eq!(s.auth_mode(), AuthMode::Authenticated);
        let peers = super::super::keyfile::peer_table(&s.peer).unwrap();
        assert_eq!(peers.len(), 2);
        let c =
            ClientConfig::from_toml_str(include_str!("../../../../deploy/examples/client.toml"))
                .unwrap();
        assert_eq!(c.auth_mode(), AuthMode::Authenticated);
        super::super::keyfile::decode_key(c.server_public_key.as_deref().unwrap()).unwrap();
    }

    #[test]
    fn cidr() {
        assert!(parse_cidr("10.0.0.1/24").is_ok());
        assert!(parse_cidr("fd00::1/64").is_ok());
        assert!(parse_cidr("10.0.0.1/33").is_err());
        assert!(parse_cidr("10.0.0.1").is_err());
    }
}
