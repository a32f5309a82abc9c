//! DCCP-UDP encapsulation (RFC 6773): a DCCP packet carried as the payload
//! of a UDP datagram, so it crosses NATs.
//!
//! ```text
//! +---------------------------+
//! | UDP header (8 bytes)      |  ports: the encapsulation ports
//! +---------------------------+
//! | DCCP generic header …     |  DCCP ports: the service ports
//! | options, payload          |
//! +---------------------------+
//! ```
//!
//! The DCCP packet runs to the end of the UDP datagram; the UDP Length
//! field must cover exactly the datagram.
//!
//! # Checksums
//!
//! * The **UDP checksum**: the DCCP checksum already protects the DCCP
//!   header and (per Checksum Coverage) the payload, so over IPv4 the UDP
//!   checksum may be zero (RFC 768 "no checksum"); over IPv6 a UDP checksum
//!   is computed (RFC 8200 §8.1 forbids zero without the RFC 6936
//!   exceptions). [`frame`] follows exactly that rule.
//! * The **DCCP checksum** keeps RFC 4340 §9 semantics (Checksum Coverage
//!   included). RFC 6773 keeps it computed with the IP pseudo-header of the
//!   packet as sent; a NAT rewrites those addresses, so the DCCP checksum
//!   cannot be verified end to end after translation. The receiver
//!   therefore verifies it with the addresses it sees only when it knows no
//!   NAT is on the path, and otherwise passes `None` to
//!   [`super::DccpRepr::parse`] and relies on the UDP checksum, which the
//!   NAT does update. The pseudo-header protocol number stays 33 (DCCP)
//!   ([`PSEUDO_HEADER_PROTO`]); this is our reading of the RFC and what
//!   [`fill_dccp_checksum`] and [`verify_dccp_checksum`] implement.
//!
//! In practice the daemon hands the DCCP bytes to a UDP socket and the
//! kernel writes the UDP header; these helpers serve raw sockets, pcap and
//! tests.

use super::checksum::{self, IPPROTO_DCCP};
use super::packet::Packet;
use super::{IpPair, WireError};

/// IANA-assigned UDP port for DCCP-UDP (RFC 6773, IANA section).
pub const DCCP_UDP_PORT: u16 = 6511;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// Protocol number used in the DCCP checksum's pseudo-header.
pub const PSEUDO_HEADER_PROTO: u8 = IPPROTO_DCCP;

/// The UDP header fields of a framed datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub length: u16,
    pub checksum: u16,
}

/// Write a UDP header in front of the DCCP packet already placed at
/// `buf[UDP_HEADER_LEN..UDP_HEADER_LEN + dccp_len]`. With `addrs`, the UDP
/// checksum is zero over IPv4 and computed over IPv6 (see module doc);
/// without, it is zero. Returns the datagram length.
pub fn frame(
    buf: &mut [u8],
    dccp_len: usize,
    src_port: u16,
    dst_port: u16,
    addrs: Option<IpPair>,
) -> Result<usize, WireError> {
    let total = UDP_HEADER_LEN + dccp_len;
    let len16 = u16::try_from(total).map_err(|_| WireError::BadFraming)?;
    let d = buf.get_mut(..total).ok_or(WireError::BufferTooSmall)?;
    d[0..2].copy_from_slice(&src_port.to_be_bytes());
    d[2..4].copy_from_slice(&dst_port.to_be_bytes());
    d[4..6].copy_from_slice(&len16.to_be_bytes());
    d[6..8].fill(0);
    if let Some(a @ (std::net::IpAddr::V6(_), _)) = addrs {
        let c = checksum::compute(a, d, total, IPPROTO_UDP);
        // RFC 768: a computed zero is sent as all ones.
        let c = if c == 0 { 0xffff } else { c };
        d[6..8].copy_from_slice(&c.to_be_bytes());
    }
    Ok(total)
}

/// Split a UDP datagram (header included) into its header and the DCCP
/// packet. Checks the Length field against the datagram and, when `addrs`
/// is given and the checksum is non-zero, the UDP checksum.
pub fn unframe(datagram: &[u8], addrs: Option<IpPair>) -> Result<(UdpHeader, &[u8]), WireError> {
    if datagram.len() < UDP_HEADER_LEN {
        return Err(WireError::BadFraming);
    }
    let be = |i: usize| u16::from_be_bytes([datagram[i], datagram[i + 1]]);
    let h = UdpHeader {
        src_port: be(0),
        dst_port: be(2),
        length: be(4),
        checksum: be(6),
    };
    let len = usize::from(h.length);
    if len < UDP_HEADER_LEN || len > datagram.len() {
        return Err(WireError::BadFraming);
    }
    let d = &datagram[..len];
    if let (Some(a), true) = (addrs, h.checksum != 0) {
        if checksum::compute(a, d, len, IPPROTO_UDP) != 0 {
            return Err(WireError::BadChecksum);
        }
    }
    Ok((h, &d[UDP_HEADER_LEN..]))
}

/// Fill the DCCP checksum of an encapsulated packet (RFC 6773, with
/// the choice documented in the module doc).
pub fn fill_dccp_checksum(dccp: &mut [u8], addrs: IpPair) -> Result<(), WireError> {
    let mut p = Packet::new_checked(dccp)?;
    p.fill_checksum_proto(addrs, PSEUDO_HEADER_PROTO)
}

/// Verify the DCCP checksum of an encapsulated packet.
pub fn verify_dccp_checksum(dccp: &[u8], addrs: IpPair) -> Result<(), WireError> {
    Packet::new_checked(dccp)?.verify_checksum_proto(addrs, PSEUDO_HEADER_PROTO)
}
