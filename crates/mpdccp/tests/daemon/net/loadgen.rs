//! `mpdccp bench clients`: 200 client
//! connections from one load-generator process against a real `mpdccp
//! server` in a network namespace. Every client completes the MP-DCCP
//! handshake, stays connected, and data flows both ways (upstream to the
//! echo behind the server's TUN, downstream back to each client); a server
//! whose `max_clients` is below the offered clients refuses the rest with
//! Reset "too busy" and keeps serving the ones it admitted.
//!
//! Needs root (else a skip notice, or a failure when `CI` is set).

use std::process::Command;

use mpdccp_lab::netns::require_root;
use serde_json::Value;

fn bench_clients(args: &[&str]) -> Value {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_mpdccp"));
    mpdccp_lab::loadgen::run_cli(exe, args).expect("mpdccp bench clients")
}

fn n(v: &Value, path: &[&str]) -> u64 {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("{path:?} missing in {v:#}"))
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn two_hundred_clients_connect_stay_connected_and_carry_data_both_ways() {
    if !require_root("two_hundred_clients_connect_stay_connected_and_carry_data_both_ways") {
        return;
    }
    let _g = crate::support::serial();
    let v = bench_clients(&["--clients", "200", "--mbps", "8", "--seconds", "3"]);
    assert_eq!(n(&v, &["clients_connected"]), 200, "{v:#}");
    assert_eq!(
        n(&v, &["endpoint", "accepted"]),
        200,
        "one connection each: {v:#}"
    );
    // Still there at the end of the data phase, on both sides.
    assert_eq!(n(&v, &["clients_connected_at_end"]), 200, "{v:#}");
    assert_eq!(n(&v, &["server_connections_at_end"]), 200, "{v:#}");
    assert_eq!(n(&v, &["dropped_after_connect"]), 0, "{v:#}");
    // Every client sent upstream and got its own echoes back downstream.
    assert_eq!(n(&v, &["clients_with_downstream"]), 200, "{v:#}");
    assert_eq!(n(&v, &["down", "foreign"]), 0, "{v:#}");
    // 8 Mbit/s of 1200-byte packets for 3 s is 2 500 packets offered.
    let sent = n(&v, &["up", "sent"]);
    assert!(sent >= 2_000, "generator fell behind: {sent} sent");
    let up = n(&v, &["up", "received"]);
    let down = n(&v, &["down", "received"]);
    assert!(up * 100 >= sent * 95, "upstream: {up} of {sent} arrived");
    assert!(
        down * 100 >= n(&v, &["down", "sent"]) * 95,
        "downstream: {down} arrived: {v:#}"
    );
    // The server measured something per client and per Mbit/s.
    let rss = v["server_rss_kb_per_client"].as_f64().expect("rss");
    assert!(rss > 0.0 && rss < 1024.0, "RSS per client {rss} kB");
    assert!(v["server_cpu_pct_of_core_per_mbps"].as_f64().expect("cpu") > 0.0);
    // The generator closed gracefully and the server forgot every client.
    assert_eq!(n(&v, &["server_connections_after_close"]), 0, "{v:#}");
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_server_full_at_max_clients_refuses_the_rest_and_serves_those_admitted() {
    if !require_root("a_server_full_at_max_clients_refuses_the_rest_and_serves_those_admitted") {
        return;
    }
    let _g = crate::support::serial();
    let v = bench_clients(&[
        "--clients",
        "120",
        "--server-max-clients",
        "100",
        "--connect-timeout-s",
        "2",
        "--mbps",
        "2",
        "--seconds",
        "1",
    ]);
    assert_eq!(n(&v, &["clients_connected"]), 100, "{v:#}");
    assert_eq!(n(&v, &["endpoint", "accepted"]), 100, "{v:#}");
    // Each of the 20 left over was refused (Reset 9 "too busy") at least once.
    assert!(
        n(&v, &["endpoint", "refused_max_connections"]) >= 20,
        "{v:#}"
    );
    assert!(n(&v, &["handshake_retries"]) >= 20, "{v:#}");
    assert_eq!(n(&v, &["clients_with_downstream"]), 100, "{v:#}");
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn without_root_it_fails_with_a_clear_error() {
    if !require_root("without_root_it_fails_with_a_clear_error") {
        return;
    }
    // Drop to nobody for the one command (util-linux `setpriv`).
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["bench", "clients", "--clients", "1"])
        .output()
        .expect("run setpriv");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs root"), "stderr: {err}");
}
