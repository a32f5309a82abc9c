//! The issue's E1/E2 checks, run through `reproduce` exactly as the CLI does
//! (E1 and E2 are short already; `--quick` only shortens E4).

use mpdccp_sim::reproduce::{reproduce, Check, Report, ReproduceOptions, Verdict};

fn run(only: &str) -> Vec<Check> {
    let out = std::env::temp_dir().join(format!("mpdccp-sim-test-{only}-{}", std::process::id()));
    let report = reproduce(&ReproduceOptions {
        scenarios_dir: None,
        out: out.clone(),
        quick: true,
        only: vec![only.to_owned()],
        jobs: 2,
        progress: false,
    })
    .expect("experiments run");
    let _ = std::fs::remove_dir_all(&out);
    for r in &report.runs {
        assert!(r.error.is_none(), "{}: {:?}", r.stem, r.error);
    }
    report.checks
}

fn failures(checks: &[Check], filter: impl Fn(&Check) -> bool) -> Vec<String> {
    checks
        .iter()
        .filter(|c| filter(c) && c.verdict == Verdict::Fail)
        .map(|c| format!("{}: published {}, ours {}", c.metric, c.published, c.ours))
        .collect()
}

#[test]
fn e1_ccid5_and_bbr_keep_latency_low_ccid2_and_cubic_fill_the_buffer() {
    let checks = run("E1");
    assert!(checks.iter().filter(|c| c.verdict != Verdict::Info).count() >= 7);
    let f = failures(&checks, |_| true);
    assert!(f.is_empty(), "E1 checks failed: {f:#?}");
}

#[test]
fn e2_end_state_spill_and_latency_match_the_issue() {
    let checks = run("E2");
    assert!(checks.iter().filter(|c| c.verdict != Verdict::Info).count() >= 9);
    let f = failures(&checks, |_| true);
    assert!(f.is_empty(), "E2 checks failed: {f:#?}");
}

/// E3 (inner TCP over both CCIDs) passes every thresholded check.
#[test]
fn e3_inner_tcp_goodput_and_latency_match_the_issue() {
    let checks = run("E3");
    assert!(checks.iter().filter(|c| c.verdict != Verdict::Info).count() >= 3);
    let f = failures(&checks, |_| true);
    assert!(f.is_empty(), "E3 checks failed: {f:#?}");
}

/// E5: the peak scheduler queueing delay stays under the published 200 ms
/// in aggregation mode, with the scenario untouched. It was 231 ms while
/// CCID5 took its PROBE_RTT (cwnd 4 for 200 ms) on the LTE path the moment
/// traffic moved onto it; an application-limited path now probes for free
/// (`CcConfig::bbr_app_limited_probe`).
#[test]
fn e5_aggregation_peak_queueing_delay_is_under_200_ms() {
    let checks = run("E5");
    let peak = checks
        .iter()
        .find(|c| c.metric == "aggregation: peak scheduler queueing delay")
        .expect("the E5 peak check exists");
    assert_eq!(peak.verdict, Verdict::Pass, "{peak:?}");
    let f = failures(&checks, |_| true);
    assert!(f.is_empty(), "E5 checks failed: {f:#?}");
}

/// The terminal's last line: the count, and each failure with both values.
#[test]
fn verdict_line_counts_judged_checks_and_names_each_failure() {
    let check = |metric: &str, verdict| Check {
        experiment: "E5",
        metric: metric.into(),
        published: "< 200 ms".into(),
        ours: "231 ms".into(),
        value: Some(231.0),
        unit: "ms",
        verdict,
        interval: None,
        accept: None,
        because: None,
    };
    let mut report = Report {
        quick: false,
        seeds: 1,
        wall_s: 1.0,
        checks: vec![
            check("a", Verdict::Pass),
            check("b", Verdict::Info),
            check("c", Verdict::Pass),
        ],
        runs: Vec::new(),
        other_seeds: Vec::new(),
    };
    assert_eq!(report.verdict_line(), "2 checks: 2 pass");
    assert!(!report.failed());
    report.checks.push(check("peak", Verdict::Fail));
    assert_eq!(
        report.verdict_line(),
        "3 checks: 2 pass, 1 FAIL — E5 peak: ours 231 ms, published < 200 ms"
    );
    assert!(report.failed());
}

/// REPORT.md gives the reason next to a row whose value differs from the
/// publication (E2: CCID2 spills after 0.3 s, published ≈ 3 s).
#[test]
fn report_says_why_next_to_a_row_that_differs() {
    let out = std::env::temp_dir().join(format!("mpdccp-sim-report-{}", std::process::id()));
    let report = reproduce(&ReproduceOptions {
        scenarios_dir: None,
        out: out.clone(),
        quick: true,
        only: vec!["E2".to_owned()],
        jobs: 2,
        progress: false,
    })
    .expect("experiments run");
    mpdccp_sim::reproduce::write_report(&out, &report).expect("report");
    let md = std::fs::read_to_string(out.join("REPORT.md")).expect("REPORT.md");
    let _ = std::fs::remove_dir_all(&out);
    let row = md
        .lines()
        .find(|l| l.starts_with("| CCID2 spills to path 2 after the drop |"))
        .expect("the E2 row in its experiment's table");
    assert!(
        row.contains("| info | differs: CCID2's path-1 window"),
        "{row}"
    );
    assert!(md.contains("| metric | published | ours | verdict | why |"));
}
