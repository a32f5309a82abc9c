//! The scorecard's files: `scorecard.json`, `scorecard.csv`, `REPORT.md`
//! and `heatmap.png`, and the text table printed while running.

use std::fmt::Write as _;
use std::path::Path;

use mpdccp_model::heatmap::{label, plot_heatmap, HeatMap};

use super::score::{Cell, Reference, Scorecard};
use crate::SimError;

/// File names in the output directory.
pub const JSON: &str = "scorecard.json";
pub const CSV: &str = "scorecard.csv";
pub const REPORT: &str = "REPORT.md";
pub const HEATMAP: &str = "heatmap.png";

/// Writes all four files into `dir`. `command` is quoted in the report.
pub fn write_all(dir: &Path, card: &Scorecard, command: &str) -> Result<(), SimError> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(JSON), json(card))?;
    std::fs::write(dir.join(CSV), csv(card))?;
    std::fs::write(dir.join(REPORT), markdown(card, command))?;
    plot_heatmap(&dir.join(HEATMAP), &heatmap(card))?;
    Ok(())
}

/// `scorecard.json`: pretty JSON with a final newline.
pub fn json(card: &Scorecard) -> String {
    let mut s = serde_json::to_string_pretty(card).unwrap_or_default();
    s.push('\n');
    s
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or(String::new(), |v| format!("{v:.digits$}"))
}

/// `scorecard.csv`: one row per tunnel cell with its references.
pub fn csv(card: &Scorecard) -> String {
    let mut s = String::from(
        "mix,inner,cc,goodput_mbps,best_single_mbps,best_path,capacity_sum_mbps,ratio_best,ratio_sum,loss,rt_owd_p95_ms,rt_loss,rt_owd_limit_ms,pass,failed_checks,error\n",
    );
    for c in &card.cells {
        let r = card.reference(&c.mix, &c.inner);
        let rt_limit = c
            .checks
            .iter()
            .find(|k| k.what.starts_with("real-time"))
            .map(|k| k.limit);
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\",\"{}\"",
            c.mix,
            c.inner,
            c.cc,
            opt(c.goodput_mbps, 3),
            opt(r.and_then(|r| r.best_single_mbps), 3),
            r.and_then(|r| r.best_path.clone()).unwrap_or_default(),
            opt(r.map(|r| r.capacity_sum_mbps), 3),
            opt(c.ratio_best, 4),
            opt(c.ratio_sum, 4),
            opt(c.loss, 6),
            opt(c.rt_owd_p95_ms, 2),
            opt(c.rt_loss, 6),
            opt(rt_limit, 1),
            c.pass,
            failed(c).join("; "),
            c.error.clone().unwrap_or_default().replace('"', "'"),
        );
    }
    s
}

/// The checks a cell fails, in words.
fn failed(c: &Cell) -> Vec<String> {
    c.checks
        .iter()
        .filter(|k| !k.pass)
        .map(|k| match k.value {
            Some(v) if k.what.starts_with("real-time") => {
                format!("{} {v:.1} > {:.1}", k.what, k.limit)
            }
            Some(v) => format!("{} {} < {:.2}", k.what, label(v, k.limit), k.limit),
            None => format!("{}: no value", k.what),
        })
        .collect()
}

/// A cell's ratio to the best single path, two decimals, never rounded up
/// onto the goal it misses.
fn ratio_best(card: &Scorecard, c: &Cell) -> String {
    c.ratio_best
        .map_or(String::new(), |v| label(v, card.thresholds.min_ratio_best))
}

fn cell_of<'a>(card: &'a Scorecard, mix: &str, inner: &str, cc: &str) -> Option<&'a Cell> {
    card.cells
        .iter()
        .find(|c| c.mix == mix && c.inner == inner && c.cc == cc)
}

/// `REPORT.md`: per inner traffic a table (rows mixes, columns
/// controllers), then the references and the thresholds.
pub fn markdown(card: &Scorecard, command: &str) -> String {
    let mut s = String::new();
    intro(&mut s, card, command);
    for super::score::Named { name: inner, about } in &card.inners {
        inner_table(&mut s, card, inner, about);
    }
    references(&mut s, card);
    let _ = writeln!(s, "\n## Path mixes\n");
    for super::score::Named { name: m, about } in &card.mixes {
        let _ = writeln!(s, "- **{m}**: {about}");
    }
    let _ = writeln!(s, "\n![heat map]({HEATMAP})");
    s
}

/// The report's head: the command, the runs, the verdict, the thresholds.
fn intro(s: &mut String, card: &Scorecard, command: &str) {
    let _ = writeln!(s, "# Aggregation scorecard\n");
    let _ = writeln!(s, "Command: `{command}`\n");
    let _ = writeln!(
        s,
        "Each run {} simulated s, seed {}; goodput = delivered payload of the \
         cell's flows over the steady window {:.0}–{:.0} s. Best = the same \
         inner traffic directly on each path alone (no tunnel), the best of \
         them; sum = the paths' mean capacity over the window.{}\n",
        card.duration_s,
        card.seed,
        card.steady_from_s,
        card.steady_to_s,
        if card.sets.is_empty() {
            " Tunnel settings: the shared defaults (`TunnelSettings::default()`) except `cc`."
                .to_owned()
        } else {
            format!(" Overrides: `{}`.", card.sets.join("`, `"))
        }
    );
    let _ = writeln!(
        s,
        "**{} of {} cells pass** (every check below); {} runs failed to simulate.\n",
        card.cells_passed,
        card.cells.len(),
        card.runs_failed
    );
    let _ = writeln!(
        s,
        "Thresholds: goodput ≥ {:.2} × the best single path in every cell; \
         goodput ≥ the capacity sum × {} (for UDP CBR, which offers 0.9 × the \
         sum, × the offered load instead); the real-time flow's OWD p95 ≤ {:.1} × \
         the faster path's RTT (2 × its one-way delay).\n",
        card.thresholds.min_ratio_best,
        card.thresholds
            .min_ratio_sum
            .iter()
            .map(|(m, r)| format!("{r:.2} on {m}"))
            .collect::<Vec<_>>()
            .join(", "),
        card.thresholds.max_rt_owd_p95_per_rtt
    );
    let _ = writeln!(
        s,
        "Cell: goodput Mbit/s, then (ratio to best single path / ratio to sum); \
         real-time cells add the real-time flow's OWD p95. ✅ passes every check, \
         ❌ fails one (listed under the table).\n"
    );
}

/// One inner traffic's table (rows mixes, columns controllers) and its
/// failed checks.
fn inner_table(s: &mut String, card: &Scorecard, inner: &str, about: &str) {
    let _ = writeln!(s, "## {inner} — {about}\n");
    let _ = write!(s, "| mix | best single | sum |");
    for cc in &card.ccs {
        let _ = write!(s, " {cc} |");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "|---|---|---|{}", "---|".repeat(card.ccs.len()));
    let mut fails = Vec::new();
    for mix in card.mixes.iter().map(|n| &n.name) {
        let Some(r) = card.reference(mix, inner) else {
            continue;
        };
        mix_row(s, card, r, mix, inner, &mut fails);
        let _ = writeln!(s);
    }
    if !fails.is_empty() {
        let _ = writeln!(s, "\n<details><summary>failed checks</summary>\n");
        for f in fails {
            let _ = writeln!(s, "- {f}");
        }
        let _ = writeln!(s, "\n</details>");
    }
    let _ = writeln!(s);
}

/// The row of `mix` in `inner`'s table; failed cells go to `fails`.
fn mix_row(
    s: &mut String,
    card: &Scorecard,
    r: &Reference,
    mix: &str,
    inner: &str,
    fails: &mut Vec<String>,
) {
    let _ = write!(
        s,
        "| {mix} | {} ({}) | {:.1} |",
        opt(r.best_single_mbps, 1),
        r.best_path.as_deref().unwrap_or("-"),
        r.capacity_sum_mbps
    );
    for cc in &card.ccs {
        match cell_of(card, mix, inner, cc) {
            Some(c) if c.error.is_none() => {
                let rt = c
                    .rt_owd_p95_ms
                    .map_or(String::new(), |v| format!(" {v:.0} ms"));
                let _ = write!(
                    s,
                    " {} ({} / {}){rt} {} |",
                    opt(c.goodput_mbps, 1),
                    ratio_best(card, c),
                    opt(c.ratio_sum, 2),
                    if c.pass { "✅" } else { "❌" }
                );
                if !c.pass {
                    fails.push(format!("{mix}/{cc}: {}", failed(c).join("; ")));
                }
            }
            Some(c) => {
                let _ = write!(s, " error ❌ |");
                fails.push(format!("{mix}/{cc}: {}", c.error.as_deref().unwrap_or("")));
            }
            None => {
                let _ = write!(s, " – |");
            }
        }
    }
}

/// The references: the same inner traffic on each path alone.
fn references(s: &mut String, card: &Scorecard) {
    let _ = writeln!(
        s,
        "## References (the same inner traffic on each path alone)\n"
    );
    let _ = writeln!(
        s,
        "| mix | inner | path | capacity (Mbit/s) | goodput (Mbit/s) | rt OWD p95 (ms) | rt loss |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for r in &card.references {
        for d in &r.direct {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | {} | {} | {} |",
                r.mix,
                r.inner,
                d.path,
                d.capacity_mbps,
                d.error
                    .as_deref()
                    .map_or_else(|| opt(d.goodput_mbps, 2), |e| format!("error: {e}")),
                opt(d.rt_owd_p95_ms, 1),
                opt(d.rt_loss, 4)
            );
        }
    }
}

/// The text table printed to stderr: per inner traffic, rows mixes,
/// columns controllers, each cell `goodput ratio_best` and a mark.
pub fn text_table(card: &Scorecard) -> String {
    let mut s = String::new();
    for inner in card.inners.iter().map(|n| &n.name) {
        let _ = write!(s, "\n{inner}: goodput Mbit/s, ratio to best single path (* = fails a check)\n{:<8} {:>11} {:>6}", "mix", "best", "sum");
        for cc in &card.ccs {
            let _ = write!(s, " {cc:>13}");
        }
        let _ = writeln!(s);
        for mix in card.mixes.iter().map(|n| &n.name) {
            let Some(r) = card.reference(mix, inner) else {
                continue;
            };
            let _ = write!(
                s,
                "{mix:<8} {:>11} {:>6.1}",
                format!(
                    "{} {}",
                    opt(r.best_single_mbps, 1),
                    r.best_path.as_deref().unwrap_or("-")
                ),
                r.capacity_sum_mbps
            );
            for cc in &card.ccs {
                let v = match cell_of(card, mix, inner, cc) {
                    Some(c) if c.error.is_none() => format!(
                        "{} {}{}",
                        opt(c.goodput_mbps, 1),
                        ratio_best(card, c),
                        if c.pass { " " } else { "*" }
                    ),
                    Some(_) => "error".into(),
                    None => "-".into(),
                };
                let _ = write!(s, " {v:>13}");
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(
        s,
        "\n{} of {} cells pass; {} runs failed",
        card.cells_passed,
        card.cells.len(),
        card.runs_failed
    );
    s
}

/// Rows mix × inner, columns controllers, colour and value = ratio to the
/// best single path, goodput under it.
pub fn heatmap(card: &Scorecard) -> HeatMap {
    let mut map = HeatMap {
        title: format!(
            "Aggregation: tunnel goodput / best single path ({} s runs, steady window {:.0}–{:.0} s)",
            card.duration_s, card.steady_from_s, card.steady_to_s
        ),
        subtitle: format!(
            "colour and number: ratio to the best path alone (goal ≥ {:.2}); small: goodput Mbit/s; black corner: misses another goal (sum, real-time delay){}",
            card.thresholds.min_ratio_best,
            if card.sets.is_empty() {
                String::new()
            } else {
                format!("; {}", card.sets.join(", "))
            }
        ),
        col_labels: card.ccs.clone(),
        goal: card.thresholds.min_ratio_best,
        best: 1.5,
        ..HeatMap::default()
    };
    for mix in card.mixes.iter().map(|n| &n.name) {
        for inner in card.inners.iter().map(|n| &n.name) {
            if card.reference(mix, inner).is_none() {
                continue;
            }
            map.row_labels.push(format!("{mix} · {inner}"));
            let cells: Vec<Option<&Cell>> = card
                .ccs
                .iter()
                .map(|cc| cell_of(card, mix, inner, cc))
                .collect();
            map.values
                .push(cells.iter().map(|c| c.and_then(|c| c.ratio_best)).collect());
            map.marked.push(
                cells
                    .iter()
                    .map(|c| {
                        c.is_some_and(|c| {
                            c.checks.iter().skip(1).any(|k| !k.pass) || c.error.is_some()
                        })
                    })
                    .collect(),
            );
            map.notes.push(
                cells
                    .iter()
                    .map(|c| {
                        c.and_then(|c| c.goodput_mbps)
                            .map_or(String::new(), |g| format!("{g:.1}"))
                    })
                    .collect(),
            );
        }
    }
    map
}
