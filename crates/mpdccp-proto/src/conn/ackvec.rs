//! Receive history and the Ack Vector (RFC 4340 §11.4) as CCID2 uses it
//! (RFC 4341 §6.1): the HC-receiver records which sequence numbers arrived
//! and reports runs of (state, length) going down from the acknowledgement
//! number; the HC-sender walks those runs to learn what was delivered.

use crate::wire::{AckState, AckVector, AckVectorBuilder, AckVectorRef};

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

    /// Forgets everything above `seq`, which becomes the greatest number
    /// received: the peer resynchronised us to it (a SyncAck answering our
    /// Sync, RFC 4340 §7.5.4) and numbers above were never its own.
    pub fn rewind(&mut self, seq: u64) {
        if seq >= self.high {
            return;
        }
        if self.high - seq >= HISTORY {
            self.bits = [0; WORDS];
        } else {
            for s in seq + 1..=self.high {
                self.clear(s);
            }
        }
        self.high = seq.max(self.low);
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

    /// Length of the run of numbers `s, s-1, ...` whose state is `state`,
    /// capped at `limit`, counted a word at a time. The caller guarantees
    /// `s - limit + 1 ..= s` lies in the window, where `contains` is the bit.
    fn run_below(&self, s: u64, state: bool, limit: u64) -> u64 {
        let i = (s % HISTORY) as usize;
        let (mut w, mut b) = (i / 64, (i % 64) as u32);
        let mut run = 0u64;
        while run < limit {
            let x = if state { self.bits[w] } else { !self.bits[w] };
            // Bits b, b-1, ..., 0 of the word, moved to the top.
            let n = (x << (63 - b)).leading_ones().min(b + 1) as u64;
            run += n;
            if n < b as u64 + 1 {
                break;
            }
            // Below bit 0 the ring continues at the top of the previous word.
            w = if w == 0 { WORDS - 1 } else { w - 1 };
            b = 63;
        }
        run.min(limit)
    }

    /// The Ack Vector for acknowledgement number `high()`, covering at most
    /// `max_cover` numbers in at most `max_cells` cells (built with
    /// [`AckVectorBuilder`]; older numbers are cut off when it is full).
    pub fn encode(&self, max_cover: u64, max_cells: usize) -> AckVector {
        self.encode_in(max_cover, max_cells, Vec::new())
    }

    /// [`RecvHistory::encode`] with the cells in `buf` (a recycled buffer).
    pub fn encode_in(&self, max_cover: u64, max_cells: usize, buf: Vec<u8>) -> AckVector {
        let cover = max_cover.min(HISTORY).min(self.high - self.low + 1).max(1);
        let mut b = AckVectorBuilder::reusing(buf, max_cells);
        let end = self.high + 1 - cover;
        let mut s = self.high;
        loop {
            let state = self.contains(s);
            let run = self.run_below(s, state, s - end + 1);
            let st = if state {
                AckState::Received
            } else {
                AckState::NotReceived
            };
            if !b.push_run(st, run) || s < end + run {
                break;
            }
            s -= run;
        }
        b.finish(0)
    }
}

/// Walks Ack Vector `cells` for the (unwrapped) acknowledgement number
/// `ack`, calling `f(high, low, received)` for each run (inclusive bounds,
/// newest first), using `wire`'s run decoder. Runs below zero are cut off.
pub fn for_each_run(ack: u64, cells: &[u8], mut f: impl FnMut(u64, u64, bool)) {
    let v = AckVectorRef { nonce: 0, cells };
    let mut s = ack;
    for (_, len, state) in v.runs(ack) {
        let low = s.saturating_sub(len as u64 - 1);
        f(s, low, state.is_received());
        if low == 0 {
            return;
        }
        s = low - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{for_each_run, RecvHistory, HISTORY};

    #[test]
    fn word_run_counting_matches_a_bit_by_bit_scan() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let isr = rng.gen_range(0..5000u64);
            let mut h = RecvHistory::new(isr);
            let mut s = isr;
            for _ in 0..rng.gen_range(1..3000) {
                s += rng.gen_range(1..4);
                if rng.gen_bool(0.7) {
                    h.record(s);
                }
            }
            let cover = HISTORY.min(h.high - h.low + 1);
            let end = h.high + 1 - cover;
            let mut q = h.high;
            loop {
                let state = h.contains(q);
                let mut naive = 1u64;
                while q >= end + naive && h.contains(q - naive) == state {
                    naive += 1;
                }
                assert_eq!(h.run_below(q, state, q - end + 1), naive, "at {q}");
                if q < end + naive {
                    break;
                }
                q -= naive;
            }
        }
    }

    #[test]
    fn encodes_runs_and_decodes_them_back() {
        let mut h = RecvHistory::new(100);
        for s in [101, 102, 105, 106, 107, 110] {
            assert!(h.record(s));
        }
        assert!(!h.record(105), "duplicate");
        let av = h.encode(64, 16);
        let mut got = Vec::new();
        for_each_run(h.high(), &av.cells, |hi, lo, st| got.push((hi, lo, st)));
        assert_eq!(
            got,
            vec![
                (110, 110, true),
                (109, 108, false),
                (107, 105, true),
                (104, 103, false),
                (102, 100, true)
            ]
        );
    }

    #[test]
    fn long_runs_split_at_64() {
        let mut h = RecvHistory::new(0);
        for s in 1..200 {
            h.record(s);
        }
        let av = h.encode(150, 16);
        let mut total = 0;
        for_each_run(h.high(), &av.cells, |hi, lo, st| {
            assert!(st);
            total += hi - lo + 1;
        });
        assert_eq!(total, 150);
        assert_eq!(av.cells.len(), 3);
    }
}
