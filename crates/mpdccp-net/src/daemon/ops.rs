//! Operations: the status document, the unix control socket behind
//! `mpdccp status`, and the Prometheus text endpoint.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use mpdccp_proto::conn::Connection;
use mpdccp_proto::PathView;
use serde_json::{json, Value};
use tracing::warn;

/// A stats struct of the core as a JSON object (its `Serialize`: one
/// number per counter, so every counter the core gains shows up).
pub fn stats_json<T: serde::Serialize>(stats: &T) -> Value {
    serde_json::to_value(stats).unwrap_or(Value::Null)
}

fn ms(d: Option<Duration>) -> Value {
    d.map(|d| json!(d.as_secs_f64() * 1e3))
        .unwrap_or(Value::Null)
}

/// One path's status entry.
pub fn path_json(conn: &Connection, v: &PathView, name: Option<&str>) -> Value {
    let stats = conn
        .path_stats(v.id)
        .map(|s| stats_json(&s))
        .unwrap_or(Value::Null);
    json!({
        "id": v.id.0,
        "name": name,
        "state": format!("{:?}", v.state),
        "priority": v.priority,
        "cc_state": v.cc_state,
        "cwnd_pkts": v.cwnd_pkts,
        "in_flight_pkts": v.in_flight_pkts,
        "queued_pkts": v.queued_pkts,
        "srtt_ms": ms(v.srtt),
        "min_rtt_ms": ms(v.min_rtt),
        "rttvar_ms": v.rttvar.as_secs_f64() * 1e3,
        "pacing_rate_bps": v.pacing_rate_bytes_per_s.map(|r| r * 8),
        "delivery_rate_bps": v.delivery_rate_bytes_per_s.map(|r| r * 8),
        "loss_rate": v.loss_rate,
        "stats": stats,
    })
}

/// One connection's status entry; `name_of` names paths (client side).
pub fn conn_json(conn: &Connection, handle: u64, name_of: &dyn Fn(u32) -> Option<String>) -> Value {
    let paths: Vec<Value> = conn
        .paths()
        .iter()
        .map(|v| path_json(conn, v, name_of(v.id.0).as_deref()))
        .collect();
    json!({
        "handle": handle,
        "established": conn.is_established(),
        "closed": conn.is_closed(),
        "multipath": conn.is_multipath(),
        "local_ci": conn.local_ci(),
        "remote_ci": conn.remote_ci(),
        "send_queue_pkts": conn.send_queue_len(),
        "stats": stats_json(&conn.stats()),
        "reorder": stats_json(&conn.reorder_stats()),
        "paths": paths,
    })
}

/// Prometheus text exposition (format 0.0.4) of a status document: every
/// number becomes a gauge `mpdccp_<section>_<name>`, labelled with the
/// connection (`conn`) and path (`path`, `name`). Samples of one metric are
/// grouped under a single `# TYPE` line, as the format requires; label
/// values are escaped; non-finite numbers are written `NaN`/`+Inf`/`-Inf`.
pub fn prometheus_text(status: &Value) -> String {
    // family name -> sample lines (BTreeMap: a stable, grouped output).
    let mut fams: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut emit = |name: &str, labels: &[(&str, String)], v: &Value| {
        let n = match v {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        };
        let Some(n) = n else { return };
        let name = format!("mpdccp_{}", metric_name(name));
        let lbl: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        let line = if lbl.is_empty() {
            format!("{name} {}", prom_number(n))
        } else {
            format!("{name}{{{}}} {}", lbl.join(","), prom_number(n))
        };
        fams.entry(name).or_default().push(line);
    };
    for (k, v) in status.as_object().into_iter().flatten() {
        if v.is_number() {
            emit(k, &[], v);
        }
    }
    for sect in ["daemon", "endpoint"] {
        for (k, v) in status[sect].as_object().into_iter().flatten() {
            emit(&format!("{sect}_{k}"), &[], v);
        }
    }
    for p in status["configured_paths"].as_array().into_iter().flatten() {
        let l = [("name", p["name"].as_str().unwrap_or("").to_string())];
        for (k, v) in p.as_object().into_iter().flatten() {
            if k != "path_id" {
                emit(&format!("configured_path_{k}"), &l, v);
            }
        }
    }
    for c in status["connections"].as_array().into_iter().flatten() {
        let conn = c["handle"].to_string();
        let cl = [("conn", conn.clone())];
        for key in ["established", "closed", "send_queue_pkts"] {
            emit(&format!("conn_{key}"), &cl, &c[key]);
        }
        for sect in ["stats", "reorder"] {
            for (k, v) in c[sect].as_object().into_iter().flatten() {
                emit(&format!("conn_{sect}_{k}"), &cl, v);
            }
        }
        for p in c["paths"].as_array().into_iter().flatten() {
            let mut pl = vec![("conn", conn.clone()), ("path", p["id"].to_string())];
            if let Some(n) = p["name"].as_str() {
                pl.push(("name", n.to_string()));
            }
            emit("path_active", &pl, &json!(p["state"] == "Active"));
            for (k, v) in p.as_object().into_iter().flatten() {
                if k == "stats" {
                    for (k2, v2) in v.as_object().into_iter().flatten() {
                        emit(&format!("path_{k2}"), &pl, v2);
                    }
                } else if k != "id" {
                    emit(&format!("path_{k}"), &pl, v);
                }
            }
        }
    }
    let mut out = String::new();
    for (name, lines) in &fams {
        out.push_str(&format!("# TYPE {name} gauge\n"));
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// A metric name from a JSON key: `[a-zA-Z0-9_]`, anything else becomes `_`.
fn metric_name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn prom_number(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n.is_infinite() {
        if n > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{n}")
    }
}

/// What a listener thread asks the daemon's loop for.
enum OpsRequest {
    /// One line from the control socket (`status`, `close`, …).
    Control(String),
    /// A Prometheus scrape.
    Metrics,
}

/// A request plus the channel its answer goes back on.
type Pending = (OpsRequest, mpsc::SyncSender<String>);

/// Requests waiting for the loop at most; a client flood beyond this is
/// answered "busy" by the listener thread instead of queueing without bound.
const MAX_PENDING: usize = 16;

/// How long a listener waits for a request line, and for the loop's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// The operations endpoints.
///
/// Clients of the control socket and the Prometheus port are served by
/// listener threads, never by the packet loop: a client that connects and
/// then sends nothing (or reads slowly) used to hold the loop in a blocking
/// read, delaying packets and stamping acks late (RTT samples too short).
/// The threads only read requests and write answers; the loop is woken
/// through a socket pair, builds the status document (cheap, it owns the
/// connection) and hands the text back.
pub struct OpsServer {
    control_path: PathBuf,
    requests: mpsc::Receiver<Pending>,
    wake_rx: UnixStream,
}

impl OpsServer {
    pub fn bind(control: &Path, prometheus: Option<SocketAddr>) -> anyhow::Result<OpsServer> {
        if let Some(dir) = control.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // A stale socket from a previous run would make bind fail.
        if UnixStream::connect(control).is_err() {
            let _ = std::fs::remove_file(control);
        }
        let l = UnixListener::bind(control)
            .map_err(|e| anyhow::anyhow!("control socket {}: {e}", control.display()))?;
        let prometheus = match prometheus {
            Some(a) => {
                Some(TcpListener::bind(a).map_err(|e| anyhow::anyhow!("prometheus {a}: {e}"))?)
            }
            None => None,
        };
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (tx, requests) = mpsc::sync_channel::<Pending>(MAX_PENDING);
        let ask = Asker {
            tx: tx.clone(),
            wake: wake_tx.try_clone()?,
        };
        std::thread::Builder::new()
            .name("mpdccp-control".into())
            .spawn(move || {
                for s in l.incoming().flatten() {
                    serve_control(&ask, s);
                }
            })?;
        if let Some(l) = prometheus {
            let ask = Asker { tx, wake: wake_tx };
            std::thread::Builder::new()
                .name("mpdccp-metrics".into())
                .spawn(move || {
                    for s in l.incoming().flatten() {
                        serve_metrics(&ask, s);
                    }
                })?;
        }
        Ok(OpsServer {
            control_path: control.to_path_buf(),
            requests,
            wake_rx,
        })
    }

    /// The fd the loop polls: readable when a request waits.
    pub fn wake_fd(&self) -> RawFd {
        self.wake_rx.as_raw_fd()
    }

    /// Answers the waiting requests (never blocks). Each control request is
    /// one line (`status`, or `close` to shut the daemon down gracefully)
    /// answered with one JSON document; a scrape gets the Prometheus text.
    /// Returns true if a `close` was requested.
    pub fn handle_requests(&self, status: &dyn Fn() -> Value) -> bool {
        let mut drain = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut drain), Ok(n) if n > 0) {}
        let mut close = false;
        while let Ok((req, answer)) = self.requests.try_recv() {
            let text = match req {
                OpsRequest::Control(line) => match line.trim() {
                    "" | "status" => status().to_string(),
                    "close" => {
                        close = true;
                        json!({"ok": true, "closing": true}).to_string()
                    }
                    other => {
                        json!({"error": format!("unknown command `{other}` (status | close)")})
                            .to_string()
                    }
                },
                OpsRequest::Metrics => prometheus_text(&status()),
            };
            // The listener may have given up waiting; nothing to do then.
            let _ = answer.try_send(text);
        }
        close
    }
}

impl Drop for OpsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.control_path);
    }
}

/// A listener thread's way to the loop.
struct Asker {
    tx: mpsc::SyncSender<Pending>,
    wake: UnixStream,
}

impl Asker {
    /// Queues `req` for the loop and waits for its answer; `None` when the
    /// loop is busy (queue full) or gone, or did not answer in time.
    fn ask(&self, req: OpsRequest) -> Option<String> {
        let (answer_tx, answer_rx) = mpsc::sync_channel(1);
        self.tx.try_send((req, answer_tx)).ok()?;
        // A full wake pipe already means "wake up": ignore WouldBlock.
        let _ = (&self.wake).write(&[1]);
        answer_rx.recv_timeout(ANSWER_TIMEOUT).ok()
    }
}

fn serve_control(ask: &Asker, s: UnixStream) {
    let _ = s.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = s.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut line = String::new();
    let mut r = BufReader::new(s.take(256));
    let _ = r.read_line(&mut line);
    let mut s = r.into_inner().into_inner();
    let reply = ask
        .ask(OpsRequest::Control(line))
        .unwrap_or_else(|| json!({"error": "daemon busy, try again"}).to_string());
    let _ = writeln!(s, "{reply}");
}

fn serve_metrics(ask: &Asker, mut s: std::net::TcpStream) {
    let _ = s.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = s.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut req = [0u8; 1024];
    let _ = s.read(&mut req);
    let _ = match ask.ask(OpsRequest::Metrics) {
        Some(body) => write!(
            s,
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        None => write!(s, "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"),
    };
}

/// Client side of the control socket (`mpdccp status`).
pub fn query(control: &Path, command: &str) -> io::Result<Value> {
    let mut s = UnixStream::connect(control)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    writeln!(s, "{command}")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    serde_json::from_str(out.trim()).map_err(|e| {
        warn!("bad status reply: {e}");
        io::Error::new(io::ErrorKind::InvalidData, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_json_objects_of_numbers() {
        let v = stats_json(&mpdccp_proto::reorder::ReorderStats {
            received: 7,
            ..Default::default()
        });
        assert_eq!(v["received"], json!(7));
        assert_eq!(v["held_bytes"], json!(0));
        assert!(v.as_object().unwrap().values().all(Value::is_u64));
    }

    #[test]
    fn prometheus_lines() {
        let st = json!({"daemon": {"udp_rx_malformed": 3}, "connections": [
            {"handle": 0, "established": true, "send_queue_pkts": 0, "stats": {"rx_bytes": 5}, "reorder": {},
             "paths": [{"id": 1, "name": "p1", "cwnd_pkts": 10, "stats": {"lost_pkts": 2}}]}]});
        let t = prometheus_text(&st);
        assert!(t.contains("mpdccp_daemon_udp_rx_malformed 3\n"), "{t}");
        assert!(
            t.contains("# TYPE mpdccp_path_cwnd_pkts gauge\nmpdccp_path_cwnd_pkts{"),
            "{t}"
        );
        assert!(
            t.contains("mpdccp_path_cwnd_pkts{conn=\"0\",path=\"1\",name=\"p1\"} 10\n"),
            "{t}"
        );
        assert!(t.contains("mpdccp_conn_established{conn=\"0\"} 1\n"), "{t}");
    }

    #[test]
    fn prometheus_families_are_grouped_and_labels_escaped() {
        let st = json!({"uptime_s": 1.5, "connections": [
            {"handle": 0, "established": true, "send_queue_pkts": 0, "stats": {}, "reorder": {},
             "paths": [{"id": 1, "name": "a\"b", "state": "Active", "cwnd_pkts": 10, "srtt_ms": null},
                       {"id": 2, "name": null, "state": "Closed", "cwnd_pkts": 4}]}]});
        let t = prometheus_text(&st);
        // One TYPE line per family, directly followed by all its samples.
        let types: Vec<&str> = t.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut seen = std::collections::BTreeSet::new();
        for ty in &types {
            assert!(seen.insert(*ty), "duplicate {ty}\n{t}");
        }
        assert!(
            t.contains("# TYPE mpdccp_path_cwnd_pkts gauge\nmpdccp_path_cwnd_pkts{conn=\"0\",path=\"1\",name=\"a\\\"b\"} 10\nmpdccp_path_cwnd_pkts{conn=\"0\",path=\"2\"} 4\n"),
            "{t}"
        );
        assert!(
            t.contains("mpdccp_path_active{conn=\"0\",path=\"2\"} 0\n"),
            "{t}"
        );
        assert!(t.contains("mpdccp_uptime_s 1.5\n"), "{t}");
        assert!(!t.contains("srtt_ms"), "null is not a sample: {t}");
        assert_eq!(prom_number(f64::INFINITY), "+Inf");
        assert_eq!(prom_number(f64::NAN), "NaN");
    }
}
