//! The one place where the OS clock becomes a core [`Instant`].
//!
//! The core never reads a clock; the daemon, the emulator and the probe tools
//! all call [`now`]. It is `CLOCK_MONOTONIC` in nanoseconds, unmodified: every
//! network namespace on a host shares it, so a timestamp written by a probe
//! sender in one namespace can be compared with the receiver's clock in another
//! and gives an exact one-way delay.

use std::time::Duration;

use mpdccp_proto::Instant;

/// `CLOCK_MONOTONIC` as a core [`Instant`].
pub fn now() -> Instant {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Instant::from_nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Lowers this thread's timer slack so `ppoll`/`nanosleep` wake within a few
/// microseconds of their deadline instead of the default 50 µs. Emulated delays
/// and pacing depend on it.
pub fn set_precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0) };
}

/// Moves this thread to `SCHED_FIFO` at `priority` (1..=99) so timer wake-ups
/// are not queued behind ordinary processes on a busy host (emulated delays
/// and pacing would stretch by a scheduler time slice, several ms). The
/// kernel's RT throttling still leaves 5 % of each CPU to others. Needs root;
/// returns the error otherwise and the caller carries on without it.
pub fn set_realtime(priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority.clamp(1, 99),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 = this thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the calling thread back in the normal scheduling class (a thread
/// spawned by a `SCHED_FIFO` thread inherits its class; helpers that must
/// not compete with the packet loop call this). Failure leaves the class.
pub fn set_normal_scheduling() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param; pid 0 = this thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
}

/// `struct sched_attr` of sched_setattr(2), its first version (48 bytes).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Asks the kernel for a time slice of `slice` for this thread and the
/// threads it spawns afterwards (Linux ≥ 6.12, EEVDF: `sched_runtime` of a
/// `SCHED_OTHER` thread is its slice, 100 µs–100 ms). Why: a thread that
/// wakes for a packet preempts the running task only if its slice is
/// shorter (EEVDF's wake-up preemption); with the default (0.7 ms × (1 +
/// log₂ CPUs), 1.4 ms on 2 CPUs) it may wait for whatever runs to finish
/// its slice, on every wake-up of a busy host: the TUN ring and the path's
/// window fill meanwhile.
/// The slice requests an earlier deadline, not more CPU (nice decides
/// that). Only in the normal class (a `SCHED_FIFO` thread is left as it
/// is) and with the thread's nice kept; older kernels ignore the slice.
pub fn request_slice(slice: Duration) -> std::io::Result<()> {
    // SAFETY: sched_getscheduler and getpriority take plain integers;
    // 0 = this thread.
    let (policy, nice) = unsafe {
        (
            libc::sched_getscheduler(0),
            libc::getpriority(libc::PRIO_PROCESS, 0),
        )
    };
    if policy != libc::SCHED_OTHER || slice.is_zero() {
        return Ok(());
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: slice.as_nanos().min(u128::from(u64::MAX)) as u64,
        deadline: 0,
        period: 0,
    };
    // SAFETY: `attr` is a valid sched_attr of the size it states; pid 0 =
    // this thread; flags 0.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// How long to wait in the kernel before `deadline`; below [`SPIN_BELOW`] the
/// caller should spin (yielding) instead, since a kernel sleep that short
/// overshoots by more than it waits.
pub fn sleep_budget(now: Instant, deadline: Instant) -> Option<Duration> {
    let left = deadline.saturating_duration_since(now);
    if left <= SPIN_BELOW {
        None
    } else {
        Some(left - SPIN_BELOW / 2)
    }
}

/// Deadlines closer than this are reached by spinning rather than sleeping.
pub const SPIN_BELOW: Duration = Duration::from_micros(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requested_slice_keeps_the_class_and_nice() {
        std::thread::spawn(|| {
            // SAFETY: plain integer arguments; 0 = this thread.
            let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            request_slice(Duration::from_micros(100)).unwrap();
            // SAFETY: as above.
            let (policy, nice) = unsafe {
                (
                    libc::sched_getscheduler(0),
                    libc::getpriority(libc::PRIO_PROCESS, 0),
                )
            };
            assert_eq!((policy, nice), (libc::SCHED_OTHER, before));
            let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
            if let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) {
                // Kernels that show the slice (6.12+) took it.
                assert!(line.ends_with(" 100000"), "{line}");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn monotonic_and_close_to_std() {
        let a = now();
        std::thread::sleep(Duration::from_millis(5));
        let b = now();
        let d = b - a;
        assert!(
            d >= Duration::from_millis(5) && d < Duration::from_millis(100),
            "{d:?}"
        );
    }
}
