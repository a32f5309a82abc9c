//! The performance goals for the real tunnel, each next to the figure of one
//! `mpdccp testbed --bench` run that it judges. A goal whose figure the
//! benchmark cannot produce yet says so (`met: null`) instead of passing.

use serde_json::{json, Value};

/// One figure against its goal.
struct Goal {
    figure: &'static str,
    value: Option<f64>,
    unit: &'static str,
    goal: &'static str,
    met: Option<bool>,
    basis: &'static str,
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn diff(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? - b?)
}

/// The figures the goals judge, from the report (`None`: not in it).
struct Figures {
    /// Tunnel / direct TCP rate, 1 and 4 streams.
    tcp1: Option<f64>,
    tcp4: Option<f64>,
    /// TCP retransmits through the tunnel, %: 1 stream, 4, 1 with ECN.
    retx1: Option<f64>,
    retx4: Option<f64>,
    retx_ecn: Option<f64>,
    /// UDP loss end to end and inside the tunnel, %.
    udp_loss: Option<f64>,
    udp_in_tunnel: Option<f64>,
    /// iperf3 sent at least 95 % of the offered UDP rate.
    udp_sent_enough: Option<bool>,
    /// Added RTT: idle p99 (µs) and under TCP load p50 (ms).
    idle_p99: Option<f64>,
    load_p50: Option<f64>,
}

impl Figures {
    fn of(report: &Value) -> Figures {
        let t = &report["tunnel_two_paths"];
        let d = &report["direct_one_veth"];
        Figures {
            tcp1: ratio(f(&t["tcp_mbps"]), f(&d["tcp_mbps"])),
            tcp4: ratio(f(&t["tcp_4_streams_mbps"]), f(&d["tcp_4_streams_mbps"])),
            retx1: f(&t["tcp_retransmit_percent"]),
            retx4: f(&t["tcp_4_streams_retransmit_percent"]),
            retx_ecn: f(&t["tcp_ecn_retransmit_percent"]),
            udp_loss: f(&t["udp_loss_percent"]),
            udp_in_tunnel: f(&t["udp_lost_in_tunnel_percent"]),
            // The UDP goals hold at 2 Gbit/s offered: a run whose iperf3
            // could not send 95 % of that (CPU) does not meet them,
            // whatever its loss; nor does a run offered less
            // (`MPDCCP_BENCH_UDP_MBPS`).
            udp_sent_enough: f(&t["udp_sent_mbps"])
                .zip(f(&t["udp_offered_mbps"]))
                .map(|(s, o)| s >= 0.95 * o && o >= 2000.0),
            // Added RTT: the tunnel's percentile minus the direct path's,
            // each from its own run (the direct path's own queue is not the
            // tunnel's doing).
            idle_p99: diff(
                f(&t["ping_rtt_ms_idle"]["p99"]),
                f(&d["ping_rtt_ms_idle"]["p99"]),
            )
            .map(|ms| ms * 1000.0),
            load_p50: diff(
                f(&t["ping_rtt_ms_under_tcp_load"]["p50"]),
                f(&d["ping_rtt_ms_under_tcp_load"]["p50"]),
            ),
        }
    }

    /// A UDP loss figure meets its goal: under 1 % with the rate offered.
    fn udp_met(&self, loss: Option<f64>) -> Option<bool> {
        loss.zip(self.udp_sent_enough).map(|(l, e)| l < 1.0 && e)
    }
}

fn at_least(v: Option<f64>, x: f64) -> Option<bool> {
    v.map(|v| v >= x)
}

fn at_most(v: Option<f64>, x: f64) -> Option<bool> {
    v.map(|v| v <= x)
}

/// The goals judged on `report` (the JSON of [`crate::bench::run`]).
pub fn judge(report: &Value) -> Value {
    let x = Figures::of(report);
    let goals = tcp_goals(&x).into_iter().chain(udp_and_latency_goals(&x));
    Value::Array(
        goals
            .map(|g| {
                json!({"figure": g.figure, "value": g.value, "unit": g.unit,
                       "goal": g.goal, "met": g.met, "basis": g.basis})
            })
            .collect(),
    )
}

/// Kernel TCP through the tunnel: rate against the direct path, and
/// retransmits.
fn tcp_goals(x: &Figures) -> [Goal; 5] {
    let Figures {
        tcp1,
        tcp4,
        retx1,
        retx4,
        retx_ecn,
        ..
    } = *x;
    [
    Goal {
        figure: "kernel TCP through the tunnel / directly, 1 stream",
        value: tcp1,
        unit: "x",
        goal: ">= 0.6",
        met: at_least(tcp1, 0.6),
        basis: "iperf3 received rate, same run",
    },
    Goal {
        figure: "kernel TCP through the tunnel / directly, 4 streams",
        value: tcp4,
        unit: "x",
        goal: ">= 0.6",
        met: at_least(tcp4, 0.6),
        basis: "iperf3 -P 4 received rate, same run",
    },
    Goal {
        figure: "TCP retransmits through the tunnel, 1 stream",
        value: retx1,
        unit: "% of segments",
        goal: "< 0.1",
        met: retx1.map(|v| v < 0.1),
        basis: "iperf3 retransmits / (bytes sent / MSS)",
    },
    Goal {
        figure: "TCP retransmits through the tunnel, 4 streams",
        value: retx4,
        unit: "% of segments",
        goal: "< 0.1",
        met: retx4.map(|v| v < 0.1),
        basis: "iperf3 retransmits / (bytes sent / MSS)",
    },
    Goal {
        figure: "TCP retransmits through the tunnel, 1 stream, ECN negotiated",
        value: retx_ecn,
        unit: "% of segments",
        goal: "< 0.1",
        met: retx_ecn.map(|v| v < 0.1),
        basis: "as above with net.ipv4.tcp_ecn = 1 at the sender (the AQM marks CE instead of dropping)",
    },
    ]
}

/// UDP loss at 2 Gbit/s, the RTT the tunnel adds, and core scaling.
fn udp_and_latency_goals(x: &Figures) -> [Goal; 5] {
    let Figures {
        udp_loss,
        udp_in_tunnel,
        idle_p99,
        load_p50,
        ..
    } = *x;
    [
    Goal {
        figure: "UDP 1200 B at 2 Gbit/s offered through the tunnel: loss",
        value: udp_loss,
        unit: "%",
        goal: "< 1",
        met: x.udp_met(udp_loss),
        basis: "iperf3 -u -w 4M lost_percent (end to end, the receiving iperf3's socket included); met only if iperf3 sent >= 95 % of the offered rate",
    },
    Goal {
        figure: "UDP 1200 B at 2 Gbit/s offered: lost inside the tunnel",
        value: udp_in_tunnel,
        unit: "%",
        goal: "< 1",
        met: x.udp_met(udp_in_tunnel),
        basis: "datagrams iperf3 sent that the server daemon never wrote to its TUN (client TUN queue, daemons, paths); met only if iperf3 sent >= 95 % of the offered rate",
    },
    Goal {
        figure: "added RTT at light load, p99",
        value: idle_p99,
        unit: "us",
        goal: "<= 50",
        met: at_most(idle_p99, 50.0),
        basis: "ping every 5 ms: tunnel p99 - direct p99 (the host's floor for any userspace relay: userspace_udp_echo_rtt_us)",
    },
    Goal {
        figure: "added RTT under a saturating TCP flow, p50",
        value: load_p50,
        unit: "ms",
        goal: "<= 1",
        met: at_most(load_p50, 1.0),
        basis: "ping every 10 ms during the 1-stream TCP run: tunnel p50 - direct p50",
    },
    Goal {
        figure: "1 -> 2 cores, several flows",
        value: None,
        unit: "x",
        goal: ">= 1.8",
        met: None,
        basis: "not measured by this one-client run (the client daemon is one thread); the server's workers: `mpdccp bench clients --clients 64 --workers 1` vs `--workers 2`",
    },
    ]
}

/// The goals as a table for a terminal.
pub fn table(goals: &Value) -> String {
    let mut out = String::from("figure | ours | goal | verdict\n---|---|---|---\n");
    for g in goals.as_array().into_iter().flatten() {
        let value = g["value"].as_f64().map_or("–".to_string(), |v| {
            format!("{v:.3} {}", g["unit"].as_str().unwrap_or(""))
        });
        let verdict = match g["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        out.push_str(&format!(
            "{} | {value} | {} | {verdict}\n",
            g["figure"].as_str().unwrap_or(""),
            g["goal"].as_str().unwrap_or("")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_are_judged_from_the_report_and_missing_figures_are_not_passed() {
        let report = json!({
            "direct_one_veth": {"tcp_mbps": 10000.0, "tcp_4_streams_mbps": 12000.0,
                "ping_rtt_ms_idle": {"p99": 0.10}, "ping_rtt_ms_under_tcp_load": {"p50": 0.2}},
            "tunnel_two_paths": {"tcp_mbps": 5000.0, "tcp_4_streams_mbps": 8000.0,
                "tcp_retransmit_percent": 0.05, "udp_loss_percent": 3.0, "udp_lost_in_tunnel_percent": 0.4,
                "udp_offered_mbps": 2000, "udp_sent_mbps": 1990.0,
                "ping_rtt_ms_idle": {"p99": 0.14}, "ping_rtt_ms_under_tcp_load": {"p50": 0.9}},
        });
        let g = judge(&report);
        let by = |name: &str| {
            g.as_array()
                .unwrap()
                .iter()
                .find(|x| x["figure"].as_str().unwrap().starts_with(name))
                .unwrap()
                .clone()
        };
        assert_eq!(
            by("kernel TCP through the tunnel / directly, 1")["value"],
            0.5
        );
        assert_eq!(
            by("kernel TCP through the tunnel / directly, 1")["met"],
            false
        );
        assert_eq!(
            by("kernel TCP through the tunnel / directly, 4")["met"],
            true
        );
        assert_eq!(by("TCP retransmits through the tunnel, 1")["met"], true);
        // No 4-stream retransmit figure in this report: not judged.
        assert_eq!(
            by("TCP retransmits through the tunnel, 4")["met"],
            Value::Null
        );
        assert_eq!(by("UDP")["met"], false);
        assert_eq!(
            by("UDP 1200 B at 2 Gbit/s offered: lost inside")["met"],
            true
        );
        // A sender that could not offer the rate meets no UDP goal.
        let mut slow = report.clone();
        slow["tunnel_two_paths"]["udp_sent_mbps"] = json!(340.0);
        let g2 = judge(&slow);
        let lost_inside = g2
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["figure"].as_str().unwrap().contains("lost inside"))
            .unwrap();
        assert_eq!(lost_inside["met"], false);
        // Nor does a run offered 1 Gbit/s (`MPDCCP_BENCH_UDP_MBPS`), all sent.
        let mut lower = report.clone();
        lower["tunnel_two_paths"]["udp_offered_mbps"] = json!(1000);
        lower["tunnel_two_paths"]["udp_sent_mbps"] = json!(1000.0);
        let g3 = judge(&lower);
        let lower_inside = g3
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["figure"].as_str().unwrap().contains("lost inside"))
            .unwrap();
        assert_eq!(lower_inside["met"], false);
        let p99 = by("added RTT at light load")["value"].as_f64().unwrap();
        assert!((p99 - 40.0).abs() < 1e-6, "{p99}");
        assert_eq!(by("added RTT under")["met"], true);
        assert_eq!(by("1 -> 2 cores")["met"], Value::Null);
        assert!(table(&g).contains("NOT met"));
    }
}
