//! The pacer under a coarse driver: a real event loop wakes late (timer
//! slack, a busy core, batched I/O), not exactly at `poll_timeout`. A pacer
//! that restarts its schedule from the late wake-up loses the credit and
//! caps the rate at one packet per wake-up, below the pacing rate (the
//! testbed's "core CCID5 under-uses the path"). Here the driver runs on a
//! 1 ms tick, like a HZ=1000 timer, over a 20 Mbit/s path whose packet gap
//! (0.5 ms) is shorter than the tick.

use std::collections::VecDeque;
use std::time::Duration;

use mpdccp_proto::harness::Harness;
use mpdccp_proto::{Connection, ConnectionConfig, Event, Instant, PathConfig, PathId, Role};

const LINK_BPS: u64 = 20_000_000;
const DELAY: Duration = Duration::from_millis(5);
const BUFFER_BYTES: usize = 150_000;
const PKT_BYTES: usize = 1200;

/// One direction of the path: optional bottleneck with a drop-tail buffer.
#[derive(Default)]
struct Wire {
    q: VecDeque<(Instant, Vec<u8>)>,
    busy_until: Instant,
}

impl Wire {
    fn push(&mut self, now: Instant, bytes: Vec<u8>, rate_bps: Option<u64>) {
        let at = match rate_bps {
            Some(r) => {
                let start = self.busy_until.max(now);
                let backlog = (start - now).as_secs_f64() * r as f64 / 8.0;
                if backlog as usize + bytes.len() > BUFFER_BYTES {
                    return;
                }
                let tx = Duration::from_nanos(bytes.len() as u64 * 8 * 1_000_000_000 / r);
                self.busy_until = start + tx;
                start + tx + DELAY
            }
            None => now + DELAY,
        };
        self.q.push_back((at, bytes));
    }
}

/// Delivered payload, Mbit/s, over [3 s, 9 s) with the driver ticking every
/// `tick`.
fn ccid5_goodput_mbps(tick: Duration) -> f64 {
    let cfg = ConnectionConfig {
        cc: "ccid5".parse().unwrap(),
        ..ConnectionConfig::default()
    };
    let mut now = Instant::ZERO;
    let mut client = Connection::new(Role::Client, cfg.clone(), now, 3);
    let mut server = Connection::new(Role::Server, cfg, now, 4);
    let (caddr, saddr) = Harness::path_addrs(0);
    client
        .add_path(
            now,
            PathId(0),
            PathConfig {
                local: Some(caddr),
                remote: Some(saddr),
                ..PathConfig::default()
            },
        )
        .expect("first path");
    let (mut up, mut down) = (Wire::default(), Wire::default());
    let mut buf = vec![0u8; 65_536];
    let pkt = vec![0x45u8; PKT_BYTES];
    let (from, to) = (Instant::from_millis(3000), Instant::from_millis(9000));
    let mut delivered_bytes = 0usize;
    while now < to {
        now += tick;
        while up.q.front().is_some_and(|(at, _)| *at <= now) {
            let (_, b) = up.q.pop_front().expect("front");
            server.handle_datagram_from(now, PathId(0), saddr, caddr, &b);
        }
        while down.q.front().is_some_and(|(at, _)| *at <= now) {
            let (_, b) = down.q.pop_front().expect("front");
            client.handle_datagram_from(now, PathId(0), caddr, saddr, &b);
        }
        for c in [&mut client, &mut server] {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        if client.is_established() {
            while client.send_queue_len() < 100 {
                client.send(now, &pkt).expect("queue has room");
            }
        }
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            up.push(now, buf[..t.size].to_vec(), Some(LINK_BPS));
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            down.push(now, buf[..t.size].to_vec(), None);
        }
        while let Some(e) = server.poll_event() {
            if let Event::Delivered { data, .. } = e {
                if now >= from {
                    delivered_bytes += data.len();
                }
            }
        }
        while client.poll_event().is_some() {}
    }
    delivered_bytes as f64 * 8.0 / (to - from).as_secs_f64() / 1e6
}

/// 1200-byte payloads in ~1250-byte datagrams: 19.2 Mbit/s of payload is
/// the link; one packet per 1 ms tick would be 9.6.
#[test]
fn ccid5_keeps_its_rate_when_the_driver_wakes_on_a_coarse_tick() {
    let coarse = ccid5_goodput_mbps(Duration::from_millis(1));
    let fine = ccid5_goodput_mbps(Duration::from_micros(50));
    eprintln!("ccid5 goodput: 1 ms tick {coarse:.2} Mbit/s, 50 µs tick {fine:.2} Mbit/s");
    assert!(fine >= 17.0, "fine tick: {fine:.2} Mbit/s");
    assert!(
        coarse >= 17.0,
        "1 ms tick: {coarse:.2} Mbit/s (fine: {fine:.2})"
    );
}
