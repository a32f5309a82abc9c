//! The real tunnel over native DCCP (IP protocol 33 through raw sockets,
//! `transport = "dccp"` on both client paths, `dccp_listen` on the server)
//! between network namespaces on two paths: handshake, pings inside at the
//! tunnel MTU native DCCP allows (8 bytes more than DCCP-in-UDP), and a
//! probe stream delivered exactly once over both paths, with no UDP on the
//! wire, and a forged packet (bad checksum) dropped and counted. Same topology and emulated paths (5 ms, 20 Mbit/s each) as
//! `daemon/net/tunnel.rs`; the emulator works at the IP level, so it carries
//! protocol 33 as it carries UDP.
//!
//! A second test mixes the transports in one connection (path 1 native,
//! path 2 UDP): both paths carry the stream, each on its own socket kind,
//! and the client's TUN keeps the UDP budget.
//!
//! Needs root. Without it the test prints a skip notice, or fails when `CI`
//! is set.

use super::common::stream_exactly_once;
use crate::support::exe;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, spawn_in_netns};
use mpdccp_lab::topo::{wait_for, Topology, TunnelOpts, SERVER_TUN_V4, SERVER_TUN_V6};
use mpdccp_net::daemon::config::Transport;
use mpdccp_net::mtu::{MtuPlan, DEFAULT_OPTIONS_BUDGET_BYTES, UDP_HEADER_BYTES};
use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::sched::SchedulerKind;
use mpdccp_proto::wire::{DccpKind, DccpRepr, Header, Packet};

/// Two emulated paths (5 ms, 20 Mbit/s), as in `daemon/net/tunnel.rs`, and the
/// tunnel up on them with round robin (both paths carry every other packet).
fn tunnel(transports: &[Transport]) -> Topology {
    let mut t = Topology::emulated(exe(), 2, 5, 20).expect("topology");
    let mut opts = TunnelOpts {
        transports: transports.to_vec(),
        ..TunnelOpts::default()
    };
    opts.tunnel.settings.scheduler = SchedulerKind::Rr;
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");
    t
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_over_native_dccp_on_two_paths() {
    if !require_root("tunnel_over_native_dccp_on_two_paths") {
        return;
    }
    let _g = crate::support::serial();
    let t = tunnel(&[Transport::Dccp; 2]);

    // The client's paths are all native: its TUN MTU has the UDP header's
    // 8 bytes back; the server also serves UDP, so it keeps them reserved.
    let native = MtuPlan::with_encap(1500, false, 0, DEFAULT_OPTIONS_BUDGET_BYTES);
    let cst = t.status(false).expect("client status");
    let sst = t.status(true).expect("server status");
    assert_eq!(
        cst["tun"]["mtu"].as_u64(),
        Some(u64::from(native.tun_mtu)),
        "{cst}"
    );
    assert_eq!(
        sst["tun"]["mtu"].as_u64(),
        Some(u64::from(native.tun_mtu - UDP_HEADER_BYTES)),
        "{sst}"
    );

    // A don't-fragment ping filling the client's TUN MTU (ICMP payload =
    // MTU - 20 IPv4 - 8 ICMP): the outer packet is exactly 1500 bytes.
    let size = (native.tun_mtu - 28).to_string();
    let v4 = SERVER_TUN_V4.to_string();
    let out = t
        .client
        .output(
            "ping",
            &[
                "-c", "5", "-i", "0.05", "-W", "2", "-q", "-M", "do", "-s", &size, &v4,
            ],
        )
        .expect("full-size ping through the native DCCP tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    let out = t
        .client
        .output(
            "ping",
            &["-c", "5", "-i", "0.05", "-W", "2", "-q", SERVER_TUN_V6],
        )
        .expect("ping6 through the native DCCP tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");

    let cst = stream_exactly_once(&t, 9011);
    for p in cst["configured_paths"]
        .as_array()
        .expect("configured paths")
    {
        assert_eq!(p["transport"], "dccp", "{p}");
    }
    // Everything went through the raw sockets, every checksum verified:
    // the stream upstream, acknowledgements back.
    let sst = t.status(true).expect("server status");
    let count = |st: &serde_json::Value, k: &str| st["daemon"][k].as_u64().unwrap_or(0);
    assert!(count(&cst, "dccp_tx_packets") > 2500, "{cst}");
    assert!(count(&sst, "dccp_rx_packets") > 2500, "{sst}");
    assert!(count(&sst, "dccp_tx_packets") > 100, "{sst}");
    assert!(count(&cst, "dccp_rx_packets") > 100, "{cst}");
    for (who, st) in [("client", &cst), ("server", &sst)] {
        let d = &st["daemon"];
        assert_eq!(d["dccp_rx_dropped"], 0, "{who}: {d}");
        assert_eq!(d["dccp_tx_errors"], 0, "{who}: {d}");
        assert_eq!(d["udp_rx_datagrams"], 0, "{who}: {d}");
        assert_eq!(d["udp_tx_datagrams"], 0, "{who}: {d}");
    }

    // Hostile input: a DCCP Request from the client's address with a
    // checksum that does not verify over the real addresses is dropped by
    // the server's raw socket and counted; the tunnel is unharmed.
    let (from, to) = (t.paths[0].client_ip, t.paths[0].server_ip);
    spawn_in_netns(t.client.name(), move || {
        let sock = RawDccpSocket::bind(from.into())?;
        let req = DccpRepr {
            header: Header {
                src_port: 0,
                dst_port: 0,
                seq: 1,
                kind: DccpKind::Request { service_code: 0 },
                ..Header::default()
            },
            ..Default::default()
        };
        let mut b = vec![0u8; req.buffer_len(0)];
        req.emit(&mut b, &[], None)?;
        let mut p = Packet::new_checked(&mut b[..])?;
        p.fill_checksum((from.into(), to.into()))?;
        let sum = p.checksum();
        p.set_checksum(sum ^ 0x0101);
        sock.send_as_is(&b, to.into())?;
        Ok(())
    })
    .join()
    .expect("forger thread")
    .expect("forged packet sent");
    wait_for(Duration::from_secs(2), || {
        t.status(true)
            .is_ok_and(|st| st["daemon"]["dccp_rx_dropped"] == 1)
    })
    .unwrap_or_else(|_| {
        panic!(
            "forged packet not counted: {}",
            t.status(true).unwrap_or_default()
        )
    });
    let out = t
        .client
        .output("ping", &["-c", "3", "-i", "0.05", "-W", "2", "-q", &v4])
        .expect("ping after the forged packet");
    assert!(out.contains(" 0% packet loss"), "{out}");
    assert_eq!(t.established_paths(), 2);
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_mixing_native_dccp_and_udp_paths() {
    if !require_root("tunnel_mixing_native_dccp_and_udp_paths") {
        return;
    }
    let _g = crate::support::serial();
    let t = tunnel(&[Transport::Dccp, Transport::Udp]);
    let cst = stream_exactly_once(&t, 9012);
    let sst = t.status(true).expect("server status");
    // A UDP path keeps the UDP header in the client's budget.
    let udp = MtuPlan::new(1500, false, DEFAULT_OPTIONS_BUDGET_BYTES);
    assert_eq!(
        cst["tun"]["mtu"].as_u64(),
        Some(u64::from(udp.tun_mtu)),
        "{cst}"
    );
    let paths = cst["configured_paths"]
        .as_array()
        .expect("configured paths");
    assert_eq!(paths[0]["transport"], "dccp", "{cst}");
    assert_eq!(paths[1]["transport"], "udp", "{cst}");
    // Round robin split the ~3000 probes between the two socket kinds.
    let count = |st: &serde_json::Value, k: &str| st["daemon"][k].as_u64().unwrap_or(0);
    for (who, st, dir) in [("client", &cst, "tx"), ("server", &sst, "rx")] {
        let (raw, udp) = (
            count(st, &format!("dccp_{dir}_packets")),
            count(st, &format!("udp_{dir}_datagrams")),
        );
        assert!(
            raw > 1000 && udp > 1000,
            "{who}: dccp {raw}, udp {udp}: {st}"
        );
        assert_eq!(count(st, "dccp_rx_dropped"), 0, "{who}: {st}");
    }
}
