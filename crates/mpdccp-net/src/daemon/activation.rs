//! systemd socket activation of the server's listening port
//! (docs/SECURITY.md §7): systemd binds the port before the service starts
//! and keeps it across restarts, so no local user can take it meanwhile
//! and collect the Inits of the clients (`deploy/systemd/mpdccp-server.socket`).
//!
//! The protocol is `sd_listen_fds(3)`'s: `LISTEN_PID` names the process
//! the sockets are for (a child that inherited the variables must not
//! take them), `LISTEN_FDS` how many, passed from fd 3 on
//! (`SD_LISTEN_FDS_START`). The variables are removed once read, and the
//! descriptors are marked close-on-exec (the `ip` commands the daemon runs
//! do not inherit them). Read here, not through libsystemd: the protocol
//! is two variables and a range of descriptors.

use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use socket2::{Socket, Type};

use super::config::ServerConfig;
use crate::udp::PathSocket;

/// The first passed descriptor (`SD_LISTEN_FDS_START`).
pub(super) const LISTEN_FDS_START: RawFd = 3;

/// Most descriptors taken (a unit lists a few `ListenDatagram=`).
const MAX_FDS: usize = 16;

/// The descriptors systemd passed to this process, from `LISTEN_PID`
/// and `LISTEN_FDS` as given (`None` when they are absent, or name
/// another process); an error when they are malformed.
pub(super) fn passed_fds(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    our_pid: u32,
) -> anyhow::Result<Option<std::ops::Range<RawFd>>> {
    let (Some(pid), Some(n)) = (listen_pid, listen_fds) else {
        return Ok(None);
    };
    let pid: u32 = pid
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("LISTEN_PID={pid:?} is not a process id"))?;
    if pid != our_pid {
        return Ok(None);
    }
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("LISTEN_FDS={n:?} is not a count"))?;
    if n == 0 || n > MAX_FDS {
        anyhow::bail!("LISTEN_FDS={n}: expected 1 to {MAX_FDS} sockets");
    }
    Ok(Some(LISTEN_FDS_START..LISTEN_FDS_START + n as RawFd))
}

/// The UDP sockets systemd passed, with their bound addresses; empty
/// without socket activation. Takes the variables out of the
/// environment. A passed descriptor that is not a bound UDP socket is an
/// error naming it (a unit with `ListenStream=` by mistake).
pub(super) fn take_udp_sockets() -> anyhow::Result<Vec<(Socket, SocketAddr)>> {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    let range = passed_fds(pid.as_deref(), fds.as_deref(), std::process::id())?;
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    let Some(range) = range else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for fd in range {
        // F_GETFD fails on a closed descriptor: never take ownership of
        // one that is not there.
        // SAFETY: fcntl(F_GETFD) reads flags only; any integer is allowed.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            anyhow::bail!("LISTEN_FDS: descriptor {fd} is not open");
        }
        // SAFETY: systemd passed `fd` to this process for it to own
        // (sd_listen_fds(3)); it is open (above) and nothing else here
        // uses descriptors in this range.
        let sock = Socket::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let _ = sock.set_cloexec(true);
        out.push(udp_socket(sock, fd)?);
    }
    Ok(out)
}

/// `sock` (descriptor `fd`) as a bound UDP socket and its address.
fn udp_socket(sock: Socket, fd: RawFd) -> anyhow::Result<(Socket, SocketAddr)> {
    let ty = sock
        .r#type()
        .map_err(|e| anyhow::anyhow!("LISTEN_FDS: descriptor {fd}: {e}"))?;
    let addr = sock.local_addr().ok().and_then(|a| a.as_socket());
    match addr {
        Some(a) if ty == Type::DGRAM && a.port() != 0 => Ok((sock, a)),
        _ => anyhow::bail!(
            "LISTEN_FDS: descriptor {fd} is not a bound UDP socket (the unit's socket must be \
             `ListenDatagram=`)"
        ),
    }
}

/// Of the passed sockets, the one for `listen`: the same address, or, when
/// `listen` is a wildcard, the same port and family. The others stay open
/// (they hold the port in the other family, `hold.rs`).
pub(super) fn pick(socks: &[(Socket, SocketAddr)], listen: SocketAddr) -> Option<usize> {
    socks.iter().position(|(_, a)| *a == listen).or_else(|| {
        socks.iter().position(|(_, a)| {
            listen.ip().is_unspecified()
                && a.port() == listen.port()
                && a.is_ipv4() == listen.is_ipv4()
        })
    })
}

/// The server's listening sockets: with socket activation the passed one
/// for `config.listen` (one worker: a `SO_REUSEPORT` group is bound by the
/// server itself), else bound here (`workers::bind_listeners`). Also the
/// passed sockets not used: kept open for the server's life, they hold
/// the port in the other family (instead of `hold.rs`).
pub(super) fn listeners(
    config: &ServerConfig,
    n: usize,
) -> anyhow::Result<(Vec<PathSocket>, Vec<Socket>)> {
    let mut passed = take_udp_sockets()?;
    if passed.is_empty() {
        return Ok((super::workers::bind_listeners(config, n)?, Vec::new()));
    }
    if n > 1 {
        anyhow::bail!("socket activation (LISTEN_FDS) serves one worker: set `workers = 1`");
    }
    let Some(i) = pick(&passed, config.listen) else {
        let got: Vec<String> = passed.iter().map(|(_, a)| a.to_string()).collect();
        anyhow::bail!(
            "LISTEN_FDS: no passed socket for listen = {} (passed: {}); make the unit's \
             ListenDatagram= and `listen` agree",
            config.listen,
            got.join(", ")
        );
    };
    let (sock, addr) = passed.remove(i);
    let sock = PathSocket::from_bound(sock, config.tunnel.socket_buffer_bytes)?;
    tracing::info!(listen = %addr, "listening socket from systemd (socket activation)");
    eprintln!("server: listening socket from systemd: udp {addr}");
    Ok((vec![sock], passed.into_iter().map(|(s, _)| s).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_are_read_as_sd_listen_fds_does() {
        assert_eq!(passed_fds(None, None, 7).unwrap(), None);
        assert_eq!(passed_fds(Some("7"), None, 7).unwrap(), None);
        // Inherited from a parent that was activated: not ours.
        assert_eq!(passed_fds(Some("8"), Some("1"), 7).unwrap(), None);
        assert_eq!(passed_fds(Some("7"), Some("2"), 7).unwrap(), Some(3..5));
        assert!(passed_fds(Some("x"), Some("1"), 7).is_err());
        assert!(passed_fds(Some("7"), Some("0"), 7).is_err());
        assert!(passed_fds(Some("7"), Some("-1"), 7).is_err());
        assert!(passed_fds(Some("7"), Some("99"), 7).is_err());
    }

    #[test]
    fn the_socket_for_the_configured_address_is_picked() {
        let udp = |a: &str| {
            let a: SocketAddr = a.parse().unwrap();
            let s = std::net::UdpSocket::bind(a).unwrap();
            let a = s.local_addr().unwrap();
            (Socket::from(OwnedFd::from(s)), a)
        };
        let v4 = udp("127.0.0.1:0");
        let port = v4.1.port();
        let socks = vec![udp("127.0.0.1:0"), v4];
        assert_eq!(pick(&socks, socks[1].1), Some(1));
        assert_eq!(pick(&socks, socks[0].1), Some(0));
        let wild: SocketAddr = format!("0.0.0.0:{port}").parse().unwrap();
        assert_eq!(pick(&socks, wild), Some(1));
        let other: SocketAddr = format!("0.0.0.0:{}", port.wrapping_add(1)).parse().unwrap();
        assert_eq!(pick(&socks, other), None);
    }

    #[test]
    fn a_stream_socket_is_refused_by_name() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let e = udp_socket(Socket::from(OwnedFd::from(l)), 9).unwrap_err();
        assert!(e.to_string().contains("descriptor 9"), "{e}");
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(udp_socket(Socket::from(OwnedFd::from(u)), 9).is_ok());
    }
}
