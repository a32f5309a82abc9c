//! `mpdccp netem`: the userspace link emulator (see `mpdccp_lab::emu`).
//!
//! Runs inside a router namespace between a client-side and a server-side
//! interface; the path is described exactly as in a scenario's `[[path]]`
//! (take it from a scenario file with `--scenario F --path NAME`, or give the
//! fields as flags).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_lab::emu::{self, EmuConfig, Router};
use mpdccp_model::scenario::{Outage, PathSpec, RatePoint, Scenario};
use mpdccp_proto::Instant;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example (inside a router namespace with veths `c` and `s`):\n  \
    mpdccp netem --client-if c --server-if s --delay-ms 20 --rate-mbps 10 --buffer-bytes 150000"
)]
pub struct Args {
    #[command(flatten)]
    opts: Box<Opts>,
}

#[derive(clap::Args, Debug)]
struct Opts {
    /// Take the path from this scenario file (with --path).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Name (or 0-based index) of the scenario's path to emulate.
    #[arg(long = "path")]
    path_name: Option<String>,
    /// One-way delay each direction, ms (without --scenario).
    #[arg(long, default_value_t = 0.0)]
    delay_ms: f64,
    /// Constant rate, Mbit/s (without --scenario). 0 = 10 Gbit/s (unshaped).
    #[arg(long, default_value_t = 0.0)]
    rate_mbps: f64,
    /// Drop-tail buffer, bytes (without --scenario).
    #[arg(long, default_value_t = 150_000)]
    buffer_bytes: usize,
    /// Random loss probability per packet (without --scenario).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Outage `FROM_S:TO_S` (repeatable, without --scenario).
    #[arg(long = "down")]
    down: Vec<String>,
    /// Seed of the loss process (default: the scenario's seed, else 1).
    #[arg(long)]
    seed: Option<u64>,
    /// TUN device for client → server packets.
    #[arg(long, default_value = "emu-up")]
    up_tun: String,
    /// TUN device for server → client packets.
    #[arg(long, default_value = "emu-down")]
    down_tun: String,
    /// Router interface towards the client; with --server-if, installs the
    /// capture rules (ip rule/route) in the current namespace.
    #[arg(long)]
    client_if: Option<String>,
    /// Router interface towards the server.
    #[arg(long)]
    server_if: Option<String>,
    /// First of two routing table ids used for the capture.
    #[arg(long, default_value_t = 100)]
    table: u32,
    /// CLOCK_MONOTONIC nanoseconds that are t = 0 of the schedules (so several
    /// emulators and the testbed share one time line). Default: now.
    #[arg(long)]
    epoch_ns: Option<u64>,
    /// Write a JSON line per direction every --stats-interval-ms here
    /// (queue bytes, delivered bytes, drops, queueing delay).
    #[arg(long)]
    stats_out: Option<PathBuf>,
    #[arg(long, default_value_t = 100)]
    stats_interval_ms: u64,
    /// Packets the emulator can hold per direction (delay × rate + buffer).
    #[arg(long, default_value_t = 32_768)]
    ring_pkts: usize,
    /// SCHED_FIFO priority (1-99) so wake-ups are not delayed by other
    /// processes on a busy host; 0 = normal scheduling.
    #[arg(long, default_value_t = 10)]
    rt_priority: i32,
    /// Create this file once the TUN devices and routes are ready.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Print the final counters as JSON on stdout at exit (SIGTERM/SIGINT).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let args = *args.opts;
    let (spec, seed) = path_spec(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    let config = EmuConfig {
        spec,
        seed,
        up_tun: args.up_tun.clone(),
        down_tun: args.down_tun.clone(),
        epoch: args.epoch_ns.map(Instant::from_nanos),
        stats_out: args.stats_out.clone(),
        stats_interval: Duration::from_millis(args.stats_interval_ms.max(1)),
        ring_pkts: args.ring_pkts,
        rt_priority: args.rt_priority,
    };
    let plumb = match (&args.client_if, &args.server_if) {
        (Some(c), Some(s)) => Some((c.clone(), s.clone())),
        (None, None) => None,
        _ => bail!("give both --client-if and --server-if, or neither"),
    };
    let ready = args.ready_file.clone();
    let table = args.table;
    let (up, down) = (args.up_tun.clone(), args.down_tun.clone());
    let plumb2 = plumb.clone();
    let on_ready = move || -> anyhow::Result<()> {
        if let Some((c, s)) = &plumb2 {
            Router::setup(c, s, &up, &down, table)?;
        }
        if let Some(f) = &ready {
            std::fs::write(f, b"ready\n")
                .with_context(|| format!("cannot write {}", f.display()))?;
        }
        Ok(())
    };
    let result = emu::run_with(&config, &stop, on_ready);
    if let Some((c, s)) = &plumb {
        Router::teardown(c, s);
    }
    let stats = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        eprintln!(
            "netem {}: up {} pkts delivered ({} dropped), down {} pkts delivered ({} dropped), max lateness {} us",
            stats.path,
            stats.up.delivered_pkts,
            stats.up.dropped_buffer_pkts + stats.up.dropped_loss_pkts + stats.up.dropped_down_pkts + stats.up.dropped_ring_pkts,
            stats.down.delivered_pkts,
            stats.down.dropped_buffer_pkts
                + stats.down.dropped_loss_pkts
                + stats.down.dropped_down_pkts
                + stats.down.dropped_ring_pkts,
            stats.up.max_late_us.max(stats.down.max_late_us)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn path_spec(args: &Opts) -> anyhow::Result<(PathSpec, u64)> {
    if let Some(file) = &args.scenario {
        let sc = Scenario::load(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let want = args.path_name.as_deref().unwrap_or("0");
        let idx = sc
            .path_index(want)
            .or_else(|| want.parse::<usize>().ok().filter(|&i| i < sc.path.len()))
            .with_context(|| format!("scenario has no path `{want}`"))?;
        // Each path gets its own loss stream, derived from the scenario seed.
        let seed = args.seed.unwrap_or(sc.seed.wrapping_add(idx as u64));
        return Ok((sc.path[idx].clone(), seed));
    }
    let mut down = Vec::new();
    for d in &args.down {
        let (a, b) = d
            .split_once(':')
            .with_context(|| format!("--down `{d}`: expected FROM_S:TO_S"))?;
        down.push(Outage {
            from_s: a.trim().parse().with_context(|| format!("--down `{d}`"))?,
            to_s: b.trim().parse().with_context(|| format!("--down `{d}`"))?,
        });
    }
    let mbps = if args.rate_mbps > 0.0 {
        args.rate_mbps
    } else {
        10_000.0
    };
    let spec = PathSpec {
        name: args.path_name.clone().unwrap_or_else(|| "p1".into()),
        delay_ms: args.delay_ms,
        buffer_bytes: args.buffer_bytes,
        loss: args.loss,
        rate: vec![RatePoint { at_s: 0.0, mbps }],
        down,
        ..Default::default()
    };
    // Same checks as a scenario file.
    let sc = Scenario {
        name: "netem".into(),
        duration_s: 1.0,
        path: vec![spec.clone()],
        ..Default::default()
    };
    sc.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((spec, args.seed.unwrap_or(1)))
}
