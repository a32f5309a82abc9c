//! `sweep --seeds A,B,…`: per cell (scenario file × `--set` combination),
//! the mean and spread over the seeds of each flow's and path's main
//! numbers (`cells.csv`, format in docs/SCENARIOS.md), and whether the seeds
//! changed anything at all.

use std::fmt::Write as _;

use mpdccp_sim::reproduce::Interval;
use serde_json::Value;

/// The numbers summarised per flow and per path: (JSON path, column name).
const FLOW_METRICS: &[(&str, &str)] = &[
    ("goodput_mbps", "goodput_mbps"),
    ("owd_ms.p95", "owd_p95_ms"),
    ("lost_pkts", "lost_pkts"),
];
const PATH_METRICS: &[(&str, &str)] = &[
    ("throughput_mbps", "throughput_mbps"),
    ("rtt_ms.p95", "rtt_p95_ms"),
    ("lost_pkts", "lost_pkts"),
];

/// One metric of one flow or path in one cell, over the seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct CellStat {
    pub cell: String,
    pub kind: &'static str,
    pub name: String,
    pub metric: &'static str,
    pub values: Vec<f64>,
}

impl CellStat {
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.values.len().max(1) as f64
    }
    /// Sample standard deviation (n − 1); 0 for a single value.
    pub fn std(&self) -> f64 {
        let n = self.values.len();
        if n < 2 || self.min() == self.max() {
            return 0.0;
        }
        let m = self.mean();
        (self.values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    }
    fn min(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }
    fn max(&self) -> f64 {
        self.values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

fn get(v: &Value, path: &str) -> Option<f64> {
    mpdccp_sim::reproduce::lookup(v, path)
}

/// Collects `(cell, summary)` pairs (one per seed) into per-cell statistics,
/// in the order cells, flows and paths first appear.
pub fn cell_stats(runs: &[(String, &Value)]) -> Vec<CellStat> {
    let mut out: Vec<CellStat> = Vec::new();
    for (cell, summary) in runs {
        for (kind, list, metrics) in [
            ("flow", "flows", FLOW_METRICS),
            ("path", "paths", PATH_METRICS),
        ] {
            for entry in summary
                .get(list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
                for &(path, metric) in metrics {
                    let Some(v) = get(entry, path) else { continue };
                    let found = out.iter_mut().find(|s| {
                        s.cell == *cell && s.kind == kind && s.name == name && s.metric == metric
                    });
                    match found {
                        Some(s) => s.values.push(v),
                        None => out.push(CellStat {
                            cell: cell.clone(),
                            kind,
                            name: name.to_owned(),
                            metric,
                            values: vec![v],
                        }),
                    }
                }
            }
        }
    }
    out
}

/// True when every cell with more than one seed gave identical flows and
/// paths for every seed: nothing in the scenario draws randomness.
pub fn seeds_change_nothing(runs: &[(String, &Value)]) -> bool {
    let results = |v: &Value| (v.get("flows").cloned(), v.get("paths").cloned());
    let mut compared = false;
    for (i, (cell, a)) in runs.iter().enumerate() {
        for (other, b) in &runs[i + 1..] {
            if other == cell {
                compared = true;
                if results(a) != results(b) {
                    return false;
                }
            }
        }
    }
    compared
}

/// `cells.csv`: one row per cell, flow or path, and metric.
pub fn csv(stats: &[CellStat]) -> String {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut s = String::from("cell,kind,name,metric,n,mean,std,min,max,ci95_lo,ci95_hi\n");
    for c in stats {
        // The 95 % interval of the mean (Student t), as `reproduce --seeds`.
        let iv = Interval::of(&c.values);
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{}",
            q(&c.cell),
            c.kind,
            q(&c.name),
            c.metric,
            c.values.len(),
            c.mean(),
            c.std(),
            c.min(),
            c.max(),
            iv.as_ref().map_or(f64::NAN, |i| i.lo),
            iv.as_ref().map_or(f64::NAN, |i| i.hi),
        );
    }
    s
}

/// The terminal table: throughput per cell as mean ± std (n).
pub fn table(stats: &[CellStat]) -> String {
    let mut s = format!(
        "{:<48} {:<12} {:>28}\n",
        "cell", "name", "Mbit/s mean ± std (seeds)"
    );
    for c in stats
        .iter()
        .filter(|c| matches!(c.metric, "goodput_mbps" | "throughput_mbps"))
    {
        let _ = writeln!(
            s,
            "{:<48} {:<12} {:>28}",
            c.cell,
            format!("{} {}", c.kind, c.name),
            format!("{:.2} ± {:.2} ({})", c.mean(), c.std(), c.values.len())
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(goodput: f64) -> Value {
        json!({
            "flows": [{"name": "app", "goodput_mbps": goodput, "owd_ms": {"p95": 10.0}, "lost_pkts": 0}],
            "paths": [{"name": "p1", "throughput_mbps": goodput, "rtt_ms": {"p95": 20.0}, "lost_pkts": 1}],
        })
    }

    #[test]
    fn mean_and_sample_spread_per_cell_and_no_change_is_detected() {
        let (a, b, c) = (summary(9.0), summary(11.0), summary(5.0));
        let runs = vec![
            ("x".to_owned(), &a),
            ("x".to_owned(), &b),
            ("y".to_owned(), &c),
        ];
        let stats = cell_stats(&runs);
        let g = stats
            .iter()
            .find(|s| s.cell == "x" && s.metric == "goodput_mbps")
            .expect("cell x goodput");
        assert_eq!(g.values, vec![9.0, 11.0]);
        assert_eq!(g.mean(), 10.0);
        assert!((g.std() - 2f64.sqrt()).abs() < 1e-12);
        let y = stats
            .iter()
            .find(|s| s.cell == "y" && s.metric == "rtt_p95_ms")
            .expect("cell y rtt");
        assert_eq!((y.values.len(), y.std()), (1, 0.0));
        let text = csv(&stats);
        assert!(text.starts_with(
            "cell,kind,name,metric,n,mean,std,min,max,ci95_lo,ci95_hi\n\"x\",flow,\"app\",goodput_mbps,2,10,"
        ));
        // n = 2: half-width t(1) · s/√2 = 12.706 · 1 → [−2.71, 22.71].
        let row: Vec<f64> = text
            .lines()
            .nth(1)
            .unwrap()
            .split(',')
            .skip(9)
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(
            (row[0] + 2.706).abs() < 1e-2 && (row[1] - 22.706).abs() < 1e-2,
            "{row:?}"
        );
        assert!(!seeds_change_nothing(&runs));
        let same = vec![("x".to_owned(), &a), ("x".to_owned(), &a)];
        assert!(seeds_change_nothing(&same));
    }
}
