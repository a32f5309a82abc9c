//! Security properties of the daemons that need no authenticated mode:
//! the listening port is exclusive, so a second server on the
//! same port fails to start, with an error naming the address, and the first
//! keeps its port.
//!
//! Needs root (a network namespace and a TUN). Without it the test prints a
//! skip notice, or fails when `CI` is set.

// Raw sockets and namespaces through libc: an exception to the
// workspace's `unsafe_code = "deny"`.
#![allow(unsafe_code)]

use crate::support::exe;
use std::path::Path;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, unique_prefix, Netns};
use mpdccp_lab::topo::wait_for;

fn server_config_workers(dir: &Path, tun: &str, listen: &str, workers: usize) -> String {
    format!(
        "listen = \"{listen}\"\nauth = \"open\"\nseed = 1\nworkers = {workers}\n[tun]\nname = \"{tun}\"\naddresses = [\"10.98.0.1/24\"]\n[ops]\ncontrol_socket = \"{}\"\n",
        dir.join(format!("{tun}.sock")).display()
    )
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn second_server_on_the_same_port_fails_and_names_the_address() {
    let _serial = crate::support::serial();
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
    let _serial = crate::support::serial();
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

/// A v4 server holds its port in IPv6 too, so a local user
/// cannot bind `[::]:port` (IPv6-only) beside it and collect the Inits of
/// clients that come over IPv6. Without the server the same bind works
/// (the test can fail).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn the_port_is_held_in_ipv6_beside_a_v4_server() {
    let _serial = crate::support::serial();
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

/// systemd socket activation (docs/SECURITY.md §7): the port is
/// bound before the server starts and handed over as systemd does — the
/// socket at fd 3, `LISTEN_FDS=1`, `LISTEN_PID` the server's own pid (a
/// shell that `exec`s it keeps its pid). The test keeps its own copy of
/// the socket open, so a server that ignored the passed socket and bound
/// the port itself would fail with "Address in use": it must start, say it
/// took systemd's socket, and hold the port in IPv6 too.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn the_server_takes_its_port_from_systemd_socket_activation() {
    let _serial = crate::support::serial();
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    if !require_root("the_server_takes_its_port_from_systemd_socket_activation") {
        return;
    }
    let tag = "sda";
    let ns = Netns::new(&format!("{}{tag}", unique_prefix())).expect("namespace");
    let dir = std::env::temp_dir().join(format!("mpdccp-{}{tag}", unique_prefix()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    // The socket systemd would have bound (`ListenDatagram=0.0.0.0:6774`),
    // made in the namespace.
    let sock: OwnedFd = mpdccp_lab::netns::spawn_in_netns(ns.name(), || {
        Ok(OwnedFd::from(std::net::UdpSocket::bind("0.0.0.0:6774")?))
    })
    .join()
    .unwrap()
    .expect("bind 0.0.0.0:6774 in the namespace");
    let cfg = dir.join("server.toml");
    std::fs::write(
        &cfg,
        server_config_workers(&dir, &format!("{tag}0"), "0.0.0.0:6774", 1),
    )
    .expect("config");
    let log = dir.join("server.log");
    let out = std::fs::File::create(&log).expect("log");
    let raw = sock.as_raw_fd();
    let mut cmd = Netns::command_in(ns.name(), "sh");
    cmd.args([
        "-c",
        "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" server --config \"$1\"",
        &exe().to_string_lossy(),
        &cfg.to_string_lossy(),
    ])
    .stdin(std::process::Stdio::null())
    .stdout(out.try_clone().unwrap())
    .stderr(out);
    // SAFETY: dup2(2) and fcntl(2) only, async-signal-safe; `raw` is open
    // in the parent and so in the child. dup2 clears close-on-exec on fd 3
    // (fcntl does when the socket is fd 3 already).
    unsafe {
        cmd.pre_exec(move || {
            let r = if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, 3)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut server = mpdccp_lab::netns::Proc::new(
        format!("server@{}", ns.name()),
        cmd.spawn().expect("server"),
    );
    let up = wait_for(Duration::from_secs(10), || {
        dir.join(format!("{tag}0.sock")).exists()
    });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(up.is_ok(), "server did not start:\n{text}");
    assert!(
        text.contains("listening socket from systemd"),
        "server log:\n{text}"
    );
    // The other family is held too (`hold.rs`), as without activation.
    let squat = bind_v6only(ns.name(), 6774);
    assert_eq!(
        squat.as_ref().map_err(std::io::Error::kind),
        Err(std::io::ErrorKind::AddrInUse),
        "[::]:6774 beside the activated server: {squat:?}"
    );
    server.stop();
    drop(server);
    drop(sock);
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
