//! The congestion controller's ACK event as both inner senders (TCP and
//! QUIC) build it: their own counts of one acknowledgement, read together
//! with the RTT and delivery-rate estimators they share with the tunnel
//! (`mpdccp_proto::cc`).

use std::time::Duration;

use mpdccp_proto::cc::{AckEvent, DeliveryRateEstimator, RttEstimator};
use mpdccp_proto::Instant;

/// What an inner sender knows of one acknowledgement that newly acked data.
pub(crate) struct SenderAck {
    /// Packets newly acknowledged, each `pkt_bytes` long (the inner flows
    /// send fixed-size packets).
    pub acked_pkts: u32,
    pub pkt_bytes: u32,
    /// Packets in flight before and after the ack was processed.
    pub prior_in_flight: u32,
    pub in_flight: u32,
    /// The RTT sample this ack gave, if any.
    pub rtt_sample: Option<Duration>,
    /// Send time of the newest packet it acknowledged.
    pub largest_acked_sent_time: Instant,
    /// Packets the sender has declared lost so far.
    pub lost_pkts_total: u64,
}

impl SenderAck {
    /// The controller's event: smoothed and minimum RTT as `rtt` holds them
    /// after the sample, and the delivery-rate sample of this ack, taken
    /// from `rate` now (once per ack).
    pub(crate) fn into_event(
        self,
        rtt: &RttEstimator,
        rate: &mut DeliveryRateEstimator,
    ) -> AckEvent {
        let rate_sample = rate.take_sample(rtt.min_rtt());
        AckEvent {
            acked_pkts: self.acked_pkts,
            acked_bytes: u64::from(self.acked_pkts) * u64::from(self.pkt_bytes),
            prior_in_flight_pkts: self.prior_in_flight,
            in_flight_pkts: self.in_flight,
            rtt: self.rtt_sample,
            srtt: rtt.srtt().unwrap_or_default(),
            min_rtt: rtt.min_rtt().unwrap_or_default(),
            rate: rate_sample,
            delivered_pkts: rate.delivered_pkts(),
            lost_pkts_total: self.lost_pkts_total,
            largest_acked_sent_time: self.largest_acked_sent_time,
        }
    }
}
