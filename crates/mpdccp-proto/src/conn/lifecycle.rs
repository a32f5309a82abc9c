//! The meta connection's life cycle: its state, why it closes, and the
//! once-only `Connected` / `Closed` events.
//!
//! One part owns what used to be seven loose flags of `Connection`, so
//! the rules that tie them live in one place:
//! * the close reason may be recorded before the close begins (a refused
//!   or timed-out first handshake, an idle timeout, a key mismatch) and is
//!   what `Event::Closed` reports; a later, vaguer cause ("handshake
//!   failed", "all subflows closed") never overwrites it;
//! * `Connected` is announced once, when the first subflow opens, even if
//!   the connection is already closing by then (the application still
//!   learns that it was connected);
//! * `Closed` is announced once.
//!
//! The state stays a bare enum with the reason beside it, not inside a
//! `Closing { reason }` variant, because of the first rule: the reason
//! exists while the state is still `Handshaking` or `Established`.

use crate::time::Instant;

/// Meta-connection life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConnState {
    Handshaking,
    Established,
    Closing,
    Closed,
}

/// State, close reason and once-only announcements of one connection.
#[derive(Debug)]
pub(super) struct ConnLifecycle {
    state: ConnState,
    /// Our subflows' Close / CloseReq carry MP_CLOSE (RFC 9897 §3.2.11):
    /// the whole connection closes, not one path.
    closing_mp: bool,
    /// Why the connection ends; reported by `Event::Closed`.
    close_reason: Option<String>,
    closed_announced: bool,
    connected_announced: bool,
    /// A subflow was ever created (a server closes when its only attempt
    /// died).
    ever_had_path: bool,
    /// Authenticated modes: since when every subflow of the established
    /// connection is gone (`liveness.rs::check_closed`); it ends after the
    /// idle timeout unless a path rejoins.
    orphaned_at: Option<Instant>,
}

impl Default for ConnLifecycle {
    fn default() -> Self {
        ConnLifecycle {
            state: ConnState::Handshaking,
            closing_mp: false,
            close_reason: None,
            closed_announced: false,
            connected_announced: false,
            ever_had_path: false,
            orphaned_at: None,
        }
    }
}

impl ConnLifecycle {
    pub(super) fn state(&self) -> ConnState {
        self.state
    }
    pub(super) fn is_closing_or_closed(&self) -> bool {
        matches!(self.state, ConnState::Closing | ConnState::Closed)
    }
    pub(super) fn closing_mp(&self) -> bool {
        self.closing_mp
    }
    pub(super) fn ever_had_path(&self) -> bool {
        self.ever_had_path
    }
    pub(super) fn orphaned_at(&self) -> Option<Instant> {
        self.orphaned_at
    }

    /// Records why the connection ends (replacing an earlier reason).
    pub(super) fn set_reason(&mut self, reason: impl Into<String>) {
        self.close_reason = Some(reason.into());
    }
    /// Records a reason unless one is already known.
    pub(super) fn default_reason(&mut self, reason: &str) {
        self.close_reason.get_or_insert_with(|| reason.into());
    }

    pub(super) fn path_created(&mut self) {
        self.ever_had_path = true;
    }
    /// Every subflow is gone but the connection lives on (authenticated
    /// modes); the first time counts.
    pub(super) fn orphan(&mut self, now: Instant) {
        self.orphaned_at.get_or_insert(now);
    }

    /// A subflow opened: no longer orphaned. True the first time of all,
    /// when `Connected` is to be announced; a handshaking connection is
    /// then established (a closing one stays closing).
    pub(super) fn path_opened(&mut self) -> bool {
        self.orphaned_at = None;
        if self.connected_announced {
            return false;
        }
        self.connected_announced = true;
        if self.state == ConnState::Handshaking {
            self.state = ConnState::Established;
        }
        true
    }

    /// Our graceful close begins; false when already closing or closed.
    pub(super) fn begin_close(&mut self, multipath: bool) -> bool {
        if self.is_closing_or_closed() {
            return false;
        }
        self.state = ConnState::Closing;
        self.closing_mp = multipath;
        self.default_reason("closed");
        true
    }

    /// Fast close (ours or the peer's MP_FAST_CLOSE): closing at once with
    /// `reason`; false (nothing changes) when already closed.
    pub(super) fn begin_fast_close(&mut self, reason: &str) -> bool {
        if self.state == ConnState::Closed {
            return false;
        }
        self.set_reason(reason);
        self.state = ConnState::Closing;
        true
    }

    /// The peer's MP_CLOSE with our key: our answers carry MP_CLOSE too
    /// (§3.2.11: "the following DCCP-Close MUST also carry the MP_CLOSE").
    /// True when this begins the close.
    pub(super) fn peer_closed(&mut self, multipath: bool) -> bool {
        self.closing_mp = multipath;
        if self.is_closing_or_closed() {
            return false;
        }
        self.set_reason("closed by peer");
        self.state = ConnState::Closing;
        true
    }

    /// The connection is closed; the reason to announce, the first time.
    pub(super) fn finish(&mut self) -> Option<String> {
        self.state = ConnState::Closed;
        if self.closed_announced {
            return None;
        }
        self.closed_announced = true;
        Some(self.close_reason.clone().unwrap_or_else(|| "closed".into()))
    }
}

#[cfg(test)]
mod tests {
    use crate::time::Instant;

    use super::{ConnLifecycle, ConnState};

    #[test]
    fn an_early_reason_survives_the_close_and_closed_is_announced_once() {
        let mut l = ConnLifecycle::default();
        l.path_created();
        // A refused first handshake names its cause while still handshaking;
        // the later generic cause must not replace it.
        l.set_reason("connection refused");
        l.default_reason("handshake failed");
        assert_eq!(l.state(), ConnState::Handshaking);
        assert_eq!(l.finish().as_deref(), Some("connection refused"));
        assert_eq!(l.finish(), None);
        assert_eq!(l.state(), ConnState::Closed);
    }

    #[test]
    fn connected_is_announced_once_even_while_closing() {
        let mut l = ConnLifecycle::default();
        assert!(l.begin_close(true));
        assert!(!l.begin_close(true), "a second close is a no-op");
        assert!(l.closing_mp());
        // The first subflow opens after the close began: announce it, but
        // the connection does not become Established again.
        assert!(l.path_opened());
        assert_eq!(l.state(), ConnState::Closing);
        assert!(!l.path_opened());
        assert_eq!(l.finish().as_deref(), Some("closed"));
    }

    #[test]
    fn opening_clears_the_orphan_mark_and_establishes() {
        let mut l = ConnLifecycle::default();
        l.orphan(Instant::from_millis(5));
        l.orphan(Instant::from_millis(9));
        assert_eq!(l.orphaned_at(), Some(Instant::from_millis(5)));
        assert!(l.path_opened());
        assert_eq!(l.state(), ConnState::Established);
        assert_eq!(l.orphaned_at(), None);
    }

    #[test]
    fn the_peers_close_sets_mp_close_even_when_already_closing() {
        let mut l = ConnLifecycle::default();
        assert!(l.begin_close(false));
        assert!(!l.peer_closed(true));
        assert!(l.closing_mp());
        assert_eq!(l.finish().as_deref(), Some("closed"));
        let mut l = ConnLifecycle::default();
        assert!(l.peer_closed(true));
        assert_eq!(l.finish().as_deref(), Some("closed by peer"));
        let mut l = ConnLifecycle::default();
        l.finish();
        assert!(!l.begin_fast_close("fast close"), "closed stays closed");
    }
}
