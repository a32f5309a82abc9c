//! The comparison figures of `REPORT.md`, drawn like the publications':
//! E1–E3 put CCID2 and CCID5 side by side on shared axes (the CCID5 paper's
//! figures 5–7: path RTT over time, and throughput over time per path); E4
//! is a bar chart of each subflow's steady-state throughput, ours against
//! the published value (Lee et al. 2023, Tab. 3).

use std::path::Path;

use mpdccp_model::plot::{plot_grid, plot_grouped_bars, Panel, Series};
use mpdccp_model::results::{TimeSeries, TsKind};

use crate::reproduce::RunRecord;
use crate::SimError;

/// One figure written for the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub experiment: &'static str,
    /// Path relative to the report's directory.
    pub file: String,
    pub caption: String,
}

/// The side-by-side runs of E1–E3: (experiment, CCID2 run, CCID5 run).
const SIDE_BY_SIDE: &[(&str, &str, &str)] = &[
    ("E1", "e1-dccp-ccid2", "e1-dccp-ccid5"),
    ("E2", "e2-ccid2", "e2-ccid5"),
    ("E3", "e3-ccid2", "e3-ccid5"),
];

/// E4's published steady-state subflow rates (Lee et al. 2023, Tab. 3;
/// ranges as their midpoints), Mbit/s: LIA 1, LIA 2, Coupled CUBIC 1, 2.
const E4_PUBLISHED: [f64; 4] = [95.0, 20.0, 399.5, 23.0];

/// Writes every figure whose runs are present into `dir/figures/`.
pub fn write_figures(dir: &Path, runs: &[RunRecord]) -> Result<Vec<Figure>, SimError> {
    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir)?;
    let find = |stem: &str| runs.iter().find(|r| r.stem == stem && r.error.is_none());
    let mut out = Vec::new();
    for &(exp, a, b) in SIDE_BY_SIDE {
        let (Some(a), Some(b)) = (find(a), find(b)) else {
            continue;
        };
        let name = format!("{}-ccid2-vs-ccid5.png", exp.to_lowercase());
        side_by_side(&fig_dir.join(&name), exp, &[("CCID2", a), ("CCID5", b)])?;
        out.push(Figure {
            experiment: exp,
            file: format!("figures/{name}"),
            caption: format!(
                "{exp}: CCID2 (left) and CCID5 (right) on shared axes — path RTT \
                 (top) and throughput per path (bottom), 100 ms bins"
            ),
        });
    }
    if let (Some(lia), Some(cc)) = (find("e4-lia"), find("e4-coupled-cubic")) {
        let name = "e4-subflow-throughput.png";
        let ours = |r: &RunRecord, p: usize| {
            let (from, to) = steady_window(r).unwrap_or((100.0, 1000.0));
            crate::reproduce::tunnel_mbps(r, p, from, to).unwrap_or(f64::NAN)
        };
        let groups: Vec<(String, Vec<f64>)> = [
            ("LIA subflow 1", ours(lia, 0), E4_PUBLISHED[0]),
            ("LIA subflow 2", ours(lia, 1), E4_PUBLISHED[1]),
            ("Coupled CUBIC subflow 1", ours(cc, 0), E4_PUBLISHED[2]),
            ("Coupled CUBIC subflow 2", ours(cc, 1), E4_PUBLISHED[3]),
        ]
        .into_iter()
        .map(|(l, o, p)| (l.to_owned(), vec![o, p]))
        .collect();
        plot_grouped_bars(
            &fig_dir.join(name),
            "E4: steady-state subflow throughput, LIA vs Coupled CUBIC",
            "Mbit/s",
            &["ours (simulator)", "published (Lee et al. 2023)"],
            &groups,
        )?;
        out.push(Figure {
            experiment: "E4",
            file: format!("figures/{name}"),
            caption: "E4: each subflow's mean throughput over the steady window, ours \
                      against the published values (ranges drawn at their midpoints)"
                .into(),
        });
    }
    Ok(out)
}

/// `(from_s, to_s)` of a run's `steady` window.
fn steady_window(r: &RunRecord) -> Option<(f64, f64)> {
    let w = r.summary.get("windows")?.get("steady")?;
    Some((w.get("from_s")?.as_f64()?, w.get("to_s")?.as_f64()?))
}

/// A 2 × n grid: path RTT on top, per-path throughput below, one column
/// per run, shared axes per row.
fn side_by_side(file: &Path, exp: &str, runs: &[(&str, &RunRecord)]) -> Result<(), SimError> {
    let per_path =
        |ts: &TimeSeries, label: &str, field: fn(&mpdccp_model::results::TsRow) -> Option<f64>| {
            ts.paths
                .iter()
                .map(|name| Series {
                    label: format!("{name} {label}"),
                    points: ts.series(TsKind::Path, name, field),
                })
                .collect::<Vec<_>>()
        };
    let rtt: Vec<Panel> = runs
        .iter()
        .map(|(cc, r)| Panel {
            title: format!("{cc}: path RTT"),
            y_label: "RTT (ms)".into(),
            series: per_path(&r.timeseries, "RTT", |row| row.rtt_ms),
        })
        .collect();
    let tput: Vec<Panel> = runs
        .iter()
        .map(|(cc, r)| Panel {
            title: format!("{cc}: throughput per path"),
            y_label: "Mbit/s".into(),
            series: per_path(&r.timeseries, "", |row| Some(row.throughput_mbps)),
        })
        .collect();
    plot_grid(
        file,
        &format!("{exp}: CCID2 vs CCID5"),
        "time (s)",
        &[rtt, tput],
    )?;
    Ok(())
}
