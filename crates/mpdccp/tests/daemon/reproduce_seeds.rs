//! `reproduce --seeds N` end to end on E2 (two short runs per seed): every
//! check gets its interval over N seeds, each seed has its own runs, the
//! report says how the checks were judged; one seed keeps the published
//! output format (no interval fields).

use std::process::Command;

fn reproduce(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["reproduce", "--only", "E2", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run mpdccp")
}

#[test]
fn three_seeds_give_every_numeric_check_an_interval_and_one_seed_none() {
    // CPU-bound: kept off the cores the network tests measure.
    let _serial = crate::support::serial();
    let root = std::env::temp_dir().join(format!("mpdccp-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let o = reproduce(&root.join("three"), &["--seeds", "3"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for k in 0..3 {
        assert!(root
            .join(format!("three/seed-{k}/e2-ccid5/summary.json"))
            .exists());
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("three/results.json")).expect("results.json"),
    )
    .expect("json");
    assert_eq!(json["seeds"], 3);
    let checks = json["checks"].as_array().expect("checks");
    assert!(checks.len() >= 10);
    for c in checks.iter().filter(|c| c["value"].is_number()) {
        let iv = &c["interval"];
        assert_eq!(iv["n"], 3, "{c}");
        let (lo, mean, hi) = (
            iv["lo"].as_f64().unwrap(),
            iv["mean"].as_f64().unwrap(),
            iv["hi"].as_f64().unwrap(),
        );
        assert!(lo <= mean && mean <= hi, "{c}");
        assert_eq!(c["value"].as_f64(), Some(mean));
        // The table shows the interval: `mean [lo, hi] sd s`.
        assert!(c["ours"].as_str().unwrap().contains(" sd "), "{c}");
    }
    let report = std::fs::read_to_string(root.join("three/REPORT.md")).expect("REPORT.md");
    assert!(report.contains("3 seeds per configuration"));
    assert!(stdout.contains("] sd "), "{stdout}");

    let o = reproduce(&root.join("one"), &[]);
    assert!(o.status.success());
    let one = std::fs::read_to_string(root.join("one/results.json")).expect("results.json");
    assert!(!one.contains("\"interval\"") && !one.contains("\"seeds\""));
    assert!(root.join("one/e2-ccid5/summary.json").exists());
    // Seed 0 of the seeded run is the published configuration: same summary.
    assert_eq!(
        std::fs::read(root.join("one/e2-ccid5/summary.json")).unwrap(),
        std::fs::read(root.join("three/seed-0/e2-ccid5/summary.json")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&root);
}
