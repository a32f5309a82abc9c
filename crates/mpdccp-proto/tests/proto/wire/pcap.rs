//! The pcap writer produces captures that stock tshark decodes as DCCP with
//! good checksums (`mpdccp demo --pcap`).
//!
//! Needs `tshark`. Without it the test fails when `CI` is set and prints a
//! skip notice otherwise.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;

use mpdccp_proto::wire::pcap::PcapWriter;
use mpdccp_proto::wire::{
    AckState, AckVectorBuilder, DccpKind, DccpOption, DccpRepr, FeatureNum, FeatureValue, Header,
    MpKey, MpOption, ResetCode,
};
use mpdccp_proto::Instant;

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn packets() -> Vec<(DccpRepr, Vec<u8>)> {
    let base = Header {
        src_port: 40_000,
        dst_port: 5_001,
        seq: 0x0000_1234_5678,
        ..Header::default()
    };
    let packet = |kind, options| DccpRepr::new(Header { kind, ..base }, options);
    let mut av = AckVectorBuilder::new(16);
    av.push_run(AckState::Received, 5);
    av.push_run(AckState::NotReceived, 2);
    av.push_run(AckState::Received, 70);
    let response = Header {
        src_port: 5_001,
        dst_port: 40_000,
        kind: DccpKind::Response {
            ack: 0x1234_5678,
            service_code: 0x4d50_4443,
        },
        ..base
    };
    let partly_covered = Header {
        kind: DccpKind::Data,
        cscov: 1,
        ..base
    };
    vec![
        (
            packet(
                DccpKind::Request {
                    service_code: 0x4d50_4443,
                },
                vec![
                    DccpOption::ChangeR {
                        feature: FeatureNum::MultipathCapable,
                        value: FeatureValue::ServerPriority(vec![0]),
                    },
                    DccpOption::ChangeL {
                        feature: FeatureNum::Ccid,
                        value: FeatureValue::ServerPriority(vec![2]),
                    },
                    DccpOption::Multipath(MpOption::Key {
                        ci: 0xdead_beef,
                        keys: vec![MpKey::plain(0x0102_0304_0506_0708)],
                    }),
                ],
            ),
            vec![],
        ),
        (
            DccpRepr::new(
                response,
                vec![DccpOption::ConfirmL {
                    feature: FeatureNum::MultipathCapable,
                    value: FeatureValue::ServerPriority(vec![0, 0]),
                }],
            ),
            vec![],
        ),
        (
            packet(
                DccpKind::Ack { ack: 77 },
                vec![DccpOption::AckVector(av.finish(0))],
            ),
            vec![],
        ),
        (
            packet(
                DccpKind::DataAck { ack: 78 },
                vec![DccpOption::Multipath(MpOption::Seq(0xabcd_ef01_2345))],
            ),
            vec![0x45; 100],
        ),
        (DccpRepr::new(partly_covered, vec![]), vec![7; 33]),
        (packet(DccpKind::CloseReq { ack: 5 }, vec![]), vec![]),
        (packet(DccpKind::Close { ack: 6 }, vec![]), vec![]),
        (
            packet(
                DccpKind::Reset {
                    ack: 7,
                    code: ResetCode::MpFastClose,
                    data: [1, 2, 3],
                },
                vec![DccpOption::Multipath(MpOption::FastClose {
                    key_data: vec![9; 8],
                })],
            ),
            vec![],
        ),
        (packet(DccpKind::Sync { ack: 8 }, vec![]), vec![]),
        (packet(DccpKind::SyncAck { ack: 9 }, vec![]), vec![]),
    ]
}

fn write_capture(path: &std::path::Path, v6: bool) -> Vec<&'static str> {
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2)),
        )
    };
    let mut w = PcapWriter::create(path).expect("create pcap");
    let mut names = Vec::new();
    for (i, (repr, payload)) in packets().iter().enumerate() {
        let mut buf = vec![0u8; repr.buffer_len(payload.len())];
        // Emit without a checksum: the writer must compute it itself.
        repr.emit(&mut buf, payload, None).expect("emit");
        w.write_dccp(Instant::from_micros(1_000 + i as u64 * 250), src, dst, &buf)
            .expect("write");
        names.push(repr.packet_type().name());
    }
    assert_eq!(w.packets(), names.len() as u64);
    w.flush().unwrap();
    names
}

fn run_tshark(path: &std::path::Path) -> Vec<(u8, String, String)> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "-o",
            "dccp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
        ])
        .args(["-T", "fields"])
        .args([
            "-e",
            "dccp.type",
            "-e",
            "dccp.checksum.status",
            "-e",
            "ip.checksum.status",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].parse().expect("dccp.type"),
                f.get(1).unwrap_or(&"").to_string(),
                f.get(2).unwrap_or(&"").to_string(),
            )
        })
        .collect()
}

fn check(v6: bool) {
    if !tshark_available() {
        panic!("tshark is required (apt-get install tshark)");
    }
    // One directory per test: the IPv4 and IPv6 tests run in parallel and
    // each removes its own directory when done.
    let dir = std::env::temp_dir().join(format!(
        "mpdccp-wire-pcap-{}-{}",
        std::process::id(),
        if v6 { "v6" } else { "v4" }
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(if v6 { "v6.pcap" } else { "v4.pcap" });
    let names = write_capture(&path, v6);
    let rows = run_tshark(&path);
    let want: Vec<u8> = packets()
        .iter()
        .map(|(r, _)| r.packet_type() as u8)
        .collect();
    assert_eq!(rows.len(), names.len(), "tshark saw {rows:?}");
    for (i, ((ty, status, ip_status), want_ty)) in rows.iter().zip(&want).enumerate() {
        assert_eq!(ty, want_ty, "packet {i} ({}) type", names[i]);
        // tshark prints checksum status as "1" (Good) or "Good" by version.
        assert!(
            status == "1" || status == "Good",
            "packet {i} ({}) checksum status {status:?}",
            names[i]
        );
        if !v6 {
            assert!(
                ip_status == "1" || ip_status == "Good",
                "packet {i} IPv4 header checksum {ip_status:?}"
            );
        }
    }
    if std::env::var_os("KEEP_PCAP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn tshark_decodes_ipv4_capture_with_good_checksums() {
    check(false);
}

#[test]
fn tshark_decodes_ipv6_capture_with_good_checksums() {
    check(true);
}
