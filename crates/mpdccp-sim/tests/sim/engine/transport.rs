//! The scenario key `transport`: per path, how the
//! tunnel's DCCP packets travel, and so how many bytes each costs on the
//! link — outer IPv4 (20) plus RFC 6773's UDP header (8) for `udp`,
//! nothing more for native `dccp` and for `udccp` (the DCCP header is
//! rearranged into the UDP header). On a saturated link the tunnelled
//! goodput differs by exactly that: per packet, payload / bytes on the link.

use mpdccp_model::scenario::{PathTransport, Scenario};
use mpdccp_sim::{run, SimOutput};

/// One 10 Mbit/s path carrying a bulk flow of 300-byte packets through the
/// tunnel (small packets make the 8 bytes visible: ~2 %).
fn scenario(transport: Option<&str>) -> Scenario {
    let key = transport.map_or(String::new(), |t| format!("transport = \"{t}\"\n"));
    Scenario::from_toml_str(&format!(
        r#"
name = "transport-overhead"
duration_s = 20
seed = 3

[[path]]
name = "p1"
delay_ms = 10
buffer_bytes = 60000
rate_mbps = 10
priority = 3
{key}
[tunnel]
cc = "ccid2"
multipath = false

[[flow]]
name = "bulk"
kind = "bulk"
packet_bytes = 300
via = "tunnel"

[[window]]
name = "steady"
from_s = 5
to_s = 20
"#
    ))
    .expect("valid scenario")
}

fn sim(s: &Scenario) -> serde_json::Value {
    let out: SimOutput = run(s, None, |_| {}).expect("simulation runs");
    serde_json::to_value(&out.summary).unwrap()
}

fn goodput(v: &serde_json::Value) -> f64 {
    v["flows"][0]["goodput_mbps"].as_f64().expect("goodput")
}

#[test]
fn the_key_parses_and_unset_keeps_the_old_accounting() {
    let s = scenario(Some("udccp"));
    assert_eq!(s.path[0].transport, Some(PathTransport::UDccp));
    assert_eq!(PathTransport::Udp.outer_bytes(), 28);
    assert_eq!(PathTransport::Dccp.outer_bytes(), 20);
    assert_eq!(PathTransport::UDccp.outer_bytes(), 20);
    assert!(Scenario::from_toml_str(
        &toml::to_string(&scenario(None))
            .unwrap()
            .replace("priority = 3", "priority = 3\ntransport = \"u-dccp\"")
    )
    .is_err());
    // Unset: no transport in the summary, and the link carries DCCP only.
    let v = sim(&scenario(None));
    assert!(
        v["meta"]["paths"][0].get("transport").is_none(),
        "{}",
        v["meta"]["paths"]
    );
}

#[test]
fn udccp_and_native_dccp_cost_the_same_and_udp_8_bytes_more_per_packet() {
    let (udp, dccp, udccp) = (
        sim(&scenario(Some("udp"))),
        sim(&scenario(Some("dccp"))),
        sim(&scenario(Some("udccp"))),
    );
    assert_eq!(udccp["meta"]["paths"][0]["transport"], "udccp");
    assert_eq!(udccp["meta"]["paths"][0]["outer_bytes_per_pkt"], 20);
    assert_eq!(udp["meta"]["paths"][0]["outer_bytes_per_pkt"], 28);
    // Same bytes on the link per packet: the same run, packet for packet.
    assert_eq!(udccp["flows"], dccp["flows"]);
    assert_eq!(udccp["paths"], dccp["paths"]);
    // The link is saturated in both: goodput = rate × payload / (bytes per
    // packet on the link). The tunnel's own link bytes give the mean DCCP
    // packet length L per data packet; the ratio must be (L+28)/(L+20).
    let (gu, gd) = (goodput(&udp), goodput(&udccp));
    let pkts = |v: &serde_json::Value| v["flows"][0]["delivered_pkts"].as_f64().unwrap();
    let link_mbps = |v: &serde_json::Value| v["meta"]["paths"][0]["tunnel_mbps"].as_f64().unwrap();
    // Bytes per delivered packet on the link, acks included, minus the outer bytes.
    let dur = 20.0;
    let l_udccp = link_mbps(&udccp) * 1e6 / 8.0 * dur / pkts(&udccp) - 20.0;
    let predicted = (l_udccp + 28.0) / (l_udccp + 20.0);
    let measured = gd / gu;
    eprintln!(
        "goodput: udccp {gd:.3} Mbit/s, udp {gu:.3} Mbit/s, ratio {measured:.4}, predicted {predicted:.4} (L = {l_udccp:.1} B)"
    );
    assert!(gd > gu, "U-DCCP carries more: {gd} vs {gu}");
    assert!(
        (measured - predicted).abs() < 0.003,
        "measured {measured:.4} vs predicted {predicted:.4}"
    );
}
