//! End to end between network namespaces: a NAT rebinding on
//! the client's path. The router namespace rewrites the client's UDP
//! source port statelessly with nftables (and the server's answers back),
//! first to 40001, then — atomically, in the middle of a 100 pings/s
//! stream through the tunnel — to 40002, as a home router does when its
//! NAT mapping expired. The server must move the path to the new port
//! after a Sync/SyncAck challenge (`conn/rebind.rs`): no Reset, no rejoin
//! (same connection, same subflow ids), `rebinds_validated` one more, and
//! no more pings lost than were in flight over one RTT.
//!
//! Needs root, `nft` and `ping`. Without them the test prints a skip
//! notice, or fails when `CI` is set.

use crate::support::exe;
use std::path::Path;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, require_tool, Netns};
use mpdccp_lab::topo::{wait_for, Topology, TunnelOpts, SERVER_PORT, SERVER_TUN_V4};
use serde_json::Value;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(u64::MAX)
}

/// The stateless NAT of the router: the client's `cport` leaves as `nat`,
/// answers to `nat` go back to `cport`. One `nft -f` transaction replaces
/// the whole table (atomic).
fn nat_rules(client: &str, cport: u16, nat: u16) -> String {
    format!(
        "table ip rb\nflush table ip rb\ntable ip rb {{\n\
         chain pre {{\n type filter hook prerouting priority -300; policy accept;\n\
         iifname \"c\" ip saddr {client} udp sport {cport} udp dport {SERVER_PORT} udp sport set {nat} notrack\n\
         iifname \"s\" ip daddr {client} udp sport {SERVER_PORT} udp dport {nat} udp dport set {cport} notrack\n\
         }}\n}}\n"
    )
}

fn apply(router: &Netns, dir: &Path, rules: &str) {
    let f = dir.join("rb.nft");
    std::fs::write(&f, rules).expect("rules file");
    router
        .output("nft", &["-f", f.to_str().expect("utf-8 path")])
        .expect("nft -f");
}

/// The client's UDP port towards the server (from `ss` in its namespace).
fn client_port(t: &Topology, client_ip: &str) -> u16 {
    let out = t.client.output("ss", &["-Huan"]).expect("ss");
    for line in out.lines() {
        for col in line.split_whitespace() {
            if col.starts_with(client_ip) && !col.ends_with(":*") {
                if let Some(p) = col.rsplit(':').next().and_then(|p| p.parse().ok()) {
                    return p;
                }
            }
        }
    }
    panic!("no UDP socket of {client_ip} in:\n{out}");
}

/// (connection handles, subflow ids) of a status document.
fn shape(st: &Value) -> (Vec<u64>, Vec<u64>) {
    let conns = st["connections"].as_array().expect("connections");
    let handles = conns.iter().map(|c| n(&c["handle"])).collect();
    let ids = conns
        .iter()
        .flat_map(|c| c["paths"].as_array().into_iter().flatten())
        .map(|p| n(&p["id"]))
        .collect();
    (handles, ids)
}

fn endpoint(t: &Topology) -> Value {
    t.status(true).expect("server status")["endpoint"].clone()
}

/// `ping` summary: (transmitted, received, avg RTT in ms).
fn ping_summary(out: &str) -> (u64, u64, f64) {
    let line = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no summary in {out}"));
    let num = |key: &str| -> u64 {
        let i = line.find(key).expect(key);
        line[..i]
            .split_whitespace()
            .last()
            .and_then(|x| x.parse().ok())
            .expect("count")
    };
    let avg = out
        .lines()
        .find(|l| l.starts_with("rtt") || l.starts_with("round-trip"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    (num(" packets transmitted"), num(" received"), avg)
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_nat_rebinding_moves_the_path_without_reset_or_rejoin() {
    let _serial = crate::support::serial();
    let test = "a_nat_rebinding_moves_the_path_without_reset_or_rejoin";
    if !require_root(test) || !require_tool(test, "nft") || !require_tool(test, "ping") {
        return;
    }
    rebinding(1);
}

/// The same against a server with two workers: the steering program
/// picks a socket by source address + port, so of the two new ports
/// (40001, 40002) one reaches the worker that does not own the
/// connection; that worker's endpoint does not claim the datagram and
/// passes it on, the owner's does (`daemon/workers.rs`, stray datagrams).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_nat_rebinding_moves_the_path_with_two_workers_too() {
    let _serial = crate::support::serial();
    let test = "a_nat_rebinding_moves_the_path_with_two_workers_too";
    if !require_root(test) || !require_tool(test, "nft") || !require_tool(test, "ping") {
        return;
    }
    rebinding(2);
}

fn rebinding(workers: usize) {
    let mut t = Topology::build(1).expect("topology");
    // 10 ms each way: one RTT holds two pings of a 100/s stream.
    t.start_emulator(exe(), 0, &["--delay-ms", "10", "--rate-mbps", "50"])
        .expect("emulator");
    let opts = TunnelOpts {
        server_workers: workers,
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts).expect("tunnel up");
    let client_ip = t.paths[0].client_ip.to_string();
    let cport = client_port(&t, &client_ip);
    let dst = SERVER_TUN_V4.to_string();
    let ping = |t: &Topology, args: &[&str]| {
        let mut a = vec!["-W", "1", "-q"];
        a.extend_from_slice(args);
        a.push(&dst);
        t.client.output("ping", &a).expect("ping")
    };

    // The NAT appears (cport -> 40001): the first rebinding.
    apply(&t.routers[0], &t.dir, &nat_rules(&client_ip, cport, 40001));
    let out = ping(&t, &["-c", "5", "-i", "0.05"]);
    wait_for(Duration::from_secs(3), || {
        n(&endpoint(&t)["rebinds_validated"]) == 1
    })
    .unwrap_or_else(|_| panic!("no rebinding to 40001: {}\n{out}", endpoint(&t)));
    let before = t.status(true).expect("server status");
    let client_before = t.status(false).expect("client status");
    let ep0 = before["endpoint"].clone();

    // 100 pings/s for 3 s; the mapping changes to 40002 after 1.5 s.
    let ns = t.client.name().to_string();
    let dst2 = dst.clone();
    let stream = std::thread::spawn(move || {
        Netns::command_in(&ns, "ping")
            .args(["-i", "0.01", "-c", "300", "-W", "1", "-q", &dst2])
            .output()
            .expect("ping stream")
    });
    std::thread::sleep(Duration::from_millis(1500));
    apply(&t.routers[0], &t.dir, &nat_rules(&client_ip, cport, 40002));
    let out = stream.join().expect("ping thread");
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let (sent, got, rtt_ms) = ping_summary(&out);

    let after = t.status(true).expect("server status");
    let client_after = t.status(false).expect("client status");
    let ep = after["endpoint"].clone();
    // Packets in flight over one RTT at 100/s; a ping is lost when its
    // request or its reply is, so one more for the one crossing the swap.
    let bound = (100.0 * rtt_ms / 1000.0).ceil() as u64 + 1;
    let lost = sent - got;
    println!(
        "NAT rebinding 40001 -> 40002 at 100 pings/s: {got}/{sent} answered, {lost} lost \
         (gap ~{} ms, bound {bound} = ceil(100/s x {rtt_ms:.1} ms) + 1); server endpoint \
         rebind_candidates {} -> {}, rebinds_validated {} -> {}, rebind_rejected {} -> {}, \
         unknown_remote {} -> {}",
        lost * 10,
        ep0["rebind_candidates"],
        ep["rebind_candidates"],
        ep0["rebinds_validated"],
        ep["rebinds_validated"],
        ep0["rebind_rejected"],
        ep["rebind_rejected"],
        ep0["unknown_remote"],
        ep["unknown_remote"],
    );
    assert_eq!(
        n(&ep["rebinds_validated"]),
        n(&ep0["rebinds_validated"]) + 1,
        "{ep}"
    );
    // No Reset, no rejoin: the same connection and subflow ids at both
    // ends, no new connection accepted, no Reset received.
    assert_eq!(shape(&after), shape(&before), "server {after}");
    assert_eq!(shape(&client_after), shape(&client_before), "client");
    assert_eq!(n(&ep["accepted"]), n(&ep0["accepted"]), "{ep}");
    assert_eq!(n(&ep["joins_routed"]), n(&ep0["joins_routed"]), "{ep}");
    for st in [&after, &client_after] {
        let c = &st["connections"][0];
        assert_eq!(n(&c["stats"]["resets_received"]), 0, "{c}");
    }
    let remote = after["connections"][0]["paths"][0]["remote"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(remote.ends_with(":40002"), "server's path remote {remote}");
    assert!(rtt_ms > 15.0, "the emulated RTT is 20 ms: {rtt_ms}");
    assert!(lost <= bound, "{lost} pings lost > {bound}:\n{out}");
    if workers > 1 {
        // One of the two rebindings crossed workers.
        let d = &after["daemon"];
        assert!(n(&d["handoffs"]) > 0, "{d}");
        assert_eq!(n(&d["handoff_dropped"]), 0, "{d}");
        println!("workers: {}", after["per_worker"]);
    }
}

/// The router's stateless NAT moves the client to another *address* and
/// port (`client:cport` leaves as `addr:nat`), as a carrier-grade NAT may.
fn addr_nat_rules(client: &str, cport: u16, addr: &str, nat: u16) -> String {
    format!(
        "table ip rb\nflush table ip rb\ntable ip rb {{\n\
         chain pre {{\n type filter hook prerouting priority -300; policy accept;\n\
         iifname \"c\" ip saddr {client} udp sport {cport} udp dport {SERVER_PORT} ip saddr set {addr} udp sport set {nat} notrack\n\
         iifname \"s\" ip daddr {addr} udp sport {SERVER_PORT} udp dport {nat} ip daddr set {client} udp dport set {cport} notrack\n\
         }}\n}}\n"
    )
}

/// In the authenticated mode the server names a path by the peer's name
/// and the path id, so a NAT rebinding to another IP address
/// keeps the status row and the Prometheus series (it used to name the
/// path by the client's address: a new series on every rebinding). Two
/// rebindings to new addresses, the second under a ping stream; the
/// series are those of the endpoint's encoder (`metrics_text` of the
/// status document, as a scrape gets them).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn an_authenticated_path_keeps_its_name_across_a_rebinding_to_another_address() {
    let _serial = crate::support::serial();
    let test = "an_authenticated_path_keeps_its_name_across_a_rebinding_to_another_address";
    if !require_root(test) || !require_tool(test, "nft") || !require_tool(test, "ping") {
        return;
    }
    use mpdccp_net::daemon::config::AuthMode;
    let mut t = Topology::build(1).expect("topology");
    let opts = TunnelOpts {
        auth: AuthMode::Authenticated,
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts).expect("tunnel up");
    let client_ip = t.paths[0].client_ip.to_string();
    let cport = client_port(&t, &client_ip);
    // The NAT's public addresses: a /24 the server routes via the router.
    t.server
        .ip(&[
            "route",
            "add",
            "10.1.3.0/24",
            "via",
            &t.paths[0].router_server_ip.to_string(),
        ])
        .expect("route to the NAT's addresses");
    let dst = SERVER_TUN_V4.to_string();
    let path_of = |st: &Value| {
        let p = &st["connections"][0]["paths"][0];
        (
            p["name"].as_str().unwrap_or("").to_string(),
            p["remote"].as_str().unwrap_or("").to_string(),
        )
    };
    let series = |st: &Value| -> Vec<String> {
        mpdccp_net::daemon::metrics::metrics_text(st)
            .lines()
            .filter(|l| l.starts_with("mpdccp_path_cwnd_pkts{"))
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
            .collect()
    };
    let st0 = t.status(true).expect("server status");
    let (name0, remote0) = path_of(&st0);
    let series0 = series(&st0);
    assert_eq!(st0["connections"][0]["peer"]["identity"], "client", "{st0}");
    assert_eq!(name0, "client/p0", "{st0}");
    assert!(remote0.starts_with(&format!("{client_ip}:")), "{remote0}");
    assert_eq!(series0.len(), 1, "{series0:?}");

    for (i, (addr, port)) in [("10.1.3.9", 40001u16), ("10.1.3.10", 40002)]
        .iter()
        .enumerate()
    {
        let ns = t.client.name().to_string();
        let dst2 = dst.clone();
        let stream = std::thread::spawn(move || {
            Netns::command_in(&ns, "ping")
                .args(["-i", "0.01", "-c", "150", "-W", "1", "-q", &dst2])
                .output()
                .expect("ping stream")
        });
        std::thread::sleep(Duration::from_millis(500));
        apply(
            &t.routers[0],
            &t.dir,
            &addr_nat_rules(&client_ip, cport, addr, *port),
        );
        let out = stream.join().expect("ping thread");
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        let (sent, got, _) = ping_summary(&out);
        wait_for(Duration::from_secs(3), || {
            n(&endpoint(&t)["rebinds_validated"]) == i as u64 + 1
        })
        .unwrap_or_else(|_| panic!("no rebinding to {addr}:{port}: {}", endpoint(&t)));
        let st = t.status(true).expect("server status");
        let (name, remote) = path_of(&st);
        println!(
            "rebinding {} to {addr}:{port}: {got}/{sent} pings answered; path {name:?} remote {remote}",
            i + 1
        );
        assert_eq!(remote, format!("{addr}:{port}"), "{st}");
        assert_eq!(name, name0, "the path's name moved with its address");
        assert_eq!(shape(&st), shape(&st0), "same connection and subflow");
        assert_eq!(series(&st), series0, "a new Prometheus series");
        assert!(
            sent - got <= 5,
            "{} of {sent} pings lost:\n{out}",
            sent - got
        );
    }
}
