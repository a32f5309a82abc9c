//! Congestion window validation (`cc::validation`): RFC 4341 §5.1 / RFC
//! 2861 §3 halving per RTO of idle down to the restart window
//! `min(cwnd, max(IW, pipeACK))` (RFC 7661 §4.2 pipeACK), the NVP expiry
//! (RFC 7661 §5), and no growth while application limited (RFC 7661 §4.3).
//! Each loss-based controller is driven round by round over a 100 ms RTT.

use std::time::Duration;

use mpdccp_proto::cc::{self, AckEvent, CcConfig, CongestionController, SentPacket};
use mpdccp_proto::Instant;

const RTT: Duration = Duration::from_millis(100);

fn config(validation: bool) -> CcConfig {
    CcConfig {
        mss_bytes: 1400,                      // RFC 3390 initial window: 3 packets
        hystart: cc::SlowStartExit::LossOnly, // CUBIC's slow start as Reno's, for equal numbers
        cwnd_validation: validation,
        ..CcConfig::default()
    }
}

fn controllers(validation: bool) -> Vec<Box<dyn CongestionController>> {
    let c = config(validation);
    vec![
        Box::new(cc::Ccid2::new(&c)),
        Box::new(cc::Reno::new(&c)),
        Box::new(cc::Cubic::new(&c)),
        Box::new(cc::CoupledReno::lia(&c)),
    ]
}

/// One round at `t`: sends min(cwnd, limit) packets back to back, and the
/// acks of all of them arrive one by one at `t + RTT`. Returns the round's
/// send time.
fn round(c: &mut dyn CongestionController, seq: &mut u64, t: Instant, limit: u32) -> Instant {
    let n = c.cwnd_pkts().min(limit);
    for i in 1..=n {
        *seq += 1;
        let pkt = SentPacket {
            seq: *seq,
            bytes: 1400,
            in_flight_pkts: i,
            app_limited: n < c.cwnd_pkts(),
        };
        c.on_packet_sent(t, &pkt);
    }
    for left in (0..n).rev() {
        let ack = AckEvent {
            acked_pkts: 1,
            acked_bytes: 1400,
            prior_in_flight_pkts: left + 1,
            in_flight_pkts: left,
            rtt: Some(RTT),
            srtt: RTT,
            min_rtt: RTT,
            rate: None,
            delivered_pkts: 0,
            lost_pkts_total: 0,
            largest_acked_sent_time: t,
        };
        c.on_ack(t + RTT, &ack, &[]);
    }
    t
}

/// Rounds of at most `limit` packets until the window stops changing;
/// returns the last round's send time.
fn bulk(c: &mut dyn CongestionController, seq: &mut u64, limit: u32) -> Instant {
    let mut t = Instant::from_secs_f64(1.0);
    for _ in 0..40 {
        round(c, seq, t, limit);
        t += RTT;
    }
    t - RTT
}

fn secs(d: f64) -> Duration {
    Duration::from_secs_f64(d)
}

/// At most 20 packets a round: slow start takes cwnd 3 → 6 → 12 → 24 → 44
/// (a round of 20 with cwnd 24 is at least half used, RFC 7661 §4.3 /
/// `tcp_is_cwnd_limited`), then 20 of 44 is application limited and the
/// window stays 44 with pipeACK 20. Idle since the last send (the RTO is
/// RFC 6298's 200 ms floor: srtt 100 ms, rttvar ≈ 0):
/// 0.15 s < 1 RTO: 44; 0.25 s = 1 RTO: 44/2 = 22; 0.45 s: one more RTO,
/// 22/2 = 11, raised to the restart window max(IW 3, pipeACK 20) = 20;
/// 10 s: still 20 (the validated window survives the idle); after the NVP
/// (300 s) pipeACK has expired and the window is the initial 3.
#[test]
fn idle_window_halves_per_rto_down_to_the_validated_window() {
    for mut c in controllers(true) {
        let name = c.name();
        let mut seq = 0;
        let last = bulk(c.as_mut(), &mut seq, 20);
        assert_eq!(c.cwnd_pkts(), 44, "{name}: window after the rounds");
        assert_eq!(c.pipe_ack_pkts(last + RTT), Some(20), "{name}");
        let steps = [(0.15, 44), (0.25, 22), (0.45, 20), (10.0, 20), (301.0, 3)];
        for (idle, want) in steps {
            c.validate_window(last + secs(idle));
            assert_eq!(c.cwnd_pkts(), want, "{name}: cwnd after {idle} s idle");
        }
    }
}

/// The same rounds with validation off keep the 44-packet window whole
/// (the pinned behaviour of published scenarios).
#[test]
fn without_validation_the_idle_window_is_kept() {
    for mut c in controllers(false) {
        let mut seq = 0;
        let last = bulk(c.as_mut(), &mut seq, 20);
        c.validate_window(last + secs(10.0));
        let pkt = SentPacket {
            seq: seq + 1,
            bytes: 1400,
            in_flight_pkts: 1,
            app_limited: true,
        };
        c.on_packet_sent(last + secs(10.0), &pkt);
        assert_eq!(c.cwnd_pkts(), 44, "{}", c.name());
    }
}

/// A keyframe after 10 s idle: a path that carried 40 packets a round
/// before the idle (cwnd 88, pipeACK 40) keeps a 40-packet window, so a
/// 30-packet burst leaves at once, in the first round trip (RFC 2861's
/// restart window, IW = 3, would take four: 3 + 6 + 12 + 24 ≥ 30) —
/// and no more than the path delivered per round trip (40) is released.
#[test]
fn keyframe_after_ten_seconds_idle_leaves_within_one_rtt() {
    for mut c in controllers(true) {
        let name = c.name();
        let mut seq = 0;
        let last = bulk(c.as_mut(), &mut seq, 40);
        assert_eq!(c.cwnd_pkts(), 88, "{name}");
        let t = last + secs(10.0);
        c.validate_window(t);
        let w = c.cwnd_pkts();
        assert!((30..=40).contains(&w), "{name}: restart window {w}");
        // All 30 go at `t`: each send finds room in the window.
        for i in 1..=30u32 {
            assert!(i <= c.cwnd_pkts(), "{name}: packet {i} waits");
            seq += 1;
            let pkt = SentPacket {
                seq,
                bytes: 1400,
                in_flight_pkts: i,
                app_limited: i == 30,
            };
            c.on_packet_sent(t, &pkt);
        }
    }
}

/// RFC 7661 §4.3 / RFC 4341 §5.1: 200 rounds of 2 packets with a window of
/// 24 (never half used) do not grow it, idle or not.
#[test]
fn no_growth_while_application_limited() {
    for mut c in controllers(true) {
        let name = c.name();
        let mut seq = 0;
        let mut t = Instant::from_secs_f64(1.0);
        while c.cwnd_pkts() < 24 {
            round(c.as_mut(), &mut seq, t, u32::MAX);
            t += RTT;
        }
        let w = c.cwnd_pkts();
        for _ in 0..200 {
            round(c.as_mut(), &mut seq, t, 2);
            t += RTT;
        }
        assert_eq!(c.cwnd_pkts(), w, "{name}: grew while application limited");
    }
}

/// The controllers with `cwnd_validation_peak` (restart at 2 · pipeACK_peak).
fn peak_controllers() -> Vec<Box<dyn CongestionController>> {
    let c = CcConfig {
        cwnd_validation_peak: true,
        ..config(true)
    };
    vec![
        Box::new(cc::Ccid2::new(&c)),
        Box::new(cc::Reno::new(&c)),
        Box::new(cc::Cubic::new(&c)),
        Box::new(cc::CoupledReno::lia(&c)),
    ]
}

/// A video stream: keyframe rounds of 40 packets validate the
/// window (cwnd 88, pipeACK 40), then 3 s of steady frames at 4 packets a
/// round (pipeACK's last three samples: 4), then a 5 s pause. RFC 7661 §4.3
/// keeps cwnd through the non-validated period whether the sender idles
/// or is rate-limited, and §4.1 counts a window as validated while
/// pipeACK ≥ ½·cwnd. With `cwnd_validation_peak` the restart window is
/// 2 · the peak pipeACK of the NVP (2 · 40 = 80), so the next 40-packet
/// keyframe leaves at once; the default rule restarts at the steady frames'
/// 4 (then 4 + 8 + 16 + 32 ≥ 40: four round trips). After the NVP both are
/// at IW.
#[test]
fn keyframe_after_a_pause_finds_the_window_of_the_last_keyframe() {
    for (peak, want) in [(true, 80), (false, 4)] {
        let cs = if peak {
            peak_controllers()
        } else {
            controllers(true)
        };
        for mut c in cs {
            let name = c.name();
            let mut seq = 0;
            let mut t = bulk(c.as_mut(), &mut seq, 40) + RTT;
            assert_eq!(c.cwnd_pkts(), 88, "{name}");
            for _ in 0..30 {
                round(c.as_mut(), &mut seq, t, 4);
                t += RTT;
            }
            let last = t - RTT;
            assert_eq!(c.pipe_ack_pkts(last + RTT), Some(4), "{name}: steady");
            assert_eq!(c.cwnd_pkts(), 88, "{name}: no growth, no decay");
            c.validate_window(last + secs(5.0));
            assert_eq!(c.cwnd_pkts(), want, "{name} (peak {peak}): after the pause");
            c.validate_window(last + secs(302.0));
            assert_eq!(c.cwnd_pkts(), 3, "{name}: after the NVP");
        }
    }
}

/// With `cwnd_validation_peak`, bulk rounds of 20 (cwnd 44, pipeACK 20):
/// the window idle for an RTO halves to 22, raised to 2 · 20 = 40, and
/// stays there until the NVP ends (then IW).
#[test]
fn peak_rule_keeps_twice_the_pipe_ack_through_idle() {
    for mut c in peak_controllers() {
        let name = c.name();
        let mut seq = 0;
        let last = bulk(c.as_mut(), &mut seq, 20);
        assert_eq!(c.cwnd_pkts(), 44, "{name}");
        for (idle, want) in [(0.15, 44), (0.25, 40), (10.0, 40), (301.0, 3)] {
            c.validate_window(last + secs(idle));
            assert_eq!(c.cwnd_pkts(), want, "{name}: cwnd after {idle} s idle");
        }
    }
}

/// `[tunnel] initial_cwnd_pkts` reaches the controllers' configuration (10
/// instead of RFC 3390's 3 for 1400-byte packets) and bounds are checked.
#[test]
fn the_tunnel_setting_sets_every_controllers_initial_window() {
    use mpdccp_proto::conn::TunnelSettings;
    let mut s = TunnelSettings::default();
    let c = s.connection_config(1400).cc_config;
    assert_eq!(cc::Ccid2::new(&c).cwnd_pkts(), 3);
    s.initial_cwnd_pkts = Some(10);
    assert_eq!(s.validate(None), Ok(()));
    let c = s.connection_config(1400).cc_config;
    let controllers: Vec<Box<dyn CongestionController>> = vec![
        Box::new(cc::Ccid2::new(&c)),
        Box::new(cc::Cubic::new(&c)),
        Box::new(cc::CoupledReno::lia(&c)),
    ];
    for ctl in &controllers {
        assert_eq!(ctl.cwnd_pkts(), 10);
    }
    for bad in [0, 1001] {
        s.initial_cwnd_pkts = Some(bad);
        assert!(s.validate(None).is_err(), "{bad}");
    }
}
