//! The real tunnel between network namespaces over two emulated paths:
//! handshake, ping (IPv4 and IPv6 inside), a probe stream delivered exactly
//! once, a path's interface going down and coming back.
//!
//! Needs root. Without it the test prints a skip notice, or fails when `CI`
//! is set. The tests share nothing (names carry pid and a counter), but each
//! is heavy, so they run one at a time (a lock) to keep timing meaningful.

use crate::support::exe;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use mpdccp_lab::netns::{require_root, spawn_in_netns};
use mpdccp_lab::probe::{self, Arrival};
use mpdccp_lab::topo::{
    wait_for, ProbeStream, Topology, TunnelOpts, SERVER_PORT, SERVER_TUN_V4, SERVER_TUN_V6,
    TUN_NAME,
};
use mpdccp_net::daemon::config::DEFAULT_TUN_TXQUEUELEN;
use mpdccp_proto::sched::SchedulerKind;
use mpdccp_proto::Instant;

fn two_paths(delay_ms: u32, rate_mbps: u32) -> Topology {
    Topology::emulated(exe(), 2, delay_ms, rate_mbps).expect("topology")
}

fn ping_ok(t: &Topology, dst: &str, n: u32) -> anyhow::Result<String> {
    t.client.output(
        "ping",
        &["-c", &n.to_string(), "-i", "0.05", "-W", "2", "-q", dst],
    )
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_handshake_ping_v4_v6() {
    let _g = crate::support::serial();
    if !require_root("tunnel_handshake_ping_v4_v6") {
        return;
    }
    let mut t = two_paths(5, 50);
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel up on both paths");
    let out = ping_ok(&t, &SERVER_TUN_V4.to_string(), 10).expect("ping through the tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    let out = ping_ok(&t, SERVER_TUN_V6, 10).expect("ping6 through the tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    // Both TUNs got the daemon's queue length, not the kernel's 500.
    for ns in [&t.client, &t.server] {
        let link = ns
            .output("ip", &["-j", "link", "show", "dev", TUN_NAME])
            .expect("ip link");
        let v: serde_json::Value = serde_json::from_str(&link).expect("ip -j");
        assert_eq!(
            v[0]["txqlen"].as_u64(),
            Some(u64::from(DEFAULT_TUN_TXQUEUELEN)),
            "{link}"
        );
    }
    let st = t.status(true).expect("server status");
    assert_eq!(
        st["connections"].as_array().map(|a| a.len()),
        Some(1),
        "{st}"
    );
    assert_eq!(
        st["connections"][0]["paths"].as_array().map(|a| a.len()),
        Some(2),
        "{st}"
    );
}

/// `busy_poll_us`: the loops spin after packets, so traffic still flows
/// (the spin hands every readable fd on), and stop spinning when it ends:
/// idle daemons use almost no CPU.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn busy_polling_carries_traffic_and_stops_when_idle() {
    let _g = crate::support::serial();
    if !require_root("busy_polling_carries_traffic_and_stops_when_idle") {
        return;
    }
    let mut t = two_paths(1, 100);
    let mut opts = TunnelOpts::default();
    opts.tunnel.busy_poll_us = 2_000;
    t.start_tunnel(exe(), &opts).expect("tunnel up");
    let pids: Vec<u32> = t.procs.iter().skip(2).filter_map(|p| p.id()).collect();
    assert_eq!(pids.len(), 2, "two daemons");
    let out = ping_ok(&t, &SERVER_TUN_V4.to_string(), 20).expect("ping through the tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    // Idle: keepalives and RTT probes only, a few per second. Spinning
    // 2 ms after each would cost a few percent of a core; spinning for
    // good, all of it.
    std::thread::sleep(Duration::from_millis(300));
    let cpu = |pids: &[u32]| {
        pids.iter()
            .map(|&p| mpdccp_lab::bench::cpu_s(p))
            .sum::<f64>()
    };
    let c0 = cpu(&pids);
    std::thread::sleep(Duration::from_secs(2));
    let used = (cpu(&pids) - c0) / 2.0;
    assert!(used < 0.25, "idle daemons used {used:.2} of a core");
}

/// Upstream probes (client → server), 300 ms to drain at the end.
fn start_stream(t: &Topology, rate_bps: u64, secs: f64, port: u16) -> (ProbeStream, Instant) {
    t.start_probe_stream(false, rate_bps, secs, port)
        .expect("probe stream")
}

fn finish(s: ProbeStream) -> (probe::SendLog, Vec<Arrival>) {
    s.finish(Duration::from_millis(300)).expect("probe stream")
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_probe_stream_exactly_once_over_two_paths() {
    let _g = crate::support::serial();
    if !require_root("tunnel_probe_stream_exactly_once_over_two_paths") {
        return;
    }
    let mut t = two_paths(5, 20);
    // Round robin puts every other packet on the other path: reordering is exercised.
    let mut opts = TunnelOpts::default();
    opts.tunnel.settings.scheduler = SchedulerKind::Rr;
    t.start_tunnel(exe(), &opts).expect("tunnel");
    let (s, _) = start_stream(&t, 8_000_000, 3.0, 9001);
    let (log, arr) = finish(s);
    let tally = probe::tally(&arr, 1, log.sent.len() as u64);
    assert!(log.sent.len() > 2500, "sent {}", log.sent.len());
    assert_eq!(tally.duplicates, 0, "{tally:?}");
    assert_eq!(tally.lost, 0, "{tally:?}");
    assert_eq!(tally.delivered, log.sent.len() as u64);
    // Both paths carried data.
    let st = t.status(false).expect("client status");
    for p in st["connections"][0]["paths"].as_array().expect("paths") {
        assert!(
            p["stats"]["tx_data_pkts"].as_u64().unwrap_or(0) > 500,
            "{p}"
        );
    }
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_survives_interface_down_and_rejoins() {
    let _g = crate::support::serial();
    if !require_root("tunnel_survives_interface_down_and_rejoins") {
        return;
    }
    let mut t = two_paths(5, 20);
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel");
    let (s, start) = start_stream(&t, 4_000_000, 6.0, 9002);
    std::thread::sleep(Duration::from_secs(2));
    // Path 1 (the CPF primary, carrying everything) loses its interface.
    t.client
        .ip(&["link", "set", "p1", "down"])
        .expect("link down");
    std::thread::sleep(Duration::from_millis(300));
    let st = t.status(false).expect("status");
    assert_eq!(st["daemon"]["path_down_events"], 1, "{st}");
    std::thread::sleep(Duration::from_millis(1700));
    // Back up; as a DHCP client would, restore the route the kernel removed.
    t.client.ip(&["link", "set", "p1", "up"]).expect("link up");
    t.client
        .ip(&["route", "replace", "10.1.2.0/24", "via", "10.1.1.1"])
        .expect("route");
    wait_for(Duration::from_secs(4), || t.established_paths() >= 2).unwrap_or_else(|_| {
        panic!(
            "p1 did not rejoin: {}\n{}",
            t.status(false).unwrap_or_default(),
            t.log_tail(false)
        )
    });
    let (log, arr) = finish(s);
    let st = t.status(false).expect("status");
    assert!(
        st["daemon"]["joins_started"].as_u64().unwrap_or(0) >= 3,
        "{st}"
    );
    // Delivery per phase, by send time: before the outage, while p1 is down
    // (from 0.2 s after it went down), after it came back.
    let phase = |from: f64, to: f64| {
        let in_phase = |t: Instant| {
            let s = (t - start).as_secs_f64();
            s >= from && s < to
        };
        let sent = log.sent.iter().filter(|(t, _)| in_phase(*t)).count();
        let got = arr.iter().filter(|a| in_phase(a.sent)).count();
        (sent, got)
    };
    for (from, to) in [(0.0, 1.9), (2.2, 3.9), (4.5, 6.0)] {
        let (sent, got) = phase(from, to);
        assert!(sent > 100, "{from}..{to}: sent {sent}");
        assert!(
            got as f64 >= 0.98 * sent as f64,
            "{from}..{to} s: delivered {got} of {sent}"
        );
    }
    let tally = probe::tally(&arr, 1, log.sent.len() as u64);
    assert_eq!(tally.duplicates, 0, "{tally:?}");
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_carries_kernel_tcp_at_80_percent_of_two_paths() {
    let _g = crate::support::serial();
    if !require_root("tunnel_carries_kernel_tcp_at_80_percent_of_two_paths") {
        return;
    }
    let mut t = two_paths(5, 10);
    let mut opts = TunnelOpts {
        log: "warn".into(),
        ..Default::default()
    };
    opts.tunnel.settings.scheduler = SchedulerKind::Rr;
    t.start_tunnel(exe(), &opts).expect("tunnel");
    let dst = SERVER_TUN_V4.to_string();
    // A failed run is repeated only when an emulator was late by more than
    // the paths' 5 ms one-way delay: a stalled host, not the tunnel.
    let mbps = t.measure_on_time(
        2,
        5_000,
        |t| {
            let v = mpdccp_lab::iperf::run(t, &dst, 5201, &["-t", "8", "-O", "2"]).expect("iperf3");
            mpdccp_lab::iperf::received_mbps(&v)
        },
        |&mbps| mbps >= 16.0,
    );
    let st = t.status(false).unwrap_or_default();
    assert!(
        mbps >= 16.0,
        "TCP through 2 x 10 Mbit/s: {mbps:.2} Mbit/s, want >= 16 (80 %)\n{st}"
    );
    eprintln!("kernel TCP through the tunnel over 2 x 10 Mbit/s: {mbps:.2} Mbit/s");
    // The offloaded data path was used and nothing was refused: the
    // client's TUN handed out TCP super-packets (TSO) that were split
    // without error, and every TUN write on both ends succeeded.
    let sst = t.status(true).unwrap_or_default();
    let (c, s) = (&st["daemon"], &sst["daemon"]);
    assert!(
        c["tun_offload"]["tso_frames"].as_u64().unwrap_or(0) > 0,
        "no TSO frames read from the client TUN: {c}"
    );
    assert_eq!(c["tun_offload"]["split_errors"], 0, "{c}");
    assert_eq!(c["tun_tx_errors"], 0, "{c}");
    assert_eq!(s["tun_tx_errors"], 0, "{s}");
    eprintln!(
        "client TSO frames {} -> {} segments; server coalesced {} segments into {} writes",
        c["tun_offload"]["tso_frames"],
        c["tun_offload"]["tso_segments"],
        s["tun_offload"]["gro_segments"],
        s["tun_offload"]["gro_frames"]
    );
}

/// Sends datagrams to the server port from the client namespace and returns
/// what came back within `wait`.
fn poke(t: &Topology, datagrams: Vec<Vec<u8>>, wait: Duration) -> Vec<Vec<u8>> {
    let dst = SocketAddr::new(t.paths[1].server_ip.into(), SERVER_PORT);
    spawn_in_netns(t.client.name(), move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.set_read_timeout(Some(Duration::from_millis(50)))?;
        for d in &datagrams {
            s.send_to(d, dst)?;
        }
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + wait;
        let mut buf = [0u8; 2048];
        while std::time::Instant::now() < deadline {
            if let Ok((n, _)) = s.recv_from(&mut buf) {
                got.push(buf[..n].to_vec());
            }
        }
        Ok(got)
    })
    .join()
    .expect("thread")
    .expect("poke")
}

fn emit(seg: &mut mpdccp_proto::conn::codec::Segment) -> Vec<u8> {
    let mut buf = vec![0u8; 512];
    let un = "0.0.0.0".parse().expect("ip");
    let n = seg.emit(&mut buf, (un, un)).expect("emit");
    buf.truncate(n);
    buf
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn hostile_input_is_counted_and_harmless() {
    use mpdccp_proto::conn::codec::{FeatureNum, MpJoin, PacketType, Segment};
    use mpdccp_proto::wire::option::kind;
    use rand::{Rng, SeedableRng};

    let _g = crate::support::serial();
    if !require_root("hostile_input_is_counted_and_harmless") {
        return;
    }
    let mut t = two_paths(2, 50);
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel");
    let before = t.status(true).expect("status");
    let token = before["connections"][0]["local_ci"]
        .as_u64()
        .expect("server CI") as u32;

    // 1. Random garbage of random lengths (0..1600 bytes), seeded.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let garbage: Vec<Vec<u8>> = (0..500)
        .map(|_| {
            let n = rng.gen_range(0..1600);
            (0..n).map(|_| rng.gen()).collect()
        })
        .collect();
    // In bursts the emulated link's buffer can take, so every datagram arrives.
    for chunk in garbage.chunks(50) {
        poke(&t, chunk.to_vec(), Duration::from_millis(30));
    }

    // 2. A forged MP_JOIN Request for an unknown token, and one for the real
    //    connection followed by an Ack whose MP_HMAC is wrong.
    let join = |token: u32, seq: u64| {
        let mut seg = Segment::new(PacketType::Request, seq);
        seg.service_code = mpdccp_proto::conn::SERVICE_CODE;
        // Multipath Capable as RFC 9897 §3.2.2 has it on a join (a join
        // without it is refused with Reset 5 before any Response).
        seg.push_feat(kind::CHANGE_R, FeatureNum::MultipathCapable, Some(0));
        seg.mp.join = Some(MpJoin {
            addr_id: 5,
            token,
            nonce: 0x1234_5678,
        });
        emit(&mut seg)
    };
    poke(
        &t,
        vec![join(token ^ 0xdead_beef, 100)],
        Duration::from_millis(200),
    );
    // The real token, from one socket: Request, the server's Response, then
    // the Ack whose MP_HMAC cannot be right without the connection's keys.
    let req = join(token, 200);
    let dst = SocketAddr::new(t.paths[1].server_ip.into(), SERVER_PORT);
    let resp_seen = spawn_in_netns(t.client.name(), move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.set_read_timeout(Some(Duration::from_millis(500)))?;
        s.send_to(&req, dst)?;
        let mut buf = [0u8; 2048];
        let (n, _) = s.recv_from(&mut buf)?;
        let Ok(resp) = Segment::parse(&buf[..n], None) else {
            return Ok(false);
        };
        if resp.ptype != PacketType::Response {
            return Ok(false);
        }
        let mut ack = Segment::new(PacketType::Ack, 201);
        ack.ack = Some(resp.seq);
        ack.src_port = resp.dst_port;
        ack.dst_port = resp.src_port;
        ack.mp.hmac = Some([0x5a; 20]);
        s.send_to(&emit(&mut ack), dst)?;
        std::thread::sleep(Duration::from_millis(100));
        Ok(true)
    })
    .join()
    .expect("thread")
    .expect("forged join exchange");
    assert!(
        resp_seen,
        "the server answers a join Request with a Response"
    );

    let after = t.status(true).expect("status");
    let ep = &after["endpoint"];
    let conn = &after["connections"][0]["stats"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let rejected = n(&ep["malformed"]) + n(&ep["unknown_remote"]) + n(&ep["unknown_token"]);
    assert!(rejected >= 400, "garbage not counted: {after}");
    assert!(
        n(&ep["unknown_token"]) >= 1,
        "forged join (unknown token) not counted: {ep}"
    );
    assert!(
        n(&conn["join_bad_hmac"]) >= 1,
        "forged join for the real connection not rejected: {after}"
    );
    eprintln!(
        "hostile input: endpoint {ep}, join_bad_hmac {}",
        conn["join_bad_hmac"]
    );
    // The real connection is unharmed: same connection, both paths up, ping works.
    assert_eq!(
        after["connections"].as_array().map(|a| a.len()),
        Some(1),
        "{after}"
    );
    assert_eq!(
        after["connections"][0]["local_ci"],
        before["connections"][0]["local_ci"]
    );
    assert_eq!(t.established_paths(), 2);
    let out = ping_ok(&t, &SERVER_TUN_V4.to_string(), 5).expect("ping after attack");
    assert!(out.contains(" 0% packet loss"), "{out}");
}

/// Paths of a status document's first connection, and how many are not
/// closed.
fn path_counts(st: &serde_json::Value) -> (usize, usize) {
    let ps = st["connections"][0]["paths"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let live = ps.iter().filter(|p| p["state"] != "Closed").count();
    (ps.len(), live)
}

/// One interface taken down and up twelve times: every rejoin works (the
/// server closes the withdrawn subflow on the client's MP_REMOVEADDR, so
/// `max_paths` = 8 is never reached), both ends' path tables stay bounded,
/// and a probe stream running throughout is never duplicated.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tunnel_interface_flaps_twelve_times_without_leaking_paths() {
    const CYCLES: u32 = 12;
    let _g = crate::support::serial();
    if !require_root("tunnel_interface_flaps_twelve_times_without_leaking_paths") {
        return;
    }
    let mut t = two_paths(5, 20);
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel");
    let secs = f64::from(CYCLES) * 2.5 + 2.0;
    let (s, _) = start_stream(&t, 1_000_000, secs, 9003);
    let mut max_len = (0, 0);
    for k in 1..=CYCLES {
        t.client
            .ip(&["link", "set", "p1", "down"])
            .expect("link down");
        // The server hears of it over p0 (MP_REMOVEADDR) and closes its side.
        wait_for(Duration::from_secs(3), || {
            t.status(true).is_ok_and(|st| path_counts(&st).1 == 1)
        })
        .unwrap_or_else(|_| {
            panic!(
                "cycle {k}: server kept the dead subflow: {}\n{}",
                t.status(true).unwrap_or_default(),
                t.log_tail(true)
            )
        });
        t.client.ip(&["link", "set", "p1", "up"]).expect("link up");
        t.client
            .ip(&["route", "replace", "10.1.2.0/24", "via", "10.1.1.1"])
            .expect("route");
        wait_for(Duration::from_secs(5), || {
            t.established_paths() >= 2 && t.status(true).is_ok_and(|st| path_counts(&st).1 == 2)
        })
        .unwrap_or_else(|_| {
            panic!(
                "cycle {k}: p1 did not rejoin: {}\n{}\n{}",
                t.status(false).unwrap_or_default(),
                t.log_tail(false),
                t.log_tail(true)
            )
        });
        let (c, s) = (
            t.status(false).expect("client status"),
            t.status(true).expect("server status"),
        );
        max_len.0 = max_len.0.max(path_counts(&c).0);
        max_len.1 = max_len.1.max(path_counts(&s).0);
        std::thread::sleep(Duration::from_millis(500));
    }
    let (log, arr) = finish(s);
    let tally = probe::tally(&arr, 1, log.sent.len() as u64);
    assert_eq!(tally.duplicates, 0, "{tally:?}");
    let c = t.status(false).expect("client status");
    let s = t.status(true).expect("server status");
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
    assert_eq!(n(&s["connections"][0]["stats"]["join_too_busy"]), 0, "{s}");
    assert!(
        n(&s["connections"][0]["stats"]["paths_removed_by_peer"]) >= u64::from(CYCLES),
        "{s}"
    );
    assert!(
        n(&c["connections"][0]["stats"]["removeaddr_sent"]) >= u64::from(CYCLES),
        "{c}"
    );
    assert!(
        n(&c["daemon"]["joins_started"]) >= u64::from(CYCLES) + 2,
        "{c}"
    );
    // Closed subflows linger 1 s: 2 live plus at most 2 closed.
    assert!(max_len.0 <= 4 && max_len.1 <= 4, "path tables {max_len:?}");
    assert_eq!(
        s["connections"].as_array().map(|a| a.len()),
        Some(1),
        "one connection throughout: {s}"
    );
    let delivered = tally.delivered as f64 / log.sent.len().max(1) as f64;
    eprintln!(
        "{CYCLES} flaps: path tables max client {} server {}; probes delivered {:.1} % ({} of {}), 0 duplicates",
        max_len.0,
        max_len.1,
        delivered * 100.0,
        tally.delivered,
        log.sent.len()
    );
    assert!(delivered > 0.9, "{tally:?}");
    let out = ping_ok(&t, &SERVER_TUN_V4.to_string(), 5).expect("ping after flapping");
    assert!(out.contains(" 0% packet loss"), "{out}");
}

/// A path that dies without either end noticing an interface change (the
/// router's server-side link goes down: both daemons' interfaces stay up,
/// no MP_REMOVEADDR can be sent): keepalives go unanswered, both ends
/// expire the silent subflow after `path_idle_timeout_ms`, the connection
/// carries on over the other path, and when the router link returns the
/// client's rejoin succeeds.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn silent_path_expires_at_both_ends_and_rejoins() {
    let _g = crate::support::serial();
    if !require_root("silent_path_expires_at_both_ends_and_rejoins") {
        return;
    }
    let mut t = two_paths(5, 20);
    let mut opts = TunnelOpts::default();
    opts.tunnel.keepalive_ms = 500;
    opts.tunnel.path_idle_timeout_ms = 3000;
    t.start_tunnel(exe(), &opts).expect("tunnel");
    let cut = std::time::Instant::now();
    t.routers[1].ip(&["link", "set", "s", "down"]).expect("cut");
    wait_for(Duration::from_secs(8), || {
        t.status(true).is_ok_and(|st| path_counts(&st).1 == 1)
    })
    .unwrap_or_else(|_| {
        panic!(
            "server did not expire the silent subflow: {}",
            t.status(true).unwrap_or_default()
        )
    });
    let expired_after = cut.elapsed();
    let s = t.status(true).expect("server status");
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
    assert_eq!(n(&s["connections"][0]["stats"]["paths_expired"]), 1, "{s}");
    assert_eq!(
        n(&s["connections"][0]["stats"]["paths_removed_by_peer"]),
        0,
        "{s}"
    );
    assert!(
        n(&s["connections"][0]["stats"]["keepalives_sent"]) >= 2,
        "{s}"
    );
    // The client expires its side too and starts rejoining.
    wait_for(Duration::from_secs(5), || {
        t.status(false)
            .is_ok_and(|c| c["configured_paths"][1]["lost_subflows"].as_u64() == Some(1))
    })
    .unwrap_or_else(|_| panic!("client: {}", t.status(false).unwrap_or_default()));
    let out = ping_ok(&t, &SERVER_TUN_V4.to_string(), 5).expect("ping over the other path");
    assert!(out.contains(" 0% packet loss"), "{out}");
    t.routers[1]
        .ip(&["link", "set", "s", "up"])
        .expect("restore");
    let back = std::time::Instant::now();
    wait_for(Duration::from_secs(25), || {
        t.established_paths() >= 2 && t.status(true).is_ok_and(|st| path_counts(&st).1 == 2)
    })
    .unwrap_or_else(|_| {
        panic!(
            "no rejoin after the link returned: {}\n{}",
            t.status(false).unwrap_or_default(),
            t.log_tail(false)
        )
    });
    let rejoined_after = back.elapsed();
    let s = t.status(true).expect("server status");
    assert_eq!(s["connections"].as_array().map(|a| a.len()), Some(1), "{s}");
    assert!(path_counts(&s).0 <= 3, "{s}");
    eprintln!(
        "silent path: server expired it {:.1} s after the cut (timeout 3 s); rejoined {:.1} s after the link returned",
        expired_after.as_secs_f64(),
        rejoined_after.as_secs_f64()
    );
}
