//! Issue #25's reduced aggregation matrix on the real tunnel, short form:
//! `mpdccp testbed --aggregation` on the 20 + 20 Mbit/s pair (DSL 15 ms +
//! LTE 35 ms, `mpdccp netem` paths), kernel TCP up through the tunnel
//! with the daemons' defaults (authenticated), beside each path alone and
//! kernel MPTCP over both, 8 s per run.
//!
//! Fails on a regression: the tunnel below 0.95 × the best single path
//! (the floor "never worse than the best link"). The MPTCP
//! reference must have joined its second subflow and carried more than
//! one path, or the comparison means nothing.
//!
//! Needs root, iperf3 and python3 (else a failure under `cargo test --
//! --include-ignored`, as every root test).

use std::path::Path;
use std::process::Command;

use mpdccp_lab::netns::{require_root, require_tool};
use serde_json::Value;

fn run_matrix(out: &Path) -> Value {
    let _ = std::fs::remove_dir_all(out);
    let st = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args([
            "testbed",
            "--aggregation",
            "--agg-pair",
            "20+20",
            "--agg-inner",
            "tcp-up",
            "--agg-secs",
            "8",
            "--agg-no-sim",
            "--out",
        ])
        .arg(out)
        .status()
        .expect("run mpdccp testbed --aggregation");
    assert!(st.success(), "mpdccp testbed --aggregation failed");
    let text = std::fs::read_to_string(out.join("aggregation.json")).expect("aggregation.json");
    serde_json::from_str(&text).expect("aggregation.json is JSON")
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_tcp_on_the_20_plus_20_pair_carries_at_least_the_best_single_path() {
    let test = "tunnel_tcp_on_the_20_plus_20_pair_carries_at_least_the_best_single_path";
    if !require_root(test) || !require_tool(test, "iperf3") || !require_tool(test, "python3") {
        return;
    }
    let out = std::env::temp_dir().join(format!("mpdccp-agg-real-{}", std::process::id()));
    // A host that stalls the emulators (p90 lateness above 8 ms per 100 ms
    // interval) measures itself, not the tunnel: measure again, twice at most.
    let mut report = run_matrix(&out);
    for _ in 0..2 {
        let c = &report["cells"][0];
        let late = c["emulator_late_p90_max_us"].as_u64().unwrap_or(0);
        let ok = c["ratio_best_single"].as_f64().unwrap_or(0.0) >= 0.95;
        if ok || late <= 8_000 {
            break;
        }
        eprintln!("emulator p90 lateness {late} µs: the host stalled the links; measuring again");
        report = run_matrix(&out);
    }
    let _ = std::fs::remove_dir_all(&out);
    let c = &report["cells"][0];
    eprintln!("{}", serde_json::to_string_pretty(c).unwrap());
    let tunnel = c["tunnel_mbps"].as_f64().expect("tunnel measured");
    let dsl = c["direct_mbps"]["dsl"]
        .as_f64()
        .expect("DSL alone measured");
    let lte = c["direct_mbps"]["lte"]
        .as_f64()
        .expect("LTE alone measured");
    // The references themselves: each path alone carries most of its 20
    // Mbit/s (else the emulator or the host is the bottleneck).
    assert!(dsl > 15.0 && lte > 12.0, "DSL {dsl}, LTE {lte}");
    let best = dsl.max(lte);
    assert!(
        tunnel >= 0.95 * best,
        "tunnel TCP {tunnel:.2} Mbit/s < 0.95 × best single path {best:.2}"
    );
    // MPTCP joined its second subflow and used it.
    let mptcp = c["mptcp_mbps"].as_f64().expect("MPTCP measured");
    assert!(
        c["mptcp_joined_subflows"].as_u64().unwrap_or(0) >= 1,
        "MPTCP joined no subflow: {c}"
    );
    assert!(mptcp > 1.2 * best, "MPTCP {mptcp:.2} vs best {best:.2}");
}
