//! The checks of each experiment: a number measured from one or more runs
//! against a threshold taken from the publication (`Verdict::Info` rows
//! are reported side by side, without a threshold).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::{lookup, Check, RunRecord, Verdict};

/// Appends the checks of experiment `id` over `runs` (by stem) to `out`.
pub(super) fn evaluate(id: &'static str, runs: &BTreeMap<&str, &RunRecord>, out: &mut Vec<Check>) {
    let ck = Checker { exp: id, runs, out };
    match id {
        "E1" => check_e1(ck),
        "E2" => check_e2(ck),
        "E3" => check_e3(ck),
        "E4" => check_e4(ck),
        "E5" => check_e5(ck),
        "E6" => check_e6(ck),
        _ => {}
    }
}

struct Checker<'a> {
    exp: &'static str,
    runs: &'a BTreeMap<&'a str, &'a RunRecord>,
    out: &'a mut Vec<Check>,
}

impl Checker<'_> {
    /// A summary number; `window` = `None` for the whole run.
    fn num(&self, stem: &str, window: Option<&str>, path: &str) -> Option<f64> {
        let r = self.runs.get(stem)?;
        match window {
            Some(w) => lookup(&r.summary, &format!("windows.{w}.{path}")),
            None => lookup(&r.summary, path),
        }
    }

    fn push(
        &mut self,
        metric: String,
        published: &str,
        value: Option<f64>,
        unit: &'static str,
        pass: Option<bool>,
        accept: Option<fn(f64) -> bool>,
    ) {
        let (ours, verdict) = match (value, pass) {
            (None, _) => (
                "n/a (run failed)".to_owned(),
                if pass.is_some() {
                    Verdict::Fail
                } else {
                    Verdict::Info
                },
            ),
            (Some(v), Some(true)) => (fmt_num(v, unit), Verdict::Pass),
            (Some(v), Some(false)) => (fmt_num(v, unit), Verdict::Fail),
            (Some(v), None) => (fmt_num(v, unit), Verdict::Info),
        };
        self.out.push(Check {
            experiment: self.exp,
            metric,
            published: published.to_owned(),
            ours,
            // JSON has no infinity: an unbounded ratio is reported as null.
            value: value.filter(|v| v.is_finite()),
            unit,
            verdict,
            interval: None,
            accept,
            because: None,
        });
    }

    /// Sets the reason of the row pushed last (see [`Check::because`]).
    fn because(&mut self, why: &'static str) {
        if let Some(c) = self.out.last_mut() {
            c.because = Some(why);
        }
    }

    /// A thresholded check: passes when `ok(value)`.
    fn check(
        &mut self,
        metric: String,
        published: &str,
        v: Option<f64>,
        unit: &'static str,
        ok: fn(f64) -> bool,
    ) {
        self.push(
            metric,
            published,
            v,
            unit,
            Some(v.is_some_and(ok)),
            Some(ok),
        );
    }

    fn info(&mut self, metric: String, published: &str, v: Option<f64>, unit: &'static str) {
        self.push(metric, published, v, unit, None, None);
    }

    /// Mean tunnel (subflow) rate on `path` over `[from_s, to_s)`, Mbit/s.
    fn subflow_mbps(&self, stem: &str, path: usize, from_s: f64, to_s: f64) -> Option<f64> {
        tunnel_mbps(self.runs.get(stem)?, path, from_s, to_s)
    }

    /// First 100 ms bin at or after `from_s` in which `path` carries at least
    /// `mbps` of tunnel traffic; seconds.
    fn first_use_s(&self, stem: &str, path: usize, from_s: f64, mbps: f64) -> Option<f64> {
        let series = self.runs.get(stem)?.tunnel_series.get(path)?;
        let a = (from_s * 10.0).round() as usize;
        let thresh = mbps * 1e6 / 8.0 / 10.0;
        series
            .iter()
            .enumerate()
            .skip(a)
            .find(|(_, b)| **b as f64 >= thresh)
            .map(|(i, _)| i as f64 / 10.0)
    }

    fn window_bounds(&self, stem: &str, w: &str) -> Option<(f64, f64)> {
        let r = self.runs.get(stem)?;
        let win = r.summary.get("windows")?.get(w)?;
        Some((win.get("from_s")?.as_f64()?, win.get("to_s")?.as_f64()?))
    }
}

/// Mean tunnel (subflow) rate of run `r` on `path` over `[from_s, to_s)`,
/// Mbit/s, from its 100 ms tunnel series.
pub(crate) fn tunnel_mbps(r: &RunRecord, path: usize, from_s: f64, to_s: f64) -> Option<f64> {
    let series = r.tunnel_series.get(path)?;
    let a = (from_s * 10.0).round() as usize;
    let b = ((to_s * 10.0).round() as usize).min(series.len());
    if b <= a {
        return None;
    }
    let bytes: u64 = series[a..b].iter().sum();
    Some(bytes as f64 * 8.0 / ((b - a) as f64 / 10.0) / 1e6)
}

pub(super) fn fmt_num(v: f64, unit: &str) -> String {
    let n = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if unit.is_empty() {
        n
    } else {
        format!("{n} {unit}")
    }
}

fn check_e1(mut c: Checker<'_>) {
    let w = Some("after_drop");
    for (stem, label) in [("e1-dccp-ccid5", "CCID5"), ("e1-tcp-bbr", "TCP BBR")] {
        let g = c.num(stem, w, "flows.0.goodput_mbps");
        c.check(
            format!("{label} goodput 6–15 s"),
            "≈10 (full 10 Mbit/s)",
            g,
            "Mbit/s",
            |v| v >= 9.0,
        );
        let r = c.num(stem, w, "paths.0.rtt_ms.p95");
        c.check(
            format!("{label} path RTT p95 6–15 s"),
            "low, no bufferbloat (≤ 35 ms)",
            r,
            "ms",
            |v| v <= 35.0,
        );
    }
    for (stem, label) in [("e1-dccp-ccid2", "CCID2"), ("e1-tcp-cubic", "TCP CUBIC")] {
        let g = c.num(stem, w, "flows.0.goodput_mbps");
        c.check(
            format!("{label} goodput 6–15 s"),
            "≈10 (full 10 Mbit/s, ≥ 9)",
            g,
            "Mbit/s",
            |v| v >= 9.0,
        );
        let r = c.num(stem, w, "paths.0.rtt_ms.p95");
        c.check(
            format!("{label} path RTT p95 6–15 s"),
            "buffer fills (≥ 60 ms)",
            r,
            "ms",
            |v| v >= 60.0,
        );
    }
    let lost = c.num("e1-dccp-ccid2", None, "paths.0.lost_pkts");
    c.check(
        "CCID2 packets lost at the bottleneck".into(),
        "loses packets (> 0)",
        lost,
        "pkts",
        |v| v > 0.0,
    );
}

/// E2's end state per controller: each path's throughput and the
/// delivered rate in the last 5 s.
fn e2_end_state_checks(c: &mut Checker<'_>) {
    let w = Some("end_state");
    for cc in ["ccid2", "ccid5"] {
        let stem = format!("e2-{cc}");
        let label = cc.to_uppercase();
        let p1 = c.num(&stem, w, "paths.0.throughput_mbps");
        c.check(
            format!("{label} end state path 1 (15–20 s)"),
            "≈10 Mbit/s",
            p1,
            "Mbit/s",
            |v| (8.5..=11.5).contains(&v),
        );
        let p2 = c.num(&stem, w, "paths.1.throughput_mbps");
        c.check(
            format!("{label} end state path 2 (15–20 s)"),
            "≈5 Mbit/s",
            p2,
            "Mbit/s",
            |v| (3.5..=7.0).contains(&v),
        );
        let g = c.num(&stem, w, "flows.0.goodput_mbps");
        c.check(
            format!("{label} delivered (15–20 s)"),
            "≈15 Mbit/s (≥ 14)",
            g,
            "Mbit/s",
            |v| v >= 14.0,
        );
    }
}

fn check_e2(mut c: Checker<'_>) {
    e2_end_state_checks(&mut c);
    // Spilling: first 100 ms after the drop in which path 2 carries ≥ 1 Mbit/s.
    let s2 = c.first_use_s("e2-ccid2", 1, 5.0, 1.0).map(|t| t - 5.0);
    let s5 = c.first_use_s("e2-ccid5", 1, 5.0, 1.0).map(|t| t - 5.0);
    c.info(
        "CCID2 spills to path 2 after the drop".into(),
        "only after loss near t = 8 s (≈3 s)",
        s2,
        "s",
    );
    c.because(
        "differs: CCID2's path-1 window, grown while the 15 Mbit/s app limited it, \
         fills within a few RTTs after the drop and CPF overflows before the buffer \
         does; judged by the row 'CCID5 spills earlier than CCID2 by'",
    );
    c.check(
        "CCID5 spills to path 2 after the drop".into(),
        "at once (≤ 1 s)",
        s5,
        "s",
        |v| v <= 1.0,
    );
    let earlier = match (s5, s2) {
        (Some(a), Some(b)) => Some(b - a),
        (Some(_), None) => Some(f64::INFINITY),
        _ => None,
    };
    c.check(
        "CCID5 spills earlier than CCID2 by".into(),
        "earlier (> 0 s)",
        earlier,
        "s",
        |v| v > 0.0,
    );
    let r2 = c.num("e2-ccid2", Some("after_drop"), "paths.0.rtt_ms.p95");
    let r5 = c.num("e2-ccid5", Some("after_drop"), "paths.0.rtt_ms.p95");
    c.info(
        "CCID2 path 1 RTT p95 after the drop".into(),
        "queue fills",
        r2,
        "ms",
    );
    c.because("no number published; judged with CCID5's by the ratio row below");
    c.info(
        "CCID5 path 1 RTT p95 after the drop".into(),
        "lower",
        r5,
        "ms",
    );
    c.because("no number published; judged with CCID2's by the ratio row below");
    let ratio = match (r2, r5) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "path 1 RTT p95 ratio CCID2 / CCID5".into(),
        "CCID5 lower (≥ 2×)",
        ratio,
        "×",
        |v| v >= 2.0,
    );
}

fn max_path_rtt_p95(c: &Checker<'_>, stem: &str, n: usize) -> Option<f64> {
    (0..n)
        .filter_map(|i| c.num(stem, None, &format!("paths.{i}.rtt_ms.p95")))
        .reduce(f64::max)
}

fn check_e3(mut c: Checker<'_>) {
    let g2 = c.num("e3-ccid2", None, "flows.0.goodput_mbps");
    c.check(
        "CCID2 inner TCP goodput".into(),
        "17.4 Mbit/s (≥ 15)",
        g2,
        "Mbit/s",
        |v| v >= 15.0,
    );
    let g5 = c.num("e3-ccid5", None, "flows.0.goodput_mbps");
    c.check(
        "CCID5 inner TCP goodput".into(),
        "18 Mbit/s (≥ 16.5)",
        g5,
        "Mbit/s",
        |v| v >= 16.5,
    );
    let r2 = max_path_rtt_p95(&c, "e3-ccid2", 2);
    let r5 = max_path_rtt_p95(&c, "e3-ccid5", 2);
    c.info(
        "CCID2 path RTT p95 (worse path)".into(),
        "clusters near 20 and 180 ms",
        r2,
        "ms",
    );
    c.because(
        "not comparable: the publication describes the RTT distribution's two \
         clusters (see the RTT CDF figure), a p95 cannot show them",
    );
    c.check(
        "CCID5 path RTT p95 (worse path)".into(),
        "≈45 ms (within ±30 %, 31.5–58.5)",
        r5,
        "ms",
        |v| (31.5..=58.5).contains(&v),
    );
    let lower = match (r2, r5) {
        (Some(a), Some(b)) => Some(a - b),
        _ => None,
    };
    c.check(
        "CCID5 RTT p95 lower than CCID2's by".into(),
        "lower (> 0 ms)",
        lower,
        "ms",
        |v| v > 0.0,
    );
    for (stem, label) in [("e3-ccid2", "CCID2"), ("e3-ccid5", "CCID5")] {
        let a = c.num(stem, None, "paths.0.throughput_mbps");
        let b = c.num(stem, None, "paths.1.throughput_mbps");
        let ratio = a.zip(b).map(|(a, b)| a / b.max(1e-9));
        if label == "CCID5" {
            c.check(
                format!("{label} path 1 / path 2 throughput"),
                "equal load (0.8–1.25×)",
                ratio,
                "×",
                |v| (0.8..=1.25).contains(&v),
            );
        } else {
            c.info(
                format!("{label} path 1 / path 2 throughput"),
                "—",
                ratio,
                "×",
            );
        }
    }
}

fn check_e4(mut c: Checker<'_>) {
    let (from, to) = c
        .window_bounds("e4-lia", "steady")
        .unwrap_or((100.0, 1000.0));
    let lia = (
        c.subflow_mbps("e4-lia", 0, from, to),
        c.subflow_mbps("e4-lia", 1, from, to),
    );
    let cc = (
        c.subflow_mbps("e4-coupled-cubic", 0, from, to),
        c.subflow_mbps("e4-coupled-cubic", 1, from, to),
    );
    e4_subflow_rows(&mut c, lia, cc);
    let total = e4_coupled_cubic_checks(&mut c, lia, cc);
    e4_single_path_checks(&mut c, total);
}

/// E4's per-subflow rows, LIA's and Coupled CUBIC's, each with why it is
/// information rather than a check.
fn e4_subflow_rows(
    c: &mut Checker<'_>,
    lia: (Option<f64>, Option<f64>),
    cc: (Option<f64>, Option<f64>),
) {
    let ((lia1, lia2), (cc1, cc2)) = (lia, cc);
    c.info("LIA subflow 1".into(), "≈95 Mbit/s", lia1, "Mbit/s");
    c.because(
        "not comparable: RFC 6356 allows a Reno-like subflow at p = 1e-6 and 200 ms \
         RTT at most ≈ 82 Mbit/s (√2/√p packets), so the published 95 exceeds LIA \
         itself; its fluid equilibrium here is 52–70 (scenarios/README.md, E4)",
    );
    c.info("LIA subflow 2".into(), "≈20 Mbit/s", lia2, "Mbit/s");
    c.because(
        "no threshold: a 900 s mean of subflow 2 moves by ± 20–40 % with the seeded \
         random losses of path 1 (6–9 per run set W_total; without them subflow 2 \
         starves), not with the start order (scenarios/README.md, E4 seeds); judged \
         relative to Coupled CUBIC's by the ratio row, RFC 6356 equilibrium 15–24",
    );
    c.info(
        "LIA total".into(),
        "≈115 Mbit/s",
        lia1.zip(lia2).map(|(a, b)| a + b),
        "Mbit/s",
    );
    c.because(
        "not comparable: exceeds RFC 6356 (subflow 1 above); the RFC 6356 \
         equilibrium here is 76–85 Mbit/s",
    );
    c.info(
        "Coupled CUBIC subflow 1".into(),
        "397–402 Mbit/s",
        cc1,
        "Mbit/s",
    );
    c.because(
        "judged by the total and the ratio to LIA; a 1000 s loss-driven run moves \
         by ≈ 3 % with sub-µs timing shifts (scenarios/README.md, E4 note ²)",
    );
    c.info(
        "Coupled CUBIC subflow 2".into(),
        "21–25 Mbit/s",
        cc2,
        "Mbit/s",
    );
    c.because(
        "judged relative to LIA's subflow 2 (±30 % row): both move with path 1's \
         few random losses per run; below the CUBIC/Reno crossover it runs LIA \
         (RFC 9438 §5.1)",
    );
}

/// Coupled CUBIC against LIA, per subflow and in total; returns the total.
fn e4_coupled_cubic_checks(
    c: &mut Checker<'_>,
    lia: (Option<f64>, Option<f64>),
    cc: (Option<f64>, Option<f64>),
) -> Option<f64> {
    let ((lia1, lia2), (cc1, cc2)) = (lia, cc);
    let ratio = match (cc1, lia1) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        (Some(a), Some(_)) if a > 0.0 => Some(f64::INFINITY),
        _ => None,
    };
    c.check(
        "Coupled CUBIC / LIA subflow 1".into(),
        "≈4.2× (≥ 3×)",
        ratio,
        "×",
        |v| v >= 3.0,
    );
    let total = cc1.zip(cc2).map(|(a, b)| a + b);
    c.check(
        "Coupled CUBIC total".into(),
        "422–423 Mbit/s (≥ 350)",
        total,
        "Mbit/s",
        |v| v >= 350.0,
    );
    let rel = match (cc2, lia2) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "Coupled CUBIC / LIA subflow 2".into(),
        "close to LIA's (within ±30 %)",
        rel,
        "×",
        |v| (0.7..=1.3).contains(&v),
    );
    c.because(
        "a ratio of two 900 s means each carried by a handful of random losses on \
         path 1 (per-seed sd ≈ 0.3): over 5 seeds its interval is wider than the \
         band even with the mean near 1, i.e. unresolved at that N, not a second \
         branch or a start-order effect (scenarios/README.md, E4 seeds)",
    );
    total
}

/// The single-path TCP flows beside the tunnel: path 2's keeps its share,
/// path 1's alone gets a little less than Coupled CUBIC's `total`.
fn e4_single_path_checks(c: &mut Checker<'_>, total: Option<f64>) {
    let t_lia = c.num("e4-lia", Some("steady"), "flows.1.goodput_mbps");
    let t_cc = c.num("e4-coupled-cubic", Some("steady"), "flows.1.goodput_mbps");
    c.info(
        "single-path TCP on path 2, with LIA".into(),
        "keeps its share",
        t_lia,
        "Mbit/s",
    );
    c.because("the reference for the next row (no number published)");
    let keep = match (t_cc, t_lia) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "path-2 TCP share, Coupled CUBIC / LIA".into(),
        "keeps its share (≥ 0.7×)",
        keep,
        "×",
        |v| v >= 0.7,
    );
    let single = c.num(
        "e4-cubic-single-path1",
        Some("steady"),
        "flows.0.goodput_mbps",
    );
    c.info(
        "single-path CUBIC alone on path 1".into(),
        "a little less than Coupled CUBIC's total",
        single,
        "Mbit/s",
    );
    c.because("no number published; judged by the ratio row below");
    let share = match (single, total) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    c.check(
        "single-path CUBIC / Coupled CUBIC total".into(),
        "a little less (≈ 1; 0.85–1.15)",
        share,
        "×",
        |v| (0.85..=1.15).contains(&v),
    );
}

/// E5's delivery gaps: how soon the outage is detected, and the longest
/// gap in aggregation (bounded by detection + one RTT) and in switching.
fn e5_delivery_gap_rows(c: &mut Checker<'_>) {
    // Outage detection: the client's first PathFailed for the Wi-Fi path
    // (index 0) at or after the outage start.
    let detect = c.runs.get("e5-aggregation").and_then(|r| {
        r.conn_events
            .iter()
            .find(|e| {
                e.side == "client"
                    && e.path == Some(0)
                    && e.event.starts_with("PathFailed")
                    && e.at_s >= 20.0
            })
            .map(|e| e.at_s - 20.0)
    });
    c.info(
        "aggregation: outage detected after".into(),
        "—",
        detect,
        "s",
    );
    let rtt = c
        .num("e5-aggregation", None, "paths.1.rtt_ms.p50")
        .map(|v| v / 1e3);
    let gap = c.num("e5-aggregation", None, "meta.flows.0.max_delivery_gap_ms");
    let bound = detect.zip(rtt).map(|(d, r)| (d + r) * 1e3);
    c.info("aggregation: detection + one RTT".into(), "—", bound, "ms");
    c.push(
        "aggregation: longest delivery gap".into(),
        "no break (≤ detection + 1 RTT)",
        gap,
        "ms",
        Some(gap.zip(bound).is_some_and(|(g, b)| g <= b)),
        None, // the bound is measured too: judged per seed
    );
    let gap_h = c.num("e5-handover", None, "meta.flows.0.max_delivery_gap_ms");
    c.info(
        "switching: longest delivery gap".into(),
        "no connectivity break",
        gap_h,
        "ms",
    );
    c.because(
        "qualitative: the switch happens at the first PathFailed (one RTO), so the \
         gap is detection + one RTT as in aggregation; no break means the flow \
         goes on, which it does",
    );
}

/// Where each E5 queueing peak comes from: when it happened and what the
/// paths did while that packet waited.
fn e5_peak_rows(c: &mut Checker<'_>) {
    // BBR's PROBE_RTT on LTE in both runs today.
    for (stem, label) in [
        ("e5-aggregation", "aggregation"),
        ("e5-handover", "switching"),
    ] {
        let ours = c
            .runs
            .get(stem)
            .and_then(|r| r.summary.pointer("/meta/send_queue_delay_peak"))
            .map_or_else(|| "n/a".to_owned(), describe_peak);
        c.out.push(Check {
            experiment: c.exp,
            metric: format!("{label}: peak scheduler queueing delay, when and why"),
            published: "—".into(),
            ours,
            value: None,
            unit: "",
            verdict: Verdict::Info,
            interval: None,
            accept: None,
            because: None,
        });
    }
}

fn check_e5(mut c: Checker<'_>) {
    e5_delivery_gap_rows(&mut c);
    let q = |c: &Checker<'_>, stem: &str| c.num(stem, None, "send_queue_delay_ms.max");
    let qa = q(&c, "e5-aggregation");
    let qs = q(&c, "e5-handover");
    c.check(
        "aggregation: peak scheduler queueing delay".into(),
        "< 200 ms",
        qa,
        "ms",
        |v| v < 200.0,
    );
    c.info(
        "switching: peak scheduler queueing delay".into(),
        "> 1000 ms",
        qs,
        "ms",
    );
    c.because(
        "differs: our `handover` switches at the first PathFailed (one RTO); the \
         ns-3 study's > 1000 ms needs a switch that waits for several RTO backoffs \
         or a link-layer disconnect (scenarios/README.md, E5); the ordering is \
         judged by the last row",
    );
    e5_peak_rows(&mut c);
    let more = qs.zip(qa).map(|(s, a)| s - a);
    c.check(
        "switching queues more than aggregating by".into(),
        "larger when switching (> 0)",
        more,
        "ms",
        |v| v > 0.0,
    );
}

/// "t = 20.5 s; lte: Active startup → Active probe_rtt (cwnd ≥ 4); wifi: …"
/// from a run's `meta.send_queue_delay_peak`.
fn describe_peak(peak: &Value) -> String {
    let mut s = format!(
        "t = {:.2} s",
        peak.get("at_s").and_then(Value::as_f64).unwrap_or(f64::NAN)
    );
    if let Some(paths) = peak.get("paths_during_wait").and_then(Value::as_object) {
        for (name, p) in paths {
            let states: Vec<&str> = p
                .get("states")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let _ = write!(s, "; {name}: {}", states.join(" → "));
            if let Some(w) = p.get("min_cwnd_pkts").and_then(Value::as_u64) {
                let _ = write!(s, " (cwnd ≥ {w})");
            }
        }
    }
    s
}

fn check_e6(mut c: Checker<'_>) {
    let mut goodputs: [Option<f64>; 3] = [None; 3];
    for (i, (stem, label)) in [
        ("e6-ratio-80-20", "80:20 + active-adaptive"),
        ("e6-min-srtt", "min-SRTT, passive"),
        ("e6-path1-only", "path 1 alone"),
    ]
    .into_iter()
    .enumerate()
    {
        let g = c.num(stem, None, "flows.0.goodput_mbps");
        c.info(
            format!("{label}: goodput"),
            if stem == "e6-ratio-80-20" {
                "played best"
            } else {
                "worse"
            },
            g,
            "Mbit/s",
        );
        c.because("judged by the last row (the ranking)");
        let o = c.num(stem, None, "flows.0.owd_ms.p95");
        c.info(format!("{label}: OWD p95"), "—", o, "ms");
        let r = c.num(stem, None, "flows.0.out_of_order_pkts");
        c.info(format!("{label}: out-of-order arrivals"), "—", r, "pkts");
        let ga = c.num(stem, Some("after_change"), "flows.0.goodput_mbps");
        c.info(
            format!("{label}: goodput after the delay change"),
            "—",
            ga,
            "Mbit/s",
        );
        goodputs[i] = g;
    }
    // The published ranking: 80:20 + active-adaptive ahead of the other two.
    let next_best = goodputs[1].zip(goodputs[2]).map(|(a, b)| a.max(b));
    let ahead = match (goodputs[0], next_best) {
        (Some(a), Some(b)) => Some(a - b),
        _ => None,
    };
    c.check(
        "80:20 + active-adaptive ahead of the next best by".into(),
        "played best (> 0)",
        ahead,
        "Mbit/s",
        |v| v > 0.0,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row with a published value is judged against a
    /// stated tolerance or says why not. Evaluated without runs, so every
    /// row of every experiment is emitted (values `None`).
    #[test]
    fn every_published_value_has_a_threshold_or_a_reason() {
        let runs = BTreeMap::new();
        let mut rows = Vec::new();
        for id in ["E1", "E2", "E3", "E4", "E5", "E6"] {
            evaluate(id, &runs, &mut rows);
        }
        assert!(rows.len() > 40, "{} rows", rows.len());
        let unexplained: Vec<String> = rows
            .iter()
            .filter(|c| c.verdict == Verdict::Info && c.published != "—")
            .filter(|c| c.because.is_none_or(|b| b.trim().is_empty()))
            .map(|c| format!("{} {}: published {}", c.experiment, c.metric, c.published))
            .collect();
        assert!(unexplained.is_empty(), "{unexplained:#?}");
        // A judged row carries its threshold as a predicate, so that
        // `--seeds` can judge it again on an interval.
        for c in rows.iter().filter(|c| c.verdict != Verdict::Info) {
            let interval_judged = c.accept.is_some();
            let per_seed = c.metric == "aggregation: longest delivery gap";
            assert!(interval_judged || per_seed, "{} {}", c.experiment, c.metric);
        }
    }
}
