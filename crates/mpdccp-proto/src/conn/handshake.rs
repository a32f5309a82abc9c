//! The MP-DCCP handshakes (RFC 9897 §3.3, §3.2.2): MP_KEY on the first
//! subflow, MP_JOIN + MP_HMAC on the others, the server's acceptance of
//! Requests and the checks of the third packet.
//!
//! Every decision that depends on the key exchange — which MP_KEY offer is
//! acceptable ([`Connection::accept_key_offer`]), how a join's MP_HMAC is
//! checked and how the third packet proves the keys
//! ([`Connection::verify_third_packet`]) — is made here, over the parsed
//! [`Segment`]; the authenticated mode's messages (key type 255 + MP_EXP)
//! are in `authn.rs`, and its keys reach the HMACs through
//! [`Connection::d_keys`].

use super::codec::MpJoin;
use super::{
    authn, features, keys, opt, ConnKeys, Connection, Event, FeatureNum, Negotiation, PacketType,
    PathConfig, PathId, ResetCode, Segment, SubState, WireError,
};
use crate::time::Instant;
use keys::JoinHmac;
use rand::Rng;

impl Connection {
    /// Server: a Request on a path without a subflow. Refusals leave a
    /// closed subflow that sends its Reset once and is forgotten as soon as
    /// it has (a host that has not proven who it is gets no state); beyond
    /// `max_paths` refusals waiting for their Reset, a refused Request is
    /// dropped unanswered and leaves nothing at all.
    pub(super) fn accept_request(&mut self, now: Instant, path: PathId, seg: &Segment<'_>) {
        if self.life.is_closing_or_closed() {
            self.stats.rx.rx_request_refused += 1;
            return;
        }
        let mut sf = self.new_subflow(path, PathConfig::default());
        // RFC 4340 §5.8 / §5.8.2: a Request whose options break the rules
        // is refused before anything in it is believed.
        let verdict = match (
            seg.option_error.and_then(WireError::reset_code),
            seg.mp.join,
        ) {
            (Some(code), _) => Err(code),
            (None, Some(j)) => self.check_join_request(&j, seg).map(Some),
            (None, None) => self.check_initial_request(seg).map(|()| None),
        };
        match verdict {
            Err(_) if self.refusals_waiting() >= self.config.mp.max_paths => {
                self.stats.auth.refusals_dropped += 1;
                return;
            }
            Err(code) => {
                sf.on_first_request(now, seg);
                sf.refuse(code);
            }
            Ok(join) => {
                sf.on_first_request(now, seg);
                if let Some((j, nonce, addr_id)) = join {
                    sf.accept_join(&j, nonce, addr_id);
                }
                // RFC 4340 §6: features the client asked us to confirm
                // (a join's Multipath Capable among them: Confirm L(10)
                // 0 0, RFC 9897 §3.1, §3.2.2).
                let window = seg
                    .feat(opt::CHANGE_L, FeatureNum::SequenceWindow)
                    .map(|f| f.value);
                let mp = self.negotiation.is_multipath();
                sf.owe_feature_confirms(features::handshake_confirms(seg, true, mp));
                sf.respond(now, self.config.lifetime.respond_timeout, window);
            }
        }
        self.insert_path(sf);
    }

    /// Server subflows that refused their Request and still owe the Reset.
    fn refusals_waiting(&self) -> usize {
        self.paths
            .iter()
            .filter(|p| !p.announced() && p.state() == SubState::Closed && p.has_pending_reset())
            .count()
    }

    /// MP_JOIN in a Request (RFC 9897 §3.2.2): the Reset code refusing it,
    /// or the join with the nonce and Address ID we answer it with.
    fn check_join_request(
        &mut self,
        j: &MpJoin,
        seg: &Segment<'_>,
    ) -> Result<(MpJoin, u32, u8), ResetCode> {
        if !self.negotiation.is_multipath() {
            self.stats.auth.join_not_multipath += 1;
            Err(ResetCode::ConnectionRefused)
        } else if j.token != self.join_ids().0 {
            // Unknown path token → Reset.
            self.stats.auth.join_unknown_token += 1;
            Err(ResetCode::NoConnection)
        } else if !features::mp_version_agreed(seg, true) {
            // RFC 9897 §3.2.2, §3.6 (F2): a join exchanges Multipath
            // Capable as the first subflow did, and "MUST use the version
            // negotiated for the first subflow" (0); without Change R(10)
            // listing it the subflow is closed — Reset 5, Option Error
            // (§3.5: "an MP-DCCP option provides invalid data").
            self.stats.auth.join_bad_mp_capable += 1;
            Err(ResetCode::OptionError)
        } else if self.live_paths() >= self.config.mp.max_paths {
            self.stats.auth.join_too_busy += 1;
            Err(ResetCode::TooBusy)
        } else {
            let nonce = self.rng.gen::<u32>().max(1);
            let addr_id = self.alloc_addr_id();
            Ok((*j, nonce, addr_id))
        }
    }

    /// The first Request: multipath if both want it, plain DCCP otherwise;
    /// a second initial handshake on a connection is refused.
    fn check_initial_request(&mut self, seg: &Segment<'_>) -> Result<(), ResetCode> {
        if self.paths.iter().any(|p| !p.is_join() && !p.is_gone()) || !self.negotiation.is_pending()
        {
            self.stats.rx.rx_unexpected += 1;
            return Err(ResetCode::ConnectionRefused);
        }
        // RFC 9897 §3.1: Change R(10) listing version 0 (F10).
        let offered = features::mp_version_agreed(seg, true);
        // Authenticated mode: key type 255 alone (no downgrade), and
        // multipath (the keys and the Confirm live in MP-DCCP options; a
        // plain-DCCP fallback would admit a connection no key proved).
        if !self.auth_request_offer_ok(seg, offered) {
            return Err(ResetCode::ConnectionRefused);
        }
        self.accept_key_offer(offered, seg);
        Ok(())
    }

    /// RFC 9897 §3.3: multipath when we want it, the peer asked for (or
    /// confirmed) feature 10 and its MP_KEY offers a key type we support
    /// (plain text today); otherwise plain DCCP (counted as a fallback).
    fn accept_key_offer(&mut self, feature_agreed: bool, seg: &Segment<'_>) {
        let offer = seg.mp.key.as_ref();
        if self.is_authenticated_mode() {
            // Key type 255 was checked (authn.rs); the keys are installed.
            self.ident.remote_ci = offer.map(|k| k.ci);
            self.negotiation = Negotiation::agreed(
                feature_agreed && offer.is_some() && self.ident.session.is_some(),
            );
            return;
        }
        match offer.and_then(|k| Some((k.ci, k.plain_key()?))) {
            Some((ci, key)) if self.config.multipath && feature_agreed => {
                self.ident.remote_key = Some(key);
                self.ident.remote_ci = Some(ci);
                self.negotiation = Negotiation::Multipath;
            }
            _ => {
                if self.config.multipath {
                    self.stats.auth.fallbacks += 1;
                }
                self.negotiation = Negotiation::PlainDccp;
            }
        }
    }

    /// Client in REQUEST: only a Response or Reset acknowledging one of our
    /// Requests is accepted (RFC 4340 §8.1.1).
    pub(super) fn handle_in_request(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let acks_us = self.paths[i].acks_our_request(seg);
        match seg.ptype {
            PacketType::Reset if acks_us => {
                self.stats.traffic.resets_received += 1;
                if self.auth_cookie_reset(now, i, seg).is_some() {
                    return;
                }
                let first = !self.paths[i].is_join();
                self.fail_path(i, None);
                if first {
                    self.life.set_reason(format!(
                        "connection refused (reset code {:?})",
                        seg.reset_code
                    ));
                }
            }
            PacketType::Response if acks_us => {
                match seg.option_error.and_then(WireError::reset_code) {
                    Some(code) => self.fail_path(i, Some(code)),
                    None if self.paths[i].is_join() => self.handle_response(now, i, seg),
                    None => match self.auth_response(seg) {
                        authn::ResponseVerdict::Proceed => self.handle_response(now, i, seg),
                        authn::ResponseVerdict::Ignore => self.stats.rx.rx_unexpected += 1,
                        authn::ResponseVerdict::Refuse => {
                            self.life
                                .set_reason("server did not authenticate (key type 255)");
                            self.fail_path(i, Some(ResetCode::ConnectionRefused));
                        }
                    },
                }
            }
            _ => self.stats.rx.rx_unexpected += 1,
        }
    }

    /// Client: the Response (the Response-to-Request time is the first RTT
    /// sample, RFC 4340 §8.1).
    pub(super) fn handle_response(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        self.paths[i].on_response(now, seg);
        if !self.paths[i].is_join() {
            // RFC 9897 §3.1: Confirm L(10) selecting version 0 (F10).
            let confirmed = features::mp_version_agreed(seg, false);
            self.accept_key_offer(confirmed, seg);
        }
        // RFC 4340 §6: the third packet confirms the Response's Changes.
        let mp = self.negotiation.is_multipath();
        self.paths[i].owe_feature_confirms(features::handshake_confirms(seg, false, mp));
        if self.paths[i].is_join() {
            // RFC 9897 §3.2.2, §3.6 (F2): the join's Response confirms
            // Multipath Capable as the first subflow's did — Confirm L(10)
            // selecting version 0, the connection's; missing, empty or
            // another version: the subflow is closed (Reset 5).
            if !features::mp_version_agreed(seg, false) {
                self.stats.auth.join_bad_mp_capable += 1;
                self.fail_path(i, Some(ResetCode::OptionError));
                return;
            }
            // RFC 9897 §3.2.2: verify HMAC(d-keyB, RB‖RA) from the server
            // (a reference profile: HMAC(d-keyB, J‖RA), docs/INTEROP.md).
            let ra = self.paths[i].local_nonce();
            let (p, j_id) = (self.config.wire_profile, self.join_ids().0);
            let ok = match (seg.mp.join, seg.mp.hmac, self.d_keys()) {
                (Some(j), Some(h), Some(k)) => {
                    let d = k.d_key_remote();
                    let at = JoinHmac::Response;
                    keys::verify_join_hmac_in(p, &d, at, j_id, (ra, j.nonce), &h).then_some(j)
                }
                _ => None,
            };
            match ok {
                Some(j) => self.paths[i].set_peer_join(&j),
                None => {
                    self.stats.auth.join_bad_hmac += 1;
                    self.fail_path(i, Some(ResetCode::OptionError));
                    return;
                }
            }
        }
        self.paths[i].enter_partopen(now, self.config.lifetime.handshake_rto);
    }

    /// Server side of the third handshake packet: MP_KEY echo (first
    /// subflow) or MP_HMAC = HMAC(d-keyA, RA‖RB) (join). A failure closes
    /// the subflow with Reset (Option Error).
    pub(super) fn verify_third_packet(&mut self, i: usize, seg: &Segment<'_>) -> bool {
        let first = !self.paths[i].is_join();
        // Authenticated mode: the Confirm proves the client holds the keys;
        // without it no connection, whatever was negotiated
        // (docs/SECURITY.md §3).
        if let Some(ok) = first.then(|| self.auth_confirm_ok(seg)).flatten() {
            if !ok {
                self.paths[i].refuse(ResetCode::OptionError);
                self.life.set_reason("key confirmation failed");
            }
            return ok;
        }
        if !self.negotiation.is_multipath() {
            return true;
        }
        let sf = &self.paths[i];
        if sf.is_join() {
            // RFC 9897 §3.2.2: HMAC(d-keyA, RA‖RB); a reference profile:
            // HMAC(d-keyA, J‖RB) (docs/INTEROP.md).
            let (p, j_id) = (self.config.wire_profile, self.join_ids().0);
            let nonces = (sf.remote_nonce(), sf.local_nonce());
            let ok = match (seg.mp.hmac, self.d_keys()) {
                (Some(h), Some(k)) => {
                    let d = k.d_key_remote();
                    keys::verify_join_hmac_in(p, &d, JoinHmac::Ack, j_id, nonces, &h)
                }
                _ => false,
            };
            if !ok {
                self.stats.auth.join_bad_hmac += 1;
                self.paths[i].refuse(ResetCode::OptionError);
                return false;
            }
        } else if let Some(k) = &seg.mp.key {
            let echo = k.echoed_key();
            if k.plain_key() != self.ident.remote_key
                || echo.is_some_and(|p| p != self.ident.local_key)
            {
                self.stats.auth.bad_key_echo += 1;
                self.paths[i].refuse(ResetCode::OptionError);
                self.life.set_reason("MP_KEY mismatch");
                return false;
            }
        }
        true
    }

    /// Subflow `i` reached OPEN; the first time, the path (and the first
    /// time of all, the connection) is announced.
    pub(super) fn mark_open(&mut self, i: usize) {
        if !self.paths[i].set_open() {
            return;
        }
        let id = self.paths[i].id();
        if self.life.path_opened() {
            self.events.push_back(Event::Connected);
        }
        self.events.push_back(Event::PathEstablished(id));
    }

    /// The identifiers of a join (RFC 9897 §3.2.2; `identity.rs`).
    pub(super) fn join_ids(&self) -> (u32, u32) {
        self.ident.join_ids(self.role, self.config.wire_profile)
    }

    /// The keys of every MP_HMAC (`identity.rs`).
    pub(super) fn d_keys(&self) -> Option<ConnKeys> {
        self.ident.d_keys()
    }
}
