//! `mpdccp bench clients`: many clients on one server. One process drives N
//! client-role `Connection`s, one UDP socket (one source port) each, against
//! a real `mpdccp server` in a network namespace; a UDP echo on the server's
//! inner address turns the upstream into downstream.
//!
//! ```text
//!  ns C (clients)                     ns S (server)
//!  N sockets 10.201.0.2:*  ── veth ──  10.201.0.1:6773  mpdccp server ── TUN lg0 10.64.0.1/10
//!  inner 10.64.0.2 + i                                                    └ UDP echo :7
//! ```
//!
//! Measured: clients connected and the time to connect all; server VmRSS
//! before any client, with all connected and after the data phase (per
//! client = growth / clients); server CPU (utime + stime from
//! /proc/PID/stat) during the data phase per Mbit/s carried (inner bytes
//! delivered, both directions); packets lost per direction.

mod clients;
mod echo;
pub mod packet;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_net::daemon::config::{OpsConfig, ServerConfig, TunConfig, TunnelConfig};
use serde_json::{json, Value};

pub use clients::{ClientReport, Phase};

use crate::netns::{is_root, unique_prefix, veth_pair, Netns, Proc};
use crate::topo::wait_for;

/// Outer addresses of the veth pair.
pub const SERVER_OUTER: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
pub const CLIENTS_OUTER: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
pub const SERVER_PORT: u16 = 6773;

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadOpts {
    pub clients: usize,
    /// Aggregate upstream offered, Mbit/s of inner IP packets (the echo
    /// sends the same back).
    pub mbps: f64,
    /// Data phase, once every client is connected.
    pub seconds: f64,
    pub packet_bytes: usize,
    /// Handshakes in flight at once.
    pub max_handshakes: usize,
    pub connect_timeout: Duration,
    /// The server's `max_clients`; `None` = the number of clients.
    pub server_max_clients: Option<usize>,
    /// The server's `tunnel.socket_buffer_bytes`.
    pub socket_buffer_bytes: usize,
    /// `RUST_LOG` of the server.
    pub log: String,
    /// The server's `workers` (packet threads, `daemon/workers.rs`).
    pub workers: usize,
}

impl Default for LoadOpts {
    fn default() -> Self {
        LoadOpts {
            clients: 1000,
            mbps: 10.0,
            seconds: 10.0,
            packet_bytes: 1200,
            max_handshakes: 32,
            connect_timeout: Duration::from_secs(60),
            server_max_clients: None,
            socket_buffer_bytes: TunnelConfig::default().socket_buffer_bytes,
            log: "warn".into(),
            workers: 1,
        }
    }
}

/// The server's configuration, in one place. Open mode (RFC 9897 key type
/// 0): the generator's clients run the plain handshake.
pub fn server_config(dir: &Path, opts: &LoadOpts) -> ServerConfig {
    ServerConfig {
        listen: SocketAddr::from((SERVER_OUTER, SERVER_PORT)),
        tun: TunConfig {
            name: "lg0".into(),
            addresses: vec![format!(
                "{}/{}",
                packet::SERVER_INNER,
                packet::INNER_PREFIX_LEN
            )],
            ..TunConfig::default()
        },
        tunnel: TunnelConfig {
            socket_buffer_bytes: opts.socket_buffer_bytes,
            ..TunnelConfig::default()
        },
        ops: OpsConfig {
            control_socket: dir.join("server.sock"),
            prometheus: None,
        },
        dccp_listen: Vec::new(),
        udccp_listen: None,
        max_clients: opts.server_max_clients.unwrap_or(opts.clients),
        workers: opts.workers,
        max_learned_addresses: ServerConfig::DEFAULT_MAX_LEARNED_ADDRESSES,
        seed: 7,
        auth: Some(mpdccp_net::daemon::config::AuthMode::Open),
        private_key_file: None,
        peer: Vec::new(),
        limits: Default::default(),
        fleet: None,
    }
}

/// A sample of the server process.
#[derive(Clone, Copy, Debug, Default)]
struct ServerSample {
    rss_kb: u64,
    cpu_s: f64,
}

fn sample(pid: u32) -> ServerSample {
    ServerSample {
        rss_kb: vm_rss_kb(pid).unwrap_or(0),
        cpu_s: crate::bench::cpu_s(pid),
    }
}

/// VmRSS of a process, kB (/proc/PID/status).
pub fn vm_rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The kernel's UDP counters in namespace `ns` (`Udp:` of /proc/net/snmp):
/// `RcvbufErrors` are datagrams dropped because a socket's buffer was full.
fn udp_snmp(ns: &Netns) -> Value {
    let Ok(text) = ns.output("cat", &["/proc/net/snmp"]) else {
        return Value::Null;
    };
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.starts_with("Udp:"))
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    let [names, values] = rows.as_slice() else {
        return Value::Null;
    };
    let pick = ["InDatagrams", "RcvbufErrors", "SndbufErrors", "InErrors"];
    names
        .iter()
        .zip(values)
        .filter(|(n, _)| pick.contains(n))
        .map(|(n, v)| (n.to_string(), json!(v.parse::<u64>().unwrap_or(0))))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Namespaces, the veth pair and the server; torn down on drop (the
/// process first, then the namespaces).
struct Lab {
    server: Proc,
    dir: PathBuf,
    server_ns: Netns,
    clients_ns: Netns,
}

impl Lab {
    fn build(exe: &Path, opts: &LoadOpts) -> anyhow::Result<Lab> {
        let pfx = unique_prefix();
        let dir = std::env::temp_dir().join(format!("mpdccp-loadgen-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let clients_ns = Netns::new(&format!("{pfx}lc"))?;
        let server_ns = Netns::new(&format!("{pfx}ls"))?;
        let (a, b) = (format!("{pfx}la"), format!("{pfx}lb"));
        veth_pair(&a, Some(&clients_ns), &b, Some(&server_ns))?;
        clients_ns.ip(&["addr", "add", &format!("{CLIENTS_OUTER}/24"), "dev", &a])?;
        clients_ns.ip(&["link", "set", &a, "up"])?;
        server_ns.ip(&["addr", "add", &format!("{SERVER_OUTER}/24"), "dev", &b])?;
        server_ns.ip(&["link", "set", &b, "up"])?;
        let cfg = server_config(&dir, opts);
        let toml_path = dir.join("server.toml");
        std::fs::write(&toml_path, toml::to_string(&cfg).context("server.toml")?)?;
        let log = dir.join("server.log");
        let env_log = format!("RUST_LOG={}", opts.log);
        let (exe_s, toml_s) = (exe.to_string_lossy(), toml_path.to_string_lossy());
        // `env` and `ip netns exec` exec in place: the pid is the server's.
        // MPDCCP_BENCH_SERVER_WRAP runs it under a profiler instead (e.g.
        // `valgrind --tool=massif --massif-out-file=F`, to see where its
        // memory goes); the RSS figures are then the profiler's.
        let wrap = std::env::var("MPDCCP_BENCH_SERVER_WRAP").unwrap_or_default();
        let mut argv: Vec<&str> = vec![&env_log];
        argv.extend(wrap.split_whitespace());
        argv.extend([&*exe_s, "server", "--config", &*toml_s]);
        let server = server_ns.spawn_logged("env", &argv, &log)?;
        let lab = Lab {
            server,
            dir,
            server_ns,
            clients_ns,
        };
        wait_for(Duration::from_secs(10), || cfg.ops.control_socket.exists())
            .with_context(|| format!("server did not start; log:\n{}", lab.log_tail()))?;
        Ok(lab)
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn status(&self) -> anyhow::Result<Value> {
        Ok(mpdccp_net::daemon::ops::query(
            &self.dir.join("server.sock"),
            "status",
        )?)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.server.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the benchmark; returns the JSON report (see [`print_text`]).
pub fn run(exe: &Path, opts: &LoadOpts, abort: Arc<AtomicBool>) -> anyhow::Result<Value> {
    if !is_root() {
        bail!(
            "`mpdccp bench clients` needs root (it creates network namespaces); run it with sudo"
        );
    }
    if opts.clients == 0 || opts.clients > packet::max_clients() {
        bail!("--clients must be 1..={}", packet::max_clients());
    }
    let load_before = loadavg();
    let lab = Lab::build(exe, opts)?;
    let pid = lab.server.id().context("server pid")?;
    let idle = sample(pid);
    let echo_addr = SocketAddr::from((packet::SERVER_INNER, packet::ECHO_PORT));
    let echo = echo::Echo::start(lab.server_ns.name(), echo_addr)?;

    let client_plan = client_plan(&lab.dir, opts, echo_addr);
    let packet_bytes = client_plan.packet_bytes;
    let (report, samples) = drive_clients(&lab, client_plan, &abort, pid)?;
    let after_close = lab.status().unwrap_or(Value::Null);
    let kernel_udp = json!({
        "server_ns": udp_snmp(&lab.server_ns),
        "clients_ns": udp_snmp(&lab.clients_ns),
    });
    let status = samples
        .iter()
        .find_map(|s| s.status.clone())
        .unwrap_or(Value::Null);
    let at = |p: Phase| samples.iter().find(|s| s.phase == p);
    let connected = at(Phase::Data).map_or(idle, |s| s.before_status);
    let after = at(Phase::Drain).map_or(connected, |s| s.before_status);
    let after_status = at(Phase::Drain).map_or(after, |s| s.after_status);
    let load_during = at(Phase::Drain).map_or_else(String::new, |s| s.load.clone());
    let c = &echo.counters;
    let echo_recv = c.recv_pkts.load(Ordering::Relaxed);
    let echo_recv_bytes = c.recv_bytes.load(Ordering::Relaxed);
    let echo_sent = c.sent_pkts.load(Ordering::Relaxed);
    drop(echo);
    Ok(assemble(&Figures {
        opts,
        packet_bytes,
        report: &report,
        idle,
        connected,
        after,
        after_status,
        echo_recv,
        echo_recv_bytes,
        echo_sent,
        status: &status,
        after_close: &after_close,
        kernel_udp,
        loads: [load_before, load_during, loadavg()],
    }))
}

/// The clients' side of the run: the server's connection settings as the
/// server derives them, and the load of `opts`.
fn client_plan(dir: &Path, opts: &LoadOpts, echo_addr: SocketAddr) -> clients::ClientPlan {
    let cfg = server_config(dir, opts);
    let plan = mpdccp_net::daemon::mtu_plan(
        &cfg.tun,
        cfg.tunnel.path_mtu,
        false,
        mpdccp_net::mtu::UDP_HEADER_BYTES,
    );
    let mut conn = cfg.tunnel.connection_config(&plan);
    // One datagram per transmit: the generator's sockets do not use GSO.
    conn.max_gso_segments = 1;
    let packet_bytes = opts
        .packet_bytes
        .clamp(packet::MIN_PACKET, plan.tun_mtu as usize);
    clients::ClientPlan {
        clients: opts.clients,
        server: cfg.listen,
        local_ip: CLIENTS_OUTER,
        echo: echo_addr,
        conn,
        max_handshakes: opts.max_handshakes.max(1),
        connect_timeout: opts.connect_timeout,
        upstream_bps: opts.mbps * 1e6,
        packet_bytes,
        data_secs: opts.seconds,
        drain: Duration::from_secs(1),
    }
}

/// The server seen at one phase change of the clients' run.
struct PhaseSample {
    phase: Phase,
    /// The process before the status query: building the document for
    /// every connection costs memory of its own, measured apart.
    before_status: ServerSample,
    load: String,
    /// The server's view at the end of the data phase, before the close.
    status: Option<Value>,
    after_status: ServerSample,
}

/// Runs the clients in their namespace to the end of the drain, sampling
/// the server (`pid`) at each phase change.
fn drive_clients(
    lab: &Lab,
    client_plan: clients::ClientPlan,
    abort: &Arc<AtomicBool>,
    pid: u32,
) -> anyhow::Result<(ClientReport, Vec<PhaseSample>)> {
    let (tx, rx) = mpsc::channel();
    let stop = abort.clone();
    let control = lab.dir.join("server.sock");
    let thread = crate::netns::spawn_in_netns(lab.clients_ns.name(), move || {
        clients::run(client_plan, &stop, |phase, _| {
            // The process before the status query: building the document
            // for every connection costs memory of its own, measured apart.
            let before_status = sample(pid);
            // The server's view at the end of the data phase, before the close.
            let status = (phase == Phase::Drain)
                .then(|| mpdccp_net::daemon::ops::query(&control, "status").ok())
                .flatten();
            let after_status = sample(pid);
            let _ = tx.send(PhaseSample {
                phase,
                before_status,
                load: loadavg(),
                status,
                after_status,
            });
        })
    });
    let report = thread
        .join()
        .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
    let samples: Vec<_> = rx.try_iter().collect();
    Ok((report, samples))
}

struct Figures<'a> {
    opts: &'a LoadOpts,
    packet_bytes: usize,
    report: &'a ClientReport,
    idle: ServerSample,
    connected: ServerSample,
    after: ServerSample,
    /// After the status query that follows `after`.
    after_status: ServerSample,
    echo_recv: u64,
    echo_recv_bytes: u64,
    echo_sent: u64,
    status: &'a Value,
    after_close: &'a Value,
    kernel_udp: Value,
    loads: [String; 3],
}

fn pct_lost(sent: u64, got: u64) -> f64 {
    if sent == 0 {
        return 0.0;
    }
    100.0 * sent.saturating_sub(got) as f64 / sent as f64
}

fn assemble(f: &Figures<'_>) -> Value {
    let r = f.report;
    let n = r.connected.max(1) as f64;
    let rss_per_client_kb = (f.connected.rss_kb as f64 - f.idle.rss_kb as f64).max(0.0) / n;
    let data_s = r.data_s.max(1e-9);
    let carried_mbps = (f.echo_recv_bytes + r.down_recv_bytes) as f64 * 8.0 / data_s / 1e6;
    let cpu_data = f.after.cpu_s - f.connected.cpu_s;
    let cpu_pct = 100.0 * cpu_data / data_s;
    let server_conns = f.status["connections"].as_array().map(|a| a.len());
    json!({
        "goal": "1000 concurrent clients on one server, server memory per client and CPU per Mbit/s reported",
        "clients_requested": f.opts.clients,
        "clients_connected": r.connected,
        "clients_connected_at_end": r.connected_at_end,
        "server_connections_at_end": server_conns,
        "server_connections_after_close": f.after_close["connections"].as_array().map(|a| a.len()),
        "connect_all_s": r.connect_all_s,
        "connect_ms": {"p50": r.connect_ms_p50, "p99": r.connect_ms_p99, "max": r.connect_ms_max},
        "handshakes_in_flight_max": f.opts.max_handshakes,
        "handshake_retries": r.handshake_retries,
        "dropped_after_connect": r.dropped_after_connect,
        "server_max_clients": f.opts.server_max_clients.unwrap_or(f.opts.clients),
        "server_socket_buffer_bytes": f.opts.socket_buffer_bytes,
        "server_rss_kb": {"idle": f.idle.rss_kb, "connected": f.connected.rss_kb, "after_data": f.after.rss_kb,
                          "after_status_query": f.after_status.rss_kb},
        "status_json_bytes": (!f.status.is_null()).then(|| f.status.to_string().len()),
        "server_rss_kb_per_client": rss_per_client_kb,
        "server_cpu_s": {"connect": f.connected.cpu_s - f.idle.cpu_s, "data": cpu_data},
        "data_s": r.data_s,
        "packet_bytes": f.packet_bytes,
        "offered_up_mbps": f.opts.mbps,
        "carried_mbps_both_directions": carried_mbps,
        "server_cpu_pct_of_core": cpu_pct,
        "server_cpu_pct_of_core_per_mbps": if carried_mbps > 0.0 { cpu_pct / carried_mbps } else { 0.0 },
        "up": {"sent": r.up_sent_pkts, "received": f.echo_recv, "lost_pct": pct_lost(r.up_sent_pkts, f.echo_recv),
               "send_rejected": r.up_send_rejected},
        "down": {"sent": f.echo_sent, "received": r.down_recv_pkts, "lost_pct": pct_lost(f.echo_sent, r.down_recv_pkts),
                 "foreign": r.down_foreign},
        "clients_with_downstream": r.clients_with_downstream,
        "generator": {"udp_tx_dropped": r.udp_tx_dropped, "stuck_timers": r.stuck_timers},
        "kernel_udp": f.kernel_udp.clone(),
        "endpoint": f.status["endpoint"].clone(),
        "daemon": f.status["daemon"].clone(),
        "server_workers": f.opts.workers,
        "per_worker": f.status["per_worker"].clone(),
        "loadavg": {"before": f.loads[0], "end_of_data": f.loads[1], "after": f.loads[2]},
    })
}

/// The report as text, each figure beside the issue's goal.
pub fn print_text(v: &Value) {
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "clients connected      {} of {} (goal: 1000 connected and staying connected); at end: {} (server: {})",
        v["clients_connected"], v["clients_requested"], v["clients_connected_at_end"], v["server_connections_at_end"]
    );
    println!(
        "time to connect all    {} s (p50 {:.1} ms, p99 {:.1} ms per client; {} retries)",
        v["connect_all_s"]
            .as_f64()
            .map_or("—".into(), |s| format!("{s:.2}")),
        v["connect_ms"]["p50"].as_f64().unwrap_or(0.0),
        v["connect_ms"]["p99"].as_f64().unwrap_or(0.0),
        v["handshake_retries"]
    );
    println!(
        "server RSS per client  {:.1} kB (idle {} kB → {} kB connected → {} kB after data → {} kB after a status query of {} kB) (goal: reported)",
        f("server_rss_kb_per_client"),
        v["server_rss_kb"]["idle"],
        v["server_rss_kb"]["connected"],
        v["server_rss_kb"]["after_data"],
        v["server_rss_kb"]["after_status_query"],
        v["status_json_bytes"].as_u64().unwrap_or(0) / 1000
    );
    println!(
        "server CPU per Mbit/s  {:.3} % of a core per Mbit/s ({:.1} % at {:.1} Mbit/s carried, both directions) (goal: reported)",
        f("server_cpu_pct_of_core_per_mbps"),
        f("server_cpu_pct_of_core"),
        f("carried_mbps_both_directions")
    );
    println!(
        "packets lost           up {:.3} % ({} of {}), down {:.3} % ({} of {})",
        v["up"]["lost_pct"].as_f64().unwrap_or(0.0),
        v["up"]["received"],
        v["up"]["sent"],
        v["down"]["lost_pct"].as_f64().unwrap_or(0.0),
        v["down"]["received"],
        v["down"]["sent"]
    );
    println!(
        "socket drops           server namespace {} (UDP RcvbufErrors), clients namespace {}",
        v["kernel_udp"]["server_ns"]["RcvbufErrors"], v["kernel_udp"]["clients_ns"]["RcvbufErrors"]
    );
    if v["server_workers"].as_u64().unwrap_or(1) > 1 {
        let d = &v["daemon"];
        println!(
            "server workers         {} (handoffs {}, received {}, dropped {}; per worker: {})",
            v["server_workers"],
            d["handoffs"],
            d["handoffs_received"],
            d["handoff_dropped"],
            v["per_worker"]
        );
    }
    println!(
        "load average           before {}, end of data {}",
        v["loadavg"]["before"], v["loadavg"]["end_of_data"]
    );
}

/// Runs `EXE bench clients --json ARGS…` (the CLI a test or script drives)
/// and returns its report; fails with the command's stderr when it fails.
pub fn run_cli(exe: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let out = std::process::Command::new(exe)
        .args(["bench", "clients", "--json"])
        .args(args)
        .output()
        .with_context(|| format!("cannot run {} bench clients", exe.display()))?;
    if !out.status.success() {
        bail!(
            "mpdccp bench clients failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("bench clients: JSON report")
}
