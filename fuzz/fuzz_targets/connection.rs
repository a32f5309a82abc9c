//! Fuzz an established two-path MP-DCCP session with hostile datagrams
//! (run with `cargo +nightly fuzz run connection` from `fuzz/`).
//!
//! The input is a list of records `[ctrl, len_hi, len_lo, bytes...]`; each
//! is one datagram delivered to the client or the server on path 0, 1 or
//! 2 (2 is known to neither end) after advancing virtual time:
//!
//! * ctrl bit 0: receiver (0 = server, 1 = client);
//! * bits 1–2: path (3 maps to 2);
//! * bits 3–4: mode — 0 raw bytes, 1 raw bytes with the checksum fixed
//!   for the path, 2 the bytes XORed onto the latest genuine datagram of
//!   that path and direction (in-window: reaches the state machine) with
//!   the checksum fixed, 3 the same without fixing the checksum;
//! * bits 5–7: milliseconds to advance first (×4).
//!
//! Inputs of odd length run with payload protection on both ends (the
//! parity keeps every seed valid), so forged and XORed data packets go
//! through the AEAD open and its drop path.
//!
//! Beyond "no panic, no hang": both ends keep at most three paths, the
//! send queue and the reorder buffer within their caps, and the sum of
//! rejection counters never decreases.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::auth::SessionKeys;
use mpdccp_proto::harness::{inspect, session_keys, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, PathId, SendQueueConfig};

const QUEUE_PKTS: usize = 128;
const HOLD_PKTS: usize = 64;

fn config() -> ConnectionConfig {
    let mut c = ConnectionConfig {
        send_queue: SendQueueConfig {
            pkts: QUEUE_PKTS,
            ..Default::default()
        },
        ..Default::default()
    };
    c.reorder.kind = mpdccp_proto::reorder::ReorderKind::ActiveFixed;
    c.reorder.max_hold_pkts = HOLD_PKTS;
    c
}

fn check_bounds(h: &Harness) {
    for side in [Side::Client, Side::Server] {
        let c = h.conn_ref(side);
        assert!(c.paths().len() <= 3, "{side:?}: {} paths", c.paths().len());
        assert!(c.send_queue_len() <= QUEUE_PKTS);
        assert!(c.reorder_stats().held_pkts as usize <= HOLD_PKTS);
        for p in c.paths() {
            assert!(p.queued_pkts as usize <= QUEUE_PKTS);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut h = Harness::new(HarnessConfig {
        client: config(),
        server: config(),
        paths: vec![LinkSpec::default(); 3],
        seed: 3,
    });
    h.record = true;
    if data.len() % 2 == 1 {
        // One Noise handshake per process, not per input: the keys of seed 3
        // are the same every time (the handshake is not what this fuzzes).
        static KEYS: OnceLock<(SessionKeys, SessionKeys)> = OnceLock::new();
        let (c, s) = KEYS.get_or_init(|| session_keys(3)).clone();
        h.client.enable_payload_protection(c);
        h.server.enable_payload_protection(s);
    }
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.drive_for(Duration::from_millis(200));
    assert!(h.client.is_established() && h.server.is_established());
    let mut rest = data;
    let mut k = 0u32;
    let mut rej = [0u64; 2];
    while rest.len() >= 3 && k < 64 {
        let ctrl = rest[0];
        let len = (usize::from(rest[1]) << 8 | usize::from(rest[2])).min(rest.len() - 3);
        let body = &rest[3..3 + len];
        rest = &rest[3 + len..];
        k += 1;
        let to = if ctrl & 1 == 0 {
            Side::Server
        } else {
            Side::Client
        };
        let path = usize::from((ctrl >> 1) & 3).min(2);
        let mode = (ctrl >> 3) & 3;
        let wait = Duration::from_millis(u64::from(ctrl >> 5) * 4);
        // Keep traffic flowing so acks and data are in flight.
        let now = h.now;
        let _ = h.client.send(now, &[0xAA; 200]);
        let _ = h.server.send(now, &[0xAB; 100]);
        h.drive_for(wait);
        let (c, s) = Harness::path_addrs(path);
        let (src, dst) = if to == Side::Server { (c, s) } else { (s, c) };
        let mut bytes = match mode {
            0 | 1 => body.to_vec(),
            _ => {
                let base = h
                    .wire
                    .iter()
                    .rev()
                    .find(|w| w.from == to.peer() && w.path == PathId(path as u32))
                    .map(|w| w.bytes.clone())
                    .unwrap_or_default();
                let mut b = base;
                if body.len() > b.len() {
                    b.resize(body.len(), 0);
                }
                for (x, y) in b.iter_mut().zip(body) {
                    *x ^= y;
                }
                b
            }
        };
        if mode == 1 || mode == 2 {
            inspect::fix_checksum(&mut bytes, src.ip(), dst.ip());
        }
        if h.wire.len() > 4096 {
            h.wire.drain(..2048);
        }
        let now = h.now;
        h.conn(to)
            .handle_datagram_from(now, PathId(path as u32), dst, src, &bytes);
        for (i, side) in [Side::Client, Side::Server].into_iter().enumerate() {
            let r = h.conn_ref(side).stats().rejected_input();
            assert!(r >= rej[i]);
            rej[i] = r;
        }
        check_bounds(&h);
    }
    h.drive_for(Duration::from_millis(500));
    check_bounds(&h);
});
