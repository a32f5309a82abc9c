//! The authenticated handshake inside a connection (docs/SECURITY.md §3–4):
//! the Noise IK messages ride in the first subflow's Request (Init),
//! Response (Response) and third packet (Confirm) as MP_KEY key type 255 +
//! MP_EXP; a cookie reply arrives in a Reset (code 9). The keys that come
//! out replace key type 0's in every MP_HMAC and in MP_CLOSE.
//!
//! The client drives an [`Initiator`]; the server's connection is created
//! by the endpoint only after its `auth::Gate` verified the Init, and holds
//! the keys and the Response the gate produced until the Confirm verifies.

use super::{
    features, keys, ConnError, Connection, KeyOffer, PacketType, ResetCode, Role, Segment, SubState,
};
use crate::auth::framing;
use crate::auth::handshake::{Binding, CONFIRM_LEN, RESPONSE_LEN};
use crate::auth::mac::labelled_hash;
use crate::auth::{Initiator, InitiatorConfig, SessionKeys};
use crate::time::Instant;

/// Cookie replies a client follows per connection attempt; more are an
/// on-path game (only a host that saw the Init can build one).
const MAX_COOKIE_RETRIES: u32 = 4;

/// Counters of the authenticated handshake on one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AuthStats {
    /// Client: Responses whose message did not verify (ignored).
    pub bad_response: u64,
    /// Client: cookie replies followed by a new Init.
    pub cookie_retries: u64,
    /// Client: a Reset 9 whose cookie reply did not open (stale or
    /// forged) or came after too many: ignored.
    pub bad_cookie_reply: u64,
    /// The peer offered no key type 255, or another key type with it
    /// (downgrade, RFC 9897 §6): refused.
    pub downgrade_refused: u64,
    /// Server: the third packet's Confirm did not verify.
    pub bad_confirm: u64,
}

pub(super) enum AuthRole {
    /// Open mode: RFC 9897 key type 0.
    Off,
    Client(Box<ClientAuth>),
    Server(Box<ServerAuth>),
}

pub(super) struct ClientAuth {
    initiator: Initiator,
    /// Wall clock (ns since the Unix epoch) at `clock_at`: Init
    /// timestamps grow with `now`, so every attempt's is newer.
    unix_base: u64,
    clock_at: Instant,
    /// The Confirm the third packet carries once the Response verified.
    confirm: Option<[u8; CONFIRM_LEN]>,
    cookie_retries: u32,
}

pub(super) struct ServerAuth {
    response: [u8; RESPONSE_LEN],
}

/// What the client does with a Response on its first subflow.
pub(super) enum ResponseVerdict {
    /// Open mode, or verified: go on with the handshake.
    Proceed,
    /// Forged or corrupted: ignore it (the Request is retransmitted).
    Ignore,
    /// The server does not authenticate: refuse (no fallback).
    Refuse,
}

impl Connection {
    /// Client: run the authenticated handshake (key type 255) instead of
    /// key type 0. Call before the first `add_path`; `unix_nanos` is the
    /// wall clock at `now` (the Init's replay-protection timestamp).
    pub fn enable_client_auth(
        &mut self,
        cfg: InitiatorConfig,
        unix_nanos: u64,
        now: Instant,
    ) -> Result<(), ConnError> {
        if self.role != Role::Client || self.life.ever_had_path() || !self.config.multipath {
            return Err(ConnError::Config(
                "client authentication needs a multipath client before its first path".into(),
            ));
        }
        self.auth = AuthRole::Client(Box::new(ClientAuth {
            initiator: Initiator::new(cfg),
            unix_base: unix_nanos,
            clock_at: now,
            confirm: None,
            cookie_retries: 0,
        }));
        Ok(())
    }

    /// Server (the endpoint): this connection was admitted by the gate with
    /// these keys; its Response carries `response`.
    pub(super) fn preset_server_auth(&mut self, keys: SessionKeys, response: [u8; RESPONSE_LEN]) {
        self.auth = AuthRole::Server(Box::new(ServerAuth { response }));
        self.install_session(keys);
    }

    /// True when this connection runs the authenticated handshake.
    pub fn is_authenticated_mode(&self) -> bool {
        !matches!(self.auth, AuthRole::Off)
    }

    /// The handshake's keys, once derived (client) or admitted (server).
    pub fn session_keys(&self) -> Option<&SessionKeys> {
        self.ident.session.as_deref()
    }

    pub fn auth_stats(&self) -> AuthStats {
        self.auth_stats
    }

    /// The keys replace key type 0's: MP_CLOSE / MP_FAST_CLOSE carry the
    /// derived 8-byte values (`local_key` is what the peer must send us).
    fn install_session(&mut self, keys: SessionKeys) {
        self.ident.local_key = keys::close_value(keys.d_key_local());
        self.ident.remote_key = Some(keys::close_value(keys.d_key_remote()));
        self.ident.session = Some(Box::new(keys));
        self.on_session_keys();
    }

    /// Payload protection starts when configured (the subflows' seal/open
    /// lives in `conn/subflow/`, docs/SECURITY.md §5).
    fn on_session_keys(&mut self) {
        if self.config.protect_payload {
            if let Some(k) = self.ident.session.as_deref().cloned() {
                self.enable_payload_protection(k);
            }
        }
    }

    /// Wall-clock nanoseconds at `now` for the Init's timestamp.
    fn unix_nanos(a: &ClientAuth, now: Instant) -> u64 {
        let since = now.saturating_duration_since(a.clock_at).as_nanos();
        a.unix_base
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }

    /// Puts the handshake messages on an outgoing control packet of path
    /// `i`: the Init on the first Request, the Response on the server's
    /// Response, the Confirm on the client's third packet (PARTOPEN Ack).
    pub(super) fn auth_options(&mut self, now: Instant, i: usize, seg: &mut Segment<'_>) {
        let first = !self.paths[i].is_join();
        let partopen = self.paths[i].state() == SubState::PartOpen;
        match &mut self.auth {
            AuthRole::Off => {}
            AuthRole::Client(a) => match seg.ptype {
                PacketType::Request if first && seg.mp.key.is_some() => {
                    // A new Init in every (re)transmitted Request, bound to
                    // it: a copy an attacker spends first locks the real
                    // Request out until its next retransmission only.
                    let t = Self::unix_nanos(a, now);
                    let binding = request_binding(seg);
                    let init = a.initiator.start_bound(&mut self.rng, t, now, &binding);
                    attach(seg, init.as_ref().ok().map(|m| &m[..]));
                }
                PacketType::Ack if first && partopen => {
                    seg.mp.exp = a.confirm.map(|c| c.to_vec());
                }
                _ => {}
            },
            AuthRole::Server(s) => {
                if seg.ptype == PacketType::Response && first && seg.mp.key.is_some() {
                    attach(seg, Some(&s.response));
                }
            }
        }
    }

    /// Client, first subflow: the server's Response must carry the
    /// Response message to our Init (key type 255 alone + MP_EXP).
    pub(super) fn auth_response(&mut self, seg: &Segment<'_>) -> ResponseVerdict {
        let AuthRole::Client(a) = &mut self.auth else {
            return ResponseVerdict::Proceed;
        };
        let offer = seg.mp.key.as_ref();
        let Some(key) = offer
            .filter(|k| k.keys.len() == 1)
            .and_then(|k| k.experimental())
        else {
            self.auth_stats.downgrade_refused += 1;
            return ResponseVerdict::Refuse;
        };
        let verified = framing::join(Some(key), seg.mp.exp.as_deref())
            .and_then(|m| a.initiator.handle_response(&m));
        match verified {
            Ok((keys, confirm)) => {
                a.confirm = Some(confirm);
                self.install_session(keys);
                ResponseVerdict::Proceed
            }
            Err(_) => {
                self.auth_stats.bad_response += 1;
                ResponseVerdict::Ignore
            }
        }
    }

    /// Client, first subflow in REQUEST: a Reset 9 with a cookie reply.
    /// `None`: not a cookie reply (an ordinary Reset). `Some(true)`: the
    /// Request goes out again at once with a new Init (mac2 set).
    /// `Some(false)`: a cookie reply that does not open with our pending
    /// Init (a late answer to a retransmitted earlier Init, or a forgery)
    /// or one too many: ignored, the Request retransmission goes on.
    pub(super) fn auth_cookie_reset(
        &mut self,
        now: Instant,
        i: usize,
        seg: &Segment<'_>,
    ) -> Option<bool> {
        let AuthRole::Client(a) = &mut self.auth else {
            return None;
        };
        if seg.reset_code != ResetCode::TooBusy || self.paths[i].is_join() {
            return None;
        }
        let msg = seg.mp.exp.as_deref()?;
        if a.cookie_retries >= MAX_COOKIE_RETRIES
            || a.initiator.handle_cookie_reply(msg, now).is_err()
        {
            self.auth_stats.bad_cookie_reply += 1;
            return Some(false);
        }
        a.cookie_retries += 1;
        self.auth_stats.cookie_retries += 1;
        let (nonce, addr_id) = (self.paths[i].local_nonce(), self.paths[i].local_addr_id());
        self.paths[i].start_request(now, false, nonce, addr_id);
        Some(true)
    }

    /// Server: the Request's offer. Key type 255 alone (the gate verified
    /// its message before this connection existed) in a Request that asks
    /// for multipath (`mp_offered`); anything else next to it would be a
    /// downgrade and is refused.
    pub(super) fn auth_request_offer_ok(&mut self, seg: &Segment<'_>, mp_offered: bool) -> bool {
        if !matches!(self.auth, AuthRole::Server(_)) {
            return true;
        }
        let ok = seg
            .mp
            .key
            .as_ref()
            .is_some_and(|k| k.keys.len() == 1 && k.experimental().is_some());
        if !ok || !mp_offered {
            self.auth_stats.downgrade_refused += 1;
        }
        ok && mp_offered
    }

    /// Server, first subflow's third packet: its MP_EXP is the Confirm.
    /// `None` in open mode (the key echo is checked instead).
    pub(super) fn auth_confirm_ok(&mut self, seg: &Segment<'_>) -> Option<bool> {
        if !matches!(self.auth, AuthRole::Server(_)) {
            return None;
        }
        let ok = match (self.ident.session.as_deref(), seg.mp.exp.as_deref()) {
            (Some(k), Some(m)) => k.verify_confirm(m).is_ok(),
            _ => false,
        };
        if !ok {
            self.auth_stats.bad_confirm += 1;
        }
        Some(ok)
    }
}

/// What an Init is bound to (`auth::handshake::Binding`): the fields of the
/// Request around it that decide what the handshake creates — the service
/// code, the connection identifier of MP_KEY and whether Multipath Capable
/// version 0 is asked for (RFC 9897 §3.1, §3.3). An Init moved into a
/// Request that differs in any of them does not decrypt at the server.
/// Ports are left out: NAT rewrites them in native DCCP and U-DCCP.
pub(super) fn request_binding(seg: &Segment<'_>) -> Binding {
    let ci = seg.mp.key.as_ref().map_or(0, |k| k.ci);
    let mut fields = [0u8; 9];
    fields[..4].copy_from_slice(&seg.service_code.to_be_bytes());
    fields[4..8].copy_from_slice(&ci.to_be_bytes());
    fields[8] = u8::from(features::mp_version_agreed(seg, true));
    labelled_hash(b"mpdccp-auth-v2 request binding", &fields)
}

/// A message as MP_KEY key type 255 (its first 64 bytes, alone: no key
/// type to downgrade to) and MP_EXP (the rest). No message: no MP_KEY.
fn attach(seg: &mut Segment<'_>, msg: Option<&[u8]>) {
    let ci = seg.mp.key.as_ref().map_or(0, |k| k.ci);
    match msg.and_then(|m| framing::split(m).ok()) {
        Some((key, rest)) => {
            seg.mp.key = Some(KeyOffer::experimental_only(ci, &key));
            seg.mp.exp = Some(rest.to_vec());
        }
        None => seg.mp.key = None,
    }
}
