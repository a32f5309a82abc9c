use super::*;
use crate::auth::cookie::COOKIE_SECRET_LIFETIME;
use crate::auth::peers::{Peer, PeerLimits};
use crate::conn::keys::{hmac20, verify20};
use rand::SeedableRng;
use std::time::Duration;

const SRC: &str = "192.0.2.10:40000";

struct Lab {
    rng: rand_chacha::ChaCha8Rng,
    server_public: [u8; 32],
    client_private: [u8; 32],
    server: Responder,
}

fn lab_with(psk_server: Option<[u8; 32]>, load_inits_per_sec: u32) -> Lab {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let (server_private, server_public) = keypair(&mut rng);
    let (client_private, client_public) = keypair(&mut rng);
    let peers = PeerTable::new(
        vec![Peer {
            name: "client".into(),
            public_key: client_public,
            psk: psk_server,
            allowed_ips: vec!["10.0.1.0/24".parse().unwrap()],
        }],
        PeerLimits::default(),
    )
    .unwrap();
    let server = Responder::new(
        ResponderConfig {
            static_private: server_private,
            peers,
            rate: RateLimitConfig::default(),
            load_inits_per_sec,
        },
        &mut rng,
    );
    Lab {
        rng,
        server_public,
        client_private,
        server,
    }
}

fn lab() -> Lab {
    lab_with(None, 1000)
}

fn client(l: &Lab, psk: Option<[u8; 32]>) -> Initiator {
    Initiator::new(InitiatorConfig {
        static_private: l.client_private,
        server_public: l.server_public,
        psk,
    })
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn accept(o: Result<InitOutcome, AuthError>) -> Accepted {
    match o {
        Ok(InitOutcome::Accept(a)) => *a,
        other => panic!("expected Accept, got {other:?}"),
    }
}

#[test]
fn message_sizes() {
    assert_eq!(INIT_LEN, 137);
    assert_eq!(RESPONSE_LEN, 65);
    assert_eq!(CONFIRM_LEN, 17);
    assert_eq!(COOKIE_REPLY_LEN, 57);
}

#[test]
fn handshake_agrees_on_keys_and_confirms() {
    let mut l = lab();
    let mut c = client(&l, None);
    let now = Instant::from_millis(10);
    let init = c.start(&mut l.rng, 1_000, now).unwrap();
    let a = accept(l.server.handle_init(&init, sa(SRC), false, now, &mut l.rng));
    assert_eq!(a.peer, PeerId(0));
    let (ck, confirm) = c.handle_response(&a.response).unwrap();
    assert_eq!(ck.d_key_local(), a.keys.d_key_remote());
    assert_eq!(ck.d_key_remote(), a.keys.d_key_local());
    assert_eq!(ck.payload_send(), a.keys.payload_recv());
    assert_eq!(ck.payload_recv(), a.keys.payload_send());
    assert_ne!(ck.d_key_local(), ck.d_key_remote());
    assert_ne!(ck.d_key_local(), ck.payload_send());
    assert_eq!(a.keys.verify_confirm(&confirm), Ok(()));
    let mut bad = confirm;
    bad[5] ^= 0x40;
    assert_eq!(a.keys.verify_confirm(&bad), Err(AuthError::BadConfirm));
    assert_eq!(l.server.stats().accepted, 1);
    // A second response to the same Init is unexpected.
    assert_eq!(
        c.handle_response(&a.response).unwrap_err(),
        AuthError::Unexpected
    );
}

#[test]
fn seeded_runs_are_reproducible_and_sessions_differ() {
    let run = || {
        let mut l = lab();
        let mut c = client(&l, None);
        let init = c.start(&mut l.rng, 7, Instant::ZERO).unwrap();
        let a = accept(
            l.server
                .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng),
        );
        let init2 = c.start(&mut l.rng, 8, Instant::ZERO).unwrap();
        let a2 = accept(
            l.server
                .handle_init(&init2, sa(SRC), false, Instant::ZERO, &mut l.rng),
        );
        (init, a.response, a.keys, a2.keys)
    };
    let (i1, r1, k1, k1b) = run();
    let (i2, r2, k2, _) = run();
    assert_eq!((i1, r1), (i2, r2));
    assert_eq!(k1, k2);
    // Fresh ephemerals: a new session of the same peer has new keys.
    assert_ne!(k1.d_key_initiator, k1b.d_key_initiator);
}

#[test]
fn unknown_peer_gets_an_error_and_no_state() {
    let mut l = lab();
    let (stranger, _) = keypair(&mut l.rng);
    let mut c = Initiator::new(InitiatorConfig {
        static_private: stranger,
        server_public: l.server_public,
        psk: None,
    });
    let init = c.start(&mut l.rng, 5, Instant::ZERO).unwrap();
    let r = l
        .server
        .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng);
    assert_eq!(r.unwrap_err(), AuthError::UnknownPeer);
    assert_eq!(l.server.stats().unknown_peer, 1);
    assert_eq!(l.server.stats().accepted, 0);
    assert_eq!(l.server.last_timestamp, vec![0]);
}

#[test]
fn replayed_or_old_init_is_refused() {
    let mut l = lab();
    let mut c = client(&l, None);
    let now = Instant::ZERO;
    let init = c.start(&mut l.rng, 1_000, now).unwrap();
    accept(l.server.handle_init(&init, sa(SRC), false, now, &mut l.rng));
    // The same bytes again, from anywhere: refused before a Response.
    let again = l
        .server
        .handle_init(&init, sa("198.51.100.9:1"), false, now, &mut l.rng);
    assert_eq!(again.unwrap_err(), AuthError::Replay);
    // A new Init with an older clock as well.
    let old = c.start(&mut l.rng, 999, now).unwrap();
    let r = l.server.handle_init(&old, sa(SRC), false, now, &mut l.rng);
    assert_eq!(r.unwrap_err(), AuthError::Replay);
    assert_eq!(l.server.stats().replayed, 2);
    let newer = c.start(&mut l.rng, 1_001, now).unwrap();
    accept(
        l.server
            .handle_init(&newer, sa(SRC), false, now, &mut l.rng),
    );
}

#[test]
fn wrong_server_key_or_garbage_fails_mac1_first() {
    let mut l = lab();
    let (_, other_server) = keypair(&mut l.rng);
    let mut c = Initiator::new(InitiatorConfig {
        static_private: l.client_private,
        server_public: other_server,
        psk: None,
    });
    let init = c.start(&mut l.rng, 5, Instant::ZERO).unwrap();
    let r = l
        .server
        .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng);
    assert_eq!(r.unwrap_err(), AuthError::BadMac1);
    let r = l
        .server
        .handle_init(&init[..100], sa(SRC), false, Instant::ZERO, &mut l.rng);
    assert_eq!(r.unwrap_err(), AuthError::Malformed);
    let s = l.server.stats();
    assert_eq!((s.bad_mac1, s.malformed, s.handshake_failed), (1, 1, 0));
    // A bit flip in the encrypted part with a recomputed mac1 (an attacker
    // who knows the server key) fails in Noise.
    let mut good = client(&l, None);
    let mut msg = good.start(&mut l.rng, 6, Instant::ZERO).unwrap();
    msg[50] ^= 1;
    let m1 = mac16(&mac1_key(&l.server_public), &[&msg[..INIT_MAC1]]);
    msg[INIT_MAC1..INIT_MAC2].copy_from_slice(&m1);
    let r = l
        .server
        .handle_init(&msg, sa(SRC), false, Instant::ZERO, &mut l.rng);
    assert_eq!(r.unwrap_err(), AuthError::Handshake);
}

#[test]
fn under_load_a_cookie_round_trip_is_required() {
    let mut l = lab();
    let mut c = client(&l, None);
    let src = sa(SRC);
    let t0 = Instant::from_secs_f64(500.0);
    let init = c.start(&mut l.rng, 1, t0).unwrap();
    let reply = match l.server.handle_init(&init, src, true, t0, &mut l.rng) {
        Ok(InitOutcome::CookieReply(r)) => r,
        other => panic!("expected a cookie reply, got {other:?}"),
    };
    assert_eq!(l.server.stats().accepted, 0);
    assert_eq!(l.server.last_timestamp, vec![0]);
    c.handle_cookie_reply(&reply, t0).unwrap();
    let init2 = c.start(&mut l.rng, 2, t0).unwrap();
    // From the address the cookie was made for: accepted under load.
    accept(l.server.handle_init(&init2, src, true, t0, &mut l.rng));
    // The same cookie from another address (a spoofer) gets a reply only.
    let init3 = c.start(&mut l.rng, 3, t0).unwrap();
    let spoofed = sa("192.0.2.11:40000");
    let r = l.server.handle_init(&init3, spoofed, true, t0, &mut l.rng);
    assert!(matches!(r, Ok(InitOutcome::CookieReply(_))));
    // A cookie is used for COOKIE_USE_LIFETIME only.
    let late = t0 + COOKIE_SECRET_LIFETIME;
    let init4 = c.start(&mut l.rng, 4, late).unwrap();
    assert_eq!(&init4[INIT_MAC2..], &[0u8; MAC_LEN]);
    assert_eq!(l.server.stats().cookie_replies, 2);
}

#[test]
fn init_rate_alone_switches_cookies_on() {
    // 3 per second: a bucket of one, refilled every 333 ms.
    let mut l = lab_with(None, 3);
    let mut c = client(&l, None);
    let t = Instant::from_millis(1);
    let i = c.start(&mut l.rng, 1, t).unwrap();
    accept(l.server.handle_init(&i, sa(SRC), false, t, &mut l.rng));
    let i = c.start(&mut l.rng, 2, t).unwrap();
    let r = l.server.handle_init(&i, sa(SRC), false, t, &mut l.rng);
    assert!(matches!(r, Ok(InitOutcome::CookieReply(_))));
    let t2 = t + Duration::from_millis(340);
    let i = c.start(&mut l.rng, 3, t2).unwrap();
    accept(l.server.handle_init(&i, sa(SRC), false, t2, &mut l.rng));
}

/// Under 20 000 Inits per second the budget lets 1 000 per second through
/// to Diffie-Hellman, spread: never more than the burst (20) plus one per
/// millisecond in any 10 ms, where a one-second window ran 1 000 back to
/// back at each second's start.
#[test]
fn the_diffie_hellman_budget_is_spread_not_a_window() {
    let mut b = InitBudget::new(1000);
    let mut passed = Vec::new();
    for k in 0..20_000u64 {
        let now = Instant::from_nanos(k * 50_000);
        if b.take(now) {
            passed.push(now);
        }
    }
    assert!(
        (1_000..=1_000 + 20).contains(&passed.len()),
        "{}",
        passed.len()
    );
    let ten_ms = Duration::from_millis(10);
    let worst = passed
        .iter()
        .map(|&t| passed.iter().filter(|&&u| u >= t && u < t + ten_ms).count())
        .max()
        .unwrap();
    assert!(worst <= 20 + 10, "{worst} in 10 ms");
    // Rate 0: every Init needs a cookie.
    assert!(!InitBudget::new(0).take(Instant::from_millis(5)));
}

#[test]
fn per_source_rate_limit_applies_before_diffie_hellman() {
    let mut l = lab();
    let mut c = client(&l, None);
    let t = Instant::from_millis(1);
    let burst = RateLimitConfig::default().burst as u64;
    for ts in 1..=burst {
        let i = c.start(&mut l.rng, ts, t).unwrap();
        accept(l.server.handle_init(&i, sa(SRC), false, t, &mut l.rng));
    }
    let i = c.start(&mut l.rng, 99, t).unwrap();
    let r = l.server.handle_init(&i, sa(SRC), false, t, &mut l.rng);
    assert_eq!(r.unwrap_err(), AuthError::RateLimited);
    assert_eq!(l.server.stats().rate.limited, 1);
    // Another source is not limited.
    accept(
        l.server
            .handle_init(&i, sa("192.0.2.99:1"), false, t, &mut l.rng),
    );
}

#[test]
fn psk_mismatch_fails_at_the_initiator_and_never_confirms() {
    let mut l = lab_with(Some([5; 32]), 1000);
    let mut c = client(&l, Some([6; 32]));
    let init = c.start(&mut l.rng, 1, Instant::ZERO).unwrap();
    let a = accept(
        l.server
            .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng),
    );
    assert_eq!(
        c.handle_response(&a.response).unwrap_err(),
        AuthError::Handshake
    );
    // With the right PSK the same server completes.
    let mut c = client(&l, Some([5; 32]));
    let init = c.start(&mut l.rng, 2, Instant::ZERO).unwrap();
    let a = accept(
        l.server
            .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng),
    );
    let (_, confirm) = c.handle_response(&a.response).unwrap();
    assert_eq!(a.keys.verify_confirm(&confirm), Ok(()));
}

#[test]
fn forged_response_does_not_spoil_the_pending_handshake() {
    let mut l = lab();
    let mut c = client(&l, None);
    let init = c.start(&mut l.rng, 1, Instant::ZERO).unwrap();
    let a = accept(
        l.server
            .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng),
    );
    // Blind forgery: fails the cheap mac1.
    let mut forged = a.response;
    forged[3] ^= 1;
    assert_eq!(c.handle_response(&forged).unwrap_err(), AuthError::BadMac1);
    // Forgery by someone who knows the client's public key: fails in Noise.
    let client_pub = public_key(&l.client_private);
    let m1 = mac16(&mac1_key(&client_pub), &[&forged[..RESPONSE_MAC1]]);
    forged[RESPONSE_MAC1..].copy_from_slice(&m1);
    assert_eq!(
        c.handle_response(&forged).unwrap_err(),
        AuthError::Handshake
    );
    let (k, _) = c.handle_response(&a.response).unwrap();
    assert_eq!(k.d_key_local(), a.keys.d_key_remote());
}

/// RFC 9897 §3.2.2 MP_JOIN with d-keys from the handshake: what an observer
/// saw (the handshake bytes, a previous join's HMACs) does not let it
/// answer a fresh nonce, so a replayed join from another address fails.
#[test]
fn sniffed_handshake_and_join_cannot_be_replayed() {
    let mut l = lab();
    let mut c = client(&l, None);
    let init = c.start(&mut l.rng, 1, Instant::ZERO).unwrap();
    let a = accept(
        l.server
            .handle_init(&init, sa(SRC), false, Instant::ZERO, &mut l.rng),
    );
    let (ck, _) = c.handle_response(&a.response).unwrap();
    // Keys are not in the transcript (type 0 would put them there).
    let transcript: Vec<u8> = [&init[..], &a.response[..]].concat();
    for key in [ck.d_key_local(), ck.d_key_remote()] {
        assert!(!transcript.windows(8).any(|w| w == &key[..8]));
    }
    // A legitimate join: A sends HMAC(d-keyA, RA ‖ RB).
    let (ra, rb) = (0x1111_2222u32.to_be_bytes(), 0x3333_4444u32.to_be_bytes());
    let tag = hmac20(ck.d_key_local(), &[&ra, &rb]);
    assert!(verify20(a.keys.d_key_remote(), &[&ra, &rb], &tag));
    // The attacker replays RA and the tag from another address; the server
    // answers with a fresh RB', and the old tag does not verify.
    let rb2 = 0x5555_6666u32.to_be_bytes();
    assert!(!verify20(a.keys.d_key_remote(), &[&ra, &rb2], &tag));
    // The plain-text construction from the bytes seen also fails.
    let guess: Vec<u8> = transcript[1..17].to_vec();
    assert!(!verify20(&guess, &[&ra, &rb], &tag));
}

/// RFC 7748 §6.1: Alice's X25519 key pair.
#[test]
fn public_key_matches_rfc7748_vector() {
    let hex = |s: &str| -> [u8; 32] {
        core::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
    };
    let private = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
    let public = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
    assert_eq!(public_key(&private), public);
}

/// An Init verifies only under the binding it was made with (the Request
/// around it); under another it fails inside Noise and spends nothing: the
/// same Init is still accepted under its own binding afterwards.
#[test]
fn an_init_verifies_only_under_its_binding() {
    let mut l = lab();
    let mut c = client(&l, None);
    let now = Instant::from_millis(10);
    let ours = [7u8; 32];
    let mut other = ours;
    other[31] ^= 1;
    let init = c.start_bound(&mut l.rng, 1_000, now, &ours).unwrap();
    for wrong in [&other, &UNBOUND] {
        let r = l
            .server
            .handle_init_bound(&init, wrong, sa(SRC), false, now, &mut l.rng);
        assert_eq!(r.unwrap_err(), AuthError::Handshake);
    }
    assert_eq!(l.server.stats().handshake_failed, 2);
    let r = l
        .server
        .handle_init_bound(&init, &ours, sa(SRC), false, now, &mut l.rng);
    let a = accept(r);
    let (ck, _) = c.handle_response(&a.response).unwrap();
    assert_eq!(ck.d_key_local(), a.keys.d_key_remote());
}

/// The last few Inits of an attempt are answerable (a Response to an
/// earlier retransmission may arrive late); older ones are not.
#[test]
fn responses_to_the_last_inits_of_an_attempt_verify() {
    let mut l = lab();
    let mut c = client(&l, None);
    let now = Instant::from_millis(10);
    let inits: Vec<_> = (0..MAX_PENDING as u64 + 1)
        .map(|i| c.start(&mut l.rng, 1_000 + i, now).unwrap())
        .collect();
    // The server saw only the oldest (its timestamp is the lowest).
    let a = accept(
        l.server
            .handle_init(&inits[0], sa(SRC), false, now, &mut l.rng),
    );
    assert_eq!(
        c.handle_response(&a.response).unwrap_err(),
        AuthError::Handshake
    );
    let a = accept(
        l.server
            .handle_init(&inits[1], sa(SRC), false, now, &mut l.rng),
    );
    assert!(c.handle_response(&a.response).is_ok());
}
