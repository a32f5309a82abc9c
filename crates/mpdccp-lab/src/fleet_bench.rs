//! `mpdccp testbed --fleet-bench`: does the gateway fleet scale? In one
//! run, on the fleet of `crate::fleet`, the aggregate kernel TCP (iperf3,
//! downstream: the Internet host sends to every client at once) through
//! one gateway, then through three:
//!
//! 1. only g1 serves; the clients connect and settle there; measure;
//! 2. the clients close, g2 and g3 start and the router learns the
//!    service address over all three; the clients connect again, spread by
//!    the router's L4 hash (a client on a gateway with two more clients
//!    than another is restarted, on new ports, up to a few times); measure.
//!
//! Each phase records the aggregate and per-gateway Gbit/s, each gateway
//! daemon's CPU seconds (`/proc/PID/stat`) and its CPU per Gbit/s, and
//! the client daemons' CPU. On a machine with fewer cores than the fleet
//! and its clients need, the ratio of the aggregates cannot reach the
//! gateways' count; each host's CPU per Gbit/s (the same at one host and
//! at three) is then what shows that hosts add capacity.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::bench::cpu_s;
use crate::fleet::{inner, FleetLab, INTERNET};
use crate::iperf::received_bps;
use crate::topo::wait_for;

const GATEWAYS: usize = 3;
/// The clients' iperf3 servers on the router: this port + k.
const IPERF_BASE_PORT: u16 = 5300;
/// Restarts allowed to even out the clients per gateway.
const REBALANCE_TRIES: usize = 12;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs the benchmark with `clients` two-path clients, `secs` seconds of
/// iperf3 per phase; its files go to `dir` (removed first).
pub fn run(
    exe: &Path,
    dir: &Path,
    clients: usize,
    secs: u32,
    abort: &AtomicBool,
) -> anyhow::Result<Value> {
    anyhow::ensure!((1..=150).contains(&clients), "1..=150 clients");
    let load_before = loadavg();
    let mut lab = FleetLab::build(exe, dir, GATEWAYS, clients)?;
    lab.start_gateway(1)?;
    wait_for(Duration::from_secs(20), || lab.service_via(&[1]))
        .context("the router did not learn the service address from g1")?;
    for k in 1..=clients {
        lab.start_client(k)?;
    }
    let owners = lab.wait_settled(Duration::from_secs(60))?;
    check_abort(abort)?;
    let one = measure(&lab, &owners, secs, 1)?;
    check_abort(abort)?;
    lab.stop_clients();
    for i in 2..=GATEWAYS {
        lab.start_gateway(i)?;
    }
    let all: Vec<usize> = (1..=GATEWAYS).collect();
    wait_for(Duration::from_secs(20), || lab.service_via(&all))
        .context("the router did not learn the service address from every gateway")?;
    for k in 1..=clients {
        lab.start_client(k)?;
    }
    let owners = rebalance(&mut lab, abort)?;
    let three = measure(&lab, &owners, secs, GATEWAYS)?;
    let ratio = aggregate(&three) / aggregate(&one).max(1e-9);
    Ok(json!({
        "clients": clients,
        "secs_per_phase": secs,
        "direction": "downstream (iperf3 -R: the Internet host sends)",
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "load_average_before": load_before,
        "load_average_after": loadavg(),
        "phases": [one, three],
        "ratio_three_to_one": ratio,
        "cpu_per_gbps_ratio_three_to_one": mean_cpu_per_gbps(&three) / mean_cpu_per_gbps(&one).max(1e-9),
    }))
}

fn check_abort(abort: &AtomicBool) -> anyhow::Result<()> {
    if abort.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

/// Clients per gateway 1..=GATEWAYS.
fn spread(owners: &BTreeMap<usize, usize>) -> Vec<usize> {
    (1..=GATEWAYS)
        .map(|i| owners.values().filter(|&&o| o == i).count())
        .collect()
}

/// Waits for the clients to settle; while a gateway holds two clients
/// more than another, restarts one of its clients (new ports, so a new
/// hash at the router).
fn rebalance(lab: &mut FleetLab, abort: &AtomicBool) -> anyhow::Result<BTreeMap<usize, usize>> {
    let mut owners = lab.wait_settled(Duration::from_secs(60))?;
    for _ in 0..REBALANCE_TRIES {
        check_abort(abort)?;
        let s = spread(&owners);
        let (max, min) = (s.iter().max().copied(), s.iter().min().copied());
        let (Some(max), Some(min)) = (max, min) else {
            break;
        };
        if max <= min + 1 {
            break;
        }
        let busiest = s.iter().position(|&n| n == max).map_or(1, |i| i + 1);
        let k = owners.iter().find(|(_, &o)| o == busiest).map(|(&k, _)| k);
        lab.start_client(k.context("a client on the busiest gateway")?)?;
        std::thread::sleep(Duration::from_millis(500));
        owners = lab.wait_settled(Duration::from_secs(60))?;
    }
    Ok(owners)
}

/// One phase: every client's iperf3 at once, the gateways' and clients'
/// CPU over the same span.
fn measure(
    lab: &FleetLab,
    owners: &BTreeMap<usize, usize>,
    secs: u32,
    gateways: usize,
) -> anyhow::Result<Value> {
    let ks: Vec<usize> = owners.keys().copied().collect();
    let mut servers = Vec::new();
    for &k in &ks {
        let port = (IPERF_BASE_PORT + k as u16).to_string();
        let log = lab.log(&format!("iperf3-server{k}"));
        let args = ["-s", "-1", "-B", INTERNET, "-p", &port];
        servers.push(lab.router.spawn_logged("iperf3", &args, &log)?);
    }
    std::thread::sleep(Duration::from_millis(500));
    let gw_pids: Vec<Option<u32>> = (1..=gateways).map(|i| lab.gateway_pid(i)).collect();
    let cpu =
        |pids: &[Option<u32>]| -> Vec<f64> { pids.iter().map(|p| p.map_or(0.0, cpu_s)).collect() };
    let client_pids: Vec<Option<u32>> = lab.client_pids().into_iter().map(Some).collect();
    let (gw0, cl0) = (cpu(&gw_pids), cpu(&client_pids));
    let t0 = std::time::Instant::now();
    let mut runs = Vec::new();
    for &k in &ks {
        runs.push((k, start_iperf(lab, k, secs)?));
    }
    let mut per_client = BTreeMap::new();
    for (k, child) in runs {
        let out = child.wait_with_output()?;
        let v: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "client {k}'s iperf3 JSON ({})",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        per_client.insert(k, received_bps(&v).unwrap_or(0.0) / 1e9);
    }
    let wall = t0.elapsed().as_secs_f64().max(secs as f64);
    let (gw1, cl1) = (cpu(&gw_pids), cpu(&client_pids));
    drop(servers);
    let gw_rows: Vec<Value> = (1..=gateways)
        .map(|i| {
            let gbps: f64 = ks
                .iter()
                .filter(|k| owners[k] == i)
                .map(|k| per_client[k])
                .sum();
            let cores = (gw1[i - 1] - gw0[i - 1]) / wall;
            json!({
                "gateway": i,
                "clients": ks.iter().filter(|k| owners[k] == i).count(),
                "gbps": gbps,
                "cpu_s": gw1[i - 1] - gw0[i - 1],
                "cores": cores,
                "cores_per_gbps": if gbps > 0.0 { json!(cores / gbps) } else { Value::Null },
            })
        })
        .collect();
    let clients_cpu: f64 = cl1.iter().zip(&cl0).map(|(a, b)| a - b).sum();
    Ok(json!({
        "gateways": gateways,
        "aggregate_gbps": per_client.values().sum::<f64>(),
        "per_client_gbps": per_client.values().collect::<Vec<_>>(),
        "per_gateway": gw_rows,
        "client_daemons_cores": clients_cpu / wall,
        "wall_s": wall,
        "load_average": loadavg(),
    }))
}

/// Client `k`'s `iperf3 -R` to its server on the router (bounded by
/// `timeout`, as `crate::iperf` does), JSON on a pipe.
fn start_iperf(lab: &FleetLab, k: usize, secs: u32) -> anyhow::Result<std::process::Child> {
    let port = (IPERF_BASE_PORT + k as u16).to_string();
    let bound = (secs + 20).to_string();
    let t = secs.to_string();
    let args = [
        "-k",
        "2",
        &bound,
        "iperf3",
        "-c",
        INTERNET,
        "-p",
        &port,
        "-B",
        &inner(k),
    ];
    lab.clients[k - 1]
        .command("timeout")
        .args(args)
        .args(["-J", "-R", "-t", &t])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("iperf3 in client {k}"))
}

fn aggregate(phase: &Value) -> f64 {
    phase["aggregate_gbps"].as_f64().unwrap_or(0.0)
}

/// The mean CPU per Gbit/s of the gateways that carried traffic.
fn mean_cpu_per_gbps(phase: &Value) -> f64 {
    let v: Vec<f64> = phase["per_gateway"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["cores_per_gbps"].as_f64())
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The report as a short markdown page.
pub fn markdown(r: &Value) -> String {
    let mut s = format!(
        "# Fleet benchmark\n\n{} two-path clients, {} s of iperf3 per phase, {}; {} cores; \
         load average {} before, {} after.\n\n\
         | gateways | aggregate Gbit/s | gateway: clients, Gbit/s, cores, cores per Gbit/s | client daemons' cores | load average |\n\
         |---|---|---|---|---|\n",
        r["clients"], r["secs_per_phase"], r["direction"].as_str().unwrap_or(""), r["cores"],
        r["load_average_before"].as_str().unwrap_or(""), r["load_average_after"].as_str().unwrap_or(""),
    );
    for p in r["phases"].as_array().into_iter().flatten() {
        let gws: Vec<String> = p["per_gateway"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                format!(
                    "g{}: {}, {:.2}, {:.2}, {}",
                    g["gateway"],
                    g["clients"],
                    g["gbps"].as_f64().unwrap_or(0.0),
                    g["cores"].as_f64().unwrap_or(0.0),
                    g["cores_per_gbps"]
                        .as_f64()
                        .map_or("—".into(), |c| format!("{c:.2}")),
                )
            })
            .collect();
        s += &format!(
            "| {} | {:.2} | {} | {:.2} | {} |\n",
            p["gateways"],
            aggregate(p),
            gws.join("; "),
            p["client_daemons_cores"].as_f64().unwrap_or(0.0),
            p["load_average"].as_str().unwrap_or(""),
        );
    }
    s += &format!(
        "\nAggregate with three gateways / with one: **{:.2}**. Gateway CPU per Gbit/s, \
         three gateways / one: {:.2} (1.0: each host costs the same per Gbit/s, so hosts on \
         their own machines add capacity linearly).\n",
        r["ratio_three_to_one"].as_f64().unwrap_or(0.0),
        r["cpu_per_gbps_ratio_three_to_one"].as_f64().unwrap_or(0.0),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_both_phases_and_the_ratios() {
        let gw = |i, gbps, cores| json!({"gateway": i, "clients": 2, "gbps": gbps, "cpu_s": 1.0, "cores": cores, "cores_per_gbps": cores / gbps});
        let r = json!({
            "clients": 6, "secs_per_phase": 10, "direction": "downstream", "cores": 2,
            "load_average_before": "0.5 0.4 0.3", "load_average_after": "3.0 1.0 0.5",
            "phases": [
                {"gateways": 1, "aggregate_gbps": 2.0, "per_gateway": [gw(1, 2.0, 0.8)], "client_daemons_cores": 0.7, "load_average": "2.0 1 1"},
                {"gateways": 3, "aggregate_gbps": 2.4, "per_gateway": [gw(1, 0.8, 0.32), gw(2, 0.8, 0.32), gw(3, 0.8, 0.32)], "client_daemons_cores": 0.9, "load_average": "3.0 1 1"},
            ],
            "ratio_three_to_one": 1.2,
            "cpu_per_gbps_ratio_three_to_one": 1.0,
        });
        assert!((mean_cpu_per_gbps(&r["phases"][1]) - 0.4).abs() < 1e-9);
        let md = markdown(&r);
        assert!(
            md.contains("| 1 | 2.00 | g1: 2, 2.00, 0.80, 0.40 |"),
            "{md}"
        );
        assert!(
            md.contains("| 3 | 2.40 |") && md.contains("g3: 2, 0.80, 0.32, 0.40"),
            "{md}"
        );
        assert!(md.contains("**1.20**") && md.contains("one: 1.00"), "{md}");
        let owners = BTreeMap::from([(1, 1), (2, 1), (3, 3)]);
        assert_eq!(spread(&owners), [2, 0, 1]);
    }
}
