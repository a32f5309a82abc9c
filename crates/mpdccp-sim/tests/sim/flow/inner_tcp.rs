//! A one-path tunnel with a BBR-family controller (`ccid5`, `bbr3`) must
//! carry an inner TCP CUBIC flow about as fast as the path carries the same
//! flow directly. The return direction is what used to fail: the server's
//! subflow carries only the inner acks (small packets, application
//! limited), and a window sized from their byte rate over the MSS held it
//! to 6–8 packets per round trip, so the server's send queue refused most
//! acks and the inner TCP crawled at 6 of 40 Mbit/s.

use mpdccp_model::scenario::Scenario;
use mpdccp_sim::{run, SimOutput};

/// 40 Mbit/s, 12 ms one way, 150 kB buffer; inner TCP CUBIC for 20 s,
/// through a one-path tunnel with `cc` or (`cc = None`) directly on the path.
fn scenario(cc: Option<&str>) -> Scenario {
    let (tunnel, via) = match cc {
        Some(cc) => (
            format!("[tunnel]\ncc = \"{cc}\"\nmultipath = false\n"),
            "tunnel",
        ),
        None => (String::new(), "p1"),
    };
    Scenario::from_toml_str(&format!(
        r#"
name = "inner-tcp"
duration_s = 20
seed = 1

[[path]]
name = "p1"
delay_ms = 12
buffer_bytes = 150000
rate_mbps = 40

{tunnel}
[[flow]]
name = "tcp"
kind = "tcp"
cc = "cubic"
via = "{via}"

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

fn steady_goodput(v: &serde_json::Value) -> f64 {
    v["windows"]["steady"]["flows"][0]["goodput_mbps"]
        .as_f64()
        .expect("goodput")
}

#[test]
fn one_path_bbr_tunnels_carry_inner_tcp_as_the_path_does() {
    let direct = steady_goodput(&sim(&scenario(None)));
    assert!(direct > 38.0, "direct TCP {direct:.1} Mbit/s");
    for cc in ["ccid5", "bbr3"] {
        let v = sim(&scenario(Some(cc)));
        let tunnel = steady_goodput(&v);
        assert!(
            tunnel >= 0.9 * direct,
            "{cc}: {tunnel:.1} of {direct:.1} Mbit/s"
        );
        // The acks' direction refuses nothing (it refused ~7 000 in 30 s).
        let refused = v["meta"]["server_stats"]["send_queue_dropped_newest"]
            .as_u64()
            .expect("server counter");
        assert_eq!(refused, 0, "{cc}: server refused {refused} inner acks");
    }
}
