//! A latency distribution: the bucket counts of an HDR histogram
//! (microseconds, 3 significant digits) in a plain array while recording,
//! turned into an `hdrhistogram::Histogram` only to report.
//!
//! The simulator records about five samples per packet (one-way delay, path
//! RTT and queueing delay, send-queue delay, each for the whole run and for
//! every window holding it). `Histogram::record` checks its range, resizes,
//! saturates the count and tracks min/max for every sample; here a sample
//! is an index computation and an increment. The histogram rebuilt from the
//! same counts holds exactly the counts recording each sample would have
//! left, so its quantiles and buckets — and every reported number — are the
//! same.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::{round6, LatencyMs};

/// Significant digits of the histogram.
const SIGFIG: u8 = 3;
/// `Histogram::new(3)`'s layout (lowest discernible value 1): 2048
/// sub-buckets per bucket (the power of two holding 2 × 10^3), of which
/// buckets above the first use the upper half.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF: u64 = 1 << SUB_BUCKET_HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = 2 * SUB_BUCKET_HALF - 1;
/// 64 − unit magnitude (0) − sub-bucket magnitude (11).
const LEADING_ZERO_BASE: u32 = 53;
/// Samples are capped at ~11.6 days so bucket arithmetic cannot overflow.
const MAX_US: u64 = 1_000_000_000_000;

/// The histogram's counts index of `us` (its `index_for`).
#[inline]
fn index_of(us: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (us | SUB_BUCKET_MASK).leading_zeros();
    let sub = us >> bucket;
    (((u64::from(bucket) + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub - SUB_BUCKET_HALF) as usize
}

/// The lowest value counted at `index` (the histogram's `value_for`).
fn lowest_value_of(index: usize) -> u64 {
    let index = index as u64;
    let bucket = (index >> SUB_BUCKET_HALF_MAGNITUDE) as i64 - 1;
    let sub = (index & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF;
    if bucket < 0 {
        sub - SUB_BUCKET_HALF
    } else {
        sub << bucket
    }
}

/// Durations in microseconds by HDR bucket, plus exact min/max/sum.
#[derive(Clone, Debug)]
pub(super) struct Dist {
    counts: Vec<u64>,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    n: u64,
}

impl Dist {
    pub(super) fn new() -> Self {
        Dist {
            counts: Vec::new(),
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            n: 0,
        }
    }

    #[inline]
    pub(super) fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = index_of((ns / 1000).min(MAX_US));
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += ns as u128;
        self.n += 1;
    }

    /// The histogram these counts are of.
    fn histogram(&self) -> Histogram<u64> {
        // Auto-resizing: creation cannot fail for sigfig 3 (valid 0..=5).
        let mut h = Histogram::new(SIGFIG).unwrap_or_else(|_| unreachable!("sigfig 3 is valid"));
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 && h.record_n(lowest_value_of(i), c).is_err() {
                h.saturating_record_n(lowest_value_of(i), c);
            }
        }
        h
    }

    pub(super) fn summary(&self) -> LatencyMs {
        if self.n == 0 {
            return LatencyMs::default();
        }
        let hist = self.histogram();
        let ms = |ns: u64| ns as f64 / 1e6;
        let q = |quantile: f64| {
            let us = hist.median_equivalent(hist.value_at_quantile(quantile));
            let ns = us.saturating_mul(1000).clamp(self.min_ns, self.max_ns);
            round6(ms(ns))
        };
        LatencyMs {
            p50: q(0.50),
            p95: q(0.95),
            p99: q(0.99),
            max: round6(ms(self.max_ns)),
            mean: round6(self.sum_ns as f64 / self.n as f64 / 1e6),
            min: round6(ms(self.min_ns)),
            samples: self.n,
        }
    }

    /// The empirical CDF as `(ms, fraction ≤ it)` points, one per histogram
    /// bucket holding samples (bucket tops clamped to the exact min and max).
    pub(super) fn cdf_ms(&self) -> Vec<(f64, f64)> {
        if self.n == 0 {
            return Vec::new();
        }
        let hist = self.histogram();
        let total = hist.len().max(1) as f64;
        let mut seen = 0u64;
        let mut out = vec![(round6(self.min_ns as f64 / 1e6), 0.0)];
        for v in hist.iter_recorded() {
            seen += v.count_since_last_iteration();
            let ns = v
                .value_iterated_to()
                .saturating_mul(1000)
                .clamp(self.min_ns, self.max_ns);
            out.push((round6(ns as f64 / 1e6), seen as f64 / total));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples over the whole range: zero, the first bucket's edges, every
    /// magnitude up to the cap, and beyond it.
    fn samples_us() -> Vec<u64> {
        let mut v = vec![
            0,
            1,
            1023,
            1024,
            2047,
            2048,
            2049,
            4095,
            4096,
            MAX_US,
            u64::MAX / 1000,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for k in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(x >> (24 + k % 40));
        }
        v
    }

    #[test]
    fn bucket_index_and_value_are_the_histograms() {
        let mut h = Histogram::<u64>::new(SIGFIG).unwrap();
        for us in samples_us() {
            let us = us.min(MAX_US);
            h.record(us).unwrap();
            assert_eq!(
                lowest_value_of(index_of(us)),
                h.lowest_equivalent(us),
                "{us}"
            );
            assert_eq!(
                index_of(lowest_value_of(index_of(us))),
                index_of(us),
                "{us}"
            );
        }
    }

    #[test]
    fn reports_what_recording_into_the_histogram_reported() {
        // The former recording: every sample into the histogram itself.
        let mut direct = Histogram::<u64>::new(SIGFIG).unwrap();
        let mut d = Dist::new();
        let (mut min_ns, mut max_ns) = (u64::MAX, 0);
        for us in samples_us() {
            let dur = Duration::from_nanos(us.saturating_mul(1000).saturating_add(us % 997));
            d.record(dur);
            let ns = u64::try_from(dur.as_nanos()).unwrap_or(u64::MAX);
            min_ns = min_ns.min(ns);
            max_ns = max_ns.max(ns);
            direct.record((ns / 1000).min(MAX_US)).unwrap();
        }
        let rebuilt = d.histogram();
        assert_eq!(rebuilt.len(), direct.len());
        for q in [0.0, 0.01, 0.5, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(
                rebuilt.value_at_quantile(q),
                direct.value_at_quantile(q),
                "q {q}"
            );
        }
        let buckets = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
                .collect()
        };
        assert_eq!(buckets(&rebuilt), buckets(&direct));
        assert_eq!((d.min_ns, d.max_ns), (min_ns, max_ns));
        assert!(d.summary().samples > 0 && d.cdf_ms().len() > 1);
    }
}
