//! [`ConnStats`]: one counter per cause of every rejection and drop,
//! grouped by what they count. Each group is flattened into the one
//! object the simulator's summaries and the daemon's status and metrics
//! publish, so the field names there are the counters' own.

/// Counters: every rejection and drop has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ConnStats {
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub traffic: TrafficStats,
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub rx: ReceiveRejects,
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub auth: AuthRejects,
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub paths: PathEvents,
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub send_queue: SendQueueStats,
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub loss: LossStats,
}

/// Datagrams, bytes and packets received, sent and delivered, and the
/// control packets (Sync, SyncAck, Reset) sent and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TrafficStats {
    pub rx_datagrams: u64,
    pub rx_bytes: u64,
    pub tx_datagrams: u64,
    pub tx_bytes: u64,
    pub tx_data_pkts: u64,
    /// Pure Acks sent ahead of a data packet because what was owed (a long
    /// Ack Vector, MP_PRIO, MP_CONFIRM) did not fit its bounded header.
    pub acks_before_data: u64,
    /// Data packets whose header came out above `DATA_HEADER_MAX` (a bug;
    /// re-built as bare DCCP-Data, never sent oversized).
    pub tx_data_header_over: u64,
    pub rx_data_pkts: u64,
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    /// Datagrams that did not fit the caller's buffer.
    pub tx_buffer_too_small: u64,
    pub syncs_sent: u64,
    pub syncacks_sent: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    /// Syncs sent to refresh the RTT estimate of an idle path
    /// (`LifetimeConfig::rtt_probe_interval`).
    pub rtt_probes_sent: u64,
    /// Keepalive probes (Sync) sent on silent subflows.
    pub keepalives_sent: u64,
}

/// Received datagrams and options dropped or ignored by the header,
/// sequence, option and payload-protection checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ReceiveRejects {
    /// Malformed datagrams (parse errors other than checksum).
    pub rx_malformed: u64,
    pub rx_bad_checksum: u64,
    /// Datagrams for a path this connection does not know.
    pub rx_unknown_path: u64,
    /// Packets outside the sequence/ack validity windows (answered with Sync).
    pub rx_seq_invalid: u64,
    /// Packets of a type not expected in the subflow's state.
    pub rx_unexpected: u64,
    /// Duplicate DCCP sequence numbers.
    pub rx_duplicate: u64,
    /// Data packets without MP_SEQ on a multipath connection.
    pub rx_missing_mp_seq: u64,
    /// Data that arrived on a closing/closed connection.
    pub rx_data_after_close: u64,
    /// Payload protection: data packets that did not authenticate (forged,
    /// altered header or payload, wrong key or path), dropped unread.
    pub rx_protect_failed: u64,
    /// Payload protection: data packets whose counter was seen already on
    /// the path or is older than its replay window, dropped unread.
    pub rx_replayed: u64,
    /// Requests on a new path refused while the connection is closing.
    pub rx_request_refused: u64,
    /// Data with an implausible MP_SEQ jump (dropped).
    pub rx_mp_seq_implausible: u64,
    /// MP_SEQ resynchronisations after a run of consistent jumps.
    pub mp_seq_resyncs: u64,
    /// Options that broke RFC 4340's rules — invalid length or value
    /// (§5.8), Mandatory misplaced or before an option not understood
    /// (§5.8.2) — or were unusable (a second Elapsed Time). On a packet
    /// that passed the sequence checks the rule breaks are answered with
    /// Reset (Option Error / Mandatory Error).
    pub rx_bad_options: u64,
    /// Options ignored because of the packet type (RFC 4340 Table 3).
    pub rx_options_ignored: u64,
}

/// MP_JOIN handshakes and key- or HMAC-carrying MP options refused
/// (RFC 9897 §3.2, §3.6), and the fallbacks to plain DCCP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct AuthRejects {
    /// MP_JOIN with a path token (CI) we do not know.
    pub join_unknown_token: u64,
    /// MP_JOIN handshakes failing MP_HMAC verification (either side).
    pub join_bad_hmac: u64,
    /// Joins refused because `max_paths` subflows exist.
    pub join_too_busy: u64,
    /// Joins refused because multipath is not in use.
    pub join_not_multipath: u64,
    /// MP_JOIN handshakes whose Multipath Capable feature is missing or
    /// does not select version 0, the connection's (RFC 9897 §3.6; server:
    /// the Request's Change R(10) is refused with Reset 5, Option Error;
    /// client: the Response's Confirm L(10) closes the subflow).
    pub join_bad_mp_capable: u64,
    /// Refused Requests on new paths dropped without an answer (and without
    /// state) because `max_paths` refused subflows were still waiting to
    /// send their Reset: a flood of refused joins cannot grow the path
    /// table between two `poll_transmit` calls. (The refusal's cause is
    /// counted too, so this is not part of [`ConnStats::rejected_input`].)
    pub refusals_dropped: u64,
    /// MP_KEY echoes that did not match the keys exchanged.
    pub bad_key_echo: u64,
    /// MP_CLOSE / MP_FAST_CLOSE carrying the wrong key (ignored).
    pub bad_close_key: u64,
    pub addaddr_bad_hmac: u64,
    pub removeaddr_bad_hmac: u64,
    /// MP_PRIO without a valid MP_HMAC in the authenticated modes
    /// (ignored, not confirmed; docs/SECURITY.md). Absent from results
    /// while zero, so published summaries keep their bytes.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub prio_bad_hmac: u64,
    /// Multipath requested but the peer answered as plain DCCP.
    pub fallbacks: u64,
}

/// Address management (MP_ADDADDR / MP_REMOVEADDR / MP_PRIO) and the
/// subflows' and the connection's ends: timeouts, removals, reaping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PathEvents {
    /// Authenticated MP_ADDADDR ignored as RFC 9897 §3.2.8 demands: a
    /// broadcast/multicast/unspecified address, or a known Address ID
    /// with another IP.
    pub addaddr_ignored: u64,
    /// MP_ADDADDR / MP_REMOVEADDR / MP_PRIO older (lower MP_SEQ) than one
    /// already received for the same dataset (RFC 9897 §3.2.1): confirmed,
    /// not acted on.
    pub mp_option_outdated: u64,
    /// MP option retransmissions that were never confirmed.
    pub mp_option_unconfirmed: u64,
    /// MP_REMOVEADDR we sent for subflows whose interface went down.
    pub removeaddr_sent: u64,
    /// MP_REMOVEADDR (id, nonce) seen before: a retransmission (confirmed
    /// again) or a replay (never closes anything a second time).
    pub removeaddr_duplicate: u64,
    /// Subflows closed because the peer withdrew their address
    /// (MP_REMOVEADDR, HMAC verified).
    pub paths_removed_by_peer: u64,
    /// Subflows closed at once because an authenticated join on the same
    /// address pair replaced them (`Connection::retire_replaced`). Left
    /// out of the JSON while 0 (the published simulator summaries).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub paths_replaced: u64,
    /// Subflows expired after `path_idle_timeout` of silence.
    pub paths_expired: u64,
    /// The only non-standby path stalled (nothing acknowledged for about
    /// 2 srtt) while a standby path waited: given up before its RTO so
    /// the standby takes over.
    pub standby_takeovers: u64,
    /// Closed subflows forgotten (their slot free for a new one).
    pub paths_reaped: u64,
    pub handshake_timeouts: u64,
    /// Server subflows dropped after `respond_timeout` in RESPOND.
    pub respond_timeouts: u64,
    /// Connections closed after `idle_timeout` of silence on every subflow.
    pub idle_timeouts: u64,
}

/// The send queue: packets refused, dropped, expired, marked or
/// discarded before a subflow took them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SendQueueStats {
    pub send_queue_dropped_newest: u64,
    pub send_queue_dropped_oldest: u64,
    /// Flow queues (`send_queue.flows`) over a bound: packets dropped from
    /// the head of the flow holding the most bytes (RFC 8290 §4.1.1).
    pub send_queue_dropped_fattest: u64,
    /// Packets dropped at the send queue's head for waiting longer than
    /// `send_queue.max_delay`.
    pub send_queue_expired: u64,
    /// Packets CoDel dropped at the send queue's head (`send_queue.codel`).
    pub send_queue_codel_dropped: u64,
    /// ECN-capable packets CoDel marked Congestion Experienced instead of
    /// dropping them (flow queues, `conn/ecn.rs`).
    pub send_queue_ecn_marked: u64,
    pub send_rejected_closed: u64,
    pub send_rejected_too_large: u64,
    /// Queued packets discarded when the connection closed.
    pub send_queue_discarded: u64,
    /// Copies of a multi-path (`redundant`) decision dropped: the path's
    /// queue was full, or the path failed with the copy still queued (its
    /// twins carry the MP_SEQ, so it is not reinjected). A single-path
    /// decision never loses a packet this way: it is held in the
    /// connection's queue instead.
    pub sched_copies_dropped: u64,
}

/// Losses and what was done about them: RTOs, reinjection and the
/// connection-level retransmission.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LossStats {
    /// Lost packets (all paths, CCID2 detection and RTO).
    pub lost_pkts: u64,
    pub rtos: u64,
    /// Packets re-queued from a path that failed or went down.
    pub reinjected_pkts: u64,
    /// Connection-level retransmission (`retransmit_lost`): packets a
    /// subflow declared lost and that were sent again under their MP_SEQ,
    /// and those not resent because they were too old (still remembered:
    /// older copies are forgotten as new packets leave, uncounted) or the
    /// budget was spent. Not serialized while zero (summaries of runs
    /// without it are unchanged).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub conn_retransmitted_pkts: u64,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub conn_retransmit_too_old: u64,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub conn_retransmit_over_budget: u64,
    /// `tolerate_random_loss`: losses not passed to the controller (the
    /// path had no backlog). Not serialized while zero.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    pub random_losses_tolerated: u64,
}

impl ConnStats {
    /// Every datagram or option dropped as malformed, forged, unexpected
    /// or refused — the sum a test or an alarm watches to see hostile
    /// input being rejected (each has its own counter above).
    pub fn rejected_input(&self) -> u64 {
        self.rx.rx_malformed
            + self.rx.rx_bad_checksum
            + self.rx.rx_unknown_path
            + self.rx.rx_seq_invalid
            + self.rx.rx_unexpected
            + self.rx.rx_duplicate
            + self.rx.rx_missing_mp_seq
            + self.rx.rx_data_after_close
            + self.rx.rx_protect_failed
            + self.rx.rx_replayed
            + self.auth.join_unknown_token
            + self.auth.join_bad_hmac
            + self.auth.join_too_busy
            + self.auth.join_not_multipath
            + self.auth.join_bad_mp_capable
            + self.auth.bad_key_echo
            + self.auth.bad_close_key
            + self.auth.addaddr_bad_hmac
            + self.auth.removeaddr_bad_hmac
            + self.auth.prio_bad_hmac
            + self.rx.rx_request_refused
            + self.rx.rx_bad_options
    }
}

#[cfg(feature = "serde")]
fn is_zero(n: &u64) -> bool {
    *n == 0
}
