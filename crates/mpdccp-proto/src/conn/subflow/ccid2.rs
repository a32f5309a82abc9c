//! CCID2 (RFC 4341) on one subflow: the sender's flight, Ack Vector
//! processing, loss after three later acknowledgements, RTO, Ack Ratio and
//! pacing; the receiver's acknowledgement duties (RFC 4340 §11, §13.2).

use std::collections::VecDeque;
use std::time::Duration;

use super::{
    ackvec, AckDelayUse, AckEvent, CcSnapshot, LossEvent, Sent, SentPacket, Subflow, Timer,
};
use crate::time::Instant;

/// Least slack (beyond one srtt) before a path with packets in flight
/// counts as stalled ([`Subflow::stall_deadline`]): on a LAN-short path a
/// descheduled peer must not hand the traffic to a metered standby.
const STALL_MIN_SLACK: Duration = Duration::from_millis(10);

/// Lost numbers a subflow keeps for the connection between two acks (the
/// connection takes them after each ack; a bound against a huge Ack Vector).
const MAX_LOST_SEQS: usize = 1024;

/// What one acknowledgement covered.
struct Acked {
    pkts: u32,
    bytes: u64,
    /// The packet the Acknowledgement Number names, if it was newly acked:
    /// its RTT (`None` inside when the clock went backwards).
    rtt_sample: Option<Option<Duration>>,
    newest_sent: Instant,
}

/// Where the coupled view an ack's controller calls read comes from.
pub(crate) enum Coupled<'a> {
    /// A view built by the caller (tests; `&[]` for none).
    #[cfg(test)]
    Given(&'a [CcSnapshot]),
    /// The connection's other paths, in path order before and after this
    /// one: snapshotted into `buf` only when the ack reaches the controller
    /// (most acks, e.g. all of a data receiver's, do not). Identical to
    /// snapshotting every path before the ack: the others cannot change
    /// meanwhile, and a coupled controller replaces its own entry by its
    /// current state (it only needs the entry's place and path id).
    Lazy {
        before: &'a [Subflow],
        after: &'a [Subflow],
        buf: &'a mut Vec<CcSnapshot>,
        built: bool,
    },
}

impl Coupled<'_> {
    /// The view, built on the first call (an ack's loss then reuses it);
    /// empty for a controller that does not read it.
    fn view(&mut self, own: &Subflow) -> &[CcSnapshot] {
        if !own.tx.cc.reads_coupled_view() {
            return &[];
        }
        match self {
            #[cfg(test)]
            Coupled::Given(v) => v,
            Coupled::Lazy {
                before,
                after,
                buf,
                built,
            } => {
                if !*built {
                    *built = true;
                    buf.clear();
                    buf.extend(before.iter().map(Subflow::snapshot));
                    buf.push(own.snapshot());
                    buf.extend(after.iter().map(Subflow::snapshot));
                }
                buf
            }
        }
    }
}

impl Subflow {
    /// A data packet left (it was written out): the flight, the pacer and
    /// the application-limited mark take it in.
    pub fn data_sent(
        &mut self,
        now: Instant,
        seq: u64,
        bytes: u32,
        conn_queue_empty: bool,
        initial_rto: Duration,
    ) {
        // Draft-cheng §3.4, per path: nothing waiting here or in the
        // connection queue, window not full, and no packet diverted away
        // from this path within the last round trip.
        let rtt = self.tx.rtt.srtt().unwrap_or(initial_rto);
        let app_limited = self.queue.is_empty()
            && conn_queue_empty
            && self.tx.pipe + 1 < self.usable_window()
            && self.tx.blocked_at.is_none_or(|t| now - t > rtt);
        self.on_data_sent(now, seq, bytes, app_limited);
    }

    /// Retransmission interval of an MP option (MP_PRIO, address adverts):
    /// at least `base`, at least the path's RTO.
    pub fn option_rto(&self, base: Duration) -> Duration {
        base.max(self.tx.rtt.rto())
    }

    /// Sender side: one data packet leaves.
    pub fn on_data_sent(&mut self, now: Instant, seq: u64, bytes: u32, app_limited: bool) {
        let rs = self.tx.rate.on_packet_sent(now, bytes, self.tx.pipe);
        self.tx.sent.push_back(Sent {
            seq,
            bytes,
            rate: rs,
            acked: false,
            lost: false,
        });
        self.tx.pipe += 1;
        self.tx.note_sent_bytes(bytes);
        if app_limited {
            self.tx.rate.on_app_limited(self.tx.pipe);
        }
        // A loss-based path held at the queue-delay bound is window-limited
        // (delay_bound::flight_for_controller); paced controllers are not
        // window-clocked and see the true flight.
        let in_flight_pkts = if self.tx.cc.pacing_rate_bytes_per_s().is_some() {
            self.tx.pipe
        } else {
            super::delay_bound::flight_for_controller(
                self.tx.pipe,
                self.tx.cc.cwnd_pkts(),
                self.window_bound,
            )
        };
        self.tx.cc.on_packet_sent(
            now,
            &SentPacket {
                seq,
                bytes,
                in_flight_pkts,
                app_limited,
            },
        );
        if self.timers.get(Timer::Rto).is_none() {
            self.timers.arm(Timer::Rto, now + self.rto());
        }
        if let Some(rate) = self.tx.cc.pacing_rate_bytes_per_s().filter(|r| *r > 0) {
            let quantum = self.tx.cc.send_quantum_pkts();
            self.tx.pace(now, bytes, rate, quantum);
        }
        self.stats.tx_data_pkts += 1;
    }

    /// When this path, with packets in flight, counts as stalled: its
    /// oldest outstanding packet is unacknowledged `srtt + max(srtt,
    /// 4·rttvar, STALL_MIN_SLACK) + ack_delay` after it left (the peer may
    /// hold its ack for `ack_delay`). Well before the RTO (floored at
    /// 200 ms); used only to hand over to a waiting standby path.
    pub(crate) fn stall_deadline(&self, ack_delay: Duration) -> Option<Instant> {
        if !self.is_usable() || self.tx.pipe == 0 {
            return None;
        }
        let srtt = self.tx.rtt.srtt()?;
        let oldest = self.tx.sent.iter().find(|s| !s.acked && !s.lost)?;
        let slack = srtt.max(self.tx.rtt.rttvar() * 4).max(STALL_MIN_SLACK);
        Some(oldest.rate.sent_time + srtt + slack + ack_delay)
    }

    /// The path stalled with a standby waiting: failed as after its RTOs
    /// (the scheduler moves to the standby), probed until it answers; an
    /// acknowledgement of what is in flight brings it back.
    pub(crate) fn fail_stalled(&mut self, now: Instant) {
        self.failed = true;
        self.timers.arm(Timer::Probe, now + self.rto());
    }

    pub fn rto(&self) -> Duration {
        self.tx.rto()
    }

    /// Sender side: processes an acknowledgement (`ack` unwrapped) with its
    /// optional Ack Vector and the peer's Elapsed Time for `ack`. Returns
    /// true when the path came back from failure.
    ///
    /// RTT sampling (RFC 4340 §11.3, RFC 4341 §5): an ack names many packets
    /// but only the one numbered `ack` — the newest the peer had received
    /// when it acknowledged — gives a sample, and only when this ack is the
    /// first to acknowledge it (the packet was sent once: DCCP never
    /// resends a sequence number, and a packet already acknowledged, lost
    /// or forgotten after an RTO is not matched again). Elapsed Time is the
    /// peer's hold time of exactly that packet, so it may be subtracted
    /// (see [`RttEstimator::on_sample_with_ack_delay`]).
    #[cfg(test)]
    pub fn on_ack(
        &mut self,
        now: Instant,
        ack: u64,
        cells: Option<&[u8]>,
        ack_delay: Option<Duration>,
        coupled: &[CcSnapshot],
    ) -> bool {
        self.on_ack_with(now, ack, cells, ack_delay, Coupled::Given(coupled))
    }

    /// [`Subflow::on_ack`] with the coupled view from `coupled` (built
    /// only if the ack reaches the controller).
    pub(crate) fn on_ack_with(
        &mut self,
        now: Instant,
        ack: u64,
        cells: Option<&[u8]>,
        ack_delay: Option<Duration>,
        mut coupled: Coupled<'_>,
    ) -> bool {
        if ack > self.seq.gar {
            self.seq.gar = ack;
        }
        let prior_in_flight = self.tx.pipe;
        let Some(Acked {
            pkts: acked_pkts,
            bytes: acked_bytes,
            rtt_sample,
            newest_sent,
        }) = self.mark_acked(now, ack, cells)
        else {
            return self.recover();
        };
        let rtt_sample = rtt_sample.and_then(|raw| self.take_rtt_sample(now, raw, ack_delay));
        let recovered = if acked_pkts > 0 {
            self.recover()
        } else {
            false
        };
        if acked_pkts > 0 {
            let sample = self.tx.rate.take_sample(self.tx.rtt.min_rtt());
            if let Some(rs) = sample {
                let r = rs.delivery_rate_bytes_per_s() as u64;
                // App-limited samples may only raise the estimate.
                if !rs.is_app_limited || self.tx.delivery_rate.is_none_or(|d| r > d) {
                    self.tx.delivery_rate = Some(r);
                }
                if let (Some(b), Some(min_rtt)) = (self.delay_bound.as_mut(), self.tx.rtt.min_rtt())
                {
                    b.on_rate_sample(
                        now,
                        rs.delivery_rate_bytes_per_s(),
                        min_rtt,
                        rs.is_app_limited,
                    );
                }
            }
            let ev = AckEvent {
                acked_pkts,
                acked_bytes,
                prior_in_flight_pkts: prior_in_flight,
                in_flight_pkts: self.tx.pipe,
                rtt: rtt_sample,
                srtt: self.tx.rtt.srtt().unwrap_or(Duration::ZERO),
                min_rtt: self.tx.rtt.min_rtt().unwrap_or(Duration::ZERO),
                rate: sample,
                delivered_pkts: self.tx.rate.delivered_pkts(),
                lost_pkts_total: self.tx.lost_total,
                largest_acked_sent_time: newest_sent,
            };
            let view = coupled.view(self);
            self.tx.cc.on_ack(now, &ev, view);
            self.tx.loss_rate *= 1.0 - (acked_pkts as f64 / 64.0).min(1.0);
            self.update_window_bound(now);
        }
        self.detect_losses(now, &mut coupled);
        self.trim();
        // BBR's PROBE_RTT keeps the flight low on purpose: mark the samples
        // of this phase application limited (cc/mod.rs contract).
        if self.tx.cc.marks_app_limited() {
            self.tx.rate.on_app_limited(self.tx.pipe);
        }
        if acked_pkts > 0 {
            let at = (self.tx.pipe > 0).then(|| now + self.rto());
            self.timers.set(Timer::Rto, at);
        }
        recovered
    }

    /// Marks the packets `ack` and its Ack Vector `cells` report received
    /// (RFC 4340 §11.4); `None` when nothing is in flight.
    fn mark_acked(&mut self, now: Instant, ack: u64, cells: Option<&[u8]>) -> Option<Acked> {
        let front_seq = self.tx.sent.front()?.seq;
        let mut acked = Acked {
            pkts: 0,
            bytes: 0,
            rtt_sample: None,
            newest_sent: Instant::ZERO,
        };
        let sent = &mut self.tx.sent;
        let pipe = &mut self.tx.pipe;
        let pipe_bytes = &mut self.tx.pipe_bytes;
        let rate = &mut self.tx.rate;
        let top = &mut self.tx.top_acked;
        // Runs arrive newest first, so each run's start index is at most
        // the previous one's; and as numbers strictly increase, entry
        // `lo - front_seq` already has seq >= lo. Both bound the search
        // (an ack would otherwise binary-search the whole flight per run).
        let mut bound = sent.len();
        let mut mark = |hi: u64, lo: u64| {
            if hi < front_seq {
                return;
            }
            let lo = lo.max(front_seq);
            // Index of the first entry with seq >= lo (entries sorted).
            let end = bound.min(usize::try_from(lo - front_seq).unwrap_or(usize::MAX));
            let start = first_at_or_above(sent, end, lo);
            bound = start;
            for s in sent.iter_mut().skip(start) {
                if s.seq > hi {
                    break;
                }
                if s.acked || s.lost {
                    continue;
                }
                s.acked = true;
                *pipe = pipe.saturating_sub(1);
                *pipe_bytes = pipe_bytes.saturating_sub(u64::from(s.bytes));
                acked.pkts += 1;
                acked.bytes += s.bytes as u64;
                rate.on_packet_delivered(now, &s.rate);
                if s.seq == ack {
                    // None when the driver's clock went backwards.
                    acked.rtt_sample = Some(now.checked_duration_since(s.rate.sent_time));
                }
                if s.rate.sent_time > acked.newest_sent {
                    acked.newest_sent = s.rate.sent_time;
                }
                insert_top(top, s.seq);
            }
        };
        match cells {
            Some(cells) => ackvec::for_each_run(ack, cells, |hi, lo, received| {
                if received {
                    mark(hi, lo);
                }
            }),
            None => mark(ack, ack),
        }
        Some(acked)
    }

    /// Feeds the sample of the packet the ack names to the estimator
    /// (`raw` is `None` when the driver's clock went backwards: refused).
    /// Controllers get the raw sample: their min-RTT filters (BBR) must not
    /// see a peer-reported delay subtracted.
    fn take_rtt_sample(
        &mut self,
        now: Instant,
        raw: Option<Duration>,
        ack_delay: Option<Duration>,
    ) -> Option<Duration> {
        let Some(raw) = raw else {
            self.stats.rtt_samples_rejected += 1;
            return None;
        };
        self.note_rtt_sample_due(now);
        let (_, used) = self.tx.rtt.on_sample_with_ack_delay_at(now, raw, ack_delay);
        self.tx.last_rtt_sample_at = Some(now);
        self.stats.rtt_samples += 1;
        match used {
            AckDelayUse::Used => self.stats.rtt_ack_delay_used += 1,
            AckDelayUse::Ignored => self.stats.rtt_ack_delay_ignored += 1,
            AckDelayUse::Absent => {}
        }
        Some(raw)
    }

    fn recover(&mut self) -> bool {
        self.tx.rto_count = 0;
        self.timers.stop(Timer::Probe);
        if self.failed {
            self.failed = false;
            return true;
        }
        false
    }

    /// RFC 4341 §5: a packet is lost when at least three packets sent after it
    /// have been acknowledged — i.e. its number is below the third-highest
    /// acknowledged number.
    fn detect_losses(&mut self, now: Instant, coupled: &mut Coupled<'_>) {
        let thresh = self.tx.top_acked[2];
        if thresh == 0 {
            return;
        }
        let mut lost = 0u32;
        let mut lost_bytes = 0u64;
        let mut newest = Instant::ZERO;
        for s in self.tx.sent.iter_mut() {
            if s.seq >= thresh {
                break;
            }
            if !s.acked && !s.lost {
                s.lost = true;
                lost += 1;
                lost_bytes += s.bytes as u64;
                newest = newest.max(s.rate.sent_time);
                if let Some(v) = self
                    .tx
                    .lost_seqs
                    .as_mut()
                    .filter(|v| v.len() < MAX_LOST_SEQS)
                {
                    v.push(s.seq);
                }
            }
        }
        if lost > 0 {
            self.tx.pipe = self.tx.pipe.saturating_sub(lost);
            self.tx.pipe_bytes = self.tx.pipe_bytes.saturating_sub(lost_bytes);
            self.tx.lost_total += lost as u64;
            self.stats.lost_pkts += lost as u64;
            self.tx.loss_rate = (self.tx.loss_rate + lost as f64 / 64.0).min(1.0);
            if self.loss_is_random() {
                self.stats.random_losses_tolerated += lost as u64;
                return;
            }
            let ev = LossEvent {
                lost_pkts: lost,
                lost_bytes,
                in_flight_pkts: self.tx.pipe,
                largest_lost_sent_time: newest,
                delivered_pkts: self.tx.rate.delivered_pkts(),
            };
            let view = coupled.view(self);
            self.tx.cc.on_loss(now, &ev, view);
        }
    }

    /// Veno's loss discrimination (Fu & Liew, IEEE JSAC 21(2), 2003, §III):
    /// the packets this path keeps queued at the bottleneck are estimated
    /// as N = cwnd · (RTT − minRTT) / RTT (the expected minus the actual
    /// rate, times minRTT); a loss with N under β happened with no queue to
    /// overflow, so it is random, not congestion. With the setting off, or
    /// before an RTT sample, every loss is congestion. The latest sample is
    /// the RTT at the loss: a drop-tail or AQM drop comes with a queue.
    fn loss_is_random(&self) -> bool {
        let Some(beta) = self.tx.random_loss_backlog else {
            return false;
        };
        let (Some(rtt), Some(min)) = (self.tx.rtt.latest(), self.tx.rtt.min_rtt()) else {
            return false;
        };
        if rtt.is_zero() {
            return false;
        }
        let queued = rtt.saturating_sub(min).as_secs_f64() / rtt.as_secs_f64();
        (self.tx.cc.cwnd_pkts() as f64) * queued < beta
    }

    /// The DCCP numbers declared lost since the last call (connection-level
    /// retransmission), into `out`.
    pub(crate) fn take_lost_seqs(&mut self, out: &mut Vec<u64>) {
        if let Some(v) = self.tx.lost_seqs.as_mut() {
            out.append(v);
        }
    }

    fn trim(&mut self) {
        while self.tx.sent.front().is_some_and(|s| s.acked || s.lost) {
            self.tx.sent.pop_front();
        }
    }

    /// The retransmission timer fired: every packet in flight is lost and the
    /// controller collapses its window (RFC 4341 §5, RFC 6298 §5.5).
    /// Returns true when this timeout marks the path failed.
    pub fn on_rto(&mut self, now: Instant, fail_after: u32, first_probe_at_base_rto: bool) -> bool {
        self.timers.stop(Timer::Rto);
        // The peer acknowledged a sequence number sent after the oldest
        // packet still outstanding (GAR, any packet type: a SyncAck
        // counts): the path delivered after it, so this is a (tail) loss,
        // not a silent path. It collapses the window as any RTO does
        // (RFC 4341 §5) but neither backs off nor counts toward failing
        // the path, which silence alone does. One packet the peer dropped
        // on an idle path (one whose Ack Number a forged packet made
        // invalid) took the path down for a probe's round.
        let oldest = self.tx.sent.iter().find(|s| !s.acked && !s.lost);
        let delivered_after = oldest.is_some_and(|o| self.seq.gar > o.seq);
        let lost = self.tx.sent.iter().filter(|s| !s.acked && !s.lost).count() as u64;
        self.tx.sent.clear();
        self.tx.pipe = 0;
        self.tx.pipe_bytes = 0;
        self.tx.lost_total += lost;
        self.stats.lost_pkts += lost;
        self.stats.rto_lost_pkts += lost;
        self.stats.rtos += 1;
        self.tx.top_acked = [0; 3];
        self.tx.cc.on_rto(now);
        if delivered_after {
            return false;
        }
        self.tx.rto_count += 1;
        if !self.failed && self.tx.rto_count >= fail_after {
            self.failed = true;
            // With `first_probe_at_base_rto` (the daemon) the first probe
            // goes one un-backed-off RTO after the failure: the doubled
            // interval put the recovery of a path a forgery disturbed at
            // 0.6-1.4 s in the lab. The probes after it back
            // off (`Timer::Probe`).
            let first = if first_probe_at_base_rto {
                self.tx.rtt.rto()
            } else {
                self.rto()
            };
            self.timers.arm(Timer::Probe, now + first);
            return true;
        }
        false
    }

    /// The handshake acknowledged `ack` at `now`: one RTT sample for the
    /// estimator and the controller's initial RTT (before any data).
    pub fn on_handshake_ack(&mut self, now: Instant, ack: u64) {
        if let Some(sent) = self.hs.take_hs_sample(ack) {
            let Some(rtt) = now.checked_duration_since(sent) else {
                self.stats.rtt_samples_rejected += 1;
                return;
            };
            self.tx.rtt.on_sample_at(now, rtt);
            self.tx.last_rtt_sample_at = Some(now);
            self.tx.cc.on_initial_rtt(now, rtt);
        }
    }

    /// Ack Ratio to request from the peer: at most ceil(cwnd/2) and at most
    /// the configured value (RFC 4341 §6.1.2).
    pub fn desired_ack_ratio(&self, configured: u32) -> u32 {
        let half = self.tx.cc.cwnd_pkts().div_ceil(2).max(1);
        configured.max(1).min(half)
    }

    /// Receiver side: a packet with (unwrapped) `seq` arrived at `now`;
    /// returns false for a duplicate.
    pub fn on_packet_received(&mut self, now: Instant, seq: u64) -> bool {
        let in_order = seq == self.seq.gsr + 1;
        let new_gsr = seq > self.seq.gsr;
        if new_gsr {
            self.seq.gsr = seq;
        }
        self.acks.on_packet(now, seq, new_gsr, in_order)
    }

    /// Receiver side: a data-carrying packet arrived; schedules the ack.
    pub fn on_data_received(&mut self, now: Instant, ack_delay: Duration) {
        if !self.acks.on_data() && self.timers.get(Timer::AckDue).is_none() {
            self.timers.arm(Timer::AckDue, now + ack_delay);
        }
    }

    /// Sequence numbers the next Ack Vector must cover.
    pub fn ack_cover(&self, min_cover: u64) -> u64 {
        self.acks.cover(self.seq.gsr, min_cover)
    }

    /// Elapsed Time (RFC 4340 §13.2, 10 µs units) for an acknowledgement
    /// sent at `now`: how long ago the packet it acknowledges (GSR) arrived.
    pub fn ack_elapsed_10us(&self, now: Instant) -> Option<u32> {
        self.acks.elapsed_10us(now)
    }

    /// An acknowledgement was just sent.
    pub fn on_ack_sent(&mut self) {
        self.acks.sent(self.seq.gsr);
        self.timers.stop(Timer::AckDue);
        self.stats.acks_sent += 1;
    }

    pub fn wants_ack(&self, now: Instant) -> bool {
        self.acks.ack_now || self.expired(Timer::AckDue, now)
    }
}

/// Index of the first entry among `sent[..end]` numbered `lo` or above, or
/// `end` when there is none (the caller knows `sent[end]`, if any, is).
fn first_at_or_above(sent: &VecDeque<Sent>, end: usize, lo: u64) -> usize {
    // Without holes in the numbering the answer is `end` itself: one check.
    if end == 0 || sent[end - 1].seq < lo {
        return end;
    }
    let (mut a, mut b) = (0, end - 1);
    while a < b {
        let m = a + (b - a) / 2;
        if sent[m].seq < lo {
            a = m + 1;
        } else {
            b = m;
        }
    }
    a
}

fn insert_top(top: &mut [u64; 3], seq: u64) {
    if seq > top[0] {
        top[2] = top[1];
        top[1] = top[0];
        top[0] = seq;
    } else if seq > top[1] && seq != top[0] {
        top[2] = top[1];
        top[1] = seq;
    } else if seq > top[2] && seq != top[1] && seq != top[0] {
        top[2] = seq;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::conn::seq::SEQ_MASK;
    use crate::conn::subflow::{SubState, Subflow};
    use crate::conn::{ConnectionConfig, LossConfig, PathConfig};
    use crate::path::PathId;
    use crate::time::Instant;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn subflow(iss: u64) -> Subflow {
        let conf = ConnectionConfig::default();
        let cc = crate::cc::ControllerFactory::build(&crate::cc::CcKind::Ccid2, &conf.cc_config);
        let mut sf = Subflow::new(PathId(0), PathConfig::default(), iss, cc, &conf);
        sf.state = SubState::Open;
        sf
    }

    /// Sends data packets, the k-th at `times_ms[k]`; returns their numbers.
    fn send(sf: &mut Subflow, times_ms: &[u64]) -> Vec<u64> {
        times_ms
            .iter()
            .map(|&t| {
                let seq = sf.next_seq();
                sf.on_data_sent(at(t), seq, 1000, false);
                seq
            })
            .collect()
    }

    /// One Ack Vector cell "received" covering `n` packets (RFC 4340 §11.4:
    /// state 0 in the top two bits, run length n-1 below).
    fn run(n: u8) -> [u8; 1] {
        [n - 1]
    }

    /// One round of 10 packets sent 1 ms apart from `t0`, acknowledged
    /// `rtt_ms` after the newest with the 6th-newest reported not received
    /// (RFC 4340 §11.4: state 3 in the top bits); returns the cwnd before
    /// and after.
    fn round_with_one_loss(sf: &mut Subflow, t0: u64, rtt_ms: u64) -> (u32, u32) {
        let times: Vec<u64> = (t0..t0 + 10).collect();
        let s = send(sf, &times);
        let before = sf.tx.cc.cwnd_pkts();
        let cells = [4, 0xC0, 3];
        sf.on_ack(at(t0 + 9 + rtt_ms), s[9], Some(&cells), None, &[]);
        (before, sf.tx.cc.cwnd_pkts())
    }

    fn veno_subflow() -> Subflow {
        let conf = ConnectionConfig {
            loss: LossConfig {
                random_loss_backlog_pkts: Some(3.0),
                ..Default::default()
            },
            ..ConnectionConfig::default()
        };
        let cc = crate::cc::ControllerFactory::build(&crate::cc::CcKind::Ccid2, &conf.cc_config);
        let mut sf = Subflow::new(PathId(0), PathConfig::default(), 1000, cc, &conf);
        sf.state = SubState::Open;
        // A first round without loss at 10 ms: the minimum RTT.
        let s = send(&mut sf, &[0, 1, 2, 3]);
        sf.on_ack(at(13), s[3], Some(&run(4)), None, &[]);
        sf
    }

    /// Veno's test (Fu & Liew 2003): a loss at the minimum RTT (no
    /// backlog) is counted but the window is not reduced for it; the same
    /// loss with the RTT at 4 × the minimum (a backlog of ¾ of the window,
    /// over 3 packets) reduces it exactly as with the setting off.
    #[test]
    fn a_loss_without_backlog_is_not_congestion() {
        let mut random = veno_subflow();
        let (before, after_random) = round_with_one_loss(&mut random, 20, 10);
        assert!(before >= 4, "{before}");
        assert_eq!(random.stats.lost_pkts, 1);
        assert_eq!(random.stats.random_losses_tolerated, 1);
        assert!(after_random > before, "{before} -> {after_random}");

        let mut queued = veno_subflow();
        let (_, after_queued) = round_with_one_loss(&mut queued, 20, 40);
        assert_eq!(queued.stats.lost_pkts, 1);
        assert_eq!(queued.stats.random_losses_tolerated, 0);

        // The setting off: the loss at the minimum RTT reduces the window.
        let mut off = subflow(1000);
        let s = send(&mut off, &[0, 1, 2, 3]);
        off.on_ack(at(13), s[3], Some(&run(4)), None, &[]);
        let (before_off, after_off) = round_with_one_loss(&mut off, 20, 10);
        assert_eq!(before_off, before);
        assert_eq!(off.stats.random_losses_tolerated, 0);
        assert_eq!(after_queued, after_off);
        assert!(after_off < after_random, "{after_off} vs {after_random}");
        assert!(
            after_off <= after_random.div_ceil(2),
            "{after_off} vs {after_random}"
        );
    }

    /// A path held under its window by the queue-delay bound shows the
    /// coupled controllers the window it uses, not the one slow start
    /// left (which, without loss on a short queue, never shrinks and
    /// starved the other paths' LIA increase: trace/quic, lia 0.90 of the
    /// best single path with the bound, 0.97 with this).
    #[test]
    fn a_bounded_path_shows_its_usable_window_to_the_coupled_view() {
        let conf = ConnectionConfig {
            window_delay_bound: Some(Duration::ZERO),
            ..ConnectionConfig::default()
        };
        let cc = crate::cc::ControllerFactory::build(&crate::cc::CcKind::Lia, &conf.cc_config);
        let mut sf = Subflow::new(PathId(0), PathConfig::default(), 1000, cc, &conf);
        sf.state = SubState::Open;
        let cwnd = sf.tx.cc.cwnd_pkts();
        assert!(cwnd > 2, "{cwnd}");
        assert_eq!(sf.snapshot().cwnd_pkts, f64::from(cwnd));
        // The bound below the window: the view carries the bound.
        sf.window_bound = Some(2);
        let snap = sf.snapshot();
        assert_eq!(snap.cwnd_pkts, 2.0);
        assert_eq!(snap.virtual_reno_cwnd_pkts, 2.0);
        assert_eq!(sf.tx.cc.cwnd_pkts(), cwnd, "the controller keeps its own");
        // A bound above the window changes nothing.
        sf.window_bound = Some(cwnd + 10);
        assert_eq!(sf.snapshot().cwnd_pkts, f64::from(cwnd));
    }

    #[test]
    fn the_sample_is_the_packet_named_by_the_ack_and_only_its_first_ack() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 1, 2, 3, 4]);
        // One ack covers all five: the sample is from the newest (sent at
        // 4 ms), not the oldest (0 ms).
        sf.on_ack(at(30), s[4], Some(&run(5)), None, &[]);
        assert_eq!(sf.tx.rtt.latest(), Some(MS * 26));
        assert_eq!(sf.stats.rtt_samples, 1);
        // The same ack number again (a later packet of the peer, nothing
        // newer received): no second sample from an already acked packet.
        sf.on_ack(at(60), s[4], Some(&run(5)), None, &[]);
        assert_eq!(sf.stats.rtt_samples, 1);
        assert_eq!(sf.tx.rtt.min_rtt(), Some(MS * 26));
    }

    #[test]
    fn an_ack_naming_a_packet_without_a_send_record_gives_no_sample() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 1, 2]);
        // The peer's newest is our pure Ack (numbered after the data, not a
        // data packet): the data it also acknowledges was received earlier,
        // at a time we do not know.
        let pure_ack = sf.next_seq();
        sf.on_ack(at(9), pure_ack, Some(&run(4)), None, &[]);
        assert_eq!(sf.tx.pipe, 0, "the data is acknowledged");
        assert_eq!(sf.stats.rtt_samples, 0);
        assert_eq!(sf.tx.rtt.srtt(), None);
        let _ = s;
    }

    #[test]
    fn lost_or_timed_out_packets_acked_late_give_no_sample() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 1, 2, 3, 4, 5]);
        // 3, 4, 5 acknowledged one by one: 1 and 2 are lost (RFC 4341 §5).
        for (k, t) in [(3usize, 20u64), (4, 21), (5, 22)] {
            sf.on_ack(at(t), s[k], None, None, &[]);
        }
        assert_eq!(sf.stats.rtt_samples, 3);
        let min = sf.tx.rtt.min_rtt();
        // A very late ack of the "lost" packet 1: no sample (it would
        // be far too large here, but a reordered ack of an old packet is
        // no measurement of the path either).
        sf.on_ack(at(500), s[1], None, None, &[]);
        assert_eq!(sf.stats.rtt_samples, 3);
        // After an RTO the flight is forgotten: a late ack matches nothing.
        let t = send(&mut sf, &[600, 601]);
        sf.on_rto(at(900), 10, false);
        sf.on_ack(at(901), t[1], None, None, &[]);
        assert_eq!(sf.stats.rtt_samples, 3);
        assert_eq!(sf.tx.rtt.min_rtt(), min);
    }

    #[test]
    fn a_driver_clock_going_backwards_is_refused_not_a_zero_sample() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[50]);
        sf.on_ack(at(40), s[0], None, None, &[]);
        assert_eq!(sf.stats.rtt_samples, 0);
        assert_eq!(sf.stats.rtt_samples_rejected, 1);
        assert_eq!(sf.tx.rtt.min_rtt(), None);
    }

    #[test]
    fn samples_across_the_48_bit_wrap() {
        // ISS three below 2^48: the flight straddles the wrap.
        let mut sf = subflow(SEQ_MASK - 2);
        let s = send(&mut sf, &[0, 1, 2, 3, 4, 5]);
        assert!(s[0] <= SEQ_MASK && s[5] > SEQ_MASK);
        for (k, &seq) in s.iter().enumerate() {
            // The peer echoes 48-bit numbers; unwrapping recovers ours.
            let ack = sf.unwrap_ack(seq & SEQ_MASK);
            assert_eq!(ack, seq);
            sf.on_ack(at(10 + k as u64), ack, None, None, &[]);
            assert_eq!(sf.tx.rtt.latest(), Some(MS * 10), "packet {k}");
        }
        assert_eq!(sf.stats.rtt_samples, 6);
        assert_eq!(sf.tx.rtt.min_rtt(), Some(MS * 10));
    }

    #[test]
    fn elapsed_time_is_subtracted_but_never_below_the_minimum() {
        let mut sf = subflow(1000);
        let s = send(&mut sf, &[0, 100, 200, 300]);
        sf.on_ack(at(10), s[0], None, None, &[]);
        // Held 8 ms by the peer: 18 - 8 = 10 (the path), used.
        sf.on_ack(at(118), s[1], None, Some(MS * 8), &[]);
        assert_eq!(sf.stats.rtt_ack_delay_used, 1);
        assert_eq!(sf.tx.rtt.srtt(), Some(MS * 10));
        // A forged 17 ms (18 - 17 = 1 ms) and an absurd hour: ignored.
        sf.on_ack(at(218), s[2], None, Some(MS * 17), &[]);
        sf.on_ack(at(318), s[3], None, Some(Duration::from_secs(3600)), &[]);
        assert_eq!(sf.stats.rtt_ack_delay_ignored, 2);
        assert_eq!(sf.tx.rtt.min_rtt(), Some(MS * 10));
        assert!(sf.tx.rtt.srtt().unwrap() > MS * 10);
    }

    #[test]
    fn held_acks_report_how_long_they_were_held() {
        let mut sf = subflow(1000);
        sf.set_isr(5000);
        assert!(sf.on_packet_received(at(100), 5001));
        assert_eq!(sf.ack_elapsed_10us(at(100)), None, "not held");
        assert_eq!(sf.ack_elapsed_10us(at(110)), Some(1000));
        // An older packet arriving late does not move the reference.
        assert!(sf.on_packet_received(at(105), 5003));
        assert!(sf.on_packet_received(at(107), 5002));
        assert_eq!(sf.ack_elapsed_10us(at(110)), Some(500));
    }
}
