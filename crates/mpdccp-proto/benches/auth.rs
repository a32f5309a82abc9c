//! Per-packet cost of payload protection (ChaCha20-Poly1305 + replay
//! window) by packet size: seal alone, and seal + open (the receiver's
//! replay window needs fresh counters, so open is measured with its seal).
//! Keys come from a real Noise handshake.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpdccp_proto::auth::protect::OVERHEAD;
use mpdccp_proto::auth::{PathProtector, SessionKeys};

fn session() -> (SessionKeys, SessionKeys) {
    mpdccp_proto::harness::session_keys(1)
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
