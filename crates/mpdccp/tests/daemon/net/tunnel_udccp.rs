//! The real tunnel over U-DCCP (draft-amend-tsvwg-dccp-udp-header-
//! conversion-01: the DCCP header rearranged into the UDP header,
//! `transport = "udccp"` on the client's paths, `udccp_listen` on the
//! server) between network namespaces on two paths, with the emulated
//! paths of `daemon/net/tunnel.rs` (5 ms, 20 Mbit/s each):
//!
//! * both paths U-DCCP: handshake and join over U-DCCP, the tunnel MTU of
//!   native DCCP (no encapsulation bytes), a don't-fragment ping filling it
//!   whose outer packet is IPv4 + DCCP header + the whole tunnelled packet
//!   (seen in a capture), one byte more refused, a probe stream delivered exactly once
//!   over both paths, and malformed U-DCCP datagrams dropped and counted;
//! * path 1 U-DCCP, path 2 DCCP-in-UDP in one connection: a capture of both
//!   paths decoded by tshark with `tools/wireshark/mpdccp.lua` shows the
//!   U-DCCP ports, sequence numbers and multipath options, and the bytes
//!   per data packet: outer IPv4 + DCCP header + payload for U-DCCP, 8
//!   more for DCCP-in-UDP.
//!
//! Needs root (and tcpdump + tshark for the capture). Without root the
//! tests print a skip notice, or fail when `CI` is set.

use super::common::stream_exactly_once;
use crate::support::exe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, spawn_in_netns};
use mpdccp_lab::topo::{
    wait_for, Topology, TunnelOpts, SERVER_TUN_V4, SERVER_TUN_V6, SERVER_UDCCP_PORT,
};
use mpdccp_net::daemon::config::Transport;
use mpdccp_net::mtu::{MtuPlan, DEFAULT_OPTIONS_BUDGET_BYTES, UDP_HEADER_BYTES};
use mpdccp_proto::sched::SchedulerKind;

/// The topology with both emulators up, the tunnel not yet started (so a
/// capture can see the handshakes).
fn topology() -> Topology {
    Topology::emulated(exe(), 2, 5, 20).expect("topology")
}

fn start(t: &mut Topology, transports: &[Transport]) {
    let mut opts = TunnelOpts {
        transports: transports.to_vec(),
        ..TunnelOpts::default()
    };
    opts.tunnel.settings.scheduler = SchedulerKind::Rr;
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");
}

/// tcpdump on the server's side of path `i`, UDP only, packet-buffered.
fn capture(t: &mut Topology, i: usize, file: &Path) -> usize {
    let iface = t.paths[i].iface.clone();
    let f = file.to_string_lossy().into_owned();
    let k = t
        .spawn_in(
            true,
            "tcpdump",
            &["-i", &iface, "-U", "-s", "0", "-w", &f, "udp"],
        )
        .expect("tcpdump (needed for the capture)");
    // tcpdump opens the interface asynchronously.
    std::thread::sleep(Duration::from_millis(500));
    k
}

fn ping(t: &Topology, args: &[&str]) -> anyhow::Result<String> {
    t.client.output("ping", args)
}

fn count(st: &serde_json::Value, k: &str) -> u64 {
    st["daemon"][k].as_u64().unwrap_or(0)
}

/// tshark over `pcap` with the Lua dissector, the given U-DCCP port and
/// the DCCP-in-UDP port of the lab's server: one row per frame, fields
/// tab-separated. `None` without tshark (outside CI).
fn tshark(pcap: &Path, fields: &[&str]) -> Option<Vec<Vec<String>>> {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        panic!("tshark is required (apt-get install tshark)");
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/mpdccp.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-X")
        .arg(format!("lua_script:{}", script.display()))
        .args(["-o", &format!("mpdccp.udccp_port:{SERVER_UDCCP_PORT}")])
        .args(["-o", "mpdccp.udp_port:6773"])
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("Lua: Error"),
        "tshark: {err}"
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect(),
    )
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_over_udccp_on_two_paths() {
    if !require_root("tunnel_over_udccp_on_two_paths") {
        return;
    }
    let _g = crate::support::serial();
    let mut t = topology();
    let pcap = t.dir.join("udccp-p1.pcap");
    let cap = capture(&mut t, 0, &pcap);
    start(&mut t, &[Transport::UDccp; 2]);

    // No encapsulation bytes: the client's TUN MTU is native DCCP's; the
    // server also serves DCCP-in-UDP and keeps the UDP header reserved.
    let plan = MtuPlan::with_encap(1500, false, 0, DEFAULT_OPTIONS_BUDGET_BYTES);
    let cst = t.status(false).expect("client status");
    let sst = t.status(true).expect("server status");
    assert_eq!(
        cst["tun"]["mtu"].as_u64(),
        Some(u64::from(plan.tun_mtu)),
        "{cst}"
    );
    assert_eq!(
        sst["tun"]["mtu"].as_u64(),
        Some(u64::from(plan.tun_mtu - UDP_HEADER_BYTES)),
        "{sst}"
    );
    for p in cst["configured_paths"].as_array().expect("paths") {
        assert_eq!(p["transport"], "udccp", "{p}");
    }

    // The largest don't-fragment ping (ICMP payload = MTU - 28) passes
    // (its outer packet is checked in the capture); one byte more does not
    // leave the host.
    let size = (plan.tun_mtu - 28).to_string();
    let too_big = (plan.tun_mtu - 27).to_string();
    let v4 = SERVER_TUN_V4.to_string();
    let out = ping(
        &t,
        &[
            "-c", "5", "-i", "0.05", "-W", "2", "-q", "-M", "do", "-s", &size, &v4,
        ],
    )
    .expect("full-size ping through the U-DCCP tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    assert!(
        ping(
            &t,
            &["-c", "1", "-W", "1", "-q", "-M", "do", "-s", &too_big, &v4]
        )
        .is_err(),
        "a ping one byte over the tunnel MTU must not pass unfragmented"
    );
    let out = ping(
        &t,
        &["-c", "5", "-i", "0.05", "-W", "2", "-q", SERVER_TUN_V6],
    )
    .expect("ping6 through the U-DCCP tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");

    let cst = stream_exactly_once(&t, 9021);
    let sst = t.status(true).expect("server status");
    // All of it as U-DCCP through UDP sockets; nothing malformed.
    assert!(count(&cst, "udccp_tx_packets") > 2500, "{cst}");
    assert!(count(&sst, "udccp_rx_packets") > 2500, "{sst}");
    assert!(count(&sst, "udccp_tx_packets") > 100, "{sst}");
    assert!(count(&cst, "udccp_rx_packets") > 100, "{cst}");
    for (who, st) in [("client", &cst), ("server", &sst)] {
        for k in [
            "udccp_rx_malformed",
            "udccp_tx_errors",
            "dccp_rx_packets",
            "udp_tx_errors",
        ] {
            assert_eq!(count(st, k), 0, "{who} {k}: {}", st["daemon"]);
        }
    }

    // Hostile input: U-DCCP payloads that restore to no DCCP header (a
    // reserved type; a truncated header; Data Offset past the end) are
    // dropped and counted at the server; the tunnel is unharmed.
    let to = std::net::SocketAddr::from((t.paths[0].server_ip, SERVER_UDCCP_PORT));
    spawn_in_netns(t.client.name(), move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
        s.send_to(&[12 << 4, 4, 0, 0, 0, 0, 0, 1], to)?;
        s.send_to(&[2 << 4, 4, 0], to)?;
        s.send_to(&[2 << 4, 200, 0, 0, 0, 0, 0, 1], to)?;
        Ok(())
    })
    .join()
    .expect("forger thread")
    .expect("malformed datagrams sent");
    wait_for(Duration::from_secs(2), || {
        t.status(true)
            .is_ok_and(|st| st["daemon"]["udccp_rx_malformed"] == 3)
    })
    .unwrap_or_else(|_| {
        panic!(
            "malformed U-DCCP not counted: {}",
            t.status(true).unwrap_or_default()
        )
    });
    let out = ping(&t, &["-c", "3", "-i", "0.05", "-W", "2", "-q", &v4])
        .expect("ping after the malformed datagrams");
    assert!(out.contains(" 0% packet loss"), "{out}");
    assert_eq!(t.established_paths(), 2);

    t.procs[cap].stop();
    // The full-size pings on path 1 (client to server): outer IPv4 (20) + the DCCP header
    // actually sent (Data Offset × 4) + the whole tunnelled packet (the TUN
    // MTU), not one byte of encapsulation, and within the path MTU (the
    // rest of the 136-byte DCCP budget of the MTU plan is unused here).
    let fields = [
        "ip.len",
        "udp.length",
        "mpdccp.encap",
        "mpdccp.type",
        "mpdccp.data_offset",
        "udp.dstport",
    ];
    let upstream = SERVER_UDCCP_PORT.to_string();
    if let Some(rows) = tshark(&pcap, &fields) {
        assert!(
            rows.iter().all(|r| r[2] == "U-DCCP"),
            "only U-DCCP on the path"
        );
        assert!(
            rows.iter().any(|r| r[3] == "0"),
            "the Request (MP_KEY) as U-DCCP"
        );
        let n = |r: &Vec<String>, i: usize| r[i].parse::<u32>().unwrap_or(0);
        let full: Vec<u32> = rows
            .iter()
            .filter(|r| (r[3] == "2" || r[3] == "4") && r[5] == upstream && n(r, 0) > plan.tun_mtu)
            .map(|r| {
                assert_eq!(n(r, 1) + 20, n(r, 0), "UDP length = DCCP length: {r:?}");
                assert_eq!(n(r, 0) - 20 - 4 * n(r, 4), plan.tun_mtu, "{r:?}");
                n(r, 0)
            })
            .collect();
        assert!(full.len() >= 2, "full-size packets on path 1: {full:?}");
        assert!(full.iter().all(|&l| l <= 1500), "{full:?}");
    }
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn udccp_and_dccp_in_udp_paths_in_one_tunnel_decoded_by_tshark() {
    if !require_root("udccp_and_dccp_in_udp_paths_in_one_tunnel_decoded_by_tshark") {
        return;
    }
    let _g = crate::support::serial();
    let mut t = topology();
    let pcaps = [t.dir.join("p1-udccp.pcap"), t.dir.join("p2-udp.pcap")];
    let caps = [capture(&mut t, 0, &pcaps[0]), capture(&mut t, 1, &pcaps[1])];
    start(&mut t, &[Transport::UDccp, Transport::Udp]);
    // One UDP path keeps the UDP header in the client's budget.
    let udp = MtuPlan::new(1500, false, DEFAULT_OPTIONS_BUDGET_BYTES);
    let cst = t.status(false).expect("client status");
    assert_eq!(
        cst["tun"]["mtu"].as_u64(),
        Some(u64::from(udp.tun_mtu)),
        "{cst}"
    );
    let v4 = SERVER_TUN_V4.to_string();
    let out = ping(
        &t,
        &["-c", "20", "-i", "0.02", "-W", "2", "-q", "-s", "1000", &v4],
    )
    .expect("pings over both transports");
    assert!(out.contains(" 0% packet loss"), "{out}");
    let cst = stream_exactly_once(&t, 9022);
    let sst = t.status(true).expect("server status");
    assert!(count(&cst, "udccp_tx_packets") > 1000, "{cst}");
    assert!(count(&sst, "udccp_rx_packets") > 1000, "{sst}");
    assert_eq!(count(&sst, "udccp_rx_malformed"), 0, "{sst}");
    for k in caps {
        t.procs[k].stop();
    }

    let fields = [
        "ip.len",
        "udp.srcport",
        "udp.dstport",
        "udp.length",
        "mpdccp.encap",
        "mpdccp.type",
        "mpdccp.seq",
        "mpdccp.data_offset",
        "mpdccp.srcport",
        "mpdccp.dstport",
        "mpdccp.mp.subtype",
        "mpdccp.mp.seq",
        "mpdccp.mp.key.data",
        "mpdccp.mp.join.nonce",
        "mpdccp.mp.hmac",
    ];
    let col = |name: &str| fields.iter().position(|f| *f == name).unwrap();
    let Some(udccp_rows) = tshark(&pcaps[0], &fields) else {
        return;
    };
    let udp_rows = tshark(&pcaps[1], &fields).expect("tshark");
    // Bytes on the wire per data packet carrying a tunnelled packet:
    // outer IPv4 (20) + encapsulation + DCCP header (Data Offset × 4) +
    // payload. Per frame: U-DCCP's UDP Length is the DCCP length (no byte
    // added); DCCP-in-UDP's is 8 more.
    let mut overhead = [Vec::new(), Vec::new()];
    for (k, rows, encap) in [
        (0, &udccp_rows, "U-DCCP"),
        (1, &udp_rows, "DCCP-in-UDP (RFC 6773)"),
    ] {
        assert!(!rows.is_empty(), "{encap}: nothing captured");
        for r in rows {
            assert_eq!(r[col("mpdccp.encap")], encap, "{r:?}");
            let n = |c: &str| {
                r[col(c)]
                    .parse::<usize>()
                    .unwrap_or_else(|_| panic!("{c}: {r:?}"))
            };
            let (ip_len, udp_len, hdr) =
                (n("ip.len"), n("udp.length"), 4 * n("mpdccp.data_offset"));
            assert_eq!(ip_len, 20 + udp_len, "{r:?}");
            let dccp_len = if k == 0 { udp_len } else { udp_len - 8 };
            let ty = &r[col("mpdccp.type")];
            if (ty == "2" || ty == "4") && dccp_len > hdr {
                overhead[k].push(ip_len - (dccp_len - hdr));
                assert_eq!(ip_len - dccp_len, if k == 0 { 20 } else { 28 }, "{r:?}");
            }
            if k == 0 {
                // U-DCCP: the UDP ports are the DCCP ports.
                assert_eq!(r[col("mpdccp.srcport")], r[col("udp.srcport")]);
                assert_eq!(r[col("mpdccp.dstport")], r[col("udp.dstport")]);
                assert!(
                    [
                        r[col("udp.srcport")].as_str(),
                        r[col("udp.dstport")].as_str()
                    ]
                    .contains(&SERVER_UDCCP_PORT.to_string().as_str()),
                    "{r:?}"
                );
                assert!(!r[col("mpdccp.seq")].is_empty(), "{r:?}");
            }
        }
    }
    // The multipath options U-DCCP carries (unchanged after the header).
    let shows = |c: &str| udccp_rows.iter().filter(|r| !r[col(c)].is_empty()).count();
    assert!(shows("mpdccp.mp.seq") > 1000, "MP_SEQ on the data packets");
    assert!(
        shows("mpdccp.mp.key.data") >= 2,
        "MP_KEY in the first handshake"
    );
    // Path 1 is the first subflow here; its sequence numbers advance.
    let seqs: Vec<u64> = udccp_rows
        .iter()
        .filter(|r| r[col("udp.dstport")] == SERVER_UDCCP_PORT.to_string())
        .filter_map(|r| r[col("mpdccp.seq")].parse().ok())
        .collect();
    assert!(
        seqs.windows(2).filter(|w| w[1] == w[0] + 1).count() > 1000,
        "consecutive DCCP seqs"
    );
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
    let (u, d) = (mean(&overhead[0]), mean(&overhead[1]));
    eprintln!(
        "bytes per data packet beyond the tunnelled packet (IPv4 outer): U-DCCP {u:.1} ({} pkts), DCCP-in-UDP {d:.1} ({} pkts)",
        overhead[0].len(),
        overhead[1].len()
    );
    assert!(overhead[0].len() > 500 && overhead[1].len() > 500);
}
