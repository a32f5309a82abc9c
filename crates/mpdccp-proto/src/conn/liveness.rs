//! Path and connection life cycle: closing, failing and dropping subflows,
//! keepalive / path expiry / idle timeout, forgetting closed subflows.

use super::{
    ConnState, ConnTimer, Connection, Event, Fired, ResetCode, Role, Segment, SubState, Subflow,
    TimerCtx, TimerSink,
};
use crate::path::{priority, PathId};
use crate::time::Instant;
use std::time::Duration;

/// How long an authenticated connection without any subflow waits for one
/// to rejoin when no idle timeout is configured.
pub const ORPHAN_LINGER: Duration = Duration::from_secs(30);

impl Connection {
    /// Closes subflow `i` at once, without a handshake (its address is
    /// gone or it is silent): queued packets go back to the connection
    /// queue, every timer of it stops, `PathClosed` is reported once.
    pub(super) fn drop_subflow(&mut self, now: Instant, i: usize) {
        self.reinject(i);
        if self.paths[i].drop_now(now) {
            self.events.push_back(Event::PathClosed(self.paths[i].id()));
        }
    }

    /// Starts closing subflow `i` (RFC 4340 §8.3).
    pub(super) fn begin_subflow_close(&mut self, now: Instant, i: usize) {
        let server = self.role == Role::Server;
        let rto = self.config.lifetime.handshake_rto;
        if self.paths[i].begin_close(now, server, rto) {
            self.events.push_back(Event::PathClosed(self.paths[i].id()));
        }
    }

    /// Subflow `i` failed (answering `reset` if the peer knows it): its
    /// packets go back to the connection queue.
    pub(super) fn fail_path(&mut self, i: usize, reset: Option<ResetCode>) {
        self.paths[i].fail(reset);
        self.reinject(i);
        self.events.push_back(Event::PathFailed(self.paths[i].id()));
    }

    /// Join `new` opened between the same two addresses as subflow `old`
    /// (the driver knows the addresses: `Endpoint::identify_paths`). In
    /// the authenticated modes the join's MP_HMAC proves the peer made it,
    /// so if the peer has sent nothing on `old` since `new` began, it
    /// abandoned `old` (a forged Reset closed its half) and
    /// replaced it: RFC 9897 §3.2.2 keeps one subflow per path (the
    /// Address ID is there "to prevent setting up duplicate subflows on
    /// the same path"). `old` is closed at once, without a handshake (the
    /// peer's socket for it is gone), its packets back to the connection
    /// queue — rather than used until its RTOs fail it and then holding a
    /// `max_paths` slot until it expires. Should the peer still use it
    /// (two paths behind one NAT address), its next packet there draws a
    /// Reset "No Connection" and that path rejoins. Returns whether `old`
    /// was retired.
    pub fn retire_replaced(&mut self, new: PathId, old: PathId) -> bool {
        self.blocked_none = None;
        let (Some(n), Some(o)) = (self.idx(new), self.idx(old)) else {
            return false;
        };
        let (joined, stale) = (&self.paths[n], &self.paths[o]);
        if n == o
            || !self.is_authenticated_mode()
            || !joined.is_join()
            || !joined.is_usable()
            || !stale.is_usable()
            || stale.last_rx_at() >= joined.started_at()
        {
            return false;
        }
        let now = self.last_now;
        self.drop_subflow(now, o);
        self.stats.paths.paths_replaced += 1;
        true
    }

    /// Asks the peer for a sign of life on every open subflow now: a Sync,
    /// which the peer answers with a SyncAck (RFC 4340 §7.5.4) whether or
    /// not it has data to send. For a driver that saw the connection go
    /// quiet and wants to know, sooner than the keepalive, whether the
    /// peer is still there; the driver bounds how often it asks. It also
    /// restarts each subflow's keepalive wait. Returns the subflows
    /// probed (none unless the connection is established).
    pub fn probe_paths(&mut self, now: Instant) -> usize {
        self.blocked_none = None;
        if self.life.state() != ConnState::Established {
            return 0;
        }
        let mut probed = 0;
        for sf in self.paths.iter_mut().filter(|sf| sf.is_open()) {
            sf.send_keepalive(now);
            probed += 1;
        }
        self.stats.traffic.keepalives_sent += probed as u64;
        probed
    }

    pub(super) fn check_closed(&mut self) {
        match self.life.state() {
            ConnState::Closing => {
                if self.paths.iter().all(|p| p.is_gone()) {
                    self.finish_close();
                }
            }
            ConnState::Handshaking => {
                // Every subflow attempt died before the connection opened.
                if self.life.ever_had_path()
                    && self.paths.iter().all(|p| p.state() == SubState::Closed)
                {
                    self.life.default_reason("handshake failed");
                    self.finish_close();
                }
            }
            ConnState::Established => {
                let all_gone = self.life.ever_had_path() && self.paths.iter().all(|p| p.is_gone());
                if all_gone && self.is_authenticated_mode() {
                    // The Reset, Close or option error that ended the last
                    // subflow may come from an on-path forger: only an
                    // MP_HMAC'd MP_CLOSE / MP_FAST_CLOSE or silence ends an
                    // authenticated connection. Its paths rejoin (joins are
                    // authenticated); the idle timeout ends it otherwise.
                    self.life.orphan(self.last_now);
                    return;
                }
                // All subflows gone for good: nothing can carry data any more.
                if all_gone {
                    self.life.default_reason("all subflows closed");
                    self.finish_close();
                }
            }
            ConnState::Closed => {}
        }
    }

    /// Forgets subflows that are closed and owe nothing: at once those
    /// that died before ever opening (refused or timed-out handshakes:
    /// forged Requests leave no state), after `closed_path_linger` the
    /// others, so a path that went down and rejoined as a new subflow does
    /// not hold a slot (nor scheduler/reorder state) for ever. Confirmed
    /// or abandoned withdrawals are forgotten too.
    pub(super) fn reap(&mut self) {
        let now = self.last_now;
        let linger = self.config.lifetime.closed_path_linger;
        for p in &mut self.paths {
            p.note_closed(now);
        }
        let before = self.paths.len();
        let mut reaped = 0;
        self.paths.retain(|p| {
            let announced = p.announced();
            let forget = p.owes_nothing() && (!announced || p.closed_for_at_least(now, linger));
            if forget && announced {
                reaped += 1;
            }
            !forget
        });
        self.stats.paths.paths_reaped += reaped;
        if self.paths.len() != before {
            self.rr_next = 0;
        }
        self.addrs.adverts.retain(|a| !(a.remove && a.confirmed));
    }

    /// RFC 9897 §3.2.9: the peer withdrew address `addr_id`; every
    /// subflow bound to it is closed at once (the address is gone, so no
    /// closing handshake could complete).
    pub(super) fn close_paths_of_address(&mut self, now: Instant, addr_id: u8) {
        for j in 0..self.paths.len() {
            let p = &self.paths[j];
            if p.remote_addr_id() == addr_id && !p.is_gone() {
                self.drop_subflow(now, j);
                self.stats.paths.paths_removed_by_peer += 1;
            }
        }
    }

    /// Keepalives, path expiry and the connection idle timeout (each only
    /// when configured). A path expires only when another was heard from
    /// more recently, so the most recently heard path is never expired by
    /// this rule (and its timer never stays armed in the past).
    pub(super) fn check_liveness(&mut self, now: Instant) {
        if self.life.state() != ConnState::Established {
            return;
        }
        if self.idle_deadline().is_some_and(|at| at <= now) {
            let t = self.config.lifetime.idle_timeout.unwrap_or_default();
            self.stats.paths.idle_timeouts += 1;
            self.life
                .set_reason(format!("idle timeout ({t:?} without a packet)"));
            self.discard_queue();
            for i in 0..self.paths.len() {
                self.drop_subflow(now, i);
            }
            self.finish_close();
            return;
        }
        for i in 0..self.paths.len() {
            if self.expiry_due(i).is_some_and(|at| at <= now) {
                self.drop_subflow(now, i);
                self.stats.paths.paths_expired += 1;
            }
        }
        if let Some((i, at)) = self.stall_due() {
            if at <= now {
                self.paths[i].fail_stalled(now);
                self.stats.paths.standby_takeovers += 1;
                self.events.push_back(Event::PathFailed(self.paths[i].id()));
                self.reinject(i);
            }
        }
        if let Some(k) = self.config.lifetime.rtt_probe_interval {
            for sf in &mut self.paths {
                if sf.rtt_probe_due(k).is_some_and(|at| at <= now) {
                    sf.send_rtt_probe(now);
                    self.stats.traffic.rtt_probes_sent += 1;
                }
            }
        }
        if let Some(k) = self.config.lifetime.keepalive_interval {
            for sf in &mut self.paths {
                if sf.keepalive_due(k).is_some_and(|at| at <= now) {
                    sf.send_keepalive(now);
                    self.stats.traffic.keepalives_sent += 1;
                }
            }
        }
    }

    /// When the connection closes for `idle_timeout` of silence on every
    /// live subflow, or (authenticated modes) after that long without any
    /// subflow ([`ORPHAN_LINGER`] without an idle timeout).
    fn idle_deadline(&self) -> Option<Instant> {
        if let Some(at) = self.life.orphaned_at() {
            return Some(at + self.config.lifetime.idle_timeout.unwrap_or(ORPHAN_LINGER));
        }
        let idle = self.config.lifetime.idle_timeout?;
        self.paths
            .iter()
            .filter(|p| !p.is_gone())
            .map(|p| p.last_rx_at() + idle)
            .max()
    }

    /// When subflow `i` expires under `path_idle_timeout`, if it can.
    pub(super) fn expiry_due(&self, i: usize) -> Option<Instant> {
        let t = self.config.lifetime.path_idle_timeout?;
        let sf = &self.paths[i];
        if !matches!(sf.state(), SubState::Open | SubState::PartOpen) {
            return None;
        }
        let heard = sf.last_rx_at();
        let newer = self
            .paths
            .iter()
            .any(|p| p.id() != sf.id() && !p.is_gone() && p.last_rx_at() > heard);
        newer.then(|| heard + t)
    }

    /// A standby path carries nothing while a better one is
    /// usable (`sched::standby_excluded`), so when the only usable
    /// non-standby path stops being acknowledged, nothing gets through
    /// until it is declared failed. Its RTO (at least 200 ms) is too slow
    /// for that: with a usable standby path waiting, the path is given up
    /// once it stalls ([`Subflow::stall_deadline`], about 2 srtt), and
    /// comes back with the next acknowledgement or probe answer. Returns
    /// the stalled path's index and the deadline.
    pub(super) fn stall_due(&self) -> Option<(usize, Instant)> {
        let standby =
            |p: &Subflow| p.is_usable() && (1..=priority::STANDBY).contains(&p.priority());
        if !self.negotiation.is_multipath() || !self.paths.iter().any(standby) {
            return None;
        }
        let mut better = (0..self.paths.len())
            .filter(|&i| self.paths[i].is_usable() && self.paths[i].priority() > priority::STANDBY);
        let i = better.next()?;
        if better.next().is_some() {
            return None;
        }
        let at = self.paths[i].stall_deadline(self.config.ack.delay)?;
        Some((i, at))
    }

    /// Timers of [`Connection::check_liveness`], for `poll_timeout`.
    pub(super) fn liveness_timers(&self, table: &mut impl TimerSink) {
        if self.life.state() != ConnState::Established {
            return;
        }
        // In plain loops: asked after every event, and a chain of
        // optional iterators cost more than all the tests.
        table.merge(ConnTimer::Idle, self.idle_deadline());
        if let Some(k) = self.config.lifetime.rtt_probe_interval {
            for sf in &self.paths {
                table.merge(ConnTimer::RttProbe, sf.rtt_probe_due(k));
            }
        }
        table.merge(ConnTimer::Stall, self.stall_due().map(|(_, at)| at));
        if self.config.lifetime.path_idle_timeout.is_some() {
            for i in 0..self.paths.len() {
                table.merge(ConnTimer::PathExpiry, self.expiry_due(i));
            }
        }
        if let Some(k) = self.config.lifetime.keepalive_interval {
            for sf in &self.paths {
                table.merge(ConnTimer::Keepalive, sf.keepalive_due(k));
            }
        }
    }

    pub(super) fn finish_close(&mut self) {
        let announce = self.life.finish();
        self.discard_queue();
        if let Some(reason) = announce {
            self.events.push_back(Event::Closed { reason });
        }
    }

    /// MP_CLOSE (RFC 9897 §3.2.11) with our key closes the whole connection.
    pub(super) fn handle_close_key(&mut self, seg: &Segment<'_>) {
        if let Some(k) = seg.mp.close {
            if self.ident.is_our_close_key(k) {
                // §3.2.11: "When a DCCP-CloseReq is used, the following
                // DCCP-Close MUST also carry the MP_CLOSE".
                if self.life.peer_closed(self.negotiation.is_multipath()) {
                    self.discard_queue();
                }
            } else {
                self.stats.auth.bad_close_key += 1;
            }
        }
    }

    /// Fires the expired timers of subflow `i` and carries out what they
    /// ask of the connection.
    pub(super) fn subflow_timers(&mut self, now: Instant, i: usize) {
        let id = self.paths[i].id();
        // With a usable backup path a failing one is given up sooner —
        // unless every packet goes out on every path anyway (redundant).
        let backup_up = !self.scheduler.duplicates_every_packet()
            && self
                .paths
                .iter()
                .any(|p| p.id() != id && p.is_usable() && p.priority() != 0);
        let ctx = TimerCtx {
            max_tries: self.config.lifetime.max_handshake_tries,
            fail_after_rtos: if backup_up {
                self.config.loss.fail_after_rtos_with_backup
            } else {
                self.config.loss.fail_after_rtos
            },
            max_probe_interval: self.config.loss.max_probe_interval,
            first_probe_at_base_rto: self.config.loss.first_probe_at_base_rto,
        };
        let first = !self.paths[i].is_join();
        match self.paths[i].handle_timeout(now, &ctx) {
            None => {}
            Some(Fired::HandshakeTimedOut(reset)) => {
                self.stats.paths.handshake_timeouts += 1;
                self.fail_path(i, reset);
                if first && self.life.state() == ConnState::Handshaking {
                    self.life.set_reason("handshake timed out");
                }
            }
            Some(Fired::RespondTimedOut) => self.stats.paths.respond_timeouts += 1,
            Some(Fired::CloseTimedOut) if self.paths[i].report_closed() => {
                self.events.push_back(Event::PathClosed(id));
            }
            Some(Fired::CloseTimedOut) => {}
            Some(Fired::PathFailed) => {
                self.events.push_back(Event::PathFailed(id));
                self.reinject(i);
            }
        }
    }
}
