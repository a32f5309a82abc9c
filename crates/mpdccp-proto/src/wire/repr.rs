//! [`DccpRepr`], the owned form of a DCCP header and all its options
//! (smoltcp's `Repr`): what tests, fuzzing, captures and U-DCCP read and
//! write. It parses through the [`Packet`] view and [`OptionRules`], and
//! emits through the [`PacketBuilder`], as the connection's compact
//! `Segment` does; it differs only in keeping every option.

use super::builder::{Finish, Header, PacketBuilder};
use super::option::{self, DccpOption};
use super::packet::generic_len;
use super::{
    checksum, IpPair, MpOption, Packet, PacketType, WireError, WireProfile, MAX_HEADER_LEN,
    SEQ_MASK,
};

/// The owned, validated form of a DCCP header and its options.
///
/// The payload is not part of the Repr: `parse` reports where it starts
/// ([`DccpRepr::parse`] returns the header length), and `emit` takes it as a
/// separate slice so the caller can build packets without copying twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DccpRepr {
    /// Generic header and sub-header (§5.1–§5.6). X=0 (`short_seq`) is
    /// parsed on every type; emit allows it only for Data, Ack and DataAck.
    pub header: Header,
    /// Options in wire order (Padding dropped on parse; see [`option`]).
    pub options: Vec<DccpOption>,
    /// The layout option 46 is read and written in: RFC 9897 by default,
    /// a reference kernel's for tests and fuzzing that speak to one.
    pub profile: WireProfile,
}

impl Default for DccpRepr {
    fn default() -> Self {
        DccpRepr::new(Header::default(), Vec::new())
    }
}

impl DccpRepr {
    /// A Repr with option 46 in the RFC 9897 layout.
    pub fn new(header: Header, options: Vec<DccpOption>) -> Self {
        DccpRepr {
            header,
            options,
            profile: WireProfile::Rfc9897,
        }
    }

    pub fn packet_type(&self) -> PacketType {
        self.header.kind.packet_type()
    }

    pub fn ack(&self) -> Option<u64> {
        self.header.kind.ack()
    }

    /// The first MP_SEQ among the options.
    pub fn mp_seq(&self) -> Option<u64> {
        self.options.iter().find_map(|o| match o {
            DccpOption::Multipath(MpOption::Seq(s)) => Some(*s),
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
        let header = Header {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            kind,
            ccval: p.ccval(),
            cscov: p.cscov(),
            short_seq: p.short_seq(),
        };
        Ok(DccpRepr {
            header,
            options,
            profile,
        })
    }

    /// Header length in bytes (generic header, sub-header, padded options).
    pub fn header_len(&self) -> usize {
        generic_len(self.header.short_seq)
            + self.packet_type().subheader_len(self.header.short_seq)
            + option::options_len(&self.options, self.profile)
    }

    /// Bytes `emit` writes for a payload of `payload_len` bytes.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Check the Repr can be encoded: field widths, X=0 only on
    /// Data/Ack/DataAck, header ≤ 1020 bytes.
    pub fn validate(&self) -> Result<(), WireError> {
        let seq_max = if self.header.short_seq {
            (1 << 24) - 1
        } else {
            SEQ_MASK
        };
        if self.header.seq > seq_max
            || self.ack().is_some_and(|a| a > seq_max)
            || self.header.ccval > 15
            || self.header.cscov > 15
        {
            return Err(WireError::FieldOutOfRange);
        }
        if self.header.short_seq && !self.packet_type().allows_short_seq() {
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
        checksum::coverage_len(hl, total, self.header.cscov)?;
        let mut b =
            PacketBuilder::new(out, self.packet_type(), self.header.short_seq, self.profile);
        for o in &self.options {
            b.option(o)?;
        }
        b.finish(&self.header, payload, Finish::Plain { addrs })
    }
}
