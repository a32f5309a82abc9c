//! systemd readiness (`Type=notify`, sd_notify(3)): one datagram to the
//! unix socket named by `$NOTIFY_SOCKET`. The protocol is a line of
//! `KEY=VALUE` in one datagram, so a dozen lines of std instead of the
//! `sd-notify` crate or libsystemd. Without `$NOTIFY_SOCKET` (not under
//! systemd, or `Type=simple`) nothing happens.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Tells systemd the daemon is up: TUN configured, sockets bound, control
/// socket listening (`systemctl start` returns now; units ordered after
/// this one may use the tunnel device).
pub fn ready(status: &str) {
    notify(&format!("READY=1\nSTATUS={status}"));
}

/// Tells systemd the daemon is shutting down (graceful close under way).
pub fn stopping() {
    notify("STOPPING=1");
}

fn notify(msg: &str) {
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET") {
        if let Err(e) = notify_to(&path.to_string_lossy(), msg) {
            tracing::warn!("sd_notify to {}: {e}", path.to_string_lossy());
        }
    }
}

/// Sends `msg` to the notification socket `path`; a leading `@` names an
/// abstract socket (as systemd passes it).
pub fn notify_to(path: &str, msg: &str) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    match path.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            sock.send_to_addr(msg.as_bytes(), &addr)?;
        }
        None => {
            sock.send_to(msg.as_bytes(), path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_reaches_a_path_and_an_abstract_socket() {
        let dir = std::env::temp_dir().join(format!("mpdccp-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        notify_to(&path.to_string_lossy(), "READY=1\nSTATUS=up").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=up");
        let name = format!("mpdccp-notify-test-{}", std::process::id());
        use std::os::linux::net::SocketAddrExt;
        let abs = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx2 = UnixDatagram::bind_addr(&abs).unwrap();
        notify_to(&format!("@{name}"), "STOPPING=1").unwrap();
        let n = rx2.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
