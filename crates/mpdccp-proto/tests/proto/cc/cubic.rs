//! CUBIC formulas (RFC 9438 §4) and HyStart++ constants (RFC 9406 §4.2).

use std::time::Duration;

use mpdccp_proto::cc::cubic::{
    cubic_k, hystart_rtt_thresh, w_cubic, CUBIC_ALPHA, CUBIC_BETA, CUBIC_C,
};
use mpdccp_proto::cc::{self, AckEvent, CcConfig, CongestionController, LossEvent, SentPacket};
use mpdccp_proto::Instant;

fn close(a: f64, b: f64, eps: f64) -> bool {
    (a - b).abs() <= eps
}

#[test]
fn k_and_w_cubic_match_the_reference_values() {
    // W_max = 2304: K = cbrt(2304·0.3/0.4) = 12 s.
    let k = cubic_k(2304.0, 2304.0 * CUBIC_BETA);
    assert!(close(k, 12.000, 5e-4), "K = {k}");
    assert!(close(w_cubic(15.0, k, 2304.0), 2314.8, 1e-3));
    assert!(close(w_cubic(10.0, k, 2304.0), 2300.8, 1e-3));
    let k100 = cubic_k(100.0, 100.0 * CUBIC_BETA);
    assert!(close(k100, 4.2172, 5e-5), "K = {k100}");
    // Constants of RFC 9438 §4.3 / §4.6 / §5.1.
    assert!(close(CUBIC_C, 0.4, 0.0) && close(CUBIC_BETA, 0.7, 0.0));
    assert!(close(CUBIC_ALPHA, 0.529, 5e-4), "alpha = {CUBIC_ALPHA}");
}

#[test]
fn hystart_rtt_threshold_is_clamped_eighth_of_min_rtt() {
    for (rtt_ms, thresh_us) in [(20, 4_000), (60, 7_500), (200, 16_000)] {
        assert_eq!(
            hystart_rtt_thresh(Duration::from_millis(rtt_ms)),
            Duration::from_micros(thresh_us),
            "{rtt_ms} ms"
        );
    }
}

fn ack_at(now: Instant, acked: u32, srtt_ms: u64) -> AckEvent {
    AckEvent {
        acked_pkts: acked,
        acked_bytes: acked as u64 * 1500,
        prior_in_flight_pkts: 1000,
        in_flight_pkts: 1000,
        rtt: Some(Duration::from_millis(srtt_ms)),
        srtt: Duration::from_millis(srtt_ms),
        min_rtt: Duration::from_millis(srtt_ms),
        rate: None,
        delivered_pkts: 0,
        lost_pkts_total: 0,
        largest_acked_sent_time: now,
    }
}

/// After a loss at W = 100 the window is β·W and, acked at a steady pace,
/// returns to W_max about K = 4.2 s later, following W_cubic(t + RTT).
#[test]
fn window_follows_the_cubic_curve_after_a_loss() {
    let mut c = cc::Cubic::new(&CcConfig {
        initial_cwnd_pkts: Some(100),
        hystart: cc::SlowStartExit::LossOnly,
        ..CcConfig::default()
    });
    let big = SentPacket {
        seq: 0,
        bytes: 1500,
        in_flight_pkts: 10_000,
        app_limited: false,
    };
    let t0 = Instant::from_secs_f64(1.0);
    c.on_packet_sent(t0, &big);
    c.on_loss(
        t0,
        &LossEvent {
            lost_pkts: 1,
            lost_bytes: 1500,
            in_flight_pkts: 99,
            largest_lost_sent_time: t0,
            delivered_pkts: 0,
        },
        &[],
    );
    assert_eq!(c.cwnd_pkts(), 70);
    assert!(close(c.w_max_pkts(), 100.0, 1e-9));
    assert_eq!(c.state(), "congestion_avoidance");
    // Ack a full window every 100 ms RTT for 6 s (at this RTT the cubic
    // curve stays above the Reno-friendly estimate); sample the window.
    let k = cubic_k(100.0, 70.0);
    let mut at_k = 0;
    for step in 1..=60u64 {
        let now = t0 + Duration::from_millis(100 * step);
        c.on_packet_sent(now, &big);
        let w = c.cwnd_pkts();
        c.on_ack(now, &ack_at(now, w, 100), &[]);
        let t = (now - t0).as_secs_f64();
        if (t - k).abs() < 0.05 {
            at_k = c.cwnd_pkts();
        }
        // Never above the curve one RTT ahead.
        let ahead = w_cubic(t + 0.1, k, 100.0);
        assert!(
            (c.cwnd_pkts() as f64) <= ahead + 1.0,
            "t={t}: {} > {ahead}",
            c.cwnd_pkts()
        );
    }
    assert!((99..=101).contains(&at_k), "cwnd at K = {at_k}");
    // Convex region: beyond W_max after 6 s (W(6) = 100 + 0.4·1.78³ ≈ 102).
    assert!(c.cwnd_pkts() >= 101);
}

#[test]
fn fast_convergence_lowers_w_max_when_the_peak_falls_short() {
    let mut c = cc::Cubic::new(&CcConfig {
        initial_cwnd_pkts: Some(100),
        ..CcConfig::default()
    });
    let loss = |t: Instant| LossEvent {
        lost_pkts: 1,
        lost_bytes: 1500,
        in_flight_pkts: 0,
        largest_lost_sent_time: t,
        delivered_pkts: 0,
    };
    c.on_loss(
        Instant::from_millis(10),
        &loss(Instant::from_millis(5)),
        &[],
    );
    assert_eq!(c.cwnd_pkts(), 70);
    // Second loss at 70 < W_max = 100: W_max = 70·(1+β)/2 = 59.5 (§4.7).
    c.on_loss(
        Instant::from_millis(500),
        &loss(Instant::from_millis(400)),
        &[],
    );
    assert!(close(c.w_max_pkts(), 59.5, 1e-9), "{}", c.w_max_pkts());
    assert_eq!(c.cwnd_pkts(), 49);
    // RTO (§4.8): cwnd 1, ssthresh = β·cwnd.
    c.on_rto(Instant::from_secs_f64(2.0));
    assert_eq!(c.cwnd_pkts(), 1);
    assert_eq!(c.ssthresh_pkts(), Some(34));
}

#[test]
fn optional_pacing_follows_cwnd_over_srtt() {
    let mut c = build_cc(
        "cubic",
        &CcConfig {
            pacing: true,
            initial_cwnd_pkts: Some(10),
            mss_bytes: 1000,
            ..CcConfig::default()
        },
    )
    .unwrap();
    assert_eq!(c.pacing_rate_bytes_per_s(), None, "no RTT yet");
    let now = Instant::from_millis(100);
    c.on_ack(now, &ack_at(now, 0, 100), &[]);
    // Slow start: 2 × 10 × 1000 B / 0.1 s.
    assert_eq!(c.pacing_rate_bytes_per_s(), Some(200_000));
    assert_eq!(
        build_cc("cubic", &CcConfig::default())
            .unwrap()
            .pacing_rate_bytes_per_s(),
        None
    );
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

/// Slow start over rounds of a whole window: each round's packets sent at
/// once and acknowledged one by one an RTT later (`rtt_ms(round)`).
/// Returns the state and window after each round.
fn slow_start_rounds(
    linux: bool,
    rounds: u32,
    rtt_ms: impl Fn(u32) -> u64,
) -> Vec<(&'static str, u32)> {
    let mut c = cc::Cubic::new(&CcConfig {
        hystart: if linux {
            cc::SlowStartExit::Linux
        } else {
            cc::SlowStartExit::HyStartPlusPlus
        },
        ..CcConfig::default()
    });
    let mut t = Instant::from_secs_f64(1.0);
    let mut out = Vec::new();
    for round in 0..rounds {
        let w = c.cwnd_pkts();
        let pkt = |seq| SentPacket {
            seq,
            bytes: 1400,
            in_flight_pkts: w,
            app_limited: false,
        };
        for seq in 0..u64::from(w) {
            c.on_packet_sent(t, &pkt(seq));
        }
        let sent = t;
        t += Duration::from_millis(rtt_ms(round));
        for _ in 0..w {
            let mut ack = ack_at(t, 1, rtt_ms(round));
            ack.largest_acked_sent_time = sent;
            c.on_ack(t, &ack, &[]);
        }
        out.push((c.state(), c.cwnd_pkts()));
    }
    out
}

/// Linux's HyStart (`SlowStartExit::Linux`) ends slow start at the first round
/// whose RTT exceeds the smallest ever by clamp(min RTT / 8, 4, 16) ms,
/// with ssthresh = cwnd; HyStart++ (RFC 9406 §4.2)
/// goes to conservative slow start instead and keeps growing.
#[test]
fn linux_hystart_leaves_slow_start_at_the_first_rtt_rise() {
    // 20 ms for four rounds (3 → 48 packets), then 30 ms: a 10 ms rise,
    // above the 4 ms threshold.
    let rtt = |round: u32| if round < 4 { 20 } else { 30 };
    let linux = slow_start_rounds(true, 6, rtt);
    let rfc = slow_start_rounds(false, 6, rtt);
    assert_eq!(linux[3], ("slow_start", 48));
    assert_eq!(rfc[3], ("slow_start", 48));
    // Round 5: the 8th sample of the round shows the rise; Linux stops
    // there (48 + 8 acked before it), RFC 9406 continues at a quarter.
    assert_eq!(linux[4].0, "congestion_avoidance");
    assert!((55..=57).contains(&linux[4].1), "{:?}", linux[4]);
    assert_eq!(rfc[4].0, "conservative_slow_start");
    assert!(rfc[5].1 > linux[5].1 + 10, "{rfc:?} vs {linux:?}");
}
