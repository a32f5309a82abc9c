//! Fuzz the TUN offload code (`mpdccp_net::offload`): the virtio-net header
//! parser and TSO splitter on frames from the TUN, and the GRO-style
//! coalescer on packets delivered by the tunnel (run with
//! `cargo +nightly fuzz run offload` from `fuzz/`).
//!
//! The input is a list of records `[ctrl, len, bytes…]`:
//!
//! * ctrl & 3 = 0: the bytes as a TUN frame to `split`;
//! * 1: the bytes as a delivered packet to the coalescer;
//! * 2: a valid TCP segment (IPv6 if bit 2; ACK and flags from bits 3–7, no
//!   FIN/SYN/RST; PSH only for TSO) carrying
//!   the bytes, continuing the flow's sequence, to the coalescer — or, if
//!   the first byte is odd, as a TSO frame with gso_size from the bytes to
//!   `split`: so inputs reach merging and segmentation, not just errors;
//! * 3: flush the coalescer; with bit 2 set instead a UDP record: a valid
//!   IPv4 UDP datagram carrying the bytes (IDs consecutive, port from bit
//!   3) to the coalescer (UDP GSO on) — or, if the first byte is odd, a
//!   USO (`GSO_UDP_L4`) frame with gso_size from the bytes to `split`.
//!
//! Beyond "no panic": the coalescer never writes more bytes than it was
//! given, nor a packet over 64 KiB; a valid TSO frame splits into
//! ceil(payload / gso_size) packets, none over the output buffer; so does a
//! valid USO frame (payload over gso_size, at most 128 segments), each
//! datagram with a valid UDP checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpdccp_net::offload::{split, Coalescer, OffloadStats, VnetHdr, MAX_PACKET_BYTES};

const OUT: usize = 1500;

/// RFC 1071 one's-complement sum of 16-bit big-endian words.
fn sum(data: &[u8], mut acc: u32) -> u32 {
    for c in data.chunks(2) {
        acc += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

fn pseudo(p: &[u8], v6: bool, tcp_len: usize) -> u32 {
    let addrs = if v6 { &p[8..40] } else { &p[12..20] };
    sum(addrs, 6 + tcp_len as u32 + ((tcp_len as u32) >> 16))
}

/// An IPv4/IPv6 + TCP packet with valid lengths and checksums.
fn tcp_packet(v6: bool, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let t = if v6 { 40 } else { 20 };
    let mut p = vec![0u8; t + 20 + payload.len()];
    let n = p.len();
    if v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
        p[6] = 6;
        p[7] = 64;
        p[8] = 0xfd;
        p[23] = 2;
        p[24] = 0xfd;
        p[39] = 1;
    } else {
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        p[6] = 0x40;
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 99, 0, 2]);
        p[16..20].copy_from_slice(&[10, 99, 0, 1]);
        let c = !(sum(&p[..20], 0) as u16);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
    p[t..t + 2].copy_from_slice(&40000u16.to_be_bytes());
    p[t + 2..t + 4].copy_from_slice(&5201u16.to_be_bytes());
    p[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
    p[t + 12] = 5 << 4;
    p[t + 13] = flags;
    p[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
    p[t + 20..].copy_from_slice(payload);
    let c = !(sum(&p[t..], pseudo(&p, v6, n - t)) as u16);
    p[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
    p
}

/// An IPv4 UDP datagram with valid lengths and checksums.
fn udp_packet(id: u16, sport: u16, payload: &[u8]) -> Vec<u8> {
    let n = 28 + payload.len();
    let mut p = vec![0u8; n];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 99, 0, 2]);
    p[16..20].copy_from_slice(&[10, 99, 0, 1]);
    let c = !(sum(&p[..20], 0) as u16);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&5201u16.to_be_bytes());
    p[24..26].copy_from_slice(&((n - 20) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    let c = !(udp_sum(&p) as u16);
    p[26..28].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    p
}

/// Pseudo-header (RFC 768) + UDP sum of IPv4 datagram `p`, folded to 16 bits.
fn udp_sum(p: &[u8]) -> u32 {
    let ulen = (p.len() - 20) as u32;
    fold(sum(&p[20..], sum(&p[12..20], 17 + ulen)))
}

fn fold(mut a: u32) -> u32 {
    while a >> 16 != 0 {
        a = (a & 0xffff) + (a >> 16);
    }
    a
}

/// A datagram as the kernel hands it out with USO.
fn uso_frame(payload: &[u8], gso: u16) -> Vec<u8> {
    let mut p = udp_packet(1, 40000, payload);
    let partial = fold(sum(&p[12..20], 17 + (p.len() - 20) as u32)) as u16;
    p[26..28].copy_from_slice(&partial.to_be_bytes());
    let h = VnetHdr {
        flags: 1,
        gso_type: 5,
        hdr_len: 28,
        gso_size: gso,
        csum_start: 20,
        csum_offset: 6,
    };
    let mut f = h.emit().to_vec();
    f.extend_from_slice(&p);
    f
}

/// The same segment as the kernel hands it out with TSO.
fn tso_frame(v6: bool, flags: u8, payload: &[u8], mss: u16) -> Vec<u8> {
    let mut p = tcp_packet(v6, 1, flags, payload);
    let t = if v6 { 40 } else { 20 };
    let partial = sum(&[], pseudo(&p, v6, p.len() - t)) as u16;
    p[t + 16..t + 18].copy_from_slice(&partial.to_be_bytes());
    let h = VnetHdr {
        flags: 1,
        gso_type: if v6 { 4 } else { 1 },
        hdr_len: (t + 20) as u16,
        gso_size: mss,
        csum_start: t as u16,
        csum_offset: 16,
    };
    let mut f = h.emit().to_vec();
    f.extend_from_slice(&p);
    f
}

struct State {
    co: Coalescer,
    stats: OffloadStats,
    out: Vec<u8>,
    bytes_in: usize,
    bytes_out: usize,
    seq: u32,
    udp_id: u16,
}

impl State {
    fn push(&mut self, pkt: &[u8]) {
        self.bytes_in += pkt.len();
        let mut written = 0;
        self.co.push(pkt, &mut self.stats, &mut |_, p| {
            assert!(p.len() <= MAX_PACKET_BYTES);
            written += p.len();
        });
        self.bytes_out += written;
    }

    fn flush(&mut self) {
        let mut written = 0;
        self.co.flush(&mut self.stats, &mut |_, p| {
            assert!(p.len() <= MAX_PACKET_BYTES);
            written += p.len();
        });
        self.bytes_out += written;
    }

    fn split(&mut self, frame: &[u8]) -> Option<usize> {
        let cap = self.out.len();
        split(frame, &mut self.out, &mut self.stats, |p| {
            assert!(p.len() <= cap)
        })
        .ok()
    }
}

fuzz_target!(|data: &[u8]| {
    let mut co = Coalescer::new();
    co.set_udp_gso(true);
    let mut s = State {
        co,
        stats: OffloadStats::default(),
        out: vec![0u8; OUT],
        bytes_in: 0,
        bytes_out: 0,
        seq: 1000,
        udp_id: 7,
    };
    let mut rest = data;
    while rest.len() >= 2 {
        let (ctrl, len) = (rest[0], usize::from(rest[1]));
        let end = (2 + len).min(rest.len());
        let bytes = &rest[2..end];
        rest = &rest[end..];
        match ctrl & 3 {
            0 => {
                s.split(bytes);
            }
            1 => s.push(bytes),
            2 => {
                let v6 = ctrl & 4 != 0;
                let flags = (ctrl & 0xf8) | 0x10;
                if bytes.first().is_some_and(|b| b & 1 == 1) && bytes.len() > 2 {
                    // A TSO train: payload = the bytes repeated to a few kB.
                    let mss = 100 + u16::from(bytes[1]) * 4;
                    let payload: Vec<u8> = bytes
                        .iter()
                        .cycle()
                        .take(bytes.len() * 20)
                        .copied()
                        .collect();
                    let frame = tso_frame(v6, 0x10 | (ctrl & 0x08), &payload, mss);
                    let n = s.split(&frame).expect("a valid TSO frame splits");
                    assert_eq!(n, payload.len().div_ceil(usize::from(mss)));
                } else {
                    let pkt = tcp_packet(v6, s.seq, flags & !0x07, bytes);
                    s.seq = s.seq.wrapping_add(bytes.len() as u32);
                    s.push(&pkt);
                }
            }
            _ if ctrl & 4 == 0 => s.flush(),
            _ => {
                if bytes.first().is_some_and(|b| b & 1 == 1) && bytes.len() > 2 {
                    let gso = 50 + u16::from(bytes[1]) * 4;
                    let payload: Vec<u8> = bytes
                        .iter()
                        .cycle()
                        .take(bytes.len() * 20)
                        .copied()
                        .collect();
                    let frame = uso_frame(&payload, gso);
                    let want = payload.len().div_ceil(usize::from(gso));
                    let mut ok = true;
                    let cap = s.out.len();
                    let r = split(&frame, &mut s.out, &mut s.stats, |p| {
                        assert!(p.len() <= cap);
                        ok &= udp_sum(p) == 0xffff;
                    });
                    if payload.len() > usize::from(gso) && want <= 128 {
                        assert_eq!(r, Ok(want), "a valid USO frame splits");
                        assert!(ok, "UDP checksums valid");
                    } else {
                        assert!(r.is_err(), "not a GSO packet: refused");
                    }
                } else {
                    let pkt = udp_packet(s.udp_id, 40000 + u16::from(ctrl >> 3 & 1), bytes);
                    s.udp_id = s.udp_id.wrapping_add(1);
                    s.push(&pkt);
                }
            }
        }
    }
    s.flush();
    assert!(
        s.bytes_out <= s.bytes_in,
        "{} out > {} in",
        s.bytes_out,
        s.bytes_in
    );
});
