//! The DCCP checksum (RFC 4340 §9): the 16-bit one's complement of the one's
//! complement sum of an IPv4 or IPv6 pseudo-header, the DCCP header
//! (options included) and, depending on Checksum Coverage, some or all of
//! the payload.
//!
//! Pseudo-headers (§9.1, referring to RFC 768/2460 layouts):
//! IPv4 = src(4) ‖ dst(4) ‖ 0 ‖ 33 ‖ DCCP length(2);
//! IPv6 = src(16) ‖ dst(16) ‖ DCCP length(4) ‖ 0(3) ‖ 33.
//! The length is always the whole DCCP packet, whatever the coverage.

use std::net::{IpAddr, Ipv6Addr};

use super::{IpPair, WireError};

/// IP protocol number of DCCP.
pub const IPPROTO_DCCP: u8 = 33;

/// `ip` as IPv6: an IPv4 address becomes its IPv4-mapped form (RFC 4291
/// §2.5.5.2). Shared by the mixed-family pseudo-header and pcap framing.
pub(crate) fn as_ipv6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

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
            let (s6, d6) = (as_ipv6(s), as_ipv6(d));
            let mut sum = data_sum(&s6.octets()) + data_sum(&d6.octets());
            let len = dccp_len as u64 & 0xffff_ffff;
            sum += (len >> 16) + (len & 0xffff);
            sum += u64::from(proto);
            sum
        }
    }
}

/// One's complement sum of `data` as big-endian 16-bit words (odd trailing
/// byte padded with zero), partly folded: the result is congruent to that
/// sum modulo 0xffff and zero exactly when it is, which is all a fold
/// (end-around carry) of it, or of it plus other such sums, depends on.
///
/// Sums native-endian 64-bit words with carry (an add/adc pair per word, no
/// byte swap) and swaps once at the end: a 64-bit word is congruent to the
/// sum of its 16-bit quarters modulo 0xffff (2^16 ≡ 1), and the one's
/// complement sum of byte-swapped words is the byte-swapped sum (RFC 1071
/// §2 (A), (B)).
pub fn data_sum(data: &[u8]) -> u64 {
    let mut acc: u128 = 0;
    let mut words = data.chunks_exact(8);
    for c in &mut words {
        let w = [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
        acc += u128::from(u64::from_ne_bytes(w));
    }
    // 2^64 ≡ 1: the high half adds to the low one.
    let mut sum = u128::from(fold32((acc >> 64) as u64)) + u128::from(fold32(acc as u64));
    let rem = words.remainder();
    let mut i = 0;
    while i + 1 < rem.len() {
        sum += u128::from(u16::from_ne_bytes([rem[i], rem[i + 1]]));
        i += 2;
    }
    if i < rem.len() {
        sum += u128::from(u16::from_ne_bytes([rem[i], 0]));
    }
    // < 2^34 here.
    u64::from(u16::from_be(fold(sum as u64)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071's definition, word by word.
    fn reference_sum(data: &[u8]) -> u64 {
        data.chunks(2)
            .map(|c| u64::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
            .sum()
    }

    #[test]
    fn data_sum_folds_as_the_word_by_word_sum() {
        let mut x: u32 = 0x1234_5678;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for len in (0..80).chain([1495, 1496, 1497, 1500, 9000]) {
            for fill in 0..4 {
                let data: Vec<u8> = (0..len)
                    .map(|_| match fill {
                        0 => 0,
                        1 => 0xff,
                        _ => next() as u8,
                    })
                    .collect();
                let (got, want) = (data_sum(&data), reference_sum(&data));
                assert_eq!(fold(got), fold(want), "len {len} fill {fill}");
                for extra in [0u64, 1, 0xffff, 0x1_2345] {
                    assert_eq!(
                        fold(got + extra),
                        fold(want + extra),
                        "len {len} fill {fill}"
                    );
                }
            }
        }
    }
}
