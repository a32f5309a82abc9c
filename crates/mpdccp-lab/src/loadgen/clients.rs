//! The client side of the load generator: many client-role
//! `Connection`s, one connected UDP socket each, driven from one thread by
//! one epoll set. Timers live in an ordered set keyed by deadline, so a
//! wake-up costs O(log n) in the number of clients, not O(n): the
//! generator must stay cheaper than the server it measures.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use mpdccp_net::clock;
use mpdccp_proto::conn::{Connection, ConnectionConfig, Event, PathConfig, Role};
use mpdccp_proto::path::PathId;
use mpdccp_proto::Instant;
use rustix::event::epoll;

use super::packet;

/// What the client thread is asked to do.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    pub clients: usize,
    /// The server's outer address (UDP, RFC 6773).
    pub server: SocketAddr,
    /// The clients' outer address (each socket gets its own port).
    pub local_ip: Ipv4Addr,
    /// Where the echo listens, inside the tunnel.
    pub echo: SocketAddr,
    pub conn: ConnectionConfig,
    /// Handshakes in progress at once (the server refuses Requests beyond
    /// its half-open bound with Reset "too busy").
    pub max_handshakes: usize,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
    /// Aggregate offered upstream rate, bits/s of inner IP packets.
    pub upstream_bps: f64,
    pub packet_bytes: usize,
    /// Data phase length (starts once every client is connected).
    pub data_secs: f64,
    /// Quiet time after the data phase for echoes in flight.
    pub drain: Duration,
}

/// What the clients saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ClientReport {
    pub connected: usize,
    /// Time from the first Request to the last client connected, s.
    pub connect_all_s: Option<f64>,
    /// Per-client connect time (Request to Connected), ms: p50, p99, max.
    pub connect_ms_p50: f64,
    pub connect_ms_p99: f64,
    pub connect_ms_max: f64,
    /// Connections that had to be started again (Reset before OPEN).
    pub handshake_retries: u64,
    /// Connected clients whose connection closed before the end.
    pub dropped_after_connect: usize,
    /// Clients still connected at the end.
    pub connected_at_end: usize,
    pub up_sent_pkts: u64,
    pub up_sent_bytes: u64,
    /// `Connection::send` refused (queue full).
    pub up_send_rejected: u64,
    pub down_recv_pkts: u64,
    pub down_recv_bytes: u64,
    /// Delivered packets that were not this client's echo.
    pub down_foreign: u64,
    /// Clients that received at least one echo.
    pub clients_with_downstream: usize,
    /// UDP send would block or failed.
    pub udp_tx_dropped: u64,
    /// Seconds of the data phase actually run.
    pub data_s: f64,
    /// Timer deadlines the core returned at or before `now` after
    /// handling them (bumped by 1 ms; should stay 0).
    pub stuck_timers: u64,
}

/// Pause before a refused client tries again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

struct Client {
    sock: UdpSocket,
    conn: Connection,
    inner: Ipv4Addr,
    deadline: Option<Instant>,
    started: Option<Instant>,
    connected_at: Option<Instant>,
    closed: bool,
    seq: u64,
    echoes: u64,
    /// Refused before OPEN: the timer entry reopens the connection.
    reopen_pending: bool,
}

/// Phases of a run, for the callers' progress and the data rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Connecting,
    Data,
    Drain,
    /// Graceful close of every connection (so the server forgets them).
    Closing,
}

struct Driver {
    plan: ClientPlan,
    clients: Vec<Client>,
    timers: BTreeSet<(Instant, usize)>,
    buf: Vec<u8>,
    report: ClientReport,
    seed: u64,
    next_to_start: usize,
    handshaking: usize,
    rr: usize,
    /// Inside `fire_timers`: a deadline still due after handling is stuck.
    firing: bool,
    /// We closed every connection: Closed is expected, not a drop.
    closing: bool,
}

/// Runs the clients to the end of the drain. `on_phase` is called when the
/// data phase starts (after every client connected or the connect timeout)
/// and when it ends; the caller samples the server there.
pub fn run(
    plan: ClientPlan,
    stop: &AtomicBool,
    mut on_phase: impl FnMut(Phase, &ClientReport),
) -> anyhow::Result<ClientReport> {
    clock::set_precise_timers();
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create")?;
    let clients = open_clients(&plan, &ep)?;
    let mut d = Driver {
        clients,
        timers: BTreeSet::new(),
        buf: vec![0u8; 65_536],
        report: ClientReport::default(),
        seed: 0x10AD_0000,
        next_to_start: 0,
        handshaking: 0,
        rr: 0,
        firing: false,
        closing: false,
        plan,
    };
    let t0 = clock::now();
    let interval = if d.plan.upstream_bps > 0.0 {
        Some(Duration::from_secs_f64(
            d.plan.packet_bytes as f64 * 8.0 / d.plan.upstream_bps,
        ))
    } else {
        None
    };
    let mut s = Schedule {
        phase: Phase::Connecting,
        phase_end: t0 + d.plan.connect_timeout,
        data_start: t0,
        next_send: Instant::MAX,
        interval,
    };
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    while !stop.load(Ordering::Relaxed) {
        let now = clock::now();
        if d.advance(&mut s, now, t0, &mut on_phase) {
            break;
        }
        d.fire_timers(now);
        d.send_due(&mut s, now);
        let wake = [
            d.timers.first().map(|t| t.0),
            Some(s.next_send),
            Some(s.phase_end),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(s.phase_end);
        let wait = wake
            .saturating_duration_since(clock::now())
            .min(Duration::from_millis(50));
        wait_readable(&ep, &mut events, wait)?;
        for ev in &events {
            d.receive(ev.data.u64() as usize);
        }
    }
    if s.phase != Phase::Closing {
        d.finish_report(t0);
    }
    Ok(d.report)
}

/// Where a run is: its phase and when it ends, when the data phase
/// began, and the next upstream packet (`interval` apart; `None`: no
/// upstream data).
struct Schedule {
    phase: Phase,
    phase_end: Instant,
    data_start: Instant,
    next_send: Instant,
    interval: Option<Duration>,
}

impl Driver {
    /// Enters the next phase when this one is over (`on_phase` at the
    /// data phase's start and end); true when the run is done.
    fn advance(
        &mut self,
        s: &mut Schedule,
        now: Instant,
        t0: Instant,
        on_phase: &mut impl FnMut(Phase, &ClientReport),
    ) -> bool {
        match s.phase {
            Phase::Connecting => {
                self.start_handshakes(now);
                if self.report.connected == self.clients.len() || now >= s.phase_end {
                    s.phase = Phase::Data;
                    s.data_start = now;
                    s.phase_end = now + Duration::from_secs_f64(self.plan.data_secs);
                    s.next_send = s.interval.map_or(Instant::MAX, |_| now);
                    on_phase(Phase::Data, &self.report);
                }
            }
            Phase::Data if now >= s.phase_end => {
                s.phase = Phase::Drain;
                self.report.data_s = (now - s.data_start).as_secs_f64();
                s.next_send = Instant::MAX;
                s.phase_end = now + self.plan.drain;
                on_phase(Phase::Drain, &self.report);
            }
            Phase::Drain if now >= s.phase_end => {
                self.finish_report(t0);
                s.phase = Phase::Closing;
                s.phase_end = now + Duration::from_secs(2);
                self.closing = true;
                for i in 0..self.clients.len() {
                    self.clients[i].conn.close(now);
                    self.flush(i, now);
                }
            }
            Phase::Closing
                if now >= s.phase_end || self.clients.iter().all(|c| c.conn.is_closed()) =>
            {
                return true
            }
            _ => {}
        }
        false
    }

    /// Sends the upstream packets due by `now`.
    fn send_due(&mut self, s: &mut Schedule, now: Instant) {
        if let Some(iv) = s.interval {
            // Catch up at most a bounded burst when the loop was late.
            let mut burst = 0;
            while s.next_send <= now && burst < 256 {
                self.send_one(now);
                s.next_send += iv;
                burst += 1;
            }
            if s.next_send + iv * 64 < now {
                s.next_send = now;
            }
        }
    }
}

/// One connected, non-blocking UDP socket (its own source port: the
/// server's key for the client) and one client `Connection` per client.
fn open_clients(plan: &ClientPlan, ep: &impl AsFd) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::with_capacity(plan.clients);
    for i in 0..plan.clients {
        let sock = UdpSocket::bind(SocketAddr::new(plan.local_ip.into(), 0))
            .with_context(|| format!("client {i}: bind"))?;
        sock.connect(plan.server)?;
        sock.set_nonblocking(true)?;
        epoll::add(
            ep,
            sock.as_fd(),
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )
        .context("epoll_ctl")?;
        let conn = Connection::new(Role::Client, plan.conn.clone(), clock::now(), i as u64 + 1);
        clients.push(Client {
            sock,
            conn,
            inner: packet::client_inner_addr(i),
            deadline: None,
            started: None,
            connected_at: None,
            closed: false,
            seq: 0,
            echoes: 0,
            reopen_pending: false,
        });
    }
    Ok(clients)
}

/// Waits up to `wait` for readable sockets; `events` holds them after.
fn wait_readable(
    ep: &impl AsFd,
    events: &mut Vec<epoll::Event>,
    wait: Duration,
) -> anyhow::Result<()> {
    let ts = rustix::event::Timespec {
        tv_sec: wait.as_secs() as i64,
        tv_nsec: i64::from(wait.subsec_nanos()),
    };
    events.clear();
    match epoll::wait(ep, rustix::buffer::spare_capacity(events), Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e).context("epoll_wait"),
    }
}

impl Driver {
    /// Opens handshakes up to the concurrency bound.
    fn start_handshakes(&mut self, now: Instant) {
        while self.handshaking < self.plan.max_handshakes && self.next_to_start < self.clients.len()
        {
            let i = self.next_to_start;
            self.next_to_start += 1;
            self.open(i, now);
        }
    }

    fn open(&mut self, i: usize, now: Instant) {
        let c = &mut self.clients[i];
        c.started.get_or_insert(now);
        // Outer addresses stay unspecified in the checksum pseudo-header,
        // as the daemon's client does (the server's Endpoint does the same).
        if c.conn
            .add_path(now, PathId(0), PathConfig::default())
            .is_ok()
        {
            self.handshaking += 1;
        } else {
            c.closed = true;
        }
        self.flush(i, now);
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(&(t, i)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            self.clients[i].deadline = None;
            if std::mem::take(&mut self.clients[i].reopen_pending) {
                self.open(i, now);
                continue;
            }
            self.clients[i].conn.handle_timeout(now);
            self.firing = true;
            self.flush(i, now);
            self.firing = false;
        }
    }

    /// One upstream packet on the next connected client, round robin.
    fn send_one(&mut self, now: Instant) {
        let n = self.clients.len();
        for _ in 0..n {
            let i = self.rr;
            self.rr = (self.rr + 1) % n;
            let c = &mut self.clients[i];
            if c.connected_at.is_none() || c.closed {
                continue;
            }
            let len = packet::build_probe(
                &mut self.buf,
                c.inner,
                self.plan.echo,
                i as u32,
                c.seq,
                self.plan.packet_bytes,
            );
            c.seq += 1;
            match c.conn.send(now, &self.buf[..len]) {
                Ok(()) => {
                    self.report.up_sent_pkts += 1;
                    self.report.up_sent_bytes += len as u64;
                }
                Err(_) => self.report.up_send_rejected += 1,
            }
            self.flush(i, now);
            return;
        }
    }

    fn receive(&mut self, i: usize) {
        let now = clock::now();
        loop {
            match self.clients[i].sock.recv(&mut self.buf) {
                Ok(n) => {
                    let data = &self.buf[..n];
                    self.clients[i].conn.handle_datagram(now, PathId(0), data);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // ICMP errors (e.g. port unreachable before the server is up).
                Err(_) => break,
            }
        }
        self.flush(i, now);
    }

    /// Sends what the connection has, takes its events and re-arms its timer.
    fn flush(&mut self, i: usize, now: Instant) {
        let c = &mut self.clients[i];
        while let Some(t) = c.conn.poll_transmit(now, &mut self.buf) {
            let seg = t.segment_size.unwrap_or(t.size).max(1);
            for chunk in self.buf[..t.size].chunks(seg) {
                if c.sock.send(chunk).is_err() {
                    self.report.udp_tx_dropped += 1;
                }
            }
        }
        let mut reopen = false;
        while let Some(ev) = c.conn.poll_event() {
            match ev {
                Event::Connected => {
                    c.connected_at = Some(now);
                    self.report.connected += 1;
                    self.handshaking -= 1;
                }
                Event::Delivered { data, .. } => {
                    if packet::is_echo_for(&data, c.inner, i as u32) {
                        c.echoes += 1;
                        self.report.down_recv_pkts += 1;
                        self.report.down_recv_bytes += data.len() as u64;
                    } else {
                        self.report.down_foreign += 1;
                    }
                }
                Event::Closed { .. } if self.closing => c.closed = true,
                Event::Closed { .. } => {
                    if c.connected_at.is_some() {
                        c.closed = true;
                        self.report.dropped_after_connect += 1;
                    } else {
                        reopen = true;
                    }
                }
                _ => {}
            }
        }
        if reopen {
            // Refused before OPEN (e.g. Reset "too busy"): a new connection
            // after a pause, so a full server is not hammered.
            self.report.handshake_retries += 1;
            self.handshaking -= 1;
            self.seed += 1;
            c.conn = Connection::new(Role::Client, self.plan.conn.clone(), now, self.seed);
            c.reopen_pending = true;
            if let Some(old) = c.deadline.take() {
                self.timers.remove(&(old, i));
            }
            let at = now + RETRY_PAUSE;
            c.deadline = Some(at);
            self.timers.insert((at, i));
            return;
        }
        self.rearm(i, now);
    }

    fn rearm(&mut self, i: usize, now: Instant) {
        let c = &mut self.clients[i];
        let mut next = c.conn.poll_timeout();
        if self.firing && next.is_some_and(|t| t <= now) {
            // A deadline handled but not moved: never spin on it.
            self.report.stuck_timers += 1;
            next = Some(now + Duration::from_millis(1));
        }
        if next == c.deadline {
            return;
        }
        if let Some(old) = c.deadline {
            self.timers.remove(&(old, i));
        }
        if let Some(t) = next {
            self.timers.insert((t, i));
        }
        c.deadline = next;
    }

    fn finish_report(&mut self, t0: Instant) {
        let r = &mut self.report;
        let mut ms: Vec<f64> = self
            .clients
            .iter()
            .filter_map(|c| Some((c.connected_at? - c.started?).as_secs_f64() * 1e3))
            .collect();
        ms.sort_by(f64::total_cmp);
        if let Some(&max) = ms.last() {
            let q = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
            r.connect_ms_p50 = q(0.5);
            r.connect_ms_p99 = q(0.99);
            r.connect_ms_max = max;
        }
        if r.connected == self.clients.len() {
            r.connect_all_s = self
                .clients
                .iter()
                .filter_map(|c| c.connected_at)
                .max()
                .map(|t| (t - t0).as_secs_f64());
        }
        r.connected_at_end = self
            .clients
            .iter()
            .filter(|c| c.connected_at.is_some() && !c.closed && !c.conn.is_closed())
            .count();
        r.clients_with_downstream = self.clients.iter().filter(|c| c.echoes > 0).count();
    }
}
