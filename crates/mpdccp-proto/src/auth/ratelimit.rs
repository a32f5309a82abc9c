//! Per-source token buckets for new handshakes, and a log-line throttle.
//!
//! The handshake limiter is keyed by source address (IPv4 /32, IPv6 /64,
//! since one host owns a /64) and holds at most `max_sources` buckets. It
//! is consulted only after the source has shown it receives at its address
//! when the server is under load (a valid cookie, see `cookie.rs`), so
//! spoofed floods cannot fill it with addresses that lock others out; when
//! it is full anyway, idle buckets (refilled, thus equal to a fresh one) are
//! dropped, and if none is idle the new source is refused and counted.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use crate::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// Sustained new handshakes per second from one source.
    pub per_second: u32,
    /// Handshakes a quiet source may start back to back.
    pub burst: u32,
    /// Bound on tracked sources.
    pub max_sources: usize,
}

impl Default for RateLimitConfig {
    /// WireGuard's values: 20 handshakes/s per source, burst 5, 8192 sources.
    fn default() -> Self {
        RateLimitConfig {
            per_second: 20,
            burst: 5,
            max_sources: 8192,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimitStats {
    pub allowed: u64,
    /// Refused: the source's bucket was empty.
    pub limited: u64,
    /// Refused: the table was full of active sources.
    pub table_full: u64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Credit in nanoseconds; one handshake costs `cost_ns`.
    credit_ns: u64,
    last: Instant,
}

#[derive(Debug, Clone)]
pub struct RateLimiter {
    cfg: RateLimitConfig,
    cost_ns: u64,
    cap_ns: u64,
    buckets: BTreeMap<IpAddr, Bucket>,
    stats: RateLimitStats,
}

/// The limiter's key: a host, with IPv6 hosts taken as their /64.
fn source_key(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(_) => a,
        IpAddr::V6(v) => IpAddr::V6((u128::from(v) & !((1u128 << 64) - 1)).into()),
    }
}

impl RateLimiter {
    pub fn new(cfg: RateLimitConfig) -> Self {
        let cost_ns = 1_000_000_000 / u64::from(cfg.per_second.max(1));
        RateLimiter {
            cfg,
            cost_ns,
            cap_ns: cost_ns * u64::from(cfg.burst.max(1)),
            buckets: BTreeMap::new(),
            stats: RateLimitStats::default(),
        }
    }

    pub fn stats(&self) -> RateLimitStats {
        self.stats
    }
    pub fn tracked_sources(&self) -> usize {
        self.buckets.len()
    }

    fn refill(&self, b: &Bucket, now: Instant) -> u64 {
        let gained = now.saturating_duration_since(b.last).as_nanos();
        (u128::from(b.credit_ns) + gained).min(u128::from(self.cap_ns)) as u64
    }

    /// Charge one new handshake to `src`: true if allowed.
    pub fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        let key = source_key(src);
        if !self.buckets.contains_key(&key) && self.buckets.len() >= self.cfg.max_sources {
            self.drop_idle(now);
            if self.buckets.len() >= self.cfg.max_sources {
                self.stats.table_full += 1;
                return false;
            }
        }
        let fresh = Bucket {
            credit_ns: self.cap_ns,
            last: now,
        };
        let b = *self.buckets.get(&key).unwrap_or(&fresh);
        let credit = self.refill(&b, now);
        let ok = credit >= self.cost_ns;
        let credit_ns = if ok { credit - self.cost_ns } else { credit };
        self.buckets.insert(
            key,
            Bucket {
                credit_ns,
                last: now,
            },
        );
        if ok {
            self.stats.allowed += 1;
        } else {
            self.stats.limited += 1;
        }
        ok
    }

    /// Forget buckets that have refilled completely (same as a fresh one).
    pub fn drop_idle(&mut self, now: Instant) {
        let cap = self.cap_ns;
        let full_after = Duration::from_nanos(cap);
        self.buckets
            .retain(|_, b| b.credit_ns < cap && now.saturating_duration_since(b.last) < full_after);
    }
}

/// At most one log line per `interval`; the lines in between are counted and
/// reported with the next one ("… (37 suppressed)").
#[derive(Clone, Copy, Debug)]
pub struct LogThrottle {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl LogThrottle {
    pub const fn new(interval: Duration) -> Self {
        LogThrottle {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(suppressed since the last line)` if a line may be logged now.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        let due = match self.last {
            None => true,
            Some(t) => now.saturating_duration_since(t) >= self.interval,
        };
        if due {
            self.last = Some(now);
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: u64) -> Instant {
        Instant::from_millis(t)
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn burst_then_sustained_rate() {
        let cfg = RateLimitConfig {
            per_second: 10,
            burst: 3,
            max_sources: 4,
        };
        let mut r = RateLimiter::new(cfg);
        let a = ip("192.0.2.1");
        // A quiet source gets its burst, then one per 100 ms.
        assert!((0..3).all(|_| r.allow(a, ms(0))));
        assert!(!r.allow(a, ms(0)));
        assert!(!r.allow(a, ms(99)));
        assert!(r.allow(a, ms(100)));
        assert!(!r.allow(a, ms(150)));
        // Over 10 s at 100 Hz, exactly 10/s pass (plus the refilled burst
        // cannot exceed 3): count = 1000 ms / 100 ms per token * 10 s.
        let mut passed = 0;
        for i in 1..=1000u64 {
            passed += u32::from(r.allow(a, ms(150 + i * 10)));
        }
        assert_eq!(passed, 100);
        // Another source is not affected.
        assert!(r.allow(ip("192.0.2.2"), ms(11_000)));
        assert_eq!(r.stats().limited, 3 + 900);
    }

    #[test]
    fn ipv6_sources_share_their_64() {
        let mut r = RateLimiter::new(RateLimitConfig {
            per_second: 1,
            burst: 1,
            max_sources: 8,
        });
        assert!(r.allow(ip("2001:db8::1"), ms(0)));
        assert!(!r.allow(ip("2001:db8::ffff:2"), ms(1)));
        assert!(r.allow(ip("2001:db8:0:1::1"), ms(1)));
    }

    #[test]
    fn table_is_bounded_and_idle_sources_are_reclaimed() {
        let mut r = RateLimiter::new(RateLimitConfig {
            per_second: 10,
            burst: 1,
            max_sources: 100,
        });
        for i in 0..10_000u32 {
            let a = IpAddr::V4((0x0A00_0000 + i).into());
            r.allow(a, ms(u64::from(i / 1000)));
            assert!(r.tracked_sources() <= 100);
        }
        assert_eq!(r.stats().allowed, 100);
        assert_eq!(r.stats().table_full, 9_900);
        // 100 ms later every bucket has refilled: a new source gets in.
        assert!(r.allow(ip("198.51.100.1"), ms(10 + 100)));
        assert_eq!(r.tracked_sources(), 1);
    }

    #[test]
    fn log_throttle_counts_suppressed_lines() {
        let mut t = LogThrottle::new(Duration::from_secs(10));
        assert_eq!(t.allow(ms(0)), Some(0));
        assert_eq!(t.allow(ms(1)), None);
        assert_eq!(t.allow(ms(9_999)), None);
        assert_eq!(t.allow(ms(10_000)), Some(2));
        assert_eq!(t.allow(ms(10_001)), None);
    }
}
