//! Per-packet cost of payload protection (ChaCha20-Poly1305 + replay
//! window) by packet size: seal alone, and seal + open (the receiver's
//! replay window needs fresh counters, so open is measured with its seal).
//! Keys come from a real Noise handshake.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpdccp_proto::auth::handshake::InitOutcome;
use mpdccp_proto::auth::peers::{Peer, PeerLimits, PeerTable};
use mpdccp_proto::auth::protect::OVERHEAD;
use mpdccp_proto::auth::{
    keypair, Initiator, InitiatorConfig, PathProtector, RateLimitConfig, Responder,
    ResponderConfig, SessionKeys,
};
use mpdccp_proto::Instant;
use rand::SeedableRng;

fn session() -> (SessionKeys, SessionKeys) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let (sp, spub) = keypair(&mut rng);
    let (cp, cpub) = keypair(&mut rng);
    let peer = Peer {
        name: "bench".into(),
        public_key: cpub,
        psk: None,
        allowed_ips: vec![],
    };
    let peers = PeerTable::new(vec![peer], PeerLimits::default()).expect("peer table");
    let cfg = ResponderConfig {
        static_private: sp,
        peers,
        rate: RateLimitConfig::default(),
        load_inits_per_sec: 100,
    };
    let mut server = Responder::new(cfg, &mut rng);
    let mut client = Initiator::new(InitiatorConfig {
        static_private: cp,
        server_public: spub,
        psk: None,
    });
    let init = client.start(&mut rng, 1, Instant::ZERO).expect("init");
    let src = "192.0.2.1:1".parse().expect("address");
    let Ok(InitOutcome::Accept(a)) = server.handle_init(&init, src, false, Instant::ZERO, &mut rng)
    else {
        panic!("handshake failed");
    };
    let (ck, _) = client.handle_response(&a.response).expect("response");
    (ck, a.keys)
}

fn bench(c: &mut Criterion) {
    let (ck, sk) = session();
    let aad = [0u8; 16];
    let mut group = c.benchmark_group("protect");
    for size in [64usize, 576, 1400] {
        let msg = vec![0xA5u8; size];
        let mut frame = vec![0u8; size + OVERHEAD];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("seal", size), &size, |b, _| {
            let mut tx = PathProtector::new(&ck, &[]);
            b.iter(|| black_box(tx.seal(&aad, &msg, &mut frame).expect("seal")));
        });
        group.bench_with_input(BenchmarkId::new("seal_open", size), &size, |b, _| {
            let mut tx = PathProtector::new(&ck, &[]);
            let mut rx = PathProtector::new(&sk, &[]);
            b.iter(|| {
                let n = tx.seal(&aad, &msg, &mut frame).expect("seal");
                black_box(rx.open(&aad, &mut frame[..n]).expect("open"))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
