//! The issue's E1/E2 checks, run through `reproduce` exactly as the CLI does
//! (E1 and E2 are short already; `--quick` only shortens E4).

use mpdccp_sim::reproduce::{reproduce, Check, ReproduceOptions, Verdict};

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
