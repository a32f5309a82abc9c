//! Integer socket options the `socket2` crate does not wrap (UDP GRO,
//! IP(V6)_PKTINFO, IP(V6)_MTU_DISCOVER, forced buffer sizes): the one place
//! that calls `setsockopt`/`getsockopt` with a C int.

use std::io;
use std::mem;
use std::os::fd::AsRawFd;

/// `setsockopt(fd, level, name, &v, sizeof(int))`.
pub(crate) fn set_int(
    sock: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` is a valid c_int for the duration of the call.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt` of a C int.
pub(crate) fn get_int(
    sock: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes for the duration of the call.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `SO_MEMINFO` (asm-generic/socket.h, Linux ≥ 4.12) and the index of the
/// drop counter in the array it returns (`SK_MEMINFO_DROPS`, linux/sock_diag.h).
const SO_MEMINFO: libc::c_int = 55;
const SK_MEMINFO_DROPS: usize = 8;

/// Packets the kernel dropped for this socket since it was opened (receive
/// buffer full, filter): `sk_drops` as `ss -m` shows it. `None` on kernels
/// without `SO_MEMINFO`.
pub(crate) fn socket_drops(sock: &impl AsRawFd) -> Option<u64> {
    let mut v = [0u32; 16];
    let mut len = mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes for the duration of the
    // call; the kernel writes at most `len` bytes and stores the length.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let words = len as usize / mem::size_of::<u32>();
    (r == 0 && words > SK_MEMINFO_DROPS).then(|| u64::from(v[SK_MEMINFO_DROPS]))
}

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;
/// Classic BPF's negative offset for loads from the IP header.
const SKF_NET_OFF: u32 = (-0x10_0000i32) as u32;

/// The steering program of a server's `SO_REUSEPORT` group of `n`
/// sockets: socket = (low 32 bits of the source address + UDP source
/// port) mod `n`. A path's datagrams all reach one socket, and a socket
/// joined to the group later (index `n` or more) is never picked.
pub(crate) fn reuseport_program(n: u32) -> Vec<libc::sock_filter> {
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    const LD_W: u16 = 0x20; // ld [k]
    const LD_H: u16 = 0x28; // ldh [k]
    const LD_B: u16 = 0x30; // ldb [k]
    const RSH_K: u16 = 0x74;
    const JEQ_K: u16 = 0x15;
    const TAX: u16 = 0x07;
    const ADD_X: u16 = 0x0c;
    const MOD_K: u16 = 0x94;
    const RET_A: u16 = 0x16;
    vec![
        op(LD_B, 0, 0, SKF_NET_OFF),
        op(RSH_K, 0, 0, 4),
        op(JEQ_K, 6, 0, 6),
        // IPv4 (the UDP header after a 20-byte IP header; with options the
        // spread is still uniform, a worker hands over what is not its own).
        op(LD_W, 0, 0, SKF_NET_OFF + 12),
        op(TAX, 0, 0, 0),
        op(LD_H, 0, 0, SKF_NET_OFF + 20),
        op(ADD_X, 0, 0, 0),
        op(MOD_K, 0, 0, n),
        op(RET_A, 0, 0, 0),
        // IPv6: the source address's last word, the port after 40 bytes.
        op(LD_W, 0, 0, SKF_NET_OFF + 20),
        op(TAX, 0, 0, 0),
        op(LD_H, 0, 0, SKF_NET_OFF + 40),
        op(ADD_X, 0, 0, 0),
        op(MOD_K, 0, 0, n),
        op(RET_A, 0, 0, 0),
    ]
}

/// Attaches [`reuseport_program`] to the group `sock` is in.
pub(crate) fn attach_reuseport_steering(sock: &impl AsRawFd, n: u32) -> io::Result<()> {
    let mut prog = reuseport_program(n.max(1));
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `prog`, alive for the call (the kernel copies it).
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Socket, Type};
    use std::net::{SocketAddr, UdpSocket};

    fn member(addr: SocketAddr) -> UdpSocket {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        s.set_reuse_port(true).unwrap();
        s.bind(&addr.into()).unwrap();
        s.set_nonblocking(true).unwrap();
        s.into()
    }

    fn drain(s: &UdpSocket) -> usize {
        let mut buf = [0u8; 64];
        std::iter::from_fn(|| s.recv(&mut buf).ok()).count()
    }

    /// A socket that is not read drops what overflows its receive buffer,
    /// and `socket_drops` counts exactly the datagrams that never arrive.
    #[test]
    fn socket_drops_counts_receive_buffer_overflow() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = Socket::from(rx.try_clone().unwrap());
        s.set_recv_buffer_size(4096).unwrap();
        rx.set_nonblocking(true).unwrap();
        assert_eq!(socket_drops(&rx), Some(0));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sent = 200;
        for _ in 0..sent {
            tx.send_to(&[7u8; 512], rx.local_addr().unwrap()).unwrap();
        }
        let got = drain(&rx);
        let dropped = socket_drops(&rx).unwrap() as usize;
        assert!(dropped > 0, "a 4 kB buffer held all {sent} datagrams");
        assert_eq!(got + dropped, sent, "received {got}, dropped {dropped}");
    }

    /// The steering program spreads sources over the group's first two
    /// sockets and never picks a socket that joined after it.
    #[test]
    fn reuseport_program_spreads_and_ignores_later_members() {
        let first = member("127.0.0.1:0".parse().unwrap());
        let addr = first.local_addr().unwrap();
        let second = member(addr);
        attach_reuseport_steering(&first, 2).unwrap();
        let late = member(addr);
        for _ in 0..64 {
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.send_to(b"\x00\x01dccp", addr).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (a, b, c) = (drain(&first), drain(&second), drain(&late));
        assert_eq!(a + b, 64, "{a} + {b}, late {c}");
        assert!(a > 0 && b > 0, "not spread: {a} / {b}");
        assert_eq!(c, 0, "a later member received {c}");
    }
}
