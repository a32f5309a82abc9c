//! The daemon's U-DCCP paths (`transport = "udccp"`): DCCP whose extended
//! header is rearranged into a UDP header (draft-amend-tsvwg-dccp-udp-
//! header-conversion-01, `mpdccp_proto::wire::udccp`), carried by an
//! ordinary UDP socket — so GSO/GRO and NAT traversal stay, and the 8
//! bytes of RFC 6773's extra UDP header are gone.
//!
//! The kernel writes and strips octets 1-8 (ports, UDP Length, UDP
//! checksum, which covers every byte: §3.5). On send the core's DCCP
//! packet is converted in place and its bytes from octet 9 on become the
//! UDP payload; its own DCCP ports are replaced by the socket's, which are
//! the U-DCCP ports (§3.1). On receive the DCCP packet is rebuilt from the
//! datagram's ports and payload (§3.8); a payload that does not restore to
//! a well-formed DCCP header is dropped and counted (`udccp_rx_malformed`).
//!
//! Negotiation (open in the draft, §3.9) is by configuration on both ends:
//! the server's `udccp_listen` port speaks only U-DCCP, a client path with
//! `transport = "udccp"` sends to it, handshake included (docs/INTEROP.md).

use std::net::SocketAddr;

use mpdccp_proto::wire::udccp::{self, UDP_PART_LEN};
use mpdccp_proto::Instant;

use super::DaemonStats;
use crate::udp::{PathSocket, RecvBatch, SendBatch};

/// Receives what is queued on `sock` (as [`super::drain_socket`], GRO
/// trains split) and hands each restored DCCP packet to
/// `deliver(stats, now, from, dccp)`. `scratch` holds the packet being
/// rebuilt (at least one datagram plus 8 bytes).
pub fn drain(
    sock: &PathSocket,
    rx: &mut RecvBatch,
    scratch: &mut [u8],
    stats: &mut DaemonStats,
    mut deliver: impl FnMut(&mut DaemonStats, Instant, SocketAddr, &[u8]),
) {
    let local_port = sock.local_addr().port();
    // The destination address (IP_PKTINFO) is not kept: U-DCCP replies leave
    // from the interface's address, so bind `udccp_listen` to one address.
    super::drain_socket(sock, rx, stats, |stats, now, from, _to, payload| {
        stats.udccp_rx_packets += 1;
        match udccp::decode_payload(from.port(), local_port, payload, scratch, None) {
            Ok(n) => deliver(stats, now, from, &scratch[..n]),
            Err(_) => stats.udccp_rx_malformed += 1,
        }
    });
}

/// Converts one transmit of the core (a DCCP packet, or a train of
/// `segment_bytes`-sized ones) in place into the UDP payloads of U-DCCP
/// datagrams, packed at the front of `data`: each packet loses its first 8
/// bytes, which the kernel's UDP header replaces (§3.7). Returns the
/// payload length and the new GSO segment size; `None` (counted) when a
/// packet cannot be converted (X=0 — our codec never emits it).
pub fn to_payloads(
    data: &mut [u8],
    segment_bytes: Option<usize>,
    stats: &mut DaemonStats,
) -> Option<(usize, Option<usize>)> {
    let len = data.len();
    let seg = segment_bytes
        .filter(|&s| s > UDP_PART_LEN && s < len)
        .unwrap_or(len);
    let (mut read, mut write) = (0, 0);
    while read < len {
        let end = (read + seg).min(len);
        if udccp::encode_in_place(&mut data[read..end], None).is_err() {
            stats.udccp_tx_errors += 1;
            return None;
        }
        data.copy_within(read + UDP_PART_LEN..end, write);
        write += end - read - UDP_PART_LEN;
        read = end;
        stats.udccp_tx_packets += 1;
    }
    let new_seg = (seg < len).then_some(seg - UDP_PART_LEN);
    Some((write, new_seg))
}

/// Converts and queues one transmit of the core on `batch` (a datagram or
/// a GSO train) for `to`.
pub fn queue(
    sock: &PathSocket,
    batch: &mut SendBatch,
    stats: &mut DaemonStats,
    data: &mut [u8],
    segment_bytes: Option<usize>,
    to: SocketAddr,
) {
    if let Some((n, seg)) = to_payloads(data, segment_bytes, stats) {
        super::queue_transmit(sock, batch, stats, &data[..n], seg, to);
    }
}

/// Sends one converted transmit at once (the server: its main batch
/// belongs to the RFC 6773 socket). A refused send is counted as a UDP
/// error; the core sees it as loss.
pub fn queue_now(
    sock: &PathSocket,
    data: &mut [u8],
    segment_bytes: Option<usize>,
    to: SocketAddr,
    stats: &mut DaemonStats,
) {
    let Some((n, seg)) = to_payloads(data, segment_bytes, stats) else {
        return;
    };
    let datagrams = seg.map_or(1, |s| n.div_ceil(s)) as u64;
    match sock.send_segments(&data[..n], seg.unwrap_or(0), to) {
        Ok(()) => {
            stats.udp_tx_datagrams += datagrams;
            stats.udp_tx_syscalls += 1;
        }
        Err(_) => stats.udp_tx_errors += datagrams,
    }
}

/// The server's U-DCCP socket on `listen`, if configured.
pub fn bind_listener(
    listen: Option<SocketAddr>,
    buffer_bytes: usize,
    gro: bool,
) -> std::io::Result<Option<PathSocket>> {
    let Some(addr) = listen else {
        return Ok(None);
    };
    let cfg = crate::udp::PathSocketConfig {
        device: None,
        local: Some(addr),
        buffer_bytes,
    };
    let sock = PathSocket::bind(&cfg, addr)?;
    sock.set_gro(gro);
    tracing::info!(listen = %sock.local_addr(), "server listening (U-DCCP)");
    eprintln!("server listening on udccp {}", sock.local_addr());
    Ok(Some(sock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpdccp_proto::wire::{DccpKind, DccpRepr, Header};

    fn packet(seq: u64, payload: usize) -> Vec<u8> {
        let r = DccpRepr {
            header: Header {
                src_port: 1,
                dst_port: 2,
                seq,
                kind: DccpKind::DataAck { ack: 7 },
                ..Header::default()
            },
            ..Default::default()
        };
        let mut b = vec![0u8; r.buffer_len(payload)];
        // The checksum of unspecified addresses, as the daemon's core uses.
        let un = std::net::IpAddr::from([0u8; 4]);
        let n = r
            .emit(&mut b, &vec![0xab; payload], Some((un, un)))
            .unwrap();
        b.truncate(n);
        b
    }

    /// A GSO train of three packets (the last one shorter) becomes three
    /// UDP payloads 8 bytes shorter each, which restore to the packets.
    #[test]
    fn a_train_converts_packet_by_packet() {
        let (a, b, c) = (packet(10, 100), packet(11, 100), packet(12, 40));
        let seg = a.len();
        let mut train = [a.clone(), b.clone(), c.clone()].concat();
        let mut st = DaemonStats::default();
        let (n, new_seg) = to_payloads(&mut train, Some(seg), &mut st).unwrap();
        assert_eq!(n, a.len() + b.len() + c.len() - 24);
        assert_eq!(new_seg, Some(seg - 8));
        assert_eq!(st.udccp_tx_packets, 3);
        let mut out = vec![0u8; 2048];
        for (k, orig) in [a, b, c].iter().enumerate() {
            let start = k * (seg - 8);
            let end = (start + seg - 8).min(n);
            let m = udccp::decode_payload(1, 2, &train[start..end], &mut out, None).unwrap();
            assert_eq!(out[..m], orig[..], "packet {k}");
        }
        let mut one = packet(13, 0);
        let want = one.len() - 8;
        assert_eq!(to_payloads(&mut one, None, &mut st), Some((want, None)));
    }
}
