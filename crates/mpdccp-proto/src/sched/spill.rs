//! Delay-aware spilling: may a packet go on a slower path, or should it wait
//! for the fastest one? The completion-time comparison of ECF (Lim et al.,
//! CoNEXT '17, Alg. 1) and BLEST (Ferlin et al., IFIP Networking '16),
//! reduced to one packet's arrival time, as `acpf` uses it once every path
//! is at its effective window.
//!
//! Why: a loss-based subflow on a slow path fills the bottleneck buffer if
//! the scheduler keeps feeding its window (on the `asym` mix, 8 Mbit/s with
//! 150 kB, a 100–120 ms standing queue). Every packet placed there arrives
//! long after packets sent later on the fast path, the receiver's reordering
//! holds the inner flow for that spread, and the inner TCP's RTT and loss
//! recovery suffer more than the extra capacity gains.
//!
//! Rule, in one-way time (RTT / 2 per path, the paths being symmetric as
//! far as the sender can tell): a packet handed to path `p` now arrives
//! after
//!
//! ```text
//! arrival(p) = srtt_p / 2 + wait_p,  wait_p = backlog_p · srtt_p / cwnd_p
//! ```
//!
//! where `backlog_p` is what must leave before it (packets already queued
//! on `p`, and for the fast path the connection's whole send queue `k`,
//! which would go there if we wait — ECF's `k`). The window delivers
//! `cwnd_p` packets per `srtt_p` (ACK clock). `srtt_p` already contains
//! the path's standing bottleneck queue, so a slow path whose queue grows
//! stops being chosen until it drains. A slower path `s` is used iff
//! `arrival(s) ≤ arrival(f)`: the fast path's backlog is long enough that
//! waiting for it would deliver later than the detour.
//!
//! A paced path (CCID5, BBRv3, paced CUBIC) drains at its pacing rate, not
//! at `cwnd / srtt` (a BBR window is about 2 × BDP, so the ACK clock would
//! halve the wait): its wait is the larger of the two, the pacing one being
//! the pacer's current hold plus `backlog · mss / pacing_rate` (the
//! per-path queue's departure model of OTIAS and of ECF's rate term). This
//! is what lets `acpf` treat a paced path with a few packets queued as
//! "busy for a known, short time" rather than as full.

use std::time::Duration;

use crate::path::PathView;
use crate::time::Instant;

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

/// How long `backlog` packets take to leave `p`'s pacer at `now`: the
/// pacer's current hold plus `backlog · mss / pacing_rate`; zero for a path
/// that does not pace.
pub fn pacing_wait(p: &PathView, now: Instant, backlog: u64) -> Duration {
    let Some(rate) = p.pacing_rate_bytes_per_s.filter(|r| *r > 0) else {
        return Duration::ZERO;
    };
    let hold = p
        .next_send_time
        .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
    // u128 nanoseconds: no overflow for any queue length.
    let bytes = u128::from(backlog) * u128::from(p.mss_bytes.max(1));
    hold.saturating_add(nanos(bytes * 1_000_000_000 / u128::from(rate)))
}

/// Expected one-way arrival time at `now` of a packet handed to `p` with
/// `backlog` packets to leave before it: half the SRTT plus the longer of
/// the ACK clock's and the pacer's drain time; `None` without an RTT sample.
pub fn arrival(p: &PathView, now: Instant, backlog: u64) -> Option<Duration> {
    let srtt = p.srtt?;
    let cwnd = u128::from(p.cwnd_pkts.max(1));
    let window_wait = nanos(srtt.as_nanos() * u128::from(backlog) / cwnd);
    let wait = window_wait.max(pacing_wait(p, now, backlog));
    Some((srtt / 2).saturating_add(wait))
}

/// True when a packet may go on `slow` rather than wait for `fast` (which
/// cannot take it now: window or pacer); `conn_queued` is the connection's
/// send queue, this packet included. Without RTT samples there is nothing
/// to compare: spill (do not idle capacity).
pub fn worth_spilling(now: Instant, fast: &PathView, slow: &PathView, conn_queued: usize) -> bool {
    let k = u64::try_from(conn_queued).unwrap_or(u64::MAX);
    let fast_backlog = u64::from(fast.queued_pkts).saturating_add(k);
    match (
        arrival(fast, now, fast_backlog),
        arrival(slow, now, u64::from(slow.queued_pkts)),
    ) {
        (Some(f), Some(s)) => s <= f,
        _ => true,
    }
}

/// The longest hold [`hold_allowance`] grants: half of CoDel's 100 ms
/// interval. A detour that costs more than this is not waited for without
/// a congestion signal (the inner flow's RTT would grow by all of it).
pub const MAX_HOLD_ALLOWANCE: Duration = Duration::from_millis(50);

/// How long a packet at the head of the send queue waits, by the rule of
/// [`worth_spilling`], before a slower path that has room now would deliver
/// it no later than the fastest (full) path: that slower path's arrival
/// time less the fast path's, at most [`MAX_HOLD_ALLOWANCE`]. Zero when no
/// usable path is full or none has room: then a queue is congestion.
///
/// Why: the send queue's CoDel (`conn/aqm.rs`) signals the inner flow once
/// the head waited `target` (15 ms by default) for an interval. On the
/// `asym` mix the slow path arrives 23 ms after the fast one, so the
/// scheduler spills only behind 23 ms of queue, and CoDel signalled the
/// inner flow before the queue got there: the slow path was fed in
/// occasional bursts (inner TCP 39.2 Mbit/s of 48, QUIC 36.4, in 60 s
/// runs). Waiting for the detour to pay is not congestion while a path
/// has room; CoDel counts the sojourn beyond it
/// (`SendQueue::shed_head_allowing`). With it (and the bound's rule for
/// app-limited samples, `conn/subflow/delay_bound.rs`): TCP 43.1, QUIC
/// 41.6; the bulk flow's one-way delay p50 51 → 60 ms, the price of
/// using a path 23 ms slower.
pub fn hold_allowance(now: Instant, paths: &[PathView]) -> Duration {
    let no_standby = super::standby_excluded(paths);
    let usable = |p: &&PathView| super::eligible(p, no_standby);
    let Some(fast) = paths
        .iter()
        .filter(usable)
        .filter(|p| !p.can_send(now))
        .min_by_key(|p| super::srtt_rank(p))
    else {
        return Duration::ZERO;
    };
    let Some(fast_arrival) = arrival(fast, now, u64::from(fast.queued_pkts)) else {
        return Duration::ZERO;
    };
    paths
        .iter()
        .filter(usable)
        .filter(|p| p.can_send(now) && super::srtt_rank(p) > super::srtt_rank(fast))
        .filter_map(|p| arrival(p, now, u64::from(p.queued_pkts)))
        .min()
        .map_or(Duration::ZERO, |a| {
            a.saturating_sub(fast_arrival).min(MAX_HOLD_ALLOWANCE)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathId;

    const T0: Instant = Instant::ZERO;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// The `asym` mix: fast 40 Mbit/s, RTT 24 ms (86 packets of 1400 B per
    /// RTT); slow 8 Mbit/s, base RTT 70 ms.
    fn fast() -> PathView {
        let mut p = PathView::new(PathId(0));
        p.srtt = Some(ms(24));
        p.cwnd_pkts = 86;
        p.in_flight_pkts = 86;
        p
    }

    fn slow(srtt_ms: u64) -> PathView {
        let mut p = PathView::new(PathId(1));
        p.srtt = Some(ms(srtt_ms));
        p.cwnd_pkts = 50;
        p
    }

    #[test]
    fn arrival_is_half_rtt_plus_window_rounds_of_backlog() {
        let f = fast();
        assert_eq!(arrival(&f, T0, 0), Some(ms(12)));
        // 172 packets ahead = two windows = two RTTs of waiting.
        assert_eq!(arrival(&f, T0, 172), Some(ms(12 + 48)));
        assert_eq!(arrival(&PathView::new(PathId(2)), T0, 5), None);
    }

    #[test]
    fn no_spill_when_slow_path_arrives_later_than_waiting() {
        // One packet waiting: fast delivers it in ~12.3 ms, slow in 35 ms.
        assert!(!worth_spilling(T0, &fast(), &slow(70), 1));
        // A 120 ms standing queue on the slow path: even a 50-packet
        // backlog on the fast path (~14 ms of waiting) is sooner.
        assert!(!worth_spilling(T0, &fast(), &slow(190), 50));
    }

    #[test]
    fn spills_once_fast_backlog_is_long_enough() {
        // Slow arrives after 35 ms; fast after 12 ms + k · 24/86 ms:
        // break-even at k = 23 · 86 / 24 ≈ 82.4 packets.
        assert!(!worth_spilling(T0, &fast(), &slow(70), 82));
        assert!(worth_spilling(T0, &fast(), &slow(70), 83));
        // Packets already queued on the fast path count as backlog too.
        let mut f = fast();
        f.queued_pkts = 80;
        assert!(worth_spilling(T0, &f, &slow(70), 3));
        // ... and the slow path's own queue delays its arrival.
        let mut s = slow(70);
        s.queued_pkts = 50; // one more RTT of 70 ms: arrival 105 ms
        assert!(!worth_spilling(T0, &fast(), &s, 83));
        assert!(worth_spilling(T0, &fast(), &s, 334));
    }

    #[test]
    fn without_rtt_samples_spills() {
        let mut f = fast();
        f.srtt = None;
        assert!(worth_spilling(T0, &f, &slow(500), 1));
        assert!(worth_spilling(T0, &fast(), &PathView::new(PathId(1)), 1));
    }

    #[test]
    fn the_hold_allowance_is_the_detours_extra_delay_while_a_slower_path_has_room() {
        // Fast full (86 of 86 in flight), slow with room: 35 − 12 = 23 ms.
        assert_eq!(hold_allowance(T0, &[fast(), slow(70)]), ms(23));
        // The slow path's own queue makes the detour, and the hold, longer:
        // 10 packets of a 50-packet window wait a fifth of its 70 ms.
        let mut s = slow(70);
        s.queued_pkts = 10;
        assert_eq!(hold_allowance(T0, &[fast(), s]), ms(37));
        // A detour longer than the cap is not waited for unsignalled.
        assert_eq!(hold_allowance(T0, &[fast(), slow(190)]), MAX_HOLD_ALLOWANCE);
        // Every path full: a queue is congestion.
        let mut full = slow(70);
        full.in_flight_pkts = 50;
        assert_eq!(hold_allowance(T0, &[fast(), full]), Duration::ZERO);
        // The fast path has room: nothing is held.
        let mut f = fast();
        f.in_flight_pkts = 10;
        assert_eq!(hold_allowance(T0, &[f, slow(70)]), Duration::ZERO);
        // A standby path is no detour while the fast path is up.
        let mut standby = slow(70);
        standby.priority = crate::path::priority::STANDBY;
        assert_eq!(hold_allowance(T0, &[fast(), standby]), Duration::ZERO);
    }
}
