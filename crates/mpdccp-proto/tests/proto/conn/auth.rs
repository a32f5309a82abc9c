//! The authenticated handshake wired through `Connection` and `Endpoint`
//! (docs/SECURITY.md §3–4): key type 255 + MP_EXP on the wire,
//! no state for unknown peers, cookies under load, derived keys in the
//! MP_JOIN HMACs, no downgrade to key type 0.

use std::net::SocketAddr;
use std::time::Duration;

use mpdccp_proto::auth::gate::{Gate, GateConfig};
use mpdccp_proto::auth::peers::{Peer, PeerLimits, PeerTable};
use mpdccp_proto::auth::{keypair, InitiatorConfig, RateLimitConfig, Responder, ResponderConfig};
use mpdccp_proto::conn::LifetimeConfig;
use mpdccp_proto::wire::mp::{KeyType, MpKey};
use mpdccp_proto::wire::{DccpKind, DccpOption, DccpRepr, FeatureNum, Header, MpOption, ResetCode};
use mpdccp_proto::{
    Connection, ConnectionConfig, Endpoint, EndpointConfig, Instant, PathConfig, PathId, Role,
};
use rand::SeedableRng;

type Key = SocketAddr;

fn addr(client: usize, path: u32) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, 10 + client as u8], 40_000 + path as u16))
}

struct Keys {
    server: ([u8; 32], [u8; 32]),
    peers: Vec<([u8; 32], [u8; 32])>,
}

fn keys(n: usize) -> Keys {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    Keys {
        server: keypair(&mut rng),
        peers: (0..n).map(|_| keypair(&mut rng)).collect(),
    }
}

/// A gate that knows `k.peers` (not the strangers a test adds).
fn gate(k: &Keys, load_inits_per_sec: u32) -> Gate<Key> {
    let peers = k
        .peers
        .iter()
        .enumerate()
        .map(|(i, (_, public))| Peer {
            name: format!("peer{i}"),
            public_key: *public,
            psk: None,
            allowed_ips: vec![],
        })
        .collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
    let responder = Responder::new(
        ResponderConfig {
            static_private: k.server.0,
            peers: PeerTable::new(peers, PeerLimits::default()).unwrap(),
            rate: RateLimitConfig::default(),
            load_inits_per_sec,
        },
        &mut rng,
    );
    Gate::new(responder, GateConfig::default())
}

/// Everything that travels, in order: (from client?, remote key, bytes).
type Wire = Vec<(bool, Key, Vec<u8>)>;

struct World {
    ep: Endpoint<Key>,
    clients: Vec<Connection>,
    now: Instant,
    wire: Wire,
}

impl World {
    /// Clients `i` use `client_keys[i]` (a private key) against the server.
    fn new(k: &Keys, client_keys: &[[u8; 32]], gate: Option<Gate<Key>>) -> World {
        Self::with_config(k, client_keys, gate, ConnectionConfig::default())
    }

    fn with_config(
        k: &Keys,
        client_keys: &[[u8; 32]],
        gate: Option<Gate<Key>>,
        conn: ConnectionConfig,
    ) -> World {
        let ep_cfg = EndpointConfig {
            conn: conn.clone(),
            ..EndpointConfig::default()
        };
        let mut ep = Endpoint::new(ep_cfg, 7);
        if let Some(g) = gate {
            ep.enable_auth(g, |k| *k);
        }
        let now = Instant::from_secs_f64(1.0);
        let clients = client_keys
            .iter()
            .enumerate()
            .map(|(i, private)| {
                let mut c = Connection::new(Role::Client, conn.clone(), now, 100 + i as u64);
                let cfg = InitiatorConfig {
                    static_private: *private,
                    server_public: k.server.1,
                    psk: None,
                };
                c.enable_client_auth(cfg, 1_700_000_000_000_000_000, now)
                    .unwrap();
                c
            })
            .collect();
        World {
            ep,
            clients,
            now,
            wire: Vec::new(),
        }
    }

    fn start(&mut self, c: usize, path: u32) {
        let now = self.now;
        self.clients[c]
            .add_path(now, PathId(path), PathConfig::default())
            .unwrap();
    }

    /// Zero-latency exchange until quiet, then 1 ms passes.
    fn step(&mut self) {
        let mut buf = vec![0u8; 2048];
        for _ in 0..100 {
            let mut moved = false;
            for (c, conn) in self.clients.iter_mut().enumerate() {
                while let Some(t) = conn.poll_transmit(self.now, &mut buf) {
                    let from = addr(c, t.path.0);
                    self.wire.push((true, from, buf[..t.size].to_vec()));
                    self.ep.handle_datagram(self.now, from, &buf[..t.size]);
                    moved = true;
                }
            }
            while let Some((k, t)) = self.ep.poll_transmit(self.now, &mut buf) {
                let d = buf[..t.size].to_vec();
                self.wire.push((false, k, d.clone()));
                let c = usize::from(
                    k.ip()
                        .to_string()
                        .rsplit('.')
                        .next()
                        .unwrap()
                        .parse::<u8>()
                        .unwrap()
                        - 10,
                );
                if let Some(conn) = self.clients.get_mut(c) {
                    conn.handle_datagram(self.now, PathId(u32::from(k.port() - 40_000)), &d);
                }
                moved = true;
            }
            while self.ep.poll_event().is_some() {}
            if !moved {
                break;
            }
        }
        self.now += Duration::from_millis(1);
        for conn in &mut self.clients {
            if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                conn.handle_timeout(self.now);
            }
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= self.now) {
            self.ep.handle_timeout(self.now);
        }
    }

    /// Steps until client 0 is established or `limit` has passed.
    fn connects_within(&mut self, limit: Duration) -> bool {
        let started = self.now;
        while !self.clients[0].is_established() && self.now < started + limit {
            self.step();
        }
        self.clients[0].is_established()
    }

    fn run(&mut self, ms: u32) {
        for _ in 0..ms {
            self.step();
        }
    }
}

fn parse(d: &[u8]) -> DccpRepr {
    DccpRepr::parse(d, None).expect("our own packets parse").0
}

fn mp_keys(r: &DccpRepr) -> Vec<MpKey> {
    r.options
        .iter()
        .filter_map(|o| match o {
            DccpOption::Multipath(MpOption::Key { keys, .. }) => Some(keys.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn has_exp(r: &DccpRepr) -> bool {
    r.options
        .iter()
        .any(|o| matches!(o, DccpOption::Multipath(MpOption::Exp(_))))
}

#[test]
fn configured_peer_connects_with_derived_keys_and_key_type_255_only() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    w.run(20);
    assert!(w.clients[0].is_established());
    let hs = w.ep.connections();
    assert_eq!(hs.len(), 1);
    let server = w.ep.connection(hs[0]).unwrap();
    assert!(server.is_established());
    assert_eq!(w.ep.peer(hs[0]).map(|p| p.0), Some(0));
    // Both ends hold the same session: the client's d-key is the server's
    // remote d-key, and neither is on the wire.
    let ck = w.clients[0].session_keys().expect("client keys");
    let sk = server.session_keys().expect("server keys");
    assert_eq!(ck.d_key_local(), sk.d_key_remote());
    assert_eq!(ck.d_key_remote(), sk.d_key_local());
    for (_, _, d) in &w.wire {
        assert!(d
            .windows(32)
            .all(|x| x != ck.d_key_local() && x != ck.d_key_remote()));
    }
    // Request and Response: exactly one key, type 255, with MP_EXP.
    let handshake: Vec<DccpRepr> = w
        .wire
        .iter()
        .map(|(_, _, d)| parse(d))
        .filter(|r| {
            matches!(
                r.header.kind,
                DccpKind::Request { .. } | DccpKind::Response { .. }
            )
        })
        .collect();
    assert_eq!(handshake.len(), 2);
    for r in &handshake {
        let ks = mp_keys(r);
        assert_eq!(ks.len(), 1);
        assert_eq!(ks[0].key_type, KeyType::Experimental);
        assert!(has_exp(r));
    }
    // A second path joins under the derived keys; data flows both ways.
    w.start(0, 1);
    w.run(20);
    assert_eq!(w.ep.stats().joins_routed, 1);
    assert_eq!(w.ep.connection(hs[0]).unwrap().paths().len(), 2);
    let now = w.now;
    w.clients[0].send(now, &[0x45; 100]).unwrap();
    w.run(10);
    assert_eq!(
        w.ep.connection(hs[0]).unwrap().stats().auth.join_bad_hmac,
        0
    );
}

#[test]
fn unknown_static_key_gets_no_connection_no_state_no_reply() {
    let k = keys(1);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(99);
    let (stranger, _) = keypair(&mut rng);
    let mut w = World::new(&k, &[stranger], Some(gate(&k, 1000)));
    w.start(0, 0);
    w.run(3000);
    assert!(!w.clients[0].is_established());
    assert!(w.ep.connections().is_empty());
    let (g, r) = w.ep.auth_stats().unwrap();
    assert_eq!(g.half_open_created, 0);
    assert!(r.unknown_peer >= 1, "{r:?}");
    assert!(w.ep.stats().refused_unauthenticated >= 1);
    // Nothing at all went back to the stranger.
    assert!(w.wire.iter().all(|(from_client, _, _)| *from_client));
    println!(
        "unknown peer: {} Requests, {} replies, {} connections",
        w.wire.len(),
        0,
        w.ep.connections().len()
    );
}

#[test]
fn under_load_a_cookie_round_trip_then_success() {
    let k = keys(1);
    // Load threshold 0: every Init needs a cookie.
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 0)));
    w.start(0, 0);
    w.run(20);
    assert!(w.clients[0].is_established());
    assert_eq!(w.ep.stats().cookie_replies, 1);
    assert_eq!(w.clients[0].auth_stats().cookie_retries, 1);
    // The cookie reply was a Reset (code 9) with MP_EXP, and before the
    // client proved its address the server held nothing.
    let resets: Vec<_> = w
        .wire
        .iter()
        .filter(|(c, _, _)| !c)
        .map(|(_, _, d)| parse(d))
        .filter(|r| matches!(r.header.kind, DccpKind::Reset { .. }))
        .collect();
    assert_eq!(resets.len(), 1);
    assert!(has_exp(&resets[0]));
    assert_eq!(w.ep.stats().accepted, 1);
}

/// The observer has every byte of the handshake and of a join, and
/// replays the join from its own address: the server answers with a fresh
/// nonce and the replayed third packet's HMAC no longer matches.
#[test]
fn sniffed_handshake_and_replayed_join_do_not_add_a_path() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    w.run(20);
    w.start(0, 1);
    w.run(20);
    let h = w.ep.connections()[0];
    assert_eq!(w.ep.connection(h).unwrap().paths().len(), 2);
    let join_path = addr(0, 1);
    let captured: Vec<Vec<u8>> = w
        .wire
        .iter()
        .filter(|(c, from, _)| *c && *from == join_path)
        .map(|(_, _, d)| d.clone())
        .take(2)
        .collect();
    assert!(matches!(
        parse(&captured[0]).header.kind,
        DccpKind::Request { .. }
    ));
    let attacker: SocketAddr = "192.0.2.66:5555".parse().unwrap();
    let mut buf = [0u8; 2048];
    let now = w.now;
    w.ep.handle_datagram(now, attacker, &captured[0]);
    let mut response = None;
    while let Some((to, t)) = w.ep.poll_transmit(now, &mut buf) {
        if to == attacker {
            response = Some(parse(&buf[..t.size]));
        }
    }
    // The server answers the replayed Request with a fresh nonce RB'.
    let response = response.expect("a join Response to the replayed Request");
    // The captured third packet, its numbers fixed up to fit this subflow
    // (the attacker sees the Response), its HMAC the victim's.
    let mut third = parse(&captured[1]);
    third.header.seq = parse(&captured[0]).header.seq + 1;
    third.header.kind = DccpKind::Ack {
        ack: response.header.seq,
    };
    let mut out = vec![0u8; third.buffer_len(0)];
    let n = third.emit(&mut out, &[], None).unwrap();
    w.ep.handle_datagram(now, attacker, &out[..n]);
    while w.ep.poll_transmit(now, &mut buf).is_some() {}
    w.run(5);
    let conn = w.ep.connection(h).unwrap();
    assert!(conn.stats().auth.join_bad_hmac >= 1);
    let open = conn
        .paths()
        .iter()
        .filter(|p| p.state == mpdccp_proto::PathState::Active)
        .count();
    assert_eq!(open, 2, "only the victim's two paths are open");
    println!(
        "replayed join: {} bad HMAC, {} open paths",
        conn.stats().auth.join_bad_hmac,
        open
    );
}

/// A Request offering key type 255 together with key type 0 is dropped
/// (RFC 9897 §6: nothing to downgrade to), and an authenticating client
/// refuses an open server's key type 0 Response.
#[test]
fn downgrade_offers_are_refused_both_ways() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    let now = w.now;
    let mut buf = vec![0u8; 2048];
    let t = w.clients[0].poll_transmit(now, &mut buf).unwrap();
    let mut req = parse(&buf[..t.size]);
    for o in &mut req.options {
        if let DccpOption::Multipath(MpOption::Key { keys, .. }) = o {
            keys.push(MpKey::plain(0x0102_0304_0506_0708));
        }
    }
    let mut out = vec![0u8; req.buffer_len(0)];
    let n = req.emit(&mut out, &[], None).unwrap();
    w.ep.handle_datagram(now, addr(0, 0), &out[..n]);
    assert_eq!(w.ep.stats().downgrade_refused, 1);
    assert!(w.ep.connections().is_empty());
    assert!(w.ep.poll_transmit(now, &mut buf).is_none());

    // An open server (no gate) answers with key type 0: refused.
    let mut open = World::new(&k, &[k.peers[0].0], None);
    open.start(0, 0);
    open.run(20);
    assert!(!open.clients[0].is_established());
    assert_eq!(open.clients[0].auth_stats().downgrade_refused, 1);
    assert!(open.clients[0].is_closed());
}

/// Open mode: a spoofed source gets at most `max_resets_per_sec` Resets.
#[test]
fn open_mode_resets_are_rate_limited() {
    let mut ep: Endpoint<Key> = Endpoint::new(EndpointConfig::default(), 3);
    let mut c = Connection::new(Role::Client, ConnectionConfig::default(), Instant::ZERO, 5);
    c.add_path(Instant::ZERO, PathId(0), PathConfig::default())
        .unwrap();
    let mut buf = vec![0u8; 2048];
    let t = c.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    // A Request turned into a Sync: a non-Request from an unknown remote.
    let mut r = parse(&buf[..t.size]);
    r.header.kind = DccpKind::Sync { ack: 1 };
    r.options.clear();
    let mut out = vec![0u8; r.buffer_len(0)];
    let n = r.emit(&mut out, &[], None).unwrap();
    let mut sent = 0;
    let now = Instant::from_secs_f64(1.0);
    for i in 0..1000u32 {
        let from = SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 1000));
        ep.handle_datagram(now, from, &out[..n]);
        while ep.poll_transmit(now, &mut buf).is_some() {
            sent += 1;
        }
    }
    let limit = EndpointConfig::default().max_resets_per_sec;
    assert_eq!(sent, limit);
    assert_eq!(ep.stats().resets_rate_limited, u64::from(1000 - limit));
    println!("open mode: 1000 spoofed packets → {sent} Resets");
}

/// A second cookie reply, answering a retransmission of the client's first
/// Init after the client already moved on to its second, does not open with
/// the pending Init: ignored, and the handshake completes (found with the
/// namespace flood test, where it closed the connection).
#[test]
fn a_stale_cookie_reply_is_ignored() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 0)));
    w.start(0, 0);
    let now = w.now;
    let mut buf = vec![0u8; 2048];
    let from = addr(0, 0);
    let t = w.clients[0].poll_transmit(now, &mut buf).unwrap();
    let init1 = buf[..t.size].to_vec();
    let mut cookie_for_init1 = || {
        w.ep.handle_datagram(now, from, &init1);
        let (_, t) = w.ep.poll_transmit(now, &mut buf).expect("a cookie reply");
        buf[..t.size].to_vec()
    };
    let first = cookie_for_init1();
    let second = cookie_for_init1();
    w.clients[0].handle_datagram(now, PathId(0), &first);
    assert_eq!(w.clients[0].auth_stats().cookie_retries, 1);
    // The client's Request with Init2 goes out; then the late reply arrives.
    let t = w.clients[0].poll_transmit(now, &mut buf).unwrap();
    let init2 = buf[..t.size].to_vec();
    w.clients[0].handle_datagram(now, PathId(0), &second);
    assert_eq!(w.clients[0].auth_stats().bad_cookie_reply, 1);
    assert!(!w.clients[0].is_closed());
    w.ep.handle_datagram(now, from, &init2);
    w.run(20);
    assert!(w.clients[0].is_established());
    assert_eq!(w.ep.connections().len(), 1);
}

/// `auth = "protected"`: with `protect_payload` on both ends a tunnelled
/// packet is delivered intact, its bytes never appear on the wire, and a
/// data packet changed in flight is dropped (seal/open: `conn/subflow/protect.rs`).
#[test]
fn protected_payload_is_sealed_and_checked() {
    let k = keys(1);
    let conn = ConnectionConfig {
        protect_payload: true,
        ..ConnectionConfig::default()
    };
    let mut w = World::with_config(&k, &[k.peers[0].0], Some(gate(&k, 1000)), conn);
    w.start(0, 0);
    w.run(20);
    assert!(w.clients[0].is_established());
    let marker: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    let now = w.now;
    w.clients[0].send(now, &marker).unwrap();
    let before = w.wire.len();
    w.run(10);
    assert!(w.wire[before..]
        .iter()
        .all(|(_, _, d)| !d.windows(16).any(|x| x == &marker[..16])));
    let h = w.ep.connections()[0];
    let server = w.ep.connection(h).unwrap();
    assert!(server.reorder_stats().received >= 1, "delivered");
    // A data packet with one payload byte flipped does not open.
    let (_, from, data) = w.wire[before..]
        .iter()
        .find(|(c, _, d)| *c && d.len() > 100)
        .cloned()
        .expect("the data packet");
    let mut forged = data.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let delivered = server.reorder_stats().received;
    let now = w.now;
    w.ep.handle_datagram(now, from, &forged);
    let server = w.ep.connection(h).unwrap();
    assert_eq!(server.reorder_stats().received, delivered);
}

/// A peer that connects again (a restarted CPE, from a new address) gets
/// its new connection, and the old one is closed: one session per peer.
#[test]
fn a_reconnecting_peer_supersedes_its_old_connection() {
    let k = keys(1);
    let me = k.peers[0].0;
    let mut w = World::new(&k, &[me, me], Some(gate(&k, 1000)));
    w.start(0, 0);
    w.run(20);
    let old = w.ep.connections()[0];
    assert_eq!(w.ep.peer(old).map(|p| p.0), Some(0));
    // Its timestamp must be newer than the first connection's Init.
    w.run(5);
    w.start(1, 0);
    w.run(20);
    assert!(w.clients[1].is_established());
    assert_eq!(w.ep.stats().superseded, 1);
    let new =
        w.ep.connections()
            .into_iter()
            .find(|&h| h != old)
            .expect("the new connection");
    assert_eq!(w.ep.peer(new).map(|p| p.0), Some(0));
    assert!(w.ep.peer(old).is_none());
    w.run(50);
    assert!(
        w.clients[0].is_closed(),
        "the old client was told (fast close)"
    );
    assert_eq!(w.ep.connections(), vec![new]);
}

/// `bytes` parsed, changed by `f` and written again (no checksum: the
/// test endpoint reads packets without addresses).
fn rewrap(bytes: &[u8], f: impl FnOnce(&mut DccpRepr)) -> Vec<u8> {
    let (mut r, hl) = DccpRepr::parse(bytes, None).expect("a packet");
    f(&mut r);
    let payload = &bytes[hl..];
    let mut out = vec![0u8; r.buffer_len(payload.len())];
    let n = r.emit(&mut out, payload, None).expect("emits");
    out.truncate(n);
    out
}

fn is_mp_capable_change(o: &DccpOption) -> bool {
    matches!(
        o,
        DccpOption::ChangeR {
            feature: FeatureNum::MultipathCapable,
            ..
        }
    )
}

/// The authentication bypass: an attacker holds a genuine Request whose
/// Init the server never saw (dropped on path, or sent before a server
/// restart) and re-wraps the Init — without Multipath Capable (once a
/// plain-DCCP connection that skipped the Confirm), or with another
/// connection identifier. Neither creates state or gets an answer, before
/// or after a restart; the real client connects with its retransmission.
#[test]
fn a_captured_init_rewrapped_into_another_request_admits_no_one() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    let mut buf = vec![0u8; 2048];
    let t = w.clients[0].poll_transmit(w.now, &mut buf).unwrap();
    // Dropped on path: the server never sees the genuine Request.
    let captured = buf[..t.size].to_vec();
    assert!(parse(&captured).options.iter().any(is_mp_capable_change));
    let plain = rewrap(&captured, |r| {
        r.options.retain(|o| !is_mp_capable_change(o))
    });
    let other_ci = rewrap(&captured, |r| {
        for o in &mut r.options {
            if let DccpOption::Multipath(MpOption::Key { ci, .. }) = o {
                *ci ^= 0x5a5a;
            }
        }
    });
    let attackers: [SocketAddr; 2] = ["192.0.2.66:5555".parse().unwrap(), addr(0, 0)];
    // The same against a server that restarted (a new endpoint, same keys).
    let mut restarted = Endpoint::new(EndpointConfig::default(), 8);
    restarted.enable_auth(gate(&k, 1000), |k| *k);
    for ep in [&mut w.ep, &mut restarted] {
        for forged in [&plain, &other_ci] {
            for from in attackers {
                ep.handle_datagram(w.now, from, forged);
                assert!(ep.poll_transmit(w.now, &mut buf).is_none(), "no answer");
            }
        }
        assert!(ep.connections().is_empty());
        let (g, r) = ep.auth_stats().unwrap();
        assert_eq!((g.half_open_created, r.accepted), (0, 0), "{g:?} {r:?}");
        // The re-wrapped CI fails inside Noise: the binding differs.
        assert_eq!(r.handshake_failed, 2, "{r:?}");
        assert_eq!(ep.stats().downgrade_refused, 2);
    }
    // The genuine client's retransmission (a new Init, 0.5 s later) is
    // admitted: it is established within 1 s of the attack.
    assert!(
        w.connects_within(Duration::from_secs(1)),
        "client connects within 1 s"
    );
    assert_eq!(w.ep.connections().len(), 1);
}

/// An attacker that spends the captured Init first (it won the race, or
/// the genuine Request was dropped) gets a Response but cannot send the
/// Confirm: its third packet, without Confirm or with a forged one, opens
/// no connection and supersedes no session. The real client's next
/// Request carries a newer Init and connects within 1 s.
#[test]
fn an_init_spent_first_by_an_attacker_opens_nothing_and_locks_no_one_out() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    let mut buf = vec![0u8; 2048];
    let t = w.clients[0].poll_transmit(w.now, &mut buf).unwrap();
    let captured = buf[..t.size].to_vec();
    let attacker: SocketAddr = "192.0.2.66:5555".parse().unwrap();
    let now = w.now;
    w.ep.handle_datagram(now, attacker, &captured);
    let (to, t) = w.ep.poll_transmit(now, &mut buf).expect("a Response");
    assert_eq!(to, attacker);
    let response = parse(&buf[..t.size]);
    assert!(matches!(response.header.kind, DccpKind::Response { .. }));
    let request = parse(&captured);
    for confirm in [None, Some(vec![4u8; 17])] {
        let mut options = Vec::new();
        if let Some(c) = confirm {
            options.push(DccpOption::Multipath(MpOption::Exp(c)));
        }
        let ack = DccpRepr {
            header: Header {
                src_port: request.header.src_port,
                dst_port: request.header.dst_port,
                seq: request.header.seq + 1,
                kind: DccpKind::Ack {
                    ack: response.header.seq,
                },
                ..Header::default()
            },
            options,
            ..DccpRepr::default()
        };
        let mut out = vec![0u8; ack.buffer_len(0)];
        let n = ack.emit(&mut out, &[], None).unwrap();
        w.ep.handle_datagram(now, attacker, &out[..n]);
        while w.ep.poll_transmit(now, &mut buf).is_some() {}
    }
    let h = w.ep.connections();
    assert!(h
        .iter()
        .all(|&h| !w.ep.connection(h).unwrap().is_established()));
    assert!(h.iter().all(|&h| w.ep.peer(h).is_none()));
    let (g, _) = w.ep.auth_stats().unwrap();
    assert_eq!(g.confirmed, 0);
    // The client never got an answer; its retransmission carries a newer
    // Init (the captured one's timestamp is spent) and connects.
    assert!(
        w.connects_within(Duration::from_secs(1)),
        "client connects within 1 s"
    );
    let (g, r) = w.ep.auth_stats().unwrap();
    assert_eq!(g.confirmed, 1);
    assert_eq!(r.replayed, 0, "the retransmitted Request was not a replay");
}

/// Every (re)transmitted Request carries a new Init (a held-back copy
/// outdates at the next retransmission), and a Response to an earlier one
/// that arrives late still completes the handshake.
#[test]
fn each_request_carries_a_new_init_and_a_late_response_still_counts() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    let mut buf = vec![0u8; 2048];
    let mut requests = Vec::new();
    let mut now = w.now;
    while requests.len() < 3 {
        if let Some(t) = w.clients[0].poll_transmit(now, &mut buf) {
            requests.push(buf[..t.size].to_vec());
        }
        now += Duration::from_millis(10);
        if w.clients[0].poll_timeout().is_some_and(|t| t <= now) {
            w.clients[0].handle_timeout(now);
        }
    }
    let exp = |d: &[u8]| {
        parse(d).options.into_iter().find_map(|o| match o {
            DccpOption::Multipath(MpOption::Exp(e)) => Some(e),
            _ => None,
        })
    };
    let inits: Vec<_> = requests.iter().map(|r| exp(r).expect("an Init")).collect();
    assert!(inits[0] != inits[1] && inits[1] != inits[2] && inits[0] != inits[2]);
    // Only the first reached the server; its Response arrives after the
    // third Request went out.
    let from = addr(0, 0);
    w.ep.handle_datagram(now, from, &requests[0]);
    let (_, t) = w.ep.poll_transmit(now, &mut buf).expect("a Response");
    let response = buf[..t.size].to_vec();
    w.clients[0].handle_datagram(now, PathId(0), &response);
    assert_eq!(w.clients[0].auth_stats().bad_response, 0);
    w.now = now;
    w.run(20);
    assert!(w.clients[0].is_established());
    assert_eq!(w.ep.auth_stats().unwrap().0.confirmed, 1);
}

/// A DCCP-Reset as if the client sent it on its path from `from`, with the
/// next sequence number after the client's last packet there (what an
/// on-path attacker that sniffs the path can build).
fn forged_reset(w: &World, from: SocketAddr) -> Vec<u8> {
    let (r, ack) = last_client_packet(w, from);
    let reset = DccpRepr {
        header: Header {
            src_port: r.header.src_port,
            dst_port: r.header.dst_port,
            seq: r.header.seq + 1,
            kind: DccpKind::Reset {
                ack,
                code: ResetCode::Closed,
                data: [0; 3],
            },
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    let mut out = vec![0u8; reset.buffer_len(0)];
    let n = reset.emit(&mut out, &[], None).unwrap();
    out.truncate(n);
    out
}

/// An on-path forger resets every path of an authenticated connection at
/// the server (a DCCP-Reset with the client's next sequence numbers): the
/// paths close, the connection does not. Only an MP_HMAC'd close or the
/// idle timeout ends it, so a path the client opens again joins the same
/// connection and carries data.
#[test]
fn a_forged_reset_on_every_path_closes_paths_not_the_authenticated_connection() {
    let k = keys(1);
    let conn = ConnectionConfig {
        lifetime: LifetimeConfig {
            idle_timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        },
        ..ConnectionConfig::default()
    };
    let mut w = World::with_config(&k, &[k.peers[0].0], Some(gate(&k, 1000)), conn);
    w.start(0, 0);
    w.run(20);
    w.start(0, 1);
    w.run(20);
    let h = w.ep.connections()[0];
    let active = |w: &World| {
        w.ep.connection(h).map_or(0, |c| {
            c.paths()
                .iter()
                .filter(|p| p.state == mpdccp_proto::PathState::Active)
                .count()
        })
    };
    assert_eq!(active(&w), 2);
    for path in 0..2 {
        let from = addr(0, path);
        let reset = forged_reset(&w, from);
        let now = w.now;
        w.ep.handle_datagram(now, from, &reset);
    }
    w.run(50);
    let server = w.ep.connection(h).expect("the connection is still there");
    assert!(!server.is_closed());
    assert_eq!(active(&w), 0, "the forged Resets closed both paths");
    assert!(server.stats().traffic.resets_received >= 2);
    // The client's paths come back as joins of the same connection.
    w.start(0, 2);
    w.run(50);
    assert_eq!(w.ep.connections(), vec![h]);
    assert_eq!(
        active(&w),
        1,
        "client closed {} paths {:?} ep {:?} server {:?}",
        w.clients[0].is_closed(),
        w.clients[0].paths(),
        w.ep.stats(),
        w.ep.connection(h).unwrap().stats()
    );
    // The client learns of its old paths' end from the server's Resets
    // ("No Connection") to what it sends there (those packets are lost, as
    // on any path that breaks); after that everything goes on the new path.
    for _ in 0..5 {
        let now = w.now;
        w.clients[0].send(now, &[0x44; 100]).unwrap();
        w.run(40);
    }
    let closed = w.clients[0]
        .paths()
        .iter()
        .filter(|p| p.state == mpdccp_proto::PathState::Closed)
        .count();
    assert_eq!(closed, 2, "the client's old paths ended");
    let before = w.ep.connection(h).unwrap().reorder_stats().received;
    for _ in 0..5 {
        let now = w.now;
        w.clients[0].send(now, &[0x45; 100]).unwrap();
        w.run(40);
    }
    let got = w.ep.connection(h).unwrap().reorder_stats().received - before;
    assert_eq!(
        got,
        5,
        "every packet arrives: client {:?} {:?}\nserver {:?}",
        w.clients[0].paths(),
        w.clients[0].stats(),
        w.ep.connection(h).unwrap().stats()
    );
    // With no subflow left at all, silence for the idle timeout ends it.
    let (started, idle) = (w.now, Duration::from_secs(5));
    let from = addr(0, 2);
    w.ep.handle_datagram(started, from, &forged_reset(&w, from));
    w.run(4_000);
    assert!(w.ep.connection(h).is_some_and(|c| !c.is_closed()));
    w.run(1_500);
    assert!(
        w.ep.connection(h).is_none_or(|c| c.is_closed()),
        "gone after {idle:?}"
    );
}

/// The last packet the client sent from `from`, parsed, and its Ack.
fn last_client_packet(w: &World, from: SocketAddr) -> (DccpRepr, u64) {
    let (_, _, last) = w
        .wire
        .iter()
        .rev()
        .find(|(c, f, _)| *c && *f == from)
        .expect("client traffic on the path");
    let r = parse(last);
    let ack = match r.header.kind {
        DccpKind::Ack { ack } | DccpKind::DataAck { ack } => ack,
        ref other => panic!("{other:?}"),
    };
    (r, ack)
}

/// A pure Ack from the client's path `from` with the next sequence number
/// and `mp` as its options (what an on-path forger can build).
fn forged_ack(w: &World, from: SocketAddr, mp: Vec<MpOption>) -> Vec<u8> {
    let (r, ack) = last_client_packet(w, from);
    let forged = DccpRepr {
        header: Header {
            src_port: r.header.src_port,
            dst_port: r.header.dst_port,
            seq: r.header.seq + 1,
            kind: DccpKind::Ack { ack },
            ..Header::default()
        },
        options: mp.into_iter().map(DccpOption::Multipath).collect(),
        ..DccpRepr::default()
    };
    let mut out = vec![0u8; forged.buffer_len(0)];
    let n = forged.emit(&mut out, &[], None).unwrap();
    out.truncate(n);
    out
}

fn server_prios(w: &World) -> Vec<u8> {
    let h = w.ep.connections()[0];
    let c = w.ep.connection(h).unwrap();
    c.paths().iter().map(|p| p.priority).collect()
}

/// RFC 9897 leaves MP_PRIO unauthenticated, so one forged "priority 0" per
/// path stopped the server's downstream. In the authenticated modes the
/// client's MP_PRIO carries an MP_HMAC under its d-key over the MP_SEQ,
/// the value and the subflow's join nonces: a forged one (no tag, a wrong tag, or
/// a genuine tag replayed onto another subflow) is ignored and counted,
/// while the client's own priority change still takes effect.
#[test]
fn mp_prio_is_authenticated_in_the_authenticated_mode() {
    let k = keys(1);
    let mut w = World::new(&k, &[k.peers[0].0], Some(gate(&k, 1000)));
    w.start(0, 0);
    w.run(20);
    w.start(0, 1);
    w.run(50);
    let h = w.ep.connections()[0];
    let before = server_prios(&w);
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|&p| p > 0), "{before:?}");

    // Forged: no tag, then a wrong one, on both paths, with MP_SEQs far
    // ahead (so only the tag can refuse them).
    for path in 0..2 {
        let from = addr(0, path);
        for mp in [
            vec![MpOption::Seq(1 << 40), MpOption::Prio(0)],
            vec![
                MpOption::Seq((1 << 40) + 1),
                MpOption::Prio(0),
                MpOption::Hmac([0x13; 20]),
            ],
        ] {
            let d = forged_ack(&w, from, mp);
            let now = w.now;
            w.ep.handle_datagram(now, from, &d);
        }
    }
    w.run(50);
    assert_eq!(server_prios(&w), before, "forged MP_PRIO ignored");
    let stats = w.ep.connection(h).unwrap().stats();
    assert_eq!(stats.auth.prio_bad_hmac, 4);

    // Genuine: the client takes path 1 out of use; the server follows.
    let mark = w.wire.len();
    let now = w.now;
    w.clients[0].set_priority(now, PathId(1), 0);
    w.run(50);
    assert_eq!(server_prios(&w), vec![before[0], 0]);
    let genuine = w.wire[mark..]
        .iter()
        .find(|(c, f, d)| {
            *c && *f == addr(0, 1)
                && parse(d)
                    .options
                    .iter()
                    .any(|o| matches!(o, DccpOption::Multipath(MpOption::Prio(0))))
        })
        .expect("the client sent MP_PRIO 0 on path 1")
        .2
        .clone();
    // On the wire: MP_PRIO directly followed by its MP_HMAC.
    let opts = parse(&genuine).options;
    let at = opts
        .iter()
        .position(|o| matches!(o, DccpOption::Multipath(MpOption::Prio(0))))
        .unwrap();
    assert!(matches!(
        opts.get(at + 1),
        Some(DccpOption::Multipath(MpOption::Hmac(_)))
    ));

    // Replayed onto path 0 with path 0's next numbers: the tag names path
    // 1's subflow, so path 0 keeps its priority.
    let (r0, ack0) = last_client_packet(&w, addr(0, 0));
    let replay = rewrap(&genuine, |r| {
        r.header.src_port = r0.header.src_port;
        r.header.dst_port = r0.header.dst_port;
        r.header.seq = r0.header.seq + 1;
        r.header.kind = DccpKind::Ack { ack: ack0 };
    });
    let now = w.now;
    w.ep.handle_datagram(now, addr(0, 0), &replay);
    w.run(50);
    assert_eq!(server_prios(&w), vec![before[0], 0]);
    assert_eq!(w.ep.connection(h).unwrap().stats().auth.prio_bad_hmac, 5);
}
