//! A 15 Mbit/s CBR source through one link whose rate drops from 100 to
//! 10 Mbit/s at t = 5 s (E1 without congestion control): the link model, the
//! recorder and the output writer together.

use std::collections::BTreeMap;
use std::time::Duration;

use mpdccp_model::{write_outputs, Link, Recorder, Scenario, Summary};
use mpdccp_proto::Instant;

const E1: &str = r#"
name = "cbr-over-drop"
duration_s = 10
seed = 1
[[path]]
name = "p1"
delay_ms = 5
buffer_bytes = 150000
rate = [{ at_s = 0, mbps = 100 }, { at_s = 5, mbps = 10 }]
[[flow]]
name = "app"
rate_mbps = 15
packet_bytes = 1250
[[window]]
name = "after_drop"
from_s = 6
to_s = 10
"#;

fn run(s: &Scenario) -> (Summary, mpdccp_model::TimeSeries) {
    let mut link: Link<(u64, Instant)> = Link::new(&s.path[0], s.seed);
    let mut rec = Recorder::new(s);
    // 1250 B at 15 Mbit/s: one packet every 666.667 us.
    let gap_ns = 1250 * 8 * 1_000_000_000 / 15_000_000;
    let end = s.end();
    let mut next_send = Instant::ZERO;
    let mut seq = 0;
    loop {
        let next_rx = link.next_event().unwrap_or(Instant::MAX);
        let now = next_send.min(next_rx);
        if now >= end {
            break;
        }
        while let Some(d) = link.poll_delivery(now) {
            let (_, sent) = d.pkt;
            rec.flow_delivered(0, now, d.len_bytes, now - sent, false);
            rec.path_delivered(0, now, d.len_bytes);
            rec.path_queue_delay(0, now, d.queue_delay);
            rec.path_rtt(0, now, (now - sent) + Duration::from_millis(5));
        }
        if now == next_send {
            rec.flow_sent(0, now, 1250);
            rec.path_sent(0, now, 1250);
            if link.push(now, (seq, now), 1250).is_err() {
                rec.flow_lost(0, now, 1);
                rec.path_lost(0, now, 1);
            }
            rec.path_sample(
                0,
                now,
                10.0,
                Some(Duration::from_millis(10)),
                link.queue_bytes(),
            );
            seq += 1;
            next_send = Instant::from_nanos(seq * gap_ns);
        }
    }
    rec.finish(BTreeMap::new())
}

#[test]
fn rate_drop_fills_the_buffer_and_caps_delivery_at_the_new_rate() {
    let s = Scenario::from_toml_str(E1).unwrap();
    let (sum, ts) = run(&s);
    let w = &sum.windows["after_drop"];
    let (f, p) = (&w.flows[0], &w.paths[0]);
    // After the drop the link delivers its 10 Mbit/s, no more, no less.
    assert!((p.throughput_mbps - 10.0).abs() < 0.05, "{p:?}");
    assert!((f.goodput_mbps - 10.0).abs() < 0.05, "{f:?}");
    // The standing queue is the full buffer: 150 kB at 10 Mbit/s = 120 ms,
    // plus 1 ms serialization and 5 ms propagation.
    assert!((f.owd_ms.p50 - 126.0).abs() < 1.5, "{:?}", f.owd_ms);
    assert!(
        (p.queue_delay_ms.p95 - 120.0).abs() < 1.5,
        "{:?}",
        p.queue_delay_ms
    );
    // 5 Mbit/s excess is dropped at the tail: about a third of what is sent.
    let lost_share = f.lost_pkts as f64 / f.sent_pkts as f64;
    assert!((lost_share - 1.0 / 3.0).abs() < 0.01, "{lost_share}");
    // Before the drop: 15 Mbit/s at 5.1 ms (5 ms + 0.1 ms serialization).
    let before = ts.series(mpdccp_model::TsKind::Flow, "app", |r| r.owd_ms);
    assert!((before[10].1 - 5.1).abs() < 1e-3, "{:?}", before[10]);

    let dir = std::env::var_os("MPDCCP_MODEL_PLOT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("mpdccp-model-e2e-{}", std::process::id()))
        });
    write_outputs(&dir, &sum, &ts).unwrap();
    for f in [
        "summary.json",
        "timeseries.csv",
        "delay.png",
        "throughput.png",
        "cwnd.png",
        "queue.png",
        "owd_cdf.png",
    ] {
        assert!(dir.join(f).metadata().unwrap().len() > 100, "{f}");
    }
    let again =
        Summary::from_json(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(again, sum);
    // Identical inputs, byte-identical outputs.
    let (sum2, ts2) = run(&s);
    assert_eq!(
        sum2.to_json(),
        std::fs::read_to_string(dir.join("summary.json")).unwrap()
    );
    assert_eq!(
        ts2.to_csv(),
        std::fs::read_to_string(dir.join("timeseries.csv")).unwrap()
    );
    if std::env::var_os("MPDCCP_MODEL_PLOT_DIR").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
