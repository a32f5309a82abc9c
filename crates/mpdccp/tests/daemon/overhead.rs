//! Bytes of overhead per tunnelled data packet,
//! counted on the packets the core actually emits with the daemon's default
//! settings: a bulk transfer both ways over two 20 ms paths (30 Mbit/s,
//! 0.1 % loss, so acks, Ack Vectors and loss recovery all happen), every
//! datagram recorded. For each data packet the DCCP header (generic header +
//! acknowledgement sub-header + options, its Data Offset) is the datagram
//! minus the tunnelled packet. The outer headers are fixed: UDP 8 (RFC
//! 6773; none for native DCCP), IPv4 20 / IPv6 40.
//!
//! Asserted: no data packet's DCCP header exceeds what the daemon reserves
//! (`DATA_HEADER_MAX`, which sets the TUN MTU), and the header is the sum of
//! its parts (24 fixed + the options counted one by one). Printed: the
//! table of docs/OPERATIONS.md §Overhead (run with `--nocapture`).

use std::collections::BTreeMap;
use std::time::Duration;

use mpdccp_net::daemon::config::TunnelConfig;
use mpdccp_net::mtu::{MtuPlan, DEFAULT_OPTIONS_BUDGET_BYTES};
use mpdccp_proto::conn::{PacketType, DATA_HEADER_MAX};
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};

/// Generic header with 48-bit sequence numbers (16) + ack sub-header (8),
/// RFC 4340 §5.1, §5.3.
const FIXED: usize = 24;
const PAYLOAD: usize = 1000;

/// A readable name for an option (RFC 4340 §5.8, RFC 9897 §3.2 sub-options).
fn option_name(kind: u8, body: &[u8]) -> String {
    match kind {
        0 => "padding".into(),
        32..=35 => "feature negotiation".into(),
        36 => "Init Cookie".into(),
        37 => "NDP Count".into(),
        38 | 39 => "Ack Vector".into(),
        41 => "Timestamp".into(),
        42 => "Timestamp Echo".into(),
        43 => "Elapsed Time".into(),
        44 => "Data Checksum".into(),
        46 => match body.first() {
            Some(0) => "MP_CONFIRM",
            Some(1) => "MP_JOIN",
            Some(2) => "MP_FAST_CLOSE",
            Some(3) => "MP_KEY",
            Some(4) => "MP_SEQ",
            Some(5) => "MP_HMAC",
            Some(6) => "MP_RTT",
            Some(7) => "MP_ADDADDR",
            Some(8) => "MP_REMOVEADDR",
            Some(9) => "MP_PRIO",
            Some(10) => "MP_CLOSE",
            _ => "MP_?",
        }
        .into(),
        k => format!("option {k}"),
    }
}

/// Bytes per option name in one packet's option area (`opts`), or None if
/// it does not parse.
fn options(opts: &[u8]) -> Option<BTreeMap<String, usize>> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        let len = if kind < 32 {
            1
        } else {
            *opts.get(i + 1)? as usize
        };
        if len == 0 || i + len > opts.len() {
            return None;
        }
        let body = if kind < 32 {
            &[][..]
        } else {
            &opts[i + 2..i + len]
        };
        *out.entry(option_name(kind, body)).or_default() += len;
        i += len;
    }
    Some(out)
}

/// DCCP header bytes of every tunnelled data packet of a bulk transfer
/// both ways, and bytes per option name: (packets carrying it, bytes).
fn measure(loss: f64, reorder: f64) -> (Vec<usize>, BTreeMap<String, (usize, usize)>) {
    let tunnel = TunnelConfig::default();
    let plan = MtuPlan::new(tunnel.path_mtu, false, DEFAULT_OPTIONS_BUDGET_BYTES);
    let cfg = tunnel.connection_config(&plan);
    let path = LinkSpec {
        delay: Duration::from_millis(10),
        rate_bps: Some(30_000_000),
        buffer_bytes: 150_000,
        loss,
        reorder,
        ..LinkSpec::default()
    };
    let mut h = Harness::new(HarnessConfig {
        client: cfg.clone(),
        server: cfg,
        paths: vec![path.clone(), path],
        seed: 5,
    });
    h.open_paths(2, Duration::from_millis(300));
    h.record = true;
    let pkt = vec![0x45u8; PAYLOAD];
    for _ in 0..400 {
        for side in [Side::Client, Side::Server] {
            let now = h.now;
            for _ in 0..5 {
                let _ = h.conn(side).send(now, &pkt);
            }
        }
        h.drive_for(Duration::from_millis(5));
    }
    h.drive_for(Duration::from_secs(1));
    let mut headers: Vec<usize> = Vec::new();
    let mut per_option: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in &h.wire {
        let t = inspect::packet_type(&r.bytes);
        if !matches!(t, Some(PacketType::Data | PacketType::DataAck)) {
            continue;
        }
        let hdr = r.bytes[4] as usize * 4;
        if r.bytes.len() != hdr + PAYLOAD {
            continue; // not one of our tunnelled packets
        }
        let start = if t == Some(PacketType::DataAck) {
            FIXED
        } else {
            16
        };
        let opts = options(&r.bytes[start..hdr]).expect("options parse");
        assert_eq!(start + opts.values().sum::<usize>(), hdr);
        for (k, v) in opts {
            let e = per_option.entry(k).or_default();
            e.0 += 1;
            e.1 += v;
        }
        headers.push(hdr);
    }
    (headers, per_option)
}

#[test]
fn data_packet_overhead_per_transport_and_family() {
    // CPU-bound: kept off the cores the network tests measure.
    let _serial = crate::support::serial();
    let tunnel = TunnelConfig::default();
    let plan = MtuPlan::new(tunnel.path_mtu, false, DEFAULT_OPTIONS_BUDGET_BYTES);
    // The bound is a guarantee, whatever the loss: the Ack Vector grows
    // with loss and reordering and then goes on a pure Ack of its own.
    eprintln!(
        "| loss, reordering | data packets | DCCP header median / max | DCCP-Data (no ack) |"
    );
    for (loss, reorder) in [(0.001, 0.0), (0.03, 0.05), (0.2, 0.1)] {
        let (mut h, _) = measure(loss, reorder);
        let n = h.len();
        assert!(n > 300, "{loss}: only {n} data packets");
        h.sort_unstable();
        let max = h[n - 1];
        assert!(
            max <= DATA_HEADER_MAX,
            "{loss} loss: a DCCP header of {max} bytes exceeds the {DATA_HEADER_MAX} reserved"
        );
        // DCCP-Data carries MP_SEQ only: 16 + 9, padded to 28.
        let bare = h.iter().filter(|&&x| x == 28).count();
        eprintln!(
            "| {:.1} %, {:.0} % | {n} | {} / {max} | {:.2} % |",
            loss * 100.0,
            reorder * 100.0,
            h[n / 2],
            100.0 * bare as f64 / n as f64
        );
    }
    let (mut headers, per_option) = measure(0.001, 0.0);
    let n = headers.len();
    assert!(n > 3000, "only {n} data packets");
    headers.sort_unstable();
    let (min, med, max) = (headers[0], headers[n / 2], headers[n - 1]);
    let mean = headers.iter().sum::<usize>() as f64 / n as f64;
    assert!(
        max <= DATA_HEADER_MAX,
        "a data packet's DCCP header of {max} bytes exceeds the {DATA_HEADER_MAX} reserved"
    );
    assert_eq!(plan.dccp_bytes as usize, DATA_HEADER_MAX);
    eprintln!(
        "{n} data packets: DCCP header min {min} / median {med} / mean {mean:.1} / max {max} bytes (reserved {DATA_HEADER_MAX})"
    );
    eprintln!("options on data packets (packets carrying it, mean bytes when present):");
    for (k, (pkts, bytes)) in &per_option {
        eprintln!(
            "  {k:<20} {:>5.1} %  {:>5.1} bytes",
            100.0 * *pkts as f64 / n as f64,
            *bytes as f64 / *pkts as f64
        );
    }
    eprintln!("| outer path | outer headers | DCCP median (max) | total median (max) | reserved | TUN MTU at 1500 |");
    for (name, outer) in [
        ("IPv4, DCCP-in-UDP", 28),
        ("IPv6, DCCP-in-UDP", 48),
        ("IPv4, native DCCP", 20),
        ("IPv6, native DCCP", 40),
    ] {
        let mtu = 1500 - outer - DATA_HEADER_MAX;
        eprintln!(
            "| {name} | {outer} | {med} ({max}) | {} ({}) | {} | {mtu} |",
            outer + med,
            outer + max,
            outer + DATA_HEADER_MAX
        );
    }
}
