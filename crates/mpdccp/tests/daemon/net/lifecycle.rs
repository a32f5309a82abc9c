//! The daemons' life cycle as an operator sees it,
//! end to end between network namespaces:
//! * a server listening on a wildcard address (`0.0.0.0`, `[::]`) with two
//!   addresses on one interface answers each path from the address its
//!   client sent to, so both paths come up (the client drops answers from
//!   any other address);
//! * SIGTERM ends either daemon within 0.5 s, and a new daemon started at
//!   once (within 1 s of the stop) gets the TUN and carries traffic.
//!
//! Needs root. Without it each test prints a skip notice, or fails when
//! `CI` is set. The tests run one at a time (a lock) to keep timing
//! meaningful.

use crate::support::exe;
use std::net::SocketAddr;
use std::time::{Duration, Instant as StdInstant};

use mpdccp_lab::netns::{require_root, Proc};
use mpdccp_lab::topo::{wait_for, Topology, TunnelOpts, SERVER_PORT, SERVER_TUN_V4};
use mpdccp_net::daemon::config::{AuthMode, ClientPath};
use serde_json::Value;

/// SIGTERM to exit, the bound the docs promise.
const SIGTERM_EXIT: Duration = Duration::from_millis(500);

/// Starts one daemon from the config `start_tunnel` (or the test) wrote.
fn spawn_daemon(t: &Topology, server: bool) -> Proc {
    let role = if server { "server" } else { "client" };
    let cfg = t.dir.join(format!("{role}.toml"));
    let ns = if server { &t.server } else { &t.client };
    ns.spawn_logged(
        "env",
        &[
            "RUST_LOG=info",
            &exe().to_string_lossy(),
            role,
            "--config",
            &cfg.to_string_lossy(),
        ],
        &t.log_file(server),
    )
    .expect("daemon")
}

/// SIGTERM and the time to exit (status checked).
fn stop_timed(p: &mut Proc, what: &str) -> Duration {
    let t0 = StdInstant::now();
    let st = p.stop().expect("exit status");
    let took = t0.elapsed();
    assert!(st.success(), "{what} exit status {st:?}");
    took
}

fn ping_ok(t: &Topology, count: &str) -> String {
    let out = t
        .client
        .output(
            "ping",
            &[
                "-c",
                count,
                "-i",
                "0.05",
                "-W",
                "2",
                "-q",
                &SERVER_TUN_V4.to_string(),
            ],
        )
        .expect("ping through the tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    out
}

fn paths(st: &Value) -> Vec<Value> {
    st["connections"][0]["paths"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The wildcard test for one address family: the server's path interface
/// gets a second address, and the client runs two paths on its one
/// interface, one to each server address.
fn wildcard_listen(ipv6: bool) {
    let mut t = Topology::build(1).expect("topology");
    let (server_a, server_b, listen) = if ipv6 {
        // IPv6 through the router: addresses on every hop, forwarding on.
        let r = &t.routers[0];
        r.sysctl("net.ipv6.conf.all.forwarding", "1").unwrap();
        r.ip(&["-6", "addr", "add", "fd01:1::1/64", "dev", "c", "nodad"])
            .unwrap();
        r.ip(&["-6", "addr", "add", "fd01:2::1/64", "dev", "s", "nodad"])
            .unwrap();
        t.client
            .ip(&["-6", "addr", "add", "fd01:1::2/64", "dev", "p1", "nodad"])
            .unwrap();
        t.client
            .ip(&["-6", "route", "add", "fd01:2::/64", "via", "fd01:1::1"])
            .unwrap();
        for a in ["fd01:2::2/64", "fd01:2::3/64"] {
            t.server
                .ip(&["-6", "addr", "add", a, "dev", "p1", "nodad"])
                .unwrap();
        }
        t.server
            .ip(&["-6", "route", "add", "fd01:1::/64", "via", "fd01:2::1"])
            .unwrap();
        ("fd01:2::2", "fd01:2::3", format!("[::]:{SERVER_PORT}"))
    } else {
        t.server
            .ip(&["addr", "add", "10.1.2.3/24", "dev", "p1"])
            .unwrap();
        ("10.1.2.2", "10.1.2.3", format!("0.0.0.0:{SERVER_PORT}"))
    };
    let (mut server, mut client) = t.daemon_configs(&TunnelOpts::default());
    server.listen = listen.parse().unwrap();
    client.path = [("a", server_a), ("b", server_b)]
        .iter()
        .map(|(name, ip)| ClientPath {
            name: name.to_string(),
            interface: "p1".into(),
            remote: Some(SocketAddr::new(ip.parse().unwrap(), SERVER_PORT)),
            ..ClientPath::default()
        })
        .collect();
    std::fs::write(t.dir.join("server.toml"), toml::to_string(&server).unwrap()).unwrap();
    std::fs::write(t.dir.join("client.toml"), toml::to_string(&client).unwrap()).unwrap();
    let s = spawn_daemon(&t, true);
    t.procs.push(s);
    wait_for(Duration::from_secs(10), || t.control_socket(true).exists()).expect("server up");
    let c = spawn_daemon(&t, false);
    t.procs.push(c);
    wait_for(Duration::from_secs(15), || t.established_paths() >= 2).unwrap_or_else(|_| {
        panic!(
            "both paths to {server_a} and {server_b} on a wildcard server:\nclient:\n{}\nserver:\n{}",
            t.log_tail(false),
            t.log_tail(true)
        )
    });
    ping_ok(&t, "10");
    let st = t.status(false).expect("client status");
    assert_eq!(st["daemon"]["udp_rx_foreign"], 0, "{}", st["daemon"]);
    let remotes: Vec<String> = paths(&st)
        .iter()
        .map(|p| p["remote"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(remotes.iter().any(|r| r.contains(server_a)), "{remotes:?}");
    assert!(remotes.iter().any(|r| r.contains(server_b)), "{remotes:?}");
    // The server sees one client with two remote addresses (ports differ).
    let sst = t.status(true).expect("server status");
    let peer = &sst["connections"][0]["peer"];
    assert_eq!(peer["remotes"].as_array().map(Vec::len), Some(2), "{peer}");
    eprintln!("wildcard {listen}: paths to {server_a} and {server_b} both Active; peer {peer}");
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn wildcard_ipv4_server_answers_each_path_from_its_address() {
    let _g = crate::support::serial();
    if !require_root("wildcard_ipv4_server_answers_each_path_from_its_address") {
        return;
    }
    wildcard_listen(false);
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn wildcard_ipv6_server_answers_each_path_from_its_address() {
    let _g = crate::support::serial();
    if !require_root("wildcard_ipv6_server_answers_each_path_from_its_address") {
        return;
    }
    wildcard_listen(true);
}

/// SIGTERM ends the client and then the server within 0.5 s each
/// (graceful: MP_CLOSE answered within a round trip); a daemon started
/// right after its predecessor exited opens the same TUN (no `Device or
/// resource busy`) and the tunnel carries pings again.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn sigterm_within_half_a_second_and_restart_within_one() {
    let _g = crate::support::serial();
    if !require_root("sigterm_within_half_a_second_and_restart_within_one") {
        return;
    }
    let mut t = Topology::emulated(exe(), 2, 5, 50).expect("topology");
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel up on both paths");
    ping_ok(&t, "5");
    for server in [false, true] {
        let what = if server { "server" } else { "client" };
        // `start_tunnel` pushed the server, then the client; restarts push
        // at the end: find the daemon by its role's log.
        let i = t.procs.len() - if server { 2 } else { 1 };
        let mut old = t.procs.remove(i);
        let took = stop_timed(&mut old, what);
        let stopped = StdInstant::now();
        let p = spawn_daemon(&t, server);
        if server {
            t.procs.insert(i, p);
        } else {
            t.procs.push(p);
        }
        wait_for(Duration::from_secs(15), || {
            t.status(false)
                .is_ok_and(|st| paths(&st).iter().filter(|p| p["state"] == "Active").count() >= 2)
        })
        .unwrap_or_else(|_| {
            panic!(
                "{what} restart: tunnel not back\nclient:\n{}\nserver:\n{}",
                t.log_tail(false),
                t.log_tail(true)
            )
        });
        let back = stopped.elapsed();
        let log = t.log_tail(server);
        assert!(!log.contains("busy"), "{what}: {log}");
        ping_ok(&t, "10");
        eprintln!("{what}: SIGTERM → exit in {took:?}; restarted at once, both paths Active {back:?} after the stop");
        assert!(
            took <= SIGTERM_EXIT,
            "{what} took {took:?} to exit on SIGTERM\n{}",
            t.log_tail(server)
        );
    }
}

/// A gateway crash: the server is killed (SIGKILL) under traffic and
/// restarted at once. Authenticated mode drops joins to the connection the
/// new server does not know without an answer, so the client must see for
/// itself that its connection is gone (`daemon/dead_peer.rs`) and start a
/// new handshake: the tunnel carries pings again within 2 s of the new
/// server listening.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn kill9_and_restart_the_tunnel_is_back_within_two_seconds() {
    kill9_and_restart(
        AuthMode::Authenticated,
        "kill9_and_restart_the_tunnel_is_back_within_two_seconds",
    );
}

/// The same in protected mode, where every packet after the handshake is
/// sealed: the restarted server's answers to the old subflows are nothing
/// the client accepts, and the silence rule recovers as before.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn kill9_and_restart_protected_the_tunnel_is_back_within_two_seconds() {
    kill9_and_restart(
        AuthMode::Protected,
        "kill9_and_restart_protected_the_tunnel_is_back_within_two_seconds",
    );
}

fn kill9_and_restart(auth: AuthMode, name: &str) {
    let _g = crate::support::serial();
    if !require_root(name) {
        return;
    }
    let mut t = Topology::emulated(exe(), 2, 5, 50).expect("topology");
    let opts = TunnelOpts {
        auth,
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");
    ping_ok(&t, "5");
    // Traffic through the crash: 50 pings a second until the end.
    let pinger = t
        .client
        .spawn_logged(
            "ping",
            &["-i", "0.02", "-W", "1", "-D", &SERVER_TUN_V4.to_string()],
            &t.dir.join("ping.log"),
        )
        .expect("ping");
    std::thread::sleep(Duration::from_millis(500));
    let i = t.procs.len() - 2;
    let mut old = t.procs.remove(i);
    let killed = StdInstant::now();
    old.kill().expect("server killed");
    drop(old);
    let p = spawn_daemon(&t, true);
    t.procs.insert(i, p);
    let sock = t.dir.join("server.sock");
    wait_for(Duration::from_secs(10), || {
        t.status(true).is_ok_and(|st| st["role"] == "server")
    })
    .expect("the new server answers status");
    let listening = StdInstant::now();
    let back = wait_for(Duration::from_secs(30), || {
        t.client
            .output(
                "ping",
                &["-c", "1", "-W", "0.2", &SERVER_TUN_V4.to_string()],
            )
            .is_ok()
    });
    let outage = killed.elapsed();
    let after_listen = listening.elapsed();
    drop(pinger);
    let _ = sock;
    back.unwrap_or_else(|_| {
        panic!(
            "tunnel not back 30 s after the restart\nclient:\n{}\nserver:\n{}",
            t.log_tail(false),
            t.log_tail(true)
        )
    });
    let st = t.status(false).expect("client status");
    eprintln!(
        "{auth:?}: kill -9 + restart: new server answering {:.2} s after the kill; pings through the tunnel again {:.2} s after that ({:.2} s in all); client dead_reconnects = {}",
        (listening - killed).as_secs_f64(),
        after_listen.as_secs_f64(),
        outage.as_secs_f64(),
        st["daemon"]["dead_reconnects"]
    );
    assert!(
        after_listen <= Duration::from_secs(2),
        "back {after_listen:?} after the new server listened\nclient:\n{}",
        t.log_tail(false)
    );
}
