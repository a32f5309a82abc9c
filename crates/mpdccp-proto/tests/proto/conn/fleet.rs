//! A gateway fleet, sans IO (docs/FLEET.md): two endpoints stand for two
//! hosts behind one anycast address, each path of the client is sent to
//! one of them as ECMP would. The owner's CI carries its host id; its
//! MP_ADDADDR (with MP_HMAC) reaches the client; a join ECMP sends to
//! the other host is answered with a Reset there, counted
//! `join_other_host`, and a join to the owner opens.

use mpdccp_proto::conn::codec::{ResetCode, Segment};
use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::inspect;
use mpdccp_proto::{
    Connection, ConnectionConfig, Endpoint, EndpointConfig, Event, Instant, PathConfig, PathId,
    PathState, Role,
};
use std::net::SocketAddr;
use std::time::Duration;

/// Remote key at a host: the client's path number.
type Key = u32;

struct Fleet {
    hosts: [Endpoint<Key>; 2],
    client: Connection,
    /// Which host each client path reaches (ECMP's choice).
    host_of_path: Vec<usize>,
    now: Instant,
    client_events: Vec<Event>,
    host_events: [Vec<Event>; 2],
    /// Packet types each host sent, with the path.
    sent: [Vec<(u32, Vec<u8>)>; 2],
}

impl Fleet {
    fn new() -> Fleet {
        let mut hosts = [
            Endpoint::new(EndpointConfig::default(), 1),
            Endpoint::new(EndpointConfig::default(), 2),
        ];
        hosts[0].set_fleet_host(1);
        hosts[1].set_fleet_host(2);
        Fleet {
            hosts,
            client: Connection::new(Role::Client, ConnectionConfig::default(), Instant::ZERO, 5),
            host_of_path: Vec::new(),
            now: Instant::ZERO,
            client_events: Vec::new(),
            host_events: [Vec::new(), Vec::new()],
            sent: [Vec::new(), Vec::new()],
        }
    }

    fn add_path(&mut self, to_host: usize) -> PathId {
        let id = PathId(self.host_of_path.len() as u32);
        self.host_of_path.push(to_host);
        let now = self.now;
        self.client
            .add_path(now, id, PathConfig::default())
            .unwrap();
        id
    }

    fn run(&mut self, ms: u64) {
        let mut buf = vec![0u8; 2048];
        for _ in 0..ms {
            for _ in 0..50 {
                let mut moved = false;
                while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
                    let h = self.host_of_path[t.path.0 as usize];
                    self.hosts[h].handle_datagram(self.now, t.path.0, &buf[..t.size]);
                    moved = true;
                }
                for h in 0..2 {
                    while let Some((k, t)) = self.hosts[h].poll_transmit(self.now, &mut buf) {
                        let d = buf[..t.size].to_vec();
                        self.client.handle_datagram(self.now, PathId(k), &d);
                        self.sent[h].push((k, d));
                        moved = true;
                    }
                    while let Some((_, e)) = self.hosts[h].poll_event() {
                        self.host_events[h].push(e);
                    }
                }
                while let Some(e) = self.client.poll_event() {
                    self.client_events.push(e);
                }
                if !moved {
                    break;
                }
            }
            self.now += Duration::from_millis(1);
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
            for h in &mut self.hosts {
                if h.poll_timeout().is_some_and(|t| t <= self.now) {
                    h.handle_timeout(self.now);
                }
            }
        }
    }

    fn path_state(&self, id: PathId) -> Option<PathState> {
        self.client
            .paths()
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.state)
    }
}

fn reset_code(d: &[u8]) -> ResetCode {
    Segment::parse(d, None)
        .expect("our Reset parses")
        .reset_code
}

#[test]
fn a_join_at_the_wrong_host_is_reset_and_the_advertised_address_leads_to_the_owner() {
    let mut f = Fleet::new();
    // The first subflow hashes to host 1 (index 0).
    f.add_path(0);
    f.run(20);
    assert!(f.client.is_established());
    assert_eq!(
        f.client.remote_ci().map(|ci| ci >> 24),
        Some(1),
        "host id in the CI"
    );
    let owner = f.hosts[0].connections()[0];
    // Host 1 advertises its unicast address (no port: the first subflow's).
    let unicast: SocketAddr = "198.51.100.1:0".parse().unwrap();
    let now = f.now;
    f.hosts[0]
        .connection_mut(owner)
        .unwrap()
        .advertise_address(now, unicast)
        .unwrap();
    f.run(10);
    assert!(
        f.client_events
            .iter()
            .any(|e| matches!(e, Event::AddressAdded { addr, .. } if *addr == unicast)),
        "the client learned the owner's address: {:?}",
        f.client_events
    );

    // A join sent blindly to the service address that ECMP hashes to
    // host 2: a Reset (No Connection) from host 2, no state there.
    let blind = f.add_path(1);
    f.run(20);
    let s2 = f.hosts[1].stats();
    assert_eq!((s2.join_other_host, s2.unknown_token), (1, 0));
    assert!(f.hosts[1].connections().is_empty());
    let resets: Vec<_> = f.sent[1]
        .iter()
        .filter(|(k, d)| *k == blind.0 && inspect::packet_type(d) == Some(PacketType::Reset))
        .collect();
    assert_eq!(resets.len(), 1, "one Reset for the blind join");
    assert_eq!(reset_code(&resets[0].1), ResetCode::NoConnection);
    assert!(
        matches!(f.path_state(blind), None | Some(PathState::Closed)),
        "the client's blind join ended at once: {:?}",
        f.path_state(blind)
    );

    // The join to the advertised address reaches the owner and opens.
    let homed = f.add_path(0);
    f.run(20);
    assert_eq!(f.path_state(homed), Some(PathState::Active));
    assert_eq!(f.hosts[0].stats().joins_routed, 1);
    let active = f.hosts[0]
        .connection(owner)
        .unwrap()
        .paths()
        .iter()
        .filter(|p| p.state == PathState::Active)
        .count();
    assert_eq!(active, 2);
}

#[test]
fn a_host_without_a_fleet_id_counts_an_unknown_token_as_before() {
    let mut f = Fleet::new();
    f.hosts[1] = Endpoint::new(EndpointConfig::default(), 2);
    f.add_path(0);
    f.run(20);
    f.add_path(1);
    f.run(20);
    let s2 = f.hosts[1].stats();
    assert_eq!((s2.join_other_host, s2.unknown_token), (0, 1));
}

#[test]
fn a_closing_host_refuses_new_connections() {
    let mut f = Fleet::new();
    f.hosts[0].stop_accepting();
    f.add_path(0);
    f.run(20);
    assert!(!f.client.is_established());
    assert!(f.hosts[0].connections().is_empty());
    assert!(f.hosts[0].stats().refused_closing >= 1);
    let reset = f.sent[0]
        .iter()
        .find(|(_, d)| inspect::packet_type(d) == Some(PacketType::Reset))
        .expect("a Reset");
    assert_eq!(reset_code(&reset.1), ResetCode::TooBusy);
}
