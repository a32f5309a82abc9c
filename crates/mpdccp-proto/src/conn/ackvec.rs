//! Receive history and the Ack Vector (RFC 4340 §11.4) as CCID2 uses it
//! (RFC 4341 §6.1): the HC-receiver records which sequence numbers arrived
//! and reports runs of (state, length) going down from the acknowledgement
//! number; the HC-sender walks those runs to learn what was delivered.

/// Ack Vector cell states (RFC 4340 §11.4).
pub const STATE_RECEIVED: u8 = 0;
pub const STATE_ECN: u8 = 1;
pub const STATE_NOT_RECEIVED: u8 = 3;

const WORDS: usize = 16;
/// Sequence numbers remembered behind the greatest one received.
pub const HISTORY: u64 = (WORDS * 64) as u64;

/// Which of the last [`HISTORY`] sequence numbers arrived. Numbers are the
/// connection's unwrapped 64-bit DCCP sequence numbers.
#[derive(Clone, Debug)]
pub struct RecvHistory {
    bits: [u64; WORDS],
    /// Lowest valid number (the peer's ISS: nothing below was ever sent).
    low: u64,
    /// Greatest number received.
    high: u64,
}

impl RecvHistory {
    pub fn new(isr: u64) -> Self {
        let mut h = RecvHistory {
            bits: [0; WORDS],
            low: isr,
            high: isr,
        };
        h.set(isr);
        h
    }

    pub fn high(&self) -> u64 {
        self.high
    }

    fn idx(seq: u64) -> (usize, u64) {
        let i = (seq % HISTORY) as usize;
        (i / 64, 1u64 << (i % 64))
    }
    fn set(&mut self, seq: u64) {
        let (w, m) = Self::idx(seq);
        self.bits[w] |= m;
    }
    fn clear(&mut self, seq: u64) {
        let (w, m) = Self::idx(seq);
        self.bits[w] &= !m;
    }
    pub fn contains(&self, seq: u64) -> bool {
        if seq > self.high || seq < self.low || self.high - seq >= HISTORY {
            return false;
        }
        let (w, m) = Self::idx(seq);
        self.bits[w] & m != 0
    }

    /// Records `seq`; returns false for a duplicate or a number too old to
    /// remember.
    pub fn record(&mut self, seq: u64) -> bool {
        if seq > self.high {
            let gap = seq - self.high;
            if gap >= HISTORY {
                self.bits = [0; WORDS];
            } else {
                for s in self.high + 1..seq {
                    self.clear(s);
                }
            }
            self.set(seq);
            self.high = seq;
            return true;
        }
        if seq < self.low || self.high - seq >= HISTORY || self.contains(seq) {
            return false;
        }
        self.set(seq);
        true
    }

    /// Encodes the Ack Vector for acknowledgement number `high()`, covering at
    /// most `max_cover` numbers, into `out`; returns the cell count.
    pub fn encode(&self, max_cover: u64, out: &mut [u8]) -> usize {
        let cover = max_cover.min(HISTORY).min(self.high - self.low + 1).max(1);
        let mut n = 0;
        let mut s = self.high;
        let end = self.high + 1 - cover;
        while s >= end && n < out.len() {
            let state = self.contains(s);
            let mut run = 1u64;
            while run < 64 && s >= end + run && self.contains(s - run) == state {
                run += 1;
            }
            let st = if state {
                STATE_RECEIVED
            } else {
                STATE_NOT_RECEIVED
            };
            out[n] = (st << 6) | (run - 1) as u8;
            n += 1;
            if s < end + run {
                break;
            }
            s -= run;
        }
        n
    }
}

/// Walks Ack Vector `cells` for acknowledgement number `ack`, calling
/// `f(high, low, state)` for each run (inclusive bounds, `high` first).
/// Runs reaching below zero are cut off.
pub fn for_each_run(ack: u64, cells: &[u8], mut f: impl FnMut(u64, u64, u8)) {
    let mut s = ack;
    for &c in cells {
        let len = (c & 0x3f) as u64 + 1;
        let state = c >> 6;
        let low = s.saturating_sub(len - 1);
        f(s, low, state);
        if low == 0 {
            return;
        }
        s = low - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_runs_and_decodes_them_back() {
        let mut h = RecvHistory::new(100);
        for s in [101, 102, 105, 106, 107, 110] {
            assert!(h.record(s));
        }
        assert!(!h.record(105), "duplicate");
        let mut cells = [0u8; 16];
        let n = h.encode(64, &mut cells);
        let mut got = Vec::new();
        for_each_run(h.high(), &cells[..n], |hi, lo, st| got.push((hi, lo, st)));
        assert_eq!(
            got,
            vec![
                (110, 110, 0),
                (109, 108, 3),
                (107, 105, 0),
                (104, 103, 3),
                (102, 100, 0)
            ]
        );
    }

    #[test]
    fn long_runs_split_at_64() {
        let mut h = RecvHistory::new(0);
        for s in 1..200 {
            h.record(s);
        }
        let mut cells = [0u8; 16];
        let n = h.encode(150, &mut cells);
        let mut total = 0;
        for_each_run(h.high(), &cells[..n], |hi, lo, st| {
            assert_eq!(st, 0);
            total += hi - lo + 1;
        });
        assert_eq!(total, 150);
        assert_eq!(n, 3);
    }
}
