//! Input: one validated packet on a subflow, the options that matter in
//! OPEN, and the payload's way to the reorderer.

use super::adverts::{verify_addaddr, verify_removeaddr};
use super::*;

impl Connection {
    pub(super) fn handle_segment(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let state = self.paths[i].state;
        if state == SubState::Closed || state == SubState::TimeWait {
            let sf = &mut self.paths[i];
            if matches!(seg.ptype, PacketType::Close | PacketType::CloseReq)
                && sf.have_isr
                && sf.pend.reset.is_none()
            {
                sf.gsr = sf.gsr.max(sf.unwrap_seq(seg.seq));
                sf.pend.reset = Some(ResetCode::Closed);
            }
            // Nothing is expected on a closed subflow; count everything.
            self.stats.rx_unexpected += 1;
            return;
        }
        if state == SubState::Request {
            self.handle_in_request(now, i, seg);
            return;
        }
        // Sequence and acknowledgement validity (RFC 4340 §7.5.3).
        let sf = &self.paths[i];
        // X=0 packets carry 24-bit numbers: extend them first (RFC 4340 §7.6).
        let (wseq, wack) = if seg.short_seq {
            (
                crate::wire::seq::extend_short(seg.seq, sf.gsr & SEQ_MASK),
                seg.ack
                    .map(|a| crate::wire::seq::extend_short(a, sf.gss & SEQ_MASK)),
            )
        } else {
            (seg.seq, seg.ack)
        };
        let seqn = sf.unwrap_seq(wseq);
        let ackn = wack.map(|a| sf.unwrap_ack(a));
        let (swl, swh) = sf.seq_window();
        let (awl, awh) = sf.ack_window();
        let ack_ok = |lo: u64| ackn.is_none_or(|a| a >= lo && a <= awh);
        let valid = match seg.ptype {
            PacketType::CloseReq | PacketType::Close | PacketType::Reset => {
                seqn > sf.gsr && seqn <= swh && ack_ok(sf.gar.max(awl))
            }
            PacketType::Sync | PacketType::SyncAck => seqn >= swl && ack_ok(awl),
            PacketType::Request => seqn >= swl && seqn <= swh,
            _ => seqn >= swl && seqn <= swh && ack_ok(awl),
        };
        if !valid {
            self.stats.rx_seq_invalid += 1;
            let sf = &mut self.paths[i];
            // RFC 4340 §7.5.4: answer with Sync (rate-limited), except to
            // Sync/SyncAck/Reset (no storms on forged resets).
            let limited = sf
                .last_sync_sent
                .is_some_and(|t| now - t < Duration::from_millis(100));
            if !matches!(seg.ptype, PacketType::Sync | PacketType::SyncAck) && !limited {
                sf.pend.sync = Some(seg.seq);
            }
            return;
        }
        {
            let sf = &mut self.paths[i];
            // Liveness: only packets that passed the validity checks count.
            sf.last_rx_at = sf.last_rx_at.max(now);
            if !sf.on_packet_received(now, seqn) {
                self.stats.rx_duplicate += 1;
                if seg.ptype.carries_data() {
                    return;
                }
            }
        }
        match seg.ptype {
            PacketType::Request => {
                // Retransmitted Request: repeat the Response.
                if state == SubState::Respond {
                    self.paths[i].pend.response = true;
                } else {
                    self.stats.rx_unexpected += 1;
                }
            }
            PacketType::Response => {
                if state == SubState::PartOpen {
                    // Our Ack was lost: repeat it.
                    self.paths[i].pend.handshake_ack = true;
                } else {
                    self.stats.rx_unexpected += 1;
                }
            }
            PacketType::Reset => self.handle_reset(now, i, seg),
            PacketType::Sync => {
                let sf = &mut self.paths[i];
                sf.pend.syncack = Some(seg.seq);
                if let Some(a) = ackn {
                    sf.gar = sf.gar.max(a);
                }
            }
            PacketType::SyncAck => {
                let sf = &mut self.paths[i];
                if sf.failed {
                    sf.failed = false;
                    sf.rto_count = 0;
                    sf.timers.stop(Timer::Probe);
                    let id = sf.id;
                    self.events.push_back(Event::PathEstablished(id));
                }
            }
            PacketType::CloseReq => {
                self.handle_close_key(seg);
                let sf = &mut self.paths[i];
                sf.state = SubState::Closing;
                sf.pend.close = true;
                sf.retx_tries = 0;
                sf.timers.arm(Timer::Retx, now);
            }
            PacketType::Close => self.handle_close(now, i, seg),
            PacketType::Ack | PacketType::DataAck | PacketType::Data => {
                self.handle_ack_or_data(now, i, seg, ackn)
            }
        }
    }

    pub(super) fn handle_ack_or_data(
        &mut self,
        now: Instant,
        i: usize,
        seg: &Segment<'_>,
        ackn: Option<u64>,
    ) {
        let state = self.paths[i].state;
        match state {
            SubState::Respond => {
                if seg.ptype == PacketType::Data {
                    self.stats.rx_unexpected += 1;
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
                self.paths[i].ack_now = true;
            }
            SubState::PartOpen => {
                self.mark_open(i);
            }
            SubState::Open if seg.ptype == PacketType::Ack => {
                // The peer repeats its third handshake packet (MP_HMAC of a
                // join, or the MP_KEY echo): our OPEN-confirming Ack was
                // lost and it is still in PARTOPEN (RFC 4340 §8.1.5).
                let sf = &self.paths[i];
                let repeat = (sf.join
                    && seg.mp.hmac.is_some()
                    && seg.mp.addaddr.is_none()
                    && seg.mp.removeaddr.is_none())
                    || seg.mp.key.is_some_and(|k| k.peer_key.is_some());
                if repeat && !sf.initiator {
                    self.paths[i].ack_now = true;
                }
            }
            _ => {}
        }
        // Options that matter in OPEN.
        self.handle_open_options(now, i, seg);
        if let Some(a) = ackn {
            self.snapshots();
            let sf = &mut self.paths[i];
            // Elapsed Time is in 10 µs units (RFC 4340 §13.2).
            let ack_delay = seg
                .elapsed_10us
                .map(|e| Duration::from_micros(u64::from(e) * 10));
            let recovered = sf.on_ack(now, a, seg.ack_vector, ack_delay, &self.snaps);
            if recovered {
                let id = sf.id;
                self.events.push_back(Event::PathEstablished(id));
            }
        }
        if seg.ptype.carries_data() {
            self.paths[i].on_data_received(now, self.config.ack_delay);
            self.handle_payload(now, i, seg);
        }
    }

    pub(super) fn handle_open_options(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let _ = now;
        // Ack Ratio (RFC 4341 §6.1.2): the HC-sender changes it with
        // Change L; we (HC-receiver) confirm with Confirm R.
        if let Some(f) = seg.feat(opt::CHANGE_L, FeatureNum::AckRatio) {
            let sf = &mut self.paths[i];
            sf.ack_ratio_rx = (f.value as u32).clamp(1, 1 << 15);
            sf.pend.confirm_ack_ratio = Some(f.value);
        }
        if let Some(f) = seg.feat(opt::CONFIRM_R, FeatureNum::AckRatio) {
            let sf = &mut self.paths[i];
            if f.value == sf.ack_ratio_tx as u64 {
                sf.ack_ratio_unconfirmed = false;
            }
        }
        if self.mp != Some(true) {
            return;
        }
        let m = &seg.mp;
        if let Some(r) = m.rtt {
            let age = Duration::from_millis(r.age_ms as u64);
            // Raw and smoothed reports stand in for our own estimate until
            // we have one; min/max reports are not an RTT estimate.
            if matches!(r.kind, 0 | 3) && age < Duration::from_secs(10) {
                self.paths[i].peer_rtt = Some(Duration::from_millis(r.rtt_ms as u64));
            }
        }
        if let Some(p) = m.prio {
            let sf = &mut self.paths[i];
            let changed = sf.priority != p;
            sf.priority = p;
            let item = ConfirmItem {
                kind: mp::PRIO,
                id: p,
                ..ConfirmItem::default()
            };
            if !sf.pend.confirms.contains(&item) && sf.pend.confirms.len() < 8 {
                sf.pend.confirms.push(item);
            }
            sf.ack_now = true;
            if changed {
                let id = sf.id;
                self.events.push_back(Event::PriorityChanged {
                    path: id,
                    priority: p,
                });
            }
        }
        for c in m.confirms() {
            match c.kind {
                mp::PRIO => {
                    let sf = &mut self.paths[i];
                    if sf.pend.prio == Some(c.id) {
                        sf.pend.prio = None;
                        sf.timers.stop(Timer::PrioRetx);
                        sf.pend.prio_due = false;
                    }
                }
                mp::ADDADDR | mp::REMOVEADDR => {
                    let remove = c.kind == mp::REMOVEADDR;
                    if let Some(a) = self.adverts.iter_mut().find(|a| {
                        a.id == c.id && a.remove == remove && a.nonce == c.nonce && !a.confirmed
                    }) {
                        a.confirmed = true;
                        let id = a.id;
                        self.events.push_back(Event::AddressConfirmed { id });
                    }
                }
                _ => {}
            }
        }
        if let (Some(a), Some(h), Some(k)) = (m.addaddr, m.hmac, self.d_keys()) {
            if verify_addaddr(&k.d_key_remote(), &a, &h) {
                let addr = SocketAddr::new(a.ip, a.port.unwrap_or(0));
                if self.remote_addrs.insert(a.addr_id, addr) != Some(addr) {
                    self.events.push_back(Event::AddressAdded {
                        id: a.addr_id,
                        addr,
                    });
                }
                let sf = &mut self.paths[i];
                let item = ConfirmItem {
                    kind: mp::ADDADDR,
                    id: a.addr_id,
                    nonce: a.nonce,
                    addr: Some((a.ip, a.port)),
                };
                if sf.pend.confirms.len() < 8 {
                    sf.pend.confirms.push(item);
                }
                sf.ack_now = true;
            } else {
                self.stats.addaddr_bad_hmac += 1;
            }
        } else if m.addaddr.is_some() {
            self.stats.addaddr_bad_hmac += 1;
        }
        if let (Some(r), Some(h), Some(k)) = (m.removeaddr, m.hmac, self.d_keys()) {
            if verify_removeaddr(&k.d_key_remote(), &r, &h) {
                if self.remote_addrs.remove(&r.addr_id).is_some() {
                    self.events
                        .push_back(Event::AddressRemoved { id: r.addr_id });
                }
                // The MP_HMAC covers only id and nonce, so an observer could
                // replay it later; act on each (id, nonce) once.
                if self.removeaddr_seen.contains(&(r.addr_id, r.nonce)) {
                    self.stats.removeaddr_duplicate += 1;
                } else {
                    if self.removeaddr_seen.len() >= REMOVEADDR_SEEN_MAX {
                        self.removeaddr_seen.pop_front();
                    }
                    self.removeaddr_seen.push_back((r.addr_id, r.nonce));
                    self.close_paths_of_address(now, r.addr_id);
                }
                let sf = &mut self.paths[i];
                if sf.pend.confirms.len() < 8 {
                    sf.pend.confirms.push(ConfirmItem {
                        kind: mp::REMOVEADDR,
                        id: r.addr_id,
                        nonce: r.nonce,
                        addr: None,
                    });
                }
                sf.ack_now = true;
            } else {
                self.stats.removeaddr_bad_hmac += 1;
            }
        } else if m.removeaddr.is_some() {
            self.stats.removeaddr_bad_hmac += 1;
        }
    }

    pub(super) fn handle_payload(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.stats.rx_data_pkts += 1;
        self.paths[i].stats.rx_data_pkts += 1;
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
            self.stats.rx_data_after_close += 1;
            return;
        }
        if self.mp != Some(true) {
            // Plain DCCP: arrival order, local numbering.
            self.plain_rx_seq += 1;
            self.stats.delivered_pkts += 1;
            self.stats.delivered_bytes += seg.payload.len() as u64;
            self.events.push_back(Event::Delivered {
                seq: self.plain_rx_seq,
                data: seg.payload.to_vec(),
            });
            return;
        }
        let Some(wire) = seg.mp.seq else {
            self.stats.rx_missing_mp_seq += 1;
            return;
        };
        let seq = match self.rx_mp_ref {
            None => wire,
            Some(r) => unwrap48(r, wire),
        };
        if let Some(r) = self.rx_mp_ref {
            let jump = self.config.max_mp_seq_jump.max(1);
            // Far ahead of the highest MP_SEQ seen, or absurdly far behind
            // it (behind by less is just a slow path: the reorderer judges).
            let implausible = seq > r.saturating_add(jump) || r - seq.min(r) > MP_SEQ_MAX_LAG;
            if implausible {
                // One forged or corrupt MP_SEQ must not drag the numbering
                // away; a run of mutually consistent packets (a genuine
                // renumbering, or a forged first reference) resynchronises.
                let n = match self.mp_jump_probe {
                    Some((p, n)) if p.abs_diff(seq) <= jump => n + 1,
                    _ => 1,
                };
                if n < MP_SEQ_RESYNC_PKTS {
                    self.mp_jump_probe = Some((seq, n));
                    self.stats.rx_mp_seq_implausible += 1;
                    return;
                }
                self.mp_jump_probe = None;
                self.stats.mp_seq_resyncs += 1;
                self.rx_mp_ref = Some(seq);
                if let Ok(fresh) = reorder::build(&self.config.reorder) {
                    self.reorder = fresh;
                }
            }
        }
        self.rx_mp_ref = Some(self.rx_mp_ref.map_or(seq, |r| r.max(seq)));
        let sf = &mut self.paths[i];
        sf.highest_mp_seq = Some(sf.highest_mp_seq.map_or(seq, |h| h.max(seq)));
        let path = sf.id;
        self.rebuild_views();
        self.rx_states.clear();
        for p in &self.paths {
            self.rx_states.push(PathReceiveState {
                path: p.id,
                highest_seq: p.highest_mp_seq,
                in_order: !p.ack_now,
            });
        }
        self.reorder.push(
            now,
            ReorderItem {
                seq,
                path,
                arrival: now,
                payload: seg.payload.to_vec(),
            },
            &self.views,
            &self.rx_states,
        );
        self.drain_reorder(now);
    }

    pub(super) fn drain_reorder(&mut self, now: Instant) {
        while let Some(d) = self.reorder.pop(now) {
            self.stats.delivered_pkts += 1;
            self.stats.delivered_bytes += d.payload.len() as u64;
            self.events.push_back(Event::Delivered {
                seq: d.seq,
                data: d.payload,
            });
        }
    }

    pub(super) fn handle_reset(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.stats.resets_received += 1;
        if seg.reset_code == ResetCode::MpFastClose {
            if seg.mp.fast_close.is_some_and(|k| k == self.local_key) {
                self.close_reason = Some("fast close by peer".into());
                self.discard_queue();
                for sf in &mut self.paths {
                    if sf.state != SubState::Closed {
                        sf.state = SubState::Closed;
                        sf.pend = Default::default();
                        sf.timers.stop(Timer::Retx);
                        sf.timers.stop(Timer::Rto);
                        self.events.push_back(Event::PathClosed(sf.id));
                    }
                }
                self.finish_close();
                return;
            }
            if seg.mp.fast_close.is_some() {
                self.stats.bad_close_key += 1;
            }
        }
        let sf = &mut self.paths[i];
        let id = sf.id;
        let was = sf.state;
        sf.pend = Default::default();
        sf.timers.stop(Timer::Retx);
        sf.timers.stop(Timer::Rto);
        if was == SubState::Closing {
            sf.state = SubState::TimeWait;
            sf.timers.arm(Timer::TimeWait, now + self.config.timewait);
            self.events.push_back(Event::PathClosed(id));
        } else {
            sf.state = SubState::Closed;
            self.reinject(i);
            if was == SubState::Respond {
                // The peer gave up on this handshake.
            } else if was == SubState::PartOpen {
                self.events.push_back(Event::PathFailed(id));
            } else {
                self.events.push_back(Event::PathClosed(id));
            }
        }
    }

    pub(super) fn handle_close(&mut self, _now: Instant, i: usize, seg: &Segment<'_>) {
        self.handle_close_key(seg);
        let sf = &mut self.paths[i];
        let id = sf.id;
        sf.pend = Default::default();
        sf.pend.reset = Some(ResetCode::Closed);
        sf.timers.stop(Timer::Retx);
        sf.timers.stop(Timer::Rto);
        sf.state = SubState::Closed;
        self.reinject(i);
        self.events.push_back(Event::PathClosed(id));
    }
}
