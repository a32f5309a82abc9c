//! A forged DCCP-CloseReq sent to the server (issue #28). Only a server
//! may send a CloseReq (RFC 4340 §8.5 step 7: a server that receives one
//! answers with a Sync and drops it). Before the fix the server's subflow
//! went to CLOSING on it and closed: one forged CloseReq per path, with
//! the client's sniffed numbers, took every path of the server down in
//! the open and authenticated modes.

mod common;

use std::time::Duration;

use common::{assert_delivers, emit, inject, last_genuine, open_paths, open_two_paths, Delivery};
use mpdccp_proto::conn::codec::{PacketType, Segment};
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};

const TRAFFIC: Delivery = Delivery {
    n: 40,
    tag: 0x5a,
    len: 200,
    gap: Duration::from_millis(2),
    drain: Duration::from_millis(300),
};

#[test]
fn a_closereq_to_the_server_is_answered_with_a_sync_and_changes_nothing() {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 28,
        ..Default::default()
    });
    h.record = true;
    open_two_paths(&mut h);
    assert_delivers(&mut h, TRAFFIC);
    let syncs_before = server_syncs(&h);
    let unexpected = h.conn_ref(Side::Server).stats().rx_unexpected;
    for path in 0..2 {
        let (seq, ack) = last_genuine(&h, Side::Client, path);
        let mut s = Segment::new(PacketType::CloseReq, seq + 1);
        s.ack = Some(ack.unwrap_or(0));
        inject(&mut h, Side::Server, path, &emit(&s, path, Side::Client));
    }
    h.drive_for(Duration::from_millis(300));
    for side in [Side::Client, Side::Server] {
        assert_eq!(open_paths(&h, side), 2, "{side:?}: both paths open");
        assert!(!h.conn_ref(side).is_closed());
    }
    assert_eq!(
        h.conn_ref(Side::Server).stats().rx_unexpected - unexpected,
        2,
        "both CloseReqs counted"
    );
    assert_eq!(server_syncs(&h) - syncs_before, 2, "one Sync per CloseReq");
    // The CloseReq took a sequence number the client uses next: the
    // genuine packet with it is dropped as a duplicate (and acknowledged),
    // as after any forged in-window packet without protection
    // (docs/SECURITY.md §2): one packet per path at most; everything else
    // arrives, once.
    for side in [Side::Client, Side::Server] {
        let before = h.delivered(side.peer()).len();
        for k in 0..40u32 {
            let mut p = vec![0x77; 200];
            p[..4].copy_from_slice(&k.to_be_bytes());
            let now = h.now;
            h.conn(side).send(now, &p).expect("send");
            h.drive_for(Duration::from_millis(2));
        }
        h.drive_for(Duration::from_millis(300));
        let mut got: Vec<u32> = h.delivered(side.peer())[before..]
            .iter()
            .filter(|(_, p)| p.len() == 200 && p[4] == 0x77)
            .map(|(_, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
            .collect();
        got.sort_unstable();
        let n = got.len();
        got.dedup();
        assert_eq!(got.len(), n, "{side:?}: no duplicates");
        assert!(n >= 38, "{side:?}: {n} of 40 delivered: {got:?}");
    }
}

/// Syncs the server sent so far.
fn server_syncs(h: &Harness) -> usize {
    h.wire
        .iter()
        .filter(|w| w.from == Side::Server && inspect::packet_type(&w.bytes) == Some(PacketType::Sync))
        .count()
}
