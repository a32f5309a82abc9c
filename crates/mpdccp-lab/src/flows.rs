//! Bulk flows iperf3 cannot make: QUIC with aioquic (a real QUIC stack)
//! and kernel MPTCP (the TCP reference on the same paths), driven by the
//! lab's script `flows/lab_flows.py` (Python 3; QUIC needs `pip install
//! aioquic`).
//!
//! The script's client runs in the client's namespace and connects to its
//! server in the server's; the direction says who sends. Each end reports
//! its received byte count every 100 ms with `CLOCK_MONOTONIC` time stamps
//! (shared by all namespaces), and the QUIC sender its smoothed RTT, so the
//! receiver's counts are what the application got, on the testbed's clock.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_model::results::Recorder;
use mpdccp_proto::Instant;
use serde_json::Value;

use crate::netns::{Netns, Proc};
use crate::topo::Topology;

/// The script, written into each topology's directory when first used.
const SCRIPT: &str = include_str!("../flows/lab_flows.py");

/// The Python interpreter the script runs with.
pub const PYTHON: &str = "python3";

/// The endpoints stand for hosts with a CPU of their own. On the shared,
/// loaded 2-core machine (load 16–18) aioquic at normal priority carried
/// 10 of 20 Mbit/s over one path alone, and 8 at `nice -n -10`: its pacer
/// sends at most 16 packets per timer wake-up, and late wake-ups cap the
/// rate. So they run under `SCHED_FIFO` 2 (`chrt`), below the daemons (5)
/// and the emulators (10), as the daemons do (`topo`).
const FIFO_PRIO: &str = "2";

/// Writes the script into `dir` (once) and returns its path.
fn script(dir: &Path) -> anyhow::Result<PathBuf> {
    let p = dir.join("lab_flows.py");
    if !p.exists() {
        std::fs::write(&p, SCRIPT).with_context(|| format!("{}", p.display()))?;
    }
    Ok(p)
}

/// Whether aioquic can be imported (the QUIC flows need it).
pub fn have_aioquic() -> bool {
    std::process::Command::new(PYTHON)
        .args(["-c", "import aioquic"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One end's report: received bytes over time, the sender's RTT estimate.
#[derive(Clone, Debug, Default)]
pub struct FlowReport {
    /// `(CLOCK_MONOTONIC s, cumulative bytes received)`, every 100 ms.
    pub recv: Vec<(f64, u64)>,
    /// `(CLOCK_MONOTONIC s, smoothed RTT ms)` of the sender (QUIC only).
    pub rtt: Vec<(f64, f64)>,
    /// `(CLOCK_MONOTONIC s, congestion window bytes)` of the sender (QUIC).
    pub cwnd: Vec<(f64, f64)>,
    /// `(CLOCK_MONOTONIC s, packets declared lost so far)` of the sender
    /// (QUIC: RFC 9002 §6.1 loss detection, spurious losses included, so a
    /// tunnel's reordering shows here as well as its drops).
    pub lost: Vec<(f64, f64)>,
    /// The sender's totals: packets declared lost, and loss events
    /// (acknowledgements that declared some lost).
    pub lost_pkts: Option<u64>,
    pub loss_events: Option<u64>,
    /// The receiver's namespace: UDP datagrams its kernel dropped on a full
    /// socket receive buffer (a burst the application did not read in time).
    pub rx_udp_rcvbuf_errors: Option<u64>,
    /// The receiver's socket receive buffer as the kernel granted it.
    pub rx_rcvbuf_bytes: Option<u64>,
    pub sent_bytes: u64,
}

impl FlowReport {
    fn parse(text: &str) -> anyhow::Result<Value> {
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .context("no report")?;
        Ok(serde_json::from_str(line)?)
    }

    /// The receiver's counts and the sender's RTT from the two ends' reports.
    fn of(receiver: &Value, sender: &Value) -> FlowReport {
        let pairs = |v: &Value| -> Vec<(f64, f64)> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
                .collect()
        };
        FlowReport {
            recv: pairs(&receiver["recv"])
                .into_iter()
                .map(|(t, b)| (t, b as u64))
                .collect(),
            rtt: pairs(&sender["rtt"]),
            cwnd: pairs(&sender["cwnd"]),
            lost: pairs(&sender["lost"]),
            lost_pkts: sender["lost_pkts"].as_u64(),
            loss_events: sender["loss_events"].as_u64(),
            rx_udp_rcvbuf_errors: receiver["udp_rcvbuf_errors"].as_u64(),
            rx_rcvbuf_bytes: receiver["rcvbuf_bytes"].as_u64(),
            sent_bytes: sender["sent_bytes"].as_u64().unwrap_or(0),
        }
    }

    /// Bytes received in `[from, to)` (CLOCK_MONOTONIC s), from the samples
    /// nearest inside the window, as Mbit/s over the samples' span.
    pub fn mbps_between(&self, from: f64, to: f64) -> f64 {
        let inside: Vec<&(f64, u64)> = self
            .recv
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .collect();
        match (inside.first(), inside.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) as f64 * 8.0 / (b.0 - a.0) / 1e6,
            _ => 0.0,
        }
    }
}

/// A QUIC flow under way (see [`start_quic`]).
pub struct QuicRun {
    server: Proc,
    server_out: PathBuf,
    client: JoinHandle<anyhow::Result<String>>,
    up: bool,
}

/// The UDP payload of a QUIC packet that is `packet_bytes` long as an IPv4
/// packet (aioquic's `max_datagram_size`).
fn quic_datagram_bytes(packet_bytes: usize) -> usize {
    packet_bytes.saturating_sub(28).max(1200)
}

/// Starts an aioquic server on `server` in the server's namespace now, and
/// its client in the client's at `start` for `secs`: the client sends when
/// `up`, else the server does. Flow `i` names the output files.
#[allow(clippy::too_many_arguments)]
pub fn start_quic(
    topo: &Topology,
    i: usize,
    server: SocketAddr,
    up: bool,
    packet_bytes: usize,
    start: Instant,
    secs: f64,
    abort: Arc<AtomicBool>,
) -> anyhow::Result<QuicRun> {
    if !have_aioquic() {
        bail!("QUIC flows need aioquic: pip install aioquic");
    }
    let py = script(&topo.dir)?.to_string_lossy().into_owned();
    let out = topo.dir.join(format!("quic{i}-server.json"));
    let err = topo.dir.join(format!("quic{i}-server.err"));
    let dgram = quic_datagram_bytes(packet_bytes).to_string();
    let lead = (start
        .as_nanos()
        .saturating_sub(mpdccp_net::clock::now().as_nanos())) as f64
        / 1e9;
    let child = Netns::command_in(topo.server.name(), "chrt")
        .args([
            "-f",
            FIFO_PRIO,
            PYTHON,
            &py,
            "quic-server",
            "--listen",
            &server.to_string(),
            "--timeout",
            &format!("{:.1}", 10.0 + lead),
            "--secs-max",
            &format!("{secs:.1}"),
            "--datagram-bytes",
            &dgram,
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out)?)
        .stderr(std::fs::File::create(&err)?)
        .spawn()
        .context("cannot start python3 (the QUIC server)")?;
    let server_proc = Proc::new(format!("quic-server{i}"), child);
    let ns = topo.client.name().to_string();
    let args: Vec<String> = vec![
        py,
        "quic-client".into(),
        "--connect".into(),
        server.to_string(),
        "--direction".into(),
        if up { "up" } else { "down" }.into(),
        "--secs".into(),
        format!("{secs:.2}"),
        "--datagram-bytes".into(),
        dgram,
    ];
    let client = std::thread::spawn(move || -> anyhow::Result<String> {
        // The server's start (a Python interpreter) takes a moment; the
        // client starts at the flow's start time.
        loop {
            if abort.load(std::sync::atomic::Ordering::Relaxed) {
                bail!("interrupted");
            }
            let now = mpdccp_net::clock::now();
            if now >= start {
                break;
            }
            std::thread::sleep((start - now).min(Duration::from_millis(50)));
        }
        run_client(&ns, secs, &args, "QUIC")
    });
    Ok(QuicRun {
        server: server_proc,
        server_out: out,
        client,
        up,
    })
}

impl QuicRun {
    /// Waits for both ends and returns the receiver's counts with the
    /// sender's RTT.
    pub fn finish(mut self) -> anyhow::Result<FlowReport> {
        let client_out = self
            .client
            .join()
            .map_err(|_| anyhow::anyhow!("QUIC client thread panicked"))??;
        self.server.wait_timeout(Duration::from_secs(5));
        let server_out = std::fs::read_to_string(&self.server_out).unwrap_or_default();
        let c = FlowReport::parse(&client_out).context("QUIC client report")?;
        let s = FlowReport::parse(&server_out).with_context(|| {
            let err =
                std::fs::read_to_string(self.server_out.with_extension("err")).unwrap_or_default();
            format!("QUIC server report; its stderr: {}", err.trim())
        })?;
        Ok(if self.up {
            FlowReport::of(&s, &c)
        } else {
            FlowReport::of(&c, &s)
        })
    }
}

/// Records a QUIC flow's deliveries: each 100 ms sample's new stream bytes
/// as delivered packets of a full packet's payload (application bytes, as
/// the testbed counts iperf3's TCP), the sender's SRTT / 2 as one-way delay
/// (QUIC reports no one-way delay), and the packets its loss detection
/// declared lost in each sample (as the simulator's QUIC counts them).
pub fn record_quic(
    rec: &mut Recorder,
    flow: usize,
    packet_bytes: usize,
    r: &FlowReport,
    rel: impl Fn(Instant) -> Instant,
) {
    let payload = quic_payload_bytes(packet_bytes);
    let mut prev = r.recv.first().map_or(0, |s| s.1);
    for &(t, cum) in r.recv.iter().skip(1) {
        let new = cum.saturating_sub(prev);
        prev = cum;
        let at = rel(Instant::from_nanos((t * 1e9) as u64));
        let srtt = r
            .rtt
            .iter()
            .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
            .map_or(0.0, |x| x.1);
        let owd = Duration::from_secs_f64(srtt / 2e3);
        let mut left = new as usize;
        while left > 0 {
            let b = left.min(payload);
            rec.flow_sent(flow, at, b);
            rec.flow_delivered(flow, at, b, owd, false);
            left -= b;
        }
    }
    let mut prev = 0.0;
    for &(t, cum) in &r.lost {
        let new = (cum - prev).max(0.0) as u64;
        prev = cum;
        if new > 0 {
            rec.flow_lost(flow, rel(Instant::from_nanos((t * 1e9) as u64)), new);
        }
    }
}

/// What a QUIC sender reported of its congestion control, for the run's
/// `meta.flows` (the simulator's QUIC keys where they mean the same).
pub fn quic_meta(r: &FlowReport) -> Value {
    let mut cwnd: Vec<f64> = r.cwnd.iter().map(|c| c.1).collect();
    cwnd.sort_by(f64::total_cmp);
    let pct = |q: f64| (!cwnd.is_empty()).then(|| cwnd[((cwnd.len() - 1) as f64 * q) as usize]);
    serde_json::json!({
        "quic_lost_pkts": r.lost_pkts,
        "quic_loss_events": r.loss_events,
        "receiver_udp_rcvbuf_errors": r.rx_udp_rcvbuf_errors,
        "receiver_rcvbuf_bytes": r.rx_rcvbuf_bytes,
        "quic_cwnd_bytes_p50": pct(0.5),
        "quic_cwnd_bytes_max": cwnd.last(),
    })
}

/// Stream payload of a full aioquic 1-RTT packet `packet_bytes` long: less
/// IPv4 + UDP (28), the short header (1 + 8-byte connection ID + up to 4
/// packet-number bytes), the AEAD tag (16, RFC 9001 §5.3) and a STREAM
/// frame's header (type, stream ID, offset and length: up to 12 here).
pub fn quic_payload_bytes(packet_bytes: usize) -> usize {
    quic_datagram_bytes(packet_bytes).saturating_sub(1 + 8 + 4 + 16 + 12)
}

/// Kernel TCP bulk transfer with the lab's script (`mptcp`: an
/// IPPROTO_MPTCP socket), from the client's namespace to `server` (`up`)
/// or back, for `secs`, with the controller `tcp_cc` (the system's
/// default when `None`); returns the receiver's counts.
pub fn run_tcp_bulk(
    topo: &Topology,
    server: SocketAddr,
    up: bool,
    secs: f64,
    mptcp: bool,
    tcp_cc: Option<&str>,
) -> anyhow::Result<FlowReport> {
    let py = script(&topo.dir)?.to_string_lossy().into_owned();
    let out = topo.dir.join("tcp-server.json");
    let mut sargs = vec![
        py.clone(),
        "tcp-server".into(),
        "--listen".into(),
        server.to_string(),
    ];
    let mut cargs = vec![
        py,
        "tcp-client".into(),
        "--connect".into(),
        server.to_string(),
        "--direction".into(),
        if up { "up" } else { "down" }.into(),
        "--secs".into(),
        format!("{secs:.2}"),
    ];
    if mptcp {
        sargs.push("--mptcp".into());
        cargs.push("--mptcp".into());
    }
    if let Some(cc) = tcp_cc {
        for a in [&mut sargs, &mut cargs] {
            a.extend(["--tcp-cc".into(), cc.into()]);
        }
    }
    let child = Netns::command_in(topo.server.name(), "chrt")
        .args(["-f", FIFO_PRIO, PYTHON])
        .args(&sargs)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out)?)
        .stderr(std::fs::File::create(out.with_extension("err"))?)
        .spawn()
        .context("cannot start python3 (the TCP server)")?;
    let mut srv = Proc::new("tcp-server".into(), child);
    std::thread::sleep(Duration::from_millis(500));
    let c = run_client(topo.client.name(), secs, &cargs, "TCP")?;
    srv.wait_timeout(Duration::from_secs(5));
    let client = FlowReport::parse(&c).context("TCP client")?;
    let server = FlowReport::parse(&std::fs::read_to_string(&out).unwrap_or_default())
        .context("TCP server report")?;
    Ok(if up {
        FlowReport::of(&server, &client)
    } else {
        FlowReport::of(&client, &server)
    })
}

/// Runs the flow script's client side in namespace `ns` under SCHED_FIFO
/// (killed 30 s after its planned end) and returns its report (stdout).
fn run_client(ns: &str, secs: f64, args: &[String], what: &str) -> anyhow::Result<String> {
    let out = Netns::command_in(ns, "timeout")
        .args([
            "-k",
            "2",
            &format!("{}", (secs + 30.0).ceil() as u64),
            "chrt",
            "-f",
            FIFO_PRIO,
            PYTHON,
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run python3 (the {what} client)"))?;
    if !out.status.success() {
        bail!(
            "{what} client failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_receivers_counts_and_the_senders_rtt_make_the_report() {
        let rx = json!({"recv": [[10.0, 0], [10.1, 125000], [11.0, 1250000]], "rtt": []});
        let tx = json!({"recv": [], "rtt": [[10.05, 40.0]], "sent_bytes": 2000000});
        let r = FlowReport::of(&rx, &tx);
        assert_eq!(r.recv.len(), 3);
        assert_eq!(r.rtt, vec![(10.05, 40.0)]);
        // 1 125 000 bytes in 0.9 s = 10 Mbit/s.
        assert!((r.mbps_between(10.05, 11.0) - 10.0).abs() < 1e-9);
        assert_eq!(r.mbps_between(12.0, 13.0), 0.0);
    }

    #[test]
    fn the_senders_losses_land_in_the_sample_that_declared_them() {
        let rx = json!({"recv": [[0.0, 0], [0.1, 10000], [0.2, 20000]],
                        "udp_rcvbuf_errors": 7, "rcvbuf_bytes": 8388608});
        let tx = json!({"lost": [[0.05, 0], [0.15, 7], [0.25, 7]], "lost_pkts": 7,
                        "loss_events": 2, "cwnd": [[0.05, 1000.0], [0.15, 4000.0], [0.25, 2000.0]]});
        let r = FlowReport::of(&rx, &tx);
        let sc = mpdccp_model::scenario::Scenario {
            flow: vec![mpdccp_model::scenario::FlowSpec::default()],
            duration_s: 1.0,
            ..Default::default()
        };
        let mut rec = Recorder::new(&sc);
        record_quic(&mut rec, 0, 1250, &r, |t| t);
        let (s, _) = rec.finish(Default::default());
        assert_eq!(s.flows[0].lost_pkts, 7);
        let m = quic_meta(&r);
        assert_eq!(m["quic_lost_pkts"], 7);
        assert_eq!(m["quic_loss_events"], 2);
        assert_eq!(m["receiver_udp_rcvbuf_errors"], 7);
        assert_eq!(m["receiver_rcvbuf_bytes"], 8388608);
        assert_eq!(m["quic_cwnd_bytes_p50"], 2000.0);
        assert_eq!(m["quic_cwnd_bytes_max"], 4000.0);
    }

    #[test]
    fn a_1250_byte_quic_packet_carries_less_than_its_udp_payload() {
        assert_eq!(quic_datagram_bytes(1250), 1222);
        assert_eq!(quic_payload_bytes(1250), 1222 - 41);
    }
}
