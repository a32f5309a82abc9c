//! The keyed hashes the auth layer builds on: HMAC-SHA256 (RFC 2104) as MAC
//! and PRF, HKDF-Expand (RFC 5869 §2.3) for one 32-byte block, and 128-bit
//! truncated tags compared in constant time.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// Length of the truncated MACs (mac1, mac2, cookie, key confirmation).
pub const MAC_LEN: usize = 16;

fn keyed(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // Invariant: HMAC accepts keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac
}

/// Full HMAC-SHA256 over the concatenation of `parts`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    keyed(key, parts).finalize().into_bytes().into()
}

/// HMAC-SHA256 truncated to its leftmost 128 bits.
pub fn mac16(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    let full = hmac_sha256(key, parts);
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(&full[..MAC_LEN]);
    out
}

/// Constant-time check of a [`mac16`] tag.
pub fn verify16(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    tag.len() == MAC_LEN && keyed(key, parts).verify_truncated_left(tag).is_ok()
}

/// HKDF-Expand(PRK, info, 32) = T(1) = HMAC(PRK, info ‖ 0x01) (RFC 5869 §2.3).
pub fn expand(prk: &[u8; 32], info: &[u8]) -> [u8; 32] {
    hmac_sha256(prk, &[info, &[1u8]])
}

/// SHA-256(label ‖ data): a key bound to a public value (WireGuard's
/// `HASH(LABEL ‖ S_pub)` for mac1 and cookie-reply keys).
pub fn labelled_hash(label: &[u8], data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label);
    h.update(data);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5869 Appendix A.1 (SHA-256): OKM's first 32 bytes are T(1).
    #[test]
    fn expand_matches_rfc5869_case1() {
        let prk: [u8; 32] = [
            0x07, 0x77, 0x09, 0x36, 0x2c, 0x2e, 0x32, 0xdf, 0x0d, 0xdc, 0x3f, 0x0d, 0xc4, 0x7b,
            0xba, 0x63, 0x90, 0xb6, 0xc7, 0x3b, 0xb5, 0x0f, 0x9c, 0x31, 0x22, 0xec, 0x84, 0x4a,
            0xd7, 0xc2, 0xb3, 0xe5,
        ];
        let info = [0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9];
        let okm = expand(&prk, &info);
        let expect = [
            0x3c, 0xb2, 0x5f, 0x25, 0xfa, 0xac, 0xd5, 0x7a, 0x90, 0x43, 0x4f, 0x64, 0xd0, 0x36,
            0x2f, 0x2a, 0x2d, 0x2d, 0x0a, 0x90, 0xcf, 0x1a, 0x5a, 0x4c, 0x5d, 0xb0, 0x2d, 0x56,
            0xec, 0xc4, 0xc5, 0xbf,
        ];
        assert_eq!(okm, expect);
    }

    #[test]
    fn truncated_tags_verify_and_reject() {
        let t = mac16(b"k", &[b"ab", b"c"]);
        assert!(verify16(b"k", &[b"abc"], &t));
        assert!(!verify16(b"k", &[b"abd"], &t));
        assert!(!verify16(b"k2", &[b"abc"], &t));
        assert!(!verify16(b"k", &[b"abc"], &t[..15]));
    }
}
