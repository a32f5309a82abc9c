//! Native DCCP: IP protocol 33 through raw sockets.
//!
//! The host kernel has no DCCP of its own (and the reference MP-DCCP kernel
//! speaks DCCP directly over IPv4, never in UDP), so native DCCP goes
//! through `socket(AF_INET{,6}, SOCK_RAW, 33)`. The kernel writes the IP
//! header on send; we write the DCCP header and its checksum, which covers
//! the IPv4/IPv6 pseudo-header of the *real* addresses (RFC 4340 §9.1).
//! That is why a socket is bound to one specific local address: the
//! checksum needs it on send, and a raw socket bound to an address only
//! receives packets addressed to it.
//!
//! A raw socket sees every protocol-33 packet to its address, whatever the
//! ports: demultiplexing by port is the caller's (the daemon's path table).
//! Because a raw socket consumes them, the kernel sends no ICMP
//! protocol-unreachable for DCCP packets while one is open.
//!
//! Received packets are hostile input: a truncated IP header, a
//! non-DCCP protocol, a fragment offset, or a DCCP checksum that does not
//! verify drops the packet and counts it in [`RawStats`]; nothing panics.

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;

use mpdccp_proto::wire::checksum::IPPROTO_DCCP;
use mpdccp_proto::wire::{Packet, WireError};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Counters of received packets dropped before the caller saw them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawStats {
    pub received: u64,
    /// IPv4 header shorter than its IHL, or total length past the datagram.
    pub bad_ip: u64,
    /// Not a whole DCCP packet (too short, bad Data Offset).
    pub bad_dccp: u64,
    pub bad_checksum: u64,
}

/// One received DCCP packet: addresses and where it sits in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawDatagram {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// `buf[start..end]` is the DCCP packet (header, options, payload).
    pub start: usize,
    pub end: usize,
}

/// A raw IP socket for DCCP bound to one local address.
pub struct RawDccpSocket {
    sock: Socket,
    local: IpAddr,
    stats: RawStats,
}

impl RawDccpSocket {
    /// Opens a raw protocol-33 socket bound to `local` (must be a specific
    /// address: it enters every checksum). Needs CAP_NET_RAW.
    pub fn bind(local: IpAddr) -> io::Result<RawDccpSocket> {
        if local.is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "native DCCP needs a specific local address (pseudo-header checksum)",
            ));
        }
        let domain = if local.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let sock = Socket::new(
            domain,
            Type::RAW,
            Some(Protocol::from(i32::from(IPPROTO_DCCP))),
        )?;
        crate::pmtud::set_df_probe(&sock, local.is_ipv6())?;
        sock.bind(&SockAddr::from(SocketAddr::new(local, 0)))?;
        Ok(RawDccpSocket {
            sock,
            local,
            stats: RawStats::default(),
        })
    }

    pub fn local_addr(&self) -> IpAddr {
        self.local
    }

    pub fn stats(&self) -> RawStats {
        self.stats
    }

    /// Restricts the socket to one interface (SO_BINDTODEVICE).
    pub fn bind_device(&self, ifname: &str) -> io::Result<()> {
        self.sock.bind_device(Some(ifname.as_bytes()))
    }

    /// Kernel receive/send buffers (best effort: the kernel clamps to
    /// `net.core.[rw]mem_max`).
    pub fn set_buffer_bytes(&self, n: usize) -> io::Result<()> {
        self.sock.set_recv_buffer_size(n)?;
        self.sock.set_send_buffer_size(n)
    }

    pub fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.sock)
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }

    pub fn set_nonblocking(&self, nb: bool) -> io::Result<()> {
        self.sock.set_nonblocking(nb)
    }

    /// Fills the DCCP checksum of `dccp` for (local, `dst`) and sends it.
    pub fn send_to(&self, dccp: &mut [u8], dst: IpAddr) -> io::Result<usize> {
        if dst.is_ipv4() != self.local.is_ipv4() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "address family mismatch",
            ));
        }
        let mut p = Packet::new_checked(&mut *dccp).map_err(wire_err)?;
        p.fill_checksum((self.local, dst)).map_err(wire_err)?;
        self.sock
            .send_to(dccp, &SockAddr::from(SocketAddr::new(dst, 0)))
    }

    /// Sends `dccp` exactly as it is, checksum included (replaying captured
    /// packets; tests that need a broken checksum on the wire).
    pub fn send_as_is(&self, dccp: &[u8], dst: IpAddr) -> io::Result<usize> {
        self.sock
            .send_to(dccp, &SockAddr::from(SocketAddr::new(dst, 0)))
    }

    /// Receives the next DCCP packet whose checksum verifies. Dropped
    /// packets are counted and skipped; I/O errors (including a timeout,
    /// `WouldBlock`) are returned.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<RawDatagram> {
        loop {
            // SAFETY: recv_from only writes initialized bytes into the
            // buffer, and `u8` has no invalid bit patterns.
            let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
            let (n, from) = self.sock.recv_from(uninit)?;
            self.stats.received += 1;
            if let Some(d) = self.accept(&buf[..n], &from) {
                return Ok(d);
            }
        }
    }

    /// Locates and checks the DCCP packet in what recv_from returned: IPv4
    /// raw sockets hand over the IP header, IPv6 ones do not.
    fn accept(&mut self, data: &[u8], from: &SockAddr) -> Option<RawDatagram> {
        let (src, dst, start, end) = match self.local {
            IpAddr::V4(_) => match ipv4_payload(data) {
                Some(v) => v,
                None => {
                    self.stats.bad_ip += 1;
                    return None;
                }
            },
            IpAddr::V6(local) => {
                let src = from.as_socket_ipv6().map(|s: SocketAddrV6| *s.ip())?;
                (IpAddr::V6(src), IpAddr::V6(local), 0, data.len())
            }
        };
        let pkt = match Packet::new_checked(&data[start..end]) {
            Ok(p) => p,
            Err(_) => {
                self.stats.bad_dccp += 1;
                return None;
            }
        };
        if pkt.verify_checksum((src, dst)).is_err() {
            self.stats.bad_checksum += 1;
            return None;
        }
        Some(RawDatagram {
            src,
            dst,
            start,
            end,
        })
    }
}

/// `(src, dst, start, end)` of the payload of an IPv4 datagram carrying
/// protocol 33, or `None` when the header is malformed, it is a fragment
/// (the kernel reassembles before raw delivery, so one means trouble), or
/// the protocol is not DCCP.
fn ipv4_payload(d: &[u8]) -> Option<(IpAddr, IpAddr, usize, usize)> {
    if d.len() < 20 || d[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(d[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([d[2], d[3]]));
    let frag = u16::from_be_bytes([d[6], d[7]]) & 0x3fff;
    if ihl < 20 || total < ihl || total > d.len() || frag != 0 || d[9] != IPPROTO_DCCP {
        return None;
    }
    let src = Ipv4Addr::new(d[12], d[13], d[14], d[15]);
    let dst = Ipv4Addr::new(d[16], d[17], d[18], d[19]);
    Some((IpAddr::V4(src), IpAddr::V4(dst), ihl, total))
}

fn wire_err(e: WireError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_header_checks() {
        let mut d = vec![
            0x45u8, 0, 0, 36, 0, 0, 0x40, 0, 64, 33, 0, 0, 10, 0, 1, 1, 10, 0, 1, 2,
        ];
        d.resize(36, 0);
        let (s, t, a, b) = ipv4_payload(&d).expect("valid");
        assert_eq!(
            (s, t, a, b),
            (
                "10.0.1.1".parse().unwrap(),
                "10.0.1.2".parse().unwrap(),
                20,
                36
            )
        );
        let mut frag = d.clone();
        frag[7] = 1; // fragment offset 8
        assert_eq!(ipv4_payload(&frag), None);
        let mut udp = d.clone();
        udp[9] = 17;
        assert_eq!(ipv4_payload(&udp), None);
        assert_eq!(ipv4_payload(&d[..30]), None, "total length past the data");
        let mut ihl = d.clone();
        ihl[0] = 0x44;
        assert_eq!(ipv4_payload(&ihl), None);
        for n in 0..d.len() {
            let _ = ipv4_payload(&d[..n]);
        }
    }
}
