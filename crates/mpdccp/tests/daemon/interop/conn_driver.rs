//! Drives the real sans-IO `Connection` as client over native raw sockets
//! against the reference kernel, in the wire profile the driver names
//! (`ConnectionConfig::wire_profile`), and records every packet per path.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant as StdInstant};

use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::conn::{Connection, ConnectionConfig, Event, PathConfig, Role};
use mpdccp_proto::sched::{SchedulerConfig, SchedulerKind};
use mpdccp_proto::wire::{Packet, PacketType, ResetCode, WireProfile};
use mpdccp_proto::{Instant, PathId};

use super::hex;
use mpdccp_proto::conn::MpConfig;

/// One recorded packet (read through `Debug` when a test prints it).
#[derive(Debug)]
#[allow(dead_code)]
pub struct Recorded {
    /// Index of the path in the driver's list (0 = A, 1 = B).
    pub path: usize,
    pub sent: bool,
    /// `None`: not a valid DCCP packet.
    pub ty: Option<PacketType>,
    pub hex: String,
}

/// What the real Connection did against the reference.
#[derive(Debug, Default)]
pub struct ConnOutcome {
    pub connected: bool,
    /// Paths that reached OPEN (`PathEstablished`), by index.
    pub established: Vec<usize>,
    pub delivered: Vec<Vec<u8>>,
    /// `Event::Closed`'s reason once the connection closed.
    pub closed: Option<String>,
    pub events: Vec<String>,
    /// Packets per (path index, sent by us?, packet type).
    pub counts: BTreeMap<(usize, bool, String), usize>,
    /// Data/DataAck packets with payload per (path index, sent by us?).
    pub payload: BTreeMap<(usize, bool), usize>,
    /// Resets received, per path index.
    pub resets: Vec<(usize, ResetCode)>,
    /// The first 400 packets, in order.
    pub packets: Vec<Recorded>,
    /// Address ids the peer confirmed (MP_CONFIRM of our MP_ADDADDR, then
    /// of our MP_REMOVEADDR), in order.
    pub addresses_confirmed: Vec<u8>,
    /// The Connection's own counters at the end (`ConnStats`).
    pub stats: String,
}

/// What the driver does once every echo is back.
#[derive(Clone, Copy, Debug)]
pub enum Epilogue {
    /// Close at once.
    Close,
    /// Advertise `addr` (MP_ADDADDR, RFC 9897 §3.2.8), wait for its
    /// confirmation, withdraw it (MP_REMOVEADDR, §3.2.9), wait again, close.
    Address(SocketAddr),
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

/// Runs a client Connection speaking `profile` for at most `limit`: the
/// first of `paths` opens the connection (MP_KEY), the others join once it
/// is up (MP_JOIN, RFC 9897 §3.2.2); once every path is open `payloads` go
/// out one every 100 ms (round-robin scheduler, so each path carries
/// some), and when all came back (and the `epilogue` is done) the
/// connection closes (Close + MP_CLOSE, §3.2.11) and the driver waits for
/// `Event::Closed`.
pub fn run_connection(
    mut paths: Vec<DriverPath>,
    profile: WireProfile,
    service: u32,
    payloads: &[Vec<u8>],
    epilogue: Epilogue,
    limit: Duration,
) -> io::Result<ConnOutcome> {
    let start = StdInstant::now();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let cfg = ConnectionConfig {
        service_code: service,
        max_gso_segments: 1,
        wire_profile: profile,
        scheduler: SchedulerConfig {
            kind: SchedulerKind::Rr,
            ..Default::default()
        },
        mp: MpConfig {
            initial_seq: Some(1),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut conn = Connection::new(Role::Client, cfg, now(), 0x5eed);
    let add = |conn: &mut Connection, p: &DriverPath| {
        let pc = PathConfig {
            local: Some(p.local),
            remote: Some(p.remote),
            ..Default::default()
        };
        conn.add_path(now(), p.id, pc)
            .map_err(|e| io::Error::other(format!("{e:?}")))
    };
    add(&mut conn, &paths[0])?;
    let mut joined = false;
    let mut o = ConnOutcome::default();
    let mut buf = vec![0u8; 65536];
    let mut next_send = 0usize;
    let mut last_send = StdInstant::now();
    let mut closing = false;
    let (mut advert, mut withdrawn) = (None, false);
    while start.elapsed() < limit && o.closed.is_none() {
        while let Some(t) = conn.poll_transmit(now(), &mut buf) {
            let Some(i) = paths.iter().position(|p| p.id == t.path) else {
                continue;
            };
            let pkt = &mut buf[..t.size];
            record(&mut o, i, true, pkt);
            paths[i].sock.send_to(pkt, paths[i].remote.ip())?;
        }
        for (i, p) in paths.iter_mut().enumerate() {
            p.sock.set_read_timeout(Some(Duration::from_millis(5)))?;
            let Ok(d) = p.sock.recv(&mut buf) else {
                continue;
            };
            let pkt = &buf[d.start..d.end];
            let ours = Packet::new_checked(pkt)
                .is_ok_and(|q| q.dst_port() == p.local.port() && q.src_port() == p.remote.port());
            if d.src == p.remote.ip() && ours {
                record(&mut o, i, false, pkt);
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
                Event::PathEstablished(id) => {
                    o.established.extend(paths.iter().position(|p| p.id == id))
                }
                Event::Delivered { data, .. } => o.delivered.push(data),
                Event::Closed { reason } => o.closed = Some(reason),
                Event::AddressConfirmed { id } => o.addresses_confirmed.push(id),
                other => o.events.push(format!("{other:?}")),
            }
        }
        if o.connected && !joined {
            joined = true;
            for p in &paths[1..] {
                add(&mut conn, p)?;
            }
        }
        let all_open = o.established.len() == paths.len();
        if all_open
            && next_send < payloads.len()
            && last_send.elapsed() > Duration::from_millis(100)
        {
            let _ = conn.send(now(), &payloads[next_send]);
            next_send += 1;
            last_send = StdInstant::now();
        }
        let echoed = next_send == payloads.len() && o.delivered.len() >= payloads.len();
        let mut done = echoed;
        if let (Epilogue::Address(addr), true) = (epilogue, echoed) {
            match (advert, o.addresses_confirmed.len()) {
                (None, _) => {
                    let id = conn.advertise_address(now(), addr);
                    advert = Some(id.map_err(|e| io::Error::other(format!("{e:?}")))?);
                }
                (Some(id), 1) if !withdrawn => {
                    withdrawn = true;
                    conn.withdraw_address(now(), id)
                        .map_err(|e| io::Error::other(format!("{e:?}")))?;
                }
                _ => {}
            }
            done = o.addresses_confirmed.len() >= 2;
        }
        // Give up waiting (lost echoes, no confirmation) 3 s before the
        // end, and close.
        if !closing && (done || start.elapsed() + Duration::from_secs(3) > limit) {
            closing = true;
            conn.close(now());
        }
    }
    o.stats = format!("{:?}", conn.stats());
    Ok(o)
}

fn record(o: &mut ConnOutcome, path: usize, sent: bool, pkt: &[u8]) {
    let p = Packet::new_checked(pkt).ok();
    let ty = p.as_ref().map(|p| p.packet_type());
    *o.counts.entry((path, sent, format!("{ty:?}"))).or_default() += 1;
    if let Some(p) = &p {
        if matches!(ty, Some(PacketType::Data | PacketType::DataAck)) && !p.payload().is_empty() {
            *o.payload.entry((path, sent)).or_default() += 1;
        }
        if let (Some((code, _)), false) = (p.reset(), sent) {
            o.resets.push((path, code));
        }
    }
    if o.packets.len() < 400 {
        o.packets.push(Recorded {
            path,
            sent,
            ty,
            hex: hex(pkt),
        });
    }
}

/// The reference server's address as a `SocketAddr` on port 1337.
pub fn reference_server(ip: &str) -> SocketAddr {
    SocketAddr::new(ip.parse::<IpAddr>().expect("ip"), super::script::PORT)
}
