//! The load generator's inner packets: IPv4/UDP from a client's inner
//! address to the echo inside the server's namespace, and the echo's
//! answer back. The payload carries the client index and a sequence
//! number, so each client knows an echo is its own.
//!
//! Hand-written: twenty header bytes and the RFC 1071 sum; a packet crate
//! would bring more than it saves here.

use std::net::{Ipv4Addr, SocketAddr};

/// The server's TUN address; the clients' inner addresses follow it in the
/// same /10 (`10.64.0.2` is client 0).
pub const SERVER_INNER: Ipv4Addr = Ipv4Addr::new(10, 64, 0, 1);
pub const INNER_PREFIX_LEN: u8 = 10;
/// Echo UDP port on [`SERVER_INNER`].
pub const ECHO_PORT: u16 = 7;
/// Source port of the probes.
pub const PROBE_PORT: u16 = 40_000;

const IP_HDR: usize = 20;
const UDP_HDR: usize = 8;
/// Client index (u32) and sequence (u64).
pub const PAYLOAD_MIN: usize = 12;
pub const MIN_PACKET: usize = IP_HDR + UDP_HDR + PAYLOAD_MIN;

/// Client `i`'s inner (tunnel) address.
pub fn client_inner_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SERVER_INNER) + 1 + i as u32)
}

/// How many clients fit in the inner prefix (less network, server, broadcast).
pub fn max_clients() -> usize {
    (1usize << (32 - INNER_PREFIX_LEN)) - 3
}

/// RFC 1071 Internet checksum of `data` (even length here).
fn ip_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes one IPv4/UDP packet of `len` bytes (at least [`MIN_PACKET`])
/// into `buf` and returns its length. UDP checksum 0 = none (RFC 768).
pub fn build_probe(
    buf: &mut [u8],
    src: Ipv4Addr,
    dst: SocketAddr,
    client: u32,
    seq: u64,
    len: usize,
) -> usize {
    let len = len.clamp(MIN_PACKET, buf.len().min(65_535));
    let dst_ip = match dst {
        SocketAddr::V4(a) => *a.ip(),
        SocketAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    };
    let p = &mut buf[..len];
    p.fill(0);
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64; // TTL
    p[9] = 17; // UDP
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst_ip.octets());
    let sum = ip_checksum(&p[..IP_HDR]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    let u = &mut p[IP_HDR..];
    u[0..2].copy_from_slice(&PROBE_PORT.to_be_bytes());
    u[2..4].copy_from_slice(&dst.port().to_be_bytes());
    u[4..6].copy_from_slice(&((len - IP_HDR) as u16).to_be_bytes());
    u[8..12].copy_from_slice(&client.to_be_bytes());
    u[12..20].copy_from_slice(&seq.to_be_bytes());
    len
}

/// Whether `pkt` is the echo of one of client `client`'s probes, sent to
/// its inner address.
pub fn is_echo_for(pkt: &[u8], inner: Ipv4Addr, client: u32) -> bool {
    if pkt.len() < MIN_PACKET || pkt[0] != 0x45 || pkt[9] != 17 {
        return false;
    }
    pkt[16..20] == inner.octets()
        && pkt[12..16] == SERVER_INNER.octets()
        && pkt[IP_HDR + UDP_HDR..IP_HDR + UDP_HDR + 4] == client.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checksum_verifies_to_zero() {
        let mut b = [0u8; 1500];
        let n = build_probe(
            &mut b,
            client_inner_addr(7),
            SocketAddr::from((SERVER_INNER, ECHO_PORT)),
            7,
            42,
            200,
        );
        assert_eq!(n, 200);
        // RFC 1071: the sum over a header with its checksum is all ones.
        assert_eq!(ip_checksum(&b[..IP_HDR]), 0);
        assert_eq!(&b[12..16], &[10, 64, 0, 9]);
    }

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 §3 example bytes: one's complement sum 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ip_checksum(&d), !0xddf2);
    }

    #[test]
    fn an_echo_is_recognised_only_for_its_client() {
        let mut b = [0u8; 100];
        let me = client_inner_addr(3);
        let n = build_probe(&mut b, SERVER_INNER, SocketAddr::from((me, 1)), 3, 0, 64);
        assert!(is_echo_for(&b[..n], me, 3));
        assert!(!is_echo_for(&b[..n], me, 4));
        assert!(!is_echo_for(&b[..n], client_inner_addr(4), 3));
        assert!(!is_echo_for(&b[..10], me, 3));
    }
}
