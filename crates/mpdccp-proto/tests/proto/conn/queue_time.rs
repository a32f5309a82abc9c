//! The send queue bounded in time: an age limit drops
//! what waited too long, CoDel (RFC 8289) keeps a standing queue near its
//! target. One 2 Mbit/s path with a small bottleneck buffer, so the delay a
//! packet sees is mostly the connection's own send queue.

use std::time::Duration;

use crate::common;
use mpdccp_proto::conn::CoDelConfig;
use mpdccp_proto::conn::SendQueueConfig;
use mpdccp_proto::harness::{Harness, Side};
use mpdccp_proto::{ConnectionConfig, Event, Instant};

const RATE_BPS: u64 = 2_000_000;
const PKT: usize = 1000;

/// The one path, opened.
fn harness(client: ConnectionConfig) -> Harness {
    common::bottleneck(client, RATE_BPS)
}

/// A big packet queue, so only the time limits under test bound it.
fn config(max_delay: Option<Duration>, codel: Option<CoDelConfig>) -> ConnectionConfig {
    ConnectionConfig {
        send_queue: SendQueueConfig {
            pkts: 100_000,
            bytes: 100_000_000,
            max_delay,
            codel,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Offers `rate_bps` of `PKT`-byte packets client → server for `secs`,
/// each stamped with its send time; returns each delivered packet's
/// (send time, one-way delay) in delivery order.
fn offer(h: &mut Harness, rate_bps: u64, secs: f64) -> Vec<(Instant, Duration)> {
    let gap = Duration::from_secs_f64(PKT as f64 * 8.0 / rate_bps as f64);
    let start = h.now;
    let end = start + Duration::from_secs_f64(secs);
    let mut next = start;
    let mut seen = 0;
    let mut out = Vec::new();
    while h.now < end + Duration::from_secs(15) {
        if h.now >= next && h.now < end {
            let mut p = vec![0u8; PKT];
            p[..8].copy_from_slice(&h.now.as_nanos().to_be_bytes());
            let now = h.now;
            let _ = h.conn(Side::Client).send(now, &p);
            next += gap;
        }
        h.drive_for(Duration::from_micros(500));
        let ev = h.events(Side::Server);
        for e in &ev[seen..] {
            if let Event::Delivered { data, .. } = e {
                let sent = Instant::from_nanos(u64::from_be_bytes(data[..8].try_into().unwrap()));
                out.push((sent, h.now.saturating_duration_since(sent)));
            }
        }
        seen = ev.len();
    }
    out
}

fn max_delay(d: &[(Instant, Duration)]) -> Duration {
    d.iter().map(|x| x.1).max().unwrap_or_default()
}

/// p95 of the delays of packets sent in the last second of the offer.
fn p95_of_last_second(d: &[(Instant, Duration)], end: Instant) -> Duration {
    let mut v: Vec<Duration> = d
        .iter()
        .filter(|x| x.0 + Duration::from_secs(1) >= end)
        .map(|x| x.1)
        .collect();
    assert!(!v.is_empty());
    v.sort();
    v[(v.len() - 1) * 95 / 100]
}

/// Offered at twice the path's rate for 3 s, nothing bounds the queue's
/// delay but its size: packets wait seconds. With a 500 ms age limit no
/// packet arrives later than that plus what the path itself holds (one
/// window and the bottleneck buffer), and every packet shed is counted.
#[test]
fn an_age_limit_bounds_the_wait_of_every_packet() {
    let mut plain = harness(config(None, None));
    let start = plain.now;
    let d0 = offer(&mut plain, 2 * RATE_BPS, 3.0);
    let mut limited = harness(config(Some(Duration::from_millis(500)), None));
    assert_eq!(limited.now, start);
    let d1 = offer(&mut limited, 2 * RATE_BPS, 3.0);
    let st = limited.conn_ref(Side::Client).stats();
    println!(
        "max one-way delay without a limit {:?}, with 500 ms {:?}; expired {}, delivered {} of {}",
        max_delay(&d0),
        max_delay(&d1),
        st.send_queue.send_queue_expired,
        d1.len(),
        d0.len()
    );
    assert!(
        max_delay(&d0) > Duration::from_millis(1200),
        "{:?}",
        max_delay(&d0)
    );
    assert!(
        max_delay(&d1) < Duration::from_millis(800),
        "{:?}",
        max_delay(&d1)
    );
    // Half the offered 750 packets cannot be carried; the limit sheds them.
    assert!(st.send_queue.send_queue_expired > 200, "{st:?}");
    assert_eq!(
        plain
            .conn_ref(Side::Client)
            .stats()
            .send_queue
            .send_queue_expired,
        0
    );
    // The limit costs no throughput: while the offer lasts, the path
    // delivers as much either way.
    let during = |d: &[(Instant, Duration)]| {
        let (from, to) = (
            start + Duration::from_millis(500),
            start + Duration::from_secs(3),
        );
        d.iter()
            .filter(|x| (from..to).contains(&(x.0 + x.1)))
            .count() as f64
    };
    let (a, b) = (during(&d0), during(&d1));
    println!("delivered between 0.5 s and 3 s: {a} without, {b} with the limit");
    assert!((b - a).abs() / a < 0.05, "{a} vs {b} delivered");
}

/// Offered at 10 % above the path's rate: without AQM the queue only
/// grows; with CoDel (RFC defaults) the delay in the last second stays
/// near the target plus what the path holds, at the cost of the excess.
#[test]
fn codel_keeps_a_standing_queue_near_its_target() {
    let offered = RATE_BPS * 11 / 10;
    let mut plain = harness(config(None, None));
    let d0 = offer(&mut plain, offered, 4.0);
    let mut codel = harness(config(None, Some(CoDelConfig::default())));
    let start = codel.now;
    let d1 = offer(&mut codel, offered, 4.0);
    let end = start + Duration::from_secs(4);
    let st = codel.conn_ref(Side::Client).stats();
    let (p0, p1) = (
        p95_of_last_second(&d0, d0.last().unwrap().0),
        p95_of_last_second(&d1, end),
    );
    println!(
        "p95 one-way delay, last second: no AQM {p0:?}, CoDel {p1:?}; CoDel drops {}, delivered {} vs {}",
        st.send_queue.send_queue_codel_dropped,
        d1.len(),
        d0.len()
    );
    assert!(p0 > Duration::from_millis(250), "{p0:?}");
    assert!(p1 < Duration::from_millis(120), "{p1:?}");
    assert!(st.send_queue.send_queue_codel_dropped > 0);
    // CoDel drops about the excess (10 % of 250 packets/s over 4 s = 100),
    // not more than twice it.
    assert!(st.send_queue.send_queue_codel_dropped < 200, "{st:?}");
}
