//! Hostile input at the connection level: mutated and random datagrams never
//! panic, are counted, and leave memory bounded.

use std::time::Duration;

use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnStats, ConnectionConfig, PathId};
use rand::{Rng, SeedableRng};

/// A two-path session that exchanged some data, with its datagrams.
fn session(seed: u64) -> Harness {
    let no_cksum = ConnectionConfig {
        // Let mutated packets past the checksum to reach deeper code.
        verify_checksums: false,
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        client: no_cksum.clone(),
        server: no_cksum,
        seed,
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(200));
    for k in 0..50u32 {
        let now = h.now;
        h.client.send(now, &k.to_be_bytes().repeat(30)).unwrap();
        h.server.send(now, &k.to_be_bytes().repeat(30)).unwrap();
        h.drive_for(Duration::from_millis(1));
    }
    h.drive_for(Duration::from_millis(200));
    h
}

fn rejected(s: &ConnStats) -> u64 {
    s.rx.rx_malformed + s.rx.rx_seq_invalid + s.rx.rx_duplicate + s.rx.rx_unexpected
}

fn live(h: &Harness) -> bool {
    h.client.is_established() && h.server.is_established()
}

#[test]
fn mutated_and_random_datagrams_never_panic() {
    let mut h = session(0);
    let mut sessions = 1;
    let mut samples: Vec<(Side, PathId, Vec<u8>)> = h
        .wire
        .iter()
        .map(|w| (w.from, w.path, w.bytes.clone()))
        .collect();
    assert!(samples.len() > 100);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let (mut received, mut refused) = (0, 0);
    let n = 30_000;
    for i in 0..n {
        // With checksums off, an in-window packet whose options break the
        // rules legitimately resets its subflow (RFC 4340 §5.8), and a
        // closed connection drops input uncounted: carry on with a fresh
        // session, keeping the tally of the old one.
        if !live(&h) {
            let (c, s) = (h.client.stats(), h.server.stats());
            received += c.traffic.rx_datagrams + s.traffic.rx_datagrams;
            refused += rejected(&c) + rejected(&s);
            h = session(sessions);
            sessions += 1;
            samples = h
                .wire
                .iter()
                .map(|w| (w.from, w.path, w.bytes.clone()))
                .collect();
        }
        let (from, path, base) = &samples[rng.gen_range(0..samples.len())];
        let mut d = base.clone();
        match i % 4 {
            0 => {
                for _ in 0..rng.gen_range(1..4) {
                    let j = rng.gen_range(0..d.len());
                    d[j] ^= 1 << rng.gen_range(0..8);
                }
            }
            1 => d.truncate(rng.gen_range(0..d.len())),
            2 => {
                // Random options area / header bytes.
                let end = d.len().min(64);
                let j = rng.gen_range(0..end);
                d[j] = rng.gen();
            }
            _ => {
                let len = rng.gen_range(0..200);
                d = (0..len).map(|_| rng.gen()).collect();
            }
        }
        let now = h.now;
        let to = from.peer();
        h.conn(to).handle_datagram(now, *path, &d);
        if i % 1000 == 0 {
            h.drive_for(Duration::from_millis(1));
            // Events are drained by the harness; nothing accumulates inside.
        }
    }
    h.drive_for(Duration::from_secs(2));
    let (c, s) = (h.client.stats(), h.server.stats());
    received += c.traffic.rx_datagrams + s.traffic.rx_datagrams;
    refused += rejected(&c) + rejected(&s);
    assert!(received >= n as u64);
    assert!(refused > 10_000, "hostile input was counted: {refused}");
    // The session rarely dies: a corrupted option must hit the window.
    assert!(sessions < 100, "{sessions} sessions");
    // Bounded state: never more subflows than paths offered.
    assert!(h.client.paths().len() <= 2 && h.server.paths().len() <= 2);
    assert!(h.client.send_queue_len() <= 1000);
}
