//! What a subflow does with a packet on its own: the sequence checks
//! (RFC 4340 §7.5.3), its side of the handshake, Sync, Reset, Close and
//! CloseReq, and the state changes the connection asks for (open, fail,
//! close, drop).

use super::{ResetCode, SubState, Subflow, Timer, SEQ_MASK, SYNCACKS_OWED_MAX};
use crate::conn::codec::{ConfirmItem, MpJoin, MpRtt, Segment};
use crate::time::Instant;
use crate::wire::seq::extend_short;
use crate::wire::PacketType;
use std::time::Duration;

/// Shortest interval between two Syncs answering invalid packets.
const SYNC_RATE_LIMIT: Duration = Duration::from_millis(100);

/// MP_CONFIRM items owed at most (one packet carries four).
const MAX_CONFIRMS_OWED: usize = 8;

/// Verdict of [`Subflow::admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Outside the validity windows (answered with a Sync when allowed).
    Invalid,
    /// Valid; `ackn` is the unwrapped Acknowledgement Number.
    Valid { ackn: Option<u64>, duplicate: bool },
}

/// What a Reset did to the subflow (RFC 4340 §8.3, §8.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResetEffect {
    /// We were closing: TIMEWAIT until the timer ends it.
    TimeWait,
    /// Closed from this state.
    Closed(SubState),
}

impl Subflow {
    pub(crate) fn state(&self) -> SubState {
        self.state
    }

    /// A packet on a subflow that is closed here. A Close/CloseReq: the
    /// peer did not get our Reset; answer it once more (RFC 4340 §8.3).
    /// With `reset_strays` (the authenticated modes), anything else but a
    /// Reset is answered with Reset "No Connection" too (RFC 4340 §8.3.1):
    /// a peer that did not see its subflow end (a forged Reset closed it
    /// here) learns at its next packet and rejoins, instead of losing what
    /// it sends there until its retransmissions give up.
    pub(crate) fn answer_close_when_closed(
        &mut self,
        now: Instant,
        seg: &Segment<'_>,
        reset_strays: bool,
    ) {
        if reset_strays {
            self.life.stray_at = Some(now);
        }
        let code = match seg.ptype {
            PacketType::Close | PacketType::CloseReq => ResetCode::Closed,
            PacketType::Reset | PacketType::Request | PacketType::Response => return,
            _ if reset_strays => ResetCode::NoConnection,
            _ => return,
        };
        if self.seq.have_isr && self.pend.reset.is_none() {
            // Numbered from the packet it answers, as for a packet without
            // a connection (RFC 4340 §8.3.1: sequence = its ack + 1, ack =
            // its sequence); GSR stays. When a flood of mutated copies
            // moved GSR here to numbers the peer never sent and each answer
            // took a sequence number, the Resets acknowledged what the peer
            // never sent or ran past its window; it found them invalid
            // (§7.5.3) and kept its half of the subflow failing, never
            // rejoining.
            let (wseq, wack) = if seg.short_seq {
                (
                    extend_short(seg.seq, self.seq.gsr & SEQ_MASK),
                    seg.ack.map(|a| extend_short(a, self.seq.gss & SEQ_MASK)),
                )
            } else {
                (seg.seq, seg.ack)
            };
            self.pend.reset_answer = Some((wseq, wack.map(|a| a.wrapping_add(1) & SEQ_MASK)));
            self.pend.reset = Some(code);
        }
    }

    /// Sequence and acknowledgement validity (RFC 4340 §7.5.3; X=0 numbers
    /// extended first, §7.6). An invalid packet is answered with a Sync
    /// (rate-limited; never to Sync/SyncAck, §7.5.4). A valid one counts
    /// for liveness and is recorded for the Ack Vector.
    pub(crate) fn admit(&mut self, now: Instant, seg: &Segment<'_>) -> Admit {
        let (wseq, wack) = if seg.short_seq {
            (
                extend_short(seg.seq, self.seq.gsr & SEQ_MASK),
                seg.ack.map(|a| extend_short(a, self.seq.gss & SEQ_MASK)),
            )
        } else {
            (seg.seq, seg.ack)
        };
        let seqn = self.unwrap_seq(wseq);
        let ackn = wack.map(|a| self.unwrap_ack(a));
        let (swl, swh) = self.seq_window();
        let (awl, awh) = self.ack_window();
        let ack_ok = |lo: u64| ackn.is_none_or(|a| a >= lo && a <= awh);
        let valid = match seg.ptype {
            PacketType::CloseReq | PacketType::Close | PacketType::Reset => {
                seqn > self.seq.gsr && seqn <= swh && ack_ok(self.seq.gar.max(awl))
            }
            PacketType::Sync | PacketType::SyncAck => seqn >= swl && ack_ok(awl),
            PacketType::Request => seqn >= swl && seqn <= swh,
            _ => seqn >= swl && seqn <= swh && ack_ok(awl),
        };
        // An on-path forger knows the numbers, so an in-window
        // forgery (a Sync far ahead, Acks taking the peer's next numbers)
        // could move GSR past everything the peer sends: its packets were
        // then below SWL, or our Acks acknowledged numbers it never sent
        // and it dropped them, and the path stayed dead until it failed.
        //
        // A Sync beyond SWH is valid (RFC 4340 §7.5.1 checks only SWL for
        // it, and its Ack Number) and is answered, but does not move GSR
        // here. A peer really that far ahead resynchronises us with its
        // SyncAck to the Sync its next packet draws (§7.5.4).
        if valid && seg.ptype == PacketType::Sync && seqn > swh {
            return Admit::Valid {
                ackn,
                duplicate: false,
            };
        }
        // A valid Sync carries the peer's newest sequence number (its GSS,
        // §7.5.4): one below our GSR says that the numbers above were
        // never the peer's. Forget them.
        if valid && seg.ptype == PacketType::Sync && seqn < self.seq.gsr {
            self.seq.gsr = seqn;
            self.acks.rx.rewind(seqn);
        }
        // A SyncAck that acknowledges exactly our latest Sync is the peer's
        // answer (RFC 4340 §7.5.4): its sequence number is where the peer
        // is, even below SWL when a forged in-window packet moved GSR ahead
        // of everything it sends ("Acks taking the next sequence numbers").
        // Resynchronise to it, back if need be.
        let resync = !valid
            && seg.ptype == PacketType::SyncAck
            && seqn < swl
            && seqn >= self.seq.isr
            && ackn.is_some()
            && self.hs.sync_probe.map(|(s, _)| s) == ackn;
        if resync {
            self.seq.gsr = seqn;
            self.acks.rx.rewind(seqn);
        }
        if !valid && !resync {
            let limited = self
                .hs
                .last_sync_sent
                .is_some_and(|t| now - t < SYNC_RATE_LIMIT);
            if !matches!(seg.ptype, PacketType::Sync | PacketType::SyncAck) && !limited {
                self.pend.sync = Some(seg.seq);
            }
            return Admit::Invalid;
        }
        // Liveness: only packets that passed the validity checks count.
        self.life.last_rx_at = self.life.last_rx_at.max(now);
        let duplicate = !self.on_packet_received(now, seqn);
        Admit::Valid { ackn, duplicate }
    }

    /// A data packet with a sequence number already received: dropped,
    /// but acknowledged at once, as TCP acknowledges a duplicate segment
    /// (RFC 9293 §3.10.7.4). Its sender may be waiting for that
    /// acknowledgement on an otherwise idle path: when a forged packet
    /// took the number first, the genuine packet is the
    /// duplicate, and without an Ack its sender's retransmission timer
    /// failed the path. At most one Ack per duplicate, smaller than it.
    pub(crate) fn on_duplicate_data(&mut self) {
        self.acks.ack_now = true;
    }

    /// A retransmitted Request in RESPOND: repeat the Response. False when
    /// a Request is not expected.
    pub(crate) fn on_request_again(&mut self) -> bool {
        let expected = self.state == SubState::Respond;
        self.pend.response |= expected;
        expected
    }

    /// A Response in PARTOPEN: our Ack was lost, repeat it. False when a
    /// Response is not expected.
    pub(crate) fn on_response_again(&mut self) -> bool {
        let expected = self.state == SubState::PartOpen;
        self.pend.handshake_ack |= expected;
        expected
    }

    /// Sync: answer with SyncAck (RFC 4340 §7.5.4).
    pub(crate) fn on_sync(&mut self, seg: &Segment<'_>, ackn: Option<u64>) {
        if self.pend.syncack.len() >= SYNCACKS_OWED_MAX {
            self.pend.syncack.pop_back();
        }
        self.pend.syncack.push_back(seg.seq);
        if let Some(a) = ackn {
            self.seq.gar = self.seq.gar.max(a);
        }
    }

    /// SyncAck: a failed path that answers its probe is back. True then.
    /// The SyncAck acknowledging exactly our latest Sync is an RTT sample
    /// (an idle path's estimate is refreshed by its probes; the
    /// peer answers a Sync at once, so no acknowledgement delay applies).
    pub(crate) fn on_syncack(&mut self, now: Instant, ackn: Option<u64>) -> bool {
        if let Some(sent) = ackn.and_then(|a| self.hs.take_sync_sample(a)) {
            match now.checked_duration_since(sent) {
                Some(rtt) => {
                    self.note_rtt_sample_due(now);
                    self.tx.rtt.on_sample_at(now, rtt);
                    self.tx.last_rtt_sample_at = Some(now);
                    self.stats.rtt_samples += 1;
                }
                None => self.stats.rtt_samples_rejected += 1,
            }
        }
        if !self.failed {
            return false;
        }
        self.failed = false;
        self.tx.rto_count = 0;
        self.timers.stop(Timer::Probe);
        true
    }

    /// CloseReq: we (the client) close and hold TIMEWAIT (RFC 4340 §8.3).
    /// A packet dropped with a Sync in answer (RFC 4340 §8.5 step 7),
    /// acknowledging its (wire) sequence number `seq`; rate-limited as
    /// the Syncs to invalid packets are (§7.5.4).
    pub(crate) fn answer_with_sync(&mut self, now: Instant, seq: u64) {
        let limited = self
            .hs
            .last_sync_sent
            .is_some_and(|t| now - t < SYNC_RATE_LIMIT);
        if !limited {
            self.pend.sync = Some(seq & SEQ_MASK);
        }
    }

    pub(crate) fn on_closereq(&mut self, now: Instant) {
        self.state = SubState::Closing;
        self.pend.close = true;
        self.hs.tries = 0;
        self.timers.arm(Timer::Retx, now);
    }

    /// Close: answer with Reset (Closed) and close.
    pub(crate) fn on_close(&mut self) {
        self.pend = Default::default();
        self.pend.reset = Some(ResetCode::Closed);
        self.stop_transfer();
        self.state = SubState::Closed;
    }

    /// A valid Reset ends the subflow.
    pub(crate) fn on_reset(&mut self, now: Instant, timewait: Duration) -> ResetEffect {
        let was = self.state;
        self.pend = Default::default();
        self.stop_transfer();
        if was == SubState::Closing {
            self.state = SubState::TimeWait;
            self.timers.arm(Timer::TimeWait, now + timewait);
            ResetEffect::TimeWait
        } else {
            self.state = SubState::Closed;
            ResetEffect::Closed(was)
        }
    }

    /// Closed at once (fast close, either side): false when it was closed
    /// already.
    pub(crate) fn abort(&mut self) -> bool {
        if self.state == SubState::Closed {
            return false;
        }
        self.state = SubState::Closed;
        self.pend = Default::default();
        self.stop_transfer();
        true
    }

    /// The peer's fast close (RFC 9897 §3.2.3): closed at once, with one
    /// Reset (code 13, no MP_FAST_CLOSE of ours) owed to a peer that knows
    /// us. True when the subflow was not closed yet.
    pub(crate) fn answer_fast_close(&mut self) -> bool {
        if !self.abort() {
            return false;
        }
        if self.seq.have_isr {
            self.pend.reset = Some(ResetCode::MpFastClose);
            self.pend.reset_bare = true;
        }
        true
    }

    /// Our fast close: Reset with MP_FAST_CLOSE to a peer that knows us,
    /// and nothing else any more (RFC 9897 §3.2.3).
    pub(crate) fn fast_close(&mut self) {
        if self.state != SubState::Closed && self.seq.have_isr {
            self.pend = Default::default();
            self.pend.reset = Some(ResetCode::MpFastClose);
        }
        self.state = SubState::Closed;
        self.stop_transfer();
        self.queue.clear();
    }

    /// No more handshake/close retransmissions and no RTO.
    fn stop_transfer(&mut self) {
        self.timers.stop(Timer::Retx);
        self.timers.stop(Timer::Rto);
    }

    /// The handshake failed or was refused: closed, answering `reset`
    /// if the peer knows us.
    pub(crate) fn fail(&mut self, reset: Option<ResetCode>) {
        self.state = SubState::Closed;
        self.stop_transfer();
        self.pend = Default::default();
        if self.seq.have_isr {
            self.pend.reset = reset;
        }
    }

    /// The peer's handshake did not verify: closed with Reset `code`.
    pub(crate) fn refuse(&mut self, code: ResetCode) {
        self.state = SubState::Closed;
        self.pend = Default::default();
        self.pend.reset = Some(code);
    }

    /// Closed at once without a handshake (address gone, silent path):
    /// every timer stops. False when it was gone already.
    pub(crate) fn drop_now(&mut self, now: Instant) -> bool {
        let was_gone = self.is_gone();
        self.state = SubState::Closed;
        self.pend = Default::default();
        for t in [
            Timer::Retx,
            Timer::Rto,
            Timer::AckDue,
            Timer::TimeWait,
            Timer::Probe,
        ] {
            self.timers.stop(t);
        }
        self.failed = false;
        self.life.closed(now);
        !was_gone
    }

    /// Starts the closing handshake (RFC 4340 §8.3): a server asks the
    /// client to close (CloseReq) so that the client holds TIMEWAIT. True
    /// when the subflow closed at once (it was still in REQUEST).
    pub(crate) fn begin_close(
        &mut self,
        now: Instant,
        server: bool,
        handshake_rto: Duration,
    ) -> bool {
        match self.state {
            SubState::Open if server => {
                self.state = SubState::CloseReq;
                self.pend.closereq = true;
            }
            SubState::Open | SubState::PartOpen | SubState::Respond => {
                self.state = SubState::Closing;
                self.pend.close = true;
            }
            SubState::Request => {
                self.state = SubState::Closed;
                self.timers.stop(Timer::Retx);
                return true;
            }
            _ => return false,
        }
        self.hs.restart(handshake_rto.max(self.tx.rtt.rto()));
        self.timers.arm(Timer::Retx, now);
        false
    }

    /// Client: the subflow starts in REQUEST (the first Request goes out
    /// with the next `poll_transmit`).
    pub(crate) fn start_request(&mut self, now: Instant, join: bool, nonce: u32, addr_id: u8) {
        self.initiator = true;
        self.join = join;
        self.state = SubState::Request;
        self.timers.arm(Timer::Retx, now);
        self.mp.local_nonce = nonce;
        self.mp.local_addr_id = addr_id;
        self.life.last_rx_at = now;
        self.life.started_at = now;
    }

    /// Server: a Request arrived on a new subflow.
    pub(crate) fn on_first_request(&mut self, now: Instant, seg: &Segment<'_>) {
        self.life.last_rx_at = now;
        self.life.started_at = now;
        self.set_isr(seg.seq);
        self.mp.remote_addr_id = 0;
    }

    /// Server: the Request joins (RFC 9897 §3.2.2).
    pub(crate) fn accept_join(&mut self, j: &MpJoin, nonce: u32, addr_id: u8) {
        self.join = true;
        self.mp.remote_nonce = j.nonce;
        self.mp.remote_addr_id = j.addr_id;
        self.mp.local_nonce = nonce;
        self.mp.local_addr_id = addr_id;
    }

    /// Server: answer the Request with a Response (RESPOND, given up after
    /// `respond_timeout`), taking the client's Sequence Window (§6).
    pub(crate) fn respond(
        &mut self,
        now: Instant,
        respond_timeout: Duration,
        seq_window: Option<u64>,
    ) {
        self.state = SubState::Respond;
        self.pend.response = true;
        self.timers.arm(Timer::Retx, now + respond_timeout);
        if let Some(w) = seq_window {
            self.seq.window = self.seq.window.max(w.clamp(32, 1 << 46));
        }
    }

    /// The Confirms our Response / third packet owes the peer's Changes.
    pub(crate) fn owe_feature_confirms(&mut self, confirms: Vec<crate::conn::codec::FeatOpt>) {
        self.pend.feat_confirms = confirms;
    }

    /// Client in REQUEST: the packet acknowledges one of our Requests.
    pub(crate) fn acks_our_request(&self, seg: &Segment<'_>) -> bool {
        seg.ack.is_some_and(|a| {
            let a = self.unwrap_ack(a);
            a >= self.seq.iss && a <= self.seq.gss
        })
    }

    /// Client: the Response arrived; its ISN and the handshake RTT.
    pub(crate) fn on_response(&mut self, now: Instant, seg: &Segment<'_>) {
        self.set_isr(seg.seq);
        if let Some(a) = seg.ack {
            self.seq.gar = self.unwrap_ack(a);
            self.on_handshake_ack(now, self.seq.gar);
        }
    }

    /// Client: the server's MP_JOIN, verified.
    pub(crate) fn set_peer_join(&mut self, j: &MpJoin) {
        self.mp.remote_nonce = j.nonce;
        self.mp.remote_addr_id = j.addr_id;
    }

    /// Client: PARTOPEN, the third packet due (RFC 4340 §8.1.5).
    pub(crate) fn enter_partopen(&mut self, now: Instant, handshake_rto: Duration) {
        self.acks.rx.record(self.seq.gsr);
        self.state = SubState::PartOpen;
        self.pend.handshake_ack = true;
        self.hs.restart(handshake_rto);
        self.timers.arm(Timer::Retx, now);
    }

    /// OPEN. True the first time (the connection announces the path).
    pub(crate) fn set_open(&mut self) -> bool {
        self.state = SubState::Open;
        self.timers.stop(Timer::Retx);
        self.hs.tries = 0;
        self.pend.handshake_ack = false;
        let first = !self.announced;
        self.announced = true;
        first
    }

    /// An acknowledgement is owed at once.
    pub(crate) fn ack_now(&mut self) {
        self.acks.ack_now = true;
    }

    /// Ack Ratio (RFC 4341 §6.1.2): the HC-sender changes it with
    /// Change L; we (HC-receiver) confirm with Confirm R.
    pub(crate) fn on_ack_ratio_change(&mut self, v: u64) {
        self.acks.ack_ratio_rx = (v as u32).clamp(1, 1 << 15);
        self.pend.confirm_ack_ratio = Some(v);
    }

    /// The peer confirmed Ack Ratio `v`.
    pub(crate) fn on_ack_ratio_confirm(&mut self, v: u64) {
        if v == self.acks.ack_ratio_tx as u64 {
            self.acks.ack_ratio_unconfirmed = false;
        }
    }

    /// MP_RTT from the peer: raw and smoothed reports stand in for our own
    /// estimate until we have one; min/max reports are not an estimate.
    pub(crate) fn on_peer_rtt(&mut self, r: &MpRtt) {
        let age = Duration::from_millis(r.age_ms as u64);
        if matches!(r.kind, 0 | 3) && age < Duration::from_secs(10) {
            self.mp.peer_rtt = Some(Duration::from_millis(r.rtt_ms as u64));
        }
    }

    /// MP_PRIO from the peer: confirmed at once. True when it changed.
    /// `None` when it is outdated (RFC 9897 §3.2.1: an earlier MP_PRIO
    /// on this subflow, its dataset, had a higher MP_SEQ): confirmed, not
    /// applied. Otherwise whether the priority changed.
    pub(crate) fn on_peer_prio(&mut self, p: u8, seq: Option<u64>) -> Option<bool> {
        let outdated = crate::conn::seq::outdated_in_dataset(&mut self.mp.peer_prio_seq, seq);
        let changed = !outdated && self.mp.priority != p;
        if !outdated {
            self.mp.priority = p;
        }
        self.owe_confirm(ConfirmItem {
            seq,
            kind: crate::wire::mp::subtype::PRIO,
            id: p,
            ..ConfirmItem::default()
        });
        self.acks.ack_now = true;
        (!outdated).then_some(changed)
    }

    /// In the authenticated modes (`remote_d_key`), whether the MP_PRIO
    /// `p` with `mp_seq` carries the peer's tag ([`keys::prio_hmac`]);
    /// always true in the open mode, where MP_PRIO is unauthenticated
    /// (RFC 9897 §3.2.9).
    pub(crate) fn prio_authentic(
        &self,
        remote_d_key: Option<&[u8; 32]>,
        p: u8,
        mp_seq: Option<u64>,
        tag: Option<[u8; 20]>,
    ) -> bool {
        let Some(k) = remote_d_key else { return true };
        match (mp_seq, tag) {
            (Some(seq), Some(t)) => crate::conn::keys::verify_prio_hmac(
                k,
                p,
                seq,
                (self.mp.remote_nonce, self.mp.local_nonce),
                &t,
            ),
            _ => false,
        }
    }

    /// The peer confirmed our MP_PRIO `p`: no more retransmissions.
    pub(crate) fn on_prio_confirmed(&mut self, p: u8) {
        if self.pend.prio == Some(p) {
            self.pend.prio = None;
            self.timers.stop(Timer::PrioRetx);
            self.pend.prio_due = false;
        }
    }

    /// MP_CONFIRM `item` with the next Ack (bounded: a flood of options
    /// owes no more than a few packets' worth).
    /// RFC 9897 §3.2.1: "with the most recent suboption received listed
    /// first"; a repeated option is confirmed once, with its latest MP_SEQ.
    pub(crate) fn owe_confirm(&mut self, item: ConfirmItem) {
        self.pend.confirms.retain(|c| !c.same_option(&item));
        self.pend.confirms.insert(0, item);
        self.pend.confirms.truncate(MAX_CONFIRMS_OWED);
    }

    /// Sets our priority of the path, and with `tell` sends MP_PRIO until
    /// confirmed. Without `tell` (multipath not negotiated yet) the peer
    /// hears of it once it is (a peer assumes primary, RFC 9897 §3.2.10).
    pub(crate) fn set_priority(&mut self, now: Instant, prio: u8, tell: bool) {
        self.mp.priority = prio;
        if tell {
            self.mp.prio_untold = false;
            self.pend.prio = Some(prio);
            self.timers.arm(Timer::PrioRetx, now);
            self.pend.prio_due = false;
            self.pend.prio_tries = 0;
        } else {
            self.mp.prio_untold = prio != crate::path::priority::PRIMARY;
        }
    }

    /// Multipath is on: a priority the peer has not been told (given at
    /// `add_path` or set before the handshake) becomes an MP_PRIO owed on
    /// this subflow, retransmitted until MP_CONFIRM. It also rides on the
    /// client's third handshake packet ([`Subflow::attach_handshake_prio`]),
    /// so the peer never schedules on the path with the wrong priority.
    pub(crate) fn release_untold_prio(&mut self) {
        if std::mem::take(&mut self.mp.prio_untold) {
            self.pend.prio = Some(self.mp.priority);
            self.pend.prio_due = true;
            self.pend.prio_tries = 0;
        }
    }

    /// The client's third handshake packet `s` (and its repeats in
    /// PARTOPEN) carries the MP_PRIO still owed, with MP_SEQ (RFC 9897
    /// §3.2.1: the highest assigned, `last_mp_seq`): the server applies it
    /// as the subflow opens, before it schedules anything on it. It stays
    /// owed (`prio_due`): the first Ack in OPEN repeats it and arms the
    /// retransmission until MP_CONFIRM.
    pub(crate) fn attach_handshake_prio(&self, s: &mut Segment<'_>, last_mp_seq: u64) {
        if self.state != SubState::PartOpen || s.ptype != PacketType::Ack {
            return;
        }
        if let Some(p) = self.pend.prio {
            s.mp.prio = Some(p);
            s.mp.seq.get_or_insert(last_mp_seq & SEQ_MASK);
        }
    }
}
