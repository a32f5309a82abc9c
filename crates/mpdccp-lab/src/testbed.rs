//! `mpdccp testbed`: a scenario on the real tunnel, in network namespaces.
//!
//! Hosts: a client namespace, one router namespace per `[[path]]` running
//! `mpdccp netem` with that path's description, a server namespace (see
//! [`crate::topo`]). The tunnel daemons run in client and server when any
//! flow goes `via = "tunnel"`; flows with `via = "<path>"` go over that
//! emulated path directly, without the tunnel.
//!
//! Flows use real tools: `udp-cbr` (and `bulk`, as CBR at the paths' total
//! peak rate) the project's probe generator, whose send timestamps are
//! `CLOCK_MONOTONIC` shared by all namespaces, so one-way delay is exact;
//! `tcp` the kernel's TCP via iperf3 with the flow's congestion control
//! (`-C`), capped with `--fq-rate` when `rate_mbps` is given.
//!
//! Time line: scenario time 0 is `setup_s` after the emulators start; their
//! schedules are shifted by `setup_s`, so the tunnel handshake happens under
//! the paths' initial conditions and every schedule point (rate drop, outage)
//! lands at its scenario time.
//!
//! Results: the same `summary.json` / `timeseries.csv` / plots as the
//! simulator, through `mpdccp_model::results::Recorder`. Path metrics come from
//! the emulators (what the bottleneck saw): throughput and losses of the
//! client→server direction, queueing delay, and path RTT = two one-way delays
//! plus both directions' mean queueing delay per 100 ms; cwnd and SRTT from
//! the client daemon's status when it is sampled during the run
//! (`status_interval`; off by default, since each query holds up the
//! daemon's packet loop). TCP flows' OWD is iperf3's SRTT / 2 (TCP
//! reports no one-way delay); this is recorded in `meta`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_model::results::{Recorder, Summary, TimeSeries};
use mpdccp_model::scenario::{Direction, FlowKind, Scenario};
use mpdccp_proto::Instant;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::emu::Sample;
use crate::netns::{self, spawn_in_netns};
use crate::probe::{self, Arrival, ProbeConfig, SendLog};
use crate::topo::{Topology, TunnelOpts, CLIENT_TUN_V4, SERVER_TUN_V4};
use mpdccp_net::clock;
use mpdccp_net::daemon::config::TunnelConfig;

/// Settings of one testbed run.
#[derive(Clone, Debug)]
pub struct TestbedConfig {
    pub scenario: Scenario,
    /// The `mpdccp` binary to run daemons and emulators with.
    pub exe: PathBuf,
    /// Seconds between emulator start and scenario time 0 (tunnel set-up).
    pub setup_s: f64,
    /// `RUST_LOG` for the daemons.
    pub log: String,
    /// Keep daemon/emulator logs and raw samples here (e.g. the output dir).
    pub keep_dir: Option<PathBuf>,
    /// `SCHED_FIFO` priority of the tunnel daemons (0 = normal scheduling).
    pub daemon_rt_priority: u8,
    /// Query the client daemon's status (cwnd, srtt for the time series)
    /// this often while the scenario runs; `None`: only at the end. The
    /// daemon answers from its operations thread (README §Testbed).
    pub status_interval: Option<Duration>,
    /// The daemons' `auth` mode (the lab's fixed keys when not open).
    pub auth: mpdccp_net::daemon::config::AuthMode,
}

/// Runs the scenario; `abort` (Ctrl-C) stops it early with an error. Every
/// namespace and process is removed before this returns, on every path.
pub fn run(cfg: &TestbedConfig, abort: &Arc<AtomicBool>) -> anyhow::Result<(Summary, TimeSeries)> {
    if !netns::is_root() {
        bail!("mpdccp testbed needs root: it creates network namespaces, veth pairs and TUN devices (run it with sudo or as root)");
    }
    let sc = &cfg.scenario;
    sc.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    if sc.path.len() > 9 {
        bail!("the testbed supports up to 9 paths");
    }
    let mut topo = Topology::build(sc.path.len())?;
    let result = run_in(cfg, &mut topo, abort);
    if let Some(keep) = &cfg.keep_dir {
        // Logs are worth keeping whether the run worked or not.
        let _ = std::fs::create_dir_all(keep);
        for f in [
            "server.log",
            "client.log",
            "server.toml",
            "client.toml",
            "paths.toml",
            "status.jsonl",
        ] {
            let _ = std::fs::copy(topo.dir.join(f), keep.join(format!("testbed-{f}")));
        }
        for i in 0..sc.path.len() {
            let f = format!("emu{i}.jsonl");
            let _ = std::fs::copy(topo.dir.join(&f), keep.join(format!("testbed-{f}")));
        }
    }
    drop(topo);
    result
}

fn check_abort(abort: &AtomicBool) -> anyhow::Result<()> {
    if abort.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

/// Sleeps until `t`, in slices, failing when aborted.
fn sleep_until_abortable(t: Instant, abort: &AtomicBool) -> anyhow::Result<()> {
    loop {
        check_abort(abort)?;
        let now = clock::now();
        if now >= t {
            return Ok(());
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

/// The scenario with every schedule point moved `s` seconds later.
fn shifted(sc: &Scenario, s: f64) -> Scenario {
    let mut out = sc.clone();
    for p in out.path.iter_mut() {
        for r in p.rate.iter_mut().skip(1) {
            r.at_s += s;
        }
        for d in p.delay.iter_mut() {
            d.at_s += s;
        }
        for o in p.down.iter_mut() {
            o.from_s += s;
            o.to_s += s;
        }
        // The trace too: replayed from the emulator's start it ran `s` ahead
        // of scenario time (3 s by default: during dsl-lte-drop's DSL drop the
        // LTE path had 7.6 instead of the simulator's 6.9 Mbit/s of trace).
        p.trace_start_s += s;
        if let Some(base) = &sc.base_dir {
            for t in [&mut p.trace_up, &mut p.trace_down].into_iter().flatten() {
                if Path::new(t.as_str()).is_relative() {
                    // Absolute: the emulator reads the scenario from its
                    // own temporary directory (a relative base_dir, as
                    // `testbed scenarios/x.toml` gives, would point there).
                    let joined = base.join(t.as_str());
                    let abs = std::path::absolute(&joined).unwrap_or(joined);
                    *t = abs.to_string_lossy().into_owned();
                }
            }
        }
    }
    out.duration_s += s;
    for w in out.window.iter_mut() {
        w.from_s += s;
        w.to_s += s;
    }
    out
}

enum FlowRun {
    Probe {
        abort: Arc<AtomicBool>,
        tx: JoinHandle<anyhow::Result<SendLog>>,
        rx: JoinHandle<anyhow::Result<Vec<Arrival>>>,
    },
    Tcp {
        client: JoinHandle<anyhow::Result<String>>,
        started: Instant,
    },
    Quic(crate::flows::QuicRun),
}

fn run_in(
    cfg: &TestbedConfig,
    topo: &mut Topology,
    abort: &Arc<AtomicBool>,
) -> anyhow::Result<(Summary, TimeSeries)> {
    let sc = &cfg.scenario;
    let setup = Duration::from_secs_f64(cfg.setup_s.max(1.0));
    let t_setup = start_emulators(cfg, topo, setup)?;
    let t0 = t_setup + setup;
    let uses_tunnel = sc.flow.iter().any(|f| f.via == "tunnel");
    if uses_tunnel {
        start_daemons(cfg, topo)?;
        // Joins of the other paths get until t0.
    }
    if clock::now() > t0 {
        bail!("set-up took longer than {setup:?}; raise --setup-s");
    }
    check_abort(abort)?;

    let mut runs = Vec::new();
    for i in 0..sc.flow.len() {
        runs.push(start_flow(sc, topo, abort, i, t0)?);
    }
    let status = sample_status(cfg, topo, abort, &runs, t0, uses_tunnel)?;

    let mut rec = Recorder::new(sc);
    let flows = collect_flows(sc, runs, &mut rec, t0)?;
    let t_shift = setup.as_secs_f64();
    let mut lateness = Vec::new();
    for i in 0..sc.path.len() {
        let samples = crate::emu::read_samples(&topo.dir.join(format!("emu{i}.jsonl")));
        record_path(&mut rec, sc, i, &samples, t_shift, &status.samples, t0);
        lateness.push(lateness_summary(&sc.path[i].name, &samples, t_shift));
    }
    let meta = run_meta(cfg, topo, uses_tunnel, t_shift, lateness, flows, status);
    info!("testbed run finished");
    Ok(rec.finish(meta))
}

/// Writes the scenario shifted by the set-up time and starts one emulator
/// per path on it; returns the emulators' epoch (scenario time 0 is
/// `setup` later).
fn start_emulators(
    cfg: &TestbedConfig,
    topo: &mut Topology,
    setup: Duration,
) -> anyhow::Result<Instant> {
    let sc = &cfg.scenario;
    let exe = &cfg.exe;
    let paths_file = topo.dir.join("paths.toml");
    let sh = shifted(sc, setup.as_secs_f64());
    std::fs::write(
        &paths_file,
        toml::to_string(&sh).context("serializing the scenario")?,
    )?;
    let paths_s = paths_file.to_string_lossy().into_owned();
    let t_setup = clock::now();
    let epoch = t_setup.as_nanos().to_string();
    for (i, p) in sc.path.iter().enumerate() {
        let stats = topo
            .dir
            .join(format!("emu{i}.jsonl"))
            .to_string_lossy()
            .into_owned();
        let seed = sc.seed.wrapping_add(i as u64).to_string();
        topo.start_emulator(
            exe,
            i,
            &[
                "--scenario",
                &paths_s,
                "--path",
                &p.name,
                "--epoch-ns",
                &epoch,
                "--stats-out",
                &stats,
                "--seed",
                &seed,
            ],
        )?;
    }
    Ok(t_setup)
}

/// Starts the tunnel daemons the scenario's `[tunnel]` describes.
fn start_daemons(cfg: &TestbedConfig, topo: &mut Topology) -> anyhow::Result<()> {
    let sc = &cfg.scenario;
    let t = &sc.tunnel;
    let path_mtu = tunnel_path_mtu(sc);
    if path_mtu > DEFAULT_PATH_MTU {
        topo.set_path_mtu(path_mtu)?;
    }
    // Plain DCCP (multipath = false) runs on the first path only.
    let paths = if t.multipath { Vec::new() } else { vec![0] };
    let opts = TunnelOpts {
        tunnel: daemon_tunnel_config(sc),
        // Never below IPv6's minimum link MTU (RFC 8200 §5): the TUNs
        // carry IPv6 addresses too, which the kernel refuses on a
        // smaller link (a scenario of 1200-byte packets failed there).
        tun_mtu: (tunnelled_packet_max(sc) as u32).max(mpdccp_net::mtu::IPV6_MIN_MTU),
        wait_paths: 1,
        priorities: if paths.is_empty() {
            sc.path
                .iter()
                .map(|p| if p.priority == 0 { 3 } else { p.priority })
                .collect()
        } else {
            vec![3]
        },
        paths,
        log: cfg.log.clone(),
        rt_priority: cfg.daemon_rt_priority,
        auth: cfg.auth,
        // Scenarios do not choose a transport yet: UDP, the default.
        ..TunnelOpts::default()
    };
    topo.start_tunnel(&cfg.exe, &opts)
}

/// Where a flow runs: its schedule, its receiver's address and port, and
/// the namespaces of its sender and receiver.
struct FlowPlan {
    start: Instant,
    stop: Instant,
    up: bool,
    dst_ip: IpAddr,
    port: u16,
    src_ns: String,
    dst_ns: String,
}

impl FlowPlan {
    fn of(sc: &Scenario, topo: &Topology, i: usize, t0: Instant) -> anyhow::Result<FlowPlan> {
        let f = &sc.flow[i];
        let start = t0 + Duration::from_secs_f64(f.start_s.max(0.0));
        let stop =
            t0 + Duration::from_secs_f64(f.stop_s.unwrap_or(sc.duration_s).min(sc.duration_s));
        let up = f.direction == Direction::Up;
        let (dst_ip, src_ns, dst_ns): (IpAddr, &str, &str) = if f.via == "tunnel" {
            if up {
                (SERVER_TUN_V4.into(), topo.client.name(), topo.server.name())
            } else {
                (CLIENT_TUN_V4.into(), topo.server.name(), topo.client.name())
            }
        } else {
            let k = sc
                .path_index(&f.via)
                .with_context(|| format!("flow `{}`: no path `{}`", f.name, f.via))?;
            let a = &topo.paths[k];
            if up {
                (a.server_ip.into(), topo.client.name(), topo.server.name())
            } else {
                (a.client_ip.into(), topo.server.name(), topo.client.name())
            }
        };
        Ok(FlowPlan {
            start,
            stop,
            up,
            dst_ip,
            port: 9000 + i as u16,
            src_ns: src_ns.to_owned(),
            dst_ns: dst_ns.to_owned(),
        })
    }
}

/// Starts flow `i` of the scenario (its sender waits for its start).
fn start_flow(
    sc: &Scenario,
    topo: &mut Topology,
    abort: &Arc<AtomicBool>,
    i: usize,
    t0: Instant,
) -> anyhow::Result<FlowRun> {
    let f = &sc.flow[i];
    let plan = FlowPlan::of(sc, topo, i, t0)?;
    match f.kind {
        FlowKind::UdpCbr | FlowKind::Bulk => {
            let rate_mbps = match f.kind {
                FlowKind::Bulk => sc.path.iter().map(peak_mbps).sum::<f64>(),
                _ => f.rate_mbps.unwrap_or(1.0),
            };
            start_probe_flow(&plan, i, rate_mbps, f.packet_bytes)
        }
        FlowKind::Quic => {
            // aioquic (a real QUIC stack) via the lab's flow script:
            // its server always in the server's namespace, its client
            // in the client's; the direction says who sends.
            let server_ip: IpAddr = if f.via == "tunnel" {
                SERVER_TUN_V4.into()
            } else {
                let k = sc.path_index(&f.via).unwrap_or(0);
                topo.paths[k].server_ip.into()
            };
            let secs = (plan.stop - plan.start).as_secs_f64().max(1.0);
            let run = crate::flows::start_quic(
                topo,
                i,
                SocketAddr::new(server_ip, plan.port),
                plan.up,
                f.packet_bytes,
                plan.start,
                secs,
                abort.clone(),
            )?;
            Ok(FlowRun::Quic(run))
        }
        FlowKind::Tcp => start_tcp_flow(sc, topo, abort, &plan, i),
    }
}

/// A probe stream (constant rate, or bulk at the paths' peak) from the
/// sender's namespace to a receiver bound in the receiver's.
fn start_probe_flow(
    plan: &FlowPlan,
    i: usize,
    rate_mbps: f64,
    packet_bytes: usize,
) -> anyhow::Result<FlowRun> {
    let fabort = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let bind = SocketAddr::new(plan.dst_ip, plan.port);
    let (a2, r2) = (fabort.clone(), ready.clone());
    let rx = spawn_in_netns(&plan.dst_ns, move || {
        Ok(probe::receive(bind, a2, Some(r2))?)
    });
    crate::topo::wait_for(Duration::from_secs(5), || ready.load(Ordering::Acquire))?;
    let pcfg = ProbeConfig {
        flow: i as u32,
        dst: bind,
        rate_bps: (rate_mbps * 1e6) as u64,
        payload_bytes: packet_bytes.saturating_sub(28).max(probe::HEADER_BYTES),
        start: plan.start,
        stop: plan.stop,
    };
    let a3 = fabort.clone();
    let tx = spawn_in_netns(&plan.src_ns, move || Ok(probe::send(&pcfg, &a3)?));
    Ok(FlowRun::Probe {
        abort: fabort,
        tx,
        rx,
    })
}

/// A kernel TCP flow: an iperf3 server in the receiver's namespace, its
/// client started at the flow's start in the sender's.
fn start_tcp_flow(
    sc: &Scenario,
    topo: &mut Topology,
    abort: &Arc<AtomicBool>,
    plan: &FlowPlan,
    i: usize,
) -> anyhow::Result<FlowRun> {
    let f = &sc.flow[i];
    let (start, up, dst_ns) = (plan.start, plan.up, plan.dst_ns.as_str());
    // The receiver acks every segment (the scenario's TCP
    // model), not every second one.
    if f.via == "tunnel" {
        topo.set_tunnel_quickack(up)?;
    } else {
        let k = sc.path_index(&f.via).unwrap_or(0);
        topo.set_quickack(k, up)?;
    }
    let dst = plan.dst_ip.to_string();
    let port_s = plan.port.to_string();
    let srv = netns::Netns::command_in(dst_ns, "iperf3")
        .args(["-s", "-1", "-B", &dst, "-p", &port_s])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot start iperf3 (install it: apt-get install iperf3)")?;
    topo.procs
        .push(netns::Proc::new(format!("iperf3-s@{dst_ns}"), srv));
    let secs = (plan.stop - start).as_secs_f64().max(1.0);
    let mut args: Vec<String> = vec![
        "-c".into(),
        dst,
        "-p".into(),
        port_s,
        "-t".into(),
        format!("{secs:.1}"),
        "-i".into(),
        "0.1".into(),
        "-J".into(),
        "-M".into(),
        tcp_mss_bytes(f.packet_bytes).to_string(),
    ];
    if let Some(cc) = &f.cc {
        args.extend(["-C".into(), cc.clone()]);
    }
    if let Some(r) = f.rate_mbps {
        args.extend(["--fq-rate".into(), format!("{}", (r * 1e6) as u64)]);
    }
    let ns = plan.src_ns.clone();
    let ab = abort.clone();
    let client = std::thread::spawn(move || -> anyhow::Result<String> {
        sleep_until_abortable(start, &ab)?;
        let out = netns::Netns::command_in(&ns, "iperf3")
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .context("cannot run iperf3")?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    });
    Ok(FlowRun::Tcp {
        client,
        started: start,
    })
}

/// The client daemon's status sampled while the scenario ran, and both
/// daemons' at its end.
struct StatusLog {
    samples: Vec<(Instant, Value)>,
    client_final: Option<Value>,
    server_final: Option<Value>,
}

/// Waits for the scenario's end, sampling the client daemon every
/// `status_interval`; writes `status.jsonl`.
fn sample_status(
    cfg: &TestbedConfig,
    topo: &Topology,
    abort: &AtomicBool,
    runs: &[FlowRun],
    t0: Instant,
    uses_tunnel: bool,
) -> anyhow::Result<StatusLog> {
    let end = t0 + Duration::from_secs_f64(cfg.scenario.duration_s);
    let mut status_samples: Vec<(Instant, Value)> = Vec::new();
    let mut next = t0;
    while clock::now() < end {
        if abort.load(Ordering::Relaxed) {
            for r in runs {
                if let FlowRun::Probe { abort, .. } = r {
                    abort.store(true, Ordering::Relaxed);
                }
            }
            bail!("interrupted");
        }
        if let Some(every) = cfg.status_interval.filter(|_| uses_tunnel) {
            if clock::now() >= next {
                if let Ok(v) = topo.status(false) {
                    status_samples.push((clock::now(), v));
                }
                next += every.max(Duration::from_millis(10));
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let final_status = if uses_tunnel {
        topo.status(false).ok()
    } else {
        None
    };
    let server_status = if uses_tunnel {
        topo.status(true).ok()
    } else {
        None
    };
    if uses_tunnel {
        // The log ends with the final status; the time series uses only
        // the samples taken during the run (none: no cwnd/srtt columns).
        let mut log = status_samples.clone();
        if let Some(v) = &final_status {
            log.push((clock::now(), v.clone()));
        }
        write_status_log(&topo.dir.join("status.jsonl"), &log, t0);
    }
    Ok(StatusLog {
        samples: status_samples,
        client_final: final_status,
        server_final: server_status,
    })
}

/// What the flows' collection adds to the run's metadata.
struct FlowsCollected {
    notes: Vec<String>,
    flow_meta: Vec<Value>,
}

/// Waits for every flow and records what it sent and delivered.
fn collect_flows(
    sc: &Scenario,
    runs: Vec<FlowRun>,
    rec: &mut Recorder,
    t0: Instant,
) -> anyhow::Result<FlowsCollected> {
    let rel = |t: Instant| Instant::from_nanos(t.as_nanos().saturating_sub(t0.as_nanos()));
    let mut notes = Vec::new();
    let mut flow_meta = vec![Value::Null; sc.flow.len()];
    for (i, r) in runs.into_iter().enumerate() {
        match r {
            FlowRun::Probe { abort: fab, tx, rx } => {
                let log = tx
                    .join()
                    .map_err(|_| anyhow::anyhow!("probe sender panicked"))??;
                // Drain: the last probes may still be in a queue.
                std::thread::sleep(Duration::from_millis(500));
                fab.store(true, Ordering::Relaxed);
                let arr = rx
                    .join()
                    .map_err(|_| anyhow::anyhow!("probe receiver panicked"))??;
                record_probe(rec, i, &log, &arr, rel);
            }
            FlowRun::Quic(q) => match q.finish() {
                Ok(r) => {
                    crate::flows::record_quic(rec, i, sc.flow[i].packet_bytes, &r, rel);
                    flow_meta[i] = crate::flows::quic_meta(&r);
                }
                Err(e) => {
                    warn!(flow = i, "quic flow: {e:#}");
                    notes.push(format!("flow {i}: quic: {e:#}"));
                }
            },
            FlowRun::Tcp { client, started } => {
                let out = client
                    .join()
                    .map_err(|_| anyhow::anyhow!("iperf3 thread panicked"))??;
                match serde_json::from_str::<Value>(&out) {
                    Ok(v) => {
                        if let Some(e) = v["error"].as_str() {
                            warn!(flow = i, "iperf3: {e}");
                            notes.push(format!("flow {i}: iperf3 error: {e}"));
                        }
                        record_tcp(rec, i, sc.flow[i].packet_bytes, &v, rel(started));
                    }
                    Err(e) => {
                        warn!(flow = i, "iperf3 output unreadable: {e}");
                        notes.push(format!("flow {i}: iperf3 output unreadable"));
                    }
                }
            }
        }
    }
    Ok(FlowsCollected { notes, flow_meta })
}

/// The run's metadata: how it was measured (emulator timing, status
/// sampling, scheduling, TCP settings) and the daemons' final status.
fn run_meta(
    cfg: &TestbedConfig,
    topo: &Topology,
    uses_tunnel: bool,
    t_shift: f64,
    lateness: Vec<Value>,
    flows: FlowsCollected,
    status: StatusLog,
) -> BTreeMap<String, Value> {
    let sc = &cfg.scenario;
    let FlowsCollected { notes, flow_meta } = flows;
    let mut meta = BTreeMap::new();
    meta.insert("emulator_late_us".into(), json!(lateness));
    if uses_tunnel {
        meta.insert(
            "status_interval_ms".into(),
            json!(cfg.status_interval.map(|d| d.as_millis() as u64)),
        );
    }
    if uses_tunnel {
        meta.insert(
            "daemon_scheduling".into(),
            json!(if topo.daemon_rt_priority > 0 {
                format!("SCHED_FIFO {} (emulators 10)", topo.daemon_rt_priority)
            } else {
                "normal".to_string()
            }),
        );
    }
    if flow_meta.iter().any(|m| !m.is_null()) {
        meta.insert("flows".into(), json!(flow_meta));
    }
    meta.insert("runner".into(), json!("testbed"));
    meta.insert("setup_s".into(), json!(t_shift));
    meta.insert(
        "path_metrics".into(),
        json!("from the userspace emulators: client->server direction; rtt = 2 x one-way delay + mean queueing delay of both directions per 100 ms"),
    );
    if sc.flow.iter().any(|f| f.kind == FlowKind::Tcp) {
        meta.insert(
            "tcp_owd".into(),
            json!("kernel TCP via iperf3: owd = srtt / 2 per 100 ms interval"),
        );
        meta.insert(
            "tcp_segments".into(),
            json!(format!(
                "iperf3 -M {} (TCP_MAXSEG = packet_bytes - 40, so with the 12-byte timestamp option an IPv4 segment is packet_bytes long); receiver route `quickack 1` (over a path: its route to the sender; through the tunnel: a host route to the sender's tunnel address): one ack per segment, no delayed acks",
                sc.flow
                    .iter()
                    .filter(|f| f.kind == FlowKind::Tcp)
                    .map(|f| tcp_mss_bytes(f.packet_bytes).to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            )),
        );
    }
    if let Some(s) = status.client_final {
        meta.insert("client_status".into(), s);
    }
    if let Some(s) = status.server_final {
        meta.insert("server_status".into(), s);
    }
    if !notes.is_empty() {
        meta.insert("notes".into(), json!(notes));
    }
    meta
}

/// The largest packet a scenario sends through the tunnel (0 = none). The
/// testbed's TUN MTU: the daemons then size the core as the simulator does
/// (controllers count in packets of this size).
pub fn tunnelled_packet_max(sc: &Scenario) -> usize {
    sc.flow
        .iter()
        .filter(|f| f.via == "tunnel")
        .map(|f| f.packet_bytes)
        .max()
        .unwrap_or(0)
}

/// The daemons' `[tunnel]` table for a scenario: its `[tunnel]` settings
/// as they are (the daemon maps them to the core's configuration as the
/// simulator does) and the path MTU that carries its largest packet.
pub fn daemon_tunnel_config(sc: &Scenario) -> TunnelConfig {
    TunnelConfig {
        settings: sc.tunnel.clone(),
        path_mtu: tunnel_path_mtu(sc),
        // The simulator's send queue has no age limit (the AQM, a shared
        // setting, comes with the scenario's `[tunnel]`).
        send_queue_max_delay_ms: 0,
        ..TunnelConfig::default()
    }
}

/// TCP_MAXSEG for a TCP flow whose segments are `packet_bytes` long as IP
/// packets: minus the IPv4 and TCP headers (20 + 20). Linux subtracts the
/// timestamp option (12) from it again, so a full segment carries
/// `packet_bytes - 52` data bytes in exactly `packet_bytes` on the link.
fn tcp_mss_bytes(packet_bytes: usize) -> usize {
    packet_bytes.saturating_sub(40).clamp(536, 1460)
}

/// Path MTU of the testbed's paths and tunnel.
const DEFAULT_PATH_MTU: u32 = 1500;

/// The path MTU that carries the scenario's largest tunnelled packet in one
/// DCCP packet (outer IPv4 + UDP + the core's worst-case DCCP header budget),
/// at least 1500. The simulator sizes its MSS the same way; with 1500-byte
/// paths the tunnel MTU is 1336, so 1400-byte packets would be fragmented
/// inside the tunnel into two DCCP packets each (twice the packet rate and
/// ~9 % header overhead that the simulated run does not have).
fn tunnel_path_mtu(sc: &Scenario) -> u32 {
    let largest = tunnelled_packet_max(sc);
    let need = largest as u64
        + u64::from(mpdccp_net::mtu::IPV4_HEADER_BYTES + mpdccp_net::mtu::UDP_HEADER_BYTES)
        + mpdccp_proto::conn::DATA_HEADER_MAX as u64;
    u32::try_from(need)
        .unwrap_or(u32::MAX)
        .clamp(DEFAULT_PATH_MTU, crate::emu::TUN_MTU)
}

/// The highest rate a path ever has, Mbit/s.
fn peak_mbps(p: &mpdccp_model::scenario::PathSpec) -> f64 {
    p.rate_schedule_bps()
        .iter()
        .map(|&(_, b)| b as f64 / 1e6)
        .fold(0.0, f64::max)
}

fn record_probe(
    rec: &mut Recorder,
    flow: usize,
    log: &SendLog,
    arr: &[Arrival],
    rel: impl Fn(Instant) -> Instant,
) {
    for &(t, bytes) in &log.sent {
        rec.flow_sent(flow, rel(t), bytes);
    }
    let n = log.sent.len();
    let mut seen = vec![false; n];
    let mut max_seq: Option<u64> = None;
    for a in arr.iter().filter(|a| a.flow == flow as u32) {
        let Some(s) = seen.get_mut(a.seq as usize) else {
            continue;
        };
        if *s {
            continue; // duplicate: counted once
        }
        *s = true;
        let ooo = max_seq.is_some_and(|m| a.seq < m);
        max_seq = Some(max_seq.map_or(a.seq, |m| m.max(a.seq)));
        rec.flow_delivered(flow, rel(a.received), a.ip_bytes, a.received - a.sent, ooo);
    }
    for (k, got) in seen.iter().enumerate() {
        if !got {
            rec.flow_lost(flow, rel(log.sent[k].0), 1);
        }
    }
}

fn record_tcp(rec: &mut Recorder, flow: usize, packet_bytes: usize, v: &Value, start: Instant) {
    let seg = tcp_mss_bytes(packet_bytes) - 12;
    for iv in v["intervals"].as_array().into_iter().flatten() {
        let sum = &iv["sum"];
        if sum["omitted"].as_bool() == Some(true) {
            continue;
        }
        let bytes = sum["bytes"].as_u64().unwrap_or(0) as usize;
        let end = sum["end"].as_f64().unwrap_or(0.0);
        let t = start + Duration::from_secs_f64(end.max(0.0));
        let rtt_us = iv["streams"][0]["rtt"].as_u64().unwrap_or(0);
        let owd = Duration::from_micros(rtt_us / 2);
        let mut left = bytes;
        while left > 0 {
            let b = left.min(seg);
            rec.flow_sent(flow, t, b);
            rec.flow_delivered(flow, t, b, owd, false);
            left -= b;
        }
    }
}

/// How late the emulator delivered against its model during the scenario:
/// percentiles of the per-interval (100 ms) maxima, per direction, µs. Late
/// deliveries arrive in bursts, which a rate-based controller reads as a
/// higher delivery rate and as ack aggregation, so a run's timing quality
/// goes with its results.
fn lateness_summary(path: &str, samples: &[Sample], shift_s: f64) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("path".into(), json!(path));
    for dir in ["up", "down"] {
        let l =
            crate::emu::Lateness::of(samples.iter().filter(|s| s.dir == dir && s.t_s >= shift_s));
        // No samples: null, so a reader cannot take it for "on time".
        let v = (l.intervals > 0).then_some(l);
        out.insert(
            dir.into(),
            json!({ "p50": v.map(|l| l.p50_us), "p90": v.map(|l| l.p90_us), "max": v.map(|l| l.max_us) }),
        );
    }
    Value::Object(out)
}

fn record_path(
    rec: &mut Recorder,
    sc: &Scenario,
    i: usize,
    samples: &[Sample],
    shift_s: f64,
    status: &[(Instant, Value)],
    t0: Instant,
) {
    let spec = &sc.path[i];
    let delays = spec.delay_schedule();
    let delay_at = |t: Instant| {
        let mut d = Duration::ZERO;
        for &(at, v) in &delays {
            if at <= t {
                d = v;
            }
        }
        d
    };
    let up: Vec<&Sample> = samples.iter().filter(|s| s.dir == "up").collect();
    let down: Vec<&Sample> = samples.iter().filter(|s| s.dir == "down").collect();
    let mut prev: Option<&Sample> = None;
    let iface = format!("p{}", i + 1);
    for (k, s) in up.iter().enumerate() {
        let t_scn = s.t_s - shift_s;
        if t_scn < 0.0 {
            prev = Some(s);
            continue;
        }
        let now = Instant::from_secs_f64(t_scn);
        if let Some(p) = prev {
            let dp = s.delivered_pkts.saturating_sub(p.delivered_pkts);
            let db = s.delivered_bytes.saturating_sub(p.delivered_bytes);
            let rp = s.received_pkts.saturating_sub(p.received_pkts);
            let rb = s.received_bytes.saturating_sub(p.received_bytes);
            if let Some(avg) = rb.checked_div(rp) {
                for _ in 0..rp {
                    rec.path_sent(i, now, avg as usize);
                }
            }
            if let Some(avg) = db.checked_div(dp) {
                for _ in 0..dp {
                    rec.path_delivered(i, now, avg as usize);
                }
            }
            let lost = s.dropped_pkts.saturating_sub(p.dropped_pkts);
            if lost > 0 {
                rec.path_lost(i, now, lost);
            }
        }
        if s.qdelay_n > 0 {
            rec.path_queue_delay(i, now, Duration::from_secs_f64(s.qdelay_mean_ms / 1e3));
            let down_q = down.get(k).map(|d| d.qdelay_mean_ms).unwrap_or(0.0);
            let rtt =
                delay_at(now) * 2 + Duration::from_secs_f64((s.qdelay_mean_ms + down_q) / 1e3);
            rec.path_rtt(i, now, rtt);
        }
        let abs = t0 + Duration::from_secs_f64(t_scn);
        let (cwnd, srtt) = cwnd_srtt_near(status, abs, &iface);
        rec.path_sample(i, now, cwnd, srtt, s.queue_bytes);
        prev = Some(s);
    }
}

/// The cwnd and srtt of path `iface` in the daemon status sample nearest
/// to `at` (NaN and `None` when no sample has it Active).
fn cwnd_srtt_near(
    status: &[(Instant, Value)],
    at: Instant,
    iface: &str,
) -> (f64, Option<Duration>) {
    let st = status
        .iter()
        .min_by_key(|(t, _)| if *t > at { *t - at } else { at - *t });
    let (mut cwnd, mut srtt) = (f64::NAN, None);
    if let Some((_, v)) = st {
        for p in v["connections"][0]["paths"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if p["name"] == iface && p["state"] == "Active" {
                cwnd = p["cwnd_pkts"].as_f64().unwrap_or(f64::NAN);
                srtt = p["srtt_ms"]
                    .as_f64()
                    .map(|m| Duration::from_secs_f64(m / 1e3));
            }
        }
    }
    (cwnd, srtt)
}

/// The client daemon's per-path status as sampled (cwnd, pacing rate,
/// srtt, min RTT, CC state, in flight), one JSON line per sample with the
/// scenario time `t_s`: what the controller believed while the emulator's
/// samples show what the bottleneck saw.
fn write_status_log(path: &Path, samples: &[(Instant, Value)], t0: Instant) {
    let mut out = String::new();
    for (t, v) in samples {
        let t_s = t.as_nanos() as f64 / 1e9 - t0.as_nanos() as f64 / 1e9;
        let paths = &v["connections"][0]["paths"];
        out.push_str(&json!({ "t_s": t_s, "paths": paths }).to_string());
        out.push('\n');
    }
    let _ = std::fs::write(path, out);
}

/// A one-line-per-item text summary for the terminal.
pub fn summary_table(s: &Summary) -> String {
    let mut out = format!(
        "scenario {} (seed {}, {} s) on the testbed\n",
        s.scenario, s.seed, s.duration_s
    );
    let mut flows = |label: &str, fl: &[mpdccp_model::results::FlowSummary]| {
        for f in fl {
            out.push_str(&format!(
                "  {label}flow {:<10} goodput {:>7.2} Mbit/s  owd p50 {:>7.2} p95 {:>7.2} ms  lost {}\n",
                f.name, f.goodput_mbps, f.owd_ms.p50, f.owd_ms.p95, f.lost_pkts
            ));
        }
    };
    flows("", &s.flows);
    for (name, w) in &s.windows {
        flows(&format!("[{name}] "), &w.flows);
    }
    let mut paths = |label: &str, ps: &[mpdccp_model::results::PathSummary]| {
        for p in ps {
            out.push_str(&format!(
                "  {label}path {:<10} {:>7.2} Mbit/s  rtt p50 {:>7.2} p95 {:>7.2} ms  queue p95 {:>7.2} ms  lost {}\n",
                p.name, p.throughput_mbps, p.rtt_ms.p50, p.rtt_ms.p95, p.queue_delay_ms.p95, p.lost_pkts
            ));
        }
    };
    paths("", &s.paths);
    for (name, w) in &s.windows {
        paths(&format!("[{name}] "), &w.paths);
    }
    out
}
