//! `mpdccp sim`: run one scenario in the deterministic simulator and write
//! `summary.json`, `timeseries.csv` and plots (the result contract of
//! docs/SCENARIOS.md).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use mpdccp_model::scenario::Scenario;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML, format in docs/SCENARIOS.md).
    pub scenario: PathBuf,
    /// Seed (overrides the scenario's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Output directory [default: sim-out/<scenario name>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Override a scenario field, e.g. `tunnel.cc=ccid5`, `path.0.delay_ms=20`,
    /// `flow.app.rate_mbps=10` (repeatable; every key: docs/SCENARIOS.md).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the summary as JSON on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scenario = load(&args.scenario, &args.set)?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("sim-out").join(&scenario.name));
    let tty = std::io::stderr().is_terminal();
    let t0 = std::time::Instant::now();
    let mut last_pct = u32::MAX;
    let out = mpdccp_sim::run(&scenario, args.seed, |frac| {
        if tty {
            let pct = (frac * 100.0).round() as u32;
            if pct != last_pct {
                last_pct = pct;
                progress_bar(&scenario.name, frac, t0.elapsed().as_secs_f64());
            }
        }
    })
    .with_context(|| format!("simulating {}", args.scenario.display()))?;
    if tty {
        eprintln!();
    }
    mpdccp_sim::write(&out_dir, &out).with_context(|| format!("writing {}", out_dir.display()))?;
    let summary = serde_json::to_value(&out.summary)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", tables(&summary));
        println!(
            "{} simulated s in {:.2} wall s ({} link packets); results in {}",
            scenario.duration_s,
            t0.elapsed().as_secs_f64(),
            out.stats.link_pkts,
            out_dir.display()
        );
    }
    for w in warnings(&summary) {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a newcomer should not miss in a run that otherwise "worked": the
/// tunnel never came up, or a flow delivered nothing.
pub fn warnings(summary: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let meta = summary.get("meta");
    let tunnel_flows = meta
        .and_then(|m| m.get("tunnel_established_s"))
        .is_some_and(Value::is_null)
        && meta
            .and_then(|m| m.get("client_stats"))
            .is_some_and(|v| !v.is_null());
    if tunnel_flows {
        out.push("the tunnel was never established: no tunnel flow could send".into());
    }
    for fl in summary
        .get("flows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if fl.get("delivered_pkts").and_then(Value::as_u64) == Some(0) {
            out.push(format!(
                "flow `{}` delivered nothing ({} packets sent)",
                fl.get("name").and_then(Value::as_str).unwrap_or("?"),
                fl.get("sent_pkts").and_then(Value::as_u64).unwrap_or(0)
            ));
        }
    }
    out
}

/// Loads a scenario and applies `--set` overrides in order.
pub fn load(path: &std::path::Path, sets: &[String]) -> anyhow::Result<Scenario> {
    let mut s = Scenario::load(path).with_context(|| format!("loading {}", path.display()))?;
    for (k, v) in parse_sets(sets)? {
        s.apply_set(&k, &v)?;
    }
    Ok(s)
}

/// `--set KEY=VALUE` flags as trimmed `(key, value)` pairs, in order.
pub fn parse_sets(sets: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    sets.iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .with_context(|| format!("--set `{kv}`: expected KEY=VALUE"))
        })
        .collect()
}

fn progress_bar(name: &str, frac: f64, wall_s: f64) {
    let width = 30;
    let filled = ((frac * width as f64).round() as usize).min(width);
    let mut e = std::io::stderr().lock();
    let _ = write!(
        e,
        "\r{name} [{}{}] {:>3.0}% {:.1}s",
        "#".repeat(filled),
        "-".repeat(width - filled),
        frac * 100.0,
        wall_s
    );
    let _ = e.flush();
}

fn f(v: &Value, path: &str) -> String {
    let mut cur = v;
    for p in path.split('.') {
        match cur.get(p) {
            Some(x) => cur = x,
            None => return "-".into(),
        }
    }
    match cur.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
        None => "-".into(),
    }
}

/// The short flow and path tables printed after a run.
pub fn tables(summary: &Value) -> String {
    let mut s = String::new();
    // Flow Mbit/s is over the flow's active time, path Mbit/s over the run
    // (docs/SCENARIOS.md, "summary.json").
    s.push_str(&format!(
        "{:<14} {:>16} {:>9} {:>10} {:>8} {:>8} {:>13} {:>13} {:>13}\n",
        "flow",
        "goodput (Mbit/s)",
        "sent",
        "delivered",
        "lost",
        "ooo",
        "owd p50 (ms)",
        "owd p95 (ms)",
        "owd max (ms)"
    ));
    for fl in summary
        .get("flows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        s.push_str(&format!(
            "{:<14} {:>16} {:>9} {:>10} {:>8} {:>8} {:>13} {:>13} {:>13}\n",
            fl.get("name").and_then(Value::as_str).unwrap_or("?"),
            f(fl, "goodput_mbps"),
            f(fl, "sent_pkts"),
            f(fl, "delivered_pkts"),
            f(fl, "lost_pkts"),
            f(fl, "out_of_order_pkts"),
            f(fl, "owd_ms.p50"),
            f(fl, "owd_ms.p95"),
            f(fl, "owd_ms.max"),
        ));
    }
    s.push_str(&format!(
        "{:<14} {:>16} {:>9} {:>8} {:>13} {:>13} {:>13} {:>14}\n",
        "path",
        "rate (Mbit/s)",
        "sent",
        "lost",
        "rtt p50 (ms)",
        "rtt p95 (ms)",
        "rtt max (ms)",
        "qdel p95 (ms)"
    ));
    for (i, p) in summary
        .get("paths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        // The path's transport, when the scenario sets one (`udccp`, …).
        let name = p.get("name").and_then(Value::as_str).unwrap_or("?");
        let name = match summary["meta"]["paths"][i]["transport"].as_str() {
            Some(t) => format!("{name} ({t})"),
            None => name.to_string(),
        };
        s.push_str(&format!(
            "{:<14} {:>16} {:>9} {:>8} {:>13} {:>13} {:>13} {:>14}\n",
            name,
            f(p, "throughput_mbps"),
            f(p, "sent_pkts"),
            f(p, "lost_pkts"),
            f(p, "rtt_ms.p50"),
            f(p, "rtt_ms.p95"),
            f(p, "rtt_ms.max"),
            f(p, "queue_delay_ms.p95"),
        ));
    }
    s.push_str("(flow Mbit/s over the flow's active time, path Mbit/s over the run)\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_that_delivered_nothing_is_warned_about() {
        let ok = serde_json::json!({"flows": [{"name": "app", "sent_pkts": 5, "delivered_pkts": 5}],
            "meta": {"tunnel_established_s": 0.04, "client_stats": {}}});
        assert!(warnings(&ok).is_empty());
        let silent = serde_json::json!({"flows": [{"name": "bulk", "sent_pkts": 0, "delivered_pkts": 0}],
            "meta": {"tunnel_established_s": null, "client_stats": {}}});
        let w = warnings(&silent);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[1].contains("`bulk` delivered nothing"), "{w:?}");
    }
}
