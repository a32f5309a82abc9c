//! The tunnels operators would run instead of ours, in the benchmark's own
//! namespaces: wireguard-go over path 1, configured with `wg`.
//!
//! Install (not done by CI, to keep its time):
//! ```text
//! apt-get install --no-install-recommends wireguard-tools
//! GOBIN=/tmp/wgbin go install golang.zx2c4.com/wireguard@latest
//! install -m 755 /tmp/wgbin/wireguard /usr/local/bin/wireguard-go
//! ```
//! (`go install` names the binary after the module's last element.)

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use crate::netns::{Netns, Proc};
use crate::topo::{wait_for, Topology};

/// wireguard-go's inner addresses (a /24 of their own, apart from ours).
pub const WG_CLIENT_V4: &str = "10.77.0.1";
pub const WG_SERVER_V4: &str = "10.77.0.2";
const WG_PORT: &str = "51820";

/// `prog` on the PATH, as a full path.
fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join(prog))
        .find(|p| p.is_file())
}

/// wireguard-go (`MPDCCP_BENCH_WIREGUARD_GO` or the PATH) and `wg`, or
/// why the bench skips the comparison.
pub fn wireguard_go_tools() -> Result<(PathBuf, PathBuf), String> {
    let wggo = match std::env::var_os("MPDCCP_BENCH_WIREGUARD_GO") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        None => which("wireguard-go"),
    };
    tools_or_why(wggo, which("wg"))
}

/// Both tools, or which are missing and the install commands.
fn tools_or_why(wggo: Option<PathBuf>, wg: Option<PathBuf>) -> Result<(PathBuf, PathBuf), String> {
    match (wggo, wg) {
        (Some(a), Some(b)) => Ok((a, b)),
        (a, b) => Err(format!(
            "not installed ({}); install: apt-get install --no-install-recommends wireguard-tools; \
             GOBIN=/tmp/wgbin go install golang.zx2c4.com/wireguard@latest && \
             install -m 755 /tmp/wgbin/wireguard /usr/local/bin/wireguard-go",
            [(a.is_none(), "wireguard-go"), (b.is_none(), "wg")]
                .iter()
                .filter(|(m, _)| *m)
                .map(|(_, n)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// `wireguard-go --version`'s first line.
pub fn wireguard_go_version(wggo: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new(wggo)
        .arg("--version")
        .output()
        .ok()?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .trim()
            .to_owned(),
    )
}

/// The nice value of both tunnels in the comparison (ours and
/// wireguard-go), instead of the bench's `SCHED_FIFO`: under `chrt -f`
/// wireguard-go's Go runtime sometimes livelocks (its spinning threads at
/// a real-time priority starve the ones with work): in CI on 2026-11-29 a
/// one-stream TCP run through it carried 5.9 MB in its first second and
/// nothing in the next 21, wireguard-go ignored SIGTERM and iperf3's
/// server was not scheduled for 4.5 s at a time in a repetition. nice -20
/// keeps both tunnels ahead of iperf3 and the rest of the host without
/// that risk, and gives them the same scheduling.
pub const PEERS_NICE: i8 = -20;

/// Starts wireguard-go in the client and the server namespace, peered
/// over path 1 (endpoints the path's veth addresses), each at nice `nice`
/// (0 = unchanged; [`PEERS_NICE`] in the bench). Interface names carry the topology's prefix: the UAPI socket
/// (`/var/run/wireguard/NAME.sock`) is shared by all namespaces. Returns
/// the two processes' ids (server first) for the CPU figures.
pub fn start_wireguard_go(
    t: &mut Topology,
    wggo: &std::path::Path,
    wg: &std::path::Path,
    nice: i8,
) -> anyhow::Result<Vec<u32>> {
    let (ckey, cpub) = wg_keypair(wg, &t.dir.join("wg-client.key"))?;
    let (skey, spub) = wg_keypair(wg, &t.dir.join("wg-server.key"))?;
    let base = t.client.name().trim_end_matches('c').to_owned();
    let (cif, sif) = (format!("{base}wc"), format!("{base}ws"));
    anyhow::ensure!(cif.len() <= 15, "interface name {cif} too long");
    let path = t.paths[0].clone();
    let mut pids = Vec::new();
    for server in [true, false] {
        let peer = if server {
            WgPeer {
                ifname: &sif,
                key_file: &skey,
                peer_pub: &cpub,
                peer_ip: path.client_ip,
                own: WG_SERVER_V4,
                peer_inner: WG_CLIENT_V4,
            }
        } else {
            WgPeer {
                ifname: &cif,
                key_file: &ckey,
                peer_pub: &spub,
                peer_ip: path.server_ip,
                own: WG_CLIENT_V4,
                peer_inner: WG_SERVER_V4,
            }
        };
        let ns = if server { &t.server } else { &t.client };
        let pid = spawn_wireguard_go(ns, &mut t.procs, &t.dir, wggo, nice, peer.ifname)?;
        configure_wireguard_peer(ns, wg, &peer)?;
        pids.extend(pid);
    }
    // The handshake happens with the first packet; wait for it.
    wait_for(Duration::from_secs(10), || {
        t.client
            .output("ping", &["-c", "1", "-W", "1", WG_SERVER_V4])
            .is_ok()
    })
    .context("no ping through wireguard-go")?;
    Ok(pids)
}

/// A fresh private key written to `file` (`wg genkey`), and its public
/// key (`wg pubkey`).
fn wg_keypair(wg: &std::path::Path, file: &std::path::Path) -> anyhow::Result<(PathBuf, String)> {
    let out = std::process::Command::new(wg).arg("genkey").output()?;
    anyhow::ensure!(out.status.success(), "wg genkey failed");
    std::fs::write(file, &out.stdout)?;
    let mut child = std::process::Command::new(wg)
        .arg("pubkey")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    std::io::Write::write_all(child.stdin.as_mut().context("stdin")?, &out.stdout)?;
    let pubk = child.wait_with_output()?;
    Ok((
        file.to_path_buf(),
        String::from_utf8_lossy(&pubk.stdout).trim().to_owned(),
    ))
}

/// One side of the wireguard-go pair: its interface, key and its peer.
struct WgPeer<'a> {
    ifname: &'a str,
    key_file: &'a std::path::Path,
    peer_pub: &'a str,
    peer_ip: std::net::Ipv4Addr,
    own: &'a str,
    peer_inner: &'a str,
}

/// Starts wireguard-go for `ifname` in `ns` (at nice `nice`, 0 =
/// unchanged; kept in `procs`) and waits for its UAPI socket. Returns its
/// process id.
fn spawn_wireguard_go(
    ns: &Netns,
    procs: &mut Vec<Proc>,
    dir: &std::path::Path,
    wggo: &std::path::Path,
    nice: i8,
    ifname: &str,
) -> anyhow::Result<Option<u32>> {
    let wggo_s = wggo.to_string_lossy().into_owned();
    let nice_s = nice.to_string();
    let log = dir.join(format!("{ifname}.log"));
    // `-f`: stay in the foreground, so the process we start is the one
    // whose CPU we read (without it wireguard-go re-executes itself).
    let mut args: Vec<&str> = Vec::new();
    if nice != 0 {
        args.extend(["-n", &nice_s, &wggo_s]);
    }
    args.extend(["-f", ifname]);
    let prog = if nice != 0 { "nice" } else { wggo_s.as_str() };
    let p = ns.spawn_logged(prog, &args, &log)?;
    let pid = p.id();
    procs.push(p);
    let sock = PathBuf::from(format!("/var/run/wireguard/{ifname}.sock"));
    wait_for(Duration::from_secs(10), || sock.exists()).with_context(|| {
        format!(
            "wireguard-go did not create {}; log: {}",
            sock.display(),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })?;
    Ok(pid)
}

/// `wg set` for one side (key, port, its peer), then its inner address
/// and the link up.
fn configure_wireguard_peer(ns: &Netns, wg: &std::path::Path, peer: &WgPeer) -> anyhow::Result<()> {
    let wg_s = wg.to_string_lossy().into_owned();
    let keyf_s = peer.key_file.to_string_lossy().into_owned();
    let endpoint = format!("{}:{WG_PORT}", peer.peer_ip);
    let allowed = format!("{}/32", peer.peer_inner);
    ns.output(
        &wg_s,
        &[
            "set",
            peer.ifname,
            "listen-port",
            WG_PORT,
            "private-key",
            &keyf_s,
            "peer",
            peer.peer_pub,
            "allowed-ips",
            &allowed,
            "endpoint",
            &endpoint,
        ],
    )?;
    ns.ip(&[
        "addr",
        "add",
        &format!("{}/24", peer.own),
        "dev",
        peer.ifname,
    ])?;
    ns.ip(&["link", "set", peer.ifname, "up"])?;
    Ok(())
}

/// Tunnel cores per Gbit/s of TCP (1 stream): the tunnel processes' share
/// of a core over the received rate.
pub fn cores_per_gbps(run: &Value) -> Value {
    let cpu = run["daemon_cpu_share_of_one_core_during_tcp"].as_f64();
    let gbps = run["tcp_mbps"].as_f64().unwrap_or(0.0) / 1000.0;
    match cpu {
        Some(c) if gbps > 0.0 => json!(c / gbps),
        _ => Value::Null,
    }
}

/// The figures compared across tunnels: (JSON key or pointer, label,
/// higher is better).
pub const FIGURES: [(&str, &str, bool); 7] = [
    ("/tcp_mbps", "TCP 1 stream, Mbit/s", true),
    ("/tcp_retransmits", "TCP 1 stream, retransmits", false),
    ("/tcp_4_streams_mbps", "TCP 4 streams, Mbit/s", true),
    ("/udp_received_mbps", "UDP delivered, Mbit/s", true),
    ("/ping_rtt_ms_idle/p50", "ping idle p50, ms", false),
    (
        "/ping_rtt_ms_under_tcp_load/p50",
        "ping under TCP load p50, ms",
        false,
    ),
    (
        "/tunnel_cores_per_gbps_tcp",
        "tunnel cores per Gbit/s (TCP)",
        false,
    ),
];

/// ours / theirs for every figure of [`FIGURES`] (null where theirs is 0
/// or missing).
pub fn ratios(ours: &Value, theirs: &Value) -> Value {
    let mut m = serde_json::Map::new();
    for (ptr, _, _) in FIGURES {
        let a = ours.pointer(ptr).and_then(Value::as_f64);
        let b = theirs.pointer(ptr).and_then(Value::as_f64);
        let key = ptr.trim_start_matches('/').replace('/', "_");
        let r = match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => json!((a / b * 1000.0).round() / 1000.0),
            _ => Value::Null,
        };
        m.insert(key, r);
    }
    Value::Object(m)
}

/// Issue #22's goals against wireguard-go, judged from one `peers` section
/// (our one-path runs beside wireguard-go's, the like-for-like pair):
/// protected TCP ≥ 1.2 × and CPU per Gbit/s ≤ wireguard-go's, UDP lost
/// inside the tunnel < 1 % (protected at 1 Gbit/s offered, open at 2),
/// latency idle and under load no higher than wireguard-go's in every
/// mode. `met` is null where this run cannot judge the goal: no
/// wireguard-go, a mode not run, another UDP rate offered, or iperf3
/// sending under 95 % of the rate offered.
pub fn goals(peers: &Value) -> Value {
    let runs = &peers["runs"];
    // Ours ÷ wireguard-go's as [`ratios`] put them in the report (absent
    // without wireguard-go).
    let ratio = |run: &str, ptr: &str| {
        let key = ptr.trim_start_matches('/').replace('/', "_");
        peers["ratio_to_wireguard_go"][run][key.as_str()].as_f64()
    };
    let judged = |figure: String, value: Option<f64>, goal: &str, met: Option<bool>| json!({"figure": figure, "value": value, "goal": goal, "met": met});
    let mut out = Vec::new();
    let prot = "mpdccp_one_path_protected";
    let r = ratio(prot, "/tcp_mbps");
    out.push(judged(
        "protected, TCP 1 stream ÷ wireguard-go's".into(),
        r,
        ">= 1.2",
        r.map(|r| r >= 1.2),
    ));
    let r = ratio(prot, "/tunnel_cores_per_gbps_tcp");
    out.push(judged(
        "protected, tunnel cores per Gbit/s ÷ wireguard-go's".into(),
        r,
        "<= 1",
        r.map(|r| r <= 1.0),
    ));
    for (run, mode, mbps) in [
        (prot, "protected", 1000.0),
        ("mpdccp_one_path", "open", 2000.0),
    ] {
        let x = &runs[run];
        let lost = x["udp_lost_in_tunnel_percent"].as_f64();
        let offered = x["udp_offered_mbps"].as_f64();
        let sent = x["udp_sent_mbps"].as_f64().unwrap_or(0.0);
        let fair = offered == Some(mbps) && sent >= 0.95 * mbps;
        out.push(judged(
            format!(
                "{mode}, UDP 1200 B at {:.0} Gbit/s offered: lost inside the tunnel, %",
                mbps / 1000.0
            ),
            lost,
            "< 1",
            lost.filter(|_| fair).map(|l| l < 1.0),
        ));
    }
    for (run, mode) in [("mpdccp_one_path", "open"), (prot, "protected")] {
        for (ptr, what) in [
            ("/ping_rtt_ms_idle/p50", "ping idle p50"),
            ("/ping_rtt_ms_under_tcp_load/p50", "ping under TCP load p50"),
        ] {
            let r = ratio(run, ptr);
            out.push(judged(
                format!("{mode}, {what} ÷ wireguard-go's"),
                r,
                "<= 1",
                r.map(|r| r <= 1.0),
            ));
        }
    }
    Value::Array(out)
}

/// The tunnels of a report's `peers` section in table order: (name, run).
fn rows(peers: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    if let Some(m) = peers["runs"].as_object() {
        for (k, v) in m {
            out.push((k.clone(), v));
        }
    }
    out
}

fn cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}"),
        None => "-".into(),
    }
}

/// CSV of the `peers` section: one row per tunnel, one column per figure,
/// then ours / wireguard-go per figure for our rows.
pub fn csv(peers: &Value) -> String {
    let mut s = String::from("tunnel");
    for (_, label, _) in FIGURES {
        s.push_str(&format!(",{label}"));
    }
    for (_, label, _) in FIGURES {
        s.push_str(&format!(",ratio to wireguard-go: {label}"));
    }
    s.push('\n');
    for (name, run) in rows(peers) {
        s.push_str(&name);
        for (ptr, _, _) in FIGURES {
            let v = run.pointer(ptr).and_then(Value::as_f64);
            s.push_str(&format!(",{}", v.map_or(String::new(), |x| x.to_string())));
        }
        for (ptr, _, _) in FIGURES {
            let key = ptr.trim_start_matches('/').replace('/', "_");
            let v = peers["ratio_to_wireguard_go"][&name][&key].as_f64();
            s.push_str(&format!(",{}", v.map_or(String::new(), |x| x.to_string())));
        }
        s.push('\n');
    }
    s
}

/// The text table of the `peers` section: a column per tunnel, then
/// ours / wireguard-go for each of our one-path runs.
pub fn table(peers: &Value) -> String {
    let runs = rows(peers);
    let ours: Vec<&String> = runs
        .iter()
        .map(|(n, _)| n)
        .filter(|n| peers["ratio_to_wireguard_go"][n.as_str()].is_object())
        .collect();
    // Columns as wide as their names, two spaces apart.
    let mut heads: Vec<String> = runs.iter().map(|(n, _)| n.clone()).collect();
    heads.extend(ours.iter().map(|n| format!("{n}/wg-go")));
    let w: Vec<usize> = heads.iter().map(|h| h.len().max(8) + 2).collect();
    let mut s = format!(
        "peers over one path ({}):\n{:<32}",
        peers["setup"].as_str().unwrap_or(""),
        "figure"
    );
    for (h, w) in heads.iter().zip(&w) {
        s.push_str(&format!("{h:>w$}"));
    }
    s.push('\n');
    for (ptr, label, _) in FIGURES {
        s.push_str(&format!("{label:<32}"));
        let key = ptr.trim_start_matches('/').replace('/', "_");
        let cells = runs
            .iter()
            .map(|(_, run)| run.pointer(ptr).and_then(Value::as_f64))
            .chain(
                ours.iter()
                    .map(|n| peers["ratio_to_wireguard_go"][n.as_str()][&key].as_f64()),
            );
        for (c, w) in cells.zip(&w) {
            s.push_str(&format!("{:>w$}", cell(c)));
        }
        s.push('\n');
    }
    if let Some(why) = peers["wireguard_go_skipped"].as_str() {
        s.push_str(&format!("wireguard-go skipped: {why}\n"));
    }
    let goals = peers["goals_issue_22"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !goals.is_empty() {
        s.push_str("issue #22's goals (one path each):\n");
    }
    for g in goals {
        let verdict = match g["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged by this run",
        };
        s.push_str(&format!(
            "  {:<62} {:>8}  goal {:<6} {verdict}\n",
            g["figure"].as_str().unwrap_or(""),
            cell(g["value"].as_f64()),
            g["goal"].as_str().unwrap_or(""),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_22_goals_are_judged_only_where_the_run_can() {
        let run = |tcp: f64, cpu: f64, offered: f64, sent: f64, lost: f64, idle: f64, load: f64| {
            json!({"tcp_mbps": tcp, "tunnel_cores_per_gbps_tcp": cpu,
                   "udp_offered_mbps": offered, "udp_sent_mbps": sent,
                   "udp_lost_in_tunnel_percent": lost,
                   "ping_rtt_ms_idle": {"p50": idle}, "ping_rtt_ms_under_tcp_load": {"p50": load}})
        };
        let peers = json!({"runs": {
            // The quiet run of 2026-12-01 (README), protected at 1 Gbit/s.
            "mpdccp_one_path_protected": run(2724.0, 0.544, 1000.0, 956.0, 14.5, 0.156, 1.59),
            // iperf3 sent 1763 of 2000 Mbit/s: not judged.
            "mpdccp_one_path": run(3204.0, 0.410, 2000.0, 1763.0, 5.06, 0.205, 1.03),
            "wireguard_go": run(2424.0, 0.673, 2000.0, 1555.0, 0.0, 0.378, 1.32),
        }});
        let wg = &peers["runs"]["wireguard_go"];
        let ratio_to_wg = json!({
            "mpdccp_one_path_protected": ratios(&peers["runs"]["mpdccp_one_path_protected"], wg),
            "mpdccp_one_path": ratios(&peers["runs"]["mpdccp_one_path"], wg),
        });
        let g = goals(&json!({"runs": peers["runs"], "ratio_to_wireguard_go": ratio_to_wg}));
        let met = |prefix: &str| {
            g.as_array()
                .unwrap()
                .iter()
                .find(|x| x["figure"].as_str().unwrap().starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix}"))["met"]
                .clone()
        };
        assert_eq!(met("protected, TCP"), false, "2724 / 2424 = 1.12 < 1.2");
        assert_eq!(met("protected, tunnel cores"), true);
        assert_eq!(met("protected, UDP"), false, "956 of 1000 sent: judged");
        assert_eq!(
            met("open, UDP"),
            Value::Null,
            "1763 of 2000 sent: not judged"
        );
        assert_eq!(met("open, ping idle"), true);
        assert_eq!(met("protected, ping under TCP load"), false);
        // Without wireguard-go nothing relative is judged.
        let alone = json!({"runs": {"mpdccp_one_path_protected": peers["runs"]["mpdccp_one_path_protected"]}});
        let g = goals(&alone);
        assert_eq!(g[0]["met"], Value::Null);
    }

    #[test]
    fn ratios_divide_ours_by_theirs_and_null_on_zero() {
        let ours =
            json!({"tcp_mbps": 3000.0, "ping_rtt_ms_idle": {"p50": 0.4}, "udp_received_mbps": 5.0});
        let wg =
            json!({"tcp_mbps": 2000.0, "ping_rtt_ms_idle": {"p50": 0.8}, "udp_received_mbps": 0.0});
        let r = ratios(&ours, &wg);
        assert_eq!(r["tcp_mbps"], json!(1.5));
        assert_eq!(r["ping_rtt_ms_idle_p50"], json!(0.5));
        assert_eq!(r["udp_received_mbps"], Value::Null);
        assert_eq!(r["tcp_4_streams_mbps"], Value::Null);
    }

    #[test]
    fn a_missing_tool_is_named_with_the_install_commands() {
        let why = tools_or_why(None, Some("/usr/bin/wg".into())).unwrap_err();
        assert!(why.starts_with("not installed (wireguard-go)"), "{why}");
        assert!(
            why.contains("go install golang.zx2c4.com/wireguard@latest"),
            "{why}"
        );
        let why = tools_or_why(Some("/x/wireguard-go".into()), None).unwrap_err();
        assert!(why.starts_with("not installed (wg)"), "{why}");
        assert!(tools_or_why(Some("/a".into()), Some("/b".into())).is_ok());
    }

    #[test]
    fn cores_per_gbps_is_cpu_over_rate() {
        let run = json!({"tcp_mbps": 2000.0, "daemon_cpu_share_of_one_core_during_tcp": 1.5});
        assert_eq!(cores_per_gbps(&run), json!(0.75));
        let idle = json!({"tcp_mbps": 0.0, "daemon_cpu_share_of_one_core_during_tcp": 1.5});
        assert_eq!(cores_per_gbps(&idle), Value::Null);
    }

    #[test]
    fn csv_has_a_row_per_tunnel_with_its_ratio() {
        let peers = json!({
            "runs": {"mpdccp_one_path": {"tcp_mbps": 3000.0}, "wireguard_go": {"tcp_mbps": 2000.0}},
            "ratio_to_wireguard_go": {"mpdccp_one_path": {"tcp_mbps": 1.5}},
        });
        let c = csv(&peers);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].starts_with("mpdccp_one_path,3000,"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains(",1.5,"), "{}", lines[1]);
        assert!(lines[2].starts_with("wireguard_go,2000,"), "{}", lines[2]);
        let t = table(&peers);
        let head = t.lines().nth(1).unwrap();
        assert!(
            head.contains(" mpdccp_one_path  wireguard_go  mpdccp_one_path/wg-go"),
            "{t}"
        );
        assert!(
            t.lines().nth(2).unwrap().trim_end().ends_with("1.500"),
            "{t}"
        );
    }
}
