//! The TCP endpoints alone over the model's links (`testnet.rs`).

use super::*;
use crate::flow::testnet::{self, Net, Tx};

fn stats(o: &testnet::Outcome) -> TcpStats {
    match &o.tx {
        Tx::Tcp(t) => t.stats,
        Tx::Quic(_) => unreachable!("a TCP run"),
    }
}

#[test]
fn reno_fills_a_clean_link() {
    let net = Net {
        secs: 20,
        ..Net::default()
    };
    for d in [LossDetection::Dupthresh, LossDetection::Rack] {
        let o = testnet::run(testnet::tcp("reno", 1400, d, &net), &net);
        let st = stats(&o);
        assert!(
            o.goodput_mbps >= 9.0,
            "{d:?}: {} Mbit/s, {st:?}",
            o.goodput_mbps
        );
        // The buffer overflows in slow start: losses must have been repaired.
        assert!(st.retransmitted_pkts > 0, "{st:?}");
    }
}

#[test]
fn reno_recovers_from_random_loss_without_stalling() {
    let net = Net {
        secs: 20,
        loss: 0.01,
        ..Net::default()
    };
    for d in [LossDetection::Dupthresh, LossDetection::Rack] {
        let o = testnet::run(testnet::tcp("reno", 1400, d, &net), &net);
        // Mathis et al.: rate ≈ 1.22·MSS/(RTT·√p) ≈ 13.7 Mbit/s at 1 % and
        // 10 ms, so the link (10 Mbit/s) should stay mostly busy.
        assert!(o.goodput_mbps >= 5.0, "{d:?}: {} Mbit/s", o.goodput_mbps);
        assert!(stats(&o).lost_pkts > 0);
        // Real losses: no retransmission comes back duplicate, so no
        // reduction is undone.
        assert_eq!(stats(&o).undo_count, 0, "{d:?}: {:?}", stats(&o));
    }
}

/// RACK and CUBIC fill a 30 Mbit/s link without reordering.
#[test]
fn rack_cubic_fills_a_30_mbit_link() {
    let net = Net {
        mbps: 30.0,
        delay_ms: 10.0,
        secs: 20,
        ..Net::default()
    };
    let o = testnet::run(testnet::tcp("cubic", 1400, LossDetection::Rack, &net), &net);
    assert!(
        o.goodput_mbps >= 27.0,
        "{} Mbit/s, {:?}",
        o.goodput_mbps,
        stats(&o)
    );
}

/// Every 5th segment arrives 8 ms late (about 20 segments behind at
/// 30 Mbit/s): DupThresh takes each for a loss and retransmits it,
/// RACK learns the reordering (DSACK) and waits.
#[test]
fn rack_tolerates_reordering_that_dupthresh_takes_for_loss() {
    let net = Net {
        mbps: 30.0,
        delay_ms: 10.0,
        secs: 20,
        detour: Some((5, Duration::from_millis(8))),
        ..Net::default()
    };
    let dup = testnet::run(
        testnet::tcp("cubic", 1400, LossDetection::Dupthresh, &net),
        &net,
    );
    let rack = testnet::run(testnet::tcp("cubic", 1400, LossDetection::Rack, &net), &net);
    let spurious = |o: &testnet::Outcome| stats(o).spurious_lost_pkts + o.duplicates;
    println!(
        "dupthresh {:.1} Mbit/s {:?} dup {}; rack {:.1} Mbit/s {:?} dup {}",
        dup.goodput_mbps,
        stats(&dup),
        dup.duplicates,
        rack.goodput_mbps,
        stats(&rack),
        rack.duplicates
    );
    assert!(spurious(&dup) > 100, "dupthresh: {:?}", stats(&dup));
    assert!(
        spurious(&rack) * 10 < spurious(&dup),
        "rack {:?} vs dupthresh {:?}",
        stats(&rack),
        stats(&dup)
    );
    assert!(
        rack.goodput_mbps > 2.0 * dup.goodput_mbps && rack.goodput_mbps >= 25.0,
        "rack {} vs dupthresh {} Mbit/s",
        rack.goodput_mbps,
        dup.goodput_mbps
    );
}

/// RFC 8985 §7: the last segments of a transfer are lost; a probe
/// (not the RTO) recovers them.
#[test]
fn tail_loss_probe_repairs_a_tail_loss() {
    let mut net = Net {
        mbps: 10.0,
        buffer_bytes: 30_000,
        secs: 3,
        ..Net::default()
    };
    // The same 1 s transfer twice; the second loses its last two
    // transmissions.
    let pair = || testnet::tcp_until("cubic", 1400, LossDetection::Rack, 1000);
    let sent = stats(&testnet::run(pair(), &net)).sent_pkts;
    net.drop = vec![sent - 2, sent - 1];
    let o = testnet::run(pair(), &net);
    let st = stats(&o);
    assert!(st.tlp_count >= 1, "{st:?}");
    assert_eq!(st.rto_count, 0, "{st:?}");
    let (testnet::Tx::Tcp(tx), testnet::Rx::Tcp(rx)) = (&o.tx, &o.rx) else {
        unreachable!()
    };
    assert_eq!(rx.delivered_in_order(), tx.next_seq(), "{st:?}");
}

/// A lone segment now and then arrives 40 ms late on a 20 ms path (one
/// of a tunnel's detours to a slower path): more than RACK's reordering
/// window can ever grow to (SRTT, RFC 8985 §6.2 Step 4), so each is
/// retransmitted. The DSACK for the late original proves the
/// retransmission spurious and the sender restores its window (RFC 3708
/// §3, as Linux does), so CUBIC keeps the link full. Without the undo
/// each detour cost CUBIC's 30 % reduction: 28.5 Mbit/s here against
/// 29.7 with it (40 kB buffer, a third of the BDP plus a bit).
#[test]
fn a_reduction_for_a_spurious_retransmission_is_undone() {
    let net = Net {
        mbps: 30.0,
        delay_ms: 10.0,
        secs: 20,
        buffer_bytes: 40_000,
        detour: Some((2000, Duration::from_millis(40))),
        ..Net::default()
    };
    let o = testnet::run(testnet::tcp("cubic", 1400, LossDetection::Rack, &net), &net);
    let st = stats(&o);
    println!("{:.1} Mbit/s {st:?}", o.goodput_mbps);
    assert!(st.spurious_lost_pkts + st.retransmitted_pkts > 0, "{st:?}");
    assert!(st.undo_count >= 10, "{st:?}");
    assert!(o.goodput_mbps >= 29.2, "{} Mbit/s {st:?}", o.goodput_mbps);
}
