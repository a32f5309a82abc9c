//! A scorecard against an earlier one (`--baseline`): which cells gained or
//! lost, so a change to a controller or scheduler shows its effect cell by
//! cell, and a CI run can fail on a regression.

use std::fmt::Write as _;

use serde::Serialize;

use super::score::Scorecard;

/// Ratio-to-best changes smaller than this are noise, not a change.
pub const TOLERANCE: f64 = 0.02;

/// One cell present in both scorecards.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Delta {
    pub mix: String,
    pub inner: String,
    pub cc: String,
    pub goodput_before: Option<f64>,
    pub goodput_now: Option<f64>,
    pub ratio_best_before: Option<f64>,
    pub ratio_best_now: Option<f64>,
    pub pass_before: bool,
    pub pass_now: bool,
}

impl Delta {
    /// Change of the ratio to the best single path (a missing value counts
    /// as 0).
    pub fn change(&self) -> f64 {
        self.ratio_best_now.unwrap_or(0.0) - self.ratio_best_before.unwrap_or(0.0)
    }

    /// Worse by more than [`TOLERANCE`], or a passing cell now failing.
    pub fn regressed(&self) -> bool {
        self.change() < -TOLERANCE || (self.pass_before && !self.pass_now)
    }

    /// Better by more than [`TOLERANCE`], or a failing cell now passing.
    pub fn improved(&self) -> bool {
        !self.regressed() && (self.change() > TOLERANCE || (!self.pass_before && self.pass_now))
    }
}

/// The cells of `now` that `before` also has, in `now`'s order.
pub fn compare(before: &Scorecard, now: &Scorecard) -> Vec<Delta> {
    now.cells
        .iter()
        .filter_map(|c| {
            let b = before
                .cells
                .iter()
                .find(|b| b.mix == c.mix && b.inner == c.inner && b.cc == c.cc)?;
            Some(Delta {
                mix: c.mix.clone(),
                inner: c.inner.clone(),
                cc: c.cc.clone(),
                goodput_before: b.goodput_mbps,
                goodput_now: c.goodput_mbps,
                ratio_best_before: b.ratio_best,
                ratio_best_now: c.ratio_best,
                pass_before: b.pass,
                pass_now: c.pass,
            })
        })
        .collect()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A Markdown section: counts, then every cell that changed.
pub fn markdown(deltas: &[Delta], baseline: &str) -> String {
    let regressed = deltas.iter().filter(|d| d.regressed()).count();
    let improved = deltas.iter().filter(|d| d.improved()).count();
    let mut s = format!(
        "## Against the baseline\n\nBaseline: `{baseline}`. Of {} cells in both, {improved} \
         improved and {regressed} regressed (ratio to the best single path changed by more \
         than {TOLERANCE}, or the cell's pass/fail flipped).\n\n",
        deltas.len()
    );
    let changed: Vec<&Delta> = deltas
        .iter()
        .filter(|d| d.regressed() || d.improved())
        .collect();
    if changed.is_empty() {
        return s;
    }
    s.push_str("| cell | goodput before → now (Mbit/s) | ratio to best before → now | pass before → now |\n|---|---|---|---|\n");
    for d in changed {
        let _ = writeln!(
            s,
            "| {}/{}/{} | {} → {} | {} → {} ({:+.2}) | {} → {} {} |",
            d.mix,
            d.inner,
            d.cc,
            opt(d.goodput_before, 1),
            opt(d.goodput_now, 1),
            opt(d.ratio_best_before, 2),
            opt(d.ratio_best_now, 2),
            d.change(),
            d.pass_before,
            d.pass_now,
            if d.regressed() { "⬇" } else { "⬆" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(before: f64, now: f64, pass_before: bool, pass_now: bool) -> Delta {
        Delta {
            mix: "equal".into(),
            inner: "udp".into(),
            cc: "ccid2".into(),
            goodput_before: None,
            goodput_now: None,
            ratio_best_before: Some(before),
            ratio_best_now: Some(now),
            pass_before,
            pass_now,
        }
    }

    #[test]
    fn small_changes_are_noise_and_flips_always_count() {
        assert!(!d(0.50, 0.51, false, false).regressed());
        assert!(!d(0.50, 0.51, false, false).improved());
        assert!(d(0.50, 0.45, false, false).regressed());
        assert!(d(0.50, 0.60, false, false).improved());
        // 0.951 → 0.949 is within the tolerance but crosses the goal.
        assert!(d(0.951, 0.949, true, false).regressed());
        assert!(d(0.949, 0.951, false, true).improved());
    }
}
