//! Input: one parsed packet on a subflow, the options that matter in
//! OPEN, and the payload's way to the reorderer.

use super::subflow::{Admit, Coupled, ResetEffect};
use super::{
    mp, opt, reorder, ConnKeys, Connection, Event, FeatureNum, PacketType, Received, ReorderItem,
    ResetCode, Role, Segment, SubState, WireError,
};
use crate::time::Instant;
use std::time::Duration;

impl Connection {
    pub(super) fn handle_segment(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let state = self.paths[i].state();
        if matches!(state, SubState::Closed | SubState::TimeWait) {
            let strays = self.is_authenticated_mode();
            self.paths[i].answer_close_when_closed(now, seg, strays);
            // Nothing is expected on a closed subflow; count everything.
            self.stats.rx.rx_unexpected += 1;
            return;
        }
        if state == SubState::Request {
            self.handle_in_request(now, i, seg);
            return;
        }
        let Some(ackn) = self.admit_segment(now, i, seg) else {
            return;
        };
        let sf = &mut self.paths[i];
        match seg.ptype {
            PacketType::Request => {
                if !sf.on_request_again() {
                    self.stats.rx.rx_unexpected += 1;
                }
            }
            PacketType::Response => {
                if !sf.on_response_again() {
                    self.stats.rx.rx_unexpected += 1;
                }
            }
            PacketType::Reset => self.handle_reset(now, i, seg),
            PacketType::Sync => sf.on_sync(seg, ackn),
            PacketType::SyncAck => {
                if sf.on_syncack(now, ackn) {
                    let id = sf.id();
                    self.events.push_back(Event::PathEstablished(id));
                }
                self.plpmtu_syncack(now, i, ackn);
            }
            // RFC 4340 §8.5 step 7: only a server may send a CloseReq; a
            // server that receives one answers with a Sync and drops it
            // (a forged CloseReq used to close the server's subflows).
            PacketType::CloseReq if self.role == Role::Server => {
                self.stats.rx.rx_unexpected += 1;
                sf.answer_with_sync(now, seg.seq);
            }
            PacketType::CloseReq => self.handle_closereq(now, i, seg),
            PacketType::Close => self.handle_close(i, seg),
            PacketType::Ack | PacketType::DataAck | PacketType::Data => {
                self.handle_ack_or_data(now, i, seg, ackn)
            }
        }
    }

    /// The subflow's sequence check (RFC 4340 §7.5) and option rules
    /// (§5.8) for a packet past the handshake: the unwrapped
    /// Acknowledgement Number, or `None` when the packet goes no further
    /// (invalid, a duplicate carrying data, or options that reset the
    /// subflow).
    fn admit_segment(&mut self, now: Instant, i: usize, seg: &Segment<'_>) -> Option<Option<u64>> {
        let ackn = match self.paths[i].admit(now, seg) {
            Admit::Invalid => {
                self.stats.rx.rx_seq_invalid += 1;
                return None;
            }
            Admit::Valid { ackn, duplicate } => {
                if duplicate {
                    self.stats.rx.rx_duplicate += 1;
                    if seg.ptype.carries_data() {
                        self.paths[i].on_duplicate_data();
                        return None;
                    }
                }
                ackn
            }
        };
        // RFC 4340 §5.8 / §5.8.2: options that break the rules reset the
        // subflow (never in answer to a Reset). A Request or Response on a
        // subflow past its handshake is dealt with by type first (§8.5
        // step 7 before step 8): its options are never read.
        if let Some(code) = seg.option_error.and_then(WireError::reset_code) {
            if !matches!(
                seg.ptype,
                PacketType::Reset | PacketType::Request | PacketType::Response
            ) {
                self.reset_path(i, code);
                return None;
            }
        }
        Some(ackn)
    }

    /// Client: the server's CloseReq (RFC 4340 §8.3), with MP_CLOSE the
    /// whole connection's.
    fn handle_closereq(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.handle_close_key(seg);
        self.paths[i].on_closereq(now);
        // The subflow carries nothing more: say so now, not when the close
        // completes. A forged CloseReq takes the server's next number, so
        // our Close acknowledges one it has not sent and is refused (RFC
        // 4340 §7.5.3): the close and the rejoin would wait for its
        // retransmission or the path manager's next turn (0.4-1.15 s). Only in the authenticated modes, where the daemon
        // rejoins on it (the published open-mode runs keep their event
        // times). Not when it carried the connection's MP_CLOSE (a real
        // close, a drain): that close runs its handshake, and the peer's
        // subflow waits for our Close.
        let whole = self.life.is_closing_or_closed();
        if self.is_authenticated_mode() && !whole && self.paths[i].report_closed() {
            self.reinject(i);
            self.events.push_back(Event::PathClosed(self.paths[i].id()));
        }
    }

    pub(super) fn handle_ack_or_data(
        &mut self,
        now: Instant,
        i: usize,
        seg: &Segment<'_>,
        ackn: Option<u64>,
    ) {
        match self.paths[i].state() {
            SubState::Respond => {
                if seg.ptype == PacketType::Data {
                    self.stats.rx.rx_unexpected += 1;
                    return;
                }
                if !self.verify_third_packet(i, seg) {
                    return;
                }
                if let Some(a) = ackn {
                    self.paths[i].on_handshake_ack(now, a);
                }
                self.mark_open(i);
                // The 4th packet of the handshake: lets the client leave PARTOPEN.
                self.paths[i].ack_now();
            }
            SubState::PartOpen => self.mark_open(i),
            SubState::Open if seg.ptype == PacketType::Ack => {
                // The peer repeats its third handshake packet (MP_HMAC of a
                // join, or the MP_KEY echo): our OPEN-confirming Ack was
                // lost and it is still in PARTOPEN (RFC 4340 §8.1.5).
                let sf = &self.paths[i];
                let repeat = (sf.is_join()
                    && seg.mp.hmac.is_some()
                    && seg.mp.addaddr.is_none()
                    && seg.mp.removeaddr.is_none())
                    || seg
                        .mp
                        .key
                        .as_ref()
                        .is_some_and(|k| k.echoed_key().is_some());
                if repeat && !sf.is_initiator() {
                    self.paths[i].ack_now();
                }
            }
            _ => {}
        }
        self.handle_open_options(now, i, seg);
        if let Some(a) = ackn {
            // Elapsed Time is in 10 µs units (RFC 4340 §13.2).
            let ack_delay = seg
                .elapsed_10us
                .map(|e| Duration::from_micros(u64::from(e) * 10));
            let (before, rest) = self.paths.split_at_mut(i);
            let (sf, after) = rest.split_first_mut().expect("path index in range");
            let coupled = Coupled::Lazy {
                before,
                after,
                buf: &mut self.scratch.snaps,
                built: false,
            };
            if sf.on_ack_with(now, a, seg.ack_vector, ack_delay, coupled) {
                let id = sf.id();
                self.events.push_back(Event::PathEstablished(id));
            }
            self.retransmit_lost(now, i);
        }
        if seg.ptype.carries_data() {
            self.paths[i].on_data_received(now, self.config.ack.delay);
            self.handle_payload(now, i, seg);
        }
    }

    /// Options that matter in OPEN: Ack Ratio negotiation, then (multipath
    /// only) MP_RTT, MP_PRIO, MP_CONFIRM and the address options.
    pub(super) fn handle_open_options(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let remote_d_key = match self.d_keys() {
            Some(ConnKeys::Derived { remote, .. }) => Some(remote),
            _ => None,
        };
        let sf = &mut self.paths[i];
        if let Some(f) = seg.feat(opt::CHANGE_L, FeatureNum::AckRatio) {
            sf.on_ack_ratio_change(f.value);
        }
        if let Some(f) = seg.feat(opt::CONFIRM_R, FeatureNum::AckRatio) {
            sf.on_ack_ratio_confirm(f.value);
        }
        if !self.negotiation.is_multipath() {
            return;
        }
        let m = &seg.mp;
        if let Some(r) = m.rtt {
            sf.on_peer_rtt(&r);
        }
        if let Some(p) = m.prio.filter(|&p| {
            let ok = sf.prio_authentic(remote_d_key.as_ref(), p, m.seq, m.prio_hmac);
            if !ok {
                // Not confirmed either: a forger learns nothing.
                self.stats.auth.prio_bad_hmac += 1;
            }
            ok
        }) {
            match sf.on_peer_prio(p, m.seq) {
                Some(true) => {
                    let path = sf.id();
                    self.events
                        .push_back(Event::PriorityChanged { path, priority: p });
                }
                Some(false) => {}
                None => self.stats.paths.mp_option_outdated += 1,
            }
        }
        for c in m.confirms() {
            match c.kind {
                mp::PRIO => self.paths[i].on_prio_confirmed(c.id),
                mp::ADDADDR | mp::REMOVEADDR => self.on_advert_confirmed(c),
                _ => {}
            }
        }
        self.handle_address_options(now, i, m);
    }

    pub(super) fn handle_payload(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.stats.traffic.rx_data_pkts += 1;
        self.paths[i].count_rx_data();
        if self.life.is_closing_or_closed() {
            self.stats.rx.rx_data_after_close += 1;
            return;
        }
        if !self.negotiation.is_multipath() {
            // Plain DCCP: arrival order, local numbering.
            let seq = self.numbering.next_plain_rx();
            self.stats.traffic.delivered_pkts += 1;
            self.stats.traffic.delivered_bytes += seg.payload.len() as u64;
            let data = self.owned_payload(seg.payload);
            self.events.push_back(Event::Delivered { seq, data });
            return;
        }
        let Some(wire) = seg.mp.seq else {
            self.stats.rx.rx_missing_mp_seq += 1;
            return;
        };
        let Some(seq) = self.plausible_mp_seq(wire) else {
            return;
        };
        self.numbering.note_rx(seq);
        let path = self.paths[i].note_mp_seq(seq);
        let payload = self.owned_payload(seg.payload);
        self.scratch.rx_states.clear();
        if self.reorder.reads_paths() {
            self.rebuild_views();
            self.scratch
                .rx_states
                .extend(self.paths.iter().map(|p| p.receive_state()));
        } else {
            self.scratch.views.clear();
        }
        self.reorder.push(
            now,
            ReorderItem {
                seq,
                path,
                arrival: now,
                payload,
            },
            &self.scratch.views,
            &self.scratch.rx_states,
        );
        self.drain_reorder(now);
    }

    /// `p` in a buffer of its own: a recycled one when the application
    /// handed some back.
    fn owned_payload(&mut self, p: &[u8]) -> Vec<u8> {
        match self.scratch.rx_pool.pop() {
            Some(mut b) => {
                b.extend_from_slice(p);
                b
            }
            None => p.to_vec(),
        }
    }

    /// Unwraps a received MP_SEQ (`numbering.rs`); `None` drops an
    /// implausible one. A resynchronisation (a genuine renumbering, or a
    /// forged first reference) starts a fresh reorderer.
    fn plausible_mp_seq(&mut self, wire: u64) -> Option<u64> {
        match self.numbering.accept(wire, self.config.mp.max_seq_jump) {
            Received::Plausible(seq) => Some(seq),
            Received::Implausible => {
                self.stats.rx.rx_mp_seq_implausible += 1;
                None
            }
            Received::Resync(seq) => {
                self.stats.rx.mp_seq_resyncs += 1;
                self.reorder = reorder::build(&self.config.reorder);
                Some(seq)
            }
        }
    }

    pub(super) fn drain_reorder(&mut self, now: Instant) {
        while let Some(d) = self.reorder.pop(now) {
            // The reference kernel carries MP_CONFIRM, MP_ADDADDR, … on
            // empty Data packets with an MP_SEQ of their own: they hold their place in
            // the order but are no datagram to deliver.
            if d.payload.is_empty() {
                self.recycle_delivered(d.payload);
                continue;
            }
            self.stats.traffic.delivered_pkts += 1;
            self.stats.traffic.delivered_bytes += d.payload.len() as u64;
            self.events.push_back(Event::Delivered {
                seq: d.seq,
                data: d.payload,
            });
        }
    }

    /// A valid Reset: MP_FAST_CLOSE with our key closes everything
    /// (RFC 9897 §3.2.3); otherwise the subflow ends.
    pub(super) fn handle_reset(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.stats.traffic.resets_received += 1;
        if seg.reset_code == ResetCode::MpFastClose {
            if seg
                .mp
                .fast_close
                .is_some_and(|k| self.ident.is_our_close_key(k))
            {
                self.life.set_reason("fast close by peer");
                self.discard_queue();
                // §3.2.3: "Host B will send a DCCP-Reset packet response
                // on all subflows to Host A with Reset Code 13".
                for sf in &mut self.paths {
                    if sf.answer_fast_close() {
                        self.events.push_back(Event::PathClosed(sf.id()));
                    }
                }
                self.finish_close();
                return;
            }
            if seg.mp.fast_close.is_some() {
                self.stats.auth.bad_close_key += 1;
            }
        }
        let id = self.paths[i].id();
        match self.paths[i].on_reset(now, self.config.lifetime.timewait) {
            ResetEffect::TimeWait if self.paths[i].report_closed() => {
                self.events.push_back(Event::PathClosed(id));
            }
            ResetEffect::TimeWait => {}
            ResetEffect::Closed(was) => {
                self.reinject(i);
                if was == SubState::Open && seg.reset_code == ResetCode::NoConnection {
                    self.probe_other_subflows(now, i);
                }
                match was {
                    // The peer gave up on this handshake.
                    SubState::Respond => {}
                    SubState::PartOpen => self.events.push_back(Event::PathFailed(id)),
                    _ => self.events.push_back(Event::PathClosed(id)),
                }
            }
        }
    }

    /// The peer did not know open subflow `i` ("No Connection"): in the
    /// authenticated modes a forged Reset may have closed its half of the
    /// others too (an attacker sends the same forgery on every path), and
    /// an idle one would only learn at its next packet or RTO (0.5 s and
    /// more in the lab). Probe every other open subflow now with a Sync: a
    /// closed half answers with its own Reset "No Connection" within one
    /// round trip, a live one with a SyncAck.
    fn probe_other_subflows(&mut self, now: Instant, i: usize) {
        if !self.is_authenticated_mode() {
            return;
        }
        for (j, sf) in self.paths.iter_mut().enumerate() {
            if j != i && sf.is_open() {
                sf.send_keepalive(now);
                self.stats.traffic.keepalives_sent += 1;
            }
        }
    }

    /// Closes subflow `i` with Reset `code` at once (its packets go back
    /// to the connection queue).
    pub(super) fn reset_path(&mut self, i: usize, code: ResetCode) {
        let sf = &mut self.paths[i];
        let announced = sf.announced();
        sf.fail(Some(code));
        self.reinject(i);
        if announced {
            self.events.push_back(Event::PathClosed(self.paths[i].id()));
        }
    }

    pub(super) fn handle_close(&mut self, i: usize, seg: &Segment<'_>) {
        self.handle_close_key(seg);
        self.paths[i].on_close();
        self.reinject(i);
        self.events.push_back(Event::PathClosed(self.paths[i].id()));
    }
}
