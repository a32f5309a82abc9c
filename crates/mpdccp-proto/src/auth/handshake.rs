//! The authenticated key exchange: Noise `IKpsk2` (X25519, ChaCha20-Poly1305,
//! BLAKE2s) over the `snow` crate, one round trip, carried in MP_KEY key type
//! 255 (RFC 9897 §3.2.4, the experimental slot) and MP_EXP (see `framing`).
//!
//! ```text
//! Init     (client → server, DCCP-Request)   137 bytes
//!   1 type | 32 e | 48 enc(s) | 24 enc(timestamp) | 16 mac1 | 16 mac2
//! Response (server → client, DCCP-Response)   65 bytes
//!   2 type | 32 e | 16 enc(empty) | 16 mac1
//! Cookie   (server → client, under load)      57 bytes   (see cookie.rs)
//! Confirm  (client → server, DCCP-Ack)        17 bytes
//!   4 type | 16 MAC(confirm key, handshake hash)
//! ```
//!
//! * `mac1 = MAC(SHA-256(label ‖ receiver's static public key), message)`
//!   lets a receiver drop messages from hosts that do not even know its key
//!   before any Diffie-Hellman work (WireGuard whitepaper §5.4.4).
//! * The 8-byte timestamp (caller's wall clock, ns since the Unix epoch)
//!   must grow per peer: a replayed Init is refused.
//! * The responder learns who the initiator is only by decrypting its
//!   static key; an unknown key is refused and leaves no state.
//! * The Init is bound to the Request that carries it: a 32-byte
//!   [`Binding`] (a digest of the Request's fields that the handshake must
//!   not be moved away from, `conn/authn.rs`) follows the label in Noise's
//!   prologue, so an Init re-wrapped into another Request fails to decrypt
//!   and leaves no state (docs/SECURITY.md §3).
//! * Keys: HKDF-Expand of Noise's two split keys (only known to the two
//!   ends, forward secret through `ee`/`se`) gives each side's d-key for
//!   MP_JOIN/ADDADDR/REMOVEADDR HMACs, each direction's payload key and the
//!   confirmation key. The Confirm in the DCCP-Ack proves the initiator
//!   holds them: a replayed Init never becomes a connection.

use std::collections::VecDeque;
use std::net::SocketAddr;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRng, RngCore};
use snow::params::{DHChoice, NoiseParams};
use snow::resolvers::{CryptoResolver, DefaultResolver, FallbackResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};

use super::cookie::{open_cookie_reply, CookieGuard, COOKIE_REPLY_LEN, COOKIE_USE_LIFETIME};
use super::mac::{expand, labelled_hash, mac16, verify16, MAC_LEN};
use super::peers::{PeerId, PeerTable, KEY_LEN};
use super::ratelimit::{RateLimitConfig, RateLimitStats, RateLimiter};
use super::AuthError;
use crate::time::Instant;

pub const NOISE_PATTERN: &str = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
/// Noise prologue label; the Request's [`Binding`] follows it. v2: the
/// binding was added (a v1 Init carried the label alone).
const PROLOGUE: &[u8] = b"mpdccp-auth-v2";

/// What an Init is bound to (mixed into the Noise prologue): a digest of
/// the carrying Request's fields. All zero for an Init carried on its own.
pub type Binding = [u8; 32];

/// The binding of an Init that travels without a Request around it.
pub const UNBOUND: Binding = [0; 32];

/// Inits of one attempt whose Response is still accepted: a Response to an
/// earlier retransmission may arrive after the next Init went out.
const MAX_PENDING: usize = 4;
const LABEL_MAC1: &[u8] = b"mpdccp-auth-v1 mac1----";

pub const MSG_INIT: u8 = 1;
pub const MSG_RESPONSE: u8 = 2;
pub const MSG_CONFIRM: u8 = 4;

const TIMESTAMP_LEN: usize = 8;
const AEAD_TAG: usize = 16;
/// e ‖ enc(s) ‖ enc(timestamp).
const NOISE_INIT_LEN: usize = KEY_LEN + (KEY_LEN + AEAD_TAG) + (TIMESTAMP_LEN + AEAD_TAG);
const INIT_MAC1: usize = 1 + NOISE_INIT_LEN;
const INIT_MAC2: usize = INIT_MAC1 + MAC_LEN;
pub const INIT_LEN: usize = INIT_MAC2 + MAC_LEN;
/// e ‖ enc(empty).
const NOISE_RESPONSE_LEN: usize = KEY_LEN + AEAD_TAG;
const RESPONSE_MAC1: usize = 1 + NOISE_RESPONSE_LEN;
pub const RESPONSE_LEN: usize = RESPONSE_MAC1 + MAC_LEN;
pub const CONFIRM_LEN: usize = 1 + MAC_LEN;
// The Init fits key type 255's 64 bytes plus one MP_EXP (at most 252).
const _: () = assert!(INIT_LEN <= super::framing::KEY_DATA_LEN + super::framing::EXP_MAX);

/// snow's RNG slot filled from a seed the caller's RNG provides, so each
/// handshake's ephemeral key is reproducible in a seeded run.
struct SeededRng(ChaCha20Rng);

impl RngCore for SeededRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.0.try_fill_bytes(dest)
    }
}
impl CryptoRng for SeededRng {}
impl Random for SeededRng {}

struct SeededResolver([u8; 32]);

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRng(ChaCha20Rng::from_seed(self.0))))
    }
    fn resolve_dh(&self, _: &DHChoice) -> Option<Box<dyn Dh>> {
        None
    }
    fn resolve_hash(&self, _: &snow::params::HashChoice) -> Option<Box<dyn Hash>> {
        None
    }
    fn resolve_cipher(&self, _: &snow::params::CipherChoice) -> Option<Box<dyn Cipher>> {
        None
    }
}

/// The prologue both ends mix in: the label, then the Init's binding.
fn prologue(binding: &Binding) -> [u8; PROLOGUE.len() + 32] {
    let mut p = [0u8; PROLOGUE.len() + 32];
    p[..PROLOGUE.len()].copy_from_slice(PROLOGUE);
    p[PROLOGUE.len()..].copy_from_slice(binding);
    p
}

fn builder(seed: [u8; 32], prologue: &[u8]) -> Builder<'_> {
    // Invariant: NOISE_PATTERN is a constant snow parses.
    let params: NoiseParams = NOISE_PATTERN.parse().expect("valid Noise pattern");
    let resolver = FallbackResolver::new(Box::new(SeededResolver(seed)), Box::new(DefaultResolver));
    Builder::with_resolver(params, Box::new(resolver)).prologue(prologue)
}

fn draw_seed(rng: &mut dyn RngCore) -> [u8; 32] {
    let mut s = [0u8; 32];
    rng.fill_bytes(&mut s);
    s
}

/// A fresh static key pair `(private, public)` from the caller's RNG.
pub fn keypair(rng: &mut dyn RngCore) -> ([u8; KEY_LEN], [u8; KEY_LEN]) {
    // Invariant: the seeded resolver always supplies RNG and X25519.
    let kp = builder(draw_seed(rng), PROLOGUE)
        .generate_keypair()
        .expect("X25519 key generation");
    let mut private = [0u8; KEY_LEN];
    private.copy_from_slice(&kp.private);
    (private, public_key(&private))
}

/// The X25519 public key of a private key.
pub fn public_key(private: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    // Invariant: the default resolver implements Curve25519.
    let mut dh = DefaultResolver
        .resolve_dh(&DHChoice::Curve25519)
        .expect("X25519 available");
    dh.set(private);
    let mut public = [0u8; KEY_LEN];
    public.copy_from_slice(dh.pubkey());
    public
}

fn mac1_key(receiver_public: &[u8; KEY_LEN]) -> [u8; 32] {
    labelled_hash(LABEL_MAC1, receiver_public)
}

/// Which end of the handshake a [`SessionKeys`] belongs to. The initiator
/// is RFC 9897's host A (the client), the responder host B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Initiator,
    Responder,
}

/// Everything MP-DCCP needs from the handshake. Secret: no Debug output.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    pub side: Side,
    /// d-keyA: signs the initiator's MP_HMACs (RFC 9897 §3.2.2, §3.2.5).
    pub d_key_initiator: [u8; 32],
    /// d-keyB: signs the responder's MP_HMACs.
    pub d_key_responder: [u8; 32],
    /// ChaCha20-Poly1305 key for payload sent by the initiator.
    pub payload_initiator: [u8; 32],
    /// ChaCha20-Poly1305 key for payload sent by the responder.
    pub payload_responder: [u8; 32],
    confirm_key: [u8; 32],
    handshake_hash: [u8; 32],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionKeys {{ side: {:?}, .. }}", self.side)
    }
}

impl SessionKeys {
    fn derive(hs: &mut HandshakeState, side: Side) -> Self {
        // Noise §5.2 Split(): k1 encrypts initiator → responder, k2 back.
        let (k1, k2) = hs.dangerously_get_raw_split();
        let mut handshake_hash = [0u8; 32];
        handshake_hash.copy_from_slice(&hs.get_handshake_hash()[..32]);
        SessionKeys {
            side,
            d_key_initiator: expand(&k1, b"mpdccp-auth-v1 d-key"),
            d_key_responder: expand(&k2, b"mpdccp-auth-v1 d-key"),
            payload_initiator: expand(&k1, b"mpdccp-auth-v1 payload"),
            payload_responder: expand(&k2, b"mpdccp-auth-v1 payload"),
            confirm_key: expand(&k1, b"mpdccp-auth-v1 confirm"),
            handshake_hash,
        }
    }

    /// The d-key this host signs its MP_HMACs with.
    pub fn d_key_local(&self) -> &[u8; 32] {
        match self.side {
            Side::Initiator => &self.d_key_initiator,
            Side::Responder => &self.d_key_responder,
        }
    }
    /// The d-key the peer signs with (this host verifies with it).
    pub fn d_key_remote(&self) -> &[u8; 32] {
        match self.side {
            Side::Initiator => &self.d_key_responder,
            Side::Responder => &self.d_key_initiator,
        }
    }
    pub fn payload_send(&self) -> &[u8; 32] {
        match self.side {
            Side::Initiator => &self.payload_initiator,
            Side::Responder => &self.payload_responder,
        }
    }
    pub fn payload_recv(&self) -> &[u8; 32] {
        match self.side {
            Side::Initiator => &self.payload_responder,
            Side::Responder => &self.payload_initiator,
        }
    }

    /// The Confirm message the initiator puts in its DCCP-Ack.
    pub fn confirm(&self) -> [u8; CONFIRM_LEN] {
        let mut m = [0u8; CONFIRM_LEN];
        m[0] = MSG_CONFIRM;
        m[1..].copy_from_slice(&mac16(&self.confirm_key, &[&self.handshake_hash]));
        m
    }

    /// Responder: does this Confirm prove the initiator holds the keys?
    pub fn verify_confirm(&self, msg: &[u8]) -> Result<(), AuthError> {
        if msg.len() != CONFIRM_LEN || msg[0] != MSG_CONFIRM {
            return Err(AuthError::Malformed);
        }
        if verify16(&self.confirm_key, &[&self.handshake_hash], &msg[1..]) {
            Ok(())
        } else {
            Err(AuthError::BadConfirm)
        }
    }
}

/// The client's keys.
#[derive(Clone)]
pub struct InitiatorConfig {
    pub static_private: [u8; KEY_LEN],
    pub server_public: [u8; KEY_LEN],
    pub psk: Option<[u8; KEY_LEN]>,
}

/// What the initiator needs to rebuild its handshake state after its Init:
/// the ephemeral comes from `seed`, so the state is recomputed when a
/// Response arrives and a forged Response cannot spoil the real one.
#[derive(Clone, Copy)]
struct PendingInit {
    seed: [u8; 32],
    timestamp: u64,
    mac1: [u8; MAC_LEN],
    binding: Binding,
}

/// Client side of the handshake; one attempt at a time (its last
/// `MAX_PENDING` Inits are answerable), cookie kept across attempts.
pub struct Initiator {
    cfg: InitiatorConfig,
    server_mac1_key: [u8; 32],
    own_mac1_key: [u8; 32],
    /// The attempt's Inits, oldest first.
    pending: VecDeque<PendingInit>,
    cookie: Option<([u8; MAC_LEN], Instant)>,
}

impl Initiator {
    pub fn new(cfg: InitiatorConfig) -> Self {
        Initiator {
            server_mac1_key: mac1_key(&cfg.server_public),
            own_mac1_key: mac1_key(&public_key(&cfg.static_private)),
            cfg,
            pending: VecDeque::new(),
            cookie: None,
        }
    }

    fn build(&self, seed: [u8; 32], binding: &Binding) -> Result<HandshakeState, AuthError> {
        let psk = self.cfg.psk.unwrap_or([0; KEY_LEN]);
        let prologue = prologue(binding);
        builder(seed, &prologue)
            .local_private_key(&self.cfg.static_private)
            .remote_public_key(&self.cfg.server_public)
            .psk(2, &psk)
            .build_initiator()
            .map_err(|_| AuthError::Handshake)
    }

    /// Writes the Noise part of an Init into `out`, returning the state.
    fn write_noise(&self, p: &PendingInit, out: &mut [u8]) -> Result<HandshakeState, AuthError> {
        let mut hs = self.build(p.seed, &p.binding)?;
        let n = hs
            .write_message(&p.timestamp.to_be_bytes(), out)
            .map_err(|_| AuthError::Handshake)?;
        debug_assert_eq!(n, NOISE_INIT_LEN);
        Ok(hs)
    }

    /// A new Init carried on its own ([`UNBOUND`]); see
    /// [`Initiator::start_bound`].
    pub fn start(
        &mut self,
        rng: &mut dyn RngCore,
        unix_nanos: u64,
        now: Instant,
    ) -> Result<[u8; INIT_LEN], AuthError> {
        self.start_bound(rng, unix_nanos, now, &UNBOUND)
    }

    /// A new Init bound to `binding` (the Request that carries it). Each
    /// call is a new Init: a retransmitted Request carries a new one, so a
    /// copy an attacker holds back and spends first (its timestamp is then
    /// the newest the server saw) locks the real client out for one
    /// retransmission, not a whole attempt. `unix_nanos` is the wall clock,
    /// which must grow across Inits (replay protection). The last
    /// `MAX_PENDING` Inits stay answerable.
    pub fn start_bound(
        &mut self,
        rng: &mut dyn RngCore,
        unix_nanos: u64,
        now: Instant,
        binding: &Binding,
    ) -> Result<[u8; INIT_LEN], AuthError> {
        let mut p = PendingInit {
            seed: draw_seed(rng),
            timestamp: unix_nanos,
            mac1: [0; MAC_LEN],
            binding: *binding,
        };
        let mut msg = [0u8; INIT_LEN];
        msg[0] = MSG_INIT;
        self.write_noise(&p, &mut msg[1..INIT_MAC1])?;
        p.mac1 = mac16(&self.server_mac1_key, &[&msg[..INIT_MAC1]]);
        msg[INIT_MAC1..INIT_MAC2].copy_from_slice(&p.mac1);
        let cookie = self
            .cookie
            .filter(|(_, got)| now.saturating_duration_since(*got) < COOKIE_USE_LIFETIME);
        if let Some((c, _)) = cookie {
            let mac2 = mac16(&c, &[&msg[..INIT_MAC2]]);
            msg[INIT_MAC2..].copy_from_slice(&mac2);
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back(p);
        Ok(msg)
    }

    /// Forget the attempt's Inits (a new attempt starts from scratch).
    pub fn reset_attempt(&mut self) {
        self.pending.clear();
    }

    /// A cookie reply to the newest Init: keep the cookie for the next
    /// [`start`](Self::start), which the caller should do after a short
    /// wait. A reply to an older Init is stale (the Init after it already
    /// went out) and refused.
    pub fn handle_cookie_reply(&mut self, msg: &[u8], now: Instant) -> Result<(), AuthError> {
        let p = self.pending.back().ok_or(AuthError::Unexpected)?;
        let cookie = open_cookie_reply(&self.cfg.server_public, &p.mac1, msg)?;
        self.cookie = Some((cookie, now));
        Ok(())
    }

    /// The Response to one of the pending Inits (newest first): the session
    /// keys and the Confirm to send. A bad Response leaves them usable.
    pub fn handle_response(
        &mut self,
        msg: &[u8],
    ) -> Result<(SessionKeys, [u8; CONFIRM_LEN]), AuthError> {
        if msg.len() != RESPONSE_LEN || msg[0] != MSG_RESPONSE {
            return Err(AuthError::Malformed);
        }
        if !verify16(
            &self.own_mac1_key,
            &[&msg[..RESPONSE_MAC1]],
            &msg[RESPONSE_MAC1..],
        ) {
            return Err(AuthError::BadMac1);
        }
        if self.pending.is_empty() {
            return Err(AuthError::Unexpected);
        }
        // Each try redoes the Init's DH work; MAX_PENDING bounds what a
        // forged Response (mac1 needs only our public key) can cost.
        let mut answered = None;
        for p in self.pending.iter().rev() {
            let mut scratch = [0u8; NOISE_INIT_LEN];
            let mut hs = self.write_noise(p, &mut scratch)?;
            let mut payload = [0u8; 0];
            if hs
                .read_message(&msg[1..RESPONSE_MAC1], &mut payload)
                .is_ok()
            {
                answered = Some(hs);
                break;
            }
        }
        let mut hs = answered.ok_or(AuthError::Handshake)?;
        self.pending.clear();
        let keys = SessionKeys::derive(&mut hs, Side::Initiator);
        let confirm = keys.confirm();
        Ok((keys, confirm))
    }
}

/// The server's keys, peers and handshake limits.
#[derive(Clone, Debug)]
pub struct ResponderConfig {
    pub static_private: [u8; KEY_LEN],
    pub peers: PeerTable,
    pub rate: RateLimitConfig,
    /// Inits per second (that pass mac1) above which cookies are required
    /// even while the half-open table is below its threshold: a token
    /// bucket at this rate, at most rate/50 (at least 1) in a row.
    pub load_inits_per_sec: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderStats {
    pub inits: u64,
    pub malformed: u64,
    pub bad_mac1: u64,
    pub cookie_replies: u64,
    pub handshake_failed: u64,
    pub unknown_peer: u64,
    pub replayed: u64,
    pub accepted: u64,
    pub rate: RateLimitStats,
}

/// A verified Init: the peer, the keys (to hold in the half-open entry
/// until the Confirm verifies) and the Response to send.
#[derive(Debug)]
pub struct Accepted {
    pub peer: PeerId,
    pub keys: SessionKeys,
    pub response: [u8; RESPONSE_LEN],
}

#[derive(Debug)]
pub enum InitOutcome {
    Accept(Box<Accepted>),
    /// Under load and no valid mac2: send this back to the source.
    CookieReply([u8; COOKIE_REPLY_LEN]),
}

/// The Diffie-Hellman budget for Inits without a cookie: a token bucket
/// refilled at `rate` per second holding at most `burst`. A fixed
/// one-second window let `rate` handshakes run back to back at the start
/// of each second under a flood (1 000 × ~210 µs: every peer stalled for
/// a fifth of it); the bucket spreads them, at most `burst` in a row.
#[derive(Clone, Copy, Debug)]
struct InitBudget {
    /// Time credit in ns; one Init costs `per_init_ns`.
    credit_ns: u64,
    cap_ns: u64,
    per_init_ns: u64,
    last: Instant,
}

/// Inits a full bucket lets through in a row: 1/50 of the rate (20 at the
/// default 1 000/s, about 4 ms of X25519), at least one.
fn budget_burst(rate: u32) -> u64 {
    u64::from(rate / 50).max(1)
}

impl InitBudget {
    fn new(rate: u32) -> Self {
        let per_init_ns = if rate == 0 {
            u64::MAX
        } else {
            1_000_000_000 / u64::from(rate)
        };
        let cap_ns = per_init_ns.saturating_mul(budget_burst(rate));
        InitBudget {
            credit_ns: if rate == 0 { 0 } else { cap_ns },
            cap_ns,
            per_init_ns,
            last: Instant::ZERO,
        }
    }

    /// Takes one Init's worth; false when the bucket is empty (load).
    fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_nanos();
        self.last = self.last.max(now);
        let dt = u64::try_from(dt).unwrap_or(u64::MAX);
        self.credit_ns = self.credit_ns.saturating_add(dt).min(self.cap_ns);
        if self.credit_ns >= self.per_init_ns {
            self.credit_ns -= self.per_init_ns;
            true
        } else {
            false
        }
    }
}

/// Server side. Stateless between messages: the only state an Init can
/// change is the peer's last timestamp (after full verification), the
/// bounded rate-limit table and counters.
#[derive(Debug)]
pub struct Responder {
    static_private: [u8; KEY_LEN],
    mac1_key: [u8; 32],
    peers: PeerTable,
    last_timestamp: Vec<u64>,
    cookies: CookieGuard,
    limiter: RateLimiter,
    budget: InitBudget,
    stats: ResponderStats,
}

impl Responder {
    pub fn new(cfg: ResponderConfig, rng: &mut dyn RngCore) -> Self {
        let public = public_key(&cfg.static_private);
        Responder {
            static_private: cfg.static_private,
            mac1_key: mac1_key(&public),
            last_timestamp: vec![0; cfg.peers.len()],
            peers: cfg.peers,
            cookies: CookieGuard::new(draw_seed(rng), &public),
            limiter: RateLimiter::new(cfg.rate),
            budget: InitBudget::new(cfg.load_inits_per_sec),
            stats: ResponderStats::default(),
        }
    }

    pub fn peers(&self) -> &PeerTable {
        &self.peers
    }

    pub fn stats(&self) -> ResponderStats {
        ResponderStats {
            rate: self.limiter.stats(),
            ..self.stats
        }
    }

    /// Handle an Init carried on its own ([`UNBOUND`]); see
    /// [`Responder::handle_init_bound`].
    pub fn handle_init(
        &mut self,
        msg: &[u8],
        src: SocketAddr,
        half_open_high: bool,
        now: Instant,
        rng: &mut dyn RngCore,
    ) -> Result<InitOutcome, AuthError> {
        self.handle_init_bound(msg, &UNBOUND, src, half_open_high, now, rng)
    }

    /// Handle an Init from `src`, bound to `binding` (the Request it
    /// arrived in: an Init moved into another Request fails as
    /// [`AuthError::Handshake`]). `half_open_high` is the endpoint's "half-
    /// open entries above threshold" signal; the responder adds its own Init
    /// rate. Checks run cheapest first: length, mac1 (a hash), cookie (a
    /// hash), rate limit, then the two Diffie-Hellman operations.
    pub fn handle_init_bound(
        &mut self,
        msg: &[u8],
        binding: &Binding,
        src: SocketAddr,
        half_open_high: bool,
        now: Instant,
        rng: &mut dyn RngCore,
    ) -> Result<InitOutcome, AuthError> {
        self.stats.inits += 1;
        if msg.len() != INIT_LEN || msg[0] != MSG_INIT {
            self.stats.malformed += 1;
            return Err(AuthError::Malformed);
        }
        let mac1: [u8; MAC_LEN] = msg[INIT_MAC1..INIT_MAC2].try_into().unwrap_or_default();
        if !verify16(&self.mac1_key, &[&msg[..INIT_MAC1]], &mac1) {
            self.stats.bad_mac1 += 1;
            return Err(AuthError::BadMac1);
        }
        let under_load = half_open_high || !self.budget.take(now);
        if under_load
            && !self
                .cookies
                .check_mac2(src, now, &msg[..INIT_MAC2], &msg[INIT_MAC2..])
        {
            self.stats.cookie_replies += 1;
            return Ok(InitOutcome::CookieReply(
                self.cookies.reply(src, now, &mac1, rng),
            ));
        }
        if !self.limiter.allow(src.ip(), now) {
            return Err(AuthError::RateLimited);
        }
        self.complete(&msg[1..INIT_MAC1], binding, rng)
            .map(|a| InitOutcome::Accept(Box::new(a)))
    }

    /// The Diffie-Hellman part: read the Init, identify the peer, check the
    /// timestamp, write the Response.
    fn complete(
        &mut self,
        noise: &[u8],
        binding: &Binding,
        rng: &mut dyn RngCore,
    ) -> Result<Accepted, AuthError> {
        let prologue = prologue(binding);
        let mut hs = builder(draw_seed(rng), &prologue)
            .local_private_key(&self.static_private)
            .build_responder()
            .map_err(|_| AuthError::Handshake)?;
        let mut payload = [0u8; TIMESTAMP_LEN];
        let read = hs.read_message(noise, &mut payload);
        if read != Ok(TIMESTAMP_LEN) {
            self.stats.handshake_failed += 1;
            return Err(AuthError::Handshake);
        }
        let peer_key = hs.get_remote_static().unwrap_or_default();
        let Some(peer) = self.peers.by_public_key(peer_key) else {
            self.stats.unknown_peer += 1;
            return Err(AuthError::UnknownPeer);
        };
        let timestamp = u64::from_be_bytes(payload);
        let last = &mut self.last_timestamp[peer.0 as usize];
        if timestamp <= *last {
            self.stats.replayed += 1;
            return Err(AuthError::Replay);
        }
        let p = self.peers.get(peer).ok_or(AuthError::UnknownPeer)?;
        let psk = p.psk.unwrap_or([0; KEY_LEN]);
        let peer_mac1_key = mac1_key(&p.public_key);
        let mut response = [0u8; RESPONSE_LEN];
        response[0] = MSG_RESPONSE;
        let written = hs
            .set_psk(2, &psk)
            .and_then(|_| hs.write_message(&[], &mut response[1..RESPONSE_MAC1]));
        if written != Ok(NOISE_RESPONSE_LEN) {
            self.stats.handshake_failed += 1;
            return Err(AuthError::Handshake);
        }
        let mac1 = mac16(&peer_mac1_key, &[&response[..RESPONSE_MAC1]]);
        response[RESPONSE_MAC1..].copy_from_slice(&mac1);
        *last = timestamp;
        self.stats.accepted += 1;
        Ok(Accepted {
            peer,
            keys: SessionKeys::derive(&mut hs, Side::Responder),
            response,
        })
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
