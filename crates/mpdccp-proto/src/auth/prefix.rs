//! IP prefixes and a bounded longest-prefix-match table (IPv4 and IPv6).
//!
//! `allowed_ips` of a peer are prefixes, as in WireGuard: the same table
//! answers "may this peer send from inner source S?" (S must route back to
//! that peer) and "which peer receives a packet for inner destination D?".
//!
//! The table is a map per prefix length, probed from the longest length that
//! is present down to the shortest: at most 33 (IPv4) or 129 (IPv6) ordered
//! map look-ups, no allocation per look-up, deterministic order. A radix trie
//! would be faster for very large tables; peers' prefixes number in the
//! hundreds, and this stays obviously correct.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address prefix: the address with all bits past `len` cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("not an address/length prefix: {0:?}")]
    Syntax(String),
    #[error("prefix length {len} is longer than the address ({max} bits)")]
    TooLong { len: u8, max: u8 },
    #[error("prefix has bits set past its length: {0} (did you mean {1}?)")]
    HostBits(String, IpPrefix),
}

impl IpPrefix {
    /// A prefix from an address and a length; bits past `len` must be zero.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, PrefixError> {
        let max = max_len(addr);
        if len > max {
            return Err(PrefixError::TooLong { len, max });
        }
        let masked = mask(addr, len);
        let p = IpPrefix { addr: masked, len };
        if masked != addr {
            return Err(PrefixError::HostBits(format!("{addr}/{len}"), p));
        }
        Ok(p)
    }

    /// The host prefix of one address (/32 or /128).
    pub fn host(addr: IpAddr) -> Self {
        IpPrefix {
            addr,
            len: max_len(addr),
        }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }
    pub fn prefix_len(&self) -> u8 {
        self.len
    }
    /// `0.0.0.0/0` or `::/0`.
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, a: IpAddr) -> bool {
        a.is_ipv4() == self.addr.is_ipv4() && mask(a, self.len) == self.addr
    }
}

impl FromStr for IpPrefix {
    type Err = PrefixError;
    /// `10.1.0.0/16`, `fd00::/8`, or a bare address meaning a host prefix.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || PrefixError::Syntax(s.to_string());
        match s.split_once('/') {
            None => IpAddr::from_str(s)
                .map(IpPrefix::host)
                .map_err(|_| syntax()),
            Some((a, l)) => {
                let addr = IpAddr::from_str(a).map_err(|_| syntax())?;
                let len = l.parse::<u8>().map_err(|_| syntax())?;
                IpPrefix::new(addr, len)
            }
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn max_len(a: IpAddr) -> u8 {
    match a {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `a` with every bit past `len` cleared.
fn mask(a: IpAddr, len: u8) -> IpAddr {
    match a {
        IpAddr::V4(v) => {
            let m = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v) & m))
        }
        IpAddr::V6(v) => {
            let m = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v) & m))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("prefix {0} is already in the table")]
    Duplicate(IpPrefix),
    #[error("prefix table is full ({0} entries)")]
    Full(usize),
}

/// A longest-prefix-match table from prefixes to values, holding at most
/// `capacity` prefixes.
#[derive(Debug, Clone)]
pub struct PrefixTable<V> {
    /// Index 0..=32: IPv4 by length; 33..=161: IPv6 by length.
    by_len: Vec<BTreeMap<IpAddr, V>>,
    /// Lengths present, longest first, per family (kept sorted).
    v4_lens: Vec<u8>,
    v6_lens: Vec<u8>,
    entries: usize,
    capacity: usize,
}

impl<V: Clone> PrefixTable<V> {
    pub fn new(capacity: usize) -> Self {
        PrefixTable {
            by_len: (0..(33 + 129)).map(|_| BTreeMap::new()).collect(),
            v4_lens: Vec::new(),
            v6_lens: Vec::new(),
            entries: 0,
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    fn slot(p: &IpPrefix) -> usize {
        match p.addr {
            IpAddr::V4(_) => usize::from(p.len),
            IpAddr::V6(_) => 33 + usize::from(p.len),
        }
    }

    /// Add a prefix. A prefix already present is an error: two peers may not
    /// claim the same prefix (overlaps of different lengths are fine, the
    /// longer one wins).
    pub fn insert(&mut self, p: IpPrefix, v: V) -> Result<(), TableError> {
        if self.entries >= self.capacity {
            return Err(TableError::Full(self.capacity));
        }
        let map = &mut self.by_len[Self::slot(&p)];
        if map.contains_key(&p.addr) {
            return Err(TableError::Duplicate(p));
        }
        map.insert(p.addr, v);
        self.entries += 1;
        let lens = if p.addr.is_ipv4() {
            &mut self.v4_lens
        } else {
            &mut self.v6_lens
        };
        if let Err(at) = lens.binary_search_by(|l| p.len.cmp(l)) {
            lens.insert(at, p.len);
        }
        Ok(())
    }

    /// The value of the longest prefix containing `a`, and that prefix.
    pub fn lookup(&self, a: IpAddr) -> Option<(IpPrefix, &V)> {
        let lens = if a.is_ipv4() {
            &self.v4_lens
        } else {
            &self.v6_lens
        };
        lens.iter().find_map(|&len| {
            let p = IpPrefix {
                addr: mask(a, len),
                len,
            };
            self.by_len[Self::slot(&p)].get(&p.addr).map(|v| (p, v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parse_rejects_host_bits_and_overlong() {
        assert_eq!(p("10.1.0.0/16").prefix_len(), 16);
        assert_eq!(p("10.1.2.3"), IpPrefix::host(ip("10.1.2.3")));
        assert!(matches!(
            "10.1.2.3/16".parse::<IpPrefix>(),
            Err(PrefixError::HostBits(_, q)) if q == p("10.1.0.0/16")
        ));
        assert!(matches!(
            "10.0.0.0/33".parse::<IpPrefix>(),
            Err(PrefixError::TooLong { len: 33, max: 32 })
        ));
        assert!("fd00::/129".parse::<IpPrefix>().is_err());
        assert!("10.0.0.0/x".parse::<IpPrefix>().is_err());
        assert!("banana/8".parse::<IpPrefix>().is_err());
        assert_eq!(p("0.0.0.0/0").to_string(), "0.0.0.0/0");
    }

    #[test]
    fn longest_prefix_wins_per_family() {
        let mut t = PrefixTable::new(16);
        t.insert(p("10.0.0.0/8"), 'a').unwrap();
        t.insert(p("10.1.0.0/16"), 'b').unwrap();
        t.insert(p("10.1.2.3/32"), 'c').unwrap();
        t.insert(p("fd00::/8"), 'x').unwrap();
        t.insert(p("fd00:1::/32"), 'y').unwrap();
        assert_eq!(t.lookup(ip("10.9.9.9")).map(|e| *e.1), Some('a'));
        assert_eq!(t.lookup(ip("10.1.9.9")).map(|e| *e.1), Some('b'));
        assert_eq!(t.lookup(ip("10.1.2.3")).map(|e| *e.1), Some('c'));
        assert_eq!(t.lookup(ip("10.1.2.3")).unwrap().0, p("10.1.2.3/32"));
        assert_eq!(t.lookup(ip("11.0.0.1")), None);
        assert_eq!(t.lookup(ip("fd00:1::5")).map(|e| *e.1), Some('y'));
        assert_eq!(t.lookup(ip("fd00:2::5")).map(|e| *e.1), Some('x'));
        // An IPv4 default route does not catch IPv6 and vice versa.
        t.insert(p("0.0.0.0/0"), 'd').unwrap();
        assert_eq!(t.lookup(ip("192.0.2.1")).map(|e| *e.1), Some('d'));
        assert_eq!(t.lookup(ip("2001:db8::1")), None);
        // The IPv4-mapped IPv6 form is a different family: no match.
        assert_eq!(t.lookup(ip("::ffff:10.1.2.3")), None);
    }

    #[test]
    fn table_is_bounded_and_rejects_duplicates() {
        let mut t = PrefixTable::new(2);
        t.insert(p("10.0.0.0/8"), 1).unwrap();
        assert_eq!(
            t.insert(p("10.0.0.0/8"), 2),
            Err(TableError::Duplicate(p("10.0.0.0/8")))
        );
        t.insert(p("10.0.0.0/9"), 2).unwrap();
        assert_eq!(t.insert(p("10.0.0.0/10"), 3), Err(TableError::Full(2)));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn lookup_agrees_with_linear_scan() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut t = PrefixTable::new(512);
        let mut all = Vec::new();
        for i in 0..300u32 {
            let len = rng.gen_range(0..=32u8);
            let a = IpAddr::V4(Ipv4Addr::from(rng.gen::<u32>() & 0x0AFF_FFFF));
            let pre = IpPrefix {
                addr: mask(a, len),
                len,
            };
            if t.insert(pre, i).is_ok() {
                all.push((pre, i));
            }
        }
        for _ in 0..2000 {
            let a = IpAddr::V4(Ipv4Addr::from(rng.gen::<u32>() & 0x0AFF_FFFF));
            let best = all
                .iter()
                .filter(|(q, _)| q.contains(a))
                .max_by_key(|(q, _)| q.prefix_len())
                .map(|(_, v)| *v);
            assert_eq!(t.lookup(a).map(|e| *e.1), best, "{a}");
        }
    }
}
