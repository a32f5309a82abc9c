//! Drives the real sans-IO `Endpoint` (server `Connection`s) over one raw
//! socket as the echo server for the reference client VM, in the wire
//! profile the test names: every datagram delivered is sent back on the
//! same connection, and every packet is counted per remote address (the
//! reference client's subflows come from 10.0.1.1 and 10.0.2.1).

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant as StdInstant};

use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::conn::{ConnStats, ConnectionConfig, Endpoint, EndpointConfig, Event};
use mpdccp_proto::sched::{SchedulerConfig, SchedulerKind};
use mpdccp_proto::wire::{Packet, PacketType, ResetCode, WireProfile};
use mpdccp_proto::Instant;

use super::script::{PORT, SERVICE};
use mpdccp_proto::conn::AckConfig;

/// What the reference client did with our real server.
#[derive(Debug, Default)]
pub struct EndpointOutcome {
    pub connected: bool,
    /// `PathEstablished` events (subflows that reached OPEN, or came back
    /// after failing).
    pub paths_open: usize,
    /// Datagrams delivered to us (and echoed).
    pub delivered: usize,
    pub closed: Option<String>,
    pub events: Vec<String>,
    /// Packets per (remote IP, sent by us?, packet type).
    pub counts: BTreeMap<(IpAddr, bool, String), usize>,
    /// Data/DataAck packets with payload per (remote IP, sent by us?).
    pub payload: BTreeMap<(IpAddr, bool), usize>,
    /// Resets we sent, per remote IP.
    pub resets_sent: Vec<(IpAddr, ResetCode)>,
    /// The connection's counters, as last seen before it was forgotten.
    pub conn_stats: Option<ConnStats>,
    /// The endpoint's counters at the end.
    pub stats: String,
}

/// Serves on `local`:1337 until the connection closes (plus a second for
/// the last packets) or `limit` passes.
pub fn run_endpoint(
    profile: WireProfile,
    local: IpAddr,
    limit: Duration,
) -> io::Result<EndpointOutcome> {
    let start = StdInstant::now();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let cfg = EndpointConfig {
        conn: ConnectionConfig {
            service_code: SERVICE,
            max_gso_segments: 1,
            wire_profile: profile,
            scheduler: SchedulerConfig {
                kind: SchedulerKind::Rr,
                ..Default::default()
            },
            ack: AckConfig {
                // The reference receiver acks every Ack Ratio-th data packet
                // and has no delayed-ack timer: at Ack Ratio 2 a lone echo on
                // a path waits for the next one, the RTO fires first and (with
                // the other path up) the path is declared failed for a moment.
                // Ack Ratio 1 (RFC 4341 §6.1.2) makes it ack every echo.
                ratio: 1,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let mut ep: Endpoint<SocketAddr> = Endpoint::new(cfg, 0x5e1f);
    let mut sock = RawDccpSocket::bind(local)?;
    sock.set_read_timeout(Some(Duration::from_millis(5)))?;
    let mut o = EndpointOutcome::default();
    let mut buf = vec![0u8; 65536];
    let mut closed_at = None;
    let mut handle = None;
    while start.elapsed() < limit && closed_at.is_none_or(|t: StdInstant| t.elapsed().as_secs() < 1)
    {
        while let Some((to, t)) = ep.poll_transmit(now(), &mut buf) {
            let pkt = &mut buf[..t.size];
            record(&mut o, to.ip(), true, pkt);
            sock.send_to(pkt, to.ip())?;
        }
        if let Ok(d) = sock.recv(&mut buf) {
            let pkt = &buf[d.start..d.end];
            let port = Packet::new_checked(pkt)
                .ok()
                .filter(|q| q.dst_port() == PORT)
                .map(|q| q.src_port());
            if let (Some(port), true) = (port, d.dst == local) {
                record(&mut o, d.src, false, pkt);
                let remote = SocketAddr::new(d.src, port);
                let addrs = (SocketAddr::new(local, PORT), remote);
                let pkt = pkt.to_vec();
                ep.handle_datagram_from(now(), remote, Some(addrs), &pkt);
            }
        }
        if ep.poll_timeout().is_some_and(|t| t <= now()) {
            ep.handle_timeout(now());
        }
        while let Some((h, ev)) = ep.poll_event() {
            handle = Some(h);
            match ev {
                Event::Connected => o.connected = true,
                Event::PathEstablished(_) => o.paths_open += 1,
                Event::Delivered { data, .. } => {
                    o.delivered += 1;
                    let _ = ep.send(now(), h, &data);
                }
                Event::Closed { reason } => {
                    o.closed = Some(reason);
                    closed_at = Some(StdInstant::now());
                }
                other => o.events.push(format!("{other:?}")),
            }
        }
        if let Some(c) = handle.and_then(|h| ep.connection(h)) {
            o.conn_stats = Some(c.stats());
        }
    }
    o.stats = format!("{:?}", ep.stats());
    Ok(o)
}

fn record(o: &mut EndpointOutcome, remote: IpAddr, sent: bool, pkt: &[u8]) {
    let Ok(p) = Packet::new_checked(pkt) else {
        return;
    };
    let ty = p.packet_type();
    *o.counts
        .entry((remote, sent, format!("{ty:?}")))
        .or_default() += 1;
    if matches!(ty, PacketType::Data | PacketType::DataAck) && !p.payload().is_empty() {
        *o.payload.entry((remote, sent)).or_default() += 1;
    }
    if let (Some((code, _)), true) = (p.reset(), sent) {
        o.resets_sent.push((remote, code));
    }
}
