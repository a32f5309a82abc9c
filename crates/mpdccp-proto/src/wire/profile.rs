//! Wire profiles: one switch between the RFC 9897 layout of option 46 and
//! the layouts Deutsche Telekom's MP-DCCP Linux kernel (the reference
//! implementation of the drafts) puts on the wire.
//!
//! The layouts were derived from two captures of the reference kernel
//! talking to itself (vendored as test vectors in
//! `tests/vectors/reference-k{414,510}.txt`) and from the byte layouts
//! documented next to the images; no reference source was used as a
//! template. Differences from RFC 9897 (everything else is identical):
//!
//! | sub-option | RFC 9897 | ReferenceK414 (2024) | ReferenceK510 (2023) |
//! |---|---|---|---|
//! | MP_KEY | resvd, CI, keys | resvd, CI, keys | keys only (no resvd, no CI) |
//! | 3rd MP_KEY in the client's first Ack | no | no | yes: `{0,KeyC}{0,KeyS}` |
//! | MP_JOIN id field | peer's CI | peer's CI | server's token (see [`super::profile_keys`]) |
//! | MP_ADDADDR | id, nonce, addr, \[port\] | id, addr, \[port\]; IPv4 byte-reversed | same as K414 |
//! | MP_REMOVEADDR | id, nonce | id | id |
//! | key types | 0 (plain), 255 | 0 only | 0 only |
//!
//! The IPv4 reversal: the reference writes `put_unaligned_be32` of an
//! address that is already in network order, so on a little-endian host
//! 10.0.2.3 travels as `03 02 00 0a` (and its MP_HMAC covers those bytes).
//! We emulate the x86 reference; a big-endian reference host would not
//! reverse. IPv6 addresses are copied as they are (the reference has no
//! IPv6 subflows, so this is untested against it).
//!
//! In the Rust form ([`MpOption`]) an address is always the real address
//! and absent fields are `None`/0: `Key { ci: 0 }` for K510 (there is no CI
//! on its wire), `nonce: None` for the reference ADDADDR/REMOVEADDR. Emit
//! refuses a field the profile cannot carry ([`WireError::FieldOutOfRange`])
//! rather than dropping it silently.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::mp::{subtype, KeyType, MpKey, MpOption, MP_OPTION_TYPE};
use super::WireError;

/// Which layout of option 46 a connection speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WireProfile {
    /// RFC 9897 as published: [`MpOption::parse`] / [`MpOption::emit`].
    #[default]
    Rfc9897,
    /// Telekom mp-dccp branch `mpdccp_v03_k4.14` (2024-03): CIs in MP_KEY
    /// and MP_JOIN, two-message key exchange, nonce-less ADDADDR.
    ReferenceK414,
    /// Telekom mp-dccp branch `mpdccp_v03_k5.10` (2023-07): no CI, a third
    /// MP_KEY in the client's Ack, tokens in MP_JOIN.
    ReferenceK510,
}

impl WireProfile {
    pub const ALL: [WireProfile; 3] = [
        WireProfile::Rfc9897,
        WireProfile::ReferenceK414,
        WireProfile::ReferenceK510,
    ];

    /// The name used in configuration files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WireProfile::Rfc9897 => "rfc9897",
            WireProfile::ReferenceK414 => "reference-k4.14",
            WireProfile::ReferenceK510 => "reference-k5.10",
        }
    }

    /// A reference-kernel layout (not RFC 9897).
    pub fn is_reference(self) -> bool {
        self != WireProfile::Rfc9897
    }

    /// MP_KEY carries `reserved(1) | CI(4)` before the keys.
    pub fn key_has_ci(self) -> bool {
        self != WireProfile::ReferenceK510
    }

    /// The client repeats both keys in an MP_KEY on its first Ack (the
    /// third message of the k5.10 key exchange).
    pub fn third_key_message(self) -> bool {
        self == WireProfile::ReferenceK510
    }

    /// MP_ADDADDR / MP_REMOVEADDR carry a nonce.
    pub fn addr_nonce(self) -> bool {
        self == WireProfile::Rfc9897
    }

    /// Key data length of a key type byte in the reference layouts: only
    /// plain keys (type 0, 8 bytes) exist there (the reference offers and
    /// accepts nothing else); any other type cannot be delimited.
    fn reference_key_len(key_type: u8) -> Option<usize> {
        (key_type == KeyType::Plain.to_u8()).then_some(8)
    }

    /// Parse the body of option 46 (the bytes after type and length).
    pub fn parse_mp(self, body: &[u8]) -> Result<MpOption, WireError> {
        if self == WireProfile::Rfc9897 {
            return MpOption::parse(body);
        }
        MpOption::parse_with(body, &|st, rest, bad| self.parse_single(st, rest, bad))
    }

    /// One sub-option other than MP_CONFIRM in a reference layout: its
    /// MP_OPT `st` and the bytes after it.
    fn parse_single(self, st: u8, rest: &[u8], bad: WireError) -> Result<MpOption, WireError> {
        match st {
            subtype::KEY => self.parse_key(rest).ok_or(bad),
            subtype::ADDADDR => parse_ref_addaddr(rest).ok_or(bad),
            subtype::REMOVEADDR => match rest {
                [addr_id] => Ok(MpOption::RemoveAddr {
                    addr_id: *addr_id,
                    nonce: None,
                }),
                _ => Err(bad),
            },
            // MP_JOIN, MP_FAST_CLOSE, MP_SEQ, MP_HMAC, MP_RTT, MP_PRIO,
            // MP_CLOSE: the same bytes as RFC 9897.
            _ => MpOption::parse_single(st, rest, bad),
        }
    }

    fn parse_key(self, rest: &[u8]) -> Option<MpOption> {
        let (ci, mut r) = if self.key_has_ci() {
            if rest.len() < 5 {
                return None;
            }
            let ci = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]);
            (ci, &rest[5..])
        } else {
            (0, rest)
        };
        let mut keys = Vec::with_capacity(r.len() / 9 + 1);
        while let Some((&kt, after)) = r.split_first() {
            let n = Self::reference_key_len(kt)?;
            if after.len() < n {
                return None;
            }
            keys.push(MpKey {
                key_type: KeyType::Plain,
                data: after[..n].to_vec(),
            });
            r = &after[n..];
        }
        (!keys.is_empty()).then_some(MpOption::Key { ci, keys })
    }

    /// Encoded length of the whole option (type, length, MP_OPT, body).
    pub fn mp_buffer_len(self, opt: &MpOption) -> usize {
        if self == WireProfile::Rfc9897 {
            return opt.buffer_len();
        }
        match opt {
            MpOption::Confirm(items) => {
                3 + items.iter().map(|i| self.mp_buffer_len(i)).sum::<usize>()
            }
            MpOption::Key { keys, .. } => {
                let ci = if self.key_has_ci() { 5 } else { 0 };
                3 + ci + keys.iter().map(|k| 1 + k.data.len()).sum::<usize>()
            }
            MpOption::AddAddr { addr, port, .. } => {
                let a = if addr.is_ipv4() { 4 } else { 16 };
                4 + a + port.map_or(0, |_| 2)
            }
            MpOption::RemoveAddr { .. } => 4,
            other => other.buffer_len(),
        }
    }

    /// Check that `opt` can be written in this profile.
    pub fn validate_mp(self, opt: &MpOption) -> Result<(), WireError> {
        if self == WireProfile::Rfc9897 {
            return opt.validate();
        }
        if self.mp_buffer_len(opt) > 255 {
            return Err(WireError::OptionsTooLong);
        }
        match opt {
            MpOption::Confirm(items) => {
                for i in items {
                    if matches!(i, MpOption::Confirm(_)) {
                        return Err(WireError::FieldOutOfRange);
                    }
                    self.validate_mp(i)?;
                }
                Ok(())
            }
            MpOption::Key { ci, keys } => {
                let no_ci = !self.key_has_ci() && *ci != 0;
                let bad_key = keys
                    .iter()
                    .any(|k| Self::reference_key_len(k.key_type.to_u8()) != Some(k.data.len()));
                if keys.is_empty() || no_ci || bad_key {
                    return Err(WireError::FieldOutOfRange);
                }
                Ok(())
            }
            MpOption::AddAddr { nonce: Some(_), .. }
            | MpOption::RemoveAddr { nonce: Some(_), .. } => Err(WireError::FieldOutOfRange),
            other => other.validate(),
        }
    }

    /// Emit the whole option (46, length, MP_OPT, body) into `buf`; returns
    /// the number of bytes written.
    pub fn emit_mp(self, opt: &MpOption, buf: &mut [u8]) -> Result<usize, WireError> {
        if self == WireProfile::Rfc9897 {
            return opt.emit(buf);
        }
        self.validate_mp(opt)?;
        let len = self.mp_buffer_len(opt);
        let out = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        let body = |out: &mut [u8]| {
            out[0] = MP_OPTION_TYPE;
            out[1] = len as u8; // ≤ 255, checked by validate_mp
            out[2] = opt.subtype();
        };
        match opt {
            MpOption::Confirm(items) => {
                body(out);
                let mut off = 3;
                for i in items {
                    off += self.emit_mp(i, &mut out[off..])?;
                }
            }
            MpOption::Key { ci, keys } => {
                body(out);
                let mut off = 3;
                if self.key_has_ci() {
                    out[3] = 0;
                    out[4..8].copy_from_slice(&ci.to_be_bytes());
                    off = 8;
                }
                for k in keys {
                    out[off] = k.key_type.to_u8();
                    out[off + 1..off + 1 + k.data.len()].copy_from_slice(&k.data);
                    off += 1 + k.data.len();
                }
            }
            MpOption::AddAddr {
                addr_id,
                addr,
                port,
                ..
            } => {
                body(out);
                out[3] = *addr_id;
                let a = ref_addr_bytes(*addr);
                out[4..4 + a.len()].copy_from_slice(&a);
                if let Some(p) = port {
                    out[4 + a.len()..].copy_from_slice(&p.to_be_bytes());
                }
            }
            MpOption::RemoveAddr { addr_id, .. } => {
                body(out);
                out[3] = *addr_id;
            }
            other => return other.emit(out),
        }
        Ok(len)
    }

    /// `opt` as a complete option, bytes included (for splicing into a
    /// packet, see [`super::profile_keys`] users).
    pub fn encode_mp(self, opt: &MpOption) -> Result<Vec<u8>, WireError> {
        let mut v = vec![0u8; self.mp_buffer_len(opt)];
        self.emit_mp(opt, &mut v)?;
        Ok(v)
    }
}

impl fmt::Display for WireProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WireProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WireProfile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown wire profile {s:?} (rfc9897, reference-k4.14, reference-k5.10)")
            })
    }
}

/// The reference's MP_ADDADDR body: `id(1) addr(4|16) [port(2)]`, the IPv4
/// address byte-reversed on the wire.
fn parse_ref_addaddr(rest: &[u8]) -> Option<MpOption> {
    let (addr_len, port) = match rest.len() {
        5 => (4, false),
        7 => (4, true),
        17 => (16, false),
        19 => (16, true),
        _ => return None,
    };
    let a = &rest[1..1 + addr_len];
    let addr = if addr_len == 4 {
        IpAddr::V4(Ipv4Addr::new(a[3], a[2], a[1], a[0]))
    } else {
        let mut b = [0u8; 16];
        b.copy_from_slice(a);
        IpAddr::V6(Ipv6Addr::from(b))
    };
    let port = port.then(|| u16::from_be_bytes([rest[1 + addr_len], rest[2 + addr_len]]));
    Some(MpOption::AddAddr {
        addr_id: rest[0],
        nonce: None,
        addr,
        port,
    })
}

/// The address bytes as the (x86) reference writes them into MP_ADDADDR
/// and into its HMAC message.
pub fn ref_addr_bytes(addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => {
            let mut o = a.octets();
            o.reverse();
            o.to_vec()
        }
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}
