//! Operations of the daemons, end to end between network namespaces:
//! SIGTERM closes gracefully (MP_CLOSE reaches the peer) within the 3 s
//! bound, `mpdccp status --close` does the same over the control socket,
//! the Prometheus endpoint answers with valid OpenMetrics text whose numbers
//! agree with `mpdccp status --json`, and traffic flows downstream (server
//! to client) as well as upstream.
//!
//! Needs root. Without it each test prints a skip notice, or fails when
//! `CI` is set. The tests run one at a time (a lock) to keep timing
//! meaningful.

use crate::support::exe;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use mpdccp_lab::netns::{require_root, spawn_in_netns};
use mpdccp_lab::probe;
use mpdccp_lab::topo::{
    wait_for, Topology, TunnelOpts, CLIENT_TUN_V4, CLIENT_TUN_V6, SERVER_TUN_V4,
};
use serde_json::Value;

fn tunnel() -> Topology {
    let mut t = Topology::emulated(exe(), 2, 5, 50).expect("topology");
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel up on both paths");
    t
}

/// `Topology::start_tunnel` pushes the server's process, then the client's.
fn daemon_index(t: &Topology, server: bool) -> usize {
    t.procs.len() - if server { 2 } else { 1 }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(u64::MAX)
}

/// SIGTERM to the client: it sends MP_CLOSE on every subflow, the server
/// closes the connection ("closed by peer", the reason only MP_CLOSE with
/// the right key sets), and the client exits 0 within the 3 s bound.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn sigterm_closes_gracefully_and_the_server_forgets_the_connection() {
    let _g = crate::support::serial();
    if !require_root("sigterm_closes_gracefully_and_the_server_forgets_the_connection") {
        return;
    }
    let mut t = tunnel();
    let before = t.status(true).expect("server status");
    assert_eq!(before["connections"].as_array().map(|a| a.len()), Some(1));
    let i = daemon_index(&t, false);
    let mut client = t.procs.remove(i);
    let t0 = StdInstant::now();
    let st = client.stop().expect("client exit status");
    let took = t0.elapsed();
    assert!(
        st.success(),
        "client exit status {st:?}\n{}",
        t.log_tail(false)
    );
    assert!(
        took < Duration::from_secs(3),
        "client took {took:?} to exit"
    );
    wait_for(Duration::from_secs(2), || {
        t.status(true)
            .is_ok_and(|s| s["connections"].as_array().is_some_and(|a| a.is_empty()))
    })
    .unwrap_or_else(|_| panic!("server kept the connection: {}", t.log_tail(true)));
    let after = t.status(true).expect("server status");
    assert_eq!(n(&after["endpoint"]["closed_connections"]), 1, "{after}");
    let log = t.log_tail(true);
    assert!(
        log.contains("closed by peer"),
        "no MP_CLOSE at the server:\n{log}"
    );
    assert!(
        t.log_tail(false).contains("closing gracefully (MP_CLOSE)"),
        "{}",
        t.log_tail(false)
    );
    eprintln!("client SIGTERM → exit 0 in {took:?}; server: connection closed by peer");
}

/// `mpdccp status --close` on the server's control socket: the server
/// answers, closes every connection with MP_CLOSE (the client sees "closed
/// by peer" and starts reconnecting) and exits 0 within the 3 s bound.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn status_close_shuts_the_server_down_gracefully() {
    let _g = crate::support::serial();
    if !require_root("status_close_shuts_the_server_down_gracefully") {
        return;
    }
    let mut t = tunnel();
    let sock = t.control_socket(true);
    let t0 = StdInstant::now();
    let out = std::process::Command::new(exe())
        .args(["status", "--socket"])
        .arg(&sock)
        .arg("--close")
        .output()
        .expect("mpdccp status --close");
    assert!(out.status.success(), "{out:?}");
    let reply: Value = serde_json::from_slice(&out.stdout).expect("JSON reply");
    assert_eq!(reply["closing"], true, "{reply}");
    let i = daemon_index(&t, true);
    let st = t.procs[i]
        .wait_timeout(Duration::from_secs(4))
        .expect("server exit status");
    let took = t0.elapsed();
    assert!(st.success(), "server exit {st:?}\n{}", t.log_tail(true));
    assert!(took < Duration::from_millis(3500), "server took {took:?}");
    assert!(!sock.exists(), "control socket removed on exit");
    wait_for(Duration::from_secs(2), || {
        t.log_tail(false).contains("closed by peer")
    })
    .unwrap_or_else(|_| panic!("client did not see MP_CLOSE:\n{}", t.log_tail(false)));
    eprintln!("status --close → server exit 0 in {took:?}; client: closed by peer");
}

/// One Prometheus sample.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses OpenMetrics 1.0 text strictly enough to catch what a Prometheus
/// server rejects: metric and label names, quoting and escapes, numbers, a
/// `# HELP` and a `# TYPE` line before a family's samples, families
/// contiguous, a counter's samples named `<family>_total`, `# EOF` last.
/// Samples are returned under their exposed names.
fn parse_exposition(text: &str) -> Result<Vec<Sample>, String> {
    let valid_name = |s: &str| {
        !s.is_empty()
            && s.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut typed: BTreeSet<String> = BTreeSet::new();
    let mut helped: BTreeSet<String> = BTreeSet::new();
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut counter = false;
    let mut out = Vec::new();
    if !text.ends_with("# EOF\n") {
        return Err("no `# EOF` at the end".into());
    }
    for (ln, line) in text.lines().enumerate() {
        let err = |m: &str| Err(format!("line {}: {m}: {line}", ln + 1));
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            if !valid_name(name) || !helped.insert(name.to_string()) {
                return err("bad or second HELP");
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let (Some(name), Some(ty), None) = (it.next(), it.next(), it.next()) else {
                return err("bad TYPE");
            };
            if !valid_name(name) || !["gauge", "counter", "untyped"].contains(&ty) {
                return err("bad TYPE");
            }
            if !typed.insert(name.to_string()) {
                return err("second TYPE for a family");
            }
            if !helped.contains(name) {
                return err("TYPE without HELP");
            }
            counter = ty == "counter";
            if let Some(c) = current.replace(name.to_string()) {
                finished.insert(c);
            }
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        if !valid_name(name) {
            return err("bad metric name");
        }
        let family = if counter {
            match name.strip_suffix("_total") {
                Some(f) => f,
                None => return err("counter sample without _total"),
            }
        } else {
            name
        };
        if current.as_deref() != Some(family) || finished.contains(family) {
            return err("sample outside its family's TYPE block");
        }
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(r) = rest.strip_prefix('{') {
            let mut r = r;
            loop {
                if let Some(r2) = r.strip_prefix('}') {
                    r = r2;
                    break;
                }
                let Some(eq) = r.find('=') else {
                    return err("label without =");
                };
                let key = &r[..eq];
                if !valid_name(key) || key.contains(':') {
                    return err("bad label name");
                }
                let Some(v) = r[eq + 1..].strip_prefix('"') else {
                    return err("label value not quoted");
                };
                let mut val = String::new();
                let mut chars = v.char_indices();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some((_, 'n')) => val.push('\n'),
                            Some((_, '\\')) => val.push('\\'),
                            Some((_, '"')) => val.push('"'),
                            _ => return err("bad escape"),
                        },
                        '"' => {
                            end = Some(i);
                            break;
                        }
                        c => val.push(c),
                    }
                }
                let Some(end) = end else {
                    return err("unterminated label value");
                };
                labels.insert(key.to_string(), val);
                r = &v[end + 1..];
                r = r.strip_prefix(',').unwrap_or(r);
            }
            rest = r;
        }
        let Some(v) = rest.strip_prefix(' ') else {
            return err("no value");
        };
        let value = match v {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => match v.parse::<f64>() {
                Ok(x) => x,
                Err(_) => return err("bad value"),
            },
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(out)
}

/// GET on the daemon's Prometheus endpoint, from inside its namespace.
fn scrape(ns: &str, port: u16) -> String {
    spawn_in_netns(ns, move || {
        let mut s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    })
    .join()
    .expect("scrape thread")
    .expect("scrape")
}

fn body(resp: &str) -> &str {
    assert!(resp.starts_with("HTTP/1.0 200"), "{resp}");
    assert!(
        resp.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{resp}"
    );
    resp.split_once("\r\n\r\n").expect("headers end").1
}

/// Restarts both daemons with `[ops] prometheus = "127.0.0.1:PORT"` added
/// to the configs `start_tunnel` wrote.
fn restart_with_prometheus(t: &mut Topology, port: u16) {
    // The client is the last process, the server the one before it.
    for server in [false, true] {
        let mut p = t.procs.pop().expect("daemon process");
        let st = p.stop();
        assert!(st.is_some_and(|s| s.success()), "{st:?}");
        let f = t
            .dir
            .join(if server { "server.toml" } else { "client.toml" });
        let c = std::fs::read_to_string(&f).expect("config");
        let c = c.replacen(
            "[ops]\n",
            &format!("[ops]\nprometheus = \"127.0.0.1:{port}\"\n"),
            1,
        );
        std::fs::write(&f, c).expect("config");
    }
    let exe_s = exe().to_string_lossy().into_owned();
    for server in [true, false] {
        let f = t
            .dir
            .join(if server { "server.toml" } else { "client.toml" });
        let f = f.to_string_lossy().into_owned();
        let role = if server { "server" } else { "client" };
        let ns = if server { &t.server } else { &t.client };
        let p = ns
            .spawn_logged(
                "env",
                &["RUST_LOG=info", &exe_s, role, "--config", &f],
                &t.log_file(server),
            )
            .expect("daemon");
        t.procs.push(p);
        if server {
            wait_for(Duration::from_secs(10), || t.control_socket(true).exists())
                .expect("server control socket");
        }
    }
    wait_for(Duration::from_secs(15), || t.established_paths() >= 2)
        .unwrap_or_else(|_| panic!("tunnel after restart: {}", t.log_tail(false)));
}

/// Every integer counter of the status document with the Prometheus
/// sample it must match: (metric, labels) → JSON value.
fn counters(st: &Value) -> Vec<(String, BTreeMap<String, String>, u64)> {
    let mut v = Vec::new();
    let lbl = |pairs: &[(&str, String)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    for (k, x) in st["daemon"].as_object().into_iter().flatten() {
        if let Some(x) = x.as_u64() {
            v.push((format!("mpdccp_daemon_{k}_total"), BTreeMap::new(), x));
        }
    }
    for c in st["connections"].as_array().into_iter().flatten() {
        let conn = c["handle"].to_string();
        for (k, x) in c["stats"].as_object().into_iter().flatten() {
            if let Some(x) = x.as_u64() {
                v.push((
                    format!("mpdccp_conn_{k}_total"),
                    lbl(&[("conn", conn.clone())]),
                    x,
                ));
            }
        }
        // Paths are series by stable name; a name's subflows are summed.
        let mut sums: BTreeMap<(String, String), u64> = BTreeMap::new();
        for p in c["paths"].as_array().into_iter().flatten() {
            let name = p["name"].as_str().expect("every path is named").to_string();
            for (k, x) in p["stats"].as_object().into_iter().flatten() {
                if let Some(x) = x.as_u64() {
                    *sums.entry((name.clone(), k.clone())).or_default() += x;
                }
            }
        }
        for ((name, k), x) in sums {
            let l = lbl(&[("conn", conn.clone()), ("name", name)]);
            v.push((format!("mpdccp_path_{k}_total"), l, x));
        }
    }
    v
}

/// The Prometheus endpoint of both daemons, after traffic: valid text
/// OpenMetrics (names, `# HELP`/`# TYPE` per family, counters as
/// `_total`, per-path labels), and every
/// counter of `mpdccp status --json` taken between two scrapes lies
/// between the two scraped values (counters only grow).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn prometheus_endpoint_is_valid_and_agrees_with_status_json() {
    const PORT: u16 = 9464;
    let _g = crate::support::serial();
    if !require_root("prometheus_endpoint_is_valid_and_agrees_with_status_json") {
        return;
    }
    let mut t = tunnel();
    restart_with_prometheus(&mut t, PORT);
    let out = t
        .client
        .output(
            "ping",
            &["-c", "20", "-i", "0.02", "-q", &SERVER_TUN_V4.to_string()],
        )
        .expect("ping");
    assert!(out.contains(" 0% packet loss"), "{out}");
    for server in [false, true] {
        let ns = if server {
            t.server.name()
        } else {
            t.client.name()
        }
        .to_string();
        let first = parse_exposition(body(&scrape(&ns, PORT))).expect("valid exposition");
        let st = t.status(server).expect("status --json");
        let second = parse_exposition(body(&scrape(&ns, PORT))).expect("valid exposition");
        let find = |s: &[Sample], name: &str, l: &BTreeMap<String, String>| {
            s.iter()
                .find(|x| x.name == name && &x.labels == l)
                .map(|x| x.value)
        };
        let cs = counters(&st);
        assert!(cs.len() > 60, "{} counters", cs.len());
        for (name, l, json) in &cs {
            let a = find(&first, name, l).unwrap_or_else(|| panic!("{name}{l:?} missing"));
            let b = find(&second, name, l).unwrap_or_else(|| panic!("{name}{l:?} missing"));
            let j = *json as f64;
            assert!(
                a <= j && j <= b,
                "{name}{l:?}: scrape {a}, json {j}, scrape {b}"
            );
        }
        // Per-path labels: one `mpdccp_path_cwnd_pkts` per path name of
        // the JSON (the client's configured names, the server's client
        // addresses), never a subflow id.
        let paths: BTreeSet<String> = st["connections"][0]["paths"]
            .as_array()
            .expect("paths")
            .iter()
            .map(|p| p["name"].as_str().expect("named").to_string())
            .collect();
        let prom_paths: BTreeSet<String> = second
            .iter()
            .filter(|s| s.name == "mpdccp_path_cwnd_pkts")
            .filter_map(|s| s.labels.get("name").cloned())
            .collect();
        assert_eq!(paths, prom_paths);
        assert_eq!(paths.len(), 2);
        assert!(!second.iter().any(|s| s.labels.contains_key("path")));
        // The peer of the connection: one remote address per path.
        let remotes = st["connections"][0]["peer"]["remotes"]
            .as_array()
            .expect("peer remotes");
        assert_eq!(remotes.len(), 2, "{}", st["connections"][0]["peer"]);
        if !server {
            // The client names its paths after the configured interfaces.
            let names: BTreeSet<&str> = second
                .iter()
                .filter(|s| s.name == "mpdccp_path_active")
                .filter_map(|s| s.labels.get("name").map(|x| x.as_str()))
                .collect();
            let ifaces: BTreeSet<&str> = t.paths.iter().map(|p| p.iface.as_str()).collect();
            assert_eq!(names, ifaces);
        }
        let delivered = find(
            &second,
            "mpdccp_conn_delivered_pkts_total",
            &BTreeMap::from([(
                "conn".to_string(),
                st["connections"][0]["handle"].to_string(),
            )]),
        )
        .expect("delivered_pkts");
        assert!(delivered >= 20.0, "{delivered}");
        eprintln!(
            "{}: {} samples, {} counters cross-checked against status --json",
            if server { "server" } else { "client" },
            second.len(),
            cs.len()
        );
    }
}

/// Server → client through the tunnel: ping (IPv4 and IPv6) from the
/// server's namespace, and a probe stream downstream delivered exactly once.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn downstream_ping_and_probe_stream_exactly_once() {
    let _g = crate::support::serial();
    if !require_root("downstream_ping_and_probe_stream_exactly_once") {
        return;
    }
    let t = tunnel();
    for dst in [CLIENT_TUN_V4.to_string(), CLIENT_TUN_V6.to_string()] {
        let out = t
            .server
            .output("ping", &["-c", "10", "-i", "0.05", "-W", "2", "-q", &dst])
            .expect("ping from the server");
        assert!(out.contains(" 0% packet loss"), "{dst}: {out}");
    }
    let (stream, _) = t
        .start_probe_stream(true, 8_000_000, 3.0, 9005)
        .expect("downstream probe stream");
    let (log, arr) = stream
        .finish(Duration::from_millis(300))
        .expect("downstream probe stream");
    let tally = probe::tally(&arr, 1, log.sent.len() as u64);
    assert!(log.sent.len() > 2500, "sent {}", log.sent.len());
    assert_eq!(tally.duplicates, 0, "{tally:?}");
    assert_eq!(tally.lost, 0, "{tally:?}");
    assert_eq!(tally.delivered, log.sent.len() as u64);
    let st = t.status(true).expect("server status");
    let sent: u64 = st["connections"][0]["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .map(|p| n(&p["stats"]["tx_data_pkts"]))
        .sum();
    assert!(
        sent >= log.sent.len() as u64,
        "server sent {sent} data packets"
    );
    eprintln!(
        "downstream: {} probes delivered exactly once ({} out of order)",
        tally.delivered, tally.out_of_order
    );
    // The human-readable status of both ends: one row per path, lined up.
    for server in [false, true] {
        let out = std::process::Command::new(exe())
            .args(["status", "--socket"])
            .arg(t.control_socket(server))
            .output()
            .expect("mpdccp status");
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("connection 0: established, multipath"),
            "{text}"
        );
        let rows: Vec<&str> = text.lines().filter(|l| l.contains(" Active ")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert_eq!(rows[0].len(), rows[1].len(), "columns line up:\n{text}");
        if !server {
            for p in &t.paths {
                assert!(text.contains(&p.iface), "{text}");
            }
        }
        eprintln!("{text}");
    }
}

/// A control client that connects and then says nothing must not hold the
/// packet loop: listener threads serve the control socket, so pings through
/// the tunnel keep their ~10 ms RTT (the loop used to block up to 200 ms in
/// the read of each such client), and `mpdccp status` still answers.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_silent_control_client_does_not_stall_the_tunnel() {
    let _g = crate::support::serial();
    if !require_root("a_silent_control_client_does_not_stall_the_tunnel") {
        return;
    }
    let t = tunnel();
    let sock = t.control_socket(false);
    let stop = Arc::new(AtomicBool::new(false));
    // Keep silent clients coming for the whole ping run: each is held open
    // 300 ms without a request.
    let pest = {
        let stop = stop.clone();
        let sock = sock.clone();
        std::thread::spawn(move || {
            let mut opened = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(s) = std::os::unix::net::UnixStream::connect(&sock) {
                    opened += 1;
                    std::thread::sleep(Duration::from_millis(300));
                    drop(s);
                }
            }
            opened
        })
    };
    let out = t
        .client
        .output(
            "ping",
            &["-c", "40", "-i", "0.05", "-q", &SERVER_TUN_V4.to_string()],
        )
        .expect("ping");
    stop.store(true, Ordering::Relaxed);
    let opened = pest.join().expect("silent client thread");
    assert!(opened >= 5, "only {opened} silent control clients");
    assert!(out.contains(" 0% packet loss"), "{out}");
    // "rtt min/avg/max/mdev = 10.1/10.4/11.0/0.2 ms"
    let max_ms: f64 = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(2))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no rtt summary in {out}"));
    eprintln!("{opened} silent control clients; ping max RTT {max_ms} ms");
    assert!(
        max_ms < 100.0,
        "ping max RTT {max_ms} ms while silent control clients were connected"
    );
    let st = t
        .status(false)
        .expect("status answers after the silent clients");
    assert!(
        st["connections"].is_array() || st["paths"].is_array(),
        "{st}"
    );
}

/// Per-packet RTTs (ms) of a `ping` run (its `time=… ms` lines).
fn ping_rtts(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|v| v.split(' ').next()?.parse().ok())
        .collect()
}

fn p99(mut v: Vec<f64>) -> f64 {
    assert!(v.len() >= 100, "{} samples", v.len());
    v.sort_by(f64::total_cmp);
    v[(v.len() * 99).div_ceil(100) - 1]
}

/// Prometheus scrapes run off the packet path (a scrape must not slow the
/// tunnel): the listener
/// thread answers from the status snapshot the loop publishes at most every
/// 100 ms, so back-to-back scrapes cost the loop at most 10 status
/// documents a second, whatever the scrape rate (counted: `ops.snapshots`;
/// before, one per scrape). Pings through an unshaped tunnel (RTT ~0.3 ms)
/// with and without a scrape loop on the client: the p99 RTT stays within
/// 5 ms of the idle one (at least 1 ms): one status document takes well
/// under 0.1 ms, the rest is scheduling noise of a loaded 2-core machine
/// (idle p99 seen up to 4 ms); the issue measured 0.5 → 12.4 ms.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn back_to_back_scrapes_do_not_raise_tunnel_rtt() {
    const PORT: u16 = 9465;
    let _g = crate::support::serial();
    if !require_root("back_to_back_scrapes_do_not_raise_tunnel_rtt") {
        return;
    }
    let mut t = Topology::build(2).expect("topology");
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel up on both paths");
    restart_with_prometheus(&mut t, PORT);
    let dst = SERVER_TUN_V4.to_string();
    let ping = |t: &Topology| {
        let out = t
            .client
            .output("ping", &["-c", "200", "-i", "0.01", &dst])
            .expect("ping");
        assert!(out.contains(" 0% packet loss"), "{out}");
        ping_rtts(&out)
    };
    let base = p99(ping(&t));
    let built = |t: &Topology| n(&t.status(false).expect("status")["ops"]["snapshots"]);
    let (built_before, t0) = (built(&t), StdInstant::now());
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = {
        let stop = stop.clone();
        spawn_in_netns(t.client.name(), move || {
            let mut ok = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let mut s = TcpStream::connect(("127.0.0.1", PORT))?;
                s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
                let mut out = String::new();
                s.read_to_string(&mut out)?;
                ok += u32::from(out.starts_with("HTTP/1.0 200") && out.ends_with("# EOF\n"));
            }
            Ok(ok)
        })
    };
    let loaded = p99(ping(&t));
    stop.store(true, Ordering::Relaxed);
    let scrapes = scraper.join().expect("scraper").expect("scrapes");
    let (docs, secs) = (built(&t) - built_before, t0.elapsed().as_secs_f64());
    eprintln!(
        "p99 RTT {base:.3} ms idle, {loaded:.3} ms during {scrapes} back-to-back scrapes; \
         the loop built {docs} status documents in {secs:.1} s"
    );
    assert!(scrapes >= 81, "only {scrapes} scrapes answered");
    // The loop's cost does not follow the scrape rate: one document per
    // 100 ms at most (+2: the status calls of this test).
    assert!(
        docs as f64 <= secs * 10.0 + 2.0,
        "{docs} status documents for {scrapes} scrapes in {secs:.1} s"
    );
    assert!(
        loaded <= base.max(1.0) + 5.0,
        "p99 RTT {base:.3} → {loaded:.3} ms under {scrapes} scrapes"
    );
}

/// Twenty connections to the metrics port that never send a request do
/// not stall a scrape behind them (they used to be served one after
/// another, each held for the request timeout: 10 s in all).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn idle_metrics_connections_do_not_stall_a_scrape() {
    const PORT: u16 = 9465;
    let _g = crate::support::serial();
    if !require_root("idle_metrics_connections_do_not_stall_a_scrape") {
        return;
    }
    let mut t = tunnel();
    restart_with_prometheus(&mut t, PORT);
    let ns = t.server.name().to_string();
    let took = spawn_in_netns(&ns, move || {
        let idle: Vec<TcpStream> = (0..20)
            .filter_map(|_| TcpStream::connect(("127.0.0.1", PORT)).ok())
            .collect();
        anyhow::ensure!(idle.len() == 20, "{} idle connections", idle.len());
        std::thread::sleep(Duration::from_millis(50));
        let t0 = std::time::Instant::now();
        let mut s = TcpStream::connect(("127.0.0.1", PORT))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let took = t0.elapsed();
        anyhow::ensure!(out.starts_with("HTTP/1.0 200"), "{out}");
        drop(idle);
        Ok(took)
    })
    .join()
    .expect("scrape thread")
    .expect("scrape");
    eprintln!("a scrape behind 20 idle connections answered in {took:?}");
    assert!(took < Duration::from_millis(700), "{took:?}");
}

/// A clean start and an idle period with a ping now and then: neither
/// daemon logs a warning (a warning must mean something is wrong). The client host's own
/// IPv6 chatter on its TUN (DAD from ::, router solicitations from fe80::)
/// is outside its `allowed_ips`: the server drops and counts it
/// (`inner_link_local_dropped`) and says nothing.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_clean_start_and_an_idle_period_log_no_warning() {
    let _g = crate::support::serial();
    if !require_root("a_clean_start_and_an_idle_period_log_no_warning") {
        return;
    }
    let mut t = Topology::emulated(exe(), 2, 5, 50).expect("topology");
    let opts = TunnelOpts {
        tunnel: mpdccp_net::daemon::config::TunnelConfig::default(),
        auth: mpdccp_net::daemon::config::AuthMode::Authenticated,
        ..TunnelOpts::default()
    };
    t.start_tunnel(exe(), &opts)
        .expect("tunnel up on both paths");
    // Past one 10 s refusal-report interval, a ping every 2 s.
    for _ in 0..7 {
        let out = t
            .server
            .output(
                "ping",
                &["-c", "1", "-W", "2", "-q", &CLIENT_TUN_V4.to_string()],
            )
            .expect("ping from the server");
        assert!(out.contains(" 0% packet loss"), "{out}");
        std::thread::sleep(Duration::from_secs(2));
    }
    let st = t.status(true).expect("server status");
    for server in [true, false] {
        let log = std::fs::read_to_string(t.log_file(server)).expect("daemon log");
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
        assert!(
            warnings.is_empty(),
            "{} logged warnings:\n{}",
            if server { "server" } else { "client" },
            warnings.join("\n")
        );
    }
    // The chatter was there and was counted, so the silence is not luck.
    let chatter = &st["auth"]["routes"]["inner_link_local_dropped"];
    assert!(n(chatter) > 0 && n(chatter) != u64::MAX, "{chatter}");
    // Both ends show the settings they run with (the daemon
    // defaults here), the server the peer's name the handshake proved, and
    // every path how it travels.
    let want = mpdccp_proto::conn::TunnelSettings::default();
    let cst = t.status(false).expect("client status");
    for (side, st) in [("server", &st), ("client", &cst)] {
        let c = &st["connections"][0];
        let s = &c["settings"];
        assert_eq!(s["auth"], "authenticated", "{side}: {s}");
        assert_eq!(s["cc"], want.cc.name(), "{side}: {s}");
        assert_eq!(s["scheduler"], want.scheduler.name(), "{side}: {s}");
        assert_eq!(s["reorder"], want.reorder.name(), "{side}: {s}");
        assert_eq!(s["aqm"], want.aqm.name(), "{side}: {s}");
        assert_eq!(s["wire_profile"], "rfc9897", "{side}: {s}");
        for p in c["paths"].as_array().expect("paths") {
            assert_eq!(p["transport"], "udp", "{side}: {p}");
        }
    }
    assert_eq!(st["connections"][0]["peer"]["identity"], "client");
}
