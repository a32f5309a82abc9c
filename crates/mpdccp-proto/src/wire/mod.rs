//! Wire format: DCCP generic header and options (RFC 4340), the Multipath
//! option 46 and its sub-options (RFC 9897), DCCP-in-UDP framing (RFC 6773),
//! the U-DCCP header conversion (draft-amend-tsvwg-dccp-udp-header-conversion-01)
//! and a pcap writer for debugging.
//!
//! # Contract
//!
//! * Bytes from the network are hostile. Every parse path returns a
//!   [`WireError`]; none panics, none allocates more than a small constant
//!   factor of the input length, none loops more than the input length.
//! * smoltcp style: [`Packet`] is a zero-copy view over a buffer
//!   (`Packet::new_checked` validates lengths once, accessors then index
//!   freely); [`DccpRepr`] is the owned, validated high-level form with
//!   `parse` / `emit` / `buffer_len`. Every packet is written by one
//!   [`PacketBuilder`] (`builder.rs`), for `DccpRepr` and the
//!   connection's compact `Segment` alike.
//! * The hot Data/Ack path need not allocate: [`Packet::options`] iterates
//!   options lazily as [`RawOption`]s, and [`Packet::mp_seq`] /
//!   [`Packet::ack_vector`] read the two fields the data path needs without
//!   building a `DccpRepr`.
//! * `parse(emit(x)) == x` for every representable `x` (property-tested in
//!   `tests/proto/wire/props.rs`). Emission is canonical (shortest encodings,
//!   options padded to a 32-bit boundary with Padding), so `emit(parse(b))`
//!   need not equal `b`.
//!
//! Module map: [`packet`] (generic header, §5), `builder` (transmit),
//! `repr` ([`DccpRepr`]), [`option`] (§5.8, §6),
//! [`ackvec`] (§11.4), [`mp`] (RFC 9897 §3), [`checksum`] (§9), [`seq`]
//! (§7.1, §7.6), [`udp_encap`] (RFC 6773), [`udccp`] (U-DCCP), [`pcap`], [`capture`] (reading
//! pcap/pcapng back), [`profile`] and
//! [`profile_keys`] (the reference kernel's layouts and derivations).

pub mod ackvec;
mod builder;
pub mod capture;
pub mod checksum;
pub mod mp;
mod mp_codec;
pub mod option;
pub mod packet;
pub mod packet_type;
pub mod pcap;
pub mod profile;
pub mod profile_keys;
mod repr;
pub mod seq;
pub mod udccp;
pub mod udp_encap;

pub use ackvec::{AckState, AckVector, AckVectorBuilder, AckVectorIter, AckVectorRef};
pub use builder::{Finish, Header, PacketBuilder};
pub use mp::{KeyType, MpKey, MpOption, RttType};
pub use option::{DccpOption, FeatureNum, FeatureValue, OptionIter, RawOption};
pub use packet::{DccpKind, Packet, PacketType, ResetCode};
pub use profile::WireProfile;
pub use repr::DccpRepr;

use std::fmt;
use std::net::IpAddr;

/// Why a packet (or one option in it) was rejected. Each variant maps to a
/// [`WireStats`] counter, and where RFC 4340 prescribes a Reset the
/// [`WireError::reset_code`] says which one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Buffer shorter than the fixed part of the header (§5.1: at least 12
    /// bytes for X=0, 16 for X=1) or than the type's sub-header.
    Truncated,
    /// Data Offset smaller than the generic header plus sub-header, or
    /// pointing past the end of the packet (§5.1).
    BadDataOffset,
    /// Packet type 10–15 (reserved, §5.1: MUST be ignored).
    ReservedType(u8),
    /// X=0 on a type other than Data, Ack and DataAck (§5.1: such packets
    /// MUST be ignored).
    ShortSeqNotAllowed,
    /// Checksum Coverage larger than the packet (§9.2: MUST be ignored).
    BadChecksumCoverage,
    /// The checksum did not verify (§9.1).
    BadChecksum,
    /// An option's length byte is < 2 or runs past the options area (§5.8).
    BadOptionLength { kind: u8 },
    /// An option has a length that the RFC forbids for its type (e.g. a
    /// Timestamp that is not 6 bytes). §5.8: Reset with Option Error.
    BadOptionValue { kind: u8 },
    /// Mandatory option (§5.8.2) as the last option, before another
    /// Mandatory, or followed by an option we do not understand
    /// (Reset code 6, Mandatory Error).
    MandatoryFailure { kind: u8 },
    /// Feature-negotiation option with a value of the wrong length for a
    /// non-negotiable feature (§6.6.8).
    BadFeatureValue { feature: u8 },
    /// A Multipath (46) sub-option we cannot parse: unknown MP_OPT, wrong
    /// length, or a malformed body (RFC 9897; Reset code 5).
    BadMpOption { subtype: u8 },
    /// Options area longer than 1020 bytes on emit, or the header would not
    /// fit in Data Offset (§5.1: Data Offset is 8 bits of 32-bit words).
    OptionsTooLong,
    /// Output buffer too small for `emit`.
    BufferTooSmall,
    /// A field of a Repr is out of range for its encoding (e.g. a 48-bit
    /// sequence number ≥ 2^48, CCVal > 15) — caller bug on emit.
    FieldOutOfRange,
    /// A pcap/UDP/IP framing error (not DCCP itself).
    BadFraming,
}

impl WireError {
    /// The Reset code RFC 4340 asks for when this error is met on an
    /// established connection, if any (§5.6, §5.8). `None` means the packet
    /// is silently dropped.
    pub fn reset_code(self) -> Option<ResetCode> {
        match self {
            WireError::BadOptionLength { .. }
            | WireError::BadOptionValue { .. }
            | WireError::BadFeatureValue { .. }
            | WireError::BadMpOption { .. } => Some(ResetCode::OptionError),
            WireError::MandatoryFailure { .. } => Some(ResetCode::MandatoryError),
            _ => None,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "truncated packet"),
            WireError::BadDataOffset => write!(f, "bad data offset"),
            WireError::ReservedType(t) => write!(f, "reserved packet type {t}"),
            WireError::ShortSeqNotAllowed => {
                write!(f, "short sequence numbers on a type that forbids them")
            }
            WireError::BadChecksumCoverage => write!(f, "checksum coverage exceeds packet"),
            WireError::BadChecksum => write!(f, "bad checksum"),
            WireError::BadOptionLength { kind } => write!(f, "bad length for option {kind}"),
            WireError::BadOptionValue { kind } => write!(f, "bad value for option {kind}"),
            WireError::MandatoryFailure { kind } => {
                write!(f, "mandatory option {kind} not understood")
            }
            WireError::BadFeatureValue { feature } => {
                write!(f, "bad value for feature {feature}")
            }
            WireError::BadMpOption { subtype } => write!(f, "bad multipath sub-option {subtype}"),
            WireError::OptionsTooLong => write!(f, "options exceed 1020 bytes"),
            WireError::BufferTooSmall => write!(f, "buffer too small"),
            WireError::FieldOutOfRange => write!(f, "field out of range"),
            WireError::BadFraming => write!(f, "bad framing"),
        }
    }
}

impl std::error::Error for WireError {}

/// Counters of rejected or ignored input, one per cause. The connection
/// owns one and calls [`WireStats::record`] on each parse error; the parser
/// itself bumps `options_ignored` through [`DccpRepr::parse_with_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    pub truncated: u64,
    pub bad_data_offset: u64,
    pub reserved_type: u64,
    pub short_seq_not_allowed: u64,
    pub bad_checksum_coverage: u64,
    pub bad_checksum: u64,
    pub bad_option: u64,
    pub mandatory_failure: u64,
    pub bad_feature_value: u64,
    pub bad_mp_option: u64,
    pub bad_framing: u64,
    pub other: u64,
    /// Options dropped because RFC 4340 says to ignore them on this packet
    /// type (Table 3 "DCCP-Data?" column, §8.1.4 Init Cookie) or because
    /// they are unknown single-byte options (§5.8).
    pub options_ignored: u64,
}

impl WireStats {
    /// Count one rejected packet.
    pub fn record(&mut self, e: WireError) {
        let c = match e {
            WireError::Truncated => &mut self.truncated,
            WireError::BadDataOffset => &mut self.bad_data_offset,
            WireError::ReservedType(_) => &mut self.reserved_type,
            WireError::ShortSeqNotAllowed => &mut self.short_seq_not_allowed,
            WireError::BadChecksumCoverage => &mut self.bad_checksum_coverage,
            WireError::BadChecksum => &mut self.bad_checksum,
            WireError::BadOptionLength { .. } | WireError::BadOptionValue { .. } => {
                &mut self.bad_option
            }
            WireError::MandatoryFailure { .. } => &mut self.mandatory_failure,
            WireError::BadFeatureValue { .. } => &mut self.bad_feature_value,
            WireError::BadMpOption { .. } => &mut self.bad_mp_option,
            WireError::BadFraming => &mut self.bad_framing,
            WireError::OptionsTooLong | WireError::BufferTooSmall | WireError::FieldOutOfRange => {
                &mut self.other
            }
        };
        *c += 1;
    }

    /// Sum of all rejection counters (not `options_ignored`).
    pub fn rejected(&self) -> u64 {
        self.truncated
            + self.bad_data_offset
            + self.reserved_type
            + self.short_seq_not_allowed
            + self.bad_checksum_coverage
            + self.bad_checksum
            + self.bad_option
            + self.mandatory_failure
            + self.bad_feature_value
            + self.bad_mp_option
            + self.bad_framing
            + self.other
    }
}

/// Source and destination address of the IP header around a DCCP packet,
/// for the pseudo-header checksum (§9.1). Both must be the same family.
pub type IpPair = (IpAddr, IpAddr);

/// Upper bound on the options area: Data Offset is 8 bits counting 32-bit
/// words (§5.1), so a header — and a fortiori its options — is at most 1020
/// bytes; the real room is 1020 minus the generic header and sub-header,
/// which [`PacketBuilder::finish`] enforces ([`WireError::OptionsTooLong`]).
pub const MAX_OPTIONS_LEN: usize = 1020;

/// Largest DCCP header in bytes (Data Offset = 255 words, §5.1).
pub const MAX_HEADER_LEN: usize = 255 * 4;

/// Mask of 48-bit sequence numbers (§7.1).
pub const SEQ_MASK: u64 = (1 << 48) - 1;
