//! 48-bit sequence arithmetic (RFC 4340 §7.1) and unwrapping of 48-bit
//! wire values (DCCP seq, MP_SEQ) to monotonic 64-bit numbers.

/// 2^48 - 1.
pub const SEQ_MASK: u64 = (1 << 48) - 1;
const HALF: u64 = 1 << 47;

/// `a + b` modulo 2^48.
pub fn add48(a: u64, b: u64) -> u64 {
    a.wrapping_add(b) & SEQ_MASK
}

/// `a - b` modulo 2^48.
pub fn sub48(a: u64, b: u64) -> u64 {
    a.wrapping_sub(b) & SEQ_MASK
}

/// Circular comparison: true when `a` is before `b` (RFC 4340 §7.1, the
/// half-space rule).
pub fn before48(a: u64, b: u64) -> bool {
    let d = sub48(b, a);
    d != 0 && d < HALF
}

/// Signed circular distance `b - a` in `[-2^47, 2^47)`.
pub fn delta48(a: u64, b: u64) -> i64 {
    let d = sub48(b, a);
    if d >= HALF {
        d as i64 - (1i64 << 48)
    } else {
        d as i64
    }
}

/// Maps a 48-bit `wire` value to the 64-bit number closest to `reference`
/// (a previously unwrapped value) with the same low 48 bits.
pub fn unwrap48(reference: u64, wire: u64) -> u64 {
    let d = delta48(reference & SEQ_MASK, wire & SEQ_MASK);
    let v = reference as i128 + d as i128;
    if v < 0 {
        // Below zero cannot be represented; the nearest valid value is the
        // wire value in the first epoch.
        wire & SEQ_MASK
    } else {
        v.min(u64::MAX as i128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_unwraps_across_the_48_bit_boundary() {
        assert_eq!(add48(SEQ_MASK, 2), 1);
        assert_eq!(sub48(1, 2), SEQ_MASK);
        assert!(before48(SEQ_MASK, 0));
        assert!(!before48(0, SEQ_MASK));
        assert_eq!(delta48(SEQ_MASK - 1, 3), 5);
        let r = SEQ_MASK - 1; // unwrapped, first epoch
        assert_eq!(unwrap48(r, 2), SEQ_MASK + 3);
        assert_eq!(unwrap48(SEQ_MASK + 3, SEQ_MASK), SEQ_MASK);
        assert_eq!(unwrap48(5, 3), 3);
    }
}
