//! Forged MP-DCCP control packets against an established two-path session.
//!
//! Each attack is repeated 1000 times with different forgeries; every one
//! must be rejected, counted in `ConnStats`, and leave the established
//! connection unharmed: the same paths open and data still delivered both
//! ways. The attacker is given the path addresses and ports (so checksums
//! are right) and, where an attack needs it, what an on-path observer sees
//! (the server's connection identifier, the server's Response to its own
//! Request, sequence numbers of genuine packets) — but never the keys.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use mpdccp_proto::conn::codec::{
    FeatureNum, KeyOffer, MpAddAddr, MpJoin, MpRemoveAddr, PacketType, ResetCode, Segment,
};
use mpdccp_proto::conn::seq::SEQ_MASK;
use mpdccp_proto::conn::SERVICE_CODE;
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::option::kind;
use mpdccp_proto::{Event, PathId, PathState};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common;
use common::{addrs, emit, inject, last_genuine, open_paths, open_two_paths, rejections, Delivery};

const ROUNDS: u32 = 1000;

/// Path index never opened by the client: the attacker's own "path".
const ATTACK_PATH: usize = 2;

/// Datagrams the server sent towards the attacker's path.
type Inbox = Rc<RefCell<Vec<Vec<u8>>>>;

/// Client and server established over paths 0 and 1 (path 2 exists as a
/// link but only the attacker uses it); server→client datagrams on path 2
/// are captured into the returned inbox instead of being delivered.
fn session(seed: u64) -> (Harness, Inbox) {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![
            LinkSpec::default(),
            LinkSpec::default(),
            LinkSpec::default(),
        ],
        seed,
        ..Default::default()
    });
    h.record = true;
    open_two_paths(&mut h);
    assert!(h.client.is_established() && h.server.is_established());
    assert_eq!(open_paths(&h, Side::Server), 2);
    let inbox: Inbox = Rc::default();
    let sink = inbox.clone();
    h.tamper = Some(Box::new(move |from, path, bytes| {
        if from == Side::Server && path == PathId(ATTACK_PATH as u32) {
            sink.borrow_mut().push(bytes.clone());
            return false;
        }
        true
    }));
    (h, inbox)
}

/// Forges `seg` from the client side of the attacker's path and delivers
/// it to the server.
fn attack_server(h: &mut Harness, seg: &Segment<'_>) {
    inject(
        h,
        Side::Server,
        ATTACK_PATH,
        &emit(seg, ATTACK_PATH, Side::Client),
    );
}

/// [`common::assert_delivers`] with this file's traffic: `n` 120-byte
/// packets each way tagged `tag`, 2 ms apart.
fn assert_delivers(h: &mut Harness, n: u32, tag: u8) {
    common::assert_delivers(
        h,
        Delivery {
            n,
            tag,
            len: 120,
            gap: Duration::from_millis(2),
            drain: Duration::from_millis(300),
        },
    );
}

/// A sequence number certainly outside the receiver's validity window
/// (RFC 4340 §7.5.1) but chosen at random in the rest of the 48-bit space.
fn off_window(rng: &mut ChaCha8Rng, near: u64) -> u64 {
    near.wrapping_add(20_000 + rng.gen_range(0..(1u64 << 47) - 40_000)) & SEQ_MASK
}

fn server_events_since(h: &Harness, from: usize) -> &[Event] {
    &h.server_events[from..]
}

/// A forged MP_JOIN Request on the attacker's path, the server's Response
/// to it (seen by the on-path attacker) and a third packet with a forged
/// MP_HMAC: wrong, missing, or replayed from the genuine join of path 1.
/// The join never completes, each attempt counts in `join_bad_hmac`, and
/// nothing of the established connection changes.
#[test]
fn join_with_forged_hmac_is_rejected_every_time() {
    let (mut h, inbox) = session(11);
    let mut rng = ChaCha8Rng::seed_from_u64(0xBAD_4AC);
    let token = h.server.local_ci();
    // What an on-path observer saw of the genuine join on path 1.
    let genuine_req = h
        .wire
        .iter()
        .find(|w| w.path == PathId(1) && w.from == Side::Client)
        .map(|w| Segment::parse(&w.bytes, None).unwrap().mp.join.unwrap())
        .unwrap();
    let genuine_hmac = h
        .wire
        .iter()
        .filter(|w| w.path == PathId(1) && w.from == Side::Client)
        .find_map(|w| Segment::parse(&w.bytes, None).unwrap().mp.hmac)
        .unwrap();
    let ev0 = h.server_events.len();
    let stats0 = h.server.stats();
    let delivered0 = h.delivered(Side::Server).len();
    for k in 0..ROUNDS {
        let variant = k % 4;
        let req_seq = rng.gen::<u64>() & SEQ_MASK;
        let nonce = if variant == 3 {
            genuine_req.nonce
        } else {
            rng.gen()
        };
        let mut req = Segment::new(PacketType::Request, req_seq);
        req.service_code = SERVICE_CODE;
        // A join as the RFC has it (§3.2.2: Change R(10) 0), so only the
        // third packet's MP_HMAC is wrong.
        req.push_feat(kind::CHANGE_R, FeatureNum::MultipathCapable, Some(0));
        req.mp.join = Some(MpJoin {
            addr_id: rng.gen(),
            token,
            nonce,
        });
        inbox.borrow_mut().clear();
        attack_server(&mut h, &req);
        h.drive_for(Duration::from_millis(1));
        let resp = {
            let inbox = inbox.borrow();
            let r = inbox.first().expect("server answered the join Request");
            let s = Segment::parse(r, None).unwrap();
            assert_eq!(s.ptype, PacketType::Response, "round {k}");
            assert!(s.mp.hmac.is_some());
            s.seq
        };
        // Third packet: Ack (or DataAck smuggling a payload) acknowledging
        // the Response, with a bad MP_HMAC.
        let payload = [0xEEu8; 64];
        let ptype = if k % 2 == 0 {
            PacketType::Ack
        } else {
            PacketType::DataAck
        };
        let mut third = Segment::new(ptype, (req_seq + 1) & SEQ_MASK);
        third.ack = Some(resp);
        third.mp.hmac = match variant {
            0 | 1 => Some(rng.gen()),
            2 => None,
            _ => Some(genuine_hmac),
        };
        if ptype == PacketType::DataAck {
            third.payload = &payload;
            third.mp.seq = Some(rng.gen::<u64>() & SEQ_MASK);
        }
        inbox.borrow_mut().clear();
        attack_server(&mut h, &third);
        h.drive_for(Duration::from_millis(1));
        let s = h.server.stats();
        assert_eq!(
            s.auth.join_bad_hmac,
            stats0.auth.join_bad_hmac + u64::from(k) + 1,
            "round {k} (variant {variant}) counted"
        );
        // The subflow is refused with Reset (Option Error).
        let inbox = inbox.borrow();
        let reset = inbox
            .iter()
            .filter_map(|b| Segment::parse(b, None).ok())
            .find(|s| s.ptype == PacketType::Reset);
        assert_eq!(
            reset.map(|r| r.reset_code),
            Some(ResetCode::OptionError),
            "round {k}"
        );
    }
    let evs = server_events_since(&h, ev0);
    assert!(
        !evs.iter()
            .any(|e| matches!(e, Event::PathEstablished(_) | Event::Connected)),
        "no forged join established: {evs:?}"
    );
    assert_eq!(
        h.delivered(Side::Server).len(),
        delivered0,
        "nothing smuggled"
    );
    assert_eq!(open_paths(&h, Side::Server), 2);
    assert!(
        h.server.paths().len() <= 3,
        "{} paths",
        h.server.paths().len()
    );
    assert_eq!(h.server.stats().auth.bad_key_echo, stats0.auth.bad_key_echo);
    h.tamper = None;
    assert_delivers(&mut h, 50, 0xA1);
    assert_eq!(open_paths(&h, Side::Client), 2);
}

/// MP_JOIN with a path token that is not the server's connection
/// identifier: Reset (No Connection), `join_unknown_token`, no state kept.
#[test]
fn join_with_unknown_token_is_reset_every_time() {
    let (mut h, inbox) = session(12);
    let mut rng = ChaCha8Rng::seed_from_u64(0x70CE);
    let token = h.server.local_ci();
    let stats0 = h.server.stats();
    for k in 0..ROUNDS {
        let mut forged = rng.gen::<u32>();
        if forged == token {
            forged ^= 1;
        }
        let mut req = Segment::new(PacketType::Request, rng.gen::<u64>() & SEQ_MASK);
        req.service_code = SERVICE_CODE;
        req.mp.join = Some(MpJoin {
            addr_id: rng.gen(),
            token: forged,
            nonce: rng.gen(),
        });
        inbox.borrow_mut().clear();
        attack_server(&mut h, &req);
        h.drive_for(Duration::from_millis(1));
        assert_eq!(
            h.server.stats().auth.join_unknown_token,
            stats0.auth.join_unknown_token + u64::from(k) + 1
        );
        let codes: Vec<ResetCode> = inbox
            .borrow()
            .iter()
            .filter_map(|b| Segment::parse(b, None).ok())
            .map(|s| {
                assert_eq!(s.ptype, PacketType::Reset, "only a Reset answers");
                s.reset_code
            })
            .collect();
        assert_eq!(codes, vec![ResetCode::NoConnection], "round {k}");
    }
    assert_eq!(open_paths(&h, Side::Server), 2);
    assert!(h.server.paths().len() <= 3);
    h.tamper = None;
    assert_delivers(&mut h, 50, 0xA2);
}

/// Everything the client of earlier sessions sent (initial MP_KEY
/// Requests, joins with their MP_HMAC, data, acks, ADDADDR, close) replayed
/// at a live server on every path: each replay is rejected and counted.
#[test]
fn replayed_packets_from_earlier_sessions_are_rejected() {
    let mut old: Vec<(usize, Vec<u8>)> = Vec::new();
    for seed in 100..110 {
        let (mut e, _) = session(seed);
        e.tamper = None;
        let now = e.now;
        e.client
            .advertise_address(now, "198.51.100.7:9".parse().unwrap())
            .unwrap();
        for k in 0..20u8 {
            let now = e.now;
            e.client.send(now, &[k; 90]).unwrap();
            e.server.send(now, &[k; 90]).unwrap();
            e.drive_for(Duration::from_millis(5));
        }
        let now = e.now;
        e.client.close(now);
        e.drive_for(Duration::from_secs(2));
        old.extend(
            e.wire
                .iter()
                .filter(|w| w.from == Side::Client)
                .map(|w| (w.path.0 as usize, w.bytes.clone())),
        );
    }
    assert!(old.len() > 200, "{} captured", old.len());
    let (mut h, _inbox) = session(7);
    let mut rng = ChaCha8Rng::seed_from_u64(0x4E_91A7);
    let ev0 = h.server_events.len();
    let delivered0 = h.delivered(Side::Server).len();
    for k in 0..ROUNDS {
        let (orig_path, bytes) = &old[rng.gen_range(0..old.len())];
        // Replay on its own path, or re-checksummed for another one.
        let path = rng.gen_range(0..3);
        let mut b = bytes.clone();
        if path != *orig_path {
            let (src, dst) = addrs(path, Side::Client);
            mpdccp_proto::harness::inspect::fix_checksum(&mut b, src.ip(), dst.ip());
        }
        // Close/CloseReq/Reset reaching a subflow already CLOSED (e.g. by
        // an earlier refused replay on path 2) are answered or ignored
        // without a counter: see `close_on_a_closed_subflow_is_counted`.
        let ptype = Segment::parse(&b, None).map(|s| s.ptype).ok();
        let closed = h
            .server
            .paths()
            .iter()
            .any(|p| p.id == PathId(path as u32) && p.state == PathState::Closed);
        let uncounted = closed
            && matches!(
                ptype,
                Some(PacketType::Close | PacketType::CloseReq | PacketType::Reset)
            );
        let before = rejections(&h.server.stats());
        inject(&mut h, Side::Server, path, &b);
        let after = rejections(&h.server.stats());
        assert!(
            after > before || uncounted,
            "round {k}: replay of {:?} on path {path} not counted; server paths {:?}",
            Segment::parse(&b, None).map(|s| (s.ptype, s.mp)),
            h.server
                .paths()
                .iter()
                .map(|p| (p.id, p.state))
                .collect::<Vec<_>>()
        );
        h.drive_for(Duration::from_millis(1));
    }
    let evs = server_events_since(&h, ev0);
    assert!(
        !evs.iter().any(|e| matches!(
            e,
            Event::PathEstablished(_)
                | Event::PathClosed(_)
                | Event::PathFailed(_)
                | Event::Closed { .. }
                | Event::AddressAdded { .. }
        )),
        "{evs:?}"
    );
    assert_eq!(h.delivered(Side::Server).len(), delivered0);
    assert!(h.server.remote_addresses().is_empty());
    assert_eq!(open_paths(&h, Side::Server), 2);
    h.tamper = None;
    assert_delivers(&mut h, 50, 0xA3);
}

/// MP_ADDADDR and MP_REMOVEADDR with a wrong or missing MP_HMAC, sent by
/// an on-path attacker inside the sequence window (it reuses the sequence
/// and acknowledgement numbers of the client's latest genuine packet): never
/// added, never removed, each counted.
#[test]
fn addaddr_and_removeaddr_with_bad_hmac_are_rejected_every_time() {
    let (mut h, _inbox) = session(13);
    h.tamper = None;
    let mut rng = ChaCha8Rng::seed_from_u64(0xADD);
    // One genuine advertisement, confirmed.
    let genuine: SocketAddr = "203.0.113.5:4242".parse().unwrap();
    let now = h.now;
    let gid = h.client.advertise_address(now, genuine).unwrap();
    h.drive_for(Duration::from_millis(500));
    assert_eq!(h.server.remote_addresses(), vec![(gid, genuine)]);
    let ev0 = h.server_events.len();
    let s0 = h.server.stats();
    for k in 0..ROUNDS {
        let path = (k % 2) as usize;
        let (seq, ack) = last_genuine(&h, Side::Client, path);
        let mut seg = Segment::new(PacketType::Ack, seq);
        seg.ack = ack;
        let add = k % 4 < 2;
        if add {
            let ip = if rng.gen() {
                IpAddr::V4(Ipv4Addr::from(rng.gen::<u32>()))
            } else {
                IpAddr::V6(Ipv6Addr::from(rng.gen::<u128>()))
            };
            seg.mp.addaddr = Some(MpAddAddr {
                // Sometimes overwrite the genuine id with another address.
                addr_id: if rng.gen() { gid } else { rng.gen() },
                nonce: rng.gen(),
                ip,
                port: rng.gen::<bool>().then(|| rng.gen()),
            });
        } else {
            seg.mp.removeaddr = Some(MpRemoveAddr {
                addr_id: if rng.gen() { gid } else { rng.gen() },
                nonce: rng.gen(),
            });
        }
        // A forged tag right after the option (RFC 9897 §3.2.6) or none.
        let tag = (k % 2 == 0).then(|| rng.gen());
        seg.mp.addaddr_hmac = seg.mp.addaddr.and(tag);
        seg.mp.removeaddr_hmac = seg.mp.removeaddr.and(tag);
        inject(&mut h, Side::Server, path, &emit(&seg, path, Side::Client));
        let s = h.server.stats();
        let counted = (s.auth.addaddr_bad_hmac - s0.auth.addaddr_bad_hmac)
            + (s.auth.removeaddr_bad_hmac - s0.auth.removeaddr_bad_hmac);
        assert_eq!(counted, u64::from(k) + 1, "round {k} counted");
        h.drive_for(Duration::from_millis(3));
    }
    let s = h.server.stats();
    assert_eq!(
        s.auth.addaddr_bad_hmac - s0.auth.addaddr_bad_hmac,
        u64::from(ROUNDS) / 2
    );
    assert_eq!(
        s.auth.removeaddr_bad_hmac - s0.auth.removeaddr_bad_hmac,
        u64::from(ROUNDS) / 2
    );
    assert_eq!(h.server.remote_addresses(), vec![(gid, genuine)]);
    let evs = server_events_since(&h, ev0);
    assert!(
        !evs.iter()
            .any(|e| matches!(e, Event::AddressAdded { .. } | Event::AddressRemoved { .. })),
        "{evs:?}"
    );
    assert_eq!(open_paths(&h, Side::Server), 2);
    assert_delivers(&mut h, 50, 0xA4);
}

/// An off-path attacker (no keys, sequence numbers outside the window)
/// sends MP_PRIO, MP_CLOSE on Close/CloseReq, MP_FAST_CLOSE on Reset 13,
/// plain Resets and Syncs to both ends: all rejected by the validity
/// checks (RFC 4340 §7.5.3), counted, Syncs in reply rate-limited, and
/// priorities, paths and the connection untouched.
#[test]
fn off_path_prio_close_fast_close_and_reset_are_rejected_every_time() {
    let (mut h, _inbox) = session(14);
    h.tamper = None;
    let mut rng = ChaCha8Rng::seed_from_u64(0x0FF_9A7);
    let prio0: Vec<_> = [Side::Client, Side::Server]
        .map(|s| {
            h.conn_ref(s)
                .paths()
                .iter()
                .map(|p| p.priority)
                .collect::<Vec<_>>()
        })
        .into();
    let ev0 = [h.client_events.len(), h.server_events.len()];
    let st0 = [h.client.stats(), h.server.stats()];
    let t0 = h.now;
    for k in 0..ROUNDS {
        let to = if k % 2 == 0 {
            Side::Server
        } else {
            Side::Client
        };
        let path = rng.gen_range(0..2usize);
        let (peer_seq, peer_ack) = last_genuine(&h, to.peer(), path);
        let seq = off_window(&mut rng, peer_seq);
        let ack = off_window(&mut rng, peer_ack.unwrap_or(0));
        let kind = (k / 2) % 6;
        let mut seg = match kind {
            0 => {
                let mut s = Segment::new(PacketType::Ack, seq);
                s.mp.prio = Some(rng.gen_range(0..16));
                s
            }
            1 => {
                let mut s = Segment::new(PacketType::Close, seq);
                s.mp.close = Some(rng.gen());
                s
            }
            2 => {
                let mut s = Segment::new(PacketType::CloseReq, seq);
                s.mp.close = Some(rng.gen());
                s
            }
            3 => {
                let mut s = Segment::new(PacketType::Reset, seq);
                s.reset_code = ResetCode::MpFastClose;
                s.mp.fast_close = Some(rng.gen());
                s
            }
            4 => {
                let mut s = Segment::new(PacketType::Reset, seq);
                s.reset_code = ResetCode::from_u8(rng.gen_range(0..14));
                s
            }
            _ => {
                let mut s = Segment::new(PacketType::Sync, seq);
                s.mp.prio = Some(0);
                s
            }
        };
        seg.ack = Some(ack);
        let before = h.conn_ref(to).stats().rx.rx_seq_invalid;
        inject(&mut h, to, path, &emit(&seg, path, to.peer()));
        assert_eq!(
            h.conn_ref(to).stats().rx.rx_seq_invalid,
            before + 1,
            "round {k}: kind {kind} to {to:?} counted as out of window"
        );
        h.drive_for(Duration::from_millis(1));
    }
    let elapsed_ms = (h.now - t0).as_millis() as u64;
    for (i, side) in [Side::Client, Side::Server].into_iter().enumerate() {
        let c = h.conn_ref(side);
        assert!(c.is_established(), "{side:?} still established");
        let prio: Vec<u8> = c.paths().iter().map(|p| p.priority).collect();
        assert_eq!(prio, prio0[i], "{side:?} priorities unchanged");
        let evs = &h.events(side)[ev0[i]..];
        assert!(
            !evs.iter().any(|e| matches!(
                e,
                Event::PriorityChanged { .. }
                    | Event::PathClosed(_)
                    | Event::PathFailed(_)
                    | Event::Closed { .. }
            )),
            "{side:?}: {evs:?}"
        );
        let s = c.stats();
        assert_eq!(
            s.auth.bad_close_key, st0[i].auth.bad_close_key,
            "keys never examined"
        );
        // RFC 4340 §7.5.4: at most one Sync per 100 ms per path in reply
        // (the idle-path RTT probes are no reply).
        let probes = s.traffic.rtt_probes_sent - st0[i].traffic.rtt_probes_sent;
        let syncs = s.traffic.syncs_sent - st0[i].traffic.syncs_sent - probes;
        let cap = 2 * (elapsed_ms / 100 + 1);
        assert!(
            syncs <= cap,
            "{side:?} sent {syncs} Syncs in {elapsed_ms} ms"
        );
        // The peer's Syncs acknowledge numbers nobody sent: never answered
        // (only the genuine peer's RTT probes are).
        let peer = h.conn_ref(side.peer()).stats();
        let peer_probes = peer.traffic.rtt_probes_sent - st0[1 - i].traffic.rtt_probes_sent;
        assert_eq!(
            s.traffic.syncacks_sent - st0[i].traffic.syncacks_sent,
            peer_probes,
            "{side:?} SyncAcks"
        );
    }
    assert_eq!(open_paths(&h, Side::Server), 2);
    assert_eq!(open_paths(&h, Side::Client), 2);
    assert_delivers(&mut h, 50, 0xA5);
}

/// A join Request reusing a genuine MP_KEY handshake (a second initial
/// Request with fresh keys on a new path of a live connection) does not
/// replace the connection's keys: refused and counted.
#[test]
fn second_mp_key_handshake_on_a_live_connection_is_refused() {
    let (mut h, inbox) = session(15);
    let mut rng = ChaCha8Rng::seed_from_u64(0x2E_C0);
    let ci = h.server.remote_ci();
    let s0 = h.server.stats();
    for k in 0..ROUNDS {
        let mut req = Segment::new(PacketType::Request, rng.gen::<u64>() & SEQ_MASK);
        req.service_code = SERVICE_CODE;
        req.push_feat(32, FeatureNum::MultipathCapable, Some(0)); // Change L(Multipath Capable)
        req.mp.key = Some(KeyOffer::plain(rng.gen(), rng.gen(), None));
        inbox.borrow_mut().clear();
        attack_server(&mut h, &req);
        h.drive_for(Duration::from_millis(1));
        assert_eq!(
            h.server.stats().rx.rx_unexpected,
            s0.rx.rx_unexpected + u64::from(k) + 1
        );
        let inbox = inbox.borrow();
        assert!(
            inbox
                .iter()
                .filter_map(|b| Segment::parse(b, None).ok())
                .all(|s| s.ptype == PacketType::Reset),
            "round {k}: only Resets answer"
        );
    }
    assert_eq!(h.server.remote_ci(), ci, "keys unchanged");
    assert_eq!(open_paths(&h, Side::Server), 2);
    h.tamper = None;
    assert_delivers(&mut h, 50, 0xA6);
}

/// Forged Close / CloseReq / Reset aimed at a subflow the server already
/// refused (CLOSED) must be counted like every other rejected packet.
#[test]
fn close_on_a_closed_subflow_is_counted() {
    let (mut h, _inbox) = session(16);
    let mut rng = ChaCha8Rng::seed_from_u64(0xC105E);
    // A refused join leaves path 2 CLOSED on the server.
    let mut req = Segment::new(PacketType::Request, rng.gen::<u64>() & SEQ_MASK);
    req.mp.join = Some(MpJoin {
        addr_id: 9,
        token: h.server.local_ci() ^ 1,
        nonce: 1,
    });
    attack_server(&mut h, &req);
    h.drive_for(Duration::from_millis(5));
    for (k, ptype) in [PacketType::Close, PacketType::CloseReq, PacketType::Reset]
        .into_iter()
        .cycle()
        .take(30)
        .enumerate()
    {
        let mut seg = Segment::new(ptype, rng.gen::<u64>() & SEQ_MASK);
        seg.ack = Some(rng.gen::<u64>() & SEQ_MASK);
        seg.mp.close = Some(rng.gen());
        let before = rejections(&h.server.stats());
        attack_server(&mut h, &seg);
        assert!(
            rejections(&h.server.stats()) > before,
            "round {k}: {ptype:?}"
        );
        h.drive_for(Duration::from_millis(1));
    }
}

/// The MP_JOIN handshakes of earlier sessions (their Request with path
/// token and nonce, and the Ack with MP_HMAC), replayed at a live server on
/// a new path 1000 times: the token is not this connection's identifier,
/// so every Request is reset (No Connection) and counted, and the replayed
/// Ack never opens a subflow.
#[test]
fn replayed_mp_join_from_earlier_sessions_is_rejected_every_time() {
    let mut joins: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for seed in 200..220 {
        let (e, _) = session(seed);
        let c2s: Vec<&Vec<u8>> = e
            .wire
            .iter()
            .filter(|w| w.from == Side::Client && w.path == PathId(1))
            .map(|w| &w.bytes)
            .collect();
        let req = c2s
            .iter()
            .find(|b| Segment::parse(b, None).is_ok_and(|s| s.mp.join.is_some()))
            .expect("join Request");
        let ack = c2s
            .iter()
            .find(|b| Segment::parse(b, None).is_ok_and(|s| s.mp.hmac.is_some()))
            .expect("join Ack with MP_HMAC");
        joins.push(((*req).clone(), (*ack).clone()));
    }
    let (mut h, inbox) = session(8);
    let s0 = h.server.stats();
    let ev0 = h.server_events.len();
    let (src, dst) = addrs(ATTACK_PATH, Side::Client);
    for k in 0..ROUNDS {
        let (req, ack) = &joins[k as usize % joins.len()];
        inbox.borrow_mut().clear();
        for b in [req, ack] {
            let mut b = b.clone();
            mpdccp_proto::harness::inspect::fix_checksum(&mut b, src.ip(), dst.ip());
            inject(&mut h, Side::Server, ATTACK_PATH, &b);
        }
        h.drive_for(Duration::from_millis(1));
        let s = h.server.stats();
        assert_eq!(
            s.auth.join_unknown_token - s0.auth.join_unknown_token,
            u64::from(k) + 1,
            "round {k}"
        );
        assert!(
            inbox
                .borrow()
                .iter()
                .filter_map(|b| Segment::parse(b, None).ok())
                .all(|s| s.ptype == PacketType::Reset && s.reset_code == ResetCode::NoConnection),
            "round {k}: only Reset (No Connection) answers"
        );
    }
    let s = h.server.stats();
    assert_eq!(
        s.auth.join_bad_hmac, s0.auth.join_bad_hmac,
        "no HMAC ever checked"
    );
    let evs = server_events_since(&h, ev0);
    assert!(
        !evs.iter().any(|e| matches!(e, Event::PathEstablished(_))),
        "{evs:?}"
    );
    assert_eq!(open_paths(&h, Side::Server), 2);
    assert!(h.server.paths().len() <= 3);
    h.tamper = None;
    assert_delivers(&mut h, 50, 0xA7);
}

/// A forged Request refused on a path id the client has not opened yet
/// (here: a join with a wrong token on path 2) must not stop the client
/// from joining on that path id later.
#[test]
fn refused_forged_request_does_not_poison_the_path_id() {
    let (mut h, _inbox) = session(17);
    h.tamper = None;
    let mut req = Segment::new(PacketType::Request, 12345);
    req.service_code = SERVICE_CODE;
    req.mp.join = Some(MpJoin {
        addr_id: 7,
        token: h.server.local_ci() ^ 0x55,
        nonce: 99,
    });
    attack_server(&mut h, &req);
    h.drive_for(Duration::from_millis(50));
    assert_eq!(h.server.stats().auth.join_unknown_token, 1);
    h.open_path(ATTACK_PATH);
    h.drive_for(Duration::from_secs(3));
    assert_eq!(
        h.client.stats().rx.rx_bad_checksum,
        0,
        "the server's Response on the re-used path id has a valid checksum"
    );
    assert_eq!(open_paths(&h, Side::Server), 3, "{:?}", h.server_events);
}

/// The client's side of MP_JOIN: an on-path attacker intercepts each join
/// Request and answers with a Response carrying a forged MP_HMAC (random,
/// missing, or the genuine one of path 1's join). The client rejects the
/// Response every time (`join_bad_hmac`, Reset Option Error), the path
/// never opens, and the established paths carry on.
#[test]
fn forged_join_response_is_rejected_by_the_client_every_time() {
    let (mut h, _inbox) = session(18);
    let genuine_resp_hmac = h
        .wire
        .iter()
        .filter(|w| w.path == PathId(1) && w.from == Side::Server)
        .find_map(|w| Segment::parse(&w.bytes, None).unwrap().mp.hmac)
        .unwrap();
    // Intercept (and drop) everything the client sends on the attacker's path.
    let taken: Inbox = Rc::default();
    let sink = taken.clone();
    h.tamper = Some(Box::new(move |from, path, bytes| {
        if from == Side::Client && path == PathId(ATTACK_PATH as u32) {
            sink.borrow_mut().push(bytes.clone());
            return false;
        }
        true
    }));
    let mut rng = ChaCha8Rng::seed_from_u64(0x4E5);
    let c0 = h.client.stats();
    let ev0 = h.client_events.len();
    for k in 0..ROUNDS {
        taken.borrow_mut().clear();
        h.open_path(ATTACK_PATH);
        h.drive_for(Duration::from_millis(1));
        let req = {
            let t = taken.borrow();
            let s = Segment::parse(t.first().expect("join Request sent"), None).unwrap();
            assert_eq!(s.ptype, PacketType::Request, "round {k}");
            (s.seq, s.mp.join.expect("MP_JOIN"))
        };
        let mut resp = Segment::new(PacketType::Response, rng.gen::<u64>() & SEQ_MASK);
        resp.ack = Some(req.0);
        resp.service_code = SERVICE_CODE;
        // Multipath Capable confirmed as the RFC has it (§3.2.2: Confirm
        // L(10) 0 0), so only the MP_HMAC is wrong.
        resp.push_feat_list(kind::CONFIRM_L, FeatureNum::MultipathCapable, &[0, 0]);
        resp.mp.join = Some(MpJoin {
            addr_id: rng.gen(),
            token: h.client.local_ci(),
            nonce: rng.gen(),
        });
        resp.mp.hmac = match k % 3 {
            0 => Some(rng.gen()),
            1 => None,
            _ => Some(genuine_resp_hmac),
        };
        inject(
            &mut h,
            Side::Client,
            ATTACK_PATH,
            &emit(&resp, ATTACK_PATH, Side::Server),
        );
        h.drive_for(Duration::from_millis(1));
        assert_eq!(
            h.client.stats().auth.join_bad_hmac - c0.auth.join_bad_hmac,
            u64::from(k) + 1,
            "round {k} rejected"
        );
        // The client tells the (fake) server with Reset (Option Error).
        let t = taken.borrow();
        let reset = t
            .iter()
            .filter_map(|b| Segment::parse(b, None).ok())
            .find(|s| s.ptype == PacketType::Reset);
        assert_eq!(reset.map(|s| s.reset_code), Some(ResetCode::OptionError));
    }
    let evs = &h.client_events[ev0..];
    assert!(
        !evs.contains(&Event::PathEstablished(PathId(ATTACK_PATH as u32))),
        "{evs:?}"
    );
    assert_eq!(open_paths(&h, Side::Client), 2);
    assert!(h.client.is_established());
    h.tamper = None;
    assert_delivers(&mut h, 50, 0xA8);
}
