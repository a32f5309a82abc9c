//! Unit tests of the QUIC-like sender.

use super::*;
use crate::flow::testnet::{self, Net, Rx, Tx};
use mpdccp_proto::cc::{CcConfig, CcKind, ControllerFactory};

fn sender() -> QuicSender {
    let cfg = CcConfig {
        mss_bytes: 1200,
        initial_cwnd_pkts: Some(INITIAL_WINDOW_PKTS),
        min_cwnd_pkts: MINIMUM_WINDOW_PKTS,
        ..CcConfig::default()
    };
    QuicSender::new(1, 1200, CcKind::Reno.build(&cfg), Instant::ZERO, None)
}

fn ack(ranges: &[(u64, u64)]) -> FlowPkt {
    let mut a = FlowPkt::ack(1, ranges[0].1, Instant::ZERO, 61);
    a.sack[..ranges.len()].copy_from_slice(ranges);
    a.sack_len = ranges.len() as u8;
    a
}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// RFC 9002 §6.1: packet 0 reordered by less than 9/8 RTT while only two
/// later packets are acknowledged is not lost; a third later packet
/// acknowledged, or the time threshold passing, declares it lost.
#[test]
fn time_and_packet_thresholds() {
    for case in 0..3 {
        let mut q = sender();
        for _ in 0..5 {
            q.poll_transmit(ms(0)).expect("initial window");
        }
        q.handle_ack(ms(50), &ack(&[(1, 3)]));
        assert!(!q.is_lost(0), "two later packets acked");
        // 9/8 · 50 ms after it was sent.
        let t = q.poll_timeout(ms(50)).expect("loss timer armed");
        assert_eq!(t, Instant::from_micros(56_250));
        match case {
            0 => {
                q.handle_ack(ms(53), &ack(&[(0, 3)]));
                assert!(!q.is_lost(0));
                assert_eq!((q.stats.lost_pkts, q.stats.spurious_lost_pkts), (0, 0));
            }
            1 => {
                q.handle_ack(ms(52), &ack(&[(1, 4)]));
                assert!(q.is_lost(0), "kPacketThreshold");
            }
            _ => {
                q.handle_timeout(t);
                assert!(q.is_lost(0), "kTimeThreshold");
                // The late original is still welcome: a spurious loss.
                q.handle_ack(ms(60), &ack(&[(0, 3)]));
                assert_eq!(q.stats.spurious_lost_pkts, 1);
            }
        }
    }
}

/// RFC 9002 §7.6: everything sent over more than three PTO periods is
/// lost: the window collapses to kMinimumWindow.
#[test]
fn persistent_congestion_collapses_the_window() {
    let mut q = sender();
    q.poll_transmit(ms(0));
    q.handle_ack(ms(20), &ack(&[(0, 1)]));
    let mut t = 20;
    while q.in_flight_pkts() + 1 < q.cwnd_pkts() {
        t += 30;
        q.poll_transmit(ms(t)).expect("window room");
    }
    let last = q.next_pn;
    q.poll_transmit(ms(t + 30)).expect("window room");
    q.handle_ack(ms(t + 50), &ack(&[(last, last + 1)]));
    assert_eq!(q.stats.persistent_congestion, 1, "{:?}", q.stats);
    assert_eq!(q.cwnd_pkts(), MINIMUM_WINDOW_PKTS);
}

fn quic_stats(o: &testnet::Outcome) -> QuicStats {
    match &o.tx {
        Tx::Quic(q) => q.stats,
        Tx::Tcp(_) => unreachable!("a QUIC run"),
    }
}

#[test]
fn newreno_and_cubic_fill_a_30_mbit_link() {
    let net = Net {
        mbps: 30.0,
        delay_ms: 10.0,
        secs: 20,
        ..Net::default()
    };
    for cc in ["reno", "cubic"] {
        let o = testnet::run(testnet::quic(cc, 1250, &net), &net);
        assert!(
            o.goodput_mbps >= 27.0,
            "{cc}: {} Mbit/s, {:?}",
            o.goodput_mbps,
            quic_stats(&o)
        );
    }
}

/// Faithful to real stacks: reordering by about 20 packets is beyond
/// kPacketThreshold, so QUIC declares spurious losses.
#[test]
fn reordering_beyond_three_packets_is_taken_for_loss() {
    let net = Net {
        mbps: 30.0,
        delay_ms: 10.0,
        secs: 10,
        detour: Some((5, Duration::from_millis(8))),
        ..Net::default()
    };
    let o = testnet::run(testnet::quic("reno", 1250, &net), &net);
    let st = quic_stats(&o);
    assert!(st.spurious_lost_pkts > 100, "{st:?}");
    // Each halves the window: far below the link rate.
    assert!(o.goodput_mbps < 15.0, "{} Mbit/s {st:?}", o.goodput_mbps);
}

/// RFC 9002 §6.2: the last two packets are lost; the PTO's probes
/// bring acknowledgements that declare them lost and repair them.
#[test]
fn pto_recovers_a_tail_loss() {
    let mut net = Net {
        mbps: 10.0,
        buffer_bytes: 30_000,
        secs: 3,
        ..Net::default()
    };
    let pair = || testnet::quic_until("reno", 1250, 1000);
    let sent = quic_stats(&testnet::run(pair(), &net)).sent_pkts;
    net.drop = vec![sent - 2, sent - 1];
    let o = testnet::run(pair(), &net);
    let st = quic_stats(&o);
    assert!(st.pto_count >= 1, "{st:?}");
    let (Tx::Quic(tx), Rx::Quic(rx)) = (&o.tx, &o.rx) else {
        unreachable!()
    };
    assert_eq!(rx.delivered_in_order(), tx.chunks_sent(), "{st:?}");
}
