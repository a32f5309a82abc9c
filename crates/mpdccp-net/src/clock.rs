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
