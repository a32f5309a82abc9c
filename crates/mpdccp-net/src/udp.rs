//! Per-path UDP sockets (RFC 6773 encapsulation) with batched I/O.
//!
//! Platform tricks stay here, away from the protocol: `SO_BINDTODEVICE` so a
//! path's packets leave through its own access network whatever the routing
//! table says, `recvmmsg` into preallocated slots (no allocation per packet),
//! `sendmmsg` for batches, each entry optionally a UDP GSO train
//! (`UDP_SEGMENT`: several equal-sized datagrams in one kernel packet that
//! stays one `sk_buff` through veths and forwarding routers), and UDP GRO
//! (`UDP_GRO`) on receive so such trains arrive as one buffer.
//!
//! A socket bound to a wildcard address (`0.0.0.0`, `[::]`) asks for each
//! datagram's destination address (`IP_PKTINFO`, `IPV6_RECVPKTINFO`) and
//! answers from it (the same cmsg on send): otherwise the kernel picks the
//! source by the route back, and a server with several addresses on one
//! interface answers a path from the wrong one, which the client drops.
//!
//! `quinn-udp` does the same (pktinfo, GSO, GRO, ECN) behind a portable API,
//! but sends one transmit per `sendmsg`; our batches hold many destinations
//! per `sendmmsg`, so we keep these ~100 lines of cmsg code.

use std::io;
use std::mem;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::cmsg::{self, enable_pktinfo, fill_send_control, SEND_CONTROL_WORDS};

/// Largest UDP payload we ever receive in one slot (a DCCP packet; bigger
/// datagrams are truncated and counted as malformed by the caller).
pub const SLOT_BYTES: usize = 2048;

/// Largest UDP payload of one GSO train or GRO buffer (the IP length limit).
pub const MAX_TRAIN_BYTES: usize = 65_536;

/// Room for the control messages we ask for (UDP_GRO's int, IP(V6)_PKTINFO).
const CONTROL_WORDS: usize = 16;

/// One UDP socket of one path (client) or of the listening port (server).
#[derive(Debug)]
pub struct PathSocket {
    socket: Socket,
    local: SocketAddr,
    /// Bound to a wildcard address: datagrams carry their destination
    /// (pktinfo) and answers name their source.
    pktinfo: bool,
}

/// Options for [`PathSocket::bind`].
#[derive(Clone, Debug, Default)]
pub struct PathSocketConfig {
    /// Interface to pin the socket to (`SO_BINDTODEVICE`); `None` = any.
    pub device: Option<String>,
    /// Local address; port 0 picks one.
    pub local: Option<SocketAddr>,
    /// Kernel receive/send buffer sizes; 0 = keep the default.
    pub buffer_bytes: usize,
}

impl PathSocket {
    /// Binds a non-blocking UDP socket. `family_of` decides IPv4 vs IPv6 when no
    /// local address is given.
    pub fn bind(config: &PathSocketConfig, family_of: SocketAddr) -> io::Result<PathSocket> {
        PathSocket::bind_with(config, family_of, false)
    }

    /// As [`PathSocket::bind`], in a `SO_REUSEPORT` group: a sharded
    /// server's workers each bind the listen address (`daemon/workers.rs`).
    pub fn bind_reuseport(
        config: &PathSocketConfig,
        family_of: SocketAddr,
    ) -> io::Result<PathSocket> {
        PathSocket::bind_with(config, family_of, true)
    }

    fn bind_with(
        config: &PathSocketConfig,
        family_of: SocketAddr,
        reuseport: bool,
    ) -> io::Result<PathSocket> {
        let local = config.local.unwrap_or(match family_of {
            SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("valid literal"),
            SocketAddr::V6(_) => "[::]:0".parse().expect("valid literal"),
        });
        let dev = config.device.as_deref().unwrap_or("any");
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("udp {local} (dev {dev}): {e}"));
        let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
            .map_err(ctx)?;
        socket.set_nonblocking(true).map_err(ctx)?;
        // No SO_REUSEADDR (nor SO_REUSEPORT): the port is ours alone, so a
        // second server or another local user cannot bind it and receive
        // our datagrams. UDP has no TIME_WAIT that would need it.
        // The exception, a sharded server's own group, keeps joiners out
        // with its steering program (`sockopt::reuseport_program`).
        if reuseport {
            socket.set_reuse_port(true).map_err(ctx)?;
        }
        if let Some(dev) = &config.device {
            socket.bind_device(Some(dev.as_bytes())).map_err(ctx)?;
        }
        if config.buffer_bytes > 0 {
            // Root may exceed net.core.[rw]mem_max (SO_*BUFFORCE); otherwise
            // best effort, the kernel clamps.
            if !force_buffer(&socket, libc::SO_RCVBUFFORCE, config.buffer_bytes) {
                let _ = socket.set_recv_buffer_size(config.buffer_bytes);
            }
            if !force_buffer(&socket, libc::SO_SNDBUFFORCE, config.buffer_bytes) {
                let _ = socket.set_send_buffer_size(config.buffer_bytes);
            }
        }
        // DF, no local fragmentation, no kernel PMTU cache: DPLPMTUD (pmtud.rs).
        crate::pmtud::set_df_probe(&socket, local.is_ipv6()).map_err(ctx)?;
        socket.bind(&SockAddr::from(local)).map_err(|e| {
            let hint = if e.kind() == io::ErrorKind::AddrInUse {
                " (another process, maybe a second mpdccp server, has this port)"
            } else {
                ""
            };
            io::Error::new(e.kind(), format!("cannot bind udp {local}: {e}{hint}"))
        })?;
        let local = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("bound socket has no IP address"))?;
        let pktinfo = local.ip().is_unspecified();
        if pktinfo {
            enable_pktinfo(&socket, local.is_ipv6())
                .map_err(|e| io::Error::new(e.kind(), format!("udp {local}: pktinfo: {e}")))?;
        }
        Ok(PathSocket {
            socket,
            local,
            pktinfo,
        })
    }

    /// A UDP socket bound by someone else — systemd's socket activation
    /// (`daemon/activation.rs`) — set up as [`PathSocket::bind`] sets up
    /// its own: non-blocking, `buffer_bytes` (0 keeps the default), DF,
    /// pktinfo on a wildcard address.
    pub fn from_bound(socket: Socket, buffer_bytes: usize) -> io::Result<PathSocket> {
        let local = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("passed socket has no IP address"))?;
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("udp {local} (passed): {e}"));
        socket.set_nonblocking(true).map_err(ctx)?;
        if buffer_bytes > 0 {
            if !force_buffer(&socket, libc::SO_RCVBUFFORCE, buffer_bytes) {
                let _ = socket.set_recv_buffer_size(buffer_bytes);
            }
            if !force_buffer(&socket, libc::SO_SNDBUFFORCE, buffer_bytes) {
                let _ = socket.set_send_buffer_size(buffer_bytes);
            }
        }
        crate::pmtud::set_df_probe(&socket, local.is_ipv6()).map_err(ctx)?;
        let pktinfo = local.ip().is_unspecified();
        if pktinfo {
            enable_pktinfo(&socket, local.is_ipv6()).map_err(ctx)?;
        }
        Ok(PathSocket {
            socket,
            local,
            pktinfo,
        })
    }

    /// Whether datagrams report their destination address
    /// ([`RecvBatch::local_ip`]): the socket is bound to a wildcard address.
    pub fn pktinfo(&self) -> bool {
        self.pktinfo
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Datagrams the kernel dropped for this socket (receive buffer full)
    /// since it was opened; `None` before Linux 4.12.
    pub fn rx_drops(&self) -> Option<u64> {
        crate::sockopt::socket_drops(&self.socket)
    }

    /// Turns UDP GRO (Linux ≥ 5.0) on or off: with it, a train of datagrams
    /// (a GSO packet of the peer, or datagrams the kernel coalesced) arrives
    /// as one buffer with its segment size, so receive with
    /// [`RecvBatch::with_slot_bytes`] slots of [`MAX_TRAIN_BYTES`]. Returns
    /// whether the kernel accepted it. Idempotent.
    pub fn set_gro(&self, on: bool) -> bool {
        crate::sockopt::set_int(&self.socket, libc::SOL_UDP, UDP_GRO, on.into()).is_ok()
    }

    /// Sends one datagram.
    pub fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.socket.send_to(buf, &SockAddr::from(to))
    }

    /// Sends one datagram from local address `from` (a wildcard socket's
    /// answer from the address the peer wrote to); `None` or a socket bound
    /// to one address: the kernel's choice.
    pub fn send_from(&self, buf: &[u8], to: SocketAddr, from: Option<IpAddr>) -> io::Result<usize> {
        let from = if self.pktinfo { from } else { None };
        if from.is_none() {
            return self.send_to(buf, to);
        }
        let name = SockAddr::from(to);
        let mut control = [0u64; SEND_CONTROL_WORDS];
        let mut iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut _,
            iov_len: buf.len(),
        };
        // SAFETY: zeroed msghdr is valid; every pointer stays live until sendmsg returns.
        let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
        hdr.msg_name = name.as_ptr() as *mut _;
        hdr.msg_namelen = name.len();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        // SAFETY: `control` is live and SEND_CONTROL_WORDS long.
        unsafe { fill_send_control(&mut hdr, &mut control, None, from, self.local.is_ipv6()) };
        // SAFETY: `hdr` and what it points at are valid for the call.
        let n = unsafe { libc::sendmsg(self.socket.as_raw_fd(), &hdr, libc::MSG_DONTWAIT) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Sends `buf` as datagrams of `segment_bytes` (the last may be shorter)
    /// with one syscall (UDP GSO), falling back to one `sendto` per segment
    /// when the kernel or device refuses it.
    pub fn send_segments(
        &self,
        buf: &[u8],
        segment_bytes: usize,
        to: SocketAddr,
    ) -> io::Result<()> {
        if segment_bytes == 0 || buf.len() <= segment_bytes {
            return self.send_to(buf, to).map(|_| ());
        }
        let mut b = SendBatch::new(1);
        let slot = b.next_buf();
        if slot.len() < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "train too large",
            ));
        }
        slot[..buf.len()].copy_from_slice(buf);
        b.commit(buf.len(), to, Some(segment_bytes));
        while !b.is_empty() {
            if self.send_batch(&mut b)? == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
        Ok(())
    }

    /// Sends every queued entry of `batch` with one `sendmmsg` (an entry is
    /// one datagram or one GSO train); returns how many datagrams went out
    /// (the rest stay queued, e.g. on `WouldBlock`). A train the kernel
    /// refuses to segment (`EIO`/`EINVAL`: no checksum offload on the
    /// device) goes out datagram by datagram.
    pub fn send_batch(&self, batch: &mut SendBatch) -> io::Result<usize> {
        let n = batch.len;
        if n == 0 {
            return Ok(0);
        }
        for i in 0..n {
            let (off, len, seg) = batch.spans[i];
            batch.iovs[i] = libc::iovec {
                iov_base: batch.data[off..].as_mut_ptr().cast(),
                iov_len: len,
            };
            // SAFETY: zeroed msghdr is valid; the pointers below stay live until sendmmsg returns.
            let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
            hdr.msg_name = batch.addrs[i].as_ptr() as *mut _;
            hdr.msg_namelen = batch.addrs[i].len();
            hdr.msg_iov = &mut batch.iovs[i];
            hdr.msg_iovlen = 1;
            let from = if self.pktinfo { batch.froms[i] } else { None };
            let gso = (seg > 0 && (seg as usize) < len).then_some(seg);
            // SAFETY: `controls[i]` is live and large enough (SEND_CONTROL_WORDS).
            unsafe {
                fill_send_control(
                    &mut hdr,
                    &mut batch.controls[i],
                    gso,
                    from,
                    self.local.is_ipv6(),
                )
            };
            batch.hdrs[i] = libc::mmsghdr {
                msg_hdr: hdr,
                msg_len: 0,
            };
        }
        // SAFETY: `hdrs[..n]` are initialised above and point into `batch`.
        let sent = unsafe {
            libc::sendmmsg(
                self.socket.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            let e = io::Error::last_os_error();
            let (off, len, seg) = batch.spans[0];
            let refused = matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL));
            if refused && seg > 0 && (seg as usize) < len {
                let to = batch.addrs[0].as_socket().unwrap_or(self.local);
                let from = if self.pktinfo { batch.froms[0] } else { None };
                let mut k = 0;
                for d in batch.data[off..off + len].chunks(seg as usize) {
                    self.send_from(d, to, from)?;
                    k += 1;
                }
                batch.consume(1);
                return Ok(k);
            }
            return Err(e);
        }
        Ok(batch.consume(sent as usize))
    }

    /// Receives up to `batch.capacity()` datagrams with one `recvmmsg`.
    /// `Ok(0)` never happens: an empty socket gives `WouldBlock`.
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        let cap = batch.capacity();
        let slot = batch.slot_bytes;
        for i in 0..cap {
            batch.iovs[i] = libc::iovec {
                iov_base: batch.data[i * slot..].as_mut_ptr().cast(),
                iov_len: slot,
            };
            // SAFETY: zeroed msghdr is valid; the pointers below stay live until recvmmsg returns.
            let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
            hdr.msg_name = (&mut batch.names[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as u32;
            hdr.msg_iov = &mut batch.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = batch.controls[i].as_mut_ptr().cast();
            hdr.msg_controllen = CONTROL_WORDS * 8;
            batch.hdrs[i] = libc::mmsghdr {
                msg_hdr: hdr,
                msg_len: 0,
            };
        }
        // SAFETY: `hdrs[..cap]` are initialised above and point into `batch`.
        let n = unsafe {
            libc::recvmmsg(
                self.socket.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                cap as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            batch.len = 0;
            return Err(io::Error::last_os_error());
        }
        batch.len = n as usize;
        batch.syscalls += 1;
        Ok(batch.len)
    }
}

const UDP_GRO: libc::c_int = 104;

fn force_buffer(socket: &Socket, opt: libc::c_int, bytes: usize) -> bool {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    crate::sockopt::set_int(socket, libc::SOL_SOCKET, opt, v).is_ok()
}

impl AsRawFd for PathSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl AsFd for PathSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// Preallocated receive slots for [`PathSocket::recv_batch`].
pub struct RecvBatch {
    data: Vec<u8>,
    slot_bytes: usize,
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<[u64; CONTROL_WORDS]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    len: usize,
    /// `recvmmsg` calls that returned data (for packets-per-syscall stats).
    pub syscalls: u64,
}

impl RecvBatch {
    /// Slots of [`SLOT_BYTES`] (one DCCP packet each).
    pub fn new(slots: usize) -> RecvBatch {
        RecvBatch::with_slot_bytes(slots, SLOT_BYTES)
    }

    /// Slots of `slot_bytes` each; use [`MAX_TRAIN_BYTES`] with UDP GRO.
    pub fn with_slot_bytes(slots: usize, slot_bytes: usize) -> RecvBatch {
        let slots = slots.max(1);
        let slot_bytes = slot_bytes.max(1);
        RecvBatch {
            data: vec![0; slots * slot_bytes],
            slot_bytes,
            controls: vec![[0; CONTROL_WORDS]; slots],
            syscalls: 0,
            // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
            names: vec![unsafe { mem::zeroed() }; slots],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                slots
            ],
            // SAFETY: mmsghdr is plain old data; all-zero is valid.
            hdrs: vec![unsafe { mem::zeroed() }; slots],
            len: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.names.len()
    }

    /// Datagram `i` of the last receive: (payload, sender, truncated?).
    pub fn datagram(&self, i: usize) -> Option<(&[u8], Option<SocketAddr>, bool)> {
        if i >= self.len {
            return None;
        }
        let h = &self.hdrs[i];
        let slot = self.slot_bytes;
        let len = (h.msg_len as usize).min(slot);
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        // SAFETY: the kernel wrote a valid sockaddr of `msg_namelen` bytes.
        let addr = unsafe { SockAddr::new(self.names[i], h.msg_hdr.msg_namelen) }.as_socket();
        Some((&self.data[i * slot..i * slot + len], addr, truncated))
    }

    /// The destination address of datagram `i` (the local address the peer
    /// wrote to), when the socket reports it ([`PathSocket::pktinfo`]).
    /// An IPv4-mapped address comes back as IPv4.
    pub fn local_ip(&self, i: usize) -> Option<IpAddr> {
        if i >= self.len {
            return None;
        }
        let h = &self.hdrs[i].msg_hdr;
        if h.msg_control.is_null() || h.msg_controllen == 0 {
            return None;
        }
        // SAFETY: the kernel filled `msg_control` (our `controls[i]`) with
        // `msg_controllen` bytes of well-formed cmsgs.
        unsafe { cmsg::destination_ip(h) }
    }

    /// The segment size of datagram `i` when UDP GRO coalesced a train into
    /// it (the buffer then holds datagrams of this size, the last shorter).
    pub fn gro_segment_bytes(&self, i: usize) -> Option<usize> {
        if i >= self.len {
            return None;
        }
        let h = &self.hdrs[i].msg_hdr;
        if h.msg_control.is_null() || h.msg_controllen == 0 {
            return None;
        }
        // SAFETY: the kernel filled `msg_control` (our `controls[i]`) with
        // `msg_controllen` bytes of well-formed cmsgs; CMSG_* walk within it.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    return (v > 0).then_some(v as usize);
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Datagrams (or GSO trains) queued for one `sendmmsg`: one contiguous
/// buffer, preallocated, with room for a [`MAX_TRAIN_BYTES`] train whenever
/// it is not full.
pub struct SendBatch {
    data: Vec<u8>,
    /// (offset, length, segment size or 0) per entry.
    spans: Vec<(usize, usize, u16)>,
    addrs: Vec<SockAddr>,
    /// Source address per entry (wildcard sockets answer from it).
    froms: Vec<Option<IpAddr>>,
    controls: Vec<[u64; SEND_CONTROL_WORDS]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    len: usize,
    used: usize,
    /// `sendmmsg` calls made (for packets-per-syscall stats).
    pub syscalls: u64,
}

impl SendBatch {
    pub fn new(slots: usize) -> SendBatch {
        let slots = slots.max(1);
        let any: SocketAddr = "0.0.0.0:0".parse().expect("valid literal");
        SendBatch {
            data: vec![0; slots * SLOT_BYTES + MAX_TRAIN_BYTES],
            spans: vec![(0, 0, 0); slots],
            addrs: vec![SockAddr::from(any); slots],
            froms: vec![None; slots],
            controls: vec![[0; SEND_CONTROL_WORDS]; slots],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                slots
            ],
            // SAFETY: mmsghdr is plain old data; all-zero is valid.
            hdrs: vec![unsafe { mem::zeroed() }; slots],
            len: 0,
            used: 0,
            syscalls: 0,
        }
    }

    pub fn is_full(&self) -> bool {
        self.len == self.spans.len() || self.data.len() - self.used < MAX_TRAIN_BYTES
    }

    /// Entries queued (a GSO train counts once).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Space to write the next datagram or train into (at least
    /// [`MAX_TRAIN_BYTES`] unless full); call [`SendBatch::commit`] with its
    /// length and destination afterwards.
    pub fn next_buf(&mut self) -> &mut [u8] {
        &mut self.data[self.used..]
    }

    /// Queues what was written at [`SendBatch::next_buf`]: one datagram, or
    /// with `segment_bytes` a train of datagrams of that size (the last may
    /// be shorter) sent as one GSO packet.
    pub fn commit(&mut self, len: usize, to: SocketAddr, segment_bytes: Option<usize>) {
        self.commit_from(len, to, segment_bytes, None)
    }

    /// [`SendBatch::commit`] with the local source address to send from
    /// (used by sockets bound to a wildcard address, ignored by others).
    pub fn commit_from(
        &mut self,
        len: usize,
        to: SocketAddr,
        segment_bytes: Option<usize>,
        from: Option<IpAddr>,
    ) {
        debug_assert!(!self.is_full());
        let len = len.min(self.data.len() - self.used);
        let seg = match segment_bytes {
            Some(s) if s > 0 && s < len => u16::try_from(s).unwrap_or(0),
            _ => 0,
        };
        self.spans[self.len] = (self.used, len, seg);
        self.addrs[self.len] = SockAddr::from(to);
        self.froms[self.len] = from;
        self.used += len;
        self.len += 1;
    }

    /// Drops the first `n` entries (sent), keeping the rest in order;
    /// returns how many datagrams they held.
    fn consume(&mut self, n: usize) -> usize {
        self.syscalls += 1;
        let dgrams: usize = self.spans[..n.min(self.len)]
            .iter()
            .map(|&(_, len, seg)| {
                if seg > 0 {
                    len.div_ceil(seg as usize)
                } else {
                    1
                }
            })
            .sum();
        if n >= self.len {
            self.len = 0;
            self.used = 0;
            return dgrams;
        }
        // Rare (partial send): shift the rest to the front.
        let start = self.spans[n].0;
        self.data.copy_within(start..self.used, 0);
        for i in n..self.len {
            let (off, len, seg) = self.spans[i];
            self.spans[i - n] = (off - start, len, seg);
            self.addrs.swap(i - n, i);
            self.froms.swap(i - n, i);
        }
        self.used -= start;
        self.len -= n;
        dgrams
    }

    /// Datagrams queued (a train counts as its segments).
    pub fn datagrams(&self) -> usize {
        self.spans[..self.len]
            .iter()
            .map(|&(_, len, seg)| {
                if seg > 0 {
                    len.div_ceil(seg as usize)
                } else {
                    1
                }
            })
            .sum()
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listening socket is exclusive: a second server on the
    /// same address, one on the wildcard address, and a local process asking
    /// for SO_REUSEADDR + SO_REUSEPORT all fail, with an error that names
    /// the address.
    #[test]
    fn listening_port_is_exclusive() {
        let cfg = PathSocketConfig {
            local: Some("127.0.0.1:0".parse().unwrap()),
            ..Default::default()
        };
        let first = PathSocket::bind(&cfg, "127.0.0.1:1".parse().unwrap()).unwrap();
        let addr = first.local_addr();
        let again = PathSocketConfig {
            local: Some(addr),
            ..Default::default()
        };
        let err = PathSocket::bind(&again, addr).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        let msg = err.to_string();
        assert!(msg.contains(&format!("udp {addr}")), "{msg}");
        assert!(msg.contains("second mpdccp server"), "{msg}");
        let wildcard = SocketAddr::new("0.0.0.0".parse().unwrap(), addr.port());
        let wild_cfg = PathSocketConfig {
            local: Some(wildcard),
            ..Default::default()
        };
        assert!(PathSocket::bind(&wild_cfg, addr).is_err());
        let thief = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        thief.set_reuse_address(true).unwrap();
        thief.set_reuse_port(true).unwrap();
        assert!(thief.bind(&SockAddr::from(addr)).is_err());
    }

    #[test]
    fn batch_roundtrip_on_loopback() {
        let cfg = PathSocketConfig {
            local: Some("127.0.0.1:0".parse().unwrap()),
            ..Default::default()
        };
        let a = PathSocket::bind(&cfg, "127.0.0.1:1".parse().unwrap()).unwrap();
        let b = PathSocket::bind(&cfg, "127.0.0.1:1".parse().unwrap()).unwrap();
        let mut sb = SendBatch::new(8);
        for i in 0..5u8 {
            let buf = sb.next_buf();
            buf[..3].copy_from_slice(&[i, i, i]);
            sb.commit(3, b.local_addr(), None);
        }
        assert_eq!(a.send_batch(&mut sb).unwrap(), 5);
        assert!(sb.is_empty());
        a.send_segments(&[9u8; 250], 100, b.local_addr()).unwrap();
        let mut rb = RecvBatch::new(16);
        let mut got = Vec::new();
        for _ in 0..100 {
            match b.recv_batch(&mut rb) {
                Ok(n) => {
                    for i in 0..n {
                        let (d, from, trunc) = rb.datagram(i).unwrap();
                        assert_eq!(from, Some(a.local_addr()));
                        assert!(!trunc);
                        got.push(d.to_vec());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if got.len() >= 8 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got.len(), 8, "5 batched + 3 GSO segments");
        assert_eq!(got[4], vec![4, 4, 4]);
        assert_eq!(got[5].len(), 100);
        assert_eq!(got[7].len(), 50);
    }

    /// A batch mixing single datagrams and a GSO train keeps its order; a
    /// GRO receiver gets the train as one buffer with its segment size.
    #[test]
    fn gso_train_in_batch_and_gro_receive() {
        let cfg = PathSocketConfig {
            local: Some("127.0.0.1:0".parse().unwrap()),
            ..Default::default()
        };
        let a = PathSocket::bind(&cfg, "127.0.0.1:1".parse().unwrap()).unwrap();
        let b = PathSocket::bind(&cfg, "127.0.0.1:1".parse().unwrap()).unwrap();
        assert!(b.set_gro(true), "UDP_GRO needs Linux >= 5.0");
        let mut sb = SendBatch::new(8);
        sb.next_buf()[..10].copy_from_slice(&[1; 10]);
        sb.commit(10, b.local_addr(), None);
        let train: Vec<u8> = (0..3500u32).map(|i| (i / 1000) as u8 + 10).collect();
        sb.next_buf()[..3500].copy_from_slice(&train);
        sb.commit(3500, b.local_addr(), Some(1000));
        sb.next_buf()[..5].copy_from_slice(&[2; 5]);
        sb.commit(5, b.local_addr(), None);
        assert_eq!(sb.datagrams(), 6);
        assert_eq!(a.send_batch(&mut sb).unwrap(), 6);
        assert_eq!(sb.syscalls, 1);
        let mut rb = RecvBatch::with_slot_bytes(4, MAX_TRAIN_BYTES);
        let mut got: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
        for _ in 0..100 {
            match b.recv_batch(&mut rb) {
                Ok(n) => {
                    for i in 0..n {
                        let (d, _, trunc) = rb.datagram(i).unwrap();
                        assert!(!trunc);
                        got.push((d.to_vec(), rb.gro_segment_bytes(i)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if got.iter().map(|g| g.0.len()).sum::<usize>() >= 3515 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got[0], (vec![1; 10], None));
        assert_eq!(got[1].0, train, "the train arrives whole, in order");
        assert_eq!(got[1].1, Some(1000));
        assert_eq!(got[2].0, vec![2; 5]);
        assert_eq!(got.len(), 3);
    }

    fn recv_one(s: &PathSocket, rb: &mut RecvBatch) -> (Vec<u8>, SocketAddr, Option<IpAddr>) {
        for _ in 0..500 {
            match s.recv_batch(rb) {
                Ok(_) => {
                    let (d, from, _) = rb.datagram(0).unwrap();
                    return (d.to_vec(), from.unwrap(), rb.local_ip(0));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(2))
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("nothing received");
    }

    /// A socket on 0.0.0.0 learns that a datagram was sent to 127.0.0.2 and
    /// answers from 127.0.0.2 — single datagram, batch and GSO train alike —
    /// where the kernel's own choice is 127.0.0.1 (a wildcard
    /// listen address). Loopback has all of 127/8, so no root is needed.
    #[test]
    fn wildcard_socket_answers_from_the_address_it_was_sent_to() {
        let server = PathSocket::bind(
            &PathSocketConfig {
                local: Some("0.0.0.0:0".parse().unwrap()),
                ..Default::default()
            },
            "127.0.0.1:1".parse().unwrap(),
        )
        .unwrap();
        assert!(server.pktinfo());
        let port = server.local_addr().port();
        let client = PathSocket::bind(
            &PathSocketConfig {
                local: Some("127.0.0.1:0".parse().unwrap()),
                ..Default::default()
            },
            "127.0.0.1:1".parse().unwrap(),
        )
        .unwrap();
        assert!(!client.pktinfo());
        let second: SocketAddr = SocketAddr::new("127.0.0.2".parse().unwrap(), port);
        client.send_to(b"hello", second).unwrap();
        let mut rb = RecvBatch::new(1);
        let (d, peer, local) = recv_one(&server, &mut rb);
        assert_eq!((d.as_slice(), peer), (&b"hello"[..], client.local_addr()));
        assert_eq!(local, Some(second.ip()));
        // Without a source the kernel picks 127.0.0.1: what the client drops.
        server.send_to(b"plain", peer).unwrap();
        let mut crb = RecvBatch::new(1);
        let (_, from, _) = recv_one(&client, &mut crb);
        assert_eq!(from.ip(), "127.0.0.1".parse::<IpAddr>().unwrap());
        server.send_from(b"one", peer, local).unwrap();
        let (d, from, _) = recv_one(&client, &mut crb);
        assert_eq!((d.as_slice(), from), (&b"one"[..], second));
        let mut sb = SendBatch::new(4);
        sb.next_buf()[..3].copy_from_slice(b"two");
        sb.commit_from(3, peer, None, local);
        sb.next_buf()[..300].copy_from_slice(&[7; 300]);
        sb.commit_from(300, peer, Some(100), local);
        assert_eq!(server.send_batch(&mut sb).unwrap(), 4);
        for want in [3, 100, 100, 100] {
            let (d, from, _) = recv_one(&client, &mut crb);
            assert_eq!((d.len(), from), (want, second));
        }
    }
}
