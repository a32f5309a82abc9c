//! Control messages of the path sockets (cmsg(3)): asking for and reading
//! each datagram's destination address (`IP_PKTINFO`, `IPV6_RECVPKTINFO`),
//! and building the send side's `UDP_SEGMENT` (GSO) and source address
//! (`IP_PKTINFO` / `IPV6_PKTINFO`) without allocating per packet.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv6Addr};

use socket2::Socket;

/// Room for what we send: UDP_SEGMENT (24 bytes) + IPV6_PKTINFO (40).
pub(crate) const SEND_CONTROL_WORDS: usize = 10;

/// Asks for each datagram's destination address: `IP_PKTINFO` on an IPv4
/// socket; `IPV6_RECVPKTINFO` on an IPv6 one, plus `IP_PKTINFO` for the
/// IPv4-mapped datagrams of a dual-stack `[::]` socket (best effort: an
/// IPv6-only socket refuses it and needs none).
pub(crate) fn enable_pktinfo(socket: &Socket, ipv6: bool) -> io::Result<()> {
    let set = |level, opt| crate::sockopt::set_int(socket, level, opt, 1);
    if ipv6 {
        set(libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)?;
        let _ = set(libc::IPPROTO_IP, libc::IP_PKTINFO);
        Ok(())
    } else {
        set(libc::IPPROTO_IP, libc::IP_PKTINFO)
    }
}

/// Writes the send cmsgs into `control` and points `hdr` at them: a GSO
/// segment size (`UDP_SEGMENT`) and/or the source address (`IP_PKTINFO`'s
/// `ipi_spec_dst` on an IPv4 socket, `IPV6_PKTINFO` on an IPv6 one, an IPv4
/// source as a mapped address). Nothing to say: no control at all.
///
/// # Safety
/// `control` must stay live (and `hdr` unused otherwise) until the send.
pub(crate) unsafe fn fill_send_control(
    hdr: &mut libc::msghdr,
    control: &mut [u64; SEND_CONTROL_WORDS],
    gso: Option<u16>,
    from: Option<IpAddr>,
    ipv6_socket: bool,
) {
    // (level, type, payload, payload length); no allocation per packet.
    type Cmsg = (libc::c_int, libc::c_int, [u8; 20], usize);
    fn cmsg(level: libc::c_int, ty: libc::c_int, data: &[u8]) -> Cmsg {
        let mut buf = [0u8; 20];
        buf[..data.len()].copy_from_slice(data);
        (level, ty, buf, data.len())
    }
    let pktinfo: Option<Cmsg> = match (from, ipv6_socket) {
        (Some(IpAddr::V4(a)), false) => {
            let info = libc::in_pktinfo {
                ipi_ifindex: 0,
                ipi_spec_dst: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.octets()),
                },
                ipi_addr: libc::in_addr { s_addr: 0 },
            };
            Some(cmsg(libc::IPPROTO_IP, libc::IP_PKTINFO, as_bytes(&info)))
        }
        (Some(ip), true) => {
            let a: Ipv6Addr = match ip {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            let info = libc::in6_pktinfo {
                ipi6_addr: libc::in6_addr {
                    s6_addr: a.octets(),
                },
                ipi6_ifindex: 0,
            };
            Some(cmsg(
                libc::IPPROTO_IPV6,
                libc::IPV6_PKTINFO,
                as_bytes(&info),
            ))
        }
        // An IPv6 source on an IPv4 socket cannot be: let the kernel choose.
        (Some(IpAddr::V6(_)), false) | (None, _) => None,
    };
    hdr.msg_control = std::ptr::null_mut();
    hdr.msg_controllen = 0;
    let gso = gso.map(|seg| cmsg(libc::SOL_UDP, libc::UDP_SEGMENT, &seg.to_ne_bytes()));
    let msgs = [gso, pktinfo];
    if msgs.iter().all(Option::is_none) {
        return;
    }
    *control = [0; SEND_CONTROL_WORDS];
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = mem::size_of_val(control);
    let mut used = 0usize;
    // SAFETY: `control` holds SEND_CONTROL_WORDS * 8 = 80 bytes, more than
    // CMSG_SPACE(2) + CMSG_SPACE(20) = 24 + 40; CMSG_* stay within it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        for (level, ty, data, len) in msgs.iter().flatten() {
            (*c).cmsg_level = *level;
            (*c).cmsg_type = *ty;
            (*c).cmsg_len = libc::CMSG_LEN(*len as u32) as usize;
            std::ptr::copy_nonoverlapping(data.as_ptr(), libc::CMSG_DATA(c), *len);
            used += libc::CMSG_SPACE(*len as u32) as usize;
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    hdr.msg_controllen = used;
}

/// The bytes of a plain-old-data C struct.
fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: `T` is a `repr(C)` libc struct without padding holes we read
    // uninitialised (in_pktinfo, in6_pktinfo: all fields initialised).
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), mem::size_of::<T>()) }
}

/// The destination address in the cmsgs of a received `hdr` (pktinfo); an
/// IPv4-mapped address comes back as IPv4.
///
/// # Safety
/// `hdr.msg_control` must hold `msg_controllen` bytes of well-formed cmsgs
/// (as `recvmmsg` leaves them).
pub(crate) unsafe fn destination_ip(h: &libc::msghdr) -> Option<IpAddr> {
    // SAFETY: the caller's contract; CMSG_* walk within `msg_controllen`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                    // s_addr holds the address in network order: its bytes are the octets.
                    return Some(IpAddr::from(info.ipi_addr.s_addr.to_ne_bytes()));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                    let a = Ipv6Addr::from(info.ipi6_addr.s6_addr);
                    return Some(a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}
