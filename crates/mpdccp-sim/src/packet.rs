//! The packets traffic sources exchange, and their byte encoding inside the
//! tunnel.
//!
//! Through the tunnel a flow packet is an opaque "IP packet" for
//! `Connection::send`: a first byte of `0x45` (so a receiver demultiplexing on
//! the IP version nibble sees IPv4), then the fields below, padded with zeros
//! to the packet's full size. Directly over a link the struct itself travels.
//! Every data packet carries its flow, sequence number and send time, so the
//! sink measures one-way delay, loss and reordering exactly.

use mpdccp_proto::Instant;

/// Most SACK blocks one acknowledgement carries (RFC 2018 §3 with timestamps).
pub const MAX_SACK_BLOCKS: usize = 3;

/// Wire size of a pure TCP acknowledgement with timestamps and SACK
/// (20 IP + 20 TCP + 12 timestamps + 2 + 8·3 SACK, rounded).
pub const ACK_BYTES: u32 = 80;

/// Encoded header length; packets are never smaller than this.
pub const HEADER_BYTES: usize = 1 + 1 + 2 + 8 + 8 + 4 + 1 + 16 * MAX_SACK_BLOCKS;

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
    /// Data: the packet/segment number. Ack: the cumulative ack (next expected).
    pub seq: u64,
    /// Data: when this transmission entered the network (tunnel entry or link
    /// push). Ack: the echoed `sent_at` of the data packet that triggered it
    /// (TCP timestamps, RFC 7323 §4).
    pub sent_at: Instant,
    /// Size on the wire (the tunnelled IP packet), bytes.
    pub len: u32,
    /// Ack only: SACK blocks `[start, end)`, most recent first.
    pub sack: [(u64, u64); MAX_SACK_BLOCKS],
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
            sack: [(0, 0); MAX_SACK_BLOCKS],
            sack_len: 0,
        }
    }

    /// Encode into `buf` (cleared first) at full wire size.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.clear();
        buf.push(0x45);
        buf.push(match self.kind {
            PktKind::Data => 0,
            PktKind::Ack => 1,
        });
        buf.extend_from_slice(&self.flow.to_be_bytes());
        buf.extend_from_slice(&self.seq.to_be_bytes());
        buf.extend_from_slice(&self.sent_at.as_nanos().to_be_bytes());
        buf.extend_from_slice(&self.len.to_be_bytes());
        buf.push(self.sack_len);
        for (a, b) in self.sack {
            buf.extend_from_slice(&a.to_be_bytes());
            buf.extend_from_slice(&b.to_be_bytes());
        }
        let len = (self.len as usize).max(HEADER_BYTES);
        buf.resize(len, 0);
    }

    /// Decode a packet delivered by the tunnel; `None` if it is not one of ours.
    pub fn decode(b: &[u8]) -> Option<FlowPkt> {
        if b.len() < HEADER_BYTES || b[0] != 0x45 {
            return None;
        }
        let u64_at = |i: usize| -> u64 {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        let kind = match b[1] {
            0 => PktKind::Data,
            1 => PktKind::Ack,
            _ => return None,
        };
        let mut sack = [(0, 0); MAX_SACK_BLOCKS];
        for (k, s) in sack.iter_mut().enumerate() {
            *s = (u64_at(25 + 16 * k), u64_at(33 + 16 * k));
        }
        Some(FlowPkt {
            flow: u16::from_be_bytes([b[2], b[3]]),
            kind,
            seq: u64_at(4),
            sent_at: Instant::from_nanos(u64_at(12)),
            len: u32::from_be_bytes([b[20], b[21], b[22], b[23]]),
            sack_len: b[24].min(MAX_SACK_BLOCKS as u8),
            sack,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_full_size() {
        let mut p = FlowPkt::data(7, 123_456_789, Instant::from_micros(42), 1400);
        p.kind = PktKind::Ack;
        p.sack = [(5, 9), (11, 12), (0, 0)];
        p.sack_len = 2;
        let mut buf = Vec::new();
        p.encode(&mut buf);
        assert_eq!(buf.len(), 1400);
        assert_eq!(FlowPkt::decode(&buf), Some(p));
        assert_eq!(FlowPkt::decode(&buf[..10]), None);
        buf[0] = 0x60;
        assert_eq!(FlowPkt::decode(&buf), None);
    }
}
