//! Delivery-rate estimation per draft-cheng-iccrg-delivery-rate-estimation-02
//! (the algorithm Linux `tcp_rate.c` implements), in packets and bytes.
//!
//! The transport calls [`DeliveryRateEstimator::on_packet_sent`] for each data
//! packet and stores the returned [`PacketRateState`] with it; for an ack it
//! calls [`DeliveryRateEstimator::on_packet_delivered`] for every newly
//! delivered packet, then [`DeliveryRateEstimator::take_sample`] once.

use std::time::Duration;

use super::RateSample;
use crate::time::Instant;

/// Per-packet snapshot of the connection's delivery state at send time
/// (draft §3.2, "Upon transmitting a data packet").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRateState {
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub delivered_time: Instant,
    pub first_sent_time: Instant,
    pub is_app_limited: bool,
    pub sent_time: Instant,
    pub bytes: u32,
}

#[derive(Clone, Debug, Default)]
pub struct DeliveryRateEstimator {
    delivered_pkts: u64,
    delivered_bytes: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    /// `C.app_limited`: delivered count marking the end of an app-limited
    /// phase; 0 when not app limited.
    app_limited_until: u64,
    // The sample under construction for the current ack (`rs` in the draft).
    pending: Option<Pending>,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    prior_delivered_pkts: u64,
    prior_delivered_bytes: u64,
    send_elapsed: Duration,
    ack_elapsed: Duration,
    is_app_limited: bool,
    rtt: Duration,
}

impl DeliveryRateEstimator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Total packets delivered so far.
    pub fn delivered_pkts(&self) -> u64 {
        self.delivered_pkts
    }
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }
    pub fn is_app_limited(&self) -> bool {
        self.app_limited_until != 0
    }

    /// Draft §3.4: the sender has nothing to send and the window is not full;
    /// samples until the current flight is delivered are app limited.
    pub fn on_app_limited(&mut self, in_flight_pkts: u32) {
        self.app_limited_until = (self.delivered_pkts + in_flight_pkts as u64).max(1);
    }

    /// Draft §3.2. `in_flight_pkts` is the count *before* this packet.
    pub fn on_packet_sent(
        &mut self,
        now: Instant,
        bytes: u32,
        in_flight_pkts: u32,
    ) -> PacketRateState {
        if in_flight_pkts == 0 {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        PacketRateState {
            delivered_pkts: self.delivered_pkts,
            delivered_bytes: self.delivered_bytes,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            is_app_limited: self.app_limited_until != 0,
            sent_time: now,
            bytes,
        }
    }

    /// Draft §3.3, per newly delivered (acked or SACKed) packet.
    pub fn on_packet_delivered(&mut self, now: Instant, p: &PacketRateState) {
        self.delivered_pkts += 1;
        self.delivered_bytes += p.bytes as u64;
        self.delivered_time = now;
        let newer = match self.pending {
            None => true,
            Some(rs) => p.delivered_pkts >= rs.prior_delivered_pkts,
        };
        if newer {
            self.pending = Some(Pending {
                prior_delivered_pkts: p.delivered_pkts,
                prior_delivered_bytes: p.delivered_bytes,
                send_elapsed: p.sent_time - p.first_sent_time,
                ack_elapsed: now - p.delivered_time,
                is_app_limited: p.is_app_limited,
                rtt: now - p.sent_time,
            });
            // Start the next send interval at this packet's send time.
            self.first_sent_time = p.sent_time;
        }
    }

    /// Draft §3.3, after all packets of one ack: forms the sample. Returns
    /// `None` when nothing was delivered or the interval is shorter than
    /// `min_rtt` (an ack-compressed burst would overestimate the rate).
    pub fn take_sample(&mut self, min_rtt: Option<Duration>) -> Option<RateSample> {
        if self.app_limited_until != 0 && self.delivered_pkts > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let rs = self.pending.take()?;
        let interval = rs.send_elapsed.max(rs.ack_elapsed);
        let delivered_pkts = self.delivered_pkts - rs.prior_delivered_pkts;
        if interval.is_zero() || delivered_pkts == 0 {
            return None;
        }
        if let Some(min_rtt) = min_rtt {
            if interval < min_rtt {
                return None;
            }
        }
        Some(RateSample {
            delivered_pkts,
            delivered_bytes: self.delivered_bytes - rs.prior_delivered_bytes,
            interval,
            prior_delivered_pkts: rs.prior_delivered_pkts,
            is_app_limited: rs.is_app_limited,
            rtt: rs.rtt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender that sends one 1000-byte packet every 1 ms over a path whose
    /// RTT is 10 ms must measure 1 MB/s once the pipe is full.
    #[test]
    fn steady_flow_measures_its_send_rate() {
        let mut est = DeliveryRateEstimator::new();
        let rtt = Duration::from_millis(10);
        let mut flight: std::collections::VecDeque<PacketRateState> = Default::default();
        let mut last = None;
        for ms in 0..200u64 {
            let now = Instant::from_millis(ms);
            // acks for packets sent 10 ms ago
            while flight.front().is_some_and(|p| p.sent_time + rtt <= now) {
                let p = flight.pop_front().unwrap();
                est.on_packet_delivered(now, &p);
                last = est.take_sample(Some(rtt));
            }
            let st = est.on_packet_sent(now, 1000, flight.len() as u32);
            flight.push_back(st);
        }
        let s = last.expect("a sample");
        let rate = s.delivery_rate_bytes_per_s();
        assert!(
            (rate - 1_000_000.0).abs() / 1_000_000.0 < 0.02,
            "rate {rate}"
        );
        assert!(!s.is_app_limited);
        assert_eq!(s.rtt, rtt);
    }

    #[test]
    fn app_limited_marking_clears_after_the_flight_is_delivered() {
        let mut est = DeliveryRateEstimator::new();
        let p = est.on_packet_sent(Instant::ZERO, 100, 0);
        est.on_app_limited(1);
        let q = est.on_packet_sent(Instant::from_millis(1), 100, 1);
        assert!(!p.is_app_limited && q.is_app_limited);
        est.on_packet_delivered(Instant::from_millis(10), &p);
        est.take_sample(None);
        assert!(est.is_app_limited());
        est.on_packet_delivered(Instant::from_millis(11), &q);
        let s = est.take_sample(None).unwrap();
        assert!(s.is_app_limited);
        assert!(!est.is_app_limited());
    }
}
