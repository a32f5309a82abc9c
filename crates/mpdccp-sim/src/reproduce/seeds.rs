//! `reproduce --seeds N`: every configuration over N seeds — the scenario's
//! own seed s, then s+1 … s+N−1 — and in every seed but the first, each
//! flow start a scenario marks as unpublished (`start_free_ms`) moved by a
//! seeded draw within ± that many ms. Each check then carries the mean,
//! spread and 95 % Student-t interval over the seeds and is judged on the
//! interval, three ways (the logic of an equivalence test): it passes when
//! both ends meet the threshold (every threshold is a bound or a range, so
//! then the whole interval does), fails when no point of the interval
//! does, and is *unresolved* otherwise: the seeds run cannot tell, and the
//! row says how many seeds would (if the spread holds).

use std::path::Path;
use std::time::Instant as WallInstant;

use mpdccp_model::scenario::Scenario;

use super::{
    checks::fmt_num, evaluate, load_scenario, run_jobs, selected, Check, Interval, Job, Report,
    ReproduceOptions, RunRecord, Verdict,
};
use crate::SimError;

/// A number in [−1, 1) from (`k`, `name`): SplitMix64 (Steele et al.,
/// OOPSLA 2014) over an FNV-1a hash of the flow name, so the same flow
/// gets the same offset in every configuration of a seed (LIA and
/// Coupled CUBIC are compared under the same start order).
fn unit_draw(k: u64, name: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// Seed `k` (0-based) of a scenario: seed + k, free starts moved (k > 0).
pub fn perturb(s: &mut Scenario, k: u64) {
    s.seed = s.seed.wrapping_add(k);
    if k == 0 {
        return;
    }
    for f in &mut s.flow {
        if f.start_free_ms > 0.0 {
            let shift = unit_draw(k, &f.name) * f.start_free_ms / 1e3;
            f.start_s = (f.start_s + shift).max(0.0);
        }
    }
}

/// Runs the selected experiments over `n` seeds (`out/seed-S/<stem>`).
pub fn reproduce_seeds(opts: &ReproduceOptions, n: usize) -> Result<Report, SimError> {
    if n <= 1 {
        return super::reproduce(opts);
    }
    let t0 = WallInstant::now();
    let selected = selected(opts)?;
    let mut jobs = Vec::new();
    for k in 0..n as u64 {
        for e in &selected {
            for stem in e.runs {
                let mut s = load_scenario(opts.scenarios_dir.as_deref(), stem, opts.quick)?;
                perturb(&mut s, k);
                jobs.push(Job {
                    stem: (*stem).to_owned(),
                    label: format!("{stem} (seed {})", s.seed),
                    dir: opts.out.join(format!("seed-{k}")).join(stem),
                    scenario: s,
                });
            }
        }
    }
    let runs = run_jobs(opts, jobs)?;
    let mut per_seed: Vec<Vec<RunRecord>> = vec![Vec::new(); n];
    for r in runs {
        let k = seed_index(&r.dir, &opts.out).unwrap_or(0);
        per_seed[k.min(n - 1)].push(r);
    }
    for runs in &mut per_seed {
        runs.sort_by(|a, b| a.stem.cmp(&b.stem));
    }
    let checks: Vec<Vec<Check>> = per_seed.iter().map(|r| evaluate(&selected, r)).collect();
    let merged = merge(&checks);
    // Figures and plots: the first seed's runs (the published configuration).
    let first = per_seed.remove(0);
    Ok(Report {
        quick: opts.quick,
        seeds: n,
        wall_s: t0.elapsed().as_secs_f64(),
        checks: merged,
        runs: first,
        other_seeds: per_seed,
    })
}

/// `k` of `out/seed-k/<stem>`.
fn seed_index(dir: &Path, out: &Path) -> Option<usize> {
    let rel = dir.strip_prefix(out).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    first.strip_prefix("seed-")?.parse().ok()
}

/// One check per row of the first seed, with its interval over every seed
/// that produced the same row, judged on the interval.
pub fn merge(per_seed: &[Vec<Check>]) -> Vec<Check> {
    let Some(first) = per_seed.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|c| {
            let same: Vec<&Check> = per_seed
                .iter()
                .filter_map(|checks| {
                    checks
                        .iter()
                        .find(|x| x.experiment == c.experiment && x.metric == c.metric)
                })
                .collect();
            judge(c, &same, per_seed.len())
        })
        .collect()
}

/// The row of `c` over the seeds' rows `same` (`n` seeds were run).
fn judge(c: &Check, same: &[&Check], n: usize) -> Check {
    let values: Vec<f64> = same.iter().filter_map(|x| x.value).collect();
    let mut out = c.clone();
    let Some(iv) = Interval::of(&values) else {
        return out; // a text row (no number): the first seed's text
    };
    let missing = n - values.len();
    out.value = Some(iv.mean);
    out.ours = format!(
        "{} [{}, {}] sd {}{}",
        fmt_num(iv.mean, c.unit),
        fmt_num(iv.lo, ""),
        fmt_num(iv.hi, ""),
        fmt_num(iv.std, ""),
        if missing > 0 {
            format!(" ({} of {n} seeds without a value)", missing)
        } else {
            String::new()
        }
    );
    out.verdict = match (c.verdict, c.accept) {
        (Verdict::Info, _) => Verdict::Info,
        // A seed without a finite value passes only if that seed's own
        // verdict did (an unbounded ratio above a floor, say).
        (_, Some(ok)) if same.len() == n => {
            if !same
                .iter()
                .all(|x| x.value.is_some() || x.verdict == Verdict::Pass)
            {
                Verdict::Fail
            } else if ok(iv.lo) && ok(iv.hi) {
                Verdict::Pass
            } else if touches(ok, iv.lo, iv.hi) {
                if let Some(m) = seeds_to_decide(ok, &iv) {
                    out.ours
                        .push_str(&format!("; ≈ {m} seeds would decide if the spread holds"));
                }
                Verdict::Unresolved
            } else {
                Verdict::Fail
            }
        }
        // No predicate to judge an interval with: every seed must pass.
        (_, None) if same.len() == n && same.iter().all(|x| x.verdict == Verdict::Pass) => {
            Verdict::Pass
        }
        _ => Verdict::Fail,
    };
    out.interval = Some(iv);
    out
}

/// Whether some point of [`lo`, `hi`] meets `ok`. Thresholds are bounds
/// or ranges, so a fine grid (ends included) finds one where one exists
/// wider than a 1/512 of the interval.
fn touches(ok: fn(f64) -> bool, lo: f64, hi: f64) -> bool {
    const STEPS: u32 = 512;
    (0..=STEPS).any(|i| ok(lo + (hi - lo) * f64::from(i) / f64::from(STEPS)))
}

/// Where `ok` stops holding between `inside` (accepted) and `outside`
/// (rejected): bisection, 60 halvings.
fn edge(ok: fn(f64) -> bool, mut inside: f64, mut outside: f64) -> f64 {
    for _ in 0..60 {
        let mid = 0.5 * (inside + outside);
        if ok(mid) {
            inside = mid;
        } else {
            outside = mid;
        }
    }
    0.5 * (inside + outside)
}

/// An unresolved row whose mean meets the threshold: the fewest seeds m
/// whose interval, with this spread, would lie inside the threshold
/// (t(0.975, m − 1) · sd / √m ≤ the mean's distance to the nearest edge).
/// `None` when the mean itself misses the threshold, or beyond 1 000.
fn seeds_to_decide(ok: fn(f64) -> bool, iv: &Interval) -> Option<usize> {
    if !ok(iv.mean) || iv.std <= 0.0 {
        return None;
    }
    let mut margin = f64::INFINITY;
    if !ok(iv.lo) {
        margin = margin.min(iv.mean - edge(ok, iv.mean, iv.lo));
    }
    if !ok(iv.hi) {
        margin = margin.min(edge(ok, iv.mean, iv.hi) - iv.mean);
    }
    (iv.n.max(2)..=1000).find(|&m| {
        super::interval::t_quantile_two_sided(0.95, (m - 1) as u32) * iv.std / (m as f64).sqrt()
            <= margin
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(value: Option<f64>, verdict: Verdict) -> Check {
        Check {
            experiment: "E9",
            metric: "m".into(),
            published: "≥ 10".into(),
            ours: String::new(),
            value,
            unit: "Mbit/s",
            verdict,
            interval: None,
            accept: Some(|v| v >= 10.0),
            because: None,
        }
    }

    #[test]
    fn a_check_passes_only_when_its_whole_interval_does() {
        // Every seed passes (all ≥ 10) but the interval reaches below 10.
        let seeds = |vals: &[f64]| -> Vec<Vec<Check>> {
            vals.iter()
                .map(|v| vec![check(Some(*v), Verdict::Pass)])
                .collect()
        };
        let m = merge(&seeds(&[10.2, 14.0, 10.1]));
        let iv = m[0].interval.clone().unwrap();
        assert!(iv.lo < 10.0, "{iv:?}");
        assert_eq!(m[0].verdict, Verdict::Unresolved, "{:?}", m[0]);
        // Every seed below 10, interval too: a clear failure.
        let m = merge(&seeds(&[8.0, 8.5, 9.0]));
        assert_eq!(m[0].verdict, Verdict::Fail, "{:?}", m[0]);
        let m = merge(&seeds(&[12.0, 12.5, 13.0]));
        assert_eq!(m[0].verdict, Verdict::Pass, "{:?}", m[0]);
        assert!(
            m[0].ours.starts_with("12.5 Mbit/s [11.3, 13.7]"),
            "{}",
            m[0].ours
        );
        // A seed whose run failed (no value, verdict fail) fails the row.
        let mut s = seeds(&[12.0, 12.5, 13.0]);
        s[1][0] = check(None, Verdict::Fail);
        assert_eq!(merge(&s)[0].verdict, Verdict::Fail);
    }

    #[test]
    fn an_unresolved_row_says_how_many_seeds_would_decide() {
        // Mean 11.43, sd 2.22 (n = 3): margin 1.43 to the bound 10, so
        // t(0.975, m−1)·2.22/√m ≤ 1.43 first at m = 12 (t = 2.201:
        // 2.201·2.22/3.464 = 1.41; m = 11: 2.228·2.22/3.317 = 1.49).
        let seeds: Vec<Vec<Check>> = [10.2, 14.0, 10.1]
            .iter()
            .map(|v| vec![check(Some(*v), Verdict::Pass)])
            .collect();
        let m = merge(&seeds);
        assert_eq!(m[0].verdict, Verdict::Unresolved);
        assert!(
            m[0].ours
                .ends_with("≈ 12 seeds would decide if the spread holds"),
            "{}",
            m[0].ours
        );
        // A range (0.7..=1.3, as E4's ratio): the nearer edge counts.
        let iv = Interval::of(&[0.9, 1.5, 1.0, 0.7, 1.2]).unwrap();
        let needed = seeds_to_decide(|v| (0.7..=1.3).contains(&v), &iv).unwrap();
        let margin = 1.3 - iv.mean;
        let t = super::super::interval::t_quantile_two_sided(0.95, (needed - 1) as u32);
        assert!(t * iv.std / (needed as f64).sqrt() <= margin);
        let t = super::super::interval::t_quantile_two_sided(0.95, (needed - 2) as u32);
        assert!(t * iv.std / ((needed - 1) as f64).sqrt() > margin);
        // A mean outside the threshold: no number of seeds would pass it.
        let iv = Interval::of(&[1.2, 1.6, 1.4]).unwrap();
        assert_eq!(seeds_to_decide(|v| (0.7..=1.3).contains(&v), &iv), None);
    }

    #[test]
    fn free_starts_move_within_their_range_and_only_after_the_first_seed() {
        let mut s = Scenario::from_toml_str(
            "name = \"t\"\nduration_s = 5\nseed = 7\n\
             [[path]]\nname = \"p1\"\ndelay_ms = 5\nrate_mbps = 10\n\
             [[flow]]\nname = \"a\"\nvia = \"p1\"\nrate_mbps = 1\nstart_s = 1\nstart_free_ms = 300\n\
             [[flow]]\nname = \"b\"\nvia = \"p1\"\nrate_mbps = 1\nstart_s = 1\n",
        )
        .expect("scenario");
        let base = s.clone();
        perturb(&mut s, 0);
        assert_eq!(s, base);
        let mut moved = Vec::new();
        for k in 1..20 {
            let mut p = base.clone();
            perturb(&mut p, k);
            assert_eq!(p.seed, 7 + k);
            assert_eq!(p.flow[1].start_s, 1.0, "an unmarked start moved");
            assert!((0.7..=1.3).contains(&p.flow[0].start_s));
            moved.push(p.flow[0].start_s);
        }
        // Both directions occur and the draws differ.
        assert!(moved.iter().any(|t| *t < 0.95) && moved.iter().any(|t| *t > 1.05));
    }
}
