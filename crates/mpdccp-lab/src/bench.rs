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
//!   and directly; the difference is the latency the tunnel adds;
//! * the same through the tunnel again with `auth = "protected"` (Noise
//!   handshake, every data payload sealed with ChaCha20-Poly1305 per path,
//!   docs/SECURITY.md §5): what payload protection costs;
//! * the peers: our tunnel over path 1 only (open and
//!   protected) and wireguard-go over the same path when it is installed
//!   (`crate::peers`), with the same traffic, and ours / wireguard-go per
//!   figure; skipped with a notice when wireguard-go or `wg` is missing.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use mpdccp_proto::sched::SchedulerKind;

use mpdccp_net::daemon::config::{Aqm, AuthMode};

use crate::iperf::{received_mbps, udp_lost_percent};
use crate::topo::{Topology, TunnelOpts, SERVER_TUN_V4, SERVER_TUN_V6};

/// iperf3 for `secs` seconds on its default port.
fn iperf(t: &mut Topology, dst: &str, extra: &[&str], secs: u32) -> anyhow::Result<Value> {
    let secs_s = secs.to_string();
    let mut args = vec!["-t", &secs_s];
    args.extend_from_slice(extra);
    crate::iperf::run(t, dst, 5201, &args).map_err(|e| e.context(tunnel_diagnosis(t)))
}

/// What the daemons said and held when an iperf3 run through the tunnel
/// failed (a stall in CI, 2026-11-29, left only iperf3's own output): both
/// logs' last lines and, per path, the sender's state. A daemon that does
/// not answer its control socket gets its threads' states and, with gdb
/// installed, their stacks (a spinning or blocked packet thread). Empty
/// without a tunnel (the direct runs).
fn tunnel_diagnosis(t: &Topology) -> String {
    let mut out = String::new();
    let mut silent = false;
    for (server, who) in [(false, "client"), (true, "server")] {
        if !t.log_file(server).exists() {
            continue;
        }
        match t.status(server) {
            Ok(v) => match mpdccp_net::daemon::status::Status::deserialize(&v) {
                Ok(st) => out.push_str(&format!(
                    "{who} daemon status:\n{}",
                    mpdccp_net::daemon::status_render::render(&st)
                )),
                Err(e) => out.push_str(&format!("{who} daemon status unreadable: {e}\n")),
            },
            Err(e) => {
                silent = true;
                out.push_str(&format!("{who} daemon did not answer status: {e:#}\n"));
            }
        }
        out.push_str(&format!(
            "{who} log (last lines):\n{}\n",
            t.log_tail(server)
        ));
    }
    if silent {
        for pid in t.procs.iter().filter_map(|p| p.id()) {
            out.push_str(&stuck_process_report(pid));
        }
    }
    out
}

/// An `mpdccp` process's threads (state, CPU ticks, kernel wait channel)
/// and, when gdb is installed, their stacks; empty for other processes.
fn stuck_process_report(pid: u32) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() != "mpdccp" {
        return String::new();
    }
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .replace('\0', " ");
    let mut out = format!("process {pid}: {cmdline}\n");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten();
    for task in tasks {
        let dir = task.path();
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        let rest = stat_fields(&stat);
        let wchan = std::fs::read_to_string(dir.join("wchan")).unwrap_or_default();
        out.push_str(&format!(
            "  thread {}: state {} utime {} stime {} wchan {wchan}\n",
            task.file_name().to_string_lossy(),
            rest.first().unwrap_or(&"?"),
            rest.get(11).unwrap_or(&"?"),
            rest.get(12).unwrap_or(&"?"),
        ));
    }
    let gdb = std::process::Command::new("timeout")
        .args(["30", "gdb", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "thread apply all bt 30"])
        .output();
    if let Ok(o) = gdb {
        let text = String::from_utf8_lossy(&o.stdout);
        let stacks: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with('#') || l.starts_with("Thread"))
            .collect();
        out.push_str(&stacks.join("\n"));
        out.push('\n');
    }
    out
}

/// The client TUN's transmit drops (`ip -s link`: packets the kernel
/// could not queue for the daemon to read); `None` without a tunnel.
fn tun_tx_dropped(t: &Topology) -> Option<u64> {
    let out = t
        .client
        .output(
            "ip",
            &["-j", "-s", "link", "show", "dev", crate::topo::TUN_NAME],
        )
        .ok()?;
    let v: Value = serde_json::from_str(&out).ok()?;
    v[0]["stats64"]["tx"]["dropped"].as_u64()
}

/// The kernel's UDP error counters in a namespace (`/proc/net/snmp` is per
/// network namespace): receive-buffer and send-buffer overflows, all input
/// errors.
fn udp_snmp(ns: &crate::netns::Netns) -> Option<[u64; 3]> {
    let out = ns.output("cat", &["/proc/net/snmp"]).ok()?;
    let mut rows = out.lines().filter(|l| l.starts_with("Udp: "));
    let names: Vec<&str> = rows.next()?.split_whitespace().collect();
    let vals: Vec<&str> = rows.next()?.split_whitespace().collect();
    let get = |k: &str| {
        let i = names.iter().position(|n| *n == k)?;
        vals.get(i)?.parse().ok()
    };
    Some([get("RcvbufErrors")?, get("SndbufErrors")?, get("InErrors")?])
}

/// Packets the kernel dropped at its per-CPU input backlog (veth delivers
/// through it), all namespaces: `/proc/net/softnet_stat`'s second column.
fn softnet_dropped() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/net/softnet_stat").ok()?;
    s.lines()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|x| u64::from_str_radix(x, 16).ok())
        })
        .sum()
}

/// Every loss-like counter (drops, rejects, losses, errors, expiries) of a
/// daemon's status that grew between two snapshots, by its JSON path.
fn grown_loss_counters(before: &Value, after: &Value) -> Value {
    fn walk(path: String, b: &Value, a: &Value, out: &mut serde_json::Map<String, Value>) {
        match a {
            Value::Object(m) => {
                for (k, v) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(p, &b[k.as_str()], v, out);
                }
            }
            Value::Array(v) => {
                for (i, x) in v.iter().enumerate() {
                    walk(format!("{path}.{i}"), &b[i], x, out);
                }
            }
            Value::Number(n) => {
                let lossy = [
                    "drop", "reject", "lost", "loss", "error", "expired", "discard", "late",
                    "overflow",
                ]
                .iter()
                .any(|w| path.rsplit('.').next().is_some_and(|leaf| leaf.contains(w)));
                let (a, b) = (n.as_u64().unwrap_or(0), b.as_u64().unwrap_or(0));
                if lossy && a > b {
                    out.insert(path, json!(a - b));
                }
            }
            _ => {}
        }
    }
    let mut out = serde_json::Map::new();
    walk(String::new(), before, after, &mut out);
    Value::Object(out)
}

fn diff_u64(a: Option<u64>, b: Option<u64>) -> Value {
    match (a, b) {
        (Some(a), Some(b)) => json!(a.saturating_sub(b)),
        _ => Value::Null,
    }
}

/// RTT of 100 pings 10 ms apart, ms: [min, median, mean, p90, max] (the
/// median resists the scheduling spikes of a busy 2-core machine).
fn ping_ms(t: &Topology, dst: &str) -> anyhow::Result<[f64; 5]> {
    let out = t.client.output("ping", &["-c", "100", "-i", "0.01", dst])?;
    let v = ping_rtts(&out);
    anyhow::ensure!(!v.is_empty(), "no ping replies from {dst}");
    let q = |p: f64| quantile(&v, p);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    Ok([q(0.0), q(0.5), mean, q(0.9), q(1.0)])
}

/// Ping replies of the first 0.8 s of a loaded run, not counted.
const PING_WARMUP: usize = 80;

/// The RTTs (ms) of ping's output, sorted.
fn ping_rtts(out: &str) -> Vec<f64> {
    let mut v: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The `p` quantile of sorted, non-empty `v` (nearest rank).
pub(crate) fn quantile(v: &[f64], p: f64) -> f64 {
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// p50 / p99 / max of RTTs (ms) and how many there were.
fn rtt_summary(v: &[f64]) -> Value {
    if v.is_empty() {
        return Value::Null;
    }
    json!({"p50": quantile(v, 0.5), "p99": quantile(v, 0.99), "max": quantile(v, 1.0), "n": v.len()})
}

fn ping_avg_ms(t: &Topology, dst: &str) -> anyhow::Result<f64> {
    Ok(ping_ms(t, dst)?[2])
}

/// CPU time (user + system) of a process, seconds.
pub fn cpu_s(pid: u32) -> f64 {
    let (u, s) = cpu_user_system_s(pid);
    u + s
}

/// The fields of a `/proc/…/stat` line after the parenthesised command
/// name (which may hold spaces): state is index 0, utime and stime 11 and
/// 12 (fields 3, 14 and 15 of proc(5)); empty when malformed.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default()
}

/// CPU time of a process in user space and in the kernel, seconds.
fn cpu_user_system_s(pid: u32) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f = stat_fields(&s);
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
    (ticks(11) / hz, ticks(12) / hz)
}

/// Each daemon's share of a core in user space and in the kernel between
/// two [`cpu_user_system_s`] snapshots `secs` apart (server first).
fn cpu_split(before: &[(f64, f64)], after: &[(f64, f64)], secs: u32) -> Value {
    let names = ["server", "client"];
    let mut out = serde_json::Map::new();
    for (i, (a, b)) in after.iter().zip(before).enumerate() {
        let name = names
            .get(i)
            .map_or_else(|| format!("daemon{i}"), |n| n.to_string());
        out.insert(
            name,
            json!({"user": (a.0 - b.0) / secs as f64, "system": (a.1 - b.1) / secs as f64}),
        );
    }
    Value::Object(out)
}

/// What one tunnelled datagram of the UDP run cost each daemon: system
/// calls and CPU µs per packet (the client per packet read from its TUN,
/// the server per packet written to its TUN), figures that depend less on
/// the machine's load than the rates do (the TUN figures count frames, not
/// the empty read that ends each drain). Also the datagrams the receiving
/// application's socket dropped: the server namespace's `RcvbufErrors`
/// less the server daemon's own path-socket drops.
fn udp_cost_per_packet(
    status0: &(Option<Value>, Option<Value>),
    status1: &(Option<Value>, Option<Value>),
    cpu0: &[(f64, f64)],
    cpu1: &[(f64, f64)],
    loss_where: &Value,
) -> Value {
    let grown = |a: &Option<Value>, b: &Option<Value>, key: &str| -> f64 {
        let get = |v: &Option<Value>| v.as_ref().and_then(|v| v["daemon"][key].as_f64());
        get(b).zip(get(a)).map_or(0.0, |(b, a)| (b - a).max(0.0))
    };
    let per = |x: f64, n: f64| if n > 0.0 { json!(x / n) } else { Value::Null };
    // cpu_split's order: the server's pid first, then the client's.
    let cpu_us = |i: usize| match (cpu0.get(i), cpu1.get(i)) {
        (Some(a), Some(b)) => (b.0 - a.0 + b.1 - a.1) * 1e6,
        _ => 0.0,
    };
    let (c0, c1, s0, s1) = (&status0.0, &status1.0, &status0.1, &status1.1);
    let client_pkts = grown(c0, c1, "tun_rx_pkts");
    let server_pkts = grown(s0, s1, "tun_tx_pkts");
    let server_socket_drops = grown(s0, s1, "udp_rx_socket_drops");
    let receiver_drops = loss_where["server_kernel_udp"]["rcvbuf_errors"]
        .as_f64()
        .map(|e| (e - server_socket_drops).max(0.0));
    json!({
        "client": {
            "tun_frames_read": per(grown(c0, c1, "tun_rx_frames"), client_pkts),
            "sendmmsg": per(grown(c0, c1, "udp_tx_syscalls"), client_pkts),
            "recvmmsg": per(grown(c0, c1, "udp_rx_syscalls"), client_pkts),
            "cpu_us": if cpu1.len() > 1 { per(cpu_us(1), client_pkts) } else { Value::Null },
        },
        "server": {
            "tun_frames_written": per(grown(s0, s1, "tun_tx_frames"), server_pkts),
            "recvmmsg": per(grown(s0, s1, "udp_rx_syscalls"), server_pkts),
            "sendmmsg": per(grown(s0, s1, "udp_tx_syscalls"), server_pkts),
            "cpu_us": if cpu1.is_empty() { Value::Null } else { per(cpu_us(0), server_pkts) },
        },
        "receiver_app_socket_drops": receiver_drops,
    })
}

/// The floor under any userspace relay's added latency on this host: the
/// RTT of a UDP echo between two threads over loopback, each blocking in
/// `recv` (two wake-ups per round trip, as the tunnel has at least three),
/// 200 rounds 5 ms apart, µs: p50, p99.
fn wakeup_floor_us() -> Value {
    use std::net::UdpSocket;
    let run = || -> std::io::Result<Vec<f64>> {
        let echo = UdpSocket::bind("127.0.0.1:0")?;
        let addr = echo.local_addr()?;
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = echo.recv_from(&mut buf) {
                if n == 1 {
                    break;
                }
                let _ = echo.send_to(&buf[..n], from);
            }
        });
        let c = UdpSocket::bind("127.0.0.1:0")?;
        c.set_read_timeout(Some(Duration::from_secs(1)))?;
        let mut rtts = Vec::with_capacity(200);
        let mut buf = [0u8; 64];
        for _ in 0..200 {
            let t0 = std::time::Instant::now();
            c.send_to(&[7u8; 32], addr)?;
            c.recv(&mut buf)?;
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
            std::thread::sleep(Duration::from_millis(5));
        }
        c.send_to(&[0u8], addr)?;
        let _ = t.join();
        rtts.sort_by(f64::total_cmp);
        Ok(rtts)
    };
    match run() {
        Ok(v) => json!({"p50": quantile(&v, 0.5), "p99": quantile(&v, 0.99), "n": v.len()}),
        Err(_) => Value::Null,
    }
}

/// UDP rate offered through the tunnel and directly (the throughput goal:
/// 1200-byte datagrams at 2 Gbit/s with < 1 % loss).
const UDP_OFFERED_MBPS: u32 = 2000;

/// The UDP rate of this run: `MPDCCP_BENCH_UDP_MBPS` (e.g. 1000, the
/// protected-mode goal's rate) or [`UDP_OFFERED_MBPS`].
fn udp_offered_mbps() -> anyhow::Result<u32> {
    match std::env::var("MPDCCP_BENCH_UDP_MBPS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&m: &u32| m > 0)
            .ok_or_else(|| anyhow::anyhow!("MPDCCP_BENCH_UDP_MBPS={v}: want Mbit/s > 0")),
        Err(_) => Ok(UDP_OFFERED_MBPS),
    }
}

/// iperf3's socket buffers in the UDP runs (`-w`).
const UDP_SOCKET_BUFFER: &str = "4M";

/// Retransmitted share of a TCP run's segments, percent (segments from the
/// bytes sent and the connection's MSS as iperf3 reports it).
fn retransmit_percent(run: &Value) -> Value {
    let retx = run["end"]["sum_sent"]["retransmits"].as_f64();
    let bytes = run["end"]["sum_sent"]["bytes"].as_f64().unwrap_or(0.0);
    let mss = run["start"]["tcp_mss_default"]
        .as_f64()
        .filter(|m| *m > 0.0)
        .unwrap_or(1448.0);
    match retx {
        Some(r) if bytes > 0.0 => json!(r / (bytes / mss) * 100.0),
        _ => Value::Null,
    }
}

/// Pings every 10 ms while a second TCP flow saturates the path: the
/// latency the queues add under load, and that flow's result. A run of its
/// own: 100 small packets a second interleaved with the flow cost the
/// tunnel about a third of its TCP rate on this machine (3.3 -> 2.3
/// Gbit/s), so the plain throughput figure is taken without them. iperf3
/// starts 0.3 s after the pings; the first PING_WARMUP replies are not
/// counted.
fn ping_under_tcp_load(
    t: &mut Topology,
    dst: &str,
    secs: u32,
) -> anyhow::Result<(Vec<f64>, Value)> {
    let ping_log = t.dir.join("bench-ping-under-load.txt");
    let _ = std::fs::remove_file(&ping_log); // spawn_logged appends
    let count = (secs as usize * 100).to_string();
    let mut pinger =
        t.client
            .spawn_logged("ping", &["-c", &count, "-i", "0.01", dst], &ping_log)?;
    let tcp_pinged = iperf(t, dst, &[], secs)?;
    pinger.wait_timeout(Duration::from_secs(2));
    pinger.stop();
    let log = std::fs::read_to_string(&ping_log).unwrap_or_default();
    let under_load = ping_rtts(&log.lines().skip(PING_WARMUP).collect::<Vec<_>>().join("\n"));
    Ok((under_load, tcp_pinged))
}

/// The single flow with ECN negotiated (`tcp_ecn = 1` at the sender;
/// Linux's default 2 only answers ECN): a queue that marks instead of
/// dropping then costs the flow no retransmissions. Restores the default.
fn tcp_with_ecn(t: &mut Topology, dst: &str, secs: u32) -> anyhow::Result<Value> {
    t.client.output("sysctl", &["-qw", "net.ipv4.tcp_ecn=1"])?;
    let tcp_ecn = iperf(t, dst, &[], secs);
    t.client.output("sysctl", &["-qw", "net.ipv4.tcp_ecn=2"])?;
    tcp_ecn
}

/// How the kernel's UDP error counters of a namespace grew.
fn snmp_delta(a: Option<[u64; 3]>, b: Option<[u64; 3]>) -> Value {
    match (a, b) {
        (Some(a), Some(b)) => json!({
            "rcvbuf_errors": b[0].saturating_sub(a[0]),
            "sndbuf_errors": b[1].saturating_sub(a[1]),
            "in_errors": b[2].saturating_sub(a[2]),
        }),
        _ => Value::Null,
    }
}

/// [`grown_loss_counters`] of two status documents when both were read.
fn grown_counters(a: &Option<Value>, b: &Option<Value>) -> Value {
    match (a, b) {
        (Some(a), Some(b)) => grown_loss_counters(a, b),
        _ => Value::Null,
    }
}

/// Lost inside the tunnel: of the `sent` datagrams, those never written to
/// the server's TUN between its status documents `before` and `after`
/// (what the receiving host then drops is not the tunnel's). Returns the
/// count written and the share lost, percent.
fn lost_in_tunnel(
    sent: Option<u64>,
    before: &Option<Value>,
    after: &Option<Value>,
) -> (Option<u64>, Value) {
    let to_tun = match (before, after) {
        (Some(a), Some(b)) => b["daemon"]["tun_tx_pkts"]
            .as_u64()
            .zip(a["daemon"]["tun_tx_pkts"].as_u64())
            .map(|(b, a)| b.saturating_sub(a)),
        _ => None,
    };
    let lost = match (sent, to_tun) {
        (Some(s), Some(d)) if s > 0 => json!(s.saturating_sub(d) as f64 / s as f64 * 100.0),
        _ => Value::Null,
    };
    (to_tun, lost)
}

/// One path or tunnel to `dst` measured: RTT idle and under load, TCP (one
/// flow, four, with ECN), offered UDP and where it was lost, and the CPU of
/// the processes `pids`.
fn measure(t: &mut Topology, dst: &str, secs: u32, pids: &[u32]) -> anyhow::Result<Value> {
    // Light load first, on the idle path/tunnel; again after the load runs.
    let idle = ping_ms(t, dst)?;
    let idle_rtts = ping_rtts(
        &t.client
            .output("ping", &["-c", "200", "-i", "0.005", dst])?,
    );
    let split0: Vec<(f64, f64)> = pids.iter().map(|&p| cpu_user_system_s(p)).collect();
    let tcp = iperf(t, dst, &[], secs)?;
    let split1: Vec<(f64, f64)> = pids.iter().map(|&p| cpu_user_system_s(p)).collect();
    let (cpu0, cpu1) = (cpu_sum(&split0), cpu_sum(&split1));
    let (under_load, tcp_pinged) = ping_under_tcp_load(t, dst, secs)?;
    let tcp_mbps = received_mbps(&tcp);
    let tcp4 = iperf(t, dst, &["-P", "4"], secs)?;
    let tcp_ecn = tcp_with_ecn(t, dst, secs)?;
    let udp = measure_udp(t, dst, secs, pids)?;
    let after = ping_ms(t, dst)?;
    let mut out = json!({
        "tcp_mbps": tcp_mbps,
        "tcp_retransmits": tcp["end"]["sum_sent"]["retransmits"],
        "tcp_retransmit_percent": retransmit_percent(&tcp),
        "tcp_ecn_mbps": received_mbps(&tcp_ecn),
        "tcp_ecn_retransmit_percent": retransmit_percent(&tcp_ecn),
        "tcp_4_streams_mbps": received_mbps(&tcp4),
        "tcp_4_streams_retransmit_percent": retransmit_percent(&tcp4),
        "daemon_cpu_share_of_one_core_during_tcp": if pids.is_empty() { Value::Null } else { json!((cpu1 - cpu0) / secs as f64) },
        "daemon_cpu_user_system_during_tcp": cpu_split(&split0, &split1, secs),
        "ping_rtt_ms_light_load": idle[1],
        "ping_rtt_ms_min_p50_mean_p90_max_idle": idle,
        "ping_rtt_ms_min_p50_mean_p90_max_after_load": after,
        "ping_rtt_ms_idle": rtt_summary(&idle_rtts),
        "ping_rtt_ms_under_tcp_load": rtt_summary(&under_load),
        "tcp_mbps_while_pinged": received_mbps(&tcp_pinged),
    });
    if let (Some(out), Value::Object(udp)) = (out.as_object_mut(), udp) {
        out.extend(udp);
    }
    Ok(out)
}

/// User + system CPU seconds of the processes sampled in `v`.
fn cpu_sum(v: &[(f64, f64)]) -> f64 {
    v.iter().map(|(u, s)| u + s).sum::<f64>()
}

/// The `udp_*` figures of [`measure`]: offered UDP to `dst`, where it was
/// lost, and the CPU of the processes `pids` meanwhile.
fn measure_udp(t: &mut Topology, dst: &str, secs: u32, pids: &[u32]) -> anyhow::Result<Value> {
    let offered = udp_offered_mbps()?;
    let rate = format!("{offered}M");
    // Where UDP is lost: the client TUN's own queue (the kernel drops when
    // the daemon does not read fast enough) is counted apart from the
    // daemons' counters; the daemons' CPU tells whether they were the limit.
    let tun_drops0 = tun_tx_dropped(t);
    let snmp0 = (udp_snmp(&t.client), udp_snmp(&t.server), softnet_dropped());
    let status0 = (t.status(false).ok(), t.status(true).ok());
    let usplit0: Vec<(f64, f64)> = pids.iter().map(|&p| cpu_user_system_s(p)).collect();
    // 4 MB socket buffers at both iperf3 ends (net.core.rmem_max here):
    // with the default 208 kB the receiving iperf3 overflows its own socket
    // whenever it is not scheduled for 1 ms, on the direct path too.
    let udp = iperf(
        t,
        dst,
        &["-u", "-b", &rate, "-l", "1200", "-w", UDP_SOCKET_BUFFER],
        secs,
    )?;
    let usplit1: Vec<(f64, f64)> = pids.iter().map(|&p| cpu_user_system_s(p)).collect();
    let (cpu_udp0, cpu_udp1) = (cpu_sum(&usplit0), cpu_sum(&usplit1));
    let tun_drops = diff_u64(tun_tx_dropped(t), tun_drops0);
    let snmp1 = (udp_snmp(&t.client), udp_snmp(&t.server), softnet_dropped());
    let status1 = (t.status(false).ok(), t.status(true).ok());
    // Where the lost datagrams went: the kernel's counters per namespace
    // (the server's receive-buffer errors include the daemon's path socket,
    // `udp_rx_socket_drops` below, and iperf3's), and the daemons' own.
    // Lost inside the tunnel: sent by iperf3 but never written to the
    // server's TUN (what the receiving host then drops is not the tunnel's).
    let sent = udp["end"]["sum"]["packets"].as_u64();
    let (to_tun, lost_in_tunnel) = lost_in_tunnel(sent, &status0.1, &status1.1);
    let udp_loss_where = json!({
        "client_tun_queue_dropped": tun_drops,
        "client_kernel_udp": snmp_delta(snmp0.0, snmp1.0),
        "server_kernel_udp": snmp_delta(snmp0.1, snmp1.1),
        "kernel_backlog_dropped_all_namespaces": diff_u64(snmp1.2, snmp0.2),
        "client_daemon_counters_grown": grown_counters(&status0.0, &status1.0),
        "server_daemon_counters_grown": grown_counters(&status0.1, &status1.1),
    });
    let udp_per_packet =
        udp_cost_per_packet(&status0, &status1, &usplit0, &usplit1, &udp_loss_where);
    let udp_loss = udp_lost_percent(&udp).unwrap_or(0.0);
    let udp_mbps = received_mbps(&udp);
    Ok(json!({
        "udp_offered_mbps": offered,
        "udp_received_mbps": udp_mbps,
        "udp_loss_percent": udp_loss,
        "udp_sent_datagrams": udp["end"]["sum"]["packets"],
        // What iperf3 managed to send (on a busy host it sends less than offered).
        "udp_sent_mbps": sent.map(|n| n as f64 * 1200.0 * 8.0 / secs as f64 / 1e6),
        "udp_client_tun_queue_dropped": udp_loss_where["client_tun_queue_dropped"],
        "udp_loss_where": udp_loss_where,
        "udp_lost_in_tunnel_percent": lost_in_tunnel,
        "udp_written_to_server_tun": to_tun,
        "udp_per_packet": udp_per_packet,
        "daemon_cpu_share_of_one_core_during_udp": if pids.is_empty() { Value::Null } else { json!((cpu_udp1 - cpu_udp0) / secs as f64) },
        "daemon_cpu_user_system_during_udp": cpu_split(&usplit0, &usplit1, secs),
    }))
}

/// Our tunnel over path 1 only (open, and protected unless `quick`), then
/// wireguard-go over the same path when installed, each measured with the
/// same traffic ([`measure`]), and ours / wireguard-go per figure. Stops
/// every process from `daemons_at` on first, and what it starts.
fn peers(
    t: &mut Topology,
    exe: &Path,
    opts: &TunnelOpts,
    daemons_at: usize,
    secs: u32,
    quick: bool,
    abort: &AtomicBool,
) -> anyhow::Result<Value> {
    let stop_from = |t: &mut Topology| {
        for mut p in t.procs.drain(daemons_at..).rev() {
            p.stop();
        }
    };
    stop_from(t);
    let mut runs = serde_json::Map::new();
    let modes = peer_modes(quick)?;
    for (name, auth) in &modes {
        let one = TunnelOpts {
            paths: vec![0],
            auth: *auth,
            rt_priority: 0,
            nice: crate::peers::PEERS_NICE,
            ..opts.clone()
        };
        t.start_tunnel(exe, &one)?;
        let pids: Vec<u32> = t.procs[daemons_at..]
            .iter()
            .filter_map(|p| p.id())
            .collect();
        let mut run = measure(t, &SERVER_TUN_V4.to_string(), secs, &pids)?;
        run["tunnel_cores_per_gbps_tcp"] = crate::peers::cores_per_gbps(&run);
        runs.insert(name.to_string(), run);
        stop_from(t);
        if abort.load(std::sync::atomic::Ordering::Relaxed) {
            anyhow::bail!("interrupted");
        }
    }
    let mut out = json!({
        "setup": "path 1 only (one unshaped veth path through a kernel-forwarding router); the same iperf3/ping runs per tunnel",
        "scheduling": format!("both tunnels at nice {} (SCHED_OTHER; not the bench's SCHED_FIFO: wireguard-go's runtime can livelock under it)", crate::peers::PEERS_NICE),
    });
    match crate::peers::wireguard_go_tools() {
        Err(why) => {
            eprintln!("bench: wireguard-go skipped: {why}");
            out["wireguard_go_skipped"] = json!(why);
        }
        Ok((wggo, wg)) => {
            out["wireguard_go_version"] = json!(crate::peers::wireguard_go_version(&wggo));
            // The same scheduling as our one-path daemons above.
            let pids = crate::peers::start_wireguard_go(t, &wggo, &wg, crate::peers::PEERS_NICE)?;
            let mut run = measure(t, crate::peers::WG_SERVER_V4, secs, &pids)?;
            run["tunnel_cores_per_gbps_tcp"] = crate::peers::cores_per_gbps(&run);
            stop_from(t);
            let mut r = serde_json::Map::new();
            for (name, ours) in &runs {
                r.insert(name.clone(), crate::peers::ratios(ours, &run));
            }
            out["ratio_to_wireguard_go"] = Value::Object(r);
            runs.insert("wireguard_go".into(), run);
        }
    }
    out["runs"] = Value::Object(runs);
    out["goals_issue_22"] = crate::peers::goals(&out);
    Ok(out)
}

/// Our one-path runs beside wireguard-go, named for the report.
/// MPDCCP_BENCH_PEER_MODES (`open`, `protected`, `open,protected`) picks
/// them, e.g. protected only beside wireguard-go when working on the AEAD
/// path; by default open when `quick`, both otherwise.
fn peer_modes(quick: bool) -> anyhow::Result<Vec<(&'static str, AuthMode)>> {
    let open = ("mpdccp_one_path", AuthMode::Open);
    let protected = ("mpdccp_one_path_protected", AuthMode::Protected);
    Ok(match std::env::var("MPDCCP_BENCH_PEER_MODES") {
        Ok(v) if !v.is_empty() => {
            let mut m = Vec::new();
            for w in v.split(',') {
                match w.trim() {
                    "open" => m.push(open),
                    "protected" => m.push(protected),
                    other => anyhow::bail!(
                        "MPDCCP_BENCH_PEER_MODES: {other}? want open and/or protected"
                    ),
                }
            }
            m
        }
        _ if quick => vec![open],
        _ => vec![open, protected],
    })
}

/// The tunnel settings of every run of ours (the environment overrides
/// documented inline).
fn bench_opts(
    sock_buf: usize,
    rt_priority: u8,
    offload: bool,
    aqm: Aqm,
    aqm_env: &str,
) -> anyhow::Result<TunnelOpts> {
    let mut opts = TunnelOpts {
        log: "warn".into(),
        ..Default::default()
    };
    opts.tunnel.settings.scheduler = SchedulerKind::Rr;
    // MPDCCP_BENCH_CC=ccid5 (or any controller's name) for the paths'
    // congestion control instead of the daemon's default.
    if let Ok(cc) = std::env::var("MPDCCP_BENCH_CC") {
        opts.tunnel.settings.cc = cc
            .parse()
            .map_err(|e| anyhow::anyhow!("MPDCCP_BENCH_CC={cc}: {e}"))?;
    }
    // A send queue for Gbit/s: 4000 packets, and bytes to match (the
    // daemon's 2 MB is about 5 ms at 3 Gbit/s, so it would bind first and
    // overflow in bursts; 2 MB vs 8 MB on 2026-11-27: 4 TCP streams 2.1 vs
    // 3.5 Gbit/s, 4.3 % vs 0.2 % retransmitted). MPDCCP_BENCH_QUEUE_BYTES
    // sets another byte bound.
    opts.tunnel.settings.send_queue_pkts = 4000;
    opts.tunnel.settings.send_queue_bytes = Some(match std::env::var("MPDCCP_BENCH_QUEUE_BYTES") {
        Ok(b) => b
            .parse()
            .map_err(|e| anyhow::anyhow!("MPDCCP_BENCH_QUEUE_BYTES={b}: {e}"))?,
        Err(_) => 8_000_000,
    });
    // MPDCCP_BENCH_TXQUEUELEN: the TUNs' kernel queue, packets (the
    // daemon's default otherwise; 0 = the kernel's 500).
    if let Ok(q) = std::env::var("MPDCCP_BENCH_TXQUEUELEN") {
        opts.tun_txqueuelen = q
            .parse()
            .map_err(|e| anyhow::anyhow!("MPDCCP_BENCH_TXQUEUELEN={q}: {e}"))?;
    }
    opts.rt_priority = rt_priority;
    // MPDCCP_BENCH_BUSY_POLL_US: the daemons' `busy_poll_us` (default 0).
    if let Ok(b) = std::env::var("MPDCCP_BENCH_BUSY_POLL_US") {
        opts.tunnel.busy_poll_us = b
            .parse()
            .map_err(|e| anyhow::anyhow!("MPDCCP_BENCH_BUSY_POLL_US={b}: {e}"))?;
    }
    // MPDCCP_BENCH_WINDOW_TARGET_MS: the daemons' `window_delay_target_ms`
    // (the queue the window's delay bound tolerates; "off" = no bound).
    if let Ok(t) = std::env::var("MPDCCP_BENCH_WINDOW_TARGET_MS") {
        if t == "off" {
            opts.tunnel.settings.window_delay_bound = false;
        } else {
            opts.tunnel.settings.window_delay_target_ms = t
                .parse()
                .map_err(|e| anyhow::anyhow!("MPDCCP_BENCH_WINDOW_TARGET_MS={t}: {e}"))?;
        }
    }
    opts.tunnel.socket_buffer_bytes = sock_buf;
    opts.tunnel.offload = offload;
    opts.tunnel.settings.aqm = aqm;
    if aqm_env == "off" {
        opts.tunnel.send_queue_max_delay_ms = 0;
    }
    Ok(opts)
}

/// The send queue's AQM: the daemon's default (fq_codel) unless
/// MPDCCP_BENCH_AQM says `codel` (one FIFO), `none` (no CoDel) or `off`
/// (also without the age limit: bounded in packets only). Also the
/// variable's text, which `bench_opts` reads too.
fn aqm_from_env() -> anyhow::Result<(Aqm, String)> {
    let aqm_env = std::env::var("MPDCCP_BENCH_AQM").unwrap_or_default();
    let aqm = match aqm_env.as_str() {
        "none" | "off" => Aqm::None,
        "codel" => Aqm::Codel,
        "" | "fq_codel" => Aqm::FqCodel,
        other => anyhow::bail!("MPDCCP_BENCH_AQM={other}: want fq_codel, codel, none or off"),
    };
    Ok((aqm, aqm_env))
}

/// The link emulator alone on path 2: unshaped (10 Gbit/s), 1 ms each way;
/// TCP, 1 Gbit/s of UDP, the RTT and how late it delivered. Stopped after,
/// so both tunnel paths are unshaped.
fn measure_emulator(t: &mut Topology, exe: &Path, secs: u32) -> anyhow::Result<Value> {
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
    let emu_tcp = iperf(t, &emu_dst, &[], secs)?;
    let emu_udp = iperf(t, &emu_dst, &["-u", "-b", "1G", "-l", "1400"], secs)?;
    let emu_rtt = ping_avg_ms(t, &emu_dst)?;
    // Stop the emulator (it removes its capture rules) so both tunnel paths are unshaped.
    t.procs.remove(emu_idx).stop();
    let samples = crate::emu::read_samples(&stats);
    let late_max = samples.iter().map(|s| s.late_max_us).max().unwrap_or(0);
    let mut lates: Vec<u64> = samples
        .iter()
        .filter(|s| s.qdelay_n > 0)
        .map(|s| s.late_max_us)
        .collect();
    lates.sort_unstable();
    let late_p50 = lates.get(lates.len() / 2).copied().unwrap_or(0);
    let emu_loss = udp_lost_percent(&emu_udp).unwrap_or(0.0);
    Ok(json!({
        "setup": "one path through mpdccp netem: 1 ms each way, 10 Gbit/s, 4 MB buffer",
        "tcp_mbps": received_mbps(&emu_tcp),
        "udp_offered_mbps": 1000,
        "udp_received_mbps": received_mbps(&emu_udp),
        "udp_loss_percent": emu_loss,
        "ping_rtt_ms_light_load": emu_rtt,
        "expected_rtt_ms": 2.0,
        "delivery_lateness_us_max": late_max,
        "delivery_lateness_us_p50_of_100ms_maxima": late_p50,
    }))
}

/// The pids of the two daemons (server, then client) started at
/// `daemons_at`, not the topology's other processes.
fn daemon_pids(t: &Topology, daemons_at: usize) -> Vec<u32> {
    t.procs[daemons_at..]
        .iter()
        .filter_map(|p| p.id())
        .collect()
}

/// `v[a] / v[b]` to two decimals (`null` when `v[b]` is 0).
fn ratio(v: &Value, a: &str, b: &str) -> Value {
    let (x, y) = (v[a].as_f64().unwrap_or(0.0), v[b].as_f64().unwrap_or(0.0));
    if y > 0.0 {
        json!((x / y * 100.0).round() / 100.0)
    } else {
        Value::Null
    }
}

/// How much a daemon moved per system call, from its status counters.
fn per_syscall(v: &Value) -> Value {
    json!({
        "tun_rx_pkts_per_read": ratio(v, "tun_rx_pkts", "tun_rx_frames"),
        "tun_tx_pkts_per_write": ratio(v, "tun_tx_pkts", "tun_tx_frames"),
        "udp_rx_datagrams_per_recvmmsg": ratio(v, "udp_rx_datagrams", "udp_rx_syscalls"),
        "udp_tx_datagrams_per_sendmmsg": ratio(v, "udp_tx_datagrams", "udp_tx_syscalls"),
        "tso_segments_per_frame": ratio(&v["tun_offload"], "tso_segments", "tso_frames"),
        "gro_segments_per_frame": ratio(&v["tun_offload"], "gro_segments", "gro_frames"),
    })
}

/// The same tunnel with payload protection: stops the open-mode daemons
/// (client first), starts both in protected mode and compares with the
/// open run `tunnel`.
fn measure_protected(
    t: &mut Topology,
    exe: &Path,
    opts: &TunnelOpts,
    daemons_at: usize,
    secs: u32,
    tunnel: &Value,
) -> anyhow::Result<Value> {
    for mut p in t.procs.drain(daemons_at..daemons_at + 2).rev() {
        p.stop();
    }
    let protected_opts = TunnelOpts {
        auth: AuthMode::Protected,
        ..opts.clone()
    };
    // The open run's helpers (iperf3 servers, …) stay in `procs` after the
    // drained daemons, so the protected daemons land after them.
    let protected_at = t.procs.len();
    t.start_tunnel(exe, &protected_opts)?;
    let pids = daemon_pids(t, protected_at);
    let protected = measure(t, &SERVER_TUN_V4.to_string(), secs, &pids)?;
    let protected_status = t.status(true).unwrap_or(Value::Null);
    anyhow::ensure!(
        protected_status["auth"]["mode"] == "authenticated",
        "the protected run's server is not in authenticated mode: {}",
        protected_status["auth"]
    );
    let share = |k: &str| {
        let (p, o) = (
            protected[k].as_f64().unwrap_or(0.0),
            tunnel[k].as_f64().unwrap_or(0.0),
        );
        if o > 0.0 {
            json!((p / o * 1000.0).round() / 1000.0)
        } else {
            Value::Null
        }
    };
    Ok(json!({
        "setup": "the same two paths and tunnel settings, auth = \"protected\" on both daemons (ChaCha20-Poly1305 per data packet, 24 bytes each, TUN MTU 24 bytes lower)",
        "tunnel_two_paths": protected,
        "tcp_ratio_to_open": share("tcp_mbps"),
        "udp_received_ratio_to_open": share("udp_received_mbps"),
        "server_auth_stats": protected_status["auth"],
        "client_conn_stats": t.status(false).unwrap_or(Value::Null)["connections"][0]["stats"],
    }))
}

/// `Err("interrupted")` once `abort` is set (Ctrl-C), between the
/// measurements.
pub(crate) fn stop_if_interrupted(abort: &AtomicBool) -> anyhow::Result<()> {
    if abort.load(std::sync::atomic::Ordering::Relaxed) {
        anyhow::bail!("interrupted");
    }
    Ok(())
}

/// The open tunnel over both paths: starts the two daemons at
/// `daemons_at` and measures it, plus TCP over IPv6 inside it (TSO6 /
/// TCPV6 coalescing).
fn measure_open_tunnel(
    t: &mut Topology,
    exe: &Path,
    opts: &TunnelOpts,
    daemons_at: usize,
    secs: u32,
) -> anyhow::Result<Value> {
    t.start_tunnel(exe, opts)?;
    let pids = daemon_pids(t, daemons_at);
    let mut tunnel = measure(t, &SERVER_TUN_V4.to_string(), secs, &pids)?;
    let tcp6 = iperf(t, SERVER_TUN_V6, &[], secs)?;
    tunnel["tcp_v6_mbps"] = json!(received_mbps(&tcp6));
    tunnel["tcp_v6_retransmits"] = tcp6["end"]["sum_sent"]["retransmits"].clone();
    Ok(tunnel)
}

/// Runs the benchmark; returns the report.
/// `rt_priority`: the daemons' `SCHED_FIFO` priority (0 = normal), as in
/// the testbed: the two daemons stand for two machines, so iperf3 and the
/// other daemon must not delay them (on 2 cores, 2026-11-28, load 2.9:
/// with 0 the client TUN dropped 116 k of 1.0 M UDP datagrams and TCP
/// retransmitted 0.13 %; with 5, none and 0.05 %).
/// `peers_only`: only the one-path open tunnel and wireguard-go (the
/// `peers` section; a short run for tests).
pub fn run(
    exe: &Path,
    secs: u32,
    sock_buf: usize,
    rt_priority: u8,
    peers_only: bool,
    abort: &AtomicBool,
) -> anyhow::Result<Value> {
    // MPDCCP_BENCH_OFFLOAD=0 measures the tunnel without kernel offloads
    // (UDP GSO/GRO, TUN TSO/coalescing) for comparison.
    let offload = std::env::var("MPDCCP_BENCH_OFFLOAD").map_or(true, |v| v != "0");
    let (aqm, aqm_env) = aqm_from_env()?;
    let secs = secs.max(2);
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned));
    let mut t = Topology::build(2)?;
    let opts = bench_opts(sock_buf, rt_priority, offload, aqm, &aqm_env)?;
    if peers_only {
        let daemons_at = t.procs.len();
        let peers = peers(&mut t, exe, &opts, daemons_at, secs, true, abort)?;
        return Ok(json!({
            "secs": secs,
            "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "daemon_rt_priority": rt_priority,
            "load_average_at_start": load_average,
            "peers": peers,
        }));
    }
    // Direct: over path 1's veths, forwarded by its router in the kernel.
    let direct_dst = t.paths[0].server_ip.to_string();
    let direct = measure(&mut t, &direct_dst, secs, &[])?;
    stop_if_interrupted(abort)?;
    let emulator = measure_emulator(&mut t, exe, secs)?;
    let daemons_at = t.procs.len();
    let tunnel = measure_open_tunnel(&mut t, exe, &opts, daemons_at, secs)?;
    let added = tunnel["ping_rtt_ms_light_load"].as_f64().unwrap_or(0.0)
        - direct["ping_rtt_ms_light_load"].as_f64().unwrap_or(0.0);
    let client_status = t.status(false).unwrap_or(Value::Null);
    let server_status = t.status(true).unwrap_or(Value::Null);
    let client_per_call = per_syscall(&client_status["daemon"]);
    let server_per_call = per_syscall(&server_status["daemon"]);
    stop_if_interrupted(abort)?;
    let protection = measure_protected(&mut t, exe, &opts, daemons_at, secs, &tunnel)?;
    stop_if_interrupted(abort)?;
    let peers = peers(&mut t, exe, &opts, daemons_at, secs, false, abort)?;
    let mut report = json!({
        "setup": "2 unshaped veth paths through kernel-forwarding routers; tunnel cc ccid2, scheduler rr, reorder active-fixed",
        "socket_buffer_bytes": sock_buf,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "secs": secs,
        "direct_one_veth": direct,
        "tunnel_two_paths": tunnel,
        "tunnel_added_rtt_ms": added,
        "userspace_udp_echo_rtt_us": wakeup_floor_us(),
        "payload_protection": protection,
        "peers": peers,
        "emulator_one_path": emulator,
        "offload": offload,
        "aqm": aqm,
        "path_cc": opts.tunnel.settings.cc.to_string(),
        "send_queue_pkts_bytes": [4000, opts.tunnel.settings.send_queue_bytes],
        "tun_txqueuelen": opts.tun_txqueuelen,
        "daemon_rt_priority": rt_priority,
        "busy_poll_us": opts.tunnel.busy_poll_us,
        "load_average_at_start": load_average,
        "client_per_syscall": client_per_call,
        "server_per_syscall": server_per_call,
        "client_daemon_stats": client_status["daemon"],
        "client_conn_stats": client_status["connections"][0]["stats"],
        "client_paths": client_status["connections"][0]["paths"],
        "server_daemon_stats": server_status["daemon"],
        "server_conn_stats": server_status["connections"][0]["stats"],
        "server_reorder": server_status["connections"][0]["reorder"],
    });
    report["goals"] = crate::bench_goals::judge(&report);
    Ok(report)
}
