//! The reference-kernel wire profiles against the reference's own bytes.
//!
//! `tests/vectors/reference-k{510,414}.txt` hold every Multipath option of
//! the two-VM captures of Deutsche Telekom's MP-DCCP kernel (5.10 and 4.14
//! branches) and the whole DCCP packets of the subflow handshakes and the
//! close; each line names its capture frame. Each option must parse under
//! its profile and re-emit byte-identical, and the keys, tokens, CIs and
//! MP_HMACs derived by `profile_keys` must reproduce the captured values.

use std::net::{IpAddr, Ipv4Addr};

use mpdccp_proto::wire::capture;
use mpdccp_proto::wire::mp::{subtype, HMAC_LEN};
use mpdccp_proto::wire::profile_keys::{reference_token, JoinHmac, PlainKeys};
use mpdccp_proto::wire::{DccpOption, DccpRepr, MpKey, MpOption, Packet, WireError, WireProfile};

/// One `opt` or `pkt` line of a vector file.
struct Line {
    pkt: bool,
    frame: u32,
    ptype: String,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    bytes: Vec<u8>,
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn load(name: &str) -> Vec<Line> {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("vector file");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (src, dst) = f[4].split_once('>').expect("src>dst");
            Line {
                pkt: f[0] == "pkt",
                frame: f[1].parse().expect("frame"),
                ptype: f[3].to_string(),
                src: src.parse().expect("src"),
                dst: dst.parse().expect("dst"),
                bytes: hex(f[5]),
            }
        })
        .collect()
}

fn parse(profile: WireProfile, opt: &[u8]) -> MpOption {
    assert_eq!(opt[0], 46);
    assert_eq!(usize::from(opt[1]), opt.len());
    MpOption::parse_in(&opt[2..], profile)
        .unwrap_or_else(|e| panic!("{profile}: {e} for {opt:02x?}"))
}

/// The captured MP options of frame `frame`, in wire order.
fn options_of(lines: &[Line], frame: u32) -> Vec<Vec<u8>> {
    lines
        .iter()
        .filter(|o| !o.pkt && o.frame == frame)
        .map(|o| o.bytes.clone())
        .collect()
}

/// The client's addresses in both captures are 10.0.x.1.
fn from_client(l: &Line) -> bool {
    l.src.octets()[3] == 1
}

fn roundtrip_all(profile: WireProfile, file: &str) -> usize {
    let lines = load(file);
    let mut n = 0;
    for l in lines.iter().filter(|l| !l.pkt) {
        let opt = parse(profile, &l.bytes);
        let again = opt.encode_in(profile).expect("emit");
        assert_eq!(
            again, l.bytes,
            "frame {} {:?} did not re-emit identical",
            l.frame, opt
        );
        n += 1;
    }
    n
}

#[test]
fn every_captured_option_reemits_byte_identical() {
    assert_eq!(
        roundtrip_all(WireProfile::ReferenceK510, "reference-k510.txt"),
        201
    );
    assert_eq!(
        roundtrip_all(WireProfile::ReferenceK414, "reference-k414.txt"),
        205
    );
}

/// Whole handshake/close packets: the checksum verifies over the captured
/// IPv4 pseudo-header (RFC 4340 §9), and the options area holds exactly
/// the captured MP options, each re-emitted identical in place.
/// `DccpRepr` speaks the reference layouts too: each captured packet
/// parses in its profile (checksum verified) with exactly the captured MP
/// options, keeps the profile, and re-emits (canonically: the kernel's
/// Padding between options is dropped) to bytes that parse back to the
/// same Repr.
#[test]
fn captured_packets_as_repr_in_their_profile() {
    for (profile, file) in [
        (WireProfile::ReferenceK510, "reference-k510.txt"),
        (WireProfile::ReferenceK414, "reference-k414.txt"),
    ] {
        let lines = load(file);
        for l in lines.iter().filter(|l| l.pkt) {
            let addrs = (IpAddr::V4(l.src), IpAddr::V4(l.dst));
            let (r, hl) = DccpRepr::parse_in(&l.bytes, Some(addrs), profile)
                .unwrap_or_else(|e| panic!("{file} frame {}: {e}", l.frame));
            assert_eq!(r.profile, profile);
            let mp: Vec<Vec<u8>> = r
                .options
                .iter()
                .filter_map(|o| match o {
                    DccpOption::Multipath(m) => Some(m.encode_in(profile).expect("emit")),
                    _ => None,
                })
                .collect();
            assert_eq!(mp, options_of(&lines, l.frame), "{file} frame {}", l.frame);
            let payload = &l.bytes[hl..];
            let mut again = vec![0u8; r.buffer_len(payload.len())];
            r.emit(&mut again, payload, Some(addrs)).expect("re-emit");
            let (r2, _) = DccpRepr::parse_in(&again, Some(addrs), profile).expect("parse back");
            assert_eq!(r2, r, "{file} frame {}", l.frame);
        }
    }
}

#[test]
fn captured_packets_checksum_and_options() {
    // k5.10 has one more: the client's first Ack with the third MP_KEY.
    for (profile, file, count) in [
        (WireProfile::ReferenceK510, "reference-k510.txt", 7),
        (WireProfile::ReferenceK414, "reference-k414.txt", 6),
    ] {
        let lines = load(file);
        let pkts: Vec<&Line> = lines.iter().filter(|l| l.pkt).collect();
        assert_eq!(pkts.len(), count, "{file}");
        for l in pkts {
            let p = Packet::new_checked(&l.bytes[..]).expect("valid packet");
            p.verify_checksum((IpAddr::V4(l.src), IpAddr::V4(l.dst)))
                .expect("checksum over the real addresses");
            assert_eq!(p.packet_type().name(), l.ptype);
            let mp: Vec<Vec<u8>> = p
                .options()
                .map(|o| o.expect("well-formed options"))
                .filter(|o| o.kind == 46)
                .map(|o| {
                    let opt = MpOption::parse_in(o.data, profile).expect("parse");
                    opt.encode_in(profile).expect("emit")
                })
                .collect();
            assert_eq!(mp, options_of(&lines, l.frame), "{file} frame {}", l.frame);
        }
    }
}

fn keys_of(lines: &[Line], profile: WireProfile) -> (PlainKeys, u32, u32) {
    let key = |ptype: &str| -> (u32, [u8; 8]) {
        let l = lines
            .iter()
            .find(|l| !l.pkt && l.ptype == ptype && l.bytes[2] == subtype::KEY)
            .expect("MP_KEY");
        match parse(profile, &l.bytes) {
            MpOption::Key { ci, keys } => (ci, keys[0].data.as_slice().try_into().expect("8")),
            o => panic!("{o:?}"),
        }
    };
    let (ci_c, client) = key("Request");
    let (ci_s, server) = key("Response");
    (PlainKeys { client, server }, ci_c, ci_s)
}

/// Checks every MP_JOIN, the HMAC after it, the Ack's HMAC, every
/// ADDADDR/REMOVEADDR HMAC and MP_CLOSE against the derivations.
fn check_derivations(profile: WireProfile, file: &str, keys: PlainKeys, ci_s: u32) -> [usize; 4] {
    let lines: Vec<Line> = load(file).into_iter().filter(|l| !l.pkt).collect();
    let opts: Vec<MpOption> = lines.iter().map(|l| parse(profile, &l.bytes)).collect();
    let join_id = profile.join_id(&keys, ci_s);
    let (mut nonce_c, mut nonce_s) = (None, None);
    let mut checked = [0usize; 4]; // join HMACs, addr HMACs, closes, joins
    for (i, (l, o)) in lines.iter().zip(&opts).enumerate() {
        let next_hmac = || match opts.get(i + 1) {
            Some(MpOption::Hmac(h)) if lines[i + 1].frame == l.frame => *h,
            other => panic!("frame {}: no MP_HMAC after {o:?}: {other:?}", l.frame),
        };
        match o {
            MpOption::Join { ci, nonce, .. } if l.ptype == "Request" => {
                assert_eq!(*ci, join_id, "frame {}: MP_JOIN names the server", l.frame);
                nonce_c = Some(*nonce);
                checked[3] += 1;
            }
            MpOption::Join { ci, nonce, .. } => {
                let (ci_c, _) = client_ci_and_server_ci(profile, &lines);
                assert_eq!(
                    *ci,
                    profile.join_response_id(&keys, ci_c),
                    "frame {}",
                    l.frame
                );
                nonce_s = Some(*nonce);
                let want =
                    profile.join_hmac(&keys, JoinHmac::Response, join_id, nonce_c.unwrap(), *nonce);
                assert_eq!(next_hmac(), want, "frame {} Response HMAC", l.frame);
                checked[0] += 1;
            }
            MpOption::Hmac(h) if l.ptype == "Ack" => {
                let want = profile.join_hmac(
                    &keys,
                    JoinHmac::Ack,
                    join_id,
                    nonce_c.unwrap(),
                    nonce_s.unwrap(),
                );
                assert_eq!(*h, want, "frame {} Ack HMAC", l.frame);
                checked[0] += 1;
            }
            MpOption::AddAddr { .. } | MpOption::RemoveAddr { .. } => {
                let want = profile
                    .addr_hmac(&keys, from_client(l), o)
                    .expect("addr option");
                assert_eq!(next_hmac(), want, "frame {} {o:?}", l.frame);
                checked[1] += 1;
            }
            MpOption::Close { key_data } => {
                assert_eq!(key_data[..], profile.close_key_data(&keys, from_client(l)));
                checked[2] += 1;
            }
            _ => {}
        }
    }
    checked
}

#[test]
fn k510_keys_tokens_and_hmacs_reproduce_the_capture() {
    let p = WireProfile::ReferenceK510;
    let lines = load("reference-k510.txt");
    let (keys, ci_c, ci_s) = keys_of(&lines, p);
    assert_eq!(keys.client, hex("32cb22070120ffa2")[..]);
    assert_eq!(keys.server, hex("95e93cf7bccb8569")[..]);
    assert_eq!((ci_c, ci_s), (0, 0), "k5.10 has no CI");
    // SHA-256(KeyS‖KeyC) starts fd d4 b1 64; the wire token is reversed.
    assert_eq!(reference_token(&keys.d_key_b()), 0x64b1_d4fd);
    // The third MP_KEY (client's first Ack) repeats both keys in order.
    let third = lines
        .iter()
        .find(|l| !l.pkt && l.ptype == "Ack" && l.bytes[2] == subtype::KEY)
        .expect("third MP_KEY");
    let both = MpOption::Key {
        ci: 0,
        keys: vec![
            MpKey::plain(u64::from_be_bytes(keys.client)),
            MpKey::plain(u64::from_be_bytes(keys.server)),
        ],
    };
    assert_eq!(parse(p, &third.bytes), both);
    assert!(p.third_key_message() && !p.key_has_ci() && !p.addr_nonce());
    // 2 join HMACs, ADDADDR + REMOVEADDR, 1 MP_CLOSE, 1 MP_JOIN Request.
    assert_eq!(
        check_derivations(p, "reference-k510.txt", keys, ci_s),
        [2, 2, 1, 1]
    );
}

#[test]
fn k414_cis_and_hmacs_reproduce_the_capture() {
    let p = WireProfile::ReferenceK414;
    let lines = load("reference-k414.txt");
    let (keys, ci_c, ci_s) = keys_of(&lines, p);
    assert_eq!(keys.client, hex("e8ae7f046957a0e9")[..]);
    assert_eq!((ci_c, ci_s), (0xf89c_c60c, 0x5392_02e7));
    // The Response's MP_JOIN names the client by its CI.
    let resp_join = lines
        .iter()
        .find(|l| !l.pkt && l.ptype == "Response" && l.bytes[2] == subtype::JOIN)
        .expect("join response");
    assert!(
        matches!(parse(p, &resp_join.bytes), MpOption::Join { ci, addr_id: 0, .. } if ci == ci_c)
    );
    // No third MP_KEY in k4.14.
    assert!(!lines
        .iter()
        .any(|l| l.ptype == "Ack" && !l.pkt && l.bytes[2] == subtype::KEY));
    assert_eq!(
        check_derivations(p, "reference-k414.txt", keys, ci_s),
        [2, 2, 1, 1]
    );
}

#[test]
fn reference_addaddr_is_byte_reversed_ipv4_without_nonce() {
    let wire = hex("2e0807030302000a");
    for p in [WireProfile::ReferenceK414, WireProfile::ReferenceK510] {
        let o = parse(p, &wire);
        assert_eq!(
            o,
            MpOption::AddAddr {
                addr_id: 3,
                nonce: None,
                addr: IpAddr::V4(Ipv4Addr::new(10, 0, 2, 3)),
                port: None
            }
        );
        assert_eq!(p.addr_hmac_message(&o).unwrap(), hex("030302000a0000"));
    }
    // RFC 9897 reads the same 5 bytes as the draft's nonce-less form with
    // the address as written: 3.2.0.10 — which is why a switch is needed.
    match MpOption::parse_in(&wire[2..], WireProfile::Rfc9897).unwrap() {
        MpOption::AddAddr { addr, .. } => assert_eq!(addr, IpAddr::V4(Ipv4Addr::new(3, 2, 0, 10))),
        o => panic!("{o:?}"),
    }
}

#[test]
fn profiles_refuse_fields_they_cannot_carry() {
    let key = MpOption::Key {
        ci: 7,
        keys: vec![MpKey::plain(1)],
    };
    assert_eq!(
        key.encode_in(WireProfile::ReferenceK510),
        Err(WireError::FieldOutOfRange)
    );
    assert_eq!(key.encode_in(WireProfile::ReferenceK414).unwrap().len(), 17);
    let add = MpOption::AddAddr {
        addr_id: 1,
        nonce: Some(9),
        addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: None,
    };
    for p in [WireProfile::ReferenceK414, WireProfile::ReferenceK510] {
        assert_eq!(add.encode_in(p), Err(WireError::FieldOutOfRange));
        let rm = MpOption::RemoveAddr {
            addr_id: 1,
            nonce: Some(1),
        };
        assert_eq!(rm.encode_in(p), Err(WireError::FieldOutOfRange));
    }
    assert_eq!(add.encode_in(WireProfile::Rfc9897).unwrap().len(), 12);
    assert_eq!(
        "reference-k4.14".parse::<WireProfile>(),
        Ok(WireProfile::ReferenceK414)
    );
    assert!("k4.14".parse::<WireProfile>().is_err());
}

/// Hostile input: every prefix and every single-byte mutation of every
/// captured option, under every profile, gives a value or an error, never
/// a panic; whatever parses re-emits to bytes that parse to the same value.
#[test]
fn truncated_and_mutated_options_never_panic() {
    let mut parsed = 0u32;
    for file in ["reference-k510.txt", "reference-k414.txt"] {
        for l in load(file).iter().filter(|l| !l.pkt) {
            let body = &l.bytes[2..];
            for p in WireProfile::ALL {
                let mut cases: Vec<Vec<u8>> = (0..body.len()).map(|n| body[..n].to_vec()).collect();
                for i in 0..body.len() {
                    for v in [0u8, 1, 0x2e, 0xff] {
                        let mut m = body.to_vec();
                        m[i] = v;
                        cases.push(m);
                    }
                }
                for c in cases {
                    if let Ok(o) = MpOption::parse_in(&c, p) {
                        parsed += 1;
                        if let Ok(b) = o.encode_in(p) {
                            assert_eq!(
                                MpOption::parse_in(&b[2..], p).as_ref(),
                                Ok(&o),
                                "{p} {c:02x?}"
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(parsed > 1000, "mutations mostly still parse: {parsed}");
    assert_eq!(HMAC_LEN, 20);
}

/// `../shared/reference-kernel` beside the checkout (or further up), as CI
/// has it. A failure when it is absent, with or without `CI`.
fn reference_dir() -> Option<std::path::PathBuf> {
    let found = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("shared/reference-kernel"))
        .find(|p| p.join("BUILD.md").is_file());
    if found.is_none() {
        // Never a silent pass: the reference shelf is part of the test setup.
        panic!("../shared/reference-kernel is missing");
    }
    found
}

/// Our capture reader finds, in the original pcapng files, exactly the
/// options the vector files list, frame by frame and path by path.
#[test]
fn capture_reader_finds_the_vendored_options_in_the_original_pcapng() {
    let Some(dir) = reference_dir() else { return };
    for (pcap, file, profile) in [
        (
            "mpdccp-2vm-session.pcapng",
            "reference-k510.txt",
            WireProfile::ReferenceK510,
        ),
        (
            "k4.14/mpdccp-k414-2vm-session.pcapng",
            "reference-k414.txt",
            WireProfile::ReferenceK414,
        ),
    ] {
        let bytes = std::fs::read(dir.join(pcap)).expect("capture");
        let pkts = capture::dccp_packets(&bytes).expect("readable capture");
        let mut found = Vec::new();
        for c in &pkts {
            let p = Packet::new_checked(&c.dccp[..]).expect("valid DCCP");
            p.verify_checksum((c.src, c.dst)).expect("checksum");
            for o in p.options() {
                let o = o.expect("well-formed option");
                if o.kind == 46 {
                    let mp = MpOption::parse_in(o.data, profile).expect("MP option");
                    found.push((c.frame as u32, mp.encode_in(profile).unwrap()));
                }
            }
        }
        let want: Vec<(u32, Vec<u8>)> = load(file)
            .into_iter()
            .filter(|l| !l.pkt)
            .map(|l| (l.frame, l.bytes))
            .collect();
        assert_eq!(found, want, "{pcap}");
        assert!(pkts.iter().any(|c| c.iface == 1), "path B is interface 1");
    }
}

/// The CIs of the two MP_KEYs (0 in k5.10).
fn client_ci_and_server_ci(profile: WireProfile, lines: &[Line]) -> (u32, u32) {
    let ci = |ptype: &str| {
        lines
            .iter()
            .filter(|l| l.ptype == ptype && l.bytes[2] == subtype::KEY)
            .find_map(|l| match parse(profile, &l.bytes) {
                MpOption::Key { ci, .. } => Some(ci),
                _ => None,
            })
            .expect("MP_KEY")
    };
    (ci("Request"), ci("Response"))
}

/// RFC 9897 §3.1, §3.2.2 (finding F2): the reference kernels exchange
/// Multipath Capable on their joins exactly as on the first subflow — the
/// Request `Change R(10) 0` (22 04 0a 00), the Response `Confirm L(10) 0 0`
/// (21 05 0a 00 00) — which is what our join Request and Response now
/// carry and what our server and client now require of a join
/// (`tests/proto/rfc9897/findings.rs::f2_*`).
#[test]
fn reference_joins_exchange_multipath_capable_as_the_first_subflow() {
    for file in ["reference-k510.txt", "reference-k414.txt"] {
        let lines = load(file);
        let mut seen = [[0; 2]; 2];
        for l in lines.iter().filter(|l| l.pkt) {
            let p = Packet::new_checked(&l.bytes[..]).expect("valid packet");
            let opts: Vec<(u8, Vec<u8>)> = p
                .options()
                .map(|o| o.expect("well-formed options"))
                .map(|o| (o.kind, o.data.to_vec()))
                .collect();
            let join = opts
                .iter()
                .any(|(k, d)| *k == 46 && d.first() == Some(&subtype::JOIN));
            let want: (u8, &[u8]) = match l.ptype.as_str() {
                "Request" => (34, &[10, 0]),
                "Response" => (33, &[10, 0, 0]),
                _ => continue,
            };
            let mpc: Vec<&(u8, Vec<u8>)> = opts
                .iter()
                .filter(|(k, d)| (32..=35).contains(k) && d.first() == Some(&10))
                .collect();
            assert_eq!(
                mpc,
                vec![&(want.0, want.1.to_vec())],
                "{file} frame {} ({}, join {join})",
                l.frame,
                l.ptype
            );
            seen[usize::from(join)][usize::from(want.0 == 33)] += 1;
        }
        // A Request and a Response each, on the first subflow and the join.
        assert_eq!(seen, [[1, 1], [1, 1]], "{file}");
    }
}
