//! The published experiments E1–E6 (`scenarios/README.md`): run them, check what
//! the publications say against what the simulator measures, and write
//! `REPORT.md` plus a results JSON.
//!
//! The scenario files live in `scenarios/` and are compiled into the binary,
//! so `mpdccp reproduce` runs from anywhere; `--scenarios DIR` reads them
//! from disk instead. Each check is a number measured from one or more runs
//! against a threshold taken from the issue text; a failed check is reported,
//! never tuned away.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant as WallInstant;

use mpdccp_model::results::TimeSeries;
use mpdccp_model::scenario::Scenario;
use serde::Serialize;
use serde_json::Value;

use crate::sim::ConnEventRecord;
use crate::SimError;

mod checks;
mod interval;
mod report;
mod seeds;

pub(crate) use checks::tunnel_mbps;
pub use interval::{t_quantile_two_sided, Interval};
pub use report::write_report;
pub use seeds::reproduce_seeds;

fn one_seed(n: &usize) -> bool {
    *n <= 1
}

/// Scenario files compiled in: `(stem, TOML)`.
pub const SCENARIO_FILES: &[(&str, &str)] = &[
    (
        "e1-dccp-ccid2",
        include_str!("../../../scenarios/e1-dccp-ccid2.toml"),
    ),
    (
        "e1-dccp-ccid5",
        include_str!("../../../scenarios/e1-dccp-ccid5.toml"),
    ),
    (
        "e1-tcp-cubic",
        include_str!("../../../scenarios/e1-tcp-cubic.toml"),
    ),
    (
        "e1-tcp-bbr",
        include_str!("../../../scenarios/e1-tcp-bbr.toml"),
    ),
    ("e2-ccid2", include_str!("../../../scenarios/e2-ccid2.toml")),
    ("e2-ccid5", include_str!("../../../scenarios/e2-ccid5.toml")),
    ("e3-ccid2", include_str!("../../../scenarios/e3-ccid2.toml")),
    ("e3-ccid5", include_str!("../../../scenarios/e3-ccid5.toml")),
    ("e4-lia", include_str!("../../../scenarios/e4-lia.toml")),
    (
        "e4-coupled-cubic",
        include_str!("../../../scenarios/e4-coupled-cubic.toml"),
    ),
    (
        "e4-cubic-single-path1",
        include_str!("../../../scenarios/e4-cubic-single-path1.toml"),
    ),
    (
        "e5-handover",
        include_str!("../../../scenarios/e5-handover.toml"),
    ),
    (
        "e5-aggregation",
        include_str!("../../../scenarios/e5-aggregation.toml"),
    ),
    (
        "e6-ratio-80-20",
        include_str!("../../../scenarios/e6-ratio-80-20.toml"),
    ),
    (
        "e6-min-srtt",
        include_str!("../../../scenarios/e6-min-srtt.toml"),
    ),
    (
        "e6-path1-only",
        include_str!("../../../scenarios/e6-path1-only.toml"),
    ),
];

/// One experiment and the runs it needs.
pub struct Experiment {
    pub id: &'static str,
    pub title: &'static str,
    pub runs: &'static [&'static str],
}

pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        id: "E1",
        title: "single path, bandwidth drop (CCID5 paper §3.2.1, Table 1, Fig. 5)",
        runs: &[
            "e1-dccp-ccid2",
            "e1-dccp-ccid5",
            "e1-tcp-cubic",
            "e1-tcp-bbr",
        ],
    },
    Experiment {
        id: "E2",
        title: "UDP over MP-DCCP, bandwidth drop (§3.3.1, Table 2, Fig. 6)",
        runs: &["e2-ccid2", "e2-ccid5"],
    },
    Experiment {
        id: "E3",
        title: "TCP over MP-DCCP (§3.3.2, Table 3, Fig. 7)",
        runs: &["e3-ccid2", "e3-ccid5"],
    },
    Experiment {
        id: "E4",
        title: "Coupled CUBIC vs LIA on a large-BDP path (Lee et al. 2023, Tab. 3, Fig. 7)",
        runs: &["e4-lia", "e4-coupled-cubic", "e4-cubic-single-path1"],
    },
    Experiment {
        id: "E5",
        title: "handover and aggregation (IETF 106 slides, ns-3 study)",
        runs: &["e5-handover", "e5-aggregation"],
    },
    Experiment {
        id: "E6",
        title: "latency change under a fixed split (IETF 106 slides, QUIC video test)",
        runs: &["e6-ratio-80-20", "e6-min-srtt", "e6-path1-only"],
    },
];

/// `--quick`: E4's 1000 s become this many seconds (steady window from 20 s).
pub const QUICK_E4_DURATION_S: f64 = 100.0;

#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    /// Read scenarios from this directory instead of the compiled-in copies.
    pub scenarios_dir: Option<PathBuf>,
    pub out: PathBuf,
    pub quick: bool,
    /// Experiment ids to run (`E1`, …); empty = all.
    pub only: Vec<String>,
    /// Parallel runs.
    pub jobs: usize,
    /// Print one line per finished run on stderr.
    pub progress: bool,
}

/// What one run produced (kept for the checks and the report).
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    pub stem: String,
    pub dir: PathBuf,
    pub duration_s: f64,
    pub wall_s: f64,
    pub link_pkts: u64,
    pub summary: Value,
    #[serde(skip)]
    pub tunnel_series: Vec<Vec<u64>>,
    /// The run's 100 ms series (for the comparison figures).
    #[serde(skip)]
    pub timeseries: TimeSeries,
    #[serde(skip)]
    pub conn_events: Vec<ConnEventRecord>,
    /// Why the run could not be done (the checks that need it then fail).
    pub error: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// `--seeds N`: the 95 % interval straddles the threshold (neither
    /// wholly inside nor wholly outside): N seeds cannot decide.
    Unresolved,
    /// Reported side by side, no threshold (the issue asks for a comparison).
    Info,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Unresolved => "unresolved",
            Verdict::Info => "info",
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub experiment: &'static str,
    pub metric: String,
    pub published: String,
    /// Our value as printed in the table (with its unit).
    pub ours: String,
    /// Our value as a number (`None`: not measured, or not a number).
    pub value: Option<f64>,
    /// The unit of `value` (`Mbit/s`, `ms`, `s`, `pkts`, `×`; empty: none).
    pub unit: &'static str,
    pub verdict: Verdict,
    /// `--seeds N` (N > 1): mean, spread and 95 % interval over the seeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// The threshold as a predicate (`None`: info row, or judged otherwise),
    /// so the check can be judged again on an interval.
    #[serde(skip)]
    pub accept: Option<fn(f64) -> bool>,
    /// Why a row with a published value carries no threshold, or why ours
    /// differs from it: shown next to the row in `REPORT.md`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<&'static str>,
}

/// Everything `mpdccp reproduce` found.
#[derive(Debug, Serialize)]
pub struct Report {
    pub quick: bool,
    /// Seeds per configuration (`--seeds`); 1: the published single runs.
    #[serde(skip_serializing_if = "one_seed")]
    pub seeds: usize,
    pub wall_s: f64,
    pub checks: Vec<Check>,
    pub runs: Vec<RunRecord>,
    /// `--seeds N`: the runs of seeds 2…N (the figures' spread bands).
    #[serde(skip)]
    pub other_seeds: Vec<Vec<RunRecord>>,
}

impl Report {
    /// A check failed or a run could not be done.
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Fail)
            || self.runs.iter().any(|r| r.error.is_some())
    }

    /// Some check is unresolved (`--seeds N`: its interval straddles the
    /// threshold). Not a failure; `reproduce --strict` makes it one.
    pub fn unresolved(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Unresolved)
    }

    /// One line for the end of the terminal output: `26 checks: 26 pass`,
    /// or how many failed or are unresolved and which, with the published
    /// and our value. Info rows carry no threshold and are not counted.
    pub fn verdict_line(&self) -> String {
        let judged: Vec<&Check> = self
            .checks
            .iter()
            .filter(|c| c.verdict != Verdict::Info)
            .collect();
        let with = |v: Verdict| -> Vec<&Check> {
            judged.iter().copied().filter(|c| c.verdict == v).collect()
        };
        let (failed, unresolved) = (with(Verdict::Fail), with(Verdict::Unresolved));
        let mut line = format!(
            "{} checks: {} pass",
            judged.len(),
            judged.len() - failed.len() - unresolved.len()
        );
        let list = |cs: &[&Check]| -> String {
            cs.iter()
                .map(|c| {
                    format!(
                        "{} {}: ours {}, published {}",
                        c.experiment, c.metric, c.ours, c.published
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        if !unresolved.is_empty() {
            let _ = write!(
                line,
                ", {} unresolved at {} seeds — {}",
                unresolved.len(),
                self.seeds,
                list(&unresolved)
            );
        }
        if !failed.is_empty() {
            let _ = write!(line, ", {} FAIL — {}", failed.len(), list(&failed));
        }
        let broken: Vec<String> = self
            .runs
            .iter()
            .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.stem)))
            .collect();
        if !broken.is_empty() {
            let _ = write!(line, " (runs failed: {})", broken.join("; "));
        }
        line
    }

    /// The per-experiment table of `REPORT.md`: [`Report::table`] with a
    /// last column saying why a row has no threshold or why ours differs.
    pub fn table_with_reasons(&self) -> String {
        let mut s =
            String::from("| metric | published | ours | verdict | why |\n|---|---|---|---|---|\n");
        for c in &self.checks {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                c.metric,
                c.published,
                c.ours,
                c.verdict,
                self.reason(c).unwrap_or_default()
            );
        }
        s
    }

    /// The row's own reason; in a `--quick` run every E4 row first says
    /// that 100 s is far from the steady state the paper reports.
    pub fn reason(&self, c: &Check) -> Option<String> {
        const QUICK_E4: &str = "quick mode: E4 runs 100 s, far from the steady state the \
                                paper reports over 100–1000 s (run without --quick)";
        match (self.quick && c.experiment == "E4", c.because) {
            (true, Some(b)) => Some(format!("{QUICK_E4}; in a full run: {b}")),
            (true, None) if c.verdict == Verdict::Fail => Some(QUICK_E4.to_owned()),
            (_, b) => b.map(str::to_owned),
        }
    }

    /// The `experiment | metric | published | ours | verdict` table (Markdown).
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| experiment | metric | published | ours | verdict |\n|---|---|---|---|---|\n",
        );
        for c in &self.checks {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                c.experiment, c.metric, c.published, c.ours, c.verdict
            );
        }
        s
    }
}

/// Loads a scenario by stem (compiled-in or from `dir`), with `--quick` applied.
pub fn load_scenario(dir: Option<&Path>, stem: &str, quick: bool) -> Result<Scenario, SimError> {
    let mut s = match dir {
        Some(d) => Scenario::load(d.join(format!("{stem}.toml")))
            .map_err(|e| SimError::Scenario(e.to_string()))?,
        None => {
            let text = SCENARIO_FILES
                .iter()
                .find(|(n, _)| *n == stem)
                .map(|(_, t)| *t)
                .ok_or_else(|| SimError::Scenario(format!("no scenario `{stem}`")))?;
            Scenario::from_toml_str(text).map_err(|e| SimError::Scenario(e.to_string()))?
        }
    };
    if quick && stem.starts_with("e4-") && s.duration_s > QUICK_E4_DURATION_S {
        let d = QUICK_E4_DURATION_S.to_string();
        for (k, v) in [
            ("window.steady.from_s", "20"),
            ("window.steady.to_s", d.as_str()),
            ("duration_s", d.as_str()),
        ] {
            s.apply_set(k, v)
                .map_err(|e| SimError::Scenario(e.to_string()))?;
        }
    }
    Ok(s)
}

/// Runs one scenario and writes its outputs into `dir`.
pub fn run_one(stem: &str, scenario: &Scenario, dir: &Path) -> RunRecord {
    let t0 = WallInstant::now();
    let mut rec = RunRecord {
        stem: stem.to_owned(),
        dir: dir.to_owned(),
        duration_s: scenario.duration_s,
        wall_s: 0.0,
        link_pkts: 0,
        summary: Value::Null,
        tunnel_series: Vec::new(),
        timeseries: TimeSeries::default(),
        conn_events: Vec::new(),
        error: None,
    };
    let res = crate::run(scenario, None, |_| {}).and_then(|out| {
        crate::write(dir, &out)?;
        Ok(out)
    });
    match res {
        Ok(out) => {
            rec.summary = serde_json::to_value(&out.summary).unwrap_or(Value::Null);
            rec.link_pkts = out.stats.link_pkts;
            rec.tunnel_series = out.tunnel_series;
            rec.timeseries = out.timeseries;
            rec.conn_events = out.conn_events;
        }
        Err(e) => rec.error = Some(e.to_string()),
    }
    rec.wall_s = t0.elapsed().as_secs_f64();
    rec
}

/// Runs the selected experiments (in parallel) and evaluates every check.
pub fn reproduce(opts: &ReproduceOptions) -> Result<Report, SimError> {
    let t0 = WallInstant::now();
    let selected = selected(opts)?;
    let mut jobs: Vec<Job> = Vec::new();
    for e in &selected {
        for stem in e.runs {
            let s = load_scenario(opts.scenarios_dir.as_deref(), stem, opts.quick)?;
            jobs.push(Job {
                stem: (*stem).to_owned(),
                label: (*stem).to_owned(),
                dir: opts.out.join(stem),
                scenario: s,
            });
        }
    }
    let mut runs = run_jobs(opts, jobs)?;
    runs.sort_by(|a, b| a.stem.cmp(&b.stem));
    let checks = evaluate(&selected, &runs);
    Ok(Report {
        quick: opts.quick,
        seeds: 1,
        wall_s: t0.elapsed().as_secs_f64(),
        checks,
        runs,
        other_seeds: Vec::new(),
    })
}

/// The experiments `--only` selects (all without it).
fn selected(opts: &ReproduceOptions) -> Result<Vec<&'static Experiment>, SimError> {
    let selected: Vec<&Experiment> = EXPERIMENTS
        .iter()
        .filter(|e| opts.only.is_empty() || opts.only.iter().any(|o| o.eq_ignore_ascii_case(e.id)))
        .collect();
    if selected.is_empty() {
        return Err(SimError::Scenario(format!(
            "--only matches no experiment (expected some of {})",
            EXPERIMENTS
                .iter()
                .map(|e| e.id)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(selected)
}

/// Every check of the selected experiments over one set of runs.
fn evaluate(selected: &[&Experiment], runs: &[RunRecord]) -> Vec<Check> {
    let by_stem: BTreeMap<&str, &RunRecord> = runs.iter().map(|r| (r.stem.as_str(), r)).collect();
    let mut checks = Vec::new();
    for e in selected {
        checks::evaluate(e.id, &by_stem, &mut checks);
    }
    checks
}

/// One simulation of a reproduction: `label` names it in the progress lines.
struct Job {
    stem: String,
    label: String,
    dir: PathBuf,
    scenario: Scenario,
}

/// Runs the jobs in `opts.jobs` threads; records in completion order.
fn run_jobs(opts: &ReproduceOptions, mut jobs: Vec<Job>) -> Result<Vec<RunRecord>, SimError> {
    // Longest simulated work first, so the parallel runs finish together.
    jobs.sort_by(|a, b| {
        let w = |s: &Scenario| {
            s.duration_s
                * s.path
                    .iter()
                    .map(|p| {
                        p.rate
                            .iter()
                            .map(|r| r.mbps)
                            .fold(p.rate_mbps.unwrap_or(0.0), f64::max)
                    })
                    .sum::<f64>()
        };
        w(&b.scenario).total_cmp(&w(&a.scenario))
    });
    std::fs::create_dir_all(&opts.out)?;
    let total = jobs.len();
    let queue = Mutex::new(jobs.into_iter().collect::<std::collections::VecDeque<_>>());
    let done = Mutex::new(Vec::new());
    let workers = opts.jobs.max(1).min(total);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let job = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                let Some(job) = job else {
                    break;
                };
                let rec = run_one(&job.stem, &job.scenario, &job.dir);
                if let Ok(mut d) = done.lock() {
                    if opts.progress {
                        eprintln!(
                            "[{}/{}] {}: {:.0} s simulated in {:.1} s{}",
                            d.len() + 1,
                            total,
                            job.label,
                            rec.duration_s,
                            rec.wall_s,
                            rec.error
                                .as_deref()
                                .map(|e| format!(" — error: {e}"))
                                .unwrap_or_default()
                        );
                    }
                    d.push(rec);
                }
            });
        }
    });
    Ok(done.into_inner().unwrap_or_default())
}

/// Reads `a.b.0.c` out of a JSON value.
pub fn lookup(v: &Value, path: &str) -> Option<f64> {
    let mut cur = v;
    for part in path.split('.') {
        cur = match part.parse::<usize>() {
            Ok(i) => cur.get(i)?,
            Err(_) => cur.get(part)?,
        };
    }
    cur.as_f64()
}
