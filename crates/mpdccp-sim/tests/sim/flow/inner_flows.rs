//! The inner flows through the engine: TCP with RACK-TLP (RFC 8985) or
//! RFC 6675 DupThresh loss detection, and the QUIC-like flow (RFC 9002).
//!
//! * alone on a clean 30 Mbit/s path, TCP-RACK and QUIC fill it;
//! * through a tunnel that sends packets round robin over two paths 10 and
//!   20 ms one-way and hands them on as they arrive (`reorder = "passive"`),
//!   the inner flow sees reordering by tens of packets: DupThresh TCP takes it for loss and
//!   collapses, RACK learns it (DSACK) and declares few spurious losses,
//!   and QUIC — packet threshold 3, as quinn and aioquic — is hit like
//!   DupThresh.

use mpdccp_model::scenario::Scenario;

fn run(toml: &str) -> mpdccp_sim::SimOutput {
    let s = Scenario::from_toml_str(toml).expect("valid scenario");
    mpdccp_sim::run(&s, None, |_| {}).expect("simulation runs")
}

fn flow_meta(out: &mpdccp_sim::SimOutput, key: &str) -> u64 {
    out.summary.meta["flows"][0][key]
        .as_u64()
        .unwrap_or_else(|| panic!("meta.flows[0].{key}"))
}

fn direct(kind: &str, extra: &str) -> String {
    format!(
        r#"
name = "direct"
duration_s = 20
[[path]]
name = "p"
delay_ms = 10
buffer_bytes = 150000
rate_mbps = 30
[[flow]]
name = "app"
kind = "{kind}"
packet_bytes = 1250
via = "p"
{extra}
[[window]]
name = "steady"
from_s = 5
to_s = 20
"#
    )
}

fn tunnel(kind: &str, extra: &str) -> String {
    format!(
        r#"
name = "reordering"
duration_s = 20
[[path]]
name = "a"
delay_ms = 10
buffer_bytes = 150000
rate_mbps = 20
[[path]]
name = "b"
delay_ms = 20
buffer_bytes = 150000
rate_mbps = 20
[tunnel]
cc = "ccid2"
scheduler = "rr"
reorder = "passive"
[[flow]]
name = "app"
kind = "{kind}"
packet_bytes = 1250
via = "tunnel"
start_s = 1
{extra}
[[window]]
name = "steady"
from_s = 5
to_s = 20
"#
    )
}

fn steady_mbps(out: &mpdccp_sim::SimOutput) -> f64 {
    out.summary.windows["steady"].flows[0].goodput_mbps
}

#[test]
fn rack_tcp_and_quic_fill_a_clean_path() {
    for (kind, extra) in [
        ("tcp", "cc = \"cubic\""),
        ("quic", ""),
        ("quic", "cc = \"cubic\""),
    ] {
        let out = run(&direct(kind, extra));
        let mbps = steady_mbps(&out);
        eprintln!("{kind} {extra}: {mbps:.1} Mbit/s on 30");
        assert!(mbps >= 27.0, "{kind} {extra}: {mbps:.1} Mbit/s");
    }
}

/// Spurious loss declarations plus unneeded retransmissions, per 1000
/// packets delivered.
fn spurious_per_mille(o: &mpdccp_sim::SimOutput, lost_key: &str) -> f64 {
    let n = flow_meta(o, lost_key) + flow_meta(o, "spurious_retransmitted_pkts");
    n as f64 * 1000.0 / o.summary.flows[0].delivered_pkts.max(1) as f64
}

#[test]
fn rack_declares_few_spurious_losses_where_dupthresh_and_quic_collapse() {
    let dup = run(&tunnel(
        "tcp",
        "cc = \"cubic\"\nloss_detection = \"dupthresh\"",
    ));
    let rack = run(&tunnel("tcp", "cc = \"cubic\""));
    let quic = run(&tunnel("quic", ""));
    let (d, r, q) = (
        spurious_per_mille(&dup, "tcp_spurious_lost_pkts"),
        spurious_per_mille(&rack, "tcp_spurious_lost_pkts"),
        spurious_per_mille(&quic, "quic_spurious_lost_pkts"),
    );
    let (dm, rm, qm) = (steady_mbps(&dup), steady_mbps(&rack), steady_mbps(&quic));
    eprintln!(
        "2 x 20 Mbit/s, 10/20 ms, rr + passive: dupthresh {dm:.1} Mbit/s ({d:.1} spurious ‰), \
         rack {rm:.1} ({r:.1} ‰, {} DSACKs), quic {qm:.1} ({q:.1} ‰)",
        flow_meta(&rack, "tcp_dsack_count"),
    );
    assert!(d > 5.0, "dupthresh {d:.1} ‰");
    assert!(r * 5.0 < d, "rack {r:.1} ‰ vs dupthresh {d:.1} ‰");
    assert!(rm >= 0.85 * 40.0, "rack {rm:.1} Mbit/s");
    assert!(dm < 0.5 * rm, "dupthresh {dm:.1} vs rack {rm:.1} Mbit/s");
    // QUIC's packet threshold of 3 (quinn, aioquic) is not RACK.
    assert!(q > d && qm < 0.5 * rm, "quic {qm:.1} Mbit/s, {q:.1} ‰");
}
