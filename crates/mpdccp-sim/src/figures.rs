//! The comparison figures of `REPORT.md`, drawn like the publications':
//! E1–E3 put the runs side by side on shared axes (the CCID5 paper's
//! figures 5–7: path RTT over time, and throughput over time per path; E1
//! adds its TCP CUBIC and TCP BBR baselines); E4 is a bar chart of each
//! subflow's steady-state throughput, ours against the published value
//! with the published range as an error bar (Lee et al. 2023, Tab. 3).
//!
//! With `reproduce --seeds N` the figures show the spread: the time
//! series get a band from the per-bin minimum to maximum over the seeds
//! under the first seed's line, and E4's bars the 95 % interval of the
//! matching check.

use std::collections::BTreeMap;
use std::path::Path;

use mpdccp_model::plot::{plot_grid, plot_grouped_bars_with_ranges, Panel, Series};
use mpdccp_model::results::{TimeSeries, TsKind, TsRow};

use crate::reproduce::{Report, RunRecord};
use crate::SimError;

/// One figure written for the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub experiment: &'static str,
    /// Path relative to the report's directory.
    pub file: String,
    pub caption: String,
}

/// The side-by-side figures of E1–E3: experiment, then (column title, run).
const SIDE_BY_SIDE: &[(&str, &[(&str, &str)])] = &[
    (
        "E1",
        &[
            ("CCID2", "e1-dccp-ccid2"),
            ("CCID5", "e1-dccp-ccid5"),
            ("TCP CUBIC", "e1-tcp-cubic"),
            ("TCP BBR", "e1-tcp-bbr"),
        ],
    ),
    ("E2", &[("CCID2", "e2-ccid2"), ("CCID5", "e2-ccid5")]),
    ("E3", &[("CCID2", "e3-ccid2"), ("CCID5", "e3-ccid5")]),
];

/// E4's published steady-state subflow rates (Lee et al. 2023, Tab. 3),
/// Mbit/s, as (low, high): LIA 1, LIA 2, Coupled CUBIC 1, 2 ("≈" values
/// have no range).
const E4_PUBLISHED: [(f64, f64); 4] = [(95.0, 95.0), (20.0, 20.0), (397.0, 402.0), (21.0, 25.0)];

/// The E4 check rows whose values the bars show (their intervals are the
/// bars' spread under `--seeds`).
const E4_ROWS: [&str; 4] = [
    "LIA subflow 1",
    "LIA subflow 2",
    "Coupled CUBIC subflow 1",
    "Coupled CUBIC subflow 2",
];

/// Writes every figure whose runs are present into `dir/figures/`.
pub fn write_figures(dir: &Path, report: &Report) -> Result<Vec<Figure>, SimError> {
    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir)?;
    let runs = &report.runs;
    let find = |stem: &str| runs.iter().find(|r| r.stem == stem && r.error.is_none());
    let spread = if report.other_seeds.is_empty() {
        String::new()
    } else {
        format!(
            "; band: minimum to maximum over the {} seeds",
            report.other_seeds.len() + 1
        )
    };
    let mut out = Vec::new();
    for &(exp, columns) in SIDE_BY_SIDE {
        let present: Vec<(&str, &RunRecord)> = columns
            .iter()
            .filter_map(|(title, stem)| find(stem).map(|r| (*title, r)))
            .collect();
        if present.len() < 2 {
            continue;
        }
        let name = format!("{}-side-by-side.png", exp.to_lowercase());
        side_by_side(&fig_dir.join(&name), exp, &present, &report.other_seeds)?;
        let titles: Vec<&str> = present.iter().map(|(t, _)| *t).collect();
        out.push(Figure {
            experiment: exp,
            file: format!("figures/{name}"),
            caption: format!(
                "{exp}: {} from left to right on shared axes — path RTT (top) and \
                 throughput per path (bottom), 100 ms bins; dashed lines: the \
                 scenario's events{spread}",
                titles.join(", ")
            ),
        });
    }
    if let (Some(lia), Some(cc)) = (find("e4-lia"), find("e4-coupled-cubic")) {
        out.push(e4_subflow_figure(&fig_dir, report, lia, cc)?);
    }
    Ok(out)
}

/// E4's subflow throughput, LIA and Coupled CUBIC, ours against the
/// published values, as grouped bars with error bars.
fn e4_subflow_figure(
    fig_dir: &Path,
    report: &Report,
    lia: &RunRecord,
    cc: &RunRecord,
) -> Result<Figure, SimError> {
    let name = "e4-subflow-throughput.png";
    let ours = |r: &RunRecord, p: usize| {
        let (from, to) = steady_window(r).unwrap_or((100.0, 1000.0));
        crate::reproduce::tunnel_mbps(r, p, from, to).unwrap_or(f64::NAN)
    };
    let values = [ours(lia, 0), ours(lia, 1), ours(cc, 0), ours(cc, 1)];
    let mut groups = Vec::new();
    let mut ranges = Vec::new();
    for (i, row) in E4_ROWS.iter().enumerate() {
        let (lo, hi) = E4_PUBLISHED[i];
        let interval = report
            .checks
            .iter()
            .find(|c| c.experiment == "E4" && c.metric == *row)
            .and_then(|c| c.interval.as_ref())
            .map(|iv| (iv.lo, iv.hi));
        groups.push(((*row).to_owned(), vec![values[i], (lo + hi) / 2.0]));
        ranges.push(vec![interval, (hi > lo).then_some((lo, hi))]);
    }
    plot_grouped_bars_with_ranges(
        &fig_dir.join(name),
        "E4: steady-state subflow throughput, LIA vs Coupled CUBIC",
        "Mbit/s",
        &["ours (simulator)", "published (Lee et al. 2023)"],
        &groups,
        &ranges,
    )?;
    Ok(Figure {
        experiment: "E4",
        file: format!("figures/{name}"),
        caption: format!(
            "E4: each subflow's mean throughput over the steady window, ours \
             against the published values (a published range as its midpoint \
             with the range as an error bar{})",
            if report.other_seeds.is_empty() {
                ""
            } else {
                "; ours with its 95 % interval over the seeds"
            }
        ),
    })
}

/// `(from_s, to_s)` of a run's `steady` window.
fn steady_window(r: &RunRecord) -> Option<(f64, f64)> {
    let w = r.summary.get("windows")?.get("steady")?;
    Some((w.get("from_s")?.as_f64()?, w.get("to_s")?.as_f64()?))
}

/// The per-bin minimum and maximum of one path's `field` over the seeds'
/// runs of `stem` (the first seed's `first` included), by bin time.
fn seed_band(
    first: &TimeSeries,
    others: &[&TimeSeries],
    path: &str,
    field: fn(&TsRow) -> Option<f64>,
) -> Vec<(f64, f64, f64)> {
    if others.is_empty() {
        return Vec::new();
    }
    // Bins keyed by their time in µs (exact for 100 ms bins).
    let mut bins: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for ts in std::iter::once(first).chain(others.iter().copied()) {
        for (t, v) in ts.series(TsKind::Path, path, field) {
            let e = bins.entry((t * 1e6).round() as i64).or_insert((v, v));
            *e = (e.0.min(v), e.1.max(v));
        }
    }
    bins.into_iter()
        .map(|(t, (lo, hi))| (t as f64 / 1e6, lo, hi))
        .collect()
}

/// A 2 × n grid: path RTT on top, per-path throughput below, one column
/// per run, shared axes per row; the scenario's events as markers.
fn side_by_side(
    file: &Path,
    exp: &str,
    runs: &[(&str, &RunRecord)],
    other_seeds: &[Vec<RunRecord>],
) -> Result<(), SimError> {
    let panel = |title: &str,
                 r: &RunRecord,
                 y_label: &str,
                 label: &str,
                 field: fn(&TsRow) -> Option<f64>| {
        let others: Vec<&TimeSeries> = other_seeds
            .iter()
            .filter_map(|runs| runs.iter().find(|o| o.stem == r.stem && o.error.is_none()))
            .map(|o| &o.timeseries)
            .collect();
        let ts = &r.timeseries;
        Panel {
            title: title.to_owned(),
            y_label: y_label.to_owned(),
            series: ts
                .paths
                .iter()
                .map(|name| Series {
                    label: format!("{name} {label}").trim_end().to_owned(),
                    points: ts.series(TsKind::Path, name, field),
                    band: seed_band(ts, &others, name, field),
                })
                .collect(),
            markers: ts.markers.clone(),
            ..Panel::default()
        }
    };
    let rtt: Vec<Panel> = runs
        .iter()
        .map(|(t, r)| {
            panel(&format!("{t}: path RTT"), r, "RTT (ms)", "RTT", |row| {
                row.rtt_ms
            })
        })
        .collect();
    let tput: Vec<Panel> = runs
        .iter()
        .map(|(t, r)| {
            panel(
                &format!("{t}: throughput per path"),
                r,
                "Mbit/s",
                "",
                |row| Some(row.throughput_mbps),
            )
        })
        .collect();
    let titles: Vec<&str> = runs.iter().map(|(t, _)| *t).collect();
    plot_grid(
        file,
        &format!("{exp}: {}", titles.join(" vs ")),
        "time (s)",
        &[rtt, tput],
    )?;
    Ok(())
}
