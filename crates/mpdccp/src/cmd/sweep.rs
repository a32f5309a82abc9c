//! `mpdccp sweep`: many simulations in one call — several scenario files
//! and/or a matrix of `--set` values (cartesian product) and seeds. One
//! subdirectory per run plus `index.csv` (one row per run and flow/path, so
//! a spreadsheet or pandas can pivot it); with several `--seeds`,
//! `cells.csv` with the mean and spread per cell. Columns and the plan
//! format: docs/SCENARIOS.md.
//!
//! Locally the runs go in parallel threads (`--jobs`). On a cluster the
//! same sweep is three steps: `--plan` (or `--slurm`, which also writes an
//! `sbatch` job-array script), `--cell I` per array task, `--collect`. The
//! local sweep is those steps in one process, so both give the same files.
//! Exit code 1 when a run fails or (`--collect`) a cell has not finished.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{bail, Context};

use super::sweep_collect as collect;
use super::sweep_plan as plan;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario files (TOML, format in docs/SCENARIOS.md); not with `--cell`/`--collect`.
    pub scenarios: Vec<PathBuf>,
    /// A matrix axis: `KEY=V1,V2,…` (repeatable; all axes are combined).
    /// Values containing commas (TOML arrays) go in separate `--set` flags
    /// with the same key.
    #[arg(long = "set", value_name = "KEY=V1,V2")]
    pub set: Vec<String>,
    /// Seeds to run each combination with, e.g. `1,2,3` [default: the scenario's].
    /// Several seeds add `cells.csv`: mean and spread per combination.
    #[arg(long, value_delimiter = ',')]
    pub seeds: Vec<u64>,
    /// Output directory (the sweep directory: plan, runs, index).
    #[arg(long, default_value = "sweep-out")]
    pub out: PathBuf,
    /// Parallel runs [default: available cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the index as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Only write the plan (`<out>/plan.jsonl`, one cell per line) and check
    /// every setting; run nothing.
    #[arg(long, conflicts_with_all = ["cell", "collect"])]
    pub plan: bool,
    /// Write the plan and `<out>/sweep.sbatch`, a Slurm job array with one
    /// task per cell; submit it with `sbatch`.
    #[arg(long, conflicts_with_all = ["cell", "collect"])]
    pub slurm: bool,
    /// An extra `#SBATCH` line for `--slurm`, e.g. `--sbatch=--time=01:00:00` (repeatable).
    #[arg(long, requires = "slurm", allow_hyphen_values = true)]
    pub sbatch: Vec<String>,
    /// Run cell I of `<out>/plan.jsonl` (a job array's task id).
    #[arg(long, value_name = "I", conflicts_with = "collect")]
    pub cell: Option<usize>,
    /// Merge the finished cells of `<out>/plan.jsonl` into `index.csv`
    /// (and `cells.csv`); exit 1 and list the cells still missing.
    #[arg(long)]
    pub collect: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.cell.is_some() || args.collect {
        if !args.scenarios.is_empty() || !args.set.is_empty() || !args.seeds.is_empty() {
            bail!("--cell and --collect read scenarios, settings and seeds from the plan; give only --out");
        }
        let cells = plan::read(&args.out)?;
        if let Some(i) = args.cell {
            let cell = cells
                .get(i)
                .with_context(|| format!("--cell {i}: the plan has {} cells", cells.len()))?;
            return Ok(match collect::run_cell(cell, &args.out)? {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            });
        }
        return report(&args, &cells);
    }
    if args.scenarios.is_empty() {
        bail!("no scenario files given");
    }
    let cells = plan::build(&args.scenarios, &args.set, &args.seeds)?;
    plan::write(&args.out, &cells)?;
    // A new plan starts unfinished: results left in the same directory by
    // an earlier sweep must not be collected as this one's.
    for c in &cells {
        let done = args.out.join(&c.dir).join(collect::DONE_FILE);
        if done.exists() {
            std::fs::remove_file(&done)?;
        }
    }
    if args.plan || args.slurm {
        let plan_file = args.out.join(plan::PLAN_FILE);
        if args.slurm {
            let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
            std::fs::create_dir_all(args.out.join("slurm"))?;
            let script = super::sweep_slurm::script(
                cells.len(),
                &std::env::current_exe()?,
                &abs(&std::env::current_dir()?),
                &abs(&args.out),
                &args.sbatch,
            );
            let path = args.out.join("sweep.sbatch");
            std::fs::write(&path, script)?;
            println!(
                "{} cells in {}; submit: sbatch {}; then: mpdccp sweep --collect --out {}",
                cells.len(),
                plan_file.display(),
                path.display(),
                args.out.display()
            );
        } else {
            println!("{} cells in {}", cells.len(), plan_file.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, cells.len().max(1));
    let queue = Mutex::new(cells.iter().collect::<std::collections::VecDeque<_>>());
    let io_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some(cell) = next else { break };
                if let Err(e) = collect::run_cell(cell, &args.out) {
                    if let Ok(mut slot) = io_error.lock() {
                        slot.get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = io_error.into_inner().ok().flatten() {
        return Err(e);
    }
    report(&args, &cells)
}

/// Collects and prints the summary line (or the JSON index).
fn report(args: &Args, cells: &[plan::Cell]) -> anyhow::Result<ExitCode> {
    let c = collect::collect(cells, &args.out)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c.index)?);
    } else if let Some(stats) = &c.stats {
        print!("{}", super::sweep_stats::table(stats));
    }
    if !c.missing.is_empty() {
        let ids = ranges(&c.missing);
        eprintln!(
            "{} of {} cells missing (not finished): {ids}",
            c.missing.len(),
            cells.len(),
        );
        let script = args.out.join("sweep.sbatch");
        if script.exists() {
            eprintln!("rerun them: sbatch --array={ids} {}", script.display());
        }
    }
    let line = format!(
        "{} runs: {} ok{}{}; index in {}{}",
        cells.len(),
        c.ok,
        if c.failed > 0 {
            format!(", {} FAILED (see the `error` column)", c.failed)
        } else {
            String::new()
        },
        if c.missing.is_empty() {
            String::new()
        } else {
            format!(", {} missing", c.missing.len())
        },
        args.out.join("index.csv").display(),
        if c.stats.is_some() {
            format!(
                ", per-cell mean and spread in {}",
                args.out.join("cells.csv").display()
            )
        } else {
            String::new()
        }
    );
    if args.json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(if c.failed > 0 || !c.missing.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `0-3,7,9-10`: sorted indices as ranges (Slurm's `--array` syntax).
fn ranges(ids: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn missing_cells_print_as_slurm_array_ranges() {
        assert_eq!(super::ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(super::ranges(&[5]), "5");
        assert_eq!(super::ranges(&[]), "");
    }
}
