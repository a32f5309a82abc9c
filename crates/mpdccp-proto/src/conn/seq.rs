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

/// RFC 9897 §3.2.1: an option is outdated when an earlier option of the
/// same dataset came with a higher MP_SEQ. `last` is the highest MP_SEQ
/// seen for the dataset; it advances unless `seq` is outdated (the answer).
/// An option without MP_SEQ (an older peer) cannot be judged: not outdated.
pub fn outdated_in_dataset(last: &mut Option<u64>, seq: Option<u64>) -> bool {
    let Some(s) = seq.map(|s| s & SEQ_MASK) else {
        return false;
    };
    if last.is_some_and(|l| crate::wire::seq::before(s, l)) {
        return true;
    }
    *last = Some(s);
    false
}

#[cfg(test)]
mod tests {
    use crate::wire::SEQ_MASK;

    use super::{outdated_in_dataset, unwrap48};

    #[test]
    fn a_lower_mp_seq_in_a_dataset_is_outdated() {
        let mut last = None;
        assert!(!outdated_in_dataset(&mut last, Some(10)));
        assert!(!outdated_in_dataset(&mut last, Some(10)), "equal: current");
        assert!(outdated_in_dataset(&mut last, Some(9)));
        assert!(
            !outdated_in_dataset(&mut last, None),
            "no MP_SEQ: not judged"
        );
        assert!(outdated_in_dataset(&mut last, Some(2)));
        assert_eq!(last, Some(10));
        // Across the 48-bit wrap: 1 comes after SEQ_MASK.
        let mut last = Some(SEQ_MASK);
        assert!(!outdated_in_dataset(&mut last, Some(1)));
        assert!(outdated_in_dataset(&mut last, Some(SEQ_MASK - 1)));
        assert_eq!(last, Some(1));
    }

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
