//! NAT rebinding: a client path's packets suddenly arrive from
//! a new remote key (its NAT mapping expired and was recreated with another
//! port, or address). Done the way QUIC migrates a path (RFC 9000 §9),
//! adapted to DCCP:
//!
//! 1. A non-Request datagram from an unknown remote is matched to the
//!    subflows whose Requests carried the same DCCP ports (the client's
//!    ports are inside the UDP payload; a NAT rewrites only the UDP ones).
//!    Decisive is the sequence-number validity check of RFC 4340 §7.5.1 /
//!    §7.5.3 against the subflow's windows, made without touching any
//!    state ([`Connection::rebind_claim`]): only DCCP-Ack, -Data and
//!    -DataAck with long sequence numbers qualify, and on a protected
//!    connection only data packets whose AEAD opens (so a pure Ack, which
//!    is not sealed, cannot start a migration there). An off-path attacker
//!    does not know the 48-bit windows (random ISS, §7.5.1), so everything
//!    it forges is rejected and creates no state.
//! 2. A valid packet is processed at once (its data is delivered) and the
//!    new key becomes a *candidate* of a small bounded table (one per
//!    subflow, at most [`MAX_CANDIDATES`]): the subflow sends a DCCP-Sync
//!    to the new key, and only a SyncAck acknowledging exactly that Sync's
//!    fresh sequence number, from the new key, validates it
//!    (RFC 4340 §7.5.4; QUIC's PATH_CHALLENGE/PATH_RESPONSE).
//! 3. Before validation the subflow's packets go to the new key while the
//!    anti-amplification budget allows (3× the bytes received from it,
//!    RFC 9000 §8.1: after a real rebinding the old mapping is dead, so
//!    waiting would lose a round trip of data); beyond it they go to the
//!    old key, as before. The challenge Sync itself always goes to the new
//!    key (it answers a validated packet and is rate limited).
//! 4. Validated: the route and the reverse route move to the new key, the
//!    old key is forgotten (the gate's session key too, for path 0 in
//!    authenticated mode). The client is unchanged: its socket is
//!    connected, the NAT maps the server's answers back.
//!
//! Counted in `EndpointStats`: `rebind_candidates` (valid packets that
//! started or renewed a challenge), `rebinds_validated`, `rebind_rejected`
//! (claims of a known subflow that failed the checks, SyncAcks answering no
//! challenge of theirs, candidates refused with a full table).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{ConnectionHandle, Endpoint};
use crate::conn::codec::{PacketType, Segment};
use crate::conn::subflow::SubState;
use crate::conn::{ConnState, ConnStats, Connection, Incoming, Transmit};
use crate::path::PathId;
use crate::time::Instant;

/// Candidates at once, at most (each is one subflow's pending challenge).
pub const MAX_CANDIDATES: usize = 16;
/// A candidate not heard from for this long is forgotten.
const CANDIDATE_LIFETIME: Duration = Duration::from_secs(3);
/// A new valid packet from a candidate whose challenge is older than this
/// (the Sync or its SyncAck may be lost) sends a new challenge.
const RECHALLENGE_AFTER: Duration = Duration::from_millis(250);
/// How far past GSR a packet from a new remote may be numbered.
const REBIND_AHEAD_MAX: u64 = 128;
/// RFC 9000 §8.1: at most three times the bytes received from an
/// unvalidated address may be sent to it.
const AMPLIFICATION: usize = 3;

/// What a datagram from an unknown remote claims, by the pure checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Ack / Data / DataAck inside the subflow's windows.
    Packet,
    /// A SyncAck inside the windows, acknowledging this (wire) number.
    SyncAck(u64),
    /// Inside the windows, but of a type that never moves a path (Sync,
    /// Close, …): dropped without an answer (a stateless Reset could be
    /// valid at the client and kill the path).
    Ignored,
    /// Fails the checks: not this subflow's.
    Invalid,
}

/// MP options that change the connection rather than carry data: not
/// acted on from an address that has not been validated.
fn changes_state(seg: &Segment<'_>) -> bool {
    let m = &seg.mp;
    m.prio.is_some()
        || m.addaddr.is_some()
        || m.removeaddr.is_some()
        || m.close.is_some()
        || m.fast_close.is_some()
        || m.key.is_some()
        || m.join.is_some()
}

/// Datagrams a connection could not read as DCCP at all (unparsable, bad
/// checksum): any other datagram on a routed key shows that path alive —
/// even one outside the windows: copies a mutation pushed far ahead may
/// have moved GSR past everything the peer sends before the contest, and
/// the peer's packets (its probes too) must still take the path back,
/// or the path's own Syncs went on to the copier and it stayed down.
pub(super) fn not_the_peers(s: &ConnStats) -> u64 {
    s.rx.rx_malformed + s.rx.rx_bad_checksum
}

impl Connection {
    /// RFC 4340 §7.5.3 validity of `seg` on subflow `path` without any
    /// effect (no Sync owed, no window moved). A NAT rebinding candidate
    /// must pass it before anything is done with it.
    pub(crate) fn rebind_claim(&self, path: PathId, seg: &Segment<'_>) -> Claim {
        if self.life.state() != ConnState::Established || seg.short_seq {
            return Claim::Invalid;
        }
        let Some(i) = self.idx(path) else {
            return Claim::Invalid;
        };
        let sf = &self.paths[i];
        if sf.state() != SubState::Open {
            return Claim::Invalid;
        }
        let seqn = sf.unwrap_seq(seg.seq);
        let ackn = seg.ack.map(|a| sf.unwrap_ack(a));
        let (swl, swh) = sf.seq_window();
        let (awl, awh) = sf.ack_window();
        let ack_ok = ackn.is_none_or(|a| a >= awl && a <= awh);
        let seq_ok = seqn >= swl && seqn <= swh;
        // Until the new address is validated its packets may only carry
        // data and acknowledgements: one with an option error (which would
        // reset the path) or an MP option that changes the connection
        // (priority, addresses, close, a key or join) is not acted on.
        let only_data = seg.option_error.is_none() && !changes_state(seg);
        // Only a packet newer than every one received may move a path
        // (RFC 9000 §9.3: "only ... the highest-numbered non-probing
        // packet"): the packets of a real rebinding are new, a copy of
        // one already received is an on-path attacker's replay (under
        // test, 100 000 mutated copies from the attacker's own address
        // each renewed a challenge and its budget, and the downstream
        // went to the attacker until the client gave the connection up).
        // And not far ahead either: after a real rebinding the peer's
        // next packet follows its last (only the other direction lost
        // packets to the dead mapping); a copy with a mutated high
        // sequence byte, processed, would move GSR past everything the
        // peer sends and its packets would fail our window.
        let newest = seqn > sf.gsr() && seqn <= sf.gsr() + REBIND_AHEAD_MAX;
        match seg.ptype {
            _ if !only_data && seq_ok && ack_ok => Claim::Ignored,
            PacketType::Ack | PacketType::DataAck | PacketType::Data if seq_ok && !newest => {
                Claim::Ignored
            }
            PacketType::Ack | PacketType::DataAck if seq_ok && ackn.is_some() && ack_ok => {
                // On a protected connection only data (whose AEAD must
                // open) may move a path: the one packet type that proves
                // the sender holds the keys and carries something to
                // deliver.
                if self.protection.is_some() && !seg.ptype.carries_data() {
                    Claim::Ignored
                } else {
                    Claim::Packet
                }
            }
            PacketType::Data if seq_ok => Claim::Packet,
            // §7.5.4: SyncAck has no upper sequence bound; the challenge
            // number it acknowledges is what counts.
            PacketType::SyncAck if seqn >= swl && ackn.is_some() && ack_ok => {
                Claim::SyncAck(seg.ack.unwrap_or_default())
            }
            _ if seq_ok && ack_ok => Claim::Ignored,
            _ => Claim::Invalid,
        }
    }

    /// Processes a datagram that passed [`Connection::rebind_claim`];
    /// false when it did not authenticate after all (a protected data
    /// packet that does not open, or a bad checksum): then it had no
    /// effect but counters.
    pub(crate) fn handle_rebinding_datagram(
        &mut self,
        now: Instant,
        path: PathId,
        data: &[u8],
    ) -> bool {
        let failed = |s: &ConnStats| {
            s.rx.rx_protect_failed + s.rx.rx_replayed + s.rx.rx_bad_checksum + s.rx.rx_malformed
        };
        let before = failed(&self.stats);
        self.handle_datagram(now, path, data);
        failed(&self.stats) == before
    }

    /// Asks subflow `path` for a Sync (the challenge); false when it cannot
    /// send one.
    pub(crate) fn challenge_path(&mut self, now: Instant, path: PathId) -> bool {
        match self.idx(path) {
            Some(i) if self.paths[i].state() == SubState::Open => {
                self.paths[i].send_rtt_probe(now);
                true
            }
            _ => false,
        }
    }
}

/// A new remote key of a subflow, not validated yet.
#[derive(Clone, Debug)]
pub(super) struct Candidate<K> {
    key: K,
    /// Bytes that may still be sent to `key` (RFC 9000 §8.1).
    budget: usize,
    /// The challenge Sync's wire sequence number, once it has gone out.
    challenge: Option<u64>,
    challenged_at: Instant,
    last_heard: Instant,
}

/// The endpoint's rebinding state: the DCCP ports of every routed subflow
/// and the pending candidates. Both bounded by the routes.
pub(super) struct Rebind<K> {
    /// (client's DCCP source port, destination port) of each routed subflow.
    ports_of: BTreeMap<(ConnectionHandle, PathId), (u16, u16)>,
    by_ports: BTreeSet<((u16, u16), ConnectionHandle, PathId)>,
    candidates: BTreeMap<(ConnectionHandle, PathId), Candidate<K>>,
    /// Subflows whose routed key was heard while they had a candidate,
    /// until when: the old path is alive, so a new key is no NAT
    /// rebinding (whose old mapping is dead) but copies (RFC 9000 §9.3.3:
    /// a packet from the legitimate address takes the path back). The
    /// candidate is dropped, and until then packets from new keys are
    /// dropped and counted (renewed by every packet on the routed key
    /// while copies come: a real rebinding during such a flood waits for
    /// the end of this hold, 3 s after the old key's last packet).
    /// Per subflow: (contested until, the last copy dropped).
    contested: BTreeMap<(ConnectionHandle, PathId), (Instant, Instant)>,
}

impl<K> Default for Rebind<K> {
    fn default() -> Self {
        Rebind {
            ports_of: BTreeMap::new(),
            by_ports: BTreeSet::new(),
            candidates: BTreeMap::new(),
            contested: BTreeMap::new(),
        }
    }
}

/// Subflows checked for one unknown-remote datagram, at most (bounds the
/// work a flood costs when many clients share their DCCP ports).
const MAX_CLAIMS_CHECKED: usize = 8;

/// What [`Endpoint::try_rebind`] did with a datagram.
pub(super) enum Outcome {
    /// Processed on this connection.
    Accepted(ConnectionHandle),
    /// Claims a subflow but may not act: dropped without an answer.
    Dropped,
    /// Claims nothing: the caller's usual unknown-remote handling.
    NoClaim,
}

impl<K: Ord + Clone> Endpoint<K> {
    /// Remembers the DCCP ports of a new route's subflow.
    pub(super) fn note_ports(&mut self, h: ConnectionHandle, pid: PathId, seg: &Segment<'_>) {
        let p = (seg.src_port, seg.dst_port);
        if let Some(old) = self.rebind.ports_of.insert((h, pid), p) {
            self.rebind.by_ports.remove(&(old, h, pid));
        }
        self.rebind.by_ports.insert((p, h, pid));
    }

    /// Forgets route `(h, pid)` with its ports and candidate.
    pub(super) fn unroute(&mut self, h: ConnectionHandle, pid: PathId) {
        if let Some(remote) = self.reverse.remove(&(h, pid)) {
            self.routes.remove(&remote);
        }
        if let Some(p) = self.rebind.ports_of.remove(&(h, pid)) {
            self.rebind.by_ports.remove(&(p, h, pid));
        }
        self.rebind.candidates.remove(&(h, pid));
        self.rebind.contested.remove(&(h, pid));
    }

    /// Most pending rebinding candidates at once.
    pub const MAX_REBIND_CANDIDATES: usize = MAX_CANDIDATES;

    /// Pending rebinding candidates (bounded by `MAX_CANDIDATES`).
    pub fn rebind_candidates(&self) -> usize {
        self.rebind.candidates.len()
    }

    /// Would a datagram from an unknown remote be taken as one of our
    /// subflows' (by DCCP ports and sequence window)? Nothing changes: a
    /// sharded server asks before passing the datagram to another worker.
    /// `rx` keeps its parse for the endpoint that then takes it.
    pub fn claims_rebinding(&self, rx: &mut Incoming<'_>) -> bool {
        let Ok(seg) = rx.parse(self.config.conn.wire_profile) else {
            return false;
        };
        self.first_claim(seg).is_some()
    }

    /// The routed subflows with `ports` (client's source, destination),
    /// at most [`MAX_CLAIMS_CHECKED`].
    fn subflows_on_ports(
        &self,
        ports: (u16, u16),
    ) -> impl Iterator<Item = (ConnectionHandle, PathId)> + '_ {
        self.rebind
            .by_ports
            .range((ports, ConnectionHandle(0), PathId(0))..)
            .take_while(move |(p, _, _)| *p == ports)
            .take(MAX_CLAIMS_CHECKED)
            .map(|&(_, h, pid)| (h, pid))
    }

    /// The first subflow on `seg`'s ports whose windows take it, and how.
    fn first_claim(&self, seg: &Segment<'_>) -> Option<(ConnectionHandle, PathId, Claim)> {
        self.subflows_on_ports((seg.src_port, seg.dst_port))
            .find_map(
                |(h, pid)| match self.conns.get(&h)?.conn.rebind_claim(pid, seg) {
                    Claim::Invalid => None,
                    c => Some((h, pid, c)),
                },
            )
    }

    /// A non-Request datagram from an unknown `remote`: is it a subflow's
    /// packet from a new address (see the module docs)?
    pub(super) fn try_rebind(
        &mut self,
        now: Instant,
        remote: &K,
        seg: &Segment<'_>,
        data: &[u8],
    ) -> Outcome {
        if self
            .subflows_on_ports((seg.src_port, seg.dst_port))
            .next()
            .is_none()
        {
            return Outcome::NoClaim;
        }
        let Some((h, pid, claim)) = self.first_claim(seg) else {
            self.stats.rebind_rejected += 1;
            return Outcome::NoClaim;
        };
        self.expire_candidates(now);
        match claim {
            Claim::Invalid => Outcome::NoClaim,
            Claim::Ignored => {
                self.stats.rebind_rejected += 1;
                Outcome::Dropped
            }
            Claim::SyncAck(ack) => self.challenge_answered(now, h, pid, remote, ack, data),
            Claim::Packet if self.contested(now, h, pid) => self.drop_copy(now, h, pid),
            Claim::Packet => self.packet_from_candidate(now, h, pid, remote, data),
        }
    }

    /// A SyncAck from `remote`: when it answers the candidate's challenge,
    /// the route moves there and the SyncAck is processed as usual.
    fn challenge_answered(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        pid: PathId,
        remote: &K,
        ack: u64,
        data: &[u8],
    ) -> Outcome {
        let answers = self
            .rebind
            .candidates
            .get(&(h, pid))
            .is_some_and(|c| c.key == *remote && c.challenge == Some(ack));
        if !answers {
            self.stats.rebind_rejected += 1;
            return Outcome::Dropped;
        }
        self.validate(h, pid, remote.clone());
        // Now routed: the SyncAck is an ordinary packet (RTT sample).
        if let Some(s) = self.conns.get_mut(&h) {
            s.conn.handle_datagram(now, pid, data);
        }
        self.dirty.insert(h);
        self.collect(h);
        Outcome::Accepted(h)
    }

    /// A packet from a new key while the subflow's routed key is alive.
    /// Processing it would move the subflow's windows to numbers the peer
    /// may not have sent (its packets then fail the ack check there, as
    /// with Acks taking the next numbers), and a challenge would take the
    /// subflow's next Sync — the probe or resynchronisation the path needs
    /// — to the copier: dropped and counted, nothing else.
    fn drop_copy(&mut self, now: Instant, h: ConnectionHandle, pid: PathId) -> Outcome {
        self.stats.rebind_rejected += 1;
        if let Some(c) = self.rebind.contested.get_mut(&(h, pid)) {
            c.1 = now;
        }
        Outcome::Dropped
    }

    /// A packet inside the subflow's windows from new key `remote`:
    /// processed, and `remote` becomes or stays the subflow's candidate.
    fn packet_from_candidate(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        pid: PathId,
        remote: &K,
        data: &[u8],
    ) -> Outcome {
        let Some(s) = self.conns.get_mut(&h) else {
            return Outcome::NoClaim;
        };
        if !s.conn.handle_rebinding_datagram(now, pid, data) {
            self.stats.rebind_rejected += 1;
            self.dirty.insert(h);
            return Outcome::Dropped;
        }
        self.dirty.insert(h);
        self.candidate_heard(now, h, pid, remote, data.len());
        self.collect(h);
        Outcome::Accepted(h)
    }

    /// A valid packet from candidate `remote` of `(h, pid)`: a new or
    /// renewed candidate, challenged when it has no fresh challenge.
    fn candidate_heard(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        pid: PathId,
        remote: &K,
        len: usize,
    ) {
        let budget = if self.contested(now, h, pid) {
            0
        } else {
            AMPLIFICATION * len
        };
        let rb = &mut self.rebind;
        let full = rb.candidates.len() >= MAX_CANDIDATES;
        let challenge = match rb.candidates.get_mut(&(h, pid)) {
            Some(c) if c.key == *remote => {
                c.budget = c.budget.saturating_add(budget);
                c.last_heard = now;
                now.saturating_duration_since(c.challenged_at) >= RECHALLENGE_AFTER
            }
            None if full => {
                self.stats.rebind_rejected += 1;
                return;
            }
            // A new candidate; the latest new key of a subflow replaces its
            // earlier one (RFC 9000 §9.3).
            _ => {
                let fresh = Candidate {
                    key: remote.clone(),
                    budget,
                    challenge: None,
                    challenged_at: now,
                    last_heard: now,
                };
                rb.candidates.insert((h, pid), fresh);
                true
            }
        };
        if !challenge {
            return;
        }
        let sent = self
            .conns
            .get_mut(&h)
            .is_some_and(|s| s.conn.challenge_path(now, pid));
        if let Some(c) = self.rebind.candidates.get_mut(&(h, pid)) {
            c.challenge = None;
            c.challenged_at = now;
        }
        if sent {
            self.stats.rebind_candidates += 1;
        }
    }

    /// A datagram from `(h, pid)`'s routed key was the peer's while the
    /// subflow had a candidate (or was contested): contested for a
    /// candidate's lifetime from now, and the candidate is gone.
    pub(super) fn routed_heard(&mut self, now: Instant, h: ConnectionHandle, pid: PathId) {
        let had = self.rebind.candidates.remove(&(h, pid)).is_some();
        let c = self.rebind.contested.entry((h, pid)).or_insert((now, now));
        if had {
            c.1 = now;
        }
        c.0 = now + CANDIDATE_LIFETIME;
    }

    /// Whether `(h, pid)`'s routed key is alive (see `Rebind::contested`).
    fn contested(&self, now: Instant, h: ConnectionHandle, pid: PathId) -> bool {
        self.rebind
            .contested
            .get(&(h, pid))
            .is_some_and(|&(until, _)| now < until)
    }

    /// Whether a packet on `(h, pid)`'s routed key contests a new key: the
    /// subflow has a candidate, or copies were dropped within a
    /// candidate's lifetime (cheap: usually neither).
    pub(super) fn has_candidate(&self, now: Instant, h: ConnectionHandle, pid: PathId) -> bool {
        let key = (h, pid);
        (!self.rebind.candidates.is_empty() && self.rebind.candidates.contains_key(&key))
            || (!self.rebind.contested.is_empty()
                && self.rebind.contested.get(&key).is_some_and(|&(_, copy)| {
                    now.saturating_duration_since(copy) < CANDIDATE_LIFETIME
                }))
    }

    /// Moves `(h, pid)`'s route to `new`; the old key is forgotten.
    fn validate(&mut self, h: ConnectionHandle, pid: PathId, new: K) {
        self.rebind.candidates.remove(&(h, pid));
        let old = self.reverse.insert((h, pid), new.clone());
        if let Some(old) = &old {
            self.routes.remove(old);
        }
        self.routes.insert(new.clone(), (h, pid));
        if let (Some((g, _)), Some(old), PathId(0)) = (&mut self.gate, old, pid) {
            g.rekey(&old, new);
        }
        self.stats.rebinds_validated += 1;
    }

    fn expire_candidates(&mut self, now: Instant) {
        self.rebind.contested.retain(|_, (until, _)| now < *until);
        let conns = &self.conns;
        self.rebind.candidates.retain(|(h, pid), c| {
            now.saturating_duration_since(c.last_heard) < CANDIDATE_LIFETIME
                && conns.get(h).is_some_and(|s| s.conn.has_path(*pid))
        });
    }

    /// The key transmit `t` of connection `h` (in `buf`) goes to: the
    /// route, or a candidate's new key (its challenge Sync, and whatever
    /// its amplification budget allows).
    pub(super) fn destination(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        t: &Transmit,
        buf: &[u8],
    ) -> Option<K> {
        let routed = self.reverse.get(&(h, t.path)).cloned();
        let Some(c) = self.rebind.candidates.get_mut(&(h, t.path)) else {
            return routed;
        };
        if now.saturating_duration_since(c.last_heard) >= CANDIDATE_LIFETIME {
            self.rebind.candidates.remove(&(h, t.path));
            return routed;
        }
        if c.challenge.is_none() {
            let first = &buf[..t.segment_size.unwrap_or(t.size).min(t.size)];
            if let Ok(s) = Segment::parse_in(first, None, self.config.conn.wire_profile) {
                if s.ptype == PacketType::Sync {
                    c.challenge = Some(s.seq);
                    c.budget = c.budget.saturating_sub(t.size);
                    return Some(c.key.clone());
                }
            }
        }
        if c.budget >= t.size {
            c.budget -= t.size;
            return Some(c.key.clone());
        }
        routed
    }
}
