//! `otias` — out-of-order transmission for in-order arrival (Yang, Wang &
//! Amer, "Out-of-order transmission for in-order arrival scheduling for
//! multipath TCP", AINA Workshops 2014).
//!
//! For each path, estimate when a packet handed to it now would arrive, and
//! pick the earliest — even a path whose window is full, if the packet still
//! gets there first by waiting in that path's queue. Sending later packets
//! on the slow path "out of order" makes them arrive in order.
//!
//! Estimate (the paper's model, in packets and RTT rounds): with `k` packets
//! ahead of this one on the path (in flight + queued) and window `cwnd`, the
//! packet leaves after `r` rounds of one SRTT — `r = 0` when `k < cwnd`,
//! else `r = ⌊(k − cwnd) / cwnd⌋ + 1` — then needs the one-way delay (`owd`,
//! or SRTT/2). A pacing path can also be limited by its rate: `k` packets at
//! the pacing rate, plus the pacer's current wait; the larger bound counts.
//!
//! A path's queue is bounded at `otias_max_queue_rounds` windows (default 2)
//! so the connection's per-path queues stay bounded.

use std::time::Duration;

use super::{eligible, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

/// Used before a path has an RTT sample (RFC 6298 §2.1 initial RTO is 1 s;
/// a path without samples should lose against any measured path).
const UNKNOWN_RTT: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct Otias {
    max_queue_rounds: u32,
}

impl Otias {
    /// `max_queue_rounds`: windows' worth of packets a path may queue; 0 = 2.
    pub fn new(max_queue_rounds: u32) -> Self {
        Otias {
            max_queue_rounds: if max_queue_rounds == 0 {
                2
            } else {
                max_queue_rounds
            },
        }
    }

    /// Estimated delay until a packet handed to `p` at `now` arrives.
    pub fn estimated_arrival(&self, now: Instant, p: &PathView) -> Duration {
        let srtt = p.srtt.unwrap_or(UNKNOWN_RTT);
        let owd = p.owd.unwrap_or(srtt / 2);
        let cwnd = u64::from(p.cwnd_pkts.max(1));
        let ahead = u64::from(p.in_flight_pkts) + u64::from(p.queued_pkts);
        // Rounds to wait: packets beyond the window leave one window per RTT.
        let rounds = if ahead < cwnd {
            0
        } else {
            (ahead - cwnd) / cwnd + 1
        };
        let window_wait = mul_duration(srtt, rounds);
        let pacer_wait = p
            .next_send_time
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        let rate_wait = match p.pacing_rate_bytes_per_s {
            Some(rate) if rate > 0 => {
                let bytes = u128::from(p.queued_pkts) * u128::from(p.mss_bytes);
                Duration::from_nanos(
                    u64::try_from(bytes * 1_000_000_000 / u128::from(rate)).unwrap_or(u64::MAX),
                )
            }
            _ => Duration::ZERO,
        };
        window_wait
            .max(pacer_wait.saturating_add(rate_wait))
            .saturating_add(owd)
    }
}

fn mul_duration(d: Duration, n: u64) -> Duration {
    Duration::from_nanos(
        u64::try_from(d.as_nanos().saturating_mul(u128::from(n))).unwrap_or(u64::MAX),
    )
}

impl Scheduler for Otias {
    fn name(&self) -> &'static str {
        "otias"
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        let no_standby = standby_excluded(paths);
        let mut best: Option<(Duration, &PathView)> = None;
        for p in paths {
            if !eligible(p, no_standby) {
                continue;
            }
            let queue_cap = p.cwnd_pkts.max(1).saturating_mul(self.max_queue_rounds);
            if p.queued_pkts >= queue_cap {
                continue;
            }
            let t = self.estimated_arrival(now, p);
            // Ties: higher MP_PRIO, then lower PathId (earlier in the list).
            if best.is_none_or(|(bt, b)| t < bt || (t == bt && p.priority > b.priority)) {
                best = Some((t, p));
            }
        }
        if let Some((_, p)) = best {
            out.push(p.id);
        }
    }
}
