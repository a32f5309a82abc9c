//! The connection's compact view of one DCCP packet, built on [`crate::wire`].
//!
//! [`Segment`] holds the header fields and exactly the options the
//! connection acts on, in fixed-size fields (no option `Vec` per packet).
//! All bytes are read and written by `wire`: [`Segment::parse`] walks a
//! [`Packet`] view and its lazy [`crate::wire::OptionIter`] (MP_SEQ and the
//! Ack Vector are read without allocating; the rarer control sub-options go
//! through [`MpOption::parse`]), and [`Segment::emit`] writes each option
//! with [`DccpOption::emit`] / [`MpOption::emit`], the fixed header with
//! [`DccpRepr::emit`] and the checksum with [`Packet::fill_checksum`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::wire::mp::{subtype, RttType};
pub use crate::wire::mp::{KeyType, MpKey};
use crate::wire::option::{kind, OptionRules, OptionVerdict};
pub use crate::wire::{
    AckVector, DccpKind, DccpOption, DccpRepr, FeatureNum, FeatureValue, MpOption, OptionIter,
    Packet, PacketType, RawOption, ResetCode, WireError,
};

/// One feature-negotiation option (Change/Confirm L/R). `value` is the
/// non-negotiable value or the first entry of a server-priority list; the
/// list itself (a Change's preference list, or a Confirm's selected value
/// followed by the sender's preferences, RFC 4340 §6.1) is `list()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatOpt {
    /// `kind::CHANGE_L`, `CONFIRM_L`, `CHANGE_R` or `CONFIRM_R`.
    pub kind: u8,
    pub feature: FeatureNum,
    pub value: u64,
    /// False for an empty value ("not understood" / no agreement, §6.6.7).
    pub has_value: bool,
    /// A server-priority list, its first `n_list` entries (longer lists
    /// keep their first [`MAX_FEAT_LIST`]); empty for a one-value option.
    pub list_buf: [u8; MAX_FEAT_LIST],
    pub n_list: u8,
}

impl Default for FeatOpt {
    fn default() -> Self {
        FeatOpt {
            kind: 0,
            feature: FeatureNum::Other(0),
            value: 0,
            has_value: false,
            list_buf: [0; MAX_FEAT_LIST],
            n_list: 0,
        }
    }
}

impl FeatOpt {
    /// A one-value option (a non-negotiable value).
    pub fn with_value(kind: u8, feature: FeatureNum, value: u64) -> Self {
        FeatOpt {
            kind,
            feature,
            value,
            has_value: true,
            ..FeatOpt::default()
        }
    }

    /// A server-priority option carrying `list` (empty: an empty value);
    /// entries past [`MAX_FEAT_LIST`] are left out.
    pub fn with_list(kind: u8, feature: FeatureNum, list: &[u8]) -> Self {
        // One value is kept as `value` alone, as `push_feat` does.
        let n = if list.len() > 1 {
            list.len().min(MAX_FEAT_LIST)
        } else {
            0
        };
        let mut list_buf = [0; MAX_FEAT_LIST];
        list_buf[..n].copy_from_slice(&list[..n]);
        FeatOpt {
            kind,
            feature,
            value: list.first().map_or(0, |&b| u64::from(b)),
            has_value: !list.is_empty(),
            list_buf,
            n_list: n as u8,
        }
    }

    /// The server-priority list as sent (one entry for a one-value option).
    pub fn list(&self) -> Vec<u8> {
        match (self.n_list, self.has_value) {
            (0, true) => vec![self.value as u8],
            (0, false) => Vec::new(),
            (n, _) => self.list_buf[..n as usize].to_vec(),
        }
    }
}

/// Feature options kept per packet (the reference kernel's Response
/// carries ten); more are dropped.
pub const MAX_FEATS: usize = 16;
/// Entries of a server-priority list kept per option.
pub const MAX_FEAT_LIST: usize = 8;

/// The MP_KEY option (RFC 9897 §3.2.4): the connection identifier and the
/// keys offered, each `wire`'s [`MpKey`] (the one key type, any key type);
/// the third handshake packet echoes the receiver's key after the sender's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyOffer {
    pub ci: u32,
    pub keys: Vec<MpKey>,
}

impl KeyOffer {
    /// A plain-text (type 0) offer of `key`, echoing `peer` when given.
    pub fn plain(ci: u32, key: [u8; 8], peer: Option<[u8; 8]>) -> KeyOffer {
        let mut keys = vec![MpKey::plain(u64::from_be_bytes(key))];
        keys.extend(peer.map(|p| MpKey::plain(u64::from_be_bytes(p))));
        KeyOffer { ci, keys }
    }

    /// The `n`-th plain-text key offered (key types we do not support are
    /// passed over).
    fn nth_plain(&self, n: usize) -> Option<[u8; 8]> {
        self.keys
            .iter()
            .filter_map(MpKey::plain_key)
            .nth(n)
            .map(u64::to_be_bytes)
    }

    /// The sender's key, if it offered a plain-text one.
    pub fn plain_key(&self) -> Option<[u8; 8]> {
        self.nth_plain(0)
    }

    /// The receiver's key echoed back (third handshake packet).
    pub fn echoed_key(&self) -> Option<[u8; 8]> {
        self.nth_plain(1)
    }
}

/// MP_JOIN (RFC 9897 §3.2.2): address id, path token (peer CI), nonce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpJoin {
    pub addr_id: u8,
    pub token: u32,
    pub nonce: u32,
}

/// MP_RTT (RFC 9897 §3.2.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpRtt {
    /// 0 raw (latest), 1 min, 2 max, 3 smoothed.
    pub kind: u8,
    pub rtt_ms: u32,
    pub age_ms: u32,
}

/// MP_ADDADDR (RFC 9897 §3.2.8); its HMAC travels in the packet's MP_HMAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpAddAddr {
    pub addr_id: u8,
    pub nonce: u32,
    pub ip: IpAddr,
    pub port: Option<u16>,
}

/// MP_REMOVEADDR (RFC 9897 §3.2.9); its HMAC travels in the packet's MP_HMAC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpRemoveAddr {
    pub addr_id: u8,
    pub nonce: u32,
}

/// One item an MP_CONFIRM echoes (RFC 9897 §3.2.1): the MP_SEQ the
/// confirmed option arrived with, then the option copied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfirmItem {
    /// The MP_SEQ of the packet that carried the option; `None` when it
    /// came without one (an older peer), then the option is echoed alone.
    pub seq: Option<u64>,
    /// The confirmed sub-option (`subtype::PRIO`, `ADDADDR`, `REMOVEADDR`).
    pub kind: u8,
    /// Address id (ADDADDR/REMOVEADDR) or priority value (PRIO).
    pub id: u8,
    pub nonce: u32,
    /// ADDADDR's address and port.
    pub addr: Option<(IpAddr, Option<u16>)>,
}

impl ConfirmItem {
    /// The same option (whatever MP_SEQ it came with).
    pub fn same_option(&self, other: &ConfirmItem) -> bool {
        (self.kind, self.id, self.nonce, self.addr)
            == (other.kind, other.id, other.nonce, other.addr)
    }

    /// Appends this confirmation's elements: MP_SEQ, then the option.
    fn push_wire(self, out: &mut Vec<MpOption>) {
        let Some(o) = self.option() else { return };
        if let Some(s) = self.seq {
            out.push(MpOption::Seq(s & crate::wire::SEQ_MASK));
        }
        out.push(o);
    }

    fn option(self) -> Option<MpOption> {
        Some(match self.kind {
            subtype::PRIO => MpOption::Prio(self.id),
            subtype::REMOVEADDR => MpOption::RemoveAddr {
                addr_id: self.id,
                nonce: Some(self.nonce),
            },
            subtype::ADDADDR => {
                let (addr, port) = self.addr?;
                MpOption::AddAddr {
                    addr_id: self.id,
                    nonce: Some(self.nonce),
                    addr,
                    port,
                }
            }
            _ => return None,
        })
    }

    /// Reads MP_CONFIRM's elements: each MP_SEQ pairs with the option
    /// after it.
    fn from_wire(items: &[MpOption], mut each: impl FnMut(ConfirmItem)) {
        let mut seq = None;
        for o in items {
            let item = match *o {
                MpOption::Seq(s) => {
                    seq = Some(s);
                    continue;
                }
                MpOption::Prio(p) => ConfirmItem {
                    kind: subtype::PRIO,
                    id: p,
                    ..Default::default()
                },
                MpOption::RemoveAddr { addr_id, nonce } => ConfirmItem {
                    kind: subtype::REMOVEADDR,
                    id: addr_id,
                    nonce: nonce.unwrap_or(0),
                    ..Default::default()
                },
                MpOption::AddAddr {
                    addr_id,
                    nonce,
                    addr,
                    port,
                } => ConfirmItem {
                    kind: subtype::ADDADDR,
                    id: addr_id,
                    nonce: nonce.unwrap_or(0),
                    addr: Some((addr, port)),
                    ..Default::default()
                },
                _ => {
                    seq = None;
                    continue;
                }
            };
            each(ConfirmItem {
                seq: seq.take(),
                ..item
            });
        }
    }
}

pub const MAX_CONFIRMS: usize = 4;

/// The MP sub-options of one packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MpOpts {
    pub key: Option<KeyOffer>,
    pub join: Option<MpJoin>,
    /// MP_HMAC directly after MP_JOIN, or the lone MP_HMAC of a packet
    /// without a protected option (a join's third packet; RFC 9897 §3.2.6).
    pub hmac: Option<[u8; 20]>,
    /// MP_HMAC directly after MP_ADDADDR.
    pub addaddr_hmac: Option<[u8; 20]>,
    /// MP_HMAC directly after MP_REMOVEADDR.
    pub removeaddr_hmac: Option<[u8; 20]>,
    pub seq: Option<u64>,
    pub rtt: Option<MpRtt>,
    pub addaddr: Option<MpAddAddr>,
    pub removeaddr: Option<MpRemoveAddr>,
    pub prio: Option<u8>,
    /// MP_CLOSE carries the receiver's key (RFC 9897 §3.2.11).
    pub close: Option<[u8; 8]>,
    /// MP_FAST_CLOSE carries the receiver's key (RFC 9897 §3.2.3).
    pub fast_close: Option<[u8; 8]>,
    pub confirms: [ConfirmItem; MAX_CONFIRMS],
    pub n_confirms: u8,
}

impl MpOpts {
    pub fn confirms(&self) -> &[ConfirmItem] {
        &self.confirms[..self.n_confirms as usize]
    }
    pub fn push_confirm(&mut self, c: ConfirmItem) -> bool {
        if (self.n_confirms as usize) < MAX_CONFIRMS {
            self.confirms[self.n_confirms as usize] = c;
            self.n_confirms += 1;
            true
        } else {
            false
        }
    }
}

/// RFC 9897 §3.2.6 while parsing: "an MP_HMAC MUST directly follow its
/// associated multipath option"; one that follows nothing "MUST be
/// ignored", unless it is the single MP_HMAC of a packet with no protected
/// option (a join's third packet). Padding does not break adjacency
/// (as [`crate::wire::mp::associate_hmacs`]).
#[derive(Default)]
struct HmacPlacement {
    /// The protected sub-option (JOIN, ADDADDR, REMOVEADDR) just read.
    after: Option<u8>,
    strays: u8,
    first_stray: Option<[u8; 20]>,
}

impl HmacPlacement {
    /// Files MP_HMAC `h` under the option it follows.
    fn place(&mut self, m: &mut MpOpts, h: [u8; 20]) {
        match self.after.take() {
            Some(subtype::JOIN) => m.hmac = Some(h),
            Some(subtype::ADDADDR) => m.addaddr_hmac = Some(h),
            Some(subtype::REMOVEADDR) => m.removeaddr_hmac = Some(h),
            _ => {
                self.strays = self.strays.saturating_add(1);
                self.first_stray.get_or_insert(h);
            }
        }
    }

    /// After the last option: keeps a lone MP_HMAC, returns how many
    /// strays were ignored.
    fn finish(self, m: &mut MpOpts) -> u8 {
        let protected = m.join.is_some() || m.addaddr.is_some() || m.removeaddr.is_some();
        if self.strays == 1 && !protected {
            m.hmac = self.first_stray;
            return 0;
        }
        self.strays
    }
}

/// One DCCP packet as the connection sees it.
#[derive(Clone, Debug)]
pub struct Segment<'a> {
    pub ptype: PacketType,
    pub src_port: u16,
    pub dst_port: u16,
    /// 48-bit sequence number (24-bit when `short_seq`).
    pub seq: u64,
    pub ack: Option<u64>,
    pub short_seq: bool,
    pub service_code: u32,
    pub reset_code: ResetCode,
    pub feats: [FeatOpt; MAX_FEATS],
    pub n_feats: u8,
    /// Ack Vector cells (RFC 4340 §11.4) of a parsed packet.
    pub ack_vector: Option<&'a [u8]>,
    /// Ack Vector to emit (moved into the option while writing, then back).
    pub ack_vector_out: Option<AckVector>,
    pub mp: MpOpts,
    /// Elapsed Time (RFC 4340 §13.2), in 10 µs units: how long the sender
    /// held the packet named by the Acknowledgement Number before this ack.
    /// Only meaningful on packets with an ack; a second one is ignored.
    pub elapsed_10us: Option<u32>,
    /// Options decoded but unusable here (a second Elapsed Time, one
    /// without an Acknowledgement Number): counted, otherwise ignored.
    pub bad_opts: u8,
    /// Options RFC 4340 says to ignore on this packet type (Table 3).
    pub ignored_opts: u8,
    /// The first option that broke RFC 4340's rules: an invalid length or
    /// value (§5.8, Reset "Option Error") or a Mandatory option misplaced
    /// or before one we do not understand (§5.8.2, "Mandatory Error").
    /// Options after it are not read; the connection answers with the
    /// Reset [`WireError::reset_code`] names once the packet's sequence
    /// number is found valid.
    pub option_error: Option<WireError>,
    pub payload: &'a [u8],
}

impl<'a> Segment<'a> {
    pub fn new(ptype: PacketType, seq: u64) -> Self {
        Segment {
            ptype,
            src_port: 0,
            dst_port: 0,
            seq,
            ack: None,
            short_seq: false,
            service_code: 0,
            reset_code: ResetCode::Unspecified,
            feats: [FeatOpt::default(); MAX_FEATS],
            n_feats: 0,
            ack_vector: None,
            ack_vector_out: None,
            mp: MpOpts::default(),
            elapsed_10us: None,
            bad_opts: 0,
            ignored_opts: 0,
            option_error: None,
            payload: &[],
        }
    }

    pub fn feats(&self) -> &[FeatOpt] {
        &self.feats[..self.n_feats as usize]
    }

    /// Adds a feature option; `value: None` is an empty value.
    pub fn push_feat(&mut self, kind: u8, feature: FeatureNum, value: Option<u64>) {
        if (self.n_feats as usize) < MAX_FEATS {
            self.feats[self.n_feats as usize] = FeatOpt {
                list_buf: [0; MAX_FEAT_LIST],
                n_list: 0,
                kind,
                feature,
                value: value.unwrap_or(0),
                has_value: value.is_some(),
            };
            self.n_feats += 1;
        }
    }

    /// Adds a server-priority feature option carrying `list` (a Change's
    /// preferences or a Confirm's selected value + preferences); an empty
    /// list is an empty value.
    pub fn push_feat_list(&mut self, kind: u8, feature: FeatureNum, list: &[u8]) {
        self.push_feat_opt(FeatOpt::with_list(kind, feature, list));
    }

    /// Adds `f` as it is (a Confirm built by the feature negotiation).
    pub fn push_feat_opt(&mut self, f: FeatOpt) {
        if (self.n_feats as usize) < MAX_FEATS {
            self.feats[self.n_feats as usize] = f;
            self.n_feats += 1;
        }
    }

    /// First feature option of `kind` for `feature`.
    pub fn feat(&self, kind: u8, feature: FeatureNum) -> Option<FeatOpt> {
        self.feats()
            .iter()
            .copied()
            .find(|f| f.kind == kind && f.feature == feature)
    }

    /// Parses untrusted bytes with `wire`. `addrs` = (source, destination)
    /// for checksum verification, `None` to skip it. A malformed header is
    /// an error; a malformed option is recorded in `option_error` (the
    /// header is still good enough for the sequence checks).
    pub fn parse(data: &'a [u8], addrs: Option<(IpAddr, IpAddr)>) -> Result<Self, WireError> {
        let p = Packet::new_checked(data)?;
        if let Some(a) = addrs {
            p.verify_checksum(a)?;
        }
        let mut s = Segment::new(p.packet_type(), p.seq());
        s.src_port = p.src_port();
        s.dst_port = p.dst_port();
        s.short_seq = p.short_seq();
        s.ack = p.ack();
        s.service_code = p.service_code().unwrap_or(0);
        if let Some((code, _)) = p.reset() {
            s.reset_code = code;
        }
        // Borrow options and payload from `data` itself (the view is a copy).
        let hl = p.header_len();
        let fixed = if s.short_seq { 12 } else { 16 } + s.ptype.subheader_len(s.short_seq);
        let area = data.get(fixed..hl).ok_or(WireError::BadDataOffset)?;
        let mut rules = OptionRules::new(s.ptype);
        let mut hmacs = HmacPlacement::default();
        let walked = (|| {
            for o in OptionIter::new(area) {
                let o = o?;
                match rules.check(&o)? {
                    OptionVerdict::Use => s.absorb(&o, &mut hmacs)?,
                    OptionVerdict::Mandatory => hmacs.after = None,
                    OptionVerdict::Skip => {}
                }
            }
            rules.finish()
        })();
        s.option_error = walked.err();
        let strays = hmacs.finish(&mut s.mp);
        s.ignored_opts = u8::try_from(rules.ignored)
            .unwrap_or(u8::MAX)
            .saturating_add(strays);
        s.payload = &data[hl..];
        Ok(s)
    }

    /// Takes in one option that passed [`OptionRules`]; an error is an
    /// invalid option (RFC 4340 §5.8).
    fn absorb(&mut self, o: &RawOption<'a>, hmacs: &mut HmacPlacement) -> Result<(), WireError> {
        // Any option but an MP_HMAC ends the adjacency of the one before.
        let after = hmacs.after.take();
        match o.kind {
            kind::CHANGE_L | kind::CONFIRM_L | kind::CHANGE_R | kind::CONFIRM_R => {
                let (feature, value) = match o.to_option()? {
                    DccpOption::ChangeL { feature, value }
                    | DccpOption::ConfirmL { feature, value }
                    | DccpOption::ChangeR { feature, value }
                    | DccpOption::ConfirmR { feature, value } => (feature, value),
                    _ => return Err(WireError::BadOptionValue { kind: o.kind }),
                };
                match value {
                    FeatureValue::Empty => self.push_feat(o.kind, feature, None),
                    FeatureValue::NonNegotiable(v) => self.push_feat(o.kind, feature, Some(v)),
                    FeatureValue::ServerPriority(l) | FeatureValue::Unknown(l) => {
                        self.push_feat_list(o.kind, feature, &l)
                    }
                }
            }
            kind::ACK_VECTOR_0 | kind::ACK_VECTOR_1 if !o.data.is_empty() => {
                self.ack_vector = Some(o.data);
            }
            // §13.2: the delay belongs to the Acknowledgement Number, so
            // it means nothing without one; two of them are ambiguous.
            kind::ELAPSED_TIME => match o.to_option()? {
                DccpOption::ElapsedTime(e) if self.ack.is_some() && self.elapsed_10us.is_none() => {
                    self.elapsed_10us = Some(e)
                }
                _ => self.bad_opts = self.bad_opts.saturating_add(1),
            },
            kind::MULTIPATH => {
                if let Some(seq) = o.mp_seq() {
                    self.mp.seq = Some(seq);
                } else {
                    match MpOption::parse(o.data) {
                        Ok(MpOption::Hmac(h)) => {
                            hmacs.after = after;
                            hmacs.place(&mut self.mp, h);
                        }
                        Ok(m) => {
                            if matches!(
                                m,
                                MpOption::Join { .. }
                                    | MpOption::AddAddr { .. }
                                    | MpOption::RemoveAddr { .. }
                            ) {
                                hmacs.after = o.data.first().copied();
                            }
                            absorb_mp(&mut self.mp, m)
                        }
                        // RFC 9897 §3.2.4 / §3.6: an MP_KEY we cannot read
                        // (a reserved key type, a bad length) offers no key
                        // type to agree on. That is a fallback to plain
                        // DCCP (or, on the third packet, a closed subflow),
                        // not an Option Error: a key-less MP_KEY says so.
                        Err(_) if o.data.first() == Some(&subtype::KEY) => {
                            self.mp.key = Some(KeyOffer::default());
                            self.bad_opts = self.bad_opts.saturating_add(1);
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            // Not acted on, but a length Table 3 forbids is still an
            // invalid option (§5.8). These are rare: the check's copy of a
            // cookie or drop record costs nothing on the data path.
            kind::INIT_COOKIE
            | kind::NDP_COUNT
            | kind::DATA_DROPPED
            | kind::TIMESTAMP
            | kind::TIMESTAMP_ECHO => {
                o.to_option()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes the packet into `buf` with the checksum for `addrs` =
    /// (source, destination); returns its length, or `None` when `buf` is
    /// too small or the header would exceed 1020 bytes.
    pub fn emit(&mut self, buf: &mut [u8], addrs: (IpAddr, IpAddr)) -> Option<usize> {
        let fixed = 16 + self.ptype.subheader_len(false);
        // Options first, right after the fixed header.
        let mut p = fixed;
        for f in self.feats() {
            let value = match (f.has_value, f.feature.nn_len()) {
                (false, _) => FeatureValue::Empty,
                (true, Some(_)) => FeatureValue::NonNegotiable(f.value),
                (true, None) => FeatureValue::ServerPriority(f.list()),
            };
            let (feature, value) = (f.feature, value);
            let o = match f.kind {
                kind::CHANGE_L => DccpOption::ChangeL { feature, value },
                kind::CONFIRM_L => DccpOption::ConfirmL { feature, value },
                kind::CHANGE_R => DccpOption::ChangeR { feature, value },
                _ => DccpOption::ConfirmR { feature, value },
            };
            p += o.emit(buf.get_mut(p..)?).ok()?;
        }
        if let Some(av) = self.ack_vector_out.take() {
            let o = DccpOption::AckVector(av);
            let r = buf.get_mut(p..).and_then(|b| o.emit(b).ok());
            if let DccpOption::AckVector(av) = o {
                self.ack_vector_out = Some(av);
            }
            p += r?;
        }
        if let (Some(e), true) = (self.elapsed_10us, self.ptype.has_ack()) {
            p += DccpOption::ElapsedTime(e).emit(buf.get_mut(p..)?).ok()?;
        }
        p = emit_mp(&self.mp, buf, p)?;
        let hl = p.div_ceil(4) * 4;
        let total = hl + self.payload.len();
        if hl > crate::wire::MAX_HEADER_LEN || buf.len() < total {
            return None;
        }
        buf[p..hl].fill(0); // Padding options
        buf[hl..total].copy_from_slice(self.payload);
        let kind = self.kind();
        let repr = DccpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: self.seq & crate::wire::SEQ_MASK,
            kind,
            ..DccpRepr::default()
        };
        // Fixed header only (no options, no payload): `repr.options` is empty.
        repr.emit(&mut buf[..fixed], &[], None).ok()?;
        let mut pkt = Packet::new_unchecked(&mut buf[..total]);
        pkt.set_data_offset((hl / 4) as u8);
        pkt.fill_checksum(addrs).ok()?;
        Some(total)
    }

    fn kind(&self) -> DccpKind {
        let ack = self.ack.unwrap_or(0) & crate::wire::SEQ_MASK;
        match self.ptype {
            PacketType::Request => DccpKind::Request {
                service_code: self.service_code,
            },
            PacketType::Response => DccpKind::Response {
                ack,
                service_code: self.service_code,
            },
            PacketType::Data => DccpKind::Data,
            PacketType::Ack => DccpKind::Ack { ack },
            PacketType::DataAck => DccpKind::DataAck { ack },
            PacketType::CloseReq => DccpKind::CloseReq { ack },
            PacketType::Close => DccpKind::Close { ack },
            PacketType::Reset => DccpKind::Reset {
                ack,
                code: self.reset_code,
                data: [0; 3],
            },
            PacketType::Sync => DccpKind::Sync { ack },
            PacketType::SyncAck => DccpKind::SyncAck { ack },
        }
    }
}

/// Folds one parsed MP sub-option into `m`.
fn absorb_mp(m: &mut MpOpts, o: MpOption) {
    match o {
        MpOption::Key { ci, keys } => m.key = Some(KeyOffer { ci, keys }),
        MpOption::Join { addr_id, ci, nonce } => {
            m.join = Some(MpJoin {
                addr_id,
                token: ci,
                nonce,
            })
        }
        // Placed by `HmacPlacement` before this is reached.
        MpOption::Hmac(_) => {}
        MpOption::Seq(s) => m.seq = Some(s),
        MpOption::Rtt {
            rtt_type,
            rtt_ms,
            age_ms,
        } => {
            m.rtt = Some(MpRtt {
                kind: rtt_type.to_u8(),
                rtt_ms,
                age_ms,
            })
        }
        MpOption::AddAddr {
            addr_id,
            nonce,
            addr,
            port,
        } => {
            m.addaddr = Some(MpAddAddr {
                addr_id,
                nonce: nonce.unwrap_or(0),
                ip: addr,
                port,
            })
        }
        MpOption::RemoveAddr { addr_id, nonce } => {
            m.removeaddr = Some(MpRemoveAddr {
                addr_id,
                nonce: nonce.unwrap_or(0),
            })
        }
        MpOption::Prio(p) => m.prio = Some(p),
        MpOption::Close { key_data } => m.close = key_data.as_slice().try_into().ok(),
        MpOption::FastClose { key_data } => m.fast_close = key_data.as_slice().try_into().ok(),
        MpOption::Confirm(items) => ConfirmItem::from_wire(&items, |i| {
            m.push_confirm(i);
        }),
        MpOption::Exp(_) => {}
    }
}

/// Emits the MP sub-options of `m` at `buf[p..]` with `wire`; returns the
/// new offset.
fn emit_mp(m: &MpOpts, buf: &mut [u8], mut p: usize) -> Option<usize> {
    let mut put = |o: MpOption, p: &mut usize| -> Option<()> {
        *p += o.emit(buf.get_mut(*p..)?).ok()?;
        Some(())
    };
    if let Some(k) = &m.key {
        let keys = k.keys.clone();
        put(MpOption::Key { ci: k.ci, keys }, &mut p)?;
    }
    // RFC 9897 §3.2.6: each MP_HMAC directly after the option it
    // protects; `hmac` alone (a join's third packet) where it stands.
    if let Some(j) = m.join {
        put(
            MpOption::Join {
                addr_id: j.addr_id,
                ci: j.token,
                nonce: j.nonce,
            },
            &mut p,
        )?;
    }
    if let Some(h) = m.hmac {
        put(MpOption::Hmac(h), &mut p)?;
    }
    if let Some(s) = m.seq {
        put(MpOption::Seq(s & crate::wire::SEQ_MASK), &mut p)?;
    }
    if let Some(r) = m.rtt {
        put(
            MpOption::Rtt {
                rtt_type: RttType::from_u8(r.kind),
                rtt_ms: r.rtt_ms,
                age_ms: r.age_ms,
            },
            &mut p,
        )?;
    }
    if let Some(a) = m.addaddr {
        put(
            MpOption::AddAddr {
                addr_id: a.addr_id,
                nonce: Some(a.nonce),
                addr: a.ip,
                port: a.port,
            },
            &mut p,
        )?;
        if let Some(h) = m.addaddr_hmac {
            put(MpOption::Hmac(h), &mut p)?;
        }
    }
    if let Some(r) = m.removeaddr {
        put(
            MpOption::RemoveAddr {
                addr_id: r.addr_id,
                nonce: Some(r.nonce),
            },
            &mut p,
        )?;
        if let Some(h) = m.removeaddr_hmac {
            put(MpOption::Hmac(h), &mut p)?;
        }
    }
    if let Some(pr) = m.prio {
        put(MpOption::Prio(pr), &mut p)?;
    }
    if let Some(k) = m.close {
        put(
            MpOption::Close {
                key_data: k.to_vec(),
            },
            &mut p,
        )?;
    }
    if let Some(k) = m.fast_close {
        put(
            MpOption::FastClose {
                key_data: k.to_vec(),
            },
            &mut p,
        )?;
    }
    if m.n_confirms > 0 {
        let mut items = Vec::with_capacity(2 * m.confirms().len());
        for c in m.confirms() {
            c.push_wire(&mut items);
        }
        put(MpOption::Confirm(items), &mut p)?;
    }
    Some(p)
}

/// Pseudo-header addresses of a path: its configured local/remote IPs, or the
/// unspecified IPv4 address when the driver did not give them.
pub fn path_ips(local: Option<SocketAddr>, remote: Option<SocketAddr>) -> (IpAddr, IpAddr) {
    let un = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    (local.map_or(un, |a| a.ip()), remote.map_or(un, |a| a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mp::subtype as mp_sub;

    fn v4() -> (IpAddr, IpAddr) {
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
    }

    #[test]
    fn round_trip_through_wire() {
        let mut s = Segment::new(PacketType::DataAck, 0xABCD_EF01_2345);
        s.ack = Some(77);
        s.push_feat(kind::CHANGE_L, FeatureNum::AckRatio, Some(3));
        s.push_feat(kind::CONFIRM_R, FeatureNum::MultipathCapable, Some(0));
        s.push_feat(kind::CONFIRM_R, FeatureNum::Ccid, None);
        let av = [0x05u8, 0xC1, 0x03];
        s.ack_vector_out = Some(AckVector {
            nonce: 0,
            cells: av.to_vec(),
        });
        s.mp.seq = Some((1 << 48) - 1);
        s.mp.addaddr_hmac = Some([7; 20]);
        s.mp.key = Some(KeyOffer::plain(0xdead_beef, [1; 8], Some([2; 8])));
        s.mp.addaddr = Some(MpAddAddr {
            addr_id: 3,
            nonce: 9,
            ip: "192.0.2.7".parse().unwrap(),
            port: Some(4242),
        });
        s.mp.push_confirm(ConfirmItem {
            kind: subtype::PRIO,
            id: 2,
            ..ConfirmItem::default()
        });
        s.mp.push_confirm(ConfirmItem {
            seq: Some(0x1234_5678_9abc),
            kind: subtype::ADDADDR,
            id: 4,
            nonce: 77,
            addr: Some(("2001:db8::1".parse().unwrap(), None)),
        });
        s.payload = b"hello";
        s.elapsed_10us = Some(70_000);
        let mut buf = [0u8; 1500];
        let n = s.emit(&mut buf, v4()).unwrap();
        let p = Segment::parse(&buf[..n], Some(v4())).unwrap();
        assert_eq!(p.ptype, PacketType::DataAck);
        assert_eq!(p.seq, s.seq);
        assert_eq!(p.ack, Some(77));
        assert_eq!(p.feats(), s.feats());
        assert_eq!(p.ack_vector, Some(&av[..]));
        assert_eq!(p.mp, s.mp);
        assert_eq!(p.elapsed_10us, Some(70_000));
        assert_eq!(p.payload, b"hello");
        assert_eq!(p.bad_opts, 0);
        // wire's owned parser agrees.
        let (repr, hl) = DccpRepr::parse(&buf[..n], Some(v4())).unwrap();
        assert_eq!(repr.mp_seq(), Some((1 << 48) - 1));
        assert_eq!(&buf[hl..n], b"hello");
        // A flipped payload bit breaks the checksum.
        buf[n - 1] ^= 1;
        assert_eq!(
            Segment::parse(&buf[..n], Some(v4())).unwrap_err(),
            WireError::BadChecksum
        );
    }

    #[test]
    fn every_type_round_trips() {
        for t in 0..10u8 {
            let ty = PacketType::from_u8(t).unwrap();
            let mut s = Segment::new(ty, 5);
            if ty.has_ack() {
                s.ack = Some(4);
            }
            s.reset_code = ResetCode::MpFastClose;
            s.service_code = 42;
            let mut buf = [0u8; 64];
            let n = s.emit(&mut buf, v4()).unwrap();
            let p = Segment::parse(&buf[..n], Some(v4())).unwrap();
            assert_eq!((p.ptype, p.seq, p.ack), (ty, 5, s.ack));
            if ty == PacketType::Reset {
                assert_eq!(p.reset_code, ResetCode::MpFastClose);
            }
        }
    }

    #[test]
    fn elapsed_time_needs_an_ack_and_a_second_one_is_ignored() {
        let mut buf = [0u8; 128];
        // Data carries no acknowledgement: nothing to time, counted.
        let mut s = Segment::new(PacketType::Data, 9);
        let n = s.emit(&mut buf, v4()).unwrap();
        let mut raw = buf[..n].to_vec();
        // Append Elapsed Time (2-byte form) by hand: kind 43, len 4.
        let hl = raw[4] as usize * 4;
        raw.splice(hl..hl, [kind::ELAPSED_TIME, 4, 0x03, 0xe8]);
        raw[4] += 1;
        let p = Segment::parse(&raw, None).unwrap();
        // RFC 4340 Table 3: Elapsed Time on DCCP-Data is ignored.
        assert_eq!((p.elapsed_10us, p.bad_opts, p.ignored_opts), (None, 0, 1));
        // An Ack with two: the first counts, the second is ignored.
        let mut s = Segment::new(PacketType::Ack, 9);
        s.ack = Some(8);
        s.elapsed_10us = Some(1000);
        let n = s.emit(&mut buf, v4()).unwrap();
        let mut raw = buf[..n].to_vec();
        let hl = raw[4] as usize * 4;
        raw.splice(hl..hl, [kind::ELAPSED_TIME, 4, 0, 1]);
        raw[4] += 1;
        let p = Segment::parse(&raw, None).unwrap();
        assert_eq!((p.elapsed_10us, p.bad_opts), (Some(1000), 1));
    }

    /// `opts` spliced in front of the options of an Ack numbered 9.
    fn ack_with(opts: &[u8]) -> Vec<u8> {
        let mut s = Segment::new(PacketType::Ack, 9);
        s.ack = Some(8);
        let mut buf = [0u8; 128];
        let n = s.emit(&mut buf, v4()).unwrap();
        let mut raw = buf[..n].to_vec();
        let hl = raw[4] as usize * 4;
        let mut area = opts.to_vec();
        area.resize(opts.len().div_ceil(4) * 4, 0);
        raw.splice(hl..hl, area.iter().copied());
        raw[4] += (area.len() / 4) as u8;
        raw
    }

    #[test]
    fn rfc4340_option_rules_are_applied_and_the_header_still_parses() {
        let err = |opts: &[u8]| Segment::parse(&ack_with(opts), None).unwrap().option_error;
        // §5.8.2: Mandatory before an option not understood.
        assert_eq!(
            err(&[kind::MANDATORY, 50, 2]),
            Some(WireError::MandatoryFailure { kind: 50 })
        );
        // §5.8.2: Mandatory last (before padding) or twice.
        let misplaced = Some(WireError::BadOptionValue {
            kind: kind::MANDATORY,
        });
        assert_eq!(err(&[kind::MANDATORY]), misplaced);
        assert_eq!(err(&[kind::MANDATORY, kind::MANDATORY, 2]), misplaced);
        // §5.8: a known option with a length its type forbids.
        assert_eq!(
            err(&[kind::TIMESTAMP, 3, 0]),
            Some(WireError::BadOptionValue {
                kind: kind::TIMESTAMP
            })
        );
        // A length running past the options area.
        assert_eq!(
            err(&[40, 9, 0]),
            Some(WireError::BadOptionLength { kind: 40 })
        );
        // An MP sub-option that does not parse.
        assert!(matches!(
            err(&[kind::MULTIPATH, 5, 1, 0, 0]),
            Some(WireError::BadMpOption { .. })
        ));
        // RFC 9897 §3.6: an MP_KEY with a reserved key type (7) is no
        // Option Error but an offer of no usable key (fallback).
        let raw = ack_with(&[kind::MULTIPATH, 9, mp_sub::KEY, 0, 0, 0, 0, 1, 7]);
        let p = Segment::parse(&raw, None).unwrap();
        assert_eq!(p.option_error, None);
        assert_eq!(
            (p.mp.key.as_ref().map(KeyOffer::plain_key), p.bad_opts),
            (Some(None), 1)
        );
        // Mandatory before an understood option, unknown options alone:
        // fine (§5.8: unknown options are ignored).
        assert_eq!(err(&[kind::MANDATORY, kind::SLOW_RECEIVER]), None);
        assert_eq!(err(&[50, 2]), None);
        // Every error maps to the Reset RFC 4340 names.
        for (opts, code) in [
            (&[kind::MANDATORY, 50, 2][..], ResetCode::MandatoryError),
            (&[kind::MANDATORY][..], ResetCode::OptionError),
            (&[kind::TIMESTAMP, 3, 0][..], ResetCode::OptionError),
        ] {
            assert_eq!(err(opts).and_then(WireError::reset_code), Some(code));
        }
    }

    #[test]
    fn each_mp_hmac_belongs_to_the_option_it_directly_follows() {
        let bytes = |opts: &[MpOption]| {
            let mut b = Vec::new();
            for o in opts {
                let mut buf = [0u8; 64];
                let n = DccpOption::Multipath(o.clone()).emit(&mut buf).unwrap();
                b.extend_from_slice(&buf[..n]);
            }
            ack_with(&b)
        };
        let add = MpOption::AddAddr {
            addr_id: 3,
            nonce: Some(9),
            addr: "192.0.2.1".parse().unwrap(),
            port: None,
        };
        let rem = MpOption::RemoveAddr {
            addr_id: 4,
            nonce: Some(8),
        };
        let (ta, tr) = (MpOption::Hmac([1; 20]), MpOption::Hmac([2; 20]));
        // RFC 9897 §3.2.6: one tag per protected option, in order.
        let raw = bytes(&[add.clone(), ta.clone(), rem.clone(), tr.clone()]);
        let p = Segment::parse(&raw, None).unwrap();
        let tags = (p.mp.addaddr_hmac, p.mp.removeaddr_hmac, p.mp.hmac);
        assert_eq!(tags, (Some([1; 20]), Some([2; 20]), None));
        assert_eq!(p.ignored_opts, 0);
        // Before its option, or after another option: ignored, counted.
        let raw = bytes(&[ta.clone(), add.clone(), MpOption::Seq(5), tr.clone()]);
        let p = Segment::parse(&raw, None).unwrap();
        let tags = (p.mp.addaddr_hmac, p.mp.removeaddr_hmac, p.mp.hmac);
        assert_eq!((tags, p.ignored_opts), ((None, None, None), 2));
        // The single MP_HMAC of a packet with no protected option is kept
        // (a join's third packet); two such are both ignored.
        let raw = bytes(&[MpOption::Seq(5), ta.clone()]);
        let p = Segment::parse(&raw, None).unwrap();
        assert_eq!(p.mp.hmac, Some([1; 20]));
        let raw = bytes(&[ta, tr]);
        let p = Segment::parse(&raw, None).unwrap();
        assert_eq!((p.mp.hmac, p.ignored_opts), (None, 2));
    }

    #[test]
    fn options_ignored_on_the_packet_type_are_not_acted_on() {
        // Table 3: feature negotiation on DCCP-Data is ignored.
        let mut s = Segment::new(PacketType::Data, 9);
        s.push_feat(kind::CHANGE_L, FeatureNum::AckRatio, Some(3));
        let mut buf = [0u8; 64];
        let n = s.emit(&mut buf, v4()).unwrap();
        let p = Segment::parse(&buf[..n], None).unwrap();
        assert_eq!((p.feats().len(), p.ignored_opts), (0, 1));
        assert_eq!(p.option_error, None);
        // Mandatory on Data is ignored too, so it cannot make the next
        // (ignored) option an error.
        let mut raw = buf[..n].to_vec();
        let hl = raw[4] as usize * 4;
        raw.splice(hl..hl, [kind::MANDATORY, 50, 2, 0]);
        raw[4] += 1;
        let p = Segment::parse(&raw, None).unwrap();
        assert_eq!(p.option_error, None);
    }

    #[test]
    fn hostile_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut buf = [0u8; 96];
        for _ in 0..20_000 {
            let n = rng.gen_range(0..buf.len());
            rng.fill(&mut buf[..n]);
            if n > 8 {
                buf[4] = rng.gen_range(0..(n as u8 / 4 + 2));
                buf[8] = (rng.gen_range(0..10u8) << 1) | 1;
                if rng.gen_bool(0.5) {
                    buf[16.min(n - 1)] = 46;
                }
            }
            let _ = Segment::parse(&buf[..n], None);
        }
    }
}
