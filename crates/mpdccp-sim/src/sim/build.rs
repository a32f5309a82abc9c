//! The topology [`Simulation::new`](super::Simulation::new) builds from a
//! scenario: the paths' links, the flows' sources and sinks, and the
//! tunnel's two connections. Each draws its seeds from the master RNG in
//! this order (paths, then flows, then the tunnel), so a seed gives the same
//! run.

use mpdccp_model::link::Link;
use mpdccp_model::scenario::{Direction, FlowKind, FlowSpec, HyStartKind, Scenario};
use mpdccp_proto::cc::{CcConfig, CcKind, ControllerFactory, SlowStartExit};
use mpdccp_proto::conn::{Connection, Role};
use mpdccp_proto::Instant;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use super::{connection_config, Node, Side, SimFlow, SimPath, Sink, Source, Via};
use crate::flow::quic::{QuicSender, INITIAL_WINDOW_PKTS, MINIMUM_WINDOW_PKTS};
use crate::flow::quic_rx::QuicReceiver;
use crate::flow::tcp::{LossDetection, TcpSender};
use crate::flow::tcp_rx::{TcpReceiver, DELAYED_ACK_SEGMENTS};
use crate::flow::{Cbr, SeqSink};
use crate::SimError;

/// One [`SimPath`] per scenario path, its two links seeded from `master`.
pub(super) fn build_paths(scenario: &Scenario, master: &mut ChaCha8Rng) -> Vec<SimPath> {
    let mut paths = Vec::with_capacity(scenario.path.len());
    for spec in &scenario.path {
        let up = Link::with_direction(spec, Direction::Up, master.next_u64());
        let down = Link::with_direction(spec, Direction::Down, master.next_u64());
        paths.push(SimPath {
            links: [up, down],
            delay_schedule: spec.delay_schedule(),
            last_sojourn: [None; 2],
            tunnel_bytes: [0; 2],
            flow_bytes: [0; 2],
            tunnel_dropped_pkts: 0,
            flow_dropped_pkts: 0,
            tunnel_series: Vec::new(),
            in_tunnel: false,
        });
    }
    paths
}

/// What one flow is made of: where it goes, its packets and times.
struct FlowShape<'a> {
    spec: &'a FlowSpec,
    what: String,
    via: Via,
    bytes: u32,
    flow_id: u16,
    start: Instant,
    stop: Instant,
}

/// Flow `i` of the scenario (`end`: the scenario's end).
pub(super) fn build_flow(
    scenario: &Scenario,
    i: usize,
    f: &FlowSpec,
    end: Instant,
    master: &mut ChaCha8Rng,
) -> Result<SimFlow, SimError> {
    let what = format!("flow `{}`", f.name);
    let via = if f.via == mpdccp_model::scenario::VIA_TUNNEL {
        Via::Tunnel
    } else {
        Via::Path(
            scenario
                .path_index(&f.via)
                .ok_or_else(|| SimError::Scenario(format!("{what}: unknown path")))?,
        )
    };
    let tx = match f.direction {
        Direction::Up => Side::Client,
        Direction::Down => Side::Server,
    };
    let bytes = u32::try_from(f.packet_bytes)
        .map_err(|_| SimError::Scenario(format!("{what}: packet too large")))?;
    let shape = FlowShape {
        spec: f,
        via,
        bytes,
        flow_id: u16::try_from(i)
            .map_err(|_| SimError::Scenario("more than 65535 flows".into()))?,
        start: Instant::from_secs_f64(f.start_s),
        stop: f.stop_s.map_or(end, Instant::from_secs_f64).min(end),
        what,
    };
    let (source, sink) = match f.kind {
        FlowKind::UdpCbr => cbr_flow(&shape)?,
        FlowKind::Bulk => bulk_flow(&shape)?,
        FlowKind::Tcp => tcp_flow(&shape, master)?,
        FlowKind::Quic => quic_flow(&shape, master)?,
    };
    Ok(SimFlow {
        via,
        tx,
        start: shape.start,
        stop: shape.stop,
        source,
        sink,
        tunnel_refused_pkts: 0,
        link_dropped_pkts: 0,
        delivered_bytes: 0,
        first_delivery: None,
        owd_min: None,
        delayed_ack_at: None,
    })
}

fn cbr_flow(s: &FlowShape) -> Result<(Source, Sink), SimError> {
    let (f, what) = (s.spec, &s.what);
    if s.via != Via::Tunnel && f.cc.is_some() {
        return Err(SimError::Unsupported(format!(
            "{what}: a single-path DCCP flow (`via` a path with `cc`) is not \
             simulated; use a one-path tunnel (`tunnel.multipath = false`)"
        )));
    }
    let rate = f
        .rate_mbps
        .ok_or_else(|| SimError::Scenario(format!("{what}: udp-cbr needs rate_mbps")))?;
    Ok((
        Source::Cbr(Cbr::new(rate, s.bytes, s.start, s.stop)),
        Sink::Seq(SeqSink::default()),
    ))
}

fn bulk_flow(s: &FlowShape) -> Result<(Source, Sink), SimError> {
    if s.via != Via::Tunnel {
        return Err(SimError::Unsupported(format!(
            "{}: `bulk` has no congestion control of its own and only \
             runs through the tunnel; use `tcp` for a single-path flow",
            s.what
        )));
    }
    Ok((
        Source::Bulk {
            bytes: s.bytes,
            next_seq: 0,
        },
        Sink::Seq(SeqSink::default()),
    ))
}

/// The flow's congestion controller by name (`default` when unset).
fn flow_cc(s: &FlowShape, default: &str) -> Result<CcKind, SimError> {
    s.spec
        .cc
        .as_deref()
        .unwrap_or(default)
        .parse()
        .map_err(|e| SimError::Scenario(format!("{}: {e}", s.what)))
}

fn tcp_flow(s: &FlowShape, master: &mut ChaCha8Rng) -> Result<(Source, Sink), SimError> {
    // `bbr` for inner TCP is the BBRv1 controller (CCID5's algorithm).
    let kind = flow_cc(s, "cubic")?;
    let cc_cfg = CcConfig {
        mss_bytes: s.bytes,
        seed: master.next_u64(),
        // Inner TCP is a Linux baseline: tcp_bbr.c's PROBE_RTT.
        bbr_app_limited_probe: false,
        bbr_queue_fills_pipe: false,
        // The idle rule is the tunnel's (cc::validation);
        // the inner models stay as published.
        cwnd_validation: false,
        hystart: match s.spec.hystart.unwrap_or_default() {
            HyStartKind::Rfc9406 => SlowStartExit::HyStartPlusPlus,
            HyStartKind::Linux => SlowStartExit::Linux,
        },
        ..CcConfig::default()
    };
    let cc = kind.build(&cc_cfg);
    let detection = s.spec.loss_detection.unwrap_or_default();
    // One ack per segment; see `build_tunnel` for cross traffic.
    let mut rx = Box::new(TcpReceiver::with_ack_every(s.flow_id, 1));
    // RACK widens its reordering window on DSACKs (RFC 8985
    // §6.2); Linux receivers send them by default.
    rx.set_dsack(detection == LossDetection::Rack);
    Ok((
        Source::Tcp(Box::new(TcpSender::new(
            s.flow_id,
            s.bytes,
            cc,
            s.spec.rate_mbps,
            s.start,
            Some(s.stop),
            detection,
        ))),
        Sink::Tcp(rx),
    ))
}

fn quic_flow(s: &FlowShape, master: &mut ChaCha8Rng) -> Result<(Source, Sink), SimError> {
    // NewReno is RFC 9002 §7's controller and aioquic's default.
    let kind = flow_cc(s, "reno")?;
    let cc_cfg = CcConfig {
        mss_bytes: s.bytes,
        seed: master.next_u64(),
        initial_cwnd_pkts: Some(INITIAL_WINDOW_PKTS),
        min_cwnd_pkts: MINIMUM_WINDOW_PKTS,
        bbr_app_limited_probe: false,
        bbr_queue_fills_pipe: false,
        cwnd_validation: false,
        ..CcConfig::default()
    };
    Ok((
        Source::Quic(Box::new(QuicSender::new(
            s.flow_id,
            s.bytes,
            kind.build(&cc_cfg),
            s.start,
            Some(s.stop),
        ))),
        Sink::Quic(QuicReceiver::new(s.flow_id)),
    ))
}

/// The tunnel's client and server connections, when a flow uses the
/// tunnel; marks the paths the tunnel runs on.
pub(super) fn build_tunnel(
    scenario: &Scenario,
    paths: &mut [SimPath],
    flows: &mut [SimFlow],
    master: &mut ChaCha8Rng,
) -> Result<Option<[Node; 2]>, SimError> {
    if !flows.iter().any(|f| f.via == Via::Tunnel) {
        return Ok(None);
    }
    let tunnel_paths = if scenario.tunnel.multipath {
        paths.len()
    } else {
        1
    };
    for p in paths.iter_mut().take(tunnel_paths) {
        p.in_tunnel = true;
    }
    // A TCP flow sharing a path with the tunnel competes with its
    // subflows, whose receivers ack every second packet (RFC 4341
    // §6.1.2 Ack Ratio 2), so the senders emit pairs. Such a TCP gets
    // RFC 5681 §4.2 delayed acks (every second segment) so that both
    // sides send the same packet pattern: acking every segment would
    // let it answer each departure with exactly one arrival, a
    // pattern the noiseless drop-tail FIFO never drops while the
    // tunnel's pairs overflow it (E4, `scenarios/README.md`). Other
    // TCP flows (baselines alone on a path, inner TCP in the tunnel)
    // keep one ack per segment.
    for f in flows.iter_mut() {
        if let (Via::Path(p), Sink::Tcp(r)) = (f.via, &mut f.sink) {
            if paths[p].in_tunnel {
                r.set_ack_every(DELAYED_ACK_SEGMENTS);
            }
        }
    }
    let cfg = connection_config(scenario);
    let client = Connection::try_new(Role::Client, cfg.clone(), Instant::ZERO, master.next_u64())
        .map_err(|e| SimError::Scenario(format!("tunnel: {e}")))?;
    let server = Connection::try_new(Role::Server, cfg, Instant::ZERO, master.next_u64())
        .map_err(|e| SimError::Scenario(format!("tunnel: {e}")))?;
    let node = |conn| Node { conn, dirty: true };
    Ok(Some([node(client), node(server)]))
}
