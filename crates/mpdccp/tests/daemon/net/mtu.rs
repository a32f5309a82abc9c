//! End to end between network namespaces: DPLPMTUD (RFC 8899)
//! sets the TUN MTU. Path 1's router sends towards the server over a 1400
//! byte link (its veth `s`), every other interface stays at 1500. The
//! client's TUN MTU must settle at exactly 1400 − 28 (IPv4 + UDP) − 56
//! (`DATA_HEADER_MAX`) = 1316, with the router's ICMP "fragmentation
//! needed" delivered and with it dropped (the probes must not need it,
//! RFC 8899 §1.1); with both paths at 1500 at 1416. Through the tunnel: a DF
//! ping of exactly the TUN MTU passes and one byte more fails locally
//! ("message too long"); iperf3 UDP at the TUN MTU arrives with < 1 %
//! loss; nft counters in the router and both end namespaces see zero IP
//! fragments on the outer path (and do count the fragments of a non-DF
//! ping sent to check that they can).
//!
//! Needs root, `ping`, `iperf3` and `nft`. Without them the test prints a
//! skip notice, or fails when `CI` is set.

use crate::support::exe;
use std::time::{Duration, Instant};

use mpdccp_lab::iperf;
use mpdccp_lab::netns::{require_root, require_tool, Netns};
use mpdccp_lab::topo::{Topology, TunnelOpts, SERVER_TUN_V4};
use serde_json::Value;

/// IPv4 + UDP in front of every DCCP packet, the core's data header bound.
const OUTER: u32 = 20 + 8;
const DATA_HEADER: u32 = mpdccp_proto::conn::DATA_HEADER_MAX as u32;

fn tools(test: &str) -> bool {
    require_root(test)
        && require_tool(test, "ping")
        && require_tool(test, "iperf3")
        && require_tool(test, "nft")
}

/// A fragment counter (`ip frag-off & 0x3fff != 0`: MF set or an offset)
/// in `ns`'s prerouting, ahead of any reassembly; `drop_icmp` also drops
/// the ICMP "fragmentation needed" the namespace sends.
fn nft_setup(ns: &Netns, drop_icmp: bool) {
    let mut rules = String::from(
        "table ip mtutest {\n counter frags {}\n\
         chain pre { type filter hook prerouting priority -500; ip frag-off & 0x3fff != 0 counter name frags; }\n",
    );
    if drop_icmp {
        rules.push_str(
            " counter icmp_dropped {}\n\
             chain out { type filter hook output priority 0; icmp type destination-unreachable icmp code frag-needed counter name icmp_dropped drop; }\n",
        );
    }
    rules.push_str("}\n");
    let file = std::env::temp_dir().join(format!("mpdccp-mtu-{}.nft", ns.name()));
    std::fs::write(&file, rules).unwrap();
    ns.output("nft", &["-f", &file.to_string_lossy()])
        .expect("nft rules");
    let _ = std::fs::remove_file(file);
}

/// Packets a named counter of table `mtutest` counted.
fn nft_counter(ns: &Netns, name: &str) -> u64 {
    let out = ns
        .output("nft", &["list", "counter", "ip", "mtutest", name])
        .expect("nft list counter");
    let w: Vec<&str> = out.split_whitespace().collect();
    w.iter()
        .position(|&x| x == "packets")
        .and_then(|i| w.get(i + 1)?.parse().ok())
        .unwrap_or_else(|| panic!("no packet count in {out}"))
}

fn tun_mtu(t: &Topology, server: bool) -> Option<u64> {
    t.status(server).ok()?["tun_mtu"].as_u64()
}

/// Waits (bounded) until the client's TUN MTU is `want` and stays so for
/// 2 s; returns how long it took. Panics with the logs otherwise.
fn settle(t: &Topology, want: u64, limit: Duration) -> Duration {
    let start = Instant::now();
    let mut since: Option<Instant> = None;
    let mut seen = Vec::new();
    while start.elapsed() < limit {
        let m = tun_mtu(t, false);
        if seen.last() != Some(&m) {
            seen.push(m);
        }
        if m == Some(want) {
            let s = *since.get_or_insert_with(Instant::now);
            if s.elapsed() >= Duration::from_secs(2) {
                let took = s - start;
                println!("client TUN MTU {want} after {took:?} (sequence {seen:?})");
                return took;
            }
        } else {
            since = None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "client TUN MTU did not settle at {want} in {limit:?}: sequence {seen:?}\nclient log:\n{}\nserver log:\n{}",
        t.log_tail(false),
        t.log_tail(true)
    );
}

/// `ping -M do -s SIZE` (DF, no local fragmentation) from the client
/// through the tunnel: (succeeded, output).
fn df_ping(t: &Topology, size: u32) -> (bool, String) {
    let out = t
        .client
        .command("ping")
        .args([
            "-M",
            "do",
            "-s",
            &size.to_string(),
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "2",
            &SERVER_TUN_V4.to_string(),
        ])
        .output()
        .expect("run ping");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// iperf3 UDP from the client at 20 Mbit/s for 3 s with `len`-byte
/// datagrams: (lost %, packets).
fn iperf_udp(t: &mut Topology, port: u16, len: u32) -> (f64, u64) {
    let dst = SERVER_TUN_V4.to_string();
    let len_s = len.to_string();
    let args = ["-u", "-b", "20M", "-l", &len_s, "-t", "3"];
    let v = iperf::run(t, &dst, port, &args).expect("iperf3");
    (
        iperf::udp_lost_percent(&v).expect("lost_percent"),
        v["end"]["sum"]["packets"].as_u64().expect("packets"),
    )
}

/// The client's per-path PLPMTUs (DCCP bytes), by path name.
fn path_plpmtus(st: &Value) -> Vec<(String, Option<u64>, String)> {
    st["connections"][0]["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or("?").to_string(),
                p["plpmtu"].as_u64(),
                p["plpmtu_state"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

/// The whole check for one topology: router 0's `s` at `mtu1` (1500 =
/// unchanged), `drop_icmp` in router 0.
fn run(test: &str, mtu1: u32, drop_icmp: bool) {
    if !tools(test) {
        return;
    }
    // One topology at a time: the search's timing and iperf3's loss are
    // measured, and the host has few cores.
    let _one = crate::support::serial();
    let mut t = Topology::build(2).expect("topology");
    if mtu1 != 1500 {
        t.routers[0]
            .ip(&["link", "set", "s", "mtu", &mtu1.to_string()])
            .expect("router mtu");
    }
    for ns in [&t.client, &t.server, &t.routers[0], &t.routers[1]] {
        nft_setup(ns, drop_icmp && ns.name() == t.routers[0].name());
    }
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel up on both paths");
    let want = u64::from(mtu1 - OUTER - DATA_HEADER);
    let took = settle(&t, want, Duration::from_secs(90));
    assert!(took < Duration::from_secs(90));

    let st = t.status(false).expect("client status");
    let per_path = path_plpmtus(&st);
    println!(
        "client PLPMTU per path (DCCP bytes): {per_path:?}; connection {}; stats {}",
        st["connections"][0]["plpmtu"], st["connections"][0]["plpmtu_stats"]
    );
    let p1 = per_path.iter().find(|p| p.0 == "p1").expect("p1");
    let p2 = per_path.iter().find(|p| p.0 == "p2").expect("p2");
    assert_eq!(p1.1, Some(u64::from(mtu1 - OUTER)), "{per_path:?}");
    assert_eq!(p2.1, Some(u64::from(1500 - OUTER)), "{per_path:?}");
    assert_eq!(
        st["connections"][0]["plpmtu"].as_u64(),
        Some(u64::from(mtu1 - OUTER))
    );
    assert_eq!(st["tun"]["mtu"].as_u64(), Some(want));
    // The server's TUN follows its own (downstream) discovery, once that
    // path's search ended there (a path still searching does not move the
    // TUN: `Connection::plpmtu_converged`).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut server_mtu = tun_mtu(&t, true).expect("server tun_mtu");
    while !(want..=want + 4).contains(&server_mtu) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        server_mtu = tun_mtu(&t, true).expect("server tun_mtu");
    }
    let sst = t.status(true).expect("server status");
    println!(
        "server TUN MTU {server_mtu}; server PLPMTU per path {:?}",
        path_plpmtus(&sst)
    );
    assert!(
        (want..=want + 4).contains(&server_mtu),
        "server TUN MTU {server_mtu}, client {want}"
    );

    // DF ping: exactly the TUN MTU passes, one byte more fails locally.
    let icmp = (want - 28) as u32;
    let (ok, out) = df_ping(&t, icmp);
    assert!(
        ok && out.contains(" 0% packet loss"),
        "ping -s {icmp}: {out}"
    );
    let (ok, out) = df_ping(&t, icmp + 1);
    assert!(!ok, "ping -s {} passed: {out}", icmp + 1);
    assert!(
        out.contains("message too long") || out.contains(&format!("mtu={want}")),
        "ping -s {}: {out}",
        icmp + 1
    );
    println!("DF ping -s {icmp} ok; -s {} fails locally", icmp + 1);

    // iperf3 UDP with datagrams filling the TUN MTU.
    let (lost, pkts) = iperf_udp(&mut t, 5311, icmp);
    println!("iperf3 UDP -l {icmp} 20 Mbit/s 3 s: {pkts} packets, {lost:.3} % lost");
    assert!(pkts > 3000, "{pkts} packets");
    assert!(lost < 1.0, "{lost} % lost");

    // Not one IP fragment anywhere on the outer paths.
    let frags: Vec<(String, u64)> = [&t.client, &t.routers[0], &t.routers[1], &t.server]
        .iter()
        .map(|ns| (ns.name().to_string(), nft_counter(ns, "frags")))
        .collect();
    println!("IP fragments seen (client, router 1, router 2, server): {frags:?}");
    assert!(frags.iter().all(|f| f.1 == 0), "{frags:?}");
    if drop_icmp {
        let dropped = nft_counter(&t.routers[0], "icmp_dropped");
        println!("router 1 dropped {dropped} ICMP frag-needed");
        assert!(dropped > 0, "the probes above {mtu1} made no ICMP to drop");
    }
    // The counters can count: a 1628-byte ping without DF over path 1 is
    // fragmented by the client and reassembled by the server.
    let srv1 = t.paths[0].server_ip.to_string();
    // (Its replies may not come back: the server's 1500-byte fragment does
    // not pass the 1400-byte link; only the requests' fragments count.)
    let _ = t
        .client
        .command("ping")
        .args([
            "-M", "dont", "-s", "1600", "-c", "2", "-i", "0.2", "-W", "1", &srv1,
        ])
        .output()
        .expect("run ping");
    let server_frags = nft_counter(&t.server, "frags");
    println!("self-check: a non-DF 1628-byte ping put {server_frags} fragments on path 1");
    assert!(server_frags >= 2, "fragment counter counts nothing");
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tun_mtu_follows_a_1400_byte_path_with_icmp() {
    run("tun_mtu_follows_a_1400_byte_path_with_icmp", 1400, false);
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tun_mtu_follows_a_1400_byte_path_without_icmp() {
    run("tun_mtu_follows_a_1400_byte_path_without_icmp", 1400, true);
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tun_mtu_is_1416_on_1500_byte_paths() {
    run("tun_mtu_is_1416_on_1500_byte_paths", 1500, false);
}
