//! A driver's protection against a stuck timer.
//!
//! A driver calls [`Connection::handle_timeout`](super::Connection::handle_timeout)
//! when [`Connection::poll_timeout`](super::Connection::poll_timeout) has
//! passed, drains `poll_transmit`, and sleeps until the next deadline. The
//! timer table guarantees that a deadline `handle_timeout(now)` has seen is
//! not reported again; if a bug broke that, the driver would wake at once,
//! forever. [`StuckTimerGuard`] turns such a deadline into a wake-up
//! [`STUCK_TIMER_NUDGE`] later, counts it and logs the first one, so a
//! daemon degrades to polling instead of burning a core.

use std::time::Duration;

use crate::time::Instant;

/// How long a driver sleeps past a stuck deadline before looking again.
pub const STUCK_TIMER_NUDGE: Duration = Duration::from_millis(1);

/// Remembers when the driver last handled timeouts and refuses to sleep
/// to a deadline at or before that instant.
#[derive(Clone, Copy, Debug, Default)]
pub struct StuckTimerGuard {
    handled_at: Option<Instant>,
    stuck: u64,
}

impl StuckTimerGuard {
    pub fn new() -> Self {
        Self::default()
    }

    /// The driver called `handle_timeout(now)`.
    pub fn handled(&mut self, now: Instant) {
        self.handled_at = Some(now);
    }

    /// The instant to sleep until for `deadline` (from `poll_timeout`): the
    /// deadline itself, unless timeouts were handled at or after it — then
    /// it is stuck, and the driver looks again [`STUCK_TIMER_NUDGE`] later.
    pub fn wake_at(&mut self, deadline: Option<Instant>) -> Option<Instant> {
        match (deadline, self.handled_at) {
            (Some(d), Some(h)) if d <= h => {
                self.stuck += 1;
                if self.stuck == 1 {
                    tracing::warn!(
                        deadline = ?d,
                        handled_at = ?h,
                        "stuck timer: poll_timeout is not after the last handle_timeout; polling every {STUCK_TIMER_NUDGE:?}"
                    );
                }
                Some(h + STUCK_TIMER_NUDGE)
            }
            _ => deadline,
        }
    }

    /// Deadlines found stuck so far.
    pub fn stuck(&self) -> u64 {
        self.stuck
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_already_handled_is_pushed_on_and_counted() {
        let mut g = StuckTimerGuard::new();
        let t = Instant::from_millis(100);
        // Nothing handled yet: any deadline is taken as it is.
        assert_eq!(g.wake_at(Some(t)), Some(t));
        g.handled(t);
        // Reported again after it was handled: stuck.
        assert_eq!(g.wake_at(Some(t)), Some(t + STUCK_TIMER_NUDGE));
        assert_eq!(
            g.wake_at(Some(t - Duration::from_millis(5))),
            Some(t + STUCK_TIMER_NUDGE)
        );
        assert_eq!(g.stuck(), 2);
        // A later deadline, or none, is not.
        let later = t + Duration::from_micros(10);
        assert_eq!(g.wake_at(Some(later)), Some(later));
        assert_eq!(g.wake_at(None), None);
        assert_eq!(g.stuck(), 2);
    }
}
