//! 48-bit circular sequence-number arithmetic (RFC 4340 §7.1) and the
//! extension of 24-bit short sequence numbers (§7.6).
//!
//! DCCP sequence numbers live on a circle of 2^48; "a is before b" means
//! the shorter way round from a to b goes forwards. MP_SEQ (RFC 9897
//! §3.2.5) uses the same 48-bit space and helpers.

use super::SEQ_MASK;

const HALF: u64 = 1 << 47;

/// `a + n` modulo 2^48.
pub fn add(a: u64, n: u64) -> u64 {
    a.wrapping_add(n) & SEQ_MASK
}

/// `a - n` modulo 2^48.
pub fn sub(a: u64, n: u64) -> u64 {
    a.wrapping_sub(n) & SEQ_MASK
}

/// Forward distance from `from` to `to` modulo 2^48 (0..2^48).
pub fn dist(from: u64, to: u64) -> u64 {
    to.wrapping_sub(from) & SEQ_MASK
}

/// Signed circular difference `a - b`, in (-2^47, 2^47].
pub fn delta(a: u64, b: u64) -> i64 {
    let d = dist(b, a);
    if d > HALF {
        // d ≤ 2^48, so d - 2^48 fits in i64.
        d as i64 - (1i64 << 48)
    } else {
        d as i64
    }
}

/// `a` strictly before `b` on the circle (§7.1 "less than").
pub fn before(a: u64, b: u64) -> bool {
    delta(a, b) < 0
}

/// Whether `s` lies in the inclusive window `[lo, hi]` (§7.5.1 validity
/// windows), measured forwards from `lo`.
pub fn in_window(s: u64, lo: u64, hi: u64) -> bool {
    dist(lo, s) <= dist(lo, hi)
}

/// Extend a 24-bit sequence or acknowledgement number to 48 bits (§7.6):
/// of the 48-bit values whose low 24 bits equal `short`, the one closest to
/// `reference` (GSR for sequence numbers, GSS for acknowledgements).
pub fn extend_short(short: u64, reference: u64) -> u64 {
    const M24: u64 = (1 << 24) - 1;
    let base = (reference & SEQ_MASK & !M24) | (short & M24);
    [sub(base, 1 << 24), base, add(base, 1 << 24)]
        .into_iter()
        .min_by_key(|&c| delta(c, reference).unsigned_abs())
        .unwrap_or(base)
}
