//! Round-trip ("round") counting from send times, for controllers that act
//! once per round (HyStart++, RFC 9406 §4.2).
//!
//! A round ends when a packet sent after the round began is acknowledged:
//! at the start of a round we remember the send time of the newest packet in
//! flight; the first ack whose newest acknowledged packet was sent later
//! starts the next round (the `windowEnd` of RFC 9406, by time instead of
//! sequence number so it needs nothing transport specific).

use crate::time::Instant;

#[derive(Clone, Debug, Default)]
pub(crate) struct RoundTracker {
    last_sent_time: Option<Instant>,
    round_end: Option<Instant>,
}

impl RoundTracker {
    pub fn on_packet_sent(&mut self, now: Instant) {
        self.last_sent_time = Some(now);
    }

    /// Returns true when this ack starts a new round.
    pub fn on_ack(&mut self, largest_acked_sent_time: Instant) -> bool {
        let ended = match self.round_end {
            None => true,
            Some(end) => largest_acked_sent_time > end,
        };
        if ended {
            self.round_end = Some(self.last_sent_time.unwrap_or(largest_acked_sent_time));
        }
        ended
    }
}
