use super::*;
use crate::auth::handshake::{keypair, Initiator, InitiatorConfig, ResponderConfig, UNBOUND};
use crate::auth::peers::{Peer, PeerLimits, PeerTable};
use crate::auth::ratelimit::RateLimitConfig;
use rand::SeedableRng;

struct Lab {
    rng: rand_chacha::ChaCha8Rng,
    gate: Gate<u32>,
    clients: Vec<Initiator>,
    clock: u64,
}

fn lab(cfg: GateConfig) -> Lab {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let (sp, spub) = keypair(&mut rng);
    let mut peers = Vec::new();
    let mut clients = Vec::new();
    for i in 0..3u8 {
        let (cp, cpub) = keypair(&mut rng);
        // Peers 0 and 1 are configured; 2 is a stranger.
        if i < 2 {
            peers.push(Peer {
                name: format!("p{i}"),
                public_key: cpub,
                psk: None,
                allowed_ips: vec![],
            });
        }
        clients.push(Initiator::new(InitiatorConfig {
            static_private: cp,
            server_public: spub,
            psk: None,
        }));
    }
    let responder = Responder::new(
        ResponderConfig {
            static_private: sp,
            peers: PeerTable::new(peers, PeerLimits::default()).unwrap(),
            rate: RateLimitConfig::default(),
            load_inits_per_sec: 1000,
        },
        &mut rng,
    );
    Lab {
        rng,
        gate: Gate::new(responder, cfg),
        clients,
        clock: 0,
    }
}

fn src(key: u32) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, key as u8], 5000))
}

impl Lab {
    /// Client `c` sends an Init from source `key` at `now`.
    fn init(&mut self, c: usize, key: u32, now: Instant) -> Result<Admission, AuthError> {
        self.clock += 1;
        let m = self.clients[c]
            .start(&mut self.rng, self.clock, now)
            .unwrap();
        self.gate
            .on_init(key, &m, &UNBOUND, src(key), now, &mut self.rng)
    }

    /// A full handshake of client `c` from `key`.
    fn connect(&mut self, c: usize, key: u32, now: Instant) -> Result<Admitted<u32>, AuthError> {
        let Admission::Respond { response, .. } = self.init(c, key, now)? else {
            panic!("cookie")
        };
        let (_, confirm) = self.clients[c].handle_response(&response)?;
        self.gate.on_confirm(&key, &confirm)
    }
}

#[test]
fn only_a_confirmed_peer_gets_a_session() {
    let mut l = lab(GateConfig::default());
    let t = Instant::from_millis(1);
    let a = l.connect(0, 1, t).unwrap();
    assert_eq!((a.peer, a.replaces), (PeerId(0), None));
    assert_eq!(l.gate.half_open(), 0);
    // The stranger gets an error and leaves nothing.
    assert_eq!(l.init(2, 2, t).unwrap_err(), AuthError::UnknownPeer);
    assert_eq!(l.gate.half_open(), 0);
    // A forged Confirm keeps the entry; the genuine one then succeeds.
    let Admission::Respond { response, .. } = l.init(1, 3, t).unwrap() else {
        panic!()
    };
    let (_, confirm) = l.clients[1].handle_response(&response).unwrap();
    let mut forged = confirm;
    forged[9] ^= 4;
    assert_eq!(
        l.gate.on_confirm(&3, &forged).unwrap_err(),
        AuthError::BadConfirm
    );
    assert_eq!(l.gate.half_open(), 1);
    assert_eq!(l.gate.on_confirm(&3, &confirm).unwrap().peer, PeerId(1));
    assert_eq!(
        l.gate.on_confirm(&3, &confirm).unwrap_err(),
        AuthError::Unexpected
    );
    let s = l.gate.stats();
    assert_eq!((s.confirmed, s.confirm_failed), (2, 1));
}

#[test]
fn a_peer_holds_at_most_two_half_open_entries() {
    let mut l = lab(GateConfig::default());
    let t = Instant::from_millis(1);
    for key in 10..15 {
        assert!(matches!(l.init(0, key, t), Ok(Admission::Respond { .. })));
    }
    assert_eq!(l.gate.half_open(), 2);
    assert_eq!(l.gate.stats().half_open_replaced, 3);
    // The newest two remain, and the other peer is unaffected.
    assert!(l.gate.half_open.contains_key(&13) && l.gate.half_open.contains_key(&14));
    assert!(l.connect(1, 20, t).is_ok());
}

#[test]
fn a_newer_session_replaces_the_older_one() {
    let mut l = lab(GateConfig::default());
    let t = Instant::from_millis(1);
    assert_eq!(l.connect(0, 1, t).unwrap().replaces, None);
    assert_eq!(l.connect(0, 2, t).unwrap().replaces, Some(1));
    l.gate.forget(&2);
    assert_eq!(l.connect(0, 3, t).unwrap().replaces, None);
    assert_eq!(l.gate.stats().sessions_replaced, 1);
    // A connection that checked the Confirm itself, with the keys the
    // admission handed out.
    let Admission::Respond { keys, response, .. } = l.init(0, 4, t).unwrap() else {
        panic!()
    };
    let (_, confirm) = l.clients[0].handle_response(&response).unwrap();
    assert_eq!(keys.verify_confirm(&confirm), Ok(()));
    let a = l.gate.established(&4).unwrap();
    assert_eq!((a.peer, a.replaces), (PeerId(0), Some(3)));
    assert_eq!(l.gate.established(&4).unwrap_err(), AuthError::Unexpected);
}

#[test]
fn half_open_entries_expire() {
    let mut l = lab(GateConfig::default());
    let t = Instant::from_millis(1);
    let Admission::Respond { response, .. } = l.init(0, 1, t).unwrap() else {
        panic!()
    };
    assert_eq!(l.gate.poll_timeout(), Some(t + Duration::from_secs(3)));
    l.gate.expire(t + Duration::from_secs(3));
    assert_eq!(l.gate.half_open(), 0);
    assert_eq!(l.gate.poll_timeout(), None);
    let (_, confirm) = l.clients[0].handle_response(&response).unwrap();
    assert_eq!(
        l.gate.on_confirm(&1, &confirm).unwrap_err(),
        AuthError::Unexpected
    );
    assert_eq!(l.gate.stats().half_open_expired, 1);
}

#[test]
fn cookies_above_the_threshold_and_a_total_bound() {
    let mut l = lab(GateConfig {
        cookie_threshold: 1,
        max_half_open: 3,
        ..GateConfig::default()
    });
    let t = Instant::from_millis(1);
    assert!(matches!(l.init(0, 1, t), Ok(Admission::Respond { .. })));
    assert!(matches!(l.init(0, 2, t), Ok(Admission::Respond { .. })));
    // Two half-open entries > threshold 1: the next Init gets a cookie only.
    assert!(matches!(l.init(1, 3, t), Ok(Admission::Cookie(_))));
    assert_eq!(l.gate.half_open(), 2);
    // With the cookie (same source), it is admitted.
    let Ok(Admission::Cookie(c)) = l.init(1, 3, t) else {
        panic!()
    };
    l.clients[1].handle_cookie_reply(&c, t).unwrap();
    assert!(matches!(l.init(1, 3, t), Ok(Admission::Respond { .. })));
}

#[test]
fn the_half_open_total_is_bounded() {
    let mut l = lab(GateConfig {
        max_half_open: 3,
        ..GateConfig::default()
    });
    let t = Instant::from_millis(1);
    for (c, key) in [(0, 1), (0, 2), (1, 3)] {
        assert!(matches!(l.init(c, key, t), Ok(Admission::Respond { .. })));
    }
    assert_eq!(l.init(1, 4, t).unwrap_err(), AuthError::Busy);
    assert_eq!(l.gate.stats().half_open_full, 1);
    // A peer at its own share still replaces its oldest entry.
    assert!(matches!(l.init(0, 5, t), Ok(Admission::Respond { .. })));
    assert_eq!(l.gate.half_open(), 3);
}
