//! RTT estimation per RFC 6298 (SRTT, RTTVAR, RTO) plus a running minimum.
//!
//! The minimum is taken over raw samples only. An acknowledgement delay the
//! peer reports (DCCP Elapsed Time, RFC 4340 §13.2) is subtracted for SRTT
//! and RTTVAR only when what remains is still at least the minimum (the rule
//! of RFC 9002 §5.3), so neither a forged nor an absurd delay can take the
//! estimate below the fastest round trip the path has shown.

use std::time::Duration;

/// RFC 6298 estimator. The RTO floor and ceiling are parameters because DCCP
/// CCID2 uses a 200 ms floor (RFC 4341 §5, following Linux) where TCP uses 1 s.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    latest: Option<Duration>,
    min_rto: Duration,
    max_rto: Duration,
    initial_rto: Duration,
}

/// Clock granularity G of RFC 6298 §2; we have nanosecond clocks, so 1 ms is a
/// conservative stand-in that keeps RTO above RTT on jitter-free links.
const GRANULARITY: Duration = Duration::from_millis(1);

impl RttEstimator {
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            latest: None,
            min_rto,
            max_rto,
            initial_rto,
        }
    }

    /// RFC 6298 §2.2 / §2.3.
    pub fn on_sample(&mut self, rtt: Duration) {
        self.latest = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        self.smooth(rtt);
    }

    /// A raw sample whose acknowledgement the peer says it held for
    /// `ack_delay`. The minimum sees `raw`; SRTT/RTTVAR see `raw - ack_delay`
    /// when that is still >= the minimum, else `raw` (RFC 9002 §5.3).
    /// Returns the sample smoothed in and what became of the delay.
    pub fn on_sample_with_ack_delay(
        &mut self,
        raw: Duration,
        ack_delay: Option<Duration>,
    ) -> (Duration, AckDelayUse) {
        self.latest = Some(raw);
        let min = self.min_rtt.map_or(raw, |m| m.min(raw));
        self.min_rtt = Some(min);
        let (adjusted, used) = match ack_delay {
            None => (raw, AckDelayUse::Absent),
            Some(d) => match raw.checked_sub(d) {
                Some(r) if r >= min => (r, AckDelayUse::Used),
                _ => (raw, AckDelayUse::Ignored),
            },
        };
        self.smooth(adjusted);
        (adjusted, used)
    }

    fn smooth(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                // RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|; SRTT <- 7/8 SRTT + 1/8 R'
                let diff = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// RTO = SRTT + max(G, 4·RTTVAR), clamped to [min_rto, max_rto]
    /// (RFC 6298 §2.3, §2.4); the initial RTO before any sample (§2.1).
    pub fn rto(&self) -> Duration {
        match self.srtt {
            None => self.initial_rto,
            Some(srtt) => {
                (srtt + GRANULARITY.max(self.rttvar * 4)).clamp(self.min_rto, self.max_rto)
            }
        }
    }
}

/// What [`RttEstimator::on_sample_with_ack_delay`] did with a reported delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckDelayUse {
    /// No delay was reported.
    Absent,
    /// Subtracted.
    Used,
    /// Not subtracted: it would have put the sample below the minimum RTT
    /// (or below zero).
    Ignored,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Duration::from_secs(60),
        )
    }
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ack_delay_is_subtracted_only_down_to_the_minimum() {
        let mut e = est();
        // The first sample cannot be adjusted: it defines the minimum.
        assert_eq!(
            e.on_sample_with_ack_delay(MS * 30, Some(MS * 10)),
            (MS * 30, AckDelayUse::Ignored)
        );
        assert_eq!(e.min_rtt(), Some(MS * 30));
        // 40 - 5 = 35 >= 30: used.
        assert_eq!(
            e.on_sample_with_ack_delay(MS * 40, Some(MS * 5)),
            (MS * 35, AckDelayUse::Used)
        );
        // 40 - 15 = 25 < 30: ignored, the raw 40 is smoothed in.
        assert_eq!(
            e.on_sample_with_ack_delay(MS * 40, Some(MS * 15)),
            (MS * 40, AckDelayUse::Ignored)
        );
        // A delay longer than the sample itself (forged / absurd).
        assert_eq!(
            e.on_sample_with_ack_delay(MS * 40, Some(Duration::from_secs(3600))),
            (MS * 40, AckDelayUse::Ignored)
        );
        assert_eq!(e.min_rtt(), Some(MS * 30));
        assert!(e.srtt().unwrap() >= MS * 30);
        // Without a delay: exactly the RFC 6298 path.
        let mut a = est();
        let mut b = est();
        for r in [12u64, 30, 11, 50] {
            a.on_sample(MS * r as u32);
            assert_eq!(
                b.on_sample_with_ack_delay(MS * r as u32, None).1,
                AckDelayUse::Absent
            );
        }
        assert_eq!((a.srtt(), a.rttvar()), (b.srtt(), b.rttvar()));
    }

    #[test]
    fn follows_rfc6298_formulas() {
        let mut e = RttEstimator::new(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Duration::from_secs(60),
        );
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar(), Duration::from_millis(50));
        assert_eq!(e.rto(), Duration::from_millis(300));
        e.on_sample(Duration::from_millis(200));
        // rttvar = (3*50 + 100)/4 = 62.5 ms; srtt = (7*100 + 200)/8 = 112.5 ms
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.min_rtt(), Some(Duration::from_millis(100)));
    }

    #[test]
    fn rto_has_a_floor() {
        let mut e = RttEstimator::new(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Duration::from_secs(60),
        );
        for _ in 0..50 {
            e.on_sample(Duration::from_millis(10));
        }
        assert_eq!(e.rto(), Duration::from_millis(200));
    }
}
