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
