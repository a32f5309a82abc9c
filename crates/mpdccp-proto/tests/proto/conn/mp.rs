//! RFC 9897 behaviour: join authentication, connection identifiers,
//! subflow limits, fallback, MP_SEQ wrap-around, MP_PRIO, ADDADDR/REMOVEADDR.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::links;
use mpdccp_proto::conn::MpConfig;
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::mp::subtype as mp;
use mpdccp_proto::{ConnError, ConnectionConfig, Event, PathId, PathState};

fn established(paths: Vec<LinkSpec>) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths,
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    assert!(h.client.is_established() && h.server.is_established());
    h
}

/// Rewrites `bytes` (DCCP from `side` on `path`) and fixes the checksum.
fn retouch(side: Side, path: PathId, bytes: &mut [u8], f: impl FnOnce(&mut [u8])) {
    f(bytes);
    let (c, s) = Harness::path_addrs(path.0 as usize);
    let (src, dst) = if side == Side::Client { (c, s) } else { (s, c) };
    inspect::fix_checksum(bytes, src.ip(), dst.ip());
}

/// Sends `n` numbered packets from `side`, one per `gap`, then drains.
fn pump(h: &mut Harness, side: Side, n: u32, gap: Duration) {
    for k in 0..n {
        let now = h.now;
        let mut p = vec![0u8; 200];
        p[..4].copy_from_slice(&k.to_be_bytes());
        let _ = h.conn(side).send(now, &p);
        h.drive_for(gap);
    }
}

#[test]
fn forged_join_hmac_is_rejected_and_the_connection_is_unharmed() {
    let mut h = established(links(&[10, 20]));
    // Corrupt the client's MP_HMAC (HMAC(d-keyA, RA‖RB)) in the join's Ack.
    h.tamper = Some(Box::new(|side, path, bytes| {
        if side == Side::Client
            && path == PathId(1)
            && inspect::packet_type(bytes) == Some(PacketType::Ack)
        {
            if let Some(r) = inspect::find_mp_suboption(bytes, mp::HMAC) {
                retouch(side, path, bytes, |b| b[r.start] ^= 0x55);
            }
        }
        true
    }));
    h.open_path(1);
    h.drive_for(Duration::from_millis(500));
    let s = h.server.stats();
    assert_eq!(s.auth.join_bad_hmac, 1, "server rejected the forged HMAC");
    assert!(s.traffic.resets_sent >= 1, "and reset the subflow");
    assert!(h.client_events.contains(&Event::PathFailed(PathId(1))));
    assert!(!h.server_events.contains(&Event::PathEstablished(PathId(1))));
    // The connection is unharmed: path 0 still carries data.
    assert!(h.client.is_established() && h.server.is_established());
    h.tamper = None;
    pump(&mut h, Side::Client, 50, Duration::from_millis(2));
    h.drive_for(Duration::from_millis(200));
    assert_eq!(h.delivered(Side::Server).len(), 50);
    assert_eq!(h.server.paths()[0].state, PathState::Active);
}

#[test]
fn forged_response_hmac_is_rejected_by_the_client() {
    let mut h = established(links(&[10, 20]));
    h.tamper = Some(Box::new(|side, path, bytes| {
        if side == Side::Server
            && path == PathId(1)
            && inspect::packet_type(bytes) == Some(PacketType::Response)
        {
            if let Some(r) = inspect::find_mp_suboption(bytes, mp::HMAC) {
                retouch(side, path, bytes, |b| b[r.end - 1] ^= 1);
            }
        }
        true
    }));
    h.open_path(1);
    h.drive_for(Duration::from_millis(500));
    assert_eq!(h.client.stats().auth.join_bad_hmac, 1);
    assert!(h.client_events.contains(&Event::PathFailed(PathId(1))));
    assert!(h.client.is_established());
    assert_eq!(h.client.paths()[0].state, PathState::Active);
}

#[test]
fn join_with_unknown_connection_identifier_is_reset() {
    let mut h = established(links(&[10, 20]));
    let real = h.server.local_ci();
    h.tamper = Some(Box::new(move |side, path, bytes| {
        if side == Side::Client && inspect::packet_type(bytes) == Some(PacketType::Request) {
            if let Some(r) = inspect::find_mp_suboption(bytes, mp::JOIN) {
                // Body: addr id(1) | token(4) | nonce(4).
                retouch(side, path, bytes, |b| {
                    let bogus = real.wrapping_add(1);
                    b[r.start + 1..r.start + 5].copy_from_slice(&bogus.to_be_bytes());
                });
            }
        }
        true
    }));
    h.record = true;
    h.open_path(1);
    h.drive_for(Duration::from_millis(500));
    assert!(h.server.stats().auth.join_unknown_token >= 1);
    let reset_sent = h.wire.iter().any(|w| {
        w.from == Side::Server
            && w.path == PathId(1)
            && inspect::packet_type(&w.bytes) == Some(PacketType::Reset)
    });
    assert!(reset_sent, "server answered the unknown CI with a Reset");
    assert!(h.client_events.contains(&Event::PathFailed(PathId(1))));
    assert!(h.client.is_established() && h.server.is_established());
}

#[test]
fn joins_beyond_max_paths_get_reset_too_busy() {
    let mut h = Harness::new(HarnessConfig {
        paths: links(&[10, 15, 20]),
        server: ConnectionConfig {
            mp: MpConfig {
                max_paths: 2,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    });
    h.record = true;
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.open_path(2);
    h.drive_for(Duration::from_millis(500));
    assert_eq!(h.server.stats().auth.join_too_busy, 1);
    let busy = h.wire.iter().any(|w| {
        w.from == Side::Server && w.path == PathId(2) && {
            let b = &w.bytes;
            inspect::packet_type(b) == Some(PacketType::Reset) && b[24] == 9
        }
    });
    assert!(busy, "Reset code 9 (too busy) on the third path");
    assert!(h.client_events.contains(&Event::PathFailed(PathId(2))));
    assert!(h.client_events.contains(&Event::PathEstablished(PathId(1))));
}

#[test]
fn falls_back_to_plain_dccp_when_the_server_is_not_multipath() {
    let mut h = Harness::new(HarnessConfig {
        paths: links(&[10, 20]),
        server: ConnectionConfig {
            multipath: false,
            ..Default::default()
        },
        ..Default::default()
    });
    h.record = true;
    h.open_path(0);
    h.drive_for(Duration::from_millis(200));
    assert!(h.client.is_established() && h.server.is_established());
    assert_eq!(h.client.is_multipath(), Some(false));
    assert_eq!(h.server.is_multipath(), Some(false));
    assert_eq!(h.client.stats().auth.fallbacks, 1);
    assert_eq!(
        h.client.add_path(h.now, PathId(1), Default::default()),
        Err(ConnError::NotMultipath)
    );
    pump(&mut h, Side::Client, 20, Duration::from_millis(1));
    pump(&mut h, Side::Server, 20, Duration::from_millis(1));
    h.drive_for(Duration::from_millis(200));
    assert_eq!(h.delivered(Side::Server).len(), 20);
    assert_eq!(h.delivered(Side::Client).len(), 20);
    // No MP option after the Request.
    let mp_after_request = h.wire.iter().any(|w| {
        inspect::packet_type(&w.bytes) != Some(PacketType::Request)
            && (0..12).any(|st| inspect::find_mp_suboption(&w.bytes, st).is_some())
    });
    assert!(!mp_after_request, "plain DCCP carries no option 46");
}

#[test]
fn mp_seq_wraps_at_48_bits() {
    let start = (1u64 << 48) - 10;
    let mut h = Harness::new(HarnessConfig {
        paths: links(&[10, 12]),
        client: ConnectionConfig {
            mp: MpConfig {
                initial_seq: Some(start),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    });
    h.open_paths(2, Duration::from_millis(200));
    pump(&mut h, Side::Client, 40, Duration::from_millis(1));
    h.drive_for(Duration::from_millis(200));
    let got = h.delivered(Side::Server);
    assert_eq!(got.len(), 40);
    let mut seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
    seqs.sort_unstable();
    let expect: Vec<u64> = (start..start + 40).collect();
    assert_eq!(seqs, expect, "unwrapped MP_SEQ continues past 2^48");
    // Packets with MP_SEQ values on both sides of the wrap were delivered.
    let ids: Vec<u32> = got
        .iter()
        .map(|(_, d)| u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
        .collect();
    for (k, (s, _)) in got.iter().enumerate() {
        assert_eq!(*s - start, ids[k] as u64, "seq follows application order");
    }
}

#[test]
fn mp_prio_moves_cpf_traffic_off_a_standby_path() {
    let mut h = established(links(&[10, 30]));
    h.open_path(1);
    h.drive_for(Duration::from_millis(300));
    // CPF prefers the 10 ms path while both are primary.
    let before = |h: &Harness, side: Side, p: u32| {
        h.conn_ref(side).path_stats(PathId(p)).unwrap().tx_data_pkts
    };
    pump(&mut h, Side::Server, 50, Duration::from_millis(5));
    let s0 = before(&h, Side::Server, 0);
    let s1 = before(&h, Side::Server, 1);
    assert!(s0 >= 45 && s1 <= 5, "server first uses path 0: {s0}/{s1}");
    // The client marks path 0 as standby; MP_PRIO tells the server.
    let now = h.now;
    h.client.set_priority(now, PathId(0), 1);
    h.drive_for(Duration::from_millis(200));
    assert!(h.server_events.contains(&Event::PriorityChanged {
        path: PathId(0),
        priority: 1
    }));
    assert_eq!(h.server.paths()[0].priority, 1);
    pump(&mut h, Side::Server, 50, Duration::from_millis(5));
    let d0 = before(&h, Side::Server, 0) - s0;
    let d1 = before(&h, Side::Server, 1) - s1;
    assert!(d1 >= 45 && d0 <= 5, "server moved to path 1: {d0}/{d1}");
    // Confirmed: the client stops retransmitting MP_PRIO.
    assert_eq!(h.client.stats().paths.mp_option_unconfirmed, 0);
}

#[test]
fn addaddr_and_removeaddr_are_confirmed_under_20_percent_loss() {
    let mut paths = links(&[10, 20]);
    let mut h = established(paths.clone());
    for p in &mut paths {
        p.loss = 0.2;
    }
    h.specs = paths;
    h.open_path(1);
    h.drive_for(Duration::from_secs(3));
    let addr: SocketAddr = "192.0.2.33:5000".parse().unwrap();
    let addr2: SocketAddr = "[2001:db8::7]:6000".parse().unwrap();
    let now = h.now;
    let id = h.client.advertise_address(now, addr).unwrap();
    let id2 = h.client.advertise_address(now, addr2).unwrap();
    h.drive_for(Duration::from_secs(5));
    assert!(h.server_events.contains(&Event::AddressAdded { id, addr }));
    assert!(h.server_events.contains(&Event::AddressAdded {
        id: id2,
        addr: addr2
    }));
    assert!(h.client_events.contains(&Event::AddressConfirmed { id }));
    assert!(h
        .client_events
        .contains(&Event::AddressConfirmed { id: id2 }));
    assert_eq!(h.server.remote_addresses(), vec![(id, addr), (id2, addr2)]);
    let now = h.now;
    h.client.withdraw_address(now, id).unwrap();
    h.drive_for(Duration::from_secs(5));
    assert!(h.server_events.contains(&Event::AddressRemoved { id }));
    assert_eq!(h.server.remote_addresses(), vec![(id2, addr2)]);
    let confirmed = h
        .client_events
        .iter()
        .filter(|e| **e == Event::AddressConfirmed { id })
        .count();
    assert_eq!(confirmed, 2, "ADDADDR and REMOVEADDR both confirmed");
    // Each AddressAdded is reported once despite retransmissions.
    let added = h
        .server_events
        .iter()
        .filter(|e| matches!(e, Event::AddressAdded { .. }))
        .count();
    assert_eq!(added, 2);
    assert_eq!(h.client.stats().paths.mp_option_unconfirmed, 0);
    assert_eq!(h.server.stats().auth.addaddr_bad_hmac, 0);
}

#[test]
fn forged_addaddr_hmac_is_ignored() {
    let mut h = established(links(&[10]));
    h.tamper = Some(Box::new(|side, path, bytes| {
        if side == Side::Client {
            if let Some(r) = inspect::find_mp_suboption(bytes, mp::ADDADDR) {
                // Change the advertised address after the HMAC was computed.
                retouch(side, path, bytes, |b| b[r.start + 5] ^= 0xff);
            }
        }
        true
    }));
    let now = h.now;
    h.client
        .advertise_address(now, "192.0.2.1:1".parse().unwrap())
        .unwrap();
    h.drive_for(Duration::from_secs(2));
    assert!(h.server.stats().auth.addaddr_bad_hmac >= 1);
    assert!(h.server.remote_addresses().is_empty());
    assert!(!h
        .server_events
        .iter()
        .any(|e| matches!(e, Event::AddressAdded { .. })));
}

#[test]
fn join_completes_when_the_servers_confirming_ack_is_lost() {
    let mut h = established(links(&[10, 20]));
    // Drop the server's first Ack on path 1 (the 4th handshake packet).
    let mut dropped = false;
    h.tamper = Some(Box::new(move |side, path, bytes| {
        if side == Side::Server
            && path == PathId(1)
            && !dropped
            && inspect::packet_type(bytes) == Some(PacketType::Ack)
        {
            dropped = true;
            return false;
        }
        true
    }));
    h.open_path(1);
    h.drive_for(Duration::from_secs(2));
    assert!(
        h.client
            .paths()
            .iter()
            .all(|p| p.state == PathState::Active),
        "client left PARTOPEN: {:?}",
        h.client.paths()
    );
    assert!(h.client_events.contains(&Event::PathEstablished(PathId(1))));
}
