//! DCCP options (RFC 4340 §5.8, Table 3) and feature negotiation (§6).
//!
//! Options 0–31 are single bytes; 32–255 carry a length byte that counts
//! the type and length bytes too, so it is ≥ 2 (§5.8). Lengths the RFC
//! fixes are enforced ([`WireError::BadOptionValue`], Reset code 5);
//! unknown options are preserved as [`DccpOption::Unknown`] (§5.8: ignored
//! unless preceded by Mandatory).
//!
//! [`OptionIter`] walks an options area without allocating; it is what
//! [`super::Packet::options`] returns. [`DccpOption`] is the owned form.

use super::ackvec::{self, AckVector};
use super::mp::{self, MpOption};
use super::packet_type::PacketType;
use super::{WireError, WireProfile};

/// Option type numbers (§5.8 Table 3; 46 from RFC 9897).
pub mod kind {
    pub const PADDING: u8 = 0;
    pub const MANDATORY: u8 = 1;
    pub const SLOW_RECEIVER: u8 = 2;
    pub const CHANGE_L: u8 = 32;
    pub const CONFIRM_L: u8 = 33;
    pub const CHANGE_R: u8 = 34;
    pub const CONFIRM_R: u8 = 35;
    pub const INIT_COOKIE: u8 = 36;
    pub const NDP_COUNT: u8 = 37;
    pub const ACK_VECTOR_0: u8 = 38;
    pub const ACK_VECTOR_1: u8 = 39;
    pub const DATA_DROPPED: u8 = 40;
    pub const TIMESTAMP: u8 = 41;
    pub const TIMESTAMP_ECHO: u8 = 42;
    pub const ELAPSED_TIME: u8 = 43;
    pub const MULTIPATH: u8 = 46;
}

/// Feature numbers (§6.4 Table 4; 10 = Multipath Capable, RFC 9897 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FeatureNum {
    /// 1, server-priority: the half-connection's CCID.
    Ccid,
    /// 2, server-priority boolean.
    AllowShortSeqnos,
    /// 3, non-negotiable, 48-bit value (6 bytes).
    SequenceWindow,
    /// 4, server-priority boolean.
    EcnIncapable,
    /// 5, non-negotiable, 16-bit value (2 bytes).
    AckRatio,
    /// 6, server-priority boolean.
    SendAckVector,
    /// 7, server-priority boolean.
    SendNdpCount,
    /// 8, server-priority, 0–15.
    MinChecksumCoverage,
    /// 9, server-priority boolean.
    CheckDataChecksum,
    /// 10, server-priority list of MP-DCCP versions (RFC 9897 §3.1).
    MultipathCapable,
    /// Any other number: 0 and 11–127 reserved, 128–255 CCID-specific.
    Other(u8),
}

impl FeatureNum {
    pub fn from_u8(v: u8) -> FeatureNum {
        match v {
            1 => FeatureNum::Ccid,
            2 => FeatureNum::AllowShortSeqnos,
            3 => FeatureNum::SequenceWindow,
            4 => FeatureNum::EcnIncapable,
            5 => FeatureNum::AckRatio,
            6 => FeatureNum::SendAckVector,
            7 => FeatureNum::SendNdpCount,
            8 => FeatureNum::MinChecksumCoverage,
            9 => FeatureNum::CheckDataChecksum,
            10 => FeatureNum::MultipathCapable,
            o => FeatureNum::Other(o),
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            FeatureNum::Ccid => 1,
            FeatureNum::AllowShortSeqnos => 2,
            FeatureNum::SequenceWindow => 3,
            FeatureNum::EcnIncapable => 4,
            FeatureNum::AckRatio => 5,
            FeatureNum::SendAckVector => 6,
            FeatureNum::SendNdpCount => 7,
            FeatureNum::MinChecksumCoverage => 8,
            FeatureNum::CheckDataChecksum => 9,
            FeatureNum::MultipathCapable => 10,
            FeatureNum::Other(o) => o,
        }
    }

    /// Value length in bytes of a non-negotiable feature (§6.3.2), `None`
    /// for server-priority and unknown features.
    pub fn nn_len(self) -> Option<usize> {
        match self {
            FeatureNum::SequenceWindow => Some(6),
            FeatureNum::AckRatio => Some(2),
            _ => None,
        }
    }

    /// Whether we know this feature to be server-priority (§6.3.1).
    pub fn is_server_priority(self) -> bool {
        !matches!(
            self,
            FeatureNum::SequenceWindow | FeatureNum::AckRatio | FeatureNum::Other(_)
        )
    }
}

/// The value carried by a Change or Confirm option (§6.1, §6.3).
///
/// * Server-priority features: a Change carries the sender's preference
///   list; a Confirm carries the selected value followed by the sender's
///   preference list — both are `ServerPriority(bytes)` (first byte of a
///   Confirm's list is the selected value; see [`FeatureValue::selected`]).
/// * Non-negotiable features (Sequence Window, Ack Ratio): one value of a
///   fixed width.
/// * An option with no value bytes parses as `Empty` (an empty Confirm
///   means "feature not understood" or, for Multipath Capable, "no
///   agreement", RFC 9897 §3.1). `ServerPriority(vec![])` emits the same
///   bytes and therefore parses back as `Empty`.
/// * Unknown features keep their raw bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeatureValue {
    Empty,
    ServerPriority(Vec<u8>),
    NonNegotiable(u64),
    Unknown(Vec<u8>),
}

impl FeatureValue {
    /// For a Confirm of a server-priority feature: the selected value.
    pub fn selected(&self) -> Option<u8> {
        match self {
            FeatureValue::ServerPriority(v) => v.first().copied(),
            _ => None,
        }
    }

    fn encoded_len(&self, feature: FeatureNum) -> usize {
        match self {
            FeatureValue::Empty => 0,
            FeatureValue::ServerPriority(v) | FeatureValue::Unknown(v) => v.len(),
            FeatureValue::NonNegotiable(_) => feature.nn_len().unwrap_or(8),
        }
    }

    fn parse(feature: FeatureNum, data: &[u8]) -> Result<FeatureValue, WireError> {
        if data.is_empty() {
            return Ok(FeatureValue::Empty);
        }
        if let Some(n) = feature.nn_len() {
            // §6.3.2: NN values have a fixed width; anything else is an
            // Option Error.
            if data.len() != n {
                return Err(WireError::BadFeatureValue {
                    feature: feature.to_u8(),
                });
            }
            return Ok(FeatureValue::NonNegotiable(
                data.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)),
            ));
        }
        if feature.is_server_priority() {
            Ok(FeatureValue::ServerPriority(data.to_vec()))
        } else {
            Ok(FeatureValue::Unknown(data.to_vec()))
        }
    }
}

/// One DCCP option, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DccpOption {
    /// 0 (§5.8.1). Dropped by parse; emit writes one zero byte.
    Padding,
    /// 1 (§5.8.2): the next option must be understood or the connection
    /// reset with Mandatory Error.
    Mandatory,
    /// 2 (§11.6).
    SlowReceiver,
    /// 32 (§6.1): the sender asks the receiver to change its value of
    /// `feature` (the sender's feature "L"ocation).
    ChangeL {
        feature: FeatureNum,
        value: FeatureValue,
    },
    /// 33 (§6.2).
    ConfirmL {
        feature: FeatureNum,
        value: FeatureValue,
    },
    /// 34 (§6.1).
    ChangeR {
        feature: FeatureNum,
        value: FeatureValue,
    },
    /// 35 (§6.2).
    ConfirmR {
        feature: FeatureNum,
        value: FeatureValue,
    },
    /// 36 (§8.1.4): 1–253 opaque bytes.
    InitCookie(Vec<u8>),
    /// 37 (§7.7): 1–6 bytes on the wire; emitted in the fewest bytes.
    NdpCount(u64),
    /// 38/39 (§11.4).
    AckVector(AckVector),
    /// 40 (§11.7): raw Drop Vector bytes.
    DataDropped(Vec<u8>),
    /// 41 (§13.1): 32-bit timestamp, units of 10 µs.
    Timestamp(u32),
    /// 42 (§13.3): echoed timestamp and optional elapsed time (10 µs
    /// units; 2 bytes on the wire if < 65536, else 4).
    TimestampEcho {
        timestamp: u32,
        elapsed: Option<u32>,
    },
    /// 43 (§13.2): elapsed time in 10 µs units (2 or 4 bytes on the wire).
    ElapsedTime(u32),
    /// 46: the Multipath option (RFC 9897).
    Multipath(MpOption),
    /// Any other option, preserved: reserved single-byte types 3–31 (with
    /// empty `data`), reserved 44–45 and 47–127, CCID-specific 128–255.
    Unknown { kind: u8, data: Vec<u8> },
}

/// One option as it sits in the packet, borrowed. Single-byte options have
/// empty `data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawOption<'a> {
    pub kind: u8,
    pub data: &'a [u8],
}

/// Lazy iterator over an options area. Yields `Err` once on a malformed
/// length and then stops. Padding is yielded (callers usually skip it).
#[derive(Clone, Debug)]
pub struct OptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> OptionIter<'a> {
    pub fn new(area: &'a [u8]) -> Self {
        OptionIter { rest: area }
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = Result<RawOption<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&k, after) = self.rest.split_first()?;
        if k < 32 {
            self.rest = after;
            return Some(Ok(RawOption { kind: k, data: &[] }));
        }
        let len = match after.first() {
            Some(&l) => usize::from(l),
            None => {
                self.rest = &[];
                return Some(Err(WireError::BadOptionLength { kind: k }));
            }
        };
        if len < 2 || len > self.rest.len() {
            self.rest = &[];
            return Some(Err(WireError::BadOptionLength { kind: k }));
        }
        let data = &self.rest[2..len];
        self.rest = &self.rest[len..];
        Some(Ok(RawOption { kind: k, data }))
    }
}

impl<'a> RawOption<'a> {
    /// The Multipath sub-option's MP_SEQ, without allocating.
    pub fn mp_seq(&self) -> Option<u64> {
        if self.kind == kind::MULTIPATH {
            mp::parse_seq(self.data)
        } else {
            None
        }
    }

    /// Convert to the owned form, checking the lengths Table 3 fixes;
    /// option 46 in the RFC 9897 layout.
    pub fn to_option(&self) -> Result<DccpOption, WireError> {
        self.to_option_in(WireProfile::Rfc9897)
    }

    /// [`RawOption::to_option`] with option 46 in `profile`'s layout.
    pub fn to_option_in(&self, profile: WireProfile) -> Result<DccpOption, WireError> {
        let k = self.kind;
        let d = self.data;
        let bad = WireError::BadOptionValue { kind: k };
        let be = |b: &[u8]| b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
        Ok(match k {
            kind::PADDING => DccpOption::Padding,
            kind::MANDATORY => DccpOption::Mandatory,
            kind::SLOW_RECEIVER => DccpOption::SlowReceiver,
            kind::CHANGE_L | kind::CONFIRM_L | kind::CHANGE_R | kind::CONFIRM_R => {
                let (&f, v) = d.split_first().ok_or(bad)?;
                let feature = FeatureNum::from_u8(f);
                let value = FeatureValue::parse(feature, v)?;
                match k {
                    kind::CHANGE_L => DccpOption::ChangeL { feature, value },
                    kind::CONFIRM_L => DccpOption::ConfirmL { feature, value },
                    kind::CHANGE_R => DccpOption::ChangeR { feature, value },
                    _ => DccpOption::ConfirmR { feature, value },
                }
            }
            kind::INIT_COOKIE => {
                if d.is_empty() {
                    return Err(bad);
                }
                DccpOption::InitCookie(d.to_vec())
            }
            kind::NDP_COUNT => {
                if d.is_empty() || d.len() > 6 {
                    return Err(bad);
                }
                DccpOption::NdpCount(be(d))
            }
            kind::ACK_VECTOR_0 | kind::ACK_VECTOR_1 => {
                DccpOption::AckVector(ackvec::parse_body(k, d)?.to_owned())
            }
            kind::DATA_DROPPED => {
                if d.is_empty() {
                    return Err(bad);
                }
                DccpOption::DataDropped(d.to_vec())
            }
            kind::TIMESTAMP => {
                if d.len() != 4 {
                    return Err(bad);
                }
                DccpOption::Timestamp(be(d) as u32)
            }
            kind::TIMESTAMP_ECHO => {
                let elapsed = match d.len() {
                    4 => None,
                    6 | 8 => Some(be(&d[4..]) as u32),
                    _ => return Err(bad),
                };
                DccpOption::TimestampEcho {
                    timestamp: be(&d[..4]) as u32,
                    elapsed,
                }
            }
            kind::ELAPSED_TIME => match d.len() {
                2 | 4 => DccpOption::ElapsedTime(be(d) as u32),
                _ => return Err(bad),
            },
            kind::MULTIPATH => DccpOption::Multipath(MpOption::parse_in(d, profile)?),
            _ => DccpOption::Unknown {
                kind: k,
                data: d.to_vec(),
            },
        })
    }
}

/// Whether RFC 4340 tells the receiver to ignore option `k` on a packet of
/// type `ty` (Table 3's "DCCP-Data?" column; §8.1.4 for Init Cookie on
/// Requests; Ack Vector needs an Acknowledgement Number to anchor it).
pub fn ignored_on(ty: PacketType, k: u8) -> bool {
    match ty {
        PacketType::Data => matches!(
            k,
            kind::MANDATORY
                | kind::CHANGE_L
                | kind::CONFIRM_L
                | kind::CHANGE_R
                | kind::CONFIRM_R
                | kind::INIT_COOKIE
                | kind::ACK_VECTOR_0
                | kind::ACK_VECTOR_1
                | kind::DATA_DROPPED
                | kind::ELAPSED_TIME
        ),
        PacketType::Request => matches!(
            k,
            kind::INIT_COOKIE | kind::ACK_VECTOR_0 | kind::ACK_VECTOR_1 | kind::ELAPSED_TIME
        ),
        _ => false,
    }
}

/// Whether we understand option `k` well enough to honour a Mandatory in
/// front of it. CCID-specific options (128–255) are passed to the caller,
/// whose CCID decides; reserved types are not understood.
fn understood(k: u8) -> bool {
    matches!(k, 0..=2 | 32..=43 | kind::MULTIPATH | 128..=255)
}

/// What [`OptionRules::check`] says about one option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionVerdict {
    /// Act on it (it may have been made mandatory by the option before).
    Use,
    /// A Mandatory option (§5.8.2): it applies to the next option.
    Mandatory,
    /// Padding, or an option RFC 4340 says to ignore on this packet type
    /// (counted in [`OptionRules::ignored`]).
    Skip,
}

/// RFC 4340's rules for the options of one packet, applied while walking
/// them without allocating: options ignored per packet type (Table 3,
/// §8.1.4), and Mandatory (§5.8.2) — before Mandatory or Padding, or as the
/// last option, it is an Option Error; before an option we do not
/// understand, a Mandatory Error. [`parse_options`] and the connection's
/// [`crate::conn::codec::Segment::parse`] both walk with [`OptionRules::walk`].
#[derive(Clone, Copy, Debug)]
pub struct OptionRules {
    ty: PacketType,
    mandatory_pending: bool,
    /// Options skipped because RFC 4340 says to ignore them on `ty`.
    pub ignored: u32,
}

impl OptionRules {
    pub fn new(ty: PacketType) -> Self {
        OptionRules {
            ty,
            mandatory_pending: false,
            ignored: 0,
        }
    }

    /// Judges the next option of the packet.
    pub fn check(&mut self, raw: &RawOption<'_>) -> Result<OptionVerdict, WireError> {
        let misplaced = WireError::BadOptionValue {
            kind: kind::MANDATORY,
        };
        if raw.kind == kind::PADDING {
            return if self.mandatory_pending {
                Err(misplaced)
            } else {
                Ok(OptionVerdict::Skip)
            };
        }
        if ignored_on(self.ty, raw.kind) {
            self.ignored += 1;
            return Ok(OptionVerdict::Skip);
        }
        if raw.kind == kind::MANDATORY {
            if self.mandatory_pending {
                return Err(misplaced);
            }
            self.mandatory_pending = true;
            return Ok(OptionVerdict::Mandatory);
        }
        if self.mandatory_pending && !understood(raw.kind) {
            return Err(WireError::MandatoryFailure { kind: raw.kind });
        }
        self.mandatory_pending = false;
        Ok(OptionVerdict::Use)
    }

    /// Walks the options `area` holds under these rules, handing `f` each
    /// one to act on ([`OptionVerdict::Use`]) or a Mandatory; stops at the
    /// first error, a malformed option or one `f` refuses.
    pub fn walk<'a>(
        &mut self,
        area: &'a [u8],
        mut f: impl FnMut(RawOption<'a>, OptionVerdict) -> Result<(), WireError>,
    ) -> Result<(), WireError> {
        for raw in OptionIter::new(area) {
            let raw = raw?;
            match self.check(&raw)? {
                OptionVerdict::Skip => {}
                v => f(raw, v)?,
            }
        }
        self.finish()
    }

    /// After the last option: a Mandatory with nothing after it is an
    /// Option Error (§5.8.2).
    pub fn finish(&self) -> Result<(), WireError> {
        if self.mandatory_pending {
            return Err(WireError::BadOptionValue {
                kind: kind::MANDATORY,
            });
        }
        Ok(())
    }
}

/// Parse an options area into owned options for a packet of type `ty`.
/// Padding is dropped; options the RFC says to ignore on `ty` are dropped
/// and counted in `*ignored`. Known options with bad lengths are Option
/// Errors (§5.8). Option 46 is read in `profile`'s layout.
pub fn parse_options(
    area: &[u8],
    ty: PacketType,
    ignored: &mut u64,
    profile: WireProfile,
) -> Result<Vec<DccpOption>, WireError> {
    // Every option takes at least one byte; most take far more. A quarter
    // of the area bounds the common case without over-reserving.
    let mut out = Vec::with_capacity(area.len().min(64) / 4);
    let mut rules = OptionRules::new(ty);
    let result = rules.walk(area, |raw, verdict| {
        out.push(match verdict {
            OptionVerdict::Mandatory => DccpOption::Mandatory,
            _ => raw.to_option_in(profile)?,
        });
        Ok(())
    });
    *ignored += u64::from(rules.ignored);
    result.map(|()| out)
}

impl DccpOption {
    pub fn kind(&self) -> u8 {
        match self {
            DccpOption::Padding => kind::PADDING,
            DccpOption::Mandatory => kind::MANDATORY,
            DccpOption::SlowReceiver => kind::SLOW_RECEIVER,
            DccpOption::ChangeL { .. } => kind::CHANGE_L,
            DccpOption::ConfirmL { .. } => kind::CONFIRM_L,
            DccpOption::ChangeR { .. } => kind::CHANGE_R,
            DccpOption::ConfirmR { .. } => kind::CONFIRM_R,
            DccpOption::InitCookie(_) => kind::INIT_COOKIE,
            DccpOption::NdpCount(_) => kind::NDP_COUNT,
            DccpOption::AckVector(av) => kind::ACK_VECTOR_0 + (av.nonce & 1),
            DccpOption::DataDropped(_) => kind::DATA_DROPPED,
            DccpOption::Timestamp(_) => kind::TIMESTAMP,
            DccpOption::TimestampEcho { .. } => kind::TIMESTAMP_ECHO,
            DccpOption::ElapsedTime(_) => kind::ELAPSED_TIME,
            DccpOption::Multipath(_) => kind::MULTIPATH,
            DccpOption::Unknown { kind, .. } => *kind,
        }
    }

    /// Encoded length in bytes (option 46 in the RFC 9897 layout).
    pub fn buffer_len(&self) -> usize {
        self.buffer_len_in(WireProfile::Rfc9897)
    }

    /// Encoded length in bytes, option 46 in `profile`'s layout.
    pub fn buffer_len_in(&self, profile: WireProfile) -> usize {
        match self {
            DccpOption::Padding | DccpOption::Mandatory | DccpOption::SlowReceiver => 1,
            DccpOption::ChangeL { feature, value }
            | DccpOption::ConfirmL { feature, value }
            | DccpOption::ChangeR { feature, value }
            | DccpOption::ConfirmR { feature, value } => 3 + value.encoded_len(*feature),
            DccpOption::InitCookie(d) | DccpOption::DataDropped(d) => 2 + d.len(),
            DccpOption::NdpCount(n) => 2 + min_bytes(*n).max(1),
            DccpOption::AckVector(av) => 2 + av.cells.len(),
            DccpOption::Timestamp(_) => 6,
            DccpOption::TimestampEcho { elapsed, .. } => match elapsed {
                None => 6,
                Some(e) if *e <= 0xffff => 8,
                Some(_) => 10,
            },
            DccpOption::ElapsedTime(e) => {
                if *e <= 0xffff {
                    4
                } else {
                    6
                }
            }
            DccpOption::Multipath(m) => m.buffer_len_in(profile),
            DccpOption::Unknown { kind, data } => {
                if *kind < 32 {
                    1
                } else {
                    2 + data.len()
                }
            }
        }
    }

    /// Emit into `buf` (option 46 in the RFC 9897 layout); returns bytes
    /// written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.emit_in(buf, WireProfile::Rfc9897)
    }

    /// Emit into `buf`, option 46 in `profile`'s layout; returns bytes
    /// written.
    pub fn emit_in(&self, buf: &mut [u8], profile: WireProfile) -> Result<usize, WireError> {
        if let DccpOption::Multipath(m) = self {
            return m.emit_in(buf, profile);
        }
        let len = self.buffer_len();
        let k = self.kind();
        if len > 255 {
            return Err(WireError::OptionsTooLong);
        }
        if let DccpOption::Unknown { kind, .. } = self {
            // A known type number in `Unknown` would parse back as something
            // else: refuse it rather than emit ambiguous bytes.
            if matches!(*kind, 0..=2 | 32..=43 | kind::MULTIPATH) {
                return Err(WireError::FieldOutOfRange);
            }
        }
        let out = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        out[0] = k;
        if len == 1 {
            if let DccpOption::Unknown { data, .. } = self {
                if !data.is_empty() {
                    return Err(WireError::FieldOutOfRange);
                }
            }
            return Ok(1);
        }
        if k < 32 {
            // A length-carrying variant with a single-byte type number.
            return Err(WireError::FieldOutOfRange);
        }
        // `len` ≤ 255 checked above.
        out[1] = len as u8;
        self.emit_data(&mut out[2..])?;
        Ok(len)
    }

    /// The data after type and length (RFC 4340 §5.8) into `b`, sized by
    /// `buffer_len`: refuses what would not parse back as `self`.
    fn emit_data(&self, b: &mut [u8]) -> Result<(), WireError> {
        match self {
            DccpOption::ChangeL { feature, value }
            | DccpOption::ConfirmL { feature, value }
            | DccpOption::ChangeR { feature, value }
            | DccpOption::ConfirmR { feature, value } => emit_feature(b, *feature, value)?,
            DccpOption::InitCookie(d) | DccpOption::DataDropped(d) => {
                if d.is_empty() {
                    return Err(WireError::FieldOutOfRange);
                }
                b.copy_from_slice(d)
            }
            DccpOption::NdpCount(n) => {
                let w = b.len();
                if w > 6 {
                    return Err(WireError::FieldOutOfRange);
                }
                b.copy_from_slice(&n.to_be_bytes()[8 - w..]);
            }
            DccpOption::AckVector(av) => {
                if av.cells.is_empty() || av.nonce > 1 {
                    return Err(WireError::FieldOutOfRange);
                }
                b.copy_from_slice(&av.cells)
            }
            DccpOption::Timestamp(t) => b.copy_from_slice(&t.to_be_bytes()),
            DccpOption::TimestampEcho { timestamp, elapsed } => {
                b[..4].copy_from_slice(&timestamp.to_be_bytes());
                match (elapsed, b.len()) {
                    (Some(e), 6) => b[4..].copy_from_slice(&(*e as u16).to_be_bytes()),
                    (Some(e), 8) => b[4..].copy_from_slice(&e.to_be_bytes()),
                    _ => {}
                }
            }
            DccpOption::ElapsedTime(e) => {
                if b.len() == 2 {
                    b.copy_from_slice(&(*e as u16).to_be_bytes())
                } else {
                    b.copy_from_slice(&e.to_be_bytes())
                }
            }
            DccpOption::Unknown { data, .. } => b.copy_from_slice(data),
            DccpOption::Padding
            | DccpOption::Mandatory
            | DccpOption::SlowReceiver
            | DccpOption::Multipath(_) => {}
        }
        Ok(())
    }
}

/// The body of a Change or Confirm option into `b` (sized by
/// `buffer_len`): the feature number, then its value (RFC 4340 §6.1); a
/// non-negotiable value must fit the bytes its feature gives it.
fn emit_feature(b: &mut [u8], feature: FeatureNum, value: &FeatureValue) -> Result<(), WireError> {
    b[0] = feature.to_u8();
    match value {
        FeatureValue::Empty => {}
        FeatureValue::ServerPriority(v) | FeatureValue::Unknown(v) => b[1..].copy_from_slice(v),
        FeatureValue::NonNegotiable(n) => {
            if feature.nn_len().is_none() {
                return Err(WireError::FieldOutOfRange);
            }
            let w = b.len() - 1;
            if w < 8 && *n >> (8 * w) != 0 {
                return Err(WireError::FieldOutOfRange);
            }
            b[1..].copy_from_slice(&n.to_be_bytes()[8 - w..]);
        }
    }
    Ok(())
}

/// Bytes needed to hold `n` (0 for 0).
fn min_bytes(n: u64) -> usize {
    (64 - n.leading_zeros() as usize).div_ceil(8)
}

/// Total encoded length of `opts`, padded to a multiple of 4 (§5.8:
/// options are padded so Data Offset stays a whole number of words),
/// option 46 in `profile`'s layout.
pub fn options_len(opts: &[DccpOption], profile: WireProfile) -> usize {
    let n: usize = opts.iter().map(|o| o.buffer_len_in(profile)).sum();
    (n + 3) & !3
}
