//! A QUIC-like inner flow (RFC 9002 packet threshold 3) over two
//! equal 30 Mbit/s paths (8 / 12 ms one-way, 150 kB) through a CCID2 tunnel
//! with ACPF. With `passive` reordering every loss the flow declares is
//! spurious (the 4 ms path difference reorders ~10 packets) and it stays
//! below one path's rate; `per-flow` restores MP_SEQ order within the flow
//! for at most the paths' delay difference and lets it use both paths.

use mpdccp_model::scenario::Scenario;

/// Goodput (Mbit/s) and spurious losses of the QUIC-like flow, 6–20 s.
fn quic(reorder: &str) -> (f64, u64) {
    let toml = format!(
        r#"
name = "quic-equal"
duration_s = 20
seed = 1
[[path]]
name = "a"
delay_ms = 8
buffer_bytes = 150000
rate_mbps = 30
[[path]]
name = "b"
delay_ms = 12
buffer_bytes = 150000
rate_mbps = 30
[tunnel]
cc = "ccid2"
scheduler = "acpf"
reorder = "{reorder}"
# The comparison as measured: without the queue-delay bound (the default
# since 2026-11-29), whose short queues let even passive reordering pass.
window_delay_bound = false
[[flow]]
name = "bulk"
kind = "quic"
packet_bytes = 1250
via = "tunnel"
[[window]]
name = "steady"
from_s = 6
to_s = 20
"#
    );
    let s = Scenario::from_toml_str(&toml).expect("valid scenario");
    let out = mpdccp_sim::run(&s, None, |_| {}).expect("simulation runs");
    let goodput = out.summary.windows["steady"].flows[0].goodput_mbps;
    let spurious = out.summary.meta["flows"][0]["quic_spurious_lost_pkts"]
        .as_u64()
        .expect("the QUIC flow's counters");
    (goodput, spurious)
}

#[test]
fn per_flow_reordering_lets_a_quic_like_flow_aggregate_two_equal_paths() {
    let (passive, passive_spurious) = quic("passive");
    let (per_flow, per_flow_spurious) = quic("per-flow");
    eprintln!(
        "2 x 30 Mbit/s, 8/12 ms: passive {passive:.1} Mbit/s ({passive_spurious} spurious losses), \
         per-flow {per_flow:.1} ({per_flow_spurious})"
    );
    // Passive: below one path (30), losses spurious.
    assert!(passive < 30.0, "passive {passive:.1}");
    assert!(passive_spurious > 100, "{passive_spurious}");
    // Per-flow: at least 0.8 of the 60 Mbit/s sum, a fraction of the
    // spurious losses.
    assert!(per_flow >= 0.8 * 60.0, "per-flow {per_flow:.1}");
    assert!(
        per_flow_spurious * 4 < passive_spurious,
        "{per_flow_spurious}"
    );
}

/// `asym` (40 Mbit/s 12 ms + 8 Mbit/s 35 ms) with the window
/// delay bound: whenever path a is at its bound ACPF detours a lone packet
/// of the QUIC-like flow to b, ~23 ms behind the flow's later packets on
/// a. `per-flow` used to hold only flows seen on two paths in the last
/// second, so the flow saw the reordering and its packet threshold called
/// the packet lost: 40 spurious losses, 34.4 Mbit/s (docs/AGGREGATION.md).
/// Held behind a gap that is likely its own, the flow keeps its order.
#[test]
fn a_one_path_flow_is_held_behind_its_own_lone_detour() {
    use mpdccp_sim::aggregation::{plan, Options};
    let v = |s: &str| vec![s.to_string()];
    let opts = Options {
        mixes: v("asym"),
        ccs: v("ccid2"),
        inners: v("quic"),
        duration_s: 60.0,
        sets: vec![("tunnel.window_delay_bound".to_string(), "true".to_string())],
        jobs: 1,
    };
    let jobs = plan(&opts).expect("the matrix plans");
    let job = jobs
        .iter()
        .find(|j| j.cc.is_some())
        .expect("the tunnel cell");
    let out = mpdccp_sim::run(&job.scenario, None, |_| {}).expect("simulation runs");
    let steady = &out.summary.windows["steady"].flows[0];
    let goodput = steady.goodput_mbps;
    let out_of_order = steady.out_of_order_pkts;
    let spurious = out.summary.meta["flows"][0]["quic_spurious_lost_pkts"]
        .as_u64()
        .expect("the QUIC flow's counters");
    eprintln!(
        "asym/quic/ccid2, bound: {goodput:.1} Mbit/s, {out_of_order} delivered out of order, \
         {spurious} spurious losses"
    );
    // What the hold prevents is reordering in the steady window (4 of
    // the run's 47 out-of-order deliveries fall there with today's
    // defaults, the rest in the first seconds, before the flow's stride is
    // learnt; 30 in the whole run before the hold). The spurious losses
    // (47, of which 6 were retransmitted; 20 and 37 with the 5 ms CoDel
    // target and the link target of min_rtt / 4) include RFC 9002's time
    // threshold: a detour's 80–90 ms RTT exceeds 9/8 of the flow's
    // smoothed RTT even when the packet arrives in order.
    assert!(
        out_of_order <= 10,
        "{out_of_order} out of order in the steady window"
    );
    assert!(goodput >= 36.0, "{goodput:.1} Mbit/s (34.4 before)");
}

/// `asym`/tcp-bbr/ccid2, 60 s, steady goodput with the opt-in
/// `equalise_tcp_delay` on or off.
fn asym_bbr(equalise: bool) -> f64 {
    use mpdccp_sim::aggregation::{plan, Options};
    let v = |s: &str| vec![s.to_string()];
    let opts = Options {
        mixes: v("asym"),
        ccs: v("ccid2"),
        inners: v("tcp-bbr"),
        duration_s: 60.0,
        sets: vec![(
            "tunnel.equalise_tcp_delay".to_string(),
            equalise.to_string(),
        )],
        jobs: 1,
    };
    let jobs = plan(&opts).expect("the matrix plans");
    let job = jobs
        .iter()
        .find(|j| j.cc.is_some())
        .expect("the tunnel cell");
    let out = mpdccp_sim::run(&job.scenario, None, |_| {}).expect("simulation runs");
    out.summary.windows["steady"].flows[0].goodput_mbps
}

/// An inner BBR on `asym` (40 + 8 Mbit/s, 12 / 35 ms) keeps to the fast
/// path: a detour to the slow one reads to it as less bandwidth, because
/// the receiver holds its fast-path packets behind the slow path's (two
/// RTTs). Delivered at the slower path's base delay (one RTT) it keeps
/// both: 38.2 → 45.3 Mbit/s, over the issue's 0.85 × the 48 Mbit/s sum
/// (docs/AGGREGATION.md "One RTT for a loss-free TCP flow").
#[test]
fn equalising_a_spread_tcp_flow_lets_an_inner_bbr_keep_the_slower_path() {
    let off = asym_bbr(false);
    let on = asym_bbr(true);
    eprintln!("asym/tcp-bbr/ccid2: {off:.1} Mbit/s, equalised {on:.1}");
    assert!(off < 40.0, "without it the fast path's rate: {off:.1}");
    assert!(on >= 0.85 * 48.0, "equalised: {on:.1}");
}

/// The simulator's inner TCP segments read as TCP to the core: over two
/// lossy paths with the tunnel's own repair off, every segment the inner
/// sender retransmits reaches the receiving tunnel end, whose `per-flow`
/// reorderer counts a data segment that does not advance its flow's TCP
/// sequence number (`inner_tcp_resent`, parsed from the IPv4 Total Length,
/// TCP Sequence Number and Data Offset the simulator's packets carry) —
/// as many as the inner sender resent, less the few lost again, plus the
/// originals that arrive after their gap was given up.
#[test]
fn the_receiver_counts_the_simulated_inner_tcps_retransmissions() {
    let toml = r#"
name = "tcp-resent"
duration_s = 20
seed = 3
[[path]]
name = "a"
delay_ms = 10
buffer_bytes = 100000
rate_mbps = 20
loss = 0.005
[[path]]
name = "b"
delay_ms = 15
buffer_bytes = 100000
rate_mbps = 20
loss = 0.005
[tunnel]
cc = "ccid2"
reorder = "per-flow"
retransmit_lost = false
[[flow]]
name = "bulk"
kind = "tcp"
cc = "cubic"
via = "tunnel"
"#;
    let s = Scenario::from_toml_str(toml).expect("valid scenario");
    let out = mpdccp_sim::run(&s, None, |_| {}).expect("simulation runs");
    let meta = &out.summary.meta;
    let retransmitted = meta["flows"][0]["tcp_retransmitted_pkts"]
        .as_u64()
        .expect("the TCP flow's counters");
    let resent = |side: &str| {
        meta[side]["inner_tcp_resent"]
            .as_u64()
            .expect("the reorder counters")
    };
    let (up, down) = (resent("server_reorder"), resent("client_reorder"));
    eprintln!(
        "inner TCP retransmitted {retransmitted}; counted at the server {up}, at the client {down}"
    );
    // 0.5 % of ~35 000 segments each way: about 175 losses.
    assert!(retransmitted >= 50, "{retransmitted}");
    let diff = up.abs_diff(retransmitted) as f64;
    assert!(
        diff <= 0.1 * retransmitted as f64 + 3.0,
        "counted {up} of {retransmitted} retransmissions"
    );
    // The return direction carries the inner flow's pure acks only.
    assert_eq!(down, 0);
}
