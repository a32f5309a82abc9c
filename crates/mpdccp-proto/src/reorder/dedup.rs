//! Bounded duplicate detection: a sliding bitmap over the last `size`
//! sequence numbers below the highest one recorded (the anti-replay window of
//! RFC 4303 §3.4.3, used here to deliver each MP_SEQ once).

/// What the window knows about a sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Not recorded before (now recorded).
    New,
    /// Recorded before.
    Duplicate,
    /// Below the window: cannot tell, so the caller must not deliver it.
    TooOld,
}

#[derive(Clone, Debug)]
pub(crate) struct DedupWindow {
    /// Ring of bits; bit `seq % size` stands for `seq` while it is in the window.
    words: Vec<u64>,
    size: u64,
    /// Highest sequence number recorded.
    top: Option<u64>,
}

impl DedupWindow {
    /// A window of at least `size` sequence numbers (rounded up to 64).
    pub(crate) fn new(size: usize) -> Self {
        let words = size.div_ceil(64).max(1);
        DedupWindow {
            words: vec![0; words],
            size: words as u64 * 64,
            top: None,
        }
    }

    /// Record `seq`, reporting whether it was seen before.
    pub(crate) fn insert(&mut self, seq: u64) -> Seen {
        let top = match self.top {
            None => {
                self.top = Some(seq);
                self.set(seq);
                return Seen::New;
            }
            Some(t) => t,
        };
        if seq > top {
            // Slide: bits for (top, seq] now stand for new numbers; clear them.
            let advance = seq - top;
            if advance >= self.size {
                self.words.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in top + 1..=seq {
                    self.clear(s);
                }
            }
            self.top = Some(seq);
            self.set(seq);
            return Seen::New;
        }
        if top - seq >= self.size {
            return Seen::TooOld;
        }
        if self.is_set(seq) {
            Seen::Duplicate
        } else {
            self.set(seq);
            Seen::New
        }
    }

    fn index(&self, seq: u64) -> (usize, u64) {
        let bit = seq % self.size;
        ((bit / 64) as usize, 1u64 << (bit % 64))
    }
    fn set(&mut self, seq: u64) {
        let (w, m) = self.index(seq);
        self.words[w] |= m;
    }
    fn clear(&mut self, seq: u64) {
        let (w, m) = self.index(seq);
        self.words[w] &= !m;
    }
    fn is_set(&self, seq: u64) -> bool {
        let (w, m) = self.index(seq);
        self.words[w] & m != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_duplicates_inside_the_window_and_refuses_older() {
        let mut w = DedupWindow::new(64);
        assert_eq!(w.insert(10), Seen::New);
        assert_eq!(w.insert(10), Seen::Duplicate);
        assert_eq!(w.insert(5), Seen::New);
        assert_eq!(w.insert(5), Seen::Duplicate);
        assert_eq!(w.insert(73), Seen::New); // window now (9, 73]
        assert_eq!(w.insert(10), Seen::Duplicate);
        assert_eq!(w.insert(9), Seen::TooOld);
        assert_eq!(w.insert(5), Seen::TooOld);
        assert_eq!(w.insert(11), Seen::New);
        assert_eq!(w.insert(u64::MAX), Seen::New);
        assert_eq!(w.insert(u64::MAX), Seen::Duplicate);
        assert_eq!(w.insert(73), Seen::TooOld);
    }
}
