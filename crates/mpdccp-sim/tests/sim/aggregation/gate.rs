//! The aggregation benchmark's reduced matrix as a regression gate: four
//! path mixes × four tunnel controllers × three inner traffics, 20
//! simulated seconds each, scored against the same flows on each path
//! alone, and compared cell by cell with the committed scorecard
//! `docs/aggregation/ci-baseline.json`. A cell whose ratio to the best
//! single path falls by more than `compare::TOLERANCE` (0.02), or that
//! passed its goals and no longer does, fails the test. Improvements pass;
//! commit them as the new baseline with
//! `MPDCCP_UPDATE_BASELINE=1 cargo test --release -p mpdccp-sim --test sim aggregation::gate`.
//!
//! The simulator is deterministic, so the gate cannot flake: a changed
//! cell is a changed behaviour.

use std::path::PathBuf;

use mpdccp_sim::aggregation::{self, compare, report, Options, Scorecard};

fn reduced() -> Options {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
    Options {
        mixes: v(&["equal", "asym", "lossy", "single"]),
        ccs: v(&["ccid2", "ccid5", "bbr3", "lia"]),
        inners: v(&["tcp-cubic", "udp", "quic"]),
        duration_s: 20.0,
        jobs: 2,
        ..Options::default()
    }
}

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/aggregation/ci-baseline.json")
}

#[test]
fn the_reduced_matrix_does_not_regress() {
    let card = aggregation::run(&reduced(), |_, _, _, _, _| {}).expect("the matrix plans");
    assert_eq!(card.runs_failed, 0, "every run simulates");
    let path = baseline_path();
    if std::env::var_os("MPDCCP_UPDATE_BASELINE").is_some() {
        std::fs::write(&path, report::json(&card)).expect("baseline written");
        eprintln!("baseline written to {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).expect("the committed baseline");
    let before: Scorecard = serde_json::from_str(&text).expect("a scorecard");
    let deltas = compare::compare(&before, &card);
    assert_eq!(
        deltas.len(),
        card.cells.len(),
        "the baseline has every cell of the reduced matrix (regenerate it when the matrix changes)"
    );
    eprintln!(
        "{}",
        compare::markdown(&deltas, &path.display().to_string())
    );
    let regressed: Vec<String> = deltas
        .iter()
        .filter(|d| d.regressed())
        .map(|d| {
            format!(
                "{} / {} / {}: ratio to best {:?} -> {:?}, pass {} -> {}",
                d.mix,
                d.inner,
                d.cc,
                d.ratio_best_before,
                d.ratio_best_now,
                d.pass_before,
                d.pass_now
            )
        })
        .collect();
    assert!(
        regressed.is_empty(),
        "{} cells regressed:\n{}",
        regressed.len(),
        regressed.join("\n")
    );
}
