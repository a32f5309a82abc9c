//! The simulator and the real tunnel side by side (`mpdccp testbed
//! --compare-sim`): the same scenario's two `summary.json`s, metric by
//! metric, with their ratio and whether they agree within a tolerance
//! (`--tolerance`, 10 % by default).
//!
//! Compared, for the whole run and each named window: per flow the goodput,
//! the one-way delay p50 / p95 and the loss ratio; per path the throughput
//! and the RTT p50. Loss ratios and delays near zero are compared by their
//! difference (ratio of two tiny numbers says nothing): loss within 1
//! percentage point, delays within 5 ms, rates within 0.1 Mbit/s, count as
//! agreeing.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// One compared number.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareRow {
    /// `whole run` or the window's name.
    pub window: String,
    /// `flow bulk` / `path lte`.
    pub subject: String,
    pub metric: &'static str,
    pub unit: &'static str,
    pub sim: Option<f64>,
    pub testbed: Option<f64>,
    /// testbed ÷ sim (`None` when either is missing or sim is 0).
    pub ratio: Option<f64>,
    pub agrees: bool,
}

/// What each metric is, where it sits in a flow or path object, and its
/// absolute slack (below it, a difference counts as agreement).
const FLOW_METRICS: &[(&str, &str, &str, f64)] = &[
    ("goodput", "Mbit/s", "goodput_mbps", 0.1),
    ("OWD p50", "ms", "owd_ms.p50", 5.0),
    ("OWD p95", "ms", "owd_ms.p95", 5.0),
    ("loss", "%", "", 1.0),
];
const PATH_METRICS: &[(&str, &str, &str, f64)] = &[
    ("throughput", "Mbit/s", "throughput_mbps", 0.1),
    ("RTT p50", "ms", "rtt_ms.p50", 5.0),
];

fn get(v: &Value, dotted: &str) -> Option<f64> {
    dotted
        .split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_f64)
}

/// A flow's loss in percent of what it sent.
fn loss_percent(flow: &Value) -> Option<f64> {
    let sent = get(flow, "sent_pkts")?;
    (sent > 0.0).then(|| get(flow, "lost_pkts").unwrap_or(0.0) / sent * 100.0)
}

fn by_name<'a>(list: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    list?
        .as_array()?
        .iter()
        .find(|x| x.get("name").and_then(Value::as_str) == Some(name))
}

/// Compares two summaries of the same scenario; `tolerance` is relative
/// (0.1 = 10 %).
pub fn compare(sim: &Value, testbed: &Value, tolerance: f64) -> Vec<CompareRow> {
    let mut scopes: Vec<(String, &Value, &Value)> = vec![("whole run".into(), sim, testbed)];
    if let Some(windows) = sim.get("windows").and_then(Value::as_object) {
        for (name, w) in windows {
            if let Some(t) = testbed.get("windows").and_then(|x| x.get(name)) {
                scopes.push((name.clone(), w, t));
            }
        }
    }
    let mut rows = Vec::new();
    for (window, s, t) in scopes {
        for (kind, key, metrics) in [
            ("flow", "flows", FLOW_METRICS),
            ("path", "paths", PATH_METRICS),
        ] {
            let names: Vec<&str> = s
                .get(key)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|x| x.get("name")?.as_str()).collect())
                .unwrap_or_default();
            for name in names {
                let (a, b) = (by_name(s.get(key), name), by_name(t.get(key), name));
                for &(metric, unit, field, slack) in metrics {
                    let value = |x: Option<&Value>| {
                        let x = x?;
                        if field.is_empty() {
                            loss_percent(x)
                        } else {
                            get(x, field)
                        }
                    };
                    let (sv, tv) = (value(a), value(b));
                    let ratio = match (sv, tv) {
                        (Some(s), Some(t)) if s != 0.0 => Some(t / s),
                        _ => None,
                    };
                    let agrees = match (sv, tv) {
                        (Some(s), Some(t)) => {
                            (t - s).abs() <= slack || (t - s).abs() <= tolerance * s.abs()
                        }
                        _ => false,
                    };
                    rows.push(CompareRow {
                        window: window.clone(),
                        subject: format!("{kind} {name}"),
                        metric,
                        unit,
                        sim: sv,
                        testbed: tv,
                        ratio,
                        agrees,
                    });
                }
            }
        }
    }
    rows
}

/// `COMPARE.md`: one table per window, then the count of agreeing rows.
pub fn markdown(scenario: &str, rows: &[CompareRow], tolerance: f64) -> String {
    let mut md = format!(
        "# {scenario}: simulator vs real tunnel\n\n\
         The same scenario file in `mpdccp sim` and on the real tunnel (`mpdccp testbed`: \
         namespaces, the userspace link emulator replaying the same rates and traces, \
         the kernel's TCP). Agreement: within {:.0} % (delays within 5 ms, rates within \
         0.1 Mbit/s, loss within \
         1 percentage point).\n",
        tolerance * 100.0
    );
    let mut window = "";
    for r in rows {
        if r.window != window {
            window = &r.window;
            let _ = write!(
                md,
                "\n## {window}\n\n| subject | metric | simulator | real tunnel | real ÷ sim | agrees |\n|---|---|---|---|---|---|\n"
            );
        }
        let num = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.2} {}", r.unit));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            r.subject,
            r.metric,
            num(r.sim),
            num(r.testbed),
            r.ratio.map_or("—".to_owned(), |x| format!("{x:.2}")),
            if r.agrees { "yes" } else { "**no**" }
        );
    }
    let agree = rows.iter().filter(|r| r.agrees).count();
    let _ = writeln!(md, "\n{agree} of {} numbers agree.", rows.len());
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(goodput: f64, p95: f64, lost: u64) -> Value {
        json!({
            "flows": [{"name": "bulk", "goodput_mbps": goodput, "sent_pkts": 1000,
                       "lost_pkts": lost, "owd_ms": {"p50": 20.0, "p95": p95}}],
            "paths": [{"name": "dsl", "throughput_mbps": goodput, "rtt_ms": {"p50": 24.0}}],
            "windows": {"steady": {
                "flows": [{"name": "bulk", "goodput_mbps": goodput * 2.0, "sent_pkts": 10,
                           "lost_pkts": 0, "owd_ms": {"p50": 20.0, "p95": p95}}],
                "paths": []}}
        })
    }

    #[test]
    fn rows_judge_relative_and_absolute_agreement() {
        let rows = compare(&summary(10.0, 50.0, 10), &summary(10.5, 58.0, 25), 0.1);
        let row = |w: &str, m: &str| {
            rows.iter()
                .find(|r| r.window == w && r.metric == m && r.subject == "flow bulk")
                .unwrap()
                .clone()
        };
        // 5 % apart: agrees; ratio 1.05.
        let g = row("whole run", "goodput");
        assert!(g.agrees);
        assert!((g.ratio.unwrap() - 1.05).abs() < 1e-9);
        // 8 ms on 50: 16 %, over both the 10 % and the 5 ms slack.
        assert!(!row("whole run", "OWD p95").agrees);
        // 1 % vs 2.5 % loss: 1.5 points apart.
        let l = row("whole run", "loss");
        assert_eq!((l.sim, l.testbed), (Some(1.0), Some(2.5)));
        assert!(!l.agrees);
        // Windows are compared too, with their own numbers.
        assert_eq!(row("steady", "goodput").sim, Some(20.0));
        let md = markdown("x", &rows, 0.1);
        assert!(
            md.contains("## steady")
                && md
                    .contains("| flow bulk | goodput | 10.00 Mbit/s | 10.50 Mbit/s | 1.05 | yes |"),
            "{md}"
        );
        // A side without a value never agrees.
        let rows = compare(&summary(10.0, 50.0, 0), &json!({}), 0.1);
        assert!(rows.iter().all(|r| !r.agrees && r.testbed.is_none()));
    }
}
