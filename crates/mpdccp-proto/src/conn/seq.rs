//! Unwrapping of 48-bit wire values (DCCP sequence numbers, MP_SEQ) to
//! monotonic 64-bit numbers; the modular arithmetic itself is
//! [`crate::wire::seq`].

pub use crate::wire::SEQ_MASK;

/// Maps a 48-bit `wire` value to the 64-bit number closest to `reference`
/// (a previously unwrapped value) with the same low 48 bits.
pub fn unwrap48(reference: u64, wire: u64) -> u64 {
    // wire::seq::delta(a, b) = a - b in the half-space sense.
    let d = crate::wire::seq::delta(wire & SEQ_MASK, reference & SEQ_MASK);
    let v = reference as i128 + d as i128;
    if v < 0 {
        // Below zero cannot be represented: the first epoch's value.
        wire & SEQ_MASK
    } else {
        v.min(u64::MAX as i128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_across_the_48_bit_boundary() {
        let r = SEQ_MASK - 1; // unwrapped, first epoch
        assert_eq!(unwrap48(r, 2), SEQ_MASK + 3);
        assert_eq!(unwrap48(SEQ_MASK + 3, SEQ_MASK), SEQ_MASK);
        assert_eq!(unwrap48(5, 3), 3);
        assert_eq!(unwrap48(5, 9), 9);
        assert_eq!(unwrap48(3, SEQ_MASK), SEQ_MASK, "no negative values");
    }
}
