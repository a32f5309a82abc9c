//! `ecf` — earliest completion first (Lim, Nahum, Towsley, Gibbens: "ECF: An
//! MPTCP Path Scheduler to Manage Heterogeneous Paths", CoNEXT '17, Alg. 1),
//! the head-of-line-aware scheduler of this crate.
//!
//! The fastest path `f` (lowest SRTT) is used whenever it has room. When it
//! is full, the fastest path with room `s` is considered: with `k` packets
//! waiting in the connection's send queue, `f` would finish them in about
//! `n = 1 + k / cwnd_f` rounds of `rtt_f`. If that is sooner than one round
//! trip on `s` (with margin `δ = max(rttvar_f, rttvar_s)` and hysteresis
//! `β = 0.25` while already waiting):
//!
//! ```text
//! n · rtt_f < (1 + waiting · β) · (rtt_s + δ)
//! ```
//!
//! and `s` would not be worth it either — `(k / cwnd_s) · rtt_s ≥ 2 · rtt_f + δ`
//! — the packet waits for `f` (no path: the connection asks again when `f`
//! frees up). Otherwise it goes on `s` and `waiting` clears. This avoids the
//! head-of-line blocking that sending the tail of a burst on a slow path
//! causes at the receiver.

use std::time::Duration;

use super::{eligible, srtt_rank, standby_excluded, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

/// Hysteresis factor β of ECF (CoNEXT '17 §4).
const BETA: f64 = 0.25;

#[derive(Clone, Debug, Default)]
pub struct Ecf {
    waiting: bool,
}

impl Ecf {
    pub fn new() -> Self {
        Ecf { waiting: false }
    }

    /// True while ECF holds packets for the fastest path.
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Scheduler for Ecf {
    fn name(&self) -> &'static str {
        "ecf"
    }

    fn select(
        &mut self,
        now: Instant,
        pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        let no_standby = standby_excluded(paths);
        let min_by_rtt = |room: bool| {
            paths
                .iter()
                .filter(|p| eligible(p, no_standby) && (!room || p.can_send(now)))
                .fold(None::<&PathView>, |b, p| match b {
                    Some(b) if srtt_rank(p) >= srtt_rank(b) => Some(b),
                    _ => Some(p),
                })
        };
        let Some(fast) = min_by_rtt(false) else {
            return;
        };
        if fast.can_send(now) {
            self.waiting = false;
            out.push(fast.id);
            return;
        }
        let Some(slow) = min_by_rtt(true) else {
            return;
        };
        let (Some(rtt_f), Some(rtt_s)) = (fast.srtt, slow.srtt) else {
            // Without RTTs there is nothing to compare: do not idle capacity.
            self.waiting = false;
            out.push(slow.id);
            return;
        };
        let k = pkt.queued_pkts.max(1) as f64;
        let cwnd_f = f64::from(fast.cwnd_pkts.max(1));
        let cwnd_s = f64::from(slow.cwnd_pkts.max(1));
        let delta = secs(fast.rttvar.max(slow.rttvar));
        let n = 1.0 + k / cwnd_f;
        let hysteresis = if self.waiting { 1.0 + BETA } else { 1.0 };
        if n * secs(rtt_f) < hysteresis * (secs(rtt_s) + delta) {
            if (k / cwnd_s) * secs(rtt_s) >= 2.0 * secs(rtt_f) + delta {
                // Waiting for the fast path completes the queue sooner.
                self.waiting = true;
                return;
            }
        } else {
            self.waiting = false;
        }
        out.push(slow.id);
    }
}
