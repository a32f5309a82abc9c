//! `mpdccp demo --pcap`: the capture decodes in stock tshark as DCCP with
//! good checksums and carries the Multipath option (46).

use std::process::Command;

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn demo_writes_a_pcap_that_tshark_decodes() {
    let dir = std::env::temp_dir().join(format!("mpdccp-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("demo.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["demo", "--json", "--pcap"])
        .arg(&pcap)
        .output()
        .expect("run mpdccp demo");
    assert!(
        out.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["delivered_client_to_server"], 200);
    assert_eq!(summary["delivered_server_to_client"], 200);
    assert_eq!(summary["addaddr_confirmed"], true);
    assert_eq!(summary["server_close_reason"], "closed by peer");
    let datagrams = summary["datagrams"].as_u64().unwrap();
    assert!(datagrams > 400);

    if !tshark_available() {
        panic!("tshark is required (apt-get install tshark)");
    }
    let t = Command::new("tshark")
        .args(["-n", "-o", "dccp.check_checksum:TRUE", "-r"])
        .arg(&pcap)
        .args([
            "-T",
            "fields",
            "-E",
            "separator=;",
            "-e",
            "ip.src",
            "-e",
            "dccp.type",
            "-e",
            "dccp.checksum.status",
            "-e",
            "dccp.option_type",
        ])
        .output()
        .expect("run tshark");
    assert!(
        t.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&t.stderr)
    );
    let text = String::from_utf8_lossy(&t.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(';').collect()).collect();
    assert_eq!(rows.len() as u64, datagrams, "one DCCP packet per datagram");
    let mut types = std::collections::BTreeSet::new();
    let mut with_mp = 0;
    let mut srcs = std::collections::BTreeSet::new();
    for r in &rows {
        assert_eq!(r.len(), 4, "{r:?}");
        srcs.insert(r[0].to_string());
        types.insert(r[1].parse::<u8>().expect("a DCCP type"));
        // Wireshark's checksum status: 1 = Good.
        assert_eq!(r[2], "1", "bad checksum in {r:?}");
        if r[3].split(',').any(|o| o == "46") {
            with_mp += 1;
        }
    }
    // Request, Response, Ack, DataAck, Close and Reset all appear.
    for ty in [0u8, 1, 3, 4, 6, 7] {
        assert!(types.contains(&ty), "type {ty} missing: {types:?}");
    }
    // Two paths × two directions = four source addresses.
    assert_eq!(srcs.len(), 4, "{srcs:?}");
    // Every data packet carries MP_SEQ, so most packets have option 46.
    assert!(with_mp >= 400, "{with_mp} packets with the MP option");
    let _ = std::fs::remove_dir_all(&dir);
}
