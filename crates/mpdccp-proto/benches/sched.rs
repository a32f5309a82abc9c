//! Per-packet cost of one scheduler decision, 2 / 4 / 8 paths.
//!
//! Path 0 is the preferred path and is full, so CPF-like schedulers scan past
//! it and spill; the others have room. `out` is reused, as in the connection.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpdccp_proto::sched::{self, PacketMeta, SchedulerConfig, SchedulerKind};
use mpdccp_proto::{Instant, PathId, PathView};

fn paths(n: usize) -> Vec<PathView> {
    (0..n)
        .map(|i| PathView {
            priority: if i == 0 { 4 } else { 3 },
            srtt: Some(Duration::from_millis(10 + 7 * i as u64)),
            min_rtt: Some(Duration::from_millis(8 + 7 * i as u64)),
            rttvar: Duration::from_millis(2),
            cwnd_pkts: 40,
            in_flight_pkts: if i == 0 { 40 } else { 10 + i as u32 },
            ..PathView::new(PathId(i as u32))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sched_select");
    group.throughput(Throughput::Elements(1));
    for kind in SchedulerKind::ALL {
        let name = kind.name();
        for n in [2usize, 4, 8] {
            let views = paths(n);
            let config = SchedulerConfig {
                kind: *kind,
                weights: (1..=n as u32).collect(),
                rr_burst: 2,
                ..SchedulerConfig::default()
            };
            let mut s = sched::build(&config);
            let pkt = PacketMeta {
                len: 1200,
                queued_pkts: 8,
                queued_bytes: 9600,
                sparse: false,
            };
            let mut out = Vec::with_capacity(8);
            let mut now = Instant::from_millis(1);
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    out.clear();
                    now += Duration::from_micros(1);
                    s.select(now, black_box(&pkt), black_box(&views), &mut out);
                    black_box(out.first().copied())
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);
