//! `mpdccp bench aggregation`: the command line of the aggregation
//! benchmark (`mpdccp_sim::aggregation` holds the matrix and the scoring).

use std::path::PathBuf;
use std::process::ExitCode;

use mpdccp_sim::aggregation::{self, report, Options};

#[derive(clap::Args, Debug)]
#[command(after_long_help = aggregation_help())]
pub struct Args {
    /// Output directory.
    #[arg(long, default_value = "aggregation-out")]
    pub out: PathBuf,
    /// Path mixes to run, e.g. `equal,asym` [default: all].
    #[arg(long, value_delimiter = ',')]
    pub mix: Vec<String>,
    /// Tunnel controllers, e.g. `ccid5,bbr3` [default: ccid2, ccid5, cubic,
    /// bbr3, lia, olia, balia, coupled-cubic].
    #[arg(long, value_delimiter = ',')]
    pub cc: Vec<String>,
    /// Inner traffic, e.g. `tcp-cubic` [default: all].
    #[arg(long, value_delimiter = ',')]
    pub inner: Vec<String>,
    /// Simulated seconds per run (the steady window is the last 80 %, from
    /// at least 5 s).
    #[arg(long, default_value_t = aggregation::DEFAULT_DURATION_S)]
    pub duration_s: f64,
    /// Override a scenario field in every run, e.g. `tunnel.scheduler=acpf`,
    /// `tunnel.reorder=active-adaptive` (repeatable; keys: docs/SCENARIOS.md;
    /// the controller is the `--cc` axis).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Parallel runs [default: available cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print scorecard.json on stdout.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when any cell fails a threshold (for regression gating).
    #[arg(long)]
    pub check: bool,
    /// Also keep every run's summary.json in DIR/runs/ (named
    /// `mix__inner__cc.json`, `mix__inner__direct-PATH.json`), to see why a
    /// cell loses (send-queue refusals, drops per path, controller states).
    #[arg(long)]
    pub keep_runs: bool,
}

fn aggregation_help() -> String {
    let mut s = String::from("Path mixes:\n");
    for m in aggregation::MIXES {
        s.push_str(&format!("  {:<8} {}\n", m.name, m.about));
    }
    s.push_str("Inner traffic:\n");
    for i in aggregation::INNERS {
        s.push_str(&format!("  {:<9} {}\n", i.name, i.about));
    }
    s
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let mut sets = Vec::new();
    for kv in &a.set {
        let Some((k, v)) = kv.split_once('=') else {
            eprintln!("error: --set `{kv}`: expected KEY=VALUE");
            return Ok(ExitCode::from(2));
        };
        sets.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let opts = Options {
        mixes: a.mix.clone(),
        ccs: a.cc.clone(),
        inners: a.inner.clone(),
        duration_s: a.duration_s,
        sets,
        jobs: a
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
    };
    let jobs = match aggregation::plan(&opts) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    eprintln!(
        "aggregation: {} runs ({} s each) on {} threads",
        jobs.len(),
        opts.duration_s,
        opts.jobs
    );
    let t0 = std::time::Instant::now();
    let results = aggregation::run_jobs(&jobs, opts.jobs, |i, n, job, res, wall| {
        let what = match res {
            Ok(s) => s
                .windows
                .get(aggregation::STEADY)
                .map(|w| w.flows.iter().map(|f| f.goodput_mbps).sum::<f64>())
                .map_or("no steady window".into(), |g| format!("{g:.1} Mbit/s")),
            Err(e) => format!("FAILED: {e}"),
        };
        eprintln!("cell {i}/{n} {}: {what} ({wall:.1} s)", job.id());
    });
    let card = aggregation::score::scorecard(&opts, &jobs, &results);
    let wall = t0.elapsed().as_secs_f64();
    let command = std::iter::once("mpdccp".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    report::write_all(&a.out, &card, &command)?;
    if a.keep_runs {
        let dir = a.out.join("runs");
        std::fs::create_dir_all(&dir)?;
        for (job, res) in jobs.iter().zip(&results) {
            if let Ok(summary) = res {
                let name = job.id().replace('/', "__").replace(':', "-");
                std::fs::write(dir.join(format!("{name}.json")), summary.to_json())?;
            }
        }
    }
    eprint!("{}", report::text_table(&card));
    eprintln!(
        "{} runs in {wall:.1} s wall; scorecard in {}",
        jobs.len(),
        a.out.display()
    );
    if a.json {
        print!("{}", report::json(&card));
    }
    if card.runs_failed > 0 {
        eprintln!("error: {} runs failed", card.runs_failed);
        return Ok(ExitCode::FAILURE);
    }
    if a.check && card.cells_failed > 0 {
        eprintln!(
            "check: {} of {} cells fail a threshold",
            card.cells_failed,
            card.cells.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
