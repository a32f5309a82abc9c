//! NAT rebinding at the server `Endpoint` (`conn/rebind.rs`):
//! a client path's packets arrive from a new remote key mid-transfer. The
//! world below puts a NAT next to the client: each client path has a
//! public key (port) that can change at once; the server's datagrams to a
//! key no path maps any more are lost, as at a real NAT whose mapping
//! expired. 10 ms each way.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use mpdccp_proto::conn::{ConnectionHandle, PacketType};
use mpdccp_proto::harness::{inspect, session_keys};
use mpdccp_proto::{
    Connection, ConnectionConfig, Endpoint, EndpointConfig, Event, Instant, PathConfig, PathId,
    Role,
};

type Key = u32;

const ONE_WAY: Duration = Duration::from_millis(10);
const LEN: usize = 300;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Up(Key),
    Down(Key),
}

struct World {
    ep: Endpoint<Key>,
    client: Connection,
    now: Instant,
    /// The NAT: the public key of each client path.
    nat: Vec<Key>,
    wire: Vec<(Instant, Dir, Vec<u8>)>,
    /// Upstream datagrams taken off the wire instead of sent (`tap_up`).
    tapped: Vec<(u32, Vec<u8>)>,
    tap_up: bool,
    /// Downstream datagrams to keys no path maps (lost at the NAT).
    to_dead_keys: Vec<(Key, Vec<u8>)>,
    up_delivered: Vec<u32>,
    down_delivered: Vec<u32>,
    server_resets_sent: usize,
    next_up: u32,
    next_down: u32,
}

fn payload(k: u32) -> Vec<u8> {
    let mut p = vec![0x5a; LEN];
    p[..4].copy_from_slice(&k.to_be_bytes());
    p
}

fn id_of(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

impl World {
    /// One client, path 0 through NAT key 40001, connected.
    fn connected(protected: bool) -> World {
        let mut w = World {
            ep: Endpoint::new(EndpointConfig::default(), 7),
            client: Connection::new(Role::Client, ConnectionConfig::default(), Instant::ZERO, 99),
            now: Instant::ZERO,
            nat: vec![40001, 41001],
            wire: Vec::new(),
            tapped: Vec::new(),
            tap_up: false,
            to_dead_keys: Vec::new(),
            up_delivered: Vec::new(),
            down_delivered: Vec::new(),
            server_resets_sent: 0,
            next_up: 0,
            next_down: 0,
        };
        w.client
            .add_path(Instant::ZERO, PathId(0), PathConfig::default())
            .unwrap();
        w.run(Duration::from_millis(200));
        assert!(w.client.is_established());
        if protected {
            let (c, s) = session_keys(5);
            w.client.enable_payload_protection(c);
            let h = w.handle();
            w.ep.connection_mut(h).unwrap().enable_payload_protection(s);
        }
        w
    }

    fn handle(&self) -> ConnectionHandle {
        let hs = self.ep.connections();
        assert_eq!(hs.len(), 1, "one connection");
        hs[0]
    }

    /// One millisecond: arrivals, then output, then timers.
    fn tick(&mut self) {
        let now = self.now;
        let (due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|(t, _, _)| *t <= now);
        self.wire = rest;
        for (_, dir, d) in due {
            match dir {
                Dir::Up(k) => {
                    self.ep.handle_datagram(now, k, &d);
                }
                Dir::Down(k) => match self.nat.iter().position(|&m| m == k) {
                    Some(p) => self.client.handle_datagram(now, PathId(p as u32), &d),
                    None => self.to_dead_keys.push((k, d)),
                },
            }
        }
        let mut buf = vec![0u8; 2048];
        while let Some(t) = self.client.poll_transmit(now, &mut buf) {
            let d = buf[..t.size].to_vec();
            if self.tap_up {
                self.tapped.push((t.path.0, d));
            } else {
                let k = self.nat[t.path.0 as usize];
                self.wire.push((now + ONE_WAY, Dir::Up(k), d));
            }
        }
        while let Some((k, t)) = self.ep.poll_transmit(now, &mut buf) {
            let d = buf[..t.size].to_vec();
            if inspect::packet_type(&d) == Some(PacketType::Reset) {
                self.server_resets_sent += 1;
            }
            self.wire.push((now + ONE_WAY, Dir::Down(k), d));
        }
        while let Some(e) = self.client.poll_event() {
            if let Event::Delivered { data, .. } = e {
                self.down_delivered.push(id_of(&data));
            }
        }
        while let Some((_, e)) = self.ep.poll_event() {
            if let Event::Delivered { data, .. } = e {
                self.up_delivered.push(id_of(&data));
            }
        }
        self.now += Duration::from_millis(1);
        let now = self.now;
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
    }

    fn run(&mut self, d: Duration) {
        for _ in 0..d.as_millis() {
            self.tick();
        }
    }

    /// One packet each way per ms for `d`.
    fn stream(&mut self, d: Duration) {
        let h = self.handle();
        for _ in 0..d.as_millis() {
            let now = self.now;
            self.client.send(now, &payload(self.next_up)).unwrap();
            self.next_up += 1;
            self.ep.send(now, h, &payload(self.next_down)).unwrap();
            self.next_down += 1;
            self.tick();
        }
    }

    /// The first tapped upstream datagram of one of `types`.
    fn tapped_of(&self, types: &[PacketType]) -> Option<usize> {
        self.tapped
            .iter()
            .position(|(_, d)| inspect::packet_type(d).is_some_and(|t| types.contains(&t)))
    }

    /// Downstream datagrams to `key` (a key no client path maps).
    fn sent_to(&self, key: Key) -> Vec<&Vec<u8>> {
        self.to_dead_keys
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, d)| d)
            .collect()
    }

    /// The client's path ids and the server's, each (id, open).
    fn path_ids(&self) -> (Vec<u32>, Vec<u32>) {
        let h = self.handle();
        let ids = |c: &Connection| c.paths().iter().map(|p| p.id.0).collect::<Vec<_>>();
        (ids(&self.client), ids(self.ep.connection(h).unwrap()))
    }
}

fn missing(got: &[u32], n: u32) -> Vec<u32> {
    let mut seen = vec![false; n as usize];
    for &g in got.iter().filter(|&&g| g < n) {
        seen[g as usize] = true;
    }
    (0..n).filter(|&k| !seen[k as usize]).collect()
}

/// The rebinding mid-transfer keeps the connection, its subflow ids and
/// all data but what was in flight towards the dead mapping; the route
/// moves after one challenge round trip.
fn rebinding_mid_transfer(protected: bool) {
    let mut w = World::connected(protected);
    let h = w.handle();
    let paths_before = w.path_ids();
    w.stream(Duration::from_millis(500));
    // The NAT's mapping expires; the next packets leave from 40002.
    w.nat[0] = 40002;
    w.stream(Duration::from_millis(500));
    w.run(Duration::from_millis(300));

    let s = w.ep.stats();
    println!(
        "protected={protected}: candidates {} validated {} rejected {} unknown_remote {}; \
         up {}/{} down {}/{} delivered, {} datagrams to the dead mapping",
        s.rebind_candidates,
        s.rebinds_validated,
        s.rebind_rejected,
        s.unknown_remote,
        w.up_delivered.len(),
        w.next_up,
        w.down_delivered.len(),
        w.next_down,
        w.to_dead_keys.len()
    );
    assert_eq!(w.ep.connections(), vec![h], "same connection");
    assert_eq!(w.path_ids(), paths_before, "same subflow ids");
    assert_eq!(s.rebinds_validated, 1);
    assert_eq!(s.rebind_candidates, 1);
    assert_eq!(s.unknown_remote, 0);
    assert_eq!(s.accepted, 1);
    assert_eq!(w.server_resets_sent, 0, "no Reset");
    assert_eq!(w.client.stats().traffic.resets_received, 0);
    assert_eq!(w.ep.route(&40002), Some((h, PathId(0))));
    assert_eq!(w.ep.route(&40001), None, "the old key is forgotten");
    assert_eq!(w.ep.rebind_candidates(), 0);
    // Upstream: nothing lost (old-key packets still arrive by the old
    // route, which only moves after the challenge).
    assert_eq!(missing(&w.up_delivered, w.next_up), Vec::<u32>::new());
    // Downstream: at most what was in flight over one RTT (20 ms at one
    // packet per ms) was sent to the dead mapping.
    let lost = missing(&w.down_delivered, w.next_down);
    let in_flight = (2 * ONE_WAY).as_millis() as usize;
    println!("downstream lost {lost:?} (bound {in_flight})");
    assert!(lost.len() <= in_flight, "{lost:?}");
    assert!(lost.iter().all(|&k| (490..510).contains(&k)), "{lost:?}");
    // Every datagram towards the dead mapping left before the server
    // heard from 40002 (none after the validation).
    assert!(w.to_dead_keys.iter().all(|(k, _)| *k == 40001));
}

#[test]
fn a_rebinding_mid_transfer_keeps_the_connection_and_moves_the_route() {
    rebinding_mid_transfer(false);
}

#[test]
fn a_rebinding_of_a_protected_connection_moves_on_its_sealed_data() {
    rebinding_mid_transfer(true);
}

/// A captured client data packet of path 0 (taken off the wire).
fn capture_data_packet(w: &mut World) -> Vec<u8> {
    w.tap_up = true;
    let now = w.now;
    w.client.send(now, &payload(900_000)).unwrap();
    const DATA: [PacketType; 2] = [PacketType::DataAck, PacketType::Data];
    for _ in 0..100 {
        w.tick();
        if w.tapped_of(&DATA).is_some() {
            break;
        }
    }
    w.tap_up = false;
    let i = w.tapped_of(&DATA).expect("a data packet");
    w.tapped.remove(i).1
}

fn unspecified() -> IpAddr {
    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
}

/// A connected world after `stream` of traffic each way and 50 ms to
/// settle, and its connection.
fn after_traffic(protected: bool, stream: Duration) -> (World, ConnectionHandle) {
    let mut w = World::connected(protected);
    let h = w.handle();
    w.stream(stream);
    w.run(Duration::from_millis(50));
    (w, h)
}

/// [`after_traffic`], then a client data packet of path 0 captured
/// ([`capture_data_packet`]): the world, its connection and the packet.
fn captured(protected: bool, stream: Duration) -> (World, ConnectionHandle, Vec<u8>) {
    let (mut w, h) = after_traffic(protected, stream);
    let good = capture_data_packet(&mut w);
    (w, h, good)
}

/// `d` with sequence number `seq` (mod 2^48) and a checksum that fits.
fn with_seq(d: &[u8], seq: u64) -> Vec<u8> {
    let mut d = d.to_vec();
    inspect::set_seq(&mut d, seq & ((1 << 48) - 1));
    inspect::fix_checksum(&mut d, unspecified(), unspecified());
    d
}

/// Nothing about the connection changed but counters.
fn assert_unmoved(w: &World, h: ConnectionHandle) {
    assert_eq!(w.ep.route(&40001), Some((h, PathId(0))));
    assert_eq!(w.ep.rebind_candidates(), 0);
    assert_eq!(w.ep.stats().rebinds_validated, 0);
    assert_eq!(w.ep.stats().rebind_candidates, 0);
    assert_eq!(w.ep.connections(), vec![h]);
}

#[test]
fn a_forged_packet_out_of_the_window_from_a_new_address_changes_nothing() {
    let (mut w, h, good) = captured(false, Duration::from_millis(50));
    let seq = inspect::seq(&good).unwrap();
    let delivered = w.up_delivered.len();
    let before = w.ep.connection(h).unwrap().stats();
    let path_before = w.ep.connection(h).unwrap().path_stats(PathId(0)).unwrap();
    for (i, off) in [1u64 << 30, 1 << 40, (1 << 47) + 5, 100_000]
        .iter()
        .enumerate()
    {
        let d = with_seq(&good, seq + off);
        w.ep.handle_datagram(w.now, 50_000 + i as u32, &d);
    }
    let s = w.ep.stats();
    assert_eq!(s.rebind_rejected, 4);
    assert_eq!(s.unknown_remote, 4);
    assert_unmoved(&w, h);
    let after = w.ep.connection(h).unwrap().stats();
    // Never reached the connection: no sequence check ran there, no Sync
    // owed to the real client, nothing delivered.
    assert_eq!(after.traffic.rx_datagrams, before.traffic.rx_datagrams);
    assert_eq!(after.rx.rx_seq_invalid, before.rx.rx_seq_invalid);
    assert_eq!(w.up_delivered.len(), delivered);
    let path_after = w.ep.connection(h).unwrap().path_stats(PathId(0)).unwrap();
    assert_eq!(path_after.rx_pkts, path_before.rx_pkts);
    w.tick();
    // Open mode answers unknown remotes as before: a Reset each (rate
    // limited), to the forged sources, none to the client's key.
    assert_eq!(w.server_resets_sent, 4);
    // The genuine packet, still valid, is accepted from a new key: the
    // check can tell them apart.
    w.ep.handle_datagram(w.now, 50_100, &good);
    assert_eq!(w.ep.stats().rebind_candidates, 1);
    assert_eq!(w.up_delivered.len(), delivered);
    w.tick();
    assert!(w.up_delivered.contains(&900_000));
}

#[test]
fn a_wrong_auth_tag_from_a_new_address_is_rejected_and_changes_nothing() {
    let (mut w, h, good) = captured(true, Duration::from_millis(50));
    w.run(Duration::from_millis(50));
    let before = w.ep.connection(h).unwrap().stats();
    let delivered = w.up_delivered.len();
    // A flipped bit in the sealed payload, and one in the tag (the last
    // byte): both inside the window, neither opens.
    for (i, at) in [good.len() - 40, good.len() - 1].into_iter().enumerate() {
        let mut d = good.clone();
        d[at] ^= 0x01;
        inspect::fix_checksum(&mut d, unspecified(), unspecified());
        w.ep.handle_datagram(w.now, 50_000 + i as u32, &d);
    }
    let s = w.ep.stats();
    assert_eq!(s.rebind_rejected, 2);
    assert_unmoved(&w, h);
    let after = w.ep.connection(h).unwrap().stats();
    assert_eq!(after.rx.rx_protect_failed, before.rx.rx_protect_failed + 2);
    assert_eq!(after.rx.rx_seq_invalid, before.rx.rx_seq_invalid);
    assert_eq!(after.traffic.delivered_pkts, before.traffic.delivered_pkts);
    assert_eq!(w.up_delivered.len(), delivered);
    // A pure Ack is not sealed: it cannot start a migration either (the
    // client acknowledges downstream data with pure Acks).
    w.tap_up = true;
    for k in 0..30 {
        let now = w.now;
        w.ep.send(now, h, &payload(k)).unwrap();
        w.tick();
    }
    w.tap_up = false;
    let ack = w.tapped[w.tapped_of(&[PacketType::Ack]).expect("a pure Ack")]
        .1
        .clone();
    w.ep.handle_datagram(w.now, 50_010, &ack);
    assert_eq!(w.ep.stats().rebind_rejected, 3);
    assert_eq!(w.ep.rebind_candidates(), 0);
    // The genuine sealed packet opens from a new key.
    w.ep.handle_datagram(w.now, 50_020, &good);
    assert_eq!(w.ep.stats().rebind_candidates, 1);
}

#[test]
fn a_flood_of_forged_packets_stays_bounded() {
    let (mut w, h, good) = captured(false, Duration::from_millis(50));
    let seq = inspect::seq(&good).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let n = 20_000u32;
    for i in 0..n {
        // xorshift: random sequence numbers, the genuine ports.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut d = good.clone();
        let s = if x.is_multiple_of(2) {
            x
        } else {
            seq + (1 << 20) + (x % 1000)
        };
        inspect::set_seq(&mut d, s & ((1 << 48) - 1));
        w.ep.handle_datagram(w.now, 100_000 + i, &d);
        if i % 1000 == 0 {
            // The server keeps emptying its output (Resets are bounded too).
            w.tick();
        }
    }
    let s = w.ep.stats();
    println!(
        "flood: rejected {} unknown_remote {} resets sent {} rate-limited {} dropped {}",
        s.rebind_rejected,
        s.unknown_remote,
        w.server_resets_sent,
        s.resets_rate_limited,
        s.resets_dropped
    );
    assert_eq!(s.rebind_rejected, u64::from(n));
    assert_unmoved(&w, h);
    assert!(w.server_resets_sent <= 200 * 2, "{}", w.server_resets_sent);
    // No more than the pending-Reset queue waits at once.
    assert!(s.resets_dropped > 0);
    // The real path still works: every packet of the stream arrives.
    w.stream(Duration::from_millis(100));
    w.run(Duration::from_millis(100));
    assert_eq!(w.next_up, 150);
    assert_eq!(missing(&w.up_delivered, w.next_up), Vec::<u32>::new());
    assert_eq!(missing(&w.down_delivered, w.next_down), Vec::<u32>::new());
}

#[test]
fn a_challenge_not_answered_from_the_new_address_does_not_move_the_route() {
    // An on-path attacker takes a genuine packet and sends it on from its
    // own address 66666; what is sent there reaches no client.
    let (mut w, h, good) = captured(false, Duration::from_millis(100));
    w.ep.handle_datagram(w.now, 66_666, &good);
    let s = w.ep.stats();
    assert_eq!(s.rebind_candidates, 1);
    assert_eq!(w.ep.rebind_candidates(), 1);
    w.stream(Duration::from_millis(200));
    // The challenge (one Sync) and at most 3x the bytes received went to
    // 66666; nothing came back from there.
    let to_attacker = w.sent_to(66_666);
    let bytes: usize = to_attacker.iter().map(|d| d.len()).sum();
    println!(
        "to the unvalidated key: {} datagrams, {bytes} bytes (received {})",
        to_attacker.len(),
        good.len()
    );
    assert!(to_attacker
        .iter()
        .any(|d| inspect::packet_type(d) == Some(PacketType::Sync)));
    assert!(bytes <= 3 * good.len(), "{bytes}");
    // A SyncAck from the old key does not validate the new one, and the
    // route stays.
    assert_eq!(w.ep.stats().rebinds_validated, 0);
    assert_eq!(w.ep.route(&40001), Some((h, PathId(0))));
    assert_eq!(w.ep.route(&66_666), None);
    // The candidate is forgotten after its lifetime; the connection never
    // noticed (nothing lost on the real path).
    w.stream(Duration::from_millis(3200));
    w.run(Duration::from_millis(200));
    assert_eq!(w.ep.rebind_candidates(), 0);
    assert_eq!(w.ep.stats().rebinds_validated, 0);
    assert_eq!(missing(&w.up_delivered, w.next_up), Vec::<u32>::new());
    let lost = missing(&w.down_delivered, w.next_down);
    assert!(lost.len() <= 2, "{lost:?}");
    assert_eq!(w.client.stats().traffic.resets_received, 0);
}

#[test]
fn a_forged_syncack_from_the_candidate_does_not_validate_it() {
    let (mut w, h, good) = captured(false, Duration::from_millis(100));
    w.ep.handle_datagram(w.now, 66_666, &good);
    w.run(Duration::from_millis(15));
    let sync = w
        .sent_to(66_666)
        .into_iter()
        .find(|d| inspect::packet_type(d) == Some(PacketType::Sync))
        .cloned()
        .expect("the challenge");
    // The attacker answers with a SyncAck acknowledging the wrong number.
    w.tap_up = true;
    w.client.handle_datagram(w.now, PathId(0), &sync);
    w.tick();
    w.tap_up = false;
    let syncack = w.tapped[w
        .tapped_of(&[PacketType::SyncAck])
        .expect("the client's SyncAck")]
    .1
    .clone();
    let mut wrong = syncack.clone();
    let n = wrong.len();
    // The acknowledgement number's last byte (ack subheader, bytes 18..24).
    wrong[23] ^= 0x40;
    assert!(n >= 24);
    inspect::fix_checksum(&mut wrong, unspecified(), unspecified());
    w.ep.handle_datagram(w.now, 66_666, &wrong);
    // The right one from another key.
    w.ep.handle_datagram(w.now, 77_777, &syncack);
    assert_eq!(w.ep.stats().rebinds_validated, 0);
    assert_eq!(w.ep.route(&40001), Some((h, PathId(0))));
    assert!(w.ep.stats().rebind_rejected >= 1);
    // The right one from the candidate validates it (the check can pass).
    w.ep.handle_datagram(w.now, 66_666, &syncack);
    assert_eq!(w.ep.stats().rebinds_validated, 1);
    assert_eq!(w.ep.route(&66_666), Some((h, PathId(0))));
}

/// A sniffed, in-window data packet re-sent from the attacker's own address
/// with one invalid option (Mandatory before a reserved option type): from
/// an address that has not been validated it is not acted on — the path is
/// not reset, no challenge starts, nothing is delivered (it once reset the
/// path before any validation: an outage per shot).
#[test]
fn an_in_window_packet_with_a_bad_option_from_a_new_address_changes_nothing() {
    let (mut w, h, good) = captured(false, Duration::from_millis(50));
    let mut d = good.clone();
    let hl = usize::from(d[4]) * 4;
    d.splice(hl..hl, [1u8, 100, 2, 0]);
    d[4] += 1;
    inspect::fix_checksum(&mut d, unspecified(), unspecified());
    let resets = w.ep.connection(h).unwrap().stats().traffic.resets_sent;
    let delivered = w.up_delivered.len();
    w.ep.handle_datagram(w.now, 50_200, &d);
    w.tick();
    assert_unmoved(&w, h);
    let c = w.ep.connection(h).unwrap();
    assert_eq!(
        c.stats().traffic.resets_sent,
        resets,
        "no Reset for the bad option"
    );
    assert!(c
        .paths()
        .iter()
        .all(|p| p.state == mpdccp_proto::PathState::Active));
    assert_eq!(w.up_delivered.len(), delivered);
}

/// A copy of a packet the server already received, sent on from the
/// attacker's own address (the matrix's mutated copies): not
/// the newest packet of its subflow, so it is no rebinding (RFC 9000 §9.3:
/// only the highest-numbered packet moves a path). Dropped and counted
/// before the connection sees it; no challenge, no budget. (It used to
/// start a challenge, and each copy renewed the budget that sends the
/// subflow's packets to the new address.)
#[test]
fn a_copy_of_a_received_packet_from_a_new_address_starts_no_challenge() {
    let (mut w, h, good) = captured(false, Duration::from_millis(50));
    // The genuine packet arrives first, by its route.
    w.ep.handle_datagram(w.now, 40001, &good);
    w.tick();
    assert!(w.up_delivered.contains(&900_000));
    let rx = w.ep.connection(h).unwrap().stats().traffic.rx_datagrams;
    for i in 0..1000 {
        w.ep.handle_datagram(w.now, 66_666, &good);
        if i % 100 == 0 {
            w.tick();
        }
    }
    w.stream(Duration::from_millis(100));
    w.run(Duration::from_millis(50));
    assert_unmoved(&w, h);
    assert_eq!(w.ep.stats().rebind_rejected, 1000);
    assert!(w.to_dead_keys.iter().all(|(k, _)| *k != 66_666));
    // The connection never saw the copies (its own traffic only).
    let rx_after = w.ep.connection(h).unwrap().stats().traffic.rx_datagrams;
    assert!(rx_after - rx <= 2 * 100 + 10, "{rx} → {rx_after}");
    assert_eq!(missing(&w.down_delivered, w.next_down), Vec::<u32>::new());
}

/// An on-path attacker that forwards a copy of each client packet from its
/// own address, ahead of the genuine one (it sits closer to the server),
/// for 1 s while the path carries a packet each way per ms: each copy is
/// the newest of its subflow and starts or renews a candidate, but the
/// genuine packets on the routed key show that path alive (RFC 9000
/// §9.3.3), so after the first budget only the rate-limited challenge goes
/// to the attacker and the downstream stays on the path. (It used to
/// follow the candidate's budget, 3x every copy's bytes, to the attacker:
/// in the lab the client heard nothing and gave the connection up.)
#[test]
fn copies_racing_a_live_path_from_a_new_address_take_none_of_its_downstream() {
    let (mut w, h) = after_traffic(false, Duration::from_millis(100));
    let down_before = w.next_down;
    let mut copied = 0;
    for _ in 0..1000 {
        w.stream(Duration::from_millis(1));
        // The upstream datagrams that left in this ms, copied at once.
        let fresh: Vec<Vec<u8>> = w
            .wire
            .iter()
            .filter(|(t, d, _)| {
                *t == w.now - Duration::from_millis(1) + ONE_WAY && *d == Dir::Up(40001)
            })
            .map(|(_, _, d)| d.clone())
            .collect();
        for d in fresh {
            w.ep.handle_datagram(w.now, 66_666, &d);
            copied += 1;
        }
    }
    w.run(Duration::from_millis(100));
    let to_attacker = w.sent_to(66_666);
    let bytes: usize = to_attacker.iter().map(|d| d.len()).sum();
    let syncs = to_attacker
        .iter()
        .filter(|d| inspect::packet_type(d) == Some(PacketType::Sync))
        .count();
    let lost = missing(&w.down_delivered, w.next_down);
    println!(
        "{copied} copies; to the attacker: {} datagrams ({syncs} Syncs, {bytes} bytes); \
         downstream lost {} of {}",
        to_attacker.len(),
        lost.len(),
        w.next_down - down_before
    );
    assert!(copied >= 1000, "{copied}");
    assert_eq!(w.ep.route(&40001), Some((h, PathId(0))));
    assert_eq!(w.ep.stats().rebinds_validated, 0);
    // Until the first genuine packet arrives (the copies lead it by the
    // one-way delay, 10 ms) the candidate's budget sends the downstream
    // to the attacker, as after a real rebinding; then nothing, not even
    // a new challenge (it would take the subflow's next Sync, which a
    // failed path's probe or a resynchronisation needs, to the copier).
    let lead = ONE_WAY.as_millis() as usize;
    assert!(
        to_attacker.len() - syncs <= lead,
        "{} data",
        to_attacker.len() - syncs
    );
    assert_eq!(syncs, 1, "the first challenge only");
    assert!(lost.len() <= lead, "{lost:?}");
    assert!(lost.iter().all(|&k| k < down_before + 20), "{lost:?}");
    assert_eq!(w.client.stats().traffic.resets_received, 0);
}

/// A connected world in which a copy of an upstream packet still in
/// flight reached the server from the copier's key (66 666) first: one
/// rebinding candidate. Returns the world, the connection and the packet.
fn copy_racing_its_packet() -> (World, ConnectionHandle, Vec<u8>) {
    let (mut w, h) = after_traffic(false, Duration::from_millis(100));
    w.stream(Duration::from_millis(1));
    let (_, _, fresh) = w
        .wire
        .iter()
        .rev()
        .find(|(_, d, _)| *d == Dir::Up(40001))
        .cloned()
        .expect("an upstream datagram in flight");
    w.ep.handle_datagram(w.now, 66_666, &fresh);
    assert_eq!(w.ep.rebind_candidates(), 1);
    (w, h, fresh)
}

/// Once the routed key has shown its path alive, copies pushed ahead of
/// the numbers the client has sent (a mutated sequence byte, as in the
/// matrix's flood) from the attacker's key are not processed: processing
/// one moved the server's GSR past the client's GSS, so the client found
/// the server's acknowledgements invalid (RFC 4340 §7.5.3) and the path
/// resynchronised or failed, again with every such copy (18-114 of 320
/// pings lost with the budget already fixed).
#[test]
fn copies_ahead_of_the_clients_numbers_from_a_contested_key_move_nothing() {
    let (mut w, h, fresh) = copy_racing_its_packet();
    // The genuine packet arrives from the routed key: contested.
    w.stream(Duration::from_millis(50));
    let invalid = w.client.stats().rx.rx_seq_invalid;
    let rejected = w.ep.stats().rebind_rejected;
    let (up_before, down_before) = (w.next_up, w.next_down);
    let seq = inspect::seq(&fresh).unwrap();
    for k in 0..2000u64 {
        let d = with_seq(&fresh, seq + 500 + k);
        w.ep.handle_datagram(w.now, 66_666, &d);
        if k % 10 == 0 {
            w.stream(Duration::from_millis(1));
        }
    }
    w.run(Duration::from_millis(100));
    let s = w.ep.stats();
    println!(
        "rejected {} (+{}), client rx_seq_invalid +{}",
        s.rebind_rejected,
        s.rebind_rejected - rejected,
        w.client.stats().rx.rx_seq_invalid - invalid
    );
    assert_eq!(s.rebind_rejected - rejected, 2000);
    assert_eq!(w.client.stats().rx.rx_seq_invalid, invalid);
    assert_eq!(s.rebinds_validated, 0);
    assert_eq!(w.ep.route(&40001), Some((h, PathId(0))));
    let lost = |got: &[u32], from: u32, to: u32| {
        missing(got, to)
            .into_iter()
            .filter(|&k| k >= from)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        lost(&w.up_delivered, up_before, w.next_up),
        Vec::<u32>::new()
    );
    assert_eq!(
        lost(&w.down_delivered, down_before, w.next_down),
        Vec::<u32>::new()
    );
}

/// Copies pushed far ahead (a mutated high sequence byte, +5000 and
/// more, inside the 10 000-packet window) from the copier's key: not a
/// rebinding's next packet, dropped and counted unprocessed. (Processed,
/// the first moved the server's GSR past everything the client sends; the
/// client's packets then failed the server's window, the server's
/// acknowledgements the client's, and the candidate's budget and
/// challenges took the downstream and the path's Syncs to the copier:
/// 675 of 1 000 downstream packets lost.)
#[test]
fn copies_far_ahead_from_a_new_address_are_not_processed() {
    let (mut w, h, good) = captured(false, Duration::from_millis(100));
    w.ep.handle_datagram(w.now, 40001, &good);
    w.tick();
    let seq = inspect::seq(&good).unwrap();
    let down_before = w.next_down;
    let rejected = w.ep.stats().rebind_rejected;
    for k in 0..1000u64 {
        // Every 5 ms a copy ever further ahead, from the copier's key.
        if k % 5 == 0 {
            let d = with_seq(&good, seq + 5000 + k);
            w.ep.handle_datagram(w.now, 66_666, &d);
        }
        w.stream(Duration::from_millis(1));
    }
    w.run(Duration::from_millis(100));
    let to_attacker = w.sent_to(66_666).len();
    let lost = missing(&w.down_delivered, w.next_down)
        .into_iter()
        .filter(|&k| k >= down_before)
        .count();
    println!("to the copier {to_attacker} datagrams; downstream lost {lost} of 1000");
    assert_eq!(w.ep.stats().rebind_rejected - rejected, 200);
    assert_unmoved(&w, h);
    assert_eq!(to_attacker, 0);
    assert_eq!(lost, 0);
    assert_eq!(w.client.stats().rx.rx_seq_invalid, 0);
}

/// A packet from the old address that the connection cannot accept (its
/// sequence number far outside the window) still shows the old path alive
/// and ends a candidate (RFC 9000 §9.3.3): copies a mutation pushed ahead
/// may have moved GSR past what the peer sends, and its packets must
/// still win the path back. (Counting only in-window packets as alive left
/// the candidate standing, and the path's probes went to the copier.)
#[test]
fn an_unacceptable_packet_from_the_old_address_still_contests_a_candidate() {
    let (mut w, h, fresh) = copy_racing_its_packet();
    // From the old key, a packet 20 000 numbers behind: outside the
    // window, refused, but a readable datagram on the routed key.
    let seq = inspect::seq(&fresh).unwrap();
    let old = with_seq(&fresh, seq.wrapping_sub(20_000));
    w.ep.handle_datagram(w.now, 40001, &old);
    assert_eq!(w.ep.rebind_candidates(), 0, "the old path is alive");
    assert_eq!(w.ep.route(&40001), Some((h, PathId(0))));
    assert_eq!(w.ep.stats().rebinds_validated, 0);
}
