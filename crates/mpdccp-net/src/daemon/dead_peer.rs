//! When a client gives up on its connection although the core still holds
//! it, and starts a fresh handshake:
//! * nothing at all came back on any path for [`DEAD_AFTER`] while the
//!   client went on sending ([`SENT_INTO_SILENCE`] datagrams or more), or
//! * the established connection has had no Active path (every subflow
//!   failing after unanswered retransmissions, closed, or still joining)
//!   for [`DEAD_AFTER`].
//!
//! A client whose traffic is all downstream (it answers what it receives)
//! sends nothing once the server is gone. So when a connection that was
//! receiving data goes quiet for [`PROBE_AFTER`], the client probes it
//! (a Sync on every path, which the server answers with a SyncAck, RFC
//! 4340 §7.5.4), again every [`PROBE_EVERY`] while nothing comes back: a
//! dead server is then noticed [`DEAD_AFTER`] after its last packet, a
//! live but idle one answers the first probe, and is not probed again
//! until data has flowed again.
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

/// A connection that was receiving data and has received nothing for
/// this long (or [`PROBE_AFTER_RTTS`] smoothed RTTs, if longer) is
/// probed: longer than the gaps of a steady stream, and early enough
/// that three probes go out before [`DEAD_AFTER`].
pub const PROBE_AFTER: Duration = Duration::from_millis(250);

/// How long a silence answered only by our own probes must last before
/// the server counts as gone (at least [`DEAD_AFTER`] and its RTT rule).
/// Why longer than `DEAD_AFTER`: a live gateway starved of CPU stalls;
/// measured in net_fleet's thirty-client test at load 6.7, the clients
/// moved off a crashed host raised the survivors' round trips to ~1.2 s,
/// and their own clients, probing that silence, took them for dead after
/// 1 s and moved too (echo gaps of 7–10 s). Own data sent into the
/// silence keeps the 1 s rule, as before the probes.
pub const PROBED_DEAD_AFTER: Duration = Duration::from_secs(2);

/// See [`PROBE_AFTER`]: a probe's answer takes one round trip.
pub const PROBE_AFTER_RTTS: u32 = 3;

/// The shortest time between two probes of the connection: at most four
/// Syncs a second on each path, and only while it stays silent.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);

/// What the client is to do with its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Alive,
    /// Probe every path now (`Connection::probe_paths`).
    Probe,
    /// Give the connection up and start over.
    Dead,
}

/// Tracks the connection's last sign of life.
#[derive(Debug, Default)]
pub struct DeadPeer {
    no_active_since: Option<Instant>,
    /// (received total, when it last grew, sent total then, Syncs sent
    /// then).
    last_rx: Option<(u64, Instant, u64, u64)>,
    /// Data packets received so far, as last seen.
    rx_data: u64,
    /// Data arrived since the last answered probe: a quiet spell now is
    /// worth probing.
    receiving: bool,
    /// The last probe of the current quiet spell.
    probed_at: Option<Instant>,
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
    /// Syncs sent so far (the probes among `tx`).
    pub syncs: u64,
    /// Data packets received so far (the rest are acks and probes).
    pub rx_data: u64,
    /// The smallest smoothed RTT of the connection's Active paths, if any.
    pub srtt: Option<Duration>,
}

impl DeadPeer {
    /// Whether to probe the connection or give it up now (the caller
    /// reconnects, then calls [`DeadPeer::reset`]).
    pub fn check(&mut self, now: Instant, p: Pulse) -> Verdict {
        if !p.established {
            self.reset();
            return Verdict::Alive;
        }
        let rtts = |k: u32, floor: Duration| p.srtt.map_or(floor, |r| floor.max(r * k));
        let dead_after = rtts(DEAD_AFTER_RTTS, DEAD_AFTER);
        let quiet = |since: Instant, d: Duration| now.saturating_duration_since(since) >= d;
        let no_active = match (p.any_active, self.no_active_since) {
            (true, _) => {
                self.no_active_since = None;
                false
            }
            (false, Some(since)) => quiet(since, dead_after),
            (false, None) => {
                self.no_active_since = Some(now);
                false
            }
        };
        let silent_since = match self.last_rx {
            Some((rx, since, tx_then, syncs_then)) if rx == p.rx => {
                Some((since, tx_then, syncs_then))
            }
            _ => {
                self.heard(now, p);
                None
            }
        };
        let Some((since, tx_then, syncs_then)) = silent_since else {
            return if no_active {
                Verdict::Dead
            } else {
                Verdict::Alive
            };
        };
        let sent = p.tx.saturating_sub(tx_then);
        let probes = p.syncs.saturating_sub(syncs_then).min(sent);
        let own_into_silence = quiet(since, dead_after) && sent - probes >= SENT_INTO_SILENCE;
        let probed_into_silence =
            quiet(since, dead_after.max(PROBED_DEAD_AFTER)) && sent >= SENT_INTO_SILENCE;
        if no_active || own_into_silence || probed_into_silence {
            return Verdict::Dead;
        }
        let probe_due = self.receiving
            && quiet(since, rtts(PROBE_AFTER_RTTS, PROBE_AFTER))
            && self.probed_at.is_none_or(|t| quiet(t, PROBE_EVERY));
        if probe_due {
            self.probed_at = Some(now);
            return Verdict::Probe;
        }
        Verdict::Alive
    }

    /// Something arrived: the quiet spell (if any) is over. Data means
    /// the connection is receiving; anything else after a probe is its
    /// answer, and an idle connection that answered is left alone.
    fn heard(&mut self, now: Instant, p: Pulse) {
        if p.rx_data != self.rx_data {
            self.receiving = true;
        } else if self.probed_at.is_some() {
            self.receiving = false;
        }
        self.rx_data = p.rx_data;
        self.probed_at = None;
        self.last_rx = Some((p.rx, now, p.tx, p.syncs));
    }

    /// Whether the client should look again every check interval even if
    /// nothing happens: a quiet spell may be due a probe or a verdict.
    pub fn watching(&self) -> bool {
        self.receiving || self.no_active_since.is_some()
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
            syncs: 0,
            rx_data: 0,
            srtt: None,
        }
    }

    fn dead(v: Verdict) -> bool {
        v == Verdict::Dead
    }

    #[test]
    fn dead_after_a_second_without_an_active_path() {
        let t = Instant::from_millis;
        let mut d = DeadPeer::default();
        let mut check = |ms, p| dead(d.check(t(ms), p));
        // Not established (still connecting): never dead here.
        assert!(!check(0, pulse(false, false, 0, 0)));
        assert!(!check(5_000, pulse(false, false, 0, 9)));
        // Established, every path failing from 6.0 s (packets still
        // arrive, so only the Active rule can fire).
        assert!(!check(6_000, pulse(true, false, 10, 10)));
        assert!(!check(6_999, pulse(true, false, 11, 10)));
        // A path is Active again: the clock restarts.
        assert!(!check(6_999, pulse(true, true, 12, 10)));
        assert!(!check(7_500, pulse(true, false, 13, 10)));
        assert!(!check(8_499, pulse(true, false, 14, 10)));
        assert!(check(8_500, pulse(true, false, 15, 10)));
        d.reset();
        assert!(!dead(d.check(t(8_600), pulse(true, false, 0, 0))));
    }

    #[test]
    fn dead_after_a_second_of_sending_into_silence_not_of_quiet() {
        let t = Instant::from_millis;
        let mut d = DeadPeer::default();
        assert!(!dead(d.check(t(0), pulse(true, true, 100, 100))));
        // Nothing sent, nothing received for 5 s: a quiet tunnel.
        assert_eq!(
            d.check(t(5_000), pulse(true, true, 100, 102)),
            Verdict::Alive
        );
        // Three more sent after the last receipt, still silent at 1 s.
        assert!(dead(d.check(t(5_000), pulse(true, true, 100, 103))));
        // Anything received restarts the clock.
        let mut d = DeadPeer::default();
        assert!(!dead(d.check(t(0), pulse(true, true, 100, 100))));
        assert!(!dead(d.check(t(900), pulse(true, true, 101, 150))));
        assert!(!dead(d.check(t(1_800), pulse(true, true, 101, 200))));
        assert!(dead(d.check(t(1_900), pulse(true, true, 101, 200))));
    }

    #[test]
    fn a_slow_server_gets_four_of_its_round_trips_before_silence_counts() {
        let t = Instant::from_millis;
        let slow = |rx, tx| Pulse {
            srtt: Some(Duration::from_millis(800)),
            ..pulse(true, true, rx, tx)
        };
        let mut d = DeadPeer::default();
        assert!(!dead(d.check(t(0), slow(100, 100))));
        // 1 s of sending into silence is not enough at an 800 ms RTT …
        assert!(!dead(d.check(t(1_000), slow(100, 110))));
        assert!(!dead(d.check(t(3_199), slow(100, 120))));
        // … 4 × 800 ms is.
        assert!(dead(d.check(t(3_200), slow(100, 120))));
        // A fast path keeps the one-second floor.
        let mut d = DeadPeer::default();
        let fast = |rx, tx| Pulse {
            srtt: Some(Duration::from_millis(20)),
            ..pulse(true, true, rx, tx)
        };
        assert!(!dead(d.check(t(0), fast(100, 100))));
        assert!(!dead(d.check(t(999), fast(100, 110))));
        assert!(dead(d.check(t(1_000), fast(100, 110))));
    }

    /// A client that only answers downstream traffic, checked every
    /// 100 ms like the daemon does: data arrives until `last_data_ms`,
    /// then the server answers nothing. Each probe sends one Sync per
    /// path. Returns the probes' times and when the server was declared
    /// dead.
    fn downstream_client_after_a_crash(paths: u64, srtt_ms: u64) -> (Vec<u64>, Option<u64>) {
        let mut d = DeadPeer::default();
        let (mut rx, mut tx, mut data, mut syncs) = (10, 10, 0, 0);
        let (mut probes, mut dead_at) = (Vec::new(), None);
        for ms in (0..=5_000).step_by(100) {
            if ms <= 1_000 {
                // An echo request downstream, its reply upstream.
                (rx, tx, data) = (rx + 1, tx + 1, data + 1);
            }
            let p = Pulse {
                rx_data: data,
                syncs,
                srtt: Some(Duration::from_millis(srtt_ms)),
                ..pulse(true, true, rx, tx)
            };
            match d.check(Instant::from_millis(ms), p) {
                Verdict::Alive => {}
                Verdict::Probe => {
                    probes.push(ms);
                    tx += paths;
                    syncs += paths;
                }
                Verdict::Dead => {
                    dead_at = Some(ms);
                    break;
                }
            }
        }
        (probes, dead_at)
    }

    #[test]
    fn a_receiving_client_probes_a_quiet_server_and_finds_it_dead_after_two_seconds() {
        // Last datagram at 1.0 s: probes from 0.25 s of quiet on, four a
        // second at most; dead PROBED_DEAD_AFTER after the last datagram,
        // whether the probes go out on two paths or one (a stall of a
        // live host shorter than that is outlived).
        for paths in [2, 1] {
            let (probes, dead_at) = downstream_client_after_a_crash(paths, 20);
            assert_eq!(dead_at, Some(3_000), "{paths} paths: probes {probes:?}");
            assert_eq!(probes[..3], [1_300, 1_600, 1_900], "{paths} paths");
            assert_eq!(probes.len(), 6, "{paths} paths: {probes:?}");
        }
        // A slow path waits three of its round trips before probing; its
        // four round trips (1.2 s) are below PROBED_DEAD_AFTER.
        let (probes, dead_at) = downstream_client_after_a_crash(2, 300);
        assert_eq!(probes[..2], [1_900, 2_200]);
        assert_eq!(dead_at, Some(3_000));
        // At an 800 ms RTT the four round trips rule (3.2 s).
        let (_, dead_at) = downstream_client_after_a_crash(2, 800);
        assert_eq!(dead_at, Some(4_200));
    }

    #[test]
    fn own_data_into_silence_keeps_the_one_second_rule_probes_alone_do_not() {
        let t = Instant::from_millis;
        let p = |tx, syncs| Pulse {
            syncs,
            ..pulse(true, true, 100, tx)
        };
        // Three of our own datagrams unanswered for 1 s: dead.
        let mut d = DeadPeer::default();
        assert!(!dead(d.check(t(0), p(100, 0))));
        assert!(dead(d.check(t(1_000), p(103, 0))));
        // Three Syncs (probes) unanswered for 1 s: not yet …
        let mut d = DeadPeer::default();
        assert!(!dead(d.check(t(0), p(100, 0))));
        assert!(!dead(d.check(t(1_000), p(103, 3))));
        assert!(!dead(d.check(t(1_999), p(106, 6))));
        // … for 2 s: dead.
        assert!(dead(d.check(t(2_000), p(106, 6))));
    }

    #[test]
    fn an_idle_server_answers_one_probe_and_is_left_alone() {
        let t = Instant::from_millis;
        let p = |rx, tx, rx_data| Pulse {
            rx_data,
            ..pulse(true, true, rx, tx)
        };
        let mut d = DeadPeer::default();
        assert_eq!(d.check(t(0), p(100, 100, 0)), Verdict::Alive);
        assert!(!d.watching(), "no data received yet");
        // Data, then quiet: one probe, answered within a round trip.
        assert_eq!(d.check(t(100), p(101, 100, 1)), Verdict::Alive);
        assert!(d.watching());
        assert_eq!(d.check(t(300), p(101, 100, 1)), Verdict::Alive);
        assert_eq!(d.check(t(400), p(101, 100, 1)), Verdict::Probe);
        let (mut rx, mut tx) = (103, 102);
        assert_eq!(d.check(t(500), p(rx, tx, 1)), Verdict::Alive);
        assert!(!d.watching(), "answered: an idle, live tunnel");
        // Ten idle seconds with the core's keepalives (every 2 s, each
        // answered): no probe, no verdict.
        for ms in (600..10_600).step_by(100) {
            if ms % 2_000 == 0 {
                tx += 2;
            }
            if ms % 2_000 == 100 {
                rx += 2;
            }
            assert_eq!(d.check(t(ms), p(rx, tx, 1)), Verdict::Alive, "at {ms} ms");
        }
        // Data again: a later quiet spell is probed again, at most every
        // PROBE_EVERY.
        assert_eq!(d.check(t(11_000), p(rx + 1, tx, 2)), Verdict::Alive);
        assert_eq!(d.check(t(11_300), p(rx + 1, tx, 2)), Verdict::Probe);
        assert_eq!(d.check(t(11_400), p(rx + 1, tx + 2, 2)), Verdict::Alive);
    }
}
