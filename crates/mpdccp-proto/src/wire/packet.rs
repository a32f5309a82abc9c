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

use super::option::{self, DccpOption, OptionIter};
pub use super::packet_type::PacketType;
use super::{checksum, AckVectorRef, IpPair, WireError, WireProfile, MAX_HEADER_LEN, SEQ_MASK};

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
/// header uses X=0; see [`DccpRepr::short_seq`]).
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

/// The owned, validated form of a DCCP header and its options.
///
/// The payload is not part of the Repr: `parse` reports where it starts
/// ([`DccpRepr::parse`] returns the header length), and `emit` takes it as a
/// separate slice so the caller can build packets without copying twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DccpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Sequence number: 48 bits, or 24 bits when `short_seq`.
    pub seq: u64,
    pub kind: DccpKind,
    /// CCVal (§5.1), 4 bits, used by the half-connection's CCID.
    pub ccval: u8,
    /// Checksum Coverage (§9.2), 4 bits: 0 = whole packet, n = header plus
    /// the first (n-1)*4 payload bytes.
    pub cscov: u8,
    /// X=0: 24-bit sequence and acknowledgement numbers (§5.1). Parsed on
    /// every type; emit allows it only for Data, Ack and DataAck.
    pub short_seq: bool,
    /// Options in wire order (Padding dropped on parse; see [`option`]).
    pub options: Vec<DccpOption>,
    /// The layout option 46 is read and written in: RFC 9897 by default,
    /// a reference kernel's for tests and fuzzing that speak to one.
    pub profile: WireProfile,
}

impl Default for DccpRepr {
    fn default() -> Self {
        DccpRepr {
            src_port: 0,
            dst_port: 0,
            seq: 0,
            kind: DccpKind::Data,
            ccval: 0,
            cscov: 0,
            short_seq: false,
            options: Vec::new(),
            profile: WireProfile::Rfc9897,
        }
    }
}

/// Byte ranges of the fixed header fields (§5.1).
mod field {
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
        if self.short_seq() {
            field::HEADER_SHORT
        } else {
            field::HEADER_LONG
        }
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
    /// by `DccpRepr::emit`).
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

fn write_be(b: &mut [u8], v: u64) {
    let n = b.len();
    b.copy_from_slice(&v.to_be_bytes()[8 - n..]);
}

impl DccpRepr {
    pub fn packet_type(&self) -> PacketType {
        self.kind.packet_type()
    }

    pub fn ack(&self) -> Option<u64> {
        self.kind.ack()
    }

    /// The first MP_SEQ among the options.
    pub fn mp_seq(&self) -> Option<u64> {
        self.options.iter().find_map(|o| match o {
            DccpOption::Multipath(super::MpOption::Seq(s)) => Some(*s),
            _ => None,
        })
    }

    /// The first Ack Vector among the options.
    pub fn ack_vector(&self) -> Option<&super::AckVector> {
        self.options.iter().find_map(|o| match o {
            DccpOption::AckVector(av) => Some(av),
            _ => None,
        })
    }

    /// Parse untrusted bytes. `addrs` = `Some((src_ip, dst_ip))` verifies
    /// the checksum over that pseudo-header; `None` skips it (e.g. when a
    /// lower layer already did). Returns the Repr and the header length
    /// (the payload is `bytes[header_len..]`). Option 46 is read in the
    /// RFC 9897 layout.
    pub fn parse(bytes: &[u8], addrs: Option<IpPair>) -> Result<(DccpRepr, usize), WireError> {
        Self::parse_in(bytes, addrs, WireProfile::Rfc9897)
    }

    /// [`DccpRepr::parse`] with option 46 read in `profile`'s layout (the
    /// Repr keeps the profile, so `emit` writes the same layout back).
    pub fn parse_in(
        bytes: &[u8],
        addrs: Option<IpPair>,
        profile: WireProfile,
    ) -> Result<(DccpRepr, usize), WireError> {
        let mut ignored = 0;
        Self::parse_with_stats(bytes, addrs, &mut ignored, profile)
    }

    /// As [`DccpRepr::parse_in`], adding the number of options ignored
    /// under the RFC's per-type rules to `*options_ignored`.
    pub fn parse_with_stats(
        bytes: &[u8],
        addrs: Option<IpPair>,
        options_ignored: &mut u64,
        profile: WireProfile,
    ) -> Result<(DccpRepr, usize), WireError> {
        let p = Packet::new_checked(bytes)?;
        if let Some(a) = addrs {
            p.verify_checksum(a)?;
        } else {
            // Still enforce §9.2's coverage rule: it is structural.
            checksum::coverage_len(p.header_len(), bytes.len(), p.cscov())?;
        }
        Self::from_packet(&p, options_ignored, profile).map(|r| (r, p.header_len()))
    }

    /// Build the Repr from a checked packet (no checksum verification),
    /// option 46 in `profile`'s layout.
    pub fn from_packet<T: AsRef<[u8]>>(
        p: &Packet<T>,
        options_ignored: &mut u64,
        profile: WireProfile,
    ) -> Result<DccpRepr, WireError> {
        let ty = p.packet_type();
        let kind = p.kind();
        let options = option::parse_options(p.options_area(), ty, options_ignored, profile)?;
        Ok(DccpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            kind,
            ccval: p.ccval(),
            cscov: p.cscov(),
            short_seq: p.short_seq(),
            options,
            profile,
        })
    }

    /// Header length in bytes (generic header, sub-header, padded options).
    pub fn header_len(&self) -> usize {
        let g = if self.short_seq {
            field::HEADER_SHORT
        } else {
            field::HEADER_LONG
        };
        g + self.packet_type().subheader_len(self.short_seq)
            + option::options_len(&self.options, self.profile)
    }

    /// Bytes `emit` writes for a payload of `payload_len` bytes.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Check the Repr can be encoded: field widths, X=0 only on
    /// Data/Ack/DataAck, header ≤ 1020 bytes.
    pub fn validate(&self) -> Result<(), WireError> {
        let seq_max = if self.short_seq {
            (1 << 24) - 1
        } else {
            SEQ_MASK
        };
        if self.seq > seq_max
            || self.ack().is_some_and(|a| a > seq_max)
            || self.ccval > 15
            || self.cscov > 15
        {
            return Err(WireError::FieldOutOfRange);
        }
        if self.short_seq && !self.packet_type().allows_short_seq() {
            return Err(WireError::ShortSeqNotAllowed);
        }
        if self.header_len() > MAX_HEADER_LEN {
            return Err(WireError::OptionsTooLong);
        }
        Ok(())
    }

    /// Write header, options and `payload` into `buf` (which must hold
    /// [`DccpRepr::buffer_len`] bytes) and, with `addrs`, the checksum.
    /// Returns the number of bytes written.
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload: &[u8],
        addrs: Option<IpPair>,
    ) -> Result<usize, WireError> {
        self.validate()?;
        let hl = self.header_len();
        let total = hl + payload.len();
        let out = buf.get_mut(..total).ok_or(WireError::BufferTooSmall)?;
        checksum::coverage_len(hl, total, self.cscov)?;
        out[..hl].fill(0);
        let ty = self.packet_type();
        let mut p = Packet::new_unchecked(&mut *out);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        // hl ≤ 1020 (validate) so hl / 4 ≤ 255.
        p.set_data_offset((hl / 4) as u8);
        p.set_ccval_cscov(self.ccval, self.cscov);
        let b = p.into_inner();
        b[field::TYPE_X] = ((ty as u8) << 1) | u8::from(!self.short_seq);
        let mut off = if self.short_seq {
            write_be(&mut b[field::SEQ_SHORT], self.seq);
            field::HEADER_SHORT
        } else {
            write_be(&mut b[field::SEQ_LONG], self.seq);
            field::HEADER_LONG
        };
        if let Some(ack) = self.ack() {
            if self.short_seq {
                write_be(&mut b[off + 1..off + 4], ack);
                off += 4;
            } else {
                write_be(&mut b[off + 2..off + 8], ack);
                off += 8;
            }
        }
        match self.kind {
            DccpKind::Request { service_code } | DccpKind::Response { service_code, .. } => {
                b[off..off + 4].copy_from_slice(&service_code.to_be_bytes());
                off += 4;
            }
            DccpKind::Reset { code, data, .. } => {
                b[off] = code.to_u8();
                b[off + 1..off + 4].copy_from_slice(&data);
                off += 4;
            }
            _ => {}
        }
        let n = option::emit_options(&self.options, &mut b[off..hl], self.profile)?;
        debug_assert_eq!(off + n, hl);
        b[hl..].copy_from_slice(payload);
        if let Some(a) = addrs {
            Packet::new_unchecked(&mut *b).fill_checksum(a)?;
        }
        Ok(total)
    }
}
