use super::*;
use rand::SeedableRng;

/// Both ends' keys from a real handshake.
fn session() -> (SessionKeys, SessionKeys) {
    crate::harness::session_keys(3)
}

fn seal(p: &mut PathProtector, aad: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; msg.len() + OVERHEAD];
    let n = p.seal(aad, msg, &mut out).unwrap();
    out.truncate(n);
    out
}

/// RFC 8439 §2.8.2: the AEAD construction test vector, through the same
/// crate and calls the protector uses.
#[test]
fn chacha20poly1305_matches_rfc8439_vector() {
    let key: [u8; 32] = core::array::from_fn(|i| 0x80 + i as u8);
    let nonce = [
        0x07, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
    ];
    let aad = [
        0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
    ];
    let mut text = b"Ladies and Gentlemen of the class of '99: If I could offer you \
only one tip for the future, sunscreen would be it."
        .to_vec();
    let aead = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).unwrap());
    let tag = aead
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&aad),
            &mut text,
        )
        .unwrap();
    assert_eq!(
        &text[..8],
        &[0xd3, 0x1a, 0x8d, 0x34, 0x64, 0x8e, 0x60, 0xdb]
    );
    assert_eq!(
        tag.as_ref(),
        &[
            0x1a, 0xe1, 0x0b, 0x59, 0x4f, 0x09, 0xe2, 0x6a, 0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60,
            0x06, 0x91
        ]
    );
}

#[test]
fn seal_open_round_trip_and_tamper_detection() {
    let (ck, sk) = session();
    let mut client = PathProtector::new(&ck, &[]);
    let mut server = PathProtector::new(&sk, &[]);
    let aad = b"dccp header";
    for size in [0usize, 1, 64, 1400] {
        let msg: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let mut f = seal(&mut client, aad, &msg);
        assert_eq!(f.len(), size + OVERHEAD);
        if size > 0 {
            assert_ne!(&f[8..8 + size], &msg[..], "payload must not be in clear");
        }
        let n = server.open(aad, &mut f.clone()).unwrap();
        assert_eq!(n, size);
        let mut g = f.clone();
        server.open(aad, &mut g).unwrap_err(); // replay of the same frame
                                               // A tampered copy of a frame already seen is refused by the window.
        let last = f.len() - 1;
        f[last] ^= 1;
        assert_eq!(server.open(aad, &mut f), Err(AuthError::ReplayedPacket));
    }
    // Tampering a fresh frame: bad tag, and the counter stays usable.
    let good = seal(&mut client, aad, b"payload");
    for i in [0usize, 8, good.len() - 1] {
        let mut t = good.clone();
        t[i] ^= 0x10;
        assert!(server.open(aad, &mut t).is_err());
    }
    assert_eq!(
        server.open(b"other header", &mut good.clone()),
        Err(AuthError::BadPacket)
    );
    let mut ok = good.clone();
    let n = server.open(aad, &mut ok).unwrap();
    assert_eq!(&ok[8..8 + n], b"payload");
    // And the reverse direction uses the other key.
    let mut back = seal(&mut server, aad, b"down");
    assert!(client.open(aad, &mut back).is_ok());
    assert_eq!(server.stats().opened, 5);
    assert!(server.stats().bad_tag >= 3);
    assert!(server.open(aad, &mut [0u8; 10]).is_err());
}

#[test]
fn frame_replayed_onto_another_path_fails() {
    let (ck, sk) = session();
    let binding_a = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let binding_b = [9u8, 2, 3, 4, 5, 6, 7, 8];
    let mut c_a = PathProtector::new(&ck, &binding_a);
    let mut s_a = PathProtector::new(&sk, &binding_a);
    let mut s_b = PathProtector::new(&sk, &binding_b);
    let f = seal(&mut c_a, b"", b"to path a");
    assert_eq!(s_b.open(b"", &mut f.clone()), Err(AuthError::BadPacket));
    assert!(s_a.open(b"", &mut f.clone()).is_ok());
}

#[test]
fn replay_window_accepts_reordering_and_refuses_duplicates_and_old() {
    let mut w = ReplayWindow::default();
    let accept = |w: &mut ReplayWindow, s: u64| {
        let r = w.check(s);
        if r.is_ok() {
            w.update(s);
        }
        r.is_ok()
    };
    assert!(accept(&mut w, 0));
    assert!(!accept(&mut w, 0));
    assert!(accept(&mut w, 5));
    assert!(accept(&mut w, 3));
    assert!(!accept(&mut w, 3));
    assert!(accept(&mut w, 10_000));
    // 10_000 - REPLAY_WINDOW + 1 is the oldest still acceptable.
    assert!(!accept(&mut w, 10_000 - REPLAY_WINDOW));
    assert!(accept(&mut w, 10_000 - REPLAY_WINDOW + 1));
    assert!(!accept(&mut w, 5));
    // A jump larger than the whole bitmap clears it: old bits do not alias.
    assert!(accept(&mut w, 10_000 + 64 * 128 * 3));
    let top = 10_000 + 64 * 128 * 3;
    assert!(accept(&mut w, top - REPLAY_WINDOW + 1));
    assert!(!accept(&mut w, top - REPLAY_WINDOW));
}

#[test]
fn replay_window_agrees_with_a_set_model() {
    use rand::Rng;
    use std::collections::BTreeSet;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut w = ReplayWindow::default();
    let mut seen = BTreeSet::new();
    let mut top = 0u64;
    for _ in 0..200_000 {
        // Mostly forward, with reordering, duplicates and far-old values.
        let s = match rng.gen_range(0..10) {
            0 => top.saturating_sub(rng.gen_range(0..20_000)),
            1..=3 => top.saturating_sub(rng.gen_range(0..64)),
            _ => top + rng.gen_range(0..300),
        };
        let model = !seen.contains(&s) && (s > top || top - s < REPLAY_WINDOW);
        let got = w.check(s).is_ok();
        assert_eq!(got, model, "seq {s} top {top}");
        if got {
            w.update(s);
            seen.insert(s);
            top = top.max(s);
        }
    }
}

/// The frame is plain RFC 8439 ChaCha20-Poly1305: another implementation
/// (RustCrypto's, which sealed these frames before `ring` did) opens what
/// the protector sealed, with the path key and nonce layout of the module
/// doc, so daemons of either version talk to each other.
#[test]
fn frames_open_with_another_implementation() {
    use chacha20poly1305::aead::{AeadInPlace, KeyInit};
    let (ck, _) = session();
    let binding = [3u8; 16];
    let mut p = PathProtector::new(&ck, &binding);
    let mut info = b"mpdccp-auth-v1 path".to_vec();
    info.extend_from_slice(&binding);
    let other = chacha20poly1305::ChaCha20Poly1305::new((&expand(ck.payload_send(), &info)).into());
    let aad = b"the dccp header";
    for (k, size) in [0usize, 64, 1400].into_iter().enumerate() {
        let msg: Vec<u8> = (0..size).map(|i| (i * 13) as u8).collect();
        let f = seal(&mut p, aad, &msg);
        assert_eq!(f[..8], (k as u64).to_be_bytes());
        let (body, tag) = f[8..].split_at(size);
        let mut body = body.to_vec();
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&f[..8]);
        other
            .decrypt_in_place_detached((&n).into(), aad, &mut body, tag.into())
            .expect("RustCrypto opens ring's frame");
        assert_eq!(body, msg);
    }
}
