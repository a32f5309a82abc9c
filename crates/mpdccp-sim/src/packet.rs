//! The packets traffic sources exchange, and their byte encoding inside the
//! tunnel.
//!
//! Through the tunnel a flow packet is an "IP packet" for
//! `Connection::send`: a 20-byte IPv4 header and the ports of a transport
//! header that name the flow (protocol 6 for a TCP flow, 17 for the others,
//! addresses 10.0.0.1 → 10.0.0.2, both ports = the flow number), so the tunnel's per-flow machinery — the send
//! queue's FQ-CoDel buckets, `per-flow` reordering — sees one 5-tuple per
//! flow as it would for real traffic; then the fields below, padded with
//! zeros to the packet's full size. (Before, the fields started at byte 1
//! and the 5-tuple hash read sequence numbers and timestamps: every packet
//! looked like a new flow.) The IPv4 Total Length is the packet's size,
//! and the sequence number's low 32 bits and a Data Offset (20-byte header
//! for data, 60 for an ack) sit where a TCP header has them, so `per-flow`
//! reordering tells a TCP flow's retransmissions as it does for kernel TCP.
//! Directly over a link the struct itself travels.
//! Every data packet carries its flow, sequence number and send time, so the
//! sink measures one-way delay, loss and reordering exactly.

use mpdccp_proto::Instant;

/// Most SACK blocks one TCP acknowledgement carries (RFC 2018 §3 with
/// timestamps).
pub const MAX_SACK_BLOCKS: usize = 3;

/// Most ack ranges one QUIC ACK frame carries above its cumulative point
/// (a cap in the spirit of quinn's and aioquic's: the newest ranges are
/// kept, older gaps are either filled or already declared lost).
pub const MAX_ACK_RANGES: usize = 16;

/// Wire size of a pure TCP acknowledgement with timestamps and SACK
/// (20 IP + 20 TCP + 12 timestamps + 2 + 8·3 SACK, rounded).
pub const ACK_BYTES: u32 = 80;

/// Smallest encoded packet: shorter packets are padded to this size. (The
/// fixed part of the header is `FIXED_HEADER_BYTES`; this floor is kept
/// so packet sizes do not depend on how many ranges an ack carries.)
pub const HEADER_BYTES: usize = 73;

/// Offset of the fields after the IPv4 header and the ports.
const FIELDS_AT: usize = 24;

/// The fixed part of the encoding, before the ranges (80 with three SACK
/// blocks: a TCP ack stays [`ACK_BYTES`]).
const FIXED_HEADER_BYTES: usize = FIELDS_AT + 8 + 8 + 4 + 8 + 4;

/// End of the longest encoding (every range): nothing is written beyond.
const RANGES_END: usize = FIXED_HEADER_BYTES + 8 * MAX_ACK_RANGES;

/// The inner transport a flow's packets say they are (the IP protocol
/// field): the tunnel's `per-flow` reordering treats TCP apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    Tcp,
    /// UDP: QUIC, CBR and bulk flows.
    Udp,
}

impl Transport {
    fn ip_protocol(self) -> u8 {
        match self {
            Transport::Tcp => 6,
            Transport::Udp => 17,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PktKind {
    Data,
    Ack,
}

/// One flow packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FlowPkt {
    pub flow: u16,
    pub kind: PktKind,
    /// Data: the packet/segment number. Ack: the cumulative ack (next
    /// expected; for QUIC every packet number below it was received).
    pub seq: u64,
    /// Data: when this transmission entered the network (tunnel entry or link
    /// push). Ack: the echoed `sent_at` of the data packet that triggered it
    /// (TCP timestamps, RFC 7323 §4).
    pub sent_at: Instant,
    /// Size on the wire (the tunnelled IP packet), bytes.
    pub len: u32,
    /// Data: the stream chunk carried. A TCP segment's is its sequence
    /// number; a QUIC packet carries a chunk under a fresh packet number
    /// (RFC 9000 §13.3: lost frames are sent again in new packets).
    pub chunk: u64,
    /// Ack (QUIC): how long the receiver held it after the largest
    /// acknowledged packet arrived (RFC 9000 §19.3 ACK Delay), microseconds.
    pub ack_delay_us: u32,
    /// Ack only: SACK blocks / ack ranges `[start, end)`, most recent (TCP,
    /// RFC 2018 §4; a DSACK first, RFC 2883) or highest (QUIC) first.
    pub sack: [(u64, u64); MAX_ACK_RANGES],
    pub sack_len: u8,
}

impl FlowPkt {
    pub fn data(flow: u16, seq: u64, sent_at: Instant, len: u32) -> Self {
        FlowPkt {
            flow,
            kind: PktKind::Data,
            seq,
            sent_at,
            len,
            chunk: seq,
            ack_delay_us: 0,
            sack: [(0, 0); MAX_ACK_RANGES],
            sack_len: 0,
        }
    }

    /// An acknowledgement with no ranges yet.
    pub fn ack(flow: u16, cum: u64, echo: Instant, len: u32) -> Self {
        FlowPkt {
            kind: PktKind::Ack,
            chunk: 0,
            ..FlowPkt::data(flow, cum, echo, len)
        }
    }

    /// The ranges carried.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.sack[..usize::from(self.sack_len).min(MAX_ACK_RANGES)]
    }

    /// Encode into `buf` (replacing its contents) at full wire size, as a
    /// packet of `transport`. Ranges are offsets from `seq` (a DSACK block
    /// lies below it).
    pub fn encode(&self, transport: Transport, buf: &mut EncodeBuf) {
        let buf = &mut buf.0;
        let flow = self.flow.to_be_bytes();
        let ranges = self.ranges();
        let head_end = FIXED_HEADER_BYTES + 8 * ranges.len();
        let len = (self.len as usize).max(HEADER_BYTES).max(head_end);
        // Only the header is written: the padding is still zero (see
        // `EncodeBuf`), so only the ranges area a previous ack may have
        // left is cleared — not a data packet's ~1 400 zeros.
        buf.resize(len, 0);
        buf[head_end..len.min(RANGES_END)].fill(0);
        // IPv4 header: version 4, IHL 5; byte 1 (TOS) the kind, 2..4 the
        // Total Length, 4..6 (Identification) the flow and byte 8 (TTL)
        // the number of ranges (fields the flow hash does not read); no
        // fragment bits (6..8); the protocol at 9; addresses at 12..20.
        let proto = transport.ip_protocol();
        let total = u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes();
        buf[..FIELDS_AT].copy_from_slice(&[
            0x45,
            self.kind_byte(),
            total[0],
            total[1],
            flow[0],
            flow[1],
            0,
            0,
            ranges.len() as u8,
            proto,
            0,
            0,
            10,
            0,
            0,
            1,
            10,
            0,
            0,
            2,
            // Ports: the flow number both ways.
            flow[0],
            flow[1],
            flow[0],
            flow[1],
        ]);
        let f = FIELDS_AT;
        buf[f..f + 8].copy_from_slice(&seq_bytes(self.seq));
        buf[f + 8..f + 16].copy_from_slice(&self.sent_at.as_nanos().to_be_bytes());
        buf[f + 8] = self.data_offset_byte();
        buf[f + 16..f + 20].copy_from_slice(&self.len.to_be_bytes());
        buf[f + 20..f + 28].copy_from_slice(&self.chunk.to_be_bytes());
        buf[f + 28..f + 32].copy_from_slice(&self.ack_delay_us.to_be_bytes());
        for (k, &(a, b)) in ranges.iter().enumerate() {
            let at = FIXED_HEADER_BYTES + 8 * k;
            buf[at..at + 4].copy_from_slice(&(a.wrapping_sub(self.seq) as u32).to_be_bytes());
            buf[at + 4..at + 8].copy_from_slice(&(b.wrapping_sub(self.seq) as u32).to_be_bytes());
        }
    }

    /// Byte 12 of a TCP header (Data Offset, RFC 9293 §3.1) where `sent_at`'s
    /// top byte would be (zero for the first 2.28 years of simulated time):
    /// a data packet's header is 20 bytes, so its payload is what follows
    /// 40; an ack's 60, so a TCP ack ([`ACK_BYTES`]) carries none.
    fn data_offset_byte(&self) -> u8 {
        debug_assert!(self.sent_at.as_nanos() >> SENT_AT_BITS == 0);
        match self.kind {
            PktKind::Data => 5 << 4,
            PktKind::Ack => 15 << 4,
        }
    }

    fn kind_byte(&self) -> u8 {
        match self.kind {
            PktKind::Data => 0,
            PktKind::Ack => 1,
        }
    }

    /// Decode a packet delivered by the tunnel; `None` if it is not one of ours.
    /// Inlined: the ~300-byte result (the SACK array) was built in a
    /// temporary and copied once per delivered packet.
    #[inline]
    pub fn decode(b: &[u8]) -> Option<FlowPkt> {
        let h = Head::decode(b)?;
        let mut sack = [(0, 0); MAX_ACK_RANGES];
        for (k, s) in sack.iter_mut().take(h.ranges).enumerate() {
            let at = FIXED_HEADER_BYTES + 8 * k;
            // Offsets are signed 32-bit (two's complement) from `seq`.
            let off = |x: u32| h.seq.wrapping_add(i64::from(x as i32) as u64);
            *s = (off(u32_at(b, at)), off(u32_at(b, at + 4)));
        }
        Some(FlowPkt {
            flow: u16::from_be_bytes([b[4], b[5]]),
            kind: h.kind,
            seq: h.seq,
            sent_at: h.sent_at,
            len: h.len,
            chunk: u64_at(b, FIELDS_AT + 20),
            ack_delay_us: u32_at(b, FIELDS_AT + 28),
            sack_len: h.ranges as u8,
            sack,
        })
    }
}

/// Where packets are encoded: only [`FlowPkt::encode`] writes it, and no
/// encoding writes past `RANGES_END` (the padding is zeros, and `resize`
/// zeroes what it adds), so past the header it holds zeros.
#[derive(Debug, Default)]
pub struct EncodeBuf(Vec<u8>);

impl std::ops::Deref for EncodeBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// The fixed fields of an encoded packet that tell what it is, read
/// without copying its ranges; `None` exactly when
/// [`FlowPkt::decode`] would give `None`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Head {
    pub kind: PktKind,
    pub seq: u64,
    pub sent_at: Instant,
    pub len: u32,
    ranges: usize,
}

impl Head {
    pub fn decode(b: &[u8]) -> Option<Head> {
        if b.len() < FIXED_HEADER_BYTES || b[0] != 0x45 {
            return None;
        }
        let kind = match b[1] {
            0 => PktKind::Data,
            1 => PktKind::Ack,
            _ => return None,
        };
        let ranges = usize::from(b[8]).min(MAX_ACK_RANGES);
        if b.len() < FIXED_HEADER_BYTES + 8 * ranges {
            return None;
        }
        Some(Head {
            kind,
            seq: seq_at(b, FIELDS_AT),
            sent_at: Instant::from_nanos(u64_at(b, FIELDS_AT + 8) & ((1 << SENT_AT_BITS) - 1)),
            len: u32_at(b, FIELDS_AT + 16),
            ranges,
        })
    }
}

/// Bits of `sent_at` (nanoseconds) encoded: the byte above holds the
/// TCP Data Offset.
const SENT_AT_BITS: u32 = 56;

/// A sequence number as a TCP header holds it: its low 32 bits where the
/// TCP Sequence Number is (the receiver's `per-flow` reordering reads it
/// there to tell retransmissions, `mpdccp_proto::reorder`), the high 32
/// bits where the Acknowledgment Number is.
fn seq_bytes(seq: u64) -> [u8; 8] {
    let [h0, h1, h2, h3, l0, l1, l2, l3] = seq.to_be_bytes();
    [l0, l1, l2, l3, h0, h1, h2, h3]
}

fn seq_at(b: &[u8], i: usize) -> u64 {
    (u64::from(u32_at(b, i + 4)) << 32) | u64::from(u32_at(b, i))
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_be_bytes(a)
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoding built from scratch each time (the former `encode`).
    fn encode_fresh(p: &FlowPkt, transport: Transport) -> Vec<u8> {
        let flow = p.flow.to_be_bytes();
        let ranges = p.ranges();
        let head_end = FIXED_HEADER_BYTES + 8 * ranges.len();
        let len = (p.len as usize).max(HEADER_BYTES).max(head_end) as u16;
        let total = len.to_be_bytes();
        let mut buf = vec![
            0x45,
            p.kind_byte(),
            total[0],
            total[1],
            flow[0],
            flow[1],
            0,
            0,
        ];
        let proto = transport.ip_protocol();
        buf.extend_from_slice(&[ranges.len() as u8, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        buf.extend_from_slice(&[flow[0], flow[1], flow[0], flow[1]]);
        buf.extend_from_slice(&(p.seq as u32).to_be_bytes());
        buf.extend_from_slice(&((p.seq >> 32) as u32).to_be_bytes());
        buf.push(if p.kind == PktKind::Data { 0x50 } else { 0xf0 });
        buf.extend_from_slice(&p.sent_at.as_nanos().to_be_bytes()[1..]);
        buf.extend_from_slice(&p.len.to_be_bytes());
        buf.extend_from_slice(&p.chunk.to_be_bytes());
        buf.extend_from_slice(&p.ack_delay_us.to_be_bytes());
        for &(a, b) in ranges {
            buf.extend_from_slice(&(a.wrapping_sub(p.seq) as u32).to_be_bytes());
            buf.extend_from_slice(&(b.wrapping_sub(p.seq) as u32).to_be_bytes());
        }
        let len = (p.len as usize).max(HEADER_BYTES).max(buf.len());
        buf.resize(len, 0);
        buf
    }

    #[test]
    fn reusing_the_buffer_encodes_what_a_fresh_one_would() {
        let mut buf = EncodeBuf::default();
        let mut x = 7u64;
        for k in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = [40, 64, 80, 120, 1400, 1460, 1496][(x >> 33) as usize % 7];
            let mut p = if (x >> 40).is_multiple_of(2) {
                FlowPkt::data((x >> 20) as u16 % 3, k, Instant::from_micros(k), len)
            } else {
                FlowPkt::ack(1, 1000 + k, Instant::from_micros(k), len)
            };
            if p.kind == PktKind::Ack {
                p.sack_len = ((x >> 50) % (MAX_ACK_RANGES as u64 + 1)) as u8;
                for r in 0..usize::from(p.sack_len) {
                    p.sack[r] = (p.seq + 3 * r as u64 + 1, p.seq + 3 * r as u64 + 2);
                }
                p.ack_delay_us = (x >> 8) as u32;
            }
            let t = if x & 1 == 0 {
                Transport::Tcp
            } else {
                Transport::Udp
            };
            p.encode(t, &mut buf);
            assert_eq!(&buf[..], &encode_fresh(&p, t)[..], "packet {k}");
            let h = Head::decode(&buf).unwrap();
            let d = FlowPkt::decode(&buf).unwrap();
            assert_eq!(
                (h.kind, h.seq, h.sent_at, h.len),
                (d.kind, d.seq, d.sent_at, d.len)
            );
        }
    }

    #[test]
    fn round_trips_at_full_size() {
        let mut p = FlowPkt::ack(7, 123_456_789, Instant::from_micros(42), 1400);
        p.ack_delay_us = 25_000;
        // A DSACK block below the cumulative ack, then two above.
        p.sack[..3].copy_from_slice(&[
            (123_456_700, 123_456_701),
            (123_456_790, 123_456_800),
            (123_456_900, 123_456_901),
        ]);
        p.sack_len = 3;
        let mut buf = EncodeBuf::default();
        p.encode(Transport::Udp, &mut buf);
        assert_eq!(buf.len(), 1400);
        assert_eq!(FlowPkt::decode(&buf), Some(p));
        // A TCP ack with three SACK blocks still fits its wire size.
        let mut a = p;
        a.len = ACK_BYTES;
        a.encode(Transport::Udp, &mut buf);
        assert_eq!(buf.len(), ACK_BYTES as usize);
        assert_eq!(FlowPkt::decode(&buf), Some(a));
        // The 5-tuple (protocol, addresses, ports) names the flow only:
        // the same for every packet of flow 7, another for flow 8.
        let tuple = |b: &[u8]| [&b[9..10], &b[12..24]].concat();
        let t7 = tuple(&buf);
        FlowPkt::data(7, 99, Instant::from_micros(1), 1400).encode(Transport::Udp, &mut buf);
        assert_eq!(tuple(&buf), t7);
        assert_eq!(buf[6] & 0x1f, 0);
        assert_eq!(buf[7], 0);
        FlowPkt::data(8, 99, Instant::from_micros(1), 1400).encode(Transport::Udp, &mut buf);
        assert_ne!(tuple(&buf), t7);
        // A TCP flow says so in the protocol field; it decodes the same.
        let d8 = FlowPkt::data(8, 99, Instant::from_micros(1), 1400);
        d8.encode(Transport::Tcp, &mut buf);
        assert_eq!(buf[9], 6);
        assert_eq!(FlowPkt::decode(&buf), Some(d8));
        assert_eq!(FlowPkt::decode(&buf[..10]), None);
        let d = FlowPkt::data(7, 3, Instant::from_micros(42), 1400);
        d.encode(Transport::Udp, &mut buf);
        assert_eq!(FlowPkt::decode(&buf), Some(d));
        // A QUIC ack with every range still fits (and grows past the floor).
        let mut q = FlowPkt::ack(1, 10, Instant::ZERO, 64);
        for k in 0..MAX_ACK_RANGES {
            q.sack[k] = (20 + 3 * k as u64, 21 + 3 * k as u64);
        }
        q.sack_len = MAX_ACK_RANGES as u8;
        q.encode(Transport::Udp, &mut buf);
        assert_eq!(buf.len(), FIXED_HEADER_BYTES + 8 * MAX_ACK_RANGES);
        assert_eq!(FlowPkt::decode(&buf), Some(q));
        let mut bytes = buf.to_vec();
        bytes[0] = 0x60;
        assert_eq!(FlowPkt::decode(&bytes), None);
        assert_eq!(Head::decode(&bytes), None);
    }
}
