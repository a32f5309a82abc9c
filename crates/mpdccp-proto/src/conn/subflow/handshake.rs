//! Retransmission of one subflow's handshake and close packets (RFC 4340
//! §8.1.1, §8.3) and the probes whose answers give RTT samples: the latest
//! Request/Response (acknowledged by the handshake's next packet, §8.1)
//! and the latest Sync (answered at once by a SyncAck, §7.5.4).

use std::time::Duration;

use crate::time::Instant;

/// Longest wait between two tries of a handshake or close packet, so a
/// bounded number of tries ends in bounded time.
const RETX_BACKOFF_MAX: Duration = Duration::from_secs(4);

/// Handshake/close retransmission and the probes awaiting their answer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ControlRetx {
    /// Tries of the current packet so far.
    pub(super) tries: u32,
    /// Wait before the second try (doubles with each try).
    pub(super) interval: Duration,
    /// Sequence number and send time of our latest Request (client) or
    /// Response (server): the packet acknowledging exactly it gives the
    /// handshake RTT sample (RFC 4340 §8.1).
    pub(super) hs_probe: Option<(u64, Instant)>,
    pub(super) last_sync_sent: Option<Instant>,
    /// Sequence number and send time of our latest Sync: the SyncAck
    /// acknowledging exactly it gives an RTT sample (the peer answers at
    /// once, RFC 4340 §7.5.4).
    pub(super) sync_probe: Option<(u64, Instant)>,
}

impl ControlRetx {
    pub(super) fn new(interval: Duration) -> Self {
        ControlRetx {
            tries: 0,
            interval,
            hs_probe: None,
            last_sync_sent: None,
            sync_probe: None,
        }
    }

    /// A new packet to (re)transmit, first try after `interval`.
    pub(super) fn restart(&mut self, interval: Duration) {
        self.tries = 0;
        self.interval = interval;
    }

    /// One more try: how long until the next one (exponential back-off
    /// from `interval`, at most [`RETX_BACKOFF_MAX`]).
    pub(super) fn next_try(&mut self) -> Duration {
        self.tries += 1;
        (self.interval * (1u32 << self.tries.saturating_sub(1).min(10))).min(RETX_BACKOFF_MAX)
    }

    /// A Sync numbered `seq` left at `now`.
    pub(super) fn sync_sent(&mut self, seq: u64, now: Instant) {
        self.last_sync_sent = Some(now);
        self.sync_probe = Some((seq, now));
    }

    /// The handshake acknowledged `ack`: when the probe it answers left
    /// (the probe is used up either way).
    pub(super) fn take_hs_sample(&mut self, ack: u64) -> Option<Instant> {
        self.hs_probe
            .take()
            .filter(|(s, _)| *s == ack)
            .map(|(_, t)| t)
    }

    /// A SyncAck acknowledged `ack`: when our latest Sync left, if it is
    /// the one answered (the probe is then used up).
    pub(super) fn take_sync_sample(&mut self, ack: u64) -> Option<Instant> {
        let (seq, sent) = self.sync_probe?;
        (seq == ack).then(|| {
            self.sync_probe = None;
            sent
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::time::Instant;

    use super::ControlRetx;

    #[test]
    fn tries_back_off_exponentially_up_to_four_seconds() {
        let mut r = ControlRetx::new(Duration::from_millis(300));
        let waits: Vec<u64> = (0..6).map(|_| r.next_try().as_millis() as u64).collect();
        assert_eq!(waits, [300, 600, 1200, 2400, 4000, 4000]);
        assert_eq!(r.tries, 6);
        r.restart(Duration::from_millis(50));
        assert_eq!(r.tries, 0);
        assert_eq!(r.next_try(), Duration::from_millis(50));
    }

    #[test]
    fn only_the_answer_to_the_latest_probe_is_a_sample() {
        let mut r = ControlRetx::new(Duration::from_secs(1));
        let t = Instant::from_millis(10);
        r.hs_probe = Some((7, t));
        // An ack of another packet uses the probe up without a sample.
        assert_eq!(r.take_hs_sample(6), None);
        assert_eq!(r.take_hs_sample(7), None);
        r.hs_probe = Some((7, t));
        assert_eq!(r.take_hs_sample(7), Some(t));

        r.sync_sent(20, t);
        assert_eq!(r.take_sync_sample(19), None);
        assert_eq!(r.take_sync_sample(20), Some(t));
        assert_eq!(r.take_sync_sample(20), None, "used up");
        assert_eq!(r.last_sync_sent, Some(t));
    }
}
