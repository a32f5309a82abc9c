//! TUN offloads: TCP and UDP super-packets in, coalesced super-packets out.
//!
//! With `IFF_VNET_HDR` every TUN read and write starts with a 10-byte
//! `struct virtio_net_hdr` (`<linux/virtio_net.h>`, little-endian fields on
//! this little-endian host). After `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4 |
//! TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6)` (USO: Linux >= 6.2; without it
//! the TCP set, see [`crate::tun::Tun::uso`]) the kernel hands us TCP and
//! UDP packets of up to 64 kB (TSO/USO: one `gso_size` payload per future
//! segment) and packets whose transport checksum is left for us to
//! complete (`NEEDS_CSUM`, the kernel's CHECKSUM_PARTIAL). Writing works
//! the other way: a super-packet with `gso_type` TCPV4/TCPV6/UDP_L4 is one
//! `sk_buff` for the receiving kernel instead of ~40 — the per-packet cost
//! of the receiving TCP is what bounds the tunnel (see the README's
//! profile).
//!
//! * [`split`]: one frame read from the TUN → IP packets of at most the
//!   tunnel MTU, each complete (IPv4 length/ID/header checksum, TCP
//!   sequence number/flags/checksum per segment; FIN and PSH only on the
//!   last segment, CWR only on the first, as RFC 3168 §6.1.2 and Linux's
//!   `tcp_gso_segment` do). `GSO_UDP_L4` frames (an application's
//!   `UDP_SEGMENT`, forwarded UDP GRO) become UDP datagrams of `gso_size`
//!   payload, the last maybe shorter, with UDP length/checksum and the
//!   IPv4 ID +1 per datagram as `__udp_gso_segment`/`inet_gso_segment` do
//!   (`offload_udp.rs`).
//! * [`Coalescer`]: consecutive in-order TCP segments of one flow delivered
//!   in the same wake-up → one super-packet; with
//!   [`Coalescer::set_udp_gso`], consecutive equal-sized UDP datagrams of
//!   one 5-tuple (consecutive IPv4 IDs, at most 64) → one `GSO_UDP_L4`
//!   super-packet that the kernel re-segments into the very same
//!   datagrams. It never waits for more: the caller flushes at the end of
//!   every wake-up, so no packet is held.
//!
//! Input from the TUN is the local kernel's, but the tunnel's delivered
//! packets come from the network: both are parsed defensively, every
//! malformed case is an [`OffloadError`] (counted by the caller) or a plain
//! pass-through, never a panic.

use std::fmt;

use serde::Serialize;

#[path = "offload_flows.rs"]
mod flows;
#[path = "offload_udp.rs"]
mod udp;
pub use flows::FlowCoalescer;

/// Size of `struct virtio_net_hdr` (no `num_buffers`; TUN's default).
pub const VNET_HDR_LEN: usize = 10;
/// The all-zero header: no offload, checksum complete.
pub const PLAIN_HDR: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_URG: u8 = 0x20;
#[cfg(test)]
const TCP_ECE: u8 = 0x40;
const TCP_CWR: u8 = 0x80;

/// Largest IP packet (IPv4 total length / what one TUN frame carries).
pub const MAX_PACKET_BYTES: usize = 65_535;

/// `struct virtio_net_hdr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Result<VnetHdr, OffloadError> {
        let b: &[u8; VNET_HDR_LEN] = b
            .get(..VNET_HDR_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(OffloadError::Truncated)?;
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }

    pub fn emit(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }
}

/// Why a frame read from the TUN could not be turned into packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadError {
    /// Shorter than its headers say.
    Truncated,
    /// Not the IP version / protocol the `gso_type` claims, bad header lengths.
    Malformed,
    /// A `gso_type` we did not ask for (UDP fragmentation offload, USO…).
    UnsupportedGso(u8),
    /// `gso_size` 0 for a GSO packet.
    ZeroGsoSize,
    /// `csum_start`/`csum_offset` outside the packet.
    BadChecksumOffsets,
    /// A segment does not fit the output buffer.
    OutputTooSmall,
    /// UDP GSO whose payload fits one `gso_size` (no GSO packet:
    /// `__udp_gso_segment` refuses it with -EINVAL).
    GsoSizeBeyondPayload,
    /// UDP GSO of more than `UDP_MAX_SEGMENTS` (128) datagrams.
    TooManySegments,
}

impl fmt::Display for OffloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OffloadError::Truncated => write!(f, "frame truncated"),
            OffloadError::Malformed => write!(f, "malformed IP/TCP headers"),
            OffloadError::UnsupportedGso(t) => write!(f, "unsupported gso_type {t}"),
            OffloadError::ZeroGsoSize => write!(f, "gso_size 0"),
            OffloadError::BadChecksumOffsets => write!(f, "checksum offsets outside packet"),
            OffloadError::OutputTooSmall => write!(f, "segment larger than output buffer"),
            OffloadError::GsoSizeBeyondPayload => write!(f, "gso_size not below the payload"),
            OffloadError::TooManySegments => write!(f, "more than 128 UDP segments"),
        }
    }
}

impl std::error::Error for OffloadError {}

/// Counters of both directions (the daemon adds them to its stats).
#[derive(Clone, Debug, Default, Serialize)]
pub struct OffloadStats {
    /// TUN frames that were TSO super-packets, and the segments made of them.
    pub tso_frames: u64,
    pub tso_segments: u64,
    /// Packets whose transport checksum we completed (`NEEDS_CSUM`).
    pub csum_completed: u64,
    /// Frames refused by [`split`] (dropped).
    pub split_errors: u64,
    /// Super-packets written, and the delivered segments coalesced into them.
    pub gro_frames: u64,
    pub gro_segments: u64,
    /// Delivered TCP segments not coalesced because their checksum was wrong
    /// (written alone; the kernel drops them as it would have).
    pub gro_bad_checksum: u64,
    /// TUN frames that were UDP GSO (`GSO_UDP_L4`) super-packets, and the
    /// datagrams made of them.
    pub uso_frames: u64,
    pub uso_segments: u64,
    /// UDP GSO super-packets written, the delivered datagrams merged into
    /// them, and datagrams not merged because their checksum was wrong.
    pub udp_gro_frames: u64,
    pub udp_gro_segments: u64,
    pub udp_gro_bad_checksum: u64,
}

// ---------------------------------------------------------------------------
// Internet checksum (RFC 1071).

/// Ones'-complement sum of `data` as big-endian 16-bit words, unfolded.
///
/// The bulk is summed as native-endian 32-bit words into a u64 (no carry
/// is lost below 2^32 words; the loop vectorises) and byte-swapped once at
/// the end: the ones'-complement sum is independent of byte order up to
/// that swap (RFC 1071 §2(B)).
fn sum_be(data: &[u8], mut acc: u64) -> u64 {
    let mut words = data.chunks_exact(4);
    let mut native: u64 = 0;
    for c in &mut words {
        native += u64::from(u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
    }
    let folded = fold(native);
    acc += u64::from(if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    });
    let mut rest = words.remainder().chunks_exact(2);
    for c in &mut rest {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = rest.remainder() {
        acc += u64::from(*b) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Pseudo-header sum (RFC 793 §3.1 / RFC 8200 §8.1) of an IP packet `p`
/// for a transport segment of `len` bytes and protocol `proto`.
fn pseudo_sum(p: &[u8], v6: bool, proto: u8, len: usize) -> u64 {
    let addrs = if v6 { &p[8..40] } else { &p[12..20] };
    sum_be(addrs, 0) + u64::from(proto) + len as u64
}

/// The complete checksum of transport segment `p[off..]` (its checksum
/// field must be zero or excluded by the caller).
fn transport_checksum(p: &[u8], v6: bool, off: usize, proto: u8) -> u16 {
    let seg = &p[off..];
    let c = !fold(sum_be(seg, pseudo_sum(p, v6, proto, seg.len())));
    if c == 0 && proto == 17 {
        0xffff
    } else {
        c
    }
}

fn ipv4_header_checksum(p: &mut [u8], ihl: usize) {
    p[10] = 0;
    p[11] = 0;
    let c = !fold(sum_be(&p[..ihl], 0));
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Whether a complete TCP segment in `p` (from `off`) has a valid checksum.
fn tcp_checksum_ok(p: &[u8], v6: bool, off: usize) -> bool {
    let seg = &p[off..];
    fold(sum_be(seg, pseudo_sum(p, v6, 6, seg.len()))) == 0xffff
}

// ---------------------------------------------------------------------------
// Reading: split super-packets.

/// IP/TCP layout of one packet.
#[derive(Clone, Copy, Debug)]
struct TcpLayout {
    v6: bool,
    /// IP header length.
    ip_hl: usize,
    /// IP + TCP header length.
    hl: usize,
    /// End of the IP packet (its length field), ≤ the buffer.
    end: usize,
}

/// The IP header of a packet carrying `proto` with at least `l4_min` bytes
/// of it: (IPv6, IP header length, end of the packet by its length field).
/// Offload packets carry their transport header right after the fixed IPv6
/// header; an IPv4 fragment (MF or an offset) is no whole segment.
pub(crate) fn ip_layout(
    p: &[u8],
    proto: u8,
    l4_min: usize,
) -> Result<(bool, usize, usize), OffloadError> {
    let v = p.first().ok_or(OffloadError::Truncated)? >> 4;
    let (v6, ip_hl, end) = match v {
        4 => {
            if p.len() < 20 {
                return Err(OffloadError::Truncated);
            }
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
            let frag = u16::from_be_bytes([p[6], p[7]]) & 0x3fff;
            if ihl < 20 || p[9] != proto || total < ihl || frag != 0 {
                return Err(OffloadError::Malformed);
            }
            (false, ihl, total)
        }
        6 => {
            if p.len() < 40 {
                return Err(OffloadError::Truncated);
            }
            if p[6] != proto {
                return Err(OffloadError::Malformed);
            }
            (true, 40, 40 + usize::from(u16::from_be_bytes([p[4], p[5]])))
        }
        _ => return Err(OffloadError::Malformed),
    };
    if end > p.len() || end < ip_hl + l4_min {
        return Err(OffloadError::Truncated);
    }
    Ok((v6, ip_hl, end))
}

fn tcp_layout(p: &[u8]) -> Result<TcpLayout, OffloadError> {
    let (v6, ip_hl, end) = ip_layout(p, 6, 20)?;
    let doff = usize::from(p[ip_hl + 12] >> 4) * 4;
    if doff < 20 || ip_hl + doff > end {
        return Err(OffloadError::Malformed);
    }
    Ok(TcpLayout {
        v6,
        ip_hl,
        hl: ip_hl + doff,
        end,
    })
}

/// Turns one frame read from a TUN opened with `IFF_VNET_HDR` (header +
/// packet) into complete IP packets, calling `each` for every one; `out`
/// is scratch space for segments (≥ the tunnel MTU). Returns how many
/// packets were produced. A frame without offload passes unchanged
/// (borrowed, no copy).
pub fn split(
    frame: &[u8],
    out: &mut [u8],
    stats: &mut OffloadStats,
    mut each: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let r = split_inner(frame, out, stats, &mut each);
    if r.is_err() {
        stats.split_errors += 1;
    }
    r
}

/// [`split`] for a frame the caller may change: a single packet whose
/// checksum the kernel left to us (`NEEDS_CSUM`, the common case of a UDP
/// sender without `UDP_SEGMENT`) has it completed where it lies instead of
/// in a copy in `out` — one pass over the packet less per datagram. Other
/// frames as [`split`].
pub fn split_in_place(
    frame: &mut [u8],
    out: &mut [u8],
    stats: &mut OffloadStats,
    mut each: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let h = match VnetHdr::parse(frame) {
        Ok(h) if h.gso_type & !GSO_ECN == GSO_NONE && h.flags & F_NEEDS_CSUM != 0 => h,
        _ => return split(frame, out, stats, each),
    };
    let p = &mut frame[VNET_HDR_LEN..];
    let r = complete_in_place(&h, p, stats);
    match r {
        Ok(()) => each(p),
        Err(_) => stats.split_errors += 1,
    }
    r.map(|()| 1)
}

fn split_inner(
    frame: &[u8],
    out: &mut [u8],
    stats: &mut OffloadStats,
    each: &mut impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let h = VnetHdr::parse(frame)?;
    let p = &frame[VNET_HDR_LEN..];
    let gso = h.gso_type & !GSO_ECN;
    match gso {
        GSO_NONE => complete_checksum(&h, p, out, stats, each),
        GSO_TCPV4 | GSO_TCPV6 => split_tcp(&h, gso == GSO_TCPV6, p, out, stats, each),
        GSO_UDP_L4 => udp::split_udp(&h, p, out, stats, each),
        // UFO (IP fragmentation of big UDP datagrams) was never negotiated.
        GSO_UDP => Err(OffloadError::UnsupportedGso(h.gso_type)),
        other => Err(OffloadError::UnsupportedGso(other)),
    }
}

/// One packet without GSO: as it is, or with its CHECKSUM_PARTIAL
/// completed into `out`.
fn complete_checksum(
    h: &VnetHdr,
    p: &[u8],
    out: &mut [u8],
    stats: &mut OffloadStats,
    each: &mut impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    if h.flags & F_NEEDS_CSUM == 0 {
        each(p);
        return Ok(1);
    }
    checksum_offsets(h, p)?;
    let q = out.get_mut(..p.len()).ok_or(OffloadError::OutputTooSmall)?;
    q.copy_from_slice(p);
    complete_in_place(h, q, stats)?;
    each(q);
    Ok(1)
}

/// Where the CHECKSUM_PARTIAL of packet `p` starts and where its field is.
fn checksum_offsets(h: &VnetHdr, p: &[u8]) -> Result<(usize, usize), OffloadError> {
    let start = usize::from(h.csum_start);
    let at = start + usize::from(h.csum_offset);
    if at + 2 > p.len() || start >= p.len() {
        return Err(OffloadError::BadChecksumOffsets);
    }
    Ok((start, at))
}

/// Completes the CHECKSUM_PARTIAL of packet `p` in place: the field at
/// csum_start + csum_offset holds the pseudo-header sum; sum from
/// csum_start and store the complement (what `skb_checksum_help` does).
fn complete_in_place(
    h: &VnetHdr,
    p: &mut [u8],
    stats: &mut OffloadStats,
) -> Result<(), OffloadError> {
    let (start, at) = checksum_offsets(h, p)?;
    let c = !fold(sum_be(&p[start..], 0));
    let c = if c == 0 { 0xffff } else { c };
    p[at..at + 2].copy_from_slice(&c.to_be_bytes());
    stats.csum_completed += 1;
    Ok(())
}

/// TSO: a TCP super-packet (IPv6 when `v6`) cut into `gso_size` segments,
/// each with its own IP length, ID, sequence number, flags and checksums.
fn split_tcp(
    h: &VnetHdr,
    v6: bool,
    p: &[u8],
    out: &mut [u8],
    stats: &mut OffloadStats,
    each: &mut impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let l = tcp_layout(p)?;
    if l.v6 != v6 {
        return Err(OffloadError::Malformed);
    }
    let mss = usize::from(h.gso_size);
    if mss == 0 {
        return Err(OffloadError::ZeroGsoSize);
    }
    let payload = &p[l.hl..l.end];
    let n = payload.len().div_ceil(mss).max(1);
    if l.hl + mss.min(payload.len()) > out.len() {
        return Err(OffloadError::OutputTooSmall);
    }
    let seq0 = u32::from_be_bytes([
        p[l.ip_hl + 4],
        p[l.ip_hl + 5],
        p[l.ip_hl + 6],
        p[l.ip_hl + 7],
    ]);
    let id0 = u16::from_be_bytes([p[4], p[5]]);
    let flags0 = p[l.ip_hl + 13];
    for i in 0..n {
        let chunk = payload
            .get(i * mss..((i + 1) * mss).min(payload.len()))
            .unwrap_or(&[]);
        let len = l.hl + chunk.len();
        let q = &mut out[..len];
        q[..l.hl].copy_from_slice(&p[..l.hl]);
        q[l.hl..].copy_from_slice(chunk);
        if l.v6 {
            q[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        } else {
            q[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            q[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            ipv4_header_checksum(q, l.ip_hl);
        }
        let t = l.ip_hl;
        let seq = seq0.wrapping_add((i * mss) as u32);
        q[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
        let mut fl = flags0;
        if i + 1 < n {
            fl &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            fl &= !TCP_CWR;
        }
        q[t + 13] = fl;
        q[t + 16] = 0;
        q[t + 17] = 0;
        let c = transport_checksum(q, l.v6, t, 6);
        q[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
        each(q);
    }
    stats.tso_frames += 1;
    stats.tso_segments += n as u64;
    Ok(n)
}

// ---------------------------------------------------------------------------
// Writing: coalesce delivered segments.

/// A TCP segment that may start or extend a super-packet.
#[derive(Clone, Copy, Debug)]
struct Seg {
    l: TcpLayout,
    seq: u32,
    payload: usize,
    flags: u8,
}

/// What may be coalesced: IPv4 without options or fragments / IPv6 with
/// TCP directly after the fixed header; a data segment with ACK, maybe PSH
/// or ECE, nothing else; the IP length equal to the buffer.
fn coalescable(p: &[u8]) -> Option<Seg> {
    let l = tcp_layout(p).ok()?;
    // An IPv6 packet may be 40 bytes over 64 KiB: not for the buffer.
    if l.end != p.len() || p.len() > MAX_PACKET_BYTES {
        return None;
    }
    if !l.v6 && (l.ip_hl != 20 || u16::from_be_bytes([p[6], p[7]]) & 0x3fff != 0) {
        return None;
    }
    let t = l.ip_hl;
    let flags = p[t + 13];
    if flags & TCP_ACK == 0
        || flags & (TCP_FIN | TCP_SYN | TCP_RST | TCP_URG | TCP_CWR) != 0
        || p[t + 12] & 0x0f != 0
    {
        return None;
    }
    let payload = l.end - l.hl;
    if payload == 0 {
        return None;
    }
    Some(Seg {
        l,
        seq: u32::from_be_bytes([p[t + 4], p[t + 5], p[t + 6], p[t + 7]]),
        payload,
        flags,
    })
}

/// Merges consecutive in-order TCP segments of one flow into GSO
/// super-packets, written with a `virtio_net_hdr` (TCPV4/TCPV6, `gso_size`
/// = the first segment's payload, `NEEDS_CSUM` with the pseudo-header sum
/// in the checksum field, as the kernel's own GRO output looks). Rules as
/// Linux's `tcp_gro_receive`: same addresses, ports, ack, window, options
/// and IP fields; every segment but the last exactly `gso_size` long; PSH
/// only on the last; sequence numbers contiguous. Anything else flushes
/// what is pending and goes out alone with a zero header. Each segment's
/// TCP checksum is verified before it is merged (the merged packet's
/// checksum is not checked again by the receiving kernel).
pub struct Coalescer {
    buf: Vec<u8>,
    /// Bytes of the pending super-packet in `buf`; 0 = none.
    len: usize,
    first: Option<Seg>,
    segs: usize,
    next_seq: u32,
    /// The last merged segment was short or had PSH: nothing may follow.
    closed: bool,
    /// A pending UDP super-packet (then `first` is `None`).
    udp: Option<udp::UdpPending>,
    /// UDP datagrams may be merged ([`Coalescer::set_udp_gso`]).
    udp_gso: bool,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer::new()
    }
}

impl Coalescer {
    pub fn new() -> Coalescer {
        Coalescer {
            buf: vec![0; MAX_PACKET_BYTES],
            len: 0,
            first: None,
            segs: 0,
            next_seq: 0,
            closed: false,
            udp: None,
            udp_gso: false,
        }
    }

    /// Offers one delivered IP packet; `write(vnet_header, packet)` is called
    /// for whatever must go out now (a flushed super-packet, or this packet
    /// alone). Call [`Coalescer::flush`] at the end of the wake-up.
    pub fn push(
        &mut self,
        pkt: &[u8],
        stats: &mut OffloadStats,
        write: &mut impl FnMut(&[u8; VNET_HDR_LEN], &[u8]),
    ) {
        if self.udp_gso && self.push_udp(pkt, stats, write) {
            return;
        }
        let seg = coalescable(pkt);
        let seg = match seg {
            Some(s) if tcp_checksum_ok(pkt, s.l.v6, s.l.ip_hl) => Some(s),
            Some(_) => {
                stats.gro_bad_checksum += 1;
                None
            }
            None => None,
        };
        if let Some(s) = seg {
            if self.can_append(pkt, &s) {
                self.buf[self.len..self.len + s.payload].copy_from_slice(&pkt[s.l.hl..]);
                self.len += s.payload;
                self.segs += 1;
                self.next_seq = s.seq.wrapping_add(s.payload as u32);
                let gso = self.first.map_or(0, |f| f.payload);
                if s.payload < gso || s.flags & TCP_PSH != 0 {
                    self.closed = true;
                    if s.flags & TCP_PSH != 0 {
                        let t = s.l.ip_hl;
                        self.buf[t + 13] |= TCP_PSH;
                    }
                }
                return;
            }
        }
        self.flush(stats, write);
        match seg {
            Some(s) => {
                self.buf[..pkt.len()].copy_from_slice(pkt);
                self.len = pkt.len();
                self.first = Some(s);
                self.segs = 1;
                self.next_seq = s.seq.wrapping_add(s.payload as u32);
                self.closed = s.flags & TCP_PSH != 0;
            }
            None => write(&PLAIN_HDR, pkt),
        }
    }

    fn can_append(&self, p: &[u8], s: &Seg) -> bool {
        let Some(f) = self.first else {
            return false;
        };
        if self.len == 0
            || self.closed
            || f.l.v6 != s.l.v6
            || f.l.hl != s.l.hl
            || s.seq != self.next_seq
            || s.payload > f.payload
            || self.len + s.payload > MAX_PACKET_BYTES
            || (f.flags & !TCP_PSH) != (s.flags & !TCP_PSH)
        {
            return false;
        }
        let q = &self.buf[..f.l.hl];
        let ip_same = if f.l.v6 {
            q[..4] == p[..4] && q[6..40] == p[6..40]
        } else {
            q[..2] == p[..2] && q[6..10] == p[6..10] && q[12..20] == p[12..20]
        };
        let t = f.l.ip_hl;
        // Ports, ack, data offset, window, urgent pointer, options.
        ip_same
            && q[t..t + 4] == p[t..t + 4]
            && q[t + 8..t + 13] == p[t + 8..t + 13]
            && q[t + 14..t + 16] == p[t + 14..t + 16]
            && q[t + 18..f.l.hl] == p[t + 18..f.l.hl]
    }

    /// Writes what is pending (never holds a packet past the caller's
    /// wake-up).
    pub fn flush(
        &mut self,
        stats: &mut OffloadStats,
        write: &mut impl FnMut(&[u8; VNET_HDR_LEN], &[u8]),
    ) {
        if let Some(u) = self.udp.take() {
            let len = std::mem::take(&mut self.len);
            self.flush_udp(u, len, stats, write);
            return;
        }
        let Some(f) = self.first.take() else {
            return;
        };
        let len = std::mem::take(&mut self.len);
        if self.segs <= 1 {
            write(&PLAIN_HDR, &self.buf[..len]);
            return;
        }
        let q = &mut self.buf[..len];
        let t = f.l.ip_hl;
        if f.l.v6 {
            q[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        } else {
            q[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            ipv4_header_checksum(q, t);
        }
        // CHECKSUM_PARTIAL: the (uncomplemented) pseudo-header sum.
        let partial = fold(pseudo_sum(q, f.l.v6, 6, len - t));
        q[t + 16..t + 18].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if f.l.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: f.l.hl as u16,
            gso_size: f.payload as u16,
            csum_start: t as u16,
            csum_offset: 16,
        };
        stats.gro_frames += 1;
        stats.gro_segments += self.segs as u64;
        write(&h.emit(), q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_packet(v6: bool, seq: u32, flags: u8, payload: &[u8], opts: &[u8]) -> Vec<u8> {
        let ip_hl = if v6 { 40 } else { 20 };
        let hl = ip_hl + 20 + opts.len();
        let mut p = vec![0u8; hl + payload.len()];
        if v6 {
            p[0] = 0x60;
            let n = p.len();
            p[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
            p[6] = 6;
            p[7] = 64;
            p[8..24].copy_from_slice(&[0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            p[24..40].copy_from_slice(&[0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        } else {
            p[0] = 0x45;
            let n = p.len();
            p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
            p[6] = 0x40; // DF
            p[8] = 64;
            p[9] = 6;
            p[12..16].copy_from_slice(&[10, 99, 0, 2]);
            p[16..20].copy_from_slice(&[10, 99, 0, 1]);
            ipv4_header_checksum(&mut p, 20);
        }
        let t = ip_hl;
        p[t..t + 2].copy_from_slice(&40000u16.to_be_bytes());
        p[t + 2..t + 4].copy_from_slice(&5201u16.to_be_bytes());
        p[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
        p[t + 8..t + 12].copy_from_slice(&777u32.to_be_bytes());
        p[t + 12] = (((20 + opts.len()) / 4) as u8) << 4;
        p[t + 13] = flags;
        p[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
        p[t + 20..hl].copy_from_slice(opts);
        p[hl..].copy_from_slice(payload);
        let c = transport_checksum(&p, v6, t, 6);
        p[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
        p
    }

    /// An IPv4 TCP data segment (ACK) of flow `sport` -> 5201 with `len`
    /// payload bytes at `seq`, valid checksums; also for `offload_flows`.
    pub(super) fn tcp_packet_for_flow(sport: u16, seq: u32, len: usize) -> Vec<u8> {
        let mut p = tcp_packet(false, seq, TCP_ACK, &payload(len), &[]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[36..38].fill(0);
        let c = transport_checksum(&p, false, 20, 6);
        p[36..38].copy_from_slice(&c.to_be_bytes());
        p
    }

    /// A TSO frame as the kernel writes it: one big packet, checksum field
    /// holding the pseudo-header sum, header with gso_size.
    fn tso_frame(v6: bool, flags: u8, payload: &[u8], mss: u16) -> Vec<u8> {
        let opts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]; // NOP NOP timestamps
        let mut p = tcp_packet(v6, 1000, flags, payload, &opts);
        let t = if v6 { 40 } else { 20 };
        let partial = fold(pseudo_sum(&p, v6, 6, p.len() - t));
        p[t + 16..t + 18].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: (t + 32) as u16,
            gso_size: mss,
            csum_start: t as u16,
            csum_offset: 16,
        };
        let mut f = h.emit().to_vec();
        f.extend_from_slice(&p);
        f
    }

    #[test]
    fn checksum_matches_rfc1071_reference() {
        // The naive definition: 16-bit big-endian words, end-around carry.
        fn naive(d: &[u8]) -> u16 {
            let mut s: u32 = 0;
            for c in d.chunks(2) {
                let w = u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
                s += w;
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        }
        for len in [0, 1, 2, 3, 5, 7, 8, 9, 20, 63, 1400, 1501, 65_535] {
            let d: Vec<u8> = (0..len).map(|i| (i * 131 + 7) as u8 ^ 0xa5).collect();
            assert_eq!(fold(sum_be(&d, 0)), naive(&d), "len {len}");
        }
        // RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        assert_eq!(
            fold(sum_be(&[0, 1, 0xf2, 3, 0xf4, 0xf5, 0xf6, 0xf7], 0)),
            0xddf2
        );
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn check_segments(v6: bool) {
        let data = payload(64_000);
        let mss = 1348u16;
        let frame = tso_frame(v6, TCP_ACK | TCP_PSH | TCP_FIN | TCP_CWR, &data, mss);
        let mut out = vec![0u8; 1500];
        let mut segs: Vec<Vec<u8>> = Vec::new();
        let mut st = OffloadStats::default();
        let n = split(&frame, &mut out, &mut st, |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(n, 64_000usize.div_ceil(1348));
        assert_eq!(segs.len(), n);
        assert_eq!((st.tso_frames, st.tso_segments), (1, n as u64));
        let t = if v6 { 40 } else { 20 };
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let l = tcp_layout(s).unwrap();
            assert_eq!(l.end, s.len(), "IP length field matches");
            assert!(s.len() <= t + 32 + 1348);
            if !v6 {
                assert_eq!(fold(sum_be(&s[..20], 0)), 0xffff, "IPv4 header checksum");
                assert_eq!(u16::from_be_bytes([s[4], s[5]]), 0x1234 + i as u16, "IP ID");
            }
            assert!(tcp_checksum_ok(s, v6, t), "TCP checksum of segment {i}");
            let seq = u32::from_be_bytes([s[t + 4], s[t + 5], s[t + 6], s[t + 7]]);
            assert_eq!(seq, 1000 + (i * 1348) as u32);
            let fl = s[t + 13];
            let last = i + 1 == n;
            assert_eq!(fl & TCP_FIN != 0, last, "FIN only on the last");
            assert_eq!(fl & TCP_PSH != 0, last, "PSH only on the last");
            assert_eq!(fl & TCP_CWR != 0, i == 0, "CWR only on the first");
            assert!(fl & TCP_ACK != 0);
            joined.extend_from_slice(&s[t + 32..]);
        }
        assert_eq!(joined, data, "payload preserved in order");
    }

    #[test]
    fn tso_ipv4_segments_into_valid_packets() {
        check_segments(false);
    }

    #[test]
    fn tso_ipv6_segments_into_valid_packets() {
        check_segments(true);
    }

    #[test]
    fn partial_checksum_is_completed_and_plain_passes_unchanged() {
        // A UDP packet with CHECKSUM_PARTIAL.
        let mut p = vec![0u8; 28 + 100];
        p[0] = 0x45;
        let n = p.len();
        p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[24..26].copy_from_slice(&108u16.to_be_bytes());
        p[28..].copy_from_slice(&payload(100));
        let mut want = p.clone();
        let c = transport_checksum(&want, false, 20, 17);
        want[26..28].copy_from_slice(&c.to_be_bytes());
        let partial = fold(pseudo_sum(&p, false, 17, 108));
        p[26..28].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 6,
            ..Default::default()
        };
        let mut f = h.emit().to_vec();
        f.extend_from_slice(&p);
        let mut out = vec![0u8; 2000];
        let mut got = Vec::new();
        let mut st = OffloadStats::default();
        split(&f, &mut out, &mut st, |s| got.push(s.to_vec())).unwrap();
        assert_eq!(got, vec![want.clone()]);
        assert_eq!(st.csum_completed, 1);
        // In place: the same packet, completed in the frame itself.
        let mut g = f.clone();
        let mut in_place = Vec::new();
        split_in_place(&mut g, &mut [], &mut st, |s| in_place.push(s.to_vec())).unwrap();
        assert_eq!(in_place, vec![want.clone()]);
        assert_eq!(&g[VNET_HDR_LEN..], &want[..]);
        assert_eq!(st.csum_completed, 2);
        // Bad offsets are refused in place too, and counted.
        let mut bad = f.clone();
        bad[6..8].copy_from_slice(&2000u16.to_le_bytes());
        assert!(split_in_place(&mut bad, &mut [], &mut st, |_| {}).is_err());
        assert_eq!(st.split_errors, 1);
        let mut f = PLAIN_HDR.to_vec();
        f.extend_from_slice(&want);
        got.clear();
        split(&f, &mut out, &mut st, |s| got.push(s.to_vec())).unwrap();
        assert_eq!(got, vec![want]);
    }

    #[test]
    fn hostile_frames_are_errors_not_panics() {
        let mut out = vec![0u8; 1500];
        let mut st = OffloadStats::default();
        let split_n = |f: &[u8], out: &mut [u8], st: &mut OffloadStats| split(f, out, st, |_| {});
        assert_eq!(
            split_n(&[0; 5], &mut out, &mut st),
            Err(OffloadError::Truncated)
        );
        let good = tso_frame(false, TCP_ACK, &payload(5000), 1000);
        // Truncated packet: IP length beyond the frame.
        assert_eq!(
            split_n(&good[..good.len() - 1], &mut out, &mut st),
            Err(OffloadError::Truncated)
        );
        // gso_size 0.
        let mut f = good.clone();
        f[4] = 0;
        f[5] = 0;
        assert_eq!(
            split_n(&f, &mut out, &mut st),
            Err(OffloadError::ZeroGsoSize)
        );
        // TCPV6 claimed for an IPv4 packet.
        let mut f = good.clone();
        f[1] = GSO_TCPV6;
        assert_eq!(split_n(&f, &mut out, &mut st), Err(OffloadError::Malformed));
        // Unsupported gso type (UFO).
        let mut f = good.clone();
        f[1] = GSO_UDP;
        assert!(matches!(
            split_n(&f, &mut out, &mut st),
            Err(OffloadError::UnsupportedGso(_))
        ));
        // Checksum offsets outside the packet.
        let mut f = good.clone();
        f[1] = GSO_NONE;
        f[6..8].copy_from_slice(&60000u16.to_le_bytes());
        assert_eq!(
            split_n(&f, &mut out, &mut st),
            Err(OffloadError::BadChecksumOffsets)
        );
        // Data offset beyond the packet.
        let mut f = good.clone();
        f[VNET_HDR_LEN + 20 + 12] = 0xf0;
        let mut short = f[..VNET_HDR_LEN + 60].to_vec();
        short[VNET_HDR_LEN + 2..VNET_HDR_LEN + 4].copy_from_slice(&50u16.to_be_bytes());
        assert_eq!(
            split_n(&short, &mut out, &mut st),
            Err(OffloadError::Malformed)
        );
        // A segment larger than the output buffer.
        assert_eq!(
            split_n(&good, &mut out[..500], &mut st),
            Err(OffloadError::OutputTooSmall)
        );
        assert_eq!(st.split_errors, 8);
        // Random garbage never panics.
        let mut x: u32 = 0x9e37_79b9;
        for len in 0..400 {
            let f: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = split(&f, &mut out, &mut st, |_| {});
            let mut c = Coalescer::new();
            c.push(&f, &mut st, &mut |_, _| {});
            c.flush(&mut st, &mut |_, _| {});
        }
    }

    /// What a coalescer wrote to the TUN: (virtio-net header, packet) per write.
    pub(super) type Written = Vec<([u8; VNET_HDR_LEN], Vec<u8>)>;

    fn coalesce(pkts: &[Vec<u8>]) -> (Written, OffloadStats) {
        coalesce_all(pkts, false)
    }

    /// Pushes `pkts` through one coalescer (UDP GSO on or off) and flushes it;
    /// also used by `offload_udp`'s tests.
    pub(super) fn coalesce_all(pkts: &[Vec<u8>], udp_gso: bool) -> (Written, OffloadStats) {
        let mut c = Coalescer::new();
        c.set_udp_gso(udp_gso);
        let mut st = OffloadStats::default();
        let mut w: Written = Vec::new();
        let mut wr = |h: &[u8; VNET_HDR_LEN], p: &[u8]| w.push((*h, p.to_vec()));
        for p in pkts {
            c.push(p, &mut st, &mut wr);
        }
        c.flush(&mut st, &mut wr);
        (w, st)
    }

    fn check_coalesce(v6: bool) {
        let data = payload(10 * 1000 + 300);
        let opts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let mut pkts = Vec::new();
        for (i, c) in data.chunks(1000).enumerate() {
            let fl = if i == 10 { TCP_ACK | TCP_PSH } else { TCP_ACK };
            pkts.push(tcp_packet(v6, 5000 + (i * 1000) as u32, fl, c, &opts));
        }
        let (w, st) = coalesce(&pkts);
        assert_eq!(w.len(), 1, "one super-packet");
        assert_eq!((st.gro_frames, st.gro_segments), (1, 11));
        let (h, p) = &w[0];
        let h = VnetHdr::parse(h).unwrap();
        let t = if v6 { 40 } else { 20 };
        assert_eq!(h.gso_type, if v6 { GSO_TCPV6 } else { GSO_TCPV4 });
        assert_eq!(h.gso_size, 1000);
        assert_eq!(h.flags, F_NEEDS_CSUM);
        assert_eq!((h.csum_start, h.csum_offset), (t as u16, 16));
        assert_eq!(usize::from(h.hdr_len), t + 32);
        let l = tcp_layout(p).unwrap();
        assert_eq!(l.end, p.len());
        assert_eq!(&p[t + 32..], &data[..]);
        if !v6 {
            assert_eq!(fold(sum_be(&p[..20], 0)), 0xffff, "IPv4 header checksum");
        }
        assert!(p[t + 13] & TCP_PSH != 0, "PSH of the last segment kept");
        // The super-packet re-segments (as the kernel would) into the
        // original packets, checksums valid.
        let mut f = h.emit().to_vec();
        f.extend_from_slice(p);
        let mut out = vec![0u8; 2000];
        let mut segs = Vec::new();
        split(&f, &mut out, &mut OffloadStats::default(), |s| {
            segs.push(s.to_vec())
        })
        .unwrap();
        assert_eq!(segs.len(), 11);
        for (s, orig) in segs.iter().zip(&pkts) {
            assert!(tcp_checksum_ok(s, v6, t));
            assert_eq!(&s[t..], &orig[t..], "TCP segment identical");
        }
    }

    /// TSO frame → split → coalesce gives back one super-packet with the
    /// same payload and headers, for sizes around the segment boundaries.
    #[test]
    fn split_then_coalesce_roundtrip_sizes() {
        for v6 in [false, true] {
            for mss in [536u16, 1348, 1440] {
                let m = usize::from(mss);
                for len in [1, m - 1, m, m + 1, 3 * m, 20 * m + 7, 65_000 - 120] {
                    let data = payload(len);
                    let frame = tso_frame(v6, TCP_ACK | TCP_PSH, &data, mss);
                    let mut out = vec![0u8; 2000];
                    let mut segs = Vec::new();
                    let mut st = OffloadStats::default();
                    split(&frame, &mut out, &mut st, |q| segs.push(q.to_vec())).unwrap();
                    assert_eq!(segs.len(), len.div_ceil(m), "v6 {v6} mss {mss} len {len}");
                    let (w, st) = coalesce(&segs);
                    assert_eq!(w.len(), 1, "v6 {v6} mss {mss} len {len}");
                    let t = if v6 { 40 } else { 20 };
                    let (h, p) = &w[0];
                    assert_eq!(&p[t + 32..], &data[..]);
                    let h = VnetHdr::parse(h).unwrap();
                    if segs.len() > 1 {
                        assert_eq!(st.gro_segments, segs.len() as u64);
                        assert_eq!(h.gso_size, mss);
                    } else {
                        assert_eq!(h, VnetHdr::default());
                        assert!(tcp_checksum_ok(p, v6, t));
                    }
                }
            }
        }
    }

    #[test]
    fn coalesces_in_order_segments_ipv4() {
        check_coalesce(false);
    }

    #[test]
    fn coalesces_in_order_segments_ipv6() {
        check_coalesce(true);
    }

    #[test]
    fn coalescing_refuses_gaps_flows_flags_and_bad_checksums() {
        let d = payload(1000);
        let a = |seq: u32, fl: u8| tcp_packet(false, seq, fl, &d, &[]);
        // A gap: 0, 1000, 3000 → super-packet of two, then one alone.
        let (w, _) = coalesce(&[a(0, TCP_ACK), a(1000, TCP_ACK), a(3000, TCP_ACK)]);
        assert_eq!(w.len(), 2);
        assert_eq!(VnetHdr::parse(&w[0].0).unwrap().gso_type, GSO_TCPV4);
        assert_eq!(w[1].0, PLAIN_HDR);
        assert_eq!(
            w[1].1,
            a(3000, TCP_ACK),
            "a single segment passes unchanged"
        );
        // Another flow (different port) in between.
        let mut other = a(1000, TCP_ACK);
        other[20] ^= 1;
        let c = transport_checksum(
            &{
                let mut o = other.clone();
                o[36] = 0;
                o[37] = 0;
                o
            },
            false,
            20,
            6,
        );
        other[36..38].copy_from_slice(&c.to_be_bytes());
        let (w, _) = coalesce(&[a(0, TCP_ACK), other.clone(), a(1000, TCP_ACK)]);
        assert_eq!(w.len(), 3);
        assert!(w.iter().all(|(h, _)| *h == PLAIN_HDR));
        // Flag change: ECE appears.
        let (w, _) = coalesce(&[a(0, TCP_ACK), a(1000, TCP_ACK | TCP_ECE)]);
        assert_eq!(w.len(), 2);
        // PSH closes a super-packet; FIN/SYN never coalesce.
        let (w, _) = coalesce(&[
            a(0, TCP_ACK),
            a(1000, TCP_ACK | TCP_PSH),
            a(2000, TCP_ACK),
            a(3000, TCP_ACK | TCP_FIN),
        ]);
        assert_eq!(w.len(), 3);
        assert_eq!(VnetHdr::parse(&w[0].0).unwrap().gso_type, GSO_TCPV4);
        assert_eq!(w[2].1, a(3000, TCP_ACK | TCP_FIN));
        // A shorter segment ends a super-packet.
        let short = tcp_packet(false, 2000, TCP_ACK, &d[..500], &[]);
        let (w, _) = coalesce(&[a(0, TCP_ACK), a(1000, TCP_ACK), short, a(2500, TCP_ACK)]);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].1.len(), 40 + 2500);
        // A corrupted checksum is not merged (and counted).
        let mut bad = a(1000, TCP_ACK);
        bad[100] ^= 0xff;
        let (w, st) = coalesce(&[a(0, TCP_ACK), bad.clone()]);
        assert_eq!(w.len(), 2);
        assert_eq!(st.gro_bad_checksum, 1);
        assert_eq!(w[1].1, bad);
        // Non-TCP passes with a zero header.
        let udp = {
            let mut u = a(0, TCP_ACK);
            u[9] = 17;
            u
        };
        let (w, _) = coalesce(std::slice::from_ref(&udp));
        assert_eq!(w, vec![(PLAIN_HDR, udp)]);
    }

    /// Hostile input: 20 000 mutated packets (random bytes changed, cut or
    /// extended; the TCP checksum recomputed in half of them so the
    /// header checks behind it are reached) go through the coalescer, and
    /// mutated TSO frames through `split`. Nothing panics, every written
    /// packet fits a TUN frame, and the coalescer never emits more payload
    /// than it was given.
    #[test]
    fn hostile_packets_never_panic_or_grow() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let d = payload(1000);
        let mut co = Coalescer::new();
        let mut st = OffloadStats::default();
        const SEG_BUF: usize = 2000;
        let mut out = vec![0u8; SEG_BUF];
        let (mut bytes_in, mut bytes_out) = (0usize, 0usize);
        for i in 0..20_000u32 {
            let v6 = i % 2 == 0;
            let mut pkt = tcp_packet(v6, (i / 3).wrapping_mul(1000), TCP_ACK, &d, &[]);
            for _ in 0..(rnd() % 4) {
                let k = (rnd() as usize) % pkt.len();
                pkt[k] = rnd() as u8;
            }
            match rnd() % 8 {
                0 => pkt.truncate((rnd() as usize) % (pkt.len() + 1)),
                1 => pkt.extend((0..rnd() % 64).map(|_| rnd() as u8)),
                _ => {}
            }
            let t = if v6 { 40 } else { 20 };
            if rnd() % 2 == 0 && pkt.len() >= t + 20 {
                pkt[t + 16] = 0;
                pkt[t + 17] = 0;
                let c = transport_checksum(&pkt, v6, t, 6);
                pkt[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
            }
            bytes_in += pkt.len();
            co.push(&pkt, &mut st, &mut |_h, q| {
                assert!(q.len() <= MAX_PACKET_BYTES);
                bytes_out += q.len();
            });
            if rnd() % 16 == 0 {
                co.flush(&mut st, &mut |_h, q| {
                    assert!(q.len() <= MAX_PACKET_BYTES);
                    bytes_out += q.len();
                });
            }
            // A TSO frame with a mutated virtio header or packet.
            let mut f = tso_frame(v6, TCP_ACK, &d[..(rnd() as usize) % 1000 + 1], 536);
            for _ in 0..(1 + rnd() % 3) {
                let k = (rnd() as usize) % f.len();
                f[k] = rnd() as u8;
            }
            if rnd() % 4 == 0 {
                f.truncate((rnd() as usize) % (f.len() + 1));
            }
            let _ = split(&f, &mut out, &mut st, |q| assert!(q.len() <= SEG_BUF));
        }
        co.flush(&mut st, &mut |_h, q| bytes_out += q.len());
        // Coalescing drops repeated headers, never adds bytes.
        assert!(bytes_out <= bytes_in, "{bytes_out} > {bytes_in}");
        assert!(st.gro_bad_checksum > 1000, "{st:?}");
        assert!(st.split_errors > 100, "{st:?}");
    }
}
