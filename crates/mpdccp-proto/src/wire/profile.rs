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
//! Both layouts are read and written by the one codec of option 46,
//! `mp_codec.rs` ([`MpOption::parse_in`], [`MpOption::emit_in`]), which
//! asks the profile the questions below.
//!
//! In the Rust form ([`MpOption`]) an address is always the real address
//! and absent fields are `None`/0: `Key { ci: 0 }` for K510 (there is no CI
//! on its wire), `nonce: None` for the reference ADDADDR/REMOVEADDR. Emit
//! refuses a field the profile cannot carry ([`WireError::FieldOutOfRange`])
//! rather than dropping it silently.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use super::mp::KeyType;
#[cfg(doc)]
use super::{MpOption, WireError};

/// Which layout of option 46 a connection speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WireProfile {
    /// RFC 9897 as published.
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

    /// The key type of a Key Type byte in this layout (RFC 9897 §3.2.4):
    /// 0 and 255 in RFC 9897; only plain keys (type 0) in the reference
    /// layouts (the reference offers and accepts nothing else). `None`
    /// means the key cannot be delimited.
    pub fn key_type(self, v: u8) -> Option<KeyType> {
        match (self, KeyType::from_u8(v)?) {
            (_, KeyType::Plain) => Some(KeyType::Plain),
            (WireProfile::Rfc9897, t) => Some(t),
            _ => None,
        }
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
