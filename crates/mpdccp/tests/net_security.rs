//! Security properties of the daemons that need no authenticated mode
//! (issue #11): the listening port is exclusive, so a second server on the
//! same port fails to start, with an error naming the address, and the first
//! keeps its port.
//!
//! Needs root (a network namespace and a TUN). Without it the test prints a
//! skip notice, or fails when `CI` is set.

use std::path::Path;
use std::time::Duration;

use mpdccp_lab::netns::{root_or_skip, unique_prefix, Netns};
use mpdccp_lab::topo::wait_for;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mpdccp"))
}

fn server_config_workers(dir: &Path, tun: &str, listen: &str, workers: usize) -> String {
    format!(
        "listen = \"{listen}\"\nauth = \"open\"\nseed = 1\nworkers = {workers}\n[tun]\nname = \"{tun}\"\naddresses = [\"10.98.0.1/24\"]\n[ops]\ncontrol_socket = \"{}\"\n",
        dir.join(format!("{tun}.sock")).display()
    )
}

#[test]
fn second_server_on_the_same_port_fails_and_names_the_address() {
    if !root_or_skip("second_server_on_the_same_port_fails_and_names_the_address") {
        return;
    }
    second_server_fails(1, 1, "sec");
}

/// The same with `workers = 2` (a `SO_REUSEPORT` group) on either side:
/// neither a single server nor another sharded one gets in.
#[test]
fn second_server_next_to_a_sharded_one_fails_too() {
    if !root_or_skip("second_server_next_to_a_sharded_one_fails_too") {
        return;
    }
    second_server_fails(2, 1, "shs");
    second_server_fails(2, 2, "shd");
    second_server_fails(1, 2, "shx");
}

fn second_server_fails(first_workers: usize, second_workers: usize, tag: &str) {
    let ns = Netns::new(&format!("{}{tag}", unique_prefix())).expect("namespace");
    let dir = std::env::temp_dir().join(format!("mpdccp-{}{tag}", unique_prefix()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let listen = "127.0.0.1:6773";
    let first_cfg = dir.join("first.toml");
    std::fs::write(
        &first_cfg,
        server_config_workers(&dir, &format!("{tag}0"), listen, first_workers),
    )
    .expect("config");
    let exe_s = exe().to_string_lossy().into_owned();
    let mut first = ns
        .spawn_logged(
            &exe_s,
            &["server", "--config", &first_cfg.to_string_lossy()],
            &dir.join("first.log"),
        )
        .expect("first server");
    wait_for(Duration::from_secs(10), || {
        dir.join(format!("{tag}0.sock")).exists()
    })
    .expect("first server listening");

    // Same address, and the wildcard address, on another TUN: both refused.
    for (i, addr) in [listen, "0.0.0.0:6773"].into_iter().enumerate() {
        let cfg = dir.join(format!("second{i}.toml"));
        std::fs::write(
            &cfg,
            server_config_workers(&dir, &format!("{tag}{}", i + 1), addr, second_workers),
        )
        .expect("config");
        let log = dir.join(format!("second{i}.log"));
        let mut second = ns
            .spawn_logged(
                &exe_s,
                &["server", "--config", &cfg.to_string_lossy()],
                &log,
            )
            .expect("run second server");
        // Bounded: a second server that did start is stopped, not waited for.
        let status = second.wait_timeout(Duration::from_secs(5));
        second.stop();
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            status.is_some_and(|s| !s.success()),
            "second server on {addr} started: {stderr}"
        );
        assert!(
            stderr.contains(&format!("cannot bind udp {addr}")),
            "error does not name {addr}: {stderr}"
        );
        assert!(!dir.join(format!("{tag}{}.sock", i + 1)).exists());
    }
    // The first server still runs and owns the port.
    assert!(
        first.try_wait().expect("wait").is_none(),
        "first server died"
    );
    let st = first.stop();
    assert!(st.is_some());
    drop(first);
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
