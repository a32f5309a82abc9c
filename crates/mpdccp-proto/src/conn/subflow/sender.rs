//! The HC-sender of one subflow (RFC 4341): the flight awaiting
//! acknowledgement, the congestion controller and RTT estimate it feeds,
//! the pacer, the RTO back-off and the loss counters the scheduler reads.
//! The CCID2 logic that drives it lives in `ccid2.rs`.

use std::collections::VecDeque;
use std::time::Duration;

use super::loss_window::LossWindow;
use super::Sent;
use crate::cc::{CongestionController, DeliveryRateEstimator, RttEstimator};
use crate::time::Instant;

/// Longest RTO after back-off (RFC 6298 §2.5 allows a cap of at least 60 s).
const RTO_MAX: Duration = Duration::from_secs(60);

/// The sending half of a subflow.
#[derive(Debug)]
pub(crate) struct Sender {
    pub(super) sent: VecDeque<Sent>,
    /// Packets in flight (sent, neither acknowledged nor lost).
    pub(super) pipe: u32,
    /// Mean size of the data packets sent lately, bytes (EWMA, gain 1/16;
    /// 0 before the first): the queue-delay bound's packet size
    /// (`delay_bound.rs`).
    pub(super) mean_sent_bytes: f64,
    /// Bytes of the packets in `pipe`.
    pub(super) pipe_bytes: u64,
    pub(super) top_acked: [u64; 3],
    pub(super) cc: Box<dyn CongestionController>,
    pub(super) rtt: RttEstimator,
    pub(super) rate: DeliveryRateEstimator,
    /// Retransmission timeouts since data was last acknowledged.
    pub(super) rto_count: u32,
    /// The pacer's next release time.
    pub(super) next_send_at: Instant,
    pub(super) lost_total: u64,
    pub(super) loss_rate: f64,
    /// Veno backlog threshold (`LossConfig::random_loss_backlog_pkts`).
    pub(super) random_loss_backlog: Option<f64>,
    /// DCCP numbers declared lost since the connection last took them
    /// (only with connection-level retransmission; bounded).
    pub(super) lost_seqs: Option<Vec<u64>>,
    /// Loss over the last ~10 s from the counters (`loss_window`).
    pub(super) loss_window: LossWindow,
    /// Latest delivery-rate sample not limited by the application.
    pub(super) delivery_rate: Option<u64>,
    pub(super) last_rtt_sample_at: Option<Instant>,
    /// Last time the scheduler had to send elsewhere because this path was
    /// blocked by its window or pacer.
    pub(super) blocked_at: Option<Instant>,
    /// `LifetimeConfig::rtt_probe_interval`.
    pub(super) rtt_stale_after: Option<Duration>,
}

impl Sender {
    pub(super) fn new(
        cc: Box<dyn CongestionController>,
        conf: &crate::conn::ConnectionConfig,
    ) -> Self {
        Sender {
            sent: VecDeque::new(),
            pipe: 0,
            mean_sent_bytes: 0.0,
            pipe_bytes: 0,
            top_acked: [0; 3],
            cc,
            rtt: RttEstimator::new(
                conf.loss.initial_rto,
                Duration::from_millis(200),
                Duration::from_secs(60),
            ),
            rate: DeliveryRateEstimator::new(),
            rto_count: 0,
            next_send_at: Instant::ZERO,
            lost_total: 0,
            loss_rate: 0.0,
            random_loss_backlog: conf.loss.random_loss_backlog_pkts,
            lost_seqs: conf.loss.retransmit.map(|_| Vec::new()),
            loss_window: LossWindow::default(),
            delivery_rate: None,
            last_rtt_sample_at: None,
            blocked_at: None,
            rtt_stale_after: conf.lifetime.rtt_probe_interval,
        }
    }

    /// The estimator's RTO doubled for each RTO in a row (at most 64×, at
    /// most [`RTO_MAX`]).
    /// A data packet of `bytes` went into flight: the pipe's bytes and the
    /// mean sent size (EWMA, gain 1/16) follow it.
    pub(super) fn note_sent_bytes(&mut self, bytes: u32) {
        self.pipe_bytes += u64::from(bytes);
        let m = self.mean_sent_bytes;
        self.mean_sent_bytes = if m > 0.0 {
            m + (f64::from(bytes) - m) / 16.0
        } else {
            f64::from(bytes)
        };
    }

    /// The mean size of the packets in flight; of those sent lately when
    /// none is; `full` before any was sent.
    pub(super) fn mean_packet_bytes(&self, full: f64) -> f64 {
        if self.pipe > 0 {
            self.pipe_bytes as f64 / f64::from(self.pipe)
        } else if self.mean_sent_bytes > 0.0 {
            self.mean_sent_bytes
        } else {
            full
        }
    }

    pub(super) fn rto(&self) -> Duration {
        let backoff = 1u32 << self.rto_count.min(6);
        (self.rtt.rto() * backoff).min(RTO_MAX)
    }

    /// `bytes` left at `now`: the pacer's next release moves on by one gap
    /// at `rate` bytes/s.
    ///
    /// A token bucket one send quantum deep (plus half a gap, as Linux
    /// `tcp_update_skb_after_send` allows for OS jitter): a release that
    /// comes late — a coarse driver timer, or a packet offered between two
    /// slots — keeps its credit instead of losing it, which would cap the
    /// rate below the pacing rate.
    pub(super) fn pace(&mut self, now: Instant, bytes: u32, rate: u64, quantum: u32) {
        let gap = Duration::from_nanos((bytes as u64).saturating_mul(1_000_000_000) / rate);
        let depth = gap * (quantum.max(1) - 1) + gap / 2;
        self.next_send_at = self.next_send_at.max(now.saturating_sub(depth)) + gap;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::cc::{CcKind, ControllerFactory};
    use crate::conn::ConnectionConfig;
    use crate::time::Instant;

    use super::{Sender, RTO_MAX};

    fn sender() -> Sender {
        let conf = ConnectionConfig::default();
        Sender::new(
            ControllerFactory::build(&CcKind::Ccid2, &conf.cc_config),
            &conf,
        )
    }

    #[test]
    fn the_rto_doubles_per_timeout_and_stops_at_a_minute() {
        let mut s = sender();
        s.rtt
            .on_sample_at(Instant::from_millis(10), Duration::from_millis(400));
        let base = s.rtt.rto();
        assert!(base >= Duration::from_millis(400));
        s.rto_count = 2;
        assert_eq!(s.rto(), base * 4);
        s.rto_count = 40;
        assert_eq!(s.rto(), RTO_MAX.min(base * 64));
    }

    #[test]
    fn a_late_release_keeps_one_quantum_of_credit_not_more() {
        let mut s = sender();
        // 1000 bytes at 1 MB/s: one gap is 1 ms.
        let t = Instant::from_millis(100);
        // A quantum of one keeps half a gap of credit (OS jitter).
        s.pace(t, 1000, 1_000_000, 1);
        assert_eq!(s.next_send_at, t + Duration::from_micros(500));
        // Released 10 ms late with a quantum of 4: at most 3.5 gaps of
        // credit survive.
        let late = t + Duration::from_millis(11);
        s.pace(late, 1000, 1_000_000, 4);
        assert_eq!(
            s.next_send_at,
            late - Duration::from_micros(3500) + Duration::from_millis(1)
        );
    }
}
