//! Running one cell of a plan and merging finished cells into `index.csv`
//! (and `cells.csv` with several seeds). The local `sweep` goes through the
//! same two steps, so its files equal a cluster's collected ones byte for byte.
//! A cell is finished when its `cell.json` exists (written last, by rename);
//! that file alone holds the wall time, the one thing that differs between
//! two runs of the same cell.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::sweep_plan::Cell;

/// The marker a finished cell leaves in its directory.
pub const DONE_FILE: &str = "cell.json";

/// Runs one cell: its outputs in `out/<dir>/`, then `cell.json` with the
/// error (or `null`) and the wall time. `Err` when the run failed.
pub fn run_cell(cell: &Cell, out: &Path) -> anyhow::Result<Result<(), String>> {
    let dir = out.join(&cell.dir);
    let t0 = std::time::Instant::now();
    let res = (|| -> Result<(), String> {
        let scenario = super::sim::load(&cell.scenario, &cell.set).map_err(|e| format!("{e:#}"))?;
        let res = mpdccp_sim::run(&scenario, cell.seed, |_| {}).map_err(|e| e.to_string())?;
        mpdccp_sim::write(&dir, &res).map_err(|e| e.to_string())
    })();
    let wall = t0.elapsed().as_secs_f64();
    std::fs::create_dir_all(&dir)?;
    let done = serde_json::json!({
        "cell": cell.cell,
        "id": cell.id,
        "error": res.as_ref().err(),
        "wall_s": wall,
    });
    let tmp = dir.join(format!("{DONE_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(&done)? + "\n")?;
    std::fs::rename(&tmp, dir.join(DONE_FILE))?;
    eprintln!(
        "{} {}: {:.1} s{}",
        if res.is_ok() { "done" } else { "FAILED" },
        cell.id,
        wall,
        res.as_ref()
            .err()
            .map(|e| format!(" — {e}"))
            .unwrap_or_default()
    );
    Ok(res)
}

/// A finished cell's result: its summary, or why it failed.
pub fn finished(cell: &Cell, out: &Path) -> Option<Result<Value, String>> {
    let dir = out.join(&cell.dir);
    let done: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(DONE_FILE)).ok()?)
        .unwrap_or(Value::Null);
    if let Some(e) = done.get("error").and_then(Value::as_str) {
        return Some(Err(e.to_owned()));
    }
    let summary = std::fs::read_to_string(dir.join("summary.json"))
        .map_err(|e| format!("{}: {e}", dir.join("summary.json").display()))
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()));
    Some(summary)
}

/// What `collect` found.
pub struct Collected {
    pub ok: usize,
    pub failed: usize,
    /// Cells without `cell.json`, in plan order.
    pub missing: Vec<usize>,
    pub index: Vec<Value>,
    pub stats: Option<Vec<super::sweep_stats::CellStat>>,
}

/// Writes `index.csv` (and `cells.csv` when the plan has several seeds)
/// from the finished cells, in plan order.
pub fn collect(cells: &[Cell], out: &Path) -> anyhow::Result<Collected> {
    let mut csv = String::from("run,scenario,seed,settings,kind,name,goodput_or_throughput_mbps,sent_pkts,delivered_pkts,lost_pkts,out_of_order_pkts,owd_p50_ms,owd_p95_ms,owd_p99_ms,rtt_p50_ms,rtt_p95_ms,queue_delay_p95_ms,error\n");
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut c = Collected {
        ok: 0,
        failed: 0,
        missing: Vec::new(),
        index: Vec::new(),
        stats: None,
    };
    let mut per_seed: Vec<(String, Value)> = Vec::new();
    for cell in cells {
        let settings = cell.set.join(";");
        match finished(cell, out) {
            None => c.missing.push(cell.cell),
            Some(Ok(summary)) => {
                c.ok += 1;
                rows(&mut csv, &q(&cell.id), &q(&settings), &summary);
                c.index.push(serde_json::json!({"run": cell.id, "dir": out.join(&cell.dir), "settings": settings, "summary": summary}));
                let name = format!("{}{}", cell.scenario.display(), settings_suffix(&cell.set));
                per_seed.push((name, summary));
            }
            Some(Err(e)) => {
                c.failed += 1;
                let _ = writeln!(
                    csv,
                    "{},,,{},,,,,,,,,,,,,,{}",
                    q(&cell.id),
                    q(&settings),
                    q(&e)
                );
                c.index
                    .push(serde_json::json!({"run": cell.id, "settings": settings, "error": e}));
            }
        }
    }
    std::fs::write(out.join("index.csv"), csv)?;
    if super::sweep_plan::several_seeds(cells) {
        let runs: Vec<(String, &Value)> = per_seed.iter().map(|(n, v)| (n.clone(), v)).collect();
        let stats = super::sweep_stats::cell_stats(&runs);
        std::fs::write(out.join("cells.csv"), super::sweep_stats::csv(&stats))?;
        if super::sweep_stats::seeds_change_nothing(&runs) {
            eprintln!(
                "warning: the seeds changed nothing — nothing in the scenario draws \
                 randomness (no path loss, no BBR-family controller), so every seed gives \
                 the same result"
            );
        }
        c.stats = Some(stats);
    }
    Ok(c)
}

/// One row per flow, then per path, of a finished run.
fn rows(csv: &mut String, run: &str, settings: &str, summary: &Value) {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let seed = summary.get("seed").and_then(Value::as_u64).unwrap_or(0);
    let scen = q(summary
        .get("scenario")
        .and_then(Value::as_str)
        .unwrap_or(""));
    let list = |k: &str| {
        summary
            .get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for fl in list("flows") {
        let _ = writeln!(
            csv,
            "{run},{scen},{seed},{settings},flow,{},{},{},{},{},{},{},{},{},,,,",
            q(fl.get("name").and_then(Value::as_str).unwrap_or("")),
            n(&fl, "goodput_mbps"),
            n(&fl, "sent_pkts"),
            n(&fl, "delivered_pkts"),
            n(&fl, "lost_pkts"),
            n(&fl, "out_of_order_pkts"),
            n(&fl, "owd_ms.p50"),
            n(&fl, "owd_ms.p95"),
            n(&fl, "owd_ms.p99"),
        );
    }
    for p in list("paths") {
        let _ = writeln!(
            csv,
            "{run},{scen},{seed},{settings},path,{},{},{},,{},,,,,{},{},{},",
            q(p.get("name").and_then(Value::as_str).unwrap_or("")),
            n(&p, "throughput_mbps"),
            n(&p, "sent_pkts"),
            n(&p, "lost_pkts"),
            n(&p, "rtt_ms.p50"),
            n(&p, "rtt_ms.p95"),
            n(&p, "queue_delay_ms.p95"),
        );
    }
}

/// ` (k=v;k=v)` for a cell name; empty without settings.
fn settings_suffix(sets: &[String]) -> String {
    if sets.is_empty() {
        String::new()
    } else {
        format!(" ({})", sets.join(";"))
    }
}

fn n(v: &Value, path: &str) -> String {
    mpdccp_sim::reproduce::lookup(v, path).map_or(String::new(), |x| format!("{x}"))
}
