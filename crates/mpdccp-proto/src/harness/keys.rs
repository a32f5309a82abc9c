//! Session keys for protected test connections, from a real (seeded)
//! Noise IK handshake through the public `auth` API, as the daemon will
//! produce them.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::Harness;
use crate::auth::{
    keypair, InitOutcome, Initiator, InitiatorConfig, Peer, PeerLimits, PeerTable, RateLimitConfig,
    Responder, ResponderConfig, SessionKeys,
};
use crate::time::Instant;

/// (client's, server's) keys of one session; a new `seed` is a new session.
pub fn session_keys(seed: u64) -> (SessionKeys, SessionKeys) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (server_private, server_public) = keypair(&mut rng);
    let (client_private, client_public) = keypair(&mut rng);
    let peer = Peer {
        name: "client".into(),
        public_key: client_public,
        psk: None,
        allowed_ips: vec![],
    };
    let peers = PeerTable::new(vec![peer], PeerLimits::default()).expect("one valid peer");
    let cfg = ResponderConfig {
        static_private: server_private,
        peers,
        rate: RateLimitConfig::default(),
        load_inits_per_sec: 1000,
    };
    let mut server = Responder::new(cfg, &mut rng);
    let mut client = Initiator::new(InitiatorConfig {
        static_private: client_private,
        server_public,
        psk: None,
    });
    let init = client
        .start(&mut rng, 1, Instant::ZERO)
        .expect("init is written");
    let src = "192.0.2.1:4242".parse().expect("literal address");
    let accepted = match server.handle_init(&init, src, false, Instant::ZERO, &mut rng) {
        Ok(InitOutcome::Accept(a)) => a,
        other => panic!("handshake refused: {other:?}"),
    };
    let (client_keys, _confirm) = client
        .handle_response(&accepted.response)
        .expect("response opens");
    (client_keys, accepted.keys)
}

impl Harness {
    /// Turns payload protection on at both ends with the keys of session
    /// `seed` (before the first data packet).
    pub fn enable_payload_protection(&mut self, seed: u64) {
        let (c, s) = session_keys(seed);
        self.client.enable_payload_protection(c);
        self.server.enable_payload_protection(s);
    }
}
