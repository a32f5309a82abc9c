//! MP-DCCP key material (RFC 9897 §3.2.4, §3.2.2, §3.2.5).
//!
//! Each host picks a 64-bit key (key type 0, "plain text") and exchanges it
//! in MP_KEY during the first subflow's handshake. The derived keys are the
//! concatenations `d-keyA = KeyA ‖ KeyB` and `d-keyB = KeyB ‖ KeyA`, where A
//! is the host that initiated the connection. MP_HMAC values are
//! HMAC-SHA256 truncated to the leftmost 160 bits (20 bytes).

// One HMAC-20 for every profile: the wire layer's (the connection builds on
// it; the reference profiles' derivations live beside it).
pub use crate::wire::mp::HMAC_LEN;
use crate::wire::profile_keys::concat;
pub use crate::wire::profile_keys::{hmac20, hmac20_matches as verify20, JoinHmac};
use crate::wire::WireProfile;

/// Keys of one MP-DCCP connection once both sides' key material is known.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ConnKeys {
    /// Key type 0 (RFC 9897 §3.2.4): both 64-bit keys, sent in clear.
    Plain { local: [u8; 8], remote: [u8; 8] },
    /// Authenticated mode (docs/SECURITY.md §4): each side's 32-byte d-key
    /// from the Noise handshake, known only to the two ends.
    Derived { local: [u8; 32], remote: [u8; 32] },
}

impl std::fmt::Debug for ConnKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnKeys::Plain { .. } => f.write_str("ConnKeys::Plain(..)"),
            ConnKeys::Derived { .. } => f.write_str("ConnKeys::Derived(..)"),
        }
    }
}

/// A derived key (16 bytes for key type 0, 32 when derived); HMAC takes
/// any key length, so the users see only `&[u8]`.
#[derive(Clone, Copy)]
pub struct DKey {
    bytes: [u8; 32],
    len: usize,
}

impl DKey {
    fn new(key: &[u8]) -> DKey {
        let mut bytes = [0u8; 32];
        bytes[..key.len()].copy_from_slice(key);
        DKey {
            bytes,
            len: key.len(),
        }
    }
}

impl std::ops::Deref for DKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl ConnKeys {
    /// The derived key this host signs with (key type 0: own key first).
    pub fn d_key_local(&self) -> DKey {
        match self {
            ConnKeys::Plain { local, remote } => DKey::new(&concat(*local, *remote)),
            ConnKeys::Derived { local, .. } => DKey::new(local),
        }
    }
    /// The derived key the peer signs with.
    pub fn d_key_remote(&self) -> DKey {
        match self {
            ConnKeys::Plain { local, remote } => DKey::new(&concat(*remote, *local)),
            ConnKeys::Derived { remote, .. } => DKey::new(remote),
        }
    }
}

/// The 8 bytes MP_CLOSE / MP_FAST_CLOSE carry in authenticated mode
/// instead of the receiver's key (docs/SECURITY.md §4): HKDF-Expand of the
/// receiver's d-key, truncated; only the two ends can compute it.
pub fn close_value(d_key: &[u8; 32]) -> [u8; 8] {
    let full = crate::auth::mac::expand(d_key, b"mpdccp-auth-v1 close");
    let mut v = [0u8; 8];
    v.copy_from_slice(&full[..8]);
    v
}

/// MP_JOIN's MP_HMAC computed by the host with derived key `d_key` over its
/// own nonce followed by the peer's: B sends HMAC(d-keyB, RB ‖ RA) in the
/// Response, A sends HMAC(d-keyA, RA ‖ RB) in the Ack (RFC 9897 §3.2.2).
pub fn join_hmac(d_key: &[u8], own_nonce: u32, peer_nonce: u32) -> [u8; HMAC_LEN] {
    hmac20(
        d_key,
        &[&own_nonce.to_be_bytes(), &peer_nonce.to_be_bytes()],
    )
}

pub fn verify_join_hmac(
    d_key: &[u8],
    sender_nonce: u32,
    receiver_nonce: u32,
    tag: &[u8; HMAC_LEN],
) -> bool {
    verify20(
        d_key,
        &[&sender_nonce.to_be_bytes(), &receiver_nonce.to_be_bytes()],
        tag,
    )
}

/// MP_JOIN's MP_HMAC on packet `at` under wire profile `p`, keyed with the
/// sender's derived key: RFC 9897 §3.2.2 covers the sender's nonce then
/// the peer's (the same bytes as [`join_hmac`]); the reference kernels
/// cover `J ‖ nonce of the other side`, `J` = the identifier in the
/// client's MP_JOIN (docs/INTEROP.md, `wire::profile_keys`).
pub fn join_hmac_in(
    p: WireProfile,
    d_key: &[u8],
    at: JoinHmac,
    join_id: u32,
    (nonce_c, nonce_s): (u32, u32),
) -> [u8; HMAC_LEN] {
    hmac20(
        d_key,
        &[&p.join_hmac_message(at, join_id, nonce_c, nonce_s)],
    )
}

/// Checks a received join MP_HMAC as [`join_hmac_in`] computes it (in
/// constant time).
pub fn verify_join_hmac_in(
    p: WireProfile,
    d_key: &[u8],
    at: JoinHmac,
    join_id: u32,
    (nonce_c, nonce_s): (u32, u32),
    tag: &[u8; HMAC_LEN],
) -> bool {
    let m = p.join_hmac_message(at, join_id, nonce_c, nonce_s);
    verify20(d_key, &[&m], tag)
}

/// MP_PRIO's MP_HMAC in the authenticated modes (our extension; RFC 9897
/// §3.2.9 leaves MP_PRIO unauthenticated, so a forged "priority 0" would
/// take a path out of use). The sender's d-key over a label, the option's
/// MP_SEQ (replays of older ones are outdated, §3.2.1), the priority and
/// the subflow's MP_JOIN nonces, sender's first (0 and 0 on the first
/// subflow, which has none), so a tag cannot move to another subflow. The
/// nonces, not the ISSs: a retransmitted Request or Response moves the
/// ISS one end records, never the nonces.
pub fn prio_hmac(
    d_key: &[u8],
    prio: u8,
    mp_seq: u64,
    (sender_nonce, receiver_nonce): (u32, u32),
) -> [u8; HMAC_LEN] {
    let seq = seq48(mp_seq);
    let (a, b) = (sender_nonce.to_be_bytes(), receiver_nonce.to_be_bytes());
    hmac20(d_key, &[b"mpdccp-prio-v1", &seq, &[prio], &a, &b])
}

/// Checks a received MP_PRIO's tag as [`prio_hmac`] computes it.
pub fn verify_prio_hmac(
    d_key: &[u8],
    prio: u8,
    mp_seq: u64,
    (sender_nonce, receiver_nonce): (u32, u32),
    tag: &[u8; HMAC_LEN],
) -> bool {
    let seq = seq48(mp_seq);
    let (a, b) = (sender_nonce.to_be_bytes(), receiver_nonce.to_be_bytes());
    verify20(d_key, &[b"mpdccp-prio-v1", &seq, &[prio], &a, &b], tag)
}

/// MP_SEQ's 48 bits, big-endian.
fn seq48(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

#[cfg(test)]
mod tests {
    use crate::wire::profile_keys::{hmac20, hmac20_matches as verify20, JoinHmac};
    use crate::wire::WireProfile;

    use super::{
        close_value, join_hmac, join_hmac_in, prio_hmac, verify_join_hmac, verify_join_hmac_in,
        verify_prio_hmac, ConnKeys,
    };

    /// RFC 4231 test case 2 (HMAC-SHA256, key "Jefe"), truncated to 20 bytes.
    #[test]
    fn hmac_matches_rfc4231_vector() {
        let tag = hmac20(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        let expect = [
            0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95,
            0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08,
        ];
        assert_eq!(tag, expect);
        assert!(verify20(
            b"Jefe",
            &[b"what do ya want for nothing?"],
            &expect
        ));
    }

    #[test]
    fn join_hmacs_are_directional() {
        let a = ConnKeys::Plain {
            local: [1; 8],
            remote: [2; 8],
        };
        let b = ConnKeys::Plain {
            local: [2; 8],
            remote: [1; 8],
        };
        assert_eq!(*a.d_key_local(), *b.d_key_remote());
        assert_eq!(a.d_key_local().len(), 16);
        // B signs RB‖RA with d-keyB; A verifies with its view of d-keyB.
        let tag_b = join_hmac(&b.d_key_local(), 0xBBBB, 0xAAAA);
        assert!(verify_join_hmac(&a.d_key_remote(), 0xBBBB, 0xAAAA, &tag_b));
        assert!(!verify_join_hmac(&a.d_key_remote(), 0xAAAA, 0xBBBB, &tag_b));
        assert_ne!(tag_b, join_hmac(&a.d_key_local(), 0xAAAA, 0xBBBB));
    }

    /// The RFC profile's join HMACs are [`join_hmac`]'s bytes; k4.14's
    /// differ (the identifier in place of the sender's nonce).
    #[test]
    fn profile_join_hmacs() {
        let (dk, j, n) = ([9u8; 16], 0x5392_02e7, (0xaaaa, 0xbbbb));
        let rfc = WireProfile::Rfc9897;
        let resp = join_hmac_in(rfc, &dk, JoinHmac::Response, j, n);
        assert_eq!(resp, join_hmac(&dk, 0xbbbb, 0xaaaa));
        let ack = join_hmac_in(rfc, &dk, JoinHmac::Ack, j, n);
        assert_eq!(ack, join_hmac(&dk, 0xaaaa, 0xbbbb));
        let k414 = WireProfile::ReferenceK414;
        let r = join_hmac_in(k414, &dk, JoinHmac::Response, j, n);
        assert_eq!(
            r,
            hmac20(&dk, &[&j.to_be_bytes(), &0xaaaau32.to_be_bytes()])
        );
        assert!(verify_join_hmac_in(k414, &dk, JoinHmac::Response, j, n, &r));
        assert!(!verify_join_hmac_in(rfc, &dk, JoinHmac::Response, j, n, &r));
    }

    #[test]
    fn derived_keys_are_directional_and_differ_from_plain() {
        let a = ConnKeys::Derived {
            local: [1; 32],
            remote: [2; 32],
        };
        let b = ConnKeys::Derived {
            local: [2; 32],
            remote: [1; 32],
        };
        assert_eq!(a.d_key_local().len(), 32);
        let tag_b = join_hmac(&b.d_key_local(), 7, 8);
        assert!(verify_join_hmac(&a.d_key_remote(), 7, 8, &tag_b));
        assert!(!verify_join_hmac(&a.d_key_local(), 7, 8, &tag_b));
        assert_ne!(close_value(&[1; 32]), close_value(&[2; 32]));
    }

    #[test]
    fn prio_tags_bind_value_sequence_and_subflow() {
        let k = [7u8; 32];
        let t = prio_hmac(&k, 0, 42, (1000, 2000));
        assert!(verify_prio_hmac(&k, 0, 42, (1000, 2000), &t));
        // Another priority, another MP_SEQ, another subflow (either
        // nonce), the other direction, another key: all refused.
        assert!(!verify_prio_hmac(&k, 1, 42, (1000, 2000), &t));
        assert!(!verify_prio_hmac(&k, 0, 41, (1000, 2000), &t));
        assert!(!verify_prio_hmac(&k, 0, 42, (1001, 2000), &t));
        assert!(!verify_prio_hmac(&k, 0, 42, (1000, 2001), &t));
        assert!(!verify_prio_hmac(&k, 0, 42, (2000, 1000), &t));
        assert!(!verify_prio_hmac(&k, 0, 42, (0, 0), &t));
        assert!(!verify_prio_hmac(&[8u8; 32], 0, 42, (1000, 2000), &t));
    }
}
