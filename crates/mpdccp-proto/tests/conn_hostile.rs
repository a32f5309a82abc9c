//! Hostile input at the connection level: mutated and random datagrams never
//! panic, are counted, and leave memory bounded.

use std::time::Duration;

use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, PathId};
use rand::{Rng, SeedableRng};

#[test]
fn mutated_and_random_datagrams_never_panic() {
    let no_cksum = ConnectionConfig {
        // Let mutated packets past the checksum to reach deeper code.
        verify_checksums: false,
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        client: no_cksum.clone(),
        server: no_cksum,
        ..Default::default()
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
    let samples: Vec<(Side, PathId, Vec<u8>)> = h
        .wire
        .iter()
        .map(|w| (w.from, w.path, w.bytes.clone()))
        .collect();
    assert!(samples.len() > 100);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let before = (h.client.stats().rx_datagrams, h.server.stats().rx_datagrams);
    let n = 30_000;
    for i in 0..n {
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
    assert!((c.rx_datagrams - before.0) + (s.rx_datagrams - before.1) >= n as u64);
    let rejected = c.rx_malformed
        + s.rx_malformed
        + c.rx_seq_invalid
        + s.rx_seq_invalid
        + c.rx_duplicate
        + s.rx_duplicate
        + c.rx_unexpected
        + s.rx_unexpected;
    assert!(rejected > 10_000, "hostile input was counted: {rejected}");
    // Bounded state: never more subflows than paths offered.
    assert!(h.client.paths().len() <= 2 && h.server.paths().len() <= 2);
    assert!(h.client.send_queue_len() <= 1000);
}
