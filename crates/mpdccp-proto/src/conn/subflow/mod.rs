//! One DCCP subflow: RFC 4340 state, sequence/acknowledgement windows and the
//! CCID2 (RFC 4341) transport machinery — Ack Vector bookkeeping, loss after
//! three later acknowledgements, RTO, Ack Ratio, pacing — feeding a
//! [`CongestionController`].

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::ackvec::{self, RecvHistory};
use super::queued::Queued;
use super::seq::SEQ_MASK;
use super::PathConfig;
use crate::cc::{
    AckDelayUse, AckEvent, CcSnapshot, CongestionController, LossEvent, PacketRateState, SentPacket,
};
use crate::path::{PathId, PathState, PathView};
use crate::reorder::PathReceiveState;
use crate::time::Instant;
use crate::wire::ResetCode;

mod ackduty;
mod ccid2;
pub(crate) use ccid2::Coupled;
mod data_header;
mod delay_bound;
mod emit;
mod handshake;
mod lifecycle;
pub mod loss_window;
mod mpstate;
mod protect;
mod recv;
mod sender;
mod seqwin;
mod timers;

use ackduty::AckDuty;
pub(crate) use data_header::DataPlan;
pub(crate) use emit::{AckSegment, EmitCtx};
use handshake::ControlRetx;
use lifecycle::Lifecycle;
use mpstate::MpState;
pub(crate) use protect::{seal_framed, seal_packet, OpenScratch};
pub(crate) use recv::{Admit, ResetEffect};
use sender::Sender;
use seqwin::SeqWindow;
pub(crate) use timers::{Fired, Timer, TimerCtx, TimerTable};

/// RFC 4340 §8 states (LISTEN is implicit: a server creates the subflow when
/// a Request arrives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubState {
    Request,
    Respond,
    PartOpen,
    Open,
    CloseReq,
    Closing,
    TimeWait,
    Closed,
}

/// A data packet awaiting acknowledgement.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    pub seq: u64,
    pub bytes: u32,
    pub rate: PacketRateState,
    pub acked: bool,
    pub lost: bool,
}

/// SyncAcks owed at once at most (a Sync flood grows nothing).
pub(crate) const SYNCACKS_OWED_MAX: usize = 4;

/// Control items waiting for the next packet on this subflow.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingCtrl {
    /// The Request (re)transmission is due.
    pub request: bool,
    pub response: bool,
    pub handshake_ack: bool,
    /// Sync to send, acknowledging this (wire) sequence number.
    pub sync: Option<u64>,
    /// SyncAcks owed, oldest first: each Sync gets its own (RFC 4340
    /// §7.5.4), so a PLPMTU probe is not lost behind another Sync; at most
    /// [`SYNCACKS_OWED_MAX`], later ones replace the newest.
    pub syncack: VecDeque<u64>,
    pub close: bool,
    pub closereq: bool,
    pub reset: Option<ResetCode>,
    /// The Reset answers the peer's MP_FAST_CLOSE: sent without one.
    pub reset_bare: bool,
    /// The Reset answers a packet on this closed subflow: its (sequence,
    /// acknowledgement) numbers, which the Reset's take (RFC 4340 §8.3.1).
    pub reset_answer: Option<(u64, Option<u64>)>,
    /// MP_PRIO to (re)send until confirmed.
    pub prio: Option<u8>,
    /// The MP_PRIO retransmission timer fired: resend with the next packet.
    pub prio_due: bool,
    pub prio_tries: u32,
    /// MP_CONFIRM items owed to the peer.
    pub confirms: Vec<super::codec::ConfirmItem>,
    /// Confirm R(Ack Ratio, v) owed.
    pub confirm_ack_ratio: Option<u64>,
    /// Confirms of the peer's handshake Change options (RFC 4340 §6),
    /// repeated on every Response / third-packet Ack.
    pub feat_confirms: Vec<super::codec::FeatOpt>,
}

#[derive(Debug)]
pub(crate) struct Subflow {
    id: PathId,
    cfg: PathConfig,
    state: SubState,
    /// We sent the Request.
    initiator: bool,
    /// Joined with MP_JOIN (not the first subflow).
    join: bool,
    /// Believed broken after repeated timeouts.
    failed: bool,
    /// Reported `PathEstablished` already (for recovery events).
    announced: bool,
    /// Reported `PathClosed` already (early, on a CloseReq).
    close_reported: bool,
    mss_bytes: u32,

    /// RFC 4340 §7 sequence state (`seqwin.rs`).
    seq: SeqWindow,
    /// HC-receiver: acknowledgements we owe (`ackduty.rs`).
    acks: AckDuty,

    /// HC-sender: flight, controller, pacer (`sender.rs`).
    tx: Sender,
    /// `ConnectionConfig::window_delay_bound`, and its bound as last
    /// computed, packets.
    delay_bound: Option<delay_bound::DelayBound>,
    window_bound: Option<u32>,
    /// Active paths on the connection, as it last told (`set_active_paths`;
    /// the bound applies only from two on).
    active_paths: usize,

    /// Handshake / close retransmission and RTT probes (`handshake.rs`).
    hs: ControlRetx,

    pend: PendingCtrl,
    timers: TimerTable,

    /// MP-DCCP per-subflow state (`mpstate.rs`).
    mp: MpState,
    /// Packets the scheduler assigned here, waiting for cwnd or the pacer.
    queue: VecDeque<(u64, Queued)>,

    stats: PathStats,

    /// Path lifecycle: keepalive, expiry, reaping (`lifecycle.rs`).
    life: Lifecycle,
    /// Payload protection of this path, built at its first data packet
    /// once the connection has session keys (`protect.rs`).
    protector: Option<Box<crate::auth::PathProtector>>,
    /// DPLPMTUD (RFC 8899) of this path (`conn/plpmtu.rs`); None = off.
    pub(crate) plpmtud: Option<super::plpmtu::Plpmtud>,
}

/// Counters of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PathStats {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub tx_data_pkts: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub rx_data_pkts: u64,
    /// Data packets declared lost: by the acknowledgements (three later
    /// packets acknowledged, RFC 4341 §5) or given up at an RTO (below).
    pub lost_pkts: u64,
    /// Losses not passed to the controller as congestion (no backlog;
    /// `tolerate_random_loss`).
    pub random_losses_tolerated: u64,
    /// Of `lost_pkts`, those in flight when an RTO fired: forgotten, their
    /// fate unknown (a lost acknowledgement looks the same), so the
    /// windowed loss ratio leaves them out.
    pub rto_lost_pkts: u64,
    pub rtos: u64,
    pub acks_sent: u64,
    /// RTT samples taken from acknowledgements of data packets.
    pub rtt_samples: u64,
    /// Samples whose ack carried an Elapsed Time that was subtracted.
    pub rtt_ack_delay_used: u64,
    /// Elapsed Times not subtracted because the result would fall below the
    /// path's minimum RTT (forged, absurd, or a clock step at the peer).
    pub rtt_ack_delay_ignored: u64,
    /// Samples refused outright: the ack arrived "before" the packet left
    /// (a driver clock that went backwards).
    pub rtt_samples_rejected: u64,
}

impl Subflow {
    pub fn new(
        id: PathId,
        cfg: PathConfig,
        iss: u64,
        cc: Box<dyn CongestionController>,
        conf: &super::ConnectionConfig,
    ) -> Self {
        Subflow {
            id,
            mp: MpState::new(cfg.priority),
            cfg,
            state: SubState::Closed,
            initiator: false,
            join: false,
            failed: false,
            announced: false,
            close_reported: false,
            mss_bytes: conf.mss_bytes,
            seq: SeqWindow::new(iss, conf.ack.seq_window_pkts),
            acks: AckDuty::new(conf.ack.ratio),
            tx: Sender::new(cc, conf),
            // The BBR family only while one path is Active (`delay_bound.rs`).
            delay_bound: conf.window_delay_bound.map(|t| {
                let paced = matches!(conf.cc, crate::cc::CcKind::Ccid5 | crate::cc::CcKind::Bbr3);
                delay_bound::DelayBound::new(t, paced)
            }),
            window_bound: None,
            active_paths: 0,
            hs: ControlRetx::new(conf.lifetime.handshake_rto),
            pend: PendingCtrl::default(),
            timers: TimerTable::default(),
            queue: VecDeque::new(),
            stats: PathStats::default(),
            life: Lifecycle::default(),
            protector: None,
            plpmtud: conf.plpmtud.map(super::plpmtu::Plpmtud::new),
        }
    }

    /// Our greatest sequence number sent, unwrapped (the latest packet's).
    pub(crate) fn gss_unwrapped(&self) -> u64 {
        self.seq.gss
    }

    /// Retransmission timeouts since data was last acknowledged.
    pub(crate) fn consecutive_rtos(&self) -> u32 {
        self.tx.rto_count
    }

    pub(crate) fn id(&self) -> PathId {
        self.id
    }
    /// Joined with MP_JOIN (not the first subflow).
    pub(crate) fn is_join(&self) -> bool {
        self.join
    }
    /// We sent the Request.
    pub(crate) fn is_initiator(&self) -> bool {
        self.initiator
    }
    /// Reported `PathEstablished` once.
    pub(crate) fn announced(&self) -> bool {
        self.announced
    }
    /// Whether `PathClosed` is still to be reported (true once).
    pub(crate) fn report_closed(&mut self) -> bool {
        !std::mem::replace(&mut self.close_reported, true)
    }
    /// The peer has heard of this subflow (it answered, or we sent it a
    /// Request).
    pub(crate) fn peer_knows_us(&self) -> bool {
        self.announced || self.seq.have_isr || self.hs.tries > 0
    }
    pub(crate) fn local_addr_id(&self) -> u8 {
        self.mp.local_addr_id
    }
    pub(crate) fn remote_addr_id(&self) -> u8 {
        self.mp.remote_addr_id
    }
    pub(crate) fn local_nonce(&self) -> u32 {
        self.mp.local_nonce
    }
    pub(crate) fn remote_nonce(&self) -> u32 {
        self.mp.remote_nonce
    }
    pub(crate) fn priority(&self) -> u8 {
        self.mp.priority
    }
    /// OPEN and not failed: the scheduler may use it.
    pub(crate) fn is_usable(&self) -> bool {
        self.is_open() && !self.failed
    }
    /// Usable, and its own queue is shorter than its window (a path that
    /// is hopelessly backlogged takes no more packets).
    /// Usable, with fewer than `limit` packets waiting in its queue.
    pub(crate) fn takes_data_within(&self, limit: u32) -> bool {
        self.is_usable() && (self.queue.len() as u32) < limit
    }
    pub(crate) fn cwnd_pkts(&self) -> u32 {
        self.tx.cc.cwnd_pkts()
    }
    /// Last valid packet received (or the subflow's creation).
    pub(crate) fn last_rx_at(&self) -> Instant {
        self.life.last_rx_at
    }
    /// When its handshake began.
    pub(crate) fn started_at(&self) -> Instant {
        self.life.started_at
    }
    pub(crate) fn stats(&self) -> &PathStats {
        &self.stats
    }
    pub(crate) fn ssthresh_pkts(&self) -> Option<u32> {
        self.tx.cc.ssthresh_pkts()
    }

    /// Addresses of the path; with `overwrite` given ones replace the
    /// configured ones, otherwise they only fill in what is missing.
    pub(crate) fn set_addresses(
        &mut self,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
        overwrite: bool,
    ) {
        let c = &mut self.cfg;
        if overwrite {
            c.local = local.or(c.local);
            c.remote = remote.or(c.remote);
        } else {
            c.local = c.local.or(local);
            c.remote = c.remote.or(remote);
        }
    }
    /// (source, destination) of received packets for the checksum, when
    /// both addresses are known.
    pub(crate) fn rx_pseudo_addrs(&self) -> Option<(IpAddr, IpAddr)> {
        match (self.cfg.remote, self.cfg.local) {
            (Some(r), Some(l)) => Some((r.ip(), l.ip())),
            _ => None,
        }
    }

    pub(crate) fn count_rx(&mut self, bytes: usize) {
        self.stats.rx_pkts += 1;
        self.stats.rx_bytes += bytes as u64;
    }
    pub(crate) fn count_tx(&mut self, bytes: usize) {
        self.stats.tx_pkts += 1;
        self.stats.tx_bytes += bytes as u64;
    }
    pub(crate) fn count_rx_data(&mut self) {
        self.stats.rx_data_pkts += 1;
    }

    /// The scheduler put packet `mp_seq` on this path.
    pub(crate) fn assign(&mut self, mp_seq: u64, item: Queued) {
        self.queue.push_back((mp_seq, item));
    }
    /// A connection-level retransmission: first in line on this path.
    pub(crate) fn assign_first(&mut self, mp_seq: u64, item: Queued) {
        self.queue.push_front((mp_seq, item));
    }
    /// The newest packet waiting here (for reinjection elsewhere).
    pub(crate) fn unqueue_newest(&mut self) -> Option<(u64, Queued)> {
        self.queue.pop_back()
    }
    /// Drops the packets waiting here that `keep` refuses; returns how many.
    pub(crate) fn drop_queued_unless(&mut self, keep: impl Fn(&Queued) -> bool) -> usize {
        let n = self.queue.len();
        self.queue.retain(|(_, q)| keep(q));
        n - self.queue.len()
    }
    /// Drops what waits here; returns how many packets.
    pub(crate) fn clear_queue(&mut self) -> usize {
        let n = self.queue.len();
        self.queue.clear();
        n
    }
    /// The scheduler had to send elsewhere: this path's window or pacer was
    /// the limit (so its samples are not application limited).
    pub(crate) fn note_blocked(&mut self, now: Instant) {
        self.tx.blocked_at = Some(now);
    }

    /// MP_SEQ `seq` arrived here; returns the path id.
    pub(crate) fn note_mp_seq(&mut self, seq: u64) -> PathId {
        self.mp.note_mp_seq(seq);
        self.id
    }
    /// What the reorderer knows of this path's arrivals.
    pub(crate) fn receive_state(&self) -> PathReceiveState {
        PathReceiveState {
            path: self.id,
            highest_seq: self.mp.highest_mp_seq,
            in_order: !self.acks.ack_now,
        }
    }

    /// Remembers when the subflow was first seen CLOSED.
    pub(crate) fn note_closed(&mut self, now: Instant) {
        if self.state == SubState::Closed {
            self.life.closed(now);
        }
    }
    /// Closed, no Reset owed and nothing queued: it may be forgotten.
    pub(crate) fn owes_nothing(&self) -> bool {
        self.state == SubState::Closed && self.pend.reset.is_none() && self.queue.is_empty()
    }
    /// Closed for at least `linger` at `now`.
    pub(crate) fn closed_for_at_least(&self, now: Instant, linger: Duration) -> bool {
        self.life.closed_for_at_least(now, linger)
    }

    /// When an open, silent subflow is due a keepalive probe (`k` after the
    /// last packet received and after the previous probe). Failed subflows
    /// have their own probes.
    pub(crate) fn keepalive_due(&self, k: Duration) -> Option<Instant> {
        if !self.is_usable() {
            return None;
        }
        Some(self.life.keepalive_due(k))
    }
    /// When this idle subflow (usable, nothing in flight or
    /// waiting) is due an RTT probe: `k` after its latest RTT sample and
    /// after the previous probe.
    pub(crate) fn rtt_probe_due(&self, k: Duration) -> Option<Instant> {
        if !self.is_usable() || self.tx.pipe > 0 || !self.queue.is_empty() {
            return None;
        }
        Some(self.life.rtt_probe_due(self.tx.last_rtt_sample_at?, k))
    }
    /// Probes the idle subflow's RTT with a Sync.
    pub(crate) fn send_rtt_probe(&mut self, now: Instant) {
        self.pend.sync = Some(self.seq.gsr & SEQ_MASK);
        self.life.rtt_probe_at = Some(now);
    }
    /// The estimate has had no sample for longer than `stale`:
    /// the next sample restarts it (RFC 6298 §2.2).
    pub(crate) fn note_rtt_sample_due(&mut self, now: Instant) {
        if let (Some(k), Some(t)) = (self.tx.rtt_stale_after, self.tx.last_rtt_sample_at) {
            if now.saturating_duration_since(t) > k {
                self.tx.rtt.restart();
            }
        }
    }

    /// Probes the silent subflow with a Sync.
    pub(crate) fn send_keepalive(&mut self, now: Instant) {
        self.pend.sync = Some(self.seq.gsr & SEQ_MASK);
        self.life.keepalive_at = Some(now);
    }

    /// Next sequence number to send (and consumes it).
    pub fn next_seq(&mut self) -> u64 {
        self.seq.next()
    }

    pub fn is_open(&self) -> bool {
        self.state == SubState::Open
    }

    pub fn is_gone(&self) -> bool {
        matches!(self.state, SubState::Closed | SubState::TimeWait)
    }

    pub fn path_state(&self) -> PathState {
        match self.state {
            SubState::Request | SubState::Respond | SubState::PartOpen => PathState::Establishing,
            SubState::Open if self.failed => PathState::Failed,
            SubState::Open => PathState::Active,
            _ => PathState::Closed,
        }
    }

    /// Records the peer's initial sequence number.
    pub fn set_isr(&mut self, wire_seq: u64) {
        self.seq.set_isr(wire_seq);
        self.acks.rx = RecvHistory::new(wire_seq);
    }

    /// Unwraps a received 48-bit sequence number near GSR.
    pub fn unwrap_seq(&self, wire: u64) -> u64 {
        self.seq.unwrap_seq(wire)
    }
    /// Unwraps a received 48-bit acknowledgement number near GSS.
    pub fn unwrap_ack(&self, wire: u64) -> u64 {
        self.seq.unwrap_ack(wire)
    }

    /// Greatest Sequence Number Received (RFC 4340 §7.1), unwrapped.
    pub fn gsr(&self) -> u64 {
        self.seq.gsr
    }

    /// RFC 4340 §7.5.1 sequence validity window [SWL, SWH].
    pub fn seq_window(&self) -> (u64, u64) {
        self.seq.seq_bounds()
    }
    /// RFC 4340 §7.5.1 acknowledgement validity window [AWL, AWH].
    pub fn ack_window(&self) -> (u64, u64) {
        self.seq.ack_bounds()
    }

    /// Time-driven bookkeeping at `now`, run before scheduling and with
    /// the timers: congestion window validation (RFC 7661 / RFC 4341 §5.1,
    /// `cc::validation`: an idle window decays before it is scheduled by or
    /// shown) and the loss window's once-a-second counter snapshot.
    pub(crate) fn refresh(&mut self, now: Instant) {
        self.tx.cc.validate_window(now);
        self.update_window_bound(now);
        self.tx
            .loss_window
            .note(now, self.stats.tx_data_pkts, self.proven_lost());
    }

    /// Losses the acknowledgements proved (not an RTO's forgotten flight).
    fn proven_lost(&self) -> u64 {
        self.stats.lost_pkts - self.stats.rto_lost_pkts
    }

    /// Loss over the last ~10 s at `now` (`loss_window`).
    pub(crate) fn windowed_loss(&self, now: Instant) -> loss_window::WindowedLoss {
        self.tx
            .loss_window
            .ratio(now, self.stats.tx_data_pkts, self.proven_lost())
    }

    /// RFC 7661 pipeACK of this path's controller at `now`, packets.
    pub(crate) fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        self.tx.cc.pipe_ack_pkts(now)
    }

    /// The connection's count of Active paths (for `delay_bound`).
    pub(crate) fn set_active_paths(&mut self, n: usize) {
        self.active_paths = n;
    }

    /// Recompute the queue-delay bound (`delay_bound`) at `now`.
    pub(crate) fn update_window_bound(&mut self, now: Instant) {
        let min_rtt = self.tx.rtt.min_rtt();
        let active = self.active_paths;
        let full = f64::from(self.mss_bytes);
        let sizes = delay_bound::PacketSizes {
            mean: self.tx.mean_packet_bytes(full),
            full,
        };
        self.window_bound = self
            .delay_bound
            .as_mut()
            .and_then(|b| b.bound_pkts(now, min_rtt, active, sizes));
    }

    /// The window the path may fill: the controller's, capped by the
    /// queue-delay bound when that is on (`delay_bound`).
    pub(crate) fn usable_window(&self) -> u32 {
        let cwnd = self.tx.cc.cwnd_pkts();
        self.window_bound.map_or(cwnd, |b| cwnd.min(b))
    }

    pub fn cwnd_room(&self) -> bool {
        self.tx.pipe < self.usable_window().max(1)
    }

    pub fn pacing_ok(&self, now: Instant) -> bool {
        self.tx.cc.pacing_rate_bytes_per_s().is_none() || self.tx.next_send_at <= now
    }

    // Inlined so the scheduler's view table is written in place, not
    // through a 160-byte temporary (once or twice per packet scheduled).
    #[inline]
    pub fn view(&self) -> PathView {
        let pacing = self.tx.cc.pacing_rate_bytes_per_s();
        PathView {
            id: self.id,
            state: self.path_state(),
            priority: self.mp.priority,
            cwnd_pkts: self.usable_window(),
            in_flight_pkts: self.tx.pipe,
            queued_pkts: self.queue.len() as u32,
            srtt: self.tx.rtt.srtt().or(self.mp.peer_rtt),
            min_rtt: self.tx.rtt.min_rtt(),
            rttvar: self.tx.rtt.rttvar(),
            owd: self.tx.rtt.srtt().or(self.mp.peer_rtt).map(|r| r / 2),
            pacing_rate_bytes_per_s: pacing,
            delivery_rate_bytes_per_s: self.tx.delivery_rate,
            loss_rate: self.tx.loss_rate,
            cc_state: self.tx.cc.state(),
            next_send_time: self.pacer_binds_until(pacing),
            mss_bytes: self.mss_bytes,
        }
    }

    /// The view's `next_send_time`. The per-path queue absorbs what the
    /// pacer holds back: the pacer binds only once a small backlog waits,
    /// so a paced path is not mistaken for a full one by schedulers.
    fn pacer_binds_until(&self, pacing: Option<u64>) -> Option<Instant> {
        pacing
            .filter(|_| self.queue.len() >= PACED_BACKLOG_PKTS)
            .map(|_| self.tx.next_send_at)
    }

    /// `self.view().can_send(now)` without building the view (the
    /// scheduling loop's test for "no path can send").
    pub(crate) fn view_can_send(&self, now: Instant) -> bool {
        let r = self.view_usable()
            && self.tx.pipe.saturating_add(self.queue.len() as u32) < self.usable_window()
            && self
                .pacer_binds_until(self.tx.cc.pacing_rate_bytes_per_s())
                .is_none_or(|t| t <= now);
        debug_assert_eq!(r, self.view().can_send(now));
        r
    }

    /// `self.view().is_usable()` without building the view.
    pub(crate) fn view_usable(&self) -> bool {
        let r = self.path_state() == PathState::Active
            && self.mp.priority != crate::path::priority::UNUSED;
        debug_assert_eq!(r, self.view().is_usable());
        r
    }

    /// This path's entry in the coupled controllers' view. Under the
    /// queue-delay bound (`delay_bound`) the entry's window is the usable
    /// one, `min(cwnd, bound)`: a coupled controller reads `w_i / rtt_i` as
    /// path i's rate (RFC 6356 §3; Khalili et al. for OLIA/BALIA), and a
    /// bounded path sends only the bound per round trip. Its controller's
    /// own window stays where it stopped growing (slow start may leave it
    /// at twice the bound, and a path whose bound keeps its queue short
    /// sees no loss to shrink it), so the raw window would inflate the
    /// total and starve every other path's increase (LIA's α / w_total).
    pub fn snapshot(&self) -> CcSnapshot {
        let mut s = self.tx.cc.snapshot(
            self.id,
            self.tx.rtt.srtt().unwrap_or(Duration::ZERO),
            self.is_open() && !self.failed,
        );
        if let Some(b) = self.window_bound {
            let b = f64::from(b);
            s.cwnd_pkts = s.cwnd_pkts.min(b);
            s.virtual_reno_cwnd_pkts = s.virtual_reno_cwnd_pkts.min(b);
        }
        s
    }
}

/// Packets a paced path may hold in its own queue before schedulers see the
/// pacer as the binding constraint.
const PACED_BACKLOG_PKTS: usize = 2;
