//! Per-path UDP sockets (RFC 6773 encapsulation) with batched I/O.
//!
//! Platform tricks stay here, away from the protocol: `SO_BINDTODEVICE` so a
//! path's packets leave through its own access network whatever the routing
//! table says, `recvmmsg` into preallocated slots (no allocation per packet),
//! `sendmmsg` for batches and UDP GSO (`UDP_SEGMENT`) when the core hands out
//! several equal-sized datagrams at once.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Largest UDP payload we ever receive in one slot (a DCCP packet; bigger
/// datagrams are truncated and counted as malformed by the caller).
pub const SLOT_BYTES: usize = 2048;

/// One UDP socket of one path (client) or of the listening port (server).
#[derive(Debug)]
pub struct PathSocket {
    socket: Socket,
    local: SocketAddr,
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
        let local = config.local.unwrap_or(match family_of {
            SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("valid literal"),
            SocketAddr::V6(_) => "[::]:0".parse().expect("valid literal"),
        });
        let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_nonblocking(true)?;
        socket.set_reuse_address(true)?;
        if let Some(dev) = &config.device {
            socket.bind_device(Some(dev.as_bytes()))?;
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
        socket.bind(&SockAddr::from(local))?;
        let local = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("bound socket has no IP address"))?;
        Ok(PathSocket { socket, local })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sends one datagram.
    pub fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.socket.send_to(buf, &SockAddr::from(to))
    }

    /// Sends `buf` as datagrams of `segment_bytes` (the last may be shorter)
    /// with one syscall: UDP GSO (Linux ≥ 4.18), falling back to one `sendto`
    /// per segment when the kernel or device refuses it.
    pub fn send_segments(
        &self,
        buf: &[u8],
        segment_bytes: usize,
        to: SocketAddr,
    ) -> io::Result<()> {
        if segment_bytes == 0 || buf.len() <= segment_bytes {
            return self.send_to(buf, to).map(|_| ());
        }
        match self.send_gso(buf, segment_bytes as u16, to) {
            Ok(()) => Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EIO)
                    || e.raw_os_error() == Some(libc::EINVAL) =>
            {
                for seg in buf.chunks(segment_bytes) {
                    self.send_to(seg, to)?;
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn send_gso(&self, buf: &[u8], segment_bytes: u16, to: SocketAddr) -> io::Result<()> {
        let addr = SockAddr::from(to);
        let mut iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut _,
            iov_len: buf.len(),
        };
        // Room for one cmsg carrying a u16.
        let mut control = [0u64; 4];
        // SAFETY: zeroed msghdr is a valid "empty" value; fields set below point
        // at live locals for the duration of the call.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_name = addr.as_ptr() as *mut _;
        msg.msg_namelen = addr.len();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure size computation.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(mem::size_of::<u16>() as u32) } as usize;
        // SAFETY: msg_control points at `control`, large enough for one u16 cmsg.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment_bytes);
        }
        // SAFETY: msg is fully initialised and its pointers are valid.
        let n = unsafe { libc::sendmsg(self.socket.as_raw_fd(), &msg, 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Sends every queued datagram of `batch` with `sendmmsg`; returns how many
    /// went out (the rest stay queued, e.g. on `WouldBlock`).
    pub fn send_batch(&self, batch: &mut SendBatch) -> io::Result<usize> {
        let n = batch.len;
        if n == 0 {
            return Ok(0);
        }
        for i in 0..n {
            let (off, len) = batch.spans[i];
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
            return Err(e);
        }
        let sent = sent as usize;
        batch.consume(sent);
        Ok(sent)
    }

    /// Receives up to `batch.capacity()` datagrams with one `recvmmsg`.
    /// `Ok(0)` never happens: an empty socket gives `WouldBlock`.
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        let cap = batch.capacity();
        for i in 0..cap {
            batch.iovs[i] = libc::iovec {
                iov_base: batch.data[i * SLOT_BYTES..].as_mut_ptr().cast(),
                iov_len: SLOT_BYTES,
            };
            // SAFETY: zeroed msghdr is valid; the pointers below stay live until recvmmsg returns.
            let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
            hdr.msg_name = (&mut batch.names[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as u32;
            hdr.msg_iov = &mut batch.iovs[i];
            hdr.msg_iovlen = 1;
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
        Ok(batch.len)
    }
}

fn force_buffer(socket: &Socket, opt: libc::c_int, bytes: usize) -> bool {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: `v` is a valid c_int for the duration of the call.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as u32,
        ) == 0
    }
}

impl AsRawFd for PathSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

/// Preallocated receive slots for [`PathSocket::recv_batch`].
pub struct RecvBatch {
    data: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    len: usize,
}

impl RecvBatch {
    pub fn new(slots: usize) -> RecvBatch {
        let slots = slots.max(1);
        RecvBatch {
            data: vec![0; slots * SLOT_BYTES],
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
        let len = (h.msg_len as usize).min(SLOT_BYTES);
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        // SAFETY: the kernel wrote a valid sockaddr of `msg_namelen` bytes.
        let addr = unsafe { SockAddr::new(self.names[i], h.msg_hdr.msg_namelen) }.as_socket();
        Some((
            &self.data[i * SLOT_BYTES..i * SLOT_BYTES + len],
            addr,
            truncated,
        ))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Datagrams queued for one `sendmmsg`: one contiguous buffer, preallocated.
pub struct SendBatch {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
    addrs: Vec<SockAddr>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    len: usize,
    used: usize,
}

impl SendBatch {
    pub fn new(slots: usize) -> SendBatch {
        let slots = slots.max(1);
        let any: SocketAddr = "0.0.0.0:0".parse().expect("valid literal");
        SendBatch {
            data: vec![0; slots * SLOT_BYTES],
            spans: vec![(0, 0); slots],
            addrs: vec![SockAddr::from(any); slots],
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
        }
    }

    pub fn is_full(&self) -> bool {
        self.len == self.spans.len() || self.data.len() - self.used < SLOT_BYTES
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Space to write the next datagram into (at least [`SLOT_BYTES`]); call
    /// [`SendBatch::commit`] with its length and destination afterwards.
    pub fn next_buf(&mut self) -> &mut [u8] {
        let end = (self.used + SLOT_BYTES).min(self.data.len());
        &mut self.data[self.used..end]
    }

    pub fn commit(&mut self, len: usize, to: SocketAddr) {
        debug_assert!(!self.is_full());
        self.spans[self.len] = (self.used, len);
        self.addrs[self.len] = SockAddr::from(to);
        self.used += len;
        self.len += 1;
    }

    /// Drops the first `n` datagrams (sent), keeping the rest in order.
    fn consume(&mut self, n: usize) {
        if n >= self.len {
            self.len = 0;
            self.used = 0;
            return;
        }
        // Rare (partial send): shift the rest to the front.
        let start = self.spans[n].0;
        self.data.copy_within(start..self.used, 0);
        for i in n..self.len {
            let (off, len) = self.spans[i];
            self.spans[i - n] = (off - start, len);
            self.addrs.swap(i - n, i);
        }
        self.used -= start;
        self.len -= n;
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            sb.commit(3, b.local_addr());
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
}
