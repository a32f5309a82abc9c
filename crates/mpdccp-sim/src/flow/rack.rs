//! RACK: time-based loss detection of RFC 8985 §6, the state a TCP sender
//! keeps beside its scoreboard (segment-granular: a segment `seq` ends at
//! `seq + 1`).
//!
//! A segment is lost once a segment sent after it has been delivered and
//! `RACK.rtt + reo_wnd` has passed since it was sent (§6.2 Step 5). The
//! reordering window starts at `min_rtt / 4` once reordering has been seen
//! and grows by that much for every round trip in which a DSACK arrived
//! (§6.2 Step 4, the receiver must send DSACK: `TcpReceiver::set_dsack`);
//! it decays back after 16 recoveries without one. Until reordering is seen
//! it is zero while in recovery or once DupThresh segments are SACKed (the
//! RFC 6675 trigger, which RACK keeps for fast repair of a burst loss).

use std::time::Duration;

use mpdccp_proto::Instant;

/// RFC 6675 DupThresh, which RACK keeps in its reordering-window rule.
pub const DUPTHRESH: u64 = 3;

/// §6.2 Step 4: recoveries a grown reordering window persists without DSACK.
const REO_WND_PERSIST: u32 = 16;

/// The RACK state of one sender.
#[derive(Clone, Debug)]
pub struct Rack {
    /// RACK.xmit_ts, RACK.end_seq: the most recently sent segment that has
    /// been delivered (cumulatively or selectively).
    xmit_ts: Option<Instant>,
    end_seq: u64,
    /// RACK.rtt: the RTT of that segment's delivery.
    rtt: Duration,
    /// RACK.fack: the highest end sequence delivered.
    fack: u64,
    /// RACK.reordering_seen.
    pub reordering_seen: bool,
    /// RACK.reo_wnd_mult, RACK.reo_wnd_persist, RACK.dsack_round.
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    dsack_round: Option<u64>,
    /// The current reordering window (RACK.reo_wnd).
    pub reo_wnd: Duration,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            xmit_ts: None,
            end_seq: 0,
            rtt: Duration::ZERO,
            fack: 0,
            reordering_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            reo_wnd: Duration::ZERO,
        }
    }
}

/// What the sender knows when it updates the reordering window.
#[derive(Clone, Copy, Debug)]
pub struct ReoWndInput {
    /// This ack carried a DSACK block.
    pub dsack: bool,
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// This ack ended a loss recovery.
    pub exiting_recovery: bool,
    pub in_recovery: bool,
    /// Segments currently SACKed above `snd_una`.
    pub sacked: u64,
    pub min_rtt: Duration,
    pub srtt: Duration,
}

/// §6.2 RACK_sent_after: `(t1, seq1)` was sent after `(t2, seq2)`.
fn sent_after(t1: Instant, seq1: u64, t2: Instant, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    /// §6.2 Steps 2 and 3 for one newly delivered segment; call in
    /// ascending sequence order within an ack. `echo` is the ack's echoed
    /// send time (TSecr), which tells which transmission of a retransmitted
    /// segment was delivered.
    pub fn on_delivered(
        &mut self,
        now: Instant,
        seq: u64,
        xmit_ts: Instant,
        retransmitted: bool,
        echo: Instant,
        min_rtt: Option<Duration>,
    ) {
        let end_seq = seq + 1;
        // Step 3: delivered below the forward-most delivery and never
        // retransmitted, so it was reordered, not lost.
        if end_seq > self.fack {
            self.fack = end_seq;
        } else if !retransmitted {
            self.reordering_seen = true;
        }
        // Step 2: an ambiguous retransmission gives no RACK sample.
        let rtt = now.saturating_duration_since(xmit_ts);
        if retransmitted && (echo < xmit_ts || min_rtt.is_some_and(|m| rtt < m)) {
            return;
        }
        if self
            .xmit_ts
            .is_none_or(|t| sent_after(xmit_ts, end_seq, t, self.end_seq))
        {
            self.rtt = rtt;
            self.xmit_ts = Some(xmit_ts);
            self.end_seq = end_seq;
        }
    }

    /// §6.2 Step 4: RACK_update_reo_wnd.
    pub fn update_reo_wnd(&mut self, i: &ReoWndInput) {
        if i.dsack && self.dsack_round.is_none_or(|r| i.snd_una >= r) {
            // At most one increase per round trip.
            self.dsack_round = Some(i.snd_nxt);
            self.reo_wnd_mult += 1;
            self.reo_wnd_persist = REO_WND_PERSIST;
        } else if i.exiting_recovery {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
        self.reo_wnd = if !self.reordering_seen && (i.in_recovery || i.sacked >= DUPTHRESH) {
            Duration::ZERO
        } else {
            (i.min_rtt / 4 * self.reo_wnd_mult).min(i.srtt)
        };
    }

    /// §6.2 Step 5 for one outstanding segment: `Ok(())` if it is lost now,
    /// `Err(Some(t))` if it will be at `now + t` unless delivered first,
    /// `Err(None)` if no segment sent after it has been delivered.
    pub fn check(&self, now: Instant, seq: u64, xmit_ts: Instant) -> Result<(), Option<Duration>> {
        let Some(rack_ts) = self.xmit_ts else {
            return Err(None);
        };
        if !sent_after(rack_ts, self.end_seq, xmit_ts, seq + 1) {
            return Err(None);
        }
        let deadline = xmit_ts + self.rtt + self.reo_wnd;
        if deadline <= now {
            Ok(())
        } else {
            Err(Some(deadline - now))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn input(dsack: bool, snd_una: u64) -> ReoWndInput {
        ReoWndInput {
            dsack,
            snd_una,
            snd_nxt: 100,
            exiting_recovery: false,
            in_recovery: false,
            sacked: 1,
            min_rtt: Duration::from_millis(40),
            srtt: Duration::from_millis(60),
        }
    }

    /// Segment 0 sent at 0 ms, 1 at 1 ms; 1 is delivered at 41 ms: 0 is
    /// lost at 40 ms + reo_wnd after it was sent, not before.
    #[test]
    fn loss_waits_for_rtt_plus_reordering_window() {
        let mut r = Rack::default();
        r.on_delivered(ms(41), 1, ms(1), false, ms(1), None);
        r.update_reo_wnd(&input(false, 0));
        // No reordering seen, one segment SACKed: min_rtt / 4.
        assert_eq!(r.reo_wnd, Duration::from_millis(10));
        assert_eq!(
            r.check(ms(41), 0, ms(0)),
            Err(Some(Duration::from_millis(9)))
        );
        assert_eq!(r.check(ms(50), 0, ms(0)), Ok(()));
        // A segment sent after the RACK segment is never judged.
        assert_eq!(r.check(ms(50), 2, ms(2)), Err(None));
    }

    /// A late original seen below the forward-most delivery marks
    /// reordering; DSACKs grow the window once per round trip.
    #[test]
    fn reordering_and_dsack_widen_the_window() {
        let mut r = Rack::default();
        r.on_delivered(ms(41), 5, ms(5), false, ms(5), None);
        let mut i = input(false, 0);
        i.sacked = DUPTHRESH;
        r.update_reo_wnd(&i);
        assert_eq!(r.reo_wnd, Duration::ZERO);
        r.on_delivered(ms(42), 3, ms(3), false, ms(3), None);
        assert!(r.reordering_seen);
        r.update_reo_wnd(&i);
        assert_eq!(r.reo_wnd, Duration::from_millis(10));
        r.update_reo_wnd(&input(true, 0));
        assert_eq!(r.reo_wnd, Duration::from_millis(20));
        // Same round: no second increase.
        r.update_reo_wnd(&input(true, 50));
        assert_eq!(r.reo_wnd, Duration::from_millis(20));
        r.update_reo_wnd(&input(true, 100));
        assert_eq!(r.reo_wnd, Duration::from_millis(30));
        // Capped at SRTT.
        for k in 0..5 {
            r.update_reo_wnd(&input(true, 100 * (k + 2)));
        }
        assert_eq!(r.reo_wnd, Duration::from_millis(60));
    }
}
