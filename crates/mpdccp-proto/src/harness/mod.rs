//! A deterministic N-path test harness: two [`Connection`]s (client and
//! server) joined by emulated paths, driven on a virtual clock (quinn's
//! `Pair`, generalised to several paths).
//!
//! Each path has, per direction, a one-way latency, an optional bottleneck
//! rate with a drop-tail buffer, seeded random loss, seeded reordering (a
//! datagram held back by an extra delay, overtaken by later ones) and
//! outage windows. Nothing ever arrives sooner than the one-way latency.
//! [`Harness::drive_until`] advances time event by event: it delivers due
//! datagrams, fires due timers and drains both endpoints' transmissions,
//! always in the same order, so a run is a pure function of its seed.
//! Delivered packets and events are collected per side; every datagram on
//! the wire can be recorded (for pcap) and a test may tamper with or drop
//! datagrams in flight.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::conn::{Connection, ConnectionConfig, Endpoint, Event, PathConfig, Role};

mod keys;
pub mod mutation;
use crate::path::PathId;
use crate::time::Instant;
pub use keys::session_keys;

/// One emulated path (both directions alike).
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bottleneck rate, bits per second; `None` = unlimited.
    pub rate_bps: Option<u64>,
    /// Drop-tail buffer in front of the bottleneck, bytes.
    pub buffer_bytes: usize,
    /// Random loss probability per datagram, 0.0..=1.0 (seeded).
    pub loss: f64,
    /// Windows during which everything sent on the path is lost.
    pub outages: Vec<(Instant, Instant)>,
    /// Probability per datagram (seeded) of being held back by
    /// `reorder_delay` on top of its normal delivery time, so that later
    /// datagrams overtake it.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Priority given to the path at `add_path`.
    pub priority: u8,
    /// Datagrams larger than this are dropped (a link MTU below the
    /// endpoints', no ICMP: a PLPMTUD black hole); `None` = no limit.
    pub max_datagram: Option<usize>,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            delay: Duration::from_millis(10),
            rate_bps: None,
            buffer_bytes: 1_000_000,
            loss: 0.0,
            outages: Vec::new(),
            reorder: 0.0,
            reorder_delay: Duration::from_millis(5),
            priority: crate::path::priority::PRIMARY,
            max_datagram: None,
        }
    }
}

/// Which endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// A datagram seen on the wire (recorded when [`Harness::record`] is set).
#[derive(Clone, Debug)]
pub struct WireRecord {
    pub time: Instant,
    pub path: PathId,
    pub from: Side,
    pub bytes: Vec<u8>,
    /// Source and destination addresses of the path in this direction.
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// Lost on the way (random loss, outage or full buffer).
    pub dropped: bool,
}

/// Tamper hook: may rewrite a datagram in flight; return false to drop it.
pub type Tamper = Box<dyn FnMut(Side, PathId, &mut Vec<u8>) -> bool>;

/// Per-direction link state.
#[derive(Debug, Default)]
struct Link {
    /// Sorted by delivery time (ties keep sending order).
    in_flight: VecDeque<(Instant, Vec<u8>)>,
    /// Delivery time of the latest datagram not held back: the others stay
    /// FIFO behind it.
    fifo_at: Instant,
    /// When the bottleneck is free again.
    busy_until: Instant,
    queued_bytes: usize,
    sent: u64,
    dropped: u64,
}

/// Counters of one direction of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub sent: u64,
    pub dropped: u64,
}

/// Settings of a [`Harness`].
#[derive(Clone, Debug)]
pub struct HarnessConfig {
    pub client: ConnectionConfig,
    pub server: ConnectionConfig,
    pub paths: Vec<LinkSpec>,
    pub seed: u64,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            client: ConnectionConfig::default(),
            server: ConnectionConfig::default(),
            paths: vec![LinkSpec::default(), LinkSpec::default()],
            seed: 1,
        }
    }
}

/// Two connections over N emulated paths on a virtual clock.
pub struct Harness {
    pub now: Instant,
    pub client: Connection,
    pub server: Connection,
    pub specs: Vec<LinkSpec>,
    /// Events per side, in order.
    pub client_events: Vec<Event>,
    pub server_events: Vec<Event>,
    /// Record every datagram (with its fate) into `wire`.
    pub record: bool,
    pub wire: Vec<WireRecord>,
    pub tamper: Option<Tamper>,
    /// Transmits that carried several datagrams (GSO batches), and the
    /// datagrams in them.
    pub gso_batches: u64,
    pub gso_segments: u64,
    /// [client→server, server→client] per path.
    links: Vec<[Link; 2]>,
    rng: ChaCha8Rng,
    buf: Vec<u8>,
}

/// After `handle_timeout(now)`, no deadline of `c` at or before `now`
/// (every fired timer stopped, re-armed later, or turned into a packet
/// owed to `poll_transmit`). Fails naming the deadline's kind. Also
/// checks that `poll_timeout` (the minimum alone) is `next_timer`'s
/// deadline (the full table).
pub fn assert_timer_advanced(side: Side, c: &Connection, now: Instant) {
    assert_eq!(
        c.poll_timeout(),
        c.next_timer().map(|(_, t)| t),
        "the {side:?}'s poll_timeout is not its earliest timer at {now:?}"
    );
    if let Some((kind, t)) = c.next_timer().filter(|(_, t)| *t <= now) {
        panic!(
            "stuck timer: after handle_timeout({now:?}) the {side:?} asks to be woken at \
             {t:?} ({kind:?})"
        );
    }
}

/// The same for a server [`Endpoint`]: after `handle_timeout(now)`, its
/// `poll_timeout()` is `None` or later than `now`.
pub fn assert_endpoint_timer_advanced<K: Ord + Clone>(ep: &Endpoint<K>, now: Instant) {
    if let Some(t) = ep.poll_timeout().filter(|t| *t <= now) {
        panic!("stuck timer: after Endpoint::handle_timeout({now:?}) it asks to be woken at {t:?}");
    }
}

impl Harness {
    pub fn new(config: HarnessConfig) -> Self {
        let now = Instant::ZERO;
        let client = Connection::new(Role::Client, config.client, now, config.seed);
        let server = Connection::new(
            Role::Server,
            config.server,
            now,
            config.seed.wrapping_add(0x5eed),
        );
        let links = config.paths.iter().map(|_| Default::default()).collect();
        Harness {
            now,
            client,
            server,
            specs: config.paths,
            client_events: Vec::new(),
            server_events: Vec::new(),
            record: false,
            wire: Vec::new(),
            tamper: None,
            gso_batches: 0,
            gso_segments: 0,
            links,
            rng: ChaCha8Rng::seed_from_u64(config.seed ^ 0x4841_524e),
            buf: vec![0u8; 65_536],
        }
    }

    /// Addresses of path `i`: client 10.0.i.1, server 10.0.i.2, port 4242.
    pub fn path_addrs(i: usize) -> (SocketAddr, SocketAddr) {
        let i = (i % 250) as u8;
        (
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, i, 1), 4242)),
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, i, 2), 4242)),
        )
    }

    /// Opens path `i` from the client (first call: the initial handshake).
    pub fn open_path(&mut self, i: usize) {
        let (c, s) = Self::path_addrs(i);
        let prio = self
            .specs
            .get(i)
            .map_or(crate::path::priority::PRIMARY, |l| l.priority);
        let cfg = PathConfig {
            priority: prio,
            local: Some(c),
            remote: Some(s),
        };
        let r = self.client.add_path(self.now, PathId(i as u32), cfg);
        debug_assert!(r.is_ok(), "add_path {i}: {r:?}");
    }

    /// The usual start of a multipath test: path 0 runs the MP_KEY
    /// handshake (100 ms), then paths `1..n` join and run for `settle`.
    pub fn open_paths(&mut self, n: usize, settle: Duration) {
        self.open_path(0);
        self.drive_for(Duration::from_millis(100));
        for i in 1..n {
            self.open_path(i);
        }
        self.drive_for(settle);
    }

    pub fn conn(&mut self, side: Side) -> &mut Connection {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    pub fn conn_ref(&self, side: Side) -> &Connection {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }

    pub fn events(&self, side: Side) -> &[Event] {
        match side {
            Side::Client => &self.client_events,
            Side::Server => &self.server_events,
        }
    }

    /// Payloads delivered to `side`, with their MP_SEQ, in delivery order.
    pub fn delivered(&self, side: Side) -> Vec<(u64, &[u8])> {
        self.events(side)
            .iter()
            .filter_map(|e| match e {
                Event::Delivered { seq, data } => Some((*seq, data.as_slice())),
                _ => None,
            })
            .collect()
    }

    pub fn link_stats(&self, path: usize, from: Side) -> LinkStats {
        let l = &self.links[path][from as usize];
        LinkStats {
            sent: l.sent,
            dropped: l.dropped,
        }
    }

    /// Runs until `deadline` (virtual time).
    pub fn drive_until(&mut self, deadline: Instant) {
        loop {
            self.step_now();
            match self.next_event() {
                Some(t) if t <= deadline => self.now = t,
                _ => {
                    self.now = self.now.max(deadline);
                    self.step_now();
                    return;
                }
            }
        }
    }

    /// Runs for `d` of virtual time.
    pub fn drive_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.drive_until(t);
    }

    /// Runs until nothing is in flight and no timer is due within `max`,
    /// or `max` has passed.
    pub fn drive(&mut self, max: Duration) {
        let deadline = self.now + max;
        loop {
            self.step_now();
            let in_flight = self
                .links
                .iter()
                .any(|l| l.iter().any(|d| !d.in_flight.is_empty()));
            match self.next_event() {
                Some(t)
                    if t <= deadline && (in_flight || t <= self.now + Duration::from_secs(1)) =>
                {
                    self.now = t
                }
                _ => return,
            }
        }
    }

    /// Runs until `pred` holds or `max` passes; returns whether it held.
    pub fn drive_until_pred(
        &mut self,
        max: Duration,
        mut pred: impl FnMut(&Harness) -> bool,
    ) -> bool {
        let deadline = self.now + max;
        loop {
            self.step_now();
            if pred(self) {
                return true;
            }
            match self.next_event() {
                Some(t) if t <= deadline => self.now = t,
                _ => {
                    self.now = deadline;
                    self.step_now();
                    return pred(self);
                }
            }
        }
    }

    /// The next event, strictly after `self.now`: `step_now` served every
    /// datagram and timer at or before `now`, and failed on a deadline
    /// that `handle_timeout(now)` left at or before `now`.
    fn next_event(&self) -> Option<Instant> {
        let mut t = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        for l in &self.links {
            for d in l {
                if let Some((at, _)) = d.in_flight.front() {
                    t = Some(t.map_or(*at, |t| t.min(*at)));
                }
            }
        }
        t
    }

    /// Processes everything due at `self.now` until quiescent.
    fn step_now(&mut self) {
        for _ in 0..1_000_000 {
            let mut progress = false;
            // Deliveries due now (in path order, client→server first).
            for p in 0..self.links.len() {
                for dir in 0..2 {
                    while let Some((at, _)) = self.links[p][dir].in_flight.front() {
                        if *at > self.now {
                            break;
                        }
                        // Invariant: front() just returned Some.
                        let (_, bytes) = self.links[p][dir].in_flight.pop_front().expect("front");
                        let to = if dir == 0 { Side::Server } else { Side::Client };
                        let now = self.now;
                        let (c, s) = Self::path_addrs(p);
                        let (local, remote) = if to == Side::Server { (s, c) } else { (c, s) };
                        self.conn(to).handle_datagram_from(
                            now,
                            PathId(p as u32),
                            local,
                            remote,
                            &bytes,
                        );
                        progress = true;
                    }
                }
            }
            for side in [Side::Client, Side::Server] {
                let now = self.now;
                let c = self.conn(side);
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                    assert_timer_advanced(side, c, now);
                    progress = true;
                }
            }
            for side in [Side::Client, Side::Server] {
                while self.transmit_one(side) {
                    progress = true;
                }
            }
            self.collect_events();
            if !progress {
                self.assert_no_stuck_timer();
                return;
            }
        }
    }

    /// Once `handle_timeout(now)` and `poll_transmit` have run and nothing
    /// moves any more, a `poll_timeout()` at or before `now` would make a
    /// driver spin. The timer tables make that impossible, so here it is a
    /// bug, and fails the test (naming the deadline's kind).
    fn assert_no_stuck_timer(&self) {
        for side in [Side::Client, Side::Server] {
            let due = self.conn_ref(side).next_timer();
            if let Some((kind, t)) = due.filter(|(_, t)| *t <= self.now) {
                panic!(
                    "stuck timer: the {side:?} asks to be woken at {t:?} ({kind:?}), not after \
                     now = {:?}, although handle_timeout and poll_transmit ran at now",
                    self.now
                );
            }
        }
    }

    fn collect_events(&mut self) {
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
    }

    fn transmit_one(&mut self, side: Side) -> bool {
        let now = self.now;
        let mut buf = std::mem::take(&mut self.buf);
        // A driver may skip the poll on this promise (the simulator does).
        let promised_idle = self.conn_ref(side).repoll_would_idle(now);
        let t = self.conn(side).poll_transmit(now, &mut buf);
        assert!(
            !(promised_idle && t.is_some()),
            "{side:?}: repoll_would_idle({now:?}) promised None, poll_transmit sent"
        );
        let Some(t) = t else {
            self.buf = buf;
            return false;
        };
        let seg = t.segment_size.unwrap_or(t.size).max(1);
        if t.segment_size.is_some() {
            self.gso_batches += 1;
            self.gso_segments += t.size.div_ceil(seg) as u64;
        }
        let mut off = 0;
        while off < t.size {
            let end = (off + seg).min(t.size);
            let bytes = buf[off..end].to_vec();
            self.put_on_link(side, t.path, bytes);
            off = end;
        }
        self.buf = buf;
        true
    }

    fn put_on_link(&mut self, from: Side, path: PathId, mut bytes: Vec<u8>) {
        let p = path.0 as usize;
        let Some(spec) = self.specs.get(p) else {
            return;
        };
        let dir = from as usize;
        let now = self.now;
        let mut keep = true;
        if let Some(t) = self.tamper.as_mut() {
            keep = t(from, path, &mut bytes);
        }
        let in_outage = spec.outages.iter().any(|(a, b)| now >= *a && now < *b);
        let lost = spec.loss > 0.0 && self.rng.gen::<f64>() < spec.loss;
        let held = spec.reorder > 0.0 && self.rng.gen::<f64>() < spec.reorder;
        let link = &mut self.links[p][dir];
        link.sent += 1;
        // Drop-tail bottleneck.
        let (deliver_at, overflow) = match spec.rate_bps {
            Some(rate) if rate > 0 => {
                let start = link.busy_until.max(now);
                let backlog = start - now;
                let backlog_bytes = (backlog.as_secs_f64() * rate as f64 / 8.0) as usize;
                if backlog_bytes + bytes.len() > spec.buffer_bytes {
                    (now, true)
                } else {
                    let tx = Duration::from_nanos(
                        (bytes.len() as u64 * 8).saturating_mul(1_000_000_000) / rate,
                    );
                    link.busy_until = start + tx;
                    (start + tx + spec.delay, false)
                }
            }
            _ => (now + spec.delay, false),
        };
        let too_big = spec.max_datagram.is_some_and(|m| bytes.len() > m);
        let dropped = !keep || in_outage || lost || overflow || too_big;
        if self.record {
            let (c, s) = Self::path_addrs(p);
            let (src, dst) = if from == Side::Client { (c, s) } else { (s, c) };
            self.wire.push(WireRecord {
                time: now,
                path,
                from,
                bytes: bytes.clone(),
                src,
                dst,
                dropped,
            });
        }
        let link = &mut self.links[p][dir];
        if dropped {
            link.dropped += 1;
            return;
        }
        link.queued_bytes = link.queued_bytes.saturating_add(0);
        // FIFO per direction apart from held-back datagrams: delivery times
        // of the others are non-decreasing because the delay is constant
        // and the bottleneck serialises.
        let at = if held {
            deliver_at + spec.reorder_delay
        } else {
            link.fifo_at = deliver_at.max(link.fifo_at);
            link.fifo_at
        };
        let i = link.in_flight.partition_point(|(t, _)| *t <= at);
        link.in_flight.insert(i, (at, bytes));
    }
}

/// Helpers for tests that inspect or rewrite raw DCCP packets.
pub mod inspect {
    use crate::conn::codec::{PacketType, Segment};
    use crate::wire::option::kind as opt;

    /// The packet type of a raw DCCP packet.
    pub fn packet_type(bytes: &[u8]) -> Option<PacketType> {
        Segment::parse(bytes, None).ok().map(|s| s.ptype)
    }

    /// Byte range of the body of the first MP sub-option `subtype`
    /// (after its 3-byte header) in a raw DCCP packet.
    pub fn find_mp_suboption(bytes: &[u8], subtype: u8) -> Option<std::ops::Range<usize>> {
        let hlen = *bytes.get(4)? as usize * 4;
        let x = bytes.get(8)? & 1 == 1;
        let ptype = PacketType::from_u8((bytes[8] >> 1) & 0x0f).ok()?;
        let mut p = if x { 16 } else { 12 };
        if ptype.has_ack() {
            p += if x { 8 } else { 4 };
        }
        if matches!(
            ptype,
            PacketType::Request | PacketType::Response | PacketType::Reset
        ) {
            p += 4;
        }
        while p < hlen.min(bytes.len()) {
            let kind = bytes[p];
            if kind < 32 {
                p += 1;
                continue;
            }
            let len = *bytes.get(p + 1)? as usize;
            if len < 2 {
                return None;
            }
            if kind == opt::MULTIPATH && bytes.get(p + 2) == Some(&subtype) {
                return Some(p + 3..p + len);
            }
            p += len;
        }
        None
    }

    /// Recomputes the checksum of a raw DCCP packet after tampering.
    pub fn fix_checksum(bytes: &mut [u8], src: std::net::IpAddr, dst: std::net::IpAddr) {
        if bytes.len() < 8 {
            return;
        }
        let mut p = crate::wire::Packet::new_unchecked(bytes);
        let _ = p.fill_checksum((src, dst));
    }

    /// Sets the 48-bit sequence number of a raw DCCP packet (X=1).
    pub fn set_seq(bytes: &mut [u8], seq: u64) {
        if bytes.len() >= 16 {
            let v = seq & crate::wire::SEQ_MASK;
            bytes[10..16].copy_from_slice(&v.to_be_bytes()[2..]);
        }
    }

    /// Reads the 48-bit sequence number of a raw DCCP packet (X=1).
    pub fn seq(bytes: &[u8]) -> Option<u64> {
        Segment::parse(bytes, None).ok().map(|s| s.seq)
    }

    /// The Elapsed Time option (RFC 4340 §13.2, 10 µs units) of a raw DCCP
    /// packet, if it carries one.
    pub fn elapsed_time(bytes: &[u8]) -> Option<u32> {
        Segment::parse(bytes, None).ok()?.elapsed_10us
    }

    /// Gives a raw DCCP packet with an acknowledgement the Elapsed Time
    /// `units_10us`: rewrites the option in place when there is one (its
    /// 2-byte form saturates at 0xFFFF), otherwise appends a 4-byte-value
    /// option at the end of the options (header grows by 8 bytes). The
    /// checksum must be fixed afterwards. False when the packet has no
    /// acknowledgement or cannot take the option.
    pub fn set_elapsed_time(bytes: &mut Vec<u8>, units_10us: u32) -> bool {
        let Ok(s) = Segment::parse(bytes, None) else {
            return false;
        };
        if s.ack.is_none() {
            return false;
        }
        let hlen = bytes[4] as usize * 4;
        let x = bytes[8] & 1 == 1;
        let mut p = (if x { 16 } else { 12 }) + s.ptype.subheader_len(!x);
        while p < hlen {
            let kind = bytes[p];
            if kind < 32 {
                p += 1;
                continue;
            }
            let len = bytes[p + 1] as usize;
            if kind == opt::ELAPSED_TIME {
                let v = units_10us.to_be_bytes();
                match len {
                    4 => bytes[p + 2..p + 4]
                        .copy_from_slice(&units_10us.min(0xffff).to_be_bytes()[2..]),
                    _ => bytes[p + 2..p + 6].copy_from_slice(&v),
                }
                return true;
            }
            p += len.max(2);
        }
        if hlen + 8 > crate::wire::MAX_HEADER_LEN {
            return false;
        }
        let mut o = vec![opt::ELAPSED_TIME, 6];
        o.extend_from_slice(&units_10us.to_be_bytes());
        o.extend_from_slice(&[0, 0]);
        bytes.splice(hlen..hlen, o);
        bytes[4] += 2;
        true
    }
}
