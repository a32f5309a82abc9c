//! The 95 % confidence interval of a mean over seeds (Student t, two-sided),
//! for `reproduce --seeds N`. The t quantile comes from the exact
//! distribution function for integer degrees of freedom (Abramowitz and
//! Stegun 26.7.3–26.7.4, a finite series in θ = atan(t/√ν)), inverted by
//! bisection: no table, any ν.

use serde::Serialize;

/// Mean, spread and 95 % interval of one check over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Values that entered (seeds whose run gave a finite number).
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// Bounds of the 95 % confidence interval of the mean.
    pub lo: f64,
    pub hi: f64,
}

/// P(|T| < t) for Student's t with `nu` ≥ 1 degrees of freedom.
pub fn t_two_sided_prob(t: f64, nu: u32) -> f64 {
    let nu = nu.max(1);
    let theta = (t.abs() / f64::from(nu).sqrt()).atan();
    let (s, c) = theta.sin_cos();
    if nu % 2 == 1 {
        // (2/π)[θ + sinθ (cosθ + (2/3)cos³θ + … + (2·4…(ν−3))/(3·5…(ν−2)) cos^(ν−2)θ)]
        let mut sum = 0.0;
        if nu > 1 {
            let mut term = c;
            sum = term;
            let mut k = 2;
            while k < nu - 1 {
                term *= f64::from(k) / f64::from(k + 1) * c * c;
                sum += term;
                k += 2;
            }
        }
        2.0 / std::f64::consts::PI * (theta + s * sum)
    } else {
        // sinθ [1 + (1/2)cos²θ + (1·3)/(2·4)cos⁴θ + … + (1·3…(ν−3))/(2·4…(ν−2)) cos^(ν−2)θ]
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 1;
        while k < nu - 1 {
            term *= f64::from(k) / f64::from(k + 1) * c * c;
            sum += term;
            k += 2;
        }
        s * sum
    }
}

/// The t with P(|T| < t) = `p` (e.g. 0.95), by bisection to 1e-10.
pub fn t_quantile_two_sided(p: f64, nu: u32) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0e6_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided_prob(mid, nu) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-10 {
            break;
        }
    }
    0.5 * (lo + hi)
}

impl Interval {
    /// Over the values given; `None` for none. One value: a point (no spread).
    pub fn of(values: &[f64]) -> Option<Interval> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let std = if n < 2 || min == max {
            0.0
        } else {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        let half = if n < 2 {
            0.0
        } else {
            t_quantile_two_sided(0.95, (n - 1) as u32) * std / (n as f64).sqrt()
        };
        Some(Interval {
            n,
            mean,
            std,
            min,
            max,
            lo: mean - half,
            hi: mean + half,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two-sided 95 % points of Student's t (any statistics table, e.g.
    /// NIST/SEMATECH e-Handbook 1.3.6.7.2, column 0.975).
    #[test]
    fn t_quantiles_match_the_published_table() {
        for (nu, t) in [
            (1, 12.706),
            (2, 4.303),
            (3, 3.182),
            (4, 2.776),
            (5, 2.571),
            (9, 2.262),
            (10, 2.228),
            (19, 2.093),
            (29, 2.045),
            (100, 1.984),
        ] {
            let q = t_quantile_two_sided(0.95, nu);
            assert!((q - t).abs() < 1.5e-3, "nu {nu}: {q} vs {t}");
        }
        // 99 %: a second column, so the series is right away from 0.95 too.
        assert!((t_quantile_two_sided(0.99, 4) - 4.604).abs() < 1.5e-3);
        assert!((t_quantile_two_sided(0.99, 7) - 3.499).abs() < 1.5e-3);
        // ν → ∞ tends to the normal 1.960.
        assert!((t_quantile_two_sided(0.95, 10_000) - 1.960).abs() < 1e-3);
    }

    #[test]
    fn interval_of_a_known_sample() {
        // 9..13: mean 11, s = √2.5, half-width t(4) s/√5 = 2.7764 · 0.70711.
        let i = Interval::of(&[9.0, 10.0, 11.0, 12.0, 13.0]).unwrap();
        assert_eq!((i.n, i.mean, i.min, i.max), (5, 11.0, 9.0, 13.0));
        assert!((i.std - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((i.hi - 11.0 - 1.9632).abs() < 1e-3, "{i:?}");
        assert!((11.0 - i.lo - 1.9632).abs() < 1e-3, "{i:?}");
        let one = Interval::of(&[4.0]).unwrap();
        assert_eq!((one.lo, one.hi, one.std), (4.0, 4.0, 0.0));
        let same = Interval::of(&[2.0, 2.0, 2.0]).unwrap();
        assert_eq!((same.lo, same.hi), (2.0, 2.0));
        assert!(Interval::of(&[]).is_none());
    }
}
