//! When a subflow was last heard from, probed and closed: the inputs of
//! the connection's keepalive, idle-path RTT probe and reaping of closed
//! subflows (`conn/liveness.rs`).

use std::time::Duration;

use crate::time::Instant;

/// Times of one subflow's life the connection acts on.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lifecycle {
    /// Last valid packet received on this subflow (or its creation).
    pub(super) last_rx_at: Instant,
    /// When its handshake began (our Request sent or the peer's received).
    pub(super) started_at: Instant,
    /// Last keepalive probe (Sync) sent while the subflow was silent.
    pub(super) keepalive_at: Option<Instant>,
    /// When the latest idle-path RTT probe was asked for.
    pub(super) rtt_probe_at: Option<Instant>,
    /// When the subflow was first seen CLOSED (it is forgotten a little later).
    pub(super) closed_at: Option<Instant>,
    /// Last packet the peer sent on it while CLOSED (answered with a Reset).
    pub(super) stray_at: Option<Instant>,
}

/// `k` after `since` and at least `k` after the previous probe, if any.
fn probe_due(since: Instant, previous: Option<Instant>, k: Duration) -> Instant {
    let at = since + k;
    previous.map_or(at, |p| at.max(p + k))
}

impl Lifecycle {
    /// When a silent subflow is due a keepalive: `k` after the last packet
    /// received and after the previous keepalive.
    pub(super) fn keepalive_due(&self, k: Duration) -> Instant {
        probe_due(self.last_rx_at, self.keepalive_at, k)
    }

    /// When an idle subflow is due an RTT probe: `k` after its latest RTT
    /// sample `last_sample` and after the previous probe.
    pub(super) fn rtt_probe_due(&self, last_sample: Instant, k: Duration) -> Instant {
        probe_due(last_sample, self.rtt_probe_at, k)
    }

    /// The subflow is CLOSED at `now`: remembers the first such instant.
    pub(super) fn closed(&mut self, now: Instant) {
        self.closed_at.get_or_insert(now);
    }

    /// Closed for at least `linger` at `now`, and the peer silent on it for
    /// twice that: a peer that still sends there (it did not see the
    /// subflow end; its probes come at least every second) gets the Reset
    /// that tells it, rather than silence once the route is gone (else a
    /// subflow forgotten during a 4 s flood left the peer's half
    /// failing).
    pub(super) fn closed_for_at_least(&self, now: Instant, linger: Duration) -> bool {
        self.closed_at.is_some_and(|t| now >= t + linger)
            && self.stray_at.is_none_or(|t| now >= t + 2 * linger)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::time::Instant;

    use super::Lifecycle;

    const MS: fn(u64) -> Instant = Instant::from_millis;

    #[test]
    fn a_keepalive_waits_for_silence_and_for_the_previous_probe() {
        let k = Duration::from_millis(100);
        let mut l = Lifecycle {
            last_rx_at: MS(1000),
            ..Lifecycle::default()
        };
        assert_eq!(l.keepalive_due(k), MS(1100));
        l.keepalive_at = Some(MS(1100));
        assert_eq!(l.keepalive_due(k), MS(1200));
        // A packet heard later moves the probe on.
        l.last_rx_at = MS(1250);
        assert_eq!(l.keepalive_due(k), MS(1350));
        l.rtt_probe_at = Some(MS(500));
        assert_eq!(l.rtt_probe_due(MS(300), k), MS(600));
    }

    #[test]
    fn the_first_close_counts_for_the_linger() {
        let mut l = Lifecycle::default();
        let linger = Duration::from_secs(2);
        assert!(!l.closed_for_at_least(MS(10_000), linger));
        l.closed(MS(1000));
        l.closed(MS(2500));
        assert!(!l.closed_for_at_least(MS(2999), linger));
        assert!(l.closed_for_at_least(MS(3000), linger));
    }
}
