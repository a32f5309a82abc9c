//! The connection's view of one DCCP packet: a fixed-size, allocation-free
//! [`Segment`] holding the header fields and exactly the options the
//! connection acts on, plus `emit`/`parse` to and from bytes.
//!
//! Layout follows RFC 4340 §5 (generic header with X=1, 48-bit sequence
//! numbers; the short X=0 form is accepted on input) and RFC 9897 §3.2 (one
//! option 46 per MP sub-option). Parsing is zero-copy and never panics on
//! hostile input; every malformed packet yields a [`CodecError`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::seq::SEQ_MASK;

/// DCCP packet types (RFC 4340 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PacketType {
    Request = 0,
    Response = 1,
    Data = 2,
    Ack = 3,
    DataAck = 4,
    CloseReq = 5,
    Close = 6,
    Reset = 7,
    Sync = 8,
    SyncAck = 9,
}

impl PacketType {
    pub fn from_u8(v: u8) -> Option<Self> {
        use PacketType::*;
        Some(match v {
            0 => Request,
            1 => Response,
            2 => Data,
            3 => Ack,
            4 => DataAck,
            5 => CloseReq,
            6 => Close,
            7 => Reset,
            8 => Sync,
            9 => SyncAck,
            _ => return None,
        })
    }
    /// Every type but Request and Data carries an acknowledgement subheader.
    pub fn has_ack(self) -> bool {
        !matches!(self, PacketType::Request | PacketType::Data)
    }
    pub fn has_payload(self) -> bool {
        matches!(
            self,
            PacketType::Data | PacketType::DataAck | PacketType::Request | PacketType::Response
        )
    }
    pub fn name(self) -> &'static str {
        use PacketType::*;
        match self {
            Request => "Request",
            Response => "Response",
            Data => "Data",
            Ack => "Ack",
            DataAck => "DataAck",
            CloseReq => "CloseReq",
            Close => "Close",
            Reset => "Reset",
            Sync => "Sync",
            SyncAck => "SyncAck",
        }
    }
}

/// Reset codes used by the connection (RFC 4340 §5.6, RFC 9897 §3.2).
pub mod reset_code {
    pub const UNSPECIFIED: u8 = 0;
    pub const CLOSED: u8 = 1;
    pub const ABORTED: u8 = 2;
    pub const NO_CONNECTION: u8 = 3;
    pub const PACKET_ERROR: u8 = 4;
    pub const OPTION_ERROR: u8 = 5;
    pub const MANDATORY_ERROR: u8 = 6;
    pub const CONNECTION_REFUSED: u8 = 7;
    pub const BAD_SERVICE_CODE: u8 = 8;
    pub const TOO_BUSY: u8 = 9;
    pub const BAD_INIT_COOKIE: u8 = 10;
    pub const AGGRESSION_PENALTY: u8 = 11;
    /// RFC 9897: MP-DCCP "Abrupt close" — the fast close of a whole connection.
    pub const MP_FAST_CLOSE: u8 = 13;
}

/// Option kinds (RFC 4340 §5.8, RFC 9897 §3.2).
pub mod opt {
    pub const PADDING: u8 = 0;
    pub const MANDATORY: u8 = 1;
    pub const SLOW_RECEIVER: u8 = 2;
    pub const CHANGE_L: u8 = 32;
    pub const CONFIRM_L: u8 = 33;
    pub const CHANGE_R: u8 = 34;
    pub const CONFIRM_R: u8 = 35;
    pub const ACK_VECTOR_0: u8 = 38;
    pub const ACK_VECTOR_1: u8 = 39;
    pub const TIMESTAMP: u8 = 41;
    pub const MULTIPATH: u8 = 46;
}

/// Feature numbers (RFC 4340 §6.4, RFC 9897 §3.1).
pub mod feat {
    pub const CCID: u8 = 1;
    pub const SEQUENCE_WINDOW: u8 = 3;
    pub const ACK_RATIO: u8 = 5;
    pub const SEND_ACK_VECTOR: u8 = 6;
    pub const MULTIPATH_CAPABLE: u8 = 10;
}

/// MP sub-option numbers (RFC 9897 §3.2, Table 3).
pub mod mp {
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

/// Largest DCCP header (RFC 4340 §5.1: Data Offset counts 32-bit words, 8 bits).
pub const MAX_HEADER_LEN: usize = 1020;

/// Errors from parsing untrusted bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("packet truncated")]
    Truncated,
    #[error("bad data offset")]
    BadDataOffset,
    #[error("unknown packet type")]
    BadType,
    #[error("malformed option")]
    BadOption,
    #[error("bad checksum")]
    BadChecksum,
    #[error("short sequence numbers on a type that requires X=1")]
    ShortSeqNotAllowed,
}

/// One feature-negotiation option (Change/Confirm L/R), first value only
/// (the features we negotiate carry one value or a preference list whose
/// head is what matters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeatOpt {
    pub kind: u8,
    pub feature: u8,
    /// Value, big-endian, or the first list entry for server-priority features.
    pub value: u64,
    /// Number of value bytes on the wire (0 = empty Confirm: "not understood").
    pub value_len: u8,
}

pub const MAX_FEATS: usize = 8;

/// MP_KEY (RFC 9897 §3.2.4): key type, connection identifier, key(s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpKey {
    pub key_type: u8,
    pub ci: u32,
    pub key: [u8; 8],
    /// The third handshake packet echoes the peer's key too.
    pub peer_key: Option<[u8; 8]>,
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

/// One item an MP_CONFIRM echoes (RFC 9897 §3.2.1): the confirmed
/// sub-option, re-encoded as a complete nested option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfirmItem {
    pub kind: u8,
    /// Address id (ADDADDR/REMOVEADDR) or priority value (PRIO).
    pub id: u8,
    pub nonce: u32,
    /// ADDADDR's address and port.
    pub addr: Option<(IpAddr, Option<u16>)>,
}

impl ConfirmItem {
    fn body_len(&self) -> usize {
        match self.kind {
            mp::ADDADDR => {
                1 + 4
                    + self.addr.map_or(4, |(ip, port)| {
                        ip_len(ip) + if port.is_some() { 2 } else { 0 }
                    })
            }
            mp::REMOVEADDR => 5,
            _ => 1,
        }
    }
}

pub const MAX_CONFIRMS: usize = 4;

/// The MP sub-options of one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpOpts {
    pub key: Option<MpKey>,
    pub join: Option<MpJoin>,
    pub hmac: Option<[u8; 20]>,
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
    pub fn is_empty(&self) -> bool {
        *self == MpOpts::default()
    }
}

/// One DCCP packet as the connection sees it. Borrowed slices point into the
/// received datagram (parse) or into caller-owned scratch (emit).
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    pub ptype: PacketType,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u64,
    pub ack: Option<u64>,
    pub service_code: u32,
    pub reset_code: u8,
    pub reset_data: [u8; 3],
    pub feats: [FeatOpt; MAX_FEATS],
    pub n_feats: u8,
    /// Raw Ack Vector cells (RFC 4340 §11.4), nonce 0.
    pub ack_vector: Option<&'a [u8]>,
    pub timestamp: Option<u32>,
    pub mp: MpOpts,
    /// Options of unknown kind that were skipped (RFC 4340 §5.8: ignore).
    pub unknown_opts: u8,
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
            service_code: 0,
            reset_code: 0,
            reset_data: [0; 3],
            feats: [FeatOpt::default(); MAX_FEATS],
            n_feats: 0,
            ack_vector: None,
            timestamp: None,
            mp: MpOpts::default(),
            unknown_opts: 0,
            payload: &[],
        }
    }
    pub fn feats(&self) -> &[FeatOpt] {
        &self.feats[..self.n_feats as usize]
    }
    pub fn push_feat(&mut self, kind: u8, feature: u8, value: u64, value_len: u8) {
        if (self.n_feats as usize) < MAX_FEATS {
            self.feats[self.n_feats as usize] = FeatOpt {
                kind,
                feature,
                value,
                value_len,
            };
            self.n_feats += 1;
        }
    }
    /// First feature option of `kind` for `feature`.
    pub fn feat(&self, kind: u8, feature: u8) -> Option<FeatOpt> {
        self.feats()
            .iter()
            .copied()
            .find(|f| f.kind == kind && f.feature == feature)
    }

    fn fixed_header_len(&self) -> usize {
        16 + match self.ptype {
            PacketType::Request => 4,
            PacketType::Data => 0,
            PacketType::Response => 12,
            PacketType::Reset => 12,
            _ => 8,
        }
    }

    fn options_len(&self) -> usize {
        let mut n = 0;
        for f in self.feats() {
            n += 3 + f.value_len as usize;
        }
        if let Some(av) = self.ack_vector {
            n += 2 + av.len();
        }
        if self.timestamp.is_some() {
            n += 6;
        }
        let m = &self.mp;
        if let Some(k) = m.key {
            n += 3 + 1 + 4 + 9 + if k.peer_key.is_some() { 9 } else { 0 };
        }
        if m.join.is_some() {
            n += 3 + 9;
        }
        if m.hmac.is_some() {
            n += 3 + 20;
        }
        if m.seq.is_some() {
            n += 3 + 6;
        }
        if m.rtt.is_some() {
            n += 3 + 9;
        }
        if let Some(a) = m.addaddr {
            n += 3 + 1 + 4 + ip_len(a.ip) + if a.port.is_some() { 2 } else { 0 };
        }
        if m.removeaddr.is_some() {
            n += 3 + 1 + 4;
        }
        if m.prio.is_some() {
            n += 3 + 1;
        }
        if m.close.is_some() {
            n += 3 + 8;
        }
        if m.fast_close.is_some() {
            n += 3 + 8;
        }
        if m.n_confirms > 0 {
            n += 3 + m.confirms().iter().map(|c| 3 + c.body_len()).sum::<usize>();
        }
        n
    }

    /// Header length including options and padding to a 32-bit boundary.
    pub fn header_len(&self) -> usize {
        (self.fixed_header_len() + self.options_len()).div_ceil(4) * 4
    }

    /// Total datagram length.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Writes the packet into `buf` and returns its length, or `None` if
    /// `buf` is too small or the header exceeds 1020 bytes. The checksum
    /// covers the whole packet (CsCov = 0) and the pseudo-header of
    /// `addrs` = (source, destination).
    pub fn emit(&self, buf: &mut [u8], addrs: (IpAddr, IpAddr)) -> Option<usize> {
        let hlen = self.header_len();
        let total = hlen + self.payload.len();
        if hlen > MAX_HEADER_LEN || buf.len() < total {
            return None;
        }
        let b = &mut buf[..total];
        b[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        b[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        b[4] = (hlen / 4) as u8;
        b[5] = 0; // CCVal 0, CsCov 0
        b[6] = 0;
        b[7] = 0;
        b[8] = ((self.ptype as u8) << 1) | 1; // X = 1
        b[9] = 0;
        put48(&mut b[10..16], self.seq);
        let mut p = 16;
        if self.ptype.has_ack() {
            b[16] = 0;
            b[17] = 0;
            put48(&mut b[18..24], self.ack.unwrap_or(0));
            p = 24;
        }
        match self.ptype {
            PacketType::Request | PacketType::Response => {
                b[p..p + 4].copy_from_slice(&self.service_code.to_be_bytes());
                p += 4;
            }
            PacketType::Reset => {
                b[p] = self.reset_code;
                b[p + 1..p + 4].copy_from_slice(&self.reset_data);
                p += 4;
            }
            _ => {}
        }
        // Options.
        for f in self.feats() {
            b[p] = f.kind;
            b[p + 1] = 3 + f.value_len;
            b[p + 2] = f.feature;
            let vl = f.value_len as usize;
            for i in 0..vl {
                b[p + 3 + i] = (f.value >> (8 * (vl - 1 - i))) as u8;
            }
            p += 3 + vl;
        }
        if let Some(av) = self.ack_vector {
            b[p] = opt::ACK_VECTOR_0;
            b[p + 1] = (2 + av.len()) as u8;
            b[p + 2..p + 2 + av.len()].copy_from_slice(av);
            p += 2 + av.len();
        }
        if let Some(ts) = self.timestamp {
            b[p] = opt::TIMESTAMP;
            b[p + 1] = 6;
            b[p + 2..p + 6].copy_from_slice(&ts.to_be_bytes());
            p += 6;
        }
        p = emit_mp(&self.mp, b, p);
        // Padding (option 0) up to the header length.
        for x in &mut b[p..hlen] {
            *x = opt::PADDING;
        }
        b[hlen..].copy_from_slice(self.payload);
        let ck = checksum(b, addrs);
        b[6..8].copy_from_slice(&ck.to_be_bytes());
        Some(total)
    }

    /// Parses untrusted bytes. `addrs` = (source, destination) of the
    /// datagram for checksum verification, `None` to skip verification.
    pub fn parse(data: &'a [u8], addrs: Option<(IpAddr, IpAddr)>) -> Result<Self, CodecError> {
        if data.len() < 12 {
            return Err(CodecError::Truncated);
        }
        let hlen = data[4] as usize * 4;
        let x = data[8] & 1 == 1;
        let ptype = PacketType::from_u8((data[8] >> 1) & 0x0f).ok_or(CodecError::BadType)?;
        let base = if x { 16 } else { 12 };
        if hlen < base || hlen > data.len() {
            return Err(CodecError::BadDataOffset);
        }
        if let Some(a) = addrs {
            let cscov = data[5] & 0x0f;
            let covered = if cscov == 0 {
                data.len()
            } else {
                (hlen + (cscov as usize - 1) * 4).min(data.len())
            };
            if checksum_with_len(&data[..covered], data.len(), a) != 0 {
                return Err(CodecError::BadChecksum);
            }
        }
        let mut s = Segment::new(ptype, 0);
        s.src_port = u16::from_be_bytes([data[0], data[1]]);
        s.dst_port = u16::from_be_bytes([data[2], data[3]]);
        if x {
            s.seq = get48(&data[10..16]);
        } else {
            // RFC 4340 §5.1: short sequence numbers only on Data, Ack, DataAck.
            if !matches!(
                ptype,
                PacketType::Data | PacketType::Ack | PacketType::DataAck
            ) {
                return Err(CodecError::ShortSeqNotAllowed);
            }
            s.seq = ((data[9] as u64) << 16) | ((data[10] as u64) << 8) | data[11] as u64;
        }
        let mut p = base;
        if ptype.has_ack() {
            if x {
                if p + 8 > hlen {
                    return Err(CodecError::Truncated);
                }
                s.ack = Some(get48(&data[p + 2..p + 8]));
                p += 8;
            } else {
                if p + 4 > hlen {
                    return Err(CodecError::Truncated);
                }
                s.ack = Some(
                    ((data[p + 1] as u64) << 16) | ((data[p + 2] as u64) << 8) | data[p + 3] as u64,
                );
                p += 4;
            }
        }
        match ptype {
            PacketType::Request | PacketType::Response => {
                if p + 4 > hlen {
                    return Err(CodecError::Truncated);
                }
                s.service_code =
                    u32::from_be_bytes([data[p], data[p + 1], data[p + 2], data[p + 3]]);
                p += 4;
            }
            PacketType::Reset => {
                if p + 4 > hlen {
                    return Err(CodecError::Truncated);
                }
                s.reset_code = data[p];
                s.reset_data = [data[p + 1], data[p + 2], data[p + 3]];
                p += 4;
            }
            _ => {}
        }
        parse_options(&mut s, &data[p..hlen])?;
        s.payload = &data[hlen..];
        Ok(s)
    }
}

fn parse_options<'a>(s: &mut Segment<'a>, mut o: &'a [u8]) -> Result<(), CodecError> {
    while let Some(&kind) = o.first() {
        if kind < 32 {
            // Single-byte options (Padding, Mandatory, Slow Receiver, reserved).
            o = &o[1..];
            continue;
        }
        if o.len() < 2 {
            return Err(CodecError::BadOption);
        }
        let len = o[1] as usize;
        if len < 2 || len > o.len() {
            return Err(CodecError::BadOption);
        }
        let d = &o[2..len];
        match kind {
            opt::CHANGE_L | opt::CONFIRM_L | opt::CHANGE_R | opt::CONFIRM_R => {
                let Some((&feature, vals)) = d.split_first() else {
                    return Err(CodecError::BadOption);
                };
                // Server-priority lists: the first value is the preference.
                // Non-negotiable values are at most 6 bytes (Sequence Window).
                let vlen = vals.len().min(6);
                let mut v = 0u64;
                let take = if feature == feat::SEQUENCE_WINDOW || feature == feat::ACK_RATIO {
                    vlen
                } else {
                    vlen.min(1)
                };
                for &x in &vals[..take] {
                    v = (v << 8) | x as u64;
                }
                s.push_feat(kind, feature, v, take as u8);
            }
            opt::ACK_VECTOR_0 | opt::ACK_VECTOR_1 => {
                s.ack_vector = Some(d);
            }
            opt::TIMESTAMP => {
                if d.len() != 4 {
                    return Err(CodecError::BadOption);
                }
                s.timestamp = Some(u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
            }
            opt::MULTIPATH => parse_mp(&mut s.mp, d)?,
            _ => s.unknown_opts = s.unknown_opts.saturating_add(1),
        }
        o = &o[len..];
    }
    Ok(())
}

fn parse_mp(m: &mut MpOpts, d: &[u8]) -> Result<(), CodecError> {
    let Some((&sub, d)) = d.split_first() else {
        return Err(CodecError::BadOption);
    };
    let bad = CodecError::BadOption;
    match sub {
        mp::CONFIRM => {
            // Nested complete MP options (46, len, MP_OPT, body).
            let mut r = d;
            while !r.is_empty() {
                if r.len() < 3 || r[0] != opt::MULTIPATH {
                    return Err(bad);
                }
                let len = r[1] as usize;
                if len < 3 || len > r.len() {
                    return Err(bad);
                }
                let (kind, body) = (r[2], &r[3..len]);
                let item = match kind {
                    mp::PRIO if body.len() == 1 => Some(ConfirmItem {
                        kind,
                        id: body[0] & 0x0f,
                        ..ConfirmItem::default()
                    }),
                    mp::REMOVEADDR if body.len() == 5 => Some(ConfirmItem {
                        kind,
                        id: body[0],
                        nonce: be32(&body[1..5]),
                        addr: None,
                    }),
                    mp::ADDADDR => {
                        let a = parse_addaddr(body).ok_or(bad)?;
                        Some(ConfirmItem {
                            kind,
                            id: a.addr_id,
                            nonce: a.nonce,
                            addr: Some((a.ip, a.port)),
                        })
                    }
                    // MP_SEQ and others may accompany a confirmation.
                    _ => None,
                };
                if let Some(i) = item {
                    m.push_confirm(i);
                }
                r = &r[len..];
            }
        }
        mp::JOIN => {
            if d.len() != 9 {
                return Err(bad);
            }
            m.join = Some(MpJoin {
                addr_id: d[0],
                token: be32(&d[1..5]),
                nonce: be32(&d[5..9]),
            });
        }
        mp::FAST_CLOSE => {
            m.fast_close = Some(d.try_into().map_err(|_| bad)?);
        }
        mp::KEY => {
            // resvd(1) | CI(4) | {Key Type(1) | Key Data}...: the first plain
            // key is the sender's, a second plain key echoes the receiver's.
            if d.len() < 6 {
                return Err(bad);
            }
            let ci = be32(&d[1..5]);
            let mut r = &d[5..];
            let mut keys: [Option<[u8; 8]>; 2] = [None, None];
            let mut nk = 0;
            let mut offered_type = None;
            while let Some((&kt, after)) = r.split_first() {
                let n = match kt {
                    0 => 8,
                    1 => 32,
                    2 => 64,
                    255 => after.len(),
                    _ => return Err(bad),
                };
                if n == 0 || after.len() < n {
                    return Err(bad);
                }
                offered_type.get_or_insert(kt);
                if kt == 0 && nk < 2 {
                    let mut k = [0u8; 8];
                    k.copy_from_slice(&after[..8]);
                    keys[nk] = Some(k);
                    nk += 1;
                }
                r = &after[n..];
            }
            m.key = Some(MpKey {
                key_type: if keys[0].is_some() {
                    0
                } else {
                    offered_type.unwrap_or(255)
                },
                ci,
                key: keys[0].unwrap_or_default(),
                peer_key: keys[1],
            });
        }
        mp::SEQ => {
            if d.len() != 6 {
                return Err(bad);
            }
            m.seq = Some(get48(d));
        }
        mp::HMAC => {
            m.hmac = Some(d.try_into().map_err(|_| bad)?);
        }
        mp::RTT => {
            if d.len() != 9 {
                return Err(bad);
            }
            m.rtt = Some(MpRtt {
                kind: d[0],
                rtt_ms: be32(&d[1..5]),
                age_ms: be32(&d[5..9]),
            });
        }
        mp::ADDADDR => {
            m.addaddr = Some(parse_addaddr(d).ok_or(bad)?);
        }
        mp::REMOVEADDR => {
            // Address ID(1) | Nonce(4); the draft form without nonce too.
            match d.len() {
                5 => {
                    m.removeaddr = Some(MpRemoveAddr {
                        addr_id: d[0],
                        nonce: be32(&d[1..5]),
                    })
                }
                1 => {
                    m.removeaddr = Some(MpRemoveAddr {
                        addr_id: d[0],
                        nonce: 0,
                    })
                }
                _ => return Err(bad),
            }
        }
        mp::PRIO => {
            if d.len() != 1 {
                return Err(bad);
            }
            m.prio = Some(d[0] & 0x0f);
        }
        mp::CLOSE => {
            m.close = Some(d.try_into().map_err(|_| bad)?);
        }
        // MP_EXP and unassigned sub-options: ignored.
        _ => {}
    }
    Ok(())
}

/// `Address ID(1) | Nonce(4) | Address(4|16) | Port(2)?`; the draft form
/// without nonce is accepted with nonce 0.
fn parse_addaddr(d: &[u8]) -> Option<MpAddAddr> {
    let (nonce_len, ip_len, port_len) = match d.len() {
        9 => (4, 4, 0),
        11 => (4, 4, 2),
        21 => (4, 16, 0),
        23 => (4, 16, 2),
        5 => (0, 4, 0),
        7 => (0, 4, 2),
        17 => (0, 16, 0),
        19 => (0, 16, 2),
        _ => return None,
    };
    let nonce = if nonce_len == 4 { be32(&d[1..5]) } else { 0 };
    let a = &d[1 + nonce_len..1 + nonce_len + ip_len];
    let ip = if ip_len == 4 {
        IpAddr::V4(ipv4(a))
    } else {
        IpAddr::V6(ipv6(a))
    };
    let p = 1 + nonce_len + ip_len;
    let port = (port_len == 2).then(|| u16::from_be_bytes([d[p], d[p + 1]]));
    Some(MpAddAddr {
        addr_id: d[0],
        nonce,
        ip,
        port,
    })
}

fn emit_addaddr_body(b: &mut [u8], id: u8, nonce: u32, ip: IpAddr, port: Option<u16>) -> usize {
    b[0] = id;
    b[1..5].copy_from_slice(&nonce.to_be_bytes());
    let mut q = 5;
    match ip {
        IpAddr::V4(v) => b[q..q + 4].copy_from_slice(&v.octets()),
        IpAddr::V6(v) => b[q..q + 16].copy_from_slice(&v.octets()),
    }
    q += ip_len(ip);
    if let Some(port) = port {
        b[q..q + 2].copy_from_slice(&port.to_be_bytes());
        q += 2;
    }
    q
}

fn emit_mp(m: &MpOpts, b: &mut [u8], mut p: usize) -> usize {
    let head = |b: &mut [u8], p: &mut usize, sub: u8, len: usize| {
        b[*p] = opt::MULTIPATH;
        b[*p + 1] = (3 + len) as u8;
        b[*p + 2] = sub;
        *p += 3;
    };
    if let Some(k) = m.key {
        let len = 14 + if k.peer_key.is_some() { 9 } else { 0 };
        head(b, &mut p, mp::KEY, len);
        b[p] = 0; // reserved
        b[p + 1..p + 5].copy_from_slice(&k.ci.to_be_bytes());
        b[p + 5] = 0; // key type 0: plain text
        b[p + 6..p + 14].copy_from_slice(&k.key);
        if let Some(pk) = k.peer_key {
            b[p + 14] = 0;
            b[p + 15..p + 23].copy_from_slice(&pk);
        }
        p += len;
    }
    if let Some(j) = m.join {
        head(b, &mut p, mp::JOIN, 9);
        b[p] = j.addr_id;
        b[p + 1..p + 5].copy_from_slice(&j.token.to_be_bytes());
        b[p + 5..p + 9].copy_from_slice(&j.nonce.to_be_bytes());
        p += 9;
    }
    if let Some(h) = m.hmac {
        head(b, &mut p, mp::HMAC, 20);
        b[p..p + 20].copy_from_slice(&h);
        p += 20;
    }
    if let Some(s) = m.seq {
        head(b, &mut p, mp::SEQ, 6);
        put48(&mut b[p..p + 6], s);
        p += 6;
    }
    if let Some(r) = m.rtt {
        head(b, &mut p, mp::RTT, 9);
        b[p] = r.kind;
        b[p + 1..p + 5].copy_from_slice(&r.rtt_ms.to_be_bytes());
        b[p + 5..p + 9].copy_from_slice(&r.age_ms.to_be_bytes());
        p += 9;
    }
    if let Some(a) = m.addaddr {
        let len = 1 + 4 + ip_len(a.ip) + if a.port.is_some() { 2 } else { 0 };
        head(b, &mut p, mp::ADDADDR, len);
        p += emit_addaddr_body(&mut b[p..], a.addr_id, a.nonce, a.ip, a.port);
    }
    if let Some(r) = m.removeaddr {
        head(b, &mut p, mp::REMOVEADDR, 5);
        b[p] = r.addr_id;
        b[p + 1..p + 5].copy_from_slice(&r.nonce.to_be_bytes());
        p += 5;
    }
    if let Some(pr) = m.prio {
        head(b, &mut p, mp::PRIO, 1);
        b[p] = pr & 0x0f;
        p += 1;
    }
    if let Some(k) = m.close {
        head(b, &mut p, mp::CLOSE, 8);
        b[p..p + 8].copy_from_slice(&k);
        p += 8;
    }
    if let Some(k) = m.fast_close {
        head(b, &mut p, mp::FAST_CLOSE, 8);
        b[p..p + 8].copy_from_slice(&k);
        p += 8;
    }
    if m.n_confirms > 0 {
        let len: usize = m.confirms().iter().map(|c| 3 + c.body_len()).sum();
        head(b, &mut p, mp::CONFIRM, len);
        for c in m.confirms() {
            let bl = c.body_len();
            b[p] = opt::MULTIPATH;
            b[p + 1] = (3 + bl) as u8;
            b[p + 2] = c.kind;
            p += 3;
            match c.kind {
                mp::ADDADDR => {
                    let (ip, port) = c.addr.unwrap_or((IpAddr::V4(Ipv4Addr::UNSPECIFIED), None));
                    p += emit_addaddr_body(&mut b[p..], c.id, c.nonce, ip, port);
                }
                mp::REMOVEADDR => {
                    b[p] = c.id;
                    b[p + 1..p + 5].copy_from_slice(&c.nonce.to_be_bytes());
                    p += 5;
                }
                _ => {
                    b[p] = c.id;
                    p += 1;
                }
            }
        }
    }
    p
}

/// The Internet checksum of a DCCP packet with its IPv4/IPv6 pseudo-header
/// (RFC 4340 §9). Over a packet whose checksum field is filled this yields 0.
pub fn checksum(covered: &[u8], addrs: (IpAddr, IpAddr)) -> u16 {
    checksum_with_len(covered, covered.len(), addrs)
}

/// As [`checksum`] when only a prefix is covered (Checksum Coverage); the
/// pseudo-header still carries the whole packet length.
pub fn checksum_with_len(covered: &[u8], total_len: usize, addrs: (IpAddr, IpAddr)) -> u16 {
    let mut sum: u64 = 0;
    let total_len = total_len as u64;
    match addrs {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            sum += sum_bytes(&s.octets()) + sum_bytes(&d.octets());
            sum += 33 + total_len;
        }
        (s, d) => {
            sum += sum_bytes(&to_v6(s).octets()) + sum_bytes(&to_v6(d).octets());
            sum += (total_len >> 16) + (total_len & 0xffff) + 33;
        }
    }
    sum += sum_bytes(covered);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped(),
        IpAddr::V6(v) => v,
    }
}

fn sum_bytes(b: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut chunks = b.chunks_exact(2);
    for c in &mut chunks {
        s += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        s += (*last as u64) << 8;
    }
    s
}

fn ip_len(ip: IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 16,
    }
}

fn ipv4(d: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(d[0], d[1], d[2], d[3])
}

fn ipv6(d: &[u8]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o.copy_from_slice(&d[..16]);
    Ipv6Addr::from(o)
}

fn be32(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

pub fn put48(b: &mut [u8], v: u64) {
    let v = v & SEQ_MASK;
    b[..6].copy_from_slice(&v.to_be_bytes()[2..]);
}

pub fn get48(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[2..].copy_from_slice(&b[..6]);
    u64::from_be_bytes(x)
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

    fn v4() -> (IpAddr, IpAddr) {
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
    }

    #[test]
    fn round_trip_with_every_option() {
        let mut s = Segment::new(PacketType::DataAck, 0xABCD_EF01_2345);
        s.ack = Some(77);
        s.push_feat(opt::CHANGE_L, feat::ACK_RATIO, 3, 2);
        s.push_feat(opt::CONFIRM_R, feat::MULTIPATH_CAPABLE, 0, 1);
        let av = [0x05u8, 0xC1, 0x03];
        s.ack_vector = Some(&av);
        s.mp.seq = Some((1 << 48) - 1);
        s.mp.hmac = Some([7; 20]);
        s.mp.key = Some(MpKey {
            key_type: 0,
            ci: 0xdead_beef,
            key: [1; 8],
            peer_key: Some([2; 8]),
        });
        s.mp.addaddr = Some(MpAddAddr {
            addr_id: 3,
            nonce: 9,
            ip: "192.0.2.7".parse().unwrap(),
            port: Some(4242),
        });
        s.mp.push_confirm(ConfirmItem {
            kind: mp::PRIO,
            id: 2,
            ..ConfirmItem::default()
        });
        s.mp.push_confirm(ConfirmItem {
            kind: mp::ADDADDR,
            id: 4,
            nonce: 77,
            addr: Some(("2001:db8::1".parse().unwrap(), None)),
        });
        s.payload = b"hello";
        let mut buf = [0u8; 1500];
        let n = s.emit(&mut buf, v4()).unwrap();
        assert_eq!(n, s.buffer_len());
        let (a, b) = v4();
        let p = Segment::parse(&buf[..n], Some((a, b))).unwrap();
        assert_eq!(p.seq, s.seq);
        assert_eq!(p.ack, Some(77));
        assert_eq!(p.feats(), s.feats());
        assert_eq!(p.ack_vector, Some(&av[..]));
        assert_eq!(p.mp, s.mp);
        assert_eq!(p.payload, b"hello");
        // A flipped payload bit breaks the checksum.
        buf[n - 1] ^= 1;
        assert_eq!(
            Segment::parse(&buf[..n], Some((a, b))).unwrap_err(),
            CodecError::BadChecksum
        );
    }

    #[test]
    fn hostile_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut buf = [0u8; 96];
        for _ in 0..20_000 {
            let n = rng.gen_range(0..buf.len());
            rng.fill(&mut buf[..n]);
            if n > 4 {
                buf[4] = rng.gen_range(0..(n as u8 / 4 + 2));
            }
            let _ = Segment::parse(&buf[..n], None);
        }
    }
}
