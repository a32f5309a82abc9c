//! Per-ack and per-send cost of every congestion controller.
//!
//! Each controller is first driven into steady congestion avoidance (a
//! closed loop of sends and acks with a periodic loss), then the benchmark
//! times one `on_ack` (with a delivery-rate sample and a two-path coupled
//! view) and one `on_packet_sent`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use mpdccp_proto::cc::{
    self, AckEvent, CcConfig, CongestionController, LossEvent, RateSample, SentPacket,
};
use mpdccp_proto::{Instant, PathId};

const RTT: Duration = Duration::from_millis(40);

fn ack(now: Instant, i: u64, cwnd: u32) -> AckEvent {
    AckEvent {
        acked_pkts: 1,
        acked_bytes: 1400,
        prior_in_flight_pkts: cwnd,
        in_flight_pkts: cwnd.saturating_sub(1),
        rtt: Some(RTT),
        srtt: RTT,
        min_rtt: RTT,
        rate: Some(RateSample {
            delivered_pkts: cwnd as u64,
            delivered_bytes: cwnd as u64 * 1400,
            interval: RTT,
            prior_delivered_pkts: i.saturating_sub(cwnd as u64),
            is_app_limited: false,
            rtt: RTT,
        }),
        delivered_pkts: i,
        lost_pkts_total: i / 1000,
        largest_acked_sent_time: now.saturating_sub(RTT),
    }
}

fn warmed_up(name: &str) -> (Box<dyn CongestionController>, Instant, u64) {
    let mut c = build_cc(name, &CcConfig::default()).unwrap();
    let mut now = Instant::from_millis(1);
    let mut i = 0;
    for _ in 0..20_000 {
        i += 1;
        now += Duration::from_micros(100);
        let w = c.cwnd_pkts();
        c.on_packet_sent(
            now,
            &SentPacket {
                seq: i,
                bytes: 1400,
                in_flight_pkts: w,
                app_limited: false,
            },
        );
        c.on_ack(now, &ack(now, i, w), &[]);
        if i % 1000 == 0 {
            c.on_loss(
                now,
                &LossEvent {
                    lost_pkts: 1,
                    lost_bytes: 1400,
                    in_flight_pkts: w / 2,
                    largest_lost_sent_time: now.saturating_sub(RTT / 2),
                    delivered_pkts: i,
                },
                &[],
            );
        }
    }
    (c, now, i)
}

fn bench(crit: &mut Criterion) {
    let mut group = crit.benchmark_group("cc");
    group.measurement_time(Duration::from_secs(1));
    group.warm_up_time(Duration::from_millis(300));
    for name in cc::CcKind::valid_names() {
        let (mut c, mut now, mut i) = warmed_up(name);
        group.bench_function(BenchmarkId::new("on_ack", name), |b| {
            b.iter(|| {
                i += 1;
                now += Duration::from_micros(10);
                let w = c.cwnd_pkts();
                let other = cc::CcSnapshot {
                    path: PathId(1),
                    cwnd_pkts: 50.0,
                    srtt: Duration::from_millis(20),
                    established: true,
                    olia_l1_pkts: 100.0,
                    olia_l2_pkts: 10.0,
                    virtual_reno_cwnd_pkts: 50.0,
                    virtual_reno_is_cubic: false,
                };
                let view = [c.snapshot(PathId(0), RTT, true), other];
                c.on_ack(now, black_box(&ack(now, i, w)), black_box(&view));
            })
        });
        let (mut c, mut now, mut i) = warmed_up(name);
        group.bench_function(BenchmarkId::new("on_packet_sent", name), |b| {
            b.iter(|| {
                i += 1;
                now += Duration::from_micros(10);
                let w = c.cwnd_pkts();
                c.on_packet_sent(
                    now,
                    black_box(&SentPacket {
                        seq: i,
                        bytes: 1400,
                        in_flight_pkts: w,
                        app_limited: false,
                    }),
                );
                black_box(c.pacing_rate_bytes_per_s());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

/// The controller called `name` (names parse into [`cc::CcKind`], the
/// factory of the built-in controllers).
fn build_cc(
    name: &str,
    config: &CcConfig,
) -> Result<Box<dyn CongestionController>, mpdccp_proto::UnknownName> {
    use mpdccp_proto::cc::ControllerFactory;
    Ok(name.parse::<cc::CcKind>()?.build(config))
}
