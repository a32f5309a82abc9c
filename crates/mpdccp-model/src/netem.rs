//! Driving a [`crate::link::Link`] on the wall clock (`mpdccp netem`).
//!
//! The link model is sans-IO and works in [`Instant`]s from an epoch; the
//! emulator maps the OS monotonic clock onto it once, at start, so the
//! scenario's schedules (rate drops, outages, delay changes) are relative to the
//! emulator's start. Per packet: `push(clock.now(), ..)` on arrival, then sleep
//! until `clock.to_std(link.next_event())` and `poll_deliver_batch(clock.now(), ..)`.
//! Both are amortized O(1) and allocation-free once the queue has grown (see
//! `benches/link.rs`).

use std::time::Duration;

use mpdccp_proto::Instant;

/// Maps `std::time::Instant` to the model's [`Instant`] (epoch = creation).
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    epoch: std::time::Instant,
}

impl WallClock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        WallClock {
            epoch: std::time::Instant::now(),
        }
    }

    /// A clock whose zero is `epoch`.
    pub fn with_epoch(epoch: std::time::Instant) -> Self {
        WallClock { epoch }
    }

    pub fn now(&self) -> Instant {
        self.from_std(std::time::Instant::now())
    }

    /// The model time of an OS instant (zero before the epoch).
    pub fn from_std(&self, t: std::time::Instant) -> Instant {
        let d = t.saturating_duration_since(self.epoch);
        Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The OS instant of a model time (`None` if it does not fit, e.g. `Instant::MAX`).
    pub fn to_std(&self, t: Instant) -> Option<std::time::Instant> {
        self.epoch.checked_add(Duration::from_nanos(t.as_nanos()))
    }

    /// How long to sleep until `t` (zero if it has passed).
    pub fn until(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_is_monotonic() {
        let c = WallClock::start();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        let t = Instant::from_millis(1234);
        assert_eq!(c.from_std(c.to_std(t).unwrap()), t);
        assert_eq!(
            c.to_std(Instant::MAX).map(|_| ()),
            c.epoch
                .checked_add(Duration::from_nanos(u64::MAX))
                .map(|_| ())
        );
        assert!(c.until(Instant::ZERO).is_zero());
    }
}
