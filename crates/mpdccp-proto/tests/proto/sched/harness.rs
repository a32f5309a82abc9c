//! Schedulers and reordering end to end, in the N-path harness (client →
//! server traffic, virtual clock, emulated links).

use std::time::Duration;

use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::reorder::ReorderConfig;
use mpdccp_proto::sched::SchedulerConfig;
use mpdccp_proto::{ConnectionConfig, Event, Instant, PathId};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn link(delay_ms: u64, priority: u8) -> LinkSpec {
    LinkSpec {
        delay: ms(delay_ms),
        priority,
        ..Default::default()
    }
}

fn harness(
    paths: Vec<LinkSpec>,
    scheduler: &str,
    reorder: ReorderConfig,
    tweak: impl Fn(&mut ConnectionConfig),
) -> Harness {
    let mut client = ConnectionConfig {
        scheduler: SchedulerConfig::from(
            scheduler
                .parse::<mpdccp_proto::sched::SchedulerKind>()
                .unwrap(),
        ),
        reorder: reorder.clone(),
        ..ConnectionConfig::default()
    };
    tweak(&mut client);
    let mut server = client.clone();
    server.reorder = reorder;
    let n = paths.len();
    let mut h = Harness::new(HarnessConfig {
        client,
        server,
        paths,
        seed: 7,
    });
    h.open_path(0);
    h.drive_for(ms(200));
    for i in 1..n {
        h.open_path(i);
    }
    h.drive_for(ms(300));
    assert!(h.client.is_established() && h.server.is_established());
    for i in 0..n {
        assert!(
            h.client_events
                .contains(&Event::PathEstablished(PathId(i as u32)))
                || i == 0,
            "path {i} up: {:?}",
            h.client_events
        );
    }
    h
}

/// A packet stamped with its send time (ms) and an index.
fn stamped(now: Instant, k: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(12)];
    p[..8].copy_from_slice(&(now.as_nanos() / 1_000_000).to_be_bytes());
    p[8..12].copy_from_slice(&k.to_be_bytes());
    p
}

fn index(d: &[u8]) -> u32 {
    u32::from_be_bytes(d[8..12].try_into().unwrap())
}

fn sent_ms(d: &[u8]) -> u64 {
    u64::from_be_bytes(d[..8].try_into().unwrap())
}

fn data_pkts(h: &Harness, path: u32) -> u64 {
    h.client
        .path_stats(PathId(path))
        .map_or(0, |s| s.tx_data_pkts)
}

/// Sends `n` packets, one every `gap`, starting with index `first`.
fn pace(h: &mut Harness, first: u32, n: u32, gap: Duration) {
    for k in first..first + n {
        let now = h.now;
        h.client.send(now, &stamped(now, k, 1000)).unwrap();
        h.drive_for(gap);
    }
}

#[test]
fn cpf_spills_to_the_second_path_only_while_the_first_is_full() {
    let mut h = harness(
        vec![link(10, 3), link(20, 2)],
        "cpf",
        ReorderConfig::from(
            "active-adaptive"
                .parse::<mpdccp_proto::reorder::ReorderKind>()
                .unwrap(),
        ),
        |_| {},
    );
    // Light load (1 packet per RTT of path 0, below its window): path 0 only.
    let (a0, a1) = (data_pkts(&h, 0), data_pkts(&h, 1));
    pace(&mut h, 0, 100, ms(20));
    h.drive_for(ms(100));
    assert_eq!(data_pkts(&h, 1) - a1, 0, "no spill under light load");
    assert_eq!(data_pkts(&h, 0) - a0, 100);
    // A burst of 300 packets at once: path 0's window fills, the rest spills.
    let (b0, b1) = (data_pkts(&h, 0), data_pkts(&h, 1));
    let cwnd0 = h.client.paths()[0].cwnd_pkts;
    let now = h.now;
    for k in 100..400 {
        h.client.send(now, &stamped(now, k, 1000)).unwrap();
    }
    // Right after the burst: path 0 is full, and path 1 took the overflow.
    h.drive_for(Duration::from_micros(1));
    let v = h.client.paths();
    assert!(
        v[0].in_flight_pkts + v[0].queued_pkts >= v[0].cwnd_pkts,
        "{:?}",
        v[0]
    );
    assert!(data_pkts(&h, 1) > b1, "spilled to path 1");
    assert!(
        data_pkts(&h, 0) - b0 >= u64::from(cwnd0.min(300)),
        "path 0 filled first"
    );
    h.drive_for(ms(2000));
    // Light load again: back to path 0 only.
    let (c0, c1) = (data_pkts(&h, 0), data_pkts(&h, 1));
    pace(&mut h, 400, 100, ms(20));
    h.drive_for(ms(100));
    assert_eq!(data_pkts(&h, 1) - c1, 0, "returns to path 0 when it frees");
    assert_eq!(data_pkts(&h, 0) - c0, 100);
    // Everything arrived, once, in order.
    let got: Vec<u32> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| index(d))
        .collect();
    assert_eq!(got, (0..500).collect::<Vec<_>>());
}

#[test]
fn redundant_delivers_every_packet_exactly_once() {
    for reorder in ["passive", "active-fixed"] {
        let mut h = harness(
            vec![link(10, 3), link(25, 3)],
            "redundant",
            ReorderConfig::from(
                reorder
                    .parse::<mpdccp_proto::reorder::ReorderKind>()
                    .unwrap(),
            ),
            |_| {},
        );
        let (a0, a1) = (data_pkts(&h, 0), data_pkts(&h, 1));
        pace(&mut h, 0, 500, ms(2));
        h.drive_for(ms(500));
        let mut got: Vec<u32> = h
            .delivered(Side::Server)
            .iter()
            .map(|(_, d)| index(d))
            .collect();
        let in_order = got.windows(2).all(|w| w[0] < w[1]);
        got.sort();
        assert_eq!(
            got,
            (0..500).collect::<Vec<_>>(),
            "{reorder}: each packet once"
        );
        if reorder != "passive" {
            assert!(in_order, "{reorder}: in order");
        }
        // Both paths carried most packets (a path whose window is full skips
        // a copy), and every extra copy was recognised as a duplicate.
        let (d0, d1) = (data_pkts(&h, 0) - a0, data_pkts(&h, 1) - a1);
        assert!(d0 >= 400 && d1 >= 400, "{reorder}: {d0} + {d1} copies");
        let st = h.server.reorder_stats();
        assert_eq!(st.duplicates, d0 + d1 - 500, "{reorder}: {st:?}");
    }
}

/// `redundant` is bought for loss: with two paths that lose packets
/// independently at rate p, a packet is lost only when both copies are, so
/// the delivered loss approaches p² (here 2 % per path → 0.04 %), far below
/// either path's p. A copy for a path whose window is full waits in that
/// path's bounded queue instead of being skipped.
#[test]
fn redundant_delivered_loss_approaches_p_squared() {
    let p = 0.02;
    let lossy = |delay_ms| LinkSpec {
        loss: p,
        ..link(delay_ms, 3)
    };
    let mut h = harness(
        vec![lossy(10), lossy(25)],
        "redundant",
        ReorderConfig::from(mpdccp_proto::reorder::ReorderKind::Passive),
        |_| {},
    );
    // 100 packets/s (0.8 Mbit/s): within what CCID2 carries at 2 % loss on
    // the slower path, so copies wait briefly rather than pile up.
    let n = 10_000u32;
    pace(&mut h, 0, n, ms(10));
    h.drive_for(ms(3000));
    let mut got: Vec<u32> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| index(d))
        .collect();
    got.sort();
    got.dedup();
    let lost = f64::from(n - got.len() as u32) / f64::from(n);
    // 10 000 packets at p² = 0.04 %: 4 expected (Poisson; P(≥ 12) < 0.1 %),
    // against 200 for one path.
    assert!(
        lost <= 3.0 * p * p,
        "delivered loss {lost:.4} vs p² = {:.4} (p = {p})",
        p * p
    );
    let st = h.client.stats();
    assert_eq!(st.send_queue.sched_copies_dropped, 0, "{st:?}");
}

#[test]
fn handover_switches_within_a_few_rtts_of_an_outage_and_back_after_recovery() {
    let mut primary = link(10, 3);
    primary.outages = vec![(Instant::from_millis(1500), Instant::from_millis(3500))];
    let mut h = harness(
        vec![primary, link(30, 2)],
        "handover",
        ReorderConfig::from(
            "active-adaptive"
                .parse::<mpdccp_proto::reorder::ReorderKind>()
                .unwrap(),
        ),
        // Declare a path failed at its first RTO (the default waits for 3).
        |c| c.loss.fail_after_rtos = 1,
    );
    // 1 packet per ms, 0.5 s .. 5.5 s.
    h.drive_until(Instant::from_millis(500));
    let mut k = 0;
    let mut marks = Vec::new();
    let mut switched_at = None;
    while h.now < Instant::from_millis(5500) {
        let t_ms = h.now.as_nanos() / 1_000_000;
        if [1400, 3400, 4400, 5400].contains(&t_ms) {
            marks.push((data_pkts(&h, 0), data_pkts(&h, 1)));
        }
        if switched_at.is_none() && data_pkts(&h, 1) > 0 {
            switched_at = Some(t_ms);
        }
        let now = h.now;
        h.client.send(now, &stamped(now, k, 300)).unwrap();
        k += 1;
        h.drive_for(ms(1));
    }
    h.drive_for(ms(1000));
    // Before the outage only the primary carried data.
    assert_eq!(marks[0].1, 0, "standby path unused before the outage");
    // The switch: the primary's RTT is 20 ms, and its failure shows at the
    // first RTO (CCID2/RFC 6298: 200 ms floor, 1 s initial). Within 400 ms
    // of the outage — a few RTTs of the 60 ms standby path — data moves.
    let switch_ms = switched_at.expect("switched") - 1500;
    assert!(switch_ms < 400, "switched {switch_ms} ms after the outage");
    let delivered: Vec<u64> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| sent_ms(d))
        .collect();
    let during = delivered
        .iter()
        .filter(|&&t| (2000..3500).contains(&t))
        .count();
    assert!(during >= 1490, "during the outage {during}/1500");
    // After recovery traffic returns to the primary, the standby goes quiet.
    let (p0_a, p1_a) = marks[2];
    let (p0_b, p1_b) = marks[3];
    assert!(
        p0_b - p0_a >= 990,
        "primary carries traffic again: {}",
        p0_b - p0_a
    );
    assert!(p1_b - p1_a <= 10, "standby quiet again: {}", p1_b - p1_a);
    assert!(h.client_events.contains(&Event::PathFailed(PathId(0))));
}

#[test]
fn no_stall_when_a_path_dies_with_packets_in_flight() {
    let mut dying = link(10, 3);
    dying.outages = vec![(Instant::from_millis(1000), Instant::from_millis(60_000))];
    let mut h = harness(
        vec![dying, link(40, 3)],
        "rr",
        ReorderConfig {
            timeout: ms(100),
            ..ReorderConfig::from(
                "active-fixed"
                    .parse::<mpdccp_proto::reorder::ReorderKind>()
                    .unwrap(),
            )
        },
        |_| {},
    );
    h.drive_until(Instant::from_millis(500));
    // 1 packet per 2 ms, both paths loaded round-robin, 0.5 s .. 3 s.
    let mut k = 0;
    let mut arrivals = Vec::new();
    let mut seen = 0;
    while h.now < Instant::from_millis(3000) {
        let now = h.now;
        h.client.send(now, &stamped(now, k, 300)).unwrap();
        k += 1;
        h.drive_for(ms(2));
        let n = h.delivered(Side::Server).len();
        if n > seen {
            arrivals.push(h.now);
            seen = n;
        }
    }
    h.drive_for(ms(2000));
    // Deliveries never stop for longer than the reorder deadline (100 ms)
    // plus one sending interval: the gaps left by packets lost on the dead
    // path are given up on the timer, not waited on until failure detection
    // (a 200 ms+ RTO) or forever.
    let max_gap = arrivals.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(max_gap <= ms(110), "delivery stalled for {max_gap:?}");
    let st = h.server.reorder_stats();
    assert_eq!(st.held_pkts, 0, "{st:?}");
    // Packets sent after the failure was detected all arrived (on path 1).
    let delivered: Vec<u64> = h
        .delivered(Side::Server)
        .iter()
        .map(|(_, d)| sent_ms(d))
        .collect();
    let late_window = delivered
        .iter()
        .filter(|&&t| (2500..3000).contains(&t))
        .count();
    assert!(late_window >= 249, "after the failure {late_window}/250");
    assert!(st.gaps_timed_out + st.gaps_fast_lost > 0, "{st:?}");
}
