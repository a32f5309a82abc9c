//! The multipath part of [`super::codec`]: the MP sub-options one packet
//! carries ([`MpOpts`]) and how they are read from and written to option
//! 46 in the connection's wire profile (RFC 9897 §3.2 by default, a
//! reference kernel's layout otherwise) by the one codec, `wire/mp_codec.rs`.

use std::net::IpAddr;

use crate::wire::mp::{subtype, RttType};
use crate::wire::{MpKey, MpOption, PacketBuilder, WireError, WireProfile};

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

/// Encoded length of an MP_CONFIRM carrying `items` in `profile`.
pub fn confirm_len(items: &[ConfirmItem], profile: WireProfile) -> usize {
    let mut v = Vec::with_capacity(2 * items.len());
    for c in items {
        c.push_wire(&mut v, profile);
    }
    MpOption::Confirm(v).buffer_len_in(profile)
}

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
    /// MP_HMAC directly after MP_PRIO: the authenticated modes' extension
    /// (`Subflow::prio_authentic`); RFC 9897 §3.2.6 has receivers of the open
    /// mode ignore an MP_HMAC that follows no protected option.
    pub prio_hmac: Option<[u8; 20]>,
    /// MP_CLOSE carries the receiver's key (RFC 9897 §3.2.11).
    pub close: Option<[u8; 8]>,
    /// MP_FAST_CLOSE carries the receiver's key (RFC 9897 §3.2.3).
    pub fast_close: Option<[u8; 8]>,
    /// At most [`MAX_CONFIRMS`]. A `Vec`, empty (no heap) on almost every
    /// packet: an inline array made each `Segment` ~190 bytes larger to
    /// build and move, one per datagram in and out.
    confirms: Vec<ConfirmItem>,
    /// MP_EXP's body (RFC 9897 §3.2.12; at most 252 bytes, the wire
    /// parser's bound): the authenticated handshake's messages beyond key
    /// type 255's 64 bytes (docs/SECURITY.md §3). The first one is kept.
    pub exp: Option<Vec<u8>>,
}

impl MpOpts {
    /// Keeps MP_HMAC `h` under the sub-option it protects (RFC 9897
    /// §3.2.6, paired by `wire`'s [`crate::wire::mp::HmacPairing`]).
    pub(super) fn file_hmac(&mut self, protects: u8, h: [u8; 20]) {
        match protects {
            subtype::JOIN => self.hmac = Some(h),
            subtype::ADDADDR => self.addaddr_hmac = Some(h),
            subtype::REMOVEADDR => self.removeaddr_hmac = Some(h),
            subtype::PRIO => self.prio_hmac = Some(h),
            _ => {}
        }
    }

    pub fn confirms(&self) -> &[ConfirmItem] {
        &self.confirms
    }
    pub fn push_confirm(&mut self, c: ConfirmItem) -> bool {
        if self.confirms.len() < MAX_CONFIRMS {
            self.confirms.push(c);
            true
        } else {
            false
        }
    }
}

/// Folds one parsed MP sub-option into `m`.
pub(super) fn absorb_mp(m: &mut MpOpts, o: MpOption) {
    match o {
        MpOption::Key { ci, keys } => m.key = Some(KeyOffer { ci, keys }),
        MpOption::Join { addr_id, ci, nonce } => {
            m.join = Some(MpJoin {
                addr_id,
                token: ci,
                nonce,
            })
        }
        // Filed by `MpOpts::file_hmac` under the option it protects.
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

/// Appends the MP sub-options of `m` to the packet `b` builds. The order
/// is fixed: handshake options, then those of data and paths, then the
/// closing ones and MP_CONFIRM.
pub(super) fn emit_mp(m: &MpOpts, b: &mut PacketBuilder<'_>) -> Result<(), WireError> {
    emit_handshake_opts(m, b)?;
    emit_path_opts(m, b)?;
    emit_closing_opts(m, b)
}

/// The reference's ADDADDR/REMOVEADDR carry no nonce (docs/INTEROP.md).
fn addr_nonce(b: &PacketBuilder<'_>, n: u32) -> Option<u32> {
    b.profile().addr_nonce().then_some(n)
}

/// MP_KEY, MP_EXP, MP_JOIN and a join's MP_HMAC (RFC 9897 §3.2.6: each
/// MP_HMAC directly after the option it protects; `hmac` alone, a join's
/// third packet, where it stands).
fn emit_handshake_opts(m: &MpOpts, w: &mut PacketBuilder<'_>) -> Result<(), WireError> {
    if let Some(k) = &m.key {
        let keys = k.keys.clone();
        w.mp(&MpOption::Key { ci: k.ci, keys })?;
    }
    if let Some(e) = &m.exp {
        w.mp(&MpOption::Exp(e.clone()))?;
    }
    if let Some(j) = m.join {
        w.mp(&MpOption::Join {
            addr_id: j.addr_id,
            ci: j.token,
            nonce: j.nonce,
        })?;
    }
    if let Some(h) = m.hmac {
        w.mp(&MpOption::Hmac(h))?;
    }
    Ok(())
}

/// MP_SEQ, MP_RTT, and the path manager's MP_ADDADDR, MP_REMOVEADDR and
/// MP_PRIO, each with its MP_HMAC right after it.
fn emit_path_opts(m: &MpOpts, w: &mut PacketBuilder<'_>) -> Result<(), WireError> {
    if let Some(s) = m.seq {
        w.mp(&MpOption::Seq(s & crate::wire::SEQ_MASK))?;
    }
    if let Some(r) = m.rtt {
        w.mp(&MpOption::Rtt {
            rtt_type: RttType::from_u8(r.kind),
            rtt_ms: r.rtt_ms,
            age_ms: r.age_ms,
        })?;
    }
    if let Some(a) = m.addaddr {
        let nonce = addr_nonce(w, a.nonce);
        w.mp(&MpOption::AddAddr {
            addr_id: a.addr_id,
            nonce,
            addr: a.ip,
            port: a.port,
        })?;
        if let Some(h) = m.addaddr_hmac {
            w.mp(&MpOption::Hmac(h))?;
        }
    }
    if let Some(r) = m.removeaddr {
        let nonce = addr_nonce(w, r.nonce);
        w.mp(&MpOption::RemoveAddr {
            addr_id: r.addr_id,
            nonce,
        })?;
        if let Some(h) = m.removeaddr_hmac {
            w.mp(&MpOption::Hmac(h))?;
        }
    }
    if let Some(pr) = m.prio {
        w.mp(&MpOption::Prio(pr))?;
        if let Some(h) = m.prio_hmac {
            w.mp(&MpOption::Hmac(h))?;
        }
    }
    Ok(())
}

/// MP_CLOSE, MP_FAST_CLOSE and MP_CONFIRM.
fn emit_closing_opts(m: &MpOpts, w: &mut PacketBuilder<'_>) -> Result<(), WireError> {
    if let Some(k) = m.close {
        w.mp(&MpOption::Close {
            key_data: k.to_vec(),
        })?;
    }
    if let Some(k) = m.fast_close {
        w.mp(&MpOption::FastClose {
            key_data: k.to_vec(),
        })?;
    }
    if !m.confirms.is_empty() {
        let mut items = Vec::with_capacity(2 * m.confirms().len());
        for c in m.confirms() {
            c.push_wire(&mut items, w.profile());
        }
        w.mp(&MpOption::Confirm(items))?;
    }
    Ok(())
}
