//! The receive path's cost per datagram: how often one datagram is parsed
//! on its way from the endpoint to its connection, and whether a delivered
//! payload needs an allocation of its own.

use std::time::Duration;

use super::codec::PARSES;
use super::{
    Connection, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Incoming,
    PathConfig, Role,
};
use crate::path::PathId;
use crate::time::Instant;

fn parses_of(f: impl FnOnce()) -> u32 {
    PARSES.with(|n| n.set(0));
    f();
    PARSES.with(|n| n.get())
}

/// A server endpoint and a client's first datagram (its Request on path 0).
fn endpoint_and_request(now: Instant) -> (Endpoint<u32>, Vec<u8>) {
    let mut client = Connection::new(Role::Client, ConnectionConfig::default(), now, 1);
    client
        .add_path(now, PathId(0), PathConfig::default())
        .unwrap();
    let mut buf = vec![0u8; 2048];
    let t = client.poll_transmit(now, &mut buf).expect("a Request");
    buf.truncate(t.size);
    (Endpoint::new(EndpointConfig::default(), 7), buf)
}

#[test]
fn a_new_request_is_parsed_once() {
    let now = Instant::ZERO;
    let (mut ep, req) = endpoint_and_request(now);
    let n = parses_of(|| {
        ep.handle_datagram(now, 0, &req);
    });
    assert_eq!(ep.stats().accepted, 1);
    // Endpoint::dispatch parses; the connection takes its Segment.
    assert_eq!(n, 1);
}

#[test]
fn a_routed_datagram_is_parsed_once() {
    let now = Instant::ZERO;
    let (mut ep, req) = endpoint_and_request(now);
    ep.handle_datagram(now, 0, &req);
    // The retransmitted Request reaches the connection by its route.
    let n = parses_of(|| {
        ep.handle_datagram(now, 0, &req);
    });
    assert_eq!(n, 1, "Connection::handle_datagram only");
}

#[test]
fn a_parse_the_receiver_made_is_reused() {
    let now = Instant::ZERO;
    let (mut ep, req) = endpoint_and_request(now);
    let mut rx = Incoming::new(&req);
    let n = parses_of(|| {
        // A sharded server's steering reads the join token first.
        assert!(rx.parse(ConnectionConfig::default().wire_profile).is_ok());
        ep.handle_incoming(now, 0, None, &mut rx);
    });
    assert_eq!(ep.stats().accepted, 1);
    assert_eq!(n, 1);
}

#[test]
fn garbage_from_an_unknown_remote_is_counted_malformed() {
    let now = Instant::ZERO;
    let mut ep: Endpoint<u32> = Endpoint::new(EndpointConfig::default(), 7);
    let n = parses_of(|| {
        assert!(ep.handle_datagram(now, 3, &[0xff; 5]).is_none());
    });
    assert_eq!(ep.stats().malformed, 1);
    assert_eq!(n, 1);
}

/// Exchanges datagrams between a client and a server endpoint (no
/// latency; the endpoint's key is the client's path id) until neither
/// has anything to send.
fn exchange(client: &mut Connection, ep: &mut Endpoint<u32>, now: Instant) {
    let mut buf = vec![0u8; 2048];
    for _ in 0..100 {
        let mut moved = false;
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            ep.handle_datagram(now, t.path.0, &buf[..t.size]);
            moved = true;
        }
        while let Some((k, t)) = ep.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, PathId(k), &buf[..t.size]);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// The next payload the endpoint delivers, with its connection.
fn next_delivered(ep: &mut Endpoint<u32>) -> (ConnectionHandle, Vec<u8>) {
    while let Some((h, e)) = ep.poll_event() {
        if let Event::Delivered { data, .. } = e {
            return (h, data);
        }
    }
    panic!("nothing delivered");
}

#[test]
fn a_recycled_delivery_buffer_carries_the_next_payload() {
    let mut now = Instant::ZERO;
    let mut client = Connection::new(Role::Client, ConnectionConfig::default(), now, 1);
    let mut ep: Endpoint<u32> = Endpoint::new(EndpointConfig::default(), 7);
    client
        .add_path(now, PathId(0), PathConfig::default())
        .unwrap();
    for _ in 0..10 {
        exchange(&mut client, &mut ep, now);
        now += Duration::from_millis(1);
    }
    assert!(client.is_established());
    client.send(now, &[1; 200]).unwrap();
    exchange(&mut client, &mut ep, now);
    let (h, first) = next_delivered(&mut ep);
    let at = first.as_ptr();
    // As the server daemon does after its TUN write.
    ep.recycle_delivered(h, first);
    // Smaller: the recycled buffer holds it without growing.
    client.send(now, &[2; 100]).unwrap();
    exchange(&mut client, &mut ep, now);
    let (_, second) = next_delivered(&mut ep);
    assert_eq!(second, [2; 100]);
    assert_eq!(second.as_ptr(), at, "no new allocation for the payload");
}
