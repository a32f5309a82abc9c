//! The DCCP checksum (RFC 4340 §9): the 16-bit one's complement of the one's
//! complement sum of an IPv4 or IPv6 pseudo-header, the DCCP header
//! (options included) and, depending on Checksum Coverage, some or all of
//! the payload.
//!
//! Pseudo-headers (§9.1, referring to RFC 768/2460 layouts):
//! IPv4 = src(4) ‖ dst(4) ‖ 0 ‖ 33 ‖ DCCP length(2);
//! IPv6 = src(16) ‖ dst(16) ‖ DCCP length(4) ‖ 0(3) ‖ 33.
//! The length is always the whole DCCP packet, whatever the coverage.

use std::net::IpAddr;

use super::{IpPair, WireError};

/// IP protocol number of DCCP.
pub const IPPROTO_DCCP: u8 = 33;

/// Sum of the pseudo-header as 16-bit words (unfolded). Mixed address
/// families are treated as IPv6 with the IPv4 address mapped, so the
/// function is total; callers should not mix them.
pub fn pseudo_header_sum(addrs: IpPair, dccp_len: usize, proto: u8) -> u64 {
    match addrs {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut sum = data_sum(&s.octets()) + data_sum(&d.octets());
            sum += u64::from(proto);
            // Lengths beyond 16 bits cannot occur on IPv4; truncation
            // mirrors what the IP length field could express.
            sum += (dccp_len as u64) & 0xffff;
            sum
        }
        (s, d) => {
            let s6 = match s {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            let d6 = match d {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            let mut sum = data_sum(&s6.octets()) + data_sum(&d6.octets());
            let len = dccp_len as u64 & 0xffff_ffff;
            sum += (len >> 16) + (len & 0xffff);
            sum += u64::from(proto);
            sum
        }
    }
}

/// One's complement sum of `data` as big-endian 16-bit words (odd trailing
/// byte padded with zero), unfolded. Sums 32-bit words, which is
/// equivalent modulo 0xffff (RFC 1071 §2) and several times faster.
pub fn data_sum(data: &[u8]) -> u64 {
    // Two independent accumulators of 32-bit halves: no carries are lost
    // (each add is < 2^33, so 2^31 chunks fit), and the loop pipelines.
    let mut a: u64 = 0;
    let mut b: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        a += v >> 32;
        b += v & 0xffff_ffff;
    }
    let mut sum = fold32(a) + fold32(b);
    let rem = chunks.remainder();
    let mut i = 0;
    while i + 1 < rem.len() {
        sum += u64::from(u16::from_be_bytes([rem[i], rem[i + 1]]));
        i += 2;
    }
    if i < rem.len() {
        sum += u64::from(rem[i]) << 8;
    }
    sum
}

/// Reduce a sum of 32-bit words to at most 32 bits, modulo 0xffff.
fn fold32(mut x: u64) -> u64 {
    while x > 0xffff_ffff {
        x = (x & 0xffff_ffff) + (x >> 32);
    }
    x
}

/// Fold a wide sum to 16 bits (end-around carry) without complementing.
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Number of packet bytes the checksum covers (§9.2): the header plus
/// `(cscov - 1) * 4` payload bytes, or everything when `cscov == 0`.
/// Errors if the coverage runs past the packet (§9.2: such packets MUST be
/// ignored).
pub fn coverage_len(header_len: usize, total_len: usize, cscov: u8) -> Result<usize, WireError> {
    if cscov == 0 {
        return Ok(total_len);
    }
    let n = header_len + (usize::from(cscov) - 1) * 4;
    if n > total_len {
        return Err(WireError::BadChecksumCoverage);
    }
    Ok(n)
}

/// Compute the checksum of a DCCP packet whose checksum field (bytes 6..8)
/// holds zero, or verify one: over a packet with its real checksum the
/// result is 0 exactly when the checksum is right.
pub fn compute(addrs: IpPair, packet: &[u8], covered: usize, proto: u8) -> u16 {
    let covered = covered.min(packet.len());
    let sum = pseudo_header_sum(addrs, packet.len(), proto) + data_sum(&packet[..covered]);
    !fold(sum)
}

/// Internet checksum of a plain buffer (e.g. an IPv4 header), complemented.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !fold(data_sum(data))
}
