//! Stateless cookies: proof that an initiator receives at its source address
//! before the responder spends Diffie-Hellman work or keeps any state.
//!
//! As WireGuard's cookie reply (whitepaper §5.4.7), and in the spirit of
//! QUIC Retry (RFC 9000 §8.1.2) and DCCP's Init Cookie (RFC 4340 §8.1.4):
//!
//! * the cookie is `MAC(secret_e, source address ‖ source port)`, where
//!   `secret_e = HMAC(master, "cookie secret" ‖ e)` for the time bucket
//!   `e = now / 120 s`: the secret rotates without any state or randomness,
//!   and a cookie is valid in its bucket and the next;
//! * under load, an Init without a valid `mac2 = MAC(cookie, Init up to
//!   mac2)` gets a cookie reply instead of a handshake;
//! * the reply is encrypted with XChaCha20-Poly1305 under a key derived from
//!   the responder's public key, with the Init's mac1 as associated data, so
//!   only the host that sent that Init (and knows the server key) can use it.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand_core::RngCore;

use super::mac::{hmac_sha256, labelled_hash, mac16, verify16, MAC_LEN};
use super::AuthError;
use crate::time::Instant;

/// How long one cookie secret is used (WireGuard: 2 minutes).
pub const COOKIE_SECRET_LIFETIME: Duration = Duration::from_secs(120);
/// An initiator uses a received cookie for a little less than that.
pub const COOKIE_USE_LIFETIME: Duration = Duration::from_secs(115);

/// Message type byte of a cookie reply.
pub const MSG_COOKIE_REPLY: u8 = 3;
const NONCE_LEN: usize = 24;
/// type ‖ nonce(24) ‖ XChaCha20-Poly1305(cookie(16)) with 16-byte tag.
pub const COOKIE_REPLY_LEN: usize = 1 + NONCE_LEN + MAC_LEN + 16;

const LABEL_COOKIE_KEY: &[u8] = b"mpdccp-auth-v1 cookie--";
const LABEL_SECRET: &[u8] = b"cookie secret";

/// The key that encrypts cookie replies of the server with `server_public`.
fn reply_key(server_public: &[u8; 32]) -> [u8; 32] {
    labelled_hash(LABEL_COOKIE_KEY, server_public)
}

fn addr_bytes(src: SocketAddr) -> ([u8; 18], usize) {
    let mut b = [0u8; 18];
    let n = match src.ip() {
        IpAddr::V4(v) => {
            b[..4].copy_from_slice(&v.octets());
            4
        }
        IpAddr::V6(v) => {
            b[..16].copy_from_slice(&v.octets());
            16
        }
    };
    b[n..n + 2].copy_from_slice(&src.port().to_be_bytes());
    (b, n + 2)
}

/// The responder's side: makes cookies and checks mac2.
#[derive(Clone)]
pub struct CookieGuard {
    master: [u8; 32],
    reply_key: [u8; 32],
}

impl std::fmt::Debug for CookieGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieGuard { .. }")
    }
}

impl CookieGuard {
    /// `master` must be secret and random (drawn from the responder's RNG).
    pub fn new(master: [u8; 32], server_public: &[u8; 32]) -> Self {
        CookieGuard {
            master,
            reply_key: reply_key(server_public),
        }
    }

    fn bucket(now: Instant) -> u64 {
        now.as_nanos() / COOKIE_SECRET_LIFETIME.as_nanos() as u64
    }

    fn cookie_in(&self, bucket: u64, src: SocketAddr) -> [u8; MAC_LEN] {
        let secret = hmac_sha256(&self.master, &[LABEL_SECRET, &bucket.to_be_bytes()]);
        let (b, n) = addr_bytes(src);
        mac16(&secret, &[&b[..n]])
    }

    /// The cookie `src` gets now.
    pub fn cookie(&self, src: SocketAddr, now: Instant) -> [u8; MAC_LEN] {
        self.cookie_in(Self::bucket(now), src)
    }

    /// Is `mac2` = MAC(cookie, `covered`) with a cookie of this bucket or
    /// the previous one for `src`?
    pub fn check_mac2(&self, src: SocketAddr, now: Instant, covered: &[u8], mac2: &[u8]) -> bool {
        let e = Self::bucket(now);
        [Some(e), e.checked_sub(1)]
            .into_iter()
            .flatten()
            .any(|b| verify16(&self.cookie_in(b, src), &[covered], mac2))
    }

    /// A cookie reply to the Init whose mac1 was `mac1`, from `src`.
    pub fn reply(
        &self,
        src: SocketAddr,
        now: Instant,
        mac1: &[u8; MAC_LEN],
        rng: &mut dyn RngCore,
    ) -> [u8; COOKIE_REPLY_LEN] {
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        let cookie = self.cookie(src, now);
        let aead = XChaCha20Poly1305::new((&self.reply_key).into());
        // Invariant: encryption into a Vec cannot fail for a 16-byte input.
        let sealed = aead
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &cookie,
                    aad: mac1,
                },
            )
            .expect("XChaCha20-Poly1305 seals 16 bytes");
        let mut out = [0u8; COOKIE_REPLY_LEN];
        out[0] = MSG_COOKIE_REPLY;
        out[1..1 + NONCE_LEN].copy_from_slice(&nonce);
        out[1 + NONCE_LEN..].copy_from_slice(&sealed);
        out
    }
}

/// The initiator's side: the cookie inside a reply to the Init with `mac1`
/// sent to the server with `server_public`.
pub fn open_cookie_reply(
    server_public: &[u8; 32],
    mac1: &[u8; MAC_LEN],
    msg: &[u8],
) -> Result<[u8; MAC_LEN], AuthError> {
    if msg.len() != COOKIE_REPLY_LEN || msg[0] != MSG_COOKIE_REPLY {
        return Err(AuthError::Malformed);
    }
    let aead = XChaCha20Poly1305::new((&reply_key(server_public)).into());
    let plain = aead
        .decrypt(
            XNonce::from_slice(&msg[1..1 + NONCE_LEN]),
            Payload {
                msg: &msg[1 + NONCE_LEN..],
                aad: mac1,
            },
        )
        .map_err(|_| AuthError::BadCookieReply)?;
    plain.try_into().map_err(|_| AuthError::BadCookieReply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cookie_binds_address_port_and_time() {
        let g = CookieGuard::new([9; 32], &[1; 32]);
        let src = sa("192.0.2.7:5000");
        let t0 = Instant::from_secs_f64(1000.0);
        let c = g.cookie(src, t0);
        let covered = b"init message up to mac2";
        let mac2 = mac16(&c, &[covered]);
        assert!(g.check_mac2(src, t0, covered, &mac2));
        // Valid in the next bucket too, not two buckets later.
        assert!(g.check_mac2(src, t0 + COOKIE_SECRET_LIFETIME, covered, &mac2));
        assert!(!g.check_mac2(src, t0 + COOKIE_SECRET_LIFETIME * 2, covered, &mac2));
        // Another port, address, family or message: rejected.
        assert!(!g.check_mac2(sa("192.0.2.7:5001"), t0, covered, &mac2));
        assert!(!g.check_mac2(sa("192.0.2.8:5000"), t0, covered, &mac2));
        assert!(!g.check_mac2(sa("[::ffff:192.0.2.7]:5000"), t0, covered, &mac2));
        assert!(!g.check_mac2(src, t0, b"another message", &mac2));
        // Another server secret: rejected.
        let other = CookieGuard::new([8; 32], &[1; 32]);
        assert!(!other.check_mac2(src, t0, covered, &mac2));
    }

    #[test]
    fn reply_opens_only_with_server_key_and_mac1() {
        let server_pub = [1u8; 32];
        let g = CookieGuard::new([9; 32], &server_pub);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let src = sa("[2001:db8::1]:4000");
        let now = Instant::from_millis(5);
        let mac1 = [7u8; MAC_LEN];
        let r = g.reply(src, now, &mac1, &mut rng);
        assert_eq!(
            open_cookie_reply(&server_pub, &mac1, &r),
            Ok(g.cookie(src, now))
        );
        assert_eq!(
            open_cookie_reply(&server_pub, &[6; MAC_LEN], &r),
            Err(AuthError::BadCookieReply)
        );
        assert_eq!(
            open_cookie_reply(&[2; 32], &mac1, &r),
            Err(AuthError::BadCookieReply)
        );
        let mut flipped = r;
        flipped[30] ^= 1;
        assert_eq!(
            open_cookie_reply(&server_pub, &mac1, &flipped),
            Err(AuthError::BadCookieReply)
        );
        assert_eq!(
            open_cookie_reply(&server_pub, &mac1, &r[..40]),
            Err(AuthError::Malformed)
        );
    }
}
