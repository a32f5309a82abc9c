//! The simulation: two tunnel endpoints, the links of every path, traffic
//! sources and sinks, all stepped by one event queue on a virtual clock.
//!
//! Topology: the tunnel *client* and *server* are two unchanged
//! `mpdccp_proto::Connection`s. Each scenario path is two [`Link`]s, `up`
//! (client → server) and `down`. A flow's sender sits on the client for
//! `direction = "up"` (the default) and on the server for `"down"`; its
//! packets enter the tunnel with `Connection::send` (`via = "tunnel"`) or go
//! straight onto one path's link (`via = "<path>"`, a plain single-path flow
//! such as a baseline TCP or competing cross traffic). A TCP flow's acks take
//! the same way back.
//!
//! One step = pop the earliest `(time, seq)` deadline, run that component,
//! then `Simulation::settle`: drain every connection touched (datagrams to
//! links, events to sinks and senders) until nothing changes, and re-arm
//! every deadline. Nothing depends on wall time, hash order or OS randomness;
//! every random draw comes from a ChaCha stream seeded from the scenario seed.
//!
//! What is measured: path RTT and queueing delay on the links themselves,
//! as each delivered packet experienced them (`on_link_delivery`),
//! independent of any estimator inside the protocol; cwnd, SRTT and link
//! queue bytes every `SAMPLE_PERIOD` (`sample`). Both go to the
//! `mpdccp_model::results::Recorder`.

use std::net::SocketAddr;
use std::time::Duration;

use mpdccp_model::link::Link;
use mpdccp_model::results::{Recorder, Summary, TimeSeries};
use mpdccp_model::scenario::{Direction, Scenario};
use mpdccp_proto::conn::{Connection, ConnectionConfig, Event, PathConfig};
use mpdccp_proto::{Instant, PathId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::flow::quic::QuicSender;
use crate::flow::quic_rx::QuicReceiver;
use crate::flow::tcp::TcpSender;
use crate::flow::tcp_rx::{TcpReceiver, DELAYED_ACK_TIMEOUT};
use crate::flow::{Cbr, SeqSink};
use crate::packet::{EncodeBuf, FlowPkt, Head, PktKind, Transport};
use crate::pool::BufPool;
use crate::queue::{EventQueue, Target};
use crate::SimError;

mod build;
use build::{build_flow, build_paths, build_tunnel};

/// Time-series sampling period (docs/SCENARIOS.md: one row per 100 ms).
const SAMPLE_PERIOD: Duration = Duration::from_millis(100);
/// Largest datagram a connection may emit in one `poll_transmit` (GSO batches included).
const TRANSMIT_BUF_BYTES: usize = 64 * 1024;
/// Packets still travelling this close to the end are neither delivered nor lost.
const END_GRACE: Duration = Duration::from_secs(1);
/// Events at one instant beyond which a component is considered stuck.
const SPIN_LIMIT: u64 = 100_000;
/// How far a connection deadline is pushed when it falls at or before an
/// instant the connection was already woken at (`settle`).
const SPIN_NUDGE: Duration = Duration::from_micros(50);

/// How many deliveries ahead a link's next datagram is fetched (`pool.rs`).
const PREFETCH_AHEAD: usize = 2;

const T_CLIENT: Target = 0;
const T_SERVER: Target = 1;
const T_TICK: Target = 2;
const T_FIRST_LINK: Target = 3;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
    /// The link direction a packet sent from this side travels.
    fn dir(self) -> usize {
        self as usize
    }
}

/// What a link carries: a DCCP datagram (index into the buffer pool) or a
/// plain flow packet (index into `flow_pool`). Indices keep a link entry at
/// 64 bytes instead of 136 (a `FlowPkt` with its SACK blocks is 72): E4's
/// path 1 holds 12 000+ entries.
#[derive(Clone, Copy, Debug)]
enum Payload {
    Dccp(u32),
    Flow(u32),
}

#[derive(Clone, Copy, Debug)]
struct Wire {
    payload: Payload,
    enqueued: Instant,
    len: u32,
}

struct SimPath {
    /// `links[0]` up (client → server), `links[1]` down.
    links: [Link<Wire>; 2],
    delay_schedule: Vec<(Instant, Duration)>,
    /// Latest sojourn (queue + serialization + propagation) per direction.
    last_sojourn: [Option<Duration>; 2],
    /// Bytes of tunnel (DCCP) traffic delivered per direction: the subflow's share.
    tunnel_bytes: [u64; 2],
    flow_bytes: [u64; 2],
    /// Packets the link dropped in the data direction, tunnel (DCCP)
    /// datagrams and other flows' packets apart: which traffic the path's
    /// losses hit.
    tunnel_dropped_pkts: u64,
    flow_dropped_pkts: u64,
    /// Tunnel bytes delivered in the data direction, per 100 ms bin.
    tunnel_series: Vec<u64>,
    in_tunnel: bool,
}

impl SimPath {
    fn schedule_value<T: Copy>(sched: &[(Instant, T)], now: Instant, default: T) -> T {
        let i = sched.partition_point(|(at, _)| *at <= now);
        if i == 0 {
            sched.first().map_or(default, |p| p.1)
        } else {
            sched[i - 1].1
        }
    }
    fn delay(&self, now: Instant) -> Duration {
        Self::schedule_value(&self.delay_schedule, now, Duration::ZERO)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Via {
    Tunnel,
    Path(usize),
}

enum Source {
    Cbr(Cbr),
    Bulk { bytes: u32, next_seq: u64 },
    Tcp(Box<TcpSender>),
    Quic(Box<QuicSender>),
}

enum Sink {
    Seq(SeqSink),
    Tcp(Box<TcpReceiver>),
    Quic(QuicReceiver),
}

struct SimFlow {
    via: Via,
    tx: Side,
    start: Instant,
    stop: Instant,
    source: Source,
    sink: Sink,
    /// Packets the tunnel refused (send queue full / not established).
    tunnel_refused_pkts: u64,
    link_dropped_pkts: u64,
    delivered_bytes: u64,
    first_delivery: Option<Instant>,
    owd_min: Option<Duration>,
    /// TCP receiver: when the held (delayed) ack goes out.
    delayed_ack_at: Option<Instant>,
}

impl SimFlow {
    /// What the flow's packets say they are in the tunnel.
    fn transport(&self) -> Transport {
        match self.source {
            Source::Tcp(_) => Transport::Tcp,
            Source::Cbr(_) | Source::Bulk { .. } | Source::Quic(_) => Transport::Udp,
        }
    }
}

struct Node {
    conn: Connection,
    dirty: bool,
}

/// Engine counters (deterministic; wall time is measured by the caller).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    pub events: u64,
    /// Packets delivered by all links (both directions).
    pub link_pkts: u64,
    pub link_drops: u64,
    pub datagrams_sent: u64,
    /// Times a component asked to be woken at an instant it had just been
    /// woken at, and was polled a little later instead.
    pub spin_breaks: u64,
}

/// The result of a run.
pub struct SimOutput {
    pub summary: Summary,
    pub timeseries: TimeSeries,
    pub stats: SimStats,
    /// Per path: tunnel (DCCP) bytes delivered in the data direction per
    /// 100 ms bin — each subflow's share, apart from other traffic on the path.
    pub tunnel_series: Vec<Vec<u64>>,
    /// Connection events other than deliveries, in order.
    pub conn_events: Vec<ConnEventRecord>,
}

/// One connection event (path up/failed/closed, connected, closed).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ConnEventRecord {
    pub at_s: f64,
    pub side: &'static str,
    pub event: String,
    /// The path index the event concerns, if any.
    pub path: Option<usize>,
}

/// One running scenario. Build with [`Simulation::new`], advance with
/// [`Simulation::run_until`] (in as many steps as a progress display needs),
/// then [`Simulation::finish`].
pub struct Simulation {
    scenario: Scenario,
    seed: u64,
    now: Instant,
    end: Instant,
    queue: EventQueue,
    /// `None` when no flow uses the tunnel.
    nodes: Option<[Node; 2]>,
    paths: Vec<SimPath>,
    flows: Vec<SimFlow>,
    /// Link direction whose packets count as the path's traffic.
    data_dir: usize,
    pool: BufPool,
    /// Flow packets on the links, and the free slots.
    flow_pool: Vec<FlowPkt>,
    flow_free: Vec<u32>,
    rec: Recorder,
    tx_buf: Vec<u8>,
    scratch: EncodeBuf,
    established_at: Option<Instant>,
    conn_events: Vec<ConnEventRecord>,
    paths_added: bool,
    send_queue_pkts: usize,
    same_instant_events: u64,
    /// Sizes of tunnelled data packets (to find them inside DCCP datagrams).
    tunnel_pkt_lens: Vec<usize>,
    timeout_handled_at: [Option<Instant>; 2],
    /// The sender's path views at the last few sampling ticks (oldest first),
    /// to explain the peak scheduler queueing delay.
    recent_views: std::collections::VecDeque<(Instant, Vec<PathBrief>)>,
    /// The largest scheduler queueing delay so far and what the paths did
    /// while that packet waited.
    send_queue_peak: Option<SendQueuePeak>,
    pub stats: SimStats,
}

/// One path of the tunnel's sender at a sampling tick.
#[derive(Clone, Debug, PartialEq)]
struct PathBrief {
    state: mpdccp_proto::path::PathState,
    cc_state: &'static str,
    cwnd_pkts: u32,
}

/// The packet that waited longest between `Connection::send` and leaving on
/// a path, and the state of each path during its wait.
#[derive(Clone, Debug)]
struct SendQueuePeak {
    at: Instant,
    delay: Duration,
    /// Per path: the distinct (state, CC state) pairs and the smallest
    /// window seen at the sampling ticks during the wait.
    paths: Vec<(Vec<String>, u32)>,
}

/// How many sampling ticks `recent_views` keeps (3 s).
const RECENT_VIEW_TICKS: usize = 30;

impl Simulation {
    /// Builds the topology; `seed` overrides the scenario's.
    pub fn new(scenario: &Scenario, seed: Option<u64>) -> Result<Self, SimError> {
        scenario
            .validate()
            .map_err(|e| SimError::Scenario(e.to_string()))?;
        let mut scenario = scenario.clone();
        let seed = seed.unwrap_or(scenario.seed);
        scenario.seed = seed;
        let mut master = ChaCha8Rng::seed_from_u64(seed);
        let end = scenario.end();

        let mut paths = build_paths(&scenario, &mut master);
        let mut flows = Vec::with_capacity(scenario.flow.len());
        for (i, f) in scenario.flow.iter().enumerate() {
            flows.push(build_flow(&scenario, i, f, end, &mut master)?);
        }
        let nodes = build_tunnel(&scenario, &mut paths, &mut flows, &mut master)?;

        let data_dir = if !scenario.flow.is_empty()
            && scenario.flow.iter().all(|f| f.direction == Direction::Down)
        {
            1
        } else {
            0
        };
        // Per flow: the sender's timer, then the receiver's delayed-ack timer.
        let n_targets = T_FIRST_LINK + 2 * paths.len() + 2 * flows.len();
        let rec = Recorder::new(&scenario);
        let mut tunnel_pkt_lens: Vec<usize> = scenario
            .flow
            .iter()
            .filter(|f| f.via == mpdccp_model::scenario::VIA_TUNNEL)
            .map(|f| f.packet_bytes.max(crate::packet::HEADER_BYTES))
            .collect();
        tunnel_pkt_lens.sort_unstable();
        tunnel_pkt_lens.dedup();
        let send_queue_pkts = scenario.tunnel.send_queue_pkts;
        let mut sim = Simulation {
            scenario,
            seed,
            now: Instant::ZERO,
            end,
            queue: EventQueue::new(n_targets),
            nodes,
            paths,
            flows,
            data_dir,
            pool: BufPool::default(),
            flow_pool: Vec::new(),
            flow_free: Vec::new(),
            rec,
            tx_buf: vec![0; TRANSMIT_BUF_BYTES],
            scratch: EncodeBuf::default(),
            established_at: None,
            conn_events: Vec::new(),
            paths_added: false,
            send_queue_pkts,
            same_instant_events: 0,
            tunnel_pkt_lens,
            timeout_handled_at: [None; 2],
            recent_views: std::collections::VecDeque::new(),
            send_queue_peak: None,
            stats: SimStats::default(),
        };
        sim.start()?;
        Ok(sim)
    }

    fn t_link(&self, path: usize, dir: usize) -> Target {
        T_FIRST_LINK + 2 * path + dir
    }
    fn t_flow(&self, flow: usize) -> Target {
        T_FIRST_LINK + 2 * self.paths.len() + flow
    }
    fn t_delayed_ack(&self, flow: usize) -> Target {
        T_FIRST_LINK + 2 * self.paths.len() + self.flows.len() + flow
    }

    fn start(&mut self) -> Result<(), SimError> {
        let now = self.now;
        if let Some(nodes) = &mut self.nodes {
            // The first path opens the connection (MP_KEY handshake); the
            // others join once it is established (see `on_conn_event`).
            let cfg = path_config(&self.scenario, 0);
            nodes[0]
                .conn
                .add_path(now, PathId(0), cfg)
                .map_err(|e| SimError::Protocol(format!("add_path(path 0): {e:?}")))?;
        }
        self.queue.set(T_TICK, Some(now));
        for i in 0..self.flows.len() {
            if self.flows[i].via != Via::Tunnel {
                let t = self.t_flow(i);
                let at = self.flows[i].start;
                self.queue.set(t, Some(at));
            }
        }
        self.settle();
        Ok(())
    }

    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }
    /// End of the run.
    pub fn end(&self) -> Instant {
        self.end
    }

    /// Processes every event up to and including `until` (capped at the end).
    pub fn run_until(&mut self, until: Instant) {
        let until = until.min(self.end);
        while let Some((at, target)) = self.queue.pop_until(until) {
            if at == self.now {
                self.same_instant_events += 1;
                if self.same_instant_events > SPIN_LIMIT {
                    // A component keeps asking to be woken at the current
                    // instant without making progress (a protocol bug): say
                    // so and move its deadline on, rather than hang.
                    self.stats.spin_breaks += 1;
                    if self.stats.spin_breaks <= 10 {
                        tracing::warn!(now = ?at, target, "component re-armed at the same instant {SPIN_LIMIT} times; nudging it 1 ms");
                    }
                    self.same_instant_events = 0;
                    self.queue.set(target, Some(at + Duration::from_millis(1)));
                    continue;
                }
            } else {
                self.same_instant_events = 0;
            }
            self.now = at;
            self.stats.events += 1;
            self.dispatch(target);
            self.settle();
        }
        self.now = self.now.max(until);
    }

    fn dispatch(&mut self, target: Target) {
        let now = self.now;
        match target {
            T_CLIENT | T_SERVER => {
                if let Some(nodes) = &mut self.nodes {
                    let n = &mut nodes[target];
                    n.conn.handle_timeout(now);
                    self.timeout_handled_at[target] = Some(now);
                    n.dirty = true;
                }
            }
            T_TICK => {
                self.sample(now);
                self.queue.set(T_TICK, Some(now + SAMPLE_PERIOD));
            }
            t if t < T_FIRST_LINK + 2 * self.paths.len() => {
                let path = (t - T_FIRST_LINK) / 2;
                let dir = (t - T_FIRST_LINK) % 2;
                while let Some(d) = self.paths[path].links[dir].poll_delivery(now) {
                    // Start the cache miss on a datagram two deliveries
                    // ahead (written one path delay ago; `pool.rs`).
                    if let Some(Wire {
                        payload: Payload::Dccp(b),
                        ..
                    }) = self.paths[path].links[dir].peek(PREFETCH_AHEAD)
                    {
                        self.pool.touch(*b);
                    }
                    self.on_link_delivery(path, dir, d.pkt, d.queue_delay);
                }
                self.rearm_link(path, dir);
            }
            t if t < T_FIRST_LINK + 2 * self.paths.len() + self.flows.len() => {
                let i = t - T_FIRST_LINK - 2 * self.paths.len();
                self.on_flow_timer(i);
            }
            t => {
                let i = t - T_FIRST_LINK - 2 * self.paths.len() - self.flows.len();
                self.on_delayed_ack_timer(i);
            }
        }
    }

    fn rearm_link(&mut self, path: usize, dir: usize) {
        let t = self.t_link(path, dir);
        let at = self.paths[path].links[dir].next_event();
        self.queue.set(t, at);
    }

    fn on_flow_timer(&mut self, i: usize) {
        let now = self.now;
        match &mut self.flows[i].source {
            Source::Cbr(_) => {
                while let Source::Cbr(c) = &mut self.flows[i].source {
                    if c.next_time().is_none_or(|t| t > now) {
                        break;
                    }
                    let pkt = FlowPkt::data(i as u16, c.next_seq, now, c.bytes);
                    c.next_seq += 1;
                    self.emit(i, pkt);
                }
            }
            Source::Tcp(tx) => tx.handle_timeout(now),
            Source::Quic(tx) => tx.handle_timeout(now),
            Source::Bulk { .. } => {
                // Started (or stopped): the top-up in `settle` does the work.
                if let Some(nodes) = &mut self.nodes {
                    nodes[self.flows[i].tx as usize].dirty = true;
                }
            }
        }
        self.pump_flow(i);
    }

    /// The delayed-ack timer of flow `i`'s TCP receiver fired: send the held ack.
    fn on_delayed_ack_timer(&mut self, i: usize) {
        self.flows[i].delayed_ack_at = None;
        let ack = match &mut self.flows[i].sink {
            Sink::Tcp(r) => r.take_pending_ack(),
            Sink::Quic(r) => r.take_pending_ack(self.now),
            Sink::Seq(_) => None,
        };
        if let Some(ack) = ack {
            self.emit(i, ack);
        }
    }

    /// Lets a TCP sender transmit what its window allows, and re-arms the
    /// flow's timer.
    fn pump_flow(&mut self, i: usize) {
        let now = self.now;
        let start = self.flows[i].start;
        let next = loop {
            match &mut self.flows[i].source {
                Source::Tcp(tx) => {
                    if now < start {
                        break Some(start);
                    }
                    match tx.poll_transmit(now) {
                        Some(pkt) => self.emit(i, pkt),
                        None => break tx.poll_timeout(now),
                    }
                }
                Source::Quic(tx) => {
                    if now < start {
                        break Some(start);
                    }
                    match tx.poll_transmit(now) {
                        Some(pkt) => self.emit(i, pkt),
                        None => break tx.poll_timeout(now),
                    }
                }
                Source::Cbr(c) => break c.next_time(),
                Source::Bulk { .. } => {
                    let f = &self.flows[i];
                    break if now < f.start {
                        Some(f.start)
                    } else if now < f.stop {
                        Some(f.stop)
                    } else {
                        None
                    };
                }
            }
        };
        let t = self.t_flow(i);
        self.queue.set(t, next.map(|n| n.max(now)));
    }

    /// Sends one data or ack packet of flow `i` from its side.
    fn emit(&mut self, i: usize, pkt: FlowPkt) {
        let now = self.now;
        let flow = &self.flows[i];
        let side = if pkt.kind == PktKind::Data {
            flow.tx
        } else {
            flow.tx.other()
        };
        if pkt.kind == PktKind::Data {
            self.rec.flow_sent(i, now, pkt.len as usize);
        }
        match flow.via {
            Via::Tunnel => {
                pkt.encode(flow.transport(), &mut self.scratch);
                let Some(nodes) = &mut self.nodes else {
                    return;
                };
                let node = &mut nodes[side as usize];
                match node.conn.send(now, &self.scratch) {
                    Ok(()) => node.dirty = true,
                    Err(_) => self.flows[i].tunnel_refused_pkts += 1,
                }
            }
            Via::Path(p) => {
                let slot = match self.flow_free.pop() {
                    Some(k) => {
                        self.flow_pool[k as usize] = pkt;
                        k
                    }
                    None => {
                        self.flow_pool.push(pkt);
                        (self.flow_pool.len() - 1) as u32
                    }
                };
                let w = Wire {
                    payload: Payload::Flow(slot),
                    enqueued: now,
                    len: pkt.len,
                };
                if !self.push_link(p, side.dir(), w) {
                    self.flows[i].link_dropped_pkts += 1;
                }
            }
        }
    }

    /// Pushes onto a link; false if the link dropped the packet.
    fn push_link(&mut self, path: usize, dir: usize, w: Wire) -> bool {
        let now = self.now;
        let res = self.paths[path].links[dir].push(now, w, w.len as usize);
        let ok = res.is_ok();
        if dir == self.data_dir {
            self.rec.path_sent(path, now, w.len as usize);
        }
        if !ok {
            self.stats.link_drops += 1;
            if dir == self.data_dir {
                self.rec.path_lost(path, now, 1);
                let p = &mut self.paths[path];
                match w.payload {
                    Payload::Dccp(_) => p.tunnel_dropped_pkts += 1,
                    Payload::Flow(_) => p.flow_dropped_pkts += 1,
                }
                tracing::trace!(
                    path,
                    at_s = now.as_secs_f64(),
                    tunnel = matches!(w.payload, Payload::Dccp(_)),
                    len = w.len,
                    cause = ?res,
                    "link drop"
                );
            }
            match w.payload {
                Payload::Dccp(b) => self.pool.release(b),
                Payload::Flow(k) => self.flow_free.push(k),
            }
        }
        self.rearm_link(path, dir);
        ok
    }

    fn on_link_delivery(&mut self, path: usize, dir: usize, w: Wire, queue_delay: Duration) {
        let now = self.now;
        self.stats.link_pkts += 1;
        let p = &mut self.paths[path];
        let sojourn = now - w.enqueued;
        p.last_sojourn[dir] = Some(sojourn);
        match w.payload {
            Payload::Dccp(_) => {
                p.tunnel_bytes[dir] += u64::from(w.len);
                if dir == self.data_dir {
                    let bin = (now.as_nanos() / SAMPLE_PERIOD.as_nanos() as u64) as usize;
                    if p.tunnel_series.len() <= bin {
                        p.tunnel_series.resize(bin + 1, 0);
                    }
                    p.tunnel_series[bin] += u64::from(w.len);
                }
            }
            Payload::Flow(_) => p.flow_bytes[dir] += u64::from(w.len),
        }
        if dir == self.data_dir {
            // Path RTT as a packet experiences it: its own sojourn plus the
            // latest sojourn in the reverse direction (propagation delay there
            // until a packet has gone that way).
            let back = p.last_sojourn[1 - dir].unwrap_or_else(|| p.delay(now));
            self.rec
                .path_delivery(path, now, w.len as usize, sojourn + back, queue_delay);
        }
        let receiver = if dir == 0 { Side::Server } else { Side::Client };
        match w.payload {
            Payload::Dccp(b) => {
                if let Some(nodes) = &mut self.nodes {
                    let node = &mut nodes[receiver as usize];
                    let (client, server) = path_addrs(path);
                    let (local, remote) = match receiver {
                        Side::Client => (client, server),
                        Side::Server => (server, client),
                    };
                    node.conn.handle_datagram_from(
                        now,
                        PathId(path as u32),
                        local,
                        remote,
                        self.pool.materialize(b),
                    );
                    node.dirty = true;
                }
                self.pool.release(b);
            }
            Payload::Flow(k) => {
                let pkt = self.flow_pool[k as usize];
                self.flow_free.push(k);
                self.on_flow_packet(&pkt);
            }
        }
    }

    /// A flow packet reached its destination (via tunnel or link).
    fn on_flow_packet(&mut self, pkt: &FlowPkt) {
        let now = self.now;
        let i = usize::from(pkt.flow);
        if i >= self.flows.len() {
            return;
        }
        match pkt.kind {
            PktKind::Data => {
                let owd = now - pkt.sent_at;
                let f = &mut self.flows[i];
                let (new, ooo, ack) = match &mut f.sink {
                    Sink::Seq(s) => {
                        let a = s.handle(now, pkt.seq);
                        (!a.duplicate, a.out_of_order, None)
                    }
                    Sink::Tcp(r) => {
                        let mut ack = *pkt;
                        let a = r.handle_data(pkt, &mut ack);
                        (a.new, a.out_of_order, Some((ack, a.ack_now)))
                    }
                    Sink::Quic(r) => {
                        let mut ack = *pkt;
                        let a = r.handle_data(now, pkt, &mut ack);
                        (a.new, a.out_of_order, Some((ack, a.ack_now)))
                    }
                };
                let ack_timeout = match &f.sink {
                    Sink::Quic(r) => r.max_ack_delay(),
                    _ => DELAYED_ACK_TIMEOUT,
                };
                if new {
                    f.delivered_bytes += u64::from(pkt.len);
                    f.first_delivery.get_or_insert(now);
                    f.owd_min = Some(f.owd_min.map_or(owd, |m| m.min(owd)));
                    self.rec.flow_delivered(i, now, pkt.len as usize, owd, ooo);
                }
                match ack {
                    Some((ack, true)) => {
                        if self.flows[i].delayed_ack_at.take().is_some() {
                            let t = self.t_delayed_ack(i);
                            self.queue.set(t, None);
                        }
                        self.emit(i, ack);
                    }
                    Some((_, false)) if self.flows[i].delayed_ack_at.is_none() => {
                        let at = now + ack_timeout;
                        self.flows[i].delayed_ack_at = Some(at);
                        let t = self.t_delayed_ack(i);
                        self.queue.set(t, Some(at));
                    }
                    _ => {}
                }
            }
            PktKind::Ack => match &mut self.flows[i].source {
                Source::Tcp(tx) => {
                    tx.handle_ack(now, pkt);
                    self.pump_flow(i);
                }
                Source::Quic(tx) => {
                    tx.handle_ack(now, pkt);
                    self.pump_flow(i);
                }
                _ => {}
            },
        }
    }

    /// Drains every touched connection until nothing changes, then re-arms
    /// their timers.
    fn settle(&mut self) {
        if self.nodes.is_none() {
            return;
        }
        loop {
            let mut progressed = false;
            for side in [Side::Client, Side::Server] {
                let dirty = self.nodes.as_ref().is_some_and(|n| n[side as usize].dirty);
                if !dirty {
                    continue;
                }
                progressed = true;
                if let Some(nodes) = &mut self.nodes {
                    nodes[side as usize].dirty = false;
                }
                let mut first = true;
                loop {
                    let pushed = self.top_up_bulk(side);
                    // After a drain (ended by a `None` at this instant), a
                    // connection given nothing new and holding nothing to
                    // schedule would only answer `None` again, changing
                    // nothing (its paths' `None` exits are pure here: no
                    // PLPMTUD, and `tx_buf` fits any datagram): skip that
                    // poll (most visits to a receiver).
                    let idle = self
                        .nodes
                        .as_ref()
                        .is_some_and(|n| n[side as usize].conn.send_queue_len() == 0);
                    if !first && pushed == 0 && idle {
                        break;
                    }
                    // Likewise when that `None` held a full queue behind
                    // full windows and the top-up only appended to it: the
                    // connection says a repeat would find the same.
                    let now = self.now;
                    let blocked = self
                        .nodes
                        .as_ref()
                        .is_some_and(|n| n[side as usize].conn.repoll_would_idle(now));
                    if !first && blocked {
                        break;
                    }
                    first = false;
                    if self.drain_transmits(side) == 0 {
                        break;
                    }
                }
                self.drain_events(side);
                if let Some(nodes) = &self.nodes {
                    let now = self.now;
                    let mut at = nodes[side as usize].conn.poll_timeout();
                    if let Some(a) = at.filter(|a| *a <= now) {
                        if self.timeout_handled_at[side as usize] == Some(now) {
                            // Woken at `now` already: `handle_timeout(now)`
                            // leaves the deadline later than `now` (its
                            // invariant), so this one was armed since, by a
                            // datagram, send or transmit at this instant.
                            // Poll a little later rather than wake the
                            // connection twice at one instant; acks wake it
                            // anyway.
                            self.stats.spin_breaks += 1;
                            at = Some(now + SPIN_NUDGE);
                        } else {
                            at = Some(a.max(now));
                        }
                    }
                    self.queue.set(side as usize, at);
                }
            }
            if !progressed {
                break;
            }
        }
    }

    fn drain_transmits(&mut self, side: Side) -> usize {
        let now = self.now;
        let mut count = 0;
        loop {
            let Some(nodes) = &mut self.nodes else {
                return count;
            };
            let Some(t) = nodes[side as usize]
                .conn
                .poll_transmit(now, &mut self.tx_buf)
            else {
                return count;
            };
            let path = t.path.0 as usize;
            let size = t.size.min(self.tx_buf.len());
            let seg = t.segment_size.unwrap_or(size).max(1);
            // The path's transport: outer IPv4 header and encapsulation
            // on the link (none when the scenario leaves it unset).
            let outer = self
                .scenario
                .path
                .get(path)
                .and_then(|p| p.transport)
                .map_or(0, |t| t.outer_bytes() as u32);
            let mut off = 0;
            while off < size {
                let end = (off + seg).min(size);
                count += 1;
                self.stats.datagrams_sent += 1;
                if path < self.paths.len() {
                    self.record_send_queue_delay(off, end);
                    let b = self.pool.alloc(&self.tx_buf[off..end]);
                    let w = Wire {
                        payload: Payload::Dccp(b),
                        enqueued: now,
                        len: (end - off) as u32 + outer,
                    };
                    self.push_link(path, side.dir(), w);
                }
                off = end;
            }
        }
    }

    /// The time a tunnelled data packet waited between `Connection::send`
    /// and leaving on a path (send queue plus pacing: the "queuing delay at
    /// the scheduler" of E5). A DCCP-Data packet carries the tunnelled packet
    /// unchanged after its header (RFC 4340 §5), so the flow packet's own
    /// header — with its tunnel entry time — sits at a known offset from the
    /// end; control packets and acks do not match.
    fn record_send_queue_delay(&mut self, off: usize, end: usize) {
        let d = &self.tx_buf[off..end];
        for &len in &self.tunnel_pkt_lens {
            let Some(start) = d.len().checked_sub(len) else {
                continue;
            };
            let Some(pkt) = Head::decode(&d[start..]) else {
                continue;
            };
            if pkt.kind == PktKind::Data && pkt.len as usize == len {
                let now = self.now;
                let delay = now - pkt.sent_at;
                self.rec.send_queue_delay(now, delay);
                if self
                    .send_queue_peak
                    .as_ref()
                    .is_none_or(|p| delay > p.delay)
                {
                    self.note_send_queue_peak(now, delay);
                }
                return;
            }
        }
    }

    /// Records what every path did while the packet leaving at `at` waited
    /// `delay` (the sampling ticks within the wait, plus the tick before).
    fn note_send_queue_peak(&mut self, at: Instant, delay: Duration) {
        let from = at.saturating_sub(delay + SAMPLE_PERIOD);
        let mut paths: Vec<(Vec<String>, u32)> = vec![(Vec::new(), u32::MAX); self.paths.len()];
        for (_, views) in self.recent_views.iter().filter(|(t, _)| *t >= from) {
            for (p, v) in views.iter().enumerate() {
                let Some(slot) = paths.get_mut(p) else {
                    continue;
                };
                let label = format!("{:?} {}", v.state, v.cc_state);
                if !slot.0.contains(&label) {
                    slot.0.push(label);
                }
                slot.1 = slot.1.min(v.cwnd_pkts);
            }
        }
        self.send_queue_peak = Some(SendQueuePeak { at, delay, paths });
    }

    fn drain_events(&mut self, side: Side) {
        loop {
            let Some(nodes) = &mut self.nodes else {
                return;
            };
            let Some(ev) = nodes[side as usize].conn.poll_event() else {
                return;
            };
            match ev {
                Event::Delivered { data, .. } => {
                    let pkt = FlowPkt::decode(&data);
                    nodes[side as usize].conn.recycle_delivered(data);
                    if let Some(pkt) = pkt {
                        self.on_flow_packet(&pkt);
                    }
                }
                other => {
                    tracing::debug!(?side, now = ?self.now, event = ?other, "connection event");
                    let path = match &other {
                        Event::PathEstablished(id)
                        | Event::PathFailed(id)
                        | Event::PathClosed(id) => Some(id.0 as usize),
                        _ => None,
                    };
                    self.conn_events.push(ConnEventRecord {
                        at_s: self.now.as_secs_f64(),
                        side: match side {
                            Side::Client => "client",
                            Side::Server => "server",
                        },
                        event: format!("{other:?}"),
                        path,
                    });
                    if side == Side::Client && matches!(other, Event::Connected) {
                        self.on_established();
                    }
                }
            }
        }
    }

    /// The tunnel is up: join the other paths and let tunnel flows start.
    fn on_established(&mut self) {
        let now = self.now;
        if self.established_at.is_none() {
            self.established_at = Some(now);
        }
        if !self.paths_added {
            self.paths_added = true;
            let n = self.paths.iter().filter(|p| p.in_tunnel).count();
            for p in 1..n {
                let cfg = path_config(&self.scenario, p);
                if let Some(nodes) = &mut self.nodes {
                    if let Err(e) = nodes[0].conn.add_path(now, PathId(p as u32), cfg) {
                        tracing::warn!(path = p, error = ?e, "add_path failed");
                    }
                    nodes[0].dirty = true;
                }
            }
        }
        for i in 0..self.flows.len() {
            if self.flows[i].via != Via::Tunnel {
                continue;
            }
            // A source that was due before the tunnel existed starts now.
            let f = &mut self.flows[i];
            if f.start < now {
                f.start = now;
                if let Source::Cbr(c) = &mut f.source {
                    c.start = now;
                }
            }
            // A due bulk flow is filled by `top_up_bulk` in `settle`, which
            // only visits a dirty node: without this a one-path tunnel (no
            // join to dirty the client) never sent a byte.
            let f = &self.flows[i];
            if matches!(f.source, Source::Bulk { .. }) && f.start <= now && now < f.stop {
                if let Some(nodes) = &mut self.nodes {
                    nodes[f.tx as usize].dirty = true;
                }
            }
            self.pump_flow(i);
        }
    }

    /// Keeps the tunnel's send queue full for every active bulk flow of
    /// `side`; returns how many packets it offered (refused ones too).
    fn top_up_bulk(&mut self, side: Side) -> usize {
        let now = self.now;
        let mut pushed = 0;
        if self.established_at.is_none() {
            return pushed;
        }
        for i in 0..self.flows.len() {
            let f = &self.flows[i];
            if f.tx != side || now < f.start || now >= f.stop {
                continue;
            }
            let Source::Bulk { bytes, .. } = f.source else {
                continue;
            };
            let Some(nodes) = &mut self.nodes else {
                return pushed;
            };
            let conn = &mut nodes[side as usize].conn;
            let room = self.send_queue_pkts.saturating_sub(send_queue_len(conn));
            for _ in 0..room {
                let Source::Bulk { next_seq, .. } = &mut self.flows[i].source else {
                    break;
                };
                let seq = *next_seq;
                let pkt = FlowPkt::data(i as u16, seq, now, bytes);
                pkt.encode(Transport::Udp, &mut self.scratch);
                let Some(nodes) = &mut self.nodes else {
                    return pushed;
                };
                // Counted even when refused: the call reached the connection.
                pushed += 1;
                if nodes[side as usize].conn.send(now, &self.scratch).is_err() {
                    break;
                }
                *next_seq += 1;
                self.rec.flow_sent(i, now, bytes as usize);
            }
        }
        pushed
    }

    fn sample(&mut self, now: Instant) {
        let views = self
            .nodes
            .as_ref()
            .map(|n| n[self.data_dir].conn.paths())
            .unwrap_or_default();
        if self.nodes.is_some() {
            let briefs = (0..self.paths.len())
                .map(|p| {
                    views.iter().find(|v| v.id == PathId(p as u32)).map_or(
                        PathBrief {
                            state: mpdccp_proto::path::PathState::Establishing,
                            cc_state: "-",
                            cwnd_pkts: 0,
                        },
                        |v| PathBrief {
                            state: v.state,
                            cc_state: v.cc_state,
                            cwnd_pkts: v.cwnd_pkts,
                        },
                    )
                })
                .collect();
            if self.recent_views.len() == RECENT_VIEW_TICKS {
                self.recent_views.pop_front();
            }
            self.recent_views.push_back((now, briefs));
        }
        for p in 0..self.paths.len() {
            let queue_bytes = self.paths[p].links[self.data_dir].queue_bytes();
            let view = views.iter().find(|v| v.id == PathId(p as u32));
            let (cwnd, srtt) = match view {
                Some(v) => (f64::from(v.cwnd_pkts), v.srtt),
                None => self
                    .flows
                    .iter()
                    .find_map(|f| match (&f.source, f.via) {
                        (Source::Tcp(tx), Via::Path(q)) if q == p => {
                            Some((f64::from(tx.cwnd_pkts()), tx.srtt()))
                        }
                        (Source::Quic(tx), Via::Path(q)) if q == p => {
                            Some((f64::from(tx.cwnd_pkts()), tx.srtt()))
                        }
                        _ => None,
                    })
                    .unwrap_or((0.0, None)),
            };
            self.rec.path_sample(p, now, cwnd, srtt, queue_bytes);
        }
    }

    /// Ends the run: accounts losses, adds per-run details to `meta`, and
    /// builds the summary and time series.
    pub fn finish(mut self) -> SimOutput {
        let horizon = self.end.saturating_sub(END_GRACE);
        let flow_meta = self.flows_meta(horizon);
        let path_meta = self.paths_meta();
        let mut meta = std::collections::BTreeMap::new();
        if let Some(peak) = self.send_queue_peak_meta() {
            meta.insert("send_queue_delay_peak".into(), peak);
        }
        meta.insert("seed".into(), self.seed.into());
        meta.insert("simulator".into(), "mpdccp-sim".into());
        meta.insert("flows".into(), flow_meta.into());
        meta.insert("paths".into(), path_meta.into());
        meta.insert(
            "tunnel_established_s".into(),
            self.established_at.map(|t| t.as_secs_f64()).into(),
        );
        meta.insert("events".into(), self.stats.events.into());
        meta.insert("link_pkts".into(), self.stats.link_pkts.into());
        meta.insert("spin_breaks".into(), self.stats.spin_breaks.into());
        if let Some(nodes) = &self.nodes {
            for (key, node) in ["client_stats", "server_stats"].iter().zip(nodes) {
                let stats = serde_json::to_value(node.conn.stats()).unwrap_or_default();
                meta.insert((*key).into(), stats);
            }
            // The receiver's reordering counters (held, given-up gaps, the
            // inner TCP's retransmissions), as the daemon's status shows them.
            for (key, node) in ["client_reorder", "server_reorder"].iter().zip(nodes) {
                let stats = serde_json::to_value(node.conn.reorder_stats()).unwrap_or_default();
                meta.insert((*key).into(), stats);
            }
        }
        meta.insert(
            "conn_events".into(),
            serde_json::to_value(&self.conn_events).unwrap_or_default(),
        );
        let bins = (self.end.as_nanos() / SAMPLE_PERIOD.as_nanos() as u64) as usize + 1;
        let tunnel_series = self
            .paths
            .iter_mut()
            .map(|p| {
                let mut v = std::mem::take(&mut p.tunnel_series);
                v.resize(bins, 0);
                v
            })
            .collect();
        let (summary, timeseries) = self.rec.finish(meta);
        SimOutput {
            summary,
            timeseries,
            stats: self.stats,
            tunnel_series,
            conn_events: self.conn_events,
        }
    }

    /// Per flow, what `summary.json`'s `meta.flows` says beyond the
    /// recorder; losses found only now (never delivered) go to the recorder,
    /// dated at their send time or at the grace `horizon`.
    fn flows_meta(&mut self, horizon: Instant) -> Vec<serde_json::Value> {
        let mut flow_meta = Vec::new();
        for (i, f) in self.flows.iter().enumerate() {
            let mut m = serde_json::Map::new();
            match (&f.source, &f.sink) {
                (Source::Cbr(c), Sink::Seq(s)) => {
                    cbr_losses(&mut self.rec, i, c, s, horizon);
                    m.insert("max_delivery_gap_ms".into(), ms(s.max_gap).into());
                    m.insert(
                        "max_delivery_gap_at_s".into(),
                        s.max_gap_at.map_or(0.0, |t| t.as_secs_f64()).into(),
                    );
                    m.insert("duplicate_pkts".into(), s.duplicate_pkts.into());
                }
                (Source::Bulk { next_seq, .. }, Sink::Seq(s)) => {
                    let lost = next_seq.saturating_sub(s.delivered_pkts);
                    // Bulk send times are not kept; what the queue still holds
                    // at the end is not a loss.
                    let held = self
                        .nodes
                        .as_ref()
                        .map_or(0, |n| send_queue_len(&n[f.tx as usize].conn) as u64);
                    let lost = lost.saturating_sub(held);
                    if lost > 0 {
                        self.rec.flow_lost(i, horizon, lost);
                    }
                    m.insert("duplicate_pkts".into(), s.duplicate_pkts.into());
                }
                (Source::Tcp(tx), Sink::Tcp(rx)) => {
                    if tx.stats.lost_pkts > 0 {
                        self.rec.flow_lost(i, horizon, tx.stats.lost_pkts);
                    }
                    tcp_meta(tx, rx, &mut m);
                }
                (Source::Quic(tx), Sink::Quic(rx)) => {
                    if tx.stats.lost_pkts > 0 {
                        self.rec.flow_lost(i, horizon, tx.stats.lost_pkts);
                    }
                    quic_meta(tx, rx, &mut m);
                }
                _ => {}
            }
            m.insert("owd_min_ms".into(), f.owd_min.map_or(0.0, ms).into());
            m.insert("tunnel_refused_pkts".into(), f.tunnel_refused_pkts.into());
            m.insert("link_dropped_pkts".into(), f.link_dropped_pkts.into());
            flow_meta.push(serde_json::Value::Object(m));
        }
        flow_meta
    }

    /// Per path, its load and drops in the data direction (`meta.paths`).
    fn paths_meta(&self) -> Vec<serde_json::Value> {
        let secs = self.end.as_secs_f64().max(1e-9);
        self.paths
            .iter()
            .zip(&self.scenario.path)
            .map(|(p, spec)| {
                let st = p.links[self.data_dir].stats();
                let mut v = serde_json::json!({
                    "tunnel_mbps": p.tunnel_bytes[self.data_dir] as f64 * 8.0 / secs / 1e6,
                    "other_flows_mbps": p.flow_bytes[self.data_dir] as f64 * 8.0 / secs / 1e6,
                    "tunnel_dropped_pkts": p.tunnel_dropped_pkts,
                    "other_flows_dropped_pkts": p.flow_dropped_pkts,
                    "link": st,
                });
                // Only when set: summaries of scenarios without it keep their bytes.
                if let Some(t) = spec.transport {
                    v["transport"] = t.name().into();
                    v["outer_bytes_per_pkt"] = t.outer_bytes().into();
                }
                v
            })
            .collect()
    }

    /// The longest send-queue wait and what the paths did meanwhile.
    fn send_queue_peak_meta(&self) -> Option<serde_json::Value> {
        let peak = self.send_queue_peak.as_ref()?;
        let paths: serde_json::Map<String, serde_json::Value> = self
            .scenario
            .path
            .iter()
            .zip(&peak.paths)
            .map(|(spec, (states, cwnd))| {
                (
                    spec.name.clone(),
                    serde_json::json!({
                        "states": states,
                        "min_cwnd_pkts": if *cwnd == u32::MAX { None } else { Some(*cwnd) },
                    }),
                )
            })
            .collect();
        Some(serde_json::json!({
            "at_s": peak.at.as_secs_f64(),
            "ms": ms(peak.delay),
            "paths_during_wait": paths,
        }))
    }
}

/// A CBR flow's losses: every packet sent before the grace horizon and
/// never delivered, dated at its send time.
fn cbr_losses(rec: &mut Recorder, i: usize, c: &Cbr, s: &SeqSink, horizon: Instant) {
    for seq in 0..c.next_seq {
        let t = c.send_time(seq);
        if t >= horizon {
            break;
        }
        if !s.was_received(seq) {
            rec.flow_lost(i, t, 1);
        }
    }
}

fn tcp_meta(tx: &TcpSender, rx: &TcpReceiver, m: &mut serde_json::Map<String, serde_json::Value>) {
    m.insert(
        "tcp_retransmitted_pkts".into(),
        tx.stats.retransmitted_pkts.into(),
    );
    m.insert("tcp_rto_count".into(), tx.stats.rto_count.into());
    m.insert(
        "tcp_delivered_in_order_pkts".into(),
        rx.delivered_in_order().into(),
    );
    m.insert(
        "tcp_loss_detection".into(),
        tx.loss_detection().name().into(),
    );
    m.insert("tcp_tlp_count".into(), tx.stats.tlp_count.into());
    m.insert("tcp_dsack_count".into(), tx.stats.dsack_count.into());
    m.insert("tcp_undo_count".into(), tx.stats.undo_count.into());
    m.insert(
        "tcp_spurious_lost_pkts".into(),
        tx.stats.spurious_lost_pkts.into(),
    );
    m.insert(
        "spurious_retransmitted_pkts".into(),
        rx.duplicate_pkts.into(),
    );
}

fn quic_meta(
    tx: &QuicSender,
    rx: &QuicReceiver,
    m: &mut serde_json::Map<String, serde_json::Value>,
) {
    let st = &tx.stats;
    m.insert(
        "quic_retransmitted_pkts".into(),
        st.retransmitted_pkts.into(),
    );
    m.insert("quic_lost_pkts".into(), st.lost_pkts.into());
    m.insert(
        "quic_spurious_lost_pkts".into(),
        st.spurious_lost_pkts.into(),
    );
    m.insert("quic_pto_count".into(), st.pto_count.into());
    m.insert(
        "quic_persistent_congestion".into(),
        st.persistent_congestion.into(),
    );
    m.insert(
        "quic_delivered_in_order_pkts".into(),
        rx.delivered_in_order().into(),
    );
    m.insert(
        "spurious_retransmitted_pkts".into(),
        rx.duplicate_pkts.into(),
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Packets waiting in a connection's send queue.
fn send_queue_len(conn: &Connection) -> usize {
    conn.send_queue_len()
}

/// The tunnel's [`ConnectionConfig`] for a scenario: its `[tunnel]` settings
/// through the one mapping the daemon and the testbed use too
/// ([`mpdccp_proto::TunnelSettings::connection_config`]), sized for the
/// largest tunnelled flow packet (simulated links carry any size).
pub fn connection_config(s: &Scenario) -> ConnectionConfig {
    let largest = s
        .flow
        .iter()
        .filter(|f| f.via == mpdccp_model::scenario::VIA_TUNNEL)
        .map(|f| f.packet_bytes)
        .max()
        .unwrap_or(0);
    ConnectionConfig {
        // The simulated links never corrupt a bit and nothing reads the
        // datagrams' bytes but the peer: checksums would only cost time
        // (ns-3 leaves them off by default too).
        verify_checksums: false,
        fill_checksums: false,
        ..s.tunnel.connection_config(largest)
    }
}

/// The (client, server) addresses of path `p` (checksum pseudo-header, pcap).
fn path_addrs(p: usize) -> (SocketAddr, SocketAddr) {
    let i = (p % 250) as u8;
    (
        SocketAddr::from(([10, 0, i, 1], 4340)),
        SocketAddr::from(([10, 0, i, 2], 4340)),
    )
}

fn path_config(s: &Scenario, p: usize) -> PathConfig {
    let (local, remote) = path_addrs(p);
    PathConfig {
        // A scenario that leaves `priority` out (0, "do not use" in MP_PRIO)
        // means an ordinary primary path.
        priority: match s.path[p].priority {
            0 => mpdccp_proto::path::priority::PRIMARY,
            x => x,
        },
        local: Some(local),
        remote: Some(remote),
    }
}
