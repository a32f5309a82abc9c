//! The MP-DCCP state of one subflow (RFC 9897): the MP_JOIN nonces and
//! address IDs, the path's priority and the peer's MP_PRIO dataset, the
//! MP_RTT cycle, and the highest MP_SEQ that arrived on it.

use std::time::Duration;

use crate::time::Instant;

/// Per-subflow multipath state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MpState {
    pub(super) local_nonce: u32,
    pub(super) remote_nonce: u32,
    pub(super) local_addr_id: u8,
    pub(super) remote_addr_id: u8,
    pub(super) priority: u8,
    /// Our priority differs from the primary a peer assumes (RFC 9897
    /// §3.2.10) and was set before multipath was on: MP_PRIO is owed as
    /// soon as it is (see `Subflow::release_untold_prio`).
    pub(super) prio_untold: bool,
    /// Highest MP_SEQ of the peer's MP_PRIO on this subflow (§3.2.1).
    pub(super) peer_prio_seq: Option<u64>,
    pub(super) last_mp_rtt_sent: Option<Instant>,
    /// MP_RTT type to report next (cycles raw, min, smoothed).
    pub(super) mp_rtt_next_kind: u8,
    /// The RTT the peer reported with MP_RTT.
    pub(super) peer_rtt: Option<Duration>,
    /// Highest MP_SEQ received on this path, for the reorderer.
    pub(super) highest_mp_seq: Option<u64>,
}

impl MpState {
    pub(super) fn new(priority: u8) -> Self {
        MpState {
            local_nonce: 0,
            remote_nonce: 0,
            local_addr_id: 0,
            remote_addr_id: 0,
            priority,
            prio_untold: priority != crate::path::priority::PRIMARY,
            peer_prio_seq: None,
            last_mp_rtt_sent: None,
            mp_rtt_next_kind: 0,
            peer_rtt: None,
            highest_mp_seq: None,
        }
    }

    /// The join's nonces as (RA, RB): RA is the initiator's (RFC 9897
    /// §3.2.2).
    pub(super) fn ra_rb(&self, initiator: bool) -> (u32, u32) {
        if initiator {
            (self.local_nonce, self.remote_nonce)
        } else {
            (self.remote_nonce, self.local_nonce)
        }
    }

    /// MP_SEQ `seq` arrived on this path.
    pub(super) fn note_mp_seq(&mut self, seq: u64) {
        self.highest_mp_seq = Some(self.highest_mp_seq.map_or(seq, |h| h.max(seq)));
    }

    /// An MP_RTT leaves at `now`: the type it reports (RFC 9897 §3.2.7:
    /// 0 raw, 1 min, 3 smoothed, in turn).
    pub(super) fn next_rtt_kind(&mut self, now: Instant) -> u8 {
        self.last_mp_rtt_sent = Some(now);
        let kind = self.mp_rtt_next_kind;
        self.mp_rtt_next_kind = match kind {
            0 => 1,
            1 => 3,
            _ => 0,
        };
        kind
    }
}

#[cfg(test)]
mod tests {
    use crate::path::priority;
    use crate::time::Instant;

    use super::MpState;

    #[test]
    fn only_a_non_primary_priority_is_owed_to_the_peer() {
        assert!(!MpState::new(priority::PRIMARY).prio_untold);
        assert!(MpState::new(priority::PRIMARY + 1).prio_untold);
    }

    #[test]
    fn ra_is_always_the_initiators_nonce() {
        let mut m = MpState::new(priority::PRIMARY);
        m.local_nonce = 1;
        m.remote_nonce = 2;
        assert_eq!(m.ra_rb(true), (1, 2));
        assert_eq!(m.ra_rb(false), (2, 1));
    }

    #[test]
    fn mp_rtt_cycles_raw_min_smoothed_and_mp_seq_keeps_the_highest() {
        let mut m = MpState::new(priority::PRIMARY);
        let t = Instant::from_millis(1);
        let kinds: Vec<u8> = (0..5).map(|_| m.next_rtt_kind(t)).collect();
        assert_eq!(kinds, [0, 1, 3, 0, 1]);
        assert_eq!(m.last_mp_rtt_sent, Some(t));
        m.note_mp_seq(10);
        m.note_mp_seq(4);
        assert_eq!(m.highest_mp_seq, Some(10));
    }
}
