//! The receiving side of an inner TCP flow: reassembly and acknowledgement
//! generation (cumulative ack, SACK blocks of RFC 2018, optionally DSACK of
//! RFC 2883, delayed acks of RFC 5681 §4.2).

use std::time::Duration;

use crate::flow::ranges::RangeSet;
use crate::packet::{FlowPkt, ACK_BYTES, MAX_SACK_BLOCKS};

/// RFC 5681 §4.2: an ack SHOULD be generated for at least every second
/// full-sized segment.
pub const DELAYED_ACK_SEGMENTS: u32 = 2;

/// Longest an ack waits for a second segment: Linux's minimum delayed-ack
/// timeout (`TCP_DELACK_MIN`, 40 ms); RFC 5681 §4.2 allows up to 500 ms.
pub const DELAYED_ACK_TIMEOUT: Duration = Duration::from_millis(40);

/// The receiving side: reassembly state and acknowledgement generation.
#[derive(Debug, Default)]
pub struct TcpReceiver {
    flow: u16,
    /// Segments received: in order below `rcv.next()`, held ranges above.
    rcv: RangeSet,
    /// Acknowledge every this many in-order segments (1 = every segment).
    ack_every: u32,
    /// In-order segments received since the last ack sent.
    unacked: u32,
    /// The ack held back (delayed ack), the receiver's latest state.
    pending: Option<FlowPkt>,
    /// Report a duplicate segment in a DSACK block (RFC 2883), as Linux
    /// does by default (`tcp_dsack = 1`).
    dsack: bool,
    /// Duplicate segments received (each a retransmission that was not
    /// needed, or a network duplicate).
    pub duplicate_pkts: u64,
}

/// What the receiver made of one data segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// First arrival of this segment (not a duplicate).
    pub new: bool,
    /// It arrived after a segment with a higher sequence number.
    pub out_of_order: bool,
    /// Send the ack now; otherwise it is held (see [`TcpReceiver::take_pending_ack`]).
    pub ack_now: bool,
}

impl TcpReceiver {
    /// A receiver with delayed acks (every [`DELAYED_ACK_SEGMENTS`] segments).
    pub fn new(flow: u16) -> Self {
        Self::with_ack_every(flow, DELAYED_ACK_SEGMENTS)
    }

    /// A receiver acking every `n`-th in-order segment (1 = every segment).
    pub fn with_ack_every(flow: u16, n: u32) -> Self {
        TcpReceiver {
            flow,
            ack_every: n.max(1),
            ..Default::default()
        }
    }

    /// Acknowledge every `n`-th in-order segment from now on.
    pub fn set_ack_every(&mut self, n: u32) {
        self.ack_every = n.max(1);
    }

    /// Report duplicates with DSACK blocks (RFC 2883).
    pub fn set_dsack(&mut self, on: bool) {
        self.dsack = on;
    }

    /// The held ack, if any (the delayed-ack timer fired); the next ack
    /// counts segments afresh.
    pub fn take_pending_ack(&mut self) -> Option<FlowPkt> {
        self.unacked = 0;
        self.pending.take()
    }

    /// Segments delivered in order so far.
    pub fn delivered_in_order(&self) -> u64 {
        self.rcv.next()
    }

    /// Accept one data segment; fills `ack` with the acknowledgement, to be
    /// sent now if [`Arrival::ack_now`], else held as the pending ack.
    pub fn handle_data(&mut self, pkt: &FlowPkt, ack: &mut FlowPkt) -> Arrival {
        let seq = pkt.seq;
        let out_of_order = self.rcv.highest().is_some_and(|h| seq < h);
        let held_before = !self.rcv.above().is_empty();
        let dup = !self.rcv.insert(seq);
        // RFC 5681 §4.2: ack at once a segment that is out of order (above a
        // hole), fills (part of) a hole, or is a duplicate.
        let in_sequence = !dup && !held_before && self.rcv.above().is_empty();
        if dup {
            self.duplicate_pkts += 1;
        }
        *ack = FlowPkt::ack(self.flow, self.rcv.next(), pkt.sent_at, ACK_BYTES);
        let mut n = 0;
        if dup && self.dsack {
            // RFC 2883 §4: the first block reports the duplicate; if it lies
            // inside a SACKed block, that block follows it.
            ack.sack[0] = (seq, seq + 1);
            n = 1;
            if let Some(r) = self.rcv.range_of(seq) {
                ack.sack[1] = r;
                n = 2;
            }
        } else if let Some(r) = self.rcv.range_of(seq) {
            // RFC 2018 §4: the first block reports the most recent segment;
            // then the highest other blocks.
            ack.sack[0] = r;
            n = 1;
        }
        let first_new = usize::from(dup && self.dsack);
        for &r in self.rcv.above().iter().rev() {
            if n == MAX_SACK_BLOCKS {
                break;
            }
            if ack.sack[first_new..n].contains(&r) {
                continue;
            }
            ack.sack[n] = r;
            n += 1;
        }
        ack.sack_len = n as u8;
        let ack_now = if in_sequence {
            self.unacked += 1;
            self.unacked >= self.ack_every
        } else {
            true
        };
        if ack_now {
            self.unacked = 0;
            self.pending = None;
        } else {
            self.pending = Some(*ack);
        }
        Arrival {
            new: !dup,
            out_of_order: out_of_order && !dup,
            ack_now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpdccp_proto::Instant;

    fn data(seq: u64) -> FlowPkt {
        FlowPkt::data(1, seq, Instant::ZERO, 1000)
    }

    #[test]
    fn receiver_reports_holes_with_sack_blocks() {
        let mut r = TcpReceiver::new(1);
        let mut ack = data(0);
        r.handle_data(&data(0), &mut ack);
        assert_eq!((ack.seq, ack.sack_len), (1, 0));
        r.handle_data(&data(2), &mut ack);
        r.handle_data(&data(3), &mut ack);
        r.handle_data(&data(5), &mut ack);
        assert_eq!(ack.seq, 1);
        assert_eq!(&ack.sack[..2], &[(5, 6), (2, 4)]);
        let a = r.handle_data(&data(1), &mut ack);
        assert!(a.new && a.out_of_order);
        assert_eq!((ack.seq, ack.sack_len), (4, 1));
        r.handle_data(&data(4), &mut ack);
        assert_eq!((ack.seq, ack.sack_len), (6, 0));
        assert!(!r.handle_data(&data(2), &mut ack).new);
        // Without DSACK a duplicate is a plain duplicate ack.
        assert_eq!((ack.seq, ack.sack_len), (6, 0));
    }

    /// RFC 2883: a duplicate below the cumulative ack is reported in the
    /// first block; one inside a SACKed block is followed by that block.
    #[test]
    fn receiver_reports_duplicates_with_dsack() {
        let mut r = TcpReceiver::with_ack_every(1, 1);
        r.set_dsack(true);
        let mut ack = data(0);
        r.handle_data(&data(0), &mut ack);
        r.handle_data(&data(0), &mut ack);
        assert_eq!((ack.seq, ack.ranges()), (1, &[(0, 1)][..]));
        r.handle_data(&data(3), &mut ack);
        r.handle_data(&data(4), &mut ack);
        r.handle_data(&data(7), &mut ack);
        r.handle_data(&data(4), &mut ack);
        assert_eq!(ack.ranges(), &[(4, 5), (3, 5), (7, 8)]);
        assert_eq!(r.duplicate_pkts, 2);
    }

    /// RFC 5681 §4.2: every second in-order segment is acked, a held ack
    /// is released by the timer, and out-of-order, gap-filling and
    /// duplicate segments are acked at once.
    #[test]
    fn receiver_delays_every_other_ack_but_not_around_holes() {
        let mut r = TcpReceiver::new(1);
        let mut ack = data(0);
        assert!(!r.handle_data(&data(0), &mut ack).ack_now);
        assert!(r.handle_data(&data(1), &mut ack).ack_now);
        assert!(r.take_pending_ack().is_none());
        assert!(!r.handle_data(&data(2), &mut ack).ack_now);
        let held = r.take_pending_ack().expect("segment 2 awaits its ack");
        assert_eq!(held.seq, 3);
        // Timer fired: the count starts again.
        assert!(!r.handle_data(&data(3), &mut ack).ack_now);
        assert!(r.handle_data(&data(4), &mut ack).ack_now);
        // A hole (5 missing): 6 and 7 are acked at once (duplicate acks for
        // fast retransmit), so is 5 filling the hole, and a duplicate.
        assert!(r.handle_data(&data(6), &mut ack).ack_now);
        assert!(r.handle_data(&data(7), &mut ack).ack_now);
        assert!(r.handle_data(&data(5), &mut ack).ack_now);
        assert_eq!(ack.seq, 8);
        assert!(r.handle_data(&data(5), &mut ack).ack_now);
        assert!(!r.handle_data(&data(8), &mut ack).ack_now);
        let mut every = TcpReceiver::with_ack_every(1, 1);
        assert!(every.handle_data(&data(0), &mut ack).ack_now);
    }
}
