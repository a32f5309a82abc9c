//! Optional payload protection: ChaCha20-Poly1305 (RFC 8439) per packet,
//! with a per-path anti-replay window (RFC 6479).
//!
//! Each path direction has its own key, `HKDF-Expand(payload key of the
//! sender, "path" ‖ binding)`, where the binding is empty for the first
//! subflow and the MP_JOIN nonces `RA ‖ RB` for a joined one. The nonce is
//! the 64-bit per-path packet counter, so (key, nonce) never repeats, and a
//! packet replayed onto another path fails authentication there. The frame
//! is `counter (8, big endian) ‖ ciphertext ‖ tag (16)`; the associated data
//! is whatever the caller authenticates in clear (the DCCP header).
//!
//! The cipher is `ring`'s ChaCha20-Poly1305, chosen by measurement
//! (`benches/aead.rs`, docs/SECURITY.md §5): the same RFC 8439 bytes as
//! RustCrypto's, at a fraction of the CPU per packet.

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};

use super::handshake::SessionKeys;
use super::mac::expand;
use super::AuthError;

/// Bytes a protected frame adds to the payload.
pub const OVERHEAD: usize = COUNTER_LEN + TAG_LEN;
/// Bytes of the per-path counter in front of the ciphertext.
pub const COUNTER_LEN: usize = 8;
const TAG_LEN: usize = 16;

/// Words of the replay bitmap; one word is kept as the slack RFC 6479 uses
/// to advance without clearing bit by bit.
const WINDOW_WORDS: usize = 128;
/// Packets older than the newest by this many are refused (8128).
pub const REPLAY_WINDOW: u64 = ((WINDOW_WORDS - 1) * 64) as u64;

/// RFC 6479 bitmap window: check before authenticating, update after.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    /// Highest counter accepted so far.
    top: u64,
    bitmap: [u64; WINDOW_WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            top: 0,
            bitmap: [0; WINDOW_WORDS],
        }
    }
}

fn word_bit(seq: u64) -> (usize, u64) {
    ((seq / 64) as usize % WINDOW_WORDS, 1u64 << (seq % 64))
}

impl ReplayWindow {
    /// Would `seq` be accepted (new, and not older than the window)?
    pub fn check(&self, seq: u64) -> Result<(), AuthError> {
        if seq > self.top {
            return Ok(());
        }
        if self.top - seq >= REPLAY_WINDOW {
            return Err(AuthError::ReplayedPacket);
        }
        let (w, b) = word_bit(seq);
        if self.bitmap[w] & b != 0 {
            return Err(AuthError::ReplayedPacket);
        }
        Ok(())
    }

    /// Record `seq` as seen (after its packet authenticated).
    pub fn update(&mut self, seq: u64) {
        if seq > self.top {
            // Clear the words between the old top's word and the new one.
            let (old, new) = (self.top / 64, seq / 64);
            let advance = (new - old).min(WINDOW_WORDS as u64);
            for i in 1..=advance {
                self.bitmap[((old + i) % WINDOW_WORDS as u64) as usize] = 0;
            }
            self.top = seq;
        }
        let (w, b) = word_bit(seq);
        self.bitmap[w] |= b;
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtectStats {
    pub sealed: u64,
    pub opened: u64,
    pub bad_tag: u64,
    pub replayed: u64,
    pub malformed: u64,
}

/// Seal and open for one path (both directions).
pub struct PathProtector {
    send: LessSafeKey,
    recv: LessSafeKey,
    next_send: u64,
    window: ReplayWindow,
    stats: ProtectStats,
}

impl std::fmt::Debug for PathProtector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathProtector")
            .field("next_send", &self.next_send)
            .field("stats", &self.stats)
            .finish()
    }
}

fn path_key(direction_key: &[u8; 32], binding: &[u8]) -> LessSafeKey {
    let mut info = b"mpdccp-auth-v1 path".to_vec();
    info.extend_from_slice(binding);
    let key = UnboundKey::new(&CHACHA20_POLY1305, &expand(direction_key, &info))
        .expect("ChaCha20-Poly1305 takes a 32-byte key");
    LessSafeKey::new(key)
}

/// RFC 8439 §2.8's 96-bit nonce: 32 zero bits ‖ the 64-bit path counter.
/// Unique per key: the counter only grows and stops at `u64::MAX`.
fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

impl PathProtector {
    /// `binding`: empty for the connection's first subflow, `RA ‖ RB` of the
    /// MP_JOIN handshake for a joined one (both ends know both nonces).
    pub fn new(keys: &SessionKeys, binding: &[u8]) -> Self {
        PathProtector {
            send: path_key(keys.payload_send(), binding),
            recv: path_key(keys.payload_recv(), binding),
            next_send: 0,
            window: ReplayWindow::default(),
            stats: ProtectStats::default(),
        }
    }

    pub fn stats(&self) -> ProtectStats {
        self.stats
    }

    /// Seal `plaintext` into `out` (which needs `plaintext.len() + OVERHEAD`
    /// bytes); returns the frame length.
    pub fn seal(
        &mut self,
        aad: &[u8],
        plaintext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, AuthError> {
        let len = plaintext.len() + OVERHEAD;
        if out.len() < len {
            return Err(AuthError::Malformed);
        }
        out[COUNTER_LEN..COUNTER_LEN + plaintext.len()].copy_from_slice(plaintext);
        self.seal_in_place(aad, &mut out[..len])
    }

    /// As [`seal`](Self::seal) with the plaintext already in place at
    /// `frame[8..frame.len() - 16]` (the send path writes the packet once
    /// and seals it where it lies); returns `frame.len()`.
    pub fn seal_in_place(&mut self, aad: &[u8], frame: &mut [u8]) -> Result<usize, AuthError> {
        let len = frame.len();
        if len < OVERHEAD || self.next_send == u64::MAX {
            return Err(AuthError::Malformed);
        }
        let counter = self.next_send;
        self.next_send += 1;
        frame[..COUNTER_LEN].copy_from_slice(&counter.to_be_bytes());
        let body = &mut frame[COUNTER_LEN..len - TAG_LEN];
        let tag = self
            .send
            .seal_in_place_separate_tag(nonce(counter), Aad::from(aad), body)
            .map_err(|_| AuthError::Malformed)?;
        frame[len - TAG_LEN..].copy_from_slice(tag.as_ref());
        self.stats.sealed += 1;
        Ok(len)
    }

    /// Open a frame in place; the plaintext is `frame[8..8 + returned len]`.
    /// Forged, corrupted, replayed or too old frames are refused and counted.
    pub fn open(&mut self, aad: &[u8], frame: &mut [u8]) -> Result<usize, AuthError> {
        if frame.len() < OVERHEAD {
            self.stats.malformed += 1;
            return Err(AuthError::Malformed);
        }
        let mut c = [0u8; COUNTER_LEN];
        c.copy_from_slice(&frame[..COUNTER_LEN]);
        let counter = u64::from_be_bytes(c);
        if let Err(e) = self.window.check(counter) {
            self.stats.replayed += 1;
            return Err(e);
        }
        let body_len = frame.len() - OVERHEAD;
        let (head, tag) = frame.split_at_mut(COUNTER_LEN + body_len);
        let tag = Tag::try_from(&tag[..]).map_err(|_| AuthError::Malformed)?;
        let body = &mut head[COUNTER_LEN..];
        if self
            .recv
            .open_in_place_separate_tag(nonce(counter), Aad::from(aad), tag, body, 0..)
            .is_err()
        {
            self.stats.bad_tag += 1;
            return Err(AuthError::BadPacket);
        }
        self.window.update(counter);
        self.stats.opened += 1;
        Ok(body_len)
    }
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
