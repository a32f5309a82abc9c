//! The server's admission bookkeeping around the [`Responder`]: what the
//! multi-client endpoint needs so that only proven peers hold state.
//!
//! * A half-open entry (keyed like the endpoint's connections, e.g. by the
//!   client's UDP address) exists only after an Init verified: a configured
//!   peer, a fresh timestamp. At most `max_half_open_per_peer` per peer (the
//!   oldest is dropped), `max_half_open` in total, each for
//!   `half_open_lifetime`.
//! * Above `cookie_threshold` half-open entries, Inits need a cookie.
//! * An entry becomes a session when the client's Confirm verifies; a peer
//!   has one session, so a newer one replaces (and names) the older.
//!
//! The endpoint creates its DCCP state for a Request only when `on_init`
//! returns `Respond` (with the keys for the connection), and promotes the
//! connection when `on_confirm` succeeds — or, if the connection checks the
//! Confirm in its Ack itself, calls `established` when it does.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use rand_core::RngCore;

use super::cookie::COOKIE_REPLY_LEN;
use super::handshake::{Binding, InitOutcome, Responder, SessionKeys, RESPONSE_LEN};
use super::peers::PeerId;
use super::AuthError;
use crate::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    pub max_half_open: usize,
    pub max_half_open_per_peer: usize,
    pub half_open_lifetime: Duration,
    pub cookie_threshold: usize,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            max_half_open: 1024,
            max_half_open_per_peer: 2,
            half_open_lifetime: Duration::from_secs(3),
            cookie_threshold: 16,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateStats {
    pub half_open_created: u64,
    /// Dropped because the peer already had its share (oldest first).
    pub half_open_replaced: u64,
    /// Refused because the total was reached.
    pub half_open_full: u64,
    pub half_open_expired: u64,
    pub confirmed: u64,
    pub confirm_failed: u64,
    /// Sessions replaced by a newer session of the same peer.
    pub sessions_replaced: u64,
}

/// What to send back for an Init.
#[derive(Debug)]
pub enum Admission {
    /// Create the DCCP half-open state with these keys and send this
    /// Response.
    Respond {
        peer: PeerId,
        keys: Box<SessionKeys>,
        response: [u8; RESPONSE_LEN],
    },
    /// Send this cookie reply (stateless); create nothing.
    Cookie([u8; COOKIE_REPLY_LEN]),
}

/// A confirmed session.
#[derive(Debug)]
pub struct Admitted<K> {
    pub peer: PeerId,
    pub keys: SessionKeys,
    /// The same peer's previous session, which the endpoint closes.
    pub replaces: Option<K>,
}

#[derive(Debug)]
struct HalfOpen {
    peer: PeerId,
    keys: SessionKeys,
    created: Instant,
}

#[derive(Debug)]
pub struct Gate<K: Ord + Clone> {
    responder: Responder,
    cfg: GateConfig,
    half_open: BTreeMap<K, HalfOpen>,
    sessions: BTreeMap<PeerId, K>,
    stats: GateStats,
}

impl<K: Ord + Clone> Gate<K> {
    pub fn new(responder: Responder, cfg: GateConfig) -> Self {
        Gate {
            responder,
            cfg,
            half_open: BTreeMap::new(),
            sessions: BTreeMap::new(),
            stats: GateStats::default(),
        }
    }

    pub fn responder(&self) -> &Responder {
        &self.responder
    }
    pub fn stats(&self) -> GateStats {
        self.stats
    }
    pub fn half_open(&self) -> usize {
        self.half_open.len()
    }

    /// An Init arrived from `src` (the endpoint's key for it is `key`), in
    /// a Request whose fields give `binding` (`handshake::Binding`).
    pub fn on_init(
        &mut self,
        key: K,
        init: &[u8],
        binding: &Binding,
        src: SocketAddr,
        now: Instant,
        rng: &mut dyn RngCore,
    ) -> Result<Admission, AuthError> {
        self.expire(now);
        let high = self.half_open.len() > self.cfg.cookie_threshold;
        let outcome = self
            .responder
            .handle_init_bound(init, binding, src, high, now, rng)?;
        let accepted = match outcome {
            InitOutcome::CookieReply(c) => return Ok(Admission::Cookie(c)),
            InitOutcome::Accept(a) => *a,
        };
        // A retransmitted Request from the same source replaces its entry.
        self.half_open.remove(&key);
        let of_peer = self.oldest_of(accepted.peer);
        if of_peer.len() >= self.cfg.max_half_open_per_peer {
            if let Some(k) = of_peer.first() {
                self.half_open.remove(k);
                self.stats.half_open_replaced += 1;
            }
        } else if self.half_open.len() >= self.cfg.max_half_open {
            self.stats.half_open_full += 1;
            return Err(AuthError::Busy);
        }
        self.half_open.insert(
            key,
            HalfOpen {
                peer: accepted.peer,
                keys: accepted.keys.clone(),
                created: now,
            },
        );
        self.stats.half_open_created += 1;
        Ok(Admission::Respond {
            peer: accepted.peer,
            keys: Box::new(accepted.keys),
            response: accepted.response,
        })
    }

    /// The half-open keys of `peer`, oldest first.
    fn oldest_of(&self, peer: PeerId) -> Vec<K> {
        let mut v: Vec<(Instant, &K)> = self
            .half_open
            .iter()
            .filter(|(_, h)| h.peer == peer)
            .map(|(k, h)| (h.created, k))
            .collect();
        v.sort();
        v.into_iter().map(|(_, k)| k.clone()).collect()
    }

    /// The client's Ack for half-open `key` carried this Confirm.
    pub fn on_confirm(&mut self, key: &K, confirm: &[u8]) -> Result<Admitted<K>, AuthError> {
        let h = self.half_open.get(key).ok_or(AuthError::Unexpected)?;
        if let Err(e) = h.keys.verify_confirm(confirm) {
            self.stats.confirm_failed += 1;
            return Err(e);
        }
        self.established(key)
    }

    /// The connection under `key` verified the Confirm itself (it holds the
    /// keys from `Respond`): the same bookkeeping as [`Gate::on_confirm`].
    pub fn established(&mut self, key: &K) -> Result<Admitted<K>, AuthError> {
        let h = self.half_open.remove(key).ok_or(AuthError::Unexpected)?;
        self.stats.confirmed += 1;
        let replaces = self.sessions.insert(h.peer, key.clone());
        if replaces.is_some() {
            self.stats.sessions_replaced += 1;
        }
        Ok(Admitted {
            peer: h.peer,
            keys: h.keys,
            replaces,
        })
    }

    /// The endpoint closed the session or half-open state under `key`.
    pub fn forget(&mut self, key: &K) {
        self.half_open.remove(key);
        self.sessions.retain(|_, k| k != key);
    }

    /// A session's key changed (its path 0 moved to a validated new
    /// remote, NAT rebinding): the peer's session is found under `new`.
    pub fn rekey(&mut self, old: &K, new: K) {
        for k in self.sessions.values_mut() {
            if k == old {
                *k = new.clone();
            }
        }
    }

    /// Drop half-open entries past their lifetime.
    pub fn expire(&mut self, now: Instant) {
        let life = self.cfg.half_open_lifetime;
        let before = self.half_open.len();
        self.half_open
            .retain(|_, h| now.saturating_duration_since(h.created) < life);
        self.stats.half_open_expired += (before - self.half_open.len()) as u64;
    }

    /// When the next half-open entry expires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.half_open
            .values()
            .map(|h| h.created + self.cfg.half_open_lifetime)
            .min()
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
