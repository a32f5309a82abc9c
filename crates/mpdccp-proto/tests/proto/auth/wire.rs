//! The authenticated handshake carried the way docs/SECURITY.md specifies,
//! through the real wire code: the Init in the DCCP-Request and the Response
//! in the DCCP-Response, each split into MP_KEY key type 255 (64 bytes) and
//! MP_EXP; the cookie reply in a DCCP-Reset (code 9, Too Busy) and the
//! Confirm in the DCCP-Ack, as MP_EXP. Each packet is emitted to bytes and
//! parsed back before its message is used, so the sizes fit the option
//! space and the parsers keep every byte.

use std::net::SocketAddr;

use crate::common::gate_with_one_peer;
use mpdccp_proto::auth::framing;
use mpdccp_proto::auth::gate::Admission;
use mpdccp_proto::auth::handshake::{INIT_LEN, UNBOUND};
use mpdccp_proto::auth::Initiator;
use mpdccp_proto::wire::mp::{KeyType, MpKey, MpOption};
use mpdccp_proto::wire::option::DccpOption;
use mpdccp_proto::wire::{DccpKind, DccpRepr, Header, ResetCode};
use mpdccp_proto::Instant;
use rand::SeedableRng;

fn roundtrip(repr: &DccpRepr) -> (DccpRepr, usize) {
    let mut buf = vec![0u8; repr.buffer_len(0)];
    let n = repr.emit(&mut buf, &[], None).expect("emit");
    let (parsed, _) = DccpRepr::parse(&buf[..n], None).expect("parse");
    (parsed, n)
}

fn packet(kind: DccpKind, mp: Vec<MpOption>) -> DccpRepr {
    let header = Header {
        src_port: 5000,
        dst_port: 6773,
        seq: 77,
        kind,
        ..Header::default()
    };
    DccpRepr::new(header, mp.into_iter().map(DccpOption::Multipath).collect())
}

/// MP_KEY key type 255 with the message's first 64 bytes, MP_EXP the rest.
fn with_key(msg: &[u8]) -> Vec<MpOption> {
    let (key, rest) = framing::split(msg).unwrap();
    let key = MpOption::Key {
        ci: 0x0102_0304,
        keys: vec![MpKey {
            key_type: KeyType::Experimental,
            data: key.to_vec(),
        }],
    };
    vec![key, MpOption::Exp(rest.to_vec())]
}

/// The message of a packet: key type 255 data (if any) then MP_EXP.
fn message(repr: &DccpRepr) -> Vec<u8> {
    let (mut key, mut exp) = (None, None);
    for o in &repr.options {
        match o {
            DccpOption::Multipath(MpOption::Key { keys, .. }) => {
                assert_eq!(keys.len(), 1);
                assert_eq!(keys[0].key_type, KeyType::Experimental);
                key = Some(keys[0].data.clone());
            }
            DccpOption::Multipath(MpOption::Exp(d)) => exp = Some(d.clone()),
            _ => {}
        }
    }
    framing::join(key.as_deref(), exp.as_deref()).expect("a message")
}

#[test]
fn handshake_with_cookie_through_dccp_packets() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    // Load threshold 0: every Init needs a cookie, the server is "under load".
    let (mut gate, mut client, _) =
        gate_with_one_peer(&mut rng, vec!["10.0.1.0/24".parse().unwrap()], 0);
    let src: SocketAddr = "192.0.2.5:5000".parse().unwrap();
    let now = Instant::from_millis(100);
    let request = |client: &mut Initiator, rng: &mut rand_chacha::ChaCha8Rng, unix| {
        let init = client.start(rng, unix, now).unwrap();
        let (req, len) = roundtrip(&packet(
            DccpKind::Request { service_code: 0 },
            with_key(&init),
        ));
        // Generic header (16) + Service Code (4) + MP_KEY (9 + 64) + MP_EXP
        // (3 + 73), padded to a multiple of 4 bytes (RFC 4340 §5.8).
        assert_eq!(len, (16 + 4 + 9 + 3 + INIT_LEN).next_multiple_of(4));
        message(&req)
    };

    // 1. Request → Reset (Too Busy) with the cookie; the server keeps nothing.
    let init = request(&mut client, &mut rng, 1);
    let Admission::Cookie(cookie) = gate
        .on_init(src, &init, &UNBOUND, src, now, &mut rng)
        .unwrap()
    else {
        panic!("expected a cookie under load")
    };
    assert_eq!(gate.half_open(), 0);
    let reset = DccpKind::Reset {
        ack: 77,
        code: ResetCode::TooBusy,
        data: [0; 3],
    };
    let (reset, _) = roundtrip(&packet(reset, vec![MpOption::Exp(cookie.to_vec())]));
    client.handle_cookie_reply(&message(&reset), now).unwrap();

    // 2. Request with mac2 → Response.
    let init = request(&mut client, &mut rng, 2);
    let Admission::Respond { response, .. } = gate
        .on_init(src, &init, &UNBOUND, src, now, &mut rng)
        .unwrap()
    else {
        panic!("expected admission with the cookie")
    };
    assert_eq!(gate.half_open(), 1);
    let kind = DccpKind::Response {
        ack: 77,
        service_code: 0,
    };
    let (resp, _) = roundtrip(&packet(kind, with_key(&response)));

    // 3. Ack with the Confirm → session with the same keys at both ends.
    let (client_keys, confirm) = client.handle_response(&message(&resp)).unwrap();
    let (ack, _) = roundtrip(&packet(
        DccpKind::Ack { ack: 78 },
        vec![MpOption::Exp(confirm.to_vec())],
    ));
    let admitted = gate.on_confirm(&src, &message(&ack)).unwrap();
    assert_eq!(admitted.keys.d_key_remote(), client_keys.d_key_local());
    assert_eq!(admitted.keys.payload_recv(), client_keys.payload_send());
    assert_eq!(gate.half_open(), 0);
}
