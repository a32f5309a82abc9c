//! Connection-level RFC 9897 requirements checked on the bytes a live
//! two-path session puts on the wire (rows of `docs/rfc9897/MATRIX.md`
//! that no older test covered).

use std::time::Duration;

use mpdccp_proto::conn::codec::{KeyOffer, Segment};
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::mp::subtype as mp;
use mpdccp_proto::wire::{KeyType, MpOption};
use mpdccp_proto::PathId;

use crate::common;
use common::{mp_options, two_paths};
use mpdccp_proto::conn::MpConfig;

fn exchange(h: &mut Harness, n: u32) {
    for k in 0..n {
        let now = h.now;
        for side in [Side::Client, Side::Server] {
            let _ = h.conn(side).send(now, &k.to_be_bytes().repeat(25));
        }
        h.drive_for(Duration::from_millis(2));
    }
    h.drive_for(Duration::from_millis(500));
}

/// §3.2.5: MP_SEQ "MUST be sent with all DCCP-Data and DCCP-DataACK
/// packets"; the IDSN "SHOULD be set randomly".
#[test]
fn every_data_packet_carries_mp_seq_and_the_idsn_is_random() {
    let mut firsts = Vec::new();
    for seed in [1u64, 2, 3] {
        let mut h = two_paths(seed);
        exchange(&mut h, 50);
        let mut data = 0;
        let mut first = None;
        for w in h.wire.iter().filter(|w| w.from == Side::Client) {
            let t = inspect::packet_type(&w.bytes);
            if !matches!(t, Some(PacketType::Data | PacketType::DataAck)) {
                continue;
            }
            data += 1;
            let seqs: Vec<u64> = mp_options(&w.bytes)
                .into_iter()
                .filter_map(|o| match o {
                    MpOption::Seq(s) => Some(s),
                    _ => None,
                })
                .collect();
            assert_eq!(seqs.len(), 1, "one MP_SEQ in every data packet");
            first.get_or_insert(seqs[0]);
        }
        assert!(data >= 50, "{data} data packets");
        firsts.push(first.unwrap());
    }
    // Three seeds, three different 48-bit starting points, none at zero.
    assert!(firsts.iter().all(|&s| s != 0 && s < 1 << 48));
    assert!(firsts[0] != firsts[1] && firsts[1] != firsts[2] && firsts[0] != firsts[2]);
}

/// §3.3 / §3.2.4: the first Request offers a key of type 0 (8 bytes) with
/// the client's CI; the Response answers with a single key of the offered
/// type and the server's CI. §3.2.2: the join Request names the peer's CI
/// and the Response carries MP_JOIN with the client's CI followed by
/// MP_HMAC.
#[test]
fn handshakes_carry_the_rfc_key_ci_and_join_fields() {
    let h = two_paths(7);
    let first = |from: Side, path: u32, ty: PacketType| {
        h.wire
            .iter()
            .find(|w| {
                w.from == from
                    && w.path == PathId(path)
                    && inspect::packet_type(&w.bytes) == Some(ty)
            })
            .map(|w| mp_options(&w.bytes))
            .expect("packet present")
    };
    let key_of = |opts: &[MpOption]| {
        opts.iter()
            .find_map(|o| match o {
                MpOption::Key { ci, keys } => Some((*ci, keys.clone())),
                _ => None,
            })
            .expect("MP_KEY")
    };
    let (ci, keys) = key_of(&first(Side::Client, 0, PacketType::Request));
    assert_eq!(ci, h.client.local_ci());
    assert!(keys
        .iter()
        .any(|k| k.key_type == KeyType::Plain && k.data.len() == 8));
    let (ci, keys) = key_of(&first(Side::Server, 0, PacketType::Response));
    assert_eq!(ci, h.server.local_ci());
    assert_eq!(keys.len(), 1, "the Response carries a single key");
    assert_eq!(keys[0].key_type, KeyType::Plain);

    let req = first(Side::Client, 1, PacketType::Request);
    assert!(matches!(req[..], [MpOption::Join { ci, .. }] if ci == h.server.local_ci()));
    let resp = first(Side::Server, 1, PacketType::Response);
    let j = resp
        .iter()
        .position(|o| matches!(o, MpOption::Join { ci, .. } if *ci == h.client.local_ci()))
        .expect("MP_JOIN in the Response");
    assert!(
        matches!(resp.get(j + 1), Some(MpOption::Hmac(_))),
        "MP_HMAC directly after MP_JOIN: {resp:?}"
    );
    // Address IDs: the join's id is not the implicit 0 of the first subflow.
    let MpOption::Join { addr_id, .. } = req[0] else {
        unreachable!()
    };
    assert_ne!(addr_id, 0);
}

/// §3.2.11: "When the MP-DCCP connection socket is in CLOSEREQ or CLOSE
/// state, new subflow requests using MP_JOIN MUST be ignored."
#[test]
fn join_requests_are_ignored_once_closing() {
    let mut h = two_paths(3);
    let join = h
        .wire
        .iter()
        .find(|w| {
            w.from == Side::Client
                && w.path == PathId(1)
                && inspect::packet_type(&w.bytes) == Some(PacketType::Request)
        })
        .map(|w| w.bytes.clone())
        .expect("the join Request");
    let now = h.now;
    h.server.close(now);
    let refused = h.server.stats().rx.rx_request_refused;
    // The same MP_JOIN (valid CI) arrives on a new path while closing.
    h.server.handle_datagram(now, PathId(9), &join);
    assert_eq!(h.server.stats().rx.rx_request_refused, refused + 1);
    assert!(!h.server.has_path(PathId(9)), "no state for the join");
    let mut buf = vec![0u8; 2048];
    while let Some(t) = h.server.poll_transmit(now, &mut buf) {
        assert_ne!(t.path, PathId(9), "nothing is sent in answer");
    }
}

/// §3.2.11: MP_CLOSE carries "the selected Key Data of the peer host" and
/// §3.2.3: MP_FAST_CLOSE too — so the two directions carry different keys,
/// and each equals the key its receiver sent in MP_KEY.
#[test]
fn close_options_carry_the_peers_key() {
    let mut h = two_paths(5);
    let key_sent_by = |h: &Harness, side: Side| {
        h.wire
            .iter()
            .filter(|w| w.from == side && w.path == PathId(0))
            .find_map(|w| {
                mp_options(&w.bytes).into_iter().find_map(|o| match o {
                    MpOption::Key { keys, .. } => Some(keys[0].data.clone()),
                    _ => None,
                })
            })
            .expect("MP_KEY")
    };
    let server_key = key_sent_by(&h, Side::Server);
    let now = h.now;
    h.client.close(now);
    h.drive_for(Duration::from_secs(3));
    let mut closes = 0;
    for w in h.wire.iter().filter(|w| w.from == Side::Client) {
        if let Some(r) = inspect::find_mp_suboption(&w.bytes, mp::CLOSE) {
            assert_eq!(w.bytes[r].to_vec(), server_key);
            closes += 1;
        }
    }
    assert!(closes >= 2, "MP_CLOSE on both subflows");
}

/// §3.2.4 / §3.6: "If the key type cannot be agreed in the handshake
/// procedure, the MP-DCCP connection MUST fall back to not using MP-DCCP."
/// The client's Request offers a reserved key type instead of 0.
#[test]
fn request_without_an_agreeable_key_type_falls_back() {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec {
            delay: Duration::from_millis(10),
            ..Default::default()
        }],
        ..Default::default()
    });
    h.tamper = Some(Box::new(|side, path, bytes| {
        if side == Side::Client && inspect::packet_type(bytes) == Some(PacketType::Request) {
            if let Some(r) = inspect::find_mp_suboption(bytes, mp::KEY) {
                // resvd(1) CI(4) | Key Type: 0 -> 7 (reserved, RFC 9897 §3.2.4).
                bytes[r.start + 5] = 7;
                let (c, s) = Harness::path_addrs(path.0 as usize);
                inspect::fix_checksum(bytes, c.ip(), s.ip());
            }
        }
        true
    }));
    h.open_path(0);
    h.drive_for(Duration::from_millis(300));
    assert!(h.client.is_established() && h.server.is_established());
    assert_eq!(h.server.is_multipath(), Some(false), "server fell back");
    assert_eq!(h.client.is_multipath(), Some(false), "client fell back");
    // Plain DCCP still carries data.
    let now = h.now;
    h.client.send(now, &[0x45; 100]).unwrap();
    h.drive_for(Duration::from_millis(200));
    assert_eq!(h.delivered(Side::Server).len(), 1);
}

/// §3.5: "receiving a reset code 9 for secondary subflows MUST NOT impact
/// already existing active subflows" — data keeps flowing on both open
/// subflows after a third join is refused with Too Busy.
#[test]
fn too_busy_reset_on_a_join_leaves_the_other_subflows_open() {
    let mut h = Harness::new(HarnessConfig {
        paths: common::links(&[10, 15, 20]),
        server: mpdccp_proto::ConnectionConfig {
            mp: MpConfig {
                max_paths: 2,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    });
    h.record = true;
    h.open_paths(3, Duration::from_millis(500));
    assert_eq!(h.server.stats().auth.join_too_busy, 1);
    let busy = h.wire.iter().any(|w| {
        w.from == Side::Server
            && w.path == PathId(2)
            && inspect::packet_type(&w.bytes) == Some(PacketType::Reset)
            && w.bytes[24] == 9
    });
    assert!(busy, "Reset code 9 on the third path");
    let before = h.wire.len();
    exchange(&mut h, 100);
    assert!(h.client.is_established() && h.server.is_established());
    assert_eq!(h.delivered(Side::Server).len(), 100);
    assert_eq!(h.delivered(Side::Client).len(), 100);
    for p in 0..2 {
        let data = h.wire[before..]
            .iter()
            .filter(|w| {
                w.from == Side::Client
                    && w.path == PathId(p)
                    && inspect::packet_type(&w.bytes) == Some(PacketType::DataAck)
            })
            .count();
        assert!(data > 0, "path {p} still carries data");
    }
}

/// The client's third packet with the MP_KEY echo of our older releases
/// added (`resvd CI {0, KeyA} {0, KeyB}`): `Echo::Right`, KeyB's last bit
/// flipped, or KeyA's type made reserved (7, so the option cannot be read).
#[derive(Clone, Copy, PartialEq)]
enum Echo {
    Right,
    Flipped,
    Malformed,
}

fn third_packet_with_key_echo(echo: Echo) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec {
            delay: Duration::from_millis(10),
            ..Default::default()
        }],
        ..Default::default()
    });
    h.record = true;
    let mut client: Option<(u32, [u8; 8])> = None;
    let mut server: Option<[u8; 8]> = None;
    h.tamper = Some(Box::new(move |side, path, bytes| {
        let orig = bytes.clone();
        let mut s = Segment::parse(&orig, None).expect("our packet parses");
        let key = s.mp.key.as_ref().and_then(|k| Some((k.ci, k.plain_key()?)));
        match (side, s.ptype, key) {
            (Side::Client, PacketType::Request, Some(k)) => client = Some(k),
            (Side::Server, PacketType::Response, Some((_, k))) => server = Some(k),
            (Side::Client, PacketType::Ack, None) => {
                if let (Some((ci, kc)), Some(mut ks)) = (client, server.take()) {
                    ks[7] ^= u8::from(echo == Echo::Flipped);
                    s.mp.key = Some(KeyOffer::plain(ci, kc, Some(ks)));
                    *bytes = common::emit(&s, path.0 as usize, Side::Client);
                    if echo == Echo::Malformed {
                        let r = inspect::find_mp_suboption(bytes, mp::KEY).expect("MP_KEY");
                        // resvd(1) CI(4) | Key Type: 0 -> 7 (reserved).
                        bytes[r.start + 5] = 7;
                        let (c, s) = Harness::path_addrs(path.0 as usize);
                        inspect::fix_checksum(bytes, c.ip(), s.ip());
                    }
                }
            }
            _ => {}
        }
        true
    }));
    h.open_path(0);
    h.drive_for(Duration::from_millis(500));
    h
}

/// §3.6: "The subflow closing procedure MUST be also applied if a final ACK
/// carrying MP_KEY with wrong KeyA/KeyB is received." The (older-style)
/// echo of the server's key in the client's third packet has a bit flipped,
/// or cannot be read at all (F11).
#[test]
fn wrong_key_echo_in_the_final_ack_closes_the_subflow() {
    for echo in [Echo::Flipped, Echo::Malformed] {
        let h = third_packet_with_key_echo(echo);
        assert!(h.server.stats().auth.bad_key_echo >= 1);
        assert!(!h.server.is_established(), "no connection on a wrong echo");
        let reset_5 = h.wire.iter().any(|w| {
            w.from == Side::Server
                && inspect::packet_type(&w.bytes) == Some(PacketType::Reset)
                && w.bytes[24] == 5
        });
        assert!(reset_5, "Reset (Option Error) on the subflow");
    }
}

/// F11 (§3.2.4, §3.3): our client's third packet carries no MP_KEY (as the
/// k4.14 reference kernel), and a correct echo from our older releases is
/// still accepted.
#[test]
fn the_third_packet_carries_no_mp_key_but_an_old_echo_is_accepted() {
    let h = two_paths(9);
    let third = h
        .wire
        .iter()
        .find(|w| {
            w.from == Side::Client
                && w.path == PathId(0)
                && inspect::packet_type(&w.bytes) == Some(PacketType::Ack)
        })
        .expect("the client's third packet");
    assert!(inspect::find_mp_suboption(&third.bytes, mp::KEY).is_none());
    let keys = h
        .wire
        .iter()
        .filter(|w| inspect::find_mp_suboption(&w.bytes, mp::KEY).is_some())
        .count();
    assert_eq!(keys, 2, "MP_KEY in the Request and the Response only");
    let h = third_packet_with_key_echo(Echo::Right);
    assert!(h.server.is_established() && h.client.is_established());
    assert_eq!(h.server.is_multipath(), Some(true));
    assert_eq!(h.server.stats().auth.bad_key_echo, 0);
}
