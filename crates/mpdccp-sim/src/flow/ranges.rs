//! What a receiver holds: a cumulative point plus sorted, disjoint ranges
//! above it. The TCP receiver's SACK blocks (RFC 2018) and the QUIC
//! receiver's ACK ranges (RFC 9000 §19.3) and stream reassembly are all
//! this one structure.

/// Every number below `next` has arrived, and the numbers in `above`
/// (sorted disjoint `[start, end)` ranges, all above `next`) too.
#[derive(Clone, Debug, Default)]
pub struct RangeSet {
    next: u64,
    above: Vec<(u64, u64)>,
    highest: Option<u64>,
}

impl RangeSet {
    /// The lowest number not yet received (the cumulative point).
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The highest number received so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// The ranges held above the cumulative point, lowest first.
    pub fn above(&self) -> &[(u64, u64)] {
        &self.above
    }

    pub fn contains(&self, n: u64) -> bool {
        n < self.next || self.range_of(n).is_some()
    }

    /// The held range containing `n`, if any.
    pub fn range_of(&self, n: u64) -> Option<(u64, u64)> {
        let i = self.above.partition_point(|&(_, b)| b <= n);
        self.above.get(i).copied().filter(|&(a, _)| a <= n)
    }

    /// Records `n`; false if it was there already.
    pub fn insert(&mut self, n: u64) -> bool {
        if self.contains(n) {
            return false;
        }
        self.highest = Some(self.highest.map_or(n, |h| h.max(n)));
        if n == self.next {
            self.next += 1;
            // Pull in a held range that is now contiguous.
            if let Some(&(a, b)) = self.above.first() {
                if a == self.next {
                    self.next = b;
                    self.above.remove(0);
                }
            }
            return true;
        }
        let i = self.above.partition_point(|&(_, b)| b < n);
        // above[i] is the first range ending at or after n.
        if i < self.above.len() && self.above[i].1 == n {
            self.above[i].1 += 1;
            if i + 1 < self.above.len() && self.above[i + 1].0 == n + 1 {
                self.above[i].1 = self.above[i + 1].1;
                self.above.remove(i + 1);
            }
        } else if i < self.above.len() && self.above[i].0 == n + 1 {
            self.above[i].0 = n;
        } else {
            self.above.insert(i, (n, n + 1));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_advances() {
        let mut r = RangeSet::default();
        assert!(r.insert(0));
        assert!(r.insert(2) && r.insert(4) && r.insert(3));
        assert_eq!((r.next(), r.above()), (1, &[(2, 5)][..]));
        assert!(!r.insert(3) && !r.insert(0));
        assert!(r.insert(7));
        assert_eq!(r.range_of(4), Some((2, 5)));
        assert_eq!(r.range_of(5), None);
        assert!(r.insert(1));
        assert_eq!((r.next(), r.above()), (5, &[(7, 8)][..]));
        assert!(r.insert(6) && r.insert(5));
        assert_eq!((r.next(), r.above().len(), r.highest()), (8, 0, Some(7)));
    }
}
