//! The reordering extent in time, learnt from what actually arrived
//! (`active-adaptive`).
//!
//! The adaptive wait `max − min + offset` (draft-amend-iccrg-multipath-
//! reordering) takes each path's latency from the receiver's own estimates
//! (one-way delay, else SRTT/2). Those miss what makes paths differ most
//! under load: a standing queue in one direction only (a bulk upload fills
//! the uplink buffers, SRTT/2 shows half of it). Simulated, a SACK TCP over
//! two 20 Mbit/s paths (10/20 ms one-way, 100 kB buffers) got 19.5 Mbit/s
//! with the formula alone: gaps were given up, then their packets arrived.
//!
//! So the receiver also measures how far packets really are overtaken, the
//! way RFC 4737 §4.2.2 defines reordering extent, in time (as RACK's
//! adaptive reordering window does in TCP, RFC 8985 §6.2 step 4): when a
//! missing packet arrives — filling a gap that is still held, or *late*,
//! after its gap was given up — the time since the first packet that
//! overtook it arrived is a sample. The largest sample is remembered and
//! halves every [`HALVING`] without a larger one, so a queue that drained
//! stops costing delay; the wait is at least `extent × 5/4 + offset`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;

/// The learnt extent halves after this long without a larger sample.
pub const HALVING: Duration = Duration::from_secs(10);
/// Given-up gaps remembered to recognise their late packets.
const GAPS_REMEMBERED: usize = 64;

#[derive(Clone, Debug, Default)]
pub struct Extent {
    /// Largest sample and when it was taken.
    largest: Option<(Duration, Instant)>,
    /// Given-up gaps `[from, to)` with the arrival of the packet at `to`
    /// (the first that overtook them), newest last.
    gaps: VecDeque<(u64, u64, Instant)>,
}

impl Extent {
    /// The learnt extent at `now` (halved per [`HALVING`] since taken).
    pub fn at(&self, now: Instant) -> Duration {
        let Some((d, t)) = self.largest else {
            return Duration::ZERO;
        };
        let halvings = now.saturating_duration_since(t).as_nanos() / HALVING.as_nanos();
        // A Duration holds < 2^94 ns: after 127 halvings nothing is left.
        let ns = d
            .as_nanos()
            .checked_shr(halvings.min(127) as u32)
            .unwrap_or(0);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// One sample: a packet arrived `d` after the first packet that overtook it.
    pub fn sample(&mut self, now: Instant, d: Duration) {
        if d >= self.at(now) {
            self.largest = Some((d, now));
        }
    }

    /// The gap `[from, to)` was given up; `overtaker` arrived at `arrival`.
    pub fn gave_up(&mut self, from: u64, to: u64, arrival: Instant) {
        if self.gaps.len() == GAPS_REMEMBERED {
            self.gaps.pop_front();
        }
        self.gaps.push_back((from, to, arrival));
    }

    /// A late packet `seq` arrived at `now`: a sample if its gap is remembered.
    pub fn late(&mut self, now: Instant, seq: u64) {
        let hit = self
            .gaps
            .iter()
            .rev()
            .find(|(from, to, _)| (*from..*to).contains(&seq))
            .map(|&(_, _, arrival)| arrival);
        if let Some(arrival) = hit {
            self.sample(now, now.saturating_duration_since(arrival));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_largest_sample_holds_then_halves_per_period() {
        let mut e = Extent::default();
        let t0 = Instant::from_millis(1_000);
        assert_eq!(e.at(t0), Duration::ZERO);
        e.sample(t0, ms(40));
        e.sample(t0 + ms(10), ms(30));
        assert_eq!(e.at(t0 + ms(9_999)), ms(40));
        assert_eq!(e.at(t0 + ms(10_000)), ms(20));
        assert_eq!(e.at(t0 + ms(25_000)), ms(10));
        assert_eq!(e.at(t0 + Duration::from_secs(10_000)), Duration::ZERO);
        // A smaller sample after halving replaces the decayed value.
        e.sample(t0 + ms(20_000), ms(15));
        assert_eq!(e.at(t0 + ms(20_000)), ms(15));
    }

    #[test]
    fn a_late_packet_of_a_remembered_gap_is_a_sample() {
        let mut e = Extent::default();
        let t0 = Instant::from_millis(5_000);
        e.gave_up(10, 13, t0);
        e.late(t0 + ms(70), 99); // not in a remembered gap
        assert_eq!(e.at(t0 + ms(70)), Duration::ZERO);
        e.late(t0 + ms(70), 12);
        assert_eq!(e.at(t0 + ms(70)), ms(70));
        // Bounded memory: old gaps are forgotten.
        for k in 0..200u64 {
            e.gave_up(1_000 + 2 * k, 1_001 + 2 * k, t0);
        }
        e.late(t0 + ms(500), 11);
        assert_eq!(e.at(t0 + ms(500)), ms(70));
        assert!(e.gaps.len() <= GAPS_REMEMBERED);
    }
}
