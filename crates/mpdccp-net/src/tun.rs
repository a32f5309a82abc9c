//! A Linux TUN device (layer 3, no packet-info header).
//!
//! A small `ioctl(TUNSETIFF)` wrapper instead of the `tun-rs` crate: we need
//! exactly one flag set (`IFF_TUN | IFF_NO_PI`), a non-blocking fd to put in
//! our own poll loop, and nothing async; the wrapper is ~50 lines with no
//! transitive dependencies. Addresses, MTU and routes are set with `ip`
//! (see `mpdccp_lab::netns`) so what the daemon does can be reproduced by hand.
//!
//! Reads are batched by the caller: on readiness it drains up to a batch of
//! packets with [`Tun::recv`] until `WouldBlock`.
//!
//! [`Tun::open_offload`] adds `IFF_VNET_HDR` and `TUNSETOFFLOAD(TUN_F_CSUM |
//! TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6)`: every read and write
//! then starts with a `virtio_net_hdr`, reads may be TCP or UDP (USO)
//! super-packets of up to 64 kB and writes may be too (see
//! [`crate::offload`]). Kernels before 6.2 refuse the USO bits with EINVAL;
//! then the TCP set alone is asked for and [`Tun::uso`] is false.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An open TUN interface.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    offload: bool,
    uso: bool,
}

// From <linux/if_tun.h>; not all are exported by the libc crate.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
/// Linux >= 6.2; `tun_set_offload` wants both or neither (NETIF_F_GSO_UDP_L4).
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl Tun {
    /// Creates (or attaches to) TUN interface `name` in the current network
    /// namespace, non-blocking. Needs CAP_NET_ADMIN.
    pub fn open(name: &str) -> io::Result<Tun> {
        Tun::open_with(name, false)
    }

    /// Like [`Tun::open`], with `IFF_VNET_HDR` and TCP segmentation /
    /// checksum offload enabled (frames carry a `virtio_net_hdr`).
    pub fn open_offload(name: &str) -> io::Result<Tun> {
        Tun::open_with(name, true)
    }

    /// `n` queues of one multi-queue TUN (`IFF_MULTI_QUEUE`), one fd each:
    /// the kernel spreads outgoing packets over them by flow (a flow's
    /// packets go to the queue that last wrote that flow). `n = 1` opens a
    /// plain single-queue TUN, as [`Tun::open`] does.
    pub fn open_queues(name: &str, offload: bool, n: usize) -> io::Result<Vec<Tun>> {
        let multi = n > 1;
        let first = Tun::open_flags(name, offload, multi)?;
        // The kernel may have picked the name (`mpd%d`): the others attach to it.
        let real = first.name.clone();
        let mut v = vec![first];
        for _ in 1..n {
            v.push(Tun::open_flags(&real, offload, multi)?);
        }
        Ok(v)
    }

    /// [`Tun::open_queues`], waiting up to `wait` while the device is busy
    /// (`EBUSY`): after a stop or a crash the kernel unregisters the old
    /// daemon's TUN when its last fd closes, which can take a moment
    /// (netdev teardown waits for RCU grace periods), so a restart started
    /// at once waits for it instead of failing. A device still
    /// held after `wait` (a second daemon) is an error as before.
    pub fn open_queues_waiting(
        name: &str,
        offload: bool,
        n: usize,
        wait: std::time::Duration,
    ) -> io::Result<Vec<Tun>> {
        let start = std::time::Instant::now();
        loop {
            match Tun::open_queues(name, offload, n) {
                Err(e) if e.kind() == io::ErrorKind::ResourceBusy && start.elapsed() < wait => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn open_with(name: &str, offload: bool) -> io::Result<Tun> {
        Tun::open_flags(name, offload, false)
    }

    fn open_flags(name: &str, offload: bool, multi_queue: bool) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "interface name `{name}` must have 1..{} bytes",
                    libc::IFNAMSIZ
                ),
            ));
        }
        let path = CString::new("/dev/net/tun").expect("static string has no NUL");
        // SAFETY: valid C string, plain flags.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(named(name, "open /dev/net/tun", e));
        }
        // SAFETY: `raw` is a freshly opened fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: IFF_TUN
                | IFF_NO_PI
                | if offload { IFF_VNET_HDR } else { 0 }
                | if multi_queue { IFF_MULTI_QUEUE } else { 0 },
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: `req` is a properly laid out `struct ifreq` prefix of sufficient size.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(named(name, "TUNSETIFF", io::Error::last_os_error()));
        }
        let len = req
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(libc::IFNAMSIZ);
        let name = String::from_utf8_lossy(&req.name[..len]).into_owned();
        let mut uso = false;
        if offload {
            let tcp = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
            let set = |f: libc::c_uint| {
                // SAFETY: TUNSETOFFLOAD takes the flag word by value.
                if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, f as libc::c_ulong) }
                    < 0
                {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            match set(tcp | TUN_F_USO4 | TUN_F_USO6) {
                Ok(()) => uso = true,
                // Unknown bits: EINVAL (tun_set_offload before 6.2).
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    set(tcp).map_err(|e| named(&name, "TUNSETOFFLOAD", e))?
                }
                Err(e) => return Err(named(&name, "TUNSETOFFLOAD", e)),
            }
            tracing::debug!(tun = %name, uso, "TUN offloads: CSUM TSO4 TSO6{}", if uso { " USO4 USO6" } else { "" });
        }
        Ok(Tun {
            fd,
            name,
            offload,
            uso,
        })
    }

    /// Whether the kernel accepted UDP segmentation offload
    /// (`TUN_F_USO4 | TUN_F_USO6`): reads may then be `GSO_UDP_L4`
    /// super-packets, and writing them is understood.
    pub fn uso(&self) -> bool {
        self.uso
    }

    /// Whether frames carry a `virtio_net_hdr` ([`Tun::open_offload`]).
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// Writes `hdr` followed by `pkt` as one frame (`writev`, no copy); for a
    /// TUN opened with [`Tun::open_offload`].
    pub fn send_vnet(&self, hdr: &[u8], pkt: &[u8]) -> io::Result<usize> {
        let iov = [
            libc::iovec {
                iov_base: hdr.as_ptr() as *mut _,
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: pkt.as_ptr() as *mut _,
                iov_len: pkt.len(),
            },
        ];
        // SAFETY: both iovecs point at live readable slices.
        let n = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads one IP packet; `WouldBlock` when none is queued.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Writes one IP packet into the kernel as if received on this interface.
    pub fn send(&self, pkt: &[u8]) -> io::Result<usize> {
        // SAFETY: `pkt` is valid for `pkt.len()` readable bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// An error of TUN device `name`, saying what failed and, for the usual
/// causes, what to do.
fn named(name: &str, what: &str, e: io::Error) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EBUSY) => {
            " (another process has this TUN open: a second daemon, or one still exiting)"
        }
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_NET_ADMIN)",
        Some(libc::ENOENT) | Some(libc::ENODEV) => " (no TUN support: modprobe tun)",
        _ => "",
    };
    io::Error::new(e.kind(), format!("tun {name}: {what}: {e}{hint}"))
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl std::os::fd::AsFd for Tun {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_device_and_the_cause() {
        let e = named(
            "mpd0",
            "TUNSETIFF",
            io::Error::from_raw_os_error(libc::EBUSY),
        );
        let m = e.to_string();
        assert!(m.starts_with("tun mpd0: TUNSETIFF: "), "{m}");
        assert!(m.contains("still exiting"), "{m}");
        let long = Tun::open("a-name-longer-than-ifnamsiz").unwrap_err();
        assert!(long.to_string().contains("a-name-longer-than-ifnamsiz"));
    }
}
