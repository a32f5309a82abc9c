//! Engine-level behaviour: determinism, exact delay/loss accounting on the
//! links, and the inner TCP over a path.

use mpdccp_model::scenario::Scenario;
use mpdccp_sim::{run, SimOutput};

fn scenario(toml: &str) -> Scenario {
    Scenario::from_toml_str(toml).expect("valid scenario")
}

fn sim(s: &Scenario, seed: Option<u64>) -> SimOutput {
    run(s, seed, |_| {}).expect("simulation runs")
}

const LOSSY_MIX: &str = r#"
name = "mix"
duration_s = 10
seed = 7

[[path]]
name = "p1"
delay_ms = 5
buffer_bytes = 60000
loss = 0.02
rate = [{ at_s = 0, mbps = 20 }, { at_s = 4, mbps = 8 }]

[[flow]]
name = "udp"
kind = "udp-cbr"
rate_mbps = 3
packet_bytes = 1000
via = "p1"

[[flow]]
name = "tcp"
kind = "tcp"
cc = "reno"
packet_bytes = 1400
via = "p1"
start_s = 0.5

[[window]]
name = "late"
from_s = 5
to_s = 10
"#;

#[test]
fn same_seed_gives_byte_identical_summary_and_another_seed_does_not() {
    let s = scenario(LOSSY_MIX);
    let a = sim(&s, None).summary.to_json();
    let b = sim(&s, None).summary.to_json();
    assert_eq!(a, b, "same scenario and seed must give the same bytes");
    let c = sim(&s, Some(8)).summary.to_json();
    assert_ne!(a, c, "a different seed must change random losses");
}

#[test]
fn cbr_over_a_clean_path_arrives_complete_after_delay_plus_serialization() {
    let s = scenario(
        r#"
name = "clean"
duration_s = 5
[[path]]
name = "p1"
delay_ms = 5
buffer_bytes = 100000
rate = [{ at_s = 0, mbps = 10 }]
[[flow]]
name = "udp"
kind = "udp-cbr"
rate_mbps = 4
packet_bytes = 1000
via = "p1"
stop_s = 3
"#,
    );
    let out = sim(&s, None);
    let f = &out.summary.flows[0];
    // 4 Mbit/s of 1000 B for 3 s = 1500 packets, none lost.
    assert_eq!(f.sent_pkts, 1500);
    assert_eq!(f.delivered_pkts, 1500);
    assert_eq!(f.lost_pkts, 0);
    assert_eq!(f.out_of_order_pkts, 0);
    // 5 ms propagation + 1000 B at 10 Mbit/s = 0.8 ms, for every packet
    // (4 < 10 Mbit/s: never a queue).
    for v in [f.owd_ms.p50, f.owd_ms.p99, f.owd_ms.max] {
        assert!(
            (v - 5.8).abs() < 0.01,
            "owd {v} ms, expected 5.8 ms: {:?}",
            f.owd_ms
        );
    }
    let p = &out.summary.paths[0];
    assert!(p.queue_delay_ms.max < 0.01, "{:?}", p.queue_delay_ms);
}

#[test]
fn cbr_loss_matches_the_link_random_losses() {
    let s = scenario(
        r#"
name = "lossy"
duration_s = 12
seed = 3
[[path]]
name = "p1"
delay_ms = 5
buffer_bytes = 100000
loss = 0.05
rate = [{ at_s = 0, mbps = 10 }]
[[flow]]
name = "udp"
kind = "udp-cbr"
rate_mbps = 2
packet_bytes = 500
via = "p1"
stop_s = 10
"#,
    );
    let out = sim(&s, None);
    let f = &out.summary.flows[0];
    let p = &out.summary.paths[0];
    assert_eq!(f.sent_pkts, 5000);
    assert_eq!(f.delivered_pkts + f.lost_pkts, f.sent_pkts);
    assert_eq!(f.lost_pkts, p.lost_pkts, "sink loss equals link drops");
    // 5 % of 5000 = 250 ± 4σ (σ ≈ 15.4).
    assert!((188..=312).contains(&f.lost_pkts), "lost {}", f.lost_pkts);
}

#[test]
fn inner_reno_over_one_path_reaches_90_percent_of_the_link() {
    let s = scenario(
        r#"
name = "reno"
duration_s = 20
[[path]]
name = "p1"
delay_ms = 10
buffer_bytes = 100000
rate = [{ at_s = 0, mbps = 20 }]
[[flow]]
name = "tcp"
kind = "tcp"
cc = "reno"
packet_bytes = 1400
via = "p1"
[[window]]
name = "steady"
from_s = 2
to_s = 20
"#,
    );
    let out = sim(&s, None);
    let w = &out.summary.windows["steady"].flows[0];
    assert!(
        w.goodput_mbps >= 18.0,
        "reno goodput {} Mbit/s of 20",
        w.goodput_mbps
    );
    // A drop-tail buffer of 100 kB is ≈ 1.2 BDP: Reno fills it, so the
    // path's queueing delay reaches most of 100 kB / 20 Mbit/s = 40 ms.
    let p = &out.summary.windows["steady"].paths[0];
    assert!(p.queue_delay_ms.max > 30.0, "{:?}", p.queue_delay_ms);
}

const TUNNEL_TWO_PATHS: &str = r#"
name = "tunnel"
duration_s = 6
seed = 5
[[path]]
name = "p1"
delay_ms = 5
buffer_bytes = 150000
rate = [{ at_s = 0, mbps = 10 }]
priority = 3
[[path]]
name = "p2"
delay_ms = 15
buffer_bytes = 150000
loss = 0.01
rate = [{ at_s = 0, mbps = 10 }]
priority = 3
[tunnel]
cc = "ccid2"
scheduler = "rr"
reorder = "active-fixed"
reorder_timeout_ms = 30
[[flow]]
name = "udp"
kind = "udp-cbr"
rate_mbps = 4
packet_bytes = 1200
via = "tunnel"
stop_s = 5
"#;

#[test]
fn udp_through_the_tunnel_is_delivered_and_deterministic() {
    let s = scenario(TUNNEL_TWO_PATHS);
    let out = sim(&s, None);
    let f = &out.summary.flows[0];
    // Round robin over both paths; p2 loses 1 % and the tunnel does not
    // retransmit (unreliable DCCP), so about 0.5 % of packets are lost.
    assert!(f.sent_pkts > 2000, "{f:?}");
    assert_eq!(f.delivered_pkts + f.lost_pkts, f.sent_pkts, "{f:?}");
    let loss = f.lost_pkts as f64 / f.sent_pkts as f64;
    assert!(loss < 0.02, "loss {loss}");
    // Both paths carried tunnel traffic.
    for (i, series) in out.tunnel_series.iter().enumerate() {
        assert!(series.iter().sum::<u64>() > 100_000, "path {i} unused");
    }
    // Every tunnelled data packet's wait in the send queue is measured once;
    // at 4 of 20 Mbit/s it rarely waits long.
    let sq = &out.summary.send_queue_delay_ms;
    assert!(sq.samples >= f.delivered_pkts, "{sq:?}");
    assert!(sq.p50 < 5.0, "{sq:?}");
    // One-way delay is at least the faster path's propagation delay.
    assert!(f.owd_ms.min >= 5.0, "{:?}", f.owd_ms);
    let again = sim(&s, None);
    assert_eq!(out.summary.to_json(), again.summary.to_json());
}

/// A `bulk` flow due at t = 0, before the one-path tunnel is established,
/// must start when it is (it used to send nothing for the whole run).
#[test]
fn bulk_flow_due_before_the_tunnel_is_up_starts_when_it_is() {
    for (cc, multipath) in [("ccid2", true), ("ccid2", false), ("ccid5", true)] {
        let s = scenario(&format!(
            r#"
name = "bulk-at-zero"
duration_s = 3
seed = 1

[[path]]
name = "p1"
delay_ms = 10
buffer_bytes = 60000
rate_mbps = 10

[tunnel]
cc = "{cc}"
multipath = {multipath}

[[flow]]
name = "bulk"
kind = "bulk"
packet_bytes = 1200
via = "tunnel"
start_s = 0
"#
        ));
        let out = sim(&s, None);
        let f = &out.summary.flows[0];
        // 10 Mbit/s for ~2.9 s after a 40 ms handshake; slow start costs
        // well under a second, so more than half the link's capacity.
        assert!(
            f.goodput_mbps > 5.0 && f.delivered_pkts > 1500,
            "{cc} multipath={multipath}: {f:?}"
        );
    }
}

/// summary.json's `meta.client_stats` / `meta.server_stats` are the core's
/// `ConnStats` as JSON objects: every counter a number, and the
/// counters agree across the tunnel (the server delivers what arrives of
/// what the client sent on a clean path: all of it).
#[test]
fn tunnel_stats_in_meta_are_json_objects_of_counters() {
    let s = scenario(
        r#"
name = "stats"
duration_s = 3
[[path]]
name = "p1"
delay_ms = 10
rate_mbps = 20
buffer_bytes = 100000
[[flow]]
name = "app"
kind = "udp-cbr"
rate_mbps = 2
packet_bytes = 1000
via = "tunnel"
"#,
    );
    let out = sim(&s, None);
    let client = &out.summary.meta["client_stats"];
    let server = &out.summary.meta["server_stats"];
    let client = client.as_object().expect("client_stats is an object");
    assert!(client.len() > 40, "{} counters", client.len());
    assert!(client.values().all(|v| v.is_u64()), "{client:?}");
    let sent = client["tx_data_pkts"].as_u64().unwrap();
    // 2 Mbit/s of 1000-byte packets for 3 s.
    assert!((700..=750).contains(&sent), "{sent}");
    let delivered = server["delivered_pkts"].as_u64().unwrap();
    // Only what is still in flight at the end is missing.
    assert!(sent - delivered <= 5, "sent {sent}, delivered {delivered}");
    assert_eq!(client["rx_malformed"], 0);
}
