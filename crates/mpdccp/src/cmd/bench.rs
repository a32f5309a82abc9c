//! `mpdccp bench sim`: simulator speed — simulated packets per wall-clock
//! second on the E4 scenario (the heaviest: 500 + 100 Mbit/s), and optionally
//! the wall time of a whole `mpdccp reproduce`. `mpdccp bench clients`:
//! many clients on one server daemon (`mpdccp_lab::loadgen`, needs root).
//! `mpdccp bench aggregation`: the tunnel against the best single path and
//! the capacity sum on a matrix of path mixes × controllers × inner traffic
//! (`mpdccp_sim::aggregation`).

use std::path::PathBuf;
use std::process::ExitCode;

use mpdccp_model::scenario::Scenario;
use mpdccp_sim::reproduce;

/// ns-3 3.37, one CUBIC flow at 500 Mbit/s and 100 ms RTT: simulated
/// packets per wall-clock second: the yardstick of the simulator's speed
/// goal.
const NS3_PKTS_PER_WALL_S: f64 = 10_700.0;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Simulator speed on E4 (Coupled CUBIC), plus optionally a full reproduce.
    Sim(SimArgs),
    /// Many clients on one server: a load generator drives N client
    /// connections (one UDP port each) against a real `mpdccp server` in a
    /// network namespace; reports connect time, server RSS per client, server
    /// CPU per Mbit/s and loss. Needs root.
    Clients(ClientsArgs),
    /// Aggregation scorecard (simulator): path mixes × tunnel controllers ×
    /// inner traffic, each cell against the same traffic directly on each
    /// path alone (best single path) and the capacity sum. Writes
    /// scorecard.json, scorecard.csv, REPORT.md and heatmap.png into --out.
    /// Exit code 0 when it ran (thresholds are reported), 1 when a run
    /// failed (or, with --check, a cell fails a threshold), 2 on bad usage.
    Aggregation(super::bench_aggregation::Args),
}

#[derive(clap::Args, Debug)]
pub struct ClientsArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    /// Aggregate upstream rate offered by all clients, Mbit/s of inner IP
    /// packets (an echo behind the server sends the same back down).
    #[arg(long, default_value_t = 10.0)]
    pub mbps: f64,
    /// Seconds of data once every client is connected.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Inner IP packet size, bytes.
    #[arg(long, default_value_t = 1200)]
    pub packet_bytes: usize,
    /// Handshakes in flight at once (the server answers Requests beyond its
    /// half-open bound of 64 with Reset "too busy").
    #[arg(long, default_value_t = 32)]
    pub handshakes: usize,
    /// The server's `max_clients` [default: --clients; the daemon's own
    /// default is 1024].
    #[arg(long)]
    pub server_max_clients: Option<usize>,
    /// Stop connecting (and start the data phase with the clients that
    /// made it) after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub connect_timeout_s: f64,
    /// The server's UDP socket buffer (`tunnel.socket_buffer_bytes`)
    /// [default: the daemon's].
    #[arg(long)]
    pub socket_buffer: Option<usize>,
    /// The server's `workers` (packet threads; 1 = the single loop).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Simulated seconds of E4 to run (the scenario has 1000).
    #[arg(long, default_value_t = 30.0)]
    pub duration_s: f64,
    /// Scenario to measure [default: the built-in e4-coupled-cubic].
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Also time `reproduce` (add `--quick` to time the quick variant).
    #[arg(long)]
    pub reproduce: bool,
    #[arg(long)]
    pub quick: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let a = match args.what {
        What::Sim(a) => a,
        What::Clients(c) => return clients(c),
        What::Aggregation(g) => return super::bench_aggregation::run(g),
    };
    let s = sim_scenario(&a)?;
    let t0 = std::time::Instant::now();
    let out = mpdccp_sim::run(&s, None, |_| {})?;
    let wall = t0.elapsed().as_secs_f64();
    let pkts_per_s = out.stats.link_pkts as f64 / wall;
    let events_per_s = out.stats.events as f64 / wall;
    let mut result = serde_json::json!({
        "scenario": s.name,
        "simulated_s": s.duration_s,
        "wall_s": wall,
        "link_pkts": out.stats.link_pkts,
        "events": out.stats.events,
        "sim_pkts_per_wall_s": pkts_per_s,
        "events_per_wall_s": events_per_s,
        "realtime_factor": s.duration_s / wall,
        "projected_wall_s_for_1000_s": wall * 1000.0 / s.duration_s,
    });
    // The simulator's speed goals: >= 100x ns-3 3.37's packet rate on one CUBIC flow
    // at 500 Mbit/s, 100 ms RTT (10.7 k packets per wall second), and the
    // full E4 run (1000 simulated s) in under 60 s wall.
    let vs_ns3 = pkts_per_s / NS3_PKTS_PER_WALL_S;
    // The whole E4, or a projection from a shorter run.
    let whole = s.duration_s >= 1000.0;
    let e4_wall = wall * 1000.0 / s.duration_s;
    result["goals"] = serde_json::json!([
        {"figure": "simulated link packets per wall second / ns-3 3.37's (10.7 k/s)",
         "value": vs_ns3, "unit": "x", "goal": ">= 100", "met": vs_ns3 >= 100.0},
        {"figure": if whole { "E4, 1000 simulated s" } else { "E4, 1000 simulated s (projected from this run)" },
         "value": e4_wall, "unit": "s wall", "goal": "< 60", "met": e4_wall < 60.0},
    ]);
    if a.reproduce {
        time_reproduce(a.quick, &mut result)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        println!(
            "{}: {:.0} simulated s in {:.2} wall s — {:.0} packets/s, {:.0} events/s, {:.1}× real time; 1000 s would take ≈{:.0} s",
            s.name, s.duration_s, wall, pkts_per_s, events_per_s, s.duration_s / wall, wall * 1000.0 / s.duration_s
        );
        // A short run's start (slow start, allocations) is slower per
        // packet than the whole: on 2026-12-01 30 s projected 67–70 s while
        // the whole 1000 s took 55.8 s.
        let how = if whole {
            "measured".to_string()
        } else {
            format!(
                "projected from {:.0} s; --duration-s 1000 runs it whole",
                s.duration_s
            )
        };
        println!(
            "goals: {:.0}x ns-3's packet rate (goal >= 100x: {}), E4 1000 s in ≈{:.0} s ({how}; goal < 60 s: {})",
            vs_ns3,
            if vs_ns3 >= 100.0 { "met" } else { "NOT met" },
            e4_wall,
            if e4_wall < 60.0 { "met" } else { "NOT met" }
        );
        if let Some(r) = result.get("reproduce_wall_s") {
            println!(
                "reproduce{}: {:.1} s wall",
                if a.quick { " --quick" } else { "" },
                r.as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The scenario to time: `--scenario` or E4, cut to `--duration-s`.
fn sim_scenario(a: &SimArgs) -> anyhow::Result<Scenario> {
    let mut s = match &a.scenario {
        Some(p) => super::sim::load(p, &[])?,
        None => reproduce::load_scenario(None, "e4-coupled-cubic", false)?,
    };
    if a.duration_s < s.duration_s {
        let d = a.duration_s.to_string();
        // Shorten windows that would end after the run, then the run.
        let names: Vec<String> = s.window.iter().map(|w| w.name.clone()).collect();
        for n in names {
            s.apply_set(&format!("window.{n}.from_s"), "0")?;
            s.apply_set(&format!("window.{n}.to_s"), &d)?;
        }
        s.apply_set("duration_s", &d)?;
    }
    Ok(s)
}

/// Times a whole `reproduce` (`--quick`: its quick variant) into `result`.
fn time_reproduce(quick: bool, result: &mut serde_json::Value) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("mpdccp-bench-reproduce-{}", std::process::id()));
    let t1 = std::time::Instant::now();
    let rep = reproduce::reproduce(&reproduce::ReproduceOptions {
        scenarios_dir: None,
        out: dir.clone(),
        quick,
        only: Vec::new(),
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        progress: false,
    })?;
    result["reproduce_wall_s"] = t1.elapsed().as_secs_f64().into();
    result["reproduce_quick"] = quick.into();
    result["reproduce_failed_checks"] = rep
        .checks
        .iter()
        .filter(|c| c.verdict == reproduce::Verdict::Fail)
        .count()
        .into();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn clients(a: ClientsArgs) -> anyhow::Result<ExitCode> {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let abort = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&abort))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&abort))?;
    let exe = std::env::current_exe()?;
    let defaults = mpdccp_lab::loadgen::LoadOpts::default();
    let opts = mpdccp_lab::loadgen::LoadOpts {
        socket_buffer_bytes: a.socket_buffer.unwrap_or(defaults.socket_buffer_bytes),
        clients: a.clients,
        mbps: a.mbps,
        seconds: a.seconds,
        packet_bytes: a.packet_bytes,
        max_handshakes: a.handshakes,
        server_max_clients: a.server_max_clients,
        workers: a.workers,
        connect_timeout: std::time::Duration::try_from_secs_f64(a.connect_timeout_s)
            .map_err(|e| anyhow::anyhow!("--connect-timeout-s: {e}"))?,
        ..defaults
    };
    let v = mpdccp_lab::loadgen::run(&exe, &opts, abort)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        mpdccp_lab::loadgen::print_text(&v);
    }
    Ok(ExitCode::SUCCESS)
}
