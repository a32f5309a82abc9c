//! The one rate limiter of per-packet warnings (no log floods).
//!
//! Anything a datagram or a TUN packet can trigger — a datagram from an
//! unexpected address, a send the socket refused, a TUN write that failed, a
//! truncated datagram — is logged through [`PacketWarnings::warn`]: at most
//! one line per kind every [`INTERVAL`], the lines in between counted and
//! reported with the next one (`suppressed = 37`). The throttle is the
//! core's `auth::LogThrottle`, the same one the handshake limits use.
//! Counters still count every packet.

use std::time::Duration;

use mpdccp_proto::auth::LogThrottle;
use mpdccp_proto::Instant;

/// At most one warning per kind this often.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// What a per-packet warning is about (one throttle each, so a flood of one
/// kind does not hide the first line of another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketWarning {
    /// Client: a datagram on a path socket not from the path's server.
    Foreign,
    /// A datagram larger than its receive slot.
    Truncated,
    /// `sendmmsg` / raw send refused datagrams (dropped, seen as loss).
    UdpSend,
    /// A write to the TUN failed.
    TunWrite,
    /// Server: an inner source address that could not be learned.
    Route,
    /// Server (authenticated): an inner source outside the peer's `allowed_ips`.
    InnerSource,
}

const KINDS: usize = 6;

impl PacketWarning {
    fn index(self) -> usize {
        match self {
            PacketWarning::Foreign => 0,
            PacketWarning::Truncated => 1,
            PacketWarning::UdpSend => 2,
            PacketWarning::TunWrite => 3,
            PacketWarning::Route => 4,
            PacketWarning::InnerSource => 5,
        }
    }
}

/// One [`LogThrottle`] per [`PacketWarning`].
#[derive(Clone, Debug)]
pub struct PacketWarnings {
    throttles: [LogThrottle; KINDS],
    /// Lines actually written (for tests and the status document).
    pub logged: u64,
}

impl Default for PacketWarnings {
    fn default() -> Self {
        PacketWarnings {
            throttles: [LogThrottle::new(INTERVAL); KINDS],
            logged: 0,
        }
    }
}

impl PacketWarnings {
    /// `Some(suppressed since the last line of this kind)` when a line may
    /// be written now; the caller writes it with the count.
    pub fn allow(&mut self, kind: PacketWarning, now: Instant) -> Option<u64> {
        let r = self.throttles[kind.index()].allow(now);
        self.logged += u64::from(r.is_some());
        r
    }

    /// Writes `msg` as a warning unless this kind was logged within
    /// [`INTERVAL`].
    pub fn warn(&mut self, kind: PacketWarning, now: Instant, msg: std::fmt::Arguments<'_>) {
        if let Some(suppressed) = self.allow(kind, now) {
            tracing::warn!(kind = ?kind, suppressed, "{msg}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_per_interval_with_the_suppressed_count() {
        let mut w = PacketWarnings::default();
        let t0 = Instant::from_nanos(1_000_000_000);
        assert_eq!(w.allow(PacketWarning::Foreign, t0), Some(0));
        for k in 1..=1000u64 {
            let t = t0 + Duration::from_millis(k);
            assert_eq!(w.allow(PacketWarning::Foreign, t), None);
        }
        // Another kind is not hidden by the flood.
        assert_eq!(w.allow(PacketWarning::UdpSend, t0), Some(0));
        assert_eq!(w.allow(PacketWarning::Foreign, t0 + INTERVAL), Some(1000));
        assert_eq!(w.logged, 3);
    }
}
