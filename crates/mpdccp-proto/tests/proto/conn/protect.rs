//! Payload protection in the subflows (docs/SECURITY.md §5):
//! two connections with the session keys of one real Noise handshake
//! exchange data over two paths; the wire carries ciphertext; altered,
//! forged and replayed data packets are dropped and counted before they
//! touch the subflow's sequence state; the MSS shrinks by the overhead.

use std::time::Duration;

use mpdccp_proto::auth::protect::{PathProtector, COUNTER_LEN};
use mpdccp_proto::conn::codec::Segment;
use mpdccp_proto::conn::{PacketType, DATA_HEADER_MAX, PROTECTION_OVERHEAD};
use mpdccp_proto::harness::{inspect, session_keys, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::mp::subtype as mp;
use mpdccp_proto::wire::Packet;
use mpdccp_proto::{ConnectionConfig, PathId, SendError};

const SESSION: u64 = 11;

fn two_paths(protected: bool) -> Harness {
    let link = |ms| LinkSpec {
        delay: Duration::from_millis(ms),
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![link(10), link(20)],
        seed: 5,
        ..Default::default()
    });
    h.record = true;
    if protected {
        h.enable_payload_protection(SESSION);
    }
    h.open_paths(2, Duration::from_millis(300));
    assert!(h.client.is_established() && h.server.is_established());
    h
}

/// Packet `k` of a run: recognisable plaintext of `len` bytes.
fn payload(k: u32, side: Side, len: usize) -> Vec<u8> {
    let mut p = b"PLAINTEXT-MARKER-".repeat(len / 17 + 1);
    p.truncate(len);
    p[..4].copy_from_slice(&k.to_be_bytes());
    p[4] = side as u8;
    p
}

/// Sends `n` packets each way (`len` bytes, bursts of 10 per ms, more
/// than one path's window so the scheduler uses both), then drains.
fn exchange(h: &mut Harness, n: u32, len: usize) {
    for k in 0..n {
        for side in [Side::Client, Side::Server] {
            let now = h.now;
            h.conn(side)
                .send(now, &payload(k, side, len))
                .expect("send");
        }
        if k % 10 == 9 {
            h.drive_for(Duration::from_millis(1));
        }
    }
    h.drive_for(Duration::from_millis(300));
}

/// Every packet arrived once, unchanged.
fn assert_all_delivered(h: &Harness, n: u32, len: usize) {
    for side in [Side::Client, Side::Server] {
        let mut got: Vec<Vec<u8>> = h.delivered(side).iter().map(|(_, d)| d.to_vec()).collect();
        got.sort();
        let mut want: Vec<Vec<u8>> = (0..n).map(|k| payload(k, side.peer(), len)).collect();
        want.sort();
        assert_eq!(got, want, "delivered to {side:?}");
    }
}

fn data_packets(h: &Harness, from: Side, path: u32) -> Vec<Vec<u8>> {
    h.wire
        .iter()
        .filter(|w| w.from == from && w.path == PathId(path) && !w.dropped)
        .filter(|w| inspect::packet_type(&w.bytes) == Some(PacketType::DataAck))
        .map(|w| w.bytes.clone())
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Rewrites a client datagram on `path` and fixes its checksum.
fn retouch(path: usize, bytes: &mut [u8], f: impl FnOnce(&mut [u8])) {
    f(bytes);
    let (c, s) = Harness::path_addrs(path);
    inspect::fix_checksum(bytes, c.ip(), s.ip());
}

/// Delivers `bytes` to the server as if the client sent them on `path`.
fn inject_to_server(h: &mut Harness, path: usize, bytes: &[u8]) {
    let (c, s) = Harness::path_addrs(path);
    let now = h.now;
    h.server
        .handle_datagram_from(now, PathId(path as u32), s, c, bytes);
}

#[test]
fn protected_pair_delivers_over_two_paths_with_ciphertext_on_the_wire() {
    let mut h = two_paths(true);
    exchange(&mut h, 300, 1200);
    assert_all_delivered(&h, 300, 1200);
    for side in [Side::Client, Side::Server] {
        let s = h.conn_ref(side).stats();
        assert_eq!(
            (s.rx.rx_protect_failed, s.rx.rx_replayed),
            (0, 0),
            "{side:?}"
        );
        assert_eq!(h.conn_ref(side).payload_overhead(), PROTECTION_OVERHEAD);
    }
    for (side, path) in [(Side::Client, 0), (Side::Client, 1), (Side::Server, 0)] {
        let pkts = data_packets(&h, side, path);
        assert!(pkts.len() > 20, "{side:?} sent data on path {path}");
        for b in &pkts {
            let seg = Segment::parse(b, None).unwrap();
            // counter ‖ ciphertext ‖ tag, and no plaintext left.
            assert_eq!(seg.payload.len(), 1200 + PROTECTION_OVERHEAD);
            assert!(!contains(seg.payload, b"PLAINTEXT-MARKER"));
        }
    }
}

/// An independent opener following the documented format (key from the
/// session's payload key and the path binding, the DCCP header with a
/// zero checksum field as associated data) reads the wire bytes.
#[test]
fn wire_format_is_the_documented_one() {
    let mut h = two_paths(true);
    exchange(&mut h, 20, 1200);
    let (_, server_keys) = session_keys(SESSION);
    let mut first_path = PathProtector::new(&server_keys, &[]);
    let sent: Vec<Vec<u8>> = (0..20).map(|k| payload(k, Side::Client, 1200)).collect();
    let mut opened = 0;
    for b in data_packets(&h, Side::Client, 0) {
        let hl = Packet::new_unchecked(&b[..]).header_len();
        let mut aad = b[..hl].to_vec();
        Packet::new_unchecked(&mut aad[..]).set_checksum(0);
        let mut frame = b[hl..].to_vec();
        let n = first_path.open(&aad, &mut frame).expect("opens");
        let plain = &frame[COUNTER_LEN..COUNTER_LEN + n];
        assert!(sent.iter().any(|p| p == plain));
        opened += 1;
        // The same frame under the join's key (binding RA‖RB) does not open.
        let mut other = PathProtector::new(&server_keys, &[0, 0, 0, 1, 0, 0, 0, 2]);
        assert!(other.open(&aad, &mut b[hl..].to_vec()).is_err());
    }
    assert!(opened > 5);
}

#[test]
fn a_flipped_bit_in_payload_or_header_is_dropped_and_counted() {
    for what in ["payload", "mp_seq", "ack_vector_or_ack"] {
        let mut h = two_paths(true);
        let mut n = 0;
        h.tamper = Some(Box::new(move |side, path, bytes| {
            if side != Side::Client
                || path != PathId(0)
                || inspect::packet_type(bytes) != Some(PacketType::DataAck)
            {
                return true;
            }
            n += 1;
            if n != 5 {
                return true;
            }
            retouch(0, bytes, |b| match what {
                "payload" => *b.last_mut().unwrap() ^= 0x01,
                "mp_seq" => {
                    let r = inspect::find_mp_suboption(b, mp::SEQ).expect("MP_SEQ");
                    b[r.end - 1] ^= 0x01;
                }
                // Acknowledgement Number's low bit (bytes 18..24, X=1).
                _ => b[23] ^= 0x01,
            });
            true
        }));
        exchange(&mut h, 40, 1000);
        let s = h.server.stats();
        assert_eq!(s.rx.rx_protect_failed, 1, "{what}");
        assert_eq!(s.rx.rx_replayed, 0, "{what}");
        // The altered packet is lost, the 39 others arrive unchanged.
        let to_server = h.delivered(Side::Server);
        assert_eq!(to_server.len(), 39, "{what}");
        let want: Vec<Vec<u8>> = (0..40).map(|k| payload(k, Side::Client, 1000)).collect();
        assert!(to_server.iter().all(|(_, d)| want.iter().any(|w| w == d)));
        assert_eq!(h.client.stats().rx.rx_protect_failed, 0);
    }
}

/// Forged data packets with the sequence numbers the client will use next
/// (an on-path attacker sees them): without protection they take those
/// numbers in the server's receive history, so the genuine packets that
/// follow are thrown away as duplicates; with protection they are dropped
/// before the subflow sees them and the genuine packets all arrive.
#[test]
fn forged_data_does_not_move_the_sequence_state() {
    for protected in [false, true] {
        let mut h = two_paths(protected);
        exchange(&mut h, 10, 1000);
        let template = data_packets(&h, Side::Client, 0)
            .pop()
            .expect("a data packet");
        let last = inspect::seq(&template).unwrap();
        let forged = 8;
        for k in 1..=forged {
            let mut b = template.clone();
            retouch(0, &mut b, |b| {
                inspect::set_seq(b, last + k);
                // A fresh protection counter (a seen one is a replay) and
                // the attacker's own payload.
                let hl = Packet::new_unchecked(&b[..]).header_len();
                b[hl..hl + COUNTER_LEN].copy_from_slice(&(1_000_000 + k).to_be_bytes());
                b[hl + COUNTER_LEN..].fill(0xAA);
            });
            inject_to_server(&mut h, 0, &b);
        }
        let s = h.server.stats();
        let delivered_before = h.delivered(Side::Server).len();
        // Genuine client traffic on path 0 only.
        h.client.set_path_down(h.now, PathId(1));
        h.drive_for(Duration::from_millis(50));
        for k in 100..110 {
            let now = h.now;
            h.client.send(now, &payload(k, Side::Client, 1000)).unwrap();
            h.drive_for(Duration::from_millis(1));
        }
        h.drive_for(Duration::from_millis(300));
        let s2 = h.server.stats();
        let genuine: Vec<Vec<u8>> = (100..110).map(|k| payload(k, Side::Client, 1000)).collect();
        let got = h.delivered(Side::Server)[delivered_before..]
            .iter()
            .filter(|(_, d)| genuine.iter().any(|g| g == d))
            .count();
        if protected {
            assert_eq!(s.rx.rx_protect_failed, forged, "every forgery counted");
            assert_eq!(
                s2.rx.rx_duplicate, 0,
                "no genuine packet taken for a duplicate"
            );
            assert_eq!(got, 10, "every genuine packet arrives");
        } else {
            // The contrast that shows what protection prevents: the
            // forgeries took the numbers and the genuine packets with them
            // were dropped as duplicates. (Now the server's
            // Acks beyond anything the client sent draw a Sync, the
            // server resynchronises and forgets the forged numbers, and
            // the dropped packets come back retransmitted.)
            assert!(s2.rx.rx_duplicate > 0, "forgeries took the numbers");
            assert_eq!(got, 10, "recovered after the resynchronisation");
        }
    }
}

#[test]
fn a_replayed_packet_is_dropped_and_counted_on_its_path_and_fails_on_another() {
    let mut h = two_paths(true);
    exchange(&mut h, 20, 1000);
    let old = data_packets(&h, Side::Client, 0)[3].clone();
    let delivered = h.delivered(Side::Server).len();
    inject_to_server(&mut h, 0, &old);
    let s = h.server.stats();
    assert_eq!((s.rx.rx_replayed, s.rx.rx_protect_failed), (1, 0));
    assert_eq!(
        s.rx.rx_duplicate, 0,
        "caught before the DCCP sequence checks"
    );
    // Onto the other path (its own key): does not authenticate.
    let mut moved = old.clone();
    retouch(1, &mut moved, |_| {});
    inject_to_server(&mut h, 1, &moved);
    assert_eq!(h.server.stats().rx.rx_protect_failed, 1);
    h.drive_for(Duration::from_millis(100));
    assert_eq!(h.delivered(Side::Server).len(), delivered);
    // A plaintext (unprotected) data packet is refused too.
    let mut plain = two_paths(false);
    exchange(&mut plain, 3, 1000);
    let clear = data_packets(&plain, Side::Client, 0).pop().unwrap();
    inject_to_server(&mut h, 0, &clear);
    assert_eq!(h.server.stats().rx.rx_protect_failed, 2);
}

#[test]
fn the_largest_packet_shrinks_by_the_overhead() {
    let cfg = ConnectionConfig::default();
    let largest = cfg.mss_bytes as usize - DATA_HEADER_MAX;
    let mut plain = two_paths(false);
    let mut prot = two_paths(true);
    let now = plain.now;
    assert_eq!(plain.client.payload_overhead(), 0);
    assert_eq!(plain.client.send(now, &vec![1; largest]), Ok(()));
    assert_eq!(
        prot.client.send(now, &vec![1; largest]),
        Err(SendError::TooLarge)
    );
    let fits = largest - PROTECTION_OVERHEAD;
    assert_eq!(prot.client.send(now, &vec![1; fits]), Ok(()));
    prot.drive_for(Duration::from_millis(100));
    assert_eq!(prot.delivered(Side::Server).last().unwrap().1.len(), fits);
    let mut sent = data_packets(&prot, Side::Client, 0);
    sent.extend(data_packets(&prot, Side::Client, 1));
    let frame = |b: &Vec<u8>| Segment::parse(b, None).unwrap().payload.len();
    let largest_sent = sent.iter().max_by_key(|b| frame(b)).unwrap();
    assert_eq!(frame(largest_sent), fits + PROTECTION_OVERHEAD);
    assert!(largest_sent.len() <= cfg.mss_bytes as usize);
}

/// Reordering and loss on both paths, and GSO trains, with and without
/// protection (same seed; no bottleneck, so the 24 bytes change no timing):
/// the replay window takes out-of-order counters, and exactly the same
/// packets are delivered in the same order, none twice.
#[test]
fn reordering_loss_and_gso_trains_pass_the_replay_window() {
    let run = |protected: bool| {
        let link = |ms| LinkSpec {
            delay: Duration::from_millis(ms),
            reorder: 0.2,
            reorder_delay: Duration::from_millis(7),
            loss: 0.005,
            ..Default::default()
        };
        let config = ConnectionConfig {
            max_gso_segments: 8,
            ..Default::default()
        };
        let mut h = Harness::new(HarnessConfig {
            client: config.clone(),
            server: config,
            paths: vec![link(10), link(30)],
            seed: 9,
        });
        if protected {
            h.enable_payload_protection(SESSION);
        }
        h.open_paths(2, Duration::from_millis(400));
        for k in 0..2000 {
            for side in [Side::Client, Side::Server] {
                let now = h.now;
                let _ = h.conn(side).send(now, &payload(k, side, 1200));
            }
            if k % 2 == 1 {
                h.drive_for(Duration::from_millis(1));
            }
        }
        h.drive_for(Duration::from_millis(500));
        h
    };
    let (clear, prot) = (run(false), run(true));
    assert!(prot.gso_batches > 0, "GSO trains were sent");
    for side in [Side::Client, Side::Server] {
        let s = prot.conn_ref(side).stats();
        assert_eq!(
            (s.rx.rx_protect_failed, s.rx.rx_replayed),
            (0, 0),
            "{side:?}"
        );
        let got = prot.delivered(side);
        assert!(got.len() > 500, "{side:?}: {}", got.len());
        assert_eq!(
            got,
            clear.delivered(side),
            "{side:?}: as without protection"
        );
        let mut seqs: Vec<u64> = got.iter().map(|(q, _)| *q).collect();
        seqs.sort();
        seqs.dedup();
        assert_eq!(seqs.len(), got.len(), "{side:?}: none twice");
    }
}
