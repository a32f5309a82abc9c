//! Unit tests of `codec.rs` (the packet view the connection parses and emits).

use std::net::IpAddr;

use crate::wire::mp::{subtype, subtype as mp_sub};
use crate::wire::option::kind;
use crate::wire::{
    AckVector, DccpOption, DccpRepr, FeatureNum, MpOption, PacketType, ResetCode, WireError,
};

use super::codec_mp::{ConfirmItem, KeyOffer, MpAddAddr};
use super::Segment;

fn v4() -> (IpAddr, IpAddr) {
    ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
}

/// A `ptype` segment with every header field set and one feature option.
fn every_field(ptype: PacketType) -> Segment<'static> {
    let mut s = Segment::new(ptype, 0x1_ABCD_EF01_2345);
    (s.src_port, s.dst_port) = (4242, 0xBEEF);
    s.ack = ptype.has_ack().then_some(0x00FF_FFFF_FFFF_FFFF);
    (s.service_code, s.reset_code) = (0x5EC0_0DE5, ResetCode::Aborted);
    s.push_feat(kind::CHANGE_L, FeatureNum::AckRatio, Some(3));
    s
}

/// Both packet models write through `wire`'s one builder: a Segment and
/// the DccpRepr with its header and options give the same bytes.
#[test]
fn segment_and_dccp_repr_write_the_same_bytes() {
    for ptype in (0..10).map(|t| PacketType::from_u8(t).unwrap()) {
        let mut s = every_field(ptype);
        s.payload = b"payload";
        let mut fast = vec![0xAA; 64];
        let n = s.emit_in(&mut fast, v4(), crate::wire::WireProfile::Rfc9897);
        let repr = DccpRepr {
            options: vec![s.feats()[0].to_option()],
            ..DccpRepr::parse(&fast[..n.unwrap()], None).unwrap().0
        };
        assert_eq!(repr.header, s.header(), "{ptype:?}");
        let mut slow = vec![0x55; 64];
        let m = repr.emit(&mut slow, s.payload, Some(v4())).unwrap();
        assert_eq!(fast[..n.unwrap()], slow[..m], "{ptype:?}");
    }
}

/// The parse direction: the connection's typed view and wire's owned list
/// read the same bytes alike (header, features, Ack Vector, MP_SEQ,
/// payload), for every packet type.
#[test]
fn segment_and_dccp_repr_parse_the_same_bytes() {
    for ptype in (0..10).map(|t| PacketType::from_u8(t).unwrap()) {
        let mut s = every_field(ptype);
        s.push_feat(kind::CONFIRM_R, FeatureNum::Ccid, None);
        if ptype.has_ack() {
            s.ack_vector_out = Some(AckVector {
                nonce: 0,
                cells: vec![0x05, 0xC1, 0x03],
            });
        }
        s.mp.seq = Some(0x1234_5678);
        s.payload = b"payload";
        let mut buf = [0u8; 256];
        let n = s.emit(&mut buf, v4()).unwrap();
        let seg = Segment::parse(&buf[..n], Some(v4())).unwrap();
        let (repr, hl) = DccpRepr::parse(&buf[..n], Some(v4())).unwrap();
        assert_eq!(seg.header(), repr.header, "{ptype:?}");
        let feats: Vec<DccpOption> = seg.feats().iter().map(|f| f.to_option()).collect();
        let repr_feats: Vec<DccpOption> = (repr.options.iter())
            .filter(|o| {
                matches!(
                    o,
                    DccpOption::ChangeL { .. }
                        | DccpOption::ConfirmL { .. }
                        | DccpOption::ChangeR { .. }
                        | DccpOption::ConfirmR { .. }
                )
            })
            .cloned()
            .collect();
        // RFC 4340 §5.8: no feature negotiation on a Data packet; both drop it.
        let sent = if ptype == PacketType::Data { 0 } else { 2 };
        assert_eq!((feats.len(), &feats), (sent, &repr_feats), "{ptype:?}");
        let cells = repr.ack_vector().map(|av| &av.cells[..]);
        assert_eq!(cells.is_some(), ptype.has_ack(), "{ptype:?}");
        assert_eq!(seg.ack_vector, cells, "{ptype:?}");
        assert_eq!(seg.mp.seq, repr.mp_seq(), "{ptype:?}");
        assert_eq!(seg.payload, &buf[hl..n], "{ptype:?}");
        assert_eq!((seg.bad_opts, seg.option_error), (0, None), "{ptype:?}");
    }
}

#[test]
fn round_trip_through_wire() {
    let mut s = Segment::new(PacketType::DataAck, 0xABCD_EF01_2345);
    s.ack = Some(77);
    s.push_feat(kind::CHANGE_L, FeatureNum::AckRatio, Some(3));
    s.push_feat(kind::CONFIRM_R, FeatureNum::MultipathCapable, Some(0));
    s.push_feat(kind::CONFIRM_R, FeatureNum::Ccid, None);
    let av = [0x05u8, 0xC1, 0x03];
    s.ack_vector_out = Some(AckVector {
        nonce: 0,
        cells: av.to_vec(),
    });
    s.mp.seq = Some((1 << 48) - 1);
    s.mp.addaddr_hmac = Some([7; 20]);
    s.mp.key = Some(KeyOffer::plain(0xdead_beef, [1; 8], Some([2; 8])));
    s.mp.addaddr = Some(MpAddAddr {
        addr_id: 3,
        nonce: 9,
        ip: "192.0.2.7".parse().unwrap(),
        port: Some(4242),
    });
    s.mp.push_confirm(ConfirmItem {
        kind: subtype::PRIO,
        id: 2,
        ..ConfirmItem::default()
    });
    s.mp.push_confirm(ConfirmItem {
        seq: Some(0x1234_5678_9abc),
        kind: subtype::ADDADDR,
        id: 4,
        nonce: 77,
        addr: Some(("2001:db8::1".parse().unwrap(), None)),
    });
    s.payload = b"hello";
    s.elapsed_10us = Some(70_000);
    let mut buf = [0u8; 1500];
    let n = s.emit(&mut buf, v4()).unwrap();
    let p = Segment::parse(&buf[..n], Some(v4())).unwrap();
    assert_eq!(p.ptype, PacketType::DataAck);
    assert_eq!(p.seq, s.seq);
    assert_eq!(p.ack, Some(77));
    assert_eq!(p.feats(), s.feats());
    assert_eq!(p.ack_vector, Some(&av[..]));
    assert_eq!(p.mp, s.mp);
    assert_eq!(p.elapsed_10us, Some(70_000));
    assert_eq!(p.payload, b"hello");
    assert_eq!(p.bad_opts, 0);
    // wire's owned parser agrees.
    let (repr, hl) = DccpRepr::parse(&buf[..n], Some(v4())).unwrap();
    assert_eq!(repr.mp_seq(), Some((1 << 48) - 1));
    assert_eq!(&buf[hl..n], b"hello");
    // A flipped payload bit breaks the checksum.
    buf[n - 1] ^= 1;
    assert_eq!(
        Segment::parse(&buf[..n], Some(v4())).unwrap_err(),
        WireError::BadChecksum
    );
}

#[test]
fn every_type_round_trips() {
    for t in 0..10u8 {
        let ty = PacketType::from_u8(t).unwrap();
        let mut s = Segment::new(ty, 5);
        if ty.has_ack() {
            s.ack = Some(4);
        }
        s.reset_code = ResetCode::MpFastClose;
        s.service_code = 42;
        let mut buf = [0u8; 64];
        let n = s.emit(&mut buf, v4()).unwrap();
        let p = Segment::parse(&buf[..n], Some(v4())).unwrap();
        assert_eq!((p.ptype, p.seq, p.ack), (ty, 5, s.ack));
        if ty == PacketType::Reset {
            assert_eq!(p.reset_code, ResetCode::MpFastClose);
        }
    }
}

#[test]
fn elapsed_time_needs_an_ack_and_a_second_one_is_ignored() {
    let mut buf = [0u8; 128];
    // Data carries no acknowledgement: nothing to time, counted.
    let mut s = Segment::new(PacketType::Data, 9);
    let n = s.emit(&mut buf, v4()).unwrap();
    let mut raw = buf[..n].to_vec();
    // Append Elapsed Time (2-byte form) by hand: kind 43, len 4.
    let hl = raw[4] as usize * 4;
    raw.splice(hl..hl, [kind::ELAPSED_TIME, 4, 0x03, 0xe8]);
    raw[4] += 1;
    let p = Segment::parse(&raw, None).unwrap();
    // RFC 4340 Table 3: Elapsed Time on DCCP-Data is ignored.
    assert_eq!((p.elapsed_10us, p.bad_opts, p.ignored_opts), (None, 0, 1));
    // An Ack with two: the first counts, the second is ignored.
    let mut s = Segment::new(PacketType::Ack, 9);
    s.ack = Some(8);
    s.elapsed_10us = Some(1000);
    let n = s.emit(&mut buf, v4()).unwrap();
    let mut raw = buf[..n].to_vec();
    let hl = raw[4] as usize * 4;
    raw.splice(hl..hl, [kind::ELAPSED_TIME, 4, 0, 1]);
    raw[4] += 1;
    let p = Segment::parse(&raw, None).unwrap();
    assert_eq!((p.elapsed_10us, p.bad_opts), (Some(1000), 1));
}

/// `opts` spliced in front of the options of an Ack numbered 9.
fn ack_with(opts: &[u8]) -> Vec<u8> {
    let mut s = Segment::new(PacketType::Ack, 9);
    s.ack = Some(8);
    let mut buf = [0u8; 128];
    let n = s.emit(&mut buf, v4()).unwrap();
    let mut raw = buf[..n].to_vec();
    let hl = raw[4] as usize * 4;
    let mut area = opts.to_vec();
    area.resize(opts.len().div_ceil(4) * 4, 0);
    raw.splice(hl..hl, area.iter().copied());
    raw[4] += (area.len() / 4) as u8;
    raw
}

#[test]
fn rfc4340_option_rules_are_applied_and_the_header_still_parses() {
    let err = |opts: &[u8]| Segment::parse(&ack_with(opts), None).unwrap().option_error;
    // §5.8.2: Mandatory before an option not understood.
    assert_eq!(
        err(&[kind::MANDATORY, 50, 2]),
        Some(WireError::MandatoryFailure { kind: 50 })
    );
    // §5.8.2: Mandatory last (before padding) or twice.
    let misplaced = Some(WireError::BadOptionValue {
        kind: kind::MANDATORY,
    });
    assert_eq!(err(&[kind::MANDATORY]), misplaced);
    assert_eq!(err(&[kind::MANDATORY, kind::MANDATORY, 2]), misplaced);
    // §5.8: a known option with a length its type forbids.
    assert_eq!(
        err(&[kind::TIMESTAMP, 3, 0]),
        Some(WireError::BadOptionValue {
            kind: kind::TIMESTAMP
        })
    );
    // A length running past the options area.
    assert_eq!(
        err(&[40, 9, 0]),
        Some(WireError::BadOptionLength { kind: 40 })
    );
    // An MP sub-option that does not parse.
    assert!(matches!(
        err(&[kind::MULTIPATH, 5, 1, 0, 0]),
        Some(WireError::BadMpOption { .. })
    ));
    // RFC 9897 §3.6: an MP_KEY with a reserved key type (7) is no
    // Option Error but an offer of no usable key (fallback).
    let raw = ack_with(&[kind::MULTIPATH, 9, mp_sub::KEY, 0, 0, 0, 0, 1, 7]);
    let p = Segment::parse(&raw, None).unwrap();
    assert_eq!(p.option_error, None);
    assert_eq!(
        (p.mp.key.as_ref().map(KeyOffer::plain_key), p.bad_opts),
        (Some(None), 1)
    );
    // Mandatory before an understood option, unknown options alone:
    // fine (§5.8: unknown options are ignored).
    assert_eq!(err(&[kind::MANDATORY, kind::SLOW_RECEIVER]), None);
    assert_eq!(err(&[50, 2]), None);
    // Every error maps to the Reset RFC 4340 names.
    for (opts, code) in [
        (&[kind::MANDATORY, 50, 2][..], ResetCode::MandatoryError),
        (&[kind::MANDATORY][..], ResetCode::OptionError),
        (&[kind::TIMESTAMP, 3, 0][..], ResetCode::OptionError),
    ] {
        assert_eq!(err(opts).and_then(WireError::reset_code), Some(code));
    }
}

#[test]
fn each_mp_hmac_belongs_to_the_option_it_directly_follows() {
    let bytes = |opts: &[MpOption]| {
        let mut b = Vec::new();
        for o in opts {
            let mut buf = [0u8; 64];
            let n = DccpOption::Multipath(o.clone()).emit(&mut buf).unwrap();
            b.extend_from_slice(&buf[..n]);
        }
        ack_with(&b)
    };
    let add = MpOption::AddAddr {
        addr_id: 3,
        nonce: Some(9),
        addr: "192.0.2.1".parse().unwrap(),
        port: None,
    };
    let rem = MpOption::RemoveAddr {
        addr_id: 4,
        nonce: Some(8),
    };
    let (ta, tr) = (MpOption::Hmac([1; 20]), MpOption::Hmac([2; 20]));
    // RFC 9897 §3.2.6: one tag per protected option, in order.
    let raw = bytes(&[add.clone(), ta.clone(), rem.clone(), tr.clone()]);
    let p = Segment::parse(&raw, None).unwrap();
    let tags = (p.mp.addaddr_hmac, p.mp.removeaddr_hmac, p.mp.hmac);
    assert_eq!(tags, (Some([1; 20]), Some([2; 20]), None));
    assert_eq!(p.ignored_opts, 0);
    // Before its option, or after another option: ignored, counted.
    let raw = bytes(&[ta.clone(), add.clone(), MpOption::Seq(5), tr.clone()]);
    let p = Segment::parse(&raw, None).unwrap();
    let tags = (p.mp.addaddr_hmac, p.mp.removeaddr_hmac, p.mp.hmac);
    assert_eq!((tags, p.ignored_opts), ((None, None, None), 2));
    // The single MP_HMAC of a packet with no protected option is kept
    // (a join's third packet); two such are both ignored.
    let raw = bytes(&[MpOption::Seq(5), ta.clone()]);
    let p = Segment::parse(&raw, None).unwrap();
    assert_eq!(p.mp.hmac, Some([1; 20]));
    let raw = bytes(&[ta, tr]);
    let p = Segment::parse(&raw, None).unwrap();
    assert_eq!((p.mp.hmac, p.ignored_opts), (None, 2));
}

#[test]
fn options_ignored_on_the_packet_type_are_not_acted_on() {
    // Table 3: feature negotiation on DCCP-Data is ignored.
    let mut s = Segment::new(PacketType::Data, 9);
    s.push_feat(kind::CHANGE_L, FeatureNum::AckRatio, Some(3));
    let mut buf = [0u8; 64];
    let n = s.emit(&mut buf, v4()).unwrap();
    let p = Segment::parse(&buf[..n], None).unwrap();
    assert_eq!((p.feats().len(), p.ignored_opts), (0, 1));
    assert_eq!(p.option_error, None);
    // Mandatory on Data is ignored too, so it cannot make the next
    // (ignored) option an error.
    let mut raw = buf[..n].to_vec();
    let hl = raw[4] as usize * 4;
    raw.splice(hl..hl, [kind::MANDATORY, 50, 2, 0]);
    raw[4] += 1;
    let p = Segment::parse(&raw, None).unwrap();
    assert_eq!(p.option_error, None);
}

#[test]
fn hostile_bytes_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut buf = [0u8; 96];
    for _ in 0..20_000 {
        let n = rng.gen_range(0..buf.len());
        rng.fill(&mut buf[..n]);
        if n > 8 {
            buf[4] = rng.gen_range(0..(n as u8 / 4 + 2));
            buf[8] = (rng.gen_range(0..10u8) << 1) | 1;
            if rng.gen_bool(0.5) {
                buf[16.min(n - 1)] = 46;
            }
        }
        let _ = Segment::parse(&buf[..n], None);
    }
}
