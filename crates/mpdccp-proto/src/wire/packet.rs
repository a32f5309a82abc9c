//! The DCCP generic header and the per-type sub-headers (RFC 4340 §5.1–§5.6).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Source Port          |           Dest Port           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Data Offset  | CCVal | CsCov |           Checksum            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     |       |X|               |                               .
//! | Res | Type  |=|   Reserved    |  Sequence Number (high bits)  .
//! |     |       |1|               |                               .
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! .                  Sequence Number (low bits)                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! With X=0 the header is 12 bytes and the sequence number 24 bits (bytes
//! 9..12). The Acknowledgement sub-header follows for every type except
//! Request and Data (§5.3): 8 bytes (16 reserved bits + 48-bit ack) with
//! X=1, 4 bytes (8 reserved bits + 24-bit ack) with X=0. Request carries a
//! 32-bit Service Code (§5.2), Response an ack sub-header then a Service
//! Code (§5.3), Reset an ack sub-header then Reset Code and Data 1–3 (§5.6).

use super::option::{self, OptionIter};
pub use super::packet_type::PacketType;
use super::{checksum, AckVectorRef, IpPair, WireError};

/// DCCP-Reset codes (RFC 4340 §5.6 Table 2, plus 13 from RFC 9897 for
/// MP_FAST_CLOSE). Reserved and CCID-specific codes are kept as `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResetCode {
    Unspecified,
    Closed,
    Aborted,
    NoConnection,
    PacketError,
    OptionError,
    MandatoryError,
    ConnectionRefused,
    BadServiceCode,
    TooBusy,
    BadInitCookie,
    AggressionPenalty,
    /// RFC 9897 §3.2.3: sent with MP_FAST_CLOSE on every subflow to close
    /// the whole MP-DCCP connection abruptly.
    MpFastClose,
    /// Any other code (12 and 14–127 reserved, 128–255 CCID-specific).
    Other(u8),
}

impl ResetCode {
    pub fn from_u8(v: u8) -> ResetCode {
        match v {
            0 => ResetCode::Unspecified,
            1 => ResetCode::Closed,
            2 => ResetCode::Aborted,
            3 => ResetCode::NoConnection,
            4 => ResetCode::PacketError,
            5 => ResetCode::OptionError,
            6 => ResetCode::MandatoryError,
            7 => ResetCode::ConnectionRefused,
            8 => ResetCode::BadServiceCode,
            9 => ResetCode::TooBusy,
            10 => ResetCode::BadInitCookie,
            11 => ResetCode::AggressionPenalty,
            13 => ResetCode::MpFastClose,
            other => ResetCode::Other(other),
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            ResetCode::Unspecified => 0,
            ResetCode::Closed => 1,
            ResetCode::Aborted => 2,
            ResetCode::NoConnection => 3,
            ResetCode::PacketError => 4,
            ResetCode::OptionError => 5,
            ResetCode::MandatoryError => 6,
            ResetCode::ConnectionRefused => 7,
            ResetCode::BadServiceCode => 8,
            ResetCode::TooBusy => 9,
            ResetCode::BadInitCookie => 10,
            ResetCode::AggressionPenalty => 11,
            ResetCode::MpFastClose => 13,
            ResetCode::Other(v) => v,
        }
    }
}

/// The packet type together with its type-specific sub-header fields
/// (§5.2–§5.6). Acknowledgement numbers are 48-bit (or 24-bit when the
/// header uses X=0; see [`super::Header::short_seq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DccpKind {
    /// §5.2: Service Code names the application-level service.
    Request {
        service_code: u32,
    },
    /// §5.3: acknowledges the Request and echoes its Service Code.
    Response {
        ack: u64,
        service_code: u32,
    },
    Data,
    Ack {
        ack: u64,
    },
    DataAck {
        ack: u64,
    },
    CloseReq {
        ack: u64,
    },
    Close {
        ack: u64,
    },
    /// §5.6: Reset Code plus three code-specific data bytes.
    Reset {
        ack: u64,
        code: ResetCode,
        data: [u8; 3],
    },
    /// §5.7: Sync's ack is the GSR; SyncAck acknowledges the Sync.
    Sync {
        ack: u64,
    },
    SyncAck {
        ack: u64,
    },
}

impl DccpKind {
    pub fn packet_type(&self) -> PacketType {
        match self {
            DccpKind::Request { .. } => PacketType::Request,
            DccpKind::Response { .. } => PacketType::Response,
            DccpKind::Data => PacketType::Data,
            DccpKind::Ack { .. } => PacketType::Ack,
            DccpKind::DataAck { .. } => PacketType::DataAck,
            DccpKind::CloseReq { .. } => PacketType::CloseReq,
            DccpKind::Close { .. } => PacketType::Close,
            DccpKind::Reset { .. } => PacketType::Reset,
            DccpKind::Sync { .. } => PacketType::Sync,
            DccpKind::SyncAck { .. } => PacketType::SyncAck,
        }
    }

    /// The Acknowledgement Number, for types that carry one.
    pub fn ack(&self) -> Option<u64> {
        match *self {
            DccpKind::Request { .. } | DccpKind::Data => None,
            DccpKind::Response { ack, .. }
            | DccpKind::Ack { ack }
            | DccpKind::DataAck { ack }
            | DccpKind::CloseReq { ack }
            | DccpKind::Close { ack }
            | DccpKind::Reset { ack, .. }
            | DccpKind::Sync { ack }
            | DccpKind::SyncAck { ack } => Some(ack),
        }
    }
}

/// Byte ranges of the fixed header fields (§5.1).
pub(super) mod field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const DATA_OFFSET: usize = 4;
    pub const CCVAL_CSCOV: usize = 5;
    pub const CHECKSUM: Range<usize> = 6..8;
    /// Res(3) | Type(4) | X(1).
    pub const TYPE_X: usize = 8;
    /// X=1: Reserved(8) then 48-bit sequence number.
    pub const SEQ_LONG: Range<usize> = 10..16;
    /// X=0: 24-bit sequence number.
    pub const SEQ_SHORT: Range<usize> = 9..12;
    pub const HEADER_LONG: usize = 16;
    pub const HEADER_SHORT: usize = 12;
}

/// A read/write view of a DCCP packet in a buffer (smoltcp style).
///
/// [`Packet::new_checked`] validates everything the accessors rely on
/// (length, known type, X rules, Data Offset), so accessors never panic on a
/// checked packet. [`Packet::new_unchecked`] is for buffers being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap untrusted bytes; errors on anything the accessors cannot read.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// §5.1 structural checks: the generic header fits, the type is not
    /// reserved, X=0 only where allowed, Data Offset covers the generic
    /// header and sub-header and does not point past the end.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        if b.len() < field::HEADER_SHORT {
            return Err(WireError::Truncated);
        }
        let ty = PacketType::from_u8((b[field::TYPE_X] >> 1) & 0x0f)?;
        let short = b[field::TYPE_X] & 1 == 0;
        if short && !ty.allows_short_seq() {
            return Err(WireError::ShortSeqNotAllowed);
        }
        let fixed = if short {
            field::HEADER_SHORT
        } else {
            field::HEADER_LONG
        } + ty.subheader_len(short);
        if b.len() < fixed {
            return Err(WireError::Truncated);
        }
        let hl = usize::from(b[field::DATA_OFFSET]) * 4;
        if hl < fixed || hl > b.len() {
            return Err(WireError::BadDataOffset);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn src_port(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::SRC_PORT.start], b[field::SRC_PORT.start + 1]])
    }

    pub fn dst_port(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::DST_PORT.start], b[field::DST_PORT.start + 1]])
    }

    /// Header length in bytes (Data Offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET]) * 4
    }

    pub fn ccval(&self) -> u8 {
        self.buffer.as_ref()[field::CCVAL_CSCOV] >> 4
    }

    pub fn cscov(&self) -> u8 {
        self.buffer.as_ref()[field::CCVAL_CSCOV] & 0x0f
    }

    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::CHECKSUM.start], b[field::CHECKSUM.start + 1]])
    }

    /// The packet type. Meaningful on checked packets (`new_checked`
    /// rejects reserved types); an unchecked reserved type reads as Data
    /// rather than panicking.
    pub fn packet_type(&self) -> PacketType {
        PacketType::from_u8((self.buffer.as_ref()[field::TYPE_X] >> 1) & 0x0f)
            .unwrap_or(PacketType::Data)
    }

    /// X=0: 24-bit sequence numbers.
    pub fn short_seq(&self) -> bool {
        self.buffer.as_ref()[field::TYPE_X] & 1 == 0
    }

    fn generic_len(&self) -> usize {
        generic_len(self.short_seq())
    }

    /// Sequence number (48 bits, or 24 when X=0).
    pub fn seq(&self) -> u64 {
        let b = self.buffer.as_ref();
        if self.short_seq() {
            read_be(&b[field::SEQ_SHORT])
        } else {
            read_be(&b[field::SEQ_LONG])
        }
    }

    /// Acknowledgement Number (§5.3), for types that have one.
    pub fn ack(&self) -> Option<u64> {
        if !self.packet_type().has_ack() {
            return None;
        }
        let b = self.buffer.as_ref();
        let g = self.generic_len();
        Some(if self.short_seq() {
            // Reserved(8) | Ack(24)
            read_be(&b[g + 1..g + 4])
        } else {
            // Reserved(16) | Ack(48)
            read_be(&b[g + 2..g + 8])
        })
    }

    fn ack_len(&self) -> usize {
        if self.short_seq() {
            4
        } else {
            8
        }
    }

    /// Service Code of a Request (§5.2) or Response (§5.3).
    pub fn service_code(&self) -> Option<u32> {
        let b = self.buffer.as_ref();
        let g = self.generic_len();
        let at = match self.packet_type() {
            PacketType::Request => g,
            PacketType::Response => g + self.ack_len(),
            _ => return None,
        };
        Some(read_be(&b[at..at + 4]) as u32)
    }

    /// Reset Code and Data 1–3 of a Reset (§5.6).
    pub fn reset(&self) -> Option<(ResetCode, [u8; 3])> {
        if self.packet_type() != PacketType::Reset {
            return None;
        }
        let b = self.buffer.as_ref();
        let at = self.generic_len() + self.ack_len();
        Some((ResetCode::from_u8(b[at]), [b[at + 1], b[at + 2], b[at + 3]]))
    }

    /// Type and sub-header as a [`DccpKind`], without touching options:
    /// the allocation-free counterpart of `DccpRepr::kind`.
    pub fn kind(&self) -> DccpKind {
        // Each `unwrap_or` below is unreachable for the type matched: the
        // accessor returns `Some` exactly for the types that carry it.
        let ack = self.ack().unwrap_or(0);
        match self.packet_type() {
            PacketType::Request => DccpKind::Request {
                service_code: self.service_code().unwrap_or(0),
            },
            PacketType::Response => DccpKind::Response {
                ack,
                service_code: self.service_code().unwrap_or(0),
            },
            PacketType::Data => DccpKind::Data,
            PacketType::Ack => DccpKind::Ack { ack },
            PacketType::DataAck => DccpKind::DataAck { ack },
            PacketType::CloseReq => DccpKind::CloseReq { ack },
            PacketType::Close => DccpKind::Close { ack },
            PacketType::Reset => {
                let (code, data) = self.reset().unwrap_or((ResetCode::Unspecified, [0; 3]));
                DccpKind::Reset { ack, code, data }
            }
            PacketType::Sync => DccpKind::Sync { ack },
            PacketType::SyncAck => DccpKind::SyncAck { ack },
        }
    }

    /// The options area (between the sub-header and Data Offset).
    pub fn options_area(&self) -> &[u8] {
        let start = self.generic_len() + self.packet_type().subheader_len(self.short_seq());
        let end = self.header_len();
        self.buffer.as_ref().get(start..end).unwrap_or(&[])
    }

    /// Lazy, allocation-free iteration over the options.
    pub fn options(&self) -> OptionIter<'_> {
        OptionIter::new(self.options_area())
    }

    /// Application data after the header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(self.header_len()..).unwrap_or(&[])
    }

    /// The first MP_SEQ in the packet, without allocating. Malformed
    /// options end the search (the full parse reports them).
    pub fn mp_seq(&self) -> Option<u64> {
        self.options()
            .map_while(Result::ok)
            .find_map(|o| o.mp_seq())
    }

    /// The first Ack Vector (option 38 or 39), borrowed, without allocating.
    pub fn ack_vector(&self) -> Option<AckVectorRef<'_>> {
        self.options().map_while(Result::ok).find_map(|o| {
            if o.kind == option::kind::ACK_VECTOR_0 || o.kind == option::kind::ACK_VECTOR_1 {
                super::ackvec::parse_body(o.kind, o.data).ok()
            } else {
                None
            }
        })
    }

    /// Verify the checksum against the pseudo-header (§9). Errors with
    /// [`WireError::BadChecksumCoverage`] if CsCov exceeds the packet.
    pub fn verify_checksum(&self, addrs: IpPair) -> Result<(), WireError> {
        self.verify_checksum_proto(addrs, checksum::IPPROTO_DCCP)
    }

    /// As [`Packet::verify_checksum`] with an explicit pseudo-header
    /// protocol number (RFC 6773 uses the same rule; see `udp_encap`).
    pub fn verify_checksum_proto(&self, addrs: IpPair, proto: u8) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        let covered = checksum::coverage_len(self.header_len(), b.len(), self.cscov())?;
        if checksum::compute(addrs, b, covered, proto) != 0 {
            return Err(WireError::BadChecksum);
        }
        Ok(())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Data Offset in 32-bit words.
    pub fn set_data_offset(&mut self, words: u8) {
        self.buffer.as_mut()[field::DATA_OFFSET] = words;
    }
    pub fn set_ccval_cscov(&mut self, ccval: u8, cscov: u8) {
        self.buffer.as_mut()[field::CCVAL_CSCOV] = (ccval << 4) | (cscov & 0x0f);
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Compute and store the checksum (§9). The coverage must fit (checked
    /// by `DccpRepr::emit` and the builder).
    pub fn fill_checksum(&mut self, addrs: IpPair) -> Result<(), WireError> {
        self.fill_checksum_proto(addrs, checksum::IPPROTO_DCCP)
    }

    pub fn fill_checksum_proto(&mut self, addrs: IpPair, proto: u8) -> Result<(), WireError> {
        self.set_checksum(0);
        let hl = self.header_len();
        let cs = self.cscov();
        let b = self.buffer.as_ref();
        let covered = checksum::coverage_len(hl, b.len(), cs)?;
        let c = checksum::compute(addrs, b, covered, proto);
        self.set_checksum(c);
        Ok(())
    }
}

fn read_be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x))
}

/// The low `b.len()` bytes of `v`, big-endian. Inlined: at a call with a
/// fixed-width field the copy is a few moves rather than a memcpy call (one
/// per sequence and acknowledgement number of every packet built).
#[inline]
pub(super) fn write_be(b: &mut [u8], v: u64) {
    let n = b.len();
    b.copy_from_slice(&v.to_be_bytes()[8 - n..]);
}

/// Length of the generic header: 12 bytes with X=0, 16 with X=1 (§5.1).
pub fn generic_len(short_seq: bool) -> usize {
    if short_seq {
        field::HEADER_SHORT
    } else {
        field::HEADER_LONG
    }
}
