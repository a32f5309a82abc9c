//! Operations: the status document, the unix control socket behind
//! `mpdccp status`, and the Prometheus endpoint (content: [`super::metrics`]).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use mpdccp_proto::conn::{Connection, ConnectionConfig};
use mpdccp_proto::PathView;
use serde_json::{json, Value};
use tracing::warn;

use super::metrics::{metrics_text_of, CONTENT_TYPE};
use super::status::{
    ConnStatus, Counters, LossWindow, PathStatus, PeerStatus, ReorderStatus, Settings,
};
use super::status_doc::StatusDoc;

/// A stats struct of the core as a JSON object (its `Serialize`: one
/// number per counter), as a status document given as JSON holds it (the
/// tests' documents).
#[cfg(test)]
pub fn stats_json<T: serde::Serialize>(stats: &T) -> Value {
    serde_json::to_value(stats).unwrap_or(Value::Null)
}

fn ms(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1e3)
}

/// What the daemon knows of a path beyond the core: its stable name (the
/// client's configured path name; the server's: the client's address) and
/// the peer's address it talks to.
#[derive(Clone, Debug, Default)]
pub struct PathLabel {
    pub name: Option<String>,
    pub remote: Option<String>,
    /// How the path's packets travel: `udp`, `dccp` or `udccp`.
    pub transport: Option<&'static str>,
}

/// One path's status entry.
pub fn path_status(conn: &Connection, v: &PathView, label: &PathLabel) -> PathStatus {
    let plpmtu = conn.path_plpmtu(v.id);
    PathStatus {
        id: v.id.0,
        name: label.name.clone(),
        remote: label.remote.clone(),
        transport: label.transport.map(str::to_owned),
        state: format!("{:?}", v.state),
        priority: v.priority,
        cc_state: v.cc_state.to_owned(),
        cwnd_pkts: v.cwnd_pkts,
        in_flight_pkts: v.in_flight_pkts,
        queued_pkts: v.queued_pkts,
        srtt_ms: ms(v.srtt),
        min_rtt_ms: ms(v.min_rtt),
        rttvar_ms: v.rttvar.as_secs_f64() * 1e3,
        pacing_rate_bps: v.pacing_rate_bytes_per_s.map(|r| r * 8),
        delivery_rate_bps: v.delivery_rate_bytes_per_s.map(|r| r * 8),
        loss_rate: v.loss_rate,
        // Loss over the last ~10 s from the path's counters (the per-ack
        // `loss_rate` forgets within ~64 packets).
        loss_window: conn.path_windowed_loss(v.id).map(|w| LossWindow {
            window_s: mpdccp_proto::conn::LOSS_WINDOW.as_secs(),
            sent_pkts: w.sent_pkts,
            lost_pkts: w.lost_pkts,
            ratio: w.ratio,
        }),
        // RFC 7661 pipeACK: packets the path delivered per round trip
        // lately, the validated part of cwnd.
        pipe_ack_pkts: conn.path_pipe_ack(v.id),
        // RFC 8899: the PLPMTU confirmed so far and the search state.
        plpmtu: plpmtu.map(|(_, n)| n),
        plpmtu_state: plpmtu.map(|(s, _)| format!("{s:?}")),
        stats: conn.path_stats(v.id).map(|s| Counters::of(&s)),
    }
}

/// The connection's DPLPMTUD counters (RFC 8899), `None` with it off.
fn plpmtu_counters(conn: &Connection) -> Option<Counters> {
    let off = conn
        .paths()
        .iter()
        .all(|v| conn.path_plpmtu(v.id).is_none());
    if off {
        return None;
    }
    let s = conn.plpmtu_stats();
    let fields = [
        ("probes_sent", s.probes_sent),
        ("probe_bytes_sent", s.probe_bytes_sent),
        ("probes_acked", s.probes_acked),
        ("probes_lost", s.probes_lost),
        ("syncacks_unmatched", s.syncacks_unmatched),
        ("black_holes", s.black_holes),
        ("dropped_oversize", s.dropped_oversize),
        ("searches_completed", s.searches_completed),
    ];
    Some(Counters::from_pairs(fields))
}

/// The settings a connection runs with, as the configuration names them
/// (which cc, scheduler, reordering and queue management are in force).
/// The daemons add `auth`, which the core does not know.
pub fn settings(c: &ConnectionConfig) -> Settings {
    // The `[tunnel]` table's `aqm` as `TunnelSettings::connection_config`
    // maps it: flow queues (with their CoDel) = fq_codel.
    let aqm = match (c.send_queue.flows > 0, c.send_queue.codel.is_some()) {
        (true, _) => "fq_codel",
        (false, true) => "codel",
        (false, false) => "none",
    };
    Settings {
        cc: c.cc.name().into(),
        scheduler: c.scheduler.kind.name().into(),
        reorder: c.reorder.kind.name().into(),
        aqm: aqm.into(),
        wire_profile: c.wire_profile.name().into(),
        payload_protection: c.protect_payload,
        retransmit_lost: c.loss.retransmit.is_some(),
        cwnd_validation: c.cc_config.cwnd_validation,
        plpmtud: c.plpmtud.is_some(),
        mss_bytes: c.mss_bytes,
        auth: None,
    }
}

/// One connection's status entry; `label_of` names each path (by subflow
/// id). `peer` holds who the other end is: its addresses (one per path)
/// and its identity (`None` here; the server fills in the configured
/// peer's name once its handshake proved it, in the authenticated modes).
pub fn conn_status(
    conn: &Connection,
    handle: u64,
    label_of: &dyn Fn(u32) -> PathLabel,
) -> ConnStatus {
    let mut remotes = std::collections::BTreeSet::new();
    let mut paths = Vec::new();
    for v in conn.paths() {
        let l = label_of(v.id.0);
        paths.push(path_status(conn, &v, &l));
        remotes.extend(l.remote);
    }
    ConnStatus {
        handle,
        worker: None,
        peer: PeerStatus {
            identity: None,
            remotes,
        },
        established: conn.is_established(),
        closed: conn.is_closed(),
        multipath: conn.is_multipath(),
        settings: settings(conn.config()),
        local_ci: conn.local_ci(),
        remote_ci: conn.remote_ci(),
        send_queue_pkts: conn.send_queue_len(),
        send_queue_flow_states: conn.send_queue_flow_states(),
        plpmtu: conn.plpmtu(),
        plpmtu_stats: plpmtu_counters(conn),
        stats: Counters::of(&conn.stats()),
        reorder: ReorderStatus::of(&conn.reorder_stats()),
        paths,
    }
}

/// A control command that needs the loop (anything but `status`).
type Pending = (String, mpsc::SyncSender<String>);

/// Requests waiting for the loop at most; a client flood beyond this is
/// answered "busy" by the listener thread instead of queueing without bound.
const MAX_PENDING: usize = 16;

/// How long a listener waits for a request line, and for the loop's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// A status snapshot younger than this answers a request as it is; an
/// older one is renewed by the loop first. The loop so builds at most one
/// status document per `SNAPSHOT_MAX_AGE` (10 per second) however many
/// scrapes and status requests arrive (81 back-to-back scrapes
/// raised tunnel RTT from 0.5 to 12.4 ms when each was served by the loop).
pub const SNAPSHOT_MAX_AGE: Duration = Duration::from_millis(100);

/// The status document the loop published last, and its encodings.
struct Snapshot {
    /// The document, its connections serialized (`status_doc.rs`).
    doc: Arc<StatusDoc>,
    /// When the loop built it (`None`: never).
    taken: Option<std::time::Instant>,
    /// Bumped at each publication (listeners wait for a change).
    generation: u64,
    /// A listener wants a fresher snapshot than this one.
    wanted: bool,
    /// The OpenMetrics text of the document, encoded once by the first scrape.
    metrics: Option<Arc<String>>,
}

/// What the listener threads and the loop share.
struct Shared {
    snap: Mutex<Snapshot>,
    published: Condvar,
    /// Control commands for the loop (`close`).
    commands: mpsc::SyncSender<Pending>,
    /// Writing a byte wakes the loop.
    wake: UnixStream,
}

/// The operations endpoints.
///
/// Clients of the control socket and the Prometheus port are served by
/// listener threads, never by the packet loop: a client that connects and
/// then sends nothing (or reads slowly) used to hold the loop in a blocking
/// read, delaying packets and stamping acks late (RTT samples too short).
/// Status requests and scrapes read the snapshot the loop publishes
/// ([`SNAPSHOT_MAX_AGE`]); serialising and Prometheus encoding run on the
/// listener threads. Only commands that act (`close`) reach the loop,
/// through a bounded channel and a wake-up socket pair.
pub struct OpsServer {
    control_path: PathBuf,
    shared: Arc<Shared>,
    commands: mpsc::Receiver<Pending>,
    wake_rx: UnixStream,
    /// Status documents published (for tests: bounded by the age limit).
    pub snapshots: std::cell::Cell<u64>,
}

impl OpsServer {
    pub fn bind(control: &Path, prometheus: Option<SocketAddr>) -> anyhow::Result<OpsServer> {
        if let Some(dir) = control.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // A stale socket from a previous run would make bind fail; a live
        // one is another daemon's (a server and a client on one host).
        if UnixStream::connect(control).is_ok() {
            anyhow::bail!(
                "control socket {}: another running daemon answers on it (a server and a client on one host?); give each its own `[ops] control_socket`",
                control.display()
            );
        }
        let _ = std::fs::remove_file(control);
        let l = UnixListener::bind(control)
            .map_err(|e| anyhow::anyhow!("control socket {}: {e}", control.display()))?;
        let prometheus = match prometheus {
            Some(a) => {
                if !a.ip().is_loopback() {
                    warn!(%a, "metrics are served without authentication: anyone who reaches {a} reads every connection's addresses and counters (bind to 127.0.0.1 and scrape through a tunnel or proxy)");
                }
                Some(TcpListener::bind(a).map_err(|e| anyhow::anyhow!("prometheus {a}: {e}"))?)
            }
            None => None,
        };
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (commands_tx, commands) = mpsc::sync_channel::<Pending>(MAX_PENDING);
        let shared = Arc::new(Shared {
            snap: Mutex::new(Snapshot {
                doc: Arc::new(StatusDoc::default()),
                taken: None,
                generation: 0,
                wanted: false,
                metrics: None,
            }),
            published: Condvar::new(),
            commands: commands_tx,
            wake: wake_tx,
        });
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("mpdccp-control".into())
            .spawn(move || {
                for s in l.incoming().flatten() {
                    serve_control(&sh, s);
                }
            })?;
        if let Some(l) = prometheus {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name("mpdccp-metrics".into())
                .spawn(move || accept_scrapes(&sh, &l))?;
        }
        Ok(OpsServer {
            control_path: control.to_path_buf(),
            shared,
            commands,
            wake_rx,
            snapshots: std::cell::Cell::new(0),
        })
    }

    /// The fd the loop polls: readable when a request waits.
    pub fn wake_fd(&self) -> RawFd {
        self.wake_rx.as_raw_fd()
    }

    /// Publishes a status snapshot when a listener asked for a fresher one,
    /// and answers waiting commands (never blocks). A command is one line:
    /// `status` (answered from a snapshot too) or `close` to shut the
    /// daemon down gracefully. Returns true if a `close` was requested.
    pub fn handle_requests(&self, status: &dyn Fn() -> StatusDoc) -> bool {
        let mut drain = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut drain), Ok(n) if n > 0) {}
        let wanted = self.shared.snap.lock().map(|s| s.wanted).unwrap_or(false);
        if wanted {
            self.publish(status());
        }
        let mut close = false;
        while let Ok((line, answer)) = self.commands.try_recv() {
            let text = match line.trim() {
                "" | "status" => status().to_text(),
                "close" => {
                    close = true;
                    json!({"ok": true, "closing": true}).to_string()
                }
                other => json!({"error": format!("unknown command `{other}` (status | close)")})
                    .to_string(),
            };
            // The listener may have given up waiting; nothing to do then.
            let _ = answer.try_send(text);
        }
        close
    }

    /// Replaces the snapshot and wakes the listeners waiting for it. The
    /// document gains `ops.snapshots`: how many the loop has built (the
    /// packet loop's whole cost of status requests and scrapes).
    fn publish(&self, mut doc: StatusDoc) {
        self.snapshots.set(self.snapshots.get() + 1);
        doc.head.ops = Some(Counters::from_pairs([("snapshots", self.snapshots.get())]));
        let doc = Arc::new(doc);
        if let Ok(mut s) = self.shared.snap.lock() {
            s.doc = doc;
            s.taken = Some(std::time::Instant::now());
            s.generation += 1;
            s.wanted = false;
            s.metrics = None;
        }
        self.shared.published.notify_all();
    }
}

impl Drop for OpsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.control_path);
    }
}

impl Shared {
    fn wake_loop(&self) {
        // A full wake pipe already means "wake up": ignore WouldBlock.
        let _ = (&self.wake).write(&[1]);
    }

    /// A snapshot at most [`SNAPSHOT_MAX_AGE`] old: the current one, or the
    /// next the loop publishes (asked for, waited on up to
    /// [`ANSWER_TIMEOUT`]). `None` when the loop does not answer.
    fn fresh(&self) -> Option<std::sync::MutexGuard<'_, Snapshot>> {
        let mut s = self.snap.lock().ok()?;
        if s.taken.is_some_and(|t| t.elapsed() <= SNAPSHOT_MAX_AGE) {
            return Some(s);
        }
        let generation = s.generation;
        s.wanted = true;
        self.wake_loop();
        let (s, _) = self
            .published
            .wait_timeout_while(s, ANSWER_TIMEOUT, |s| s.generation == generation)
            .ok()?;
        (s.generation != generation).then_some(s)
    }

    /// The status document, from a fresh snapshot.
    fn status(&self) -> Option<Arc<StatusDoc>> {
        self.fresh().map(|s| s.doc.clone())
    }

    /// The OpenMetrics text of a fresh snapshot, encoded once per snapshot.
    fn metrics(&self) -> Option<Arc<String>> {
        let (doc, generation) = {
            let s = self.fresh()?;
            if let Some(m) = &s.metrics {
                return Some(m.clone());
            }
            (s.doc.clone(), s.generation)
        };
        // Encode without holding the lock (the loop may publish meanwhile).
        let text = Arc::new(doc_metrics(&doc));
        if let Ok(mut s) = self.snap.lock() {
            if s.generation == generation {
                s.metrics = Some(text.clone());
            }
        }
        Some(text)
    }

    /// Queues a command for the loop and waits for its answer; `None` when
    /// the loop is busy (queue full) or gone, or did not answer in time.
    fn command(&self, line: String) -> Option<String> {
        let (answer_tx, answer_rx) = mpsc::sync_channel(1);
        self.commands.try_send((line, answer_tx)).ok()?;
        self.wake_loop();
        answer_rx.recv_timeout(ANSWER_TIMEOUT).ok()
    }
}

/// The OpenMetrics text of `doc`, reading one connection's entry at a time.
fn doc_metrics(doc: &StatusDoc) -> String {
    let conns = doc
        .connections
        .iter()
        .filter_map(|raw| serde_json::from_str::<ConnStatus>(raw.get()).ok());
    metrics_text_of(&doc.head, conns)
}

fn serve_control(sh: &Shared, s: UnixStream) {
    let _ = s.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = s.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut line = String::new();
    let mut r = BufReader::new(s.take(256));
    let _ = r.read_line(&mut line);
    let mut s = r.into_inner().into_inner();
    let busy = || json!({"error": "daemon busy, try again"}).to_string();
    match line.trim() {
        // Serialized straight into the socket: no text of a large document.
        "" | "status" => match sh.status() {
            Some(doc) => {
                let mut w = io::BufWriter::new(&s);
                let _ = serde_json::to_writer(&mut w, &*doc);
                let _ = writeln!(w);
            }
            None => {
                let _ = writeln!(s, "{}", busy());
            }
        },
        _ => {
            let _ = writeln!(s, "{}", sh.command(line).unwrap_or_else(busy));
        }
    }
}

/// Scrapes served at once, at most; more are closed at once. A client
/// that connects and sends nothing holds its slot for `REQUEST_TIMEOUT`
/// only, so idle connections cannot stall the scrapes behind them (served
/// one after another, 20 such connections held a scrape for 10 s).
const MAX_SCRAPES: usize = 64;

fn accept_scrapes(sh: &Arc<Shared>, l: &TcpListener) {
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for s in l.incoming().flatten() {
        use std::sync::atomic::Ordering::SeqCst;
        if busy.fetch_add(1, SeqCst) >= MAX_SCRAPES {
            busy.fetch_sub(1, SeqCst);
            continue;
        }
        let (sh, slot) = (sh.clone(), busy.clone());
        let spawned = std::thread::Builder::new()
            .name("mpdccp-scrape".into())
            .spawn(move || {
                serve_metrics(&sh, s);
                slot.fetch_sub(1, SeqCst);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, SeqCst);
        }
    }
}

fn serve_metrics(sh: &Shared, mut s: std::net::TcpStream) {
    let _ = s.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = s.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut req = [0u8; 1024];
    let _ = s.read(&mut req);
    let _ = match sh.metrics() {
        Some(body) => write!(
            s,
            "HTTP/1.0 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
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

    /// The metrics of a document kept with serialized connections are
    /// those of the whole tree, floats included (`float_roundtrip`).
    #[test]
    fn metrics_of_a_split_document_equal_the_whole_ones() {
        let v = json!({
            "uptime_s": 12.345678901234567,
            "daemon": {"udp_rx_datagrams": 7},
            "connections": [
                {"handle": 1, "stats": {"tx_data_pkts": 3}, "paths": [
                    {"name": "p1", "srtt_ms": 0.1_f64 + 0.2, "cwnd_pkts": 95, "stats": {"tx_pkts": 9}}]},
                {"handle": 2, "stats": {"tx_data_pkts": 0}, "paths": []},
            ],
        });
        // Lines compared as sets: a family orders its label sets as its
        // hash map does.
        let lines = |t: String| {
            let mut l: Vec<String> = t.lines().map(str::to_owned).collect();
            l.sort();
            l
        };
        let whole = lines(super::super::metrics::metrics_text(&v));
        assert!(
            whole.iter().any(|l| l.contains("srtt_seconds")),
            "{whole:?}"
        );
        let mut doc = StatusDoc::new(serde::Deserialize::deserialize(&v).unwrap());
        for c in v["connections"].as_array().unwrap() {
            doc.push_connection(c);
        }
        assert_eq!(lines(doc_metrics(&doc)), whole);
    }

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

    /// 200 back-to-back status requests from 4 threads cost the loop at
    /// most one status document per SNAPSHOT_MAX_AGE (plus one), and every
    /// answer is at most that old.
    #[test]
    fn status_requests_share_bounded_snapshots() {
        let dir = std::env::temp_dir().join(format!("mpdccp-ops-{}", std::process::id()));
        let sock = dir.join("ctl.sock");
        let ops = OpsServer::bind(&sock, None).unwrap();
        let built = std::cell::Cell::new(0u64);
        // Each document says which it is by its uptime.
        let status = || {
            built.set(built.get() + 1);
            StatusDoc::new(super::super::status::StatusHead {
                uptime_s: built.get() as f64,
                ..Default::default()
            })
        };
        let t0 = std::time::Instant::now();
        let clients: Vec<_> = (0..4)
            .map(|_| {
                let sock = sock.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .map(|_| {
                            query(&sock, "status").unwrap()["uptime_s"]
                                .as_f64()
                                .unwrap() as u64
                        })
                        .max()
                        .unwrap()
                })
            })
            .collect();
        while !clients.iter().all(|c| c.is_finished()) {
            ops.handle_requests(&status);
            std::thread::sleep(Duration::from_millis(1));
        }
        let elapsed = t0.elapsed();
        let seen = clients
            .into_iter()
            .map(|c| c.join().unwrap())
            .max()
            .unwrap();
        let bound = (elapsed.as_secs_f64() / SNAPSHOT_MAX_AGE.as_secs_f64()).ceil() as u64 + 1;
        assert!(
            built.get() <= bound,
            "{} documents in {elapsed:?}",
            built.get()
        );
        assert_eq!(ops.snapshots.get(), built.get());
        assert!(seen >= 1 && seen <= built.get());
        // A `close` still reaches the loop.
        let closer = std::thread::spawn(move || query(&sock, "close").unwrap());
        let mut closed = false;
        while !closer.is_finished() {
            closed |= ops.handle_requests(&status);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(closed);
        assert_eq!(closer.join().unwrap()["closing"], json!(true));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod bind_tests {
    use super::OpsServer;

    /// A second daemon on one host with the same control socket gets an
    /// error saying so (it used to be a bare "Address already in use"),
    /// and the first daemon's socket keeps working.
    #[test]
    fn a_control_socket_in_use_is_named_as_such() {
        // Its own folder: the other tests of this module use `mpdccp-ops-PID`
        // at the same time, and this one removes its folder at the end.
        let dir = std::env::temp_dir().join(format!("mpdccp-ops-bind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("ctl.sock");
        let _first = OpsServer::bind(&sock, None).expect("first daemon");
        let err = match OpsServer::bind(&sock, None) {
            Ok(_) => panic!("a second daemon bound the same control socket"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("another running daemon"), "{err}");
        assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
