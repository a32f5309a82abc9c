//! A sharded server (`workers = 2`) end to end between network
//! namespaces: a two-path client's join reaches the connection's worker
//! whichever socket it arrived on, downstream flows the server starts are
//! handed to the owner when the TUN queued them on the other worker, many
//! clients spread over both workers and carry data both ways, and
//! `max_clients` counts the clients of all workers.
//!
//! Needs root. Without it each test prints a skip notice, or fails when
//! `CI` is set. One at a time (a lock): they measure loss on 2 cores.

use crate::support::exe;
use std::net::UdpSocket;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, spawn_in_netns};
use mpdccp_lab::probe;
use mpdccp_lab::topo::{Topology, TunnelOpts, CLIENT_TUN_V4};
use mpdccp_net::daemon::config::AuthMode;
use serde_json::Value;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Two workers, one two-path client: both paths come up (the join is
/// handed to the connection's worker when the steering put it on the
/// other), pings and a probe stream pass both ways, and 64 UDP flows the
/// server's side starts (the TUN spreads them over both queues by hash)
/// reach the client through the owner: handoffs happened, none dropped.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn two_workers_hand_joins_and_downstream_flows_to_the_owner() {
    let _g = crate::support::serial();
    if !require_root("two_workers_hand_joins_and_downstream_flows_to_the_owner") {
        return;
    }
    hand_over(AuthMode::Open);
}

/// The same in authenticated mode: downstream packets are routed by the
/// peer's `allowed_ips` to the worker holding the peer's connection.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn two_workers_hand_over_in_authenticated_mode() {
    let _g = crate::support::serial();
    if !require_root("two_workers_hand_over_in_authenticated_mode") {
        return;
    }
    hand_over(AuthMode::Authenticated);
}

fn hand_over(auth: AuthMode) {
    let mut t = Topology::emulated(exe(), 2, 5, 50).expect("topology");
    let opts = TunnelOpts {
        server_workers: 2,
        auth,
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");
    t.ping_both_ways(10).expect("ping");
    // Flows the server side starts: each new one is queued by its hash.
    spawn_in_netns(t.server.name(), || {
        for _ in 0..64 {
            let s = UdpSocket::bind("0.0.0.0:0")?;
            for _ in 0..4 {
                s.send_to(b"flow", (CLIENT_TUN_V4, 9))?;
            }
        }
        Ok(())
    })
    .join()
    .expect("sender thread")
    .expect("udp flows");
    for downstream in [true, false] {
        let (stream, _) = t
            .start_probe_stream(downstream, 4_000_000, 2.0, 9007)
            .expect("probe stream");
        let (log, arr) = stream
            .finish(Duration::from_millis(300))
            .expect("probe stream");
        let tally = probe::tally(&arr, 1, log.sent.len() as u64);
        assert_eq!(tally.duplicates, 0, "{tally:?}");
        // Stated bound: at most 0.5 % lost (none expected on idle paths).
        assert!(
            tally.lost * 200 <= log.sent.len() as u64,
            "downstream {downstream}: {tally:?} of {}",
            log.sent.len()
        );
    }
    let st = t.status(true).expect("server status");
    assert_eq!(n(&st["workers"]), 2, "{st:#}");
    assert_eq!(n(&st["workers_answered"]), 2, "{st:#}");
    let conns = st["connections"].as_array().expect("connections");
    assert_eq!(conns.len(), 1, "{st:#}");
    assert_eq!(
        conns[0]["paths"].as_array().map(Vec::len),
        Some(2),
        "{st:#}"
    );
    let d = &st["daemon"];
    // The non-owner path ran (a worker handed packets over) and the owner
    // took every one: no drops, nothing lost on the way.
    assert!(n(&d["handoffs"]) > 0, "no handoff: {st:#}");
    assert_eq!(n(&d["handoffs"]), n(&d["handoffs_received"]), "{st:#}");
    assert_eq!(n(&d["handoff_dropped"]), 0, "{st:#}");
    let per = st["per_worker"].as_array().expect("per_worker");
    assert_eq!(per.len(), 2);
    // The owner path: the connection's worker read packets of its own.
    let owner = &per[n(&conns[0]["worker"]) as usize];
    assert!(n(&owner["udp_rx_datagrams"]) > 0, "{st:#}");
    eprintln!("server workers: {}", st["per_worker"]);
    // SIGTERM reaches every worker: MP_CLOSE, a clean exit within the grace.
    let i = t.procs.len() - 2;
    let mut server = t.procs.remove(i);
    let t0 = std::time::Instant::now();
    let exit = server.stop().expect("server exit status");
    assert!(exit.success(), "server exit {exit:?}\n{}", t.log_tail(true));
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "took {:?}",
        t0.elapsed()
    );
}

fn bench_clients(args: &[&str]) -> Value {
    let mut all = vec!["--workers", "2"];
    all.extend_from_slice(args);
    mpdccp_lab::loadgen::run_cli(exe(), &all).expect("mpdccp bench clients")
}

/// 24 clients against two workers: all connect, both workers hold some,
/// data flows both ways (at most 1 % lost each way), all close cleanly.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn two_workers_serve_many_clients_both_ways() {
    let _g = crate::support::serial();
    if !require_root("two_workers_serve_many_clients_both_ways") {
        return;
    }
    let v = bench_clients(&["--clients", "24", "--mbps", "16", "--seconds", "3"]);
    assert_eq!(n(&v["clients_connected"]), 24, "{v:#}");
    assert_eq!(n(&v["clients_connected_at_end"]), 24, "{v:#}");
    assert_eq!(n(&v["server_connections_at_end"]), 24, "{v:#}");
    assert_eq!(n(&v["clients_with_downstream"]), 24, "{v:#}");
    for dir in ["up", "down"] {
        let (sent, got) = (n(&v[dir]["sent"]), n(&v[dir]["received"]));
        assert!(sent > 0 && got * 100 >= sent * 99, "{dir}: {got} of {sent}");
    }
    let per = v["per_worker"].as_array().expect("per_worker");
    assert_eq!(per.len(), 2, "{v:#}");
    for w in per {
        assert!(n(&w["connections"]) > 0, "a worker has no client: {v:#}");
    }
    assert_eq!(n(&v["daemon"]["handoff_dropped"]), 0, "{v:#}");
    assert_eq!(n(&v["server_connections_after_close"]), 0, "{v:#}");
}

/// `max_clients = 8` with two workers: 8 clients in all, not 8 each; the
/// rest are refused (counted), and those admitted carry data.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn two_workers_share_one_max_clients() {
    let _g = crate::support::serial();
    if !require_root("two_workers_share_one_max_clients") {
        return;
    }
    let v = bench_clients(&[
        "--clients",
        "16",
        "--server-max-clients",
        "8",
        "--connect-timeout-s",
        "3",
        "--mbps",
        "4",
        "--seconds",
        "1",
    ]);
    let admitted = n(&v["server_connections_at_end"]);
    // Workers admitting at the same instant may pass it by workers - 1.
    assert!((8..=9).contains(&admitted), "{admitted} admitted: {v:#}");
    assert!(n(&v["daemon"]["refused_max_clients"]) > 0, "{v:#}");
    assert_eq!(n(&v["clients_with_downstream"]), admitted, "{v:#}");
}
