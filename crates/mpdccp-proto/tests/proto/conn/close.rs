//! Graceful close (MP_CLOSE on every subflow) and fast close (Reset 13 with
//! MP_FAST_CLOSE).

use std::time::Duration;

use crate::common;
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, Side};
use mpdccp_proto::wire::mp::subtype as mp;
use mpdccp_proto::{Event, PathId};

fn two_path_session() -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: common::links(&[10, 25]),
        ..Default::default()
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    assert_eq!(h.server.paths().len(), 2);
    h
}

fn closed_reason(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match e {
        Event::Closed { reason } => Some(reason.clone()),
        _ => None,
    })
}

fn sent_on(h: &Harness, from: Side, path: u32, ty: PacketType) -> Vec<Vec<u8>> {
    h.wire
        .iter()
        .filter(|w| {
            w.from == from && w.path == PathId(path) && inspect::packet_type(&w.bytes) == Some(ty)
        })
        .map(|w| w.bytes.clone())
        .collect()
}

#[test]
fn graceful_close_sends_mp_close_on_every_subflow() {
    let mut h = two_path_session();
    let now = h.now;
    h.client.close(now);
    assert!(h.client.send(now, b"late").is_err(), "no data after close");
    h.drive_for(Duration::from_secs(3));
    assert!(h.client.is_closed() && h.server.is_closed());
    assert_eq!(closed_reason(&h.client_events).as_deref(), Some("closed"));
    assert_eq!(
        closed_reason(&h.server_events).as_deref(),
        Some("closed by peer")
    );
    for p in 0..2 {
        let closes = sent_on(&h, Side::Client, p, PacketType::Close);
        assert!(!closes.is_empty(), "Close on path {p}");
        assert!(
            closes
                .iter()
                .all(|b| inspect::find_mp_suboption(b, mp::CLOSE).is_some()),
            "MP_CLOSE in every Close on path {p}"
        );
        // The server answers Close with Reset code 1 (Closed).
        let resets = sent_on(&h, Side::Server, p, PacketType::Reset);
        assert!(
            resets.iter().any(|b| b[24] == 1),
            "Reset(Closed) on path {p}"
        );
        assert!(h.client_events.contains(&Event::PathClosed(PathId(p))));
        assert!(h.server_events.contains(&Event::PathClosed(PathId(p))));
    }
    // Nothing more is sent once both sides are closed.
    let n = h.wire.len();
    h.drive_for(Duration::from_secs(5));
    assert_eq!(h.wire.len(), n);
    assert!(h.client.poll_timeout().is_none() && h.server.poll_timeout().is_none());
}

#[test]
fn server_close_uses_closereq_so_the_client_holds_timewait() {
    let mut h = two_path_session();
    let now = h.now;
    h.server.close(now);
    h.drive_for(Duration::from_secs(3));
    assert!(h.client.is_closed() && h.server.is_closed());
    for p in 0..2 {
        assert!(!sent_on(&h, Side::Server, p, PacketType::CloseReq).is_empty());
        assert!(!sent_on(&h, Side::Client, p, PacketType::Close).is_empty());
    }
    assert_eq!(
        closed_reason(&h.client_events).as_deref(),
        Some("closed by peer")
    );
}

#[test]
fn graceful_close_survives_loss() {
    let mut h = two_path_session();
    for s in &mut h.specs {
        s.loss = 0.3;
    }
    let now = h.now;
    h.client.close(now);
    h.drive_for(Duration::from_secs(30));
    assert!(h.client.is_closed(), "client closed despite 30 % loss");
    assert!(h.server.is_closed(), "server closed despite 30 % loss");
}

#[test]
fn fast_close_resets_every_subflow_with_code_13() {
    let mut h = two_path_session();
    let now = h.now;
    h.client.fast_close(now);
    h.drive_for(Duration::from_millis(100));
    assert!(h.client.is_closed());
    assert!(
        h.server.is_closed(),
        "server closed within one one-way delay"
    );
    assert_eq!(
        closed_reason(&h.client_events).as_deref(),
        Some("fast close")
    );
    assert_eq!(
        closed_reason(&h.server_events).as_deref(),
        Some("fast close by peer")
    );
    for p in 0..2 {
        let resets = sent_on(&h, Side::Client, p, PacketType::Reset);
        assert_eq!(resets.len(), 1, "one Reset on path {p}");
        assert_eq!(resets[0][24], 13, "Reset code 13");
        assert!(inspect::find_mp_suboption(&resets[0], mp::FAST_CLOSE).is_some());
    }
}

#[test]
fn fast_close_with_a_wrong_key_is_ignored() {
    let mut h = two_path_session();
    h.tamper = Some(Box::new(|side, path, bytes| {
        if let Some(r) = inspect::find_mp_suboption(bytes, mp::FAST_CLOSE) {
            bytes[r.start] ^= 1;
            let (c, s) = Harness::path_addrs(path.0 as usize);
            let (a, b) = if side == Side::Client { (c, s) } else { (s, c) };
            inspect::fix_checksum(bytes, a.ip(), b.ip());
        }
        true
    }));
    let now = h.now;
    h.client.fast_close(now);
    h.drive_for(Duration::from_millis(100));
    assert!(h.server.stats().auth.bad_close_key >= 1);
    assert!(!h
        .server_events
        .iter()
        .any(|e| matches!(e, Event::Closed { .. })
            && closed_reason(&h.server_events).as_deref() == Some("fast close by peer")));
}
