//! Scoring: each tunnel cell against its references (the same flows
//! directly on each path alone, and the capacity sum) and the thresholds the
//! tunnel is meant to meet.

use std::collections::BTreeMap;

use mpdccp_model::results::{round6, Summary};
use serde::{Deserialize, Serialize};

use super::mixes::{self, RT_FLOW};
use super::{steady_window, Job, Options, RunResult, SEED, STEADY};

/// The goals each cell is checked against.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Thresholds {
    /// Every cell: goodput ≥ this × the best single path.
    pub min_ratio_best: f64,
    /// Per mix: goodput ≥ this × the capacity sum.
    pub min_ratio_sum: BTreeMap<String, f64>,
    /// The real-time flow's OWD p95 ≤ this × the faster path's RTT.
    pub max_rt_owd_p95_per_rtt: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_ratio_best: 0.95,
            min_ratio_sum: BTreeMap::from([("equal".into(), 0.9), ("asym".into(), 0.85)]),
            max_rt_owd_p95_per_rtt: 1.5,
        }
    }
}

impl Thresholds {
    fn ratio_sum_for(&self, mix: &str) -> Option<f64> {
        self.min_ratio_sum.get(mix).copied()
    }
}

/// One path's direct run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Direct {
    pub path: String,
    /// Mean capacity of the path over the steady window, Mbit/s.
    pub capacity_mbps: f64,
    pub goodput_mbps: Option<f64>,
    pub rt_owd_p95_ms: Option<f64>,
    pub rt_loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The references of one mix × inner traffic.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Reference {
    pub mix: String,
    pub inner: String,
    pub direct: Vec<Direct>,
    /// The path with the highest direct goodput.
    pub best_path: Option<String>,
    pub best_single_mbps: Option<f64>,
    /// Sum of the paths' mean capacities over the steady window, Mbit/s.
    pub capacity_sum_mbps: f64,
    /// Offered inner load when it is a fixed rate (UDP CBR), Mbit/s.
    pub offered_mbps: Option<f64>,
    /// RTT of the path with the lowest propagation delay (2 × one-way), ms.
    pub faster_path_rtt_ms: f64,
}

/// One check of a cell.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Check {
    pub what: String,
    pub value: Option<f64>,
    pub limit: f64,
    pub pass: bool,
}

/// One tunnel cell: mix × inner traffic × tunnel controller.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    pub mix: String,
    pub inner: String,
    pub cc: String,
    /// Delivered payload of all the cell's flows over the steady window.
    pub goodput_mbps: Option<f64>,
    pub ratio_best: Option<f64>,
    pub ratio_sum: Option<f64>,
    /// Lost / sent packets of the cell's flows in the steady window.
    pub loss: Option<f64>,
    pub rt_owd_p95_ms: Option<f64>,
    pub rt_loss: Option<f64>,
    pub checks: Vec<Check>,
    pub pass: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A mix or inner traffic and what it is.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Named {
    pub name: String,
    pub about: String,
}

/// Everything `scorecard.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Scorecard {
    pub duration_s: f64,
    pub steady_from_s: f64,
    pub steady_to_s: f64,
    pub seed: u64,
    /// `--set` overrides, in order.
    pub sets: Vec<String>,
    pub mixes: Vec<Named>,
    pub inners: Vec<Named>,
    pub ccs: Vec<String>,
    pub thresholds: Thresholds,
    pub references: Vec<Reference>,
    pub cells: Vec<Cell>,
    pub cells_passed: usize,
    pub cells_failed: usize,
    /// Runs that failed to simulate (references included).
    pub runs_failed: usize,
}

impl Scorecard {
    pub fn reference(&self, mix: &str, inner: &str) -> Option<&Reference> {
        self.references
            .iter()
            .find(|r| r.mix == mix && r.inner == inner)
    }
}

/// What a run's steady window says about its flows.
struct Measured {
    goodput: f64,
    loss: Option<f64>,
    rt_owd_p95: Option<f64>,
    rt_loss: Option<f64>,
}

fn measure(s: &Summary) -> Option<Measured> {
    let w = s.windows.get(STEADY)?;
    let goodput = w.flows.iter().map(|f| f.goodput_mbps).sum();
    let sent: u64 = w.flows.iter().map(|f| f.sent_pkts).sum();
    let lost: u64 = w.flows.iter().map(|f| f.lost_pkts).sum();
    let rt = w.flows.iter().find(|f| f.name == RT_FLOW);
    Some(Measured {
        goodput,
        loss: (sent > 0).then(|| lost as f64 / sent as f64),
        rt_owd_p95: rt.map(|f| f.owd_ms.p95),
        rt_loss: rt
            .filter(|f| f.sent_pkts > 0)
            .map(|f| f.lost_pkts as f64 / f.sent_pkts as f64),
    })
}

fn r6(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite()).map(round6)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(round6(a / b)),
        _ => None,
    }
}

/// The reference of `job`'s mix and inner traffic, before its direct
/// runs: the paths' capacity sum over the steady window `from..to`, the
/// offered load, the faster path's RTT.
fn new_reference(job: &Job, from: f64, to: f64) -> Reference {
    let paths = &job.scenario.path;
    let capacity_sum: f64 = paths
        .iter()
        .map(|p| mixes::mean_capacity_mbps(p, from, to))
        .sum();
    let offered = job
        .scenario
        .flow
        .iter()
        .map(|f| f.rate_mbps)
        .try_fold(0.0, |acc, r| r.map(|r| acc + r));
    let min_delay = paths
        .iter()
        .map(|p| p.delay_ms)
        .fold(f64::INFINITY, f64::min);
    Reference {
        mix: job.mix.name.into(),
        inner: job.inner.name.into(),
        direct: Vec::new(),
        best_path: None,
        best_single_mbps: None,
        capacity_sum_mbps: round6(capacity_sum),
        offered_mbps: offered.map(round6),
        faster_path_rtt_ms: round6(2.0 * min_delay),
    }
}

/// A direct run on path `p` (capacity `cap`) into `reference`, which
/// keeps the best of them.
fn add_direct(
    reference: &mut Reference,
    p: &str,
    cap: f64,
    measured: Option<&Measured>,
    err: Option<String>,
) {
    let g = measured.map(|m| m.goodput);
    reference.direct.push(Direct {
        path: p.to_owned(),
        capacity_mbps: round6(cap),
        goodput_mbps: r6(g),
        rt_owd_p95_ms: r6(measured.and_then(|m| m.rt_owd_p95)),
        rt_loss: r6(measured.and_then(|m| m.rt_loss)),
        error: err,
    });
    if let Some(g) = g {
        if reference.best_single_mbps.is_none_or(|b| g > b) {
            reference.best_single_mbps = Some(round6(g));
            reference.best_path = Some(p.to_owned());
        }
    }
}

/// Scores `results` (one per job, in `jobs` order).
pub fn scorecard(opts: &Options, jobs: &[Job], results: &[RunResult]) -> Scorecard {
    let th = Thresholds::default();
    let (from, to) = steady_window(opts.duration_s);
    let mut references: Vec<Reference> = Vec::new();
    let mut cells = Vec::new();
    let mut runs_failed = 0;
    let mut ccs: Vec<String> = Vec::new();
    for (job, res) in jobs.iter().zip(results) {
        if res.is_err() {
            runs_failed += 1;
        }
        let measured = res.as_ref().ok().and_then(measure);
        let err = match res {
            Err(e) => Some(e.clone()),
            Ok(_) if measured.is_none() => Some("no steady window in the summary".into()),
            Ok(_) => None,
        };
        let paths = &job.scenario.path;
        if references
            .last()
            .is_none_or(|r| r.mix != job.mix.name || r.inner != job.inner.name)
        {
            references.push(new_reference(job, from, to));
        }
        let Some(reference) = references.last_mut() else {
            continue;
        };
        match (&job.cc, &job.path) {
            (None, Some(p)) => {
                let cap = paths
                    .iter()
                    .find(|x| &x.name == p)
                    .map_or(0.0, |x| mixes::mean_capacity_mbps(x, from, to));
                add_direct(reference, p, cap, measured.as_ref(), err);
            }
            (Some(cc), _) => {
                if !ccs.contains(cc) {
                    ccs.push(cc.clone());
                }
                cells.push(cell(&th, reference, cc, measured.as_ref(), err));
            }
            (None, None) => {}
        }
    }
    let cells_passed = cells.iter().filter(|c| c.pass).count();
    Scorecard {
        duration_s: opts.duration_s,
        steady_from_s: from,
        steady_to_s: to,
        seed: SEED,
        sets: opts.sets.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        mixes: pick_names(jobs, |j| (j.mix.name, j.mix.about)),
        inners: pick_names(jobs, |j| (j.inner.name, j.inner.about)),
        ccs,
        thresholds: th,
        cells_failed: cells.len() - cells_passed,
        cells_passed,
        references,
        cells,
        runs_failed,
    }
}

fn pick_names(jobs: &[Job], f: fn(&Job) -> (&'static str, &'static str)) -> Vec<Named> {
    let mut out: Vec<Named> = Vec::new();
    for j in jobs {
        let (n, a) = f(j);
        if !out.iter().any(|x| x.name == n) {
            out.push(Named {
                name: n.into(),
                about: a.into(),
            });
        }
    }
    out
}

/// Scores one tunnel cell against its reference.
fn cell(
    th: &Thresholds,
    reference: &Reference,
    cc: &str,
    m: Option<&Measured>,
    error: Option<String>,
) -> Cell {
    let goodput = r6(m.map(|m| m.goodput));
    let ratio_best = ratio(goodput, reference.best_single_mbps);
    let ratio_sum = ratio(goodput, Some(reference.capacity_sum_mbps));
    let rt_owd_p95 = r6(m.and_then(|m| m.rt_owd_p95));
    let mut checks = vec![Check {
        what: "goodput / best single path".into(),
        value: ratio_best,
        limit: th.min_ratio_best,
        pass: ratio_best.is_some_and(|r| r >= th.min_ratio_best),
    }];
    if let Some(min) = th.ratio_sum_for(&reference.mix) {
        // A fixed-rate inner load (UDP CBR at 90 % of the sum) cannot carry
        // more than it offers: judge it against the smaller of the two.
        let basis = reference
            .offered_mbps
            .map_or(reference.capacity_sum_mbps, |o| {
                o.min(reference.capacity_sum_mbps)
            });
        let v = ratio(goodput, Some(basis));
        checks.push(Check {
            what: if basis < reference.capacity_sum_mbps {
                "goodput / offered load".into()
            } else {
                "goodput / capacity sum".into()
            },
            value: v,
            limit: min,
            pass: v.is_some_and(|r| r >= min),
        });
    }
    if rt_owd_p95.is_some() || reference.inner.contains(RT_FLOW) {
        let limit = th.max_rt_owd_p95_per_rtt * reference.faster_path_rtt_ms;
        checks.push(Check {
            what: "real-time OWD p95 (ms)".into(),
            value: rt_owd_p95,
            limit: round6(limit),
            pass: rt_owd_p95.is_some_and(|v| v <= limit),
        });
    }
    let pass = error.is_none() && checks.iter().all(|c| c.pass);
    Cell {
        mix: reference.mix.clone(),
        inner: reference.inner.clone(),
        cc: cc.into(),
        goodput_mbps: goodput,
        ratio_best,
        ratio_sum,
        loss: r6(m.and_then(|m| m.loss)),
        rt_owd_p95_ms: rt_owd_p95,
        rt_loss: r6(m.and_then(|m| m.rt_loss)),
        checks,
        pass,
        error,
    }
}
