//! Wire-level findings of the RFC 9897 requirements matrix
//! (`docs/rfc9897/MATRIX.md`): key types, MP_KEY lengths, MP_CONFIRM in the
//! RFC form, MP_HMAC placement, ADDADDR address rules, HMAC messages.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mpdccp_proto::wire::mp::{addaddr_is_usable, associate_hmacs, KeyType, HMAC_LEN};
use mpdccp_proto::wire::{DccpOption, MpKey, MpOption, WireError};

fn body(o: &MpOption) -> Vec<u8> {
    let mut b = vec![0u8; o.buffer_len()];
    o.emit(&mut b).unwrap();
    b
}

/// §3.2.4: key types 0 and 255 only; the draft's ECDHE types 1 and 2 and
/// every other value 1–254 are reserved and cannot be delimited.
#[test]
fn mp_key_accepts_only_key_types_0_and_255() {
    assert_eq!(KeyType::from_u8(0), Some(KeyType::Plain));
    assert_eq!(KeyType::from_u8(255), Some(KeyType::Experimental));
    for t in 1..=254u8 {
        assert_eq!(KeyType::from_u8(t), None, "key type {t} is reserved");
        // A key of the draft's ECDHE sizes behind a reserved type is rejected.
        for n in [8usize, 32, 64] {
            let mut b = vec![46, 0, 3, 0, 0, 0, 0, 1, t];
            b.extend(std::iter::repeat_n(9, n));
            b[1] = b.len() as u8;
            assert_eq!(
                MpOption::parse(&b[2..]),
                Err(WireError::BadMpOption { subtype: 3 }),
                "type {t}, {n} bytes"
            );
        }
    }
}

/// §3.2.4: "the Length varies between 17 and 73 bytes for a single-key
/// message, and up to 82 bytes when all specified Key Types 0 and 255 are
/// provided": type 0 is 8 bytes, type 255 is 64 bytes, nothing else.
#[test]
fn mp_key_lengths_are_17_73_and_82() {
    let plain = MpKey::plain(0x0102_0304_0506_0708);
    let exp = MpKey {
        key_type: KeyType::Experimental,
        data: (0..64).collect(),
    };
    let one = MpOption::Key {
        ci: 7,
        keys: vec![plain.clone()],
    };
    let big = MpOption::Key {
        ci: 7,
        keys: vec![exp.clone()],
    };
    let both = MpOption::Key {
        ci: 7,
        keys: vec![plain, exp],
    };
    for (o, len) in [(&one, 17), (&big, 73), (&both, 82)] {
        let b = body(o);
        assert_eq!(b.len(), len);
        assert_eq!(b[1] as usize, len, "Length counts the whole option");
        assert_eq!(MpOption::parse(&b[2..]).unwrap(), *o);
    }
    // A 255 key of any other length is refused on emit and on parse.
    for n in [1usize, 8, 63, 65] {
        let o = MpOption::Key {
            ci: 7,
            keys: vec![MpKey {
                key_type: KeyType::Experimental,
                data: vec![1; n],
            }],
        };
        assert_eq!(o.validate(), Err(WireError::FieldOutOfRange), "{n} bytes");
        let mut b = vec![46, 0, 3, 0, 0, 0, 0, 7, 255];
        b.extend(std::iter::repeat_n(1, n));
        b[1] = b.len() as u8;
        // Short: truncated key; 65 bytes: a 64-byte key and a stray byte
        // read as a reserved key type.
        assert!(MpOption::parse(&b[2..]).is_err(), "{n} bytes");
    }
}

/// §3.2.1: the list of confirmations is "the received MP_SEQ followed by
/// the related multipath option(s)", most recent first, copied verbatim —
/// MP_SEQ_2 + MP_ADDADDR + MP_SEQ_1 + MP_PRIO. MP_REMOVEADDR is copied with
/// its nonce (8 bytes, not the 4 of the confirmation table).
#[test]
fn mp_confirm_carries_mp_seq_and_verbatim_options() {
    let add = MpOption::AddAddr {
        addr_id: 2,
        nonce: Some(0x1122_3344),
        addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
        port: None,
    };
    let remove = MpOption::RemoveAddr {
        addr_id: 3,
        nonce: Some(0x5566_7788),
    };
    let list = vec![
        MpOption::Seq(12),
        add.clone(),
        MpOption::Seq(11),
        MpOption::Prio(4),
        MpOption::Seq(10),
        remove.clone(),
    ];
    let c = MpOption::Confirm(list.clone());
    let b = body(&c);
    // Header 3 + (9 + 12) + (9 + 4) + (9 + 8) = 54.
    assert_eq!(b.len(), 54);
    let mut expect = vec![46, 54, 0];
    for o in &list {
        expect.extend(body(o));
    }
    assert_eq!(b, expect, "each element is the option copied verbatim");
    assert_eq!(&b[3..12], &[46, 9, 4, 0, 0, 0, 0, 0, 12]);
    assert_eq!(&b[46..54], &[46, 8, 8, 3, 0x55, 0x66, 0x77, 0x88]);
    assert_eq!(MpOption::parse(&b[2..]).unwrap(), c);
}

fn mp(o: MpOption) -> DccpOption {
    DccpOption::Multipath(o)
}

/// §3.2.6: "an MP_HMAC MUST directly follow its associated multipath
/// option", validation in sending order; an MP_HMAC that follows nothing
/// it could protect is ignored unless it is the lone MP_HMAC of a join's
/// third packet.
#[test]
fn mp_hmac_pairs_with_the_option_it_directly_follows() {
    let h1 = [1u8; HMAC_LEN];
    let h2 = [2u8; HMAC_LEN];
    let join = MpOption::Join {
        addr_id: 1,
        ci: 9,
        nonce: 5,
    };
    let add = MpOption::AddAddr {
        addr_id: 2,
        nonce: Some(6),
        addr: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)),
        port: Some(4000),
    };
    let remove = MpOption::RemoveAddr {
        addr_id: 3,
        nonce: Some(8),
    };
    // The RFC's example: MP_JOIN + MP_HMAC_1 + MP_ADDADDR + MP_HMAC_2.
    let opts = vec![
        mp(join.clone()),
        mp(MpOption::Hmac(h1)),
        DccpOption::Padding,
        mp(add.clone()),
        mp(MpOption::Hmac(h2)),
    ];
    let a = associate_hmacs(&opts);
    assert_eq!(a.protected, vec![(&join, Some(&h1)), (&add, Some(&h2))]);
    assert_eq!((a.lone, a.ignored), (None, 0));
    // HMAC before the option (our -12 era order): the ADDADDR is unprotected
    // and the HMAC cannot be associated.
    let opts = vec![
        mp(MpOption::Hmac(h1)),
        mp(MpOption::Seq(3)),
        mp(add.clone()),
    ];
    let a = associate_hmacs(&opts);
    assert_eq!(a.protected, vec![(&add, None)]);
    assert_eq!((a.lone, a.ignored), (None, 1));
    // Another option in between breaks adjacency.
    let opts = vec![
        mp(remove.clone()),
        mp(MpOption::Seq(3)),
        mp(MpOption::Hmac(h1)),
    ];
    let a = associate_hmacs(&opts);
    assert_eq!(a.protected, vec![(&remove, None)]);
    assert_eq!(a.ignored, 1);
    // Two protected options, one HMAC: only the first is authenticated.
    let opts = vec![mp(add.clone()), mp(MpOption::Hmac(h2)), mp(remove.clone())];
    let a = associate_hmacs(&opts);
    assert_eq!(a.protected, vec![(&add, Some(&h2)), (&remove, None)]);
    // The join's third packet: a lone MP_HMAC on an Ack.
    let opts = vec![mp(MpOption::Seq(1)), mp(MpOption::Hmac(h1))];
    let a = associate_hmacs(&opts);
    assert_eq!((a.lone, a.ignored), (Some(&h1), 0));
    // Two lone HMACs: neither is trusted.
    let opts = vec![mp(MpOption::Hmac(h1)), mp(MpOption::Hmac(h2))];
    let a = associate_hmacs(&opts);
    assert_eq!((a.lone, a.ignored), (None, 2));
    // After MP_PRIO an MP_HMAC is the authenticated modes' tag, as the
    // connection reads it (`wire::mp::HmacPairing`): neither lone nor a stray.
    let opts = vec![mp(MpOption::Prio(1)), mp(MpOption::Hmac(h1))];
    let a = associate_hmacs(&opts);
    assert_eq!((a.protected.len(), a.lone, a.ignored), (0, None, 0));
}

/// §3.2.8: broadcast and multicast advertisements MUST be ignored.
#[test]
fn addaddr_refuses_broadcast_and_multicast() {
    for bad in [
        IpAddr::V4(Ipv4Addr::BROADCAST),
        IpAddr::V4(Ipv4Addr::new(224, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3)),
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    ] {
        assert!(!addaddr_is_usable(bad), "{bad}");
    }
    for good in [
        IpAddr::V4(Ipv4Addr::new(10, 0, 9, 1)),
        IpAddr::V4(Ipv4Addr::new(192, 168, 1, 20)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
    ] {
        assert!(addaddr_is_usable(good), "{good}");
    }
}

/// §3.2.6: ADDADDR's message is Address ID + Nonce + NBO(IP) + NBO(Port)
/// with two zero bytes when no port; REMOVEADDR's is Address ID + Nonce
/// (our choice where the text also says "solely the Address ID").
#[test]
fn hmac_messages_follow_section_3_2_6() {
    let add = MpOption::AddAddr {
        addr_id: 2,
        nonce: Some(0x0a0b_0c0d),
        addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        port: None,
    };
    assert_eq!(
        add.hmac_message().unwrap(),
        [2, 0x0a, 0x0b, 0x0c, 0x0d, 192, 0, 2, 1, 0, 0]
    );
    let add6 = MpOption::AddAddr {
        addr_id: 4,
        nonce: Some(1),
        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
        port: Some(0x1388),
    };
    let m = add6.hmac_message().unwrap();
    assert_eq!(m.len(), 1 + 4 + 16 + 2);
    assert_eq!(&m[..5], &[4, 0, 0, 0, 1]);
    assert_eq!(&m[5..7], &[0x20, 0x01]);
    assert_eq!(&m[21..], &[0x13, 0x88]);
    let remove = MpOption::RemoveAddr {
        addr_id: 9,
        nonce: Some(0xdead_beef),
    };
    assert_eq!(remove.hmac_message().unwrap(), [9, 0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(MpOption::Prio(3).hmac_message(), None);
}
