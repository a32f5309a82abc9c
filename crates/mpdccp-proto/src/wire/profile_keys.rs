//! Key, token and MP_HMAC derivations per [`WireProfile`].
//!
//! Common to all profiles (RFC 9897 §3.2.4): plain 64-bit keys, derived
//! keys `d-keyA = KeyA ‖ KeyB` (A = the client, the connection's initiator)
//! and `d-keyB = KeyB ‖ KeyA`, MP_HMAC = HMAC-SHA256 truncated to 20 bytes,
//! keyed with the sender's derived key.
//!
//! What differs is the HMAC message and the MP_JOIN identifier:
//!
//! * RFC 9897 §3.2.5: MP_JOIN's HMAC covers the two nonces, sender's first
//!   (`RB ‖ RA` in the Response, `RA ‖ RB` in the Ack); ADDADDR covers
//!   `id ‖ nonce ‖ addr ‖ port`, REMOVEADDR `id ‖ nonce`.
//! * Reference kernel (both branches, checked against the captures): the
//!   Response's HMAC is `HMAC(d-keyB, J ‖ nonceC)` and the Ack's
//!   `HMAC(d-keyA, J ‖ nonceS)`, where `J` is the 32-bit identifier in the
//!   client's MP_JOIN: the server's CI (k4.14) or the server's token
//!   (k5.10). ADDADDR covers `id ‖ addr-as-on-the-wire ‖ port (0 if none)`
//!   (so the byte-reversed IPv4), REMOVEADDR just `id`.
//! * k5.10 token: the first 32 bits of SHA-256(d-key), read as a host-order
//!   (little-endian on x86) integer and written big-endian, i.e. the first
//!   four digest bytes reversed. The server's token comes from d-keyB.
//! * MP_CLOSE / MP_FAST_CLOSE carry the *receiver's* key, raw (RFC 9897
//!   §3.2.9 figure: "DCCP-Close + MP_CLOSE [B's key]" from A; the reference
//!   does the same).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::mp::{MpOption, HMAC_LEN};
use super::profile::{ref_addr_bytes, WireProfile};

type HmacSha256 = Hmac<Sha256>;

/// The two plain keys of a connection, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainKeys {
    /// The client's (host A's) key, as on the wire.
    pub client: [u8; 8],
    /// The server's (host B's) key.
    pub server: [u8; 8],
}

/// Which packet of the MP_JOIN handshake an MP_HMAC rides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinHmac {
    /// The server's Response (signed with d-keyB).
    Response,
    /// The client's Ack (signed with d-keyA).
    Ack,
}

impl PlainKeys {
    /// d-keyA = KeyA ‖ KeyB: the client signs with it.
    pub fn d_key_a(&self) -> [u8; 16] {
        concat(self.client, self.server)
    }
    /// d-keyB = KeyB ‖ KeyA: the server signs with it.
    pub fn d_key_b(&self) -> [u8; 16] {
        concat(self.server, self.client)
    }
    /// The derived key of the sender (`from_client`: the client sends).
    pub fn d_key_of(&self, from_client: bool) -> [u8; 16] {
        if from_client {
            self.d_key_a()
        } else {
            self.d_key_b()
        }
    }
}

/// `a ‖ b`: a derived key from two plain keys (RFC 9897 §3.2.4).
pub(crate) fn concat(a: [u8; 8], b: [u8; 8]) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&a);
    k[8..].copy_from_slice(&b);
    k
}

/// HMAC-SHA256 over the concatenation of `parts`, leftmost 20 bytes.
pub fn hmac20(key: &[u8], parts: &[&[u8]]) -> [u8; HMAC_LEN] {
    // Invariant: HMAC accepts keys of any length.
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; HMAC_LEN];
    out.copy_from_slice(&full[..HMAC_LEN]);
    out
}

/// Constant-time comparison of a received MP_HMAC with the expected one.
pub fn hmac20_matches(key: &[u8], parts: &[&[u8]], tag: &[u8; HMAC_LEN]) -> bool {
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        return false;
    };
    for p in parts {
        mac.update(p);
    }
    mac.verify_truncated_left(tag).is_ok()
}

/// The k5.10 reference's 32-bit token of a derived key.
pub fn reference_token(d_key: &[u8]) -> u32 {
    let d = Sha256::digest(d_key);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

impl WireProfile {
    /// The identifier a client puts in MP_JOIN to name the connection on
    /// the server: the server's CI (RFC 9897, k4.14) or the server's token
    /// (k5.10, where `server_ci` is unused).
    pub fn join_id(self, keys: &PlainKeys, server_ci: u32) -> u32 {
        match self {
            WireProfile::ReferenceK510 => reference_token(&keys.d_key_b()),
            _ => server_ci,
        }
    }

    /// The identifier in the server's MP_JOIN (its Response): the client's
    /// CI (RFC 9897, k4.14) or, in k5.10, the server's token again.
    pub fn join_response_id(self, keys: &PlainKeys, client_ci: u32) -> u32 {
        match self {
            WireProfile::ReferenceK510 => reference_token(&keys.d_key_b()),
            _ => client_ci,
        }
    }

    /// The HMAC message of MP_JOIN's MP_HMAC. `join_id` is the identifier
    /// in the client's MP_JOIN ([`WireProfile::join_id`]).
    pub fn join_hmac_message(
        self,
        at: JoinHmac,
        join_id: u32,
        nonce_c: u32,
        nonce_s: u32,
    ) -> [u8; 8] {
        let (a, b) = match (self, at) {
            (WireProfile::Rfc9897, JoinHmac::Response) => (nonce_s, nonce_c),
            (WireProfile::Rfc9897, JoinHmac::Ack) => (nonce_c, nonce_s),
            (_, JoinHmac::Response) => (join_id, nonce_c),
            (_, JoinHmac::Ack) => (join_id, nonce_s),
        };
        let mut m = [0u8; 8];
        m[..4].copy_from_slice(&a.to_be_bytes());
        m[4..].copy_from_slice(&b.to_be_bytes());
        m
    }

    /// MP_JOIN's MP_HMAC as the sender computes it.
    pub fn join_hmac(
        self,
        keys: &PlainKeys,
        at: JoinHmac,
        join_id: u32,
        nonce_c: u32,
        nonce_s: u32,
    ) -> [u8; HMAC_LEN] {
        let key = keys.d_key_of(at == JoinHmac::Ack);
        hmac20(
            &key,
            &[&self.join_hmac_message(at, join_id, nonce_c, nonce_s)],
        )
    }

    /// The HMAC message of the MP_HMAC that follows an MP_ADDADDR or
    /// MP_REMOVEADDR in this profile; `None` for other sub-options.
    pub fn addr_hmac_message(self, opt: &MpOption) -> Option<Vec<u8>> {
        if self == WireProfile::Rfc9897 {
            return opt.hmac_message();
        }
        match opt {
            MpOption::AddAddr {
                addr_id,
                addr,
                port,
                ..
            } => {
                let mut m = vec![*addr_id];
                m.extend_from_slice(&ref_addr_bytes(*addr));
                m.extend_from_slice(&port.unwrap_or(0).to_be_bytes());
                Some(m)
            }
            MpOption::RemoveAddr { addr_id, .. } => Some(vec![*addr_id]),
            _ => None,
        }
    }

    /// The MP_HMAC a sender attaches to `opt` (ADDADDR/REMOVEADDR).
    pub fn addr_hmac(
        self,
        keys: &PlainKeys,
        from_client: bool,
        opt: &MpOption,
    ) -> Option<[u8; HMAC_LEN]> {
        let m = self.addr_hmac_message(opt)?;
        Some(hmac20(&keys.d_key_of(from_client), &[&m]))
    }

    /// MP_CLOSE / MP_FAST_CLOSE key data sent by the client (`from_client`)
    /// or the server: the receiver's key.
    pub fn close_key_data(self, keys: &PlainKeys, from_client: bool) -> [u8; 8] {
        if from_client {
            keys.server
        } else {
            keys.client
        }
    }
}
