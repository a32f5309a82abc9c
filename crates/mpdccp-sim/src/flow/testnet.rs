//! A test bench for the flow endpoints alone: one sender and its receiver
//! over the model's links, with optional drops and a fixed extra delay on
//! some packets (reordering). The engine-level tests are in `tests/`.

use std::collections::VecDeque;
use std::time::Duration;

use mpdccp_model::link::Link;
use mpdccp_model::scenario::{Direction, PathSpec, RatePoint};
use mpdccp_proto::cc::{CcConfig, CcKind, ControllerFactory};
use mpdccp_proto::Instant;

use crate::flow::quic::{QuicSender, INITIAL_WINDOW_PKTS, MINIMUM_WINDOW_PKTS};
use crate::flow::quic_rx::QuicReceiver;
use crate::flow::tcp::{LossDetection, TcpSender};
use crate::flow::tcp_rx::TcpReceiver;
use crate::packet::FlowPkt;

pub enum Tx {
    Tcp(TcpSender),
    Quic(QuicSender),
}

pub enum Rx {
    Tcp(Box<TcpReceiver>),
    Quic(QuicReceiver),
}

/// The network between them.
#[derive(Clone, Debug)]
pub struct Net {
    pub mbps: f64,
    pub delay_ms: f64,
    pub buffer_bytes: usize,
    pub loss: f64,
    pub secs: u64,
    /// Every `n`-th data transmission (`k % n == n - 1`) arrives this much
    /// later than the bottleneck releases it.
    pub detour: Option<(u64, Duration)>,
    /// Data transmissions (0-based, in sending order) the network drops.
    pub drop: Vec<u64>,
}

impl Default for Net {
    fn default() -> Self {
        Net {
            mbps: 10.0,
            delay_ms: 5.0,
            buffer_bytes: 150_000,
            loss: 0.0,
            secs: 10,
            detour: None,
            drop: Vec::new(),
        }
    }
}

pub struct Outcome {
    pub tx: Tx,
    pub rx: Rx,
    /// Data delivered in order, bytes per second as Mbit/s.
    pub goodput_mbps: f64,
    /// Data packets the receiver got twice.
    pub duplicates: u64,
}

pub fn tcp(cc: &str, bytes: u32, detection: LossDetection, net: &Net) -> (Tx, Rx) {
    tcp_until(cc, bytes, detection, net.secs * 1000)
}

/// A TCP pair whose sender stops sending new data at `stop_ms`.
pub fn tcp_until(cc: &str, bytes: u32, detection: LossDetection, stop_ms: u64) -> (Tx, Rx) {
    let cfg = CcConfig {
        mss_bytes: bytes,
        // As the simulator's inner TCP (sim.rs): no idle rule.
        cwnd_validation: false,
        ..CcConfig::default()
    };
    let cc = cc.parse::<CcKind>().expect("a controller").build(&cfg);
    let end = Instant::from_millis(stop_ms);
    let tx = TcpSender::new(1, bytes, cc, None, Instant::ZERO, Some(end), detection);
    let mut rx = Box::new(TcpReceiver::with_ack_every(1, 1));
    rx.set_dsack(detection == LossDetection::Rack);
    (Tx::Tcp(tx), Rx::Tcp(rx))
}

pub fn quic(cc: &str, bytes: u32, net: &Net) -> (Tx, Rx) {
    quic_until(cc, bytes, net.secs * 1000)
}

/// A QUIC pair whose sender stops sending new data at `stop_ms`.
pub fn quic_until(cc: &str, bytes: u32, stop_ms: u64) -> (Tx, Rx) {
    let cfg = CcConfig {
        mss_bytes: bytes,
        initial_cwnd_pkts: Some(INITIAL_WINDOW_PKTS),
        min_cwnd_pkts: MINIMUM_WINDOW_PKTS,
        ..CcConfig::default()
    };
    let cc = cc.parse::<CcKind>().expect("a controller").build(&cfg);
    let end = Instant::from_millis(stop_ms);
    let tx = QuicSender::new(1, bytes, cc, Instant::ZERO, Some(end));
    (Tx::Quic(tx), Rx::Quic(QuicReceiver::new(1)))
}

impl Tx {
    fn poll_transmit(&mut self, now: Instant) -> Option<FlowPkt> {
        match self {
            Tx::Tcp(t) => t.poll_transmit(now),
            Tx::Quic(q) => q.poll_transmit(now),
        }
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        match self {
            Tx::Tcp(t) => t.poll_timeout(now),
            Tx::Quic(q) => q.poll_timeout(now),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            Tx::Tcp(t) => t.handle_timeout(now),
            Tx::Quic(q) => q.handle_timeout(now),
        }
    }
    fn handle_ack(&mut self, now: Instant, a: &FlowPkt) {
        match self {
            Tx::Tcp(t) => t.handle_ack(now, a),
            Tx::Quic(q) => q.handle_ack(now, a),
        }
    }
}

/// The receiver takes the packets `arrived` at `now` and sends its ACKs
/// down: at once when it asks to, or once a QUIC receiver's `ack_due`.
fn receive(
    rx: &mut Rx,
    arrived: Vec<FlowPkt>,
    now: Instant,
    ack: &mut FlowPkt,
    ack_due: &mut Option<Instant>,
    down: &mut Link<FlowPkt>,
) {
    for p in arrived {
        let send = match rx {
            Rx::Tcp(r) => r.handle_data(&p, ack).ack_now,
            Rx::Quic(r) => {
                let a = r.handle_data(now, &p, ack);
                if !a.ack_now && ack_due.is_none() {
                    *ack_due = Some(now + r.max_ack_delay());
                }
                a.ack_now
            }
        };
        if send {
            *ack_due = None;
            let _ = down.push(now, *ack, ack.len as usize);
        }
    }
    if ack_due.is_some_and(|t| t <= now) {
        *ack_due = None;
        if let Rx::Quic(r) = rx {
            if let Some(a) = r.take_pending_ack(now) {
                let _ = down.push(now, a, a.len as usize);
            }
        }
    }
}

/// Runs the pair for `net.secs` seconds.
pub fn run(pair: (Tx, Rx), net: &Net) -> Outcome {
    let (mut tx, mut rx) = pair;
    let spec = PathSpec {
        name: "p".into(),
        delay_ms: net.delay_ms,
        buffer_bytes: net.buffer_bytes,
        loss: net.loss,
        rate: vec![RatePoint {
            at_s: 0.0,
            mbps: net.mbps,
        }],
        ..PathSpec::default()
    };
    let mut up: Link<(FlowPkt, bool)> = Link::with_direction(&spec, Direction::Up, 1);
    let mut down: Link<FlowPkt> = Link::with_direction(&spec, Direction::Down, 2);
    let mut detour: VecDeque<(Instant, FlowPkt)> = VecDeque::new();
    let mut ack_due: Option<Instant> = None;
    let end = Instant::from_millis(net.secs * 1000);
    let mut now = Instant::ZERO;
    let mut k = 0u64;
    let mut ack = FlowPkt::data(1, 0, now, 0);
    while now < end {
        tx.handle_timeout(now);
        for _ in 0..2 {
            while let Some(p) = tx.poll_transmit(now) {
                let late = net.detour.is_some_and(|(n, _)| k % n == n - 1);
                if !net.drop.contains(&k) {
                    let _ = up.push(now, (p, late), p.len as usize);
                }
                k += 1;
            }
            let mut arrived = Vec::new();
            while let Some((p, late)) = up.poll_deliver(now) {
                match (late, net.detour) {
                    (true, Some((_, extra))) => detour.push_back((now + extra, p)),
                    _ => arrived.push(p),
                }
            }
            while detour.front().is_some_and(|(t, _)| *t <= now) {
                arrived.extend(detour.pop_front().map(|(_, p)| p));
            }
            receive(&mut rx, arrived, now, &mut ack, &mut ack_due, &mut down);
            while let Some(a) = down.poll_deliver(now) {
                tx.handle_ack(now, &a);
            }
        }
        let next = [
            up.next_event(),
            down.next_event(),
            tx.poll_timeout(now),
            detour.front().map(|d| d.0),
            ack_due,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(end);
        now = next.max(now + Duration::from_nanos(1)).min(end);
    }
    let (delivered, duplicates) = match &rx {
        Rx::Tcp(r) => (r.delivered_in_order(), r.duplicate_pkts),
        Rx::Quic(r) => (r.delivered_in_order(), r.duplicate_pkts),
    };
    let bytes = match &tx {
        Tx::Tcp(t) => t.seg_bytes(),
        Tx::Quic(q) => q.pkt_bytes(),
    };
    Outcome {
        goodput_mbps: delivered as f64 * f64::from(bytes) * 8.0 / net.secs as f64 / 1e6,
        duplicates,
        tx,
        rx,
    }
}
