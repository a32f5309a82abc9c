//! The daemon's native-DCCP paths (`transport = "dccp"`): raw IP-protocol-33
//! sockets of [`crate::raw`] driven like the UDP path sockets, kept apart
//! so the UDP data path does no extra work.
//!
//! The core checksums with unspecified addresses when the driver gives none
//! (the UDP case); here the raw socket rewrites the checksum over the real
//! addresses on send and verifies it on receive (RFC 4340 §9.1), so the
//! core needs no addresses. Raw sockets have no GSO: a train the core
//! hands out is sent segment by segment.

use std::io;
use std::net::IpAddr;

use mpdccp_proto::Instant;

use super::{DaemonStats, BATCH};
use crate::raw::{RawDccpSocket, RawStats};

/// Opens a non-blocking raw DCCP socket on `local`, optionally pinned to
/// `device`, with `buffer_bytes` kernel buffers (0 = default).
pub fn open(local: IpAddr, device: Option<&str>, buffer_bytes: usize) -> io::Result<RawDccpSocket> {
    let dev = device.unwrap_or("any");
    let ctx =
        |e: io::Error| io::Error::new(e.kind(), format!("native DCCP on {local} (dev {dev}): {e}"));
    let s = RawDccpSocket::bind(local).map_err(ctx)?;
    s.set_nonblocking(true).map_err(ctx)?;
    if let Some(dev) = device {
        s.bind_device(dev).map_err(ctx)?;
    }
    if buffer_bytes > 0 {
        s.set_buffer_bytes(buffer_bytes).map_err(ctx)?;
    }
    Ok(s)
}

/// Receives what is queued on `sock` (at most 4 × [`BATCH`] packets, so a
/// busy socket cannot starve the others) and hands each verified DCCP
/// packet to `deliver(stats, now, source, source_port, packet)`. Packets the
/// socket dropped (bad IP header, not DCCP, bad checksum) are counted in
/// `dccp_rx_dropped`.
pub fn drain(
    sock: &mut RawDccpSocket,
    buf: &mut [u8],
    stats: &mut DaemonStats,
    mut deliver: impl FnMut(&mut DaemonStats, Instant, IpAddr, u16, &[u8]),
) {
    let before = dropped(&sock.stats());
    for _ in 0..4 * BATCH {
        let Ok(d) = sock.recv(buf) else { break };
        let now = crate::clock::now();
        let pkt = &buf[d.start..d.end];
        stats.dccp_rx_packets += 1;
        stats.dccp_rx_bytes += pkt.len() as u64;
        // `RawDccpSocket::recv` checked it is a whole DCCP header.
        let port = u16::from_be_bytes([pkt[0], pkt[1]]);
        deliver(stats, now, d.src, port, pkt);
    }
    stats.dccp_rx_dropped += dropped(&sock.stats()) - before;
}

fn dropped(s: &RawStats) -> u64 {
    s.bad_ip + s.bad_dccp + s.bad_checksum
}

/// Sends one transmit of the core (a packet, or a train of
/// `segment_bytes`-sized packets) to `dst`; the raw socket fills each
/// checksum for (local, `dst`). A refused send is counted; the core sees
/// it as loss.
pub fn send(
    sock: &RawDccpSocket,
    data: &mut [u8],
    segment_bytes: Option<usize>,
    dst: IpAddr,
    stats: &mut DaemonStats,
) {
    let seg = segment_bytes
        .filter(|&s| s > 0 && s < data.len())
        .unwrap_or(data.len().max(1));
    for pkt in data.chunks_mut(seg) {
        match sock.send_to(pkt, dst) {
            Ok(_) => stats.dccp_tx_packets += 1,
            Err(_) => stats.dccp_tx_errors += 1,
        }
    }
}
