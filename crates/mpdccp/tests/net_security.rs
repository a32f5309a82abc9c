//! Security properties of the daemons that need no authenticated mode
//! (issue #11): the listening port is exclusive, so a second server on the
//! same port fails to start, with an error naming the address, and the first
//! keeps its port.
//!
//! Needs root (a network namespace and a TUN). Without it the test prints a
//! skip notice, or fails when `CI` is set.

use std::path::Path;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, unique_prefix, Netns};
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
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn second_server_on_the_same_port_fails_and_names_the_address() {
    if !require_root("second_server_on_the_same_port_fails_and_names_the_address") {
        return;
    }
    second_server_fails(1, 1, "sec");
}

/// The same with `workers = 2` (a `SO_REUSEPORT` group) on either side:
/// neither a single server nor another sharded one gets in.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn second_server_next_to_a_sharded_one_fails_too() {
    if !require_root("second_server_next_to_a_sharded_one_fails_too") {
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

/// Binds `[::]:port` IPv6-only in namespace `ns` (what a local user would
/// do beside a v4 server); the bind's result.
fn bind_v6only(ns: &str, port: u16) -> std::io::Result<()> {
    mpdccp_lab::netns::spawn_in_netns(ns, move || {
        // SAFETY: plain socket(2)/setsockopt(2)/bind(2) on our own fd,
        // closed before returning; the pointers outlive each call.
        unsafe {
            let fd = libc::socket(libc::AF_INET6, libc::SOCK_DGRAM, 0);
            if fd < 0 {
                return Ok(Err(std::io::Error::last_os_error()));
            }
            let one: libc::c_int = 1;
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            );
            let mut sa: libc::sockaddr_in6 = std::mem::zeroed();
            sa.sin6_family = libc::AF_INET6 as u16;
            sa.sin6_port = port.to_be();
            let r = libc::bind(
                fd,
                (&sa as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as u32,
            );
            let res = if r == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            };
            libc::close(fd);
            Ok(res)
        }
    })
    .join()
    .expect("thread")
    .expect("namespace")
}

/// Issue #28: a v4 server holds its port in IPv6 too, so a local user
/// cannot bind `[::]:port` (IPv6-only) beside it and collect the Inits of
/// clients that come over IPv6. Without the server the same bind works
/// (the test can fail).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn the_port_is_held_in_ipv6_beside_a_v4_server() {
    if !require_root("the_port_is_held_in_ipv6_beside_a_v4_server") {
        return;
    }
    let tag = "v6h";
    let ns = Netns::new(&format!("{}{tag}", unique_prefix())).expect("namespace");
    let dir = std::env::temp_dir().join(format!("mpdccp-{}{tag}", unique_prefix()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    assert!(
        bind_v6only(ns.name(), 6773).is_ok(),
        "[::]:6773 free before the server"
    );
    let cfg = dir.join("server.toml");
    std::fs::write(
        &cfg,
        server_config_workers(&dir, &format!("{tag}0"), "0.0.0.0:6773", 1),
    )
    .expect("config");
    let exe_s = exe().to_string_lossy().into_owned();
    let mut server = ns
        .spawn_logged(
            &exe_s,
            &["server", "--config", &cfg.to_string_lossy()],
            &dir.join("server.log"),
        )
        .expect("server");
    wait_for(Duration::from_secs(10), || {
        dir.join(format!("{tag}0.sock")).exists()
    })
    .expect("server listening");
    let squat = bind_v6only(ns.name(), 6773);
    assert_eq!(
        squat.as_ref().map_err(std::io::Error::kind),
        Err(std::io::ErrorKind::AddrInUse),
        "[::]:6773 beside the v4 server: {squat:?}"
    );
    server.stop();
    drop(server);
    assert!(bind_v6only(ns.name(), 6773).is_ok(), "free again after");
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
