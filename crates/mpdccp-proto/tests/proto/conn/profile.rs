//! The wire profile as a per-connection setting of the core
//! (`ConnectionConfig::wire_profile`, docs/INTEROP.md): two `Connection`s
//! speaking one profile to each other over two paths — MP_KEY, MP_JOIN
//! with its HMACs, data, MP_ADDADDR / MP_REMOVEADDR confirmed, MP_CLOSE —
//! and every option 46 on the wire checked against the wire layer's
//! parser and derivations for that profile (`wire/profile.rs`,
//! `wire/profile_keys.rs`, which reproduce the reference captures byte
//! for byte). The RFC 9897 profile is the default and is checked the same
//! way; a client and server that disagree on the profile get no join.

use std::net::SocketAddr;
use std::time::Duration;

use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, Side};
use mpdccp_proto::wire::mp::subtype;
use mpdccp_proto::wire::profile_keys::{JoinHmac, PlainKeys};
use mpdccp_proto::wire::{MpOption, Packet, WireProfile};
use mpdccp_proto::{ConnectionConfig, Event, PathId};

fn cfg(profile: WireProfile) -> ConnectionConfig {
    ConnectionConfig {
        wire_profile: profile,
        ..Default::default()
    }
}

/// Two paths up, data both ways, an address advertised and withdrawn by
/// the server, then a close.
fn session(client: WireProfile, server: WireProfile) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        client: cfg(client),
        server: cfg(server),
        ..Default::default()
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    for k in 0..10u8 {
        let now = h.now;
        let _ = h.client.send(now, &[k; 100]);
        let _ = h.server.send(now, &[k + 100; 100]);
        h.drive_for(Duration::from_millis(20));
    }
    let extra: SocketAddr = "10.0.9.2:0".parse().unwrap();
    let now = h.now;
    if let Ok(id) = h.server.advertise_address(now, extra) {
        h.drive_for(Duration::from_millis(500));
        let now = h.now;
        let _ = h.server.withdraw_address(now, id);
        h.drive_for(Duration::from_millis(500));
    }
    let now = h.now;
    h.client.close(now);
    h.drive_for(Duration::from_secs(3));
    h
}

fn opened(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::PathEstablished(_)))
        .count()
}

/// What the wire showed, decoded with `profile`.
#[derive(Debug, Default)]
struct Seen {
    keys: Option<PlainKeys>,
    ci: (u32, u32),
    /// The client's MP_JOIN: identifier and nonce; the server's nonce.
    join: Option<(u32, u32)>,
    nonce_s: Option<u32>,
    join_hmacs_ok: usize,
    addr_hmacs_ok: usize,
    bad: Vec<String>,
    third_key: bool,
    closes_ok: usize,
    subtypes: Vec<u8>,
}

fn decode(h: &Harness, profile: WireProfile) -> Seen {
    let mut s = Seen::default();
    let (mut key_c, mut key_s) = (None, None);
    for r in h.wire.iter().filter(|r| !r.dropped) {
        let p = Packet::new_checked(&r.bytes[..]).expect("valid DCCP");
        let ty = p.packet_type();
        let from_client = r.from == Side::Client;
        let mut opts = Vec::new();
        for o in p.options().flatten().filter(|o| o.kind == 46) {
            match MpOption::parse_in(o.data, profile) {
                Ok(m) => opts.push(m),
                Err(e) => s.bad.push(format!("{ty:?} {:02x?}: {e:?}", o.data)),
            }
        }
        for (i, o) in opts.iter().enumerate() {
            s.subtypes.push(o.subtype());
            let next_hmac = match opts.get(i + 1) {
                Some(MpOption::Hmac(h)) => Some(*h),
                _ => None,
            };
            match (o, ty) {
                (MpOption::Key { ci, keys }, PacketType::Request) => {
                    key_c = Some(keys[0].data.clone());
                    s.ci.0 = *ci;
                }
                (MpOption::Key { ci, keys }, PacketType::Response) => {
                    key_s = Some(keys[0].data.clone());
                    s.ci.1 = *ci;
                }
                (MpOption::Key { keys, .. }, PacketType::Ack) if from_client => {
                    let both: Vec<_> = keys.iter().map(|k| k.data.clone()).collect();
                    s.third_key = Some(&both[0]) == key_c.as_ref()
                        && both.get(1) == key_s.as_ref()
                        && both.len() == 2;
                }
                (MpOption::Join { ci, nonce, .. }, PacketType::Request) => {
                    s.join = Some((*ci, *nonce));
                    let want = profile.join_id(&s.keys.unwrap(), s.ci.1);
                    if *ci != want {
                        s.bad.push(format!("join id {ci:08x}, want {want:08x}"));
                    }
                }
                (MpOption::Join { nonce, .. }, PacketType::Response) => {
                    s.nonce_s = Some(*nonce);
                    let (j, nc) = s.join.unwrap();
                    let k = s.keys.unwrap();
                    let want = profile.join_hmac(&k, JoinHmac::Response, j, nc, *nonce);
                    s.join_hmacs_ok += usize::from(next_hmac == Some(want));
                }
                (MpOption::Hmac(tag), PacketType::Ack) if from_client && i == 0 => {
                    let (j, nc) = s.join.unwrap();
                    let k = s.keys.unwrap();
                    let want = profile.join_hmac(&k, JoinHmac::Ack, j, nc, s.nonce_s.unwrap());
                    s.join_hmacs_ok += usize::from(*tag == want);
                }
                (MpOption::AddAddr { .. } | MpOption::RemoveAddr { .. }, _) => {
                    let want = profile.addr_hmac(&s.keys.unwrap(), from_client, o);
                    s.addr_hmacs_ok += usize::from(want.is_some() && next_hmac == want);
                }
                (MpOption::Close { key_data }, _) => {
                    let want = profile.close_key_data(&s.keys.unwrap(), from_client);
                    s.closes_ok += usize::from(key_data[..] == want);
                }
                _ => {}
            }
            if let (None, Some(c), Some(sv)) = (s.keys, &key_c, &key_s) {
                s.keys = Some(PlainKeys {
                    client: c[..].try_into().unwrap(),
                    server: sv[..].try_into().unwrap(),
                });
            }
        }
    }
    s
}

#[test]
fn each_profile_runs_two_paths_with_its_own_bytes() {
    for profile in WireProfile::ALL {
        let h = session(profile, profile);
        let name = profile.name();
        assert_eq!(opened(&h.client_events), 2, "{name}: {:?}", h.client_events);
        assert_eq!(opened(&h.server_events), 2, "{name}");
        let delivered = |ev: &[Event]| {
            ev.iter()
                .filter(|e| matches!(e, Event::Delivered { .. }))
                .count()
        };
        assert_eq!(delivered(&h.client_events), 10, "{name}");
        assert_eq!(delivered(&h.server_events), 10, "{name}");
        let confirmed = h
            .server_events
            .iter()
            .filter(|e| matches!(e, Event::AddressConfirmed { .. }))
            .count();
        assert_eq!(confirmed, 2, "{name}: ADDADDR and REMOVEADDR confirmed");
        assert!(h
            .client_events
            .iter()
            .any(|e| matches!(e, Event::AddressRemoved { .. })));
        assert!(h.client.is_closed() && h.server.is_closed(), "{name}");

        let s = decode(&h, profile);
        assert!(s.bad.is_empty(), "{name}: {:?}", s.bad);
        assert_eq!(s.join_hmacs_ok, 2, "{name}: {s:?}");
        // ADDADDR and REMOVEADDR, each at least once with the right HMAC.
        assert!(s.addr_hmacs_ok >= 2, "{name}: {s:?}");
        assert!(s.closes_ok >= 1, "{name}: {s:?}");
        // k5.10: no CI in MP_KEY, the third MP_KEY on the client's Ack.
        assert_eq!(s.third_key, profile.third_key_message(), "{name}");
        if !profile.key_has_ci() {
            assert_eq!(s.ci, (0, 0), "{name}");
        }
        let keys = s.subtypes.iter().filter(|&&t| t == subtype::KEY).count();
        assert_eq!(keys >= 3, profile.third_key_message(), "{name}: {keys}");
    }
}

/// The RFC layout differs from the reference's exactly where the tables
/// of docs/INTEROP.md say: RFC 9897 bytes are not valid k4.14 join HMACs
/// (and the other way round), so a client and a server that disagree on
/// the profile get their first subflow but no join.
#[test]
fn mismatched_profiles_refuse_the_join() {
    let pairs = [
        (WireProfile::Rfc9897, WireProfile::ReferenceK414),
        (WireProfile::ReferenceK414, WireProfile::Rfc9897),
    ];
    for (c, s) in pairs {
        let h = session(c, s);
        assert!(h.client_events.contains(&Event::Connected), "{c} -> {s}");
        assert!(
            !h.client_events.contains(&Event::PathEstablished(PathId(1)))
                || !h.server_events.contains(&Event::PathEstablished(PathId(1))),
            "{c} -> {s}: the join opened"
        );
        let bad = h.client.stats().auth.join_bad_hmac + h.server.stats().auth.join_bad_hmac;
        assert!(bad >= 1, "{c} -> {s}");
    }
}

/// The reference carries MP_CONFIRM (and ADDADDR, …) on empty Data packets
/// with an MP_SEQ of their own (docs/INTEROP.md, "The wire profiles"): such
/// a packet holds its place in the order but is no datagram — the ones
/// after it are delivered, it is not.
#[test]
fn empty_data_with_its_own_mp_seq_is_not_delivered() {
    let mut h = Harness::new(HarnessConfig::default());
    let mut n = 0;
    h.tamper = Some(Box::new(move |side, path, bytes| {
        let is_data = inspect::packet_type(bytes) == Some(PacketType::DataAck);
        if side == Side::Client && is_data {
            n += 1;
            if n == 3 {
                let hl = Packet::new_checked(&bytes[..]).unwrap().header_len();
                bytes.truncate(hl);
                let (c, s) = Harness::path_addrs(path.0 as usize);
                inspect::fix_checksum(bytes, c.ip(), s.ip());
            }
        }
        true
    }));
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    for k in 0..6u8 {
        let now = h.now;
        h.client.send(now, &[k; 50]).unwrap();
        h.drive_for(Duration::from_millis(20));
    }
    h.drive_for(Duration::from_millis(500));
    let got: Vec<u8> = h
        .server_events
        .iter()
        .filter_map(|e| match e {
            Event::Delivered { data, .. } => Some(data.first().copied().unwrap_or(255)),
            _ => None,
        })
        .collect();
    assert_eq!(got, [0, 1, 3, 4, 5]);
}
