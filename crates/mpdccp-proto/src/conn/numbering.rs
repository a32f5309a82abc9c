//! The connection's data numbering: MP_SEQ sent and received (RFC 9897
//! §3.2.5) and the local numbering of a plain-DCCP fallback.
//!
//! MP_SEQ is 48 bits on the wire; both directions are kept as 64-bit
//! numbers here. The receiver unwraps each MP_SEQ near the highest seen and
//! refuses an implausible one (one forged or corrupt MP_SEQ must not drag
//! the numbering away), unless a run of mutually consistent ones says the
//! peer really renumbered.

use super::seq::unwrap48;

/// Consistent implausible MP_SEQ packets that confirm a renumbering.
pub(super) const MP_SEQ_RESYNC_PKTS: u32 = 16;

/// MP_SEQ this far behind the highest seen cannot come from a slow path.
pub(super) const MP_SEQ_MAX_LAG: u64 = 1 << 24;

/// What [`Numbering::accept`] made of a received MP_SEQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Received {
    /// Plausible: the unwrapped number.
    Plausible(u64),
    /// Implausible: drop the packet.
    Implausible,
    /// Implausible, but the latest of a consistent run: the numbering
    /// restarts here (the reorderer's state is stale).
    Resync(u64),
}

/// MP_SEQ sent and received, and the plain-DCCP delivery counter.
#[derive(Debug)]
pub(super) struct Numbering {
    /// The MP_SEQ the next scheduled packet gets.
    next_tx: u64,
    /// The highest MP_SEQ received (unwrapped), the reference to unwrap
    /// the next one near.
    rx_ref: Option<u64>,
    /// A far-ahead MP_SEQ and how many consistent ones followed it.
    jump_probe: Option<(u64, u32)>,
    /// Plain DCCP: packets delivered so far (their local numbering).
    plain_rx: u64,
}

impl Numbering {
    pub(super) fn new(first_tx: u64) -> Self {
        Numbering {
            next_tx: first_tx,
            rx_ref: None,
            jump_probe: None,
            plain_rx: 0,
        }
    }

    /// The MP_SEQ of the packet being scheduled; the next one gets one more.
    pub(super) fn take_tx(&mut self) -> u64 {
        let s = self.next_tx;
        self.next_tx += 1;
        s
    }
    /// The MP_SEQ last given out (one before the first when none was).
    pub(super) fn last_tx(&self) -> u64 {
        self.next_tx.wrapping_sub(1)
    }

    /// Plain DCCP: the number of the packet being delivered.
    pub(super) fn next_plain_rx(&mut self) -> u64 {
        self.plain_rx += 1;
        self.plain_rx
    }

    /// Unwraps a received MP_SEQ near the highest seen and judges it: far
    /// ahead of the highest (more than `max_jump`), or absurdly far behind
    /// it, is implausible; behind by less is just a slow path (the
    /// reorderer judges). [`MP_SEQ_RESYNC_PKTS`] consistent implausible
    /// ones resynchronise. The caller notes an accepted one with
    /// [`Numbering::note_rx`].
    pub(super) fn accept(&mut self, wire: u64, max_jump: u64) -> Received {
        let Some(r) = self.rx_ref else {
            return Received::Plausible(wire);
        };
        let seq = unwrap48(r, wire);
        let jump = max_jump.max(1);
        let implausible = seq > r.saturating_add(jump) || r - seq.min(r) > MP_SEQ_MAX_LAG;
        if !implausible {
            return Received::Plausible(seq);
        }
        let n = match self.jump_probe {
            Some((p, n)) if p.abs_diff(seq) <= jump => n + 1,
            _ => 1,
        };
        if n < MP_SEQ_RESYNC_PKTS {
            self.jump_probe = Some((seq, n));
            return Received::Implausible;
        }
        self.jump_probe = None;
        self.rx_ref = Some(seq);
        Received::Resync(seq)
    }

    /// An accepted MP_SEQ raises the reference for the next unwrap.
    pub(super) fn note_rx(&mut self, seq: u64) {
        self.rx_ref = Some(self.rx_ref.map_or(seq, |r| r.max(seq)));
    }
}

#[cfg(test)]
mod tests {
    use super::{Numbering, Received, MP_SEQ_MAX_LAG, MP_SEQ_RESYNC_PKTS};

    #[test]
    fn sent_numbers_count_up_from_the_first() {
        let mut n = Numbering::new(7);
        assert_eq!(n.last_tx(), 6);
        assert_eq!(n.take_tx(), 7);
        assert_eq!(n.take_tx(), 8);
        assert_eq!(n.last_tx(), 8);
        assert_eq!((n.next_plain_rx(), n.next_plain_rx()), (1, 2));
    }

    #[test]
    fn received_numbers_unwrap_across_the_48_bit_boundary() {
        let mut n = Numbering::new(0);
        let top = (1u64 << 48) - 2;
        assert_eq!(n.accept(top, 1000), Received::Plausible(top));
        n.note_rx(top);
        // Wire 3 after 2^48 - 2 is 2^48 + 3, not 3.
        assert_eq!(n.accept(3, 1000), Received::Plausible((1 << 48) + 3));
        // A late packet below the reference stays plausible.
        assert_eq!(n.accept(top - 5, 1000), Received::Plausible(top - 5));
    }

    #[test]
    fn a_far_jump_is_refused_until_a_consistent_run_resyncs() {
        let mut n = Numbering::new(0);
        n.note_rx(1000);
        let far = 1_000_000;
        for k in 0..MP_SEQ_RESYNC_PKTS - 1 {
            assert_eq!(n.accept(far + u64::from(k), 100), Received::Implausible);
        }
        let last = far + u64::from(MP_SEQ_RESYNC_PKTS - 1);
        assert_eq!(n.accept(last, 100), Received::Resync(last));
        // The new reference: the next one near it is plausible.
        assert_eq!(n.accept(last + 1, 100), Received::Plausible(last + 1));
        // A lone far jump after that starts a new count of one.
        assert_eq!(n.accept(last + 500, 100), Received::Implausible);
    }

    #[test]
    fn absurdly_far_behind_is_implausible_a_slow_path_is_not() {
        let mut n = Numbering::new(0);
        let r = 1u64 << 30;
        n.note_rx(r);
        let oldest = r - MP_SEQ_MAX_LAG;
        assert_eq!(n.accept(oldest, 100), Received::Plausible(oldest));
        assert_eq!(n.accept(oldest - 1, 100), Received::Implausible);
    }
}
