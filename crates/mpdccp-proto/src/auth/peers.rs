//! Configured peers: who may connect, and which inner addresses each owns.
//!
//! A peer is an identity (its static X25519 public key, optionally with a
//! pre-shared key mixed into the handshake as Noise `psk2`) and the prefixes
//! it may use as inner source (`allowed_ips`, as in WireGuard). The same
//! prefixes route inner destinations downstream, so routing never depends on
//! addresses learned from traffic: no peer can claim a neighbour's address.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::prefix::{IpPrefix, PrefixTable, TableError};

/// Length of an X25519 key and of a pre-shared key.
pub const KEY_LEN: usize = 32;

/// Index of a peer in its [`PeerTable`] (stable for the table's life).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u32);

/// One configured peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// A name for logs and counters (not security relevant).
    pub name: String,
    /// The peer's static X25519 public key: its identity.
    pub public_key: [u8; KEY_LEN],
    /// Optional symmetric key mixed into the handshake (Noise psk2); all
    /// zeros when not configured, as WireGuard does.
    pub psk: Option<[u8; KEY_LEN]>,
    /// Inner prefixes this peer may send from and receives traffic for.
    pub allowed_ips: Vec<IpPrefix>,
}

/// Bounds of a peer table: configuration errors, not silent truncation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerLimits {
    pub max_peers: usize,
    pub max_prefixes: usize,
}

impl Default for PeerLimits {
    fn default() -> Self {
        PeerLimits {
            max_peers: 4096,
            max_prefixes: 65_536,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    #[error("too many peers (limit {0})")]
    TooManyPeers(usize),
    #[error("peer {0:?}: public key is also peer {1:?}'s")]
    DuplicateKey(String, String),
    #[error("peer {0:?}: allowed_ips {1}")]
    Prefix(String, TableError),
    #[error("peer {0:?}: public key is all zeros")]
    ZeroKey(String),
}

/// Why an inner packet from a peer was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceVerdict {
    /// The source lies in the sending peer's `allowed_ips` (longest match).
    Allowed,
    /// No configured prefix covers the source.
    Unknown,
    /// The longest matching prefix belongs to another peer.
    OtherPeer(PeerId),
}

/// All peers of a server, indexed by public key and by prefix.
#[derive(Debug, Clone)]
pub struct PeerTable {
    peers: Vec<Peer>,
    by_key: BTreeMap<[u8; KEY_LEN], PeerId>,
    prefixes: PrefixTable<PeerId>,
}

impl PeerTable {
    pub fn new(peers: Vec<Peer>, limits: PeerLimits) -> Result<Self, PeerError> {
        if peers.len() > limits.max_peers {
            return Err(PeerError::TooManyPeers(limits.max_peers));
        }
        let mut by_key = BTreeMap::new();
        let mut prefixes = PrefixTable::new(limits.max_prefixes);
        for (i, p) in peers.iter().enumerate() {
            let id = PeerId(i as u32);
            if p.public_key == [0; KEY_LEN] {
                return Err(PeerError::ZeroKey(p.name.clone()));
            }
            if let Some(prev) = by_key.insert(p.public_key, id) {
                let other = peers[prev.0 as usize].name.clone();
                return Err(PeerError::DuplicateKey(p.name.clone(), other));
            }
            for pre in &p.allowed_ips {
                prefixes
                    .insert(*pre, id)
                    .map_err(|e| PeerError::Prefix(p.name.clone(), e))?;
            }
        }
        Ok(PeerTable {
            peers,
            by_key,
            prefixes,
        })
    }

    pub fn len(&self) -> usize {
        self.peers.len()
    }
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    pub fn get(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id.0 as usize)
    }

    /// The peer whose identity is this static public key.
    pub fn by_public_key(&self, key: &[u8]) -> Option<PeerId> {
        let k: [u8; KEY_LEN] = key.try_into().ok()?;
        self.by_key.get(&k).copied()
    }

    /// Inner-source check for a packet that arrived on `peer`'s connection:
    /// allowed only if the source routes back to that same peer.
    pub fn check_source(&self, peer: PeerId, src: IpAddr) -> SourceVerdict {
        match self.prefixes.lookup(src) {
            Some((_, &owner)) if owner == peer => SourceVerdict::Allowed,
            Some((_, &owner)) => SourceVerdict::OtherPeer(owner),
            None => SourceVerdict::Unknown,
        }
    }

    /// Downstream routing: the peer whose configured prefix is the longest
    /// match for `dst`, if any.
    pub fn route(&self, dst: IpAddr) -> Option<PeerId> {
        self.prefixes.lookup(dst).map(|(_, &id)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, key: u8, ips: &[&str]) -> Peer {
        Peer {
            name: name.into(),
            public_key: [key; KEY_LEN],
            psk: None,
            allowed_ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn source_must_route_back_to_the_sender() {
        let t = PeerTable::new(
            vec![
                peer("a", 1, &["10.0.1.0/24", "fd00:1::/64"]),
                peer("b", 2, &["10.0.2.0/24", "10.0.1.77/32"]),
            ],
            PeerLimits::default(),
        )
        .unwrap();
        let (a, b) = (PeerId(0), PeerId(1));
        assert_eq!(t.check_source(a, ip("10.0.1.5")), SourceVerdict::Allowed);
        assert_eq!(t.check_source(a, ip("fd00:1::9")), SourceVerdict::Allowed);
        // B's neighbour-looking address in A's /24 belongs to B (longer).
        assert_eq!(
            t.check_source(a, ip("10.0.1.77")),
            SourceVerdict::OtherPeer(b)
        );
        assert_eq!(t.check_source(b, ip("10.0.1.77")), SourceVerdict::Allowed);
        // A spoofing B's address, or an unconfigured one, is refused.
        assert_eq!(
            t.check_source(a, ip("10.0.2.1")),
            SourceVerdict::OtherPeer(b)
        );
        assert_eq!(t.check_source(a, ip("192.0.2.1")), SourceVerdict::Unknown);
        assert_eq!(t.route(ip("10.0.1.77")), Some(b));
        assert_eq!(t.route(ip("10.0.1.78")), Some(a));
        assert_eq!(t.route(ip("8.8.8.8")), None);
        assert_eq!(t.by_public_key(&[2; 32]), Some(b));
        assert_eq!(t.by_public_key(&[3; 32]), None);
        assert_eq!(t.by_public_key(&[2; 31]), None);
    }

    #[test]
    fn bad_configurations_are_errors() {
        let dup_key = PeerTable::new(
            vec![peer("a", 1, &[]), peer("b", 1, &[])],
            PeerLimits::default(),
        );
        assert!(matches!(dup_key, Err(PeerError::DuplicateKey(..))));
        let dup_prefix = PeerTable::new(
            vec![peer("a", 1, &["10.0.0.0/8"]), peer("b", 2, &["10.0.0.0/8"])],
            PeerLimits::default(),
        );
        assert!(matches!(
            dup_prefix,
            Err(PeerError::Prefix(n, TableError::Duplicate(_))) if n == "b"
        ));
        let limits = PeerLimits {
            max_peers: 1,
            max_prefixes: 1,
        };
        assert!(matches!(
            PeerTable::new(vec![peer("a", 1, &[]), peer("b", 2, &[])], limits),
            Err(PeerError::TooManyPeers(1))
        ));
        assert!(matches!(
            PeerTable::new(vec![peer("a", 1, &["10.0.0.0/8", "11.0.0.0/8"])], limits),
            Err(PeerError::Prefix(_, TableError::Full(1)))
        ));
        assert!(matches!(
            PeerTable::new(vec![peer("z", 0, &[])], limits),
            Err(PeerError::ZeroKey(_))
        ));
    }
}
