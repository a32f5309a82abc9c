//! A queue-delay bound on a subflow's usable window
//! (`ConnectionConfig::window_delay_bound`).
//!
//! Why: a loss-based tunnel controller (CCID2, CUBIC, the coupled ones)
//! grows its window until the access link's buffer overflows, so the inner
//! flows' queue builds in the link's drop-tail FIFO (150 kB = 40 ms at
//! 30 Mbit/s on the benchmark's `equal` mix), where a small real-time flow
//! waits behind the bulk flow, rather than in the tunnel's own FQ-CoDel
//! send queue, where it gets a queue of its own and CoDel signals the bulk
//! flow. Measured (docs/AGGREGATION.md, "Short bottleneck queues"): link
//! queue p95 33 ms on both `equal` paths against a send-queue p95 of 4.5 ms.
//!
//! Rule: with `bw` the largest delivery rate (bytes per second) sampled
//! over the last 5–10 min-RTTs, at least 0.5–1 s, `target` the tolerated
//! standing queue, `mss` a full-sized packet and `mean` the mean size of
//! the packets in flight,
//!
//! ```text
//! usable window = min(cwnd, ceil((bw × (min_rtt + target) + HEADROOM × mss) / mean))
//! ```
//!
//! in packets: the link drains bytes, so a stream of small datagrams
//! beside a bulk flow does not inflate the bound ([`DelayBound::bound_pkts`]).
//!
//! — the in-flight bound of BBR (draft-ietf-ccwg-bbr-02 §4.6.4.2, inflight
//! = bw × min_rtt × gain, with a max-filtered bw, §4.5.2.3) with the gain
//! written as a queue-delay target, as LEDBAT (RFC 6817 §2.1) and ACPF
//! (Pieska et al., ANRW '21: `target = max(min_rtt / 4, 1 ms)`, the
//! default here) state it. While the link is saturated the delivery rate is
//! its capacity, so the bound keeps about `target` of queue there; packets
//! beyond wait in the tunnel's send queue, or the scheduler spills them to
//! another path. While the estimate is below the capacity, the bound lets
//! `1 + target / min_rtt` times what was delivered per round trip into the
//! pipe, so it grows by that factor each round (BBR's probing, not slow
//! start's doubling) and never starves the path.
//!
//! The BBR family (`ccid5`, `bbr3`) is bounded only while one path is
//! Active (`one_path_only`). Its own in-flight cap
//! is `cwnd_gain × BDP` with `cwnd_gain = 2` (draft-ietf-ccwg-bbr §4.6.4.2;
//! 2.25 while BBRv3 probes up), a whole extra BDP allowed in flight to ride
//! out delayed and aggregated acks. Pacing keeps that BDP out of the queue
//! only while the pacing rate is at most the delivery rate: whenever it
//! is higher (ProbeBW_UP's 1.25 gain, an overestimated max-filtered bw,
//! an inner sender's burst after an idle ack clock) the extra BDP stands
//! in the link's drop-tail buffer, where the real-time flow waits behind
//! it (measured, `equal`: OWD p95 44.5 ms with ccid5, 36.9 with bbr3,
//! against 24). The bound is the same in-flight cap with a gain of
//! `1 + target / min_rtt`; inflight_hi/lo (§4.3.3, §4.5.10) only react to
//! loss, which a 150 kB buffer delays by a whole buffer's worth of queue.
//! With two or more paths the bound on the BBR family met the goal on
//! `equal` (22 ms) but cost goodput elsewhere (trace/quic/ccid5 1.03 →
//! 0.80 of the best path, lossy/tcp-cubic/ccid5 0.99 → 0.88: a paced
//! path held at its recent max rate does not probe past it, and the
//! filter forgets a swinging link's peak), so there it is left alone; on
//! one path it cost nothing measurable (docs/AGGREGATION.md).
//!
//! The default target is `min_rtt / 4`, at most `MAX_ADAPTIVE_TARGET`
//! (5 ms), also while one path is Active. The link's drop-tail FIFO is
//! shared by every inner flow, so what a bulk flow keeps standing there a
//! real-time flow waits behind; the tunnel's FQ-CoDel send queue gives each
//! flow a queue of its own. So the queue a loss-based inner flow needs to
//! stay busy across its backoff (the buffer-sizing rule, Appenzeller et
//! al., SIGCOMM '04: CUBIC's β = 0.7 needs 0.43 BDP) belongs in its own
//! flow queue — `TunnelSettings::codel_target_ms`, 15 ms — not at the
//! link. Measured (docs/AGGREGATION.md, "The bulk flow's queue in its own
//! flow queue"): with the former `min_rtt / 2` on a lone 50 ms path (the
//! `outage` mix while its fast path is down) the real-time flow waited
//! behind a 23 ms link queue (OWD p50 49 ms); with the cap and the bulk
//! flow's queue in FQ-CoDel the scorecard passes 258 of 320 cells against
//! 247, and the one-path mix keeps its goodput.
//!
//! The filter spans at least 0.5–1 s
//! because a cellular link's rate swings faster than 5–10 RTTs: a shorter
//! window forgets the last peak and holds the path below what it can take
//! (BBR's bandwidth filter spans 10 rounds for the same reason,
//! draft-ietf-ccwg-bbr-02 §4.5.2.3).

use std::time::Duration;

use crate::time::Instant;

/// Full-sized packets beyond `bw × (min_rtt + target)`: the Ack Ratio's
/// (2) and one delayed acknowledgement's worth, so ack clocking alone
/// never idles the link.
pub const HEADROOM_PKTS: u32 = 3;

/// The bound never goes below this (RFC 5681's largest initial window).
pub const MIN_BOUND_PKTS: u32 = 4;

/// Floor of the adaptive target (as ACPF's).
const MIN_TARGET: Duration = Duration::from_millis(1);

/// Length of a max-filter slot: this many min RTTs, at least `MIN_SLOT`
/// (the filter spans one to two slots).
const SLOT_RTTS: u32 = 5;
const MIN_SLOT: Duration = Duration::from_millis(500);

/// While the newest rate sample is a new maximum, the target is at least
/// this many min RTTs (a 2 × BDP bound): a link whose rate jumps (a
/// cellular scheduler) is then filled in a round or two, not at
/// `1 + target / min_rtt` per round.
const RISING_GAIN_RTTS: u32 = 1;

/// From this many Active paths on the BBR family is not bounded
/// (`one_path_only`, see the module doc).
pub const MIN_ACTIVE_PATHS: usize = 2;

/// Ceiling of the adaptive target: the link's FIFO is shared by every inner
/// flow (see the module doc).
const MAX_ADAPTIVE_TARGET: Duration = Duration::from_millis(5);

/// Under the bound a loss-based controller's window may grow to this many
/// times the bound (see [`flight_for_controller`]).
pub const GROWTH_OVER_BOUND: u32 = 2;

/// The flight a loss-based controller is told of when a packet leaves.
///
/// Why: a controller grows only while it is window-limited (RFC 7661 §4.1;
/// RFC 9438 §4.2 "cwnd-limited"), and under the bound the flight stops at
/// `bound < cwnd`, so the window froze at about the bound; each random loss
/// (the `lossy` mix: 0.3 % on a 5 ms path, one every ~130 ms) then cut it
/// to β × bound — below the path's BDP plus the small target — and the
/// path idled until it regrew: lossy/tcp-cubic/cubic 0.99 → 0.92 of the
/// best path with the bound on. A path held at its bound is limited by the
/// window in use, so it counts as window-limited while `cwnd` is below
/// `GROWTH_OVER_BOUND × bound`: one halving (Reno's β = 0.5, CUBIC's 0.7
/// less) then still leaves the usable window at the bound. The cap keeps
/// the window meaningful when the bound lifts (no unbounded growth).
pub fn flight_for_controller(pipe: u32, cwnd: u32, bound: Option<u32>) -> u32 {
    match bound {
        Some(b) if pipe >= b && cwnd > b && cwnd < b.saturating_mul(GROWTH_OVER_BOUND) => {
            pipe.max(cwnd)
        }
        _ => pipe,
    }
}

/// Packet sizes the bound converts bytes with.
#[derive(Clone, Copy, Debug)]
pub struct PacketSizes {
    /// Mean size of the packets in flight (of those sent lately when none
    /// is), bytes.
    pub mean: f64,
    /// A full-sized packet (the path's MSS), bytes.
    pub full: f64,
}

#[derive(Clone, Debug)]
pub struct DelayBound {
    /// Fixed target; `None` = `min_rtt / 4` within 1–5 ms.
    target: Option<Duration>,
    /// Max delivery rate (bytes/s) of the current slot and of the one
    /// before it; the slot started at `slot_start`.
    cur: f64,
    prev: f64,
    slot_start: Option<Instant>,
    /// The newest sample set a new maximum of the filter: the path has not
    /// shown its capacity yet (see `RISING_GAIN_RTTS`).
    rising: bool,
    /// No bound from `MIN_ACTIVE_PATHS` Active paths on (the BBR family).
    one_path_only: bool,
}

impl DelayBound {
    /// `target`: zero = adaptive (`min_rtt / 4` within 1–5 ms);
    /// `one_path_only`: bound only while one path is Active.
    pub fn new(target: Duration, one_path_only: bool) -> Self {
        DelayBound {
            target: (!target.is_zero()).then_some(target),
            cur: 0.0,
            prev: 0.0,
            slot_start: None,
            rising: false,
            one_path_only,
        }
    }

    fn slot_len(min_rtt: Duration) -> Duration {
        (min_rtt * SLOT_RTTS).max(MIN_SLOT)
    }

    /// Roll the max filter's slots forward to `now`.
    fn advance(&mut self, now: Instant, min_rtt: Duration) {
        let len = Self::slot_len(min_rtt);
        match self.slot_start {
            None => self.slot_start = Some(now),
            Some(start) if now >= start + len * 2 => {
                // Both slots are older than the window: forget them.
                self.prev = 0.0;
                self.cur = 0.0;
                self.slot_start = Some(now);
            }
            Some(start) if now >= start + len => {
                self.prev = self.cur;
                self.cur = 0.0;
                self.slot_start = Some(start + len);
            }
            Some(_) => {}
        }
    }

    /// A delivery-rate sample, bytes per second (app-limited ones too:
    /// the filter keeps the maximum, which they can only raise). Only a
    /// sample the window limited (not `app_limited`) opens the bound to
    /// 2 × BDP as a new maximum: a path the scheduler feeds only to spill
    /// (the `asym` mix's 8 Mbit/s, 35 ms) delivers in bursts whose rate
    /// kept setting new maxima, and each let 40-50 more packets into its
    /// FIFO at once — 56 ms of queue, behind which the receiver held the
    /// inner flow (its goodput fell to 10-20 Mbit/s for a tenth of a second
    /// every 1.5 s). With this and the send queue's hold allowance
    /// (`sched/spill.rs`) asym/quic went from 36.4 to 41.6 Mbit/s.
    pub fn on_rate_sample(
        &mut self,
        now: Instant,
        bytes_per_s: f64,
        min_rtt: Duration,
        app_limited: bool,
    ) {
        if !(bytes_per_s.is_finite() && bytes_per_s > 0.0) {
            return;
        }
        self.advance(now, min_rtt);
        self.rising = !app_limited && bytes_per_s > self.cur.max(self.prev);
        self.cur = self.cur.max(bytes_per_s);
    }

    /// The bound at `now` in packets of `sizes.mean` bytes, with
    /// `active_paths` Active paths on the connection; `None` without a
    /// recent rate sample or with fewer than `MIN_ACTIVE_PATHS` (then only
    /// the controller's window applies).
    ///
    /// Why bytes: the link drains bytes. In packets, a 1 Mbit/s stream of
    /// 200-byte datagrams beside a bulk flow doubled the packet rate of a
    /// 5 Mbit/s path (990 packets/s where 446 full-sized ones fit), and the
    /// bound then let 28 packets into flight, which stood as 20–40 ms of
    /// queue whenever most of them were the bulk flow's (the `drop` mix).
    /// The headroom stays [`HEADROOM_PKTS`] full-sized packets: counted in
    /// the mean size it would shrink to a few hundred bytes on a path
    /// carrying an inner TCP's acks (about 80 bytes each).
    pub fn bound_pkts(
        &mut self,
        now: Instant,
        min_rtt: Option<Duration>,
        active_paths: usize,
        sizes: PacketSizes,
    ) -> Option<u32> {
        let min_rtt = min_rtt?;
        self.advance(now, min_rtt);
        if active_paths == 0 || (self.one_path_only && active_paths >= MIN_ACTIVE_PATHS) {
            return None;
        }
        let bw = self.cur.max(self.prev);
        if bw <= 0.0 {
            return None;
        }
        let mut target = self
            .target
            .unwrap_or_else(|| (min_rtt / 4).clamp(MIN_TARGET, MAX_ADAPTIVE_TARGET));
        if self.rising {
            // Still finding the capacity: BBR's startup gain of 2 on the
            // in-flight bound (draft-ietf-ccwg-bbr-02 §4.6.4.2 cwnd_gain).
            target = target.max(min_rtt * RISING_GAIN_RTTS);
        }
        let headroom = f64::from(HEADROOM_PKTS) * sizes.full;
        let bytes = bw * (min_rtt + target).as_secs_f64() + headroom;
        // Saturating float → int conversion; huge rates mean no bound.
        let pkts = (bytes / sizes.mean.max(1.0)).ceil() as u32;
        Some(pkts.max(MIN_BOUND_PKTS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Full-sized packets: the rates below are packets/s × MSS.
    const MSS: f64 = 1400.0;
    const FULL: PacketSizes = PacketSizes {
        mean: MSS,
        full: MSS,
    };

    fn at(v: u64) -> Instant {
        Instant::ZERO + ms(v)
    }

    #[test]
    fn bound_is_bdp_plus_target_queue() {
        // 30 Mbit/s of 1400 B packets = 2678.6 pkt/s, min RTT 16 ms,
        // target 4 ms: 53.6 → 54 + 3 headroom.
        let mut b = DelayBound::new(Duration::ZERO, false);
        b.on_rate_sample(at(0), 2678.6 * MSS, ms(16), false);
        b.on_rate_sample(at(5), 2678.6 * MSS, ms(16), false); // settled: not a new maximum
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 2, FULL), Some(57));
        // A fixed 10 ms target: 2678.6 × 0.026 = 69.6 → 70 + 3.
        let mut b = DelayBound::new(ms(10), false);
        b.on_rate_sample(at(0), 2678.6 * MSS, ms(16), false);
        b.on_rate_sample(at(5), 2678.6 * MSS, ms(16), false);
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 2, FULL), Some(73));
    }

    #[test]
    fn max_filter_keeps_the_peak_for_one_to_two_slots_then_forgets() {
        let mut b = DelayBound::new(Duration::ZERO, false);
        // Slot = max(5 × 20 ms, 500 ms) = 500 ms; target 5 ms; bound =
        // rate × 25 ms + 3.
        b.on_rate_sample(at(0), 4000.0 * MSS, ms(20), false);
        b.on_rate_sample(at(250), 1000.0 * MSS, ms(20), false);
        assert_eq!(b.bound_pkts(at(300), Some(ms(20)), 2, FULL), Some(103));
        // Next slot: the peak is still in the previous one — 37 RTTs
        // after it (a 5–10 RTT filter would have forgotten it by now).
        b.on_rate_sample(at(750), 1000.0 * MSS, ms(20), false);
        assert_eq!(b.bound_pkts(at(750), Some(ms(20)), 2, FULL), Some(103));
        // Two slots later only the recent samples count.
        b.on_rate_sample(at(1050), 1000.0 * MSS, ms(20), false);
        assert_eq!(b.bound_pkts(at(1050), Some(ms(20)), 2, FULL), Some(28));
        // Silence for two whole slots: no estimate, no bound.
        assert_eq!(b.bound_pkts(at(2500), Some(ms(20)), 2, FULL), None);
    }

    #[test]
    fn one_active_path_keeps_the_short_target() {
        // The bulk flow's queue waits in its FQ-CoDel queue, not at the
        // link: one Active path gets the same 4 ms target as two (2678.6
        // × 0.020 = 53.6 → 54 + 3), none without an Active path; a fixed
        // target is kept.
        let mut b = DelayBound::new(Duration::ZERO, false);
        b.on_rate_sample(at(0), 2678.6 * MSS, ms(16), false);
        b.on_rate_sample(at(5), 2678.6 * MSS, ms(16), false);
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 1, FULL), Some(57));
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 0, FULL), None);
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 2, FULL), Some(57));
        let mut b = DelayBound::new(ms(10), false);
        b.on_rate_sample(at(0), 2678.6 * MSS, ms(16), false);
        b.on_rate_sample(at(5), 2678.6 * MSS, ms(16), false);
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 1, FULL), Some(73));
        // The BBR family: the same on one path, none from two on.
        let mut b = DelayBound::new(Duration::ZERO, true);
        b.on_rate_sample(at(0), 2678.6 * MSS, ms(16), false);
        b.on_rate_sample(at(5), 2678.6 * MSS, ms(16), false);
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 1, FULL), Some(57));
        assert_eq!(b.bound_pkts(at(10), Some(ms(16)), 2, FULL), None);
    }

    #[test]
    fn the_adaptive_target_is_at_most_five_ms() {
        // min RTT 50 ms (the `outage` mix's slow path): a quarter would be
        // 12.5 ms of queue in the link's FIFO, where a real-time flow
        // waits; capped at 5 ms: 1785.7 pkt/s × 0.055 = 98.2 → 99 + 3.
        let mut b = DelayBound::new(Duration::ZERO, false);
        b.on_rate_sample(at(0), 1785.7 * MSS, ms(50), false);
        b.on_rate_sample(at(5), 1785.7 * MSS, ms(50), false);
        assert_eq!(b.bound_pkts(at(10), Some(ms(50)), 1, FULL), Some(102));
        assert_eq!(b.bound_pkts(at(10), Some(ms(50)), 2, FULL), Some(102));
        // A fixed target is the operator's: not capped.
        let mut b = DelayBound::new(ms(20), false);
        b.on_rate_sample(at(0), 1785.7 * MSS, ms(50), false);
        b.on_rate_sample(at(5), 1785.7 * MSS, ms(50), false);
        assert_eq!(b.bound_pkts(at(10), Some(ms(50)), 2, FULL), Some(128));
    }

    #[test]
    fn a_new_maximum_opens_the_bound_to_two_bdp_until_the_rate_settles() {
        // min RTT 40 ms, target 5 ms (a quarter, capped): bound = rate ×
        // 45 ms + 3, or rate × 80 ms + 3 while the newest sample is a new
        // maximum.
        let mut b = DelayBound::new(Duration::ZERO, false);
        b.on_rate_sample(at(0), 1000.0 * MSS, ms(40), false);
        assert_eq!(b.bound_pkts(at(0), Some(ms(40)), 2, FULL), Some(83));
        b.on_rate_sample(at(40), 1000.0 * MSS, ms(40), false);
        assert_eq!(b.bound_pkts(at(40), Some(ms(40)), 2, FULL), Some(48));
        b.on_rate_sample(at(80), 2000.0 * MSS, ms(40), false);
        assert_eq!(b.bound_pkts(at(80), Some(ms(40)), 2, FULL), Some(163));
        // Below the peak again: the plain target (2000 × 0.045 = 90 + 3).
        b.on_rate_sample(at(120), 1900.0 * MSS, ms(40), false);
        assert_eq!(b.bound_pkts(at(120), Some(ms(40)), 2, FULL), Some(93));
    }

    #[test]
    fn no_bound_without_samples_and_never_below_the_floor() {
        let mut b = DelayBound::new(Duration::ZERO, false);
        assert_eq!(b.bound_pkts(at(0), Some(ms(20)), 2, FULL), None);
        b.on_rate_sample(at(0), 1.0 * MSS, ms(20), false);
        assert_eq!(b.bound_pkts(at(1), None, 2, FULL), None);
        assert_eq!(
            b.bound_pkts(at(1), Some(ms(20)), 2, FULL),
            Some(MIN_BOUND_PKTS)
        );
        b.on_rate_sample(at(2), f64::NAN, ms(20), false);
        b.on_rate_sample(at(2), f64::INFINITY, ms(20), false);
        assert_eq!(
            b.bound_pkts(at(3), Some(ms(20)), 2, FULL),
            Some(MIN_BOUND_PKTS)
        );
    }

    #[test]
    fn an_underestimate_grows_by_one_plus_target_over_min_rtt_per_round() {
        // A path delivering exactly what the bound lets in (no queue): the
        // next round's sample is bound / min_rtt, 1.25× the last estimate.
        let mut b = DelayBound::new(Duration::ZERO, false);
        let rtt = ms(20);
        let mut rate = 100.0 * MSS; // bytes/s, far below capacity
        let mut t = 0;
        for _ in 0..10 {
            b.on_rate_sample(at(t), rate, rtt, false);
            let bound = b.bound_pkts(at(t), Some(rtt), 2, FULL).unwrap();
            rate = f64::from(bound) * MSS / rtt.as_secs_f64();
            t += 20;
        }
        // 100 × 1.25^10 ≈ 931 pkt/s at least (plus the headroom's gain).
        assert!(rate > 931.0 * MSS, "{rate}");
    }

    #[test]
    fn an_app_limited_new_maximum_does_not_open_the_bound() {
        // min RTT 40 ms, target 5 ms: rate × 45 ms + 3; a window-limited
        // new maximum opens it to rate × 80 ms + 3, an app-limited one not.
        let mut b = DelayBound::new(Duration::ZERO, false);
        b.on_rate_sample(at(0), 1000.0 * MSS, ms(40), false);
        b.on_rate_sample(at(40), 1000.0 * MSS, ms(40), false);
        b.on_rate_sample(at(80), 2000.0 * MSS, ms(40), true);
        assert_eq!(b.bound_pkts(at(80), Some(ms(40)), 2, FULL), Some(93));
        b.on_rate_sample(at(120), 2500.0 * MSS, ms(40), false);
        assert_eq!(b.bound_pkts(at(120), Some(ms(40)), 2, FULL), Some(203));
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// Mixed sizes: the bound is bytes (`bw × (min_rtt + target)` plus
    /// three full-sized packets) in packets of the mean size in flight.
    /// A 5 Mbit/s path (625 000 B/s), min RTT 20 ms, target 5 ms: 15 625
    /// bytes and 4 200 of headroom. All full-sized: 14.2 → 15 packets;
    /// half of them 228-byte real-time datagrams (mean 814 B): 24.4 → 25.
    #[test]
    fn the_bound_is_bytes_in_packets_of_the_mean_size() {
        let t = Instant::ZERO;
        let mut b = DelayBound::new(Duration::ZERO, false);
        b.on_rate_sample(t, 625_000.0, Duration::from_millis(20), false);
        b.on_rate_sample(t, 625_000.0, Duration::from_millis(20), false);
        let full = |mean| PacketSizes { mean, full: 1400.0 };
        let rtt = Some(Duration::from_millis(20));
        assert_eq!(b.bound_pkts(t, rtt, 2, full(1400.0)), Some(15));
        assert_eq!(b.bound_pkts(t, rtt, 2, full(814.0)), Some(25));
        // A path carrying 80-byte acks keeps three full packets of
        // headroom: 4 200 bytes are 52.5 acks.
        let mut acks = DelayBound::new(Duration::ZERO, false);
        acks.on_rate_sample(t, 8_000.0, Duration::from_millis(20), false);
        acks.on_rate_sample(t, 8_000.0, Duration::from_millis(20), false);
        assert_eq!(acks.bound_pkts(t, rtt, 2, full(80.0)), Some(55));
    }
}
