//! The one codec of option 46 (RFC 9897 §3.2): [`MpOption`] from and to
//! bytes in any [`WireProfile`]. The reference kernels' layouts differ from
//! RFC 9897 in three sub-options only (the table in `profile.rs`): MP_KEY
//! (key types, the CI), MP_ADDADDR (the nonce, IPv4 byte order) and
//! MP_REMOVEADDR (the nonce); every other sub-option, MP_CONFIRM's list
//! included, has the same bytes in all of them. `parse` / `emit` /
//! `buffer_len` / `validate` are the RFC 9897 layout.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::mp::{subtype, MpKey, MpOption, RttType, HMAC_LEN, MP_OPTION_TYPE};
use super::profile::{ref_addr_bytes, WireProfile};
use super::WireError;

impl MpOption {
    /// Parse the body of option 46 (the bytes after type and length) in the
    /// RFC 9897 layout.
    pub fn parse(body: &[u8]) -> Result<MpOption, WireError> {
        Self::parse_in(body, WireProfile::Rfc9897)
    }

    /// Parse the body of option 46 in `profile`'s layout.
    pub fn parse_in(body: &[u8], profile: WireProfile) -> Result<MpOption, WireError> {
        Self::parse_depth(body, 0, profile)
    }

    fn parse_depth(body: &[u8], depth: u8, profile: WireProfile) -> Result<MpOption, WireError> {
        let (&st, rest) = body
            .split_first()
            .ok_or(WireError::BadMpOption { subtype: 255 })?;
        let bad = WireError::BadMpOption { subtype: st };
        match st {
            subtype::CONFIRM if depth > 0 => Err(bad),
            subtype::CONFIRM => Self::parse_confirm(rest, depth, bad, profile),
            _ => Self::parse_single(st, rest, bad, profile),
        }
    }

    /// One sub-option other than MP_CONFIRM: its MP_OPT `st` and the bytes
    /// after it.
    fn parse_single(
        st: u8,
        rest: &[u8],
        bad: WireError,
        profile: WireProfile,
    ) -> Result<MpOption, WireError> {
        Ok(match st {
            subtype::JOIN => {
                if rest.len() != 9 {
                    return Err(bad);
                }
                MpOption::Join {
                    addr_id: rest[0],
                    ci: be32(&rest[1..5]),
                    nonce: be32(&rest[5..9]),
                }
            }
            subtype::FAST_CLOSE | subtype::CLOSE => {
                if rest.is_empty() {
                    return Err(bad);
                }
                let key_data = rest.to_vec();
                if st == subtype::CLOSE {
                    MpOption::Close { key_data }
                } else {
                    MpOption::FastClose { key_data }
                }
            }
            subtype::KEY => Self::parse_key(rest, profile).ok_or(bad)?,
            subtype::SEQ => {
                if rest.len() != 6 {
                    return Err(bad);
                }
                MpOption::Seq(read_u48(rest))
            }
            subtype::HMAC => {
                let h: [u8; HMAC_LEN] = rest.try_into().map_err(|_| bad)?;
                MpOption::Hmac(h)
            }
            subtype::RTT => {
                if rest.len() != 9 {
                    return Err(bad);
                }
                MpOption::Rtt {
                    rtt_type: RttType::from_u8(rest[0]),
                    rtt_ms: be32(&rest[1..5]),
                    age_ms: be32(&rest[5..9]),
                }
            }
            subtype::ADDADDR => Self::parse_add_addr(rest, profile).ok_or(bad)?,
            subtype::REMOVEADDR => match rest.len() {
                1 => MpOption::RemoveAddr {
                    addr_id: rest[0],
                    nonce: None,
                },
                5 if profile.addr_nonce() => MpOption::RemoveAddr {
                    addr_id: rest[0],
                    nonce: Some(be32(&rest[1..5])),
                },
                _ => return Err(bad),
            },
            subtype::PRIO => {
                if rest.len() != 1 {
                    return Err(bad);
                }
                MpOption::Prio(rest[0] & 0x0f)
            }
            subtype::EXP => MpOption::Exp(rest.to_vec()),
            _ => return Err(bad),
        })
    }

    /// MP_CONFIRM's body (`rest`, at nesting `depth`): each element a full
    /// option, 46, length, then an MP option's body; none nested deeper.
    fn parse_confirm(
        rest: &[u8],
        depth: u8,
        bad: WireError,
        profile: WireProfile,
    ) -> Result<MpOption, WireError> {
        let mut items = Vec::with_capacity(rest.len() / 4);
        let mut r = rest;
        while !r.is_empty() {
            if r.len() < 3 || r[0] != MP_OPTION_TYPE {
                return Err(bad);
            }
            let len = usize::from(r[1]);
            if len < 3 || len > r.len() {
                return Err(bad);
            }
            items.push(Self::parse_depth(&r[2..len], depth + 1, profile)?);
            r = &r[len..];
        }
        Ok(MpOption::Confirm(items))
    }

    /// MP_KEY's body: `reserved(1) | CI(4)` where the profile has them,
    /// then one or more keys each led by its type (RFC 9897 §3.2.4). A key
    /// type the profile does not know has no known length, so the list
    /// cannot be delimited: `None`.
    fn parse_key(rest: &[u8], profile: WireProfile) -> Option<MpOption> {
        let (ci, mut r) = if profile.key_has_ci() {
            (be32(rest.get(1..5)?), &rest[5..])
        } else {
            (0, rest)
        };
        let mut keys = Vec::with_capacity(r.len() / 9 + 1);
        while let Some((&kt, after)) = r.split_first() {
            let key_type = profile.key_type(kt)?;
            let data = after.get(..key_type.key_len())?;
            keys.push(MpKey {
                key_type,
                data: data.to_vec(),
            });
            r = &after[data.len()..];
        }
        (!keys.is_empty()).then_some(MpOption::Key { ci, keys })
    }

    /// MP_ADDADDR's body: Address ID, an optional nonce (RFC 9897 layout
    /// only), an IPv4 or IPv6 address and an optional port, told apart by
    /// the length. The reference layouts write IPv4 byte-reversed.
    fn parse_add_addr(rest: &[u8], profile: WireProfile) -> Option<MpOption> {
        let (nonce_len, addr_len, port_len) = match rest.len() {
            5 => (0, 4, 0),
            7 => (0, 4, 2),
            17 => (0, 16, 0),
            19 => (0, 16, 2),
            9 if profile.addr_nonce() => (4, 4, 0),
            11 if profile.addr_nonce() => (4, 4, 2),
            21 if profile.addr_nonce() => (4, 16, 0),
            23 if profile.addr_nonce() => (4, 16, 2),
            _ => return None,
        };
        let nonce = (nonce_len == 4).then(|| be32(&rest[1..5]));
        let a = &rest[1 + nonce_len..1 + nonce_len + addr_len];
        let addr = match (addr_len, profile.is_reference()) {
            (4, false) => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            (4, true) => IpAddr::V4(Ipv4Addr::new(a[3], a[2], a[1], a[0])),
            _ => {
                let mut b = [0u8; 16];
                b.copy_from_slice(a);
                IpAddr::V6(Ipv6Addr::from(b))
            }
        };
        let p = 1 + nonce_len + addr_len;
        let port = (port_len == 2).then(|| u16::from_be_bytes([rest[p], rest[p + 1]]));
        Some(MpOption::AddAddr {
            addr_id: rest[0],
            nonce,
            addr,
            port,
        })
    }

    /// Encoded length of the whole option including type and length bytes,
    /// in the RFC 9897 layout.
    pub fn buffer_len(&self) -> usize {
        self.buffer_len_in(WireProfile::Rfc9897)
    }

    /// Encoded length of the whole option (type, length, MP_OPT, body) in
    /// `profile`'s layout.
    pub fn buffer_len_in(&self, profile: WireProfile) -> usize {
        let nonce_len = |n: &Option<u32>| match n {
            Some(_) if profile.addr_nonce() => 4,
            _ => 0,
        };
        3 + match self {
            MpOption::Confirm(items) => items.iter().map(|i| i.buffer_len_in(profile)).sum(),
            MpOption::Join { .. } => 9,
            MpOption::FastClose { key_data } | MpOption::Close { key_data } => key_data.len(),
            MpOption::Key { keys, .. } => {
                let ci = if profile.key_has_ci() { 5 } else { 0 };
                ci + keys.iter().map(|k| 1 + k.data.len()).sum::<usize>()
            }
            MpOption::Seq(_) => 6,
            MpOption::Hmac(_) => HMAC_LEN,
            MpOption::Rtt { .. } => 9,
            MpOption::AddAddr {
                nonce, addr, port, ..
            } => {
                let a = if addr.is_ipv4() { 4 } else { 16 };
                1 + nonce_len(nonce) + a + port.map_or(0, |_| 2)
            }
            MpOption::RemoveAddr { nonce, .. } => 1 + nonce_len(nonce),
            MpOption::Prio(_) => 1,
            MpOption::Exp(d) => d.len(),
        }
    }

    /// Check that the option can be encoded in the RFC 9897 layout.
    pub fn validate(&self) -> Result<(), WireError> {
        self.validate_in(WireProfile::Rfc9897)
    }

    /// Check that the option can be encoded in `profile`'s layout: lengths
    /// fit the 8-bit length byte, fields in range, no nested MP_CONFIRM,
    /// no field the layout cannot carry (refused, not dropped silently).
    pub fn validate_in(&self, profile: WireProfile) -> Result<(), WireError> {
        if self.buffer_len_in(profile) > 255 {
            return Err(WireError::OptionsTooLong);
        }
        let out_of_range = match self {
            MpOption::Confirm(items) => {
                for i in items {
                    if matches!(i, MpOption::Confirm(_)) {
                        return Err(WireError::FieldOutOfRange);
                    }
                    i.validate_in(profile)?;
                }
                false
            }
            MpOption::FastClose { key_data } | MpOption::Close { key_data } => key_data.is_empty(),
            MpOption::Key { ci, keys } => {
                let lost_ci = !profile.key_has_ci() && *ci != 0;
                let bad_key = keys.iter().any(|k| {
                    profile.key_type(k.key_type.to_u8()) != Some(k.key_type)
                        || k.key_type.key_len() != k.data.len()
                });
                keys.is_empty() || lost_ci || bad_key
            }
            MpOption::AddAddr { nonce, .. } | MpOption::RemoveAddr { nonce, .. } => {
                nonce.is_some() && !profile.addr_nonce()
            }
            MpOption::Seq(s) => *s > super::SEQ_MASK,
            MpOption::Prio(p) => *p > 15,
            _ => false,
        };
        if out_of_range {
            return Err(WireError::FieldOutOfRange);
        }
        Ok(())
    }

    /// Emit the whole option (type 46, length, MP_OPT, body) into `buf` in
    /// the RFC 9897 layout; returns the number of bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.emit_in(buf, WireProfile::Rfc9897)
    }

    /// Emit the whole option into `buf` in `profile`'s layout; returns the
    /// number of bytes written.
    pub fn emit_in(&self, buf: &mut [u8], profile: WireProfile) -> Result<usize, WireError> {
        self.validate_in(profile)?;
        let len = self.buffer_len_in(profile);
        let buf = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        buf[0] = MP_OPTION_TYPE;
        // `len` ≤ 255 checked by validate_in().
        buf[1] = len as u8;
        buf[2] = self.subtype();
        self.emit_body(&mut buf[3..], profile)?;
        Ok(len)
    }

    /// The whole option as bytes in `profile`'s layout (for splicing into
    /// a packet).
    pub fn encode_in(&self, profile: WireProfile) -> Result<Vec<u8>, WireError> {
        let mut v = vec![0u8; self.buffer_len_in(profile)];
        self.emit_in(&mut v, profile)?;
        Ok(v)
    }

    /// The bytes after MP_OPT into `b`, sized by `buffer_len_in` and
    /// checked by `validate_in`.
    fn emit_body(&self, b: &mut [u8], profile: WireProfile) -> Result<(), WireError> {
        match self {
            MpOption::Confirm(items) => {
                let mut off = 0;
                for i in items {
                    off += i.emit_in(&mut b[off..], profile)?;
                }
            }
            MpOption::Join { addr_id, ci, nonce } => {
                b[0] = *addr_id;
                b[1..5].copy_from_slice(&ci.to_be_bytes());
                b[5..9].copy_from_slice(&nonce.to_be_bytes());
            }
            MpOption::FastClose { key_data } | MpOption::Close { key_data } => {
                b.copy_from_slice(key_data);
            }
            MpOption::Key { ci, keys } => emit_key(b, *ci, keys, profile),
            MpOption::Seq(s) => write_u48(b, *s),
            MpOption::Hmac(h) => b.copy_from_slice(h),
            MpOption::Rtt {
                rtt_type,
                rtt_ms,
                age_ms,
            } => {
                b[0] = rtt_type.to_u8();
                b[1..5].copy_from_slice(&rtt_ms.to_be_bytes());
                b[5..9].copy_from_slice(&age_ms.to_be_bytes());
            }
            MpOption::AddAddr {
                addr_id,
                nonce,
                addr,
                port,
            } => emit_add_addr(b, *addr_id, *nonce, *addr, *port, profile),
            MpOption::RemoveAddr { addr_id, nonce } => {
                b[0] = *addr_id;
                if let Some(n) = nonce {
                    b[1..5].copy_from_slice(&n.to_be_bytes());
                }
            }
            MpOption::Prio(p) => b[0] = *p,
            MpOption::Exp(d) => b.copy_from_slice(d),
        }
        Ok(())
    }
}

/// MP_KEY's body into `b`: the reserved byte (0) and the CI where the
/// profile has them, then each key led by its type.
fn emit_key(b: &mut [u8], ci: u32, keys: &[MpKey], profile: WireProfile) {
    let mut off = 0;
    if profile.key_has_ci() {
        b[0] = 0;
        b[1..5].copy_from_slice(&ci.to_be_bytes());
        off = 5;
    }
    for k in keys {
        b[off] = k.key_type.to_u8();
        b[off + 1..off + 1 + k.data.len()].copy_from_slice(&k.data);
        off += 1 + k.data.len();
    }
}

/// MP_ADDADDR's body into `b` (sized by `buffer_len_in`): Address ID, the
/// nonce if any, the address (as the profile writes it), the port if any.
fn emit_add_addr(
    b: &mut [u8],
    addr_id: u8,
    nonce: Option<u32>,
    addr: IpAddr,
    port: Option<u16>,
    profile: WireProfile,
) {
    b[0] = addr_id;
    let mut off = 1;
    if let Some(n) = nonce {
        b[1..5].copy_from_slice(&n.to_be_bytes());
        off = 5;
    }
    let a = match (addr, profile.is_reference()) {
        (_, true) => ref_addr_bytes(addr),
        (IpAddr::V4(a), false) => a.octets().to_vec(),
        (IpAddr::V6(a), false) => a.octets().to_vec(),
    };
    b[off..off + a.len()].copy_from_slice(&a);
    off += a.len();
    if let Some(p) = port {
        b[off..off + 2].copy_from_slice(&p.to_be_bytes());
    }
}

/// Read MP_SEQ from the body of a Multipath option without allocating:
/// `Some(seq)` if `body` is a well-formed MP_SEQ (the same in every
/// profile).
pub fn parse_seq(body: &[u8]) -> Option<u64> {
    match body {
        [subtype::SEQ, rest @ ..] if rest.len() == 6 => Some(read_u48(rest)),
        _ => None,
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn read_u48(b: &[u8]) -> u64 {
    b[..6]
        .iter()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

fn write_u48(b: &mut [u8], v: u64) {
    let bytes = (v & super::SEQ_MASK).to_be_bytes();
    b[..6].copy_from_slice(&bytes[2..8]);
}
