//! `mpdccp sweep`: many simulations in one call — several scenario files
//! and/or a matrix of `--set` values (cartesian product), run in parallel
//! threads. One subdirectory per run plus `index.csv` (one row per run and
//! flow/path, so a spreadsheet or pandas can pivot it); with several
//! `--seeds`, `cells.csv` with the mean and spread per cell. Columns:
//! docs/SCENARIOS.md. Exit code 1 when a run fails.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Context;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario files (TOML, format in docs/SCENARIOS.md).
    #[arg(required = true)]
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
    /// Output directory.
    #[arg(long, default_value = "sweep-out")]
    pub out: PathBuf,
    /// Parallel runs [default: available cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the index as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A finished run: order, job, its summary or error, wall seconds.
type Finished = (usize, Job, Result<Value, String>, f64);

struct Job {
    id: String,
    file: PathBuf,
    sets: Vec<(String, String)>,
    seed: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Axes: key -> values (a key given twice adds values, in order).
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for s in &args.set {
        let (k, v) = s
            .split_once('=')
            .with_context(|| format!("--set `{s}`: expected KEY=V1,V2"))?;
        let vals: Vec<String> =
            if v.trim_start().starts_with('[') || v.trim_start().starts_with('{') {
                vec![v.to_owned()]
            } else {
                v.split(',').map(|x| x.trim().to_owned()).collect()
            };
        match axes.iter_mut().find(|(key, _)| key == k) {
            Some((_, existing)) => existing.extend(vals),
            None => axes.push((k.to_owned(), vals)),
        }
    }
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (k, vals) in &axes {
        let mut next = Vec::new();
        for c in &combos {
            for v in vals {
                let mut c = c.clone();
                c.push((k.clone(), v.clone()));
                next.push(c);
            }
        }
        combos = next;
    }
    let seeds: Vec<Option<u64>> = if args.seeds.is_empty() {
        vec![None]
    } else {
        args.seeds.iter().map(|s| Some(*s)).collect()
    };
    let mut jobs = Vec::new();
    for file in &args.scenarios {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for c in &combos {
            for seed in &seeds {
                let mut id = stem.clone();
                for (k, v) in c {
                    id.push_str(&format!("__{k}={v}"));
                }
                if let Some(s) = seed {
                    id.push_str(&format!("__seed={s}"));
                }
                let id: String = id
                    .chars()
                    .map(|ch| {
                        if ch.is_ascii_alphanumeric() || "-_.=".contains(ch) {
                            ch
                        } else {
                            '_'
                        }
                    })
                    .collect();
                jobs.push(Job {
                    id,
                    file: file.clone(),
                    sets: c.clone(),
                    seed: *seed,
                });
            }
        }
    }
    std::fs::create_dir_all(&args.out)?;
    let total = jobs.len();
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, total.max(1));
    let queue = Mutex::new(
        jobs.into_iter()
            .enumerate()
            .collect::<std::collections::VecDeque<_>>(),
    );
    let results: Mutex<Vec<Finished>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some((n, job)) = next else { break };
                let t0 = std::time::Instant::now();
                let res = run_job(&job, &args.out);
                let wall = t0.elapsed().as_secs_f64();
                eprintln!(
                    "{} {}: {:.1} s{}",
                    if res.is_ok() { "done" } else { "FAILED" },
                    job.id,
                    wall,
                    res.as_ref()
                        .err()
                        .map(|e| format!(" — {e}"))
                        .unwrap_or_default()
                );
                if let Ok(mut r) = results.lock() {
                    r.push((n, job, res, wall));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.0);
    let mut csv = String::from("run,scenario,seed,settings,kind,name,goodput_or_throughput_mbps,sent_pkts,delivered_pkts,lost_pkts,out_of_order_pkts,owd_p50_ms,owd_p95_ms,owd_p99_ms,rtt_p50_ms,rtt_p95_ms,queue_delay_p95_ms,wall_s,error\n");
    let mut failed = 0;
    let mut index = Vec::new();
    for (_, job, res, wall) in &results {
        let settings = job
            .sets
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";");
        let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        match res {
            Ok(summary) => {
                let seed = summary.get("seed").and_then(Value::as_u64).unwrap_or(0);
                let scen = summary
                    .get("scenario")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                for fl in summary
                    .get("flows")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let _ = writeln!(
                        csv,
                        "{},{},{seed},{},flow,{},{},{},{},{},{},{},{},{},,,,{wall:.3},",
                        q(&job.id),
                        q(scen),
                        q(&settings),
                        q(fl.get("name").and_then(Value::as_str).unwrap_or("")),
                        n(fl, "goodput_mbps"),
                        n(fl, "sent_pkts"),
                        n(fl, "delivered_pkts"),
                        n(fl, "lost_pkts"),
                        n(fl, "out_of_order_pkts"),
                        n(fl, "owd_ms.p50"),
                        n(fl, "owd_ms.p95"),
                        n(fl, "owd_ms.p99"),
                    );
                }
                for p in summary
                    .get("paths")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let _ = writeln!(
                        csv,
                        "{},{},{seed},{},path,{},{},{},,{},,,,,{},{},{},{wall:.3},",
                        q(&job.id),
                        q(scen),
                        q(&settings),
                        q(p.get("name").and_then(Value::as_str).unwrap_or("")),
                        n(p, "throughput_mbps"),
                        n(p, "sent_pkts"),
                        n(p, "lost_pkts"),
                        n(p, "rtt_ms.p50"),
                        n(p, "rtt_ms.p95"),
                        n(p, "queue_delay_ms.p95"),
                    );
                }
                index.push(serde_json::json!({"run": job.id, "dir": args.out.join(&job.id), "settings": settings, "summary": summary}));
            }
            Err(e) => {
                failed += 1;
                let _ = writeln!(
                    csv,
                    "{},,,{},,,,,,,,,,,,,,{wall:.3},{}",
                    q(&job.id),
                    q(&settings),
                    q(e)
                );
                index.push(serde_json::json!({"run": job.id, "settings": settings, "error": e}));
            }
        }
    }
    std::fs::write(args.out.join("index.csv"), csv)?;
    // Several seeds: mean and spread per cell (scenario file × settings).
    let per_seed: Vec<(String, &Value)> = results
        .iter()
        .filter_map(|(_, job, res, _)| {
            let cell = format!("{}{}", job.file.display(), settings_suffix(&job.sets));
            res.as_ref().ok().map(|v| (cell, v))
        })
        .collect();
    let stats = if args.seeds.len() > 1 {
        let stats = super::sweep_stats::cell_stats(&per_seed);
        std::fs::write(args.out.join("cells.csv"), super::sweep_stats::csv(&stats))?;
        if super::sweep_stats::seeds_change_nothing(&per_seed) {
            eprintln!(
                "warning: the seeds changed nothing — the scenario has no random element \
                 (every path has loss = 0), so every seed gives the same result"
            );
        }
        Some(stats)
    } else {
        None
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&index)?);
    } else {
        if let Some(stats) = &stats {
            print!("{}", super::sweep_stats::table(stats));
        }
        println!(
            "{} runs: {} ok{}; index in {}{}",
            total,
            total - failed,
            if failed > 0 {
                format!(", {failed} FAILED (see the `error` column)")
            } else {
                String::new()
            },
            args.out.join("index.csv").display(),
            if stats.is_some() {
                format!(
                    ", per-cell mean and spread in {}",
                    args.out.join("cells.csv").display()
                )
            } else {
                String::new()
            }
        );
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// ` (k=v;k=v)` for a cell name; empty without settings.
fn settings_suffix(sets: &[(String, String)]) -> String {
    if sets.is_empty() {
        return String::new();
    }
    let s: Vec<String> = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" ({})", s.join(";"))
}

fn n(v: &Value, path: &str) -> String {
    mpdccp_sim::reproduce::lookup(v, path).map_or(String::new(), |x| format!("{x}"))
}

fn run_job(job: &Job, out: &std::path::Path) -> Result<Value, String> {
    let sets: Vec<String> = job.sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let scenario = super::sim::load(&job.file, &sets).map_err(|e| format!("{e:#}"))?;
    let res = mpdccp_sim::run(&scenario, job.seed, |_| {}).map_err(|e| e.to_string())?;
    let dir = out.join(&job.id);
    mpdccp_sim::write(&dir, &res).map_err(|e| e.to_string())?;
    serde_json::to_value(&res.summary).map_err(|e| e.to_string())
}
