//! Floods: Request floods at a server [`Endpoint`], floods of
//! out-of-window packets at a live subflow, MP_SEQ jumps at the reorderer
//! and forged joins from many remotes. State must stay within its
//! configured caps, replies must be rate-limited, and the genuine
//! connection must keep working.

use std::time::Duration;

use mpdccp_proto::conn::codec::{FeatureNum, KeyOffer, MpJoin, PacketType, Segment};
use mpdccp_proto::conn::seq::SEQ_MASK;
use mpdccp_proto::conn::SERVICE_CODE;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::reorder::ReorderConfig;
use mpdccp_proto::wire::option::kind;
use mpdccp_proto::{ConnectionConfig, EndpointConfig, PathId, PathState};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common;
use common::{open_two_paths, EpNet};

/// [`EpNet`] with this file's genuine client (default settings, seeds 5/6).
fn ep_net(config: EndpointConfig) -> EpNet {
    EpNet::new(ConnectionConfig::default(), config, (5, 6))
}

/// Sends `n` packets each way through `net`; true when all arrived.
fn delivers(net: &mut EpNet, n: u8) -> bool {
    let (c0, s0) = (net.client_delivered.len(), net.server_delivered.len());
    let h = net.server_handle();
    for k in 0..n {
        let now = net.now;
        net.client.send(now, &[k; 100]).expect("client send");
        net.ep.send(now, h, &[k; 101]).expect("server send");
        net.run_for(Duration::from_millis(2));
    }
    net.run_for(Duration::from_millis(300));
    net.server_delivered.len() - s0 == n as usize && net.client_delivered.len() - c0 == n as usize
}

/// An initial Request with MP_KEY, as a new client would send it.
fn mp_key_request(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut s = Segment::new(PacketType::Request, rng.gen::<u64>() & SEQ_MASK);
    s.service_code = SERVICE_CODE;
    s.src_port = rng.gen();
    s.dst_port = 4242;
    s.push_feat(kind::CHANGE_L, FeatureNum::MultipathCapable, Some(0));
    s.mp.key = Some(KeyOffer::plain(rng.gen(), rng.gen(), None));
    let mut b = vec![0u8; 2048];
    let un = std::net::IpAddr::from([0u8, 0, 0, 0]);
    let n = s.emit(&mut b, (un, un)).unwrap();
    b.truncate(n);
    b
}

const FLOOD: u64 = 100_000;

/// 100 000 MP_KEY Requests from distinct remotes within one second while a
/// genuine client is connected: at most `max_half_open` connections are
/// created, every refusal is counted, pending Resets stay capped, and the
/// genuine connection keeps delivering both ways.
#[test]
fn request_flood_keeps_half_open_state_bounded() {
    let cfg = EndpointConfig {
        max_half_open: 32,
        max_pending_resets: 16,
        ..Default::default()
    };
    let mut net = ep_net(cfg.clone());
    net.connect(2);
    assert!(net.client.is_established());
    let mut rng = ChaCha8Rng::seed_from_u64(0xF100D);
    for i in 0..FLOOD {
        let req = mp_key_request(&mut rng);
        net.attack(i, &req);
        net.now += Duration::from_micros(10);
        if i % 997 == 0 {
            net.pump();
            assert!(net.half_open() <= cfg.max_half_open, "at {i}");
            assert!(net.ep.connections().len() <= cfg.max_half_open + 1);
        }
    }
    net.pump();
    let s = net.ep.stats();
    assert_eq!(s.accepted, 1 + cfg.max_half_open as u64, "{s:?}");
    assert_eq!(s.refused_half_open, FLOOD - cfg.max_half_open as u64);
    assert_eq!(net.ep.connections().len(), 1 + cfg.max_half_open);
    // Resets (Too Busy) for the refused: never more than the cap waiting,
    // and at most `max_resets_per_sec` per second (no reflector).
    assert_eq!(
        s.resets_dropped + s.resets_rate_limited + net.to_attackers,
        FLOOD,
        "each refusal answered or counted as dropped (Responses included)"
    );
    assert!(s.resets_rate_limited > 0);
    assert!(delivers(&mut net, 50), "genuine connection unharmed");
}

/// After a Request flood filled the half-open slots, the half-open
/// connections must expire (RFC 4340 §8.1.3: a server in RESPOND times out,
/// at the latest after 4 MSL = 8 minutes) so that new genuine clients can
/// connect again; we wait 10 minutes.
#[test]
fn request_flood_does_not_lock_out_new_clients_forever() {
    let cfg = EndpointConfig {
        max_half_open: 32,
        ..Default::default()
    };
    let mut net = ep_net(cfg.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(0xF100E);
    for i in 0..1000 {
        let req = mp_key_request(&mut rng);
        net.attack(i, &req);
    }
    net.pump();
    assert_eq!(net.half_open(), cfg.max_half_open);
    // Ten minutes later a genuine client arrives.
    net.run_for(Duration::from_secs(600));
    net.connect(1);
    assert!(
        net.client.is_established(),
        "refused: {:?}, endpoint {:?}",
        net.client_events,
        net.ep.stats()
    );
}

/// Forged MP_JOINs carrying the server's real connection identifier (seen
/// on the path) from 2000 distinct remotes, never completing: the
/// connection's path table and the endpoint's routes must stay bounded,
/// and a genuine join must still succeed afterwards.
#[test]
fn join_flood_with_the_real_token_stays_bounded() {
    let mut net = ep_net(EndpointConfig::default());
    net.connect(1);
    let h = net.server_handle();
    let token = net.ep.connection(h).unwrap().local_ci();
    let max_paths = ConnectionConfig::default().mp.max_paths;
    let mut rng = ChaCha8Rng::seed_from_u64(0x10_1F);
    for i in 0..2000u64 {
        let mut s = Segment::new(PacketType::Request, rng.gen::<u64>() & SEQ_MASK);
        s.service_code = SERVICE_CODE;
        s.mp.join = Some(MpJoin {
            addr_id: rng.gen(),
            token,
            nonce: rng.gen(),
        });
        let mut b = vec![0u8; 2048];
        let un = std::net::IpAddr::from([0u8, 0, 0, 0]);
        let n = s.emit(&mut b, (un, un)).unwrap();
        net.attack(i, &b[..n]);
        net.now += Duration::from_millis(1);
    }
    net.run_for(Duration::from_secs(600));
    let c = net.ep.connection(h).unwrap();
    assert!(
        c.paths().len() <= 2 * max_paths,
        "{} subflows kept for forged joins",
        c.paths().len()
    );
    // A genuine join still gets through.
    net.add_path(1);
    net.run_for(Duration::from_millis(100));
    let open = net
        .client
        .paths()
        .iter()
        .filter(|p| p.state == PathState::Active)
        .count();
    assert_eq!(open, 2, "{:?}", net.client_events);
}

fn two_paths(server: ConnectionConfig) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        server,
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 21,
        ..Default::default()
    });
    h.record = true;
    open_two_paths(&mut h);
    assert!(h.server.is_established());
    h
}

/// Numbered payloads sent by `from`, one per millisecond; returns how many
/// of them the peer delivered.
fn deliver_count(h: &mut Harness, from: Side, n: u32, tag: u8) -> usize {
    let before = h.delivered(from.peer()).len();
    for k in 0..n {
        let mut p = vec![tag; 150];
        p[..4].copy_from_slice(&k.to_be_bytes());
        let now = h.now;
        h.conn(from).send(now, &p).unwrap();
        h.drive_for(Duration::from_millis(1));
    }
    h.drive_for(Duration::from_millis(500));
    h.delivered(from.peer())[before..]
        .iter()
        .filter(|(_, d)| d.len() == 150 && d[4] == tag)
        .count()
}

/// 100 000 forged Data packets with out-of-window sequence numbers over
/// two seconds on path 0: each counted, answered with at most one Sync per
/// 100 ms (RFC 4340 §7.5.4), the client ignores those Syncs (their ack is
/// not its own), nothing is delivered and no state grows.
#[test]
fn out_of_window_data_flood_gets_rate_limited_syncs() {
    let mut h = two_paths(ConnectionConfig::default());
    h.record = false;
    let mut rng = ChaCha8Rng::seed_from_u64(0xDA7A);
    let s0 = h.server.stats();
    let c0 = h.client.stats();
    let delivered0 = h.delivered(Side::Server).len();
    let gsr = {
        // The client's current sequence number on path 0.
        let w = h
            .wire
            .iter()
            .rev()
            .find(|w| w.from == Side::Client && w.path == PathId(0))
            .unwrap();
        inspect::seq(&w.bytes).unwrap()
    };
    let (c, s) = Harness::path_addrs(0);
    let t0 = h.now;
    let payload = [0x66u8; 200];
    for i in 0..FLOOD {
        let ptype = if i % 2 == 0 {
            PacketType::Data
        } else {
            PacketType::DataAck
        };
        let seq = gsr.wrapping_add(20_000 + rng.gen_range(0..(1u64 << 47) - 40_000)) & SEQ_MASK;
        let mut seg = Segment::new(ptype, seq);
        if ptype == PacketType::DataAck {
            seg.ack = Some(rng.gen::<u64>() & SEQ_MASK);
        }
        seg.mp.seq = Some(rng.gen::<u64>() & SEQ_MASK);
        seg.payload = &payload;
        seg.src_port = 4242;
        seg.dst_port = 4242;
        let mut b = vec![0u8; 2048];
        let n = seg.emit(&mut b, (c.ip(), s.ip())).unwrap();
        let now = h.now;
        h.server.handle_datagram_from(now, PathId(0), s, c, &b[..n]);
        if i % 1000 == 999 {
            h.drive_for(Duration::from_millis(20));
            assert!(h.server.send_queue_len() == 0);
            assert!(h.server.paths().len() == 2);
            assert!(h.server.reorder_stats().held_pkts == 0);
        }
    }
    let elapsed_ms = (h.now - t0).as_millis() as u64;
    assert!(elapsed_ms >= 2000);
    let s = h.server.stats();
    assert_eq!(s.rx.rx_seq_invalid - s0.rx.rx_seq_invalid, FLOOD);
    // Syncs in reply: not the idle-path RTT probes.
    let syncs = (s.traffic.syncs_sent - s0.traffic.syncs_sent)
        - (s.traffic.rtt_probes_sent - s0.traffic.rtt_probes_sent);
    assert!(syncs >= 1, "the flood is answered");
    assert!(
        syncs <= elapsed_ms / 100 + 1,
        "{syncs} Syncs in {elapsed_ms} ms"
    );
    // The client answers only the server's own probes (the RTT probes of
    // its idle path), never the Syncs the flood drew.
    let c = h.client.stats();
    assert_eq!(
        c.traffic.syncacks_sent - c0.traffic.syncacks_sent,
        s.traffic.rtt_probes_sent - s0.traffic.rtt_probes_sent,
        "no SyncAck ping-pong"
    );
    assert_eq!(
        h.delivered(Side::Server).len(),
        delivered0,
        "nothing delivered"
    );
    assert_eq!(deliver_count(&mut h, Side::Client, 100, 0xB1), 100);
    assert_eq!(deliver_count(&mut h, Side::Server, 100, 0xB2), 100);
}

/// A flood of out-of-window Syncs is never answered (RFC 4340 §7.5.4: no
/// Sync in reply to an invalid Sync), so it cannot start a Sync storm.
#[test]
fn out_of_window_sync_flood_is_not_answered() {
    let mut h = two_paths(ConnectionConfig::default());
    let mut rng = ChaCha8Rng::seed_from_u64(0x5C);
    let s0 = h.server.stats();
    let (c, s) = Harness::path_addrs(1);
    for i in 0..20_000u32 {
        let ptype = if i % 2 == 0 {
            PacketType::Sync
        } else {
            PacketType::SyncAck
        };
        let mut seg = Segment::new(ptype, rng.gen::<u64>() & SEQ_MASK);
        seg.ack = Some(rng.gen::<u64>() & SEQ_MASK);
        let mut b = vec![0u8; 2048];
        let n = seg.emit(&mut b, (c.ip(), s.ip())).unwrap();
        let now = h.now;
        h.server.handle_datagram_from(now, PathId(1), s, c, &b[..n]);
        if i % 100 == 99 {
            h.drive_for(Duration::from_millis(5));
        }
    }
    let st = h.server.stats();
    assert_eq!(st.rx.rx_seq_invalid - s0.rx.rx_seq_invalid, 20_000);
    // Only the idle-path RTT probes, and the answers to the
    // client's: nothing in reply to the flood.
    assert_eq!(
        st.traffic.syncs_sent - s0.traffic.syncs_sent,
        st.traffic.rtt_probes_sent - s0.traffic.rtt_probes_sent
    );
    let c = h.client.stats();
    assert!(st.traffic.syncacks_sent - s0.traffic.syncacks_sent <= c.traffic.rtt_probes_sent);
    assert_eq!(deliver_count(&mut h, Side::Client, 50, 0xB3), 50);
}

const CAP_PKTS: usize = 64;
const CAP_BYTES: usize = 64 * 1024;

/// A session whose server uses reorderer `name` (caps 64 packets / 64 KiB),
/// after 3000 client packets of which an on-path attacker rewrote MP_SEQ
/// of about half on path 0 to jumps of up to 2^47. Asserts the caps after
/// every packet; returns the session with the tampering stopped.
fn after_mp_seq_jumps(name: &str) -> Harness {
    let server = ConnectionConfig {
        reorder: ReorderConfig {
            kind: name.parse().unwrap(),
            timeout: Duration::from_millis(200),
            max_hold_pkts: CAP_PKTS,
            max_hold_bytes: CAP_BYTES,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = two_paths(server);
    h.record = false;
    let mut rng = ChaCha8Rng::seed_from_u64(0x5E0);
    h.tamper = Some(Box::new(move |side, path, bytes| {
        if side == Side::Client && path == PathId(0) {
            if let Some(r) = inspect::find_mp_suboption(bytes, 4) {
                if rng.gen_bool(0.5) {
                    let jump = rng.gen_range(1..(1u64 << 47));
                    let old = bytes[r.clone()]
                        .iter()
                        .fold(0u64, |a, b| (a << 8) | u64::from(*b));
                    let new = (old + jump) & SEQ_MASK;
                    for (i, b) in bytes[r].iter_mut().enumerate() {
                        *b = (new >> (40 - 8 * i)) as u8;
                    }
                    let (c, s) = Harness::path_addrs(0);
                    inspect::fix_checksum(bytes, c.ip(), s.ip());
                }
            }
        }
        true
    }));
    let mut max_held = 0;
    for k in 0..3000u32 {
        let now = h.now;
        let mut p = vec![0xC3u8; 900];
        p[..4].copy_from_slice(&k.to_be_bytes());
        h.client.send(now, &p).unwrap();
        h.drive_for(Duration::from_micros(500));
        let r = h.server.reorder_stats();
        assert!(r.held_pkts as usize <= CAP_PKTS, "{r:?}");
        assert!(r.held_bytes as usize <= CAP_BYTES, "{r:?}");
        max_held = max_held.max(r.held_pkts);
    }
    if name != "passive" {
        assert!(max_held > 0, "the jumps did open gaps");
    }
    h.tamper = None;
    h.drive_for(Duration::from_secs(1));
    assert_eq!(h.server.reorder_stats().held_pkts, 0, "gaps given up");
    assert!(h.server.is_established());
    h
}

/// Huge MP_SEQ jumps never make the active reorderer hold more than its
/// packet and byte caps.
#[test]
fn huge_mp_seq_jumps_keep_the_reorder_buffer_within_its_cap() {
    let h = after_mp_seq_jumps("active-fixed");
    let r = h.server.reorder_stats();
    assert!(r.overflow_releases > 0 || r.gaps_timed_out > 0, "{r:?}");
}

/// Client packets over two paths where an on-path attacker added 2^40 to
/// the MP_SEQ of exactly one packet (checksum fixed); returns how many of
/// the 200 packets sent afterwards the server delivered.
fn delivered_after_one_jump(reorder: &str) -> usize {
    let server = ConnectionConfig {
        reorder: ReorderConfig {
            kind: reorder.parse().unwrap(),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = two_paths(server);
    h.record = false;
    let done = std::rc::Rc::new(std::cell::Cell::new(false));
    let flag = done.clone();
    h.tamper = Some(Box::new(move |side, path, bytes| {
        if side == Side::Client && path == PathId(0) && !flag.get() {
            if let Some(r) = inspect::find_mp_suboption(bytes, 4) {
                flag.set(true);
                bytes[r.start] ^= 0x01; // + 2^40
                let (c, s) = Harness::path_addrs(0);
                inspect::fix_checksum(bytes, c.ip(), s.ip());
            }
        }
        true
    }));
    deliver_count(&mut h, Side::Client, 20, 0xB5);
    assert!(done.get(), "the jump was applied");
    h.tamper = None;
    deliver_count(&mut h, Side::Client, 200, 0xB4)
}

/// One corrupted MP_SEQ must not blackhole the connection: the packets
/// sent after it are delivered (default passive reordering).
#[test]
fn one_mp_seq_jump_does_not_stop_delivery_with_passive_reordering() {
    assert_eq!(delivered_after_one_jump("passive"), 200);
}

/// The same with the active-fixed reorderer.
#[test]
fn one_mp_seq_jump_does_not_stop_delivery_with_active_reordering() {
    assert_eq!(delivered_after_one_jump("active-fixed"), 200);
}

/// The same with per-flow reordering (its gaps are ranges: a jump is one
/// range, and the flows behind it are not blackholed).
#[test]
fn one_mp_seq_jump_does_not_stop_delivery_with_per_flow_reordering() {
    assert_eq!(delivered_after_one_jump("per-flow"), 200);
}

/// Repeated huge jumps keep the per-flow reorderer within its caps too.
#[test]
fn huge_mp_seq_jumps_keep_the_per_flow_buffer_within_its_cap() {
    let h = after_mp_seq_jumps("per-flow");
    let r = h.server.reorder_stats();
    assert!(r.received > 0, "{r:?}");
}
