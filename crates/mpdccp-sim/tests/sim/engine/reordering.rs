//! Aggregation for inner traffic that counts reordering as loss
//! (the simulator's SACK TCP: 3 duplicate acks, RFC 6675; QUIC's packet
//! threshold behaves alike): a bulk CUBIC flow through the tunnel over two
//! 20 Mbit/s paths, CCID2 on each. With `passive` reordering the flow gets
//! about one path's worth whatever the scheduler; `active-adaptive`, which
//! learns the reordering extent from arrivals, lets it aggregate, and with
//! ACPF (both the daemon's defaults since this issue) it reaches ≥ 90 % of
//! both paths, equal or 10 ms apart.

use mpdccp_model::scenario::Scenario;

/// Goodput of the inner flow from 5 s to 30 s, Mbit/s.
fn goodput(delay_b_ms: u32, scheduler: &str, reorder: &str) -> f64 {
    let toml = format!(
        r#"
name = "loss-sensitive"
duration_s = 30
seed = 1
[[path]]
name = "a"
delay_ms = 10
buffer_bytes = 100000
rate_mbps = 20
[[path]]
name = "b"
delay_ms = {delay_b_ms}
buffer_bytes = 100000
rate_mbps = 20
[tunnel]
cc = "ccid2"
scheduler = "{scheduler}"
reorder = "{reorder}"
[[flow]]
name = "app"
kind = "tcp"
# The RFC 6675 model this result is about (RACK tolerates the reordering).
loss_detection = "dupthresh"
cc = "cubic"
packet_bytes = 1300
via = "tunnel"
start_s = 1
[[window]]
name = "steady"
from_s = 5
to_s = 30
"#
    );
    let s = Scenario::from_toml_str(&toml).expect("valid scenario");
    let out = mpdccp_sim::run(&s, None, |_| {}).expect("simulation runs");
    out.summary.windows["steady"].flows[0].goodput_mbps
}

#[test]
fn active_adaptive_reordering_lets_a_loss_sensitive_flow_aggregate() {
    for delay_b in [10, 20] {
        let passive = goodput(delay_b, "cpf", "passive");
        let adaptive = goodput(delay_b, "cpf", "active-adaptive");
        let daemon = goodput(delay_b, "acpf", "active-adaptive");
        eprintln!(
            "paths 10/{delay_b} ms one-way, 2 x 20 Mbit/s, SACK CUBIC: cpf+passive {passive:.1} Mbit/s, \
             cpf+active-adaptive {adaptive:.1}, acpf+active-adaptive (daemon default) {daemon:.1}"
        );
        // Passive: about one path's worth (spurious fast retransmits).
        assert!(passive < 22.0, "passive {passive:.1}");
        assert!(adaptive > 1.3 * passive, "{adaptive:.1} vs {passive:.1}");
        assert!(
            daemon >= 0.9 * 40.0,
            "daemon defaults: {daemon:.1} Mbit/s of 40"
        );
    }
}
