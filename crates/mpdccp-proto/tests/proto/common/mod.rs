//! Scaffolding shared by the hostile-input tests (`hostile::forgery`,
//! `hostile::flood`, `hostile::props`): a live two-path [`Harness`] session,
//! forging and injecting datagrams with correct addresses and checksums,
//! the sum of every rejection counter, the "still delivers exactly once"
//! oracle, and [`EpNet`], a genuine client joined to a server [`Endpoint`]
//! without delay for attacks at the endpoint.
//!
//! Also the two-path recorded session and the option reader of the RFC 9897
//! tests (`rfc9897::conn`, `rfc9897::findings`), and what more than one
//! module builds the same way: clean links of given delays ([`links`]), a
//! one-path bottleneck ([`bottleneck`]), the reorder tests' path views
//! ([`views`]) and a handshake gate with one peer ([`gate_with_one_peer`]).

use std::net::SocketAddr;
use std::time::Duration;

use mpdccp_proto::auth::gate::{Gate, GateConfig};
use mpdccp_proto::auth::peers::{Peer, PeerLimits, PeerTable, KEY_LEN};
use mpdccp_proto::auth::{
    keypair, Initiator, InitiatorConfig, IpPrefix, RateLimitConfig, Responder, ResponderConfig,
};
use mpdccp_proto::conn::codec::Segment;
use mpdccp_proto::harness::{
    assert_endpoint_timer_advanced, assert_timer_advanced, Harness, HarnessConfig, LinkSpec, Side,
};
use mpdccp_proto::wire::{DccpOption, DccpRepr, MpOption};
use mpdccp_proto::{
    ConnStats, Connection, ConnectionConfig, Endpoint, EndpointConfig, Event, Instant, PathConfig,
    PathId, PathState, PathView, Role,
};
use rand_chacha::ChaCha8Rng;

/// Opens paths 0 and 1 from the client, one after the other, and lets both
/// handshakes finish.
pub fn open_two_paths(h: &mut Harness) {
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.drive_for(Duration::from_millis(200));
}

/// Paths of `side` in state Active.
pub fn open_paths(h: &Harness, side: Side) -> usize {
    h.conn_ref(side)
        .paths()
        .iter()
        .filter(|p| p.state == PathState::Active)
        .count()
}

/// (source, destination) addresses of a datagram sent by `from` on `path`.
pub fn addrs(path: usize, from: Side) -> (SocketAddr, SocketAddr) {
    let (c, s) = Harness::path_addrs(path);
    if from == Side::Client {
        (c, s)
    } else {
        (s, c)
    }
}

/// The last datagram `from` sent on `path` (genuine traffic): its sequence
/// and acknowledgement numbers.
pub fn last_genuine(h: &Harness, from: Side, path: usize) -> (u64, Option<u64>) {
    let w = h
        .wire
        .iter()
        .rev()
        .find(|w| w.from == from && w.path == PathId(path as u32) && !w.dropped)
        .expect("genuine traffic on the path");
    let s = Segment::parse(&w.bytes, None).expect("genuine packet parses");
    (s.seq, s.ack)
}

/// Emits `seg` as if sent by `from` on `path`, with a correct checksum.
pub fn emit(seg: &Segment<'_>, path: usize, from: Side) -> Vec<u8> {
    let (src, dst) = addrs(path, from);
    let mut seg = seg.clone();
    seg.src_port = src.port();
    seg.dst_port = dst.port();
    let mut b = vec![0u8; 2048];
    let n = seg
        .emit(&mut b, (src.ip(), dst.ip()))
        .expect("forgery fits");
    b.truncate(n);
    b
}

/// Delivers a forged datagram to `to` as if it came over `path`.
pub fn inject(h: &mut Harness, to: Side, path: usize, bytes: &[u8]) {
    let (src, dst) = addrs(path, to.peer());
    let now = h.now;
    h.conn(to)
        .handle_datagram_from(now, PathId(path as u32), dst, src, bytes);
}

/// [`inject`], then whether a rejection counter of `to` went up.
pub fn inject_counted(h: &mut Harness, to: Side, path: usize, bytes: &[u8]) -> bool {
    let before = rejections(&h.conn_ref(to).stats());
    inject(h, to, path, bytes);
    rejections(&h.conn_ref(to).stats()) > before
}

/// Sum of every rejection counter.
pub fn rejections(s: &ConnStats) -> u64 {
    s.rejected_input()
}

/// How [`assert_delivers`] sends: `n` packets each way of `len` bytes
/// (`len` >= 5: a big-endian number, then `tag`), one per `gap`, then
/// `drain` for the stragglers.
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    pub n: u32,
    pub tag: u8,
    pub len: usize,
    pub gap: Duration,
    pub drain: Duration,
}

/// The hostile tests' traffic: 40 packets of 200 B each way, 2 ms apart.
pub const TRAFFIC: Delivery = Delivery {
    n: 40,
    tag: 0x5a,
    len: 200,
    gap: Duration::from_millis(2),
    drain: Duration::from_millis(300),
};

/// Sends numbered packets each way and checks every one arrives exactly
/// once.
pub fn assert_delivers(h: &mut Harness, d: Delivery) {
    for side in [Side::Client, Side::Server] {
        let before = h.delivered(side.peer()).len();
        for k in 0..d.n {
            let mut p = vec![d.tag; d.len];
            p[..4].copy_from_slice(&k.to_be_bytes());
            let now = h.now;
            h.conn(side).send(now, &p).expect("send");
            h.drive_for(d.gap);
        }
        h.drive_for(d.drain);
        let mut got: Vec<u32> = h.delivered(side.peer())[before..]
            .iter()
            .filter(|(_, p)| p.len() == d.len && p[4] == d.tag)
            .map(|(_, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
            .collect();
        got.sort_unstable();
        assert_eq!(
            got,
            (0..d.n).collect::<Vec<_>>(),
            "{side:?}→{:?}: every packet exactly once",
            side.peer()
        );
    }
}

/// Remote keys of the genuine client's paths at an [`EpNet`] endpoint
/// (attackers use keys below).
pub const CLIENT_KEY: u64 = 1 << 40;

/// A genuine client and a server [`Endpoint`] joined without delay; the
/// attacker's datagrams are injected with [`EpNet::attack`], and what the
/// endpoint sends to attacker keys is only counted. The client's path `p`
/// uses [`Harness::path_addrs`]`(p)`, so checksums cover real addresses.
pub struct EpNet {
    pub now: Instant,
    pub client: Connection,
    pub ep: Endpoint<u64>,
    pub to_attackers: u64,
    pub client_delivered: Vec<Vec<u8>>,
    pub server_delivered: Vec<Vec<u8>>,
    pub client_events: Vec<Event>,
    buf: Vec<u8>,
}

impl EpNet {
    pub fn new(client: ConnectionConfig, config: EndpointConfig, seeds: (u64, u64)) -> Self {
        EpNet {
            now: Instant::ZERO,
            client: Connection::new(Role::Client, client, Instant::ZERO, seeds.0),
            ep: Endpoint::new(config, seeds.1),
            to_attackers: 0,
            client_delivered: Vec::new(),
            server_delivered: Vec::new(),
            client_events: Vec::new(),
            buf: vec![0; 65_536],
        }
    }

    /// One datagram from an attacker's remote `key` (no addresses: the
    /// checksum is not verified).
    pub fn attack(&mut self, key: u64, bytes: &[u8]) {
        assert!(key < CLIENT_KEY);
        let now = self.now;
        self.ep.handle_datagram(now, key, bytes);
    }

    /// Exchanges everything due now until quiescent.
    pub fn pump(&mut self) {
        for _ in 0..100_000 {
            let now = self.now;
            let mut progress = false;
            while let Some(t) = self.client.poll_transmit(now, &mut self.buf) {
                let seg = t.segment_size.unwrap_or(t.size).max(1);
                let (c, s) = Harness::path_addrs(t.path.0 as usize);
                for d in self.buf[..t.size].chunks(seg) {
                    self.ep.handle_datagram_from(
                        now,
                        CLIENT_KEY + u64::from(t.path.0),
                        Some((s, c)),
                        d,
                    );
                }
                progress = true;
            }
            while let Some((k, t)) = self.ep.poll_transmit(now, &mut self.buf) {
                if k >= CLIENT_KEY {
                    let seg = t.segment_size.unwrap_or(t.size).max(1);
                    let path = PathId((k - CLIENT_KEY) as u32);
                    for d in self.buf[..t.size].chunks(seg) {
                        self.client.handle_datagram(now, path, d);
                    }
                } else {
                    self.to_attackers += 1;
                }
                progress = true;
            }
            // The timer invariant (`Connection::handle_timeout`), checked
            // in release too.
            if self.client.poll_timeout().is_some_and(|t| t <= now) {
                self.client.handle_timeout(now);
                assert_timer_advanced(Side::Client, &self.client, now);
                progress = true;
            }
            if self.ep.poll_timeout().is_some_and(|t| t <= now) {
                self.ep.handle_timeout(now);
                assert_endpoint_timer_advanced(&self.ep, now);
                progress = true;
            }
            while let Some(e) = self.client.poll_event() {
                if let Event::Delivered { data, .. } = &e {
                    self.client_delivered.push(data.clone());
                }
                self.client_events.push(e);
            }
            while let Some((_, e)) = self.ep.poll_event() {
                if let Event::Delivered { data, .. } = e {
                    self.server_delivered.push(data);
                }
            }
            if !progress {
                return;
            }
        }
        panic!("no quiescence");
    }

    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.pump();
            let next = [self.client.poll_timeout(), self.ep.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => self.now = t.max(self.now),
                _ => {
                    self.now = end;
                    self.pump();
                    return;
                }
            }
        }
    }

    /// Opens client paths `0..paths`, 50 ms apart.
    pub fn connect(&mut self, paths: u32) {
        for p in 0..paths {
            self.add_path(p);
            self.run_for(Duration::from_millis(50));
        }
    }

    /// The client opens path `p` (addresses of [`Harness::path_addrs`]).
    pub fn add_path(&mut self, p: u32) {
        let now = self.now;
        let (c, s) = Harness::path_addrs(p as usize);
        let cfg = PathConfig {
            local: Some(c),
            remote: Some(s),
            ..Default::default()
        };
        self.client.add_path(now, PathId(p), cfg).expect("add_path");
    }

    pub fn server_handle(&self) -> mpdccp_proto::conn::ConnectionHandle {
        self.ep
            .route(&CLIENT_KEY)
            .map(|(h, _)| h)
            .expect("client routed")
    }

    /// Connections the endpoint holds that are neither established nor
    /// closed.
    pub fn half_open(&self) -> usize {
        self.ep
            .connections()
            .into_iter()
            .filter(|h| {
                let c = self.ep.connection(*h).unwrap();
                !c.is_established() && !c.is_closed()
            })
            .count()
    }
}

/// Clean links (no loss, no rate limit), one a path, with the one-way
/// delays `delay_ms`.
pub fn links(delay_ms: &[u64]) -> Vec<LinkSpec> {
    delay_ms
        .iter()
        .map(|&d| LinkSpec {
            delay: Duration::from_millis(d),
            ..Default::default()
        })
        .collect()
}

/// One opened path of 10 ms and `rate_bps` with a 6 kB bottleneck buffer,
/// so the delay a packet sees is mostly the connection's own send queue.
pub fn bottleneck(client: ConnectionConfig, rate_bps: u64) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        client,
        paths: vec![LinkSpec {
            delay: Duration::from_millis(10),
            rate_bps: Some(rate_bps),
            buffer_bytes: 6_000,
            ..Default::default()
        }],
        seed: 3,
        ..Default::default()
    });
    h.open_paths(1, Duration::from_millis(500));
    h
}

/// A server behind the handshake gate with one peer, "cpe" (inner
/// prefixes `allowed_ips`), answering Inits with a cookie above
/// `load_inits_per_sec`, and that peer's client. Keys from `rng`, the
/// server's first. Returns the gate, the client and the server's public key.
pub fn gate_with_one_peer(
    rng: &mut ChaCha8Rng,
    allowed_ips: Vec<IpPrefix>,
    load_inits_per_sec: u32,
) -> (Gate<SocketAddr>, Initiator, [u8; KEY_LEN]) {
    let (sp, spub) = keypair(rng);
    let (cp, cpub) = keypair(rng);
    let peer = Peer {
        name: "cpe".into(),
        public_key: cpub,
        psk: None,
        allowed_ips,
    };
    let responder = Responder::new(
        ResponderConfig {
            static_private: sp,
            peers: PeerTable::new(vec![peer], PeerLimits::default()).unwrap(),
            rate: RateLimitConfig::default(),
            load_inits_per_sec,
        },
        rng,
    );
    let gate = Gate::new(responder, GateConfig::default());
    let client = Initiator::new(InitiatorConfig {
        static_private: cp,
        server_public: spub,
        psk: None,
    });
    (gate, client, spub)
}

/// A recorded (`h.record`) session over two clean paths of 10 and 20 ms,
/// both subflows established.
pub fn two_paths(seed: u64) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: links(&[10, 20]),
        seed,
        ..Default::default()
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    assert_eq!(h.server.paths().len(), 2);
    h
}

/// Path views with the given one-way delays (ms) and twice that as the
/// smoothed RTT, all active (the reorder tests' paths).
pub fn views(owd_ms: &[u64]) -> Vec<PathView> {
    owd_ms
        .iter()
        .enumerate()
        .map(|(i, &d)| PathView {
            owd: Some(Duration::from_millis(d)),
            srtt: Some(Duration::from_millis(2 * d)),
            ..PathView::new(PathId(i as u32))
        })
        .collect()
}

/// The Multipath options of one of our own packets, in order.
pub fn mp_options(bytes: &[u8]) -> Vec<MpOption> {
    let (repr, _) = DccpRepr::parse(bytes, None).expect("our own packet parses");
    repr.options
        .into_iter()
        .filter_map(|o| match o {
            DccpOption::Multipath(m) => Some(m),
            _ => None,
        })
        .collect()
}
