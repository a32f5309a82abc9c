//! Assembles one outgoing packet in the caller's buffer (as quinn's
//! `packet_builder.rs`): the options are written first, right after the room
//! the fixed header takes, then [`PacketBuilder::finish`] pads them to a
//! word (RFC 4340 §5.8), copies the payload, writes the fixed header with
//! the Data Offset and fills the checksum (§9). [`DccpRepr::emit`] and the
//! connection's `Segment::emit_in` both build through it, so every DCCP
//! packet this crate sends is laid out here.
//!
//! [`DccpRepr::emit`]: super::DccpRepr::emit

use super::packet::{field, generic_len, write_be};
use super::{
    DccpKind, DccpOption, IpPair, MpOption, Packet, PacketType, WireError, WireProfile,
    MAX_HEADER_LEN,
};

/// One packet being written into `buf`.
pub struct PacketBuilder<'b> {
    buf: &'b mut [u8],
    /// Generic header + sub-header: where the options start.
    fixed: usize,
    /// End of the options written so far.
    end: usize,
    profile: WireProfile,
}

/// Where the payload goes and what follows it. `Plain` is an ordinary
/// packet with its checksum; `Sealed` leaves `gap` bytes between header and
/// payload (the protection counter), keeps `tail` bytes free after it (the
/// tag) and computes no checksum: sealing computes it over the ciphertext.
#[derive(Clone, Copy, Debug)]
pub enum Finish {
    Plain { addrs: Option<IpPair> },
    Sealed { gap: usize, tail: usize },
}

impl<'b> PacketBuilder<'b> {
    /// Starts a packet of type `ty` (X=0 when `short_seq`), option 46 in
    /// `profile`'s layout.
    pub fn new(buf: &'b mut [u8], ty: PacketType, short_seq: bool, profile: WireProfile) -> Self {
        let fixed = generic_len(short_seq) + ty.subheader_len(short_seq);
        PacketBuilder {
            buf,
            fixed,
            end: fixed,
            profile,
        }
    }

    pub fn profile(&self) -> WireProfile {
        self.profile
    }

    /// Appends one option.
    pub fn option(&mut self, o: &DccpOption) -> Result<(), WireError> {
        self.put(|b, profile| o.emit_in(b, profile))
    }

    /// Appends one MP option (RFC 9897 §3.2) in the builder's profile.
    pub fn mp(&mut self, o: &MpOption) -> Result<(), WireError> {
        self.put(|b, profile| o.emit_in(b, profile))
    }

    fn put(
        &mut self,
        emit: impl FnOnce(&mut [u8], WireProfile) -> Result<usize, WireError>,
    ) -> Result<(), WireError> {
        let room = self.buf.get_mut(self.end..);
        self.end += emit(room.ok_or(WireError::BufferTooSmall)?, self.profile)?;
        Ok(())
    }

    /// Pads the options, writes `payload`, then `header` and the Data
    /// Offset; returns header + payload length. The header may not exceed
    /// 1020 bytes (Data Offset is 8 bits of words).
    pub fn finish(self, header: &Header, payload: &[u8], how: Finish) -> Result<usize, WireError> {
        let (gap, tail) = match how {
            Finish::Plain { .. } => (0, 0),
            Finish::Sealed { gap, tail } => (gap, tail),
        };
        let hl = self.end.div_ceil(4) * 4;
        let total = hl + payload.len();
        if hl > MAX_HEADER_LEN {
            return Err(WireError::OptionsTooLong);
        }
        if self.buf.len() < total + gap + tail {
            return Err(WireError::BufferTooSmall);
        }
        let buf = self.buf;
        buf[self.end..hl].fill(0); // Padding options
        buf[hl + gap..total + gap].copy_from_slice(payload);
        header.write(&mut buf[..self.fixed]);
        let mut pkt = Packet::new_unchecked(&mut buf[..total]);
        // hl ≤ 1020 (checked above) so hl / 4 ≤ 255.
        pkt.set_data_offset((hl / 4) as u8);
        match how {
            Finish::Plain { addrs: Some(a) } => pkt.fill_checksum(a)?,
            _ => pkt.set_checksum(0),
        }
        Ok(total)
    }
}

/// The generic header and the type's sub-header (§5.1–§5.6): what comes
/// before the options. [`PacketBuilder`] writes it last, once the Data
/// Offset is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
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
    /// X=0: 24-bit sequence and acknowledgement numbers (§5.1).
    pub short_seq: bool,
}

/// A Data packet from port 0 to port 0, sequence 0, 48-bit numbers.
impl Default for Header {
    fn default() -> Self {
        Header {
            src_port: 0,
            dst_port: 0,
            seq: 0,
            kind: DccpKind::Data,
            ccval: 0,
            cscov: 0,
            short_seq: false,
        }
    }
}

impl Header {
    /// Writes the header into `b`, exactly its length; Data Offset and
    /// checksum are left zero. Numbers wider than their field are cut to it.
    pub fn write(&self, b: &mut [u8]) {
        b.fill(0);
        let mut p = Packet::new_unchecked(&mut *b);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_ccval_cscov(self.ccval, self.cscov);
        let ty = self.kind.packet_type();
        b[field::TYPE_X] = ((ty as u8) << 1) | u8::from(!self.short_seq);
        let mut off = if self.short_seq {
            write_be(&mut b[field::SEQ_SHORT], self.seq);
            field::HEADER_SHORT
        } else {
            write_be(&mut b[field::SEQ_LONG], self.seq);
            field::HEADER_LONG
        };
        if let Some(ack) = self.kind.ack() {
            // Reserved(8) | Ack(24), or Reserved(16) | Ack(48); a branch
            // each, so that both copies have a fixed width (no memcpy call).
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
            }
            DccpKind::Reset { code, data, .. } => {
                b[off] = code.to_u8();
                b[off + 1..off + 4].copy_from_slice(&data);
            }
            _ => {}
        }
    }
}
