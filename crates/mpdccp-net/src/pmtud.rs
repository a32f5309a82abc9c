//! Path sockets for DPLPMTUD (RFC 8899 §3): every datagram leaves
//! with DF set and is never fragmented locally, and the kernel's own PMTU
//! cache (fed by ICMP, which may or may not arrive) neither shrinks nor
//! refuses our packets: `IP_PMTUDISC_PROBE` / `IPV6_PMTUDISC_PROBE`. Sizes are
//! the core's business (`mpdccp_proto::conn::plpmtu`); only a datagram above
//! the interface MTU fails locally (EMSGSIZE).

use std::io;
use std::os::fd::AsRawFd;

use crate::sockopt::{get_int, set_int};

/// DF on, the kernel's PMTU cache ignored (the `_PROBE` mode). For an IPv6
/// socket also the IPv4 option (a dual-stack socket sends IPv4 too; best
/// effort there).
pub fn set_df_probe(sock: &impl AsRawFd, ipv6: bool) -> io::Result<()> {
    let fd = sock;
    if ipv6 {
        set_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )?;
        let _ = set_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        );
        Ok(())
    } else {
        set_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    }
}

/// The socket's PMTU discovery mode (`IP_PMTUDISC_*` / `IPV6_PMTUDISC_*`).
pub fn df_mode(sock: &impl AsRawFd, ipv6: bool) -> io::Result<libc::c_int> {
    let fd = sock;
    if ipv6 {
        get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)
    } else {
        get_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_sockets_probe_with_df() {
        for (addr, v6) in [("127.0.0.1:0", false), ("[::1]:0", true)] {
            let Ok(s) = std::net::UdpSocket::bind(addr) else {
                continue; // no IPv6 here
            };
            assert_ne!(df_mode(&s, v6).unwrap(), libc::IP_PMTUDISC_PROBE);
            set_df_probe(&s, v6).unwrap();
            assert_eq!(df_mode(&s, v6).unwrap(), libc::IP_PMTUDISC_PROBE);
        }
    }
}
