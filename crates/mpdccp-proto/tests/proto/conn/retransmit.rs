//! Connection-level retransmission (`retransmit_lost`, the `lossy` scenario):
//! a packet a subflow declares lost is sent once more under its MP_SEQ, so
//! the random loss of a path does not reach the tunnelled flow; the
//! receiver delivers every MP_SEQ at most once.

use std::collections::BTreeMap;
use std::time::Duration;

use mpdccp_proto::conn::LossConfig;
use mpdccp_proto::conn::RetransmitConfig;
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::ConnectionConfig;

const PKT: usize = 1000;
const N: u32 = 3000;

fn harness(client: ConnectionConfig, loss: f64, reorder: f64) -> Harness {
    let link = LinkSpec {
        delay: Duration::from_millis(10),
        rate_bps: Some(20_000_000),
        buffer_bytes: 200_000,
        loss,
        reorder,
        reorder_delay: Duration::from_millis(15),
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        client,
        paths: vec![link],
        seed: 11,
        ..Default::default()
    });
    h.open_paths(1, Duration::from_millis(500));
    h
}

fn config(retransmit: Option<RetransmitConfig>) -> ConnectionConfig {
    ConnectionConfig {
        loss: LossConfig {
            retransmit,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Offers `N` numbered packets at 4 Mbit/s (well below the path's rate:
/// every loss is the link's random loss); returns how often each number
/// was delivered.
fn offer(h: &mut Harness) -> BTreeMap<u32, u32> {
    let gap = Duration::from_secs_f64(PKT as f64 * 8.0 / 4e6);
    for k in 0..N {
        let mut p = vec![0u8; PKT];
        p[..4].copy_from_slice(&k.to_be_bytes());
        let now = h.now;
        h.conn(Side::Client).send(now, &p).expect("queued");
        h.drive_for(gap);
    }
    h.drive_for(Duration::from_secs(3));
    let mut seen = BTreeMap::new();
    for (_, d) in h.delivered(Side::Server) {
        *seen
            .entry(u32::from_be_bytes(d[..4].try_into().unwrap()))
            .or_insert(0) += 1;
    }
    seen
}

/// 1 % random loss: without retransmission about 30 of 3000 packets never
/// arrive; with it only those lost twice (≈ 0.01 %) or reported after the
/// age limit, each resent packet once, and none delivered twice.
#[test]
fn a_reported_loss_is_repaired_once() {
    let mut off = harness(config(None), 0.01, 0.0);
    let got_off = offer(&mut off);
    let missing_off = N as usize - got_off.len();
    let mut on = harness(config(Some(RetransmitConfig::default())), 0.01, 0.0);
    let got_on = offer(&mut on);
    let missing_on = N as usize - got_on.len();
    let st = on.conn_ref(Side::Client).stats();
    println!(
        "missing without {missing_off}, with {missing_on}; subflow losses {}, resent {}, too old {}, over budget {}",
        st.loss.lost_pkts, st.loss.conn_retransmitted_pkts, st.loss.conn_retransmit_too_old, st.loss.conn_retransmit_over_budget
    );
    assert!(missing_off >= 15, "{missing_off}");
    assert!(
        missing_on * 5 <= missing_off,
        "{missing_on} vs {missing_off}"
    );
    assert!(got_on.values().all(|&n| n == 1), "a packet delivered twice");
    assert!(st.loss.conn_retransmitted_pkts > 0);
    // At most once per declared loss (each loss is of a first transmission
    // or of a resent copy, which is never resent again).
    assert!(st.loss.conn_retransmitted_pkts <= st.loss.lost_pkts);
    // Within the budget: 5 % of the data packets plus a burst of 8.
    assert!(st.loss.conn_retransmitted_pkts <= u64::from(N) * 5 / 100 + 8);
    assert_eq!(
        off.conn_ref(Side::Client)
            .stats()
            .loss
            .conn_retransmitted_pkts,
        0
    );
}

/// An age limit below the path's RTT (20 ms): every lost packet is too old
/// by the time its loss is reported (forgotten, or found and refused), so
/// nothing is resent and the losses reach the receiver.
#[test]
fn a_packet_older_than_the_limit_is_not_resent() {
    let cfg = RetransmitConfig {
        max_age: Duration::from_millis(5),
        ..RetransmitConfig::default()
    };
    let mut h = harness(config(Some(cfg)), 0.01, 0.0);
    let got = offer(&mut h);
    let st = h.conn_ref(Side::Client).stats();
    assert!(st.loss.lost_pkts >= 15, "{st:?}");
    assert_eq!(st.loss.conn_retransmitted_pkts, 0);
    assert!(N as usize - got.len() >= 15);
}

/// A budget of zero allows only the burst of 8 resends.
#[test]
fn the_budget_caps_resends() {
    let cfg = RetransmitConfig {
        budget_pct: 0.0,
        ..RetransmitConfig::default()
    };
    let mut h = harness(config(Some(cfg)), 0.02, 0.0);
    offer(&mut h);
    let st = h.conn_ref(Side::Client).stats();
    assert_eq!(st.loss.conn_retransmitted_pkts, 8, "{st:?}");
    assert!(st.loss.conn_retransmit_over_budget > 0);
}

/// Reordering without loss: a packet held back 15 ms is declared lost by
/// its subflow (three later ones acknowledged) although it arrives; the
/// resent copy reaches the receiver too and is dropped there as a
/// duplicate, so every packet is delivered exactly once.
#[test]
fn a_spurious_resend_is_dropped_by_the_receiver() {
    let mut h = harness(config(Some(RetransmitConfig::default())), 0.0, 0.02);
    let got = offer(&mut h);
    let st = h.conn_ref(Side::Client).stats();
    let rs = h.conn_ref(Side::Server).reorder_stats();
    println!(
        "resent {}, duplicates dropped {}",
        st.loss.conn_retransmitted_pkts, rs.duplicates
    );
    assert_eq!(got.len(), N as usize);
    assert!(got.values().all(|&n| n == 1), "a packet delivered twice");
    assert!(st.loss.conn_retransmitted_pkts > 0);
    assert!(rs.duplicates > 0);
}
