//! `Endpoint`: a server for many clients — demultiplexing by remote key,
//! MP_JOIN routing by token, bounded half-open connections.

use mpdccp_proto::conn::codec::{ResetCode, Segment};
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::inspect;
use mpdccp_proto::{
    Connection, ConnectionConfig, Endpoint, EndpointConfig, Event, Instant, PathConfig, PathId,
    Role,
};

/// Remote key: (client number, path number).
type Key = (u32, u32);

struct World {
    ep: Endpoint<Key>,
    clients: Vec<Connection>,
    now: Instant,
    /// Datagrams the endpoint sent to each remote key.
    to_clients: Vec<(Key, Vec<u8>)>,
    server_events: Vec<(u64, Event)>,
}

impl World {
    /// One client whose first path is open at the default endpoint.
    fn one_connected_client() -> Self {
        let mut w = World::new(1, EndpointConfig::default());
        let now = w.now;
        w.clients[0]
            .add_path(now, PathId(0), PathConfig::default())
            .unwrap();
        for _ in 0..20 {
            w.step();
        }
        w
    }

    fn new(n: usize, cfg: EndpointConfig) -> Self {
        World {
            ep: Endpoint::new(cfg, 7),
            clients: (0..n)
                .map(|i| {
                    Connection::new(
                        Role::Client,
                        ConnectionConfig::default(),
                        Instant::ZERO,
                        100 + i as u64,
                    )
                })
                .collect(),
            now: Instant::ZERO,
            to_clients: Vec::new(),
            server_events: Vec::new(),
        }
    }

    /// Exchanges datagrams (zero latency) until nothing moves, then
    /// advances time by 1 ms.
    fn step(&mut self) {
        let mut buf = vec![0u8; 2048];
        for _ in 0..100 {
            let mut moved = false;
            for (c, conn) in self.clients.iter_mut().enumerate() {
                while let Some(t) = conn.poll_transmit(self.now, &mut buf) {
                    self.ep
                        .handle_datagram(self.now, (c as u32, t.path.0), &buf[..t.size]);
                    moved = true;
                }
            }
            while let Some((k, t)) = self.ep.poll_transmit(self.now, &mut buf) {
                let d = buf[..t.size].to_vec();
                self.to_clients.push((k, d.clone()));
                if let Some(conn) = self.clients.get_mut(k.0 as usize) {
                    conn.handle_datagram(self.now, PathId(k.1), &d);
                }
                moved = true;
            }
            while let Some((h, e)) = self.ep.poll_event() {
                self.server_events.push((h.0, e));
            }
            if !moved {
                break;
            }
        }
        self.now += std::time::Duration::from_millis(1);
        for conn in &mut self.clients {
            if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                conn.handle_timeout(self.now);
            }
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= self.now) {
            self.ep.handle_timeout(self.now);
        }
    }
}

#[test]
fn serves_two_clients_and_routes_joins_by_token() {
    let mut w = World::new(2, EndpointConfig::default());
    for c in 0..2 {
        let now = w.now;
        w.clients[c]
            .add_path(now, PathId(0), PathConfig::default())
            .unwrap();
    }
    for _ in 0..20 {
        w.step();
    }
    assert!(w.clients.iter().all(|c| c.is_established()));
    let hs = w.ep.connections();
    assert_eq!(hs.len(), 2);
    assert_eq!(w.ep.stats().accepted, 2);
    // Client 1 joins a second path; it must land on client 1's connection.
    let now = w.now;
    w.clients[1]
        .add_path(now, PathId(1), PathConfig::default())
        .unwrap();
    for _ in 0..20 {
        w.step();
    }
    let (h1, p1) = w.ep.route(&(1, 1)).expect("join routed");
    assert_eq!(Some(h1), w.ep.route(&(1, 0)).map(|r| r.0));
    assert_ne!(p1, PathId(0));
    assert_eq!(w.ep.connection(h1).unwrap().paths().len(), 2);
    let h0 = w.ep.route(&(0, 0)).unwrap().0;
    assert_eq!(w.ep.connection(h0).unwrap().paths().len(), 1);
    assert_eq!(w.ep.stats().joins_routed, 1);
    // Data from each client reaches its own connection.
    for (c, tag) in [(0usize, b'a'), (1, b'b')] {
        let now = w.now;
        w.clients[c].send(now, &[tag; 64]).unwrap();
    }
    for _ in 0..20 {
        w.step();
    }
    let got = |h: u64| -> Vec<u8> {
        w.server_events
            .iter()
            .filter(|(x, _)| *x == h)
            .filter_map(|(_, e)| match e {
                Event::Delivered { data, .. } => Some(data[0]),
                _ => None,
            })
            .collect()
    };
    assert_eq!(got(h0.0), vec![b'a']);
    assert_eq!(got(h1.0), vec![b'b']);
    // Server to client, through the endpoint.
    w.ep.send(w.now, h1, &[b'z'; 10]).unwrap();
    for _ in 0..20 {
        w.step();
    }
    let mut got_z = false;
    while let Some(e) = w.clients[1].poll_event() {
        if matches!(&e, Event::Delivered { data, .. } if data[0] == b'z') {
            got_z = true;
        }
    }
    assert!(got_z);
}

#[test]
fn join_with_unknown_token_gets_a_stateless_reset() {
    let mut w = World::one_connected_client();
    // A stranger sends a join Request copied from a real one, with a bogus token.
    let mut other = Connection::new(Role::Client, ConnectionConfig::default(), w.now, 999);
    other
        .add_path(w.now, PathId(0), PathConfig::default())
        .unwrap();
    let mut buf = vec![0u8; 2048];
    let t = other.poll_transmit(w.now, &mut buf).unwrap();
    let req = buf[..t.size].to_vec();
    assert_eq!(inspect::packet_type(&req), Some(PacketType::Request));
    // Build a join-looking request by re-using a real client's join.
    let now = w.now;
    w.clients[0]
        .add_path(now, PathId(5), PathConfig::default())
        .unwrap();
    let t = w.clients[0].poll_transmit(now, &mut buf).unwrap();
    let mut join = buf[..t.size].to_vec();
    let r = inspect::find_mp_suboption(&join, 1).expect("MP_JOIN");
    join[r.start + 1] ^= 0xff; // corrupt the token
    let before = w.to_clients.len();
    w.ep.handle_datagram(w.now, (77, 0), &join);
    w.step();
    assert_eq!(w.ep.stats().unknown_token, 1);
    let resets: Vec<_> = w.to_clients[before..]
        .iter()
        .filter(|(k, d)| *k == (77, 0) && inspect::packet_type(d) == Some(PacketType::Reset))
        .collect();
    assert_eq!(resets.len(), 1, "one stateless Reset to the stranger");
    assert_eq!(w.ep.connections().len(), 1, "no connection created");
}

/// RFC 9897 §3.6 (F2) through the endpoint: a join routed to a live
/// connection by its real token but offering Multipath Capable version 1
/// only is refused with Reset 5 (Option Error); once that Reset is out
/// neither the connection nor the endpoint keeps anything of it (no
/// subflow, no route), and the client's own join on that connection
/// still opens.
#[test]
fn join_with_another_mp_capable_version_is_refused_and_leaves_no_route() {
    let mut w = World::one_connected_client();
    let h = w.ep.route(&(0, 0)).expect("connection").0;
    // The client's real join Request (token right), taken before it is
    // delivered, with its Change R(10) 0 turned into Change R(10) 0x10.
    let mut buf = vec![0u8; 2048];
    let now = w.now;
    w.clients[0]
        .add_path(now, PathId(1), PathConfig::default())
        .unwrap();
    let t = w.clients[0].poll_transmit(now, &mut buf).unwrap();
    let mut join = buf[..t.size].to_vec();
    assert!(inspect::find_mp_suboption(&join, 1).is_some(), "MP_JOIN");
    let at = join
        .windows(4)
        .position(|o| o == [34, 4, 10, 0])
        .expect("Change R(10) 0 in the join Request");
    join[at + 3] = 0x10;
    let before = w.to_clients.len();
    w.ep.handle_datagram(w.now, (77, 0), &join);
    assert_eq!(w.ep.stats().joins_routed, 1);
    w.step();
    let resets: Vec<_> = w.to_clients[before..]
        .iter()
        .filter(|(k, _)| *k == (77, 0))
        .map(|(_, d)| Segment::parse(d, None).expect("our Reset parses"))
        .map(|s| (s.ptype, s.reset_code))
        .collect();
    assert_eq!(resets, vec![(PacketType::Reset, ResetCode::OptionError)]);
    let c = w.ep.connection(h).unwrap();
    assert_eq!(c.stats().auth.join_bad_mp_capable, 1);
    assert_eq!(c.paths().len(), 1, "no subflow kept for the refused join");
    assert_eq!(w.ep.route(&(77, 0)), None, "no route kept");
    // The genuine join (retransmitted) still gets through.
    for _ in 0..1500 {
        w.step();
    }
    assert_eq!(w.ep.route(&(0, 1)).map(|r| r.0), Some(h));
    assert_eq!(w.ep.connection(h).unwrap().paths().len(), 2);
}

#[test]
fn half_open_connections_are_bounded() {
    let cfg = EndpointConfig {
        max_half_open: 8,
        ..Default::default()
    };
    let mut ep: Endpoint<Key> = Endpoint::new(cfg, 1);
    let mut buf = vec![0u8; 2048];
    // 100 Requests from 100 remotes that never complete the handshake.
    for i in 0..100u32 {
        let mut c = Connection::new(
            Role::Client,
            ConnectionConfig::default(),
            Instant::ZERO,
            i as u64,
        );
        c.add_path(Instant::ZERO, PathId(0), PathConfig::default())
            .unwrap();
        let t = c.poll_transmit(Instant::ZERO, &mut buf).unwrap();
        let req = buf[..t.size].to_vec();
        ep.handle_datagram(Instant::ZERO, (i, 0), &req);
    }
    assert_eq!(ep.connections().len(), 8);
    assert_eq!(ep.stats().refused_half_open, 92);
    // Garbage never creates state either.
    for i in 0..1000u32 {
        let junk = [i as u8; 40];
        ep.handle_datagram(Instant::ZERO, (1000 + i, 0), &junk);
    }
    assert_eq!(ep.connections().len(), 8);
    let s = ep.stats();
    assert_eq!(s.malformed + s.unknown_remote, 1000);
    // Pending stateless Resets are bounded too.
    let mut n = 0;
    while ep.poll_transmit(Instant::ZERO, &mut buf).is_some() {
        n += 1;
        assert!(n < 10_000);
    }
    assert!(n <= 64 + 8 * 4, "{n} datagrams");
}

/// A client's graceful close ends within one round trip: the server answers
/// the Close (MP_CLOSE) with its Reset before the endpoint forgets the
/// connection. The endpoint used to drop the connection with the Reset
/// still owed, so the client waited for its Close retransmission (0.5 s)
/// and `mpdccp client` took that long to exit on SIGTERM.
#[test]
fn graceful_close_is_answered_before_the_connection_is_forgotten() {
    let mut w = World::one_connected_client();
    assert!(w.clients[0].is_established());
    let sent_before = w.to_clients.len();
    let now = w.now;
    w.clients[0].close(now);
    for _ in 0..3 {
        w.step();
    }
    assert!(
        w.clients[0].is_closed(),
        "client still closing 3 ms after close (zero-latency links)"
    );
    let answers: Vec<_> = w.to_clients[sent_before..]
        .iter()
        .map(|(_, d)| inspect::packet_type(d).expect("valid packet"))
        .collect();
    assert_eq!(answers, vec![PacketType::Reset], "{answers:?}");
    assert!(w.ep.connections().is_empty());
    assert_eq!(w.ep.stats().closed_connections, 1);
}

/// The deadline index answers what a scan of every connection would:
/// `poll_timeout` is the earliest connection deadline at every step,
/// `handle_timeout` leaves none expired, and once the output is drained
/// no connection is scanned one by one (the server's per-packet work does
/// not grow with idle clients).
#[test]
fn deadline_index_agrees_with_a_scan_and_idle_connections_cost_nothing() {
    let n = 48;
    let mut w = World::new(n, EndpointConfig::default());
    let scan = |ep: &Endpoint<Key>| {
        ep.connections()
            .into_iter()
            .filter_map(|h| ep.connection(h)?.poll_timeout())
            .min()
    };
    for c in 0..n {
        let now = w.now;
        w.clients[c]
            .add_path(now, PathId(0), PathConfig::default())
            .unwrap();
    }
    let mut idle_checks = 0;
    let (mut up_sent, mut down_sent, mut down_got) = (0, 0, 0);
    for step in 0..3_000u32 {
        // Some traffic each way, then quiet; a few clients leave.
        if step % 50 == 0 && step < 1_500 {
            let now = w.now;
            for c in (0..n).step_by(5) {
                up_sent += usize::from(w.clients[c].send(now, &[c as u8; 200]).is_ok());
            }
            if let Some(&h) = w.ep.connections().get(step as usize % 7) {
                down_sent += usize::from(w.ep.send(now, h, &[0xEE; 300]).is_ok());
            }
        }
        if step == 2_000 {
            let now = w.now;
            for c in 0..4 {
                w.clients[c].close(now);
            }
        }
        w.step();
        for c in &mut w.clients {
            while let Some(e) = c.poll_event() {
                down_got += usize::from(matches!(e, Event::Delivered { .. }));
            }
        }
        assert_eq!(w.ep.poll_timeout(), scan(&w.ep), "step {step}");
        let now = w.now;
        for h in w.ep.connections() {
            let t = w.ep.connection(h).unwrap().poll_timeout();
            assert!(
                t.is_none_or(|t| t > now),
                "step {step}: connection {h:?} left expired at {t:?}"
            );
        }
        // After step() drained the endpoint's output, only the
        // connections that step's timers touched are still looked at.
        let mut buf = vec![0u8; 2048];
        if w.ep.poll_transmit(now, &mut buf).is_none() {
            assert_eq!(w.ep.connections_with_work(), 0, "step {step}");
            idle_checks += 1;
        }
    }
    assert!(w.clients[4..].iter().all(|c| c.is_established()));
    assert_eq!(w.ep.connections().len(), n - 4, "closed clients forgotten");
    assert!(idle_checks > 2_000);
    // Everything sent either way arrived (no connection was left unpolled).
    let up_got = w
        .server_events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Delivered { .. }))
        .count();
    assert!(up_sent > 0 && down_sent > 0);
    assert_eq!((up_got, down_got), (up_sent, down_sent));
}
