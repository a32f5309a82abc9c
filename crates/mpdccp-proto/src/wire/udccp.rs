//! U-DCCP: the overhead-free DCCP ⇄ UDP header conversion of
//! draft-amend-tsvwg-dccp-udp-header-conversion-01 (vendored in
//! `docs/spec/u-dccp-draft-01.md`, its figures verbatim and its steps paraphrased).
//!
//! The 16-byte extended DCCP header (X=1) is rearranged so that its first
//! 8 bytes are a valid UDP header (§3.5, Figure 5); everything after the
//! generic header — type-specific fields, options (option 46 included),
//! payload — is carried unchanged (§3.1, Figure 1). Nothing is added: a
//! U-DCCP datagram is exactly as long as the DCCP packet.
//!
//! ```text
//!  octet   DCCP (X=1, RFC 4340 §5.1)        U-DCCP (§3.5)
//!  1-2     Source Port                      Source Port        (= UDP)
//!  3-4     Dest Port                        Dest Port          (= UDP)
//!  5       Data Offset                      UDP Length (high)
//!  6       CCVal | CsCov                    UDP Length (low)
//!  7-8     DCCP checksum                    UDP checksum (never 0)
//!  9       Res(3) | Type(4) | X(1)          Type(4) | CCVal(4)
//!  10      Reserved                         Data Offset
//!  11-16   Sequence Number (48 bits)        Sequence Number (unchanged)
//! ```
//!
//! What the conversion loses (§3.4): Res and Reserved (always zero, RFC
//! 4340 §5.1), X (always 1: only extended headers are converted), and
//! CsCov — the restored packet has CsCov = 0 (full coverage) and a DCCP
//! checksum recomputed over it (§3.8 steps 6, 12, 13). The connection is
//! identified as a UDP one: by the address/port 4-tuple, whose ports *are*
//! the DCCP ports (§3.1), so on restoration the DCCP ports are taken from
//! the UDP header as received (a NAT may have rewritten them).
//!
//! Octet 9 follows Figure 5 of the draft: Type in the high nibble. The
//! Telekom `u-dccp` module writes CCVal high and Type low (its bitfields);
//! we do not follow it (the dissector has a preference for that order).
//!
//! Every packet type is converted (§3.4 names no exception); X=0 packets
//! cannot be (the draft defines U-DCCP only for X=1) and are refused with
//! [`WireError::ShortSeqNotAllowed`]. Our codec never emits X=0 (Allow
//! Short Seqnos stays 0), so every packet of a U-DCCP path converts.
//!
//! Received U-DCCP is hostile input: a datagram shorter than 16 bytes, a
//! UDP Length that disagrees with the datagram, a zero or wrong UDP
//! checksum, a reserved type or a Data Offset outside the packet is an
//! error value (the caller counts it with [`super::WireStats::record`]);
//! nothing panics and the output is never longer than the input.

use super::checksum::{self, IPPROTO_DCCP};
use super::packet::{Packet, PacketType};
use super::udp_encap::IPPROTO_UDP;
use super::{IpPair, WireError};

/// Length of the U-DCCP header: the UDP-like 8 bytes plus the rest of the
/// rearranged extended header (§3.1, Figure 1).
pub const UDCCP_HEADER_LEN: usize = 16;
/// The UDP-like part of the header, which a UDP socket writes and strips.
pub const UDP_PART_LEN: usize = 8;

/// The fields of octets 9 and 10 (§3.5): `(type, ccval, data_offset)`.
fn octets_9_10(ptype: u8, ccval: u8, data_offset: u8) -> [u8; 2] {
    [(ptype << 4) | (ccval & 0x0f), data_offset]
}

/// DCCP → U-DCCP in place (§3.7). `pkt` is one whole DCCP packet with
/// X=1; its ports stay (they become the UDP ports). With `addrs` the UDP
/// checksum (RFC 768, pseudo-header protocol 17) is computed and written
/// (a computed zero is sent as all ones: U-DCCP's checksum MUST NOT be
/// zero); without, octets 7-8 are left zero for a UDP socket, whose kernel
/// writes octets 1-8 itself.
///
/// The DCCP checksum is not checked first (§3.7 step 3 is an "e.g."): the
/// packet comes from our own codec in the same process.
pub fn encode_in_place(pkt: &mut [u8], addrs: Option<IpPair>) -> Result<(), WireError> {
    let p = Packet::new_checked(&*pkt)?;
    if p.short_seq() {
        return Err(WireError::ShortSeqNotAllowed);
    }
    let len = u16::try_from(pkt.len()).map_err(|_| WireError::BadFraming)?;
    // Read every moved field before the first write (octets 5, 6 and 9
    // are both read and overwritten).
    let (ptype, ccval, data_offset) = (p.packet_type() as u8, p.ccval(), pkt[4]);
    // Steps 4-5: Type | CCVal into octet 9, Data Offset into octet 10.
    pkt[8..10].copy_from_slice(&octets_9_10(ptype, ccval, data_offset));
    // Step 6: UDP Length = the whole datagram, i.e. the DCCP length.
    pkt[4..6].copy_from_slice(&len.to_be_bytes());
    // Steps 9-10: zero, then the UDP checksum. (Steps 7-8, the IP
    // protocol and header checksum, are the IP layer's: a UDP socket.)
    pkt[6..8].fill(0);
    if let Some(a) = addrs {
        let c = checksum::compute(a, pkt, pkt.len(), IPPROTO_UDP);
        let c = if c == 0 { 0xffff } else { c };
        pkt[6..8].copy_from_slice(&c.to_be_bytes());
    }
    Ok(())
}

/// DCCP → U-DCCP into a new buffer: `out[..dccp.len()]` receives the
/// datagram (header included). Returns its length.
pub fn encode(dccp: &[u8], out: &mut [u8], addrs: Option<IpPair>) -> Result<usize, WireError> {
    let o = out.get_mut(..dccp.len()).ok_or(WireError::BufferTooSmall)?;
    o.copy_from_slice(dccp);
    encode_in_place(o, addrs)?;
    Ok(dccp.len())
}

/// U-DCCP → DCCP (§3.8) from a whole U-DCCP datagram (UDP-like header
/// included), e.g. from a capture. Checks the UDP Length (it must equal the
/// datagram length: U-DCCP has no room for trailing bytes) and the UDP
/// checksum, which must not be zero; with `addrs` = (source, destination)
/// of the IP header the checksum is verified and the restored DCCP checksum
/// is computed over the same addresses (RFC 4340 §9.1), so a NAT's rewrite
/// is reflected in it. Returns the DCCP length written to `out`.
pub fn decode(datagram: &[u8], out: &mut [u8], addrs: Option<IpPair>) -> Result<usize, WireError> {
    if datagram.len() < UDCCP_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let be = |i: usize| u16::from_be_bytes([datagram[i], datagram[i + 1]]);
    if usize::from(be(4)) != datagram.len() {
        return Err(WireError::BadFraming);
    }
    // Step 3: the UDP checksum, never zero for U-DCCP (§3.5).
    if be(6) == 0 {
        return Err(WireError::BadChecksum);
    }
    if let Some(a) = addrs {
        if checksum::compute(a, datagram, datagram.len(), IPPROTO_UDP) != 0 {
            return Err(WireError::BadChecksum);
        }
    }
    restore(be(0), be(2), &datagram[UDP_PART_LEN..], out, addrs)
}

/// U-DCCP → DCCP (§3.8) from what a UDP socket delivers: the ports of the
/// datagram and its payload (octet 9 onwards; the kernel has checked the
/// UDP Length and checksum). `src_port` is the sender's, `dst_port` ours.
/// The DCCP checksum is computed over `addrs`, or over unspecified IPv4
/// addresses when the driver has none (as the core does, `conn::codec`).
pub fn decode_payload(
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
    out: &mut [u8],
    addrs: Option<IpPair>,
) -> Result<usize, WireError> {
    restore(src_port, dst_port, payload, out, addrs)
}

/// Rebuilds the DCCP packet from the ports and the bytes after octet 8.
fn restore(
    src_port: u16,
    dst_port: u16,
    rest: &[u8],
    out: &mut [u8],
    addrs: Option<IpPair>,
) -> Result<usize, WireError> {
    if rest.len() < UDCCP_HEADER_LEN - UDP_PART_LEN {
        return Err(WireError::Truncated);
    }
    let total = UDP_PART_LEN + rest.len();
    let o = out.get_mut(..total).ok_or(WireError::BufferTooSmall)?;
    // Save Type, CCVal and Data Offset before anything is overwritten.
    let (ptype, ccval, data_offset) = (rest[0] >> 4, rest[0] & 0x0f, rest[1]);
    // A reserved type is refused here (RFC 4340 §5.1: MUST be ignored).
    PacketType::from_u8(ptype)?;
    o[0..2].copy_from_slice(&src_port.to_be_bytes());
    o[2..4].copy_from_slice(&dst_port.to_be_bytes());
    o[4] = data_offset; // step 4
    o[5] = ccval << 4; // steps 5-6: CsCov = 0, full coverage
    o[6..8].fill(0); // step 12
    o[8] = (ptype << 1) | 1; // steps 7-9: Res = 0, Type, X = 1
    o[9] = 0; // step 8: Reserved
    o[10..].copy_from_slice(&rest[2..]);
    // Data Offset against the generic header, sub-header and packet (§5.1).
    let mut p = Packet::new_checked(&mut *o)?;
    // Step 13: the DCCP checksum (RFC 4340 §9, protocol 33, full coverage).
    let un = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
    p.fill_checksum_proto(addrs.unwrap_or((un, un)), IPPROTO_DCCP)?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{DccpKind, DccpRepr, Header};
    use std::net::{IpAddr, Ipv4Addr};

    fn addrs() -> IpPair {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2)),
        )
    }

    fn data_ack(ccval: u8) -> Vec<u8> {
        let r = DccpRepr {
            header: Header {
                src_port: 40_000,
                dst_port: 6_774,
                seq: 0x0123_4567_89ab,
                ccval,
                kind: DccpKind::DataAck {
                    ack: 0x0000_0000_0102,
                },
                ..Header::default()
            },
            ..Default::default()
        };
        let mut b = vec![0u8; r.buffer_len(5)];
        let n = r.emit(&mut b, b"hello", Some(addrs())).unwrap();
        b.truncate(n);
        b
    }

    #[test]
    fn figure_5_layout_byte_by_byte() {
        let d = data_ack(9);
        let mut u = d.clone();
        encode_in_place(&mut u, Some(addrs())).unwrap();
        assert_eq!(u.len(), d.len(), "no byte added");
        assert_eq!(u[0..4], d[0..4], "ports unchanged");
        assert_eq!(usize::from(u16::from_be_bytes([u[4], u[5]])), d.len());
        assert_eq!(u[8], (4 << 4) | 9, "DataAck (4) high, CCVal low");
        assert_eq!(u[9], d[4], "Data Offset in octet 10");
        assert_eq!(u[10..], d[10..], "sequence number and the rest unchanged");
        // The UDP checksum verifies with protocol 17 over the whole datagram.
        assert_eq!(checksum::compute(addrs(), &u, u.len(), IPPROTO_UDP), 0);
        let mut back = vec![0u8; u.len()];
        assert_eq!(decode(&u, &mut back, Some(addrs())), Ok(d.len()));
        assert_eq!(back, d);
    }

    #[test]
    fn cscov_is_lost_and_the_checksum_recomputed() {
        let mut d = data_ack(0);
        {
            let mut p = Packet::new_checked(&mut d[..]).unwrap();
            p.set_ccval_cscov(3, 1); // header only
            p.fill_checksum(addrs()).unwrap();
        }
        let mut u = d.clone();
        encode_in_place(&mut u, Some(addrs())).unwrap();
        let mut back = vec![0u8; u.len()];
        decode(&u, &mut back, Some(addrs())).unwrap();
        let p = Packet::new_checked(&back[..]).unwrap();
        assert_eq!((p.ccval(), p.cscov()), (3, 0));
        p.verify_checksum(addrs()).unwrap();
        assert_ne!(back[6..8], d[6..8], "full coverage: a different checksum");
    }

    #[test]
    fn short_sequence_numbers_are_not_converted() {
        let r = DccpRepr {
            header: Header {
                short_seq: true,
                seq: 5,
                kind: DccpKind::Data,
                ..Header::default()
            },
            ..Default::default()
        };
        let mut b = vec![0u8; r.buffer_len(0)];
        let n = r.emit(&mut b, &[], None).unwrap();
        assert_eq!(
            encode_in_place(&mut b[..n], None),
            Err(WireError::ShortSeqNotAllowed)
        );
    }

    #[test]
    fn hostile_datagrams_are_errors() {
        let d = data_ack(0);
        let mut u = d.clone();
        encode_in_place(&mut u, Some(addrs())).unwrap();
        let mut out = vec![0u8; 2048];
        let a = Some(addrs());
        // Every truncation: an error, never a panic.
        for n in 0..u.len() {
            assert!(decode(&u[..n], &mut out, a).is_err(), "len {n}");
        }
        let flip = |i: usize, v: u8| {
            let mut x = u.clone();
            x[i] = v;
            x
        };
        assert_eq!(
            decode(&flip(5, u[5] ^ 1), &mut out, a),
            Err(WireError::BadFraming)
        );
        assert_eq!(
            decode(&flip(20, u[20] ^ 1), &mut out, a),
            Err(WireError::BadChecksum)
        );
        let mut zero = u.clone();
        zero[6..8].fill(0);
        assert_eq!(decode(&zero, &mut out, None), Err(WireError::BadChecksum));
        // Without the checksum check (a UDP socket's payload): type 12 is
        // reserved, Data Offset past the end or below the header.
        let pl = &u[8..];
        let mut bad = pl.to_vec();
        bad[0] = 12 << 4;
        assert_eq!(
            decode_payload(1, 2, &bad, &mut out, None),
            Err(WireError::ReservedType(12))
        );
        for off in [0u8, 3, 200] {
            let mut bad = pl.to_vec();
            bad[1] = off;
            assert_eq!(
                decode_payload(1, 2, &bad, &mut out, None),
                Err(WireError::BadDataOffset),
                "data offset {off}"
            );
        }
        assert_eq!(
            decode_payload(1, 2, pl, &mut out[..10], None),
            Err(WireError::BufferTooSmall)
        );
    }

    #[test]
    fn ports_come_from_the_udp_header_as_received() {
        let d = data_ack(0);
        let mut u = d.clone();
        encode_in_place(&mut u, None).unwrap();
        let mut out = vec![0u8; u.len()];
        let n = decode_payload(1111, 2222, &u[8..], &mut out, Some(addrs())).unwrap();
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (1111, 2222));
        p.verify_checksum(addrs()).unwrap();
        assert_eq!(out[8..], d[8..]);
    }
}
