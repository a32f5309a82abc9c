//! `mpdccp testbed --bench`: throughput, CPU use and added latency of the
//! tunnel over two unshaped veth paths, beside the same traffic directly
//! over one veth path (routers forward in the kernel; no emulator).
//!
//! Measurements (each `secs` long):
//! * kernel TCP (iperf3, CUBIC) through the tunnel, and directly;
//! * UDP (iperf3 -u at a target above what the tunnel can carry, 1200-byte
//!   datagrams) through the tunnel, and directly: received rate and loss;
//! * CPU seconds used by the two daemons during the TCP run (from
//!   /proc/PID/stat), as a share of one core;
//! * RTT of ping at light load (100 pings, 10 ms apart) through the tunnel
//!   and directly; the difference is the latency the tunnel adds.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use crate::topo::{Topology, TunnelOpts, SERVER_TUN_V4};

fn iperf(t: &mut Topology, dst: &str, extra: &[&str], secs: u32) -> anyhow::Result<Value> {
    let p = t.server.spawn("iperf3", &["-s", "-1", "-B", dst])?;
    t.procs.push(p);
    std::thread::sleep(Duration::from_millis(300));
    let secs_s = secs.to_string();
    let mut args = vec!["-c", dst, "-t", &secs_s, "-J"];
    args.extend_from_slice(extra);
    let out = t.client.output("iperf3", &args)?;
    let v: Value = serde_json::from_str(&out).context("iperf3 JSON")?;
    // Let the one-shot server exit before the next run.
    std::thread::sleep(Duration::from_millis(300));
    Ok(v)
}

fn ping_avg_ms(t: &Topology, dst: &str) -> anyhow::Result<f64> {
    let out = t
        .client
        .output("ping", &["-c", "100", "-i", "0.01", "-q", dst])?;
    let line = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .context("ping summary")?;
    let v = line.split('=').nth(1).context("ping values")?.trim();
    v.split('/')
        .nth(1)
        .context("avg")?
        .parse()
        .context("avg number")
}

/// CPU time (user + system) of a process, seconds.
fn cpu_s(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

fn measure(t: &mut Topology, dst: &str, secs: u32, pids: &[u32]) -> anyhow::Result<Value> {
    let cpu0: f64 = pids.iter().map(|&p| cpu_s(p)).sum();
    let tcp = iperf(t, dst, &[], secs)?;
    let cpu1: f64 = pids.iter().map(|&p| cpu_s(p)).sum();
    let tcp_mbps = tcp["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    let udp = iperf(t, dst, &["-u", "-b", "1G", "-l", "1200"], secs)?;
    // Received rate: `sum_received` (iperf3 >= 3.12), else sent x (1 - loss).
    let udp_loss = udp["end"]["sum"]["lost_percent"].as_f64().unwrap_or(0.0);
    let udp_mbps = udp["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(
            udp["end"]["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) * (1.0 - udp_loss / 100.0),
        )
        / 1e6;
    let rtt = ping_avg_ms(t, dst)?;
    Ok(json!({
        "tcp_mbps": tcp_mbps,
        "tcp_retransmits": tcp["end"]["sum_sent"]["retransmits"],
        "daemon_cpu_share_of_one_core_during_tcp": if pids.is_empty() { Value::Null } else { json!((cpu1 - cpu0) / secs as f64) },
        "udp_offered_mbps": 1000,
        "udp_received_mbps": udp_mbps,
        "udp_loss_percent": udp_loss,
        "ping_rtt_ms_light_load": rtt,
    }))
}

/// Runs the benchmark; returns the report.
pub fn run(exe: &Path, secs: u32, sock_buf: usize, abort: &AtomicBool) -> anyhow::Result<Value> {
    let secs = secs.max(2);
    let mut t = Topology::build(2)?;
    // Direct: over path 1's veths, forwarded by its router in the kernel.
    let direct_dst = t.paths[0].server_ip.to_string();
    let direct = measure(&mut t, &direct_dst, secs, &[])?;
    if abort.load(std::sync::atomic::Ordering::Relaxed) {
        anyhow::bail!("interrupted");
    }
    // The link emulator alone on path 2: unshaped (10 Gbit/s), 1 ms each way.
    let stats = t.dir.join("bench-emu.jsonl");
    let stats_s = stats.to_string_lossy().into_owned();
    let emu_idx = t.procs.len();
    t.start_emulator(
        exe,
        1,
        &[
            "--delay-ms",
            "1",
            "--rate-mbps",
            "10000",
            "--buffer-bytes",
            "4000000",
            "--stats-out",
            &stats_s,
        ],
    )?;
    let emu_dst = t.paths[1].server_ip.to_string();
    let emu_tcp = iperf(&mut t, &emu_dst, &[], secs)?;
    let emu_udp = iperf(&mut t, &emu_dst, &["-u", "-b", "1G", "-l", "1400"], secs)?;
    let emu_rtt = ping_avg_ms(&t, &emu_dst)?;
    // Stop the emulator (it removes its capture rules) so both tunnel paths are unshaped.
    t.procs.remove(emu_idx).stop();
    let samples: Vec<crate::emu::Sample> = std::fs::read_to_string(&stats)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let late_max = samples.iter().map(|s| s.late_max_us).max().unwrap_or(0);
    let mut lates: Vec<u64> = samples
        .iter()
        .filter(|s| s.qdelay_n > 0)
        .map(|s| s.late_max_us)
        .collect();
    lates.sort_unstable();
    let late_p50 = lates.get(lates.len() / 2).copied().unwrap_or(0);
    let emu_loss = emu_udp["end"]["sum"]["lost_percent"]
        .as_f64()
        .unwrap_or(0.0);
    let emulator = json!({
        "setup": "one path through mpdccp netem: 1 ms each way, 10 Gbit/s, 4 MB buffer",
        "tcp_mbps": emu_tcp["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
        "udp_offered_mbps": 1000,
        "udp_received_mbps": emu_udp["end"]["sum_received"]["bits_per_second"].as_f64()
            .unwrap_or(emu_udp["end"]["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) * (1.0 - emu_loss / 100.0)) / 1e6,
        "udp_loss_percent": emu_loss,
        "ping_rtt_ms_light_load": emu_rtt,
        "expected_rtt_ms": 2.0,
        "delivery_lateness_us_max": late_max,
        "delivery_lateness_us_p50_of_100ms_maxima": late_p50,
    });
    let opts = TunnelOpts {
        scheduler: "rr".into(),
        reorder: "active-fixed".into(),
        log: "warn".into(),
        extra_tunnel: format!("send_queue_pkts = 4000\nsocket_buffer_bytes = {sock_buf}\n"),
        ..Default::default()
    };
    t.start_tunnel(exe, &opts)?;
    let pids: Vec<u32> = t.procs.iter().filter_map(|p| p.id()).collect();
    let tunnel = measure(&mut t, &SERVER_TUN_V4.to_string(), secs, &pids)?;
    let added = tunnel["ping_rtt_ms_light_load"].as_f64().unwrap_or(0.0)
        - direct["ping_rtt_ms_light_load"].as_f64().unwrap_or(0.0);
    let client_status = t.status(false).unwrap_or(Value::Null);
    let server_status = t.status(true).unwrap_or(Value::Null);
    Ok(json!({
        "setup": "2 unshaped veth paths through kernel-forwarding routers; tunnel cc ccid2, scheduler rr, reorder active-fixed",
        "socket_buffer_bytes": sock_buf,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "secs": secs,
        "direct_one_veth": direct,
        "tunnel_two_paths": tunnel,
        "tunnel_added_rtt_ms": added,
        "emulator_one_path": emulator,
        "client_daemon_stats": client_status["daemon"],
        "client_conn_stats": client_status["connections"][0]["stats"],
        "client_paths": client_status["connections"][0]["paths"],
        "server_daemon_stats": server_status["daemon"],
        "server_conn_stats": server_status["connections"][0]["stats"],
        "server_reorder": server_status["connections"][0]["reorder"],
    }))
}
