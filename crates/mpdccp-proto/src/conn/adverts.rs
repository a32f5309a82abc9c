//! Address management (RFC 9897 §3.2.8–3.2.10): MP_ADDADDR / MP_REMOVEADDR
//! with nonce and MP_HMAC, retransmitted until MP_CONFIRM; MP_PRIO; address
//! ids.

use super::{
    codec, keys, mp, seq, ConfirmItem, ConnError, ConnKeys, ConnState, Connection, Event,
    MpAddAddr, MpRemoveAddr, PathId, Segment, WireProfile, REMOVEADDR_SEEN_MAX,
};
use crate::time::Instant;
use rand::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;

/// The addresses of a connection: ours advertised to the peer, the peer's
/// (RFC 9897 §3.2.8, §3.2.9).
#[derive(Debug)]
pub(super) struct AddrBook {
    /// Next Address ID of ours (0 is the initial subflow's).
    pub(super) next_addr_id: u8,
    /// Our MP_ADDADDR / MP_REMOVEADDR, retransmitted until confirmed.
    pub(super) adverts: Vec<Advert>,
    pub(super) remote_addrs: BTreeMap<u8, SocketAddr>,
    /// Highest MP_SEQ of the peer's MP_ADDADDR/MP_REMOVEADDR per Address
    /// ID, the dataset of RFC 9897 §3.2.1 (outdated options are not acted on).
    pub(super) addr_option_seq: BTreeMap<u8, u64>,
    /// MP_REMOVEADDR (address id, nonce) pairs acted on, newest last
    /// (bounded): a replayed withdrawal must not close a later subflow
    /// that reuses the address id.
    pub(super) removeaddr_seen: VecDeque<(u8, u32)>,
}

impl Default for AddrBook {
    fn default() -> Self {
        AddrBook {
            next_addr_id: 1,
            adverts: Vec::new(),
            remote_addrs: BTreeMap::new(),
            addr_option_seq: BTreeMap::new(),
            removeaddr_seen: VecDeque::new(),
        }
    }
}

/// An address we advertise (MP_ADDADDR) or withdraw (MP_REMOVEADDR).
#[derive(Clone, Debug)]
pub(super) struct Advert {
    pub(super) id: u8,
    pub(super) addr: SocketAddr,
    pub(super) nonce: u32,
    pub(super) remove: bool,
    pub(super) confirmed: bool,
    pub(super) tries: u32,
    pub(super) retx_at: Instant,
    /// The retransmission timer fired: the next pure Ack carries it.
    pub(super) due: bool,
}

impl Advert {
    fn new(id: u8, addr: SocketAddr, nonce: u32, remove: bool, now: Instant) -> Advert {
        Advert {
            id,
            addr,
            nonce,
            remove,
            confirmed: false,
            tries: 0,
            retx_at: now,
            due: false,
        }
    }

    /// Puts this advert on `seg` (MP_ADDADDR or MP_REMOVEADDR with its
    /// MP_HMAC under our derived key) and arms its retransmission.
    pub(super) fn attach(
        &mut self,
        now: Instant,
        rto: Duration,
        k: &ConnKeys,
        profile: WireProfile,
        seg: &mut Segment<'_>,
    ) {
        self.tries += 1;
        self.retx_at = now + rto;
        self.due = false;
        if self.remove {
            let r = MpRemoveAddr {
                addr_id: self.id,
                nonce: self.nonce,
            };
            seg.mp.removeaddr_hmac = Some(removeaddr_hmac(profile, &k.d_key_local(), &r));
            seg.mp.removeaddr = Some(r);
        } else {
            let ad = MpAddAddr {
                addr_id: self.id,
                nonce: self.nonce,
                ip: self.addr.ip(),
                port: (self.addr.port() != 0).then_some(self.addr.port()),
            };
            seg.mp.addaddr_hmac = Some(addaddr_hmac(profile, &k.d_key_local(), &ad));
            seg.mp.addaddr = Some(ad);
        }
    }

    /// Owed to the peer at `now` (sent with the next pure Ack).
    pub(super) fn is_due(&self, now: Instant) -> bool {
        !self.confirmed && (self.due || self.retx_at <= now)
    }
}

impl Connection {
    /// The adverts' retransmission timer. MP options go out on an open
    /// subflow: without one, no timer (nobody could serve it).
    pub(super) fn advert_timeout(&self) -> Option<Instant> {
        if self.life.state() != ConnState::Established || !self.paths.iter().any(|p| p.is_open()) {
            return None;
        }
        self.addrs
            .adverts
            .iter()
            .filter(|a| !a.confirmed && !a.due)
            .map(|a| a.retx_at)
            .min()
    }

    /// The peer confirmed our MP_ADDADDR / MP_REMOVEADDR (same id, kind
    /// and nonce — a reference profile has no nonce): no more
    /// retransmissions.
    pub(super) fn on_advert_confirmed(&mut self, c: &ConfirmItem) {
        let remove = c.kind == mp::REMOVEADDR;
        let any_nonce = !self.config.wire_profile.addr_nonce();
        if let Some(a) = self.addrs.adverts.iter_mut().find(|a| {
            let nonce_ok = any_nonce || a.nonce == c.nonce;
            a.id == c.id && a.remove == remove && nonce_ok && !a.confirmed
        }) {
            a.confirmed = true;
            let id = a.id;
            self.events.push_back(Event::AddressConfirmed { id });
        }
    }

    /// MP_ADDADDR / MP_REMOVEADDR received on subflow `i`: acted on only
    /// when their MP_HMAC verifies under the peer's derived key, and
    /// confirmed (RFC 9897 §3.2.8, §3.2.9).
    pub(super) fn handle_address_options(&mut self, now: Instant, i: usize, m: &codec::MpOpts) {
        let keys = self.d_keys();
        let p = self.config.wire_profile;
        if let Some(a) = m.addaddr {
            match (m.addaddr_hmac, keys) {
                (Some(h), Some(k)) if verify_addaddr(p, &k.d_key_remote(), &a, &h) => {
                    self.on_addaddr(i, &a, m.seq)
                }
                _ => self.stats.auth.addaddr_bad_hmac += 1,
            }
        }
        if let Some(r) = m.removeaddr {
            match (m.removeaddr_hmac, keys) {
                (Some(h), Some(k)) if verify_removeaddr(p, &k.d_key_remote(), &r, &h) => {
                    self.on_removeaddr(now, i, &r, m.seq)
                }
                _ => self.stats.auth.removeaddr_bad_hmac += 1,
            }
        }
    }

    /// RFC 9897 §3.2.1: whether an address option with MP_SEQ `seq` is
    /// older than one already received for Address ID `id` (counted).
    fn address_option_outdated(&mut self, id: u8, seq: Option<u64>) -> bool {
        let mut last = self.addrs.addr_option_seq.get(&id).copied();
        let outdated = seq::outdated_in_dataset(&mut last, seq);
        if let Some(l) = last {
            self.addrs.addr_option_seq.insert(id, l);
        }
        self.stats.paths.mp_option_outdated += u64::from(outdated);
        outdated
    }

    fn on_addaddr(&mut self, i: usize, a: &MpAddAddr, seq: Option<u64>) {
        let addr = SocketAddr::new(a.ip, a.port.unwrap_or(0));
        // §3.2.8: "The advertisement of broadcast or multicast IP addresses
        // MUST be ignored"; a known Address ID keeps its IP ("MUST silently
        // ignore the MP_ADDADDR if the IP Address is not the same"), only
        // its port may change.
        let reused = self
            .addrs
            .remote_addrs
            .get(&a.addr_id)
            .is_some_and(|old| old.ip() != a.ip);
        if reused || !crate::wire::mp::addaddr_is_usable(a.ip) {
            self.stats.paths.addaddr_ignored += 1;
            return;
        }
        // Outdated: confirmed ("MAY", §3.2.1) so the sender stops, not stored.
        if !self.address_option_outdated(a.addr_id, seq)
            && self.addrs.remote_addrs.insert(a.addr_id, addr) != Some(addr)
        {
            self.events.push_back(Event::AddressAdded {
                id: a.addr_id,
                addr,
            });
        }
        let sf = &mut self.paths[i];
        sf.owe_confirm(ConfirmItem {
            seq,
            kind: mp::ADDADDR,
            id: a.addr_id,
            nonce: a.nonce,
            addr: Some((a.ip, a.port)),
        });
        sf.ack_now();
    }

    fn on_removeaddr(&mut self, now: Instant, i: usize, r: &MpRemoveAddr, seq: Option<u64>) {
        // Outdated: confirmed ("MAY", §3.2.1), not acted on.
        if !self.address_option_outdated(r.addr_id, seq) {
            self.withdraw_remote_address(now, r);
        }
        let sf = &mut self.paths[i];
        sf.owe_confirm(ConfirmItem {
            seq,
            kind: mp::REMOVEADDR,
            id: r.addr_id,
            nonce: r.nonce,
            addr: None,
        });
        sf.ack_now();
    }

    fn withdraw_remote_address(&mut self, now: Instant, r: &MpRemoveAddr) {
        if self.addrs.remote_addrs.remove(&r.addr_id).is_some() {
            self.events
                .push_back(Event::AddressRemoved { id: r.addr_id });
        }
        // The MP_HMAC covers only id and nonce, so an observer could
        // replay it later; act on each (id, nonce) once.
        if self.addrs.removeaddr_seen.contains(&(r.addr_id, r.nonce)) {
            self.stats.paths.removeaddr_duplicate += 1;
        } else {
            if self.addrs.removeaddr_seen.len() >= REMOVEADDR_SEEN_MAX {
                self.addrs.removeaddr_seen.pop_front();
            }
            self.addrs.removeaddr_seen.push_back((r.addr_id, r.nonce));
            self.close_paths_of_address(now, r.addr_id);
        }
    }

    /// Fires the expired advert timers: the option is owed again, or its
    /// tries are exhausted (given up, counted).
    pub(super) fn fire_adverts(&mut self, now: Instant) {
        for a in &mut self.addrs.adverts {
            if a.confirmed || a.retx_at > now {
                continue;
            }
            if a.tries >= self.config.mp.option_max_tries {
                a.confirmed = true; // give up
                self.stats.paths.mp_option_unconfirmed += 1;
            } else {
                a.due = true;
            }
        }
    }

    /// Queues MP_REMOVEADDR for `addr_id` (retransmitted on the open
    /// subflows until MP_CONFIRM or `mp.option_max_tries`).
    pub(super) fn withdraw_path_address(&mut self, now: Instant, addr_id: u8) {
        let nonce = self.rng.gen();
        self.addrs
            .adverts
            .retain(|a| !(a.id == addr_id && a.remove && !a.confirmed));
        let unspecified = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
        self.addrs
            .adverts
            .push(Advert::new(addr_id, unspecified, nonce, true, now));
        self.stats.paths.removeaddr_sent += 1;
    }

    /// Sets the priority of a path for our scheduler and tells the peer
    /// with MP_PRIO (retransmitted until MP_CONFIRM).
    pub fn set_priority(&mut self, now: Instant, id: PathId, prio: u8) {
        self.blocked_none = None;
        let Some(i) = self.idx(id) else { return };
        let prio = prio.min(crate::path::priority::MAX);
        let tell = self.negotiation.is_multipath();
        self.paths[i].set_priority(now, prio, tell);
    }

    /// Advertises a local address to the peer (MP_ADDADDR with nonce and
    /// MP_HMAC, retransmitted until confirmed). Returns its address id.
    pub fn advertise_address(&mut self, now: Instant, addr: SocketAddr) -> Result<u8, ConnError> {
        self.blocked_none = None;
        if !self.negotiation.is_multipath() {
            return Err(if self.negotiation.is_pending() {
                ConnError::NotEstablished
            } else {
                ConnError::NotMultipath
            });
        }
        let id = self.alloc_addr_id();
        let nonce = self.rng.gen();
        self.addrs
            .adverts
            .push(Advert::new(id, addr, nonce, false, now));
        Ok(id)
    }

    /// Withdraws an address advertised before (MP_REMOVEADDR).
    pub fn withdraw_address(&mut self, now: Instant, id: u8) -> Result<(), ConnError> {
        self.blocked_none = None;
        let nonce = self.rng.gen();
        let Some(a) = self.addrs.adverts.iter_mut().find(|a| a.id == id) else {
            return Err(ConnError::Config(format!("no advertised address {id}")));
        };
        a.remove = true;
        a.confirmed = false;
        a.tries = 0;
        a.nonce = nonce;
        a.retx_at = now;
        a.due = false;
        Ok(())
    }

    /// Addresses the peer advertised, by address id.
    pub fn remote_addresses(&self) -> Vec<(u8, SocketAddr)> {
        self.addrs
            .remote_addrs
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect()
    }

    /// The next address id not used by a live subflow or a pending
    /// advertisement (ids wrap after 255; a reused id must not make a
    /// late MP_REMOVEADDR close a new subflow).
    pub(super) fn alloc_addr_id(&mut self) -> u8 {
        let mut id = self.addrs.next_addr_id;
        for _ in 0..255 {
            id = self.addrs.next_addr_id;
            self.addrs.next_addr_id = self.addrs.next_addr_id.wrapping_add(1).max(1);
            let used = self
                .paths
                .iter()
                .any(|p| !p.is_gone() && p.local_addr_id() == id)
                || self
                    .addrs
                    .adverts
                    .iter()
                    .any(|a| a.id == id && !(a.remove && a.confirmed));
            if !used {
                break;
            }
        }
        id
    }
}

/// MP_ADDADDR authentication (RFC 9897 §3.2.6, §3.2.8): HMAC-SHA256 with
/// the sender's derived key over Address ID ‖ Nonce ‖ Address ‖ Port, the
/// port as two zero bytes when absent; a reference profile's message has
/// no nonce and the IPv4 address reversed (docs/INTEROP.md). The
/// message is the wire layer's.
pub(super) fn addaddr_hmac(p: WireProfile, d_key: &[u8], a: &MpAddAddr) -> [u8; keys::HMAC_LEN] {
    keys::hmac20(d_key, &[&addaddr_message(p, a)])
}

pub(super) fn verify_addaddr(
    p: WireProfile,
    d_key: &[u8],
    a: &MpAddAddr,
    tag: &[u8; keys::HMAC_LEN],
) -> bool {
    keys::verify20(d_key, &[&addaddr_message(p, a)], tag)
}

fn addaddr_message(p: WireProfile, a: &MpAddAddr) -> Vec<u8> {
    p.addr_hmac_message(&crate::wire::MpOption::AddAddr {
        addr_id: a.addr_id,
        nonce: p.addr_nonce().then_some(a.nonce),
        addr: a.ip,
        port: a.port,
    })
    .unwrap_or_default()
}

/// MP_REMOVEADDR authentication: HMAC over Address ID ‖ Nonce (RFC 9897
/// §3.2.9), Address ID alone in a reference profile.
pub(super) fn removeaddr_hmac(
    p: WireProfile,
    d_key: &[u8],
    r: &MpRemoveAddr,
) -> [u8; keys::HMAC_LEN] {
    keys::hmac20(d_key, &[&removeaddr_message(p, r)])
}

pub(super) fn verify_removeaddr(
    p: WireProfile,
    d_key: &[u8],
    r: &MpRemoveAddr,
    tag: &[u8; keys::HMAC_LEN],
) -> bool {
    keys::verify20(d_key, &[&removeaddr_message(p, r)], tag)
}

fn removeaddr_message(p: WireProfile, r: &MpRemoveAddr) -> Vec<u8> {
    p.addr_hmac_message(&crate::wire::MpOption::RemoveAddr {
        addr_id: r.addr_id,
        nonce: p.addr_nonce().then_some(r.nonce),
    })
    .unwrap_or_default()
}
