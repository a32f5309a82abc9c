//! Datagram Packetization Layer Path MTU Discovery (DPLPMTUD, RFC 8899)
//! per subflow, sans-IO.
//!
//! Sizes here are DCCP packet bytes (the UDP payload, or the IP payload of
//! native DCCP): the driver converts from IP-level MTUs with the outer
//! headers of the path ([`PlpmtudConfig::for_path`]).
//!
//! Probes are DCCP-Sync packets padded with zeros (RFC 4340 §14.1: "DCCP-Sync
//! packets are the best choice for upward probing, since DCCP-Sync probes do
//! not risk an application's data loss"); the peer's SyncAck acknowledging
//! exactly the probe's sequence number confirms the size (RFC 4340 §7.5.4).
//! A probe carries no application data and is never in the congestion
//! controller's flight, so a lost probe is not congestion (RFC 8899 §4.4).
//!
//! State machine (RFC 8899 §5.2): BASE confirms the base size, SEARCHING
//! probes the largest size first (the interface MTU, the common case) and
//! then searches binary between the largest confirmed and the smallest failed
//! size to the byte, SEARCH_COMPLETE holds the result and searches upward
//! again after the raise timer (PMTU_RAISE_TIMER, §5.1.1), ERROR when even the
//! base size fails. A size is failed after MAX_PROBES unanswered probes
//! (§5.1.2), each given PROBE_TIMER to be answered.
//!
//! Black holes (§4.3, §5.2): consecutive retransmission timeouts on a path
//! whose PLPMTU is above base start a confirmation: each round probes the
//! current PLPMTU and the base size. The current size failing MAX_PROBES
//! times while a base probe is answered is a black hole: the PLPMTU falls
//! back to base and the search starts again below the failed size. Neither
//! answered is an outage, not an MTU change: nothing changes.

use std::time::Duration;

use super::{Connection, Event, PacketType, PathId, DATA_HEADER_MAX, PROTECTION_OVERHEAD};
use crate::time::Instant;

/// RFC 8899 §5.1.2 BASE_PLPMTU at the IP level: 1280 over IPv6 (RFC 8200
/// §5), 1200 over IPv4 (the RFC's recommendation for IPv4).
pub const BASE_PLPMTU_IPV4: u32 = 1200;
pub const BASE_PLPMTU_IPV6: u32 = 1280;
/// RFC 8899 §5.1.1 PMTU_RAISE_TIMER.
pub const PMTU_RAISE_TIMER: Duration = Duration::from_secs(600);
/// RFC 8899 §5.1.2 MAX_PROBES.
pub const MAX_PROBES: u32 = 3;
/// RFC 8899 §5.1.1: PROBE_TIMER "MUST NOT be smaller than 1 second".
pub const PROBE_TIMER: Duration = Duration::from_secs(1);
/// Largest probe built (bounds the padding; jumbo frames fit).
pub const MAX_PROBE_BYTES: u32 = 9216;
/// A Sync: generic header with 48-bit sequence numbers and the
/// acknowledgement sub-header (RFC 4340 §5.1, §5.6).
const SYNC_HEADER: usize = 24;
/// Consecutive RTOs on a path that start a black-hole confirmation.
const BLACK_HOLE_RTOS: u32 = 2;

static PADDING: [u8; MAX_PROBE_BYTES as usize] = [0; MAX_PROBE_BYTES as usize];

/// PLPMTUD settings of a connection's subflows (`None` in
/// [`ConnectionConfig::plpmtud`](super::ConnectionConfig::plpmtud) = off, every path assumed to carry
/// `mss_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlpmtudConfig {
    /// Size assumed to work and confirmed first (BASE_PLPMTU minus the
    /// outer headers).
    pub base_bytes: u32,
    /// Largest size searched for (the local interface MTU or the
    /// configured path MTU, minus the outer headers).
    pub max_bytes: u32,
    pub probe_timer: Duration,
    pub max_probes: u32,
    pub raise_timer: Duration,
}

impl PlpmtudConfig {
    /// For a path whose outer IP + encapsulation headers are `outer_bytes`
    /// and whose largest IP packet is `max_ip_mtu`: base 1280 (IPv6) /
    /// 1200 (IPv4) at the IP level, RFC 8899 timers.
    pub fn for_path(max_ip_mtu: u32, outer_bytes: u32, ipv6: bool) -> PlpmtudConfig {
        let base_ip = if ipv6 {
            BASE_PLPMTU_IPV6
        } else {
            BASE_PLPMTU_IPV4
        };
        let max_bytes = max_ip_mtu.saturating_sub(outer_bytes).min(MAX_PROBE_BYTES);
        PlpmtudConfig {
            base_bytes: base_ip.saturating_sub(outer_bytes).min(max_bytes),
            max_bytes,
            probe_timer: PROBE_TIMER,
            max_probes: MAX_PROBES,
            raise_timer: PMTU_RAISE_TIMER,
        }
    }

    fn sane(mut self) -> Self {
        self.max_bytes = self.max_bytes.clamp(SYNC_HEADER as u32, MAX_PROBE_BYTES);
        self.base_bytes = self.base_bytes.clamp(SYNC_HEADER as u32, self.max_bytes);
        self.probe_timer = self.probe_timer.max(Duration::from_millis(1));
        self.max_probes = self.max_probes.max(1);
        self
    }
}

/// RFC 8899 §5.2 states (DISABLED is `ConnectionConfig::plpmtud: None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlpmtuState {
    Base,
    Searching,
    SearchComplete,
    Error,
}

/// PLPMTUD counters of a connection (all its subflows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlpmtuStats {
    pub probes_sent: u64,
    pub probe_bytes_sent: u64,
    pub probes_acked: u64,
    /// Probes that were not answered within the probe timer.
    pub probes_lost: u64,
    /// SyncAcks that arrived while a probe was outstanding but matched
    /// none (stale, forged, or answering a keepalive Sync).
    pub syncacks_unmatched: u64,
    /// Black holes confirmed (PLPMTU fell back to base).
    pub black_holes: u64,
    /// Packets waiting for a path dropped when its PLPMTU fell below
    /// their size (they would be lost in the black hole).
    pub dropped_oversize: u64,
    /// Searches completed.
    pub searches_completed: u64,
}

/// One outstanding probe.
#[derive(Clone, Copy, Debug)]
struct Probe {
    seq: u64,
    size: u32,
    sent: Instant,
}

/// Black-hole confirmation in progress.
#[derive(Clone, Copy, Debug, Default)]
struct Confirm {
    /// Rounds of (current size, base size) probes sent.
    rounds: u32,
    base_ok: bool,
}

/// The DPLPMTUD state of one subflow.
#[derive(Clone, Debug)]
pub(crate) struct Plpmtud {
    cfg: PlpmtudConfig,
    state: PlpmtuState,
    /// The confirmed PLPMTU.
    plpmtu: u32,
    /// Search bounds: `lo` confirmed, `hi` the largest size not failed.
    lo: u32,
    hi: u32,
    /// Size probed next (or being probed) and its unanswered tries.
    size: u32,
    tries: u32,
    /// Slot 0: the search / current-size probe, slot 1: base-size probe of
    /// a black-hole confirmation.
    out: [Option<Probe>; 2],
    /// When the next probe may go (None: now).
    next_at: Option<Instant>,
    confirm: Option<Confirm>,
    /// A search completed once: the PLPMTU is reported to the driver.
    completed: bool,
    /// Consecutive RTOs already acted on.
    rto_mark: u32,
    stats: PlpmtuStats,
}

impl Plpmtud {
    pub(crate) fn new(cfg: PlpmtudConfig) -> Plpmtud {
        let cfg = cfg.sane();
        Plpmtud {
            cfg,
            state: PlpmtuState::Base,
            plpmtu: cfg.base_bytes,
            lo: cfg.base_bytes,
            hi: cfg.max_bytes,
            size: cfg.base_bytes,
            tries: 0,
            out: [None; 2],
            next_at: None,
            confirm: None,
            completed: false,
            rto_mark: 0,
            stats: PlpmtuStats::default(),
        }
    }

    /// The PLPMTU the driver may use: once a search completed (or the base
    /// failed), else `None` (no information yet).
    pub(crate) fn reported(&self) -> Option<u32> {
        (self.completed || self.state == PlpmtuState::Error).then_some(self.plpmtu)
    }

    /// Size of the probe to send now, if one is due (slot, size).
    fn due(&self, now: Instant) -> Option<(usize, u32)> {
        if self.next_at.is_some_and(|t| t > now) {
            return None;
        }
        match self.state {
            PlpmtuState::Error => None,
            PlpmtuState::SearchComplete if self.confirm.is_none() => None,
            _ if self.confirm.is_some() => {
                if self.out[0].is_none() {
                    Some((0, self.plpmtu))
                } else if self.out[1].is_none() {
                    Some((1, self.cfg.base_bytes))
                } else {
                    None
                }
            }
            _ => self.out[0].is_none().then_some((0, self.size)),
        }
    }

    fn sent(&mut self, slot: usize, seq: u64, size: u32, now: Instant) {
        self.out[slot] = Some(Probe {
            seq,
            size,
            sent: now,
        });
        self.stats.probes_sent += 1;
        self.stats.probe_bytes_sent += u64::from(size);
        let both = self.confirm.is_some() && self.out.iter().any(Option::is_none);
        // During a confirmation both probes of a round go at once.
        self.next_at = (!both).then(|| now + self.cfg.probe_timer);
    }

    /// A SyncAck acknowledging `ack`. Returns true when it matched a probe.
    fn on_syncack(&mut self, now: Instant, ack: u64) -> bool {
        let Some(slot) = self
            .out
            .iter()
            .position(|p| p.is_some_and(|p| p.seq == ack))
        else {
            if self.out.iter().any(Option::is_some) {
                self.stats.syncacks_unmatched += 1;
            }
            return false;
        };
        let p = self.out[slot].take().expect("matched");
        self.stats.probes_acked += 1;
        if let Some(c) = self.confirm.as_mut() {
            if slot == 1 {
                c.base_ok = true;
                return true;
            }
            // The current size passes: the timeouts were not the MTU.
            self.confirm = None;
            self.out[1] = None;
            self.tries = 0;
            self.next_at = Some(now + self.cfg.raise_timer);
            return true;
        }
        self.tries = 0;
        self.next_at = None;
        match self.state {
            PlpmtuState::Base => {
                self.plpmtu = p.size;
                self.lo = p.size;
                self.start_search(now, None);
            }
            PlpmtuState::Searching => {
                self.lo = self.lo.max(p.size);
                self.plpmtu = self.lo;
                self.next_size(now);
            }
            _ => {}
        }
        true
    }

    /// Searching from `lo` (confirmed) up to `hi`: the largest first (the
    /// interface MTU usually works), or after a black hole (`hi` given:
    /// the largest just failed) binary at once.
    fn start_search(&mut self, now: Instant, hi: Option<u32>) {
        self.hi = hi.unwrap_or(self.cfg.max_bytes).max(self.lo);
        self.state = PlpmtuState::Searching;
        self.size = self.hi;
        self.tries = 0;
        if hi.is_some() {
            self.next_size(now);
        } else if self.lo >= self.hi {
            self.finish(now);
        }
    }

    /// The next size of a binary search, or the end of the search.
    fn next_size(&mut self, now: Instant) {
        if self.lo >= self.hi {
            self.finish(now);
            return;
        }
        // Upper midpoint: converges to the largest size that passes.
        self.size = self.lo + (self.hi - self.lo).div_ceil(2);
    }

    fn finish(&mut self, now: Instant) {
        self.state = PlpmtuState::SearchComplete;
        self.plpmtu = self.lo;
        self.completed = true;
        self.stats.searches_completed += 1;
        self.next_at = Some(now + self.cfg.raise_timer);
    }

    /// Timers: probes unanswered for the probe timer, the raise timer.
    /// Returns true when the reported PLPMTU may have changed.
    fn on_timeout(&mut self, now: Instant, rto_count: u32) -> bool {
        let before = self.reported();
        self.expire_probes(now);
        // Black-hole trigger (RFC 8899 §4.3): data keeps timing out.
        if rto_count < self.rto_mark {
            self.rto_mark = rto_count;
        }
        if self.confirm.is_none()
            && self.state == PlpmtuState::SearchComplete
            && self.plpmtu > self.cfg.base_bytes
            && rto_count >= self.rto_mark + BLACK_HOLE_RTOS
        {
            self.rto_mark = rto_count;
            self.confirm = Some(Confirm::default());
            self.out = [None; 2];
            self.tries = 0;
            self.next_at = None;
        }
        if self.state == PlpmtuState::SearchComplete
            && self.confirm.is_none()
            && self.next_at.is_some_and(|t| t <= now)
        {
            // PMTU_RAISE_TIMER: look for a larger size again.
            self.next_at = None;
            if self.plpmtu < self.cfg.max_bytes {
                self.lo = self.plpmtu;
                self.start_search(now, None);
            } else {
                self.next_at = Some(now + self.cfg.raise_timer);
            }
        }
        if self.state == PlpmtuState::Error && self.next_at.is_some_and(|t| t <= now) {
            self.state = PlpmtuState::Base;
            self.size = self.cfg.base_bytes;
            self.tries = 0;
            self.next_at = None;
        }
        // A deadline that has passed (a confirmation round whose probes
        // expired) is owed to the next `poll_transmit`, which `due` reads
        // from `None` as well; left in place, `poll_timeout` would report
        // `now` again after `handle_timeout(now)`.
        if self.next_at.is_some_and(|t| t <= now) {
            self.next_at = None;
        }
        before != self.reported()
    }

    fn expire_probes(&mut self, now: Instant) {
        let timer = self.cfg.probe_timer;
        let late = |p: &Option<Probe>| p.is_some_and(|p| now >= p.sent + timer);
        if !late(&self.out[0]) && !late(&self.out[1]) {
            return;
        }
        for slot in 0..2 {
            if late(&self.out[slot]) {
                self.out[slot] = None;
                self.stats.probes_lost += 1;
            }
        }
        if let Some(c) = self.confirm.as_mut() {
            // Both probes of a round are settled once the big one is.
            if self.out[0].is_none() {
                c.rounds += 1;
                self.out[1] = None;
                if c.rounds >= self.cfg.max_probes {
                    let black_hole = c.base_ok;
                    self.confirm = None;
                    if black_hole {
                        // RFC 8899 §4.3: back to base, search below the
                        // size that stopped working.
                        self.stats.black_holes += 1;
                        let failed = self.plpmtu;
                        self.plpmtu = self.cfg.base_bytes;
                        self.lo = self.cfg.base_bytes;
                        self.start_search(now, Some(failed - 1));
                    } else {
                        // An outage, not an MTU change.
                        self.next_at = Some(now + self.cfg.raise_timer);
                    }
                }
            }
            return;
        }
        self.tries += 1;
        self.next_at = None;
        if self.tries < self.cfg.max_probes {
            return; // the same size again
        }
        // MAX_PROBES unanswered: this size is too big (§5.1.2).
        self.tries = 0;
        match self.state {
            PlpmtuState::Base => {
                self.state = PlpmtuState::Error;
                self.plpmtu = self.cfg.base_bytes;
                self.next_at = Some(now + self.cfg.probe_timer * 10);
            }
            PlpmtuState::Searching => {
                self.hi = self.size.saturating_sub(1).max(self.lo);
                self.next_size(now);
            }
            _ => {}
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.cfg.probe_timer;
        let probes = self.out.iter().flatten().map(|p| p.sent + timer).min();
        match (probes, self.next_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Connection {
    /// A PLPMTUD probe of path `i` when one is due (`emit_on`).
    pub(super) fn emit_plpmtu_probe(
        &mut self,
        now: Instant,
        i: usize,
        buf: &mut [u8],
    ) -> Option<usize> {
        let addrs = self.paths[i].pseudo_addrs();
        // The due probe: a Sync padded to the probe size, when it fits.
        let (slot, size) = self.paths[i].plpmtud.as_ref()?.due(now)?;
        if size as usize > buf.len() {
            return None;
        }
        let mut s = self.paths[i].segment(PacketType::Sync);
        s.payload = &PADDING[..(size as usize).saturating_sub(SYNC_HEADER)];
        let seq = self.paths[i].gss_unwrapped();
        self.auth_options(now, i, &mut s);
        // Protected mode seals the probe, its padding as the plaintext: the
        // packet before sealing is that much smaller.
        let seal = self.control_sealed(i, PacketType::Sync);
        let target = size as usize - if seal { PROTECTION_OVERHEAD } else { 0 };
        let mut n = s.emit_in(buf, addrs, self.config.wire_profile)?;
        if n != target {
            // Options (authentication, sealing) took room: pad to the size.
            let pad = s.payload.len() + target;
            let pad = pad.checked_sub(n).filter(|&p| p <= PADDING.len())?;
            s.payload = &PADDING[..pad];
            n = s.emit_in(buf, addrs, self.config.wire_profile)?;
        }
        let pad = s.payload.len();
        let n = self.seal_control(i, PacketType::Sync, buf, n, pad, addrs)?;
        self.stats.traffic.syncs_sent += 1;
        let p = self.paths[i].plpmtud.as_mut()?;
        p.sent(slot, seq, n as u32, now);
        Some(n)
    }

    /// A SyncAck on path `i` acknowledging (unwrapped) `ack`.
    pub(super) fn plpmtu_syncack(&mut self, now: Instant, i: usize, ack: Option<u64>) {
        let (Some(ack), Some(p)) = (ack, self.paths[i].plpmtud.as_mut()) else {
            return;
        };
        if p.on_syncack(now, ack) {
            self.plpmtu_check(i);
        }
    }

    /// PLPMTUD timers of every subflow.
    pub(super) fn plpmtu_timers(&mut self, now: Instant) {
        for i in 0..self.paths.len() {
            let rtos = self.paths[i].consecutive_rtos();
            let overhead = DATA_HEADER_MAX + self.payload_overhead();
            let sf = &mut self.paths[i];
            let Some(p) = sf.plpmtud.as_mut() else {
                continue;
            };
            let holes = p.stats.black_holes;
            if !p.on_timeout(now, rtos) {
                continue;
            }
            if p.stats.black_holes > holes {
                // What waits for this path no longer fits it.
                let limit = p.plpmtu as usize;
                let n = sf.drop_queued_unless(|q| q.data.len() + overhead <= limit);
                // The connection's queue: what no open path carries.
                let widest = self
                    .paths
                    .iter()
                    .filter(|p| p.sends_data())
                    .map(|p| {
                        p.plpmtud
                            .as_ref()
                            .map_or(self.config.mss_bytes, |m| m.plpmtu)
                    })
                    .max()
                    .unwrap_or(self.config.mss_bytes) as usize;
                let m = self.queue.drop_longer_than(widest.saturating_sub(overhead));
                if let Some(p) = self.paths[i].plpmtud.as_mut() {
                    p.stats.dropped_oversize += (n + m) as u64;
                }
            }
            self.plpmtu_check(i);
        }
        self.plpmtu_check(usize::MAX);
    }

    pub(super) fn plpmtu_timeout(&self) -> Option<Instant> {
        self.paths
            .iter()
            .filter(|p| p.sends_data())
            .filter_map(|p| p.plpmtud.as_ref()?.poll_timeout())
            .min()
    }

    /// Emits [`Event::PlpmtuChanged`] when the smallest PLPMTU or the
    /// smallest converged one changed; `cause` is the subflow whose change
    /// prompted the check.
    fn plpmtu_check(&mut self, cause: usize) {
        let now_min = self.plpmtu_min();
        let now = (now_min.map(|m| m.1), self.plpmtu_converged());
        if now == self.plpmtu_reported {
            return;
        }
        self.plpmtu_reported = now;
        if let Some((path, plpmtu)) = now_min {
            let path = self.paths.get(cause).map_or(path, |p| p.id());
            self.events.push_back(Event::PlpmtuChanged { path, plpmtu });
        }
    }

    /// The smallest PLPMTU over the open subflows, and its path; `None`
    /// until one subflow completed a search. A subflow still searching
    /// (just joined, or after a black hole) counts with the size it has
    /// confirmed so far (the base at first): until it confirms more, only
    /// that is known to pass it (RFC 8899 §5.1.2), and the scheduler may
    /// give it any packet.
    fn plpmtu_min(&self) -> Option<(PathId, u32)> {
        let subflows = || {
            self.paths
                .iter()
                .filter(|p| p.sends_data())
                .filter_map(|p| Some((p.id(), p.plpmtud.as_ref()?)))
        };
        subflows().find(|(_, m)| m.reported().is_some())?;
        subflows()
            .map(|(id, m)| (id, m.reported().unwrap_or(m.plpmtu)))
            .min_by_key(|&(id, v)| (v, id))
    }

    /// The smallest PLPMTU (DCCP packet bytes) confirmed across the open
    /// subflows (RFC 8899), `None` before any search completed or with
    /// PLPMTUD off. A subflow still searching counts with what it has
    /// confirmed so far (its base size at first). The largest tunnelled packet is this minus
    /// [`DATA_HEADER_MAX`] and the payload protection's overhead.
    pub fn plpmtu(&self) -> Option<u32> {
        self.plpmtu_min().map(|m| m.1)
    }

    /// The smallest PLPMTU over the subflows whose search completed only
    /// (a subflow still searching is left out rather than counted at its
    /// base size), what the daemons set their TUN MTU from: counted at
    /// base, a path that joins a second after the first pulled the MTU
    /// down until its search ended and back up after (1280 → 1416 → 1280
    /// → 1416 within 0.4 s at every start), and on the server,
    /// whose TUN all connections share, every client's new path did so for
    /// every peer. Until a new path's search ends, a packet it carries may
    /// exceed what it can take; its search then lowers this if it must.
    pub fn plpmtu_converged(&self) -> Option<u32> {
        self.paths
            .iter()
            .filter(|p| p.sends_data())
            .filter_map(|p| p.plpmtud.as_ref()?.reported())
            .min()
    }

    /// A path's PLPMTUD state and PLPMTU (confirmed so far).
    pub fn path_plpmtu(&self, id: PathId) -> Option<(PlpmtuState, u32)> {
        let p = self.paths[self.idx(id)?].plpmtud.as_ref()?;
        Some((p.state, p.plpmtu))
    }

    /// PLPMTUD counters summed over the subflows in the path table.
    pub fn plpmtu_stats(&self) -> PlpmtuStats {
        let mut s = PlpmtuStats::default();
        for p in self.paths.iter().filter_map(|p| p.plpmtud.as_ref()) {
            add_stats(&mut s, &p.stats);
        }
        s
    }
}

fn add_stats(a: &mut PlpmtuStats, b: &PlpmtuStats) {
    a.probes_sent += b.probes_sent;
    a.probe_bytes_sent += b.probe_bytes_sent;
    a.probes_acked += b.probes_acked;
    a.probes_lost += b.probes_lost;
    a.syncacks_unmatched += b.syncacks_unmatched;
    a.black_holes += b.black_holes;
    a.dropped_oversize += b.dropped_oversize;
    a.searches_completed += b.searches_completed;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::time::Instant;

    use super::{PlpmtuState, Plpmtud, PlpmtudConfig};

    fn cfg() -> PlpmtudConfig {
        PlpmtudConfig {
            base_bytes: 1000,
            max_bytes: 1472,
            probe_timer: Duration::from_secs(1),
            max_probes: 3,
            raise_timer: Duration::from_secs(600),
        }
    }

    /// Drives the state machine against a path carrying `n` bytes, each
    /// probe answered after 10 ms; returns (PLPMTU, probes, time).
    fn converge(p: &mut Plpmtud, n: u32, mut now: Instant) -> (u32, u64, Duration) {
        let start = now;
        let mut seq = 100;
        for _ in 0..200 {
            if p.state == PlpmtuState::Error
                || (p.state == PlpmtuState::SearchComplete && p.confirm.is_none())
            {
                break;
            }
            if let Some((slot, size)) = p.due(now) {
                seq += 1;
                p.sent(slot, seq, size, now);
                if size <= n {
                    now += Duration::from_millis(10);
                    p.on_syncack(now, seq);
                    continue;
                }
            }
            now = p.poll_timeout().expect("armed").max(now);
            p.on_timeout(now, 0);
        }
        (p.plpmtu, p.stats.probes_sent, now - start)
    }

    #[test]
    fn binary_search_converges_to_the_byte() {
        for n in [1000, 1001, 1200, 1372, 1471, 1472, 1500] {
            let mut p = Plpmtud::new(cfg());
            let (got, probes, t) = converge(&mut p, n, Instant::ZERO);
            assert_eq!(got, n.min(1472), "path carries {n}");
            assert_eq!(p.reported(), Some(n.min(1472)));
            // Base + max, then at most 9 halvings of 472 bytes, each
            // failed size costing MAX_PROBES probes.
            assert!(probes <= 2 + 3 + 9 * 3, "{probes} probes for {n}");
            assert!(t <= Duration::from_secs(3 + 9 * 3), "{t:?} for {n}");
        }
    }

    #[test]
    fn base_failing_is_error_then_retries() {
        let mut p = Plpmtud::new(cfg());
        converge(&mut p, 500, Instant::ZERO);
        assert_eq!(p.state, PlpmtuState::Error);
        assert_eq!(p.reported(), Some(1000));
    }

    #[test]
    fn forged_syncack_matches_nothing() {
        let mut p = Plpmtud::new(cfg());
        let (slot, size) = p.due(Instant::ZERO).unwrap();
        p.sent(slot, 7, size, Instant::ZERO);
        assert!(!p.on_syncack(Instant::ZERO, 8));
        assert!(!p.on_syncack(Instant::ZERO, u64::MAX));
        assert_eq!(p.stats.syncacks_unmatched, 2);
        assert_eq!(p.state, PlpmtuState::Base);
        assert!(p.on_syncack(Instant::ZERO, 7));
        assert_eq!(p.state, PlpmtuState::Searching);
    }
}
