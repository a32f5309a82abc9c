//! Traffic sources and sinks.
//!
//! * [`Cbr`] — `udp-cbr`: fixed-size datagrams at a fixed rate;
//! * bulk — always backlogged, no inner congestion control (the engine tops
//!   up the tunnel's send queue, see `sim.rs`);
//! * [`tcp`] — an inner TCP flow with its own end-to-end congestion control
//!   and RACK-TLP or RFC 6675 loss detection ([`tcp_rx`], [`rack`]);
//! * [`quic`] — a QUIC-like bulk flow with RFC 9002 loss detection and
//!   congestion control ([`quic_rx`]).
//!
//! [`ranges`] is the receivers' shared record of what arrived, `ack_event`
//! the senders' shared construction of the controller's ACK event; the RTT
//! estimator, delivery-rate sampling and the controllers are the tunnel's
//! own (`mpdccp_proto::cc`).
//!
//! Sinks ([`SeqSink`]) see every data packet's sequence number and send time,
//! so one-way delay, loss, duplicates and out-of-order arrivals are exact.

mod ack_event;
pub mod quic;
pub mod quic_rx;
pub mod rack;
pub mod ranges;
pub mod tcp;
pub mod tcp_rx;
#[cfg(test)]
mod testnet;

use std::time::Duration;

use mpdccp_proto::Instant;

/// A constant-bit-rate source.
#[derive(Clone, Debug)]
pub struct Cbr {
    pub start: Instant,
    pub stop: Instant,
    /// Rate in bit/s (rounded to whole bits per second).
    pub rate_bps: u64,
    pub bytes: u32,
    pub next_seq: u64,
}

impl Cbr {
    pub fn new(rate_mbps: f64, bytes: u32, start: Instant, stop: Instant) -> Self {
        Cbr {
            start,
            stop,
            rate_bps: ((rate_mbps * 1e6).round() as u64).max(1),
            bytes,
            next_seq: 0,
        }
    }

    /// Send time of packet `seq`: `start + seq · bits / rate`, computed
    /// exactly (no accumulated rounding drift).
    pub fn send_time(&self, seq: u64) -> Instant {
        let ns = u128::from(seq) * u128::from(self.bytes) * 8 * 1_000_000_000
            / u128::from(self.rate_bps);
        self.start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The next send time, `None` once the source has stopped.
    pub fn next_time(&self) -> Option<Instant> {
        let t = self.send_time(self.next_seq);
        (t < self.stop).then_some(t)
    }
}

/// Receiver-side accounting of one datagram flow: which sequence numbers
/// arrived (a bitmap, so duplicates and losses are exact).
#[derive(Clone, Debug, Default)]
pub struct SeqSink {
    seen: Vec<u64>,
    highest: Option<u64>,
    pub delivered_pkts: u64,
    pub duplicate_pkts: u64,
    pub out_of_order_pkts: u64,
    pub last_arrival: Option<Instant>,
    /// Longest time between two consecutive deliveries.
    pub max_gap: Duration,
    pub max_gap_at: Option<Instant>,
}

/// What the sink made of one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkArrival {
    pub duplicate: bool,
    pub out_of_order: bool,
}

impl SeqSink {
    pub fn handle(&mut self, now: Instant, seq: u64) -> SinkArrival {
        let Ok(word) = usize::try_from(seq / 64) else {
            return SinkArrival {
                duplicate: true,
                out_of_order: false,
            };
        };
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        let bit = 1u64 << (seq % 64);
        if self.seen[word] & bit != 0 {
            self.duplicate_pkts += 1;
            return SinkArrival {
                duplicate: true,
                out_of_order: false,
            };
        }
        self.seen[word] |= bit;
        self.delivered_pkts += 1;
        let out_of_order = self.highest.is_some_and(|h| seq < h);
        if out_of_order {
            self.out_of_order_pkts += 1;
        }
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        if let Some(last) = self.last_arrival {
            let gap = now - last;
            if gap > self.max_gap {
                self.max_gap = gap;
                self.max_gap_at = Some(now);
            }
        }
        self.last_arrival = Some(now);
        SinkArrival {
            duplicate: false,
            out_of_order,
        }
    }

    pub fn was_received(&self, seq: u64) -> bool {
        usize::try_from(seq / 64)
            .ok()
            .and_then(|w| self.seen.get(w))
            .is_some_and(|w| w & (1u64 << (seq % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_counts_duplicates_reordering_and_gaps() {
        let mut s = SeqSink::default();
        let t = Instant::from_millis;
        assert!(!s.handle(t(1), 0).out_of_order);
        assert!(!s.handle(t(2), 2).out_of_order);
        assert!(s.handle(t(10), 1).out_of_order);
        assert!(s.handle(t(11), 1).duplicate);
        assert_eq!(
            (s.delivered_pkts, s.duplicate_pkts, s.out_of_order_pkts),
            (3, 1, 1)
        );
        assert_eq!(s.max_gap, Duration::from_millis(8));
        assert!(s.was_received(2) && !s.was_received(3));
    }

    #[test]
    fn cbr_spacing_matches_the_rate() {
        let c = Cbr::new(15.0, 1400, Instant::ZERO, Instant::from_millis(1000));
        // 1400 B at 15 Mbit/s: 746.666… µs per packet, exactly on average.
        assert_eq!(c.send_time(1).as_nanos(), 746_666);
        assert_eq!(c.send_time(3).as_nanos(), 2_240_000);
        assert_eq!(c.send_time(15).as_nanos(), 11_200_000);
    }
}
