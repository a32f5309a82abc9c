//! The Multipath option, DCCP option type 46 (RFC 9897 §3.2), and its
//! sub-options ("MP_OPT").
//!
//! ```text
//! +--------+--------+--------+--------+--------
//! |00101110| Length | MP_OPT | Value(s) ...
//! +--------+--------+--------+--------+--------
//! ```
//!
//! `Length` counts the whole option (type, length, MP_OPT and body). The
//! bytes are read and written in `mp_codec.rs`, in every wire profile.
//!
//! # Layout choices where the specification is ambiguous
//!
//! The layouts follow RFC 9897 (source text vendored in
//! `docs/spec/draft-ietf-tsvwg-multipath-dccp-25.mkd`; the requirements
//! matrix in `docs/rfc9897/MATRIX.md` lists every choice). We chose:
//!
//! * **MP_CONFIRM** (0): the list of confirmations is "the received MP_SEQ
//!   followed by the related sub-option(s), copied verbatim" (§3.2.1). Each
//!   element is a complete Multipath option (46, len, MP_OPT, …), so the
//!   list is self-delimiting and one parser reads it: the RFC form is
//!   `MP_SEQ, MP_ADDADDR, MP_SEQ, MP_PRIO`, most recent first. Nested
//!   MP_CONFIRM is rejected (bounded recursion). The confirmation table of
//!   §3.2.1 gives MP_REMOVEADDR length 4 while §3.2.9 gives 8; a verbatim
//!   copy is 8 bytes (with the nonce), which is what we send and expect.
//! * **MP_KEY** (3): `resvd(1) | CI(4) | {Key Type(1) | Key Data}…`. RFC
//!   9897 §3.2.4 assigns key type 0 (plain text, 8 bytes) and 255
//!   (experimental, 64 bytes: "17 and 73 bytes for a single-key message, and
//!   up to 82 bytes when all specified Key Types 0 and 255 are provided");
//!   1–254 are reserved. The draft's ECDHE types 1 and 2 are gone. A
//!   reserved type has no known length, so the key list cannot be
//!   delimited and the option is rejected (the connection then finds no
//!   agreeable key and falls back, §3.6). The reserved byte is emitted as 0
//!   and ignored on parse.
//! * **MP_ADDADDR** (7): `Address ID(1) | Nonce(4) | Address(4|16) |
//!   Port(2, optional)` (lengths 12, 14, 24, 26). The draft form without a
//!   nonce (8, 10, 20, 22, sent by the reference kernel) is also parsed:
//!   the eight lengths are all distinct, so `nonce` is `None` exactly for
//!   the draft form. Broadcast and multicast addresses must be ignored by
//!   the receiver (§3.2.8): [`addaddr_is_usable`].
//! * **MP_REMOVEADDR** (8): `Address ID(1) | Nonce(4)` (length 8), or the
//!   draft form `Address ID(1)` (length 4) with `nonce: None`. Its HMAC
//!   message is stated two ways in §3.2.6 ("Solely the Address ID" and
//!   `Msg=Address ID+Nonce`) and as "the Address ID" in §3.2.9; we use
//!   Address ID ‖ Nonce, the only reading in which the nonce prevents
//!   replay, which is what §3.2.9 says the nonce is for
//!   ([`MpOption::hmac_message`]).
//! * **MP_HMAC** (5) directly follows the option it protects (§3.2.6);
//!   [`HmacPairing`] pairs them on receipt.
//! * **MP_FAST_CLOSE** (2) and **MP_CLOSE** (10): variable-length Key Data,
//!   at least 1 byte (8 with a plain-text key).
//! * **MP_PRIO** (9): `resvd(4 bits) | prio(4 bits)`; reserved bits are
//!   ignored on parse and emitted as 0.
//! * **MP_EXP** (11): up to 252 bytes of opaque data (the option's 255-byte
//!   maximum minus its 3-byte header).

use std::net::IpAddr;

pub use super::mp_codec::parse_seq;

/// DCCP option type of the Multipath option.
pub const MP_OPTION_TYPE: u8 = 46;

/// Sub-option numbers (MP_OPT).
pub mod subtype {
    pub const CONFIRM: u8 = 0;
    pub const JOIN: u8 = 1;
    pub const FAST_CLOSE: u8 = 2;
    pub const KEY: u8 = 3;
    pub const SEQ: u8 = 4;
    pub const HMAC: u8 = 5;
    pub const RTT: u8 = 6;
    pub const ADDADDR: u8 = 7;
    pub const REMOVEADDR: u8 = 8;
    pub const PRIO: u8 = 9;
    pub const CLOSE: u8 = 10;
    pub const EXP: u8 = 11;
}

/// MP-DCCP protocol version of this implementation (RFC 9897 §3.1: "MUST
/// be set to 0 following this specification").
pub const MP_VERSION: u8 = 0;

/// Encode a version as a Multipath Capable (feature 10) value byte.
///
/// §3.1: the value is one byte, `Version (high 4 bits) | Unassigned (low 4
/// bits)`; several bytes may be listed in server-priority order. The text's
/// example "Change R(MP_CAPABLE, 1 0)" lists *versions*, not bytes; we
/// encode version `v` as `v << 4` as the figure says, send the unassigned
/// bits as zero and ignore them on receipt ([`mp_capable_version`]).
pub const fn mp_capable_value(version: u8) -> u8 {
    (version & 0x0f) << 4
}

/// The version carried in a Multipath Capable value byte (unassigned bits
/// ignored, RFC 9897 §3.1).
pub const fn mp_capable_version(value: u8) -> u8 {
    value >> 4
}

/// Length of the truncated HMAC-SHA256 in MP_HMAC (leftmost 160 bits).
pub const HMAC_LEN: usize = 20;

/// MP_KEY key types (RFC 9897 §3.2.4 and the Multipath Key Type registry,
/// §6): 0 and 255 are assigned, 1–254 reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyType {
    /// 0: plain-text 64-bit key.
    Plain,
    /// 255: experimental, private use; 64 bytes of key data.
    Experimental,
}

impl KeyType {
    /// The key type of a Key Type byte; `None` for the reserved 1–254.
    pub fn from_u8(v: u8) -> Option<KeyType> {
        match v {
            0 => Some(KeyType::Plain),
            255 => Some(KeyType::Experimental),
            _ => None,
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            KeyType::Plain => 0,
            KeyType::Experimental => 255,
        }
    }

    /// Key data length in bytes (RFC 9897 §3.2.4, table "MP_KEY key types").
    pub fn key_len(self) -> usize {
        match self {
            KeyType::Plain => 8,
            KeyType::Experimental => 64,
        }
    }
}

/// One key offered in MP_KEY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpKey {
    pub key_type: KeyType,
    pub data: Vec<u8>,
}

impl MpKey {
    /// A plain-text (type 0) key.
    pub fn plain(key: u64) -> MpKey {
        MpKey {
            key_type: KeyType::Plain,
            data: key.to_be_bytes().to_vec(),
        }
    }

    /// The key as a u64 if it is a plain-text key.
    pub fn plain_key(&self) -> Option<u64> {
        if self.key_type != KeyType::Plain {
            return None;
        }
        let b: [u8; 8] = self.data.as_slice().try_into().ok()?;
        Some(u64::from_be_bytes(b))
    }
}

/// MP_RTT RTT types (RFC 9897 §3.2.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RttType {
    /// 0: raw RTT of the last datagram round trip.
    Raw,
    /// 1: minimum over a period.
    Min,
    /// 2: maximum over a period.
    Max,
    /// 3: smoothed RTT.
    Smoothed,
    /// Anything else, preserved.
    Other(u8),
}

impl RttType {
    pub fn from_u8(v: u8) -> RttType {
        match v {
            0 => RttType::Raw,
            1 => RttType::Min,
            2 => RttType::Max,
            3 => RttType::Smoothed,
            o => RttType::Other(o),
        }
    }
    pub fn to_u8(self) -> u8 {
        match self {
            RttType::Raw => 0,
            RttType::Min => 1,
            RttType::Max => 2,
            RttType::Smoothed => 3,
            RttType::Other(o) => o,
        }
    }
}

/// One Multipath sub-option (RFC 9897 §3.2.1–§3.2.12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MpOption {
    /// MP_CONFIRM (0): confirms MP_ADDADDR / MP_REMOVEADDR / MP_PRIO. Each
    /// element is a complete sub-option; see the module doc for the layout.
    Confirm(Vec<MpOption>),
    /// MP_JOIN (1), length 12: the sender's Address ID, the peer's
    /// Connection Identifier and a fresh 32-bit nonce.
    Join { addr_id: u8, ci: u32, nonce: u32 },
    /// MP_FAST_CLOSE (2): the peer's key data, sent on Reset code 13.
    FastClose { key_data: Vec<u8> },
    /// MP_KEY (3): the sender's Connection Identifier and one or more keys
    /// (several only in the first Request).
    Key { ci: u32, keys: Vec<MpKey> },
    /// MP_SEQ (4), length 9: 48-bit connection-level sequence number.
    Seq(u64),
    /// MP_HMAC (5), length 23: leftmost 20 bytes of HMAC-SHA256.
    Hmac([u8; HMAC_LEN]),
    /// MP_RTT (6), length 12: RTT and age of the measurement, milliseconds.
    Rtt {
        rtt_type: RttType,
        rtt_ms: u32,
        age_ms: u32,
    },
    /// MP_ADDADDR (7): announce an address (optional port; nonce in the RFC
    /// form, absent in the draft form).
    AddAddr {
        addr_id: u8,
        nonce: Option<u32>,
        addr: IpAddr,
        port: Option<u16>,
    },
    /// MP_REMOVEADDR (8).
    RemoveAddr { addr_id: u8, nonce: Option<u32> },
    /// MP_PRIO (9), length 4: 0 = do not use … 3–15 primary.
    Prio(u8),
    /// MP_CLOSE (10): the peer's key data, on the first Close/CloseReq of
    /// each subflow.
    Close { key_data: Vec<u8> },
    /// MP_EXP (11): experimental, private use, ≤ 252 bytes.
    Exp(Vec<u8>),
}

impl MpOption {
    pub fn subtype(&self) -> u8 {
        match self {
            MpOption::Confirm(_) => subtype::CONFIRM,
            MpOption::Join { .. } => subtype::JOIN,
            MpOption::FastClose { .. } => subtype::FAST_CLOSE,
            MpOption::Key { .. } => subtype::KEY,
            MpOption::Seq(_) => subtype::SEQ,
            MpOption::Hmac(_) => subtype::HMAC,
            MpOption::Rtt { .. } => subtype::RTT,
            MpOption::AddAddr { .. } => subtype::ADDADDR,
            MpOption::RemoveAddr { .. } => subtype::REMOVEADDR,
            MpOption::Prio(_) => subtype::PRIO,
            MpOption::Close { .. } => subtype::CLOSE,
            MpOption::Exp(_) => subtype::EXP,
        }
    }

    /// The HMAC message RFC 9897 §3.2.6 defines for MP_ADDADDR
    /// (Address ID ‖ Nonce ‖ address ‖ port, two zero bytes when no port)
    /// and for MP_REMOVEADDR (Address ID ‖ Nonce), in network byte order.
    /// §3.2.6 also says "Solely the Address ID" for MP_REMOVEADDR and §3.2.9
    /// "the Address ID"; we follow the formula with the nonce (see the
    /// module doc). Draft-form options without a nonce leave it out.
    /// `None` for other sub-options (MP_JOIN's message is the two nonces,
    /// which only the connection knows).
    pub fn hmac_message(&self) -> Option<Vec<u8>> {
        match self {
            MpOption::AddAddr {
                addr_id,
                nonce,
                addr,
                port,
            } => {
                let mut m = Vec::with_capacity(23);
                m.push(*addr_id);
                if let Some(n) = nonce {
                    m.extend_from_slice(&n.to_be_bytes());
                }
                match addr {
                    IpAddr::V4(a) => m.extend_from_slice(&a.octets()),
                    IpAddr::V6(a) => m.extend_from_slice(&a.octets()),
                }
                m.extend_from_slice(&port.unwrap_or(0).to_be_bytes());
                Some(m)
            }
            MpOption::RemoveAddr { addr_id, nonce } => {
                let mut m = vec![*addr_id];
                if let Some(n) = nonce {
                    m.extend_from_slice(&n.to_be_bytes());
                }
                Some(m)
            }
            _ => None,
        }
    }
}

/// RFC 9897 §3.2.6 on receipt, the one place that decides which option an
/// MP_HMAC protects: "an MP_HMAC MUST directly follow its associated
/// multipath option"; one that follows nothing "MUST be ignored", unless
/// it is the single MP_HMAC of a packet without a protected option (the
/// third packet of an MP_JOIN handshake). An MP_HMAC after MP_PRIO is the
/// authenticated modes' extension (`Subflow::prio_authentic`), not a stray.
/// Both packet models walk their options through it: the connection's
/// `Segment::parse` and [`associate_hmacs`]. Padding and options skipped
/// for the packet type are not shown to it (RFC 4340 §5.8.1 lets Padding
/// stand anywhere); any other option breaks adjacency.
#[derive(Clone, Copy, Debug, Default)]
pub struct HmacPairing {
    /// The sub-option an MP_HMAC here would protect.
    after: Option<u8>,
    /// An MP_JOIN, MP_ADDADDR or MP_REMOVEADDR was seen.
    protected: bool,
    strays: u8,
    first_stray: Option<[u8; HMAC_LEN]>,
}

impl HmacPairing {
    /// The next option is not an MP_HMAC; `mp_subtype` is its sub-option
    /// when it is an MP option read without error.
    pub fn other(&mut self, mp_subtype: Option<u8>) {
        use subtype::{ADDADDR, JOIN, PRIO, REMOVEADDR};
        self.after = mp_subtype.filter(|t| matches!(*t, JOIN | ADDADDR | REMOVEADDR | PRIO));
        self.protected |= self.after.is_some_and(|t| t != PRIO);
    }

    /// The next option is MP_HMAC `h`: returns the sub-option it protects,
    /// or `None` for a stray (ignored unless it is the lone one).
    pub fn hmac(&mut self, h: &[u8; HMAC_LEN]) -> Option<u8> {
        let t = self.after.take();
        if t.is_none() {
            self.strays = self.strays.saturating_add(1);
            self.first_stray.get_or_insert(*h);
        }
        t
    }

    /// After the last option: the lone MP_HMAC of a join's third packet,
    /// and how many strays are ignored.
    pub fn finish(self) -> (Option<[u8; HMAC_LEN]>, u8) {
        if self.strays == 1 && !self.protected {
            return (self.first_stray, 0);
        }
        (None, self.strays)
    }
}

/// The MP_HMACs of one packet, paired with what they protect (RFC 9897
/// §3.2.6), see [`associate_hmacs`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HmacAssociation<'a> {
    /// Every MP_JOIN / MP_ADDADDR / MP_REMOVEADDR in wire order, with the
    /// MP_HMAC that directly follows it, or `None` ("HMAC wrong or
    /// missing": ignore an ADDADDR/REMOVEADDR, close the subflow of a JOIN).
    pub protected: Vec<(&'a MpOption, Option<&'a [u8; HMAC_LEN]>)>,
    /// The single MP_HMAC of a packet that carries none of those options:
    /// the third packet of an MP_JOIN handshake (the exception in §3.2.6).
    pub lone: Option<&'a [u8; HMAC_LEN]>,
    /// MP_HMACs that follow nothing they could protect; they "MUST be
    /// ignored".
    pub ignored: usize,
}

/// Pairs each MP_HMAC of `options` (a packet's DCCP options in wire
/// order) with the option it protects, by [`HmacPairing`].
pub fn associate_hmacs(options: &[super::DccpOption]) -> HmacAssociation<'_> {
    use super::DccpOption;
    let mut pairing = HmacPairing::default();
    let mut out = HmacAssociation::default();
    let mut first_stray = None;
    for o in options {
        match o {
            DccpOption::Padding => {}
            DccpOption::Multipath(MpOption::Hmac(h)) => match pairing.hmac(h) {
                Some(t) if t != subtype::PRIO => {
                    if let Some(last) = out.protected.last_mut() {
                        last.1 = Some(h);
                    }
                }
                Some(_) => {}
                None => {
                    first_stray.get_or_insert(h);
                }
            },
            DccpOption::Multipath(m) => {
                pairing.other(Some(m.subtype()));
                if matches!(
                    m,
                    MpOption::Join { .. } | MpOption::AddAddr { .. } | MpOption::RemoveAddr { .. }
                ) {
                    out.protected.push((m, None));
                }
            }
            _ => pairing.other(None),
        }
    }
    let (lone, ignored) = pairing.finish();
    out.lone = lone.and(first_stray);
    out.ignored = usize::from(ignored);
    out
}

/// Whether an MP_ADDADDR address may be used at all: "The advertisement of
/// broadcast or multicast IP addresses MUST be ignored by the recipient"
/// (RFC 9897 §3.2.8). Also refuses the unspecified address, which names no
/// host. (A directed broadcast address of some subnet cannot be told from a
/// host address without knowing the subnet; the limited broadcast is.)
pub fn addaddr_is_usable(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => !(a.is_multicast() || a.is_broadcast() || a.is_unspecified()),
        IpAddr::V6(a) => !(a.is_multicast() || a.is_unspecified()),
    }
}
