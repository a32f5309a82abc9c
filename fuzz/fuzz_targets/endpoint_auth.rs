//! Fuzz the multi-client `Endpoint` with the authentication gate on:
//! demultiplexing, cookies in Resets, half-open accounting, the
//! Confirm in the third packet and join routing, driven by two configured
//! clients, a stranger with a valid mac1, and forged or mutated datagrams
//! (`cargo +nightly fuzz run endpoint_auth` from `fuzz/`).
//!
//! The input is a list of 3-byte records `[op, a, b]`:
//!
//! * op % 5 = 0: client `a % 3` (2 is not a configured peer) starts a new
//!   connection from source `b % 4` (its first path; later ones join);
//! * 1: client `a % 3` opens another path (a join) when it can;
//! * 2: the last datagram any client sent, byte `a` XORed with `b | 1`,
//!   from source `b % 8` (forgery, or a replay from elsewhere);
//! * 3: the last datagram the endpoint sent, fed back to the endpoint;
//! * 4: time advances by `a` × 20 ms.
//!
//! After each record every client and the endpoint exchange packets until
//! quiet (bounded). Invariants: the stranger is never established; every
//! authenticated connection belongs to peer 0 or 1; a peer has at most one
//! connection that is established.
#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::auth::gate::{Gate, GateConfig};
use mpdccp_proto::auth::peers::{Peer, PeerLimits, PeerTable};
use mpdccp_proto::auth::{keypair, InitiatorConfig, RateLimitConfig, Responder, ResponderConfig};
use mpdccp_proto::{
    Connection, ConnectionConfig, Endpoint, EndpointConfig, Instant, PathConfig, PathId, Role,
};
use rand::SeedableRng;

/// Server private and public key, then three client private/public pairs.
fn keys() -> &'static [[u8; 32]; 8] {
    static KEYS: OnceLock<[[u8; 32]; 8]> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(78);
        let mut k = [[0u8; 32]; 8];
        for i in 0..4 {
            let (private, public) = keypair(&mut rng);
            k[2 * i] = private;
            k[2 * i + 1] = public;
        }
        k
    })
}

fn src(client: usize, path: u32) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, client as u8], 7000 + path as u16))
}

fn endpoint() -> Endpoint<SocketAddr> {
    let k = keys();
    let peers = (0..2)
        .map(|i| Peer {
            name: format!("p{i}"),
            public_key: k[3 + 2 * i],
            psk: None,
            allowed_ips: vec![],
        })
        .collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let responder = Responder::new(
        ResponderConfig {
            static_private: k[0],
            peers: PeerTable::new(peers, PeerLimits::default()).unwrap(),
            rate: RateLimitConfig::default(),
            load_inits_per_sec: 4,
        },
        &mut rng,
    );
    let gate = Gate::new(
        responder,
        GateConfig {
            max_half_open: 4,
            max_half_open_per_peer: 2,
            half_open_lifetime: Duration::from_secs(3),
            cookie_threshold: 2,
        },
    );
    let mut ep = Endpoint::new(EndpointConfig::default(), 9);
    ep.enable_auth(gate, |k| *k);
    ep
}

struct Client {
    conn: Connection,
    next_path: u32,
}

fn new_client(i: usize, now: Instant, base: u32) -> Client {
    let k = keys();
    let mut conn = Connection::new(Role::Client, ConnectionConfig::default(), now, i as u64);
    let cfg = InitiatorConfig {
        static_private: k[2 + 2 * i],
        server_public: k[1],
        psk: None,
    };
    conn.enable_client_auth(cfg, 1_000 + now.as_nanos(), now)
        .unwrap();
    let _ = conn.add_path(now, PathId(base), PathConfig::default());
    Client {
        conn,
        next_path: base + 1,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut ep = endpoint();
    let mut clients: [Option<Client>; 3] = [None, None, None];
    let mut now = Instant::from_secs_f64(1.0);
    let mut last_up: Vec<u8> = Vec::new();
    let mut last_down: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 2048];
    for r in data.chunks_exact(3).take(200) {
        let (op, a, b) = (r[0] % 5, r[1], r[2]);
        let c = usize::from(a % 3);
        match op {
            0 => clients[c] = Some(new_client(c, now, u32::from(b % 4) * 16)),
            1 => {
                if let Some(cl) = clients[c].as_mut() {
                    let id = PathId(cl.next_path);
                    cl.next_path += 1;
                    let _ = cl.conn.add_path(now, id, PathConfig::default());
                }
            }
            2 if !last_up.is_empty() => {
                let mut d = last_up.clone();
                let i = usize::from(a) % d.len();
                d[i] ^= b | 1;
                ep.handle_datagram(now, src(9, u32::from(b % 8)), &d);
            }
            3 if !last_down.is_empty() => {
                ep.handle_datagram(now, src(8, 0), &last_down);
            }
            4 => now += Duration::from_millis(20 * u64::from(a)),
            _ => {}
        }
        for _ in 0..20 {
            let mut moved = false;
            for (i, cl) in clients.iter_mut().enumerate() {
                let Some(cl) = cl.as_mut() else { continue };
                if cl.conn.poll_timeout().is_some_and(|t| t <= now) {
                    cl.conn.handle_timeout(now);
                }
                while let Some(t) = cl.conn.poll_transmit(now, &mut buf) {
                    last_up = buf[..t.size].to_vec();
                    ep.handle_datagram(now, src(i, t.path.0), &buf[..t.size]);
                    moved = true;
                }
            }
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while let Some((to, t)) = ep.poll_transmit(now, &mut buf) {
                last_down = buf[..t.size].to_vec();
                let i = usize::from(
                    to.ip()
                        .to_string()
                        .rsplit('.')
                        .next()
                        .unwrap()
                        .parse::<u8>()
                        .unwrap(),
                );
                if let Some(Some(cl)) = clients.get_mut(i) {
                    let pid = u32::from(to.port() - 7000);
                    cl.conn.handle_datagram(now, PathId(pid), &last_down);
                }
                moved = true;
            }
            while ep.poll_event().is_some() {}
            if !moved {
                break;
            }
        }
        // The stranger never gets in; connections belong to peers 0 and 1.
        if let Some(s) = &clients[2] {
            assert!(!s.conn.is_established(), "stranger admitted");
        }
        let mut established = [0usize; 2];
        for h in ep.connections() {
            if let Some(p) = ep.peer(h) {
                assert!(p.0 < 2);
                if ep.connection(h).is_some_and(|c| c.is_established()) {
                    established[p.0 as usize] += 1;
                }
            }
        }
        assert!(established.iter().all(|&n| n <= 1), "{established:?}");
    }
});
