//! Property tests: hostile datagrams at random points of a live session.
//!
//! A capture session (its own keys, connection identifiers and sequence
//! numbers) records every datagram of a full MP-DCCP life: handshake, two
//! joins, data both ways, acks, MP_ADDADDR, MP_PRIO and the closing
//! handshake. Each proptest case starts a fresh live session and feeds the
//! client, the server or a server [`Endpoint`] arbitrary bytes, truncated
//! or bit-flipped captured packets, verbatim replays, and well-formed
//! forgeries with correct checksums and random headers and MP options.
//!
//! Asserted for every case: no panic; every injected datagram bumps a
//! rejection counter of the receiving connection; memory stays within the
//! configured caps (paths, send queue, reorder buffer, endpoint connections
//! and pending Resets); and afterwards the live session still delivers
//! data both ways, exactly once.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::LazyLock;
use std::time::Duration;

use mpdccp_proto::conn::codec::{
    FeatureNum, KeyOffer, MpAddAddr, MpJoin, PacketType, ResetCode, Segment,
};
use mpdccp_proto::conn::seq::SEQ_MASK;
use mpdccp_proto::conn::SERVICE_CODE;
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::option::kind;
use mpdccp_proto::{Connection, ConnectionConfig, EndpointConfig, Event, PathId, PathState};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

use crate::common;
use common::{
    addrs, inject_counted, open_paths, open_two_paths, rejections, Delivery, EpNet, CLIENT_KEY,
};
use mpdccp_proto::conn::SendQueueConfig;

/// Every datagram of a complete session with other keys: (sender, path, bytes).
static CAPTURE: LazyLock<Vec<(Side, usize, Vec<u8>)>> = LazyLock::new(|| {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(); 3],
        seed: 0xCA97,
        ..Default::default()
    });
    h.record = true;
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.open_path(2);
    h.drive_for(Duration::from_millis(200));
    let now = h.now;
    h.client
        .advertise_address(now, "192.0.2.44:4242".parse().unwrap())
        .unwrap();
    h.server.set_priority(now, PathId(1), 1);
    for k in 0..30u8 {
        let now = h.now;
        h.client.send(now, &[k; 300]).unwrap();
        h.server.send(now, &[k; 200]).unwrap();
        h.drive_for(Duration::from_millis(3));
    }
    h.drive_for(Duration::from_millis(500));
    let now = h.now;
    h.client.close(now);
    h.drive_for(Duration::from_secs(3));
    assert!(h.client.is_closed());
    h.wire
        .iter()
        .map(|w| (w.from, w.path.0 as usize, w.bytes.clone()))
        .collect()
});

/// One hostile datagram.
#[derive(Clone, Debug)]
enum Kind {
    Garbage(Vec<u8>),
    /// A captured packet cut to a shorter length.
    Truncate {
        pkt: usize,
        keep: usize,
    },
    /// A captured packet with bits flipped at (position, bit).
    Flip {
        pkt: usize,
        flips: Vec<(usize, u8)>,
    },
    /// A captured packet verbatim.
    Replay {
        pkt: usize,
    },
    /// A well-formed packet with a correct checksum and random content.
    Forged(Forged),
}

#[derive(Clone, Debug)]
struct Forged {
    ptype: u8,
    seq: u64,
    ack: u64,
    option: u8,
    payload_len: usize,
    r: u64,
}

#[derive(Clone, Debug)]
struct Inject {
    to: Side,
    /// 0 and 1 are live paths, 2 is known to neither end.
    path: usize,
    wait_us: u32,
    kind: Kind,
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..1600).prop_map(Kind::Garbage),
        (any::<usize>(), any::<usize>()).prop_map(|(pkt, keep)| Kind::Truncate { pkt, keep }),
        (
            any::<usize>(),
            proptest::collection::vec((any::<usize>(), 0u8..8), 1..5)
        )
            .prop_map(|(pkt, flips)| Kind::Flip { pkt, flips }),
        any::<usize>().prop_map(|pkt| Kind::Replay { pkt }),
        (
            0u8..10,
            any::<u64>(),
            any::<u64>(),
            0u8..9,
            0usize..400,
            any::<u64>()
        )
            .prop_map(|(ptype, seq, ack, option, payload_len, r)| {
                Kind::Forged(Forged {
                    ptype,
                    seq,
                    ack,
                    option,
                    payload_len,
                    r,
                })
            }),
    ]
}

fn inject_strategy() -> impl Strategy<Value = Inject> {
    (any::<bool>(), 0usize..3, 0u32..50_000, kind_strategy()).prop_map(
        |(server, path, wait_us, kind)| Inject {
            to: if server { Side::Server } else { Side::Client },
            path,
            wait_us,
            kind,
        },
    )
}

fn forge(f: &Forged, src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let ptype = PacketType::from_u8(f.ptype).expect("0..10");
    let carries_payload =
        ptype.carries_data() || matches!(ptype, PacketType::Request | PacketType::Response);
    let payload = vec![0x5Au8; f.payload_len];
    let mut s = Segment::new(ptype, f.seq & SEQ_MASK);
    s.src_port = 4242;
    s.dst_port = 4242;
    if ptype.has_ack() {
        s.ack = Some(f.ack & SEQ_MASK);
    }
    if matches!(ptype, PacketType::Request | PacketType::Response) {
        s.service_code = SERVICE_CODE;
    }
    let r = f.r;
    let key = r.to_be_bytes();
    match f.option {
        1 => {
            s.mp.join = Some(MpJoin {
                addr_id: r as u8,
                token: (r >> 8) as u32,
                nonce: (r >> 32) as u32,
            })
        }
        2 => {
            s.push_feat(kind::CHANGE_L, FeatureNum::MultipathCapable, Some(0));
            s.mp.key = Some(KeyOffer::plain(r as u32, key, (r & 1 == 1).then_some(key)))
        }
        3 => s.mp.prio = Some((r % 16) as u8),
        4 => s.mp.close = Some(key),
        5 => {
            s.reset_code = ResetCode::MpFastClose;
            s.mp.fast_close = Some(key);
        }
        6 => {
            s.mp.addaddr = Some(MpAddAddr {
                addr_id: r as u8,
                nonce: (r >> 8) as u32,
                ip: IpAddr::V4(Ipv4Addr::from((r >> 32) as u32)),
                port: Some(r as u16),
            });
            s.mp.addaddr_hmac = Some([r as u8; 20]);
        }
        7 => s.mp.seq = Some(r & SEQ_MASK),
        8 => s.mp.hmac = Some([(r >> 3) as u8; 20]),
        _ => {}
    }
    if carries_payload {
        s.payload = &payload;
    }
    let mut b = vec![0u8; 2048];
    let n = s.emit(&mut b, (src, dst)).expect("fits");
    b.truncate(n);
    b
}

/// The bytes of an injection; `None` when the mutation is a no-op.
fn materialise(inj: &Inject) -> Option<Vec<u8>> {
    let cap = &*CAPTURE;
    Some(match &inj.kind {
        Kind::Garbage(b) => b.clone(),
        Kind::Truncate { pkt, keep } => {
            let b = &cap[pkt % cap.len()].2;
            b[..keep % b.len()].to_vec()
        }
        Kind::Flip { pkt, flips } => {
            let mut b = cap[pkt % cap.len()].2.clone();
            let orig = b.clone();
            for (pos, bit) in flips {
                let n = b.len();
                b[pos % n] ^= 1 << bit;
            }
            if b == orig {
                return None;
            }
            b
        }
        Kind::Replay { pkt } => cap[pkt % cap.len()].2.clone(),
        Kind::Forged(f) => {
            let (src, dst) = addrs(inj.path, inj.to.peer());
            forge(f, src.ip(), dst.ip())
        }
    })
}

/// Close/CloseReq/Reset at a subflow that is already CLOSED are not counted
/// (a known conn bug, see hostile::forgery::close_on_a_closed_subflow_is_counted).
fn known_uncounted(c: &Connection, path: usize, bytes: &[u8]) -> bool {
    let closed = c
        .paths()
        .iter()
        .any(|p| p.id == PathId(path as u32) && p.state == PathState::Closed);
    closed
        && matches!(
            Segment::parse(bytes, None).map(|s| s.ptype),
            Ok(PacketType::Close | PacketType::CloseReq | PacketType::Reset)
        )
}

const QUEUE_PKTS: usize = 256;
const HOLD_PKTS: usize = 128;

fn live_config() -> ConnectionConfig {
    let mut c = ConnectionConfig {
        send_queue: SendQueueConfig {
            pkts: QUEUE_PKTS,
            ..Default::default()
        },
        ..Default::default()
    };
    c.reorder.kind = "active-fixed".parse().unwrap();
    c.reorder.max_hold_pkts = HOLD_PKTS;
    c
}

fn live_session(seed: u64) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        client: live_config(),
        server: live_config(),
        paths: vec![LinkSpec::default(); 3],
        seed,
    });
    open_two_paths(&mut h);
    h
}

fn assert_bounded(h: &Harness) {
    for side in [Side::Client, Side::Server] {
        let c = h.conn_ref(side);
        assert!(c.paths().len() <= 3, "{side:?} {} paths", c.paths().len());
        assert!(c.send_queue_len() <= QUEUE_PKTS);
        let r = c.reorder_stats();
        assert!(r.held_pkts as usize <= HOLD_PKTS, "{side:?} {r:?}");
        for p in c.paths() {
            assert!(p.queued_pkts as usize <= QUEUE_PKTS, "{p:?}");
        }
    }
}

/// Sends 20 tagged packets each way; every one must arrive exactly once.
fn assert_delivers(h: &mut Harness) {
    common::assert_delivers(
        h,
        Delivery {
            n: 20,
            tag: 0xD0,
            len: 6,
            gap: Duration::from_millis(1),
            drain: Duration::from_millis(400),
        },
    );
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(0x4057_113E),
        failure_persistence: None,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(2000))]

    /// Hostile datagrams at the client and the server of a live two-path
    /// session, at random times: counted, bounded, session unharmed.
    #[test]
    fn hostile_datagrams_at_a_live_connection(
        seed in 1u64..1_000_000,
        injects in proptest::collection::vec(inject_strategy(), 1..24),
    ) {
        let mut h = live_session(seed);
        prop_assert!(h.client.is_established() && h.server.is_established());
        // Background traffic so the injections land mid-transfer.
        for (k, inj) in injects.iter().enumerate() {
            let now = h.now;
            h.client.send(now, &[0xBB; 400]).unwrap();
            h.server.send(now, &[0xBC; 300]).unwrap();
            h.drive_for(Duration::from_micros(u64::from(inj.wait_us)));
            let Some(bytes) = materialise(inj) else { continue };
            let uncounted = known_uncounted(h.conn_ref(inj.to), inj.path, &bytes);
            let counted = inject_counted(&mut h, inj.to, inj.path, &bytes);
            prop_assert!(
                counted || uncounted,
                "injection {k} ({inj:?}) to {:?} was not counted", inj.to
            );
            assert_bounded(&h);
        }
        h.drive_for(Duration::from_millis(300));
        assert_bounded(&h);
        prop_assert!(h.client.is_established() && h.server.is_established());
        for side in [Side::Client, Side::Server] {
            let evs = h.events(side);
            prop_assert!(
                !evs.iter().any(|e| matches!(
                    e,
                    Event::Closed { .. } | Event::PathClosed(_) | Event::AddressAdded { .. }
                        | Event::PriorityChanged { .. }
                )),
                "{side:?}: {evs:?}"
            );
        }
        assert_delivers(&mut h);
    }
}

proptest! {
    #![proptest_config(config(1000))]

    /// Hostile datagrams at a server Endpoint from attacker addresses and
    /// spoofing the genuine client's: endpoint state stays within its caps
    /// and the genuine connection keeps delivering.
    #[test]
    fn hostile_datagrams_at_an_endpoint(
        seed in 1u64..1_000_000,
        injects in proptest::collection::vec(
            (0u64..12, inject_strategy()), 1..32),
    ) {
        let cfg = EndpointConfig {
            conn: live_config(),
            max_half_open: 4,
            max_pending_resets: 8,
            ..Default::default()
        };
        let mut net = EpNet::new(live_config(), cfg.clone(), (seed, seed ^ 0xE9));
        net.connect(2);
        prop_assert!(net.client.is_established());
        let (h, _) = net.ep.route(&CLIENT_KEY).unwrap();
        for (key, inj) in &injects {
            let now = net.now;
            net.client.send(now, &[0xBB; 200]).unwrap();
            net.now += Duration::from_micros(u64::from(inj.wait_us));
            net.pump();
            let Some(bytes) = materialise(inj) else { continue };
            // Keys 10 and 11 spoof the genuine client's two paths.
            let remote = if *key >= 10 { CLIENT_KEY + key - 10 } else { *key };
            let to_genuine = net.ep.route(&remote).map(|r| r.0) == Some(h);
            let uncounted = to_genuine
                && net.ep.route(&remote).is_some_and(|(_, p)| {
                    known_uncounted(net.ep.connection(h).unwrap(), p.0 as usize, &bytes)
                });
            let before = net.ep.connection(h).map(|c| rejections(&c.stats()));
            // The addresses the datagram claims: the spoofed client's path,
            // or an attacker address on path `inj.path`'s server side.
            let (c, s) = Harness::path_addrs(if *key >= 10 { (key - 10) as usize } else { inj.path });
            let c = if *key >= 10 { c } else { SocketAddr::new(IpAddr::from([198, 18, 0, *key as u8]), 4242) };
            let now = net.now;
            net.ep.handle_datagram_from(now, remote, Some((s, c)), &bytes);
            if to_genuine {
                let after = net.ep.connection(h).map(|c| rejections(&c.stats()));
                prop_assert!(after > before || uncounted, "{inj:?} not counted");
            }
            prop_assert!(net.ep.connections().len() <= 1 + cfg.max_half_open + 1);
            let c = net.ep.connection(h).unwrap();
            prop_assert!(c.paths().len() <= 2);
        }
        net.run_for(Duration::from_millis(300));
        prop_assert!(net.client.is_established());
        prop_assert!(net.ep.connection(h).is_some_and(|c| c.is_established()));
        let tagged = |d: &[Vec<u8>]| d.iter().filter(|p| p.first() == Some(&0xD1)).count();
        let (c0, s0) = (tagged(&net.client_delivered), tagged(&net.server_delivered));
        for k in 0..20u8 {
            let now = net.now;
            net.client.send(now, &[0xD1, k]).unwrap();
            net.ep.send(now, h, &[0xD1, k, k]).unwrap();
            net.run_for(Duration::from_millis(1));
        }
        net.run_for(Duration::from_millis(400));
        prop_assert_eq!(tagged(&net.server_delivered) - s0, 20);
        prop_assert_eq!(tagged(&net.client_delivered) - c0, 20);
    }
}

proptest! {
    #![proptest_config(config(600))]

    /// Hostile datagrams while the handshakes run (client in REQUEST /
    /// PARTOPEN, a join in flight; the server once it has accepted the
    /// genuine first Request): each counted, and the session still opens
    /// both paths and delivers.
    #[test]
    fn hostile_datagrams_during_the_handshakes(
        seed in 1u64..1_000_000,
        injects in proptest::collection::vec(inject_strategy(), 1..16),
    ) {
        let mut h = Harness::new(HarnessConfig {
            client: live_config(),
            server: live_config(),
            paths: vec![LinkSpec::default(); 3],
            seed,
        });
        h.open_path(0);
        let mut joined = false;
        for (k, inj) in injects.iter().enumerate() {
            h.drive_for(Duration::from_micros(u64::from(inj.wait_us / 4)));
            if !joined && h.client.is_established() {
                h.open_path(1);
                joined = true;
            }
            // The server accepts whoever sends the first Request of path 0
            // (protocol, not a bug): only attack it once it has.
            let to = if h.server.is_multipath().is_none() { Side::Client } else { inj.to };
            // A refused Request on a path id the client opens later poisons
            // it (known conn bug, see hostile::forgery::
            // refused_forged_request_does_not_poison_the_path_id): before
            // the join is open, hit the never-used path 2 instead of path 1.
            let server_has_1 = h
                .server
                .paths()
                .iter()
                .any(|p| p.id == PathId(1) && p.state == PathState::Active);
            let path = if to == Side::Server && !server_has_1 && inj.path == 1 {
                2
            } else {
                inj.path
            };
            let inj = &Inject { to, path, ..inj.clone() };
            let Some(bytes) = materialise(inj) else { continue };
            let uncounted = known_uncounted(h.conn_ref(to), path, &bytes);
            let counted = inject_counted(&mut h, to, path, &bytes);
            prop_assert!(
                counted || uncounted,
                "injection {k} ({inj:?}) to {to:?} was not counted"
            );
            assert_bounded(&h);
        }
        h.drive_for(Duration::from_millis(300));
        if !joined {
            h.open_path(1);
        }
        h.drive_for(Duration::from_millis(300));
        prop_assert!(h.client.is_established() && h.server.is_established());
        prop_assert_eq!(
            open_paths(&h, Side::Server),
            2,
            "server {:?} {:?}\nclient {:?} {:?}\ninjected {:?}",
            h.server_events,
            h.server.stats(),
            h.client_events,
            h.client.stats(),
            injects
                .iter()
                .filter_map(materialise)
                .map(|b| Segment::parse(&b, None).map(|s| (s.ptype, s.seq, s.ack, s.mp.join, s.mp.key)))
                .collect::<Vec<_>>()
        );
        assert_delivers(&mut h);
    }
}
