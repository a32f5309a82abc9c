//! Interface state for the path manager: a netlink socket that wakes us on
//! every link or address change, and direct queries of an interface's state.
//!
//! We do not decode the netlink messages field by field: any message on the
//! link/address groups means "something changed", and the path manager then
//! asks each configured interface for its current state (flags via
//! `SIOCGIFFLAGS`, addresses via `getifaddrs`). That is one code path for
//! start-up, events and the periodic safety check, and it cannot misparse.

use std::ffi::CString;
use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A `NETLINK_ROUTE` socket subscribed to link and address changes.
pub struct LinkWatcher {
    fd: OwnedFd,
}

// rtnetlink multicast groups (<linux/rtnetlink.h>).
const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

impl LinkWatcher {
    pub fn new() -> io::Result<LinkWatcher> {
        // SAFETY: plain socket(2) call.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: zeroed sockaddr_nl is valid; we set family and groups.
        let mut sa: libc::sockaddr_nl = unsafe { mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        // SAFETY: `sa` is a valid sockaddr_nl of the given size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(LinkWatcher { fd })
    }

    /// Drains pending notifications; returns whether there were any.
    pub fn drain(&self) -> bool {
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            // SAFETY: `buf` is valid for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                // EAGAIN, or ENOBUFS after an overflow: either way, re-check everything.
                let e = io::Error::last_os_error();
                if n < 0 && e.raw_os_error() == Some(libc::ENOBUFS) {
                    any = true;
                    continue;
                }
                return any;
            }
            any = true;
        }
    }
}

impl AsRawFd for LinkWatcher {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// What the path manager needs to know about one interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IfaceState {
    pub exists: bool,
    /// Administratively up and carrier present (IFF_UP and IFF_RUNNING).
    pub up: bool,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
}

impl IfaceState {
    /// Usable for a path towards `remote` (right address family present).
    pub fn usable_for(&self, remote: IpAddr) -> bool {
        self.up
            && match remote {
                IpAddr::V4(_) => self.ipv4.is_some(),
                IpAddr::V6(_) => self.ipv6.is_some(),
            }
    }
}

/// Current state of interface `name` in this namespace.
pub fn iface_state(name: &str) -> IfaceState {
    let mut st = IfaceState::default();
    let Ok(cname) = CString::new(name) else {
        return st;
    };
    // SAFETY: valid C string.
    if unsafe { libc::if_nametoindex(cname.as_ptr()) } == 0 {
        return st;
    }
    st.exists = true;
    if let Some(flags) = iface_flags(name) {
        st.up = flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0;
    }
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `ifap` with a list freed below.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return st;
    }
    let mut cur = ifap;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: non-null, NUL-terminated by getifaddrs.
        let n = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if n.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr is non-null; family decides the concrete type.
        let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        if fam == libc::AF_INET && st.ipv4.is_none() {
            // SAFETY: AF_INET entries point at a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            st.ipv4 = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
        } else if fam == libc::AF_INET6 && st.ipv6.is_none() {
            // SAFETY: AF_INET6 entries point at a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            let a = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            // Link-local addresses need a scope id; paths use global ones.
            if a.segments()[0] & 0xffc0 != 0xfe80 {
                st.ipv6 = Some(a);
            }
        }
    }
    // SAFETY: `ifap` came from getifaddrs.
    unsafe { libc::freeifaddrs(ifap) };
    st
}

/// The MTU of interface `name` (SIOCGIFMTU).
pub fn iface_mtu(name: &str) -> Option<u32> {
    let req = iface_ioctl(name, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).ok()
}

fn iface_flags(name: &str) -> Option<i32> {
    let req = iface_ioctl(name, libc::SIOCGIFFLAGS)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    Some(unsafe { req.ifr_ifru.ifru_flags } as i32)
}

/// An `ifreq` for `name` after the getter ioctl `op`.
fn iface_ioctl(name: &str, op: libc::c_ulong) -> Option<libc::ifreq> {
    // SAFETY: plain socket(2) call; closed by OwnedFd.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return None;
    }
    // SAFETY: fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: zeroed ifreq is valid.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name.
    if unsafe { libc::ioctl(fd.as_raw_fd(), op, &mut req) } < 0 {
        return None;
    }
    Some(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_with_127_0_0_1() {
        let st = iface_state("lo");
        assert!(st.exists && st.up, "{st:?}");
        assert_eq!(st.ipv4, Some(Ipv4Addr::LOCALHOST));
        assert!(!iface_state("nonexistent0").exists);
        assert!(iface_mtu("lo").is_some_and(|m| m >= 1280));
        assert_eq!(iface_mtu("nonexistent0"), None);
    }

    #[test]
    fn watcher_opens() {
        let w = LinkWatcher::new().unwrap();
        let _ = w.drain();
    }
}
