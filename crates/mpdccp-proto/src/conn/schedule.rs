//! Output: the scheduling loop (MP_SEQ is assigned here), GSO batching and
//! the construction of each packet.

use super::subflow::{AckSegment, EmitCtx};
use super::{
    ConnState, Connection, PacketMeta, PacketType, Queued, Segment, Transmit, DATA_HEADER_MAX,
    PROTECTION_OVERHEAD, SEQ_MASK,
};
use crate::auth::protect::COUNTER_LEN;
use crate::time::Instant;
use std::net::IpAddr;
use std::time::Duration;

/// Copies of a multi-path (redundant) decision a path holds at least while
/// its window is full: about 0.3 s at the 100 packets/s of a VoIP or
/// gaming flow, so an RTO or two on one path costs no copy.
const REDUNDANT_PATH_QUEUE_PKTS: u32 = 256;

/// What a path owes next ([`Connection::owed_on`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owed {
    Nothing,
    /// The subflow's own control packet ([`Subflow::owed_control`]).
    Control,
    /// Data or a pure Ack; with `probe`, a PLPMTUD probe may go first.
    AckOrData {
        probe: bool,
    },
}

impl Connection {
    /// The next packet to send, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.last_now = self.last_now.max(now);
        self.blocked_none = None;
        // A datagram set aside by the previous GSO batch goes first.
        if let Some((path, n)) = self.held.take() {
            if buf.len() >= n {
                buf[..n].copy_from_slice(&self.scratch.held_buf[..n]);
                return Some(Transmit {
                    path,
                    size: n,
                    segment_size: None,
                });
            }
            self.held = Some((path, n));
            return None;
        }
        if self.life.state() == ConnState::Closed
            && self.paths.iter().all(|p| !p.has_pending_reset())
        {
            return None;
        }
        let all_blocked = self.schedule(now);
        // Built once for the paths' turns, and only when a path may send:
        // most calls find nothing, and a turn that sends nothing changes
        // none of its inputs (the next batch packet's does).
        let mut ctx: Option<EmitCtx> = None;
        let mut owed_any = false;
        let n = self.paths.len();
        for k in 0..n {
            let i = (self.rr_next + k) % n;
            let owed = self.owed_on(now, i);
            if owed == Owed::Nothing {
                continue;
            }
            owed_any = true;
            let ctx = ctx.get_or_insert_with(|| self.emit_ctx());
            let Some(size) = self.emit_on(now, i, buf, owed, ctx) else {
                continue;
            };
            self.rr_next = (i + 1) % n.max(1);
            self.count_tx(i, size);
            let id = self.paths[i].id();
            let (total, segments) = self.fill_gso_batch(now, i, buf, size);
            // A refused or failed handshake's subflow is forgotten as soon
            // as its Reset is out: refused Requests (forged joins) leave no
            // state behind, even when no timer would reap them soon.
            if !self.paths[i].announced() && self.paths[i].owes_nothing() {
                self.paths.remove(i);
                self.rr_next = 0;
            }
            return Some(Transmit {
                path: id,
                size: total,
                segment_size: (segments > 1).then_some(size),
            });
        }
        if all_blocked && !owed_any && self.queue.appends_keep_head() {
            let dropped = self.stats.send_queue.send_queue_dropped_oldest;
            self.blocked_none = Some((now, dropped));
        }
        None
    }

    /// Whether `poll_transmit(now)` would answer `None` again and change
    /// nothing: true when the last `poll_transmit` answered `None` at `now`
    /// with the send queue's head held, every path's window or pacer full
    /// and nothing owed on any path, and since then only
    /// [`Connection::send`] was called, appending to a plain FIFO (any
    /// other input — a datagram, a timer, a path or close call — makes it
    /// false until the next poll). A repeat would then redo the same turn
    /// at the same instant: the paths' refresh, the head's age check and
    /// the blocked marks find what the first one left.
    pub fn repoll_would_idle(&self, now: Instant) -> bool {
        self.blocked_none.is_some_and(|(at, dropped)| {
            at == now && dropped == self.stats.send_queue.send_queue_dropped_oldest
        })
    }

    /// A GSO batch: after the first packet (`size` bytes at the start of
    /// `buf`), more data packets of the same size for path `i`, the last
    /// one possibly shorter. A larger one is set aside for the next call.
    /// Returns the batch's bytes and its number of segments.
    fn fill_gso_batch(
        &mut self,
        now: Instant,
        i: usize,
        buf: &mut [u8],
        size: usize,
    ) -> (usize, usize) {
        let id = self.paths[i].id();
        let mut total = size;
        let mut segments = 1;
        let mss = self.config.mss_bytes as usize;
        while segments < self.config.max_gso_segments && buf.len() - total >= mss {
            self.schedule(now);
            let ctx = self.emit_ctx();
            let Some(m) = self.emit_data_on(now, i, &mut buf[total..], &ctx) else {
                break;
            };
            self.count_tx(i, m);
            if m == size {
                total += m;
                segments += 1;
            } else if m < size {
                // The last segment may be shorter.
                total += m;
                segments += 1;
                break;
            } else {
                // Larger: it goes out alone on the next call.
                self.scratch.held_buf.clear();
                self.scratch
                    .held_buf
                    .extend_from_slice(&buf[total..total + m]);
                self.held = Some((id, m));
                break;
            }
        }
        (total, segments)
    }

    pub(super) fn count_tx(&mut self, i: usize, size: usize) {
        self.stats.traffic.tx_datagrams += 1;
        self.stats.traffic.tx_bytes += size as u64;
        self.paths[i].count_tx(size);
    }

    /// Tells each subflow how many paths are Active (the queue-delay bound
    /// applies only from two on, `subflow/delay_bound.rs`).
    pub(super) fn note_active_paths(&mut self) {
        let n = self
            .paths
            .iter()
            .filter(|p| p.path_state() == crate::path::PathState::Active)
            .count();
        for p in &mut self.paths {
            p.set_active_paths(n);
        }
    }

    pub(super) fn rebuild_views(&mut self) {
        self.scratch.views.clear();
        for p in &self.paths {
            self.scratch.views.push(p.view());
        }
    }

    /// Hands queued packets to paths as the scheduler decides; MP_SEQ is
    /// assigned here, in application order. True when it held the head
    /// because no path could take anything (the held turn below).
    pub(super) fn schedule(&mut self, now: Instant) -> bool {
        // An idle window decays before it is scheduled by (cc::validation).
        self.note_active_paths();
        for p in &mut self.paths {
            p.refresh(now);
        }
        if self.queue.len() == 0 || !self.paths.iter().any(|p| p.is_usable()) {
            return false;
        }
        // Most calls find every window (or pacer) full. For a scheduler
        // that then holds, do exactly what the loop's first turn would:
        // shed the head, and mark each usable path blocked (none can be
        // chosen); the views would only be built to be asked.
        if self.scheduler.holds_unless_a_path_can_send()
            && !self.paths.iter().any(|p| p.view_can_send(now))
        {
            self.shed_queue_head(now);
            if self.queue.front().is_none() {
                return false;
            }
            for p in &mut self.paths {
                if p.view_usable() {
                    p.note_blocked(now);
                }
            }
            return true;
        }
        // Within this loop only the per-path queues change, so a view is
        // refreshed when its path takes a packet, not rebuilt for every path.
        self.rebuild_views();
        for _ in 0..64 {
            let hold = self.scheduler.hold_allowance(now, &self.scratch.views);
            self.shed_queue_head_allowing(now, hold);
            let Some(head) = self.queue.front() else {
                break;
            };
            let meta = PacketMeta {
                len: head.data.len(),
                queued_pkts: self.queue.len(),
                queued_bytes: self.queue.bytes(),
                sparse: self.queue.head_is_sparse(),
            };
            self.scratch.sched_out.clear();
            self.scheduler
                .select(now, &meta, &self.scratch.views, &mut self.scratch.sched_out);
            // A usable path that could not take this packet (window or pacer)
            // has more demand than it carries: not application limited.
            for (k, v) in self.scratch.views.iter().enumerate() {
                if v.is_usable() && !v.can_send(now) && !self.scratch.sched_out.contains(&v.id) {
                    self.paths[k].note_blocked(now);
                }
            }
            let chosen = self.keep_paths_with_room();
            if self.scratch.sched_out.is_empty() {
                // No chosen path can take it: hold the packet.
                break;
            }
            // The packet leaves on some paths; the copies meant for full
            // ones are lost, and said so.
            self.stats.send_queue.sched_copies_dropped +=
                (chosen - self.scratch.sched_out.len()) as u64;
            // Invariant: head existed above and nothing popped since.
            let q = self.queue.pop().expect("head exists");
            let seq = if self.negotiation.is_multipath() {
                self.numbering.take_tx()
            } else {
                0
            };
            self.hand_to_chosen_paths(seq, q);
            self.scheduler
                .on_scheduled(now, &meta, &self.scratch.sched_out);
        }
        false
    }

    /// Drops what the send queue's head has outlived (age limit, CoDel)
    /// and counts it.
    fn shed_queue_head(&mut self, now: Instant) {
        self.shed_queue_head_allowing(now, Duration::ZERO);
    }

    /// [`Self::shed_queue_head`] with CoDel blind to the scheduler's `hold`.
    fn shed_queue_head_allowing(&mut self, now: Instant, hold: Duration) {
        let shed = self.queue.shed_head_allowing(now, hold);
        self.stats.send_queue.send_queue_expired += shed.expired;
        self.stats.send_queue.send_queue_codel_dropped += shed.codel;
        self.stats.send_queue.send_queue_ecn_marked += shed.ecn_marked;
    }

    /// Of the scheduler's answer, keeps the paths that can carry data and
    /// whose per-path queue has room: one cwnd for a single-path decision
    /// (the packet is better held here, where the scheduler can still move
    /// it), and at least REDUNDANT_PATH_QUEUE_PKTS for the copies of a
    /// multi-path one, which must wait out a collapsed window. Returns how
    /// many distinct paths were chosen before the filter.
    fn keep_paths_with_room(&mut self) -> usize {
        self.scratch.sched_out.dedup();
        let chosen = self.scratch.sched_out.len();
        let paths = &self.paths;
        self.scratch.sched_out.retain(|id| {
            paths
                .binary_search_by_key(id, |p| p.id())
                .ok()
                .is_some_and(|i| {
                    let p = &paths[i];
                    let limit = if chosen > 1 {
                        p.cwnd_pkts().max(REDUNDANT_PATH_QUEUE_PKTS)
                    } else {
                        p.cwnd_pkts().max(1)
                    };
                    p.takes_data_within(limit)
                })
        });
        chosen
    }

    /// Queues packet `q` (MP_SEQ `seq`) on every retained path: the last
    /// one gets the packet itself, the others copies; with more than one
    /// path each is marked a copy (a reinjected copy is dropped, its twins
    /// carry its MP_SEQ).
    fn hand_to_chosen_paths(&mut self, seq: u64, q: Queued) {
        let n = self.scratch.sched_out.len();
        let mut q = Some(q);
        for k in 0..n {
            let id = self.scratch.sched_out[k];
            // Invariant: retained ids exist.
            let i = self.idx(id).expect("retained path exists");
            let item = if k + 1 == n {
                let mut last = q.take().expect("moved once");
                last.copy = n > 1;
                last
            } else {
                let src = q.as_ref().expect("still owned");
                Queued {
                    data: src.data.clone(),
                    enqueued: src.enqueued,
                    copy: true,
                }
            };
            self.paths[i].assign(seq, item);
            self.scratch.views[i] = self.paths[i].view();
        }
    }

    /// The meta-connection state the subflows need to build packets.
    fn emit_ctx(&self) -> EmitCtx {
        let c = &self.config;
        EmitCtx {
            mp_on: self.negotiation.is_multipath(),
            offer_mp: c.multipath,
            keys: self.d_keys(),
            local_key: self.ident.local_key,
            remote_key: self.ident.remote_key,
            local_ci: self.ident.local_ci,
            closing_mp: self.life.closing_mp(),
            service_code: c.service_code,
            ackvec_cover_pkts: c.ack.ackvec_cover_pkts,
            ack_ratio: c.ack.ratio,
            mp_rtt_interval: c.mp.rtt_interval,
            mp_option_rto: c.mp.option_rto,
            mp_option_max_tries: c.mp.option_max_tries,
            last_mp_seq: self.numbering.last_tx(),
            profile: c.wire_profile,
            join_ids: self.join_ids(),
        }
    }

    /// What path `i` owes next, decided before anything is built: the one
    /// rule [`Connection::emit_on`] follows, and the test that lets
    /// `poll_transmit` skip building an [`EmitCtx`] when it is
    /// [`Owed::Nothing`]. It changes nothing but the MP_PRIO release (which
    /// a second call repeats as a no-op).
    fn owed_on(&mut self, now: Instant, i: usize) -> Owed {
        let mp_on = self.negotiation.is_multipath();
        let sf = &mut self.paths[i];
        if mp_on {
            sf.release_untold_prio();
        }
        if sf.owed_control().is_some() {
            return Owed::Control;
        }
        if !sf.sends_data() {
            return Owed::Nothing;
        }
        // A PLPMTUD probe's own timer decides (`plpmtu.rs`).
        if sf.plpmtud.is_some() {
            return Owed::AckOrData { probe: true };
        }
        if sf.data_ready(now) {
            return Owed::AckOrData { probe: false };
        }
        let advert = mp_on && self.addrs.adverts.iter().any(|a| a.is_due(now));
        if self.paths[i].ack_owed(now, advert) {
            Owed::AckOrData { probe: false }
        } else {
            Owed::Nothing
        }
    }

    /// Builds the packet `owed` (from [`Connection::owed_on`], just now)
    /// names on path `i`, if any: the subflow's control packet, or data or
    /// a pure Ack (after a PLPMTUD probe when one is due).
    fn emit_on(
        &mut self,
        now: Instant,
        i: usize,
        buf: &mut [u8],
        owed: Owed,
        ctx: &EmitCtx,
    ) -> Option<usize> {
        match owed {
            Owed::Nothing => None,
            Owed::Control => {
                let sf = &mut self.paths[i];
                // `None`: a Request whose retransmission is not due yet.
                let mut s = sf.poll_control(now, ctx)?;
                let addrs = sf.pseudo_addrs();
                if ctx.mp_on {
                    sf.attach_handshake_prio(&mut s, ctx.last_mp_seq);
                }
                self.auth_options(now, i, &mut s); // key type 255 + MP_EXP (authn.rs)
                match s.ptype {
                    PacketType::Reset => self.stats.traffic.resets_sent += 1,
                    PacketType::Sync => self.stats.traffic.syncs_sent += 1,
                    PacketType::SyncAck => self.stats.traffic.syncacks_sent += 1,
                    _ => {}
                }
                let (ptype, payload_len) = (s.ptype, s.payload.len());
                let n = self.finish_emit(&mut s, addrs, buf)?;
                // Protected mode: every packet after the handshake is sealed.
                self.seal_control(i, ptype, buf, n, payload_len, addrs)
            }
            Owed::AckOrData { probe } => {
                // RFC 8899 probe (a padded Sync), before data: `plpmtu.rs`.
                if probe {
                    if let Some(n) = self.emit_plpmtu_probe(now, i, buf) {
                        return Some(n);
                    }
                }
                self.emit_ack_or_data(now, i, ctx, buf)
            }
        }
    }

    /// The next data packet of a GSO batch on path `i`, if data may go
    /// now: nothing else (a control packet or a probe ends the batch).
    fn emit_data_on(
        &mut self,
        now: Instant,
        i: usize,
        buf: &mut [u8],
        ctx: &EmitCtx,
    ) -> Option<usize> {
        let sf = &mut self.paths[i];
        if ctx.mp_on {
            sf.release_untold_prio();
        }
        // Open, nothing owed before data, window and pacer open.
        if !(sf.data_sendable(now) && sf.sends_data()) {
            return None;
        }
        self.emit_ack_or_data(now, i, ctx, buf)
    }

    /// Data (when the window and the pacer allow) or a pure Ack carrying
    /// what is owed; address adverts ride on pure Acks.
    fn emit_ack_or_data(
        &mut self,
        now: Instant,
        i: usize,
        ctx: &EmitCtx,
        buf: &mut [u8],
    ) -> Option<usize> {
        let advert = if ctx.mp_on {
            self.addrs.adverts.iter().position(|a| a.is_due(now))
        } else {
            None
        };
        let sf = &mut self.paths[i];
        let mut data_ready = sf.data_ready(now);
        if !data_ready && !sf.ack_owed(now, advert.is_some()) {
            return None;
        }
        // Only now: most calls find nothing to send.
        let addrs = sf.pseudo_addrs();
        // The data packet's header is bounded (`subflow/data_header.rs`):
        // what is owed and does not fit goes first on a pure Ack.
        let av = sf.next_ack_vector(ctx);
        let plan = data_ready.then(|| sf.plan_data(now, ctx, av.cells.len()));
        if plan.is_some_and(|p| p.ack_first) {
            data_ready = false;
            self.stats.traffic.acks_before_data += 1;
        }
        let sf = &mut self.paths[i];
        let data = if data_ready { sf.pop_data() } else { None };
        let mut seg = Segment::new(PacketType::Ack, 0);
        let AckSegment { seq, prio_given_up } =
            sf.ack_segment(now, ctx, data.as_ref(), av, plan, &mut seg);
        if prio_given_up {
            self.stats.paths.mp_option_unconfirmed += 1;
        }
        // ADDADDR/REMOVEADDR travel on pure Acks (their MP_HMAC would
        // clash with nothing else there).
        if let (Some(ai), Some(k), None) = (advert, ctx.keys, &data) {
            let rto = self.paths[i].option_rto(self.config.mp.option_rto);
            self.addrs.adverts[ai].attach(now, rto, &k, self.config.wire_profile, &mut seg);
            // RFC 9897 §3.2.1: with MP_SEQ, the highest one assigned (a
            // pure Ack numbers no data).
            seg.mp.seq.get_or_insert(ctx.last_mp_seq & SEQ_MASK);
        }
        let sf = &mut self.paths[i];
        if seg.ptype.has_ack() {
            sf.on_ack_sent();
        }
        let result = self.write_ack_or_data(i, &mut seg, data.as_ref(), addrs, buf);
        if let Some(av) = seg.ack_vector_out.take() {
            self.paths[i].recycle_ack_vector(av);
        }
        if let Some((mseq, q)) = data {
            // A packet that did not fit is lost to the application (counted
            // once, below, with every datagram that did not fit).
            if result.is_some() {
                self.data_packet_sent(now, i, seq, mseq, q);
            } else {
                self.queue.recycle(q.data);
            }
        }
        if result.is_none() {
            self.stats.traffic.tx_buffer_too_small += 1;
        }
        result
    }

    /// Writes the built Ack or data packet `seg` of path `i` into `buf`
    /// (`data`: its MP_SEQ and payload), sealed when protection is on. A
    /// data packet whose header would exceed [`DATA_HEADER_MAX`] goes as
    /// bare DCCP-Data + MP_SEQ instead (the bound is a guarantee, checked
    /// on every data packet built).
    fn write_ack_or_data(
        &mut self,
        i: usize,
        seg: &mut Segment<'_>,
        data: Option<&(u64, Queued)>,
        addrs: (IpAddr, IpAddr),
        buf: &mut [u8],
    ) -> Option<usize> {
        let profile = self.config.wire_profile;
        // Protected: written for sealing where it lies (payload after the
        // counter's room, checksum once over the ciphertext); a data packet
        // is sealed (or not sent) whatever the subflow's state, as in
        // `seal_data`.
        let sealing =
            self.protection.is_some() && (data.is_some() || self.control_sealed(i, seg.ptype));
        let checksum_addrs = self.config.fill_checksums.then_some(addrs);
        let emit = |seg: &mut Segment<'_>, buf: &mut [u8]| {
            if sealing {
                seg.emit_for_sealing(buf, profile, COUNTER_LEN, PROTECTION_OVERHEAD - COUNTER_LEN)
            } else {
                seg.emit_plain(buf, checksum_addrs, profile)
            }
        };
        let mut emitted = emit(seg, buf);
        if let (Some(_), Some((mseq, q))) = (emitted, data) {
            let hl = usize::from(buf[4]) * 4;
            debug_assert!(
                hl <= DATA_HEADER_MAX,
                "data header {hl} > {DATA_HEADER_MAX}"
            );
            if hl > DATA_HEADER_MAX {
                // Never sent: the same packet as bare DCCP-Data + MP_SEQ.
                self.stats.traffic.tx_data_header_over += 1;
                let mut bare = Segment::new(PacketType::Data, seg.seq);
                (bare.src_port, bare.dst_port) = (seg.src_port, seg.dst_port);
                bare.mp.seq = seg.mp.seq.map(|_| mseq & SEQ_MASK);
                bare.payload = &q.data;
                emitted = emit(&mut bare, buf);
            }
        }
        match (emitted, data) {
            (Some(len), Some((_, q))) if sealing => {
                self.seal_emitted(i, buf, len, q.data.len(), addrs)
            }
            (Some(len), None) if sealing => self.seal_emitted(i, buf, len, 0, addrs),
            (Some(len), Some((_, q))) => self.seal_data(i, buf, len, q.data.len(), addrs),
            (Some(len), None) => self.seal_control(i, seg.ptype, buf, len, 0, addrs),
            (None, _) => None,
        }
    }

    /// Data packet `q` (DCCP `seq`, MP_SEQ `mseq`) left on path `i`: the
    /// subflow's sender and the connection's retransmission store note it.
    fn data_packet_sent(&mut self, now: Instant, i: usize, seq: u64, mseq: u64, q: Queued) {
        let conn_queue_empty = self.queue.len() == 0;
        let sf = &mut self.paths[i];
        sf.data_sent(
            now,
            seq,
            q.data.len() as u32,
            conn_queue_empty,
            self.config.loss.initial_rto,
        );
        self.stats.traffic.tx_data_pkts += 1;
        self.after_data_sent(now, i, seq, mseq, q);
    }

    pub(super) fn finish_emit(
        &mut self,
        s: &mut Segment<'_>,
        addrs: (IpAddr, IpAddr),
        buf: &mut [u8],
    ) -> Option<usize> {
        let checksum_addrs = self.config.fill_checksums.then_some(addrs);
        let r = s.emit_plain(buf, checksum_addrs, self.config.wire_profile);
        if r.is_none() {
            self.stats.traffic.tx_buffer_too_small += 1;
        }
        r
    }
}
