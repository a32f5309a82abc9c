//! The subflow's timer table: one enum of timers, one deadline each.
//!
//! [`Subflow::deadline`] is the only place a timer's arming condition is
//! written; `poll_timeout` is the minimum of the deadlines and
//! `handle_timeout` fires exactly the expired ones. Every fired timer is
//! stopped, re-armed in the future, or turned into a pending packet that the
//! next `poll_transmit` sends, so a deadline that `handle_timeout` has seen
//! is never reported again. The connection-level deadlines beside this table
//! (`Connection::poll_timeout`) keep the same rule, so the daemon's driver
//! sleeps on the deadline with no spin guard (`tests/proto/conn/timer_invariant.rs`
//! tests the rule).

use super::{ResetCode, SubState, Subflow, SEQ_MASK};
use crate::time::Instant;
use std::time::Duration;

/// The timers of one subflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Request / Ack-in-PARTOPEN / Close / CloseReq retransmission and the
    /// RESPOND give-up (RFC 4340 §8.1.1, §8.1.3, §8.3).
    Retx,
    /// CCID2 retransmission timeout (RFC 4341 §5), while data is in flight.
    Rto,
    /// Delayed acknowledgement (Ack Ratio not reached yet).
    AckDue,
    /// Sync probe of a failed path (its SyncAck revives it).
    Probe,
    /// End of TIMEWAIT (RFC 4340 §8.3).
    TimeWait,
    /// MP_PRIO retransmission until MP_CONFIRM (RFC 9897 §3.2.10).
    PrioRetx,
}

impl Timer {
    /// Every timer, in the order one `handle_timeout` fires them.
    pub(crate) const ALL: [Timer; 6] = [
        Timer::Retx,
        Timer::Rto,
        Timer::AckDue,
        Timer::Probe,
        Timer::TimeWait,
        Timer::PrioRetx,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// One deadline per [`Timer`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TimerTable([Option<Instant>; Timer::ALL.len()]);

impl TimerTable {
    pub(crate) fn get(&self, t: Timer) -> Option<Instant> {
        self.0[t.index()]
    }
    pub(crate) fn set(&mut self, t: Timer, at: Option<Instant>) {
        self.0[t.index()] = at;
    }
    pub(crate) fn arm(&mut self, t: Timer, at: Instant) {
        self.set(t, Some(at));
    }
    pub(crate) fn stop(&mut self, t: Timer) {
        self.set(t, None);
    }
}

/// What the connection supplies to fire a subflow's timers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimerCtx {
    /// Handshake and close retransmissions before giving up.
    pub max_tries: u32,
    /// Consecutive RTOs after which the path is marked failed.
    pub fail_after_rtos: u32,
    /// Longest interval between Sync probes of a failed path.
    pub max_probe_interval: Duration,
    /// `LossConfig::first_probe_at_base_rto`.
    pub first_probe_at_base_rto: bool,
}

/// A fired timer that the connection must act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fired {
    /// Request or PARTOPEN retransmissions exhausted: the subflow failed
    /// (answered with this Reset, if any).
    HandshakeTimedOut(Option<ResetCode>),
    /// A server's RESPOND state timed out (the subflow is closed).
    RespondTimedOut,
    /// Close / CloseReq retransmissions exhausted (the subflow is closed).
    CloseTimedOut,
    /// Repeated RTOs: the path is now failed (probed until it answers).
    PathFailed,
}

impl Subflow {
    /// When timer `t` fires, if it is armed. The one place each timer's
    /// condition is written.
    pub(crate) fn deadline(&self, t: Timer) -> Option<Instant> {
        let at = self.timers.get(t)?;
        let armed = match t {
            Timer::Rto => self.tx.pipe > 0,
            Timer::Probe => self.failed && self.is_open(),
            Timer::PrioRetx => self.pend.prio.is_some(),
            Timer::Retx | Timer::AckDue | Timer::TimeWait => true,
        };
        armed.then_some(at)
    }

    /// Timer `t` is armed and due at `now`.
    pub(crate) fn expired(&self, t: Timer, now: Instant) -> bool {
        self.deadline(t).is_some_and(|at| at <= now)
    }

    /// The earliest deadline of the table, and the pacer's next release
    /// while data waits for it (`backlog`: the connection's queue is not
    /// empty). A release at or before `last_now` is sendable already and
    /// needs no timer.
    pub(crate) fn poll_timeout(&self, backlog: bool, last_now: Instant) -> Option<Instant> {
        let table = Timer::ALL.iter().filter_map(|&t| self.deadline(t)).min();
        let release = ((backlog || !self.queue.is_empty())
            && self.tx.cc.pacing_rate_bytes_per_s().is_some()
            && self.is_open()
            && self.cwnd_room()
            && self.tx.next_send_at > last_now)
            .then_some(self.tx.next_send_at);
        match (table, release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the expired timers in [`Timer::ALL`] order. A timer that ends
    /// the subflow stops the others that are due (they would act on a
    /// subflow that no longer exists).
    pub(crate) fn handle_timeout(&mut self, now: Instant, ctx: &TimerCtx) -> Option<Fired> {
        let mut report = None;
        for t in Timer::ALL {
            if !self.expired(t, now) {
                continue;
            }
            match self.fire(t, now, ctx) {
                Some(Fired::PathFailed) => report = Some(Fired::PathFailed),
                Some(end) => {
                    for rest in Timer::ALL {
                        if self.expired(rest, now) {
                            self.timers.stop(rest);
                        }
                    }
                    return Some(end);
                }
                None => {}
            }
        }
        report
    }

    fn fire(&mut self, t: Timer, now: Instant, ctx: &TimerCtx) -> Option<Fired> {
        match t {
            Timer::Retx => return self.fire_retx(ctx),
            Timer::Rto => {
                if self.on_rto(now, ctx.fail_after_rtos.max(1), ctx.first_probe_at_base_rto) {
                    return Some(Fired::PathFailed);
                }
            }
            Timer::AckDue => {
                self.acks.ack_now = true;
                self.timers.stop(Timer::AckDue);
            }
            Timer::Probe => {
                self.pend.sync = Some(self.seq.gsr & SEQ_MASK);
                let next = self.rto().min(ctx.max_probe_interval);
                self.timers.arm(Timer::Probe, now + next);
            }
            Timer::TimeWait => {
                self.timers.stop(Timer::TimeWait);
                self.state = SubState::Closed;
            }
            Timer::PrioRetx => {
                // The next packet on this subflow carries MP_PRIO again.
                self.pend.prio_due = true;
                self.timers.stop(Timer::PrioRetx);
            }
        }
        None
    }

    /// Handshake / close retransmission: the packet is owed (sent by the
    /// next `poll_transmit`, which re-arms the timer), or the tries are
    /// exhausted.
    fn fire_retx(&mut self, ctx: &TimerCtx) -> Option<Fired> {
        self.timers.stop(Timer::Retx);
        let exhausted = self.hs.tries >= ctx.max_tries;
        match self.state {
            SubState::Request | SubState::PartOpen if exhausted => {
                let reset = (self.state == SubState::PartOpen).then_some(ResetCode::Aborted);
                return Some(Fired::HandshakeTimedOut(reset));
            }
            SubState::Request => self.pend.request = true,
            SubState::PartOpen => self.pend.handshake_ack = true,
            SubState::Respond => {
                // RFC 4340 §8.1.3: give up on a handshake that never
                // completed (spoofed Requests hold no state for long).
                self.state = SubState::Closed;
                self.pend = Default::default();
                return Some(Fired::RespondTimedOut);
            }
            SubState::Closing | SubState::CloseReq if exhausted => {
                self.state = SubState::Closed;
                return Some(Fired::CloseTimedOut);
            }
            SubState::Closing => self.pend.close = true,
            SubState::CloseReq => self.pend.closereq = true,
            SubState::Open | SubState::TimeWait | SubState::Closed => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::conn::subflow::{PendingCtrl, SubState, Subflow};
    use crate::conn::{ConnectionConfig, PathConfig};
    use crate::path::PathId;
    use crate::time::Instant;
    use crate::wire::ResetCode;

    use super::{Fired, Timer, TimerCtx};

    const STATES: [SubState; 8] = [
        SubState::Request,
        SubState::Respond,
        SubState::PartOpen,
        SubState::Open,
        SubState::CloseReq,
        SubState::Closing,
        SubState::TimeWait,
        SubState::Closed,
    ];

    fn subflow(state: SubState) -> Subflow {
        let conf = ConnectionConfig::default();
        let cc = crate::cc::ControllerFactory::build(&crate::cc::CcKind::Ccid2, &conf.cc_config);
        let mut sf = Subflow::new(PathId(0), PathConfig::default(), 1000, cc, &conf);
        sf.state = state;
        sf.seq.have_isr = true;
        sf
    }

    /// Whatever the state, a deadline `handle_timeout(now)` has
    /// seen is not reported again — every timer armed in the past at once
    /// (one packet in flight, MP_PRIO pending, a failed path probed), with
    /// retransmissions left and exhausted.
    #[test]
    fn a_handled_deadline_is_never_reported_again() {
        let ctx = TimerCtx {
            max_tries: 3,
            fail_after_rtos: 1,
            max_probe_interval: Duration::from_secs(1),
            first_probe_at_base_rto: false,
        };
        let past = Instant::from_millis(500);
        let now = Instant::from_millis(1000);
        for state in STATES {
            for (tries, failed) in [(0, false), (5, true)] {
                let mut sf = subflow(state);
                sf.hs.tries = tries;
                sf.failed = failed;
                let seq = sf.next_seq();
                sf.on_data_sent(Instant::from_millis(10), seq, 1000, false);
                sf.pend.prio = Some(1);
                for t in Timer::ALL {
                    sf.timers.arm(t, past);
                    assert!(sf.deadline(t).is_none_or(|d| d == past));
                }
                assert!(sf.poll_timeout(false, now).is_some_and(|t| t <= now));
                sf.handle_timeout(now, &ctx);
                let next = sf.poll_timeout(false, now);
                assert!(
                    next.is_none_or(|t| t > now),
                    "{state:?}, {tries} tries: still due at {next:?}"
                );
            }
        }
    }

    #[test]
    fn a_fired_retransmission_becomes_the_next_packet() {
        let ctx = TimerCtx {
            max_tries: 3,
            fail_after_rtos: 3,
            max_probe_interval: Duration::from_secs(1),
            first_probe_at_base_rto: false,
        };
        let now = Instant::from_millis(1000);
        for (state, owed) in [
            (
                SubState::Request,
                (|p: &PendingCtrl| p.request) as fn(&PendingCtrl) -> bool,
            ),
            (SubState::PartOpen, |p| p.handshake_ack),
            (SubState::Closing, |p| p.close),
            (SubState::CloseReq, |p| p.closereq),
        ] {
            let mut sf = subflow(state);
            sf.timers.arm(Timer::Retx, now);
            assert_eq!(sf.handle_timeout(now, &ctx), None);
            assert!(owed(&sf.pend), "{state:?}");
            assert_eq!(sf.deadline(Timer::Retx), None);
        }
        // Exhausted: the handshake fails (PARTOPEN answers with Reset).
        let mut sf = subflow(SubState::PartOpen);
        sf.hs.tries = 3;
        sf.timers.arm(Timer::Retx, now);
        assert_eq!(
            sf.handle_timeout(now, &ctx),
            Some(Fired::HandshakeTimedOut(Some(ResetCode::Aborted)))
        );
    }
}
