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
    /// Reported side by side, no threshold (the issue asks for a comparison).
    Info,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
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
}

/// Everything `mpdccp reproduce` found.
#[derive(Debug, Serialize)]
pub struct Report {
    pub quick: bool,
    pub wall_s: f64,
    pub checks: Vec<Check>,
    pub runs: Vec<RunRecord>,
}

impl Report {
    /// A check failed or a run could not be done.
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Fail)
            || self.runs.iter().any(|r| r.error.is_some())
    }

    /// One line for the end of the terminal output: `26 checks: 26 pass`,
    /// or how many failed and which, with the published and our value.
    /// Info rows carry no threshold and are not counted.
    pub fn verdict_line(&self) -> String {
        let judged: Vec<&Check> = self
            .checks
            .iter()
            .filter(|c| c.verdict != Verdict::Info)
            .collect();
        let failed: Vec<&Check> = judged
            .iter()
            .copied()
            .filter(|c| c.verdict == Verdict::Fail)
            .collect();
        let mut line = format!(
            "{} checks: {} pass",
            judged.len(),
            judged.len() - failed.len()
        );
        if !failed.is_empty() {
            let why: Vec<String> = failed
                .iter()
                .map(|c| {
                    format!(
                        "{} {}: ours {}, published {}",
                        c.experiment, c.metric, c.ours, c.published
                    )
                })
                .collect();
            let _ = write!(line, ", {} FAIL — {}", failed.len(), why.join("; "));
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
    let mut jobs: Vec<(String, Scenario)> = Vec::new();
    for e in &selected {
        for stem in e.runs {
            let s = load_scenario(opts.scenarios_dir.as_deref(), stem, opts.quick)?;
            jobs.push(((*stem).to_owned(), s));
        }
    }
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
        w(&b.1).total_cmp(&w(&a.1))
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
                let Some((stem, scenario)) = job else {
                    break;
                };
                let rec = run_one(&stem, &scenario, &opts.out.join(&stem));
                if let Ok(mut d) = done.lock() {
                    if opts.progress {
                        eprintln!(
                            "[{}/{}] {stem}: {:.0} s simulated in {:.1} s{}",
                            d.len() + 1,
                            total,
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
    let mut runs = done.into_inner().unwrap_or_default();
    runs.sort_by(|a, b| a.stem.cmp(&b.stem));
    let by_stem: BTreeMap<&str, &RunRecord> = runs.iter().map(|r| (r.stem.as_str(), r)).collect();
    let mut checks = Vec::new();
    for e in &selected {
        let ck = Checker {
            exp: e.id,
            runs: &by_stem,
            out: &mut checks,
        };
        match e.id {
            "E1" => check_e1(ck),
            "E2" => check_e2(ck),
            "E3" => check_e3(ck),
            "E4" => check_e4(ck),
            "E5" => check_e5(ck),
            "E6" => check_e6(ck),
            _ => {}
        }
    }
    Ok(Report {
        quick: opts.quick,
        wall_s: t0.elapsed().as_secs_f64(),
        checks,
        runs,
    })
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

struct Checker<'a> {
    exp: &'static str,
    runs: &'a BTreeMap<&'a str, &'a RunRecord>,
    out: &'a mut Vec<Check>,
}

impl Checker<'_> {
    /// A summary number; `window` = `None` for the whole run.
    fn num(&self, stem: &str, window: Option<&str>, path: &str) -> Option<f64> {
        let r = self.runs.get(stem)?;
        match window {
            Some(w) => lookup(&r.summary, &format!("windows.{w}.{path}")),
            None => lookup(&r.summary, path),
        }
    }

    fn push(
        &mut self,
        metric: String,
        published: &str,
        value: Option<f64>,
        unit: &'static str,
        pass: Option<bool>,
    ) {
        let (ours, verdict) = match (value, pass) {
            (None, _) => (
                "n/a (run failed)".to_owned(),
                if pass.is_some() {
                    Verdict::Fail
                } else {
                    Verdict::Info
                },
            ),
            (Some(v), Some(true)) => (fmt_num(v, unit), Verdict::Pass),
            (Some(v), Some(false)) => (fmt_num(v, unit), Verdict::Fail),
            (Some(v), None) => (fmt_num(v, unit), Verdict::Info),
        };
        self.out.push(Check {
            experiment: self.exp,
            metric,
            published: published.to_owned(),
            ours,
            // JSON has no infinity: an unbounded ratio is reported as null.
            value: value.filter(|v| v.is_finite()),
            unit,
            verdict,
        });
    }

    /// A thresholded check: passes when `ok(value)`.
    fn check(
        &mut self,
        metric: String,
        published: &str,
        v: Option<f64>,
        unit: &'static str,
        ok: impl Fn(f64) -> bool,
    ) {
        let pass = Some(v.is_some_and(&ok));
        self.push(metric, published, v, unit, pass);
    }

    fn info(&mut self, metric: String, published: &str, v: Option<f64>, unit: &'static str) {
        self.push(metric, published, v, unit, None);
    }

    /// Mean tunnel (subflow) rate on `path` over `[from_s, to_s)`, Mbit/s.
    fn subflow_mbps(&self, stem: &str, path: usize, from_s: f64, to_s: f64) -> Option<f64> {
        tunnel_mbps(self.runs.get(stem)?, path, from_s, to_s)
    }

    /// First 100 ms bin at or after `from_s` in which `path` carries at least
    /// `mbps` of tunnel traffic; seconds.
    fn first_use_s(&self, stem: &str, path: usize, from_s: f64, mbps: f64) -> Option<f64> {
        let series = self.runs.get(stem)?.tunnel_series.get(path)?;
        let a = (from_s * 10.0).round() as usize;
        let thresh = mbps * 1e6 / 8.0 / 10.0;
        series
            .iter()
            .enumerate()
            .skip(a)
            .find(|(_, b)| **b as f64 >= thresh)
            .map(|(i, _)| i as f64 / 10.0)
    }

    fn window_bounds(&self, stem: &str, w: &str) -> Option<(f64, f64)> {
        let r = self.runs.get(stem)?;
        let win = r.summary.get("windows")?.get(w)?;
        Some((win.get("from_s")?.as_f64()?, win.get("to_s")?.as_f64()?))
    }
}

/// Mean tunnel (subflow) rate of run `r` on `path` over `[from_s, to_s)`,
/// Mbit/s, from its 100 ms tunnel series.
pub(crate) fn tunnel_mbps(r: &RunRecord, path: usize, from_s: f64, to_s: f64) -> Option<f64> {
    let series = r.tunnel_series.get(path)?;
    let a = (from_s * 10.0).round() as usize;
    let b = ((to_s * 10.0).round() as usize).min(series.len());
    if b <= a {
        return None;
    }
    let bytes: u64 = series[a..b].iter().sum();
    Some(bytes as f64 * 8.0 / ((b - a) as f64 / 10.0) / 1e6)
}

fn fmt_num(v: f64, unit: &str) -> String {
    let n = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if unit.is_empty() {
        n
    } else {
        format!("{n} {unit}")
    }
}

fn check_e1(mut c: Checker<'_>) {
    let w = Some("after_drop");
    for (stem, label) in [("e1-dccp-ccid5", "CCID5"), ("e1-tcp-bbr", "TCP BBR")] {
        let g = c.num(stem, w, "flows.0.goodput_mbps");
        c.check(
            format!("{label} goodput 6–15 s"),
            "≈10 (full 10 Mbit/s)",
            g,
            "Mbit/s",
            |v| v >= 9.0,
        );
        let r = c.num(stem, w, "paths.0.rtt_ms.p95");
        c.check(
            format!("{label} path RTT p95 6–15 s"),
            "low, no bufferbloat (≤ 35 ms)",
            r,
            "ms",
            |v| v <= 35.0,
        );
    }
    for (stem, label) in [("e1-dccp-ccid2", "CCID2"), ("e1-tcp-cubic", "TCP CUBIC")] {
        let g = c.num(stem, w, "flows.0.goodput_mbps");
        c.info(format!("{label} goodput 6–15 s"), "≈10", g, "Mbit/s");
        let r = c.num(stem, w, "paths.0.rtt_ms.p95");
        c.check(
            format!("{label} path RTT p95 6–15 s"),
            "buffer fills (≥ 60 ms)",
            r,
            "ms",
            |v| v >= 60.0,
        );
    }
    let lost = c.num("e1-dccp-ccid2", None, "paths.0.lost_pkts");
    c.check(
        "CCID2 packets lost at the bottleneck".into(),
        "loses packets (> 0)",
        lost,
        "pkts",
        |v| v > 0.0,
    );
}

fn check_e2(mut c: Checker<'_>) {
    let w = Some("end_state");
    for cc in ["ccid2", "ccid5"] {
        let stem = format!("e2-{cc}");
        let label = cc.to_uppercase();
        let p1 = c.num(&stem, w, "paths.0.throughput_mbps");
        c.check(
            format!("{label} end state path 1 (15–20 s)"),
            "≈10 Mbit/s",
            p1,
            "Mbit/s",
            |v| (8.5..=11.5).contains(&v),
        );
        let p2 = c.num(&stem, w, "paths.1.throughput_mbps");
        c.check(
            format!("{label} end state path 2 (15–20 s)"),
            "≈5 Mbit/s",
            p2,
            "Mbit/s",
            |v| (3.5..=7.0).contains(&v),
        );
        let g = c.num(&stem, w, "flows.0.goodput_mbps");
        c.check(
            format!("{label} delivered (15–20 s)"),
            "≈15 Mbit/s (≥ 14)",
            g,
            "Mbit/s",
            |v| v >= 14.0,
        );
    }
    // Spilling: first 100 ms after the drop in which path 2 carries ≥ 1 Mbit/s.
    let s2 = c.first_use_s("e2-ccid2", 1, 5.0, 1.0).map(|t| t - 5.0);
    let s5 = c.first_use_s("e2-ccid5", 1, 5.0, 1.0).map(|t| t - 5.0);
    c.info(
        "CCID2 spills to path 2 after the drop".into(),
        "only after loss near t = 8 s (≈3 s)",
        s2,
        "s",
    );
    c.check(
        "CCID5 spills to path 2 after the drop".into(),
        "at once (≤ 1 s)",
        s5,
        "s",
        |v| v <= 1.0,
    );
    let earlier = match (s5, s2) {
        (Some(a), Some(b)) => Some(b - a),
        (Some(_), None) => Some(f64::INFINITY),
        _ => None,
    };
    c.check(
        "CCID5 spills earlier than CCID2 by".into(),
        "earlier (> 0 s)",
        earlier,
        "s",
        |v| v > 0.0,
    );
    let r2 = c.num("e2-ccid2", Some("after_drop"), "paths.0.rtt_ms.p95");
    let r5 = c.num("e2-ccid5", Some("after_drop"), "paths.0.rtt_ms.p95");
    c.info(
        "CCID2 path 1 RTT p95 after the drop".into(),
        "queue fills",
        r2,
        "ms",
    );
    c.info(
        "CCID5 path 1 RTT p95 after the drop".into(),
        "lower",
        r5,
        "ms",
    );
    let ratio = match (r2, r5) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "path 1 RTT p95 ratio CCID2 / CCID5".into(),
        "CCID5 lower (≥ 2×)",
        ratio,
        "×",
        |v| v >= 2.0,
    );
}

fn max_path_rtt_p95(c: &Checker<'_>, stem: &str, n: usize) -> Option<f64> {
    (0..n)
        .filter_map(|i| c.num(stem, None, &format!("paths.{i}.rtt_ms.p95")))
        .reduce(f64::max)
}

fn check_e3(mut c: Checker<'_>) {
    let g2 = c.num("e3-ccid2", None, "flows.0.goodput_mbps");
    c.check(
        "CCID2 inner TCP goodput".into(),
        "17.4 Mbit/s (≥ 15)",
        g2,
        "Mbit/s",
        |v| v >= 15.0,
    );
    let g5 = c.num("e3-ccid5", None, "flows.0.goodput_mbps");
    c.check(
        "CCID5 inner TCP goodput".into(),
        "18 Mbit/s (≥ 16.5)",
        g5,
        "Mbit/s",
        |v| v >= 16.5,
    );
    let r2 = max_path_rtt_p95(&c, "e3-ccid2", 2);
    let r5 = max_path_rtt_p95(&c, "e3-ccid5", 2);
    c.info(
        "CCID2 path RTT p95 (worse path)".into(),
        "clusters near 20 and 180 ms",
        r2,
        "ms",
    );
    c.info("CCID5 path RTT p95 (worse path)".into(), "≈45 ms", r5, "ms");
    let lower = match (r2, r5) {
        (Some(a), Some(b)) => Some(a - b),
        _ => None,
    };
    c.check(
        "CCID5 RTT p95 lower than CCID2's by".into(),
        "lower (> 0 ms)",
        lower,
        "ms",
        |v| v > 0.0,
    );
    for (stem, label) in [("e3-ccid2", "CCID2"), ("e3-ccid5", "CCID5")] {
        let a = c.num(stem, None, "paths.0.throughput_mbps");
        let b = c.num(stem, None, "paths.1.throughput_mbps");
        c.info(
            format!("{label} path 1 / path 2 throughput"),
            "CCID5: equal load",
            a.zip(b).map(|(a, b)| a / b.max(1e-9)),
            "×",
        );
    }
}

fn check_e4(mut c: Checker<'_>) {
    let (from, to) = c
        .window_bounds("e4-lia", "steady")
        .unwrap_or((100.0, 1000.0));
    let lia1 = c.subflow_mbps("e4-lia", 0, from, to);
    let lia2 = c.subflow_mbps("e4-lia", 1, from, to);
    let cc1 = c.subflow_mbps("e4-coupled-cubic", 0, from, to);
    let cc2 = c.subflow_mbps("e4-coupled-cubic", 1, from, to);
    c.info("LIA subflow 1".into(), "≈95 Mbit/s", lia1, "Mbit/s");
    c.info("LIA subflow 2".into(), "≈20 Mbit/s", lia2, "Mbit/s");
    c.info(
        "LIA total".into(),
        "≈115 Mbit/s",
        lia1.zip(lia2).map(|(a, b)| a + b),
        "Mbit/s",
    );
    c.info(
        "Coupled CUBIC subflow 1".into(),
        "397–402 Mbit/s",
        cc1,
        "Mbit/s",
    );
    c.info(
        "Coupled CUBIC subflow 2".into(),
        "21–25 Mbit/s",
        cc2,
        "Mbit/s",
    );
    let ratio = match (cc1, lia1) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        (Some(a), Some(_)) if a > 0.0 => Some(f64::INFINITY),
        _ => None,
    };
    c.check(
        "Coupled CUBIC / LIA subflow 1".into(),
        "≈4.2× (≥ 3×)",
        ratio,
        "×",
        |v| v >= 3.0,
    );
    let total = cc1.zip(cc2).map(|(a, b)| a + b);
    c.check(
        "Coupled CUBIC total".into(),
        "422–423 Mbit/s (≥ 350)",
        total,
        "Mbit/s",
        |v| v >= 350.0,
    );
    let rel = match (cc2, lia2) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "Coupled CUBIC / LIA subflow 2".into(),
        "close to LIA's (within ±30 %)",
        rel,
        "×",
        |v| (0.7..=1.3).contains(&v),
    );
    let t_lia = c.num("e4-lia", Some("steady"), "flows.1.goodput_mbps");
    let t_cc = c.num("e4-coupled-cubic", Some("steady"), "flows.1.goodput_mbps");
    c.info(
        "single-path TCP on path 2, with LIA".into(),
        "keeps its share",
        t_lia,
        "Mbit/s",
    );
    let keep = match (t_cc, t_lia) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "path-2 TCP share, Coupled CUBIC / LIA".into(),
        "keeps its share (≥ 0.7×)",
        keep,
        "×",
        |v| v >= 0.7,
    );
    let single = c.num(
        "e4-cubic-single-path1",
        Some("steady"),
        "flows.0.goodput_mbps",
    );
    c.info(
        "single-path CUBIC alone on path 1".into(),
        "a little less than Coupled CUBIC's total",
        single,
        "Mbit/s",
    );
}

fn check_e5(mut c: Checker<'_>) {
    // Outage detection: the client's first PathFailed for the Wi-Fi path
    // (index 0) at or after the outage start.
    let detect = c.runs.get("e5-aggregation").and_then(|r| {
        r.conn_events
            .iter()
            .find(|e| {
                e.side == "client"
                    && e.path == Some(0)
                    && e.event.starts_with("PathFailed")
                    && e.at_s >= 20.0
            })
            .map(|e| e.at_s - 20.0)
    });
    c.info(
        "aggregation: outage detected after".into(),
        "—",
        detect,
        "s",
    );
    let rtt = c
        .num("e5-aggregation", None, "paths.1.rtt_ms.p50")
        .map(|v| v / 1e3);
    let gap = c.num("e5-aggregation", None, "meta.flows.0.max_delivery_gap_ms");
    let bound = detect.zip(rtt).map(|(d, r)| (d + r) * 1e3);
    c.info("aggregation: detection + one RTT".into(), "—", bound, "ms");
    c.push(
        "aggregation: longest delivery gap".into(),
        "no break (≤ detection + 1 RTT)",
        gap,
        "ms",
        Some(gap.zip(bound).is_some_and(|(g, b)| g <= b)),
    );
    let gap_h = c.num("e5-handover", None, "meta.flows.0.max_delivery_gap_ms");
    c.info(
        "switching: longest delivery gap".into(),
        "no connectivity break",
        gap_h,
        "ms",
    );
    let q = |c: &Checker<'_>, stem: &str| c.num(stem, None, "send_queue_delay_ms.max");
    let qa = q(&c, "e5-aggregation");
    let qs = q(&c, "e5-handover");
    c.check(
        "aggregation: peak scheduler queueing delay".into(),
        "< 200 ms",
        qa,
        "ms",
        |v| v < 200.0,
    );
    c.info(
        "switching: peak scheduler queueing delay".into(),
        "> 1000 ms",
        qs,
        "ms",
    );
    // Where each peak comes from: when it happened and what the paths did
    // while that packet waited (BBR's PROBE_RTT on LTE in both runs today).
    for (stem, label) in [
        ("e5-aggregation", "aggregation"),
        ("e5-handover", "switching"),
    ] {
        let ours = c
            .runs
            .get(stem)
            .and_then(|r| r.summary.pointer("/meta/send_queue_delay_peak"))
            .map_or_else(|| "n/a".to_owned(), describe_peak);
        c.out.push(Check {
            experiment: c.exp,
            metric: format!("{label}: peak scheduler queueing delay, when and why"),
            published: "—".into(),
            ours,
            value: None,
            unit: "",
            verdict: Verdict::Info,
        });
    }
    let more = qs.zip(qa).map(|(s, a)| s - a);
    c.check(
        "switching queues more than aggregating by".into(),
        "larger when switching (> 0)",
        more,
        "ms",
        |v| v > 0.0,
    );
}

/// "t = 20.5 s; lte: Active startup → Active probe_rtt (cwnd ≥ 4); wifi: …"
/// from a run's `meta.send_queue_delay_peak`.
fn describe_peak(peak: &Value) -> String {
    let mut s = format!(
        "t = {:.2} s",
        peak.get("at_s").and_then(Value::as_f64).unwrap_or(f64::NAN)
    );
    if let Some(paths) = peak.get("paths_during_wait").and_then(Value::as_object) {
        for (name, p) in paths {
            let states: Vec<&str> = p
                .get("states")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let _ = write!(s, "; {name}: {}", states.join(" → "));
            if let Some(w) = p.get("min_cwnd_pkts").and_then(Value::as_u64) {
                let _ = write!(s, " (cwnd ≥ {w})");
            }
        }
    }
    s
}

fn check_e6(mut c: Checker<'_>) {
    let mut best: Option<(&str, f64)> = None;
    for (stem, label) in [
        ("e6-ratio-80-20", "80:20 + active-adaptive"),
        ("e6-min-srtt", "min-SRTT, passive"),
        ("e6-path1-only", "path 1 alone"),
    ] {
        let g = c.num(stem, None, "flows.0.goodput_mbps");
        c.info(
            format!("{label}: goodput"),
            if stem == "e6-ratio-80-20" {
                "played best"
            } else {
                "worse"
            },
            g,
            "Mbit/s",
        );
        let o = c.num(stem, None, "flows.0.owd_ms.p95");
        c.info(format!("{label}: OWD p95"), "—", o, "ms");
        let r = c.num(stem, None, "flows.0.out_of_order_pkts");
        c.info(format!("{label}: out-of-order arrivals"), "—", r, "pkts");
        let ga = c.num(stem, Some("after_change"), "flows.0.goodput_mbps");
        c.info(
            format!("{label}: goodput after the delay change"),
            "—",
            ga,
            "Mbit/s",
        );
        if let Some(g) = g {
            if best.is_none_or(|(_, b)| g > b) {
                best = Some((label, g));
            }
        }
    }
    c.out.push(Check {
        experiment: "E6",
        metric: "best configuration by goodput".into(),
        published: "80:20 + active-adaptive".into(),
        ours: best.map_or("n/a".into(), |(l, _)| l.to_owned()),
        value: None,
        unit: "",
        verdict: Verdict::Info,
    });
}

/// Writes `REPORT.md`, `results.json` and the comparison figures into `dir`.
pub fn write_report(dir: &Path, report: &Report) -> Result<(), SimError> {
    std::fs::create_dir_all(dir)?;
    let figures = crate::figures::write_figures(dir, &report.runs)?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# mpdccp reproduce — the published experiments in the simulator\n"
    );
    let _ = writeln!(
        md,
        "Mode: **{}**. Wall time {:.1} s. Every run is deterministic (seed in each `summary.json`).\n",
        if report.quick {
            format!("quick — E4 shortened from 1000 s to {QUICK_E4_DURATION_S} s (steady-state window 20–{QUICK_E4_DURATION_S} s instead of 100–1000 s)")
        } else {
            "full".to_owned()
        },
        report.wall_s
    );
    let _ = writeln!(
        md,
        "**{}** (info rows carry no threshold). Result formats: `docs/SCENARIOS.md` \
         of the repository.\n",
        report.verdict_line()
    );
    md.push_str(&report.table());
    md.push('\n');
    for e in EXPERIMENTS {
        let runs: Vec<&RunRecord> = report
            .runs
            .iter()
            .filter(|r| e.runs.contains(&r.stem.as_str()))
            .collect();
        if runs.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {} — {}\n", e.id, e.title);
        // The rows this experiment's figures support, then the figures.
        let rows = Report {
            quick: report.quick,
            wall_s: report.wall_s,
            checks: report
                .checks
                .iter()
                .filter(|c| c.experiment == e.id)
                .cloned()
                .collect(),
            runs: Vec::new(),
        };
        md.push_str(&rows.table());
        md.push('\n');
        for f in figures.iter().filter(|f| f.experiment == e.id) {
            let _ = writeln!(md, "![{}]({})\n\n*{}*\n", f.caption, f.file, f.caption);
        }
        write_disagreements(&mut md, e.id, &rows.checks);
        for r in runs {
            write_run_plots(&mut md, dir, r);
        }
    }
    std::fs::write(dir.join("REPORT.md"), md)?;
    let json =
        serde_json::to_string_pretty(report).map_err(|e| SimError::Scenario(e.to_string()))?;
    std::fs::write(dir.join("results.json"), json)?;
    Ok(())
}

/// The failed checks of one experiment and what we found about them.
fn write_disagreements(md: &mut String, id: &str, checks: &[Check]) {
    let failed: Vec<&Check> = checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .collect();
    if failed.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "Disagreements with the publication (reported, not tuned away):\n"
    );
    for c in failed {
        let _ = writeln!(
            md,
            "- {}: published {}, ours {}.",
            c.metric, c.published, c.ours
        );
    }
    if let Some(note) = disagreement_note(id) {
        let _ = writeln!(md, "\n{note}");
    }
    md.push('\n');
}

/// One run's links and plots (`delay.png` first: the panels a reader
/// compares with the paper).
fn write_run_plots(md: &mut String, dir: &Path, r: &RunRecord) {
    let rel = r.dir.strip_prefix(dir).unwrap_or(&r.dir);
    let _ = writeln!(
        md,
        "### `{}` ({:.0} s simulated, {:.1} s wall)\n",
        r.stem, r.duration_s, r.wall_s
    );
    if let Some(err) = &r.error {
        let _ = writeln!(md, "Run failed: `{err}`\n");
        return;
    }
    let _ = writeln!(
        md,
        "Results: [`summary.json`]({0}/summary.json), [`timeseries.csv`]({0}/timeseries.csv)\n",
        rel.display()
    );
    const ORDER: [&str; 5] = [
        "delay.png",
        "throughput.png",
        "owd_cdf.png",
        "cwnd.png",
        "queue.png",
    ];
    for p in ORDER.iter().filter(|p| r.dir.join(p).exists()) {
        let _ = writeln!(md, "![{} {p}]({}/{p})", r.stem, rel.display());
    }
    md.push('\n');
}

/// What we found when a check disagreed (filled from the analysis of the
/// runs; see the closing note of the simulator issue).
fn disagreement_note(id: &str) -> Option<&'static str> {
    Some(match id {
        "E2" => {
            "What we found: after the drop CCID5 splits the 15 Mbit/s about evenly \
                 instead of filling path 1 first. CPF here asks `PathView::can_send`, which \
                 includes the pacer: whenever path 1's BBR pacer is not ready, CPF spills the \
                 packet to path 2, so path 2 carries traffic although path 1 has capacity. \
                 The paper's kernel CPF looks at the congestion window only (pacing happens \
                 later, in the qdisc). The CCID5 path-1 RTT p95 over 5–20 s includes BBR's \
                 drain after the drop, which keeps the ratio to CCID2 under 2×. CCID2 spills \
             after ≈0.3 s rather than ≈3 s: its path-1 window, grown while the 15 Mbit/s \
             application limited it, is filled by the queue within a few RTTs, and CPF \
             then overflows to path 2 before the buffer is full (the paper's CCID2 waited \
             for loss near t = 8 s)."
        }
        "E4" => {
            "What we found: our LIA follows RFC 6356 (tests in cc_coupled.rs, including \
             its equilibrium w_i = 2α/(p_i·W_total)). Its fluid equilibrium here is \
             subflow 1 ≈ 52–70, subflow 2 ≈ 15–24, total ≈ 76–85 Mbit/s; the run gives \
             ≈ 69 / 22 / 91. Subflow 1 cannot reach the paper's 95 (a Reno-like window at \
             p = 1e-6 and 200 ms RTT is ≤ ≈ 82 Mbit/s), so the paper's 115 total exceeds \
             RFC 6356. Before this session subflow 2 got ≈ 3 Mbit/s: in the noiseless \
             drop-tail FIFO the competing TCP (acked per segment, 1460 B) kept the buffer \
             full to the byte while the tunnel's 1496 B packets come in pairs (Ack Ratio 2), \
             so subflow 2 saw ≈ 15× the TCP's loss-event rate (and LIA sat at its \
             equilibrium for that rate, 16 vs 18.6 pkts predicted); and it started from \
             cwnd 2 after joining into the TCP's slow-start overflow. The E4 files now make \
             the competition symmetric (TCP 1496 B, delayed acks, start with the subflows). \
             Coupled CUBIC's subflow 2 runs LIA: a subflow runs CUBIC only while its BDP \
             is above the window where CUBIC's response function leaves Reno's (RFC 9438 \
             §5.1: W* ≈ 1.654·RTT^-1.5, 207 pkts at 40 ms, 18 at 200 ms); before, it ran \
             nearly uncoupled CUBIC on path 2 and took ≈ 1.4× LIA's share. Numbers and \
             traces: scenarios/README.md, E4."
        }
        "E5" => {
            "What we found: the peak scheduler queueing delay comes from the moment \
             traffic moves onto the LTE path (rows \"when and why\" above). With BBRv1 \
             exactly as Linux (strict `<` min-RTT refresh) it was CCID5's PROBE_RTT on \
             LTE (cwnd 4 for 200 ms, 231 ms); CCID5 now lets an application-limited \
             path probe for free (scenarios/README.md, E5). The ns-3 study's > 1000 ms \
             when switching need a switch that waits for more than one RTO."
        }
        _ => return None,
    })
}
