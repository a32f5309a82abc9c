//! Loss over a time window: the fraction of a path's data packets declared
//! lost among those sent over about the last [`LOSS_WINDOW`], from the
//! path's cumulative counters.
//!
//! The per-ack smoothed `loss_rate` forgets a loss within about 64 acked
//! packets, so a scrape reads 0 or 1e-108; an operator compares
//! this ratio with a link's drop rate. Deterministic: counters are
//! snapshotted once per whole second of `now` (the first refresh in it),
//! and the ratio is the difference between the current counters and the
//! oldest snapshot still inside the window.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;

/// The window of `LossWindow::ratio`.
pub const LOSS_WINDOW: Duration = Duration::from_secs(10);

/// One snapshot per second at most: (second of `now`, sent, lost).
#[derive(Clone, Debug, Default)]
pub struct LossWindow {
    snaps: VecDeque<(u64, u64, u64)>,
    /// The `now` of the last `note`: a note at the same instant finds its
    /// second's snapshot taken and the old ones already forgotten.
    last_note: Option<Instant>,
}

/// The ratio and the counts it came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowedLoss {
    /// Data packets sent within the window.
    pub sent_pkts: u64,
    /// Data packets declared lost within the window (some may have been
    /// sent just before it).
    pub lost_pkts: u64,
    /// lost / sent, capped at 1; `None` when nothing was sent.
    pub ratio: Option<f64>,
}

impl LossWindow {
    /// Records the cumulative counters at `now` if no snapshot of this
    /// second exists, and forgets snapshots older than the window.
    pub fn note(&mut self, now: Instant, sent_total: u64, lost_total: u64) {
        // Every scheduling turn notes each path: most at an instant noted already.
        if self.last_note == Some(now) {
            return;
        }
        self.last_note = Some(now);
        let sec = now.as_secs_f64() as u64;
        // Most of the rest are in a second noted already. The newest
        // snapshot is of the latest second noted (only a later second
        // pushes one, and forgetting keeps the newest), and that note left
        // every snapshot after the first inside its window, so a note in
        // that second or an earlier one would push nothing and forget
        // nothing.
        if self.snaps.back().is_some_and(|s| s.0 >= sec) {
            return;
        }
        self.snaps.push_back((sec, sent_total, lost_total));
        let oldest = sec.saturating_sub(LOSS_WINDOW.as_secs());
        // Keep one snapshot at or before the window's start as its base.
        while self.snaps.len() > 1 && self.snaps[1].0 <= oldest {
            self.snaps.pop_front();
        }
    }

    /// Loss over the window ending at `now` for the current counters.
    pub fn ratio(&self, now: Instant, sent_total: u64, lost_total: u64) -> WindowedLoss {
        let sec = now.as_secs_f64() as u64;
        let start = sec.saturating_sub(LOSS_WINDOW.as_secs());
        // The newest snapshot at or before the window's start, else the
        // oldest one (a path younger than the window).
        let base = self
            .snaps
            .iter()
            .rev()
            .find(|s| s.0 <= start)
            .or(self.snaps.front())
            .copied()
            .unwrap_or((sec, sent_total, lost_total));
        let sent = sent_total.saturating_sub(base.1);
        let lost = lost_total.saturating_sub(base.2);
        WindowedLoss {
            sent_pkts: sent,
            lost_pkts: lost,
            ratio: (sent > 0).then(|| (lost as f64 / sent as f64).min(1.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::time::Instant;

    use super::LossWindow;

    fn at(s: f64) -> Instant {
        Instant::from_secs_f64(s)
    }

    /// 100 packets a second, half lost for 10 s and then every 20th (5 %):
    /// at 30 s the window holds the last 10–11 s and reads 5 %; the lossy
    /// early seconds are gone.
    #[test]
    fn window_reads_the_recent_rate_only() {
        let mut w = LossWindow::default();
        let (mut sent, mut lost) = (0u64, 0u64);
        for ms in 0..30_000u64 {
            if ms % 10 == 0 {
                sent += 1;
                // The first 10 s lose half; after that every 20th.
                let every = if ms < 10_000 { 2 } else { 20 };
                if sent % every == 0 {
                    lost += 1;
                }
            }
            w.note(at(ms as f64 / 1e3), sent, lost);
        }
        let r = w.ratio(at(29.999), sent, lost);
        // Base: the snapshot of second 19 (sent 1901): 1099 sent since,
        // of which the 55 multiples of 20 in 1902..=3000 were lost.
        assert_eq!((r.sent_pkts, r.lost_pkts), (1099, 55), "{r:?}");
        assert!((r.ratio.unwrap() - 0.05).abs() < 0.001, "{r:?}");
        assert!(w.snaps.len() <= 12, "bounded: {}", w.snaps.len());
    }

    /// A second note at the same instant changes nothing, whatever the
    /// counters say (the first one took the snapshot of that second).
    #[test]
    fn a_note_at_a_noted_instant_changes_nothing() {
        let (mut once, mut twice) = (LossWindow::default(), LossWindow::default());
        for ms in (0..25_000u64).step_by(7) {
            let t = at(ms as f64 / 1e3);
            once.note(t, ms, ms / 50);
            twice.note(t, ms, ms / 50);
            twice.note(t, ms + 3, ms / 50 + 1);
        }
        assert_eq!(once.snaps, twice.snaps);
    }

    /// The note as first written (no shortcut): push a second's first
    /// snapshot, then forget what the window left behind.
    fn note_in_full(w: &mut LossWindow, now: Instant, sent: u64, lost: u64) {
        let sec = now.as_secs_f64() as u64;
        if w.snaps.back().is_none_or(|s| s.0 < sec) {
            w.snaps.push_back((sec, sent, lost));
        }
        let oldest = sec.saturating_sub(super::LOSS_WINDOW.as_secs());
        while w.snaps.len() > 1 && w.snaps[1].0 <= oldest {
            w.snaps.pop_front();
        }
    }

    /// Notes at irregular instants, some repeated and some going back in
    /// time, with counters changing between them: the shortcut for a
    /// noted second keeps exactly the snapshots the full note keeps.
    #[test]
    fn a_note_in_a_noted_second_keeps_what_the_full_note_keeps() {
        let (mut fast, mut full) = (LossWindow::default(), LossWindow::default());
        let mut ms = 0u64;
        for k in 0..20_000u64 {
            // Forward in steps of 0..=2.3 s, every 7th step 3 s back.
            ms = if k % 7 == 6 {
                ms.saturating_sub(3_000)
            } else {
                ms + (k * 37 % 2_300)
            };
            let t = at(ms as f64 / 1e3);
            fast.note(t, k, k / 9);
            note_in_full(&mut full, t, k, k / 9);
            assert_eq!(fast.snaps, full.snaps, "step {k} at {ms} ms");
        }
        assert!(full.snaps.len() > 5, "the window held several seconds");
    }

    #[test]
    fn nothing_sent_is_no_ratio() {
        let w = LossWindow::default();
        assert_eq!(w.ratio(at(5.0), 0, 0).ratio, None);
    }
}
