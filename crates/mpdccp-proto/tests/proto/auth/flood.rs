//! A Request flood, sans-IO: 100 000 Inits from spoofed sources
//! in one second, made by an attacker who knows the server's public key
//! (so mac1 is valid) and is not a configured peer. The server must do the
//! Diffie-Hellman work for at most its per-second load threshold of them,
//! keep no half-open state for any, and a legitimate client that starts in
//! the middle of the flood must be admitted after one cookie round trip.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::gate_with_one_peer;
use mpdccp_proto::auth::gate::Admission;
use mpdccp_proto::auth::handshake::UNBOUND;
use mpdccp_proto::auth::{keypair, Initiator, InitiatorConfig};
use mpdccp_proto::Instant;
use rand::{Rng, SeedableRng};

const FLOOD: u32 = 100_000;
const LOAD_THRESHOLD: u32 = 1000;

#[test]
fn spoofed_init_flood_leaves_no_state_and_a_client_gets_in() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(100);
    let (mut gate, mut client, spub) = gate_with_one_peer(&mut rng, vec![], LOAD_THRESHOLD);
    // The attacker's Inits: its own key pair, the server's public key.
    let attacker_inits: Vec<_> = (0..50u64)
        .map(|i| {
            let (ap, _) = keypair(&mut rng);
            let mut a = Initiator::new(InitiatorConfig {
                static_private: ap,
                server_public: spub,
                psk: None,
            });
            a.start(&mut rng, i + 1, Instant::ZERO).unwrap()
        })
        .collect();
    let client_src: SocketAddr = "203.0.113.7:40000".parse().unwrap();
    let t0 = Instant::from_secs_f64(10.0);
    let mut cookies = 0u32;
    let mut admitted_at = None;
    for i in 0..FLOOD {
        // 10 µs apart: the whole flood within one second.
        let now = t0 + Duration::from_micros(10 * u64::from(i));
        let spoofed = SocketAddr::from((rng.gen::<[u8; 4]>(), rng.gen::<u16>()));
        let init = &attacker_inits[i as usize % attacker_inits.len()];
        match gate.on_init(spoofed, init, &UNBOUND, spoofed, now, &mut rng) {
            Ok(Admission::Cookie(_)) => cookies += 1,
            Ok(Admission::Respond { .. }) => panic!("the attacker was admitted"),
            Err(_) => {}
        }
        assert_eq!(gate.half_open(), 0);
        // The legitimate client starts half-way through the flood.
        if i == FLOOD / 2 {
            let first = client.start(&mut rng, 1, now).unwrap();
            let Ok(Admission::Cookie(c)) =
                gate.on_init(client_src, &first, &UNBOUND, client_src, now, &mut rng)
            else {
                panic!("under load the client first gets a cookie")
            };
            client.handle_cookie_reply(&c, now).unwrap();
            // One round trip later (10 ms) it retries with the cookie.
            let later = now + Duration::from_millis(10);
            let second = client.start(&mut rng, 2, later).unwrap();
            let Ok(Admission::Respond { response, .. }) =
                gate.on_init(client_src, &second, &UNBOUND, client_src, later, &mut rng)
            else {
                panic!("the client with a cookie is admitted during the flood")
            };
            let (_, confirm) = client.handle_response(&response).unwrap();
            gate.on_confirm(&client_src, &confirm).unwrap();
            admitted_at = Some(later + Duration::from_millis(10));
        }
    }
    let st = gate.responder().stats();
    // Inits that reached Diffie-Hellman: at most the budget's rate over the
    // one second of flood plus its burst (a full bucket, rate/50), plus
    // the client's.
    let budget = LOAD_THRESHOLD + LOAD_THRESHOLD / 50;
    let dh = st.handshake_failed + st.unknown_peer + st.replayed + st.accepted;
    assert!(dh <= u64::from(budget) + 1, "{dh} Inits reached DH");
    assert_eq!(st.accepted, 1);
    assert!(cookies >= FLOOD - budget - 1, "{cookies} cookie replies");
    // Admitted within a second of starting (two 10 ms round trips here).
    let started = t0 + Duration::from_micros(10 * u64::from(FLOOD / 2));
    assert!(admitted_at.unwrap() - started < Duration::from_secs(1));
    assert_eq!(gate.half_open(), 0);
}
