//! `handover` — one active path at a time (RFC 9897 path mobility; 3GPP
//! ATSSS "active-standby", TS 23.501 §5.32.8).
//!
//! The active path is the usable path with the highest MP_PRIO (ties: lower
//! SRTT, then lower `PathId`). It stays active while it is usable; when it
//! fails (state leaves Active, MP_PRIO 0, or it disappears) the next best takes
//! over at once. When a path better than the active one becomes usable again
//! — the preferred path returning after an outage — traffic switches back,
//! after it has stayed usable for `handover_switch_back_delay` (hysteresis
//! against a flapping link; zero = immediately).
//!
//! No spill: while the active path's window is full the packet waits.

use std::time::Duration;

use super::cpf::better;
use super::{PacketMeta, Scheduler};
use crate::path::{PathId, PathView};
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct Handover {
    switch_back_delay: Duration,
    active: Option<PathId>,
    /// A better path than `active` and when it was first seen usable.
    candidate: Option<(PathId, Instant)>,
    switches: u64,
}

impl Handover {
    pub fn new(switch_back_delay: Duration) -> Self {
        Handover {
            switch_back_delay,
            active: None,
            candidate: None,
            switches: 0,
        }
    }

    /// The path currently carrying traffic.
    pub fn active(&self) -> Option<PathId> {
        self.active
    }

    /// Number of times the active path changed (the first pick excluded).
    pub fn switches(&self) -> u64 {
        self.switches
    }

    fn switch_to(&mut self, id: Option<PathId>) {
        if self.active.is_some() && id.is_some() && self.active != id {
            self.switches += 1;
        }
        self.active = id;
        self.candidate = None;
    }

    /// Update the active path from the current views.
    fn update(&mut self, now: Instant, paths: &[PathView]) {
        let best = paths
            .iter()
            .filter(|p| p.is_usable())
            .fold(None::<&PathView>, |b, p| match b {
                Some(b) if !better(p, b) => Some(b),
                _ => Some(p),
            });
        let Some(best) = best else {
            // Nothing usable: keep the last choice so it resumes when it returns.
            self.candidate = None;
            return;
        };
        let current = self
            .active
            .and_then(|id| paths.iter().find(|p| p.id == id))
            .filter(|p| p.is_usable());
        match current {
            // The active path failed (or none was chosen yet): switch at once.
            None => self.switch_to(Some(best.id)),
            Some(cur) if cur.id == best.id => self.candidate = None,
            Some(cur) => {
                // Switch back only to a strictly higher priority (a lower RTT
                // alone is no reason to move everything).
                if best.priority <= cur.priority {
                    self.candidate = None;
                    return;
                }
                let since = match self.candidate {
                    Some((id, t)) if id == best.id => t,
                    _ => {
                        self.candidate = Some((best.id, now));
                        now
                    }
                };
                if now.saturating_duration_since(since) >= self.switch_back_delay {
                    self.switch_to(Some(best.id));
                }
            }
        }
    }
}

impl Scheduler for Handover {
    fn name(&self) -> &'static str {
        "handover"
    }

    fn select(
        &mut self,
        now: Instant,
        _pkt: &PacketMeta,
        paths: &[PathView],
        out: &mut Vec<PathId>,
    ) {
        self.update(now, paths);
        if let Some(p) = self
            .active
            .and_then(|id| paths.iter().find(|p| p.id == id))
            .filter(|p| p.can_send(now))
        {
            out.push(p.id);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // Wake the connection when a pending switch-back becomes due.
        self.candidate.map(|(_, t)| t + self.switch_back_delay)
    }
}
