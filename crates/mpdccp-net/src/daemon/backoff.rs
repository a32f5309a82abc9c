//! Reconnect backoff for a client the server refuses (or cannot be reached):
//! the wait doubles after each connection that closes before it was ever
//! established, up to a cap, and is reset by a connection that succeeds. The
//! warning is rate-limited, so a refused client neither hammers the server
//! every 200 ms forever nor floods its own log.

use std::time::Duration;

use mpdccp_proto::auth::LogThrottle;
use mpdccp_proto::Instant;

/// Longest wait between two connection attempts.
pub const RECONNECT_CAP: Duration = Duration::from_secs(60);
/// At most one "reconnecting" warning per this interval.
pub const WARN_INTERVAL: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Reconnect {
    base: Duration,
    cap: Duration,
    next: Duration,
    failures: u32,
    warn: LogThrottle,
}

/// What the caller does after a failed connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Wait this long before the next attempt.
    pub wait: Duration,
    /// Connections in a row that never got established.
    pub failures: u32,
    /// `Some(n)`: log a warning now (n warnings were suppressed since the
    /// last one); `None`: log at debug level only.
    pub warn: Option<u64>,
}

impl Reconnect {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Reconnect {
            base,
            cap: cap.max(base),
            next: base,
            failures: 0,
            warn: LogThrottle::new(WARN_INTERVAL),
        }
    }

    /// The connection got established: the next failure starts from `base`.
    pub fn connected(&mut self) {
        self.next = self.base;
        self.failures = 0;
    }

    /// The connection closed at `now`; `was_established` says whether it had
    /// ever connected (a working session that drops retries quickly).
    pub fn closed(&mut self, now: Instant, was_established: bool) -> Retry {
        if was_established {
            self.connected();
        }
        let wait = self.next;
        self.failures = self.failures.saturating_add(1);
        self.next = (self.next * 2).min(self.cap);
        Retry {
            wait,
            failures: self.failures,
            warn: self.warn.allow(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_client_backs_off_exponentially_to_the_cap() {
        let mut r = Reconnect::new(Duration::from_millis(200), RECONNECT_CAP);
        let mut now = Instant::ZERO;
        let mut waits = Vec::new();
        let mut warnings = 0;
        // One hour of refusals.
        while now < Instant::from_secs_f64(3600.0) {
            let retry = r.closed(now, false);
            waits.push(retry.wait);
            warnings += u32::from(retry.warn.is_some());
            now += retry.wait;
        }
        let ms: Vec<u64> = waits
            .iter()
            .take(10)
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(
            ms,
            [200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 51_200, 60_000]
        );
        // 200 ms · (2⁹ − 1) = 102.2 s to reach the cap, then one try a
        // minute: ≈ 9 + (3600 − 102.2) / 60 ≈ 68 attempts instead of 18 000.
        assert_eq!(waits.len(), 9 + 59);
        // Warnings: at most one per 30 s, and never more than the attempts.
        assert!(warnings <= 3600 / 30 + 1, "{warnings} warnings");
        assert!(warnings >= 55, "{warnings} warnings");
    }

    #[test]
    fn an_established_connection_resets_the_backoff() {
        let mut r = Reconnect::new(Duration::from_millis(200), RECONNECT_CAP);
        for _ in 0..5 {
            r.closed(Instant::ZERO, false);
        }
        let after_session = r.closed(Instant::from_millis(1), true);
        assert_eq!(after_session.wait, Duration::from_millis(200));
        assert_eq!(after_session.failures, 1);
        r.connected();
        assert_eq!(
            r.closed(Instant::from_millis(2), false).wait,
            Duration::from_millis(200)
        );
    }
}
