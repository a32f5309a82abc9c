//! The aggregation benchmark (`mpdccp bench aggregation`): does the tunnel
//! carry more than the best single path, on every path mix, with every
//! tunnel controller, for every kind of inner traffic?
//!
//! For each mix × inner traffic the same flows also run directly on each
//! path alone (no tunnel): the best of those is the "best single path"; the
//! mix's mean capacity over the steady window is the "capacity sum". Each
//! tunnel cell (mix × inner × controller) is scored against both
//! ([`score`]). Goodput is the delivered payload of all the cell's flows
//! over the steady window: from `max(5 s, 20 % of the run)` to its end, so
//! start-up (tunnel handshake, slow start) is left out.
//!
//! Deterministic: every run uses the same seed, results are collected in
//! matrix order whatever the thread count, so the same options give a
//! byte-identical `scorecard.json`.

pub mod compare;
pub mod mixes;
pub mod report;
pub mod score;

use std::collections::VecDeque;
use std::sync::Mutex;

use mpdccp_model::results::Summary;
use mpdccp_model::scenario::{Scenario, WindowSpec};

use crate::SimError;
pub use mixes::{Inner, Mix, DEFAULT_CCS, INNERS, MIXES};
pub use score::{Cell, Reference, Scorecard, Thresholds};

/// The seed of every run (links with `loss` draw from it).
pub const SEED: u64 = 1;

/// The report window's name in each run's summary.
pub const STEADY: &str = "steady";

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Mix names (empty: all of [`MIXES`]).
    pub mixes: Vec<String>,
    /// Tunnel controllers (empty: [`DEFAULT_CCS`]).
    pub ccs: Vec<String>,
    /// Inner traffic names (empty: all of [`INNERS`]).
    pub inners: Vec<String>,
    /// Simulated seconds per run.
    pub duration_s: f64,
    /// `--set KEY=VALUE` overrides applied to every run (tunnel cells and
    /// references alike), e.g. `tunnel.scheduler=acpf`.
    pub sets: Vec<(String, String)>,
    /// Parallel runs.
    pub jobs: usize,
}

/// Default simulated seconds per run.
pub const DEFAULT_DURATION_S: f64 = 60.0;

impl Default for Options {
    fn default() -> Self {
        Options {
            mixes: Vec::new(),
            ccs: Vec::new(),
            inners: Vec::new(),
            duration_s: DEFAULT_DURATION_S,
            sets: Vec::new(),
            jobs: 1,
        }
    }
}

/// The steady window `[from, to)` of a run of `duration_s`.
pub fn steady_window(duration_s: f64) -> (f64, f64) {
    (
        (0.2 * duration_s).max(5.0).min(duration_s * 0.5),
        duration_s,
    )
}

/// One simulation of the matrix.
#[derive(Clone, Debug)]
pub struct Job {
    pub mix: &'static Mix,
    pub inner: &'static Inner,
    /// `Some(cc)`: a tunnel cell; `None`: the reference on path `path`.
    pub cc: Option<String>,
    pub path: Option<String>,
    pub scenario: Scenario,
}

impl Job {
    /// `mix/inner/cc` or `mix/inner/direct:path`.
    pub fn id(&self) -> String {
        match (&self.cc, &self.path) {
            (Some(cc), _) => format!("{}/{}/{cc}", self.mix.name, self.inner.name),
            (None, Some(p)) => format!("{}/{}/direct:{p}", self.mix.name, self.inner.name),
            (None, None) => format!("{}/{}", self.mix.name, self.inner.name),
        }
    }
}

/// An option naming something that does not exist, or a bad override.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn pick<T>(
    all: &'static [T],
    names: &[String],
    name: fn(&T) -> &str,
    what: &str,
) -> Result<Vec<&'static T>, UsageError> {
    if names.is_empty() {
        return Ok(all.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            all.iter().find(|x| name(x) == n).ok_or_else(|| {
                let valid: Vec<&str> = all.iter().map(name).collect();
                UsageError(format!(
                    "unknown {what} `{n}` (valid: {})",
                    valid.join(", ")
                ))
            })
        })
        .collect()
}

/// Builds every run of the matrix, references first per mix × inner. Any
/// bad name or override is reported here, before anything runs.
pub fn plan(opts: &Options) -> Result<Vec<Job>, UsageError> {
    if !(opts.duration_s.is_finite() && opts.duration_s >= 2.0) {
        return Err(UsageError(format!(
            "--duration-s must be at least 2 (got {})",
            opts.duration_s
        )));
    }
    if opts.sets.iter().any(|(k, _)| k == "tunnel.cc") {
        return Err(UsageError(
            "the controller is an axis of the matrix: use --cc, not --set tunnel.cc".into(),
        ));
    }
    let mixes = pick(MIXES, &opts.mixes, |m| m.name, "mix")?;
    let inners = pick(INNERS, &opts.inners, |i| i.name, "inner traffic")?;
    let ccs: Vec<String> = if opts.ccs.is_empty() {
        DEFAULT_CCS.iter().map(|s| s.to_string()).collect()
    } else {
        opts.ccs.clone()
    };
    let (from, to) = steady_window(opts.duration_s);
    let mut jobs = Vec::new();
    for &mix in &mixes {
        let paths = (mix.paths)(opts.duration_s);
        let sum: f64 = paths
            .iter()
            .map(|p| mixes::mean_capacity_mbps(p, from, to))
            .sum();
        for &inner in &inners {
            let base = |name: String, via: &str| -> Result<Scenario, UsageError> {
                let mut s = Scenario {
                    name,
                    duration_s: opts.duration_s,
                    seed: SEED,
                    path: paths.clone(),
                    flow: (inner.flows)(sum, via),
                    window: vec![WindowSpec {
                        name: STEADY.into(),
                        from_s: from,
                        to_s: to,
                    }],
                    ..Scenario::default()
                };
                for (k, v) in &opts.sets {
                    s.apply_set(k, v)
                        .map_err(|e| UsageError(format!("--set {k}={v}: {e}")))?;
                }
                s.validate().map_err(|e| UsageError(e.to_string()))?;
                Ok(s)
            };
            for p in &paths {
                jobs.push(Job {
                    mix,
                    inner,
                    cc: None,
                    path: Some(p.name.clone()),
                    scenario: base(
                        format!("agg-{}-{}-direct-{}", mix.name, inner.name, p.name),
                        &p.name,
                    )?,
                });
            }
            for cc in &ccs {
                let mut s = base(
                    format!("agg-{}-{}-{cc}", mix.name, inner.name),
                    mixes::tunnel(),
                )?;
                s.apply_set("tunnel.cc", cc)
                    .map_err(|e| UsageError(format!("--cc {cc}: {e}")))?;
                jobs.push(Job {
                    mix,
                    inner,
                    cc: Some(cc.clone()),
                    path: None,
                    scenario: s,
                });
            }
        }
    }
    Ok(jobs)
}

/// A finished run: its summary, or why it failed.
pub type RunResult = Result<Summary, String>;

/// Runs `jobs` on `threads` threads; `progress(done, total, job, result,
/// wall_s)` is called as each finishes (in completion order). Results come
/// back in `jobs` order.
pub fn run_jobs(
    jobs: &[Job],
    threads: usize,
    progress: impl Fn(usize, usize, &Job, &RunResult, f64) + Sync,
) -> Vec<RunResult> {
    let total = jobs.len();
    let queue = Mutex::new(jobs.iter().enumerate().collect::<VecDeque<_>>());
    let results: Mutex<Vec<(usize, RunResult)>> = Mutex::new(Vec::with_capacity(total));
    let done = Mutex::new(0usize);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, total.max(1)) {
            scope.spawn(|| loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some((i, job)) = next else { break };
                let t0 = std::time::Instant::now();
                let res = crate::run(&job.scenario, None, |_| {})
                    .map(|o| o.summary)
                    .map_err(|e: SimError| e.to_string());
                let wall = t0.elapsed().as_secs_f64();
                let n = done.lock().map(|mut d| {
                    *d += 1;
                    *d
                });
                progress(n.unwrap_or(0), total, job, &res, wall);
                if let Ok(mut r) = results.lock() {
                    r.push((i, res));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.0);
    results.into_iter().map(|r| r.1).collect()
}

/// Plans, runs and scores the matrix.
pub fn run(
    opts: &Options,
    progress: impl Fn(usize, usize, &Job, &RunResult, f64) + Sync,
) -> Result<Scorecard, UsageError> {
    let jobs = plan(opts)?;
    let results = run_jobs(&jobs, opts.jobs, progress);
    Ok(score::scorecard(opts, &jobs, &results))
}
