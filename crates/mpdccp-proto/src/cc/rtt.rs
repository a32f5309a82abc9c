//! RTT estimation per RFC 6298 (SRTT, RTTVAR, RTO) plus a windowed minimum.
//!
//! The minimum is taken over raw samples only, within the last
//! [`MIN_RTT_WINDOW`] (Linux `tcp_min_rtt_wlen`, 300 s, kept with the
//! three-sample windowed filter of Linux `lib/win_minmax.c`, Kathleen
//! Nichols' algorithm): a base RTT that rises (a route change) is learnt
//! within one window instead of never. Samples given a time
//! ([`RttEstimator::on_sample_at`], [`RttEstimator::on_sample_with_ack_delay_at`])
//! age out; the time-less entry points keep a running minimum.
//!
//! An estimate whose newest sample is older than the caller's
//! staleness limit describes a queue that has since drained (the path was
//! idle). [`RttEstimator::restart`] takes the next sample as a first
//! measurement (RFC 6298 §2.2: SRTT ← R, RTTVAR ← R/2) instead of moving
//! 1/8 of the way towards it. An acknowledgement delay the
//! peer reports (DCCP Elapsed Time, RFC 4340 §13.2) is subtracted for SRTT
//! and RTTVAR only when what remains is still at least the minimum (the rule
//! of RFC 9002 §5.3), so neither a forged nor an absurd delay can take the
//! estimate below the fastest round trip the path has shown.

use std::time::Duration;

use crate::time::Instant;

/// Window of the minimum RTT (Linux `net.ipv4.tcp_min_rtt_wlen` default).
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(300);

/// Windowed minimum (Linux `lib/win_minmax.c`): the best, second-best and
/// third-best samples of the window, each with its time.
#[derive(Clone, Copy, Debug, Default)]
struct WinMin {
    s: [Option<(Instant, Duration)>; 3],
}

impl WinMin {
    fn get(&self) -> Option<Duration> {
        self.s[0].map(|(_, v)| v)
    }

    fn reset(&mut self, t: Instant, v: Duration) {
        self.s = [Some((t, v)); 3];
    }

    /// `minmax_running_min`.
    fn update(&mut self, win: Duration, t: Instant, v: Duration) {
        let Some((t0, v0)) = self.s[0] else {
            return self.reset(t, v);
        };
        // A new minimum, or nothing left in the window: start over.
        if v <= v0 || t.saturating_duration_since(self.s[2].map_or(t0, |s| s.0)) > win {
            return self.reset(t, v);
        }
        if self.s[1].is_none_or(|(_, v1)| v <= v1) {
            self.s[1] = Some((t, v));
            self.s[2] = Some((t, v));
        } else if self.s[2].is_none_or(|(_, v2)| v <= v2) {
            self.s[2] = Some((t, v));
        }
        self.subwin_update(win, t, v);
    }

    /// `minmax_subwin_update`.
    fn subwin_update(&mut self, win: Duration, t: Instant, v: Duration) {
        let (t0, _) = self.s[0].expect("set");
        let dt = t.saturating_duration_since(t0);
        if dt > win {
            // The best expired: the second and third move up.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = Some((t, v));
            if t.saturating_duration_since(self.s[0].expect("set").0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = Some((t, v));
            }
        } else if self.s[1].map(|s| s.0) == Some(t0) && dt > win / 4 {
            // A quarter of the window without a second choice: take one.
            self.s[1] = Some((t, v));
            self.s[2] = Some((t, v));
        } else if self.s[2].map(|s| s.0) == self.s[1].map(|s| s.0) && dt > win / 2 {
            self.s[2] = Some((t, v));
        }
    }
}

/// RFC 6298 estimator. The RTO floor and ceiling are parameters because DCCP
/// CCID2 uses a 200 ms floor (RFC 4341 §5, following Linux) where TCP uses 1 s.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    /// The windowed minimum of timed samples.
    win_min: WinMin,
    /// The next sample re-initialises SRTT/RTTVAR ([`RttEstimator::restart`]).
    restart: bool,
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
            win_min: WinMin::default(),
            restart: false,
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

    /// [`RttEstimator::on_sample`] taken at `now`: the minimum is windowed.
    pub fn on_sample_at(&mut self, now: Instant, rtt: Duration) {
        self.latest = Some(rtt);
        self.win_min.update(MIN_RTT_WINDOW, now, rtt);
        self.min_rtt = self.win_min.get();
        self.smooth(rtt);
    }

    /// [`RttEstimator::on_sample_with_ack_delay`] taken at `now`: the
    /// minimum is windowed.
    pub fn on_sample_with_ack_delay_at(
        &mut self,
        now: Instant,
        raw: Duration,
        ack_delay: Option<Duration>,
    ) -> (Duration, AckDelayUse) {
        self.win_min.update(MIN_RTT_WINDOW, now, raw);
        self.min_rtt = self.win_min.get();
        self.on_sample_with_ack_delay(raw, ack_delay)
    }

    /// The estimate is stale (no sample for longer than the caller allows,
    /// the path idle meanwhile): the next sample is smoothed in as a first
    /// measurement (RFC 6298 §2.2). The minimum and the RTO until then are
    /// unchanged.
    pub fn restart(&mut self) {
        self.restart = self.srtt.is_some();
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
        if std::mem::take(&mut self.restart) {
            self.srtt = None;
        }
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
    fn the_minimum_expires_after_its_window() {
        let mut e = est();
        let t = |s: u64| Instant::from_millis(s * 1000);
        e.on_sample_at(t(0), MS * 20);
        e.on_sample_at(t(100), MS * 40);
        assert_eq!(e.min_rtt(), Some(MS * 20));
        // The base RTT rose to 40 ms (a new route): once the 20 ms sample
        // is older than the window, the minimum follows.
        for s in (200..=400).step_by(10) {
            e.on_sample_at(t(s), MS * 40);
        }
        assert_eq!(e.min_rtt(), Some(MS * 40));
        // A lower sample is taken at once.
        e.on_sample_at(t(401), MS * 30);
        assert_eq!(e.min_rtt(), Some(MS * 30));
    }

    #[test]
    fn a_restart_takes_the_next_sample_as_the_first() {
        let mut e = est();
        e.on_sample(MS * 20);
        for _ in 0..20 {
            e.on_sample(MS * 60);
        }
        assert!(e.srtt().unwrap() > MS * 50);
        e.restart();
        e.on_sample(MS * 21);
        assert_eq!(e.srtt(), Some(MS * 21));
        assert_eq!(e.rttvar(), MS * 21 / 2);
        assert_eq!(e.min_rtt(), Some(MS * 20));
        // Only the one sample: the next is smoothed in.
        e.on_sample(MS * 29);
        assert_eq!(e.srtt(), Some(MS * 22));
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
