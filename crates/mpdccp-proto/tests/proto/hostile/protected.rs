//! Protected mode against an on-path attacker (docs/SECURITY.md §5): one
//! forged packet of each type per path, with the genuine ports and the
//! current sequence numbers (an attacker that sniffs the paths has them),
//! in both directions. Every one fails to open, is counted, and has no
//! other effect: both paths stay Active at both ends and every packet sent
//! afterwards arrives once. The same Reset without protection closes the
//! paths (the control that shows the attack is real).

use crate::common;

use std::time::Duration;

use common::{
    assert_delivers, emit, inject, last_genuine, open_paths, open_two_paths, Delivery, TRAFFIC,
};
use mpdccp_proto::conn::codec::{MpRemoveAddr, PacketType, ResetCode, Segment};
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};

const SESSION: u64 = 11;

fn session(protected: bool) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 9,
        ..Default::default()
    });
    h.record = true;
    if protected {
        h.enable_payload_protection(SESSION);
    }
    open_two_paths(&mut h);
    assert!(h.client.is_established() && h.server.is_established());
    h
}

/// The attacks: each builds the forged datagrams for one path from the
/// sender's last numbers (`seq` the last sequence number used).
type Forge = fn(u64, u64, usize, Side) -> Vec<Vec<u8>>;

fn seg(t: PacketType, seq: u64, ack: u64) -> Segment<'static> {
    let mut s = Segment::new(t, seq);
    s.ack = Some(ack);
    s
}

/// A pure Ack with a Mandatory option in front of a reserved one (RFC
/// 4340 §5.8.2: the receiver resets the subflow with Mandatory Error).
fn invalid_option_ack(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    let mut b = emit(&seg(PacketType::Ack, seq + 1, ack), path, from);
    let hl = usize::from(b[4]) * 4;
    b.splice(hl..hl, [1u8, 100, 2, 0]);
    b[4] += 1;
    let (src, dst) = common::addrs(path, from);
    inspect::fix_checksum(&mut b, src.ip(), dst.ip());
    vec![b]
}

fn reset(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    let mut s = seg(PacketType::Reset, seq + 1, ack);
    s.reset_code = ResetCode::Closed;
    vec![emit(&s, path, from)]
}

fn fast_close(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    let mut s = seg(PacketType::Reset, seq + 1, ack);
    s.reset_code = ResetCode::MpFastClose;
    s.mp.fast_close = Some([0x42; 8]);
    vec![emit(&s, path, from)]
}

fn close(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    vec![emit(&seg(PacketType::Close, seq + 1, ack), path, from)]
}

fn close_req(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    vec![emit(&seg(PacketType::CloseReq, seq + 1, ack), path, from)]
}

fn prio_zero(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    let mut s = seg(PacketType::Ack, seq + 1, ack);
    s.mp.prio = Some(0);
    vec![emit(&s, path, from)]
}

fn removeaddr(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    let mut s = seg(PacketType::Ack, seq + 1, ack);
    s.mp.removeaddr = Some(MpRemoveAddr {
        addr_id: 0,
        nonce: 7,
    });
    s.mp.removeaddr_hmac = Some([0x13; 20]);
    vec![emit(&s, path, from)]
}

/// Twenty Acks taking the sequence numbers the sender uses next.
fn next_numbers(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    (1..=20)
        .map(|k| emit(&seg(PacketType::Ack, seq + k, ack), path, from))
        .collect()
}

fn sync_far_ahead(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    vec![emit(&seg(PacketType::Sync, seq + 50_000, ack), path, from)]
}

fn syncack(seq: u64, ack: u64, path: usize, from: Side) -> Vec<Vec<u8>> {
    vec![emit(&seg(PacketType::SyncAck, seq + 1, ack), path, from)]
}

const ATTACKS: [(&str, Forge, Side); 13] = [
    ("invalid-option Ack", invalid_option_ack, Side::Server),
    ("Reset", reset, Side::Server),
    ("Close", close, Side::Server),
    ("MP_FAST_CLOSE", fast_close, Side::Server),
    ("MP_PRIO 0", prio_zero, Side::Server),
    ("Acks taking the next numbers", next_numbers, Side::Server),
    ("Sync far ahead", sync_far_ahead, Side::Server),
    ("REMOVEADDR", removeaddr, Side::Client),
    ("SyncAck", syncack, Side::Client),
    ("CloseReq", close_req, Side::Client),
    ("Reset", reset, Side::Client),
    ("MP_PRIO 0", prio_zero, Side::Client),
    ("invalid-option Ack", invalid_option_ack, Side::Client),
];

/// Forges `attack` towards `to` on both paths, then lets 300 ms pass.
fn strike(h: &mut Harness, forge: Forge, to: Side) -> u64 {
    let mut sent = 0;
    for path in 0..2 {
        let (seq, ack) = last_genuine(h, to.peer(), path);
        let ack = ack.unwrap_or(0);
        for d in forge(seq, ack, path, to.peer()) {
            inject(h, to, path, &d);
            sent += 1;
        }
    }
    h.drive_for(Duration::from_millis(300));
    sent
}

#[test]
fn every_forged_packet_type_is_dropped_counted_and_changes_nothing() {
    for (name, forge, to) in ATTACKS {
        let mut h = session(true);
        assert_delivers(&mut h, TRAFFIC);
        let failed = h.conn_ref(to).stats().rx.rx_protect_failed;
        let replayed = h.conn_ref(to).stats().rx.rx_replayed;
        let sent = strike(&mut h, forge, to);
        let s = h.conn_ref(to).stats();
        assert_eq!(
            s.rx.rx_protect_failed + s.rx.rx_replayed - failed - replayed,
            sent,
            "{name} → {to:?}: every forged packet counted"
        );
        for side in [Side::Client, Side::Server] {
            assert!(
                !h.conn_ref(side).is_closed(),
                "{name} → {to:?}: {side:?} open"
            );
            assert_eq!(open_paths(&h, side), 2, "{name} → {to:?}: {side:?} paths");
            let prio: Vec<u8> = h
                .conn_ref(side)
                .paths()
                .iter()
                .map(|p| p.priority)
                .collect();
            assert!(prio.iter().all(|&p| p > 0), "{name} → {to:?}: {prio:?}");
        }
        assert_delivers(
            &mut h,
            Delivery {
                tag: 0x77,
                ..TRAFFIC
            },
        );
    }
}

/// The control: without protection the same Reset on both paths closes
/// them, so the test above measures protection, not a harmless forgery.
#[test]
fn without_protection_the_forged_reset_closes_the_paths() {
    let mut h = session(false);
    assert_delivers(&mut h, TRAFFIC);
    strike(&mut h, reset, Side::Server);
    assert!(open_paths(&h, Side::Server) < 2);
}

/// Everything a protected subflow sends after its handshake is sealed:
/// pure Acks and Syncs carry the 24-byte frame too, and only the Request
/// and Response go without one.
#[test]
fn every_packet_after_the_handshake_is_sealed() {
    let mut h = session(true);
    assert_delivers(&mut h, TRAFFIC);
    let mut kinds = std::collections::BTreeMap::new();
    for w in h.wire.iter().filter(|w| !w.dropped) {
        let s = Segment::parse(&w.bytes, None).unwrap();
        let sealed = s.payload.len() >= mpdccp_proto::conn::PROTECTION_OVERHEAD;
        kinds
            .entry(format!("{:?}", s.ptype))
            .or_insert_with(Vec::new)
            .push(sealed);
    }
    for (k, v) in &kinds {
        match k.as_str() {
            "Request" | "Response" => assert!(v.iter().all(|s| !s), "{k}"),
            _ => assert!(v.iter().all(|s| *s), "{k}: {v:?}"),
        }
    }
    assert!(
        kinds.contains_key("Ack") && kinds.contains_key("DataAck"),
        "{kinds:?}"
    );
}

/// The control for the invalid-option Ack: without protection it resets
/// the path it arrives on (RFC 4340 §5.8.2, Mandatory before an option
/// the receiver does not know).
#[test]
fn without_protection_the_invalid_option_ack_resets_the_paths() {
    let mut h = session(false);
    assert_delivers(&mut h, TRAFFIC);
    let before = h.server.stats().traffic.resets_sent;
    strike(&mut h, invalid_option_ack, Side::Server);
    assert!(
        h.server.stats().traffic.resets_sent >= before + 2,
        "{:?}",
        h.server.stats()
    );
}
