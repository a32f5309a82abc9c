//! RACK-TLP for the TCP sender (RFC 8985): loss detection on each ack
//! (§6.2), the reordering timer, the tail loss probe (§7) and its
//! outcome (§7.4). The state lives in `TcpSender` and `rack::Rack`.

use std::time::Duration;

use mpdccp_proto::cc::LossEvent;
use mpdccp_proto::Instant;

use super::{LossDetection, TcpSender};
use crate::flow::rack::ReoWndInput;
use crate::packet::FlowPkt;

/// RFC 8985 §7.2 WCDelAckT: the worst-case delayed-ack time a probe
/// timeout allows for when a single segment is in flight.
const WC_DEL_ACK: Duration = Duration::from_millis(200);

impl TcpSender {
    /// RFC 8985 §7.3: the probe timer fired; send one segment whatever the
    /// window says — new data if there is any, else the highest segment
    /// sent — and leave the RTO armed.
    pub(super) fn send_probe(&mut self, now: Instant) -> Option<FlowPkt> {
        let seq = if self.has_new_data(now) {
            self.next_seq
        } else {
            // One retransmitted probe per episode (TLPRxtOut).
            if self.tlp_high_rxt.is_some() {
                return None;
            }
            let i = self.segs.iter().rposition(|s| !s.sacked && s.in_flight)?;
            self.snd_una + i as u64
        };
        self.stats.tlp_count += 1;
        let pkt = if seq == self.next_seq {
            self.transmit(now, seq)
        } else {
            // A second copy of an outstanding segment: `pipe` is unchanged.
            let rs = self.rate.on_packet_sent(now, self.seg_bytes, self.pipe);
            let s = self.seg_mut(seq)?;
            s.rs = rs;
            s.retransmitted = true;
            self.stats.retransmitted_pkts += 1;
            self.stats.sent_pkts += 1;
            self.tlp_high_rxt = Some((self.next_seq, now));
            FlowPkt::data(self.flow, seq, now, self.seg_bytes)
        };
        self.pto_deadline = None;
        self.rto_deadline = Some(now + self.rtt.rto() * self.rto_backoff);
        Some(pkt)
    }

    /// RFC 8985 §7.2: schedule a probe only with an empty SACK scoreboard,
    /// outside loss recovery, and with something in flight. PTO = 2·SRTT,
    /// plus the worst-case delayed ack for a lone segment, never after the
    /// RTO; 1 s before the first RTT sample.
    pub(super) fn arm_pto(&mut self, now: Instant) {
        self.pto_deadline = None;
        if self.detection != LossDetection::Rack
            || self.segs.is_empty()
            || self.sacked_count > 0
            || self.recovery_point.is_some()
        {
            return;
        }
        let pto = match self.rtt.srtt() {
            Some(srtt) if self.pipe <= 1 => srtt * 2 + WC_DEL_ACK,
            Some(srtt) => srtt * 2,
            None => Duration::from_secs(1),
        };
        let mut at = now + pto;
        if let Some(rto) = self.rto_deadline {
            at = at.min(rto);
        }
        self.pto_deadline = Some(at);
    }

    /// RFC 8985 §6.2 Steps 2–5 and §7.4 for one acknowledgement.
    pub(super) fn rack_on_ack(&mut self, now: Instant, ack: &FlowPkt, dsack: bool, new_data: bool) {
        // Ascending sequence order, so reordering within one ack's SACK
        // blocks is not mistaken for reordering in the network.
        self.delivered.sort_unstable_by_key(|d| d.0);
        let min_rtt = self.rtt.min_rtt();
        for &(seq, xmit_ts, retx) in &self.delivered {
            self.rack
                .on_delivered(now, seq, xmit_ts, retx, ack.sent_at, min_rtt);
        }
        let exiting_recovery = self.recovery_point.is_some_and(|p| self.snd_una >= p);
        if exiting_recovery {
            self.recovery_point = None;
            if let Some(u) = self.undo.as_mut() {
                u.ended = true;
            }
        }
        self.rack.update_reo_wnd(&ReoWndInput {
            dsack,
            snd_una: self.snd_una,
            snd_nxt: self.next_seq,
            exiting_recovery,
            in_recovery: self.recovery_point.is_some(),
            sacked: self.sacked_count,
            min_rtt: min_rtt.unwrap_or_default(),
            srtt: self.rtt.srtt().unwrap_or_default(),
        });
        self.tlp_on_ack(now, ack, dsack, new_data);
        self.rack_detect_loss(now);
    }

    /// RFC 8985 §7.4 (as Linux `tcp_process_tlp_ack`): a probe that
    /// retransmitted a segment either repaired a real loss — the ack moves
    /// past TLPHighRxt without a DSACK — and the controller must react once,
    /// or both copies arrived (a DSACK, or a pure duplicate ack).
    pub(super) fn tlp_on_ack(&mut self, now: Instant, ack: &FlowPkt, dsack: bool, new_data: bool) {
        let Some((high, sent)) = self.tlp_high_rxt else {
            return;
        };
        if ack.seq < high {
            return;
        }
        self.tlp_high_rxt = None;
        if dsack || (ack.seq == high && !new_data) {
            return;
        }
        if ack.seq > high {
            self.stats.lost_pkts += 1;
            let ev = LossEvent {
                lost_pkts: 1,
                lost_bytes: u64::from(self.seg_bytes),
                in_flight_pkts: self.pipe,
                largest_lost_sent_time: sent,
                delivered_pkts: self.rate.delivered_pkts(),
            };
            self.cc.on_loss(now, &ev, &[]);
        } else {
            // Acked up to TLPHighRxt exactly: wait for the next ack.
            self.tlp_high_rxt = Some((high, sent));
        }
    }

    /// RFC 8985 §6.2 Step 5: every outstanding segment sent before the
    /// RACK segment and older than RACK.rtt + reo_wnd is lost; the earliest
    /// of the others arms the reordering timer.
    pub(super) fn rack_detect_loss(&mut self, now: Instant) {
        let mut timeout: Option<Duration> = None;
        let mut lost_pkts = 0u32;
        let mut first_lost = None;
        let mut largest_lost_sent_time = Instant::ZERO;
        for (i, s) in self.segs.iter_mut().enumerate() {
            if s.sacked || !s.in_flight {
                continue;
            }
            match self
                .rack
                .check(now, self.snd_una + i as u64, s.rs.sent_time)
            {
                Ok(()) => {
                    s.in_flight = false;
                    s.lost = true;
                    lost_pkts += 1;
                    first_lost.get_or_insert(self.snd_una + i as u64);
                    largest_lost_sent_time = largest_lost_sent_time.max(s.rs.sent_time);
                }
                Err(Some(t)) => timeout = Some(timeout.map_or(t, |x| x.max(t))),
                Err(None) => {}
            }
        }
        self.rack_deadline = timeout.map(|t| now + t);
        let Some(first) = first_lost else {
            return;
        };
        self.recovery_point.get_or_insert(self.next_seq);
        self.pto_deadline = None;
        self.declare_lost(now, lost_pkts, first, largest_lost_sent_time);
    }
}

/// RFC 2883 §4: the first SACK block is a DSACK if it lies below the
/// cumulative ack or inside the second block.
pub(super) fn is_dsack(ack: &FlowPkt) -> bool {
    match ack.ranges() {
        [] => false,
        [(a, b), rest @ ..] => {
            *b <= ack.seq || rest.first().is_some_and(|&(c, d)| c <= *a && *b <= d)
        }
    }
}
