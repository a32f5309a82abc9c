//! Authenticated mode: peers, the Noise IK handshake that produces the
//! MP-DCCP keys, stateless cookies, handshake rate limits and optional
//! per-packet payload protection. See `docs/SECURITY.md` for the threat
//! model and the wire mapping (MP_KEY key type 255 and MP_EXP).
//!
//! Sans-IO like the rest of the core: no socket and no clock (every call
//! takes `now`, and the initiator's wall-clock timestamp is a parameter), and
//! randomness only from an RNG the caller passes in, so a seeded run is
//! reproducible.
//!
//! * [`prefix`]    — IP prefixes and a bounded longest-prefix-match table.
//! * [`peers`]     — configured peers: static key, optional PSK, `allowed_ips`.
//! * [`handshake`] — Noise_IKpsk2 initiator and responder, message formats,
//!   the derived [`SessionKeys`].
//! * [`cookie`]    — stateless cookies under load (WireGuard-style reply).
//! * [`gate`]      — the server's admission bookkeeping: half-open per peer,
//!   cookie threshold, one session per peer.
//! * [`ratelimit`] — per-source handshake token buckets, log throttle.
//! * [`protect`]   — ChaCha20-Poly1305 per packet with a per-path replay window.
//! * [`framing`]   — messages in MP_KEY key type 255 (64 bytes) + MP_EXP.
//! * [`mac`]       — HMAC-SHA256, HKDF-Expand and truncated tags.

pub mod cookie;
pub mod framing;
pub mod gate;
pub mod handshake;
pub mod mac;
pub mod peers;
pub mod prefix;
pub mod protect;
pub mod ratelimit;

pub use handshake::{
    keypair, public_key, Accepted, InitOutcome, Initiator, InitiatorConfig, Responder,
    ResponderConfig, ResponderStats, SessionKeys, Side,
};
pub use peers::{Peer, PeerId, PeerLimits, PeerTable, SourceVerdict};
pub use prefix::IpPrefix;
pub use protect::{PathProtector, ReplayWindow};
pub use ratelimit::{LogThrottle, RateLimitConfig, RateLimiter};

/// Why an authentication message was refused. Every variant is a counted
/// drop; none leaves state behind on the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("malformed message (length or type)")]
    Malformed,
    #[error("mac1 does not match this server's public key")]
    BadMac1,
    #[error("source over its handshake rate")]
    RateLimited,
    #[error("half-open table full")]
    Busy,
    #[error("Noise handshake failed (bad key or corrupted message)")]
    Handshake,
    #[error("initiator's static key is not a configured peer")]
    UnknownPeer,
    #[error("timestamp not newer than the peer's last handshake (replay)")]
    Replay,
    #[error("no handshake in progress for this message")]
    Unexpected,
    #[error("cookie reply does not open")]
    BadCookieReply,
    #[error("key confirmation does not verify")]
    BadConfirm,
    #[error("payload protection: packet does not open")]
    BadPacket,
    #[error("payload protection: sequence already seen or too old")]
    ReplayedPacket,
}
