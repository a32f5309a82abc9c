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
    Packet, PacketType, RawOption, ResetCode, WireError, WireProfile,
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

    /// Key type 255's data (the authenticated handshake), when offered.
    pub fn experimental(&self) -> Option<&[u8]> {
        self.keys
            .iter()
            .find(|k| k.key_type == crate::wire::mp::KeyType::Experimental)
            .map(|k| k.data.as_slice())
    }

    /// A key type 255 offer carrying `data` (exactly 64 bytes), alone: no
    /// other key type next to it, so nothing to downgrade to (RFC 9897 §6).
    pub fn experimental_only(ci: u32, data: &[u8]) -> KeyOffer {
        KeyOffer {
            ci,
            keys: vec![MpKey {
                key_type: crate::wire::mp::KeyType::Experimental,
                data: data.to_vec(),
            }],
        }
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
    fn push_wire(self, out: &mut Vec<MpOption>, profile: WireProfile) {
        let Some(o) = self.option(profile.addr_nonce()) else {
            return;
        };
        if let Some(s) = self.seq {
            out.push(MpOption::Seq(s & crate::wire::SEQ_MASK));
        }
        out.push(o);
    }

    fn option(self, with_nonce: bool) -> Option<MpOption> {
        let nonce = with_nonce.then_some(self.nonce);
        Some(match self.kind {
            subtype::PRIO => MpOption::Prio(self.id),
            subtype::REMOVEADDR => MpOption::RemoveAddr {
                addr_id: self.id,
                nonce,
            },
            subtype::ADDADDR => {
                let (addr, port) = self.addr?;
                MpOption::AddAddr {
                    addr_id: self.id,
                    nonce,
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
    /// MP_EXP's body (RFC 9897 §3.2.12; at most 252 bytes, the wire
    /// parser's bound): the authenticated handshake's messages beyond key
    /// type 255's 64 bytes (docs/SECURITY.md §3). The first one is kept.
    pub exp: Option<Vec<u8>>,
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
        Self::parse_in(data, addrs, WireProfile::Rfc9897)
    }

    /// [`Segment::parse`] with option 46 read in `profile`'s layout (a
    /// reference kernel's, docs/INTEROP.md).
    pub fn parse_in(
        data: &'a [u8],
        addrs: Option<(IpAddr, IpAddr)>,
        profile: WireProfile,
    ) -> Result<Self, WireError> {
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
                    OptionVerdict::Use => s.absorb(&o, &mut hmacs, profile)?,
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
    fn absorb(
        &mut self,
        o: &RawOption<'a>,
        hmacs: &mut HmacPlacement,
        profile: WireProfile,
    ) -> Result<(), WireError> {
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
                    match profile.parse_mp(o.data) {
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
        self.emit_in(buf, addrs, WireProfile::Rfc9897)
    }

    /// [`Segment::emit`] with option 46 written in `profile`'s layout.
    pub fn emit_in(
        &mut self,
        buf: &mut [u8],
        addrs: (IpAddr, IpAddr),
        profile: WireProfile,
    ) -> Option<usize> {
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
        p = emit_mp(&self.mp, buf, p, profile)?;
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
        MpOption::Exp(d) => {
            m.exp.get_or_insert(d);
        }
    }
}

/// Emits the MP sub-options of `m` at `buf[p..]` with `wire`; returns the
/// new offset.
fn emit_mp(m: &MpOpts, buf: &mut [u8], mut p: usize, profile: WireProfile) -> Option<usize> {
    let mut put = |o: MpOption, p: &mut usize| -> Option<()> {
        *p += profile.emit_mp(&o, buf.get_mut(*p..)?).ok()?;
        Some(())
    };
    // The reference's ADDADDR/REMOVEADDR carry no nonce (BUILD.md "k4.14").
    let nonce = |n: u32| profile.addr_nonce().then_some(n);
    if let Some(k) = &m.key {
        let keys = k.keys.clone();
        put(MpOption::Key { ci: k.ci, keys }, &mut p)?;
    }
    if let Some(e) = &m.exp {
        put(MpOption::Exp(e.clone()), &mut p)?;
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
                nonce: nonce(a.nonce),
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
                nonce: nonce(r.nonce),
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
            c.push_wire(&mut items, profile);
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
#[path = "codec_tests.rs"]
mod tests;
