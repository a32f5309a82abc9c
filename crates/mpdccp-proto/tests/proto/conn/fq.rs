//! Flow queuing in the send queue: with `send_queue.flows`
//! (FQ-CoDel, RFC 8290) a sparse flow in the tunnel does not wait behind,
//! nor get tail-dropped because of, a bulk flow that keeps the queue full.

use std::time::Duration;

use crate::common;
use mpdccp_proto::conn::SendQueueConfig;
use mpdccp_proto::conn::{CoDelConfig, DEFAULT_SEND_QUEUE_FLOWS};
use mpdccp_proto::harness::Side;
use mpdccp_proto::{Connection, ConnectionConfig, Event, Instant, Role, SendError};

const RATE_BPS: u64 = 2_000_000;
const PING: u16 = 77;
const BULK: u16 = 1000;

/// An IPv4/UDP packet of `len` bytes from `port`, stamped at bytes 28..36.
fn packet(port: u16, len: usize, stamp: Instant) -> Vec<u8> {
    let mut p = vec![0u8; len.max(36)];
    p[0] = 0x45;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&port.to_be_bytes());
    p[22..24].copy_from_slice(&53u16.to_be_bytes());
    p[28..36].copy_from_slice(&stamp.as_nanos().to_be_bytes());
    p
}

fn port_of(p: &[u8]) -> u16 {
    u16::from_be_bytes([p[20], p[21]])
}

fn stamp_of(p: &[u8]) -> Instant {
    Instant::from_nanos(u64::from_be_bytes(p[28..36].try_into().unwrap()))
}

fn config(flows: usize) -> ConnectionConfig {
    ConnectionConfig {
        send_queue: SendQueueConfig {
            codel: Some(CoDelConfig::default()),
            flows,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Hostile inner traffic, every packet a new flow: a state per bucket at
/// most (the queue starts with none; a flow emptied by an overflow drop
/// keeps its state until its turn comes, RFC 8290 §4.2, so up to every
/// bucket can hold one while nothing is sent).
#[test]
fn flow_state_is_bounded_by_the_buckets() {
    let t = Instant::ZERO;
    let mut cfg = config(DEFAULT_SEND_QUEUE_FLOWS);
    cfg.send_queue.pkts = 100;
    let mut c = Connection::try_new(Role::Client, cfg, t, 5).unwrap();
    assert_eq!(c.send_queue_flow_states(), 0);
    for port in 0..5000u16 {
        let _ = c.send(t, &packet(port, 200, t));
        assert!(c.send_queue_flow_states() <= DEFAULT_SEND_QUEUE_FLOWS);
        if port < 100 {
            // Until the queue is full, no more states than packets.
            assert!(c.send_queue_flow_states() <= c.send_queue_len());
        }
    }
    assert_eq!(c.send_queue_len(), 100);
}

/// The option reaches the connection's queue: with 10 bulk packets filling
/// a 10-packet queue, the FIFO refuses the ping (tail drop) while the flow
/// queues take it and drop the bulk flow's oldest packet.
#[test]
fn send_queue_flows_reaches_the_queue() {
    let t = Instant::ZERO;
    let send_all = |flows: usize| {
        let mut cfg = config(flows);
        cfg.send_queue.pkts = 10;
        let mut c = Connection::try_new(Role::Client, cfg, t, 5).unwrap();
        for _ in 0..10 {
            c.send(t, &packet(BULK, 1000, t)).unwrap();
        }
        let r = c.send(t, &packet(PING, 84, t));
        (r, c.stats(), c.send_queue_len())
    };
    let (r, st, len) = send_all(0);
    assert_eq!(r, Err(SendError::QueueFull));
    assert_eq!(
        (
            st.send_queue.send_queue_dropped_newest,
            st.send_queue.send_queue_dropped_fattest
        ),
        (1, 0)
    );
    assert_eq!(len, 10);
    let (r, st, len) = send_all(DEFAULT_SEND_QUEUE_FLOWS);
    assert_eq!(r, Ok(()));
    assert_eq!(
        (
            st.send_queue.send_queue_dropped_newest,
            st.send_queue.send_queue_dropped_fattest
        ),
        (0, 1)
    );
    assert_eq!(len, 10);
    assert_eq!(ConnectionConfig::default().send_queue.flows, 0);
}

/// One 2 Mbit/s path, a bulk flow offered at twice its rate (it does not
/// back off: the worst case) and a ping every 50 ms, for 4 s. Behind one
/// FIFO with CoDel the pings wait seconds in the full queue or are
/// refused; with flow queues they wait only for what the path itself
/// holds (its window and bottleneck buffer), and none is lost.
#[test]
fn pings_do_not_wait_behind_a_bulk_flow() {
    let fifo = run(0);
    let fq = run(DEFAULT_SEND_QUEUE_FLOWS);
    println!(
        "pings delivered {}/{} p95 {:?} (FIFO + CoDel) vs {}/{} p95 {:?} (FQ-CoDel); \
         bulk delivered {} vs {}",
        fifo.pings,
        fifo.pings_sent,
        fifo.ping_p95,
        fq.pings,
        fq.pings_sent,
        fq.ping_p95,
        fifo.bulk,
        fq.bulk
    );
    // Behind the FIFO: refused when it is full, late when taken.
    assert!(fifo.pings_sent - fifo.pings > 10);
    assert!(
        fifo.ping_p95 > Duration::from_millis(500),
        "{:?}",
        fifo.ping_p95
    );
    assert_eq!(fq.pings, fq.pings_sent);
    assert!(
        fq.ping_p95 < Duration::from_millis(150),
        "{:?}",
        fq.ping_p95
    );
    // The bulk flow still gets the path.
    assert!(
        fq.bulk as f64 > 0.9 * fifo.bulk as f64,
        "{} vs {}",
        fq.bulk,
        fifo.bulk
    );
}

struct Outcome {
    pings_sent: usize,
    pings: usize,
    ping_p95: Duration,
    bulk: usize,
}

fn run(flows: usize) -> Outcome {
    let mut h = common::bottleneck(config(flows), RATE_BPS);
    const PKT: usize = 1000;
    let gap = Duration::from_secs_f64(PKT as f64 * 8.0 / (2 * RATE_BPS) as f64);
    let start = h.now;
    let end = start + Duration::from_secs(4);
    let (mut next_bulk, mut next_ping) = (start, start + Duration::from_millis(500));
    let (mut seen, mut pings_sent, mut bulk) = (0, 0, 0);
    let mut ping_delays = Vec::new();
    while h.now < end + Duration::from_secs(10) {
        let now = h.now;
        if now < end {
            while next_bulk <= now {
                let _ = h.conn(Side::Client).send(now, &packet(BULK, PKT, now));
                next_bulk += gap;
            }
            if next_ping <= now {
                let _ = h.conn(Side::Client).send(now, &packet(PING, 84, now));
                pings_sent += 1;
                next_ping += Duration::from_millis(50);
            }
        }
        h.drive_for(Duration::from_micros(500));
        let ev = h.events(Side::Server);
        for e in &ev[seen..] {
            if let Event::Delivered { data, .. } = e {
                if port_of(data) == PING {
                    ping_delays.push(h.now.saturating_duration_since(stamp_of(data)));
                } else {
                    bulk += 1;
                }
            }
        }
        seen = ev.len();
    }
    let pings = ping_delays.len();
    ping_delays.sort();
    Outcome {
        pings_sent,
        pings,
        // Of the pings delivered.
        ping_p95: ping_delays
            .get(pings.saturating_sub(1) * 95 / 100)
            .copied()
            .unwrap_or(Duration::MAX),
        bulk,
    }
}
