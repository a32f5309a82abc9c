//! The Lua dissector `tools/wireshark/mpdccp.lua` decodes RFC 9897 option
//! 46 as our encoder writes it.
//!
//! tshark runs the script over (1) the `mpdccp demo --pcap` capture and
//! (2) hand-built packets carrying every sub-option, natively, in UDP
//! (RFC 6773) and as U-DCCP. Every decoded field, per frame and in order, is
//! compared with what `mpdccp_proto::wire` parses from the same bytes.
//!
//! Needs `tshark`. Without it the test fails when `CI` is set and prints a
//! skip notice otherwise.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use mpdccp_proto::wire::mp::KeyType;
use mpdccp_proto::wire::pcap::PcapWriter;
use mpdccp_proto::wire::{
    checksum, udccp, udp_encap, DccpKind, DccpOption, DccpRepr, FeatureNum, FeatureValue, Header,
    MpKey, MpOption, ResetCode, RttType,
};
use mpdccp_proto::Instant;

/// The fields compared, as tshark names them.
const FIELDS: [&str; 30] = [
    "mpdccp.type",
    "mpdccp.seq",
    "mpdccp.mp.subtype",
    "mpdccp.mp.key.ci",
    "mpdccp.mp.key.type",
    "mpdccp.mp.key.data",
    "mpdccp.mp.join.addr_id",
    "mpdccp.mp.join.ci",
    "mpdccp.mp.join.nonce",
    "mpdccp.mp.seq",
    "mpdccp.mp.hmac",
    "mpdccp.mp.rtt.type",
    "mpdccp.mp.rtt.value",
    "mpdccp.mp.rtt.age",
    "mpdccp.mp.addaddr.id",
    "mpdccp.mp.addaddr.nonce",
    "mpdccp.mp.addaddr.ipv4",
    "mpdccp.mp.addaddr.ipv6",
    "mpdccp.mp.addaddr.port",
    "mpdccp.mp.removeaddr.id",
    "mpdccp.mp.removeaddr.nonce",
    "mpdccp.mp.prio",
    "mpdccp.mp.close.key",
    "mpdccp.mp.fast_close.key",
    "mpdccp.mp.exp.data",
    "mpdccp.mp.confirm.items",
    "mpdccp.mp_capable.version",
    "mpdccp.reset_code",
    "mpdccp.srcport",
    "mpdccp.encap",
];

fn tshark_available() -> bool {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    // Never a silent pass: without tshark the test fails (.ci/run installs it).
    assert!(ok, "tshark is required (apt-get install tshark)");
    ok
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/mpdccp.lua")
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpdccp-lua-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// tshark's decode of `pcap`: one row per frame (matching `filter`, if
/// any), one column per field, repeated occurrences joined by ','.
fn tshark_query(pcap: &Path, prefs: &[&str], filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-X")
        .arg(format!("lua_script:{}", script().display()));
    for p in prefs {
        cmd.args(["-o", p]);
    }
    cmd.arg("-r").arg(pcap);
    if !filter.is_empty() {
        cmd.args(["-Y", filter]);
    }
    cmd.args([
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark: {err}");
    assert!(
        !err.contains("Lua: Error") && !err.contains("lua_script"),
        "the script failed to load: {err}"
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn tshark_rows(pcap: &Path, prefs: &[&str]) -> Vec<Vec<String>> {
    tshark_query(pcap, prefs, "", &FIELDS)
}

/// Expected columns for one DCCP packet, from our own parser.
#[derive(Default)]
struct Expect {
    cols: Vec<Vec<String>>,
}

impl Expect {
    fn new() -> Self {
        Expect {
            cols: vec![Vec::new(); FIELDS.len()],
        }
    }
    fn push(&mut self, field: &str, v: impl ToString) {
        let i = FIELDS.iter().position(|f| *f == field).expect(field);
        self.cols[i].push(v.to_string());
    }
    fn row(self) -> Vec<String> {
        self.cols.into_iter().map(|c| c.join(",")).collect()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn expect_mp(e: &mut Expect, o: &MpOption) {
    e.push("mpdccp.mp.subtype", o.subtype());
    match o {
        MpOption::Confirm(items) => {
            for i in items {
                expect_mp(e, i);
            }
            e.push("mpdccp.mp.confirm.items", items.len());
        }
        MpOption::Join { addr_id, ci, nonce } => {
            e.push("mpdccp.mp.join.addr_id", addr_id);
            e.push("mpdccp.mp.join.ci", format!("0x{ci:08x}"));
            e.push("mpdccp.mp.join.nonce", format!("0x{nonce:08x}"));
        }
        MpOption::FastClose { key_data } => e.push("mpdccp.mp.fast_close.key", hex(key_data)),
        MpOption::Key { ci, keys } => {
            e.push("mpdccp.mp.key.ci", format!("0x{ci:08x}"));
            for k in keys {
                e.push("mpdccp.mp.key.type", k.key_type.to_u8());
                e.push("mpdccp.mp.key.data", hex(&k.data));
            }
        }
        MpOption::Seq(s) => e.push("mpdccp.mp.seq", s),
        MpOption::Hmac(h) => e.push("mpdccp.mp.hmac", hex(h)),
        MpOption::Rtt {
            rtt_type,
            rtt_ms,
            age_ms,
        } => {
            e.push("mpdccp.mp.rtt.type", rtt_type.to_u8());
            e.push("mpdccp.mp.rtt.value", rtt_ms);
            e.push("mpdccp.mp.rtt.age", age_ms);
        }
        MpOption::AddAddr {
            addr_id,
            nonce,
            addr,
            port,
        } => {
            e.push("mpdccp.mp.addaddr.id", addr_id);
            if let Some(n) = nonce {
                e.push("mpdccp.mp.addaddr.nonce", format!("0x{n:08x}"));
            }
            match addr {
                IpAddr::V4(a) => e.push("mpdccp.mp.addaddr.ipv4", a),
                IpAddr::V6(a) => e.push("mpdccp.mp.addaddr.ipv6", a),
            }
            if let Some(p) = port {
                e.push("mpdccp.mp.addaddr.port", p);
            }
        }
        MpOption::RemoveAddr { addr_id, nonce } => {
            e.push("mpdccp.mp.removeaddr.id", addr_id);
            if let Some(n) = nonce {
                e.push("mpdccp.mp.removeaddr.nonce", format!("0x{n:08x}"));
            }
        }
        MpOption::Prio(p) => e.push("mpdccp.mp.prio", p),
        MpOption::Close { key_data } => e.push("mpdccp.mp.close.key", hex(key_data)),
        MpOption::Exp(d) => e.push("mpdccp.mp.exp.data", hex(d)),
    }
}

/// What the dissector must show for one DCCP packet.
fn expect_packet(dccp: &[u8], encap: &str) -> Vec<String> {
    let (repr, _) = DccpRepr::parse(dccp, None).expect("our own packet parses");
    let mut e = Expect::new();
    e.push("mpdccp.type", repr.packet_type() as u8);
    e.push("mpdccp.seq", repr.header.seq);
    e.push("mpdccp.srcport", repr.header.src_port);
    e.push("mpdccp.encap", encap);
    if let DccpKind::Reset { code, .. } = repr.header.kind {
        e.push("mpdccp.reset_code", code.to_u8());
    }
    for o in &repr.options {
        match o {
            DccpOption::Multipath(m) => expect_mp(&mut e, m),
            DccpOption::ChangeL { feature, value }
            | DccpOption::ConfirmL { feature, value }
            | DccpOption::ChangeR { feature, value }
            | DccpOption::ConfirmR { feature, value }
                if *feature == FeatureNum::MultipathCapable =>
            {
                let bytes: Vec<u8> = match value {
                    FeatureValue::ServerPriority(l) | FeatureValue::Unknown(l) => l.clone(),
                    FeatureValue::NonNegotiable(v) => vec![*v as u8],
                    FeatureValue::Empty => vec![],
                };
                for b in bytes {
                    e.push("mpdccp.mp_capable.version", b >> 4);
                }
            }
            _ => {}
        }
    }
    e.row()
}

/// Records of a LINKTYPE_RAW classic pcap written by `PcapWriter`.
fn pcap_records(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], &0xa1b2_c3d4u32.to_le_bytes());
    let mut out = Vec::new();
    let mut p = 24;
    while p + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[p + 8..p + 12].try_into().unwrap()) as usize;
        out.push(b[p + 16..p + 16 + incl].to_vec());
        p += 16 + incl;
    }
    out
}

fn compare(rows: &[Vec<String>], expected: &[Vec<String>]) {
    assert_eq!(rows.len(), expected.len(), "one decoded row per frame");
    for (n, (got, want)) in rows.iter().zip(expected).enumerate() {
        for (i, f) in FIELDS.iter().enumerate() {
            let g = got.get(i).map(String::as_str).unwrap_or("");
            assert_eq!(g, want[i], "frame {}: field {f}", n + 1);
        }
    }
}

/// Counts how many frames show a non-empty `field`.
fn frames_with(rows: &[Vec<String>], field: &str) -> usize {
    let i = FIELDS.iter().position(|f| *f == field).unwrap();
    rows.iter()
        .filter(|r| r.get(i).is_some_and(|v| !v.is_empty()))
        .count()
}

/// The demo's capture in one transport's form, with the rows tshark must
/// show (from our own parser of the DCCP packet inside each frame).
fn demo_capture(transport: &str) -> (PathBuf, Vec<Vec<String>>) {
    let dir = tmpdir(&format!("demo-{transport}"));
    let pcap = dir.join("demo.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["demo", "--json", "--transport", transport, "--pcap"])
        .arg(&pcap)
        .output()
        .expect("run mpdccp demo");
    assert!(out.status.success());
    let expected: Vec<Vec<String>> = pcap_records(&pcap)
        .iter()
        .map(|ip| {
            assert_eq!(ip[0] >> 4, 4, "the demo writes IPv4");
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let seg = &ip[ihl..];
            match transport {
                "dccp" => {
                    assert_eq!(ip[9], 33);
                    expect_packet(seg, "native DCCP")
                }
                "udp" => {
                    assert_eq!(ip[9], 17);
                    expect_packet(&seg[8..], "DCCP-in-UDP (RFC 6773)")
                }
                _ => {
                    assert_eq!(ip[9], 17);
                    // Our restoration, checked against the IP addresses.
                    let a = |o: usize| {
                        IpAddr::V4(Ipv4Addr::new(ip[o], ip[o + 1], ip[o + 2], ip[o + 3]))
                    };
                    let mut d = vec![0u8; seg.len()];
                    let n = udccp::decode(seg, &mut d, Some((a(12), a(16)))).unwrap();
                    assert_eq!(n, seg.len(), "U-DCCP: DCCP length = UDP length");
                    expect_packet(&d[..n], "U-DCCP")
                }
            }
        })
        .collect();
    (pcap, expected)
}

#[test]
fn lua_dissector_decodes_the_demo_capture_of_each_transport() {
    if !tshark_available() {
        return;
    }
    for (transport, prefs) in [
        ("dccp", vec![]),
        ("udp", vec!["mpdccp.udp_port:6511"]),
        ("udccp", vec!["mpdccp.udccp_port:4242"]),
    ] {
        let (pcap, expected) = demo_capture(transport);
        let rows = tshark_rows(&pcap, &prefs);
        compare(&rows, &expected);
        // The capture exercises what the issue names: keys and CI, joins,
        // HMACs, MP_SEQ, MP_RTT, ADDADDR with nonce, MP_CONFIRM, MP_CLOSE.
        for f in [
            "mpdccp.mp.key.ci",
            "mpdccp.mp.key.data",
            "mpdccp.mp.join.nonce",
            "mpdccp.mp.hmac",
            "mpdccp.mp.seq",
            "mpdccp.mp.rtt.value",
            "mpdccp.mp.addaddr.ipv4",
            "mpdccp.mp.addaddr.nonce",
            "mpdccp.mp.confirm.items",
            "mpdccp.mp.close.key",
            "mpdccp.mp_capable.version",
        ] {
            assert!(frames_with(&rows, f) > 0, "{transport}: no frame shows {f}");
        }
        // 200 tunnelled packets each way, each in a DataAck with MP_SEQ.
        assert!(frames_with(&rows, "mpdccp.mp.seq") >= 400, "{transport}");
        if transport == "udccp" {
            // Ports from the UDP header, = the DCCP ports (4242).
            let i = FIELDS.iter().position(|f| *f == "mpdccp.srcport").unwrap();
            assert!(rows.iter().all(|r| r[i] == "4242"), "{transport}");
        }
        let _ = std::fs::remove_dir_all(pcap.parent().unwrap());
    }
}

/// Every sub-option and field, hand-built with our encoder.
fn all_suboption_packets() -> Vec<DccpRepr> {
    let base = DccpRepr {
        header: Header {
            src_port: 40_001,
            dst_port: 5_001,
            seq: 0x0000_8765_4321,
            ..Header::default()
        },
        ..DccpRepr::default()
    };
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 23));
    let v6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 7, 0, 0, 0, 0, 0x42));
    let with = |kind: DccpKind, options: Vec<DccpOption>| DccpRepr {
        header: Header {
            kind,
            ..base.header
        },
        options,
        ..base.clone()
    };
    let mp = DccpOption::Multipath;
    vec![
        with(
            DccpKind::Request {
                service_code: 0x4d50_4443,
            },
            vec![
                DccpOption::ChangeR {
                    feature: FeatureNum::MultipathCapable,
                    value: FeatureValue::ServerPriority(vec![0x10, 0x00]),
                },
                mp(MpOption::Key {
                    ci: 0xc1c2_c3c4,
                    keys: vec![
                        MpKey::plain(0x0102_0304_0506_0708),
                        MpKey {
                            key_type: KeyType::Experimental,
                            data: (0..64).collect(),
                        },
                    ],
                }),
            ],
        ),
        with(
            DccpKind::Response {
                ack: 0x1234,
                service_code: 0x4d50_4443,
            },
            vec![
                DccpOption::ConfirmL {
                    feature: FeatureNum::MultipathCapable,
                    value: FeatureValue::ServerPriority(vec![0, 0]),
                },
                mp(MpOption::Join {
                    addr_id: 3,
                    ci: 0xa0a1_a2a3,
                    nonce: 0xfeed_f00d,
                }),
                mp(MpOption::Hmac(*b"0123456789abcdefghij")),
            ],
        ),
        with(
            DccpKind::DataAck { ack: 77 },
            vec![
                mp(MpOption::Seq(0xffff_ffff_fffe)),
                mp(MpOption::Rtt {
                    rtt_type: RttType::Smoothed,
                    rtt_ms: 41,
                    age_ms: 1_500,
                }),
                mp(MpOption::AddAddr {
                    addr_id: 9,
                    nonce: Some(0x0bad_cafe),
                    addr: v6,
                    port: Some(4_433),
                }),
                mp(MpOption::Hmac([0xab; 20])),
                mp(MpOption::Prio(2)),
                mp(MpOption::Exp(vec![1, 2, 3, 4, 5])),
            ],
        ),
        with(
            DccpKind::Ack { ack: 78 },
            vec![
                mp(MpOption::Seq(5)),
                mp(MpOption::AddAddr {
                    addr_id: 4,
                    nonce: Some(7),
                    addr: v4,
                    port: None,
                }),
                mp(MpOption::Hmac([0xcd; 20])),
                mp(MpOption::RemoveAddr {
                    addr_id: 2,
                    nonce: Some(0x1357_9bdf),
                }),
                mp(MpOption::Hmac([0xef; 20])),
                mp(MpOption::Confirm(vec![
                    MpOption::Seq(12),
                    MpOption::AddAddr {
                        addr_id: 6,
                        nonce: Some(0x2468_ace0),
                        addr: v4,
                        port: Some(80),
                    },
                    MpOption::Seq(11),
                    MpOption::Prio(15),
                    MpOption::Seq(10),
                    MpOption::RemoveAddr {
                        addr_id: 5,
                        nonce: Some(99),
                    },
                ])),
            ],
        ),
        with(
            DccpKind::Close { ack: 79 },
            vec![mp(MpOption::Close {
                key_data: vec![9, 8, 7, 6, 5, 4, 3, 2],
            })],
        ),
        with(
            DccpKind::Reset {
                ack: 80,
                code: ResetCode::MpFastClose,
                data: [0; 3],
            },
            vec![mp(MpOption::FastClose {
                key_data: vec![0x11; 8],
            })],
        ),
    ]
}

fn ipv4_udp(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    h[8] = 64;
    h[9] = udp_encap::IPPROTO_UDP;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let c = checksum::internet_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(udp);
    h
}

/// DCCP (X=1) → U-DCCP with our converter (`wire::udccp`, Figure 5 of
/// the draft: octets 5-6 UDP Length, 7-8 UDP checksum, octet 9 Type (high
/// nibble) | CCVal, octet 10 Data Offset).
fn to_udccp(dccp: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut u = vec![0u8; dccp.len()];
    let n = udccp::encode(dccp, &mut u, Some((IpAddr::V4(src), IpAddr::V4(dst)))).unwrap();
    assert_eq!(n, dccp.len(), "U-DCCP adds no byte");
    u
}

#[test]
fn lua_dissector_decodes_every_suboption_natively_in_udp_and_as_udccp() {
    if !tshark_available() {
        return;
    }
    let (src, dst) = (Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 1, 0, 2));
    let addrs = (IpAddr::V4(src), IpAddr::V4(dst));
    let udccp_port: u16 = 5_555;
    let dir = tmpdir("all");
    let pcap = dir.join("all.pcap");
    let mut w = PcapWriter::create(&pcap).unwrap();
    let mut expected = Vec::new();
    let mut t = 0u64;
    let mut udccp_frames = Vec::new();
    for repr in all_suboption_packets() {
        let payload: &[u8] = if repr.packet_type().carries_data() {
            b"payload"
        } else {
            b""
        };
        let mut dccp = vec![0u8; repr.buffer_len(payload.len())];
        let n = repr.emit(&mut dccp, payload, Some(addrs)).unwrap();
        dccp.truncate(n);
        // 1. Native DCCP over IPv4.
        t += 1_000_000;
        w.write_dccp(Instant::from_nanos(t), addrs.0, addrs.1, &dccp)
            .unwrap();
        expected.push(expect_packet(&dccp, "native DCCP"));
        // 2. RFC 6773: UDP port 6511 around the whole packet.
        let mut udp = vec![0u8; 8 + dccp.len()];
        udp[8..].copy_from_slice(&dccp);
        udp_encap::frame(&mut udp, dccp.len(), 7_000, udp_encap::DCCP_UDP_PORT, None).unwrap();
        t += 1_000_000;
        w.write_ip(Instant::from_nanos(t), &ipv4_udp(src, dst, &udp))
            .unwrap();
        expected.push(expect_packet(&dccp, "DCCP-in-UDP (RFC 6773)"));
        // 3. U-DCCP: the DCCP ports become the UDP ports.
        let mut as_dccp = dccp.clone();
        as_dccp[2..4].copy_from_slice(&udccp_port.to_be_bytes());
        let u = to_udccp(&as_dccp, src, dst);
        t += 1_000_000;
        w.write_ip(Instant::from_nanos(t), &ipv4_udp(src, dst, &u))
            .unwrap();
        expected.push(expect_packet(&as_dccp, "U-DCCP"));
        udccp_frames.push(expected.len() - 1);
    }
    w.flush().unwrap();
    drop(w);
    let port_pref = format!("mpdccp.udccp_port:{udccp_port}");
    let rows = tshark_rows(&pcap, &[&port_pref]);
    compare(&rows, &expected);
    // Every field of the list appears somewhere: nothing compared vacuously.
    for f in FIELDS {
        assert!(frames_with(&rows, f) > 0, "no frame shows {f}");
    }
    // The Telekom module's nibble order reads Type from the low nibble
    // (here CCVal = 0, so every U-DCCP packet would look like a Request).
    let rows = tshark_rows(&pcap, &[&port_pref, "mpdccp.udccp_ref_nibbles:TRUE"]);
    for &i in &udccp_frames {
        assert_eq!(
            rows[i][0],
            "0",
            "frame {}: type under the module's order",
            i + 1
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The reference kernel captures (shared shelf; `MPDCCP_REFERENCE_KERNEL`
/// overrides). `None` (a skip) outside CI when they are absent.
fn reference_dir() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        std::env::var_os("MPDCCP_REFERENCE_KERNEL").map(PathBuf::from),
        Some(repo.join("../shared/reference-kernel")),
        Some(repo.join("../../shared/reference-kernel")),
    ];
    let found = candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("mpdccp-2vm-session.pcapng").is_file());
    if found.is_none() {
        panic!("the reference kernel's captures (../shared/reference-kernel) are required");
    }
    found
}

/// The reference kernel's captures use pre-RFC layouts (docs/INTEROP.md,
/// "What does not interoperate yet"). The RFC layout decodes k4.14's MP_KEY (reserved, CI, key) as is
/// and flags k5.10's (no CI) as malformed; the reference-layout preferences
/// decode k5.10's keys and the byte-reversed IPv4 of MP_ADDADDR.
#[test]
fn lua_dissector_reads_the_reference_kernel_captures() {
    if !tshark_available() {
        return;
    }
    let Some(dir) = reference_dir() else { return };
    let k414 = dir.join("k4.14/mpdccp-k414-2vm-session.pcapng");
    let k510 = dir.join("mpdccp-2vm-session.pcapng");
    let fields = [
        "mpdccp.mp.key.ci",
        "mpdccp.mp.key.data",
        "mpdccp.mp.join.ci",
        "mpdccp.mp.join.nonce",
        "mpdccp.mp.close.key",
        "mpdccp.mp.addaddr.ipv4",
        "_ws.expert.message",
    ];
    let q = |pcap: &Path, prefs: &[&str], filter: &str| tshark_query(pcap, prefs, filter, &fields);
    let reversed = "mpdccp.ref_addaddr_v4_reversed:TRUE";
    let k510_keys = "mpdccp.key_layout:2";

    // k4.14, RFC layout (values in docs/INTEROP.md).
    let req = q(&k414, &[], "mpdccp.type == 0 && mpdccp.mp.key.ci");
    assert_eq!(req[0][..2], ["0xf89cc60c", "e8ae7f046957a0e9"]);
    let resp = q(&k414, &[], "mpdccp.type == 1 && mpdccp.mp.key.ci");
    assert_eq!(resp[0][..2], ["0x539202e7", "65657abd5aae542b"]);
    let join = q(&k414, &[], "mpdccp.type == 0 && mpdccp.mp.join.ci");
    assert_eq!(join[0][2..4], ["0x539202e7", "0xd3206b88"]);
    let close = q(&k414, &[], "mpdccp.mp.close.key");
    assert_eq!(close[0][4], "65657abd5aae542b", "MP_CLOSE carries KeyS");
    // Nothing malformed under the RFC layout; only pre-RFC notes.
    for r in q(&k414, &[], "mpdccp.type && _ws.expert.message") {
        for m in r[6].split(',') {
            assert!(m.contains("pre-RFC layout"), "k4.14: {m}");
        }
    }
    let adds = q(&k414, &[reversed], "mpdccp.mp.addaddr.ipv4");
    assert!(adds.iter().all(|r| r[5] == "10.0.2.3"), "{adds:?}");
    let adds = q(&k414, &[], "mpdccp.mp.addaddr.ipv4");
    assert!(adds.iter().all(|r| r[5] == "3.2.0.10"), "{adds:?}");

    // k5.10: the RFC layout cannot delimit its MP_KEY (no CI)...
    let bad = q(&k510, &[], "mpdccp.mp.subtype == 3");
    assert_eq!(bad.len(), 3);
    assert!(bad.iter().all(|r| r[6].contains("is reserved")), "{bad:?}");
    // ...the k5.10 layout reads its keys (third MP_KEY with both).
    let keys = q(&k510, &[k510_keys], "mpdccp.mp.subtype == 3");
    let data: Vec<&str> = keys.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(
        data,
        [
            "32cb22070120ffa2",
            "95e93cf7bccb8569",
            "32cb22070120ffa2,95e93cf7bccb8569"
        ]
    );
    let close = q(&k510, &[k510_keys], "mpdccp.mp.close.key");
    assert_eq!(close[0][4], "95e93cf7bccb8569");
    let join = q(&k510, &[k510_keys], "mpdccp.type == 0 && mpdccp.mp.join.ci");
    assert_eq!(join[0][2..4], ["0x64b1d4fd", "0x81620cf9"]);
}
