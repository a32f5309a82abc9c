//! The uniform per-path view shared by schedulers, reordering and coupled
//! congestion control.
//!
//! Every congestion controller fills the same fields in the same units
//! (packets, `Duration`, bytes per second), whatever its internals — the
//! reference kernel mixed jiffies and microseconds; we do not.

use std::time::Duration;

use crate::time::Instant;

/// Identifies one path (one DCCP subflow) of a connection. Chosen by the driver
/// when it adds a path (client) or by the core when a peer joins (server);
/// stable for the life of the path and never reused within a connection.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct PathId(pub u32);

impl std::fmt::Display for PathId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "path{}", self.0)
    }
}

/// Life-cycle of a path as schedulers see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum PathState {
    /// Handshake (initial or MP_JOIN) in progress; cannot carry data yet.
    #[default]
    Establishing,
    /// Established and usable.
    Active,
    /// Established but believed broken (RTO backoff, outage, interface down).
    /// Schedulers should avoid it; it may come back.
    Failed,
    /// Closing or closed; never used again.
    Closed,
}

/// RFC 9897 MP_PRIO values: 0 = do not use, 1 = standby (backup), 2 = secondary,
/// 3..=15 = primary; higher is preferred.
pub mod priority {
    pub const UNUSED: u8 = 0;
    pub const STANDBY: u8 = 1;
    pub const SECONDARY: u8 = 2;
    pub const PRIMARY: u8 = 3;
    pub const MAX: u8 = 15;
}

/// A read-only snapshot of one path, rebuilt by the connection before each
/// scheduling or reordering decision. All times are `Duration`s, all windows
/// in packets, all rates in bytes per second.
#[derive(Clone, Debug, PartialEq)]
pub struct PathView {
    pub id: PathId,
    pub state: PathState,
    /// MP_PRIO in force (see [`priority`]).
    pub priority: u8,
    /// Congestion window, packets.
    pub cwnd_pkts: u32,
    /// Packets sent and neither acknowledged nor declared lost.
    pub in_flight_pkts: u32,
    /// Packets handed to this path by the scheduler but not yet sent
    /// (waiting for cwnd or pacing).
    pub queued_pkts: u32,
    /// Smoothed RTT (RFC 6298); `None` before the first sample.
    pub srtt: Option<Duration>,
    /// Minimum RTT observed (windowed as the controller defines it).
    pub min_rtt: Option<Duration>,
    /// RTT variation (RFC 6298 RTTVAR).
    pub rttvar: Duration,
    /// Latest one-way delay estimate to the peer, if known (MP_RTT / timestamps).
    pub owd: Option<Duration>,
    /// Pacing rate, bytes per second; `None` when the controller does not pace.
    pub pacing_rate_bytes_per_s: Option<u64>,
    /// Latest delivery-rate estimate, bytes per second.
    pub delivery_rate_bytes_per_s: Option<u64>,
    /// Fraction of packets lost, smoothed, 0.0..=1.0.
    pub loss_rate: f64,
    /// Name of the controller's state ("slow_start", "probe_bw", ...).
    pub cc_state: &'static str,
    /// Earliest time the pacer lets the next packet go (`None`: no pacing
    /// constraint right now).
    pub next_send_time: Option<Instant>,
    /// Maximum packet size on this path, bytes.
    pub mss_bytes: u32,
}

impl PathView {
    /// A fresh, active, empty path — handy for tests and as a builder base.
    pub fn new(id: PathId) -> Self {
        PathView {
            id,
            state: PathState::Active,
            priority: priority::PRIMARY,
            cwnd_pkts: 4,
            in_flight_pkts: 0,
            queued_pkts: 0,
            srtt: None,
            min_rtt: None,
            rttvar: Duration::ZERO,
            owd: None,
            pacing_rate_bytes_per_s: None,
            delivery_rate_bytes_per_s: None,
            loss_rate: 0.0,
            cc_state: "",
            next_send_time: None,
            mss_bytes: 1400,
        }
    }

    /// True when the path is usable at all (active and priority not 0).
    pub fn is_usable(&self) -> bool {
        self.state == PathState::Active && self.priority != priority::UNUSED
    }

    /// True when the congestion window has room for one more packet
    /// (counting packets already queued to this path).
    pub fn has_cwnd_room(&self) -> bool {
        self.in_flight_pkts.saturating_add(self.queued_pkts) < self.cwnd_pkts
    }

    /// True when the path could send a packet at `now`: usable, cwnd room and
    /// the pacer allows it.
    pub fn can_send(&self, now: Instant) -> bool {
        self.is_usable() && self.has_cwnd_room() && self.next_send_time.is_none_or(|t| t <= now)
    }
}
