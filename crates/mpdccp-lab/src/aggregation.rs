//! `mpdccp testbed --aggregation`: the aggregation matrix, reduced, on the real
//! tunnel. Two path pairs (DSL beside LTE, `mpdccp netem` paths) × inner
//! traffic (kernel TCP up and down via iperf3, QUIC up and down with
//! aioquic), each cell through the tunnel (the daemons' defaults) and with
//! its references on the same paths in the same run: the same flow over
//! each path alone (best single path) and, for TCP, kernel MPTCP over both
//! paths (`flows::run_tcp_bulk` with an IPPROTO_MPTCP socket, the server
//! announcing its second address).
//!
//! Goodput is the receiver's application bytes over the steady window
//! (from `max(5 s, 20 %)` of the run to its end, as `mpdccp bench
//! aggregation`). The simulator's numbers for the same scenarios (when the
//! caller passes it) count IP packets; they are put on the same basis with
//! each flow's payload share (TCP: packet − 52 bytes of IPv4, TCP and
//! timestamp headers; QUIC: [`crate::flows::quic_payload_bytes`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use mpdccp_model::results::Summary;
use mpdccp_model::scenario::{
    Direction, FlowKind, FlowSpec, HyStartKind, PathSpec, Scenario, WindowSpec,
};
use serde_json::{json, Value};

use crate::bench::stop_if_interrupted;
use crate::testbed::{self, TestbedConfig};
use crate::topo::Topology;

/// One pair of paths of the issue.
pub struct Pair {
    pub name: &'static str,
    pub about: &'static str,
    /// (name, one-way delay ms, Mbit/s)
    pub paths: &'static [(&'static str, f64, f64)],
}

/// Drop-tail buffer of every path (the simulator's default).
pub const BUFFER_BYTES: usize = 150_000;

/// The issue's two pairs.
pub const PAIRS: &[Pair] = &[
    Pair {
        name: "20+20",
        about: "DSL 20 Mbit/s 15 ms + LTE 20 Mbit/s 35 ms",
        paths: &[("dsl", 15.0, 20.0), ("lte", 35.0, 20.0)],
    },
    Pair {
        name: "50+10",
        about: "DSL 50 Mbit/s 10 ms + LTE 10 Mbit/s 40 ms",
        paths: &[("dsl", 10.0, 50.0), ("lte", 40.0, 10.0)],
    },
];

/// One inner traffic of the reduced matrix.
pub struct Inner {
    pub name: &'static str,
    pub kind: FlowKind,
    pub up: bool,
    /// Kernel TCP's controller (the MPTCP reference uses the same).
    pub tcp_cc: &'static str,
}

pub const INNERS: &[Inner] = &[
    Inner {
        name: "tcp-up",
        kind: FlowKind::Tcp,
        up: true,
        tcp_cc: "cubic",
    },
    Inner {
        name: "tcp-down",
        kind: FlowKind::Tcp,
        up: false,
        tcp_cc: "cubic",
    },
    Inner {
        name: "tcp-bbr-up",
        kind: FlowKind::Tcp,
        up: true,
        tcp_cc: "bbr",
    },
    Inner {
        name: "tcp-bbr-down",
        kind: FlowKind::Tcp,
        up: false,
        tcp_cc: "bbr",
    },
    Inner {
        name: "quic-up",
        kind: FlowKind::Quic,
        up: true,
        tcp_cc: "",
    },
    Inner {
        name: "quic-down",
        kind: FlowKind::Quic,
        up: false,
        tcp_cc: "",
    },
];

/// TCP's IP packet size (1400, as the simulator's benchmark) and QUIC's
/// (1250: aioquic's 1222-byte datagrams).
const TCP_PACKET: usize = 1400;
const QUIC_PACKET: usize = 1250;

/// The issue's goals on the real tunnel.
pub const GOAL_BEST_PATH: f64 = 0.95;
pub const GOAL_QUIC_SUM: f64 = 0.85;
pub const GOAL_MPTCP: f64 = 0.95;

/// The steady window `[from, to)` of a run of `secs` (as the simulator's
/// aggregation benchmark).
pub fn steady_window(secs: f64) -> (f64, f64) {
    ((0.2 * secs).max(5.0).min(secs * 0.5), secs)
}

fn paths_of(pair: &Pair) -> Vec<PathSpec> {
    pair.paths
        .iter()
        .map(|&(name, delay_ms, mbps)| PathSpec {
            name: name.into(),
            delay_ms,
            rate_mbps: Some(mbps),
            buffer_bytes: BUFFER_BYTES,
            ..PathSpec::default()
        })
        .collect()
}

/// The scenario of one cell: `via` = "tunnel" or a path's name; the
/// tunnel's settings are the shared defaults (what the daemon runs).
pub fn scenario(pair: &Pair, inner: &Inner, via: &str, secs: f64) -> Scenario {
    let (from, to) = steady_window(secs);
    let flow = FlowSpec {
        name: "bulk".into(),
        kind: inner.kind,
        cc: (inner.kind == FlowKind::Tcp).then(|| inner.tcp_cc.into()),
        packet_bytes: if inner.kind == FlowKind::Tcp {
            TCP_PACKET
        } else {
            QUIC_PACKET
        },
        direction: if inner.up {
            Direction::Up
        } else {
            Direction::Down
        },
        via: via.into(),
        // The testbed runs kernel TCP; the simulator models its CUBIC's
        // slow-start exit (the ramp through the tunnel, docs/AGGREGATION.md).
        hystart: (inner.kind == FlowKind::Tcp && inner.tcp_cc == "cubic")
            .then_some(HyStartKind::Linux),
        ..FlowSpec::default()
    };
    Scenario {
        name: format!("agg-{}-{}-{}", pair.name, inner.name, via),
        duration_s: secs,
        seed: 1,
        path: paths_of(pair),
        flow: vec![flow],
        window: vec![WindowSpec {
            name: "steady".into(),
            from_s: from,
            to_s: to,
        }],
        ..Scenario::default()
    }
}

/// The application payload share of a flow's IP packets (to put the
/// simulator's packet counts on the testbed's basis).
pub fn payload_share(kind: FlowKind, packet_bytes: usize) -> f64 {
    let payload = match kind {
        FlowKind::Quic => crate::flows::quic_payload_bytes(packet_bytes),
        _ => packet_bytes.saturating_sub(52),
    };
    payload as f64 / packet_bytes as f64
}

/// The steady window's goodput of the first flow, Mbit/s.
pub fn steady_mbps(s: &Summary) -> f64 {
    s.windows
        .get("steady")
        .and_then(|w| w.flows.first())
        .map_or(0.0, |f| f.goodput_mbps)
}

/// What to run.
pub struct Options {
    pub exe: PathBuf,
    pub secs: f64,
    /// Pair names (empty: both).
    pub pairs: Vec<String>,
    /// Inner names (empty: all four).
    pub inners: Vec<String>,
    /// Also run each path alone and MPTCP.
    pub references: bool,
    pub setup_s: f64,
    pub daemon_rt_priority: u8,
    pub auth: mpdccp_net::daemon::config::AuthMode,
    /// Keep each run's logs under this directory.
    pub keep_dir: Option<PathBuf>,
    /// `KEY=VALUE` scenario overrides (`tunnel.cc=ccid5`) applied to every
    /// cell, so a setting is measured against the defaults in the same way.
    pub set: Vec<(String, String)>,
    /// Runs of every measurement of a cell (tunnel, each path, MPTCP), in
    /// interleaved rounds; a cell's figures are their medians. Why: one
    /// real-tunnel run of 20 s moves by ±3 Mbit/s between repetitions
    /// (docs/AGGREGATION.md), as much as the changes it should judge.
    pub repeat: usize,
}

/// A simulator run of a scenario (the CLI passes `mpdccp_sim::run`).
pub type SimFn<'a> = &'a dyn Fn(&Scenario) -> anyhow::Result<Summary>;

fn testbed_run(opts: &Options, sc: Scenario, abort: &Arc<AtomicBool>) -> anyhow::Result<Summary> {
    let keep = opts.keep_dir.as_ref().map(|d| d.join(&sc.name));
    let cfg = TestbedConfig {
        scenario: sc,
        exe: opts.exe.clone(),
        setup_s: opts.setup_s,
        log: "info".into(),
        keep_dir: keep,
        daemon_rt_priority: opts.daemon_rt_priority,
        status_interval: None,
        auth: opts.auth,
    };
    Ok(testbed::run(&cfg, abort)?.0)
}

/// The emulators' worst p90 lateness over both directions of every path
/// (µs per 100 ms interval, `meta.emulator_late_us`): above a few ms the
/// host stalled the link, and the run measured the host.
pub fn emulator_late_p90_us(s: &Summary) -> u64 {
    s.meta
        .get("emulator_late_us")
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .flat_map(|p| [p["up"]["p90"].as_u64(), p["down"]["p90"].as_u64()])
        .map(|v| v.unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// Per-path data counters and every refusal / drop counter of a daemon's
/// status: why a cell did (not) aggregate.
pub fn diagnosis(status: &Value) -> Value {
    let conn = &status["connections"][0];
    let paths: Vec<Value> = conn["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            json!({
                "name": p["name"],
                "state": p["state"],
                "tx_data_pkts": p["stats"]["tx_data_pkts"],
                "lost_pkts": p["stats"]["lost_pkts"],
                "cc_state": p["cc_state"],
                "cwnd_pkts": p["cwnd_pkts"],
                "in_flight_pkts": p["in_flight_pkts"],
                "queued_pkts": p["queued_pkts"],
                "srtt_ms": p["srtt_ms"],
                "min_rtt_ms": p["min_rtt_ms"],
                "delivery_rate_bps": p["delivery_rate_bps"],
                "pacing_rate_bps": p["pacing_rate_bps"],
            })
        })
        .collect();
    let mut counters = serde_json::Map::new();
    fn walk(prefix: &str, v: &Value, out: &mut serde_json::Map<String, Value>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "paths" {
                        continue;
                    }
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&p, x, out);
                }
            }
            // The connections (a list) hold the send queue's and the
            // reorderer's counters.
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    walk(&format!("{prefix}.{i}"), x, out);
                }
            }
            Value::Number(n) => {
                let leaf = prefix.rsplit('.').next().unwrap_or("");
                let interesting = [
                    "refused",
                    "drop",
                    "expired",
                    "reorder",
                    "timeout",
                    "timed_out",
                    "lost",
                    "late",
                    "full",
                    "overflow",
                    "retransmit",
                    "resent",
                ]
                .iter()
                .any(|w| leaf.contains(w));
                if interesting && n.as_f64().unwrap_or(0.0) != 0.0 {
                    out.insert(prefix.to_string(), v.clone());
                }
            }
            _ => {}
        }
    }
    walk("", status, &mut counters);
    json!({ "paths": paths, "counters": counters })
}

/// The namespaces of `pair` with an `mpdccp netem` emulator on every path
/// (the pair's delays, rates and buffers for `secs`), no tunnel yet; the
/// scenario whose paths they emulate.
pub fn emulated_pair(exe: &Path, pair: &Pair, secs: f64) -> anyhow::Result<(Topology, Scenario)> {
    let sc = scenario(pair, &INNERS[0], "tunnel", secs);
    let mut topo = Topology::build(sc.path.len())?;
    let file = topo.dir.join("paths.toml");
    std::fs::write(&file, toml::to_string(&sc)?)?;
    let file_s = file.to_string_lossy().into_owned();
    for (i, p) in sc.path.iter().enumerate() {
        topo.start_emulator(
            exe,
            i,
            &["--scenario", &file_s, "--path", &p.name, "--seed", "1"],
        )?;
    }
    Ok((topo, sc))
}

/// Kernel MPTCP over both paths of `pair`: one bulk connection from the
/// client's first address to the server's; the server announces its
/// second address (`ip mptcp endpoint … signal`), so the client joins a
/// subflow over the second path. Returns the steady-window Mbit/s and the
/// number of subflows the client joined.
pub fn mptcp_run(opts: &Options, pair: &Pair, inner: &Inner) -> anyhow::Result<(f64, u64)> {
    let up = inner.up;
    let (topo, sc) = emulated_pair(&opts.exe, pair, opts.secs)?;
    for i in 0..sc.path.len() {
        // One ack per segment, as through the tunnel (testbed).
        topo.set_quickack(i, up)?;
    }
    let n = sc.path.len().to_string();
    for ns in [&topo.client, &topo.server] {
        ns.ip(&[
            "mptcp",
            "limits",
            "set",
            "subflow",
            &n,
            "add_addr_accepted",
            &n,
        ])?;
    }
    for a in topo.paths.iter().skip(1) {
        topo.server.ip(&[
            "mptcp",
            "endpoint",
            "add",
            &a.server_ip.to_string(),
            "dev",
            &a.iface,
            "signal",
        ])?;
    }
    let server = SocketAddr::new(topo.paths[0].server_ip.into(), 5301);
    let r = crate::flows::run_tcp_bulk(&topo, server, up, opts.secs, true, Some(inner.tcp_cc))?;
    let joined = netstat_counter(&topo.client, "MPJoinSynAckRx").unwrap_or(0);
    let (from, to) = steady_window(opts.secs);
    let t0 = r.recv.first().map_or(0.0, |s| s.0);
    Ok((r.mbps_between(t0 + from, t0 + to), joined))
}

/// A counter of `MPTcpExt` in a namespace's `/proc/net/netstat`.
fn netstat_counter(ns: &crate::netns::Netns, name: &str) -> Option<u64> {
    let out = ns.output("cat", &["/proc/net/netstat"]).ok()?;
    let mut rows = out.lines().filter(|l| l.starts_with("MPTcpExt:"));
    let names: Vec<&str> = rows.next()?.split_whitespace().collect();
    let vals: Vec<&str> = rows.next()?.split_whitespace().collect();
    let i = names.iter().position(|n| *n == name)?;
    vals.get(i)?.parse().ok()
}

fn pick<'a, T>(all: &'a [T], names: &[String], name: fn(&T) -> &str) -> anyhow::Result<Vec<&'a T>> {
    if names.is_empty() {
        return Ok(all.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            all.iter().find(|x| name(x) == n).with_context(|| {
                let valid: Vec<&str> = all.iter().map(name).collect();
                format!("unknown `{n}` (valid: {})", valid.join(", "))
            })
        })
        .collect()
}

/// Runs the matrix; `sim` also runs every testbed scenario in the
/// simulator. Returns the report (see [`markdown`]).
pub fn run(
    opts: &Options,
    abort: &Arc<AtomicBool>,
    sim: Option<SimFn>,
    progress: &dyn Fn(&str),
) -> anyhow::Result<Value> {
    let pairs = pick(PAIRS, &opts.pairs, |p| p.name)?;
    let inners = pick(INNERS, &opts.inners, |i| i.name)?;
    let mut cells = Vec::new();
    for pair in &pairs {
        for inner in &inners {
            cells.push(run_cell(opts, pair, inner, abort, sim, progress)?);
        }
    }
    Ok(json!({
        "secs": opts.secs,
        "repeat": opts.repeat.max(1),
        "steady_window_s": steady_window(opts.secs),
        "buffer_bytes": BUFFER_BYTES,
        "auth": opts.auth.name(),
        "set": opts.set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "basis": "receiver's application bytes over the steady window; simulator scaled by the payload share of its packets",
        "cells": cells,
    }))
}

/// One cell's findings while its runs come in.
#[derive(Default)]
struct CellFindings {
    cell: serde_json::Map<String, Value>,
    /// Every run's goodput by `via` ("tunnel", each path's name, "mptcp");
    /// `None` for a run that failed.
    runs: std::collections::BTreeMap<String, Vec<Option<f64>>>,
    /// The simulator's figure, by `via`.
    sims: serde_json::Map<String, Value>,
    /// The inner sender's own view (QUIC: losses it declared, cwnd).
    inner_sender: serde_json::Map<String, Value>,
}

/// One cell: `inner` through the tunnel over `pair` (with `--references`
/// also over each path alone and over MPTCP), scored.
fn run_cell(
    opts: &Options,
    pair: &Pair,
    inner: &Inner,
    abort: &Arc<AtomicBool>,
    sim: Option<SimFn>,
    progress: &dyn Fn(&str),
) -> anyhow::Result<Value> {
    let sum: f64 = pair.paths.iter().map(|p| p.2).sum();
    let mut f = CellFindings::default();
    f.cell.insert("pair".into(), json!(pair.name));
    f.cell.insert("inner".into(), json!(inner.name));
    f.cell.insert("capacity_sum_mbps".into(), json!(sum));
    let mut vias: Vec<&str> = vec!["tunnel"];
    if opts.references {
        vias.extend(pair.paths.iter().map(|p| p.0));
    }
    let rounds = opts.repeat.max(1);
    for round in 0..rounds {
        let of = if rounds > 1 {
            format!(" (run {} of {rounds})", round + 1)
        } else {
            String::new()
        };
        for via in &vias {
            stop_if_interrupted(abort)?;
            let mut sc = scenario(pair, inner, via, opts.secs);
            for (k, v) in &opts.set {
                sc.apply_set(k, v)
                    .map_err(|e| anyhow::anyhow!("--set {k}={v}: {e}"))?;
            }
            progress(&format!("{} / {} / {via}{of}", pair.name, inner.name));
            let got = testbed_run(opts, sc.clone(), abort);
            f.record_testbed(inner, via, &got, progress);
            // The simulator is deterministic: once per cell.
            if let (Some(sim), 0) = (sim, round) {
                let flow = &sc.flow[0];
                let share = payload_share(flow.kind, flow.packet_bytes);
                let s = sim(&sc).map(|s| steady_mbps(&s) * share);
                f.sims.insert((*via).into(), json!(s.ok()));
            }
        }
        if opts.references && inner.kind == FlowKind::Tcp {
            stop_if_interrupted(abort)?;
            progress(&format!("{} / {} / mptcp{of}", pair.name, inner.name));
            f.record_mptcp(opts, pair, inner, progress);
        }
    }
    let CellFindings {
        mut cell,
        runs,
        sims,
        inner_sender,
    } = f;
    let mut direct = serde_json::Map::new();
    for (via, got) in &runs {
        let m = json!(median(got));
        match via.as_str() {
            "tunnel" => {
                cell.insert("tunnel_mbps".into(), m);
            }
            "mptcp" => {
                cell.insert("mptcp_mbps".into(), m);
            }
            path => {
                direct.insert(path.into(), m);
            }
        }
    }
    if rounds > 1 {
        cell.insert("runs_mbps".into(), json!(runs));
    }
    let best = direct
        .values()
        .filter_map(Value::as_f64)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    cell.insert("direct_mbps".into(), Value::Object(direct));
    if !inner_sender.is_empty() {
        cell.insert("inner_sender".into(), Value::Object(inner_sender));
    }
    cell.insert("best_single_mbps".into(), json!(best));
    if sim.is_some() {
        cell.insert("sim_mbps".into(), Value::Object(sims));
    }
    Ok(score(Value::Object(cell), inner.kind))
}

/// The median of the runs that produced a figure (`None` if none did).
fn median(runs: &[Option<f64>]) -> Option<f64> {
    let mut x: Vec<f64> = runs.iter().flatten().copied().collect();
    if x.is_empty() {
        return None;
    }
    x.sort_by(f64::total_cmp);
    let n = x.len();
    Some(if n % 2 == 1 {
        x[n / 2]
    } else {
        (x[n / 2 - 1] + x[n / 2]) / 2.0
    })
}

impl CellFindings {
    /// Records one testbed run over `via` (the tunnel or one path alone).
    fn record_testbed(
        &mut self,
        inner: &Inner,
        via: &str,
        got: &anyhow::Result<Summary>,
        progress: &dyn Fn(&str),
    ) {
        let cell = &mut self.cell;
        if let Ok(s) = got {
            let late = emulator_late_p90_us(s);
            let worst = cell
                .get("emulator_late_p90_max_us")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            cell.insert("emulator_late_p90_max_us".into(), json!(worst.max(late)));
        }
        if let Some(m) = got.as_ref().ok().and_then(|s| s.meta.get("flows")) {
            self.inner_sender.insert(via.into(), m[0].clone());
        }
        let (mbps, diag, rx_diag) = match got {
            Ok(s) => {
                // The sending daemon's view, and the receiving
                // one's (its reordering).
                let (tx, rx) = if inner.up {
                    ("client_status", "server_status")
                } else {
                    ("server_status", "client_status")
                };
                (
                    Some(steady_mbps(s)),
                    s.meta.get(tx).map(diagnosis),
                    s.meta.get(rx).map(diagnosis),
                )
            }
            Err(e) => {
                progress(&format!("  failed: {e:#}"));
                (None, None, None)
            }
        };
        progress(&format!("  testbed {:.2} Mbit/s", mbps.unwrap_or(f64::NAN)));
        self.runs.entry(via.into()).or_default().push(mbps);
        if via == "tunnel" {
            // The last run's daemons stand for the cell.
            if let Some(d) = diag {
                cell.insert("sender_daemon".into(), d);
            }
            if let Some(d) = rx_diag {
                cell.insert("receiver_daemon".into(), d["counters"].clone());
            }
            if let Err(e) = got {
                cell.insert("error".into(), json!(format!("{e:#}")));
            }
        }
    }

    /// Kernel MPTCP over the same two paths, for comparison.
    fn record_mptcp(
        &mut self,
        opts: &Options,
        pair: &Pair,
        inner: &Inner,
        progress: &dyn Fn(&str),
    ) {
        let got = match mptcp_run(opts, pair, inner) {
            Ok((m, joined)) => {
                progress(&format!("  mptcp {m:.2} Mbit/s ({joined} joins)"));
                self.cell
                    .insert("mptcp_joined_subflows".into(), json!(joined));
                Some(m)
            }
            Err(e) => {
                progress(&format!("  mptcp failed: {e:#}"));
                self.cell
                    .insert("mptcp_error".into(), json!(format!("{e:#}")));
                None
            }
        };
        self.runs.entry("mptcp".into()).or_default().push(got);
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Adds the ratios and the issue's goals (pass / fail) to a cell.
pub fn score(mut cell: Value, kind: FlowKind) -> Value {
    let t = cell["tunnel_mbps"].as_f64();
    let best = cell["best_single_mbps"].as_f64();
    let sum = cell["capacity_sum_mbps"].as_f64();
    let mptcp = cell["mptcp_mbps"].as_f64();
    let r_best = ratio(t, best);
    let r_sum = ratio(t, sum);
    let r_mptcp = ratio(t, mptcp);
    let mut goals = serde_json::Map::new();
    if let Some(r) = r_best {
        goals.insert("best_single_x0.95".into(), json!(r >= GOAL_BEST_PATH));
    }
    if kind == FlowKind::Quic {
        if let Some(r) = r_sum {
            goals.insert("sum_x0.85".into(), json!(r >= GOAL_QUIC_SUM));
        }
        if let Some(r) = r_best {
            goals.insert("never_below_best".into(), json!(r >= 1.0));
        }
    } else if let Some(r) = r_mptcp {
        goals.insert("mptcp_x0.95".into(), json!(r >= GOAL_MPTCP));
    }
    // Simulator vs testbed: within 10 % of the testbed's number.
    let mut agree = serde_json::Map::new();
    if let Some(sims) = cell["sim_mbps"].as_object().cloned() {
        for (via, s) in sims {
            let tb = if via == "tunnel" {
                t
            } else {
                cell["direct_mbps"][via.as_str()].as_f64()
            };
            if let (Some(s), Some(tb)) = (s.as_f64(), tb) {
                let d = (s - tb) / tb.max(1e-9);
                agree.insert(via, json!({"rel_diff": d, "within_10pct": d.abs() <= 0.10}));
            }
        }
    }
    let m = cell.as_object_mut().expect("a cell is an object");
    m.insert("ratio_best_single".into(), json!(r_best));
    m.insert("ratio_sum".into(), json!(r_sum));
    m.insert("ratio_mptcp".into(), json!(r_mptcp));
    m.insert("goals".into(), Value::Object(goals));
    if !agree.is_empty() {
        m.insert("sim_agreement".into(), Value::Object(agree));
    }
    cell
}

fn f(v: &Value) -> String {
    v.as_f64().map_or("—".into(), |x| format!("{x:.1}"))
}

/// The min–max of a cell's runs over `via` (`--agg-repeat`), when it ran
/// more than once.
fn runs_range(c: &Value, via: &str) -> Option<(f64, f64)> {
    let got: Vec<f64> = c["runs_mbps"][via]
        .as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    (got.len() > 1).then(|| {
        let lo = got.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = got.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    })
}

/// A cell's figure for `via`, with the range of its runs when repeated:
/// `46.4 [41.3–47.3]`.
fn f_runs(c: &Value, via: &str, v: &Value) -> String {
    match runs_range(c, via) {
        Some((lo, hi)) => format!("{} [{lo:.1}–{hi:.1}]", f(v)),
        None => f(v),
    }
}

fn r(v: &Value) -> String {
    v.as_f64().map_or("—".into(), |x| format!("{x:.2}"))
}

/// The report as Markdown: one row per cell, then simulator vs testbed.
pub fn markdown(report: &Value) -> String {
    let mut out = String::from(
        "| pair | inner | tunnel | DSL alone | LTE alone | MPTCP | sum | ÷ best | ÷ MPTCP | ÷ sum | goals |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let cells = report["cells"].as_array().cloned().unwrap_or_default();
    for c in &cells {
        let goals: Vec<String> = c["goals"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                format!(
                    "{k} {}",
                    if v.as_bool() == Some(true) {
                        "pass"
                    } else {
                        "**FAIL**"
                    }
                )
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            c["pair"].as_str().unwrap_or(""),
            c["inner"].as_str().unwrap_or(""),
            f_runs(c, "tunnel", &c["tunnel_mbps"]),
            f_runs(c, "dsl", &c["direct_mbps"]["dsl"]),
            f_runs(c, "lte", &c["direct_mbps"]["lte"]),
            f_runs(c, "mptcp", &c["mptcp_mbps"]),
            f(&c["capacity_sum_mbps"]),
            r(&c["ratio_best_single"]),
            r(&c["ratio_mptcp"]),
            r(&c["ratio_sum"]),
            goals.join(", ")
        ));
    }
    if let Some(n) = report["repeat"].as_u64().filter(|&n| n > 1) {
        out.push_str(&format!(
            "\nEach figure is the median of {n} runs [min–max], the cell's measurements interleaved round by round.\n"
        ));
    }
    if let Some(set) = report["set"].as_array().filter(|s| !s.is_empty()) {
        let set: Vec<&str> = set.iter().filter_map(Value::as_str).collect();
        out.push_str(&format!(
            "\nSettings beyond the defaults: `{}`\n",
            set.join("`, `")
        ));
    }
    if cells.iter().any(|c| c["sim_mbps"].is_object()) {
        out.push_str("\nSimulator vs testbed (Mbit/s, payload basis; agreement within 10 %; the simulator's TCP CUBIC leaves slow start as Linux's HyStart does, `hystart = \"linux\"`):\n\n| pair | inner | via | testbed | simulator | diff | agrees |\n|---|---|---|---|---|---|---|\n");
        let (mut n, mut ok) = (0, 0);
        for c in &cells {
            for (via, a) in c["sim_agreement"].as_object().into_iter().flatten() {
                let tb = if via == "tunnel" {
                    &c["tunnel_mbps"]
                } else {
                    &c["direct_mbps"][via.as_str()]
                };
                let good = a["within_10pct"].as_bool() == Some(true);
                n += 1;
                ok += usize::from(good);
                out.push_str(&format!(
                    "| {} | {} | {via} | {} | {} | {:+.0} % | {} |\n",
                    c["pair"].as_str().unwrap_or(""),
                    c["inner"].as_str().unwrap_or(""),
                    f(tb),
                    f(&c["sim_mbps"][via.as_str()]),
                    a["rel_diff"].as_f64().unwrap_or(f64::NAN) * 100.0,
                    if good { "yes" } else { "no" }
                ));
            }
        }
        out.push_str(&format!("\n{ok} of {n} agree within 10 %.\n"));
    }
    out
}

/// Grouped bars per cell: tunnel, each path alone, MPTCP, simulator.
pub fn plot(report: &Value, file: &Path) -> std::io::Result<()> {
    let legend = ["tunnel", "DSL alone", "LTE alone", "MPTCP", "sim tunnel"];
    // Where each series' repeated runs are (`--agg-repeat`); the simulator
    // runs once.
    let runs_key = [
        Some("tunnel"),
        Some("dsl"),
        Some("lte"),
        Some("mptcp"),
        None,
    ];
    let nan = f64::NAN;
    let cells: Vec<&Value> = report["cells"].as_array().into_iter().flatten().collect();
    let groups: Vec<(String, Vec<f64>)> = cells
        .iter()
        .map(|c| {
            let v = |x: &Value| x.as_f64().unwrap_or(nan);
            (
                format!(
                    "{} {}",
                    c["pair"].as_str().unwrap_or(""),
                    c["inner"].as_str().unwrap_or("")
                ),
                vec![
                    v(&c["tunnel_mbps"]),
                    v(&c["direct_mbps"]["dsl"]),
                    v(&c["direct_mbps"]["lte"]),
                    v(&c["mptcp_mbps"]),
                    v(&c["sim_mbps"]["tunnel"]),
                ],
            )
        })
        .collect();
    // The min–max of a series' runs, drawn as an error bar.
    let ranges: Vec<Vec<Option<(f64, f64)>>> = cells
        .iter()
        .map(|c| runs_key.iter().map(|k| runs_range(c, (*k)?)).collect())
        .collect();
    // A series no cell measured (no simulator, no references) is left out
    // rather than drawn as a row of "n/a" labels.
    let keep: Vec<usize> = (0..legend.len())
        .filter(|&j| groups.iter().any(|(_, v)| v[j].is_finite()))
        .collect();
    let legend: Vec<&str> = keep.iter().map(|&j| legend[j]).collect();
    let groups: Vec<(String, Vec<f64>)> = groups
        .into_iter()
        .map(|(name, v)| (name, keep.iter().map(|&j| v[j]).collect()))
        .collect();
    let ranges: Vec<Vec<Option<(f64, f64)>>> = ranges
        .into_iter()
        .map(|r| keep.iter().map(|&j| r[j]).collect())
        .collect();
    mpdccp_model::plot::plot_grouped_bars_with_ranges(
        file,
        "Reduced aggregation matrix on the real tunnel (docs/AGGREGATION.md)",
        "goodput, Mbit/s (median; bars: min–max of the runs)",
        &legend,
        &groups,
        &ranges,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_runs_report_their_median_and_range() {
        assert_eq!(
            median(&[Some(41.3), None, Some(47.3), Some(44.2)]),
            Some(44.2)
        );
        assert_eq!(median(&[Some(41.3), Some(47.3)]), Some(44.3));
        assert_eq!(median(&[None, None]), None);
        let c = json!({"pair": "50+10", "inner": "tcp-up", "tunnel_mbps": 44.2,
                       "runs_mbps": {"tunnel": [41.3, null, 47.3, 44.2], "dsl": [48.2]},
                       "direct_mbps": {"dsl": 48.2}});
        let md = markdown(&json!({"repeat": 4, "cells": [c]}));
        assert!(md.contains("| 44.2 [41.3–47.3] | 48.2 |"), "{md}");
        assert!(md.contains("median of 4 runs"), "{md}");
    }

    #[test]
    fn repeated_runs_are_plotted_with_their_range() {
        let c = json!({"pair": "50+10", "inner": "tcp-up", "tunnel_mbps": 47.4, "mptcp_mbps": 56.1,
                       "runs_mbps": {"tunnel": [41.4, 47.4, 47.5], "dsl": [47.9, 48.1, 47.9],
                                     "mptcp": [56.1, 56.1, 56.0]},
                       "direct_mbps": {"dsl": 47.9, "lte": 9.6}});
        let file = std::env::temp_dir().join(format!("mpdccp-agg-plot-{}.png", std::process::id()));
        plot(&json!({"cells": [c]}), &file).expect("plot");
        let png = std::fs::read(&file).expect("a PNG");
        let _ = std::fs::remove_file(&file);
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 5_000,
            "{} bytes",
            png.len()
        );
    }

    #[test]
    fn a_cell_is_scored_against_its_references_and_the_issues_goals() {
        let c = json!({"tunnel_mbps": 36.0, "best_single_mbps": 19.0, "capacity_sum_mbps": 40.0,
                       "mptcp_mbps": 38.0, "direct_mbps": {"dsl": 19.0, "lte": 18.0},
                       "sim_mbps": {"tunnel": 30.0, "dsl": 19.5}});
        let s = score(c, FlowKind::Tcp);
        assert!((s["ratio_best_single"].as_f64().unwrap() - 36.0 / 19.0).abs() < 1e-12);
        assert_eq!(s["goals"]["best_single_x0.95"], true);
        // 36 / 38 = 0.947 < 0.95.
        assert_eq!(s["goals"]["mptcp_x0.95"], false);
        assert_eq!(s["sim_agreement"]["tunnel"]["within_10pct"], false);
        assert_eq!(s["sim_agreement"]["dsl"]["within_10pct"], true);
        let q = score(
            json!({"tunnel_mbps": 17.3, "best_single_mbps": 18.8, "capacity_sum_mbps": 40.0}),
            FlowKind::Quic,
        );
        assert_eq!(q["goals"]["never_below_best"], false);
        assert_eq!(q["goals"]["sum_x0.85"], false);
        assert!(markdown(&json!({"cells": [s, q]})).contains("**FAIL**"));
    }

    #[test]
    fn the_diagnosis_lists_the_connections_drop_and_reorder_counters() {
        // The send queue's and the reorderer's counters live in the list of
        // connections; a zero counter and a non-counter word are left out.
        let status = json!({
            "auth": {"gate": {"refused_unknown": 2, "half_open": 1}},
            "connections": [{
                "paths": [{"name": "p1", "stats": {"lost_pkts": 3}}],
                "stats": {"send_queue_codel_dropped": 9, "send_queue_expired": 0,
                          "conn_retransmitted_pkts": 1, "tx_bytes": 100},
                "reorder": {"gaps_timed_out": 79, "late": 80, "held_pkts": 4}
            }]
        });
        let d = diagnosis(&status);
        let c = d["counters"].as_object().unwrap();
        let keys: Vec<&str> = c.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "auth.gate.refused_unknown",
                "connections.0.reorder.gaps_timed_out",
                "connections.0.reorder.late",
                "connections.0.stats.conn_retransmitted_pkts",
                "connections.0.stats.send_queue_codel_dropped",
            ]
        );
        assert_eq!(d["paths"][0]["lost_pkts"], 3);
    }

    #[test]
    fn cells_are_the_issues_paths_with_the_shared_tunnel_defaults() {
        let quic_down = INNERS.iter().find(|i| i.name == "quic-down").unwrap();
        let sc = scenario(&PAIRS[1], quic_down, "tunnel", 20.0);
        sc.validate().unwrap();
        assert_eq!(sc.path[0].rate_mbps, Some(50.0));
        assert_eq!(sc.path[1].delay_ms, 40.0);
        assert_eq!(sc.flow[0].direction, Direction::Down);
        assert_eq!(sc.tunnel, Scenario::default().tunnel);
        assert_eq!(sc.window[0].from_s, 5.0);
        // The simulator counts IP packets, the testbed payload.
        assert!((payload_share(FlowKind::Tcp, 1400) - 1348.0 / 1400.0).abs() < 1e-12);
        // The BBR cells run the simulator's inner TCP with BBR too.
        let bbr = INNERS.iter().find(|i| i.name == "tcp-bbr-up").unwrap();
        let sc = scenario(&PAIRS[0], bbr, "dsl", 20.0);
        assert_eq!(sc.flow[0].cc.as_deref(), Some("bbr"));
        assert_eq!(sc.flow[0].direction, Direction::Up);
    }
}
