//! The HC-receiver's duty of one subflow (RFC 4341 §6): which packets
//! arrived (the Ack Vector's source), when an acknowledgement is owed, and
//! the Ack Ratio in each direction.

use std::time::Duration;

use crate::conn::ackvec::RecvHistory;
use crate::time::Instant;

/// Acknowledgements this subflow owes its peer.
#[derive(Debug)]
pub(crate) struct AckDuty {
    pub(super) rx: RecvHistory,
    /// Buffer of the last Ack Vector sent, for the next one.
    pub(super) av_spare: Vec<u8>,
    pub(super) data_since_ack: u32,
    pub(super) ack_now: bool,
    /// Ack Ratio the peer asked us to use.
    pub(super) ack_ratio_rx: u32,
    /// Ack Ratio we ask the peer to use (RFC 4341 §6.1.2).
    pub(super) ack_ratio_tx: u32,
    pub(super) ack_ratio_unconfirmed: bool,
    /// GSR when each of the last two acknowledgements left: the Ack Vector
    /// reaches back to the older one, so one lost ack loses no information
    /// (a stand-in for RFC 4341 §6.1.4 acks-of-acks).
    pub(super) acked_high: [u64; 2],
    /// When the packet numbered GSR arrived: the Elapsed Time our next
    /// acknowledgement reports (RFC 4340 §13.2).
    pub(super) gsr_rx_at: Option<Instant>,
}

/// Shortest hold worth reporting as Elapsed Time: below it the option's
/// bytes buy less precision than the sender's clock jitter.
pub(super) const ELAPSED_MIN: Duration = Duration::from_millis(1);

impl AckDuty {
    /// `ack_ratio_tx` is the ratio we ask of the peer (at least 1).
    pub(super) fn new(ack_ratio_tx: u32) -> Self {
        AckDuty {
            rx: RecvHistory::new(0),
            av_spare: Vec::new(),
            data_since_ack: 0,
            ack_now: false,
            ack_ratio_rx: 1,
            ack_ratio_tx: ack_ratio_tx.max(1),
            // RFC 4340 §11.3: Ack Ratio defaults to 2 at the peer, so the
            // configured value is announced whatever it is — 1 included
            // (the reference kernel otherwise acks every second packet
            // only, and a lone packet waits for its RTO).
            ack_ratio_unconfirmed: true,
            acked_high: [0; 2],
            gsr_rx_at: None,
        }
    }

    /// Packet `seq` arrived at `now`; `new_gsr` when it raised GSR,
    /// `in_order` when it was GSR + 1. Returns false for a duplicate.
    pub(super) fn on_packet(
        &mut self,
        now: Instant,
        seq: u64,
        new_gsr: bool,
        in_order: bool,
    ) -> bool {
        if new_gsr {
            self.gsr_rx_at = Some(now);
        }
        let fresh = self.rx.record(seq);
        if !in_order && fresh {
            // Reordering or loss: tell the sender quickly.
            self.ack_now = true;
        }
        fresh
    }

    /// A data-carrying packet arrived: true when the Ack Ratio is reached
    /// (acknowledge now), false when the ack may wait for its timer.
    pub(super) fn on_data(&mut self) -> bool {
        self.data_since_ack += 1;
        if self.data_since_ack >= self.ack_ratio_rx {
            self.ack_now = true;
        }
        self.ack_now
    }

    /// Sequence numbers the next Ack Vector must cover, GSR being `gsr`.
    pub(super) fn cover(&self, gsr: u64, min_cover: u64) -> u64 {
        let since = gsr.saturating_sub(self.acked_high[1]) + 1;
        since.max(min_cover)
    }

    /// Elapsed Time (RFC 4340 §13.2, 10 µs units) for an acknowledgement
    /// sent at `now`, when the ack was held at least [`ELAPSED_MIN`].
    pub(super) fn elapsed_10us(&self, now: Instant) -> Option<u32> {
        let held = now.checked_duration_since(self.gsr_rx_at?)?;
        (held >= ELAPSED_MIN).then(|| u32::try_from(held.as_micros() / 10).unwrap_or(u32::MAX))
    }

    /// An acknowledgement covering GSR `gsr` was just sent.
    pub(super) fn sent(&mut self, gsr: u64) {
        self.acked_high = [gsr, self.acked_high[0]];
        self.data_since_ack = 0;
        self.ack_now = false;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::conn::ackvec::RecvHistory;
    use crate::time::Instant;

    use super::AckDuty;

    #[test]
    fn the_ack_ratio_sets_when_data_is_acknowledged() {
        let mut a = AckDuty::new(3);
        a.ack_ratio_rx = 3;
        assert!(!a.on_data());
        assert!(!a.on_data());
        assert!(a.on_data());
        a.sent(10);
        assert_eq!(a.data_since_ack, 0);
        assert!(!a.on_data());
    }

    #[test]
    fn a_gap_or_reordering_owes_an_ack_at_once_a_duplicate_does_not() {
        let mut a = AckDuty::new(2);
        a.rx = RecvHistory::new(100);
        let t = Instant::from_millis(5);
        assert!(a.on_packet(t, 101, true, true));
        assert!(!a.ack_now);
        assert!(a.on_packet(t, 103, true, false));
        assert!(a.ack_now);
        a.sent(103);
        assert!(!a.on_packet(t, 103, false, false), "duplicate");
        assert!(!a.ack_now);
    }

    #[test]
    fn the_vector_reaches_back_to_the_older_of_the_last_two_acks() {
        let mut a = AckDuty::new(2);
        a.sent(50);
        a.sent(80);
        assert_eq!(a.cover(90, 4), 90 - 50 + 1);
        assert_eq!(a.cover(90, 64), 64);
    }

    #[test]
    fn elapsed_time_only_once_worth_its_bytes() {
        let mut a = AckDuty::new(2);
        let t = Instant::from_millis(100);
        assert_eq!(a.elapsed_10us(t), None);
        a.on_packet(t, 1, true, true);
        assert_eq!(a.elapsed_10us(t + Duration::from_micros(999)), None);
        assert_eq!(a.elapsed_10us(t + Duration::from_millis(3)), Some(300));
        // A clock that went backwards reports nothing.
        assert_eq!(a.elapsed_10us(t - Duration::from_millis(1)), None);
    }
}
