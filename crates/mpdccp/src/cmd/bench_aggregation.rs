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
    /// An earlier scorecard.json to compare with: REPORT.md and stderr list
    /// the cells that improved or regressed (ratio to the best single path
    /// changed by more than 0.02, or pass/fail flipped).
    #[arg(long, value_name = "SCORECARD")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit 1 when any cell regressed.
    #[arg(long, requires = "baseline")]
    pub fail_on_regression: bool,
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
    let sets = match super::sim::parse_sets(&a.set) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let baseline = match a.baseline.as_deref().map(load_scorecard).transpose() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
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
    let results = aggregation::run_jobs(&jobs, opts.jobs, print_progress);
    let card = aggregation::score::scorecard(&opts, &jobs, &results);
    let wall = t0.elapsed().as_secs_f64();
    let command = std::iter::once("mpdccp".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    report::write_all(&a.out, &card, &command)?;
    let regressed = match (&baseline, &a.baseline) {
        (Some(b), Some(path)) => compare_with_baseline(b, path, &card, &a.out)?,
        _ => 0,
    };
    if a.keep_runs {
        keep_runs(&a.out, &jobs, &results)?;
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
    Ok(exit_code(&a, &card, regressed))
}

/// An earlier scorecard.json (`--baseline`).
fn load_scorecard(path: &std::path::Path) -> Result<aggregation::Scorecard, String> {
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("--baseline {}: {e}", path.display()))
}

/// One line per finished run: its cell and the steady window's goodput.
fn print_progress(
    i: usize,
    n: usize,
    job: &aggregation::Job,
    res: &aggregation::RunResult,
    wall: f64,
) {
    let what = match res {
        Ok(s) => s
            .windows
            .get(aggregation::STEADY)
            .map(|w| w.flows.iter().map(|f| f.goodput_mbps).sum::<f64>())
            .map_or("no steady window".into(), |g| format!("{g:.1} Mbit/s")),
        Err(e) => format!("FAILED: {e}"),
    };
    eprintln!("cell {i}/{n} {}: {what} ({wall:.1} s)", job.id());
}

/// Appends the comparison with `baseline` to REPORT.md, lists the cells
/// that moved on stderr, and returns how many regressed.
fn compare_with_baseline(
    baseline: &aggregation::Scorecard,
    path: &std::path::Path,
    card: &aggregation::Scorecard,
    out: &std::path::Path,
) -> anyhow::Result<usize> {
    let deltas = aggregation::compare::compare(baseline, card);
    let section = aggregation::compare::markdown(&deltas, &path.display().to_string());
    let report_file = out.join(report::REPORT);
    let mut md = std::fs::read_to_string(&report_file)?;
    md.push('\n');
    md.push_str(&section);
    std::fs::write(&report_file, md)?;
    let regressed = deltas.iter().filter(|d| d.regressed()).count();
    eprintln!(
        "against {}: {} cells improved, {regressed} regressed",
        path.display(),
        deltas.iter().filter(|d| d.improved()).count()
    );
    for d in deltas.iter().filter(|d| d.regressed() || d.improved()) {
        eprintln!(
            "  {} {}/{}/{}: ratio to best {:.2} -> {:.2}",
            if d.regressed() { "worse" } else { "better" },
            d.mix,
            d.inner,
            d.cc,
            d.ratio_best_before.unwrap_or(f64::NAN),
            d.ratio_best_now.unwrap_or(f64::NAN)
        );
    }
    Ok(regressed)
}

/// Every run's summary.json in `out/runs/` (`--keep-runs`).
fn keep_runs(
    out: &std::path::Path,
    jobs: &[aggregation::Job],
    results: &[aggregation::RunResult],
) -> anyhow::Result<()> {
    let dir = out.join("runs");
    std::fs::create_dir_all(&dir)?;
    for (job, res) in jobs.iter().zip(results) {
        if let Ok(summary) = res {
            let name = job.id().replace('/', "__").replace(':', "-");
            std::fs::write(dir.join(format!("{name}.json")), summary.to_json())?;
        }
    }
    Ok(())
}

/// 1 when a run failed, or a cell regressed (`--fail-on-regression`) or
/// failed a threshold (`--check`); 0 otherwise.
fn exit_code(a: &Args, card: &aggregation::Scorecard, regressed: usize) -> ExitCode {
    if card.runs_failed > 0 {
        eprintln!("error: {} runs failed", card.runs_failed);
        return ExitCode::FAILURE;
    }
    if a.fail_on_regression && regressed > 0 {
        eprintln!("check: {regressed} cells regressed against the baseline");
        return ExitCode::FAILURE;
    }
    if a.check && card.cells_failed > 0 {
        eprintln!(
            "check: {} of {} cells fail a threshold",
            card.cells_failed,
            card.cells.len()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
