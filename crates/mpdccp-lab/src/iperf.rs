//! iperf3 runs between the client's and the server's namespace, as the
//! benchmark and the tunnel tests make them: a one-shot server (`-s -1`),
//! the client's JSON report (`-J`).

use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::topo::Topology;

/// Runs `iperf3 -c dst -p port -J ARGS…` in the client's namespace against a
/// one-shot server bound to `dst` in the server's; returns the client's
/// report. The server is kept in `t.procs` (stopped with the topology if
/// the run fails).
pub fn run(t: &mut Topology, dst: &str, port: u16, args: &[&str]) -> anyhow::Result<Value> {
    let port_s = port.to_string();
    let srv = t
        .server
        .spawn("iperf3", &["-s", "-1", "-B", dst, "-p", &port_s])?;
    t.procs.push(srv);
    // iperf3 has no readiness signal; 0.3 s covers its start on a busy host.
    std::thread::sleep(Duration::from_millis(300));
    // A hard bound (coreutils `timeout`): an iperf3 client whose control
    // connection stalls inside a broken tunnel waits forever otherwise
    // (seen once with wireguard-go spinning at 94 % CPU): the run's `-t`
    // plus 20 s, then SIGTERM, SIGKILL 2 s later.
    let secs = args
        .iter()
        .position(|a| *a == "-t")
        .and_then(|i| args.get(i + 1)?.parse::<f64>().ok())
        .unwrap_or(10.0);
    let bound = format!("{}", (secs + 20.0).ceil() as u64);
    let mut full = vec!["-k", "2", &bound, "iperf3", "-c", dst, "-p", &port_s, "-J"];
    full.extend_from_slice(args);
    let out = t
        .client
        .output("timeout", &full)
        .with_context(|| format!("iperf3 to {dst}:{port} (bounded at {bound} s)"))?;
    let v: Value = serde_json::from_str(&out).context("iperf3 JSON")?;
    // Let the one-shot server exit before the next run on the port.
    std::thread::sleep(Duration::from_millis(300));
    Ok(v)
}

/// Bits per second the receiver got: `sum_received` (TCP; UDP with
/// iperf3 >= 3.12), else the sender's `sum` less the reported loss.
pub fn received_bps(v: &Value) -> Option<f64> {
    let end = &v["end"];
    end["sum_received"]["bits_per_second"].as_f64().or_else(|| {
        let lost = end["sum"]["lost_percent"].as_f64().unwrap_or(0.0);
        Some(end["sum"]["bits_per_second"].as_f64()? * (1.0 - lost / 100.0))
    })
}

/// The same in Mbit/s, 0 when the report has neither.
pub fn received_mbps(v: &Value) -> f64 {
    received_bps(v).unwrap_or(0.0) / 1e6
}

/// UDP datagrams lost, percent of those sent (`sum.lost_percent`).
pub fn udp_lost_percent(v: &Value) -> Option<f64> {
    v["end"]["sum"]["lost_percent"].as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn received_rate_prefers_the_receivers_sum_and_else_discounts_loss() {
        let tcp = json!({"end": {"sum_received": {"bits_per_second": 2e9},
                                 "sum": {"bits_per_second": 3e9}}});
        assert_eq!(received_bps(&tcp), Some(2e9));
        let old_udp = json!({"end": {"sum": {"bits_per_second": 1e9, "lost_percent": 25.0}}});
        assert_eq!(received_bps(&old_udp), Some(0.75e9));
        assert_eq!(received_mbps(&json!({})), 0.0);
        assert_eq!(udp_lost_percent(&old_udp), Some(25.0));
    }
}
