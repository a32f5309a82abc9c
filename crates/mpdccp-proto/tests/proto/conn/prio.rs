//! Path priorities hold in both directions. A path the client
//! opens as standby (MP_PRIO 1, RFC 9897 §3.2.10) is announced to the
//! server during the join, so neither end puts data on it while the
//! primary is up; when the primary is blackholed the standby takes over.

use std::time::Duration;

use mpdccp_proto::conn::PacketType;
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side, WireRecord};
use mpdccp_proto::path::priority;
use mpdccp_proto::wire::mp::subtype as mp;
use mpdccp_proto::{Event, PathId, PathView};

const A: PathId = PathId(0);
const B: PathId = PathId(1);

/// Path A primary (10 ms one-way, 20 Mbit/s), path B standby (15 ms,
/// 20 Mbit/s): both bottlenecked so the primary's window fills and a
/// scheduler that ignored the standby rule would spill onto B.
fn harness(seed: u64) -> Harness {
    harness_with(seed, 10)
}

/// As [`harness`] with path A `a_ms` one-way (B stays 15 ms).
fn harness_with(seed: u64, a_ms: u64) -> Harness {
    let link = |ms: u64, prio: u8| LinkSpec {
        delay: Duration::from_millis(ms),
        rate_bps: Some(20_000_000),
        buffer_bytes: 60_000,
        priority: prio,
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        paths: vec![link(a_ms, priority::PRIMARY), link(15, priority::STANDBY)],
        seed,
        ..Default::default()
    });
    h.record = true;
    h
}

fn view(h: &Harness, side: Side, id: PathId) -> PathView {
    h.conn_ref(side)
        .paths()
        .into_iter()
        .find(|p| p.id == id)
        .expect("path exists")
}

fn is_data(r: &WireRecord) -> bool {
    matches!(
        inspect::packet_type(&r.bytes),
        Some(PacketType::Data | PacketType::DataAck)
    )
}

/// Data packets `from` put on `path` (dropped ones included).
fn data_on(h: &Harness, path: PathId, from: Side) -> usize {
    h.wire
        .iter()
        .filter(|r| r.path == path && r.from == from && is_data(r))
        .count()
}

/// Offers `n` packets of 1000 bytes on each side, one per `gap` per side.
fn bulk_both_ways(h: &mut Harness, n: u32, gap: Duration, tag: u8) {
    for k in 0..n {
        for side in [Side::Client, Side::Server] {
            let now = h.now;
            let mut p = vec![tag; 1000];
            p[..4].copy_from_slice(&k.to_be_bytes());
            let _ = h.conn(side).send(now, &p);
        }
        h.drive_for(gap);
    }
}

/// MP_PRIO value carried by a raw packet, if any.
fn prio_of(bytes: &[u8]) -> Option<u8> {
    inspect::find_mp_suboption(bytes, mp::PRIO).map(|r| bytes[r.start] & 0x0f)
}

#[test]
fn a_standby_path_is_announced_in_its_join_and_the_server_applies_it() {
    let mut h = harness(1);
    h.open_paths(2, Duration::from_millis(400));
    // Client: standby from add_path; server: learnt it from MP_PRIO.
    assert_eq!(view(&h, Side::Client, B).priority, priority::STANDBY);
    assert_eq!(view(&h, Side::Server, B).priority, priority::STANDBY);
    assert_eq!(view(&h, Side::Server, A).priority, priority::PRIMARY);
    assert!(h.server_events.contains(&Event::PriorityChanged {
        path: B,
        priority: priority::STANDBY
    }));
    // It rode on the join's third packet (the server knew before it could
    // schedule anything on B), with MP_SEQ (RFC 9897 §3.2.1).
    let third = h
        .wire
        .iter()
        .find(|r| {
            r.path == B
                && r.from == Side::Client
                && inspect::packet_type(&r.bytes) == Some(PacketType::Ack)
        })
        .expect("the join's third packet");
    assert_eq!(prio_of(&third.bytes), Some(priority::STANDBY));
    assert!(inspect::find_mp_suboption(&third.bytes, mp::SEQ).is_some());
    // Path A (default primary) never carried MP_PRIO.
    assert!(!h
        .wire
        .iter()
        .any(|r| r.path == A && r.from == Side::Client && prio_of(&r.bytes).is_some()));
    // The server confirmed it: the client gave nothing up, and stopped
    // sending it (a few repeats at most: third packet, first Ack in OPEN).
    assert_eq!(h.client.stats().paths.mp_option_unconfirmed, 0);
    let sent = h
        .wire
        .iter()
        .filter(|r| r.from == Side::Client && prio_of(&r.bytes).is_some())
        .count();
    h.drive_for(Duration::from_secs(3));
    let later = h
        .wire
        .iter()
        .filter(|r| r.from == Side::Client && prio_of(&r.bytes).is_some())
        .count();
    assert!(
        sent <= 3 && later == sent,
        "MP_PRIO sent {sent}, then {later}"
    );
}

#[test]
fn a_priority_set_before_the_handshake_is_told_once_multipath_is_on() {
    // The first path itself: set to secondary before multipath exists.
    let mut h = harness(2);
    h.specs[0].priority = priority::PRIMARY;
    h.open_path(0);
    let now = h.now;
    h.client.set_priority(now, A, priority::SECONDARY);
    h.drive_for(Duration::from_millis(300));
    assert!(h.client.is_established());
    assert_eq!(view(&h, Side::Server, A).priority, priority::SECONDARY);
    assert_eq!(h.client.stats().paths.mp_option_unconfirmed, 0);
}

#[test]
fn a_standby_path_carries_no_data_either_way_while_the_primary_is_up() {
    for seed in 1..=4 {
        let mut h = harness(seed);
        h.open_path(0);
        h.drive_for(Duration::from_millis(100));
        // Bulk both ways already running when B joins: the server has data
        // queued the moment the join completes.
        // 32 Mbit/s offered each way over A's 20 Mbit/s: A's window and
        // buffer are full, packets are lost, the standby is still left alone.
        bulk_both_ways(&mut h, 400, Duration::from_micros(250), 1);
        h.open_path(1);
        bulk_both_ways(&mut h, 8000, Duration::from_micros(250), 2);
        h.drive_for(Duration::from_secs(1));
        assert_eq!(
            view(&h, Side::Server, B).state,
            mpdccp_proto::PathState::Active
        );
        let (ca, sa) = (data_on(&h, A, Side::Client), data_on(&h, A, Side::Server));
        let (cb, sb) = (data_on(&h, B, Side::Client), data_on(&h, B, Side::Server));
        println!("seed {seed}: data on A c→s {ca} s→c {sa}; on B c→s {cb} s→c {sb}");
        assert!(ca > 3000 && sa > 3000, "bulk went over A: {ca}/{sa}");
        assert!(
            h.client.path_stats(A).unwrap().lost_pkts > 0,
            "A was overloaded"
        );
        assert_eq!(h.client.stats().paths.standby_takeovers, 0);
        assert_eq!(h.server.stats().paths.standby_takeovers, 0);
        assert_eq!((cb, sb), (0, 0), "standby B carried data (c→s, s→c)");
        for side in [Side::Client, Side::Server] {
            let st = h.conn_ref(side).path_stats(B).unwrap();
            assert_eq!((st.tx_data_pkts, st.rx_data_pkts), (0, 0), "{side:?}");
            // B is alive all the same (handshake, MP_PRIO/confirm, acks).
            assert!(st.tx_pkts > 0 && st.rx_pkts > 0, "{side:?}");
        }
    }
}

/// The primary is blackholed (both directions) during bulk traffic both
/// ways: the standby takes over within 3 srtt (30 ms on a short path), and
/// the traffic returns to the primary when it is back. Reports the gap between the outage and
/// the first data packet each side sends on B, and the longest pause in
/// deliveries at each receiver, in units of the primary's srtt.
#[test]
fn the_standby_takes_over_when_the_primary_is_blackholed() {
    let mut worst = 0.0f64;
    for (seed, a_ms) in [(1, 10), (2, 10), (3, 40), (4, 2)] {
        let mut h = harness_with(seed, a_ms);
        h.open_paths(2, Duration::from_millis(300));
        bulk_both_ways(&mut h, 2000, Duration::from_micros(1000), 1);
        let srtt = view(&h, Side::Client, A)
            .srtt
            .max(view(&h, Side::Server, A).srtt)
            .expect("srtt");
        let fail_at = h.now;
        let back_at = fail_at + Duration::from_secs(1);
        h.specs[0].outages = vec![(fail_at, back_at)];
        let delivered_before = [
            h.delivered(Side::Client).len(),
            h.delivered(Side::Server).len(),
        ];
        // Constant offered load: 1 packet per ms per side.
        let mut last_delivery = [fail_at; 2];
        let mut longest = [Duration::ZERO; 2];
        let mut counts = delivered_before;
        for k in 0..2000u32 {
            for side in [Side::Client, Side::Server] {
                let now = h.now;
                let mut p = vec![3u8; 1000];
                p[..4].copy_from_slice(&k.to_be_bytes());
                let _ = h.conn(side).send(now, &p);
            }
            h.drive_for(Duration::from_millis(1));
            for (j, side) in [Side::Client, Side::Server].into_iter().enumerate() {
                let n = h.delivered(side).len();
                if n > counts[j] {
                    longest[j] = longest[j].max(h.now - last_delivery[j]);
                    last_delivery[j] = h.now;
                    counts[j] = n;
                }
            }
        }
        let first_on_b = |from: Side| {
            h.wire
                .iter()
                .find(|r| r.path == B && r.from == from && is_data(r))
                .map(|r| r.time - fail_at)
                .expect("B carried data after the failure")
        };
        let units = |d: Duration| d.as_secs_f64() / srtt.as_secs_f64();
        let (c, s) = (first_on_b(Side::Client), first_on_b(Side::Server));
        println!(
            "seed {seed}, A {a_ms} ms one-way: srtt(A) {srtt:?}; first data on B after the outage: client {c:?} \
             ({:.2} srtt), server {s:?} ({:.2} srtt); longest delivery pause: at client \
             {:?} ({:.2} srtt), at server {:?} ({:.2} srtt)",
            units(c),
            units(s),
            longest[0],
            units(longest[0]),
            longest[1],
            units(longest[1]),
        );
        assert!(counts[0] > delivered_before[0] + 1000 && counts[1] > delivered_before[1] + 1000);
        assert_eq!(h.client.stats().paths.standby_takeovers, 1);
        assert_eq!(h.server.stats().paths.standby_takeovers, 1);
        // A is back (outage over at +1 s): within 0.5 s the data leaves B.
        let t = back_at + Duration::from_millis(500);
        let late_on_b = h
            .wire
            .iter()
            .filter(|r| r.path == B && r.time > t && is_data(r))
            .count();
        let late_on_a = h
            .wire
            .iter()
            .filter(|r| r.path == A && r.time > t && is_data(r))
            .count();
        assert!(h.now > t + Duration::from_millis(400));
        assert_eq!(late_on_b, 0, "data went back to A ({late_on_a} packets)");
        assert!(late_on_a > 300, "{late_on_a}");
        // Within 3 srtt; on a short path the stall rule's floor (10 ms
        // slack + the peer's 10 ms ack delay) dominates: 30 ms at most.
        let bound = (srtt * 3).max(Duration::from_millis(30));
        assert!(
            c <= bound && s <= bound,
            "takeover within max(3 srtt, 30 ms): client {:.2}, server {:.2} srtt",
            units(c),
            units(s)
        );
        if srtt >= Duration::from_millis(15) {
            worst = worst.max(units(c)).max(units(s));
        }
    }
    println!("worst takeover (srtt >= 15 ms): {worst:.2} srtt");
    assert!(worst <= 3.0);
}

/// Without a standby path nothing changes: two primaries, one blackholed,
/// are left to the RTO as before (no early takeover).
#[test]
fn no_early_takeover_without_a_standby_path() {
    let mut h = harness(1);
    h.specs[1].priority = priority::PRIMARY;
    h.open_paths(2, Duration::from_millis(300));
    assert_eq!(view(&h, Side::Server, B).priority, priority::PRIMARY);
    bulk_both_ways(&mut h, 500, Duration::from_millis(1), 1);
    let now = h.now;
    h.specs[0].outages = vec![(now, now + Duration::from_secs(1))];
    bulk_both_ways(&mut h, 500, Duration::from_millis(1), 2);
    assert_eq!(h.client.stats().paths.standby_takeovers, 0);
    assert_eq!(h.server.stats().paths.standby_takeovers, 0);
}
