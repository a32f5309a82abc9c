//! The three transports a path can use, each end behind one type:
//! DCCP-in-UDP (RFC 6773), native DCCP (IP protocol 33, RFC 4340;
//! `native.rs`) and U-DCCP (draft-amend-tsvwg-dccp-udp-header-conversion;
//! `udccp.rs`).
//!
//! [`PathLink`] is a client path's socket, [`Listeners`] the server's
//! sockets and [`Peer`] the server's key for whom a packet came from.
//! Every place where the daemon treats the transports differently is a
//! method here; the drivers (`client.rs`, `serve.rs`) do not match on the
//! transport. Enums rather than `dyn` trait objects: these methods run per
//! received batch and per transmit, and a `match` over three variants is a
//! well-predicted branch the compiler can inline, where a trait object
//! would add a box per socket and an indirect call per transmit. A new
//! transport is a variant here plus its own module.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

use mpdccp_proto::Instant;

use super::config::Transport;
use super::warn::PacketWarning;
use super::{flush_batch, queue_transmit, DaemonStats, PollSet};
use crate::raw::RawDccpSocket;
use crate::udp::{PathSocket, PathSocketConfig, RecvBatch, SendBatch};

/// A client path's socket: UDP carrying DCCP (RFC 6773), a raw
/// protocol-33 socket (native DCCP) or UDP carrying U-DCCP.
pub(super) enum PathLink {
    Udp(PathSocket),
    Dccp(RawDccpSocket),
    UDccp(PathSocket),
}

impl PathLink {
    /// Opens `transport`'s socket towards `remote`, bound to `iface` and
    /// to `local_ip` when given; UDP sockets get GRO when `gro`. Native
    /// DCCP needs the local address: it enters every checksum (RFC 4340
    /// §9.1).
    pub fn open(
        transport: Transport,
        iface: &str,
        local_ip: Option<IpAddr>,
        remote: SocketAddr,
        buffer_bytes: usize,
        gro: bool,
    ) -> io::Result<PathLink> {
        let cfg = PathSocketConfig {
            device: Some(iface.to_string()),
            local: local_ip.map(|ip| SocketAddr::new(ip, 0)),
            buffer_bytes,
        };
        let link = match transport {
            Transport::Udp => PathLink::Udp(PathSocket::bind(&cfg, remote)?),
            Transport::UDccp => PathLink::UDccp(PathSocket::bind(&cfg, remote)?),
            Transport::Dccp => {
                let local = local_ip.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::AddrNotAvailable,
                        "native DCCP: the interface has no address of the server's family",
                    )
                })?;
                return super::native::open(local, Some(iface), buffer_bytes).map(PathLink::Dccp);
            }
        };
        if let PathLink::Udp(s) | PathLink::UDccp(s) = &link {
            s.set_gro(gro);
        }
        Ok(link)
    }

    pub fn as_raw_fd(&self) -> RawFd {
        match self {
            PathLink::Udp(s) | PathLink::UDccp(s) => s.as_raw_fd(),
            PathLink::Dccp(s) => s.as_raw_fd(),
        }
    }

    pub fn local_addr(&self) -> String {
        match self {
            PathLink::Udp(s) | PathLink::UDccp(s) => s.local_addr().to_string(),
            PathLink::Dccp(s) => s.local_addr().to_string(),
        }
    }

    /// The socket of a plain UDP path: it takes the core's transmit as the
    /// core wrote it (the client's batched fast path). `None` for native
    /// DCCP (sent at once) and U-DCCP (rewritten first).
    pub fn plain_udp(&self) -> Option<&PathSocket> {
        match self {
            PathLink::Udp(s) => Some(s),
            PathLink::Dccp(_) | PathLink::UDccp(_) => None,
        }
    }

    /// Datagrams the kernel dropped at a UDP socket (`SO_MEMINFO`); raw
    /// sockets report none.
    pub fn rx_drops(&self) -> Option<u64> {
        match self {
            PathLink::Udp(s) | PathLink::UDccp(s) => s.rx_drops(),
            PathLink::Dccp(_) => None,
        }
    }

    /// Receives what is queued and hands each DCCP packet from the server
    /// (`remote`) to `deliver(now, packet)`; anything else is dropped and
    /// counted (`udp_rx_foreign`). `scratch`: room to rebuild a U-DCCP
    /// packet or to read a raw one.
    pub fn drain(
        &mut self,
        remote: SocketAddr,
        rx: &mut RecvBatch,
        scratch: &mut [u8],
        stats: &mut DaemonStats,
        mut deliver: impl FnMut(Instant, &[u8]),
    ) {
        match self {
            PathLink::Udp(sock) => {
                let local = sock.local_addr();
                super::drain_socket(sock, rx, stats, |stats, now, from, _, data| {
                    if from != remote {
                        stats.udp_rx_foreign += 1;
                        stats.warnings.warn(
                            PacketWarning::Foreign,
                            now,
                            format_args!("udp {local}: datagram from {from}, not the server {remote}: dropped (a server on a wildcard address answering from another address?)"),
                        );
                        return;
                    }
                    deliver(now, data);
                })
            }
            PathLink::UDccp(sock) => {
                super::udccp::drain(sock, rx, scratch, stats, |stats, now, from, data| {
                    if from != remote {
                        stats.udp_rx_foreign += 1;
                        return;
                    }
                    deliver(now, data);
                })
            }
            // The raw socket sees every DCCP packet to its address: only
            // the server's count (ports are the core's, not a socket's).
            PathLink::Dccp(sock) => {
                super::native::drain(sock, scratch, stats, |stats, now, from, _, data| {
                    if from != remote.ip() {
                        stats.udp_rx_foreign += 1;
                        stats.warnings.warn(
                            PacketWarning::Foreign,
                            now,
                            format_args!(
                                "dccp: packet from {from}, not the server {remote}: dropped"
                            ),
                        );
                        return;
                    }
                    deliver(now, data);
                })
            }
        }
    }

    /// Sends one transmit of the core (a packet or a GSO train at `data`)
    /// to `remote`: UDP ones are queued on `batch` (sent by
    /// [`PathLink::flush`]), native DCCP ones leave at once.
    pub fn transmit(
        &self,
        batch: &mut SendBatch,
        stats: &mut DaemonStats,
        data: &mut [u8],
        segment_size: Option<usize>,
        remote: SocketAddr,
    ) {
        match self {
            PathLink::Udp(sock) => queue_transmit(sock, batch, stats, data, segment_size, remote),
            PathLink::UDccp(sock) => {
                super::udccp::queue(sock, batch, stats, data, segment_size, remote)
            }
            PathLink::Dccp(sock) => {
                super::native::send(sock, data, segment_size, remote.ip(), stats)
            }
        }
    }

    /// Sends what [`PathLink::transmit`] queued.
    pub fn flush(&self, batch: &mut SendBatch, stats: &mut DaemonStats) {
        match self {
            PathLink::Udp(sock) | PathLink::UDccp(sock) => flush_batch(sock, batch, stats),
            PathLink::Dccp(_) => batch.clear(),
        }
    }
}

/// Who a path's packets come from, the server `Endpoint`'s demultiplexing
/// key. UDP peers by address and port (RFC 6773) and, on a wildcard listen
/// address, the local address they wrote to (answers leave from it, so a
/// server with several addresses answers each path from the one its client
/// knows); native DCCP peers by the local address they reached (which raw
/// socket answers), their address and the DCCP source port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Peer {
    Udp {
        remote: SocketAddr,
        local: Option<IpAddr>,
    },
    Dccp {
        local: IpAddr,
        remote: IpAddr,
        port: u16,
    },
    UDccp(SocketAddr),
}

impl Peer {
    /// The address the authenticated gate rate-limits and remembers.
    pub fn addr(&self) -> SocketAddr {
        match *self {
            Peer::Udp { remote, .. } | Peer::UDccp(remote) => remote,
            Peer::Dccp { remote, port, .. } => SocketAddr::new(remote, port),
        }
    }

    /// Both keys are the same path: the same transport between the same
    /// two addresses, whatever the client's port (a rejoin takes a new
    /// one). An authenticated join on a path retires the subflow it
    /// replaced (`Endpoint::identify_paths`).
    pub fn same_path(a: &Peer, b: &Peer) -> bool {
        match (*a, *b) {
            (
                Peer::Udp {
                    remote: r,
                    local: l,
                },
                Peer::Udp {
                    remote: s,
                    local: m,
                },
            ) => r.ip() == s.ip() && l == m,
            (
                Peer::Dccp {
                    local: l,
                    remote: r,
                    ..
                },
                Peer::Dccp {
                    local: m,
                    remote: s,
                    ..
                },
            ) => l == m && r == s,
            (Peer::UDccp(r), Peer::UDccp(s)) => r.ip() == s.ip(),
            _ => false,
        }
    }

    /// How the path's packets travel, as `transport` names it.
    pub fn transport_name(&self) -> &'static str {
        match self {
            Peer::Udp { .. } => "udp",
            Peer::Dccp { .. } => "dccp",
            Peer::UDccp(_) => "udccp",
        }
    }

    /// A path's stable name (the client's address, without the port a
    /// rejoin changes) and its remote address, for status and metrics.
    pub fn label(&self) -> (String, String) {
        match *self {
            Peer::Udp { remote, .. } => (remote.ip().to_string(), remote.to_string()),
            Peer::Dccp { remote, port, .. } => {
                (format!("dccp:{remote}"), format!("dccp:{remote}:{port}"))
            }
            Peer::UDccp(remote) => (format!("udccp:{}", remote.ip()), format!("udccp:{remote}")),
        }
    }
}

/// A server path's name and remote address for status and metrics. With
/// a peer the handshake proved (authenticated modes), its configured name
/// and the connection's path id (`cpe-17/p2`): a NAT rebinding moves the
/// remote address, not the name, so the Prometheus series goes on. In the
/// open mode, the client's address ([`Peer::label`]).
pub fn path_name(peer_name: Option<&str>, path_id: u32, link: &Peer) -> (String, String) {
    let (by_addr, remote) = link.label();
    match peer_name {
        Some(n) => (format!("{n}/p{path_id}"), remote),
        None => (by_addr, remote),
    }
}

/// The sockets one server loop reads: its UDP socket (RFC 6773; a
/// worker's is its share of the `SO_REUSEPORT` group) and, with a single
/// loop, the U-DCCP socket (`udccp_listen`) and one raw socket per
/// `dccp_listen` address.
pub(super) struct Listeners {
    pub udp: PathSocket,
    pub udccp: Option<PathSocket>,
    pub dccp: Vec<RawDccpSocket>,
    /// Poll indices of the last [`Listeners::register`]: UDP, U-DCCP, raw.
    i_udp: usize,
    i_udccp: Option<usize>,
    i_dccp: Vec<usize>,
}

impl Listeners {
    pub fn new(udp: PathSocket, udccp: Option<PathSocket>, dccp: Vec<RawDccpSocket>) -> Self {
        let i_dccp = Vec::with_capacity(dccp.len());
        Listeners {
            udp,
            udccp,
            dccp,
            i_udp: usize::MAX,
            i_udccp: None,
            i_dccp,
        }
    }

    /// Adds every socket to `poll`.
    pub fn register(&mut self, poll: &mut PollSet) {
        self.i_udp = poll.add(self.udp.as_raw_fd());
        self.i_udccp = self.udccp.as_ref().map(|u| poll.add(u.as_raw_fd()));
        self.i_dccp.clear();
        for r in &self.dccp {
            self.i_dccp.push(poll.add(r.as_raw_fd()));
        }
    }

    /// Receives from every socket `poll` found readable (UDP, U-DCCP, then
    /// raw) and hands each DCCP packet to `deliver(stats, now, from, packet)`.
    pub fn drain_ready(
        &mut self,
        poll: &PollSet,
        rx: &mut RecvBatch,
        scratch: &mut [u8],
        stats: &mut DaemonStats,
        mut deliver: impl FnMut(&mut DaemonStats, Instant, Peer, &[u8]),
    ) {
        if poll.readable(self.i_udp) {
            super::drain_socket(&self.udp, rx, stats, |stats, now, remote, local, data| {
                deliver(stats, now, Peer::Udp { remote, local }, data)
            });
        }
        if let (Some(u), Some(i)) = (&self.udccp, self.i_udccp) {
            if poll.readable(i) {
                super::udccp::drain(u, rx, scratch, stats, |stats, now, from, data| {
                    deliver(stats, now, Peer::UDccp(from), data)
                });
            }
        }
        for (r, &i) in self.dccp.iter_mut().zip(&self.i_dccp) {
            if poll.readable(i) {
                let local = r.local_addr();
                super::native::drain(r, scratch, stats, |stats, now, remote, port, data| {
                    let peer = Peer::Dccp {
                        local,
                        remote,
                        port,
                    };
                    deliver(stats, now, peer, data)
                });
            }
        }
    }

    /// Sends one transmit the core wrote into `batch`'s next slot (`size`
    /// bytes, a GSO train of `segment_size` ones when set) to `to`: a UDP
    /// one is committed to the batch (no copy), a native DCCP or U-DCCP
    /// one leaves at once from the slot (raw sockets have no GSO, and the
    /// batch belongs to the RFC 6773 socket).
    pub fn send(
        &self,
        to: Peer,
        size: usize,
        segment_size: Option<usize>,
        batch: &mut SendBatch,
        stats: &mut DaemonStats,
    ) {
        match to {
            Peer::Udp { remote, local } => {
                if segment_size.is_some_and(|s| s < size) {
                    stats.udp_tx_gso_trains += 1;
                }
                batch.commit_from(size, remote, segment_size, local);
            }
            Peer::Dccp { local, remote, .. } => {
                match self.dccp.iter().find(|r| r.local_addr() == local) {
                    Some(r) => {
                        let data = &mut batch.next_buf()[..size];
                        super::native::send(r, data, segment_size, remote, stats)
                    }
                    None => stats.udp_tx_no_socket += 1,
                }
            }
            Peer::UDccp(a) => match &self.udccp {
                Some(u) => {
                    let data = &mut batch.next_buf()[..size];
                    super::udccp::queue_now(u, data, segment_size, a, stats)
                }
                None => stats.udp_tx_no_socket += 1,
            },
        }
    }

    /// Sends what [`Listeners::send`] committed to `batch`.
    pub fn flush(&self, batch: &mut SendBatch, stats: &mut DaemonStats) {
        flush_batch(&self.udp, batch, stats);
    }
}

#[cfg(test)]
mod tests {
    use super::{path_name, Peer};
    use std::net::{IpAddr, SocketAddr};

    /// A path's name leaves out the port, which a rejoin changes, so its
    /// metric series stays one; each transport is told apart; the gate
    /// keys a native DCCP peer by its DCCP source port.
    #[test]
    fn peer_names_are_stable_across_ports_and_transports_apart() {
        let a: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:4001".parse().unwrap();
        let udp = |remote| Peer::Udp {
            remote,
            local: None,
        };
        assert_eq!(udp(a).label().0, udp(b).label().0);
        assert_ne!(udp(a).label().1, udp(b).label().1);
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        let dccp = Peer::Dccp {
            local: "10.0.0.1".parse().unwrap(),
            remote: ip,
            port: 5000,
        };
        let names = [udp(a).label().0, dccp.label().0, Peer::UDccp(a).label().0];
        assert_eq!(names, ["10.0.0.2", "dccp:10.0.0.2", "udccp:10.0.0.2"]);
        assert_eq!(dccp.addr(), SocketAddr::new(ip, 5000));
        assert_eq!(Peer::UDccp(b).addr(), b);
    }

    #[test]
    fn an_authenticated_paths_name_survives_a_rebinding() {
        let udp = |remote: SocketAddr| Peer::Udp {
            remote,
            local: None,
        };
        let before = udp("192.0.2.7:40000".parse().unwrap());
        let after = udp("198.51.100.9:51000".parse().unwrap());
        let (n1, r1) = path_name(Some("cpe-17"), 2, &before);
        let (n2, r2) = path_name(Some("cpe-17"), 2, &after);
        assert_eq!((n1.as_str(), n2.as_str()), ("cpe-17/p2", "cpe-17/p2"));
        assert_ne!(r1, r2, "the remote address shows the rebinding");
        assert_ne!(path_name(Some("cpe-17"), 3, &after).0, n2);
        // Open mode: no proven identity, the address names the path.
        assert_eq!(path_name(None, 2, &before).0, "192.0.2.7");
    }
}
