//! Which ChaCha20-Poly1305 (RFC 8439) implementation seals and opens our
//! frames fastest: RustCrypto's `chacha20poly1305` (in use),
//! `ring` and `aws-lc-rs`, in place with a detached tag, as the data path
//! calls them. Sizes: 64 B (an ACK-sized tunnelled packet), 1200 B (QUIC),
//! 1400 B (a full TUN MTU packet), and a 64 kB batch of 46 × 1400 B packets
//! (one GSO super-packet) sealed one after another with one key.
//!
//! The associated data is 40 bytes, the size of a DCCP-Data header with its
//! options. Run with
//! `cargo bench -p mpdccp-proto --features aead-compare --bench aead`
//! (the feature brings `ring` and `aws-lc-rs`, which nothing else needs).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const AAD_LEN: usize = 40;
/// Packets of 1400 B in a 64 kB GSO batch.
const BATCH: usize = 46;
const KEY: [u8; 32] = [0x42; 32];

fn nonce12(counter: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    n
}

/// One implementation: seal `body` in place, then open it again.
trait Aead {
    fn seal(&self, counter: u64, aad: &[u8], body: &mut [u8]) -> [u8; 16];
    fn open(&self, counter: u64, aad: &[u8], body: &mut [u8], tag: &[u8; 16]) -> bool;
}

struct RustCrypto(chacha20poly1305::ChaCha20Poly1305);
impl Aead for RustCrypto {
    fn seal(&self, counter: u64, aad: &[u8], body: &mut [u8]) -> [u8; 16] {
        use chacha20poly1305::aead::AeadInPlace;
        let tag = self
            .0
            .encrypt_in_place_detached(&nonce12(counter).into(), aad, body)
            .expect("seal");
        tag.into()
    }
    fn open(&self, counter: u64, aad: &[u8], body: &mut [u8], tag: &[u8; 16]) -> bool {
        use chacha20poly1305::aead::AeadInPlace;
        self.0
            .decrypt_in_place_detached(&nonce12(counter).into(), aad, body, tag.into())
            .is_ok()
    }
}

struct Ring(ring::aead::LessSafeKey);
impl Aead for Ring {
    fn seal(&self, counter: u64, aad: &[u8], body: &mut [u8]) -> [u8; 16] {
        use ring::aead::{Aad, Nonce};
        let tag = self
            .0
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce12(counter)),
                Aad::from(aad),
                body,
            )
            .expect("seal");
        tag.as_ref().try_into().expect("16-byte tag")
    }
    fn open(&self, counter: u64, aad: &[u8], body: &mut [u8], tag: &[u8; 16]) -> bool {
        use ring::aead::{Aad, Nonce};
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce12(counter)),
                Aad::from(aad),
                ring::aead::Tag::from(*tag),
                body,
                0..,
            )
            .is_ok()
    }
}

struct AwsLc(aws_lc_rs::aead::LessSafeKey);
impl Aead for AwsLc {
    fn seal(&self, counter: u64, aad: &[u8], body: &mut [u8]) -> [u8; 16] {
        use aws_lc_rs::aead::{Aad, Nonce};
        let tag = self
            .0
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce12(counter)),
                Aad::from(aad),
                body,
            )
            .expect("seal");
        tag.as_ref().try_into().expect("16-byte tag")
    }
    fn open(&self, counter: u64, aad: &[u8], body: &mut [u8], tag: &[u8; 16]) -> bool {
        use aws_lc_rs::aead::{Aad, Nonce};
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce12(counter)),
                Aad::from(aad),
                tag,
                body,
            )
            .is_ok()
    }
}

fn impls() -> Vec<(&'static str, Box<dyn Aead>)> {
    use chacha20poly1305::aead::KeyInit;
    vec![
        (
            "rustcrypto",
            Box::new(RustCrypto(chacha20poly1305::ChaCha20Poly1305::new(
                (&KEY).into(),
            ))),
        ),
        (
            "ring",
            Box::new(Ring(ring::aead::LessSafeKey::new(
                ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &KEY).expect("key"),
            ))),
        ),
        (
            "aws-lc-rs",
            Box::new(AwsLc(aws_lc_rs::aead::LessSafeKey::new(
                aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::CHACHA20_POLY1305, &KEY)
                    .expect("key"),
            ))),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let aad = [0x5Au8; AAD_LEN];
    // Every implementation must produce the same frame: they are
    // interchangeable only if the bytes on the wire are.
    let mut reference: Option<(Vec<u8>, [u8; 16])> = None;
    for (name, a) in impls() {
        let mut body = vec![0xA5u8; 1400];
        let tag = a.seal(7, &aad, &mut body);
        match &reference {
            None => reference = Some((body.clone(), tag)),
            Some((b, t)) => assert!(b == &body && t == &tag, "{name} differs"),
        }
        assert!(a.open(7, &aad, &mut body, &tag), "{name} open");
        assert_eq!(body, vec![0xA5u8; 1400], "{name} round trip");
    }
    for (what, sizes) in [("seal", [64usize, 1200, 1400]), ("open", [64, 1200, 1400])] {
        let mut group = c.benchmark_group(format!("aead_{what}"));
        for size in sizes {
            group.throughput(Throughput::Bytes(size as u64));
            for (name, a) in impls() {
                let mut body = vec![0xA5u8; size];
                let tag = a.seal(1, &aad, &mut body);
                let sealed = body.clone();
                group.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                    let mut n = 0u64;
                    b.iter(|| {
                        if what == "seal" {
                            n += 1;
                            black_box(a.seal(n, &aad, &mut body));
                        } else {
                            // A real (successful) open each time: the sealed
                            // frame is put back first, a copy that costs
                            // every implementation the same.
                            body.copy_from_slice(&sealed);
                            assert!(a.open(1, &aad, &mut body, &tag));
                        }
                    });
                });
            }
        }
        group.finish();
    }
    let mut group = c.benchmark_group("aead_seal_batch_64k");
    group.throughput(Throughput::Bytes((BATCH * 1400) as u64));
    for (name, a) in impls() {
        let mut batch = vec![0xA5u8; BATCH * 1400];
        group.bench_function(name, |b| {
            let mut n = 0u64;
            b.iter(|| {
                for pkt in batch.chunks_mut(1400) {
                    n += 1;
                    black_box(a.seal(n, &aad, pkt));
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
