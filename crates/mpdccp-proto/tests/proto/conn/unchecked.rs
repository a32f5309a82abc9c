//! `fill_checksums: false` (the simulator's setting): the checksum field
//! goes out zero and a peer that does not verify (`verify_checksums:
//! false`) carries the session as with checksums.

use std::time::Duration;

use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::ConnectionConfig;

fn session(fill_checksums: bool) -> Harness {
    let cfg = ConnectionConfig {
        verify_checksums: false,
        fill_checksums,
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        client: cfg.clone(),
        server: cfg,
        seed: 5,
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(200));
    for k in 0..50u32 {
        let now = h.now;
        h.client.send(now, &k.to_be_bytes().repeat(30)).unwrap();
        h.drive_for(Duration::from_millis(1));
    }
    h.drive_for(Duration::from_millis(200));
    h
}

/// The DCCP checksum field, bytes 6..8 (RFC 4340 §5.1).
fn checksum(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[6], bytes[7]])
}

#[test]
fn without_checksums_the_session_is_the_same() {
    let (on, off) = (session(true), session(false));
    assert_eq!(on.delivered(Side::Server).len(), 50);
    assert_eq!(on.delivered(Side::Server), off.delivered(Side::Server));
    assert_eq!(on.wire.len(), off.wire.len());
    assert!(on.wire.iter().any(|r| checksum(&r.bytes) != 0));
    for (a, b) in on.wire.iter().zip(&off.wire) {
        assert_eq!(checksum(&b.bytes), 0, "sent without checksum");
        // Everything else is the same datagram.
        assert_eq!(
            (&a.bytes[..6], &a.bytes[8..]),
            (&b.bytes[..6], &b.bytes[8..])
        );
    }
}
