//! Fuzz every parser of the authenticated mode with hostile bytes, mixed
//! with genuine handshakes so inputs reach the deep states (run with
//! `cargo +nightly fuzz run auth_messages` from `fuzz/`).
//!
//! The input is a list of records `[ctrl, len, bytes…]`:
//!
//! * ctrl & 7 = 0: the bytes as an Init to the responder (bit 3: under
//!   load; bits 4–7: source address variant);
//! * 1: as a Response to the initiator's pending Init;
//! * 2: as a cookie reply;
//! * 3: as a Confirm for the last accepted session;
//! * 4: as a protected frame on the server's path;
//! * 5: a genuine Init, handled by the responder, whose Response, Confirm and
//!   one sealed frame become the "latest genuine" messages;
//! * 6: the latest genuine message of kind (bits 4–5) with the bytes XORed
//!   onto it, fed where it belongs;
//! * 7: advance virtual time by `len` × 100 ms.
//!
//! Beyond "no panic": only byte-identical genuine messages (for an Init:
//! up to its mac2) are ever accepted (a mutated Init, Response, Confirm or frame that verifies would
//! be a forgery), and the responder never accepts more Inits than were
//! genuinely made.
#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::auth::handshake::InitOutcome;
use mpdccp_proto::auth::peers::{Peer, PeerLimits, PeerTable};
use mpdccp_proto::auth::protect::OVERHEAD;
use mpdccp_proto::auth::{
    keypair, Initiator, InitiatorConfig, PathProtector, RateLimitConfig, Responder,
    ResponderConfig, SessionKeys,
};
use mpdccp_proto::Instant;
use rand::SeedableRng;

struct World {
    rng: rand_chacha::ChaCha8Rng,
    server: Responder,
    client: Initiator,
    now: Instant,
    unix: u64,
    made: u64,
    /// Latest genuine Init, Response, Confirm, frame.
    genuine: [Vec<u8>; 4],
    session: Option<SessionKeys>,
    server_path: Option<PathProtector>,
}

/// Static keys (server private, server public, client private, client
/// public), made once: X25519 key generation would dominate each run.
fn keys() -> &'static [[u8; 32]; 4] {
    static KEYS: OnceLock<[[u8; 32]; 4]> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let (sp, spub) = keypair(&mut rng);
        let (cp, cpub) = keypair(&mut rng);
        [sp, spub, cp, cpub]
    })
}

fn world() -> World {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let [sp, spub, cp, cpub] = *keys();
    let peers = PeerTable::new(
        vec![Peer {
            name: "c".into(),
            public_key: cpub,
            psk: None,
            allowed_ips: vec!["10.0.0.0/8".parse().expect("prefix")],
        }],
        PeerLimits::default(),
    )
    .expect("peers");
    let cfg = ResponderConfig {
        static_private: sp,
        peers,
        rate: RateLimitConfig::default(),
        load_inits_per_sec: 50,
    };
    let server = Responder::new(cfg, &mut rng);
    let client = Initiator::new(InitiatorConfig {
        static_private: cp,
        server_public: spub,
        psk: None,
    });
    World {
        rng,
        server,
        client,
        now: Instant::ZERO,
        unix: 1,
        made: 0,
        genuine: Default::default(),
        session: None,
        server_path: None,
    }
}

fn src(v: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, v & 3], 4000 + u16::from(v >> 2)))
}

impl World {
    fn init(&mut self, bytes: &[u8], ctrl: u8) {
        // mac2 (the last 16 bytes) is only checked under load, so an Init
        // is genuine when everything before it is.
        let g = &self.genuine[0];
        let genuine = bytes.len() == g.len()
            && bytes[..g.len().saturating_sub(16)] == g[..g.len().saturating_sub(16)];
        let r = self.server.handle_init(
            bytes,
            src(ctrl >> 4),
            ctrl & 8 != 0,
            self.now,
            &mut self.rng,
        );
        match r {
            Ok(InitOutcome::Accept(a)) => {
                assert!(genuine, "a forged Init was accepted");
                self.genuine[1] = a.response.to_vec();
                self.session = Some(a.keys);
            }
            // The client takes the cookie only for its own pending Init.
            Ok(InitOutcome::CookieReply(c)) => {
                let _ = self.client.handle_cookie_reply(&c, self.now);
            }
            Err(_) => {}
        }
        assert!(self.server.stats().accepted <= self.made);
    }

    fn response(&mut self, bytes: &[u8]) {
        let genuine = bytes == self.genuine[1].as_slice();
        if let Ok((keys, confirm)) = self.client.handle_response(bytes) {
            assert!(genuine, "a forged Response was accepted");
            self.genuine[2] = confirm.to_vec();
            let mut tx = PathProtector::new(&keys, &[]);
            let mut frame = vec![0u8; 32 + OVERHEAD];
            let n = tx.seal(b"hdr", &[7u8; 32], &mut frame).expect("seal");
            frame.truncate(n);
            self.genuine[3] = frame;
            self.server_path = self.session.as_ref().map(|k| PathProtector::new(k, &[]));
        }
    }

    fn record(&mut self, ctrl: u8, bytes: &[u8]) {
        match ctrl & 7 {
            0 => self.init(bytes, ctrl),
            1 => self.response(bytes),
            2 => {
                let _ = self.client.handle_cookie_reply(bytes, self.now);
            }
            3 => {
                if let Some(k) = &self.session {
                    if k.verify_confirm(bytes).is_ok() {
                        assert_eq!(bytes, self.genuine[2].as_slice(), "forged Confirm");
                    }
                }
            }
            4 => self.frame(bytes),
            5 => {
                self.unix += 1;
                if let Ok(m) = self.client.start(&mut self.rng, self.unix, self.now) {
                    self.made += 1;
                    self.genuine[0] = m.to_vec();
                    self.init(&m, ctrl);
                    let resp = self.genuine[1].clone();
                    self.response(&resp);
                }
            }
            6 => {
                let kind = usize::from((ctrl >> 4) & 3);
                let mut m = self.genuine[kind].clone();
                let n = m.len().max(1);
                for (i, b) in bytes.iter().enumerate() {
                    if let Some(x) = m.get_mut(i % n) {
                        *x ^= b;
                    }
                }
                let sub = [0u8, 1, 3, 4][kind];
                self.record(sub | (ctrl & 0xF8), &m);
            }
            _ => self.now += Duration::from_millis(100 * bytes.len() as u64),
        }
    }

    fn frame(&mut self, bytes: &[u8]) {
        let genuine = bytes == self.genuine[3].as_slice();
        if let Some(p) = self.server_path.as_mut() {
            let mut f = bytes.to_vec();
            if p.open(b"hdr", &mut f).is_ok() {
                assert!(genuine, "a forged frame opened");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut w = world();
    let mut rest = data;
    let mut records = 0;
    while rest.len() >= 2 && records < 64 {
        let (ctrl, len) = (rest[0], usize::from(rest[1]));
        let end = (2 + len).min(rest.len());
        let bytes = &rest[2..end];
        rest = &rest[end..];
        records += 1;
        w.record(ctrl, bytes);
    }
});
