//! Ack Vector (RFC 4340 §11.4): a run-length encoding of the receive state
//! of recent packets, walking backwards from the packet's Acknowledgement
//! Number.
//!
//! Each byte ("cell") is `State (2 bits) | Run Length (6 bits)`: the cell
//! covers `run_length + 1` consecutive sequence numbers, all in `State`.
//! The first cell starts at the Acknowledgement Number and covers
//! decreasing sequence numbers (§11.4). Option 38 carries ECN Nonce 0,
//! option 39 ECN Nonce 1 (§11.4, §12.2).

use super::WireError;

/// Receive state of one packet (§11.4, Table 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AckState {
    /// 0: received (not ECN-marked).
    Received = 0,
    /// 1: received ECN-marked (Congestion Experienced).
    ReceivedEcnMarked = 1,
    /// 2: reserved; §11.4 says receivers treat it like "not received".
    Reserved = 2,
    /// 3: not yet received.
    NotReceived = 3,
}

impl AckState {
    pub fn from_bits(v: u8) -> AckState {
        match v & 3 {
            0 => AckState::Received,
            1 => AckState::ReceivedEcnMarked,
            2 => AckState::Reserved,
            _ => AckState::NotReceived,
        }
    }

    /// Whether the packet counts as received (states 0 and 1).
    pub fn is_received(self) -> bool {
        matches!(self, AckState::Received | AckState::ReceivedEcnMarked)
    }
}

/// Largest number of cells in one Ack Vector option (option length byte is
/// at most 255, minus type and length).
pub const MAX_CELLS: usize = 253;

/// An owned Ack Vector option: the ECN nonce (which of options 38/39) and
/// the raw run-length cells.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AckVector {
    /// ECN Nonce sum bit: 0 = option 38, 1 = option 39.
    pub nonce: u8,
    /// Encoded cells, at most [`MAX_CELLS`], never empty on the wire
    /// (§11.4: length ≥ 3).
    pub cells: Vec<u8>,
}

/// A borrowed Ack Vector, as read from a [`super::Packet`] without
/// allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckVectorRef<'a> {
    pub nonce: u8,
    pub cells: &'a [u8],
}

impl AckVector {
    pub fn as_ref(&self) -> AckVectorRef<'_> {
        AckVectorRef {
            nonce: self.nonce,
            cells: &self.cells,
        }
    }

    /// Walk the vector: `(seq, state)` from `ack` backwards (mod 2^48).
    pub fn iter(&self, ack: u64) -> AckVectorIter<'_> {
        self.as_ref().iter(ack)
    }
}

impl<'a> AckVectorRef<'a> {
    /// Walk the vector: `(seq, state)` from `ack` backwards (mod 2^48).
    pub fn iter(&self, ack: u64) -> AckVectorIter<'a> {
        AckVectorIter {
            cells: self.cells,
            idx: 0,
            left_in_run: 0,
            seq: ack & super::SEQ_MASK,
            state: AckState::NotReceived,
        }
    }

    /// Iterate over runs `(newest_seq, len, state)` rather than packets —
    /// cheaper for CCID2's pipe bookkeeping.
    pub fn runs(&self, ack: u64) -> impl Iterator<Item = (u64, u32, AckState)> + 'a {
        let mut seq = ack & super::SEQ_MASK;
        self.cells.iter().map(move |&c| {
            let len = u32::from(c & 0x3f) + 1;
            let start = seq;
            seq = seq.wrapping_sub(u64::from(len)) & super::SEQ_MASK;
            (start, len, AckState::from_bits(c >> 6))
        })
    }

    /// Total number of sequence numbers covered.
    pub fn covered(&self) -> u64 {
        self.cells.iter().map(|&c| u64::from(c & 0x3f) + 1).sum()
    }

    pub fn to_owned(&self) -> AckVector {
        AckVector {
            nonce: self.nonce,
            cells: self.cells.to_vec(),
        }
    }
}

/// Iterator over `(seq, state)` of an Ack Vector, newest first.
#[derive(Clone, Debug)]
pub struct AckVectorIter<'a> {
    cells: &'a [u8],
    idx: usize,
    left_in_run: u32,
    seq: u64,
    state: AckState,
}

impl Iterator for AckVectorIter<'_> {
    type Item = (u64, AckState);

    fn next(&mut self) -> Option<(u64, AckState)> {
        if self.left_in_run == 0 {
            let c = *self.cells.get(self.idx)?;
            self.idx += 1;
            self.left_in_run = u32::from(c & 0x3f) + 1;
            self.state = AckState::from_bits(c >> 6);
        }
        self.left_in_run -= 1;
        let out = (self.seq, self.state);
        self.seq = self.seq.wrapping_sub(1) & super::SEQ_MASK;
        Some(out)
    }
}

/// Builds an Ack Vector from per-packet receive states, newest first.
///
/// Push the state of the Acknowledgement Number first, then of each older
/// sequence number in turn; equal neighbouring states merge into runs of up
/// to 64 (§11.4). The builder never allocates beyond [`MAX_CELLS`] cells:
/// once full, [`AckVectorBuilder::push`] returns `false` and the vector
/// covers only the newest packets pushed so far (the receiver then simply
/// learns about fewer packets, which §11.4.2 allows).
#[derive(Clone, Debug, Default)]
pub struct AckVectorBuilder {
    cells: Vec<u8>,
    max_cells: usize,
}

impl AckVectorBuilder {
    /// `max_cells` is clamped to 1..=[`MAX_CELLS`]; use it to bound the
    /// option so the header fits the MSS.
    pub fn new(max_cells: usize) -> Self {
        Self::reusing(Vec::new(), max_cells)
    }

    /// [`AckVectorBuilder::new`] building into `cells` (cleared first): a
    /// sender recycles the previous vector's buffer.
    pub fn reusing(mut cells: Vec<u8>, max_cells: usize) -> Self {
        cells.clear();
        AckVectorBuilder {
            cells,
            max_cells: max_cells.clamp(1, MAX_CELLS),
        }
    }

    /// Append `count` packets in `state` (older than everything pushed so
    /// far). Returns `false` if not all of them fit.
    pub fn push_run(&mut self, state: AckState, mut count: u64) -> bool {
        while count > 0 {
            if let Some(last) = self.cells.last_mut() {
                if AckState::from_bits(*last >> 6) == state && (*last & 0x3f) < 63 {
                    let room = u64::from(63 - (*last & 0x3f));
                    let add = room.min(count);
                    // `add` ≤ 63 by construction.
                    *last += add as u8;
                    count -= add;
                    continue;
                }
            }
            if self.cells.len() >= self.max_cells {
                return false;
            }
            self.cells.push((state as u8) << 6);
            count -= 1;
        }
        true
    }

    /// Append one packet's state (older than everything pushed so far).
    pub fn push(&mut self, state: AckState) -> bool {
        self.push_run(state, 1)
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    pub fn finish(self, nonce: u8) -> AckVector {
        AckVector {
            nonce: nonce & 1,
            cells: self.cells,
        }
    }
}

/// Validate the body of an Ack Vector option.
pub(crate) fn parse_body(kind: u8, data: &[u8]) -> Result<AckVectorRef<'_>, WireError> {
    if data.is_empty() {
        return Err(WireError::BadOptionLength { kind });
    }
    // Option 38 carries ECN Nonce Sum 0, option 39 Nonce Sum 1 (RFC 4340
    // §11.4); the low bit says which (no subtraction that could wrap).
    Ok(AckVectorRef {
        nonce: kind & 1,
        cells: data,
    })
}
