//! The connection's deadline table: one entry per kind of deadline, the
//! subflows' own timer tables (`subflow/timers.rs`) merged into one entry.
//! [`Connection::poll_timeout`](super::Connection::poll_timeout) is the
//! earliest entry; [`Connection::next_timer`](super::Connection::next_timer)
//! also names it, so a driver or a test can tell which deadline it wakes
//! for.
//!
//! The entries are computed from the state they guard when asked (a
//! deadline is never stored apart from what it depends on, so none can be
//! left armed by mistake): idle and orphan end, idle-path RTT probes,
//! stall hand-over, path expiry and keepalive (`liveness.rs`), address
//! advert retransmission (`adverts.rs`), PLPMTU probes (`plpmtu.rs`), the
//! reorderer's hold and the scheduler's wake-up (only while data waits).

use crate::time::Instant;

/// Each kind of deadline a connection has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ConnTimer {
    /// The earliest timer of any subflow (handshake/close retransmission,
    /// RTO, delayed ack, probe, TIMEWAIT, MP_PRIO; pacing while data waits).
    Subflow,
    /// MP_ADDADDR / MP_REMOVEADDR retransmission.
    Advert,
    /// `idle_timeout` of the connection, or the end of an orphaned one.
    Idle,
    /// `rtt_probe_interval`: an idle path's RTT probe.
    RttProbe,
    /// A path with data in flight stalled while a standby waits.
    Stall,
    /// `path_idle_timeout`: a silent subflow expires.
    PathExpiry,
    /// `keepalive_interval`: a silent subflow is probed.
    Keepalive,
    /// DPLPMTUD probe or raise timer (RFC 8899).
    Plpmtu,
    /// The reorderer's hold of a packet waiting for a gap.
    Reorder,
    /// The scheduler's own wake-up, while packets wait.
    Scheduler,
}

impl ConnTimer {
    pub const ALL: [ConnTimer; 10] = [
        ConnTimer::Subflow,
        ConnTimer::Advert,
        ConnTimer::Idle,
        ConnTimer::RttProbe,
        ConnTimer::Stall,
        ConnTimer::PathExpiry,
        ConnTimer::Keepalive,
        ConnTimer::Plpmtu,
        ConnTimer::Reorder,
        ConnTimer::Scheduler,
    ];
}

/// What `Connection::collect_timers` offers every deadline source to:
/// the full table ([`TimerTable`]) or only its earliest entry
/// ([`Earliest`], for `poll_timeout`, asked after every event).
pub(crate) trait TimerSink {
    /// Offers one source of kind `t` (`None`: not armed).
    fn merge(&mut self, t: ConnTimer, at: Option<Instant>);
}

/// The earliest deadline offered, whatever its kind: the minimum of
/// every entry of the [`TimerTable`] the same sources would fill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Earliest(pub(crate) Option<Instant>);

impl TimerSink for Earliest {
    fn merge(&mut self, _t: ConnTimer, at: Option<Instant>) {
        if let Some(at) = at {
            self.0 = Some(self.0.map_or(at, |e| e.min(at)));
        }
    }
}

/// One deadline per [`ConnTimer`], filled in by `Connection::collect_timers`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TimerTable {
    at: [Option<Instant>; ConnTimer::ALL.len()],
}

impl TimerSink for TimerTable {
    /// Lowers `t`'s entry to `at` (an entry is the earliest of its sources).
    fn merge(&mut self, t: ConnTimer, at: Option<Instant>) {
        if let Some(at) = at {
            let e = &mut self.at[t as usize];
            *e = Some(e.map_or(at, |e| e.min(at)));
        }
    }
}

impl TimerTable {
    #[cfg(test)]
    pub(crate) fn get(&self, t: ConnTimer) -> Option<Instant> {
        self.at[t as usize]
    }

    /// The earliest entry and its kind (the first kind in
    /// [`ConnTimer::ALL`] order on a tie).
    pub(crate) fn next(&self) -> Option<(ConnTimer, Instant)> {
        let mut best: Option<(ConnTimer, Instant)> = None;
        for t in ConnTimer::ALL {
            if let Some(at) = self.at[t as usize] {
                if best.is_none_or(|(_, b)| at < b) {
                    best = Some((t, at));
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use crate::time::Instant;

    use super::{ConnTimer, Earliest, TimerSink, TimerTable};

    #[test]
    fn the_earliest_entry_wins_and_is_named() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.merge(ConnTimer::Keepalive, Some(Instant::from_millis(50)));
        t.merge(ConnTimer::Keepalive, Some(Instant::from_millis(70)));
        t.merge(ConnTimer::Keepalive, None);
        assert_eq!(t.get(ConnTimer::Keepalive), Some(Instant::from_millis(50)));
        t.merge(ConnTimer::Reorder, Some(Instant::from_millis(20)));
        assert_eq!(
            t.next(),
            Some((ConnTimer::Reorder, Instant::from_millis(20)))
        );
        // A tie goes to the kind listed first.
        t.merge(ConnTimer::Subflow, Some(Instant::from_millis(20)));
        assert_eq!(
            t.next(),
            Some((ConnTimer::Subflow, Instant::from_millis(20)))
        );
    }

    #[test]
    fn earliest_is_the_tables_earliest_entry() {
        let offers = [
            (ConnTimer::Keepalive, Some(Instant::from_millis(50))),
            (ConnTimer::Subflow, None),
            (ConnTimer::Reorder, Some(Instant::from_millis(30))),
            (ConnTimer::Keepalive, Some(Instant::from_millis(20))),
            (ConnTimer::Advert, Some(Instant::from_millis(40))),
        ];
        let (mut table, mut earliest) = (TimerTable::default(), Earliest::default());
        assert_eq!(earliest.0, None);
        for (t, at) in offers {
            table.merge(t, at);
            earliest.merge(t, at);
            assert_eq!(earliest.0, table.next().map(|(_, at)| at));
        }
        assert_eq!(earliest.0, Some(Instant::from_millis(20)));
    }

    #[test]
    fn every_kind_has_its_own_slot() {
        for (i, k) in ConnTimer::ALL.into_iter().enumerate() {
            assert_eq!(k as usize, i);
        }
    }
}
