//! The receiving side of a QUIC-like flow: ACK frames with ranges
//! (RFC 9000 §19.3) and the acknowledgement timing of RFC 9000 §13.2.
//!
//! Every data packet is ack-eliciting. An ACK goes out after every second
//! one (§13.2.2, quinn's and aioquic's default), at most
//! [`MAX_ACK_DELAY`] after the first unacknowledged one, and at once when
//! a packet arrives out of order — below the largest received, or above it
//! with a gap (§13.2.1). The ACK reports the highest ranges received, at
//! most [`MAX_ACK_RANGES`], and how long its largest was held (ACK Delay).

use std::time::Duration;

use mpdccp_proto::Instant;

use crate::flow::quic::MAX_ACK_DELAY;
use crate::flow::ranges::RangeSet;
use crate::packet::{FlowPkt, MAX_ACK_RANGES};

/// Ack-eliciting packets that trigger an ACK at once (RFC 9000 §13.2.2).
pub const ACK_ELICITING_THRESHOLD: u32 = 2;

/// Wire size of a packet carrying one ACK frame with one range: IPv4 + UDP
/// (28), a short header with an 8-byte connection ID and 2-byte packet
/// number (11), the AEAD tag (16), the frame (about 6).
pub const QUIC_ACK_BYTES: u32 = 61;
/// Each further range: a gap and a length, two varints.
const QUIC_ACK_RANGE_BYTES: u32 = 4;

/// The receiving side of a QUIC-like flow.
#[derive(Debug, Default)]
pub struct QuicReceiver {
    flow: u16,
    /// Packet numbers received.
    pns: RangeSet,
    /// Stream chunks received (the application's in-order point is
    /// `chunks.next()`).
    chunks: RangeSet,
    /// Ack-eliciting packets since the last ACK.
    unacked: u32,
    /// When the largest packet number arrived (for ACK Delay).
    largest_at: Option<Instant>,
    pending: bool,
    /// Chunks received twice (a retransmission that was not needed).
    pub duplicate_pkts: u64,
}

/// What the receiver made of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicArrival {
    /// It carried a chunk not received before.
    pub new: bool,
    /// It arrived after a packet with a higher packet number.
    pub out_of_order: bool,
    /// Send the ACK now; otherwise one is due within [`MAX_ACK_DELAY`].
    pub ack_now: bool,
}

impl QuicReceiver {
    pub fn new(flow: u16) -> Self {
        QuicReceiver {
            flow,
            ..Default::default()
        }
    }

    /// The longest an ACK is held.
    pub fn max_ack_delay(&self) -> Duration {
        MAX_ACK_DELAY
    }

    /// Chunks delivered in order so far.
    pub fn delivered_in_order(&self) -> u64 {
        self.chunks.next()
    }

    /// Accept one packet; when [`QuicArrival::ack_now`], `ack` is the ACK
    /// to send.
    pub fn handle_data(&mut self, now: Instant, pkt: &FlowPkt, ack: &mut FlowPkt) -> QuicArrival {
        let highest = self.pns.highest();
        let out_of_order = highest.is_some_and(|h| pkt.seq < h);
        let gap = highest.map_or(pkt.seq > 0, |h| pkt.seq > h + 1);
        let fresh_pn = self.pns.insert(pkt.seq);
        if fresh_pn && self.pns.highest() == Some(pkt.seq) {
            self.largest_at = Some(now);
        }
        let new = fresh_pn && self.chunks.insert(pkt.chunk);
        if fresh_pn && !new {
            self.duplicate_pkts += 1;
        }
        self.unacked += 1;
        // §13.2.1: at once on reordering or a new gap; else every second.
        let ack_now = !fresh_pn || out_of_order || gap || self.unacked >= ACK_ELICITING_THRESHOLD;
        if ack_now {
            *ack = self.build_ack(now);
        } else {
            self.pending = true;
        }
        QuicArrival {
            new,
            out_of_order: out_of_order && fresh_pn,
            ack_now,
        }
    }

    /// The ACK held back, once [`MAX_ACK_DELAY`] has passed.
    pub fn take_pending_ack(&mut self, now: Instant) -> Option<FlowPkt> {
        self.pending.then(|| self.build_ack(now))
    }

    fn build_ack(&mut self, now: Instant) -> FlowPkt {
        self.unacked = 0;
        self.pending = false;
        let largest = self.pns.highest().unwrap_or(0);
        let delay = self
            .largest_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let mut ack = FlowPkt::ack(self.flow, largest + 1, Instant::ZERO, QUIC_ACK_BYTES);
        ack.ack_delay_us = u32::try_from(delay.as_micros()).unwrap_or(u32::MAX);
        let mut n = 0;
        for &r in self.pns.above().iter().rev() {
            if n == MAX_ACK_RANGES {
                break;
            }
            ack.sack[n] = r;
            n += 1;
        }
        if n < MAX_ACK_RANGES && self.pns.next() > 0 {
            ack.sack[n] = (0, self.pns.next());
            n += 1;
        }
        ack.sack_len = n as u8;
        ack.len = QUIC_ACK_BYTES + QUIC_ACK_RANGE_BYTES * (n as u32).saturating_sub(1);
        ack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(pn: u64, chunk: u64) -> FlowPkt {
        let mut p = FlowPkt::data(1, pn, Instant::ZERO, 1200);
        p.chunk = chunk;
        p
    }

    /// RFC 9000 §13.2: every second packet is acked, a gap or a reordered
    /// packet at once; ranges are highest first with the ACK Delay of the
    /// largest.
    #[test]
    fn acks_every_second_packet_and_reordering_at_once() {
        let mut r = QuicReceiver::new(1);
        let mut ack = pkt(0, 0);
        let t = Instant::from_millis;
        assert!(!r.handle_data(t(0), &pkt(0, 0), &mut ack).ack_now);
        assert!(r.handle_data(t(1), &pkt(1, 1), &mut ack).ack_now);
        assert_eq!(ack.ranges(), &[(0, 2)]);
        // A gap: 3 before 2.
        assert!(r.handle_data(t(2), &pkt(3, 3), &mut ack).ack_now);
        assert_eq!(ack.ranges(), &[(3, 4), (0, 2)]);
        let a = r.handle_data(t(3), &pkt(2, 2), &mut ack);
        assert!(a.ack_now && a.out_of_order && a.new);
        assert_eq!(ack.ranges(), &[(0, 4)]);
        assert_eq!(ack.ack_delay_us, 1000);
        assert!(!r.handle_data(t(4), &pkt(4, 4), &mut ack).ack_now);
        let held = r.take_pending_ack(t(29)).expect("one ack is held");
        assert_eq!((held.seq, held.ack_delay_us), (5, 25_000));
        assert!(r.take_pending_ack(t(30)).is_none());
        // A retransmitted chunk in a new packet is a duplicate chunk.
        assert!(!r.handle_data(t(31), &pkt(5, 2), &mut ack).new);
        assert_eq!((r.duplicate_pkts, r.delivered_in_order()), (1, 5));
    }
}
