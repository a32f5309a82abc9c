//! The listening port in the other address family (docs/SECURITY.md §7).
//!
//! A server on `0.0.0.0:6773` leaves `[::]:6773` free for an IPv6-only
//! socket (`IPV6_V6ONLY`), and one on a specific IPv6 address (or on
//! `[::]` with `net.ipv6.bindv6only = 1`) leaves `0.0.0.0:6773` free: a
//! local user could bind it and collect the Inits of every client that
//! reaches the host over that family. The server therefore binds the
//! same port in the other family too, a socket it never reads (receive
//! buffer at the kernel's minimum: what arrives there is dropped). A
//! dual-stack `[::]` listener already holds both and needs nothing.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// The socket holding `listen`'s port in the other family, if it needs
/// one: `bound` is the listener's bound address (its port, when the
/// configuration said 0), `listener` its socket. Fails, naming the
/// address, when another process holds that port; a host without the
/// other family (IPv6 disabled) needs no hold.
pub(super) fn hold_other_family(
    bound: SocketAddr,
    listener: &impl std::os::fd::AsFd,
) -> anyhow::Result<Option<Socket>> {
    let other: SocketAddr = match bound {
        SocketAddr::V4(a) => (Ipv6Addr::UNSPECIFIED, a.port()).into(),
        SocketAddr::V6(a) => {
            let dual =
                a.ip().is_unspecified() && !SockRef::from(listener).only_v6().unwrap_or(true);
            if dual {
                return Ok(None);
            }
            (Ipv4Addr::UNSPECIFIED, a.port()).into()
        }
    };
    let socket = match Socket::new(Domain::for_address(other), Type::DGRAM, Some(Protocol::UDP)) {
        Ok(s) => s,
        // No such family on this host: nobody can bind there either.
        Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => return Ok(None),
        Err(e) => anyhow::bail!("udp {other}: {e}"),
    };
    if other.is_ipv6() {
        // Only the IPv6 space: the IPv4 side is the listener's.
        socket
            .set_only_v6(true)
            .map_err(|e| anyhow::anyhow!("udp {other}: IPV6_V6ONLY: {e}"))?;
    }
    let _ = socket.set_recv_buffer_size(0);
    match socket.bind(&other.into()) {
        Ok(()) => Ok(Some(socket)),
        // IPv6 configured off (no ::, e.g. `ipv6.disable=1` keeps the family).
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Ok(None),
        Err(e) => anyhow::bail!(
            "cannot bind udp {other}: {e} (the listening port in the other address family: \
             another process has it and would receive the handshakes of clients that reach \
             this host over {}; stop it, or listen on another port)",
            if other.is_ipv6() { "IPv6" } else { "IPv4" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(addr: &str, v6only: Option<bool>) -> std::io::Result<Socket> {
        let a: SocketAddr = addr.parse().unwrap();
        let s = Socket::new(Domain::for_address(a), Type::DGRAM, Some(Protocol::UDP))?;
        if let Some(v) = v6only {
            s.set_only_v6(v)?;
        }
        s.bind(&a.into())?;
        Ok(s)
    }

    fn port(s: &Socket) -> u16 {
        s.local_addr().unwrap().as_socket().unwrap().port()
    }

    /// A v4 listener's port is held in IPv6 too: a second IPv6-only bind
    /// of `[::]:port` fails while the hold lives, and succeeds without it.
    #[test]
    fn a_v4_listener_holds_its_port_in_ipv6() {
        let l = udp("127.0.0.1:0", None).unwrap();
        let p = port(&l);
        let bound: SocketAddr = (Ipv4Addr::LOCALHOST, p).into();
        let Some(hold) = hold_other_family(bound, &l).unwrap() else {
            // A host without IPv6: nothing to hold.
            assert!(udp(&format!("[::]:{p}"), Some(true)).is_err());
            return;
        };
        let squat = udp(&format!("[::]:{p}"), Some(true));
        assert!(squat.is_err(), "[::]:{p} taken beside the v4 listener");
        drop(hold);
        assert!(udp(&format!("[::]:{p}"), Some(true)).is_ok());
    }

    /// A dual-stack `[::]` listener needs no hold; a v6-only one holds
    /// `0.0.0.0:port`.
    #[test]
    fn a_v6_listener_holds_ipv4_unless_dual_stack() {
        let Ok(dual) = udp("[::]:0", Some(false)) else {
            return; // no IPv6 here
        };
        let bound = dual.local_addr().unwrap().as_socket().unwrap();
        assert!(hold_other_family(bound, &dual).unwrap().is_none());
        drop(dual);
        let only = udp("[::]:0", Some(true)).unwrap();
        let bound = only.local_addr().unwrap().as_socket().unwrap();
        let hold = hold_other_family(bound, &only).unwrap().expect("held");
        assert!(udp(&format!("0.0.0.0:{}", bound.port()), None).is_err());
        drop(hold);
    }

    /// A squatter already there: the server refuses to start, naming the
    /// address.
    #[test]
    fn a_squatted_other_family_is_an_error_naming_it() {
        let l = udp("127.0.0.1:0", None).unwrap();
        let p = port(&l);
        let Ok(_squat) = udp(&format!("[::]:{p}"), Some(true)) else {
            return; // no IPv6 here
        };
        let e = hold_other_family((Ipv4Addr::LOCALHOST, p).into(), &l).unwrap_err();
        assert!(
            e.to_string().contains(&format!("cannot bind udp [::]:{p}")),
            "{e}"
        );
    }
}
