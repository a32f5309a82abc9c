//! Per-packet cost of reordering (push + pop, timers included), 2 / 4 / 8
//! paths: packets round-robin over paths whose one-way delays differ by
//! 2 ms each (10, 12, 14, … ms), one packet every 10 µs (≈ 1 Gbit/s of
//! 1200-byte packets, so up to 1 400 packets held with 8 paths), 1 % lost.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpdccp_proto::reorder::{self, PathReceiveState, ReorderConfig, ReorderItem, ReorderKind};
use mpdccp_proto::{Instant, PathId, PathView};

const PACKETS: u64 = 20_000;

fn scenario(n: usize) -> (Vec<PathView>, Vec<(Instant, u64, PathId)>) {
    let views: Vec<PathView> = (0..n)
        .map(|i| PathView {
            owd: Some(Duration::from_millis(10 + 2 * i as u64)),
            ..PathView::new(PathId(i as u32))
        })
        .collect();
    let mut arrivals: Vec<(Instant, u64, PathId)> = (0..PACKETS)
        .filter(|s| s % 100 != 37)
        .map(|s| {
            let p = (s % n as u64) as usize;
            let sent = Instant::from_micros(10 * s);
            (sent + views[p].owd.unwrap(), s, PathId(p as u32))
        })
        .collect();
    arrivals.sort();
    (views, arrivals)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("reorder_push_pop");
    group.throughput(Throughput::Elements(PACKETS));
    for kind in ReorderKind::ALL {
        let name = kind.name();
        for n in [2usize, 4, 8] {
            let (views, arrivals) = scenario(n);
            let config = ReorderConfig {
                kind: *kind,
                initial_seq: Some(0),
                max_timeout: Duration::from_millis(200),
                ..ReorderConfig::default()
            };
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    let mut r = reorder::build(&config);
                    let mut rx: Vec<PathReceiveState> = views
                        .iter()
                        .map(|p| PathReceiveState {
                            path: p.id,
                            highest_seq: None,
                            in_order: true,
                        })
                        .collect();
                    let mut delivered = 0u64;
                    for &(t, seq, path) in &arrivals {
                        if r.poll_timeout().is_some_and(|d| d <= t) {
                            r.handle_timeout(t);
                        }
                        let st = &mut rx[path.0 as usize];
                        st.highest_seq = Some(seq);
                        let item = ReorderItem {
                            seq,
                            path,
                            arrival: t,
                            payload: Vec::new(),
                        };
                        r.push(t, item, &views, &rx);
                        while let Some(d) = r.pop(t) {
                            delivered += black_box(d.seq) & 1;
                        }
                    }
                    black_box(delivered)
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
        .measurement_time(Duration::from_millis(1500))
        .sample_size(10);
    targets = bench
}
criterion_main!(benches);
