//! Paths that aggregate, end to end between network
//! namespaces with the daemons' default configuration (scheduler `cpf`,
//! CCID2): two paths of 20 Mbit/s each (kernel `tbf` in the router, both
//! directions) with 10 ms and 20 ms one-way delay (`mpdccp netem`).
//!
//! * kernel TCP (iperf3, one stream) through the tunnel reaches ≥ 90 % of
//!   the two paths' sum;
//! * after that bulk phase, a light flow (ping) goes over the lower-RTT
//!   path (per-path data counters of `mpdccp status --json`, both daemons).
//!
//! Needs root, `tc`, `ping` and `iperf3`. Without them the test prints a
//! skip notice, or fails when `CI` is set.

use crate::support::exe;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, require_tool};
use mpdccp_lab::topo::{Topology, TunnelOpts, SERVER_TUN_V4};
use mpdccp_net::daemon::config::TunnelConfig;
use serde_json::Value;

/// Rate of each path, Mbit/s.
const PATH_MBPS: f64 = 20.0;

/// Shapes both directions of path `i` in its router with a token bucket
/// (`tbf`) of [`PATH_MBPS`]; the buffer holds 100 kB (40 ms at 20 Mbit/s,
/// one bandwidth-delay product of the slower path).
fn shape(t: &Topology, i: usize) {
    for dev in ["c", "s"] {
        let args = [
            "netns",
            "exec",
            t.routers[i].name(),
            "tc",
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            "20mbit",
            "burst",
            "20kb",
            "limit",
            "100000",
        ];
        let st = std::process::Command::new("ip")
            .args(args)
            .status()
            .expect("run tc");
        assert!(st.success(), "tc tbf on router {i} dev {dev}");
    }
}

/// Bytes the client-to-server shaper of path `i` has sent (`tc -s`:
/// "Sent N bytes"; tbf counts whole frames, the Ethernet header included,
/// as it does for its rate).
fn tbf_sent_bytes(t: &Topology, i: usize) -> u64 {
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            t.routers[i].name(),
            "tc",
            "-s",
            "qdisc",
            "show",
            "dev",
            "s",
        ])
        .output()
        .expect("run tc -s");
    let text = String::from_utf8_lossy(&out.stdout);
    let after = text.split("Sent ").nth(1).expect("tc -s: Sent");
    after
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("tc -s: bytes")
}

/// The client's path entries ordered by the client's path id.
fn paths(st: &Value) -> Vec<Value> {
    let conns = st["connections"].as_array().expect("connections");
    assert_eq!(conns.len(), 1, "{st}");
    let mut ps = conns[0]["paths"].as_array().expect("paths").clone();
    ps.sort_by_key(|p| p["id"].as_u64());
    ps
}

/// Data packets sent per path at one daemon, in the path order of
/// `order` (remote address substrings).
fn tx_data(st: &Value, order: &[String]) -> Vec<u64> {
    let ps = paths(st);
    order
        .iter()
        .map(|needle| {
            ps.iter()
                .find(|p| {
                    p["remote"]
                        .as_str()
                        .is_some_and(|r| r.contains(needle.as_str()))
                        || p["name"]
                            .as_str()
                            .is_some_and(|r| r.contains(needle.as_str()))
                })
                .map(|p| p["stats"]["tx_data_pkts"].as_u64().unwrap_or(0))
                .unwrap_or_else(|| panic!("no path matching {needle}: {st}"))
        })
        .collect()
}

fn srtts(st: &Value) -> Vec<f64> {
    paths(st)
        .iter()
        .map(|p| p["srtt_ms"].as_f64().unwrap_or(f64::NAN))
        .collect()
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn default_config_aggregates_two_equal_paths_and_keeps_light_traffic_on_the_faster() {
    let _serial = crate::support::serial();
    let test = "default_config_aggregates_two_equal_paths_and_keeps_light_traffic_on_the_faster";
    if !require_root(test)
        || !require_tool(test, "iperf3")
        || !require_tool(test, "ping")
        || !require_tool(test, "tc")
    {
        return;
    }
    let mut t = Topology::build(2).expect("topology");
    for (i, delay) in [(0, "10"), (1, "20")] {
        t.start_emulator(exe(), i, &["--delay-ms", delay])
            .expect("emulator");
        shape(&t, i);
    }
    // The daemons' own defaults (the shared ones: ccid2, acpf, passive
    // reordering, fq_codel).
    let opts = TunnelOpts {
        tunnel: TunnelConfig::default(),
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");

    // Goodput ceiling, conservatively: the TCP payload share of a frame
    // the size of the path MTU (TUN MTU minus IPv4, TCP and its timestamps
    // option, over 1500 bytes plus the 14-byte Ethernet header). Tunnel
    // headers are usually shorter than the daemon reserves for them, so a
    // run may exceed it slightly.
    let tun_mtu = t.status(false).expect("client status")["tun"]["mtu"]
        .as_f64()
        .unwrap_or(1400.0);
    let ceiling = 2.0 * PATH_MBPS * (tun_mtu - 52.0) / 1514.0;
    // ≥ 90 % of the two paths' sum, on the wire and in goodput (of what
    // the headers leave of it).
    let aggregates = |(mbps, wire): &(f64, Vec<f64>)| {
        wire.iter().sum::<f64>() >= 0.9 * 2.0 * PATH_MBPS && *mbps >= 0.9 * ceiling
    };
    // Bulk: one kernel TCP stream, client to server. A failed run is
    // repeated only when an emulator was late by more than the shorter
    // path's one-way delay: a stalled host, not the tunnel.
    let dst = SERVER_TUN_V4.to_string();
    let (mbps, wire_mbps) = t.measure_on_time(2, 10_000, |t| bulk_tcp(t, &dst), aggregates);
    let wire_sum: f64 = wire_mbps.iter().sum();
    println!(
        "bulk: kernel TCP {mbps:.2} Mbit/s = {:.1} % of the goodput ceiling {ceiling:.2} Mbit/s \
         (2 x {PATH_MBPS} Mbit/s, TUN MTU {tun_mtu}); on the wire {wire_mbps:.2?} = {:.1} % of the sum",
        100.0 * mbps / ceiling,
        100.0 * wire_sum / (2.0 * PATH_MBPS)
    );
    let after_bulk = t.status(false).expect("client status");
    println!("client srtt after bulk {:?} ms", srtts(&after_bulk));
    for p in paths(&after_bulk) {
        println!(
            "  client path {}: tx_data {} cwnd {} srtt {} min_rtt {}",
            p["id"], p["stats"]["tx_data_pkts"], p["cwnd_pkts"], p["srtt_ms"], p["min_rtt_ms"]
        );
    }

    // Light: ping under light load, after a few seconds of quiet.
    std::thread::sleep(Duration::from_secs(3));
    let order_client: Vec<String> = vec!["p1".into(), "p2".into()];
    let order_server: Vec<String> = t.paths.iter().map(|a| a.client_ip.to_string()).collect();
    // Requests (client) and replies (server) take the 10 ms path, and none
    // is lost. Repeated like the bulk run only when an emulator stalled.
    let light_ok = |(ping, dc, ds): &(String, Vec<u64>, Vec<u64>)| {
        ping.contains(" 0% packet loss") && dc[0] >= 18 && dc[1] <= 2 && ds[0] >= 18 && ds[1] <= 2
    };
    let (ping, dc, ds) = t.measure_on_time(
        2,
        10_000,
        |t| {
            let c0 = tx_data(&t.status(false).expect("client status"), &order_client);
            let s0 = tx_data(&t.status(true).expect("server status"), &order_server);
            let ping = t
                .client
                .output("ping", &["-c", "20", "-i", "0.1", "-W", "2", "-q", &dst])
                .expect("ping through the tunnel");
            let cst = t.status(false).expect("client status");
            let sst = t.status(true).expect("server status");
            let dc: Vec<u64> = tx_data(&cst, &order_client)
                .iter()
                .zip(&c0)
                .map(|(a, b)| a - b)
                .collect();
            let ds: Vec<u64> = tx_data(&sst, &order_server)
                .iter()
                .zip(&s0)
                .map(|(a, b)| a - b)
                .collect();
            println!(
                "light: ping data packets per path (10 ms, 20 ms): client {dc:?}, server {ds:?}; srtt client {:?} server {:?} ms\n{}",
                srtts(&cst),
                srtts(&sst),
                ping.lines().last().unwrap_or_default()
            );
            (ping, dc, ds)
        },
        light_ok,
    );
    assert!(ping.contains(" 0% packet loss"), "{ping}");
    assert!(
        wire_sum >= 0.9 * 2.0 * PATH_MBPS,
        "on the wire {wire_mbps:.2?} Mbit/s < 90 % of {} Mbit/s",
        2.0 * PATH_MBPS
    );
    assert!(
        mbps >= 0.9 * ceiling,
        "kernel TCP {mbps:.2} Mbit/s < 90 % of the goodput ceiling {ceiling:.2} Mbit/s"
    );
    // Requests (client) and replies (server) take the 10 ms path.
    assert!(
        dc[0] >= 18 && dc[1] <= 2,
        "client sent the pings over {dc:?}"
    );
    assert!(
        ds[0] >= 18 && ds[1] <= 2,
        "server sent the replies over {ds:?}"
    );
}

/// One kernel TCP stream (iperf3), client to server through the tunnel, for
/// `AGG_SECS` (default 10) after 2 s omitted: its goodput (Mbit/s) and each
/// path's rate on the wire over the measured part (Mbit/s, from the
/// shapers' counters: every header of every layer).
fn bulk_tcp(t: &mut Topology, dst: &str) -> (f64, Vec<f64>) {
    // Kept here, not in `t.procs`: a repeated run waits for it to exit so
    // that the next one can bind the port.
    let mut srv = t
        .server
        .spawn("iperf3", &["-s", "-1", "-B", dst, "-p", "5401"])
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(300));
    let secs: u64 = std::env::var("AGG_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let log = t.dir.join("iperf3.json");
    let _ = std::fs::remove_file(&log);
    let log_s = log.to_string_lossy().into_owned();
    let secs_s = secs.to_string();
    let mut client = t
        .client
        .spawn(
            "iperf3",
            &[
                "-c",
                dst,
                "-p",
                "5401",
                "-t",
                &secs_s,
                "-O",
                "2",
                "-J",
                "--logfile",
                &log_s,
            ],
        )
        .expect("iperf3 client");
    std::thread::sleep(Duration::from_millis(2300));
    let w0: Vec<u64> = (0..2).map(|i| tbf_sent_bytes(t, i)).collect();
    let w_start = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(secs) - Duration::from_millis(500));
    let w1: Vec<u64> = (0..2).map(|i| tbf_sent_bytes(t, i)).collect();
    let wire_s = w_start.elapsed().as_secs_f64();
    let st = client
        .wait_timeout(Duration::from_secs(secs + 15))
        .expect("iperf3 client finishes");
    assert!(st.success(), "iperf3 client: {st}");
    let _ = srv.wait_timeout(Duration::from_secs(5));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&log).expect("iperf3 log")).expect("json");
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("bits_per_second");
    let wire_mbps = w1
        .iter()
        .zip(&w0)
        .map(|(a, b)| (a - b) as f64 * 8.0 / wire_s / 1e6)
        .collect();
    (bps / 1e6, wire_mbps)
}
