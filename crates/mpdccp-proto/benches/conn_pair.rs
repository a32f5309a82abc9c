//! Goodput of a client/server `Connection` pair in memory, two subflows,
//! 1200-byte tunnelled packets one way, with and without payload
//! protection (the cost of `auth = "protected"` in the core).
//!
//! Both ends run on one thread and every datagram goes straight from one
//! `poll_transmit` to the other's `handle_datagram`: no sockets, no link
//! model, so the figure is the protocol core's CPU cost (DCCP + CCID2 +
//! scheduler + reorderer, plus ChaCha20-Poly1305 seal and open when
//! protected). Criterion's throughput is in bytes of tunnelled packets
//! delivered per second (×8 for bit/s). Keys come from a real Noise
//! handshake (`harness::session_keys`).

use std::time::{Duration, Instant as WallClock};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpdccp_proto::harness::session_keys;
use mpdccp_proto::{Connection, ConnectionConfig, Event, Instant, PathConfig, PathId, Role};

const PAYLOAD: usize = 1200;
/// Packets delivered per measured iteration.
const BATCH: u64 = 2000;
const PATHS: u32 = 2;

struct Pair {
    now: Instant,
    client: Connection,
    server: Connection,
    buf: Vec<u8>,
    delivered_bytes: u64,
}

fn addrs(p: u32) -> (std::net::SocketAddr, std::net::SocketAddr) {
    let c = format!("10.0.{p}.1:4242").parse().expect("literal");
    let s = format!("10.0.{p}.2:4242").parse().expect("literal");
    (c, s)
}

impl Pair {
    fn new(protected: bool) -> Pair {
        let now = Instant::ZERO;
        let cfg = ConnectionConfig::default();
        let mut client = Connection::new(Role::Client, cfg.clone(), now, 1);
        let mut server = Connection::new(Role::Server, cfg, now, 2);
        if protected {
            let (ck, sk) = session_keys(7);
            client.enable_payload_protection(ck);
            server.enable_payload_protection(sk);
        }
        let mut pair = Pair {
            now,
            client,
            server,
            buf: vec![0u8; 65_536],
            delivered_bytes: 0,
        };
        for p in 0..PATHS {
            let (local, remote) = addrs(p);
            let cfg = PathConfig {
                local: Some(local),
                remote: Some(remote),
                ..Default::default()
            };
            let now = pair.now;
            pair.client.add_path(now, PathId(p), cfg).expect("add_path");
            for _ in 0..20 {
                pair.step(Duration::from_millis(1));
            }
        }
        assert!(pair.client.is_established() && pair.server.is_established());
        pair
    }

    /// Moves every datagram from `from` to the other end until none is left.
    fn flush(&mut self, from_client: bool) -> bool {
        let now = self.now;
        let (tx, rx) = if from_client {
            (&mut self.client, &mut self.server)
        } else {
            (&mut self.server, &mut self.client)
        };
        let mut moved = false;
        while let Some(t) = tx.poll_transmit(now, &mut self.buf) {
            moved = true;
            let (c, s) = addrs(t.path.0);
            let (local, remote) = if from_client { (s, c) } else { (c, s) };
            let seg = t.segment_size.unwrap_or(t.size).max(1);
            for d in self.buf[..t.size].chunks(seg) {
                rx.handle_datagram_from(now, t.path, local, remote, d);
            }
        }
        moved
    }

    /// Advances the clock by `dt`, fires timers and exchanges everything.
    fn step(&mut self, dt: Duration) {
        self.now += dt;
        let now = self.now;
        for c in [&mut self.client, &mut self.server] {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        while self.flush(true) | self.flush(false) {}
        while self.client.poll_event().is_some() {}
        while let Some(e) = self.server.poll_event() {
            if let Event::Delivered { data, .. } = e {
                self.delivered_bytes += data.len() as u64;
                // As the daemons do: the next payload reuses the buffer.
                self.server.recycle_delivered(data);
            }
        }
    }

    /// Sends until `packets` more tunnelled packets have been delivered.
    fn deliver(&mut self, packets: u64) {
        let target = self.delivered_bytes + packets * PAYLOAD as u64;
        let msg = vec![0xA5u8; PAYLOAD];
        while self.delivered_bytes < target {
            let now = self.now;
            for _ in 0..64 {
                if self.client.send(now, &msg).is_err() {
                    break;
                }
            }
            self.step(Duration::from_micros(20));
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("conn_pair_goodput");
    group.throughput(Throughput::Bytes(BATCH * PAYLOAD as u64));
    for protected in [false, true] {
        let name = if protected { "protected" } else { "clear" };
        group.bench_function(BenchmarkId::new(name, PAYLOAD), |b| {
            let mut pair = Pair::new(protected);
            b.iter_custom(|iters| {
                let start = WallClock::now();
                for _ in 0..iters {
                    pair.deliver(BATCH);
                }
                start.elapsed()
            });
            let s = pair.server.stats();
            assert_eq!((s.rx.rx_protect_failed, s.rx.rx_replayed), (0, 0));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
