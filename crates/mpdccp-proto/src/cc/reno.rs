//! NewReno-style window control (RFC 5681, RFC 6582), in packets.
//!
//! Used as the end-to-end control of simulated inner TCP flows (`reno`) and as
//! the reference the coupled controllers reduce to with one subflow.

use super::aimd::Aimd;
use super::{
    rfc3390_initial_window_pkts, AckEvent, CcConfig, CongestionController, CoupledView, LossEvent,
    SentPacket,
};
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct Reno {
    window: Aimd,
}

impl Reno {
    pub fn new(config: &CcConfig) -> Self {
        let iw = config
            .initial_cwnd_pkts
            .unwrap_or_else(|| rfc3390_initial_window_pkts(config.mss_bytes));
        Reno {
            window: Aimd::new(iw, config),
        }
    }
}

impl CongestionController for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.window.on_packet_sent(now, pkt);
    }

    fn reads_coupled_view(&self) -> bool {
        false
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, _paths: CoupledView<'_>) {
        self.window.note_ack(now, ack);
        if !self.window.is_cwnd_limited() {
            return;
        }
        let mut acked = ack.acked_pkts as f64;
        if self.window.in_slow_start() {
            acked = self.window.slow_start(acked);
        }
        // RFC 5681 §3.1 eq. 3: about one packet per window of acks.
        if acked > 0.0 {
            let cwnd = self.window.cwnd;
            self.window.grow(acked / cwnd);
        }
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
        self.window.validation.set_in_flight(loss.in_flight_pkts);
        if self
            .window
            .new_congestion_event(now, loss.largest_lost_sent_time)
        {
            // RFC 5681 §3.2 eq. 4 with FlightSize ≈ cwnd.
            let cwnd = self.window.cwnd;
            self.window.reduce_to(cwnd / 2.0);
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.window.on_rto(now);
    }

    fn cwnd_pkts(&self) -> u32 {
        self.window.cwnd_pkts()
    }

    fn validate_window(&mut self, now: Instant) {
        self.window.validate_idle(now);
    }

    fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        self.window.validation.pipe_ack_pkts(now)
    }

    fn state(&self) -> &'static str {
        self.window.state()
    }

    fn ssthresh_pkts(&self) -> Option<u32> {
        self.window.ssthresh_pkts()
    }
}
