//! CCID2 (RFC 4341 §5) and Reno window rules, driven event by event.

use std::time::Duration;

use mpdccp_proto::cc::{self, AckEvent, CcConfig, CongestionController, LossEvent, SentPacket};
use mpdccp_proto::Instant;

fn sent(seq: u64, in_flight: u32) -> SentPacket {
    SentPacket {
        seq,
        bytes: 1400,
        in_flight_pkts: in_flight,
        app_limited: false,
    }
}

fn ack(acked: u32, in_flight: u32, sent_at: Instant) -> AckEvent {
    AckEvent {
        acked_pkts: acked,
        acked_bytes: acked as u64 * 1400,
        prior_in_flight_pkts: in_flight + acked,
        in_flight_pkts: in_flight,
        rtt: Some(Duration::from_millis(100)),
        srtt: Duration::from_millis(100),
        min_rtt: Duration::from_millis(100),
        rate: None,
        delivered_pkts: 0,
        lost_pkts_total: 0,
        largest_acked_sent_time: sent_at,
    }
}

fn loss(sent_at: Instant) -> LossEvent {
    LossEvent {
        lost_pkts: 1,
        lost_bytes: 1400,
        in_flight_pkts: 0,
        largest_lost_sent_time: sent_at,
        delivered_pkts: 0,
    }
}

/// Fills the window (the sender is cwnd limited), then acks one packet.
fn full_window_ack(cc: &mut dyn CongestionController, now: Instant) {
    let w = cc.cwnd_pkts();
    cc.on_packet_sent(now, &sent(0, w));
    cc.on_ack(now, &ack(1, w - 1, now), &[]);
}

#[test]
fn initial_window_follows_rfc3390_by_mss() {
    for (mss, iw) in [(536, 4), (1460, 3), (4000, 2)] {
        let config = CcConfig {
            mss_bytes: mss,
            ..CcConfig::default()
        };
        assert_eq!(build_cc("ccid2", &config).unwrap().cwnd_pkts(), iw, "{mss}");
        assert_eq!(cc::rfc3390_initial_window_pkts(mss), iw);
    }
}

#[test]
fn slow_start_then_one_packet_per_window_of_acks() {
    let mut c = cc::Ccid2::new(&CcConfig {
        mss_bytes: 1460,
        ..CcConfig::default()
    });
    let t = Instant::from_millis(1);
    // Slow start: +1 per acked packet.
    for i in 0..5 {
        assert_eq!(c.cwnd_pkts(), 3 + i);
        full_window_ack(&mut c, t);
    }
    assert_eq!(c.state(), "slow_start");
    // Loss: halve 8 -> 4, ssthresh 4, congestion avoidance.
    c.on_loss(Instant::from_millis(2), &loss(t), &[]);
    assert_eq!(c.cwnd_pkts(), 4);
    assert_eq!(c.ssthresh_pkts(), Some(4));
    assert_eq!(c.state(), "congestion_avoidance");
    // Congestion avoidance: 4 acks -> 5, then 5 acks -> 6.
    for _ in 0..3 {
        full_window_ack(&mut c, t);
    }
    assert_eq!(c.cwnd_pkts(), 4);
    full_window_ack(&mut c, t);
    assert_eq!(c.cwnd_pkts(), 5);
    for _ in 0..5 {
        full_window_ack(&mut c, t);
    }
    assert_eq!(c.cwnd_pkts(), 6);
    assert_eq!(c.max_ack_ratio(), 3);
}

#[test]
fn halves_at_most_once_per_window_of_data() {
    for name in ["ccid2", "reno"] {
        let mut c = build_cc(
            name,
            &CcConfig {
                initial_cwnd_pkts: Some(40),
                ..CcConfig::default()
            },
        )
        .unwrap();
        let t_send = Instant::from_millis(10);
        c.on_loss(Instant::from_millis(100), &loss(t_send), &[]);
        assert_eq!(c.cwnd_pkts(), 20, "{name}");
        // More losses from the same window (sent before the reduction).
        c.on_loss(
            Instant::from_millis(101),
            &loss(Instant::from_millis(50)),
            &[],
        );
        c.on_loss(
            Instant::from_millis(102),
            &loss(Instant::from_millis(100)),
            &[],
        );
        assert_eq!(c.cwnd_pkts(), 20, "{name}");
        // A packet sent after the reduction is a new congestion event.
        c.on_loss(
            Instant::from_millis(300),
            &loss(Instant::from_millis(150)),
            &[],
        );
        assert_eq!(c.cwnd_pkts(), 10, "{name}");
    }
}

#[test]
fn rto_collapses_to_one_packet_and_halves_ssthresh() {
    for name in ["ccid2", "reno"] {
        let mut c = build_cc(
            name,
            &CcConfig {
                initial_cwnd_pkts: Some(30),
                ..CcConfig::default()
            },
        )
        .unwrap();
        c.on_rto(Instant::from_secs_f64(1.0));
        assert_eq!(c.cwnd_pkts(), 1, "{name}");
        assert_eq!(c.ssthresh_pkts(), Some(15), "{name}");
        assert_eq!(c.state(), "slow_start");
    }
}

#[test]
fn an_application_limited_sender_does_not_grow_the_window() {
    for name in ["ccid2", "reno"] {
        let mut c = build_cc(name, &CcConfig::default()).unwrap();
        let w = c.cwnd_pkts();
        let t = Instant::from_millis(1);
        for seq in 0..100 {
            c.on_packet_sent(t, &sent(seq, 1));
            c.on_ack(t, &ack(1, 0, t), &[]);
        }
        assert_eq!(c.cwnd_pkts(), w, "{name}");
    }
}

#[test]
fn unknown_names_are_rejected_with_the_list() {
    let err = build_cc("vegas", &CcConfig::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("unknown congestion control `vegas` (expected one of ccid2"));
    // The list names every controller users may configure, each of which
    // builds and reports that name (`bbr` is the alias of `ccid5`).
    let list: Vec<&str> = msg
        .split_once("(expected one of ")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .expect("a parenthesised list")
        .split(", ")
        .collect();
    for name in cc::CcKind::ALL.iter().map(|k| k.name()) {
        assert!(list.contains(&name), "`{name}` missing from {list:?}");
        let c = build_cc(name, &CcConfig::default()).expect("listed names build");
        assert_eq!(c.name(), name);
    }
    assert_eq!(
        build_cc("bbr", &CcConfig::default()).unwrap().name(),
        "ccid5"
    );
}

/// RFC 3168 §6.1.2 / RFC 4341 §5: a CE mark is a congestion signal like a
/// loss — the window halves, at most once per window of data.
#[test]
fn ecn_marks_halve_the_window_like_a_loss() {
    for name in ["ccid2", "reno", "cubic", "lia"] {
        let mut c = build_cc(
            name,
            &CcConfig {
                initial_cwnd_pkts: Some(40),
                ..CcConfig::default()
            },
        )
        .unwrap();
        let t = Instant::from_millis(50);
        c.on_ecn(Instant::from_millis(100), 2, &ack(2, 30, t), &[]);
        let after = c.cwnd_pkts();
        assert!((20..40).contains(&after), "{name}: {after}");
        c.on_ecn(Instant::from_millis(110), 1, &ack(1, 30, t), &[]);
        assert_eq!(c.cwnd_pkts(), after, "{name}: same window of data");
        c.on_ecn(
            Instant::from_millis(110),
            0,
            &ack(1, 30, Instant::from_millis(105)),
            &[],
        );
        assert_eq!(c.cwnd_pkts(), after, "{name}: no marks, no change");
    }
    // BBRv1 ignores ECN (Linux tcp_bbr.c).
    let mut b = build_cc("ccid5", &CcConfig::default()).unwrap();
    let w = b.cwnd_pkts();
    b.on_ecn(
        Instant::from_millis(100),
        5,
        &ack(5, 3, Instant::from_millis(50)),
        &[],
    );
    assert_eq!(b.cwnd_pkts(), w);
}

/// The controller called `name` (names parse into [`cc::CcKind`], the
/// factory of the built-in controllers).
fn build_cc(
    name: &str,
    config: &CcConfig,
) -> Result<Box<dyn CongestionController>, mpdccp_proto::UnknownName> {
    use mpdccp_proto::cc::ControllerFactory;
    Ok(name.parse::<cc::CcKind>()?.build(config))
}
