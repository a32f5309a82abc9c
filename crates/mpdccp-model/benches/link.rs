//! Per-packet cost of the link model: one `push` plus one `poll_deliver` per
//! packet in steady state (the netem hot path). At 1 Gbit/s of 1500-byte
//! packets a path carries ~83 k packets/s, i.e. a budget of ~12 us per packet.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpdccp_model::scenario::{Direction, Outage, PathSpec, RatePoint, Trace};
use mpdccp_model::Link;
use mpdccp_proto::Instant;

fn spec() -> PathSpec {
    PathSpec {
        name: "p".into(),
        delay_ms: 10.0,
        buffer_bytes: 1_000_000,
        loss: 0.001,
        // 1 Gbit/s with a rate change every second, so the cursor moves.
        rate: (0..10_000)
            .map(|i| RatePoint {
                at_s: i as f64,
                mbps: if i % 2 == 0 { 1000.0 } else { 900.0 },
            })
            .collect(),
        down: vec![Outage {
            from_s: 1e6,
            to_s: 1e6 + 1.0,
        }],
        ..PathSpec::default()
    }
}

/// Pushes one 1500-byte packet every 12 us (1 Gbit/s) and polls the link.
fn steady(c: &mut Criterion, name: &str, spec: PathSpec) {
    let mut g = c.benchmark_group("link");
    g.throughput(Throughput::Elements(1));
    g.bench_function(name, |b| {
        let mut link: Link<u64> = Link::with_direction(&spec, Direction::Up, 1);
        let mut t = 0u64;
        b.iter(|| {
            t += 12_000;
            let now = Instant::from_nanos(t);
            let _ = link.push(now, black_box(t), 1500);
            while let Some(p) = link.poll_deliver(now) {
                black_box(p);
            }
        });
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    steady(c, "push_poll_rate_1gbps", spec());
    let mut trace = spec();
    trace.trace_up = Some("bench".into());
    // 1500 B every ms, 10 lines per ms: 120 Mbit/s... scaled to 1.2 Gbit/s with 100 lines.
    let lines: String = (1..=10)
        .flat_map(|ms| std::iter::repeat_n(ms, 100))
        .map(|ms| format!("{ms}\n"))
        .collect();
    trace.set_trace(Direction::Up, Trace::parse(&lines).expect("valid trace"));
    steady(c, "push_poll_trace_1_2gbps", trace);
}

criterion_group!(benches, bench);
criterion_main!(benches);
