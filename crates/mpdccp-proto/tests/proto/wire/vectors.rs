//! Known byte vectors: packets and options laid out by hand from the
//! figures of RFC 4340 (§5, §5.8, §6, §11.4, §13) and RFC 9897 (§3.2), and
//! every rejection rule the wire layer implements.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mpdccp_proto::wire::mp::HMAC_LEN;
use mpdccp_proto::wire::option::parse_options;
use mpdccp_proto::wire::{
    udp_encap, AckState, AckVector, AckVectorBuilder, DccpKind, DccpOption, DccpRepr, FeatureNum,
    FeatureValue, Header, KeyType, MpKey, MpOption, Packet, PacketType, ResetCode, RttType,
    WireError, WireProfile, WireStats,
};

const V4: (IpAddr, IpAddr) = (
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
);

/// Independent RFC 1071 checksum over 16-bit words, for cross-checking.
fn rfc1071(chunks: &[&[u8]]) -> u16 {
    let mut all = Vec::new();
    for c in chunks {
        all.extend_from_slice(c);
    }
    if all.len() % 2 == 1 {
        all.push(0);
    }
    let mut sum: u32 = 0;
    for w in all.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn request_bytes() -> Vec<u8> {
    vec![
        0x13, 0x88, 0x13, 0x89, // ports 5000 -> 5001
        0x05, 0x00, 0x00, 0x00, // data offset 5 words, CCVal 0, CsCov 0, checksum
        0x01, 0x00, 0x00, 0x00, // Res 0, Type 0 (Request), X=1, reserved, seq hi
        0x00, 0x00, 0x00, 0x01, // seq = 1
        0x00, 0x00, 0x00, 0x2a, // service code 42
    ]
}

#[test]
fn request_layout_and_checksum_match_hand_computation() {
    let repr = DccpRepr {
        header: Header {
            src_port: 5000,
            dst_port: 5001,
            seq: 1,
            kind: DccpKind::Request { service_code: 42 },
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    let mut buf = vec![0u8; repr.buffer_len(0)];
    repr.emit(&mut buf, &[], None).unwrap();
    assert_eq!(buf, request_bytes());

    repr.emit(&mut buf, &[], Some(V4)).unwrap();
    // Hand sum (§9.1): pseudo-header 0x1438 + header 0x2d3c = 0x4174.
    assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), 0xbe8b);
    let pseudo = [10, 0, 0, 1, 10, 0, 0, 2, 0, 33, 0, 20];
    let mut zeroed = buf.clone();
    zeroed[6] = 0;
    zeroed[7] = 0;
    assert_eq!(rfc1071(&[&pseudo, &zeroed]), 0xbe8b);

    let (parsed, hl) = DccpRepr::parse(&buf, Some(V4)).unwrap();
    assert_eq!(hl, 20);
    assert_eq!(parsed, repr);
    // The wrong pseudo-header fails verification.
    let other = (V4.1, V4.0);
    let swapped_ok = DccpRepr::parse(&buf, Some(other));
    // Swapping src/dst keeps the one's-complement sum: still valid.
    assert!(swapped_ok.is_ok());
    let wrong = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), V4.1);
    assert_eq!(
        DccpRepr::parse(&buf, Some(wrong)).unwrap_err(),
        WireError::BadChecksum
    );
}

#[test]
fn ipv6_checksum_matches_independent_sum() {
    let a = (
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
    );
    let repr = DccpRepr {
        header: Header {
            src_port: 1,
            dst_port: 2,
            seq: 0xffff_ffff_ffff,
            kind: DccpKind::DataAck {
                ack: 0x8000_0000_0001,
            },
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    let payload = [1u8, 2, 3, 4, 5];
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut buf, &payload, Some(a)).unwrap();
    let mut pseudo = Vec::new();
    if let (IpAddr::V6(s), IpAddr::V6(d)) = a {
        pseudo.extend_from_slice(&s.octets());
        pseudo.extend_from_slice(&d.octets());
    }
    pseudo.extend_from_slice(&(n as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 33]);
    let ck = u16::from_be_bytes([buf[6], buf[7]]);
    buf[6] = 0;
    buf[7] = 0;
    assert_eq!(rfc1071(&[&pseudo, &buf]), ck);
}

#[test]
fn short_sequence_data_and_ack_parse() {
    // X=0 Data: 12-byte header, 24-bit seq (§5.1).
    let data = [
        0x13, 0x88, 0x13, 0x89, 0x03, 0x00, 0, 0, 0x04, 0x12, 0x34, 0x56, b'h', b'i',
    ];
    let (r, hl) = DccpRepr::parse(&data, None).unwrap();
    assert_eq!(hl, 12);
    assert!(r.header.short_seq);
    assert_eq!(r.header.seq, 0x12_3456);
    assert_eq!(r.header.kind, DccpKind::Data);
    assert_eq!(&data[hl..], b"hi");

    // X=0 Ack: 4-byte ack sub-header, reserved 8 bits + 24-bit ack (§5.3).
    let ack = [
        0, 1, 0, 2, 0x04, 0x00, 0, 0, 0x06, 0, 0, 9, 0x00, 0xab, 0xcd, 0xef,
    ];
    let (r, _) = DccpRepr::parse(&ack, None).unwrap();
    assert_eq!(r.header.kind, DccpKind::Ack { ack: 0xab_cdef });
    assert_eq!(r.header.seq, 9);

    // Emitting X=0 round-trips for Data/Ack/DataAck.
    let mut buf = vec![0u8; r.buffer_len(0)];
    r.emit(&mut buf, &[], None).unwrap();
    assert_eq!(&buf[..], &ack[..]);
}

#[test]
fn reset_subheader_layout() {
    let mut b = vec![0u8; 28];
    b[4] = 7; // 28 bytes
    b[8] = (7 << 1) | 1;
    b[15] = 5; // seq 5
    b[16..24].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 4]); // ack 4
    b[24..28].copy_from_slice(&[13, 1, 2, 3]);
    let (r, _) = DccpRepr::parse(&b, None).unwrap();
    assert_eq!(
        r.header.kind,
        DccpKind::Reset {
            ack: 4,
            code: ResetCode::MpFastClose,
            data: [1, 2, 3]
        }
    );
    assert_eq!(ResetCode::from_u8(9), ResetCode::TooBusy);
    assert_eq!(ResetCode::from_u8(200), ResetCode::Other(200));
    for v in 0..=255u8 {
        assert_eq!(ResetCode::from_u8(v).to_u8(), v);
    }
}

#[test]
fn structural_rejections() {
    let good = request_bytes();
    // Truncated at every length below the full header.
    for n in 0..good.len() {
        assert!(
            DccpRepr::parse(&good[..n], None).is_err(),
            "len {n} accepted"
        );
    }
    // Reserved types 10..15 (§5.1).
    for t in 10..16u8 {
        let mut b = good.clone();
        b[8] = (t << 1) | 1;
        assert_eq!(
            DccpRepr::parse(&b, None).unwrap_err(),
            WireError::ReservedType(t)
        );
    }
    // X=0 on a Request (§5.1: only Data, Ack, DataAck).
    let mut b = good.clone();
    b[8] = 0;
    assert_eq!(
        DccpRepr::parse(&b, None).unwrap_err(),
        WireError::ShortSeqNotAllowed
    );
    // Data Offset too small for header + sub-header, and past the end.
    let mut b = good.clone();
    b[4] = 4;
    assert_eq!(
        DccpRepr::parse(&b, None).unwrap_err(),
        WireError::BadDataOffset
    );
    b[4] = 6;
    assert_eq!(
        DccpRepr::parse(&b, None).unwrap_err(),
        WireError::BadDataOffset
    );
    // Checksum Coverage beyond the packet (§9.2): header 20 + (15-1)*4.
    let mut b = good.clone();
    b[5] = 0x0f;
    assert_eq!(
        DccpRepr::parse(&b, None).unwrap_err(),
        WireError::BadChecksumCoverage
    );
    // A flipped header bit fails the checksum.
    let repr = DccpRepr::parse(&good, None).unwrap().0;
    let mut b = vec![0u8; 20];
    repr.emit(&mut b, &[], Some(V4)).unwrap();
    b[19] ^= 1;
    assert_eq!(
        DccpRepr::parse(&b, Some(V4)).unwrap_err(),
        WireError::BadChecksum
    );
    let mut stats = WireStats::default();
    stats.record(WireError::BadChecksum);
    stats.record(WireError::ReservedType(11));
    assert_eq!(
        (stats.bad_checksum, stats.reserved_type, stats.rejected()),
        (1, 1, 2)
    );
}

#[test]
fn checksum_coverage_limits_what_is_protected() {
    let header = Header {
        kind: DccpKind::Data,
        cscov: 2, // header + 4 payload bytes
        ..Header::default()
    };
    let repr = DccpRepr::new(header, Vec::new());
    let payload = [1u8; 12];
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    repr.emit(&mut b, &payload, Some(V4)).unwrap();
    let hl = repr.header_len();
    let mut tail = b.clone();
    tail[hl + 8] ^= 0xff; // beyond coverage: still valid
    assert!(DccpRepr::parse(&tail, Some(V4)).is_ok());
    let mut head = b.clone();
    head[hl + 1] ^= 0xff; // inside coverage
    assert_eq!(
        DccpRepr::parse(&head, Some(V4)).unwrap_err(),
        WireError::BadChecksum
    );
}

fn opts(area: &[u8], ty: PacketType) -> Result<Vec<DccpOption>, WireError> {
    let mut ignored = 0;
    parse_options(area, ty, &mut ignored, WireProfile::Rfc9897)
}

#[test]
fn option_byte_vectors() {
    let ty = PacketType::Ack;
    let ts = [0x01, 0x02, 0x03, 0x04];
    assert_eq!(
        opts(&[41, 6, 1, 2, 3, 4], ty).unwrap(),
        vec![DccpOption::Timestamp(0x0102_0304)]
    );
    // Timestamp Echo in its three sizes (§13.3).
    let mut v = vec![42, 6];
    v.extend_from_slice(&ts);
    assert_eq!(
        opts(&v, ty).unwrap(),
        vec![DccpOption::TimestampEcho {
            timestamp: 0x0102_0304,
            elapsed: None
        }]
    );
    let mut v = vec![42, 8];
    v.extend_from_slice(&ts);
    v.extend_from_slice(&[0x00, 0x10]);
    assert_eq!(
        opts(&v, ty).unwrap(),
        vec![DccpOption::TimestampEcho {
            timestamp: 0x0102_0304,
            elapsed: Some(16)
        }]
    );
    let mut v = vec![42, 10];
    v.extend_from_slice(&ts);
    v.extend_from_slice(&[0x00, 0x01, 0x00, 0x00]);
    assert_eq!(
        opts(&v, ty).unwrap(),
        vec![DccpOption::TimestampEcho {
            timestamp: 0x0102_0304,
            elapsed: Some(65_536)
        }]
    );
    assert!(opts(&[42, 7, 1, 2, 3, 4, 5], ty).is_err());
    // Elapsed Time 2 and 4 bytes (§13.2).
    assert_eq!(
        opts(&[43, 4, 1, 0], ty).unwrap(),
        vec![DccpOption::ElapsedTime(256)]
    );
    assert_eq!(
        opts(&[43, 6, 0, 1, 0, 0], ty).unwrap(),
        vec![DccpOption::ElapsedTime(65_536)]
    );
    assert!(opts(&[43, 5, 1, 2, 3], ty).is_err());
    // NDP Count 1..6 bytes (§7.7).
    assert_eq!(
        opts(&[37, 3, 5], ty).unwrap(),
        vec![DccpOption::NdpCount(5)]
    );
    assert_eq!(
        opts(&[37, 8, 1, 2, 3, 4, 5, 6], ty).unwrap(),
        vec![DccpOption::NdpCount(0x0102_0304_0506)]
    );
    assert!(opts(&[37, 9, 1, 2, 3, 4, 5, 6, 7], ty).is_err());
    // Single-byte options and an unknown single-byte type (preserved).
    assert_eq!(
        opts(&[2, 5, 0, 0], ty).unwrap(),
        vec![
            DccpOption::SlowReceiver,
            DccpOption::Unknown {
                kind: 5,
                data: vec![]
            }
        ]
    );
    // Unknown length-carrying option preserved.
    assert_eq!(
        opts(&[200, 4, 0xaa, 0xbb], ty).unwrap(),
        vec![DccpOption::Unknown {
            kind: 200,
            data: vec![0xaa, 0xbb]
        }]
    );
    // Init Cookie and Data Dropped need at least one data byte.
    assert!(opts(&[36, 2], ty).is_err());
    assert_eq!(
        opts(&[36, 3, 9], ty).unwrap(),
        vec![DccpOption::InitCookie(vec![9])]
    );
    assert!(opts(&[40, 2], ty).is_err());
}

#[test]
fn feature_negotiation_encodings() {
    let ty = PacketType::Request;
    // Change L(CCID, 2 3): server-priority preference list (§6.1, §6.3.1).
    assert_eq!(
        opts(&[32, 5, 1, 2, 3], ty).unwrap(),
        vec![DccpOption::ChangeL {
            feature: FeatureNum::Ccid,
            value: FeatureValue::ServerPriority(vec![2, 3])
        }]
    );
    // Confirm L(MP_CAPABLE, 1, 2 1 0): selected value then list (RFC 9897 §3.1 example).
    let o = opts(&[33, 7, 10, 1, 2, 1, 0], ty).unwrap();
    match &o[0] {
        DccpOption::ConfirmL {
            feature: FeatureNum::MultipathCapable,
            value,
        } => {
            assert_eq!(value.selected(), Some(1));
            assert_eq!(value, &FeatureValue::ServerPriority(vec![1, 2, 1, 0]));
        }
        other => panic!("{other:?}"),
    }
    // The value byte carries the version in its high nibble (§3.1, Figure 3).
    use mpdccp_proto::wire::mp::{mp_capable_value, mp_capable_version, MP_VERSION};
    assert_eq!(mp_capable_value(MP_VERSION), 0x00);
    assert_eq!(mp_capable_value(1), 0x10);
    assert_eq!(mp_capable_version(0x1f), 1, "unassigned bits ignored");
    // Empty Confirm: no agreement / not understood.
    assert_eq!(
        opts(&[35, 3, 10], ty).unwrap(),
        vec![DccpOption::ConfirmR {
            feature: FeatureNum::MultipathCapable,
            value: FeatureValue::Empty
        }]
    );
    // Sequence Window: non-negotiable, 48 bits (§7.5.2).
    assert_eq!(
        opts(&[34, 9, 3, 0, 0, 0, 0, 0, 100], ty).unwrap(),
        vec![DccpOption::ChangeR {
            feature: FeatureNum::SequenceWindow,
            value: FeatureValue::NonNegotiable(100)
        }]
    );
    assert_eq!(
        opts(&[34, 8, 3, 0, 0, 0, 0, 100], ty).unwrap_err(),
        WireError::BadFeatureValue { feature: 3 }
    );
    // Ack Ratio: 16 bits.
    assert_eq!(
        opts(&[32, 5, 5, 0, 2], ty).unwrap(),
        vec![DccpOption::ChangeL {
            feature: FeatureNum::AckRatio,
            value: FeatureValue::NonNegotiable(2)
        }]
    );
    // CCID-specific feature: raw bytes kept.
    assert_eq!(
        opts(&[32, 4, 200, 7], ty).unwrap(),
        vec![DccpOption::ChangeL {
            feature: FeatureNum::Other(200),
            value: FeatureValue::Unknown(vec![7])
        }]
    );
    // Change with no feature number is malformed.
    assert!(opts(&[32, 2], ty).is_err());
}

#[test]
fn option_length_and_mandatory_rules() {
    let ty = PacketType::Ack;
    // Length < 2 and length past the end (§5.8).
    assert_eq!(
        opts(&[41, 1], ty).unwrap_err(),
        WireError::BadOptionLength { kind: 41 }
    );
    assert_eq!(
        opts(&[41, 7, 1, 2, 3, 4], ty).unwrap_err(),
        WireError::BadOptionLength { kind: 41 }
    );
    assert_eq!(
        opts(&[41], ty).unwrap_err(),
        WireError::BadOptionLength { kind: 41 }
    );
    // Mandatory before an understood option is kept in place (§5.8.2).
    assert_eq!(
        opts(&[1, 41, 6, 0, 0, 0, 1], ty).unwrap(),
        vec![DccpOption::Mandatory, DccpOption::Timestamp(1)]
    );
    // Mandatory before a reserved option: Mandatory Error (Reset 6).
    let e = opts(&[1, 50, 2], ty).unwrap_err();
    assert_eq!(e, WireError::MandatoryFailure { kind: 50 });
    assert_eq!(e.reset_code(), Some(ResetCode::MandatoryError));
    // Mandatory last, or before Mandatory / Padding: Option Error.
    for bad in [&[41, 6, 0, 0, 0, 1, 1][..], &[1, 1, 2], &[1, 0, 2]] {
        let e = opts(bad, ty).unwrap_err();
        assert_eq!(e.reset_code(), Some(ResetCode::OptionError), "{bad:?}");
    }
    // Options Table 3 marks as not for DCCP-Data are ignored there, and counted.
    let mut ignored = 0;
    let o = parse_options(
        &[32, 4, 1, 2, 41, 6, 0, 0, 0, 1, 43, 4, 0, 1, 1, 2],
        PacketType::Data,
        &mut ignored,
        WireProfile::Rfc9897,
    )
    .unwrap();
    assert_eq!(o, vec![DccpOption::Timestamp(1), DccpOption::SlowReceiver]);
    assert_eq!(ignored, 3);
}

#[test]
fn options_limit_is_enforced_on_emit() {
    let big = DccpOption::Unknown {
        kind: 200,
        data: vec![0; 253],
    };
    let mut repr = DccpRepr {
        header: Header {
            kind: DccpKind::Ack { ack: 1 },
            ..Header::default()
        },
        options: vec![big.clone(); 3],
        ..DccpRepr::default()
    };
    // 24 + 3 * 255 = 789 bytes: fits.
    let mut buf = vec![0u8; 2048];
    assert!(repr.emit(&mut buf, &[], None).is_ok());
    repr.options.push(big);
    // 24 + 1020 bytes > 1020 (Data Offset is 8 bits of words).
    assert_eq!(
        repr.emit(&mut buf, &[], None).unwrap_err(),
        WireError::OptionsTooLong
    );
    // Field ranges.
    let r = DccpRepr {
        header: Header {
            seq: 1 << 48,
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    assert_eq!(
        r.emit(&mut buf, &[], None).unwrap_err(),
        WireError::FieldOutOfRange
    );
    let r = DccpRepr {
        header: Header {
            kind: DccpKind::Sync { ack: 0 },
            short_seq: true,
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    assert_eq!(
        r.emit(&mut buf, &[], None).unwrap_err(),
        WireError::ShortSeqNotAllowed
    );
    let r = DccpRepr {
        header: Header {
            short_seq: true,
            seq: 1 << 24,
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    assert_eq!(
        r.emit(&mut buf, &[], None).unwrap_err(),
        WireError::FieldOutOfRange
    );
    let r = DccpRepr::default();
    assert_eq!(
        r.emit(&mut buf[..10], &[], None).unwrap_err(),
        WireError::BufferTooSmall
    );
}

#[test]
fn ack_vector_hand_computed_examples() {
    // §11.4: ack 10; 10, 9, 8 received; 7, 6 missing; 5..0 received.
    // Cells: (state 0, run 2) (state 3, run 1) (state 0, run 5).
    let av = AckVector {
        nonce: 0,
        cells: vec![0x02, 0xc1, 0x05],
    };
    let walked: Vec<(u64, AckState)> = av.iter(10).collect();
    let mut want = vec![
        (10, AckState::Received),
        (9, AckState::Received),
        (8, AckState::Received),
    ];
    want.push((7, AckState::NotReceived));
    want.push((6, AckState::NotReceived));
    for s in (0..=5).rev() {
        want.push((s, AckState::Received));
    }
    assert_eq!(walked, want);
    assert_eq!(av.as_ref().covered(), 11);
    let runs: Vec<_> = av.as_ref().runs(10).collect();
    assert_eq!(
        runs,
        vec![
            (10, 3, AckState::Received),
            (7, 2, AckState::NotReceived),
            (5, 6, AckState::Received)
        ]
    );

    // The builder produces exactly those cells.
    let mut b = AckVectorBuilder::new(253);
    for s in &want {
        assert!(b.push(s.1));
    }
    assert_eq!(b.finish(0), av);

    // Option bytes: type 38 (nonce 0), length 5, cells; nonce 1 is type 39.
    let ty = PacketType::Ack;
    assert_eq!(
        opts(&[38, 5, 0x02, 0xc1, 0x05], ty).unwrap(),
        vec![DccpOption::AckVector(av.clone())]
    );
    let o = DccpOption::AckVector(AckVector {
        nonce: 1,
        cells: vec![0x42],
    });
    let mut buf = [0u8; 3];
    o.emit(&mut buf).unwrap();
    assert_eq!(buf, [39, 3, 0x42]);
    assert!(opts(&[38, 2], ty).is_err());

    // Runs are capped at 64 packets per cell: 100 received = 0x3f, 0x23.
    let mut b = AckVectorBuilder::new(253);
    assert!(b.push_run(AckState::Received, 100));
    assert_eq!(b.finish(0).cells, vec![0x3f, 0x23]);
    // ECN-marked state is 1 in the top two bits.
    let mut b = AckVectorBuilder::new(253);
    b.push_run(AckState::ReceivedEcnMarked, 2);
    assert_eq!(
        b.finish(1),
        AckVector {
            nonce: 1,
            cells: vec![0x41]
        }
    );

    // Sequence numbers wrap modulo 2^48 walking backwards.
    let av = AckVector {
        nonce: 0,
        cells: vec![0x03],
    };
    let seqs: Vec<u64> = av.iter(1).map(|(s, _)| s).collect();
    assert_eq!(seqs, vec![1, 0, (1 << 48) - 1, (1 << 48) - 2]);

    // The builder stops at its cell budget instead of growing.
    let mut b = AckVectorBuilder::new(2);
    assert!(b.push(AckState::Received));
    assert!(b.push(AckState::NotReceived));
    assert!(!b.push(AckState::Received));
    assert_eq!(b.finish(0).cells.len(), 2);
}

fn mp(bytes: &[u8]) -> Result<MpOption, WireError> {
    assert_eq!(bytes[0], 46);
    assert_eq!(usize::from(bytes[1]), bytes.len());
    MpOption::parse(&bytes[2..])
}

fn roundtrip_bytes(o: &MpOption, bytes: &[u8]) {
    let mut buf = vec![0u8; o.buffer_len()];
    assert_eq!(o.emit(&mut buf).unwrap(), bytes.len());
    assert_eq!(buf, bytes);
}

#[test]
fn multipath_suboption_vectors() {
    // MP_SEQ: length 9, 48-bit (§3.2.5).
    let b = [46, 9, 4, 0, 0, 0, 0, 1, 0];
    assert_eq!(mp(&b).unwrap(), MpOption::Seq(256));
    roundtrip_bytes(&MpOption::Seq(256), &b);
    // MP_JOIN: length 12: Addr ID, CI, nonce (§3.2.2).
    let b = [46, 12, 1, 7, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 42];
    let o = MpOption::Join {
        addr_id: 7,
        ci: 0xdead_beef,
        nonce: 42,
    };
    assert_eq!(mp(&b).unwrap(), o);
    roundtrip_bytes(&o, &b);
    // MP_HMAC: length 23 (§3.2.6).
    let mut b = vec![46, 23, 5];
    b.extend(1..=20u8);
    let mut h = [0u8; HMAC_LEN];
    h.iter_mut().zip(1..=20u8).for_each(|(x, v)| *x = v);
    assert_eq!(mp(&b).unwrap(), MpOption::Hmac(h));
    // MP_RTT: length 12: type, RTT ms, age ms (§3.2.7).
    let b = [46, 12, 6, 3, 0, 0, 0, 50, 0, 0, 0, 5];
    let o = MpOption::Rtt {
        rtt_type: RttType::Smoothed,
        rtt_ms: 50,
        age_ms: 5,
    };
    assert_eq!(mp(&b).unwrap(), o);
    roundtrip_bytes(&o, &b);
    // MP_KEY, one plain key: length 17 (the draft's "between 17 and 73").
    let b = [46, 17, 3, 0, 0, 0, 0, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let o = MpOption::Key {
        ci: 9,
        keys: vec![MpKey::plain(0x0102_0304_0506_0708)],
    };
    assert_eq!(mp(&b).unwrap(), o);
    roundtrip_bytes(&o, &b);
    assert_eq!(MpKey::plain(5).plain_key(), Some(5));
    // RFC 9897 §3.2.4: key types 0 (8 bytes) and 255 (64 bytes); both
    // offered: 3 + 1 + 4 + 9 + 65 = 82 bytes, the RFC's stated maximum.
    let o = MpOption::Key {
        ci: 1,
        keys: vec![
            MpKey::plain(1),
            MpKey {
                key_type: KeyType::Experimental,
                data: vec![7; 64],
            },
        ],
    };
    assert_eq!(o.buffer_len(), 82);
    let mut buf = vec![0u8; o.buffer_len()];
    o.emit(&mut buf).unwrap();
    assert_eq!(mp(&buf).unwrap(), o);
    // Unassigned key type cannot be delimited: rejected.
    assert_eq!(
        mp(&[46, 10, 3, 0, 0, 0, 0, 9, 7, 1]).unwrap_err(),
        WireError::BadMpOption { subtype: 3 }
    );
    // MP_ADDADDR, draft form (no nonce): 8, 10, 20, 22 bytes.
    let b = [46, 8, 7, 2, 10, 0, 0, 3];
    let o = MpOption::AddAddr {
        addr_id: 2,
        nonce: None,
        addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)),
        port: None,
    };
    assert_eq!(mp(&b).unwrap(), o);
    roundtrip_bytes(&o, &b);
    let b = [46, 10, 7, 2, 10, 0, 0, 3, 0x13, 0x88];
    assert!(matches!(
        mp(&b).unwrap(),
        MpOption::AddAddr {
            port: Some(5000),
            nonce: None,
            ..
        }
    ));
    // RFC form: nonce after the Address ID.
    let b = [46, 14, 7, 2, 0, 0, 0, 99, 10, 0, 0, 3, 0x13, 0x88];
    let o = MpOption::AddAddr {
        addr_id: 2,
        nonce: Some(99),
        addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)),
        port: Some(5000),
    };
    assert_eq!(mp(&b).unwrap(), o);
    roundtrip_bytes(&o, &b);
    assert_eq!(
        o.hmac_message().unwrap(),
        vec![2, 0, 0, 0, 99, 10, 0, 0, 3, 0x13, 0x88]
    );
    let v6 = MpOption::AddAddr {
        addr_id: 3,
        nonce: Some(1),
        addr: IpAddr::V6(Ipv6Addr::LOCALHOST),
        port: None,
    };
    assert_eq!(v6.buffer_len(), 24);
    // HMAC message pads a missing port with two zero bytes.
    assert_eq!(v6.hmac_message().unwrap().len(), 1 + 4 + 16 + 2);
    assert!(mp(&[46, 9, 7, 2, 10, 0, 0, 3, 1]).is_err());
    // MP_REMOVEADDR: 4 (draft) or 8 (with nonce).
    assert_eq!(
        mp(&[46, 4, 8, 2]).unwrap(),
        MpOption::RemoveAddr {
            addr_id: 2,
            nonce: None
        }
    );
    assert_eq!(
        mp(&[46, 8, 8, 2, 0, 0, 1, 0]).unwrap(),
        MpOption::RemoveAddr {
            addr_id: 2,
            nonce: Some(256)
        }
    );
    assert!(mp(&[46, 5, 8, 2, 0]).is_err());
    // MP_PRIO: low 4 bits; reserved bits ignored.
    assert_eq!(mp(&[46, 4, 9, 0x0f]).unwrap(), MpOption::Prio(15));
    assert_eq!(mp(&[46, 4, 9, 0xf3]).unwrap(), MpOption::Prio(3));
    assert!(MpOption::Prio(16).emit(&mut [0u8; 4]).is_err());
    // MP_CLOSE and MP_FAST_CLOSE carry key data.
    let b = [46, 11, 10, 1, 2, 3, 4, 5, 6, 7, 8];
    assert_eq!(
        mp(&b).unwrap(),
        MpOption::Close {
            key_data: vec![1, 2, 3, 4, 5, 6, 7, 8]
        }
    );
    assert!(mp(&[46, 3, 2]).is_err());
    // MP_CONFIRM: MP_SEQ then the confirmed MP_PRIO, each a full sub-option.
    let b = [46, 16, 0, 46, 9, 4, 0, 0, 0, 0, 0, 1, 46, 4, 9, 1];
    let o = MpOption::Confirm(vec![MpOption::Seq(1), MpOption::Prio(1)]);
    assert_eq!(mp(&b).unwrap(), o);
    roundtrip_bytes(&o, &b);
    assert!(mp(&[46, 6, 0, 46, 3, 0]).is_err(), "nested MP_CONFIRM");
    assert!(mp(&[46, 7, 0, 46, 9, 4, 0]).is_err(), "truncated element");
    // MP_EXP: opaque.
    assert_eq!(mp(&[46, 5, 11, 1, 2]).unwrap(), MpOption::Exp(vec![1, 2]));
    // Wrong lengths and unknown sub-options.
    assert_eq!(
        mp(&[46, 8, 4, 0, 0, 0, 0, 1]).unwrap_err(),
        WireError::BadMpOption { subtype: 4 }
    );
    assert_eq!(
        mp(&[46, 11, 1, 7, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
        WireError::BadMpOption { subtype: 1 }
    );
    assert_eq!(
        mp(&[46, 3, 12]).unwrap_err(),
        WireError::BadMpOption { subtype: 12 }
    );
    assert_eq!(
        mp(&[46, 2]).unwrap_err().reset_code(),
        Some(ResetCode::OptionError)
    );
}

#[test]
fn packet_view_reads_data_path_fields_without_repr() {
    let mut b = AckVectorBuilder::new(8);
    b.push_run(AckState::Received, 3);
    let repr = DccpRepr {
        header: Header {
            kind: DccpKind::DataAck { ack: 1000 },
            ..Header::default()
        },
        options: vec![
            DccpOption::Timestamp(5),
            DccpOption::AckVector(b.finish(1)),
            DccpOption::Multipath(MpOption::Seq(0xfeed_f00d_cafe)),
        ],
        ..DccpRepr::default()
    };
    let payload = b"tunnelled ip packet";
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    repr.emit(&mut buf, payload, Some(V4)).unwrap();
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.packet_type(), PacketType::DataAck);
    assert_eq!(p.ack(), Some(1000));
    assert_eq!(p.mp_seq(), Some(0xfeed_f00d_cafe));
    let av = p.ack_vector().unwrap();
    assert_eq!(av.nonce, 1);
    assert_eq!(
        av.iter(1000).map(|(s, _)| s).collect::<Vec<_>>(),
        vec![1000, 999, 998]
    );
    assert_eq!(p.payload(), payload);
    assert!(p.verify_checksum(V4).is_ok());
    let kinds: Vec<u8> = p.options().map(|o| o.unwrap().kind).collect();
    assert_eq!(&kinds[..3], &[41, 39, 46]);
    assert_eq!(repr.mp_seq(), Some(0xfeed_f00d_cafe));
}

#[test]
fn udp_encapsulation_frames_and_checks() {
    let repr = DccpRepr {
        header: Header {
            kind: DccpKind::Data,
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    let payload = [9u8; 10];
    let n = repr.buffer_len(payload.len());
    let mut buf = vec![0u8; udp_encap::UDP_HEADER_LEN + n];
    repr.emit(&mut buf[8..], &payload, None).unwrap();
    udp_encap::fill_dccp_checksum(&mut buf[8..], V4).unwrap();
    // IPv4: UDP checksum zero (the DCCP checksum protects the packet).
    let total = udp_encap::frame(&mut buf, n, 40_000, udp_encap::DCCP_UDP_PORT, Some(V4)).unwrap();
    assert_eq!(total, buf.len());
    assert_eq!(&buf[6..8], &[0, 0]);
    let (h, dccp) = udp_encap::unframe(&buf, Some(V4)).unwrap();
    assert_eq!(
        (h.src_port, h.dst_port, usize::from(h.length)),
        (40_000, 6511, total)
    );
    udp_encap::verify_dccp_checksum(dccp, V4).unwrap();
    assert_eq!(DccpRepr::parse(dccp, None).unwrap().0, repr);
    // IPv6: UDP checksum computed and verified.
    let a6 = (
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    );
    udp_encap::frame(&mut buf, n, 1, 2, Some(a6)).unwrap();
    assert_ne!(&buf[6..8], &[0, 0]);
    assert!(udp_encap::unframe(&buf, Some(a6)).is_ok());
    let last = buf.len() - 1;
    buf[last] ^= 1;
    assert_eq!(
        udp_encap::unframe(&buf, Some(a6)).unwrap_err(),
        WireError::BadChecksum
    );
    // Length field larger than the datagram, or shorter than a UDP header.
    buf[4] = 0xff;
    assert_eq!(
        udp_encap::unframe(&buf, None).unwrap_err(),
        WireError::BadFraming
    );
    assert_eq!(
        udp_encap::unframe(&buf[..5], None).unwrap_err(),
        WireError::BadFraming
    );
}

#[test]
fn sequence_arithmetic_and_short_extension() {
    use mpdccp_proto::wire::seq;
    let top = (1u64 << 48) - 1;
    assert_eq!(seq::add(top, 2), 1);
    assert_eq!(seq::sub(0, 1), top);
    assert_eq!(seq::delta(1, top), 2);
    assert_eq!(seq::delta(top, 1), -2);
    assert!(seq::before(top, 0));
    assert!(!seq::before(0, top));
    assert!(seq::in_window(1, top - 5, 10));
    assert!(!seq::in_window(11, top - 5, 10));
    // §7.6: low 24 bits replaced, nearest to the reference wins.
    assert_eq!(seq::extend_short(0x00_0005, 0x12_ffff_fff0), 0x13_0000_0005);
    assert_eq!(seq::extend_short(0xff_fff0, 0x13_0000_0005), 0x12_ffff_fff0);
    assert_eq!(seq::extend_short(0x12_3456, 0x77_0012_3400), 0x77_0012_3456);
    // Across the 48-bit wrap.
    assert_eq!(seq::extend_short(0x00_0001, top), 1);
    assert_eq!(seq::extend_short(0xff_ffff, 2), top);
}
