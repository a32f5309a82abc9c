//! The namespace topology of the testbed and the tests.
//!
//! ```text
//!  client ns                router ns r1 (netem)            server ns
//!  p1 10.1.1.2/24 ─veth─ c 10.1.1.1 │ s 10.1.2.1 ─veth─ p1 10.1.2.2/24
//!  p2 10.2.1.2/24 ─veth─ c 10.2.1.1 │ s 10.2.2.1 ─veth─ p2 10.2.2.2/24
//!  …                         router ns r2 …
//! ```
//! Path `i` (1-based) uses 10.i.1.0/24 on the client side and 10.i.2.0/24 on
//! the server side; each router namespace runs one `mpdccp netem` that holds
//! the packets of both directions. Names carry a per-process prefix, and all
//! of it — processes first, then namespaces (which take their veths with
//! them) — is removed when the [`Topology`] drops.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use anyhow::{bail, Context};

use mpdccp_proto::reorder::ReorderKind;

use crate::emu::{read_samples_from, Lateness, Sample};
use crate::netns::{self, spawn_in_netns, veth_pair, Netns, Proc};
use crate::probe::{self, Arrival, ProbeConfig, SendLog};
use mpdccp_net::daemon::config::{
    AuthMode, ClientConfig, ClientPath, OpsConfig, ServerConfig, Transport, TunConfig, TunnelConfig,
};
use mpdccp_net::daemon::keyfile::{encode_key, PeerConfig};

/// Addresses and interface names of one path.
#[derive(Clone, Debug)]
pub struct PathAddrs {
    /// Interface name in the client and in the server namespace (`p1`, …).
    pub iface: String,
    pub client_ip: Ipv4Addr,
    pub router_client_ip: Ipv4Addr,
    pub router_server_ip: Ipv4Addr,
    pub server_ip: Ipv4Addr,
}

impl PathAddrs {
    /// The addresses of path `i` (1-based).
    pub fn new(i: usize) -> PathAddrs {
        let n = i as u8;
        PathAddrs {
            iface: format!("p{i}"),
            client_ip: Ipv4Addr::new(10, n, 1, 2),
            router_client_ip: Ipv4Addr::new(10, n, 1, 1),
            router_server_ip: Ipv4Addr::new(10, n, 2, 1),
            server_ip: Ipv4Addr::new(10, n, 2, 2),
        }
    }
}

/// Client, one router per path, server. Field order matters: processes are
/// stopped before the namespaces are deleted.
pub struct Topology {
    pub procs: Vec<Proc>,
    pub client: Netns,
    pub server: Netns,
    pub routers: Vec<Netns>,
    pub paths: Vec<PathAddrs>,
    /// Scratch directory for ready files and logs, removed on drop.
    pub dir: PathBuf,
    /// `SCHED_FIFO` priority the daemons run at (0 = normal scheduling).
    pub daemon_rt_priority: u8,
    /// Sample files of the emulators [`Topology::start_emulator`] started,
    /// by path index.
    emu_stats: Vec<(usize, PathBuf)>,
}

/// A point in the emulators' sample files (see [`Topology::emulator_mark`]).
#[derive(Clone, Debug, Default)]
pub struct EmuMark(Vec<(PathBuf, u64)>);

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Topology {
    /// Builds `n_paths` paths (1..=9). Needs root.
    pub fn build(n_paths: usize) -> anyhow::Result<Topology> {
        if !netns::is_root() {
            bail!("building network namespaces needs root (CAP_NET_ADMIN); run as root");
        }
        if !(1..=9).contains(&n_paths) {
            bail!("1..=9 paths supported, got {n_paths}");
        }
        let prefix = format!(
            "{}x{}",
            netns::unique_prefix(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(format!("mpdccp-{prefix}"));
        std::fs::create_dir_all(&dir)?;
        let client = Netns::new(&format!("{prefix}c"))?;
        let server = Netns::new(&format!("{prefix}s"))?;
        let mut topo = Topology {
            procs: Vec::new(),
            client,
            server,
            routers: Vec::new(),
            paths: Vec::new(),
            dir,
            daemon_rt_priority: 0,
            emu_stats: Vec::new(),
        };
        for i in 1..=n_paths {
            let r = Netns::new(&format!("{prefix}r{i}"))?;
            let a = PathAddrs::new(i);
            veth_pair(&a.iface, Some(&topo.client), "c", Some(&r))?;
            veth_pair("s", Some(&r), &a.iface, Some(&topo.server))?;
            let cidr = |ip: Ipv4Addr| format!("{ip}/24");
            topo.client
                .ip(&["addr", "add", &cidr(a.client_ip), "dev", &a.iface])?;
            topo.client.ip(&["link", "set", &a.iface, "up"])?;
            r.ip(&["addr", "add", &cidr(a.router_client_ip), "dev", "c"])?;
            r.ip(&["addr", "add", &cidr(a.router_server_ip), "dev", "s"])?;
            r.ip(&["link", "set", "c", "up"])?;
            r.ip(&["link", "set", "s", "up"])?;
            topo.server
                .ip(&["addr", "add", &cidr(a.server_ip), "dev", &a.iface])?;
            topo.server.ip(&["link", "set", &a.iface, "up"])?;
            let net = |ip: Ipv4Addr| {
                let o = ip.octets();
                format!("{}.{}.{}.0/24", o[0], o[1], o[2])
            };
            topo.client.ip(&[
                "route",
                "add",
                &net(a.server_ip),
                "via",
                &a.router_client_ip.to_string(),
            ])?;
            topo.server.ip(&[
                "route",
                "add",
                &net(a.client_ip),
                "via",
                &a.router_server_ip.to_string(),
            ])?;
            // Without an emulator the router forwards directly (unshaped path).
            r.sysctl("net.ipv4.ip_forward", "1")?;
            topo.routers.push(r);
            topo.paths.push(a);
        }
        for ns in [&topo.client, &topo.server] {
            // Replies must leave by the interface they came in on, whatever rp_filter thinks.
            ns.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
            ns.sysctl("net.ipv4.conf.default.rp_filter", "0")?;
        }
        Ok(topo)
    }

    /// Turns off delayed acknowledgements in the client (`server = false`)
    /// or server namespace for TCP towards the other end of path `i`
    /// (0-based): the route there gets iproute2's `quickack 1`
    /// (RTAX_QUICKACK), so the kernel acks every segment at once, as the
    /// scenarios' TCP model does ("one ack per segment") instead of every
    /// second one.
    pub fn set_quickack(&self, i: usize, server: bool) -> anyhow::Result<()> {
        let a = &self.paths[i];
        let net = |ip: Ipv4Addr| {
            let o = ip.octets();
            format!("{}.{}.{}.0/24", o[0], o[1], o[2])
        };
        let (ns, dst, via) = if server {
            (&self.server, net(a.client_ip), a.router_server_ip)
        } else {
            (&self.client, net(a.server_ip), a.router_client_ip)
        };
        ns.ip(&[
            "route",
            "change",
            &dst,
            "via",
            &via.to_string(),
            "quickack",
            "1",
        ])
    }

    /// One ack per segment for TCP through the tunnel: a host route to the
    /// sender's tunnel address with `quickack 1` in the receiver's namespace
    /// (`server` = the receiver is the server), as [`Topology::set_quickack`]
    /// does for flows over a path.
    pub fn set_tunnel_quickack(&self, server: bool) -> anyhow::Result<()> {
        let (ns, dst) = if server {
            (&self.server, CLIENT_TUN_V4)
        } else {
            (&self.client, SERVER_TUN_V4)
        };
        ns.ip(&[
            "route",
            "replace",
            &format!("{dst}/32"),
            "dev",
            TUN_NAME,
            "quickack",
            "1",
        ])
    }

    /// Sets the MTU of every path's veths (client, both router sides,
    /// server). The emulator's TUN devices take up to
    /// [`crate::emu::TUN_MTU`], so this is the path MTU end to end.
    pub fn set_path_mtu(&self, mtu: u32) -> anyhow::Result<()> {
        let m = mtu.to_string();
        for (a, r) in self.paths.iter().zip(&self.routers) {
            self.client.ip(&["link", "set", &a.iface, "mtu", &m])?;
            r.ip(&["link", "set", "c", "mtu", &m])?;
            r.ip(&["link", "set", "s", "mtu", &m])?;
            self.server.ip(&["link", "set", &a.iface, "mtu", &m])?;
        }
        Ok(())
    }

    /// Builds `n_paths` paths, each through `mpdccp netem` with this
    /// one-way delay and rate (the usual start of a tunnel test).
    pub fn emulated(
        exe: &Path,
        n_paths: usize,
        delay_ms: u32,
        rate_mbps: u32,
    ) -> anyhow::Result<Topology> {
        let mut t = Topology::build(n_paths)?;
        let (d, r) = (delay_ms.to_string(), rate_mbps.to_string());
        for i in 0..n_paths {
            t.start_emulator(exe, i, &["--delay-ms", &d, "--rate-mbps", &r])?;
        }
        Ok(t)
    }

    /// `count` pings through the tunnel from the client to the server's
    /// inner IPv4 address and back the other way; an error (with ping's
    /// output) unless every one is answered.
    pub fn ping_both_ways(&self, count: u32) -> anyhow::Result<()> {
        let n = count.to_string();
        for (ns, dst) in [(&self.client, SERVER_TUN_V4), (&self.server, CLIENT_TUN_V4)] {
            let dst = dst.to_string();
            let out = ns.output("ping", &["-c", &n, "-i", "0.05", "-W", "2", "-q", &dst])?;
            if !out.contains(" 0% packet loss") {
                bail!("ping {} -> {dst}: {out}", ns.name());
            }
        }
        Ok(())
    }

    /// Starts `mpdccp netem` in router `i` (0-based) with `args` describing
    /// the path (e.g. `["--delay-ms","20"]` or `["--scenario",F,"--path",N]`),
    /// and waits until its TUNs and rules are in place.
    pub fn start_emulator(&mut self, exe: &Path, i: usize, args: &[&str]) -> anyhow::Result<()> {
        let ready = self.dir.join(format!("netem{i}.ready"));
        let _ = std::fs::remove_file(&ready);
        let ready_s = ready.to_string_lossy().into_owned();
        let mut all: Vec<&str> = vec![
            "netem",
            "--client-if",
            "c",
            "--server-if",
            "s",
            "--ready-file",
            &ready_s,
        ];
        all.extend_from_slice(args);
        // Its samples say whether the host kept the emulator on time: in the
        // caller's file, or in ours. A stale file of an earlier emulator
        // would give `emulator_mark` a wrong offset.
        let own = self.dir.join(format!("netem{i}.jsonl"));
        let own_s = own.to_string_lossy().into_owned();
        let stats = match stats_out_arg(args) {
            Some(f) => PathBuf::from(f),
            None => {
                all.extend(["--stats-out", &own_s]);
                own
            }
        };
        let _ = std::fs::remove_file(&stats);
        self.emu_stats.retain(|(j, _)| *j != i);
        self.emu_stats.push((i, stats));
        let exe_s = exe.to_string_lossy().into_owned();
        let mut p = self.routers[i].spawn(&exe_s, &all)?;
        let deadline = StdInstant::now() + Duration::from_secs(10);
        while !ready.exists() {
            if let Ok(Some(st)) = p.try_wait() {
                bail!("netem in router {} exited early: {st}", i + 1);
            }
            if StdInstant::now() > deadline {
                bail!("netem in router {} not ready after 10 s", i + 1);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.procs.push(p);
        Ok(())
    }

    /// Marks where the emulators' sample files end now, for
    /// [`Topology::emulator_late_since`].
    pub fn emulator_mark(&self) -> EmuMark {
        EmuMark(
            self.emu_stats
                .iter()
                .map(|(_, p)| (p.clone(), std::fs::metadata(p).map_or(0, |m| m.len())))
                .collect(),
        )
    }

    /// How late the emulators delivered since `mark`, over all of them and
    /// both directions.
    pub fn emulator_late_since(&self, mark: &EmuMark) -> Lateness {
        let samples: Vec<Sample> = mark
            .0
            .iter()
            .flat_map(|(p, off)| read_samples_from(p, *off))
            .collect();
        Lateness::of(&samples)
    }

    /// Runs `measure` and returns its result. A result that fails `passes`
    /// is measured again (`tries` times at most in all) when an emulator was
    /// late by more than `limit_us` during it: then the host stalled the
    /// link, and the result describes the stall, not the code under test. A
    /// failure with the emulators on time, or on the last attempt, is
    /// returned for the caller's assertion to report.
    pub fn measure_on_time<T>(
        &mut self,
        tries: usize,
        limit_us: u64,
        mut measure: impl FnMut(&mut Topology) -> T,
        passes: impl Fn(&T) -> bool,
    ) -> T {
        let mut attempt = 1;
        loop {
            let mark = self.emulator_mark();
            let r = measure(self);
            let ok = passes(&r);
            if !ok {
                // The emulator writes a sample per 100 ms interval: let the
                // interval that ended with the measurement reach the file.
                std::thread::sleep(Duration::from_millis(250));
            }
            let late = self.emulator_late_since(&mark);
            eprintln!(
                "attempt {attempt}: {}; emulator lateness per stats interval p50 {} / p90 {} / max {} µs",
                if ok { "passes" } else { "fails" },
                late.p50_us,
                late.p90_us,
                late.max_us
            );
            if ok || attempt >= tries || late.max_us <= limit_us {
                return r;
            }
            eprintln!(
                "attempt {attempt} failed with the emulator late by up to {} µs (> {limit_us}): \
                 the host stalled the link; measuring again",
                late.max_us
            );
            attempt += 1;
        }
    }

    /// Spawns a process in the client or server namespace and keeps its guard.
    pub fn spawn_in(&mut self, server: bool, prog: &str, args: &[&str]) -> anyhow::Result<usize> {
        let ns = if server { &self.server } else { &self.client };
        let p = ns
            .spawn(prog, args)
            .with_context(|| format!("spawn {prog}"))?;
        self.procs.push(p);
        Ok(self.procs.len() - 1)
    }
}

/// The file of a `--stats-out F` or `--stats-out=F` among emulator arguments.
fn stats_out_arg<'a>(args: &[&'a str]) -> Option<&'a str> {
    args.iter()
        .enumerate()
        .find_map(|(k, a)| match a.strip_prefix("--stats-out") {
            Some("") => args.get(k + 1).copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        })
}

/// Tunnel settings for [`Topology::start_tunnel`].
#[derive(Clone, Debug)]
pub struct TunnelOpts {
    /// The `[tunnel]` table of both daemons.
    pub tunnel: TunnelConfig,
    /// TUN MTU of both daemons; 0 = from the path MTU.
    pub tun_mtu: u32,
    /// TUN queue of both daemons, packets (`[tun] txqueuelen`).
    pub tun_txqueuelen: u32,
    /// Paths (0-based) the client uses; empty = all.
    pub paths: Vec<usize>,
    /// Wait until this many paths are established (0 = all used paths).
    pub wait_paths: usize,
    /// `RUST_LOG` for the daemons.
    pub log: String,
    /// MP_PRIO per used path (default 3).
    pub priorities: Vec<u8>,
    /// Run both daemons under `SCHED_FIFO` at this priority (`chrt -f`);
    /// 0 = normal scheduling. See [`Topology::start_tunnel`].
    pub rt_priority: u8,
    /// With `rt_priority` 0: the daemons' nice value (`nice -n`; 0 =
    /// unchanged). The bench's comparison with wireguard-go runs both
    /// tunnels at nice -20 ([`crate::peers::PEERS_NICE`]).
    pub nice: i8,
    /// Transport per used path (default `udp`); when any is `dccp` the
    /// server also listens for native DCCP on every path's address, when
    /// any is `udccp` for U-DCCP on [`SERVER_UDCCP_PORT`].
    pub transports: Vec<Transport>,
    /// Security mode of both daemons (default `open`). `authenticated` and
    /// `protected` give each a lab key pair ([`lab_private_key`]) and the
    /// server one `[[peer]]`, the client, with its tunnel addresses.
    pub auth: AuthMode,
    /// The server's `workers` (packet threads; default 1).
    pub server_workers: usize,
}

impl Default for TunnelOpts {
    /// The daemons' defaults, except reordering: the lab's two-path tests
    /// exercise `active-fixed` with a 15 ms timeout.
    fn default() -> Self {
        let mut tunnel = TunnelConfig::default();
        tunnel.settings.reorder = ReorderKind::ActiveFixed;
        tunnel.settings.reorder_timeout_ms = Some(15.0);
        TunnelOpts {
            tunnel,
            tun_mtu: 0,
            tun_txqueuelen: mpdccp_net::daemon::config::DEFAULT_TUN_TXQUEUELEN,
            paths: Vec::new(),
            wait_paths: 0,
            log: "info".into(),
            priorities: Vec::new(),
            rt_priority: 0,
            nice: 0,
            transports: Vec::new(),
            auth: AuthMode::Open,
            server_workers: 1,
        }
    }
}

/// The TUN device's name in the client's and the server's namespace.
pub const TUN_NAME: &str = "mpd0";

/// The two daemons' configurations for a topology in `dir` with `paths`
/// (typed; [`Topology::start_tunnel`] writes them with `toml::to_string`).
pub fn daemon_configs(
    dir: &Path,
    paths: &[PathAddrs],
    opts: &TunnelOpts,
) -> (ServerConfig, ClientConfig) {
    (
        server_config(dir, paths, opts),
        client_config(dir, paths, opts),
    )
}

/// A daemon's TUN device with the addresses `v4`/24 and `v6`/64.
fn lab_tun(opts: &TunnelOpts, v4: Ipv4Addr, v6: &str) -> TunConfig {
    TunConfig {
        name: TUN_NAME.into(),
        addresses: vec![format!("{v4}/24"), format!("{v6}/64")],
        mtu: opts.tun_mtu,
        txqueuelen: opts.tun_txqueuelen,
        ..TunConfig::default()
    }
}

/// A daemon's control socket in `dir`.
fn lab_ops(dir: &Path, server: bool) -> OpsConfig {
    OpsConfig {
        control_socket: dir.join(if server { "server.sock" } else { "client.sock" }),
        prometheus: None,
    }
}

/// The server: listening on every transport of `opts`, with the lab's
/// client as its one peer when authenticated.
fn server_config(dir: &Path, paths: &[PathAddrs], opts: &TunnelOpts) -> ServerConfig {
    let keyed = opts.auth != AuthMode::Open;
    ServerConfig {
        listen: SocketAddr::from(([0, 0, 0, 0], SERVER_PORT)),
        tun: lab_tun(opts, SERVER_TUN_V4, SERVER_TUN_V6),
        tunnel: opts.tunnel.clone(),
        ops: lab_ops(dir, true),
        dccp_listen: if opts.transports.contains(&Transport::Dccp) {
            paths.iter().map(|a| IpAddr::V4(a.server_ip)).collect()
        } else {
            Vec::new()
        },
        udccp_listen: opts
            .transports
            .contains(&Transport::UDccp)
            .then(|| SocketAddr::from(([0, 0, 0, 0], SERVER_UDCCP_PORT))),
        max_clients: ServerConfig::DEFAULT_MAX_CLIENTS,
        workers: opts.server_workers,
        max_learned_addresses: ServerConfig::DEFAULT_MAX_LEARNED_ADDRESSES,
        seed: 7,
        auth: Some(opts.auth),
        private_key_file: keyed.then(|| dir.join(LAB_KEY_FILES[0])),
        peer: if keyed {
            vec![PeerConfig {
                name: "client".into(),
                public_key: encode_key(&mpdccp_proto::auth::public_key(&lab_private_key(1))),
                psk_file: None,
                allowed_ips: vec![
                    format!("{CLIENT_TUN_V4}/32"),
                    format!("{CLIENT_TUN_V6}/128"),
                ],
            }]
        } else {
            Vec::new()
        },
        limits: Default::default(),
        fleet: None,
    }
}

/// The client: one path a used topology path (`opts.paths`, default all),
/// each with its transport and priority from `opts`.
fn client_config(dir: &Path, paths: &[PathAddrs], opts: &TunnelOpts) -> ClientConfig {
    let keyed = opts.auth != AuthMode::Open;
    let used: Vec<usize> = if opts.paths.is_empty() {
        (0..paths.len()).collect()
    } else {
        opts.paths.clone()
    };
    let path = used
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let a = &paths[i];
            let transport = opts.transports.get(k).copied().unwrap_or_default();
            let port = match transport {
                Transport::UDccp => SERVER_UDCCP_PORT,
                _ => SERVER_PORT,
            };
            ClientPath {
                name: a.iface.clone(),
                interface: a.iface.clone(),
                remote: Some(SocketAddr::from((a.server_ip, port))),
                priority: opts.priorities.get(k).copied().unwrap_or(3),
                transport,
                ..ClientPath::default()
            }
        })
        .collect();
    ClientConfig {
        server: None,
        tun: lab_tun(opts, CLIENT_TUN_V4, CLIENT_TUN_V6),
        tunnel: opts.tunnel.clone(),
        ops: lab_ops(dir, false),
        path,
        rejoin_backoff_ms: 200,
        seed: 9,
        auth: keyed.then_some(opts.auth),
        private_key_file: keyed.then(|| dir.join(LAB_KEY_FILES[1])),
        server_public_key: keyed
            .then(|| encode_key(&mpdccp_proto::auth::public_key(&lab_private_key(0)))),
        psk_file: None,
        join_advertised_address: false,
    }
}

/// Key files of the lab's server (0) and client (1) in the topology's directory.
pub const LAB_KEY_FILES: [&str; 2] = ["server.key", "client.key"];

/// The lab's X25519 private key of the server (0) or client (1): fixed
/// (seeded), so a lab run is repeatable; never a key for a real network.
pub fn lab_private_key(role: u8) -> [u8; 32] {
    use rand_chacha::rand_core::SeedableRng;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x6c61_6200 + u64::from(role));
    mpdccp_proto::auth::keypair(&mut rng).0
}

/// Writes the lab's key files into `dir` with mode 0600 (the daemons refuse
/// keys others may read).
fn write_lab_keys(dir: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    for (role, file) in LAB_KEY_FILES.iter().enumerate() {
        let path = dir.join(file);
        let _ = std::fs::remove_file(&path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("{}", path.display()))?;
        writeln!(f, "{}", encode_key(&lab_private_key(role as u8)))?;
    }
    Ok(())
}

/// Inner (tunnel) addresses.
pub const SERVER_TUN_V4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
pub const CLIENT_TUN_V4: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
pub const SERVER_TUN_V6: &str = "fd99::1";
pub const CLIENT_TUN_V6: &str = "fd99::2";
/// The server's UDP port.
pub const SERVER_PORT: u16 = 6773;
/// The server's U-DCCP port (`udccp_listen`).
pub const SERVER_UDCCP_PORT: u16 = 6774;

impl Topology {
    pub fn control_socket(&self, server: bool) -> PathBuf {
        self.dir
            .join(if server { "server.sock" } else { "client.sock" })
    }

    pub fn log_file(&self, server: bool) -> PathBuf {
        self.dir
            .join(if server { "server.log" } else { "client.log" })
    }

    /// The two daemons' configurations for `opts` (see [`daemon_configs`]).
    pub fn daemon_configs(&self, opts: &TunnelOpts) -> (ServerConfig, ClientConfig) {
        daemon_configs(&self.dir, &self.paths, opts)
    }

    /// Starts `mpdccp server` and `mpdccp client` and waits until the
    /// connection is established on the requested paths.
    pub fn start_tunnel(&mut self, exe: &Path, opts: &TunnelOpts) -> anyhow::Result<()> {
        let (sc, cc, used) = self.write_daemon_files(opts)?;
        let (sc_s, cc_s) = (
            sc.to_string_lossy().into_owned(),
            cc.to_string_lossy().into_owned(),
        );
        let prefix = self.daemon_command_prefix(exe, opts);
        let (prog, pre) = prefix.split_first().expect("prefix is never empty");
        let args = |role: &'static str, cfg: &'static str, file: &str| -> Vec<String> {
            pre.iter()
                .map(|s| s.to_string())
                .chain([role.to_string(), cfg.to_string(), file.to_string()])
                .collect()
        };
        let server_args = args("server", "--config", &sc_s);
        let server_refs: Vec<&str> = server_args.iter().map(String::as_str).collect();
        let p = self
            .server
            .spawn_logged(prog, &server_refs, &self.log_file(true))?;
        self.procs.push(p);
        wait_for(Duration::from_secs(10), || {
            self.control_socket(true).exists()
        })
        .with_context(|| format!("server did not start; log:\n{}", self.log_tail(true)))?;
        let client_args = args("client", "--config", &cc_s);
        let client_refs: Vec<&str> = client_args.iter().map(String::as_str).collect();
        let p = self
            .client
            .spawn_logged(prog, &client_refs, &self.log_file(false))?;
        self.procs.push(p);
        let want = if opts.wait_paths == 0 {
            used
        } else {
            opts.wait_paths
        };
        wait_for(Duration::from_secs(15), || self.established_paths() >= want).with_context(
            || {
                format!(
                    "tunnel not established on {want} paths; client log:\n{}\nserver log:\n{}",
                    self.log_tail(false),
                    self.log_tail(true)
                )
            },
        )?;
        Ok(())
    }

    /// Writes `server.toml`, `client.toml` (and the lab's keys when
    /// authenticated) into the topology's directory. Returns the two
    /// files and the number of client paths.
    fn write_daemon_files(&self, opts: &TunnelOpts) -> anyhow::Result<(PathBuf, PathBuf, usize)> {
        let (server_cfg, client_cfg) = self.daemon_configs(opts);
        let used = client_cfg.path.len();
        let server_cfg = toml::to_string(&server_cfg).context("server.toml")?;
        let client_cfg = toml::to_string(&client_cfg).context("client.toml")?;
        let sc = self.dir.join("server.toml");
        let cc = self.dir.join("client.toml");
        std::fs::write(&sc, server_cfg)?;
        std::fs::write(&cc, client_cfg)?;
        if opts.auth != AuthMode::Open {
            write_lab_keys(&self.dir)?;
        }
        Ok((sc, cc, used))
    }

    /// The command line before a daemon's role: its scheduling (`chrt -f`
    /// or `nice -n`), then `env RUST_LOG=… EXE`. Records the real-time
    /// priority the daemons get.
    fn daemon_command_prefix(&mut self, exe: &Path, opts: &TunnelOpts) -> Vec<String> {
        let exe_s = exe.to_string_lossy().into_owned();
        let env_log = format!("RUST_LOG={}", opts.log);
        // The two daemons stand for two separate machines (CPE and
        // aggregation server); on one shared host a descheduled daemon
        // stamps acks late and sends in bursts, which a real-time class
        // avoids (see the README, §Testbed).
        let prio = opts.rt_priority.to_string();
        let mut prefix: Vec<&str> = Vec::new();
        if opts.rt_priority > 0 {
            // Without CAP_SYS_NICE (or `chrt`) the daemons still run, slower to react.
            let ok = std::process::Command::new("chrt")
                .args(["-f", &prio, "true"])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                prefix.extend(["chrt", "-f", &prio]);
                self.daemon_rt_priority = opts.rt_priority;
            } else {
                tracing::warn!(
                    "cannot run the daemons under SCHED_FIFO (`chrt -f {prio}` failed); timing will be noisier"
                );
            }
        }
        let nice = opts.nice.to_string();
        if prefix.is_empty() && opts.nice != 0 {
            prefix.extend(["nice", "-n", &nice]);
        }
        prefix.extend(["env", &env_log, &exe_s]);
        prefix.into_iter().map(str::to_owned).collect()
    }

    /// Paths of the client's connection in state Active.
    pub fn established_paths(&self) -> usize {
        let Ok(v) = self.status(false) else { return 0 };
        v["connections"][0]["paths"]
            .as_array()
            .map(|ps| ps.iter().filter(|p| p["state"] == "Active").count())
            .unwrap_or(0)
    }

    /// The JSON status of the server or client daemon.
    pub fn status(&self, server: bool) -> anyhow::Result<serde_json::Value> {
        Ok(mpdccp_net::daemon::ops::query(
            &self.control_socket(server),
            "status",
        )?)
    }

    /// The last lines of a daemon's log, for error messages.
    pub fn log_tail(&self, server: bool) -> String {
        let s = std::fs::read_to_string(self.log_file(server)).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

/// A probe stream through the tunnel (the project's probe generator:
/// sequence numbers and send times), receiver and sender each in a thread
/// inside their namespace. Made by [`Topology::start_probe_stream`].
pub struct ProbeStream {
    abort: Arc<AtomicBool>,
    rx: std::thread::JoinHandle<anyhow::Result<Vec<Arrival>>>,
    tx: std::thread::JoinHandle<anyhow::Result<SendLog>>,
}

impl Topology {
    /// Starts `rate_bps` of 1000-byte probes for `secs` to `port` on the
    /// far end's tunnel address: client → server, or server → client when
    /// `downstream`. Returns the stream and its start time.
    pub fn start_probe_stream(
        &self,
        downstream: bool,
        rate_bps: u64,
        secs: f64,
        port: u16,
    ) -> anyhow::Result<(ProbeStream, mpdccp_proto::Instant)> {
        let (dst_ns, src_ns, dst_ip) = if downstream {
            (&self.client, &self.server, CLIENT_TUN_V4)
        } else {
            (&self.server, &self.client, SERVER_TUN_V4)
        };
        let abort = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let bind = SocketAddr::new(dst_ip.into(), port);
        let (a2, r2) = (abort.clone(), ready.clone());
        let rx = spawn_in_netns(dst_ns.name(), move || {
            Ok(probe::receive(bind, a2, Some(r2))?)
        });
        wait_for(Duration::from_secs(5), || ready.load(Ordering::Acquire))
            .context("probe receiver not ready")?;
        let start = mpdccp_net::clock::now() + Duration::from_millis(20);
        let cfg = ProbeConfig {
            flow: 1,
            dst: bind,
            rate_bps,
            payload_bytes: 1000,
            start,
            stop: start + Duration::from_secs_f64(secs),
        };
        let a3 = abort.clone();
        let tx = spawn_in_netns(src_ns.name(), move || Ok(probe::send(&cfg, &a3)?));
        Ok((ProbeStream { abort, rx, tx }, start))
    }
}

impl ProbeStream {
    /// Waits for the sender, gives the last probes `drain` to cross the
    /// tunnel (reordering timeout + delay), then stops the receiver.
    pub fn finish(self, drain: Duration) -> anyhow::Result<(SendLog, Vec<Arrival>)> {
        let log = self
            .tx
            .join()
            .map_err(|_| anyhow::anyhow!("probe sender panicked"))??;
        std::thread::sleep(drain);
        self.abort.store(true, Ordering::Relaxed);
        let arrivals = self
            .rx
            .join()
            .map_err(|_| anyhow::anyhow!("probe receiver panicked"))??;
        Ok((log, arrivals))
    }
}

/// Polls `cond` every 50 ms until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = StdInstant::now() + timeout;
    loop {
        if cond() {
            return Ok(());
        }
        if StdInstant::now() > deadline {
            bail!("timed out after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Stop processes in reverse start order before namespaces go.
        while let Some(mut p) = self.procs.pop() {
            p.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::stats_out_arg;

    #[test]
    fn a_callers_stats_file_is_found_in_either_spelling() {
        assert_eq!(
            stats_out_arg(&["--delay-ms", "5", "--stats-out", "f.jsonl"]),
            Some("f.jsonl")
        );
        assert_eq!(
            stats_out_arg(&["--stats-out=g.jsonl", "--delay-ms", "5"]),
            Some("g.jsonl")
        );
        assert_eq!(stats_out_arg(&["--delay-ms", "5"]), None);
        assert_eq!(stats_out_arg(&["--stats-out"]), None);
        assert_eq!(stats_out_arg(&["--stats-outx"]), None);
    }
}
