//! Connection-level RFC 9897 findings (docs/rfc9897/FINDINGS.md F3–F9,
//! F12), each checked on the bytes a live session puts on the wire or on
//! what a connection does with a packet built here.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{emit, inject, last_genuine, mp_options, open_paths, two_paths};
use mpdccp_proto::conn::codec::{FeatOpt, MpAddAddr, ResetCode, Segment};
use mpdccp_proto::conn::keys::{self, ConnKeys};
use mpdccp_proto::conn::{Event, PacketType};
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::mp::subtype as mp;
use mpdccp_proto::wire::option::kind as opt;
use mpdccp_proto::wire::{DccpOption, DccpRepr, FeatureNum, FeatureValue, MpOption};
use mpdccp_proto::PathId;

/// The plain key `side` sent in its first MP_KEY.
fn key_of(h: &Harness, side: Side) -> [u8; 8] {
    h.wire
        .iter()
        .filter(|w| w.from == side)
        .find_map(|w| {
            mp_options(&w.bytes).into_iter().find_map(|o| match o {
                MpOption::Key { keys, .. } => keys[0].data.as_slice().try_into().ok(),
                _ => None,
            })
        })
        .expect("MP_KEY on the wire")
}

/// F12, §3.2.11: "When a DCCP-CloseReq is used, the following DCCP-Close
/// MUST also carry the MP_CLOSE" — the client's Close on both subflows
/// answers the server's CloseReq with MP_CLOSE and the server's key.
#[test]
fn f12_the_close_answering_a_closereq_carries_mp_close() {
    let mut h = two_paths(11);
    let server_key = key_of(&h, Side::Server);
    let mark = h.wire.len();
    let now = h.now;
    h.server.close(now);
    h.drive_for(Duration::from_secs(3));
    let mut closes = [0u32; 2];
    for w in h.wire[mark..].iter().filter(|w| w.from == Side::Client) {
        if inspect::packet_type(&w.bytes) != Some(PacketType::Close) {
            continue;
        }
        let r = inspect::find_mp_suboption(&w.bytes, mp::CLOSE).expect("MP_CLOSE in the Close");
        assert_eq!(w.bytes[r], server_key);
        closes[w.path.0 as usize] += 1;
    }
    assert!(
        closes.iter().all(|&n| n >= 1),
        "a Close per subflow: {closes:?}"
    );
}

/// F9, §3.2.3: "Host B will send a DCCP-Reset packet response on all
/// subflows to Host A with Reset Code 13" — without MP_FAST_CLOSE of its
/// own (the connection is gone; the peer's key ended it).
#[test]
fn f9_a_fast_close_is_answered_with_reset_13_on_every_subflow() {
    let mut h = two_paths(12);
    let mark = h.wire.len();
    let now = h.now;
    h.client.fast_close(now);
    h.drive_for(Duration::from_secs(1));
    assert!(h.server.is_closed(), "the fast close ends the server side");
    let mut answered = [0u32; 2];
    for w in h.wire[mark..].iter().filter(|w| w.from == Side::Server) {
        let s = Segment::parse(&w.bytes, None).expect("our own packet");
        assert_eq!(s.ptype, PacketType::Reset, "nothing but the Reset");
        assert_eq!(s.reset_code, ResetCode::MpFastClose);
        assert_eq!(s.mp.fast_close, None, "no MP_FAST_CLOSE in the answer");
        answered[w.path.0 as usize] += 1;
    }
    assert_eq!(answered, [1, 1], "one Reset (code 13) per subflow");
}

/// The keys as the client holds them (it signs with `d_key_local`).
fn client_keys(h: &Harness) -> ConnKeys {
    ConnKeys::Plain {
        local: key_of(h, Side::Client),
        remote: key_of(h, Side::Server),
    }
}

/// MP_ADDADDR signed as the client signs (HMAC over the RFC 9897 §3.2.6
/// message, built by the wire layer).
fn signed_addaddr(k: &ConnKeys, id: u8, nonce: u32, addr: SocketAddr) -> (MpAddAddr, [u8; 20]) {
    let a = MpAddAddr {
        addr_id: id,
        nonce,
        ip: addr.ip(),
        port: (addr.port() != 0).then_some(addr.port()),
    };
    let msg = MpOption::AddAddr {
        addr_id: id,
        nonce: Some(nonce),
        addr: addr.ip(),
        port: a.port,
    }
    .hmac_message()
    .expect("ADDADDR has a message");
    (a, keys::hmac20(&k.d_key_local(), &[&msg]))
}

fn address_events(h: &Harness, side: Side) -> Vec<(u8, SocketAddr)> {
    h.events(side)
        .iter()
        .filter_map(|e| match e {
            Event::AddressAdded { id, addr } => Some((*id, *addr)),
            _ => None,
        })
        .collect()
}

/// F5, §3.2.6 / §3.2.8: "If the port number is not present … the HMAC
/// message will include 2 bytes of value zero" — the MP_HMAC of a
/// port-less MP_ADDADDR equals HMAC(d-keyA, ID‖Nonce‖Address‖0x0000),
/// and the peer accepts it.
#[test]
fn f5_a_portless_addaddr_is_signed_with_two_zero_port_bytes() {
    let mut h = two_paths(13);
    let k = client_keys(&h);
    let mark = h.wire.len();
    let now = h.now;
    let addr: SocketAddr = "192.0.2.20:0".parse().unwrap();
    let id = h.client.advertise_address(now, addr).unwrap();
    h.drive_for(Duration::from_millis(300));
    let sent = h.wire[mark..]
        .iter()
        .filter(|w| w.from == Side::Client)
        .map(|w| mp_options(&w.bytes))
        .find(|o| o.iter().any(|o| matches!(o, MpOption::AddAddr { .. })))
        .expect("MP_ADDADDR sent");
    let (MpOption::AddAddr { nonce, port, .. }, Some(MpOption::Hmac(tag))) = (
        sent.iter()
            .find(|o| matches!(o, MpOption::AddAddr { .. }))
            .unwrap(),
        sent.iter().find(|o| matches!(o, MpOption::Hmac(_))),
    ) else {
        panic!("MP_ADDADDR with MP_HMAC: {sent:?}")
    };
    assert_eq!(*port, None, "no port on the wire");
    let (_, want) = signed_addaddr(&k, id, nonce.unwrap(), addr);
    assert_eq!(*tag, want);
    assert_eq!(address_events(&h, Side::Server), vec![(id, addr)]);
}

/// F7, §3.2.8: "The advertisement of broadcast or multicast IP addresses
/// MUST be ignored by the recipient" — even with a valid MP_HMAC.
#[test]
fn f7_broadcast_and_multicast_adverts_are_ignored() {
    let mut h = two_paths(14);
    for bad in ["224.1.2.3:5000", "255.255.255.255:5000", "[ff02::1]:5000"] {
        let now = h.now;
        h.client
            .advertise_address(now, bad.parse().unwrap())
            .unwrap();
        h.drive_for(Duration::from_millis(200));
    }
    let good: SocketAddr = "192.0.2.30:5000".parse().unwrap();
    let now = h.now;
    let id = h.client.advertise_address(now, good).unwrap();
    h.drive_for(Duration::from_millis(300));
    assert_eq!(h.server.remote_addresses(), vec![(id, good)]);
    assert_eq!(address_events(&h, Side::Server), vec![(id, good)]);
    assert!(h.server.stats().paths.addaddr_ignored >= 3);
}

/// F8, §3.2.8: "The receiver MUST silently ignore the MP_ADDADDR if the IP
/// Address is not the same as that previously assigned to this Address
/// ID"; the same IP with another port updates the port.
#[test]
fn f8_an_address_id_keeps_its_ip_but_may_change_its_port() {
    let mut h = two_paths(15);
    let k = client_keys(&h);
    let first: SocketAddr = "192.0.2.40:7000".parse().unwrap();
    let now = h.now;
    let id = h.client.advertise_address(now, first).unwrap();
    h.drive_for(Duration::from_millis(300));
    assert_eq!(h.server.remote_addresses(), vec![(id, first)]);
    // The same id for another IP (validly signed): ignored, counted.
    let other = addaddr(id, 0x5151, "198.51.100.7:7000");
    let tag = MpOption::Hmac(client_tag(&k, &other));
    let pkt = client_ack_with(&h, 0, 1, &[other, tag]);
    let ignored = h.server.stats().paths.addaddr_ignored;
    inject(&mut h, Side::Server, 0, &pkt);
    h.drive_for(Duration::from_millis(50));
    assert_eq!(h.server.remote_addresses(), vec![(id, first)]);
    assert_eq!(h.server.stats().paths.addaddr_ignored, ignored + 1);
    // The same IP with a new port: allowed, the port is updated.
    let moved: SocketAddr = "192.0.2.40:7001".parse().unwrap();
    let again = addaddr(id, 0x5252, "192.0.2.40:7001");
    let tag = MpOption::Hmac(client_tag(&k, &again));
    let pkt = client_ack_with(&h, 0, 2, &[again, tag]);
    inject(&mut h, Side::Server, 0, &pkt);
    h.drive_for(Duration::from_millis(50));
    assert_eq!(h.server.remote_addresses(), vec![(id, moved)]);
    assert_eq!(address_events(&h, Side::Server).last(), Some(&(id, moved)));
}

/// A pure Ack from the client on `path`, `k` after its last packet there,
/// carrying the MP options `opts` in this order (bytes by the wire layer,
/// not the connection's codec).
fn client_ack_with(h: &Harness, path: usize, k: u64, opts: &[MpOption]) -> Vec<u8> {
    let last = |from: Side| last_genuine(h, from, path).0;
    let mut s = Segment::new(PacketType::Ack, last(Side::Client) + k);
    s.ack = Some(last(Side::Server));
    let mut b = emit(&s, path, Side::Client);
    let mut area = Vec::new();
    for o in opts {
        let mut buf = [0u8; 256];
        let n = DccpOption::Multipath(o.clone()).emit(&mut buf).unwrap();
        area.extend_from_slice(&buf[..n]);
    }
    area.resize(area.len().div_ceil(4) * 4, 0);
    let hl = b[4] as usize * 4;
    b[4] += (area.len() / 4) as u8;
    b.splice(hl..hl, area);
    let (src, dst) = common::addrs(path, Side::Client);
    inspect::fix_checksum(&mut b, src.ip(), dst.ip());
    b
}

fn priority_events(h: &Harness, side: Side, path: PathId) -> Vec<u8> {
    h.events(side)
        .iter()
        .filter_map(|e| match e {
            Event::PriorityChanged { path: p, priority } if *p == path => Some(*priority),
            _ => None,
        })
        .collect()
}

/// F3, §3.2.1: the options MP_CONFIRM confirms (MP_ADDADDR,
/// MP_REMOVEADDR, MP_PRIO) "MUST be sent in a DCCP datagram with MP_SEQ",
/// also on a pure Ack; the receiver treats an option with a lower MP_SEQ
/// than one before it in the same dataset (here MP_PRIO on one subflow)
/// as outdated.
#[test]
fn f3_confirmable_options_travel_with_mp_seq_and_outdated_ones_are_not_applied() {
    let mut h = two_paths(16);
    let mark = h.wire.len();
    let now = h.now;
    let addr: SocketAddr = "192.0.2.50:6000".parse().unwrap();
    let id = h.client.advertise_address(now, addr).unwrap();
    h.drive_for(Duration::from_millis(300));
    let now = h.now;
    h.client.withdraw_address(now, id).unwrap();
    h.client.set_priority(now, PathId(1), 3);
    h.drive_for(Duration::from_millis(300));
    let mut seen = [0u32; 3];
    for w in h.wire[mark..].iter().filter(|w| w.from == Side::Client) {
        let opts = mp_options(&w.bytes);
        let kinds: Vec<usize> = opts
            .iter()
            .filter_map(|o| match o {
                MpOption::AddAddr { .. } => Some(0),
                MpOption::RemoveAddr { .. } => Some(1),
                MpOption::Prio(_) => Some(2),
                _ => None,
            })
            .collect();
        if kinds.is_empty() {
            continue;
        }
        let seqs = opts
            .iter()
            .filter(|o| matches!(o, MpOption::Seq(_)))
            .count();
        assert_eq!(seqs, 1, "one MP_SEQ with {opts:?}");
        for k in kinds {
            seen[k] += 1;
        }
    }
    assert!(seen.iter().all(|&n| n >= 1), "each option sent: {seen:?}");
    // Receiver: MP_PRIO 5 numbered 1005, then a late MP_PRIO 1 numbered
    // 1000 on the same subflow: the late one is outdated.
    let newer = client_ack_with(&h, 0, 1, &[MpOption::Seq(1005), MpOption::Prio(5)]);
    let older = client_ack_with(&h, 0, 2, &[MpOption::Seq(1000), MpOption::Prio(1)]);
    inject(&mut h, Side::Server, 0, &newer);
    inject(&mut h, Side::Server, 0, &older);
    h.drive_for(Duration::from_millis(50));
    assert_eq!(priority_events(&h, Side::Server, PathId(0)), vec![5]);
}

/// MP_HMAC as the client computes it for `o` (message by the wire layer).
fn client_tag(k: &ConnKeys, o: &MpOption) -> [u8; 20] {
    keys::hmac20(&k.d_key_local(), &[&o.hmac_message().expect("protected")])
}

fn addaddr(id: u8, nonce: u32, addr: &str) -> MpOption {
    let a: SocketAddr = addr.parse().unwrap();
    MpOption::AddAddr {
        addr_id: id,
        nonce: Some(nonce),
        addr: a.ip(),
        port: Some(a.port()),
    }
}

/// F4, §3.2.1: each confirmation is "the associated MP_SEQ received"
/// followed by the option, "with the most recent suboption received
/// listed first".
#[test]
fn f4_mp_confirm_echoes_mp_seq_most_recent_first() {
    let mut h = two_paths(17);
    let k = client_keys(&h);
    let first = addaddr(60, 0x6060, "192.0.2.60:6060");
    let second = addaddr(61, 0x6161, "192.0.2.61:6061");
    let pkt = |h: &Harness, n: u64, seq: u64, o: &MpOption| {
        let tag = client_tag(&k, o);
        client_ack_with(
            h,
            0,
            n,
            &[MpOption::Seq(seq), o.clone(), MpOption::Hmac(tag)],
        )
    };
    let (a, b) = (pkt(&h, 1, 2000, &first), pkt(&h, 2, 2001, &second));
    let mark = h.wire.len();
    inject(&mut h, Side::Server, 0, &a);
    inject(&mut h, Side::Server, 0, &b);
    h.drive_for(Duration::from_millis(50));
    assert_eq!(h.server.remote_addresses().len(), 2, "both accepted");
    let confirm = h.wire[mark..]
        .iter()
        .filter(|w| w.from == Side::Server && w.path == PathId(0))
        .find_map(|w| {
            mp_options(&w.bytes).into_iter().find_map(|o| match o {
                MpOption::Confirm(items) => Some(items),
                _ => None,
            })
        })
        .expect("MP_CONFIRM sent");
    assert_eq!(
        confirm,
        vec![MpOption::Seq(2001), second, MpOption::Seq(2000), first]
    );
}

/// The DCCP options of `bytes` in wire order, without Padding.
fn options_in_order(bytes: &[u8]) -> Vec<DccpOption> {
    let (repr, _) = DccpRepr::parse(bytes, None).expect("our own packet parses");
    repr.options
        .into_iter()
        .filter(|o| !matches!(o, DccpOption::Padding))
        .collect()
}

/// F6, §3.2.6: "an MP_HMAC MUST directly follow its associated multipath
/// option"; validation follows "the sending sequence", and an MP_HMAC that
/// follows nothing "MUST be ignored".
#[test]
fn f6_each_mp_hmac_directly_follows_the_option_it_protects() {
    let mut h = two_paths(18);
    let k = client_keys(&h);
    let mark = h.wire.len();
    let now = h.now;
    let id = h
        .client
        .advertise_address(now, "192.0.2.80:8080".parse().unwrap())
        .unwrap();
    h.drive_for(Duration::from_millis(300));
    let now = h.now;
    h.client.withdraw_address(now, id).unwrap();
    h.drive_for(Duration::from_millis(300));
    // Sender: MP_HMAC right after MP_ADDADDR and after MP_REMOVEADDR.
    let mut protected = 0;
    for w in h.wire[mark..].iter().filter(|w| w.from == Side::Client) {
        let opts = options_in_order(&w.bytes);
        for (n, o) in opts.iter().enumerate() {
            if matches!(
                o,
                DccpOption::Multipath(MpOption::AddAddr { .. } | MpOption::RemoveAddr { .. })
            ) {
                protected += 1;
                assert!(
                    matches!(
                        opts.get(n + 1),
                        Some(DccpOption::Multipath(MpOption::Hmac(_)))
                    ),
                    "MP_HMAC directly after {o:?}: {opts:?}"
                );
            }
        }
    }
    assert!(protected >= 2, "{protected} protected options sent");
    // Receiver: two protected options, each with its own tag, both count.
    let add = addaddr(90, 0x9090, "192.0.2.90:9090");
    let rem = MpOption::RemoveAddr {
        addr_id: 91,
        nonce: Some(0x9191),
    };
    let both = client_ack_with(
        &h,
        0,
        1,
        &[
            MpOption::Seq(3000),
            add.clone(),
            MpOption::Hmac(client_tag(&k, &add)),
            rem.clone(),
            MpOption::Hmac(client_tag(&k, &rem)),
        ],
    );
    let s0 = h.server.stats();
    inject(&mut h, Side::Server, 0, &both);
    h.drive_for(Duration::from_millis(20));
    let s1 = h.server.stats();
    assert_eq!(
        s1.auth.addaddr_bad_hmac, s0.auth.addaddr_bad_hmac,
        "ADDADDR's own tag"
    );
    assert_eq!(s1.auth.removeaddr_bad_hmac, s0.auth.removeaddr_bad_hmac);
    assert!(h.server.remote_addresses().iter().any(|(i, _)| *i == 90));
    // A valid tag that does not directly follow its option is ignored:
    // the MP_ADDADDR counts as unauthenticated.
    let late = addaddr(92, 0x9292, "192.0.2.92:9292");
    let stray = client_ack_with(
        &h,
        0,
        2,
        &[
            MpOption::Hmac(client_tag(&k, &late)),
            MpOption::Seq(3001),
            late,
        ],
    );
    inject(&mut h, Side::Server, 0, &stray);
    h.drive_for(Duration::from_millis(20));
    assert_eq!(
        h.server.stats().auth.addaddr_bad_hmac,
        s1.auth.addaddr_bad_hmac + 1
    );
    assert!(!h.server.remote_addresses().iter().any(|(i, _)| *i == 92));
}

/// The feature-negotiation options (Change/Confirm L/R) of the first
/// packet of `ptype` that `from` put on the wire.
fn feature_options(h: &Harness, from: Side, ptype: PacketType) -> Vec<DccpOption> {
    let w = h
        .wire
        .iter()
        .find(|w| {
            w.from == from
                && DccpRepr::parse(&w.bytes, None).is_ok_and(|(r, _)| r.packet_type() == ptype)
        })
        .expect("packet on the wire");
    let (repr, _) = DccpRepr::parse(&w.bytes, None).expect("our own packet parses");
    repr.options
        .into_iter()
        .filter(|o| {
            matches!(
                o,
                DccpOption::ChangeL { .. }
                    | DccpOption::ChangeR { .. }
                    | DccpOption::ConfirmL { .. }
                    | DccpOption::ConfirmR { .. }
            )
        })
        .collect()
}

/// F1, RFC 9897 §3.1: the client sends `Change R(10) 0` (the server's
/// feature) and the server answers `Confirm L(10) 0 0` — the agreed
/// version followed by its own preference list (RFC 4340 §6.1), byte for
/// byte what the k4.14 reference kernel sends.
#[test]
fn f1_multipath_capable_is_change_r_answered_by_confirm_l() {
    let h = two_paths(11);
    let mpc = FeatureNum::MultipathCapable;
    let req = feature_options(&h, Side::Client, PacketType::Request);
    assert!(req.contains(&DccpOption::ChangeR {
        feature: mpc,
        value: FeatureValue::ServerPriority(vec![0]),
    }));
    assert!(!req
        .iter()
        .any(|o| matches!(o, DccpOption::ChangeL { feature, .. } if *feature == mpc)));
    let resp = feature_options(&h, Side::Server, PacketType::Response);
    let confirm = DccpOption::ConfirmL {
        feature: mpc,
        value: FeatureValue::ServerPriority(vec![0, 0]),
    };
    assert!(resp.contains(&confirm), "{resp:?}");
    assert!(!resp
        .iter()
        .any(|o| matches!(o, DccpOption::ConfirmR { feature, .. } if *feature == mpc)));
    // Bytes as the reference's `Confirm L(10) 00 00`: kind 33, length 5.
    let mut b = [0u8; 8];
    let n = confirm.emit(&mut b).expect("fits");
    assert_eq!(&b[..n], &[33, 5, 10, 0, 0]);
    assert_eq!(h.client.is_multipath(), Some(true));
    assert_eq!(h.server.is_multipath(), Some(true));
}

/// Server-priority option `kind(feature) list` as the wire layer reads it.
fn sp(kind: u8, feature: FeatureNum, list: &[u8]) -> DccpOption {
    let value = if list.is_empty() {
        FeatureValue::Empty
    } else {
        FeatureValue::ServerPriority(list.to_vec())
    };
    match kind {
        opt::CHANGE_L => DccpOption::ChangeL { feature, value },
        opt::CONFIRM_L => DccpOption::ConfirmL { feature, value },
        opt::CHANGE_R => DccpOption::ChangeR { feature, value },
        _ => DccpOption::ConfirmR { feature, value },
    }
}

/// RFC 4340 §6 (docs/INTEROP.md): the reference kernel's Response carries
/// Change L(2,4,6,10) and Change R(6) and resets a connection whose
/// handshake Ack confirms none of them. Our client now confirms each
/// Change of the Response in its third packet — Change L by Confirm R,
/// Change R by Confirm L, the server-priority value reconciled with the
/// server's list first (§6.3.1) and followed by our preferences (§6.1),
/// and an unknown feature by an empty Confirm (§6.6.7) — and our server
/// confirms every Change of our Request.
#[test]
fn every_handshake_change_option_is_confirmed() {
    use FeatureNum::*;
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default()],
        seed: 12,
        ..Default::default()
    });
    h.record = true;
    h.tamper = Some(Box::new(|from, _path, bytes| {
        let orig = bytes.clone();
        let mut s = Segment::parse(&orig, None).expect("our packet parses");
        if from == Side::Server && s.ptype == PacketType::Response {
            for f in [AllowShortSeqnos, EcnIncapable, SendAckVector] {
                s.push_feat(opt::CHANGE_L, f, Some(0));
            }
            s.push_feat(opt::CHANGE_L, MultipathCapable, Some(0));
            s.push_feat(opt::CHANGE_R, SendAckVector, Some(1));
            s.push_feat(opt::CHANGE_L, Other(200), Some(7));
            *bytes = emit(&s, 0, Side::Server);
        }
        true
    }));
    h.open_paths(1, Duration::from_millis(300));
    assert_eq!(h.client.is_multipath(), Some(true));
    assert!(h.client.is_established() && h.server.is_established());
    let ack = feature_options(&h, Side::Client, PacketType::Ack);
    let want = [
        sp(opt::CONFIRM_R, AllowShortSeqnos, &[0, 0, 1]),
        sp(opt::CONFIRM_R, EcnIncapable, &[0, 0, 1]),
        sp(opt::CONFIRM_R, SendAckVector, &[0, 1, 0]),
        sp(opt::CONFIRM_R, MultipathCapable, &[0, 0]),
        sp(opt::CONFIRM_L, SendAckVector, &[1, 1, 0]),
        sp(opt::CONFIRM_R, Other(200), &[]),
    ];
    assert_eq!(ack, want);
    // Our own pair: the Response confirms each Change of the Request.
    let req = feature_options(&h, Side::Client, PacketType::Request);
    let resp = feature_options(&h, Side::Server, PacketType::Response);
    let changes: Vec<_> = req
        .iter()
        .map(|o| match o {
            DccpOption::ChangeL { feature, .. } => (opt::CONFIRM_R, *feature),
            DccpOption::ChangeR { feature, .. } => (opt::CONFIRM_L, *feature),
            other => panic!("a Request carries no {other:?}"),
        })
        .collect();
    // (The wire holds the Response as tampered: its Changes are ours.)
    let confirms: Vec<_> = resp
        .iter()
        .filter_map(|o| match o {
            DccpOption::ConfirmL { feature, .. } => Some((opt::CONFIRM_L, *feature)),
            DccpOption::ConfirmR { feature, .. } => Some((opt::CONFIRM_R, *feature)),
            _ => None,
        })
        .collect();
    assert_eq!(changes, confirms);
    assert!(resp.contains(&sp(opt::CONFIRM_L, Ccid, &[2, 2])));
}

/// A one-path session whose datagrams from `side` of type `ptype` get
/// the Multipath Capable option of `kind` replaced by `list`.
fn with_mp_capable(side: Side, ptype: PacketType, kind: u8, list: &'static [u8]) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default()],
        seed: 13,
        ..Default::default()
    });
    h.record = true;
    h.tamper = Some(Box::new(move |from, _path, bytes| {
        let orig = bytes.clone();
        let mut s = Segment::parse(&orig, None).expect("our packet parses");
        if from == side && s.ptype == ptype {
            for f in &mut s.feats {
                if f.kind == kind && f.feature == FeatureNum::MultipathCapable {
                    *f = FeatOpt::with_list(kind, f.feature, list);
                }
            }
            *bytes = emit(&s, 0, side);
        }
        true
    }));
    h.open_paths(1, Duration::from_millis(300));
    h
}

/// F10, RFC 9897 §3.1/§3.6 and RFC 4340 §6.3.1: multipath needs version 0
/// (the version is the value's high nibble, the low bits are ignored).
/// Our server, whose list is [0], agrees when the client lists version 0
/// anywhere and answers `Confirm L(10) 0 0`; a client offering version 1
/// only gets an empty Confirm L(10) and plain DCCP. Our client falls back
/// when the server's Confirm selects another version.
#[test]
fn f10_multipath_needs_version_0() {
    let mpc = FeatureNum::MultipathCapable;
    for (offer, agreed) in [
        (&[0x10][..], false),
        (&[0x10, 0x00][..], true),
        (&[0x05][..], true),
    ] {
        let h = with_mp_capable(Side::Client, PacketType::Request, opt::CHANGE_R, offer);
        assert_eq!(h.server.is_multipath(), Some(agreed), "offer {offer:x?}");
        assert_eq!(h.client.is_multipath(), Some(agreed), "offer {offer:x?}");
        let resp = feature_options(&h, Side::Server, PacketType::Response);
        let list: &[u8] = if agreed { &[0, 0] } else { &[] };
        assert!(resp.contains(&sp(opt::CONFIRM_L, mpc, list)), "{resp:?}");
        assert!(
            h.client.is_established(),
            "plain DCCP or multipath, it opens"
        );
    }
    let h = with_mp_capable(
        Side::Server,
        PacketType::Response,
        opt::CONFIRM_L,
        &[0x10, 0x10],
    );
    assert_eq!(h.client.is_multipath(), Some(false));
    assert!(h.client.stats().auth.fallbacks >= 1);
}

/// The feature-negotiation options of the first packet of `ptype` that
/// `from` put on `path`, with that packet's bytes.
fn feature_options_on(
    h: &Harness,
    from: Side,
    ptype: PacketType,
    path: u32,
) -> (Vec<DccpOption>, Vec<u8>) {
    let w = h
        .wire
        .iter()
        .find(|w| {
            w.from == from
                && w.path == PathId(path)
                && DccpRepr::parse(&w.bytes, None).is_ok_and(|(r, _)| r.packet_type() == ptype)
        })
        .expect("packet on the wire");
    let (repr, _) = DccpRepr::parse(&w.bytes, None).expect("our own packet parses");
    let feats = repr
        .options
        .into_iter()
        .filter(|o| {
            matches!(
                o,
                DccpOption::ChangeL { .. }
                    | DccpOption::ChangeR { .. }
                    | DccpOption::ConfirmL { .. }
                    | DccpOption::ConfirmR { .. }
            )
        })
        .collect();
    (feats, w.bytes.clone())
}

/// True when `bytes` holds `needle` (an option's bytes) in its options area.
fn holds(bytes: &[u8], needle: &[u8]) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle)
}

/// F2, RFC 9897 §3.2.2: "Similar to the setup of the first subflow,
/// MP_JOIN also exchanges the Multipath Capable feature" — the join
/// Request on path 1 carries `Change R(10) 0` (bytes 34 4 10 0) next to
/// MP_JOIN, and the server's join Response `Confirm L(10) 0 0` (33 5 10 0
/// 0) next to MP_JOIN + MP_HMAC, as the k4.14 / k5.10 reference kernels
/// send them on their joins.
#[test]
fn f2_a_join_exchanges_multipath_capable_as_the_first_subflow() {
    let h = two_paths(21);
    let mpc = FeatureNum::MultipathCapable;
    let change = DccpOption::ChangeR {
        feature: mpc,
        value: FeatureValue::ServerPriority(vec![0]),
    };
    let confirm = DccpOption::ConfirmL {
        feature: mpc,
        value: FeatureValue::ServerPriority(vec![0, 0]),
    };
    let mut b = [0u8; 8];
    let n = change.emit(&mut b).expect("fits");
    assert_eq!(&b[..n], &[34, 4, 10, 0]);
    let n = confirm.emit(&mut b).expect("fits");
    assert_eq!(&b[..n], &[33, 5, 10, 0, 0]);

    let (req, bytes) = feature_options_on(&h, Side::Client, PacketType::Request, 1);
    assert!(mp_options(&bytes)
        .iter()
        .any(|o| matches!(o, MpOption::Join { .. })));
    assert!(req.contains(&change), "{req:?}");
    assert!(holds(&bytes, &[34, 4, 10, 0]));
    assert_eq!(
        req.iter()
            .filter(|o| matches!(o,
                DccpOption::ChangeL { feature, .. } | DccpOption::ChangeR { feature, .. }
                    if *feature == mpc))
            .count(),
        1,
        "one Multipath Capable Change"
    );

    let (resp, bytes) = feature_options_on(&h, Side::Server, PacketType::Response, 1);
    assert!(mp_options(&bytes)
        .iter()
        .any(|o| matches!(o, MpOption::Join { .. })));
    assert!(resp.contains(&confirm), "{resp:?}");
    assert!(holds(&bytes, &[33, 5, 10, 0, 0]));
    assert!(
        h.client.stats().auth.join_bad_mp_capable == 0
            && h.server.stats().auth.join_bad_mp_capable == 0
    );
    assert_eq!(open_paths(&h, Side::Client), 2);
}

/// A two-path session (path 1 joins) whose `side` packets of `ptype` on
/// path 1 get their Multipath Capable option of `kind` replaced by `list`
/// (`None`: removed).
fn join_with_mp_capable(
    side: Side,
    ptype: PacketType,
    kind: u8,
    list: Option<&'static [u8]>,
) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 22,
        ..Default::default()
    });
    h.record = true;
    h.tamper = Some(Box::new(move |from, path, bytes| {
        if from != side || path != PathId(1) {
            return true;
        }
        let orig = bytes.clone();
        let mut s = Segment::parse(&orig, None).expect("our packet parses");
        if s.ptype == ptype {
            let feats: Vec<FeatOpt> = std::mem::take(&mut s.feats);
            for f in feats {
                if f.kind == kind && f.feature == FeatureNum::MultipathCapable {
                    if let Some(l) = list {
                        s.push_feat_list(kind, f.feature, l);
                    }
                } else {
                    s.push_feat_opt(f);
                }
            }
            *bytes = emit(&s, 1, side);
        }
        true
    }));
    h.open_paths(2, Duration::from_millis(300));
    h
}

/// The Reset codes `from` sent on `path`.
fn resets_on(h: &Harness, from: Side, path: u32) -> Vec<ResetCode> {
    h.wire
        .iter()
        .filter(|w| w.from == from && w.path == PathId(path))
        .filter_map(|w| Segment::parse(&w.bytes, None).ok())
        .filter(|s| s.ptype == PacketType::Reset)
        .map(|s| s.reset_code)
        .collect()
}

/// The first subflow still carries data both ways.
fn still_delivers(h: &mut Harness, tag: u8) {
    for side in [Side::Client, Side::Server] {
        let before = h.delivered(side.peer()).len();
        for k in 0..20u8 {
            let now = h.now;
            h.conn(side).send(now, &[tag, k, 0, 0, 0, 0]).expect("send");
            h.drive_for(Duration::from_millis(2));
        }
        h.drive_for(Duration::from_millis(200));
        assert_eq!(h.delivered(side.peer()).len() - before, 20, "{side:?}");
    }
}

/// F2, RFC 9897 §3.6: "If a subflow attempts to join an existing MP-DCCP
/// connection, but … MP_CAPABLE feature are not present or are faulty …
/// that subflow MUST be closed. This is especially the case if a
/// different MP_CAPABLE version than the originally negotiated version is
/// used"; §3.5: "an appropriate DCCP-Reset code … reset code 5 (Option
/// Error) when an MP-DCCP option provides invalid data". A join Request
/// without Change R(10), or listing version 1 only, is answered with Reset
/// 5 and no Response, counted, and leaves no subflow on the server; the
/// client's first subflow carries on. One that lists version 1 then 0 is
/// agreed on version 0 (server-priority reconciliation, §3.1).
#[test]
fn f2_a_join_request_without_version_0_is_refused_with_option_error() {
    for (list, refused) in [
        (None, true),
        (Some(&[0x10][..]), true),
        (Some(&[0x10, 0x00][..]), false),
    ] {
        let mut h = join_with_mp_capable(Side::Client, PacketType::Request, opt::CHANGE_R, list);
        let (req, _) = feature_options_on(&h, Side::Client, PacketType::Request, 1);
        let has_mpc = req.iter().any(
            |o| matches!(o, DccpOption::ChangeR { feature, .. } if *feature == FeatureNum::MultipathCapable),
        );
        assert_eq!(has_mpc, list.is_some(), "tampered as meant: {req:?}");
        let server_resp = h.wire.iter().any(|w| {
            w.from == Side::Server
                && w.path == PathId(1)
                && inspect::packet_type(&w.bytes) == Some(PacketType::Response)
        });
        if refused {
            assert_eq!(h.server.stats().auth.join_bad_mp_capable, 1, "{list:x?}");
            assert_eq!(
                resets_on(&h, Side::Server, 1),
                vec![ResetCode::OptionError],
                "{list:x?}"
            );
            assert!(!server_resp, "no Response to a refused join");
            assert!(!h.server.has_path(PathId(1)), "no subflow kept");
            assert!(!h.server_events.contains(&Event::PathEstablished(PathId(1))));
            assert!(h.client_events.contains(&Event::PathFailed(PathId(1))));
            assert_eq!(open_paths(&h, Side::Client), 1);
            assert_eq!(open_paths(&h, Side::Server), 1);
        } else {
            assert_eq!(h.server.stats().auth.join_bad_mp_capable, 0);
            let (resp, _) = feature_options_on(&h, Side::Server, PacketType::Response, 1);
            assert!(resp.contains(&sp(opt::CONFIRM_L, FeatureNum::MultipathCapable, &[0, 0])));
            assert_eq!(open_paths(&h, Side::Client), 2);
            assert_eq!(open_paths(&h, Side::Server), 2);
        }
        assert!(h.client.is_established() && h.server.is_established());
        still_delivers(&mut h, 0xF2);
    }
}

/// F2, RFC 9897 §3.6 (the client's side): a join Response whose Confirm
/// L(10) is missing, empty (no agreement) or selects version 1 closes that
/// subflow — Reset 5 (Option Error) from the client, `join_bad_mp_capable`,
/// the path never opens — and the connection's first subflow keeps working.
#[test]
fn f2_a_join_response_without_confirm_l_10_closes_the_subflow() {
    for list in [None, Some(&[][..]), Some(&[0x10, 0x10][..])] {
        let mut h = join_with_mp_capable(Side::Server, PacketType::Response, opt::CONFIRM_L, list);
        assert_eq!(h.client.stats().auth.join_bad_mp_capable, 1, "{list:x?}");
        assert_eq!(
            resets_on(&h, Side::Client, 1),
            vec![ResetCode::OptionError],
            "{list:x?}"
        );
        assert!(h.client_events.contains(&Event::PathFailed(PathId(1))));
        assert!(!h.client_events.contains(&Event::PathEstablished(PathId(1))));
        assert!(!h.server_events.contains(&Event::PathEstablished(PathId(1))));
        assert_eq!(open_paths(&h, Side::Client), 1);
        assert_eq!(open_paths(&h, Side::Server), 1);
        assert!(h.client.is_established() && h.server.is_established());
        still_delivers(&mut h, 0xF3);
    }
}

/// F2 and hostile input: refused joins (here without Change R(10), on 100
/// fresh path ids between two polls) leave no state. Each is counted; at
/// most `max_paths` refused subflows wait for their Reset, the rest are
/// dropped unanswered (`refusals_dropped`); once the Resets are out no
/// subflow of them is left, and the session carries on.
#[test]
fn f2_refused_joins_leave_no_state() {
    let mut h = two_paths(23);
    let max_paths = mpdccp_proto::ConnectionConfig::default().mp.max_paths;
    let token = h.server.local_ci();
    let s0 = h.server.stats();
    for k in 0..100u32 {
        let mut req = Segment::new(PacketType::Request, 1000 + u64::from(k));
        req.service_code = mpdccp_proto::conn::SERVICE_CODE;
        req.mp.join = Some(mpdccp_proto::conn::codec::MpJoin {
            addr_id: 50,
            token,
            nonce: k + 1,
        });
        let path = 10 + k as usize;
        inject(&mut h, Side::Server, path, &emit(&req, path, Side::Client));
        assert!(h.server.paths().len() <= 2 + max_paths, "after {k}");
    }
    let s = h.server.stats();
    assert_eq!(
        s.auth.join_bad_mp_capable - s0.auth.join_bad_mp_capable,
        100
    );
    assert_eq!(
        s.auth.refusals_dropped - s0.auth.refusals_dropped,
        100 - max_paths as u64
    );
    h.drive_for(Duration::from_millis(5));
    assert_eq!(h.server.paths().len(), 2, "only the genuine subflows");
    assert_eq!(open_paths(&h, Side::Server), 2);
    still_delivers(&mut h, 0xF4);
}
