//! The inner packet's IP header, read where the tunnel needs it: the flow
//! key of the send queue's FQ-CoDel (RFC 8290 §4.1.1) and of `per-flow`
//! reordering, and the transport protocol (`per-flow` treats TCP, whose
//! RACK tolerates a lone reordered packet, apart from QUIC-like flows).
//!
//! Inner packets come from the TUN or from the peer: any bytes. Nothing
//! here reads out of bounds; at most 8 IPv6 extension headers are walked.

/// What the flow key reads of an inner IP packet.
struct InnerIp<'a> {
    version: u8,
    /// Transport protocol (IPv4 Protocol; IPv6 the Next Header after the
    /// extension headers walked).
    proto: u8,
    /// Source and destination address.
    addresses: &'a [u8],
    /// The transport header onwards; `None` for a fragment after the first
    /// (no ports in it).
    l4: Option<&'a [u8]>,
}

impl<'a> InnerIp<'a> {
    /// `None` for a non-IP or malformed packet.
    fn parse(p: &'a [u8]) -> Option<Self> {
        match p.first().map(|b| b >> 4) {
            Some(4) if p.len() >= 20 && usize::from(p[0] & 0xf) * 4 >= 20 => {
                let ihl = usize::from(p[0] & 0xf) * 4;
                let first_fragment = u16::from_be_bytes([p[6], p[7]]) & 0x1fff == 0;
                Some(InnerIp {
                    version: 4,
                    proto: p[9],
                    addresses: &p[12..20],
                    l4: first_fragment.then(|| p.get(ihl..).unwrap_or(&[])),
                })
            }
            Some(6) if p.len() >= 40 => {
                let mut next = p[6];
                let mut off = 40;
                let mut ports = true;
                for _ in 0..8 {
                    match next {
                        // Hop-by-hop, routing, destination options: length
                        // in 8-octet units after the first 8 (RFC 8200
                        // §4.3–4.6).
                        0 | 43 | 60 => match p.get(off..off + 2) {
                            Some(e) => {
                                next = e[0];
                                off += (usize::from(e[1]) + 1) * 8;
                            }
                            None => break,
                        },
                        // Fragment: ports only in the first (RFC 8200 §4.5).
                        44 => match p.get(off..off + 8) {
                            Some(e) => {
                                next = e[0];
                                ports &= u16::from_be_bytes([e[2], e[3]]) >> 3 == 0;
                                off += 8;
                            }
                            None => break,
                        },
                        _ => break,
                    }
                }
                Some(InnerIp {
                    version: 6,
                    proto: next,
                    addresses: &p[8..40],
                    l4: ports.then(|| p.get(off..).unwrap_or(&[])),
                })
            }
            _ => None,
        }
    }
}

/// IP protocol number of TCP.
pub(crate) const TCP: u8 = 6;

/// The sequence number of an inner TCP segment that carries data (RFC 9293
/// §3.1: at byte 4 of the TCP header; the payload is what the IP length
/// leaves after the IP and TCP headers, Data Offset × 4). `None` for a
/// segment without payload (a pure ack, a SYN), a later fragment, a
/// non-TCP or malformed packet (Data Offset below 5, a header that ends
/// early). `per-flow` reordering counts a data segment that does not
/// advance its flow's highest sequence number as the inner sender's
/// retransmission: a loss the flow saw, wherever it happened.
pub(crate) fn tcp_data_seq(p: &[u8]) -> Option<u32> {
    let ip = InnerIp::parse(p)?;
    let tcp = ip.l4.filter(|_| ip.proto == TCP)?;
    let h = tcp.get(..20)?;
    let data_offset = usize::from(h[12] >> 4) * 4;
    if data_offset < 20 {
        return None;
    }
    // Where the IP packet says it ends (IPv4 Total Length; IPv6 the fixed
    // header plus Payload Length), no further than the bytes there are.
    let declared = match ip.version {
        4 => usize::from(u16::from_be_bytes([p[2], p[3]])),
        _ => 40 + usize::from(u16::from_be_bytes([p[4], p[5]])),
    };
    let tcp_at = p.len() - tcp.len();
    let payload = declared.min(p.len()).saturating_sub(tcp_at + data_offset);
    (payload > 0).then(|| u32::from_be_bytes([h[4], h[5], h[6], h[7]]))
}

/// Seeded hash of an inner packet's flow: IP version, protocol, addresses
/// and, where present, ports (TCP, UDP, UDP-Lite, DCCP, SCTP) or the ICMP
/// echo identifier (so two pings are two flows). A fragment after the
/// first, or a header that ends early, hashes by addresses only; a
/// non-IP or malformed packet hashes to one fixed bucket.
pub(crate) fn flow_hash(p: &[u8], seed: u64) -> u64 {
    flow_key(p, seed).0
}

/// [`flow_hash`] and the transport protocol (IPv4 Protocol, IPv6 Next
/// Header after the extension headers walked; `None` for non-IP), from one
/// read of the header.
pub(crate) fn flow_key(p: &[u8], seed: u64) -> (u64, Option<u8>) {
    let mut h = Fnv(seed ^ 0xcbf2_9ce4_8422_2325);
    let ip = InnerIp::parse(p);
    match &ip {
        Some(ip) => {
            h.write(&[ip.version, ip.proto]);
            h.write(ip.addresses);
            if let Some(l4) = ip.l4 {
                transport(&mut h, ip.proto, l4);
            }
        }
        None => h.write(&[0]),
    }
    (h.finish(), ip.map(|ip| ip.proto))
}

/// The transport part of the flow key, if the header is all there.
fn transport(h: &mut Fnv, proto: u8, l4: &[u8]) {
    match proto {
        // TCP, UDP, DCCP, SCTP, UDP-Lite: source and destination ports.
        6 | 17 | 33 | 132 | 136 => {
            if let Some(ports) = l4.get(..4) {
                h.write(ports);
            }
        }
        // ICMP echo / echo reply, ICMPv6 echo request / reply: identifier.
        1 | 58 => {
            if let (Some(&t), Some(id)) = (l4.first(), l4.get(4..6)) {
                if matches!((proto, t), (1, 0 | 8) | (58, 128 | 129)) {
                    h.write(id);
                }
            }
        }
        _ => {}
    }
}

/// FNV-1a with a seeded basis and a final avalanche (splitmix64's), so the
/// low and high bits both depend on every byte. Deterministic for a seed;
/// the connection's seed keeps the bucket of a flow unpredictable to
/// someone who does not know it.
struct Fnv(u64);

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP segment: 20-byte IP header (Total Length set), a TCP
    /// header of `data_offset` words, `payload` bytes.
    fn tcp4(seq: u32, data_offset: u8, payload: usize) -> Vec<u8> {
        let tcp_len = usize::from(data_offset) * 4;
        let total = 20 + tcp_len.max(20) + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = TCP;
        p[12..20].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        p[20..24].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = data_offset << 4;
        p
    }

    #[test]
    fn a_data_segment_gives_its_sequence_number() {
        // Timestamps option: data offset 8 (32-byte header).
        assert_eq!(tcp_data_seq(&tcp4(0xdead_beef, 8, 1448)), Some(0xdead_beef));
        assert_eq!(tcp_data_seq(&tcp4(7, 5, 1)), Some(7));
    }

    #[test]
    fn segments_without_data_or_malformed_give_none() {
        // A pure ack: the IP length ends where the TCP header does.
        assert_eq!(tcp_data_seq(&tcp4(7, 8, 0)), None);
        // Data offset below 5 words is malformed (RFC 9293 §3.1).
        assert_eq!(tcp_data_seq(&tcp4(7, 4, 100)), None);
        // Truncated inside the TCP header.
        assert_eq!(tcp_data_seq(&tcp4(7, 5, 100)[..30]), None);
        // Total Length shorter than the headers: no payload, no panic.
        let mut p = tcp4(7, 5, 100);
        p[2..4].copy_from_slice(&30u16.to_be_bytes());
        assert_eq!(tcp_data_seq(&p), None);
        // Not TCP (UDP), and a later fragment (no TCP header in it).
        let mut u = tcp4(7, 5, 100);
        u[9] = 17;
        assert_eq!(tcp_data_seq(&u), None);
        let mut f = tcp4(7, 5, 100);
        f[7] = 10;
        assert_eq!(tcp_data_seq(&f), None);
        assert_eq!(tcp_data_seq(&[]), None);
        assert_eq!(tcp_data_seq(&[0x45; 19]), None);
    }

    #[test]
    fn an_ipv6_segment_behind_an_extension_header_is_read() {
        // IPv6, a destination-options header (8 bytes), TCP (20), 10 bytes.
        let mut p = vec![0u8; 40 + 8 + 20 + 10];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(8u16 + 20 + 10).to_be_bytes());
        p[6] = 60;
        p[40] = TCP;
        p[48 + 4..48 + 8].copy_from_slice(&42u32.to_be_bytes());
        p[48 + 12] = 5 << 4;
        assert_eq!(tcp_data_seq(&p), Some(42));
        // The same without payload.
        p[4..6].copy_from_slice(&(8u16 + 20).to_be_bytes());
        assert_eq!(tcp_data_seq(&p), None);
    }
}
