//! Operations: the status document, the unix control socket behind
//! `mpdccp status`, and the Prometheus endpoint (content: [`super::metrics`]).

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

use super::metrics::{metrics_text, CONTENT_TYPE};

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

/// What a listener thread asks the daemon's loop for.
enum OpsRequest {
    /// One line from the control socket (`status`, `close`, …).
    Control(String),
    /// A Prometheus scrape: the status document, which the listener
    /// thread encodes (off the packet loop).
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
    /// answered with one JSON document; a scrape gets the status document
    /// too, and its listener thread turns it into metrics.
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
                OpsRequest::Metrics => status().to_string(),
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
    let status = ask
        .ask(OpsRequest::Metrics)
        .and_then(|doc| serde_json::from_str::<Value>(&doc).ok());
    let _ = match status {
        Some(status) => {
            let body = metrics_text(&status);
            write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        None => write!(
            s,
            "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        ),
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
}
