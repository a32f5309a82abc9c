//! UDP offloads on the TUN, a child module of [`crate::offload`]
//! (declared there with `#[path]`, so it shares the checksum helpers and
//! the [`Coalescer`]'s state).
//!
//! * Reading: a frame with `gso_type` `VIRTIO_NET_HDR_GSO_UDP_L4` (an
//!   application's `UDP_SEGMENT` send, or forwarded UDP GRO, routed into a
//!   TUN that negotiated `TUN_F_USO4 | TUN_F_USO6`) becomes complete UDP
//!   datagrams of `gso_size` payload, the last maybe shorter — what Linux's
//!   `__udp_gso_segment` (net/ipv4/udp_offload.c) and `inet_gso_segment`
//!   (net/ipv4/af_inet.c: IPv4 ID incremented per segment) make of it.
//! * Writing: consecutive datagrams of one 5-tuple with equal payload size
//!   (the last may be shorter) → one UDP GSO super-packet, the rules of
//!   Linux's `udp_gro_receive_segment` (at most `UDP_GRO_CNT_MAX` = 64
//!   segments) plus exactness: the receiving kernel's re-segmentation must
//!   reproduce every datagram byte for byte, so IPv4 IDs must be
//!   consecutive and the UDP length exact.

use super::*;

/// `UDP_MAX_SEGMENTS` (include/linux/udp.h): more segments per GSO packet
/// than a sender may ask for are refused.
const UDP_MAX_SEGMENTS: usize = 128;
/// `UDP_GRO_CNT_MAX` (net/ipv4/udp_offload.c).
const UDP_GRO_MAX_SEGS: usize = 64;
const IPPROTO_UDP: u8 = 17;
/// Offset of the checksum in `struct udphdr`.
const UDP_CSUM_OFF: usize = 6;

/// IP/UDP layout of one packet.
#[derive(Clone, Copy, Debug)]
struct UdpLayout {
    v6: bool,
    /// IP header length (the UDP header follows).
    ip_hl: usize,
    /// End of the IP packet (its length field), ≤ the buffer.
    end: usize,
}

fn udp_layout(p: &[u8]) -> Result<UdpLayout, OffloadError> {
    let (v6, ip_hl, end) = super::ip_layout(p, IPPROTO_UDP, 8)?;
    Ok(UdpLayout { v6, ip_hl, end })
}

/// Splits a `GSO_UDP_L4` frame's packet `p` (header `h` already parsed).
pub(super) fn split_udp(
    h: &VnetHdr,
    p: &[u8],
    out: &mut [u8],
    stats: &mut OffloadStats,
    each: &mut impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let l = udp_layout(p)?;
    let t = l.ip_hl;
    let hl = t + 8;
    // virtio_net_hdr_from_skb: hdr_len = skb_headlen, within the frame.
    if usize::from(h.hdr_len) > p.len() {
        return Err(OffloadError::Truncated);
    }
    if h.flags & F_NEEDS_CSUM != 0
        && (usize::from(h.csum_start) != t || usize::from(h.csum_offset) != UDP_CSUM_OFF)
    {
        return Err(OffloadError::BadChecksumOffsets);
    }
    let mss = usize::from(h.gso_size);
    if mss == 0 {
        return Err(OffloadError::ZeroGsoSize);
    }
    let payload = &p[hl..l.end];
    // __udp_gso_segment: `gso_skb->len <= sizeof(*uh) + mss` is -EINVAL.
    if payload.len() <= mss {
        return Err(OffloadError::GsoSizeBeyondPayload);
    }
    let n = payload.len().div_ceil(mss);
    if n > UDP_MAX_SEGMENTS {
        return Err(OffloadError::TooManySegments);
    }
    if hl + mss > out.len() {
        return Err(OffloadError::OutputTooSmall);
    }
    let id0 = u16::from_be_bytes([p[4], p[5]]);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let len = hl + chunk.len();
        let q = &mut out[..len];
        q[..hl].copy_from_slice(&p[..hl]);
        q[hl..].copy_from_slice(chunk);
        if l.v6 {
            q[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        } else {
            q[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            // inet_gso_segment: `iph->id = htons(id++)` for non-fixed-ID GSO.
            q[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            ipv4_header_checksum(q, t);
        }
        q[t + 4..t + 6].copy_from_slice(&((8 + chunk.len()) as u16).to_be_bytes());
        q[t + 6] = 0;
        q[t + 7] = 0;
        // RFC 768: a computed 0 is sent as 0xFFFF (RFC 8200 §8.1 for IPv6).
        let c = transport_checksum(q, l.v6, t, IPPROTO_UDP);
        q[t + 6..t + 8].copy_from_slice(&c.to_be_bytes());
        each(q);
    }
    stats.uso_frames += 1;
    stats.uso_segments += n as u64;
    Ok(n)
}

/// A UDP datagram that may start or extend a super-packet.
#[derive(Clone, Copy, Debug)]
pub(super) struct UdpSeg {
    l: UdpLayout,
    payload: usize,
}

/// What may be coalesced: IPv4 without options or fragments (header
/// checksum valid: the merged header is recomputed) / IPv6 with UDP right
/// after the fixed header; UDP length equal to the IP payload, a non-zero
/// checksum (IPv4's "no checksum" would be replaced by a real one), a
/// non-empty payload; the IP length equal to the buffer.
pub(super) fn udp_coalescable(p: &[u8]) -> Option<UdpSeg> {
    let l = udp_layout(p).ok()?;
    // An IPv6 packet may be 40 bytes over 64 KiB: not for the buffer.
    if l.end != p.len() || p.len() > MAX_PACKET_BYTES {
        return None;
    }
    if !l.v6 && (l.ip_hl != 20 || fold(sum_be(&p[..20], 0)) != 0xffff) {
        return None;
    }
    let t = l.ip_hl;
    let ulen = usize::from(u16::from_be_bytes([p[t + 4], p[t + 5]]));
    if ulen != l.end - t || p[t + 6..t + 8] == [0, 0] || ulen == 8 {
        return None;
    }
    Some(UdpSeg {
        l,
        payload: ulen - 8,
    })
}

/// Whether a complete UDP datagram in `p` has a valid checksum.
pub(super) fn udp_checksum_ok(p: &[u8], s: &UdpSeg) -> bool {
    let seg = &p[s.l.ip_hl..];
    fold(sum_be(seg, pseudo_sum(p, s.l.v6, IPPROTO_UDP, seg.len()))) == 0xffff
}

/// The pending UDP super-packet of a [`Coalescer`].
#[derive(Clone, Copy, Debug)]
pub(super) struct UdpPending {
    first: UdpSeg,
    /// The IPv4 ID the next datagram must carry.
    next_id: u16,
}

impl Coalescer {
    /// Lets [`Coalescer::push`] merge UDP datagrams into `GSO_UDP_L4`
    /// super-packets: only for a TUN that accepted `TUN_F_USO4 |
    /// TUN_F_USO6` ([`crate::tun::Tun::uso`]; off by default).
    pub fn set_udp_gso(&mut self, on: bool) {
        self.udp_gso = on;
    }

    /// Offers a UDP datagram; `false` if it is not one the coalescer takes
    /// (the caller treats it as any other packet).
    pub(super) fn push_udp(
        &mut self,
        pkt: &[u8],
        stats: &mut OffloadStats,
        write: &mut impl FnMut(&[u8; VNET_HDR_LEN], &[u8]),
    ) -> bool {
        let Some(s) = udp_coalescable(pkt) else {
            return false;
        };
        if !udp_checksum_ok(pkt, &s) {
            stats.udp_gro_bad_checksum += 1;
            return false;
        }
        let hl = s.l.ip_hl + 8;
        if self.can_append_udp(pkt, &s) {
            self.buf[self.len..self.len + s.payload].copy_from_slice(&pkt[hl..]);
            self.len += s.payload;
            self.segs += 1;
            if let Some(u) = &mut self.udp {
                u.next_id = u.next_id.wrapping_add(1);
                if s.payload < u.first.payload {
                    self.closed = true;
                }
            }
            return true;
        }
        self.flush(stats, write);
        self.buf[..pkt.len()].copy_from_slice(pkt);
        self.len = pkt.len();
        self.segs = 1;
        self.closed = false;
        self.udp = Some(UdpPending {
            first: s,
            next_id: u16::from_be_bytes([pkt[4], pkt[5]]).wrapping_add(1),
        });
        true
    }

    fn can_append_udp(&self, p: &[u8], s: &UdpSeg) -> bool {
        let Some(u) = self.udp else {
            return false;
        };
        let f = u.first;
        if self.len == 0
            || self.closed
            || f.l.v6 != s.l.v6
            || s.payload > f.payload
            || self.segs >= UDP_GRO_MAX_SEGS
            || self.len + s.payload > MAX_PACKET_BYTES
        {
            return false;
        }
        let q = &self.buf[..f.l.ip_hl];
        // Everything but lengths and (IPv4) ID and header checksum equal:
        // TOS, DF, TTL, addresses / traffic class, flow label, hop limit.
        let ip_same = if f.l.v6 {
            q[..4] == p[..4] && q[6..40] == p[6..40]
        } else {
            q[..2] == p[..2]
                && q[6..10] == p[6..10]
                && q[12..20] == p[12..20]
                && u16::from_be_bytes([p[4], p[5]]) == u.next_id
        };
        let t = f.l.ip_hl;
        ip_same && self.buf[t..t + 4] == p[t..t + 4]
    }

    /// Writes the pending UDP super-packet (called by [`Coalescer::flush`]
    /// with `self.len` already taken as `len`).
    pub(super) fn flush_udp(
        &mut self,
        u: UdpPending,
        len: usize,
        stats: &mut OffloadStats,
        write: &mut impl FnMut(&[u8; VNET_HDR_LEN], &[u8]),
    ) {
        if self.segs <= 1 {
            write(&PLAIN_HDR, &self.buf[..len]);
            return;
        }
        let f = u.first;
        let q = &mut self.buf[..len];
        let t = f.l.ip_hl;
        if f.l.v6 {
            q[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        } else {
            q[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            ipv4_header_checksum(q, t);
        }
        q[t + 4..t + 6].copy_from_slice(&((len - t) as u16).to_be_bytes());
        // CHECKSUM_PARTIAL: the (uncomplemented) pseudo-header sum over the
        // whole length, as udp4_hwcsum/udp6_hwcsum_outgoing leave it;
        // __udp_gso_segment adjusts it per segment.
        let partial = fold(pseudo_sum(q, f.l.v6, IPPROTO_UDP, len - t));
        q[t + 6..t + 8].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: (t + 8) as u16,
            gso_size: f.payload as u16,
            csum_start: t as u16,
            csum_offset: UDP_CSUM_OFF as u16,
        };
        stats.udp_gro_frames += 1;
        stats.udp_gro_segments += self.segs as u64;
        write(&h.emit(), q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 by the definition (16-bit big-endian words, end-around
    /// carry), independent of `sum_be`.
    fn naive_sum(parts: &[&[u8]]) -> u16 {
        let bytes: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        let mut s: u32 = 0;
        for c in bytes.chunks(2) {
            s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    /// RFC 768 / RFC 8200 §8.1 pseudo-header bytes of datagram `p`.
    fn pseudo_bytes(p: &[u8], v6: bool) -> Vec<u8> {
        let t = if v6 { 40 } else { 20 };
        let ulen = (p.len() - t) as u32;
        let mut b = if v6 {
            p[8..40].to_vec()
        } else {
            p[12..20].to_vec()
        };
        if v6 {
            b.extend_from_slice(&ulen.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 17]);
        } else {
            b.extend_from_slice(&[0, 17]);
            b.extend_from_slice(&(ulen as u16).to_be_bytes());
        }
        b
    }

    fn udp_valid(p: &[u8], v6: bool) -> bool {
        let t = if v6 { 40 } else { 20 };
        naive_sum(&[&pseudo_bytes(p, v6), &p[t..]]) == 0xffff && p[t + 6..t + 8] != [0, 0]
    }

    /// A complete IPv4/IPv6 UDP datagram, checksums valid.
    fn udp_packet(v6: bool, id: u16, sport: u16, payload: &[u8]) -> Vec<u8> {
        let t = if v6 { 40 } else { 20 };
        let mut p = vec![0u8; t + 8 + payload.len()];
        let n = p.len();
        if v6 {
            p[0] = 0x60;
            p[1] = 0x0a; // traffic class / flow label bits
            p[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
            p[6] = 17;
            p[7] = 64;
            p[8..24].copy_from_slice(&[0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            p[24..40].copy_from_slice(&[0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        } else {
            p[0] = 0x45;
            p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            p[4..6].copy_from_slice(&id.to_be_bytes());
            p[6] = 0x40; // DF
            p[8] = 64;
            p[9] = 17;
            p[12..16].copy_from_slice(&[10, 99, 0, 2]);
            p[16..20].copy_from_slice(&[10, 99, 0, 1]);
            let c = !naive_sum(&[&p[..20]]);
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        p[t..t + 2].copy_from_slice(&sport.to_be_bytes());
        p[t + 2..t + 4].copy_from_slice(&5201u16.to_be_bytes());
        p[t + 4..t + 6].copy_from_slice(&((n - t) as u16).to_be_bytes());
        p[t + 8..].copy_from_slice(payload);
        let c = !naive_sum(&[&pseudo_bytes(&p, v6), &p[t..]]);
        let c = if c == 0 { 0xffff } else { c };
        p[t + 6..t + 8].copy_from_slice(&c.to_be_bytes());
        p
    }

    /// A USO frame as the kernel hands it out: one datagram with all the
    /// payload, the UDP length the total, the checksum field the
    /// pseudo-header sum (`udp4_hwcsum`), NEEDS_CSUM.
    fn uso_frame(v6: bool, payload: &[u8], gso: u16) -> Vec<u8> {
        let mut p = udp_packet(v6, 0x1234, 40000, payload);
        let t = if v6 { 40 } else { 20 };
        let partial = naive_sum(&[&pseudo_bytes(&p, v6)]);
        p[t + 6..t + 8].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: (t + 8) as u16,
            gso_size: gso,
            csum_start: t as u16,
            csum_offset: 6,
        };
        let mut f = h.emit().to_vec();
        f.extend_from_slice(&p);
        f
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 13 + i / 253) as u8).collect()
    }

    fn split_all(f: &[u8]) -> Result<(Vec<Vec<u8>>, OffloadStats), OffloadError> {
        let mut out = vec![0u8; 1500];
        let mut st = OffloadStats::default();
        let mut v = Vec::new();
        split(f, &mut out, &mut st, |q| v.push(q.to_vec()))?;
        Ok((v, st))
    }

    use super::super::tests::{coalesce_all, Written};

    fn coalesce(pkts: &[Vec<u8>]) -> (Written, OffloadStats) {
        coalesce_all(pkts, true)
    }

    fn check_split(v6: bool) {
        let data = payload(10 * 1200 + 500);
        let (segs, st) = split_all(&uso_frame(v6, &data, 1200)).unwrap();
        assert_eq!(segs.len(), 11);
        assert_eq!((st.uso_frames, st.uso_segments), (1, 11));
        let t = if v6 { 40 } else { 20 };
        for (i, s) in segs.iter().enumerate() {
            let chunk = &data[i * 1200..((i + 1) * 1200).min(data.len())];
            // Byte for byte what the sender would have sent unsegmented.
            assert_eq!(
                s,
                &udp_packet(v6, 0x1234 + i as u16, 40000, chunk),
                "seg {i}"
            );
            assert!(udp_valid(s, v6), "UDP checksum of {i}");
            let ulen = usize::from(u16::from_be_bytes([s[t + 4], s[t + 5]]));
            assert_eq!(ulen, 8 + chunk.len());
            if v6 {
                assert_eq!(usize::from(u16::from_be_bytes([s[4], s[5]])), ulen);
            } else {
                assert_eq!(usize::from(u16::from_be_bytes([s[2], s[3]])), s.len());
                assert_eq!(naive_sum(&[&s[..20]]), 0xffff, "IPv4 header checksum");
                assert_eq!(u16::from_be_bytes([s[4], s[5]]), 0x1234 + i as u16, "IP ID");
                assert_eq!(s[6], 0x40, "DF kept");
            }
        }
    }

    #[test]
    fn uso_ipv4_splits_into_exact_datagrams() {
        check_split(false);
    }

    #[test]
    fn uso_ipv6_splits_into_exact_datagrams() {
        check_split(true);
    }

    /// A segment whose checksum computes to 0 carries 0xFFFF (RFC 768).
    #[test]
    fn uso_zero_checksum_is_sent_as_ffff() {
        for v6 in [false, true] {
            let t = if v6 { 40 } else { 20 };
            let mut data = payload(3 * 100);
            // Make the first segment's sum 0xffff: its last word is the
            // complement of the sum without it.
            data[98] = 0;
            data[99] = 0;
            let mut seg0 = udp_packet(v6, 0x1234, 40000, &data[..100]);
            seg0[t + 6] = 0;
            seg0[t + 7] = 0;
            let w = !naive_sum(&[&pseudo_bytes(&seg0, v6), &seg0[t..]]);
            data[98..100].copy_from_slice(&w.to_be_bytes());
            let (segs, _) = split_all(&uso_frame(v6, &data, 100)).unwrap();
            assert_eq!(segs.len(), 3);
            assert_eq!(segs[0][t + 6..t + 8], [0xff, 0xff], "v6 {v6}");
            assert!(segs.iter().all(|s| udp_valid(s, v6)));
        }
    }

    fn check_roundtrip(v6: bool) {
        let data = payload(20 * 1200 + 77);
        let pkts: Vec<Vec<u8>> = data
            .chunks(1200)
            .enumerate()
            .map(|(i, c)| udp_packet(v6, 100 + i as u16, 40000, c))
            .collect();
        let (w, st) = coalesce(&pkts);
        assert_eq!(w.len(), 1);
        assert_eq!((st.udp_gro_frames, st.udp_gro_segments), (1, 21));
        let (h, p) = &w[0];
        let hdr = VnetHdr::parse(h).unwrap();
        let t = if v6 { 40 } else { 20 };
        assert_eq!(
            hdr,
            VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_UDP_L4,
                hdr_len: t as u16 + 8,
                gso_size: 1200,
                csum_start: t as u16,
                csum_offset: 6,
            }
        );
        assert_eq!(p.len(), t + 8 + data.len());
        // The checksum field: the pseudo-header sum over the whole length.
        assert_eq!(
            u16::from_be_bytes([p[t + 6], p[t + 7]]),
            naive_sum(&[&pseudo_bytes(p, v6)])
        );
        let mut f = h.to_vec();
        f.extend_from_slice(p);
        let (segs, _) = split_all(&f).unwrap();
        assert_eq!(segs, pkts, "round trip byte for byte");
    }

    #[test]
    fn coalesce_then_split_roundtrip_ipv4() {
        check_roundtrip(false);
    }

    #[test]
    fn coalesce_then_split_roundtrip_ipv6() {
        check_roundtrip(true);
    }

    #[test]
    fn coalescing_refuses_other_flows_sizes_ids_and_bad_checksums() {
        let d = payload(1200);
        let a = |id: u16, n: usize| udp_packet(false, id, 40000, &d[..n]);
        let kinds = |w: &Written| -> Vec<u8> { w.iter().map(|(h, _)| h[1]).collect() };
        // Another flow in between: nothing merges across it.
        let other = udp_packet(false, 2, 40001, &d);
        let (w, _) = coalesce(&[a(1, 1200), other.clone(), a(2, 1200)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w[1].1, other);
        // Two flows one after the other: two super-packets, order kept.
        let (w, st) = coalesce(&[
            a(1, 1200),
            a(2, 1200),
            udp_packet(false, 7, 40001, &d),
            udp_packet(false, 8, 40001, &d),
        ]);
        assert_eq!(kinds(&w), vec![GSO_UDP_L4, GSO_UDP_L4]);
        assert_eq!(st.udp_gro_segments, 4);
        assert_eq!(&w[1].1[20..22], &40001u16.to_be_bytes());
        // A shorter datagram ends a super-packet (as its last); a longer
        // one after it starts a new one.
        let (w, _) = coalesce(&[a(1, 1200), a(2, 1200), a(3, 500), a(4, 1200)]);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].1.len(), 28 + 2900);
        assert_eq!(w[1], (PLAIN_HDR, a(4, 1200)));
        // A bigger one after a smaller first one is not merged.
        let (w, _) = coalesce(&[a(1, 500), a(2, 1200)]);
        assert_eq!(w, vec![(PLAIN_HDR, a(1, 500)), (PLAIN_HDR, a(2, 1200))]);
        // IDs not consecutive: the kernel would renumber them.
        let (w, _) = coalesce(&[a(1, 1200), a(3, 1200)]);
        assert_eq!(kinds(&w), vec![0, 0]);
        // TTL differs.
        let mut ttl = a(2, 1200);
        ttl[8] = 63;
        let c = !naive_sum(&[&ttl[..10], &ttl[12..20]]);
        ttl[10..12].copy_from_slice(&c.to_be_bytes());
        let (w, _) = coalesce(&[a(1, 1200), ttl.clone()]);
        assert_eq!(w, vec![(PLAIN_HDR, a(1, 1200)), (PLAIN_HDR, ttl)]);
        // A corrupted payload: written alone, unchanged, counted.
        let mut bad = a(2, 1200);
        bad[100] ^= 0x5a;
        let (w, st) = coalesce(&[a(1, 1200), bad.clone(), a(3, 1200)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w[1], (PLAIN_HDR, bad));
        assert_eq!(st.udp_gro_bad_checksum, 1);
        // IPv4 "no checksum" (0) is not merged (the merge would add one).
        let mut nock = a(2, 1200);
        nock[26] = 0;
        nock[27] = 0;
        let (w, _) = coalesce(&[a(1, 1200), nock]);
        assert_eq!(kinds(&w), vec![0, 0]);
        // A fragment is not a datagram.
        let mut frag = a(2, 1200);
        frag[6] |= 0x20;
        let (w, _) = coalesce(&[a(1, 1200), frag]);
        assert_eq!(kinds(&w), vec![0, 0]);
        // Limits: 64 segments, 65 535 bytes.
        let many: Vec<Vec<u8>> = (0..70).map(|i| a(i, 900)).collect();
        let (w, _) = coalesce(&many);
        let segs: Vec<usize> = w.iter().map(|(_, p)| (p.len() - 28) / 900).collect();
        assert_eq!(segs, vec![64, 6]);
        let big = payload(1400);
        let many: Vec<Vec<u8>> = (0..60).map(|i| udp_packet(false, i, 40000, &big)).collect();
        let (w, _) = coalesce(&many);
        assert!(w.iter().all(|(_, p)| p.len() <= MAX_PACKET_BYTES));
        assert_eq!(w[0].1.len(), 28 + 46 * 1400);
        // Off (a TUN without USO): nothing merges.
        let mut c = Coalescer::new();
        let mut n = 0;
        for p in [a(1, 1200), a(2, 1200)] {
            c.push(&p, &mut OffloadStats::default(), &mut |h, _| {
                assert_eq!(*h, PLAIN_HDR);
                n += 1;
            });
        }
        assert_eq!(n, 2, "each written alone at once");
    }

    /// IPv6 allows a packet 40 bytes over 64 KiB (payload length 65 535);
    /// it passes alone instead of overrunning the coalescing buffer.
    #[test]
    fn largest_ipv6_packets_pass_alone() {
        let big = udp_packet(true, 0, 40000, &payload(65_535 - 8));
        assert_eq!(big.len(), 65_575);
        let mut tcp = big.clone();
        tcp[6] = 6;
        tcp[40 + 12] = 5 << 4;
        tcp[40 + 13] = 0x10;
        let c = transport_checksum(
            &{
                let mut t = tcp.clone();
                t[56] = 0;
                t[57] = 0;
                t
            },
            true,
            40,
            6,
        );
        tcp[56..58].copy_from_slice(&c.to_be_bytes());
        for p in [big, tcp] {
            let (w, _) = coalesce(&[p.clone(), p.clone()]);
            assert_eq!(w, vec![(PLAIN_HDR, p.clone()), (PLAIN_HDR, p)]);
        }
    }

    /// TCP and UDP interleaved: each flush keeps arrival order.
    #[test]
    fn mixed_tcp_and_udp_keep_order() {
        let d = payload(1200);
        let u = |id: u16| udp_packet(false, id, 40000, &d);
        let mut tcp = u(9);
        tcp[9] = 6; // not UDP any more: passes alone
        let c = !naive_sum(&[&tcp[..10], &tcp[12..20]]);
        tcp[10..12].copy_from_slice(&c.to_be_bytes());
        let (w, _) = coalesce(&[u(1), u(2), tcp.clone(), u(3), u(4)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].0[1], GSO_UDP_L4);
        assert_eq!(w[1].1, tcp);
        assert_eq!(w[2].0[1], GSO_UDP_L4);
        assert_eq!(&w[2].1[4..6], &3u16.to_be_bytes());
    }

    #[test]
    fn hostile_uso_frames_are_errors_not_panics() {
        let good = uso_frame(false, &payload(5000), 1200);
        assert_eq!(split_all(&good).unwrap().0.len(), 5);
        let set =
            |f: &mut Vec<u8>, at: usize, v: u16| f[at..at + 2].copy_from_slice(&v.to_le_bytes());
        let mut f = good.clone();
        set(&mut f, 4, 0);
        assert_eq!(split_all(&f).unwrap_err(), OffloadError::ZeroGsoSize);
        let mut f = good.clone();
        set(&mut f, 4, 5000);
        assert_eq!(
            split_all(&f).unwrap_err(),
            OffloadError::GsoSizeBeyondPayload
        );
        let mut f = good.clone();
        set(&mut f, 4, 6000);
        assert_eq!(
            split_all(&f).unwrap_err(),
            OffloadError::GsoSizeBeyondPayload
        );
        let mut f = good.clone();
        set(&mut f, 4, 30);
        assert_eq!(split_all(&f).unwrap_err(), OffloadError::TooManySegments);
        let mut f = good.clone();
        set(&mut f, 2, 6000);
        assert_eq!(
            split_all(&f).unwrap_err(),
            OffloadError::Truncated,
            "hdr_len beyond frame"
        );
        let mut f = good.clone();
        set(&mut f, 8, 16);
        assert_eq!(split_all(&f).unwrap_err(), OffloadError::BadChecksumOffsets);
        // Truncated: headers cut, IP length beyond the frame.
        for cut in [VNET_HDR_LEN + 10, VNET_HDR_LEN + 25, good.len() - 1] {
            assert_eq!(
                split_all(&good[..cut]).unwrap_err(),
                OffloadError::Truncated,
                "cut {cut}"
            );
        }
        // IP length too short for a UDP header.
        let mut f = good.clone();
        f[VNET_HDR_LEN + 2..VNET_HDR_LEN + 4].copy_from_slice(&24u16.to_be_bytes());
        assert_eq!(split_all(&f).unwrap_err(), OffloadError::Truncated);
        // Not UDP.
        let mut f = good.clone();
        f[VNET_HDR_LEN + 9] = 6;
        assert_eq!(split_all(&f).unwrap_err(), OffloadError::Malformed);
        // Output buffer smaller than a segment.
        let mut out = [0u8; 1000];
        assert_eq!(
            split(&good, &mut out, &mut OffloadStats::default(), |_| {}),
            Err(OffloadError::OutputTooSmall)
        );
        // Mutations never panic, segments fit the buffer, merged packets
        // fit a frame.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out = vec![0u8; 1500];
        let mut st = OffloadStats::default();
        let mut co = Coalescer::new();
        co.set_udp_gso(true);
        for i in 0..20_000u32 {
            let v6 = i % 2 == 1;
            let mut f = uso_frame(
                v6,
                &payload(rnd() as usize % 4000 + 1),
                1 + (rnd() % 1300) as u16,
            );
            for _ in 0..(rnd() % 3) {
                let k = (rnd() as usize) % f.len();
                f[k] = rnd() as u8;
            }
            if rnd() % 4 == 0 {
                f.truncate((rnd() as usize) % (f.len() + 1));
            }
            let _ = split(&f, &mut out, &mut st, |q| {
                assert!(q.len() <= 1500);
            });
            let mut p = udp_packet(false, i as u16, 40000, &payload(600));
            if rnd() % 4 == 0 {
                let k = (rnd() as usize) % p.len();
                p[k] = rnd() as u8;
            }
            co.push(&p, &mut st, &mut |_, q| {
                assert!(q.len() <= MAX_PACKET_BYTES)
            });
            if rnd() % 8 == 0 {
                co.flush(&mut st, &mut |_, q| assert!(q.len() <= MAX_PACKET_BYTES));
            }
        }
        assert!(st.uso_frames > 1000 && st.split_errors > 1000, "{st:?}");
        assert!(st.udp_gro_segments > 1000, "{st:?}");
    }
}
