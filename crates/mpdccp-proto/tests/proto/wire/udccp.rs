//! U-DCCP (draft-amend-tsvwg-dccp-udp-header-conversion-01) under a real
//! session: every datagram two `Connection`s exchange over two paths —
//! handshakes (MP_KEY, MP_JOIN + MP_HMAC), data both ways (MP_SEQ, MP_RTT,
//! Ack Vectors), MP_ADDADDR / MP_CONFIRM, MP_PRIO and the close (MP_CLOSE)
//! — is converted to U-DCCP on the sender's side and restored on the
//! receiver's. Each restored packet must equal the original byte for byte
//! (our codec never sets CsCov, so nothing is lost), and the session must
//! do everything it does natively. A NAT on path 1 rewrites the client's
//! source port in the UDP-like header (and fixes the UDP checksum, as
//! RFC 4787 NATs do): the restored DCCP packet carries the new port and a
//! checksum that verifies, and the connection does not mind.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use crate::common;
use mpdccp_proto::harness::{Harness, HarnessConfig, Side};
use mpdccp_proto::wire::checksum;
use mpdccp_proto::wire::mp::subtype;
use mpdccp_proto::wire::udp_encap::IPPROTO_UDP;
use mpdccp_proto::wire::{udccp, DccpOption, DccpRepr, Packet, PacketType};
use mpdccp_proto::{Event, PathId};

const NAT_PORT: u16 = 50_123;

#[derive(Default)]
struct Seen {
    packets: u64,
    types: BTreeSet<u8>,
    mp_subtypes: BTreeSet<u8>,
    nat_rewrites: u64,
}

fn record(seen: &mut Seen, dccp: &[u8]) {
    seen.packets += 1;
    let (repr, _) = DccpRepr::parse(dccp, None).expect("our codec's output parses");
    seen.types.insert(repr.packet_type() as u8);
    for o in &repr.options {
        if let DccpOption::Multipath(m) = o {
            seen.mp_subtypes.insert(m.subtype());
        }
    }
}

#[test]
fn a_whole_two_path_session_round_trips_through_udccp() {
    let mut h = Harness::new(HarnessConfig {
        paths: common::links(&[10, 20]),
        ..Default::default()
    });
    let seen = Rc::new(RefCell::new(Seen::default()));
    let s2 = Rc::clone(&seen);
    h.tamper = Some(Box::new(move |side, path, bytes| {
        let (c, s) = Harness::path_addrs(path.0 as usize);
        let (src, dst) = if side == Side::Client { (c, s) } else { (s, c) };
        let addrs = (src.ip(), dst.ip());
        let original = bytes.clone();
        let mut seen = s2.borrow_mut();
        record(&mut seen, &original);
        // Sender (§3.7).
        udccp::encode_in_place(bytes, Some(addrs)).expect("every packet converts");
        assert_eq!(bytes.len(), original.len(), "U-DCCP adds no byte");
        // NAT on path 1, client → server: a new source port, the UDP
        // checksum updated over the whole datagram.
        let nat = side == Side::Client && path == PathId(1);
        if nat {
            bytes[0..2].copy_from_slice(&NAT_PORT.to_be_bytes());
            bytes[6..8].fill(0);
            let c = checksum::compute(addrs, bytes, bytes.len(), IPPROTO_UDP);
            bytes[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
            seen.nat_rewrites += 1;
        }
        // Receiver (§3.8).
        let mut back = vec![0u8; bytes.len()];
        let n = udccp::decode(bytes, &mut back, Some(addrs)).expect("restores");
        back.truncate(n);
        let p = Packet::new_checked(&back[..]).unwrap();
        p.verify_checksum(addrs).expect("restored DCCP checksum");
        if nat {
            assert_eq!(p.src_port(), NAT_PORT);
            assert_eq!(back[2..4], original[2..4]);
            assert_eq!(back[4..6], original[4..6]);
            assert_eq!(back[8..], original[8..]);
        } else {
            assert_eq!(back, original, "byte-identical after the round trip");
        }
        *bytes = back;
        true
    }));

    h.open_paths(2, Duration::from_millis(300));
    assert!(h.client.is_established() && h.server.is_established());
    assert_eq!(
        h.client.paths().len(),
        2,
        "MP_JOIN over U-DCCP, through the NAT"
    );
    // Address advertisement (MP_ADDADDR + HMAC, MP_CONFIRM) and MP_PRIO.
    let now = h.now;
    h.server
        .advertise_address(now, "10.0.9.2:4242".parse().unwrap())
        .expect("advertise");
    h.client.set_priority(now, PathId(1), 2);
    // Data both ways.
    for k in 0..200u32 {
        let now = h.now;
        let mut p = vec![0u8; 600];
        p[..4].copy_from_slice(&k.to_be_bytes());
        let _ = h.client.send(now, &p);
        let _ = h.server.send(now, &p);
        h.drive_for(Duration::from_millis(2));
    }
    h.drive_for(Duration::from_millis(500));
    assert_eq!(h.delivered(Side::Server).len(), 200);
    assert_eq!(h.delivered(Side::Client).len(), 200);
    let now = h.now;
    h.client.close(now);
    h.drive(Duration::from_secs(5));
    assert!(h.client.is_closed(), "clean close over U-DCCP");
    assert!(h
        .server_events
        .iter()
        .any(|e| matches!(e, Event::Closed { .. })));

    let seen = seen.borrow();
    assert!(seen.packets > 400, "{}", seen.packets);
    assert!(seen.nat_rewrites > 10, "{}", seen.nat_rewrites);
    for t in [
        PacketType::Request,
        PacketType::Response,
        PacketType::Ack,
        PacketType::DataAck,
        PacketType::Close,
        PacketType::Reset,
    ] {
        assert!(seen.types.contains(&(t as u8)), "no {t:?} converted");
    }
    for s in [
        subtype::KEY,
        subtype::JOIN,
        subtype::HMAC,
        subtype::SEQ,
        subtype::RTT,
        subtype::ADDADDR,
        subtype::CONFIRM,
        subtype::PRIO,
        subtype::CLOSE,
    ] {
        assert!(
            seen.mp_subtypes.contains(&s),
            "no MP sub-option {s} carried: {:?}",
            seen.mp_subtypes
        );
    }
    let cs = h.client.stats();
    let ss = h.server.stats();
    assert_eq!(cs.rx.rx_bad_checksum + ss.rx.rx_bad_checksum, 0);
}
