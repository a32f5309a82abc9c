//! What a subflow sends, one function per packet type. The connection
//! hands over a narrow [`EmitCtx`] (keys, identifiers, whether multipath is
//! on) and the MP_SEQ'd data; it adds the connection-level options
//! (address adverts) and writes the bytes.

use super::{Queued, ResetCode, SubState, Subflow, Timer, SEQ_MASK};
use crate::conn::codec::{self, KeyOffer, MpJoin, MpRtt, Segment};
use crate::conn::keys::{self, ConnKeys, JoinHmac};
use crate::time::Instant;
use crate::wire::option::kind as opt;
use crate::wire::{FeatureNum, PacketType, WireProfile};
use std::time::Duration;

/// Ack Vector cells per packet at most (bounds the header, RFC 4340 §11.4).
pub(crate) const ACKVEC_MAX_CELLS: usize = 48;

/// The meta-connection state a subflow needs to build its packets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EmitCtx {
    /// Multipath was negotiated (`Some(true)` at the connection).
    pub mp_on: bool,
    /// Our configuration asks for multipath (Requests offer it).
    pub offer_mp: bool,
    pub keys: Option<ConnKeys>,
    pub local_key: [u8; 8],
    pub remote_key: Option<[u8; 8]>,
    pub local_ci: u32,
    /// The connection is closing with MP_CLOSE (RFC 9897 §3.2.11).
    pub closing_mp: bool,
    pub service_code: u32,
    /// Least number of packets an Ack Vector covers.
    pub ackvec_cover_pkts: u64,
    /// Configured Ack Ratio ceiling (RFC 4341 §6.1.2).
    pub ack_ratio: u32,
    pub mp_rtt_interval: Duration,
    pub mp_option_rto: Duration,
    pub mp_option_max_tries: u32,
    /// The highest MP_SEQ assigned so far (the IDSN - 1 before the first).
    pub last_mp_seq: u64,
    /// The connection's wire profile (join HMAC messages).
    pub profile: WireProfile,
    /// The identifiers of a join: in the client's MP_JOIN, in the
    /// server's (RFC 9897 §3.2.2: the peer's CI; k5.10: the server token).
    pub join_ids: (u32, u32),
}

impl EmitCtx {
    /// Our MP_KEY: CI and plain key (Request and Response only, F11); the
    /// k5.10 reference's MP_KEY has no CI field (docs/INTEROP.md).
    fn mp_key(&self) -> KeyOffer {
        KeyOffer::plain(self.ci_on_wire(), self.local_key, None)
    }

    fn ci_on_wire(&self) -> u32 {
        if self.profile.key_has_ci() {
            self.local_ci
        } else {
            0
        }
    }
}

/// What [`Subflow::ack_segment`] tells about the packet it built.
pub(crate) struct AckSegment {
    /// Its (unwrapped) sequence number.
    pub seq: u64,
    /// MP_PRIO was sent for the last time without a confirmation.
    pub prio_given_up: bool,
}

/// A control packet a subflow owes ([`Subflow::owed_control`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OwedControl {
    Reset,
    Request,
    Response,
    HandshakeAck,
    CloseReq,
    Close,
    SyncAck,
    Sync,
}

impl Subflow {
    /// Pseudo-header addresses for the checksum (RFC 4340 §9.1).
    pub(crate) fn pseudo_addrs(&self) -> (std::net::IpAddr, std::net::IpAddr) {
        codec::path_ips(self.cfg.local, self.cfg.remote)
    }

    /// A Reset is still owed to the peer.
    pub(crate) fn has_pending_reset(&self) -> bool {
        self.pend.reset.is_some()
    }

    /// A data packet could go out now, and nothing else is owed first.
    pub(crate) fn data_sendable(&self, now: Instant) -> bool {
        self.state == SubState::Open
            && self.pend.reset.is_none()
            && self.pend.sync.is_none()
            && self.pend.syncack.is_empty()
            && self.data_ready(now)
    }

    /// Data waits here and the window and the pacer let it go.
    pub(crate) fn data_ready(&self, now: Instant) -> bool {
        !self.failed && !self.queue.is_empty() && self.cwnd_room() && self.pacing_ok(now)
    }

    /// Data and acknowledgements may follow (no control packet is owed).
    pub(crate) fn sends_data(&self) -> bool {
        self.seq.have_isr && self.state == SubState::Open
    }

    pub(crate) fn segment<'a>(&mut self, ptype: PacketType) -> Segment<'a> {
        let mut s = Segment::new(ptype, 0);
        self.number(&mut s, ptype);
        s
    }

    /// Makes the fresh `s` the next packet of type `ptype` (built in place
    /// on the data path: a `Segment` is ~1 kB to move).
    fn number(&mut self, s: &mut Segment<'_>, ptype: PacketType) {
        let seq = self.next_seq();
        s.ptype = ptype;
        s.seq = seq & SEQ_MASK;
        s.src_port = self.cfg.local.map_or(4242, |a| a.port());
        s.dst_port = self.cfg.remote.map_or(4242, |a| a.port());
        if ptype.has_ack() {
            s.ack = Some(self.seq.gsr & SEQ_MASK);
        }
    }

    /// One more try of the handshake/close packet: the timer backs off.
    fn retransmit(&mut self, now: Instant) {
        let at = now + self.hs.next_try();
        self.timers.arm(Timer::Retx, at);
    }

    /// The kind of control packet this subflow owes, if any, in priority
    /// order: Reset, then the state's handshake/close packet, then SyncAck
    /// (RFC 4340 §7.5.4), Sync. Pure, so the connection can ask it before
    /// building an [`EmitCtx`]; `Request` means "maybe" (its timer decides
    /// in [`Subflow::poll_control`]).
    pub(crate) fn owed_control(&self) -> Option<OwedControl> {
        if self.pend.reset.is_some() {
            return Some(OwedControl::Reset);
        }
        match self.state {
            SubState::Request => return Some(OwedControl::Request),
            SubState::Respond if self.pend.response => return Some(OwedControl::Response),
            SubState::PartOpen if self.pend.handshake_ack => {
                return Some(OwedControl::HandshakeAck)
            }
            SubState::CloseReq if self.pend.closereq => return Some(OwedControl::CloseReq),
            SubState::Closing if self.pend.close => return Some(OwedControl::Close),
            _ => {}
        }
        if !self.seq.have_isr || !matches!(self.state, SubState::Open | SubState::PartOpen) {
            return None;
        }
        if !self.pend.syncack.is_empty() {
            Some(OwedControl::SyncAck)
        } else if self.pend.sync.is_some() {
            Some(OwedControl::Sync)
        } else {
            None
        }
    }

    /// Builds the control packet [`Subflow::owed_control`] names, if any.
    pub(crate) fn poll_control<'a>(&mut self, now: Instant, ctx: &EmitCtx) -> Option<Segment<'a>> {
        match self.owed_control()? {
            OwedControl::Reset => {
                let code = self.pend.reset.take()?;
                let mut s = self.segment(PacketType::Reset);
                s.reset_code = code;
                if let Some((seq, next)) = self.pend.reset_answer.take() {
                    s.ack = Some(seq & SEQ_MASK);
                    if let Some(n) = next {
                        s.seq = n;
                    }
                }
                let bare = std::mem::take(&mut self.pend.reset_bare);
                if code == ResetCode::MpFastClose && !bare {
                    s.mp.fast_close = ctx.remote_key;
                }
                Some(s)
            }
            OwedControl::Request => self.request(now, ctx),
            OwedControl::Response => Some(self.response(now, ctx)),
            OwedControl::HandshakeAck => Some(self.handshake_ack(now, ctx)),
            OwedControl::CloseReq => {
                self.pend.closereq = false;
                Some(self.close(now, ctx, PacketType::CloseReq))
            }
            OwedControl::Close => {
                self.pend.close = false;
                Some(self.close(now, ctx, PacketType::Close))
            }
            OwedControl::SyncAck => {
                let ack = self.pend.syncack.pop_front()?;
                let mut s = self.segment(PacketType::SyncAck);
                s.ack = Some(ack);
                Some(s)
            }
            OwedControl::Sync => {
                let ack = self.pend.sync.take()?;
                let mut s = self.segment(PacketType::Sync);
                s.ack = Some(ack);
                self.hs.sync_sent(self.seq.gss, now);
                Some(s)
            }
        }
    }

    /// Request (RFC 4340 §8.1.1) with MP_KEY (first subflow, RFC 9897
    /// §3.3) or MP_JOIN (§3.2.2), when its (re)transmission is due.
    fn request<'a>(&mut self, now: Instant, ctx: &EmitCtx) -> Option<Segment<'a>> {
        if !(self.pend.request || self.expired(Timer::Retx, now)) {
            return None;
        }
        self.pend.request = false;
        self.retransmit(now);
        let mut s = self.segment(PacketType::Request);
        self.hs.hs_probe = Some((self.seq.gss, now));
        s.service_code = ctx.service_code;
        s.push_feat(opt::CHANGE_L, FeatureNum::Ccid, Some(2));
        s.push_feat(opt::CHANGE_R, FeatureNum::Ccid, Some(2));
        s.push_feat(opt::CHANGE_R, FeatureNum::SendAckVector, Some(1));
        s.push_feat(
            opt::CHANGE_L,
            FeatureNum::SequenceWindow,
            Some(self.seq.window),
        );
        if ctx.offer_mp {
            // RFC 9897 §3.1: the client asks for the server's Multipath
            // Capable feature, version 0 — on a join too (§3.2.2, F2: "MP_JOIN
            // also exchanges the Multipath Capable feature"; a join uses the
            // first subflow's version, and 0 is our only one).
            s.push_feat(opt::CHANGE_R, FeatureNum::MultipathCapable, Some(0));
            if !self.join {
                s.mp.key = Some(ctx.mp_key());
            } else {
                s.mp.join = Some(self.mp_join(ctx));
            }
        }
        Some(s)
    }

    fn mp_join(&self, ctx: &EmitCtx) -> MpJoin {
        let (client, server) = ctx.join_ids;
        MpJoin {
            addr_id: self.mp.local_addr_id,
            token: if self.initiator { client } else { server },
            nonce: self.mp.local_nonce,
        }
    }

    /// Our MP_HMAC of a join's Response (server) or third packet (client),
    /// under the connection's profile (RFC 9897 §3.2.2; docs/INTEROP.md).
    /// MP_PRIO's tag in the authenticated modes (d-keys from the
    /// handshake, [`keys::prio_hmac`]); none in the open mode.
    fn prio_tag(
        &self,
        ctx: &EmitCtx,
        prio: Option<u8>,
        mp_seq: u64,
    ) -> Option<[u8; keys::HMAC_LEN]> {
        match (&ctx.keys, prio) {
            (Some(ConnKeys::Derived { local, .. }), Some(p)) => Some(keys::prio_hmac(
                local,
                p,
                mp_seq,
                (self.mp.local_nonce, self.mp.remote_nonce),
            )),
            _ => None,
        }
    }

    fn join_hmac(&self, ctx: &EmitCtx, k: &ConnKeys) -> [u8; keys::HMAC_LEN] {
        let at = if self.initiator {
            JoinHmac::Ack
        } else {
            JoinHmac::Response
        };
        let nonces = self.mp.ra_rb(self.initiator);
        keys::join_hmac_in(ctx.profile, &k.d_key_local(), at, ctx.join_ids.0, nonces)
    }

    /// Response confirming the client's features, with our MP_KEY or
    /// MP_JOIN + MP_HMAC = HMAC(d-keyB, RB‖RA) (RFC 9897 §3.2.2).
    fn response<'a>(&mut self, now: Instant, ctx: &EmitCtx) -> Segment<'a> {
        self.pend.response = false;
        let mut s = self.segment(PacketType::Response);
        self.hs.hs_probe = Some((self.seq.gss, now));
        s.service_code = ctx.service_code;
        // RFC 4340 §6: a Confirm for each of the Request's Changes,
        // Multipath Capable's among them (RFC 9897 §3.1: Confirm L(10)).
        for &f in &self.pend.feat_confirms {
            s.push_feat_opt(f);
        }
        if ctx.mp_on {
            if !self.join {
                s.mp.key = Some(ctx.mp_key());
            } else if let Some(k) = ctx.keys {
                s.mp.join = Some(self.mp_join(ctx));
                s.mp.hmac = Some(self.join_hmac(ctx, &k));
            }
        }
        s
    }

    /// The client's third handshake packet (and its repeats in PARTOPEN):
    /// Ack with Confirms, and MP_HMAC = HMAC(d-keyA, RA‖RB) for a join.
    fn handshake_ack<'a>(&mut self, now: Instant, ctx: &EmitCtx) -> Segment<'a> {
        self.pend.handshake_ack = false;
        self.retransmit(now);
        let mut s = self.segment(PacketType::Ack);
        let av = self
            .acks
            .rx
            .encode(self.ack_cover(ctx.ackvec_cover_pkts), ACKVEC_MAX_CELLS);
        // RFC 4340 §6: confirm the Response's Changes (the reference
        // kernel resets a connection that leaves them unconfirmed).
        for &f in &self.pend.feat_confirms {
            s.push_feat_opt(f);
        }
        // RFC 9897 §3.2.4, §3.3 (F11): no MP_KEY on the first subflow's
        // third packet (several keys only in the Request), as the k4.14
        // reference kernel; a join's carries MP_HMAC.
        if ctx.mp_on && self.join {
            if let Some(k) = ctx.keys {
                s.mp.hmac = Some(self.join_hmac(ctx, &k));
            }
        } else if ctx.mp_on && ctx.profile.third_key_message() {
            // The k5.10 reference's third MP_KEY, `{0,KeyC}{0,KeyS}`
            // (docs/INTEROP.md).
            let ci = ctx.ci_on_wire();
            s.mp.key = Some(KeyOffer::plain(ci, ctx.local_key, ctx.remote_key));
        }
        self.on_ack_sent();
        s.ack_vector_out = Some(av);
        s
    }

    /// Close or CloseReq (RFC 4340 §8.3), with MP_CLOSE when the whole
    /// connection closes.
    fn close<'a>(&mut self, now: Instant, ctx: &EmitCtx, ptype: PacketType) -> Segment<'a> {
        self.retransmit(now);
        let mut s = self.segment(ptype);
        if ctx.closing_mp {
            s.mp.close = ctx.remote_key;
        }
        s
    }

    /// MP_PRIO is owed at `now` (first send or retransmission).
    pub(crate) fn prio_due(&self, now: Instant) -> bool {
        self.pend.prio.is_some() && (self.pend.prio_due || self.expired(Timer::PrioRetx, now))
    }

    /// A pure Ack is worth sending (an acknowledgement or an MP option is
    /// owed); `advert` says the connection has an address option due.
    pub(crate) fn ack_owed(&self, now: Instant, advert: bool) -> bool {
        self.wants_ack(now) || !self.pend.confirms.is_empty() || self.prio_due(now) || advert
    }

    /// Takes the next packet the scheduler assigned to this path.
    pub(crate) fn pop_data(&mut self) -> Option<(u64, Queued)> {
        self.queue.pop_front()
    }

    /// DataAck carrying `data` (MP_SEQ and its payload), or a pure Ack:
    /// Ack Vector, Elapsed Time, Ack Ratio negotiation, MP_RTT, MP_CONFIRM
    /// and MP_PRIO (RFC 4340 §11, §13.2; RFC 4341 §6.1.2; RFC 9897 §3.2).
    /// With data, `plan` (from [`Subflow::plan_data`]) says which options
    /// fit the bounded header; `av` is the Ack Vector to carry.
    pub(crate) fn ack_segment<'q>(
        &mut self,
        now: Instant,
        ctx: &EmitCtx,
        data: Option<&'q (u64, Queued)>,
        av: crate::wire::AckVector,
        plan: Option<super::DataPlan>,
        s: &mut Segment<'q>,
    ) -> AckSegment {
        // A pure Ack carries everything owed.
        let plan = data.and(plan);
        let prio_due = self.prio_due(now) && plan.is_none_or(|p| p.prio);
        let ptype = match (data, plan) {
            (None, _) => PacketType::Ack,
            (Some(_), Some(p)) if !p.ack => PacketType::Data,
            (Some(_), _) => PacketType::DataAck,
        };
        self.number(s, ptype);
        let seq = self.seq.gss;
        if ptype.has_ack() {
            s.ack_vector_out = Some(av);
        } else {
            self.recycle_ack_vector(av);
        }
        // A held pure ack says for how long, so the peer's RTT sample does
        // not carry our Ack Ratio / ack-timer wait (RFC 4340 §13.2). Data
        // packets leave it out: their size is budgeted to the MSS.
        if ptype == PacketType::Ack {
            s.elapsed_10us = self.ack_elapsed_10us(now);
        }
        if plan.is_none_or(|p| p.ratio_confirm) {
            if let Some(v) = self.pend.confirm_ack_ratio.take() {
                s.push_feat(opt::CONFIRM_R, FeatureNum::AckRatio, Some(v));
            }
        }
        if let Some((mseq, q)) = data {
            self.data_options(now, ctx, s, *mseq, plan);
            s.payload = &q.data;
        }
        let mut prio_given_up = false;
        if ctx.mp_on {
            // The rest wait for the next packet (most recent first).
            let n = plan.map_or(self.pend.confirms.len(), |p| p.confirms);
            let n = n.min(self.pend.confirms.len()).min(codec::MAX_CONFIRMS);
            for c in self.pend.confirms.drain(..n) {
                s.mp.push_confirm(c);
            }
            if prio_due {
                s.mp.prio = self.pend.prio;
                prio_given_up = self.prio_sent(now, ctx);
                // RFC 9897 §3.2.1: MP_PRIO goes with MP_SEQ; a pure Ack
                // repeats the highest one assigned (it numbers no data).
                let mp_seq = *s.mp.seq.get_or_insert(ctx.last_mp_seq & SEQ_MASK);
                s.mp.prio_hmac = self.prio_tag(ctx, s.mp.prio, mp_seq);
            }
        }
        AckSegment { seq, prio_given_up }
    }

    /// Options of a data packet: the Ack Ratio change (≤ ceil(cwnd/2),
    /// RFC 4341 §6.1.2), MP_SEQ and now and then MP_RTT.
    fn data_options(
        &mut self,
        now: Instant,
        ctx: &EmitCtx,
        s: &mut Segment<'_>,
        mseq: u64,
        plan: Option<super::DataPlan>,
    ) {
        let ratio = plan.is_none_or(|p| p.ratio_change);
        let want = self.desired_ack_ratio(ctx.ack_ratio);
        if want != self.acks.ack_ratio_tx && ratio {
            self.acks.ack_ratio_tx = want;
            self.acks.ack_ratio_unconfirmed = true;
        }
        if self.acks.ack_ratio_unconfirmed && ratio {
            s.push_feat(
                opt::CHANGE_L,
                FeatureNum::AckRatio,
                Some(self.acks.ack_ratio_tx as u64),
            );
        }
        if !ctx.mp_on {
            return;
        }
        s.mp.seq = Some(mseq & SEQ_MASK);
        let due = plan.is_none_or(|p| p.rtt)
            && self
                .mp
                .last_mp_rtt_sent
                .is_none_or(|t| now - t >= ctx.mp_rtt_interval);
        if let (true, Some(srtt)) = (due, self.tx.rtt.srtt()) {
            s.mp.rtt = Some(self.mp_rtt(now, srtt));
        }
    }

    /// RFC 9897 §3.2.7: cycles raw (with its age), min and smoothed RTT.
    fn mp_rtt(&mut self, now: Instant, srtt: Duration) -> MpRtt {
        let kind = self.mp.next_rtt_kind(now);
        let ms = |d: Duration| d.as_millis().min(u32::MAX as u128) as u32;
        let (rtt, age) = match kind {
            0 => (
                self.tx.rtt.latest().unwrap_or(srtt),
                self.tx
                    .last_rtt_sample_at
                    .map_or(Duration::ZERO, |t| now - t),
            ),
            1 => (self.tx.rtt.min_rtt().unwrap_or(srtt), Duration::ZERO),
            _ => (srtt, Duration::ZERO),
        };
        MpRtt {
            kind,
            rtt_ms: ms(rtt),
            age_ms: ms(age),
        }
    }

    /// MP_PRIO went out: arm its retransmission, or give up after
    /// `mp.option_max_tries` (returns true then).
    fn prio_sent(&mut self, now: Instant, ctx: &EmitCtx) -> bool {
        self.pend.prio_tries += 1;
        self.pend.prio_due = false;
        if self.pend.prio_tries >= ctx.mp_option_max_tries {
            self.pend.prio = None;
            self.timers.stop(Timer::PrioRetx);
            return true;
        }
        let at = now + ctx.mp_option_rto.max(self.tx.rtt.rto());
        self.timers.arm(Timer::PrioRetx, at);
        false
    }
}
