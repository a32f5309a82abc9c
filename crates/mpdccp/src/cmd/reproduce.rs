//! `mpdccp reproduce`: run the published experiments E1–E6 in the simulator,
//! print `experiment | metric | published | ours | verdict`, and write
//! `REPORT.md` (with the plots) and `results.json`, and end with a one-line
//! verdict. Exit code 1 when a check fails — with `--strict`, also when one
//! is unresolved over `--seeds` (2 stays clap's usage error).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use mpdccp_sim::reproduce::{self, ReproduceOptions};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory (one subdirectory per run, REPORT.md, results.json).
    #[arg(long, default_value = "reproduce-out")]
    pub out: PathBuf,
    /// Shorten E4 from 1000 s to 100 s (said so in the report).
    #[arg(long)]
    pub quick: bool,
    /// Only these experiments, e.g. `E1,E2`.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Read scenarios from this directory instead of the built-in copies of `scenarios/`.
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
    /// Parallel runs [default: available cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Run every configuration over N seeds and judge each check on the 95 %
    /// confidence interval of its mean (outputs in `<out>/seed-K/`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub seeds: u16,
    /// With `--seeds`: an unresolved check (its interval straddles the
    /// threshold, so the seeds cannot decide) fails the run too.
    #[arg(long)]
    pub strict: bool,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // An unknown experiment is a usage error (exit 2), not a failed run.
    let known = |o: &String| {
        reproduce::EXPERIMENTS
            .iter()
            .any(|e| o.eq_ignore_ascii_case(e.id))
    };
    if let Some(bad) = args.only.iter().find(|o| !known(o)) {
        let ids: Vec<&str> = reproduce::EXPERIMENTS.iter().map(|e| e.id).collect();
        eprintln!(
            "error: --only {bad}: no such experiment (expected some of {})",
            ids.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    let opts = ReproduceOptions {
        scenarios_dir: args.scenarios,
        out: args.out.clone(),
        quick: args.quick,
        only: args.only,
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        progress: std::io::stderr().is_terminal() || std::env::var_os("MPDCCP_PROGRESS").is_some(),
    };
    let report = reproduce::reproduce_seeds(&opts, usize::from(args.seeds))?;
    reproduce::write_report(&args.out, &report)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        eprintln!("{}", report.verdict_line());
    } else {
        print!("{}", report.table());
        println!(
            "\nwall time {:.1} s{}; report: {}",
            report.wall_s,
            if report.quick {
                " (quick: E4 shortened)"
            } else {
                ""
            },
            args.out.join("REPORT.md").display()
        );
        println!("{}", report.verdict_line());
    }
    Ok(if report.failed() || (args.strict && report.unresolved()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
