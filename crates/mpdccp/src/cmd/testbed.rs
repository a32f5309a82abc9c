//! `mpdccp testbed SCENARIO.toml [--out DIR]`: the scenario on the real
//! tunnel in network namespaces (see `mpdccp_lab::testbed`). Needs root.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use mpdccp_lab::testbed::{self, TestbedConfig};
use mpdccp_model::scenario::Scenario;
use mpdccp_model::write_outputs;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Builds client, one emulated router per path (mpdccp netem) and server as \
network namespaces, runs the scenario's flows with real tools (probe generator, iperf3, the \
kernel's TCP), writes summary.json, timeseries.csv and plots, and removes everything it made, \
also on error or Ctrl-C. Needs root and iperf3 (for tcp flows).\n\n\
With --bench, SCENARIO is not needed: measures the tunnel over two unshaped paths instead, \
then over one path beside wireguard-go when `wireguard-go` and `wg` are installed (skipped \
with a notice otherwise; install: apt-get install --no-install-recommends wireguard-tools; GOBIN=/tmp/wgbin go install \
golang.zx2c4.com/wireguard@latest && install -m 755 /tmp/wgbin/wireguard \
/usr/local/bin/wireguard-go). With --out DIR: DIR/bench.json and DIR/bench-peers.csv."
)]
pub struct Args {
    /// Scenario file (TOML, format in docs/SCENARIOS.md).
    scenario: Option<PathBuf>,
    /// Output directory (default: testbed-out/<scenario name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override a scenario field, e.g. `--set tunnel.cc=ccid5` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seconds between emulator start and scenario time 0 (tunnel set-up).
    #[arg(long, default_value_t = 3.0)]
    setup_s: f64,
    /// RUST_LOG of the daemons (their logs are copied to the output dir).
    #[arg(long, default_value = "info")]
    daemon_log: String,
    /// SCHED_FIFO priority of the tunnel daemons, which stand for two
    /// separate machines (0 = normal scheduling; the emulators use 10);
    /// also in `--bench`.
    #[arg(long, default_value_t = 5)]
    daemon_rt_priority: u8,
    /// Sample the client daemon's status (cwnd, srtt in the time series)
    /// every N ms while the scenario runs; 0 = only at the end. Queries are
    /// served by the daemon's operations thread; its packet loop only
    /// builds the answer.
    #[arg(long, default_value_t = 100)]
    status_interval_ms: u64,
    /// Print summary.json on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Benchmark the tunnel (TCP/UDP throughput, CPU, added latency) over two
    /// unshaped veth paths, beside the same over one plain veth path.
    #[arg(long)]
    bench: bool,
    /// Seconds per benchmark measurement.
    #[arg(long, default_value_t = 5)]
    bench_secs: u32,
    /// UDP socket buffer of the daemons in the benchmark (`tunnel.socket_buffer_bytes`).
    #[arg(long, default_value_t = 256 << 10)]
    bench_socket_buffer: usize,
    /// With --bench: only our tunnel over one path beside wireguard-go
    /// (the `peers` section), a short run.
    #[arg(long)]
    bench_peers_only: bool,
    /// Also run the scenario in the simulator (same file, seed and --set)
    /// into DIR/sim/ and write the two side by side: DIR/COMPARE.md and
    /// DIR/compare.json (agreement within --tolerance).
    #[arg(long)]
    compare_sim: bool,
    /// Relative tolerance of --compare-sim's agreement column.
    #[arg(long, default_value_t = 0.1)]
    tolerance: f64,
    /// The aggregation benchmark's reduced matrix on the real tunnel (SCENARIO
    /// not needed): DSL + LTE path pairs × kernel TCP and QUIC (aioquic) up
    /// and down through the tunnel (daemon defaults, authenticated), beside
    /// each path alone, kernel MPTCP on the same paths and the simulator.
    /// Writes DIR/aggregation.json, DIR/AGGREGATION.md, DIR/aggregation.png.
    #[arg(long)]
    aggregation: bool,
    /// With --aggregation: seconds per run (steady window from max(5 s, 20 %)).
    #[arg(long, default_value_t = 20.0)]
    agg_secs: f64,
    /// With --aggregation: path pairs (`20+20`, `50+10`; repeatable; default both).
    #[arg(long = "agg-pair")]
    agg_pairs: Vec<String>,
    /// With --aggregation: inner traffic (`tcp-up`, `tcp-down` (kernel TCP
    /// CUBIC), `tcp-bbr-up`, `tcp-bbr-down` (kernel TCP BBR), `quic-up`,
    /// `quic-down`; repeatable; default all).
    #[arg(long = "agg-inner")]
    agg_inners: Vec<String>,
    /// With --aggregation: tunnel cells only (no single-path or MPTCP references).
    #[arg(long)]
    agg_no_references: bool,
    /// With --aggregation: do not run the simulator beside the testbed.
    #[arg(long)]
    agg_no_sim: bool,
    /// With --aggregation: runs of every measurement of a cell, interleaved
    /// round by round (tunnel, each path, MPTCP); figures are medians and the
    /// report shows each one's range.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=20))]
    agg_repeat: u16,
    /// The real-time video goal on the real tunnel (SCENARIO not needed):
    /// an 8 Mbit/s VP8 RTP stream from GStreamer (`gst-launch-1.0`) up
    /// through the tunnel (daemon defaults, authenticated) and over each
    /// path alone; it plays, pauses, plays again. Loss, incomplete frames
    /// and one-way delay against the best path alone. Writes DIR/video.json,
    /// DIR/VIDEO.md and each cell's packets (DIR/packets-VIA.csv), and the
    /// sending daemon's windows every 100 ms while the tunnel cell plays
    /// (DIR/status-tunnel.csv).
    #[arg(long)]
    video: bool,
    /// With --video: the path pair (`20+20` or `50+10`).
    #[arg(long, default_value = "20+20")]
    video_pair: String,
    /// With --video: seconds of video per play.
    #[arg(long, default_value_t = 10.0)]
    video_play_s: f64,
    /// With --video: plays (an idle gap between two).
    #[arg(long, default_value_t = 2)]
    video_plays: u32,
    /// With --video: seconds of silence between plays.
    #[arg(long, default_value_t = 5.0)]
    video_idle_s: f64,
    /// The gateway fleet's throughput benchmark (SCENARIO not needed; needs `bird`):
    /// aggregate iperf3 TCP from two-path clients through a BIRD/ECMP
    /// router to one gateway, then to three, with each gateway daemon's
    /// CPU per Gbit/s. Writes DIR/fleet-bench.json and DIR/FLEET-BENCH.md.
    #[arg(long)]
    fleet_bench: bool,
    /// With --fleet-bench: clients.
    #[arg(long, default_value_t = 6)]
    fleet_clients: usize,
    /// With --fleet-bench: seconds of iperf3 per phase.
    #[arg(long, default_value_t = 10)]
    fleet_secs: u32,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let abort = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&abort))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&abort))?;
    let exe = std::env::current_exe().context("cannot find the mpdccp binary")?;
    if args.aggregation {
        return aggregation(&args, exe, &abort);
    }
    if args.video {
        return video(&args, exe);
    }
    if args.fleet_bench {
        return fleet_bench(&args, &exe, &abort);
    }
    if args.bench {
        let report = mpdccp_lab::bench::run(
            &exe,
            args.bench_secs,
            args.bench_socket_buffer,
            args.daemon_rt_priority,
            args.bench_peers_only,
            &abort,
        )?;
        if report["goals"].is_object() || report["goals"].is_array() {
            eprintln!("{}", mpdccp_lab::bench_goals::table(&report["goals"]));
        }
        eprintln!("{}", mpdccp_lab::peers::table(&report["peers"]));
        println!("{}", serde_json::to_string_pretty(&report)?);
        if let Some(out) = &args.out {
            std::fs::create_dir_all(out)?;
            std::fs::write(
                out.join("bench.json"),
                serde_json::to_string_pretty(&report)?,
            )?;
            std::fs::write(
                out.join("bench-peers.csv"),
                mpdccp_lab::peers::csv(&report["peers"]),
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let file = args.scenario.context("give a SCENARIO.toml (or --bench)")?;
    let sc = super::sim::load(&file, &args.set)?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("testbed-out").join(&sc.name));
    let sim_scenario = args.compare_sim.then(|| sc.clone());
    let cfg = TestbedConfig {
        scenario: sc,
        exe,
        setup_s: args.setup_s,
        log: args.daemon_log,
        keep_dir: Some(out.clone()),
        daemon_rt_priority: args.daemon_rt_priority,
        status_interval: (args.status_interval_ms > 0)
            .then(|| std::time::Duration::from_millis(args.status_interval_ms)),
        auth: mpdccp_net::daemon::config::AuthMode::Open,
    };
    let (summary, ts) = testbed::run(&cfg, &abort)?;
    write_outputs(&out, &summary, &ts).with_context(|| format!("writing {}", out.display()))?;
    if args.json {
        println!("{}", summary.to_json());
    } else {
        print!("{}", testbed::summary_table(&summary));
        println!("results in {}", out.display());
    }
    if let Some(sc) = sim_scenario {
        compare_with_sim(&sc, &summary.to_json(), &out, args.tolerance)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--fleet-bench`: the report on stdout (JSON) and stderr (markdown);
/// the namespaces' logs and configurations stay in DIR/fleet-lab.
fn fleet_bench(args: &Args, exe: &std::path::Path, abort: &AtomicBool) -> anyhow::Result<ExitCode> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("testbed-out").join("fleet-bench"));
    std::fs::create_dir_all(&out)?;
    let lab = out.join("fleet-lab");
    let report =
        mpdccp_lab::fleet_bench::run(exe, &lab, args.fleet_clients, args.fleet_secs, abort)?;
    let md = mpdccp_lab::fleet_bench::markdown(&report);
    eprintln!("{md}");
    println!("{}", serde_json::to_string_pretty(&report)?);
    std::fs::write(
        out.join("fleet-bench.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(out.join("FLEET-BENCH.md"), md)?;
    Ok(ExitCode::SUCCESS)
}

/// `--compare-sim`: the same scenario in the simulator (`out/sim/`), then
/// both summaries side by side (`COMPARE.md`, `compare.json`).
fn compare_with_sim(
    sc: &Scenario,
    testbed_json: &str,
    out: &std::path::Path,
    tolerance: f64,
) -> anyhow::Result<()> {
    let sim = mpdccp_sim::run(sc, None, |_| {}).map_err(|e| anyhow::anyhow!("simulator: {e}"))?;
    mpdccp_sim::write(&out.join("sim"), &sim).map_err(|e| anyhow::anyhow!("simulator: {e}"))?;
    let s: serde_json::Value = serde_json::from_str(&sim.summary.to_json())?;
    let t: serde_json::Value = serde_json::from_str(testbed_json)?;
    let rows = mpdccp_model::compare::compare(&s, &t, tolerance);
    let md = mpdccp_model::compare::markdown(&sc.name, &rows, tolerance);
    std::fs::write(out.join("COMPARE.md"), &md)?;
    std::fs::write(
        out.join("compare.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    let agree = rows.iter().filter(|r| r.agrees).count();
    println!(
        "simulator vs real tunnel: {agree} of {} numbers agree within {:.0} %; {}",
        rows.len(),
        tolerance * 100.0,
        out.join("COMPARE.md").display()
    );
    Ok(())
}

/// Runs a real-tunnel measurement (`--aggregation`, `--video`) and records
/// the host's load average before and after it in its report (every figure is
/// read beside the load).
fn with_load_average(
    run: impl FnOnce() -> anyhow::Result<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let start = load();
    let mut report = run()?;
    report["load_average_at_start"] = start.into();
    report["load_average_at_end"] = load().into();
    Ok(report)
}

fn video(args: &Args, exe: PathBuf) -> anyhow::Result<ExitCode> {
    use mpdccp_lab::video;
    let Some(pair) = mpdccp_lab::aggregation::PAIRS
        .iter()
        .find(|p| p.name == args.video_pair)
    else {
        eprintln!(
            "error: --video-pair {}: expected 20+20 or 50+10",
            args.video_pair
        );
        return Ok(ExitCode::from(2));
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("testbed-out").join("video"));
    std::fs::create_dir_all(&out)?;
    let opts = video::Options {
        exe,
        pair,
        play_s: args.video_play_s,
        plays: args.video_plays.max(1),
        idle_s: args.video_idle_s,
        daemon_rt_priority: args.daemon_rt_priority,
        auth: mpdccp_net::daemon::config::AuthMode::Authenticated,
        dump_dir: Some(out.clone()),
    };
    let report = with_load_average(|| video::run(&opts, &|m| eprintln!("{m}")))?;
    let md = video::markdown(&report);
    std::fs::write(
        out.join("video.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(out.join("VIDEO.md"), &md)?;
    print!("{md}");
    println!("results in {}", out.display());
    Ok(ExitCode::SUCCESS)
}

fn aggregation(args: &Args, exe: PathBuf, abort: &Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    use mpdccp_lab::aggregation as agg;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("testbed-out").join("aggregation"));
    std::fs::create_dir_all(&out)?;
    let opts = agg::Options {
        exe,
        secs: args.agg_secs,
        pairs: args.agg_pairs.clone(),
        inners: args.agg_inners.clone(),
        references: !args.agg_no_references,
        setup_s: args.setup_s,
        daemon_rt_priority: args.daemon_rt_priority,
        // The daemons' default mode (docs/SECURITY.md).
        auth: mpdccp_net::daemon::config::AuthMode::Authenticated,
        keep_dir: Some(out.join("runs")),
        set: super::sim::parse_sets(&args.set)?,
        repeat: usize::from(args.agg_repeat),
    };
    let sim = |sc: &mpdccp_model::scenario::Scenario| {
        mpdccp_sim::run(sc, None, |_| {})
            .map(|o| o.summary)
            .map_err(|e| anyhow::anyhow!("simulator: {e}"))
    };
    let sim_fn: Option<agg::SimFn> = if args.agg_no_sim { None } else { Some(&sim) };
    let report = with_load_average(|| agg::run(&opts, abort, sim_fn, &|m| eprintln!("{m}")))?;
    let md = agg::markdown(&report);
    std::fs::write(
        out.join("aggregation.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(out.join("AGGREGATION.md"), &md)?;
    if let Err(e) = agg::plot(&report, &out.join("aggregation.png")) {
        eprintln!("plot: {e}");
    }
    print!("{md}");
    println!("results in {}", out.display());
    Ok(ExitCode::SUCCESS)
}
