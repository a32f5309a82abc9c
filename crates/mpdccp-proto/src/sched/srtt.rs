//! `srtt` — lowest smoothed RTT among the paths with room (MPTCP's default
//! "minRTT" scheduler; 3GPP ATSSS "smallest delay", TS 23.501 §5.32.8).
//!
//! Ties on SRTT prefer the higher MP_PRIO, then the lower `PathId`. A path
//! without an RTT sample ranks after every path with one.

use super::{ready, srtt_rank, PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct MinSrtt;

impl MinSrtt {
    pub fn new() -> Self {
        MinSrtt
    }
}

impl Scheduler for MinSrtt {
    fn name(&self) -> &'static str {
        "srtt"
    }

    /// Stateless; picks among `ready`/`can_send` paths only.
    fn holds_unless_a_path_can_send(&self) -> bool {
        true
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        let ready = ready(paths, now);
        let key = |p: &PathView| (srtt_rank(p), std::cmp::Reverse(p.priority));
        let mut best: Option<&PathView> = None;
        for p in paths.iter().filter(|p| ready(p)) {
            if best.is_none_or(|b| key(p) < key(b)) {
                best = Some(p);
            }
        }
        if let Some(p) = best {
            out.push(p.id);
        }
    }
}
