//! Drives the real sans-IO `Connection` (which speaks RFC 9897 only) over
//! native raw sockets against the reference kernel, to record exactly how
//! far it gets and which bytes the reference answers.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant as StdInstant};

use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::conn::{Connection, ConnectionConfig, Event, PathConfig, Role};
use mpdccp_proto::wire::{Packet, PacketType};
use mpdccp_proto::{Instant, PathId};

use super::hex;

/// What the real Connection did against the reference.
#[derive(Debug, Default)]
pub struct ConnOutcome {
    pub connected: bool,
    pub delivered: Vec<Vec<u8>>,
    pub events: Vec<String>,
    /// (sent by us?, packet type, hex) of the first 200 packets, in order
    /// (`None`: not a valid DCCP packet).
    pub packets: Vec<(bool, Option<PacketType>, String)>,
}

/// One path of the driver: socket, local and remote DCCP endpoints.
pub struct DriverPath {
    pub id: PathId,
    pub sock: RawDccpSocket,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

impl DriverPath {
    pub fn new(id: u32, local: SocketAddr, remote: SocketAddr) -> io::Result<DriverPath> {
        Ok(DriverPath {
            id: PathId(id),
            sock: RawDccpSocket::bind(local.ip())?,
            local,
            remote,
        })
    }
}

/// Runs a client Connection on `paths` for `limit`, sending `payloads`
/// (one every 100 ms once connected).
pub fn run_connection(
    mut paths: Vec<DriverPath>,
    service: u32,
    payloads: &[Vec<u8>],
    limit: Duration,
) -> io::Result<ConnOutcome> {
    let start = StdInstant::now();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let cfg = ConnectionConfig {
        service_code: service,
        initial_mp_seq: Some(1),
        max_gso_segments: 1,
        ..Default::default()
    };
    let mut conn = Connection::new(Role::Client, cfg, now(), 0x5eed);
    for p in &paths {
        let pc = PathConfig {
            local: Some(p.local),
            remote: Some(p.remote),
            ..Default::default()
        };
        conn.add_path(now(), p.id, pc)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
    }
    let mut o = ConnOutcome::default();
    let mut buf = vec![0u8; 65536];
    let mut next_send = 0usize;
    let mut last_send = StdInstant::now();
    while start.elapsed() < limit {
        while let Some(t) = conn.poll_transmit(now(), &mut buf) {
            let Some(p) = paths.iter().find(|p| p.id == t.path) else {
                continue;
            };
            let pkt = &mut buf[..t.size];
            record(&mut o, true, pkt);
            p.sock.send_to(pkt, p.remote.ip())?;
        }
        for p in paths.iter_mut() {
            p.sock.set_read_timeout(Some(Duration::from_millis(5)))?;
            let Ok(d) = p.sock.recv(&mut buf) else {
                continue;
            };
            let pkt = &buf[d.start..d.end];
            let ours = Packet::new_checked(pkt)
                .is_ok_and(|q| q.dst_port() == p.local.port() && q.src_port() == p.remote.port());
            if d.src == p.remote.ip() && ours {
                record(&mut o, false, pkt);
                let pkt = pkt.to_vec();
                conn.handle_datagram(now(), p.id, &pkt);
            }
        }
        if conn.poll_timeout().is_some_and(|t| t <= now()) {
            conn.handle_timeout(now());
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Connected => o.connected = true,
                Event::Delivered { data, .. } => o.delivered.push(data),
                other => o.events.push(format!("{other:?}")),
            }
        }
        if o.connected
            && next_send < payloads.len()
            && last_send.elapsed() > Duration::from_millis(100)
        {
            let _ = conn.send(now(), &payloads[next_send]);
            next_send += 1;
            last_send = StdInstant::now();
        }
        if next_send == payloads.len() && o.delivered.len() >= payloads.len() {
            break;
        }
    }
    Ok(o)
}

fn record(o: &mut ConnOutcome, sent: bool, pkt: &[u8]) {
    let ty = Packet::new_checked(pkt).ok().map(|p| p.packet_type());
    if o.packets.len() < 200 {
        o.packets.push((sent, ty, hex(pkt)));
    }
}

/// The reference server's address as a `SocketAddr` on port 1337.
pub fn reference_server(ip: &str) -> SocketAddr {
    SocketAddr::new(ip.parse::<IpAddr>().expect("ip"), super::script::PORT)
}
