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
pub use crate::wire::profile_keys::{hmac20, hmac20_matches as verify20};

/// Keys of one MP-DCCP connection once both MP_KEYs are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnKeys {
    pub local: [u8; 8],
    pub remote: [u8; 8],
}

impl ConnKeys {
    /// The derived key this host signs with: own key first.
    pub fn d_key_local(&self) -> [u8; 16] {
        concat(self.local, self.remote)
    }
    /// The derived key the peer signs with.
    pub fn d_key_remote(&self) -> [u8; 16] {
        concat(self.remote, self.local)
    }
}

/// MP_JOIN's MP_HMAC computed by the host with derived key `d_key` over its
/// own nonce followed by the peer's: B sends HMAC(d-keyB, RB ‖ RA) in the
/// Response, A sends HMAC(d-keyA, RA ‖ RB) in the Ack (RFC 9897 §3.2.2).
pub fn join_hmac(d_key: &[u8; 16], own_nonce: u32, peer_nonce: u32) -> [u8; HMAC_LEN] {
    hmac20(
        d_key,
        &[&own_nonce.to_be_bytes(), &peer_nonce.to_be_bytes()],
    )
}

pub fn verify_join_hmac(
    d_key: &[u8; 16],
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let a = ConnKeys {
            local: [1; 8],
            remote: [2; 8],
        };
        let b = ConnKeys {
            local: [2; 8],
            remote: [1; 8],
        };
        assert_eq!(a.d_key_local(), b.d_key_remote());
        // B signs RB‖RA with d-keyB; A verifies with its view of d-keyB.
        let tag_b = join_hmac(&b.d_key_local(), 0xBBBB, 0xAAAA);
        assert!(verify_join_hmac(&a.d_key_remote(), 0xBBBB, 0xAAAA, &tag_b));
        assert!(!verify_join_hmac(&a.d_key_remote(), 0xAAAA, 0xBBBB, &tag_b));
        assert_ne!(tag_b, join_hmac(&a.d_key_local(), 0xAAAA, 0xBBBB));
    }
}
