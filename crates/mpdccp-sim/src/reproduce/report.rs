//! `REPORT.md` and `results.json`: the table, each experiment's rows next to
//! its comparison figure, the reasons for each disagreement, every run's plots.

use std::fmt::Write as _;
use std::path::Path;

use super::{Check, Report, RunRecord, Verdict, EXPERIMENTS, QUICK_E4_DURATION_S};
use crate::SimError;

/// Writes `REPORT.md`, `results.json` and the comparison figures into `dir`.
pub fn write_report(dir: &Path, report: &Report) -> Result<(), SimError> {
    std::fs::create_dir_all(dir)?;
    let figures = crate::figures::write_figures(dir, report)?;
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
    if report.seeds > 1 {
        let _ = writeln!(
            md,
            "**{} seeds per configuration** (the scenario's seed s, then s+1 …; from the \
             second seed on, each flow start a scenario marks as unpublished, \
             `start_free_ms`, moves by a seeded draw within ± that range). `ours` is \
             `mean [95 % confidence interval] sd` over the seeds (Student t, n − 1 \
             degrees of freedom); a check passes when the whole interval meets its \
             threshold, fails when no point of it does, and is *unresolved* when it \
             straddles the threshold (these seeds cannot decide; the row says how many \
             would, if the spread holds). Figures and plots: the first seed.\n",
            report.seeds
        );
    }
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
            seeds: report.seeds,
            wall_s: report.wall_s,
            checks: report
                .checks
                .iter()
                .filter(|c| c.experiment == e.id)
                .cloned()
                .collect(),
            runs: Vec::new(),
            other_seeds: Vec::new(),
        };
        md.push_str(&rows.table_with_reasons());
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

/// The failed checks of one experiment, then what we found about the
/// experiment's disagreements (written whether or not a check failed: an
/// info row can disagree too).
fn write_disagreements(md: &mut String, id: &str, checks: &[Check]) {
    for (verdict, head) in [
        (
            Verdict::Fail,
            "Disagreements with the publication (reported, not tuned away):",
        ),
        (
            Verdict::Unresolved,
            "Unresolved over these seeds (the interval straddles the threshold):",
        ),
    ] {
        let rows: Vec<&Check> = checks.iter().filter(|c| c.verdict == verdict).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(md, "{head}\n");
        for c in rows {
            let _ = writeln!(
                md,
                "- {}: published {}, ours {}.",
                c.metric, c.published, c.ours
            );
        }
        md.push('\n');
    }
    if let Some(note) = disagreement_note(id) {
        let _ = writeln!(md, "{note}\n");
    }
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
