//! `acpf` — adaptive cheapest path first (Pieska, Rabitsch, Brunstrom,
//! Kassler, Amend: "Adaptive Cheapest Path First Scheduling in a
//! Transport-Layer Multi-Path Tunnel Context", ANRW '21).
//!
//! Plain CPF fills the preferred path up to its congestion window; with a
//! loss-based tunnel CC that window includes a standing queue at the
//! bottleneck, which inflates the RTT the end-to-end (inner) congestion
//! control sees and keeps traffic off the secondary path. ACPF limits the
//! queue it builds on a path and spills earlier.
//!
//! Our formulation: the queueing delay of a path is `srtt − min_rtt`
//! (saturating — a fresh SRTT sample below the windowed minimum must not
//! wrap around; the reference computed this difference in mixed units and
//! unsigned arithmetic). With the window delivering about `cwnd / srtt`
//! packets per second, allowing at most `target` of queueing delay means at
//! most `cwnd × (min_rtt + target) / srtt` packets in the pipe. That is the
//! path's *effective window* while its queueing delay exceeds `target`;
//! otherwise the full window applies. `target` is `acpf_queue_delay`, or by
//! default `max(min_rtt / 4, 1 ms)` (a quarter of the base RTT, so the limit
//! scales from LAN to satellite paths).
//!
//! Selection is CPF over effective windows; if every path is at its
//! effective window, CPF over full windows (the capacity is still there, and
//! idling it would lose throughput) — but, unless `blind_spill`, a path
//! slower than the fastest one takes a packet beyond its effective window
//! only when the packet arrives there no later than it would by waiting for
//! the fastest path (`spill.rs`, ECF/BLEST-style). Without that check a
//! loss-based subflow on a slow path fills its bottleneck buffer and the
//! receiver's reordering holds the inner flow for the whole spread.
//!
//! A paced path (CCID5, BBRv3) whose pacer holds its few queued packets is
//! not full: it is busy for `backlog · mss / pacing_rate`. In the first
//! stage it keeps the packet unless the path CPF would pick next delivers
//! it no later (counting it full sent CCID5's traffic to the slow path of
//! `asym`, `lossy` and `trace` before any delay comparison).

use std::time::Duration;

use super::cpf::{better, cheapest};
use super::{eligible, spill, srtt_rank, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

/// Floor of the default queueing-delay target.
const MIN_TARGET: Duration = Duration::from_millis(1);

#[derive(Clone, Debug)]
pub struct Acpf {
    /// Fixed queueing-delay target; `None` = adaptive default.
    queue_delay: Option<Duration>,
    /// Spill beyond effective windows without the delay check (the
    /// behaviour before `spill.rs`).
    blind_spill: bool,
}

impl Acpf {
    /// `queue_delay`: largest standing queue tolerated on a path before
    /// spilling; zero = `max(min_rtt / 4, 1 ms)` per path.
    pub fn new(queue_delay: Duration) -> Self {
        Acpf {
            queue_delay: (!queue_delay.is_zero()).then_some(queue_delay),
            blind_spill: false,
        }
    }

    /// `blind`: spill beyond effective windows whenever a path has room
    /// (ACPF before the delay-aware rule).
    pub fn with_blind_spill(mut self, blind: bool) -> Self {
        self.blind_spill = blind;
        self
    }

    /// Packets this path may have in flight plus queued before ACPF spills.
    pub fn effective_window(&self, p: &PathView) -> u32 {
        let (Some(srtt), Some(min_rtt)) = (p.srtt, p.min_rtt) else {
            // No RTT knowledge yet: behave like CPF.
            return p.cwnd_pkts;
        };
        let target = self
            .queue_delay
            .unwrap_or_else(|| (min_rtt / 4).max(MIN_TARGET));
        let queue_delay = srtt.saturating_sub(min_rtt);
        if queue_delay <= target || srtt.is_zero() {
            return p.cwnd_pkts;
        }
        // cwnd × (min_rtt + target) / srtt, in u128 nanoseconds: no overflow,
        // and srtt > min_rtt + target here, so the result is < cwnd.
        let budget = min_rtt.saturating_add(target).as_nanos();
        let eff = u128::from(p.cwnd_pkts) * budget / srtt.as_nanos();
        // At least one packet, so a path with room is never starved entirely.
        (eff as u32).max(1)
    }
}

impl Scheduler for Acpf {
    fn name(&self) -> &'static str {
        "acpf"
    }

    fn hold_allowance(&self, now: Instant, paths: &[PathView]) -> Duration {
        if self.blind_spill {
            Duration::ZERO
        } else {
            spill::hold_allowance(now, paths)
        }
    }

    fn select(
        &mut self,
        now: Instant,
        pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        let below_window = |p: &PathView| {
            p.in_flight_pkts.saturating_add(p.queued_pkts) < self.effective_window(p)
        };
        let below_limit = |p: &PathView| p.can_send(now) && below_window(p);
        // What leaves before this packet if it waits for the fastest path:
        // the whole send queue (ECF's k), or, for a sparse flow that flow
        // queuing serves first, the packet alone.
        let backlog = if pkt.sparse { 1 } else { pkt.queued_pkts };
        if let Some(p) = cheapest(paths, below_limit) {
            if self.blind_spill {
                out.push(p.id);
                return;
            }
            // A sparse (real-time) packet goes to the fastest path, past its
            // effective window if it can send at all (one packet adds no
            // queue worth counting), and waits for it when it is full unless
            // the detour arrives sooner: its one-way delay is what the flow
            // lives by, and one path keeps the flow out of the receiver's
            // reordering hold.
            if pkt.sparse {
                if let Some(f) = fastest(paths, p).filter(|f| srtt_rank(p) > srtt_rank(f)) {
                    if f.can_send(now) {
                        out.push(f.id);
                        return;
                    }
                    if !spill::worth_spilling(now, f, p, backlog) {
                        return;
                    }
                }
            }
            // A preferred path below its window whose pacer holds a few
            // packets is busy for `pacing_wait`, not full: it keeps the
            // packet (waiting for its release) unless the path CPF would
            // pick next delivers it no later (`spill.rs`). Otherwise a paced
            // controller's fast path would lose each packet the pacer holds
            // to a slower path, before any delay comparison.
            let paced = cheapest(paths, |q| {
                q.is_usable() && q.has_cwnd_room() && below_window(q) && !q.can_send(now)
            });
            match paced {
                Some(f) if better(f, p) && !spill::worth_spilling(now, f, p, backlog) => {
                    // Hold: the pacer's release timer asks again.
                }
                _ => out.push(p.id),
            }
            return;
        }
        let Some(p) = cheapest(paths, |p| p.can_send(now)) else {
            return;
        };
        if !self.blind_spill {
            if let Some(f) = fastest_full(paths, p, now) {
                if !spill::worth_spilling(now, f, p, backlog) {
                    // Waiting for `f` delivers sooner: hold; the connection
                    // asks again when a path frees up.
                    return;
                }
            }
        }
        out.push(p.id);
    }
}

/// The fastest eligible path (lowest SRTT) among those CPF prefers at least
/// as much as `chosen` (MP_PRIO first: a lower-priority path is no
/// alternative worth waiting for).
fn fastest<'a>(paths: &'a [PathView], chosen: &PathView) -> Option<&'a PathView> {
    let no_standby = standby_excluded(paths);
    paths
        .iter()
        .filter(|q| eligible(q, no_standby) && q.priority >= chosen.priority)
        .min_by_key(|q| srtt_rank(q))
}

/// [`fastest`], if it is faster than `chosen` and cannot send now (window
/// or pacer): the path a packet might wait for.
fn fastest_full<'a>(
    paths: &'a [PathView],
    chosen: &PathView,
    now: Instant,
) -> Option<&'a PathView> {
    fastest(paths, chosen).filter(|f| srtt_rank(chosen) > srtt_rank(f) && !f.can_send(now))
}
