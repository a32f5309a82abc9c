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
