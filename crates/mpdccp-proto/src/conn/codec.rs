//! The connection's compact view of one DCCP packet, built on [`crate::wire`].
//!
//! [`Segment`] holds the header fields and exactly the options the
//! connection acts on, in fixed-size fields (no option `Vec` per packet).
//! All bytes are read and written by `wire`: [`Segment::parse`] walks a
//! [`Packet`] view's options with [`OptionRules::walk`] (MP_SEQ and the
//! Ack Vector are read without allocating; the rarer control sub-options go
//! through [`MpOption::parse_in`], MP_HMACs are paired by `wire`'s
//! `HmacPairing`), and [`Segment::emit`] appends its options to a
//! [`PacketBuilder`], which writes the fixed header, payload and checksum,
//! as for [`DccpRepr::emit`]. Option 46 follows the connection's wire
//! profile ([`Segment::parse_in`], [`Segment::emit_in`]; RFC 9897 for
//! [`Segment::parse`] / [`Segment::emit`]); the MP half is `codec_mp.rs`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::wire::mp::subtype;
use crate::wire::mp::HmacPairing;
pub use crate::wire::mp::{KeyType, MpKey};
use crate::wire::option::{kind, OptionRules, OptionVerdict};
pub use crate::wire::{
    AckVector, DccpKind, DccpOption, DccpRepr, FeatureNum, FeatureValue, MpOption, OptionIter,
    Packet, PacketType, RawOption, ResetCode, WireError, WireProfile,
};
use crate::wire::{Finish, Header, PacketBuilder};
use codec_mp::{absorb_mp, emit_mp};
pub use codec_mp::{
    confirm_len, ConfirmItem, KeyOffer, MpAddAddr, MpJoin, MpOpts, MpRemoveAddr, MpRtt,
    MAX_CONFIRMS,
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

    /// The option as `wire` writes it.
    fn to_option(self) -> DccpOption {
        let value = match (self.has_value, self.feature.nn_len()) {
            (false, _) => FeatureValue::Empty,
            (true, Some(_)) => FeatureValue::NonNegotiable(self.value),
            (true, None) => FeatureValue::ServerPriority(self.list()),
        };
        let feature = self.feature;
        match self.kind {
            kind::CHANGE_L => DccpOption::ChangeL { feature, value },
            kind::CONFIRM_L => DccpOption::ConfirmL { feature, value },
            kind::CHANGE_R => DccpOption::ChangeR { feature, value },
            _ => DccpOption::ConfirmR { feature, value },
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
    /// Feature options, at most [`MAX_FEATS`]. A `Vec`, empty (no heap)
    /// on almost every packet: an inline array made each segment, one per
    /// datagram in and out, 512 bytes larger to zero and to move.
    pub feats: Vec<FeatOpt>,
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
    // Inlined so callers build it in place: one per datagram in and out,
    // and `receive` otherwise copied the ~600 bytes from a temporary.
    #[inline]
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
            feats: Vec::new(),
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
        &self.feats
    }

    /// Adds a feature option; `value: None` is an empty value.
    pub fn push_feat(&mut self, kind: u8, feature: FeatureNum, value: Option<u64>) {
        if self.feats.len() < MAX_FEATS {
            self.feats.push(FeatOpt {
                list_buf: [0; MAX_FEAT_LIST],
                n_list: 0,
                kind,
                feature,
                value: value.unwrap_or(0),
                has_value: value.is_some(),
            });
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
        if self.feats.len() < MAX_FEATS {
            self.feats.push(f);
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
        let mut s = Segment::new(PacketType::Data, 0);
        s.parse_from(data, addrs, profile)?;
        Ok(s)
    }

    /// [`Segment::parse_in`] into `self`, a fresh [`Segment::new`]: the
    /// receive path parses in place instead of moving ~1 kB out of a
    /// `Result`.
    pub(crate) fn parse_from(
        &mut self,
        data: &'a [u8],
        addrs: Option<(IpAddr, IpAddr)>,
        profile: WireProfile,
    ) -> Result<(), WireError> {
        #[cfg(test)]
        PARSES.with(|n| n.set(n.get() + 1));
        let p = Packet::new_checked(data)?;
        if let Some(a) = addrs {
            p.verify_checksum(a)?;
        }
        let s = self;
        s.ptype = p.packet_type();
        s.seq = p.seq();
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
        let mut hmacs = HmacPairing::default();
        let walked = rules.walk(area, |o, verdict| match verdict {
            OptionVerdict::Use => s.absorb(&o, &mut hmacs, profile),
            _ => {
                hmacs.other(None);
                Ok(())
            }
        });
        s.option_error = walked.err();
        let (lone, strays) = hmacs.finish();
        if lone.is_some() {
            s.mp.hmac = lone;
        }
        s.ignored_opts = u8::try_from(rules.ignored)
            .unwrap_or(u8::MAX)
            .saturating_add(strays);
        s.payload = &data[hl..];
        Ok(())
    }

    /// Takes in one option that passed [`OptionRules`]; an error is an
    /// invalid option (RFC 4340 §5.8).
    fn absorb(
        &mut self,
        o: &RawOption<'a>,
        hmacs: &mut HmacPairing,
        profile: WireProfile,
    ) -> Result<(), WireError> {
        if o.kind != kind::MULTIPATH {
            hmacs.other(None);
        }
        match o.kind {
            kind::CHANGE_L | kind::CONFIRM_L | kind::CHANGE_R | kind::CONFIRM_R => {
                self.absorb_feature(o)?
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
            kind::MULTIPATH => self.absorb_multipath(o, hmacs, profile)?,
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

    /// A Change / Confirm option (RFC 4340 §6), kept for feature
    /// negotiation.
    fn absorb_feature(&mut self, o: &RawOption<'a>) -> Result<(), WireError> {
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
        Ok(())
    }

    /// One MP option (RFC 9897 §3.2): MP_SEQ on the fast path, the others
    /// through the profile's parser; an MP_HMAC is filed under the option
    /// `hmacs` pairs it with.
    fn absorb_multipath(
        &mut self,
        o: &RawOption<'a>,
        hmacs: &mut HmacPairing,
        profile: WireProfile,
    ) -> Result<(), WireError> {
        if let Some(seq) = o.mp_seq() {
            hmacs.other(Some(subtype::SEQ));
            self.mp.seq = Some(seq);
            return Ok(());
        }
        match MpOption::parse_in(o.data, profile) {
            Ok(MpOption::Hmac(h)) => {
                if let Some(t) = hmacs.hmac(&h) {
                    self.mp.file_hmac(t, h);
                }
            }
            Ok(m) => {
                hmacs.other(Some(m.subtype()));
                absorb_mp(&mut self.mp, m)
            }
            // RFC 9897 §3.2.4 / §3.6: an MP_KEY we cannot read (a reserved
            // key type, a bad length) offers no key type to agree on. That
            // is a fallback to plain DCCP (or, on the third packet, a
            // closed subflow), not an Option Error: a key-less MP_KEY says
            // so.
            Err(_) if o.data.first() == Some(&subtype::KEY) => {
                hmacs.other(None);
                self.mp.key = Some(KeyOffer::default());
                self.bad_opts = self.bad_opts.saturating_add(1);
            }
            Err(e) => return Err(e),
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
        let addrs = Some(addrs);
        self.build(buf, profile, Finish::Plain { addrs })
    }

    /// [`Segment::emit_in`], or with the checksum field left zero (and not
    /// computed) when `addrs` is `None`, for a receiver that does not
    /// verify it (`ConnectionConfig::fill_checksums`).
    pub(crate) fn emit_plain(
        &mut self,
        buf: &mut [u8],
        addrs: Option<(IpAddr, IpAddr)>,
        profile: WireProfile,
    ) -> Option<usize> {
        self.build(buf, profile, Finish::Plain { addrs })
    }

    /// As [`Segment::emit_in`] for a packet about to be sealed (payload
    /// protection, `subflow/protect.rs`): the payload goes where the sealed
    /// frame's plaintext lies, `gap` bytes after the header (the counter),
    /// `tail` bytes (the tag) must fit after it, and no checksum is
    /// computed (sealing computes it once, over the ciphertext). Returns
    /// the unsealed length, header + payload, as `emit_in` would.
    pub(crate) fn emit_for_sealing(
        &mut self,
        buf: &mut [u8],
        profile: WireProfile,
        gap: usize,
        tail: usize,
    ) -> Option<usize> {
        self.build(buf, profile, Finish::Sealed { gap, tail })
    }

    /// The options in their fixed order (features, Ack Vector, Elapsed
    /// Time, then the MP ones), then header and payload, through `wire`'s
    /// one [`PacketBuilder`]. Always X=1 (48-bit numbers).
    fn build(&mut self, buf: &mut [u8], profile: WireProfile, how: Finish) -> Option<usize> {
        let mut b = PacketBuilder::new(buf, self.ptype, false, profile);
        for f in self.feats() {
            b.option(&f.to_option()).ok()?;
        }
        if let Some(av) = self.ack_vector_out.take() {
            let o = DccpOption::AckVector(av);
            let r = b.option(&o);
            if let DccpOption::AckVector(av) = o {
                self.ack_vector_out = Some(av);
            }
            r.ok()?;
        }
        if let (Some(e), true) = (self.elapsed_10us, self.ptype.has_ack()) {
            b.option(&DccpOption::ElapsedTime(e)).ok()?;
        }
        emit_mp(&self.mp, &mut b).ok()?;
        b.finish(&self.header(), self.payload, how).ok()
    }

    /// The fixed header as sent: X=1, numbers cut to 48 bits.
    fn header(&self) -> Header {
        Header {
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: self.seq & crate::wire::SEQ_MASK,
            kind: self.kind(),
            ccval: 0,
            cscov: 0,
            short_seq: false,
        }
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

/// Pseudo-header addresses of a path: its configured local/remote IPs, or the
/// unspecified IPv4 address when the driver did not give them.
pub fn path_ips(local: Option<SocketAddr>, remote: Option<SocketAddr>) -> (IpAddr, IpAddr) {
    let un = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    (local.map_or(un, |a| a.ip()), remote.map_or(un, |a| a.ip()))
}

#[path = "codec_mp.rs"]
mod codec_mp;

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;

#[cfg(test)]
thread_local! {
    /// Full parses ([`Segment::parse_from`]) on this thread: the receive
    /// path's tests count how often one datagram is parsed.
    pub(crate) static PARSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
