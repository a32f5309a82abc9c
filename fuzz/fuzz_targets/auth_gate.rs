//! Fuzz the server's admission bookkeeping (`auth::Gate`): half-open
//! accounting, cookies, confirmation and session replacement, driven by
//! genuine clients, a stranger and forged messages (run with
//! `cargo +nightly fuzz run auth_gate` from `fuzz/`).
//!
//! The input is a list of 3-byte records `[op, a, b]`:
//!
//! * op % 6 = 0: client `a % 3` (2 is not a configured peer) sends a new
//!   Init from source `b % 8`;
//! * 1: the client answers its pending Response with its Confirm for the
//!   entry of source `b % 8`;
//! * 2: the bytes of the last Init, with byte `a` XORed by `b`, from source
//!   `b % 8` (forgery, or a replay when the byte is past the end or b = 0);
//! * 3: a Confirm with byte `a % 17` XORed by `b | 1` for source `b % 8`;
//! * 4: the endpoint forgets source `b % 8`;
//! * 5: time advances by `a` × 50 ms (and `b % 2` cookie replies are fed
//!   back to the client that asked).
//!
//! Invariants after every record: at most `max_half_open` entries and two
//! per peer; only configured peers are admitted; no Confirm verifies unless
//! it is byte-identical to one a client made.
#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::auth::gate::{Admission, Gate, GateConfig};
use mpdccp_proto::auth::handshake::UNBOUND;
use mpdccp_proto::auth::peers::{Peer, PeerLimits, PeerTable};
use mpdccp_proto::auth::{
    keypair, Initiator, InitiatorConfig, RateLimitConfig, Responder, ResponderConfig,
};
use mpdccp_proto::Instant;
use rand::SeedableRng;

const CFG: GateConfig = GateConfig {
    max_half_open: 5,
    max_half_open_per_peer: 2,
    half_open_lifetime: Duration::from_secs(3),
    cookie_threshold: 3,
};

/// Server private and public key, then three client private/public pairs.
fn keys() -> &'static [[u8; 32]; 8] {
    static KEYS: OnceLock<[[u8; 32]; 8]> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(77);
        let mut k = [[0u8; 32]; 8];
        for i in 0..4 {
            let (private, public) = keypair(&mut rng);
            k[2 * i] = private;
            k[2 * i + 1] = public;
        }
        k
    })
}

fn src(b: u8) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, b % 8], 7000))
}

fuzz_target!(|data: &[u8]| {
    let k = keys();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let peers: Vec<Peer> = (0..2)
        .map(|i| Peer {
            name: format!("p{i}"),
            public_key: k[3 + 2 * i],
            psk: None,
            allowed_ips: vec![],
        })
        .collect();
    let responder = Responder::new(
        ResponderConfig {
            static_private: k[0],
            peers: PeerTable::new(peers, PeerLimits::default()).expect("peers"),
            rate: RateLimitConfig::default(),
            load_inits_per_sec: 20,
        },
        &mut rng,
    );
    let mut gate: Gate<u8> = Gate::new(responder, CFG);
    let mut clients: Vec<Initiator> = (0..3)
        .map(|i| {
            Initiator::new(InitiatorConfig {
                static_private: k[2 + 2 * i],
                server_public: k[1],
                psk: None,
            })
        })
        .collect();
    let mut now = Instant::ZERO;
    let mut unix = 0u64;
    let mut last_init: Vec<u8> = Vec::new();
    let mut pending: Vec<(usize, u8, Vec<u8>)> = Vec::new(); // (client, source, response)
    let mut confirms: Vec<Vec<u8>> = Vec::new();
    let mut cookies: Vec<(usize, Vec<u8>)> = Vec::new();
    for r in data.chunks_exact(3).take(200) {
        let (op, a, b) = (r[0], r[1], r[2]);
        let s = b % 8;
        match op % 6 {
            0 => {
                let c = usize::from(a % 3);
                unix += 1;
                let Ok(m) = clients[c].start(&mut rng, unix, now) else {
                    continue;
                };
                last_init = m.to_vec();
                match gate.on_init(s, &m, &UNBOUND, src(s), now, &mut rng) {
                    Ok(Admission::Respond { peer, response, .. }) => {
                        assert!(c < 2 && peer.0 as usize == c, "stranger admitted");
                        pending.push((c, s, response.to_vec()));
                    }
                    Ok(Admission::Cookie(cookie)) => cookies.push((c, cookie.to_vec())),
                    Err(_) => {}
                }
            }
            1 => {
                if let Some(i) = pending.iter().position(|p| p.1 == s) {
                    let (c, _, resp) = pending.remove(i);
                    if let Ok((_, confirm)) = clients[c].handle_response(&resp) {
                        confirms.push(confirm.to_vec());
                        let _ = gate.on_confirm(&s, &confirm);
                    }
                }
            }
            2 => {
                let mut m = last_init.clone();
                if let Some(x) = m.get_mut(usize::from(a)) {
                    *x ^= b;
                }
                let admitted = matches!(
                    gate.on_init(s, &m, &UNBOUND, src(s), now, &mut rng),
                    Ok(Admission::Respond { .. })
                );
                // Only an unchanged Noise part (all but mac2, which is
                // checked only under load) can verify: a replay of an Init
                // the responder never completed (cookie, rate limit).
                let n = last_init.len().saturating_sub(16);
                assert!(
                    !admitted || m[..n] == last_init[..n],
                    "forged Init admitted"
                );
            }
            3 => {
                let Some(mut m) = confirms.last().cloned() else {
                    continue;
                };
                m[usize::from(a % 17)] ^= b | 1;
                assert!(gate.on_confirm(&s, &m).is_err(), "forged Confirm verified");
            }
            4 => gate.forget(&s),
            _ => {
                now += Duration::from_millis(50 * u64::from(a));
                gate.expire(now);
                if b % 2 == 1 {
                    for (c, cookie) in cookies.drain(..) {
                        let _ = clients[c].handle_cookie_reply(&cookie, now);
                    }
                }
            }
        }
        assert!(gate.half_open() <= CFG.max_half_open);
        let st = gate.stats();
        assert!(st.confirmed <= confirms.len() as u64);
    }
});
