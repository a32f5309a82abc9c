//! When a client gives up on its connection although the core still holds
//! it, and starts a fresh handshake:
//! * nothing at all came back on any path for [`DEAD_AFTER`] while the
//!   client went on sending ([`SENT_INTO_SILENCE`] datagrams or more), or
//! * the established connection has had no Active path (every subflow
//!   failing after unanswered retransmissions, closed, or still joining)
//!   for [`DEAD_AFTER`].
//!
//! The server most likely lost the connection (a crash and restart, a
//! forged close it believed); in authenticated mode it drops joins to a
//! connection it does not know without an answer, so rejoining would only
//! time out. A fresh handshake is one round trip and authenticated, and on
//! the server it supersedes whatever is left of the old session (one
//! session per peer).
//!
//! Only silence triggers it: no packet an attacker can send makes a path
//! silent, so an off-path attacker cannot force reconnections (one that
//! drops every packet can deny service anyway).

use std::time::Duration;

use mpdccp_proto::Instant;

/// How long the server may stay silent (or the connection without an
/// Active path) before the client starts over. Longer than any access
/// link's round trip that still carries a tunnel, short enough that a
/// gateway restart costs its clients about a second.
pub const DEAD_AFTER: Duration = Duration::from_secs(1);

/// Silence counts only after this many of the connection's largest
/// smoothed RTT, when that is longer than [`DEAD_AFTER`]: a server that
/// took two seconds to answer the handshake (a host starved of CPU, a
/// satellite hop) is slow, not gone. Four RTTs is RFC 6298's RTO margin
/// (srtt + 4 · rttvar) with rttvar at its worst, srtt.
pub const DEAD_AFTER_RTTS: u32 = 4;

/// Datagrams sent since the last one received before silence counts: a
/// quiet tunnel (nothing to answer) is not a dead one.
pub const SENT_INTO_SILENCE: u64 = 3;

/// Tracks the connection's last sign of life.
#[derive(Debug, Default)]
pub struct DeadPeer {
    no_active_since: Option<Instant>,
    /// (received total, when it last grew, sent total then).
    last_rx: Option<(u64, Instant, u64)>,
}

/// What the connection's counters and paths say now.
#[derive(Clone, Copy, Debug)]
pub struct Pulse {
    /// The connection completed its handshake.
    pub established: bool,
    /// Some path is Active.
    pub any_active: bool,
    /// Datagrams received and sent on the connection so far.
    pub rx: u64,
    pub tx: u64,
    /// The smallest smoothed RTT of the connection's Active paths, if any.
    pub srtt: Option<Duration>,
}

impl DeadPeer {
    /// True once the connection is to be given up (the caller reconnects,
    /// then calls [`DeadPeer::reset`]).
    pub fn check(&mut self, now: Instant, p: Pulse) -> bool {
        if !p.established {
            self.reset();
            return false;
        }
        let dead_after = p
            .srtt
            .map_or(DEAD_AFTER, |r| DEAD_AFTER.max(r * DEAD_AFTER_RTTS));
        let quiet = |since: Instant| now.saturating_duration_since(since) >= dead_after;
        let no_active = match (p.any_active, self.no_active_since) {
            (true, _) => {
                self.no_active_since = None;
                false
            }
            (false, Some(since)) => quiet(since),
            (false, None) => {
                self.no_active_since = Some(now);
                false
            }
        };
        let silent = match self.last_rx {
            Some((rx, since, tx_then)) if rx == p.rx => {
                quiet(since) && p.tx >= tx_then + SENT_INTO_SILENCE
            }
            _ => {
                self.last_rx = Some((p.rx, now, p.tx));
                false
            }
        };
        no_active || silent
    }

    /// A new connection: nothing is known about it yet.
    pub fn reset(&mut self) {
        *self = DeadPeer::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulse(established: bool, any_active: bool, rx: u64, tx: u64) -> Pulse {
        Pulse {
            established,
            any_active,
            rx,
            tx,
            srtt: None,
        }
    }

    #[test]
    fn dead_after_a_second_without_an_active_path() {
        let t = Instant::from_millis;
        let mut d = DeadPeer::default();
        // Not established (still connecting): never dead here.
        assert!(!d.check(t(0), pulse(false, false, 0, 0)));
        assert!(!d.check(t(5_000), pulse(false, false, 0, 9)));
        // Established, every path failing from 6.0 s (packets still
        // arrive, so only the Active rule can fire).
        assert!(!d.check(t(6_000), pulse(true, false, 10, 10)));
        assert!(!d.check(t(6_999), pulse(true, false, 11, 10)));
        // A path is Active again: the clock restarts.
        assert!(!d.check(t(6_999), pulse(true, true, 12, 10)));
        assert!(!d.check(t(7_500), pulse(true, false, 13, 10)));
        assert!(!d.check(t(8_499), pulse(true, false, 14, 10)));
        assert!(d.check(t(8_500), pulse(true, false, 15, 10)));
        d.reset();
        assert!(!d.check(t(8_600), pulse(true, false, 0, 0)));
    }

    #[test]
    fn dead_after_a_second_of_sending_into_silence_not_of_quiet() {
        let t = Instant::from_millis;
        let mut d = DeadPeer::default();
        assert!(!d.check(t(0), pulse(true, true, 100, 100)));
        // Nothing sent, nothing received for 5 s: a quiet tunnel.
        assert!(!d.check(t(5_000), pulse(true, true, 100, 102)));
        // Three more sent after the last receipt, still silent at 1 s.
        assert!(d.check(t(5_000), pulse(true, true, 100, 103)));
        // Anything received restarts the clock.
        let mut d = DeadPeer::default();
        assert!(!d.check(t(0), pulse(true, true, 100, 100)));
        assert!(!d.check(t(900), pulse(true, true, 101, 150)));
        assert!(!d.check(t(1_800), pulse(true, true, 101, 200)));
        assert!(d.check(t(1_900), pulse(true, true, 101, 200)));
    }

    #[test]
    fn a_slow_server_gets_four_of_its_round_trips_before_silence_counts() {
        let t = Instant::from_millis;
        let slow = |rx, tx| Pulse {
            srtt: Some(Duration::from_millis(800)),
            ..pulse(true, true, rx, tx)
        };
        let mut d = DeadPeer::default();
        assert!(!d.check(t(0), slow(100, 100)));
        // 1 s of sending into silence is not enough at an 800 ms RTT …
        assert!(!d.check(t(1_000), slow(100, 110)));
        assert!(!d.check(t(3_199), slow(100, 120)));
        // … 4 × 800 ms is.
        assert!(d.check(t(3_200), slow(100, 120)));
        // A fast path keeps the one-second floor.
        let mut d = DeadPeer::default();
        let fast = |rx, tx| Pulse {
            srtt: Some(Duration::from_millis(20)),
            ..pulse(true, true, rx, tx)
        };
        assert!(!d.check(t(0), fast(100, 100)));
        assert!(!d.check(t(999), fast(100, 110)));
        assert!(d.check(t(1_000), fast(100, 110)));
    }
}
