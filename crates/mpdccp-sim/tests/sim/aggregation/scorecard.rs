//! The aggregation benchmark's scorecard: references, ratios, capacity of a
//! trace path, determinism and the files it writes.

use mpdccp_model::scenario::{Direction, Trace};
use mpdccp_sim::aggregation::{self, report, Options, Scorecard};

fn opts(mix: &str, inner: &str, ccs: &[&str], duration_s: f64) -> Options {
    Options {
        mixes: vec![mix.into()],
        inners: vec![inner.into()],
        ccs: ccs.iter().map(|s| s.to_string()).collect(),
        duration_s,
        jobs: 2,
        ..Options::default()
    }
}

fn run(o: &Options) -> Scorecard {
    aggregation::run(o, |_, _, _, res, _| {
        assert!(res.is_ok(), "{res:?}");
    })
    .expect("valid options")
}

#[test]
fn the_steady_window_skips_start_up() {
    assert_eq!(aggregation::steady_window(60.0), (12.0, 60.0));
    assert_eq!(aggregation::steady_window(10.0), (5.0, 10.0));
    assert_eq!(aggregation::steady_window(100.0), (20.0, 100.0));
}

#[test]
fn cells_are_scored_against_the_direct_runs_and_the_capacity_sum() {
    let card = run(&opts("equal", "tcp-cubic", &["ccid2", "cubic"], 12.0));
    assert_eq!(card.runs_failed, 0);
    let r = card.reference("equal", "tcp-cubic").unwrap();
    assert_eq!(r.capacity_sum_mbps, 60.0);
    // The faster path has 8 ms one way.
    assert_eq!(r.faster_path_rtt_ms, 16.0);
    assert_eq!(r.direct.len(), 2);
    for d in &r.direct {
        assert_eq!(d.capacity_mbps, 30.0);
        // A direct TCP segment is its payload on the link (no tunnel
        // header): the payload share is 1, so a saturated 30 Mbit/s path
        // delivers close to 30 Mbit/s of payload in the steady window.
        let g = d.goodput_mbps.unwrap();
        assert!((g - 30.0).abs() < 0.03 * 30.0, "{}: {g}", d.path);
    }
    let best = r
        .direct
        .iter()
        .filter_map(|d| d.goodput_mbps)
        .fold(0.0, f64::max);
    assert_eq!(r.best_single_mbps, Some(best));
    assert_eq!(card.cells.len(), 2);
    for c in &card.cells {
        let g = c.goodput_mbps.unwrap();
        assert!(g > 5.0, "{}: {g}", c.cc);
        assert!((c.ratio_best.unwrap() - g / best).abs() < 1e-5);
        assert!((c.ratio_sum.unwrap() - g / 60.0).abs() < 1e-5);
        // equal has a sum threshold (0.9): two checks, and pass is their AND.
        assert_eq!(c.checks.len(), 2);
        assert_eq!(c.checks[0].limit, 0.95);
        assert_eq!(c.checks[1].limit, 0.9);
        assert_eq!(
            c.pass,
            c.ratio_best.unwrap() >= 0.95 && c.ratio_sum.unwrap() >= 0.9
        );
    }
    assert_eq!(
        card.cells_passed + card.cells_failed,
        card.cells.len(),
        "every cell counted once"
    );
}

#[test]
fn udp_cbr_is_offered_ninety_percent_and_judged_against_it() {
    let card = run(&opts("equal", "udp", &["ccid2"], 8.0));
    let r = card.reference("equal", "udp").unwrap();
    assert_eq!(r.offered_mbps, Some(54.0));
    // Alone on one path the CBR is capped by the path's 30 Mbit/s (give or
    // take the packet in flight at each end of the window).
    for d in &r.direct {
        let g = d.goodput_mbps.unwrap();
        assert!((g - 30.0).abs() < 0.01, "{g}");
    }
    let c = &card.cells[0];
    let sum_check = &c.checks[1];
    assert_eq!(sum_check.what, "goodput / offered load");
    assert!((sum_check.value.unwrap() - c.goodput_mbps.unwrap() / 54.0).abs() < 1e-5);
}

#[test]
fn the_real_time_flow_is_judged_on_the_faster_paths_rtt() {
    let card = run(&opts("asym", "rt+cubic", &["ccid2"], 8.0));
    let c = &card.cells[0];
    let rt = c
        .checks
        .iter()
        .find(|k| k.what.starts_with("real-time"))
        .unwrap();
    // asym's faster path: 12 ms one way, RTT 24 ms, limit 1.5 × 24.
    assert_eq!(rt.limit, 36.0);
    assert_eq!(rt.value, c.rt_owd_p95_ms);
    assert!(c.rt_owd_p95_ms.unwrap() >= 12.0, "{c:?}");
    assert_eq!(rt.pass, c.rt_owd_p95_ms.unwrap() <= 36.0);
    // The rt flow is 1 Mbit/s of the cell's goodput; the reference runs it too.
    let r = card.reference("asym", "rt+cubic").unwrap();
    assert!(r.direct.iter().all(|d| d.rt_owd_p95_ms.is_some()));
}

/// The trace's capacity over `[a, b)` s by walking its opportunities period
/// by period (independently of the benchmark's closed form).
fn brute_force_mbps(t: &Trace, a: f64, b: f64) -> f64 {
    let mut n = 0u64;
    let mut base = 0u64;
    while (base as f64) < b * 1e3 {
        for &o in &t.opportunities_ms {
            let at = (base + o) as f64 / 1e3;
            if at >= a && at < b {
                n += 1;
            }
        }
        base += t.period_ms;
    }
    n as f64 * 1500.0 * 8.0 / (b - a) / 1e6
}

#[test]
fn a_trace_paths_capacity_is_the_traces_mean_over_the_window() {
    let o = opts("trace", "udp", &["ccid2"], 30.0);
    let jobs = aggregation::plan(&o).unwrap();
    let lte = jobs[0].scenario.path[1]
        .trace(Direction::Up)
        .expect("the trace mix's second path is the LTE trace")
        .clone();
    let (from, to) = aggregation::steady_window(30.0);
    let want = 16.0 + brute_force_mbps(&lte, from, to);
    let results: Vec<_> = jobs
        .iter()
        .map(|j| Err::<mpdccp_model::results::Summary, _>(format!("not run: {}", j.id())))
        .collect();
    let card = aggregation::score::scorecard(&o, &jobs, &results);
    let got = card.reference("trace", "udp").unwrap().capacity_sum_mbps;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // Over one whole period the mean is the trace's mean capacity (the
    // second period: the last line's opportunity, at the period itself,
    // belongs to both ends of the first).
    let period_s = lte.period_ms as f64 / 1e3;
    let whole = brute_force_mbps(&lte, period_s, 2.0 * period_s);
    assert!((whole - lte.rate_bps() / 1e6).abs() < 1e-9);
    // Failed runs are counted and fail their cells.
    assert_eq!(card.runs_failed, jobs.len());
    assert!(card.cells.iter().all(|c| !c.pass && c.error.is_some()));
}

#[test]
fn the_scorecard_is_deterministic_and_its_files_are_written() {
    let mut o = opts("lossy", "tcp-bbr", &["ccid2"], 8.0);
    o.jobs = 1;
    let a = run(&o);
    o.jobs = 3;
    let b = run(&o);
    assert_eq!(report::json(&a), report::json(&b));
    // A stored scorecard reads back whole (--baseline), and against itself
    // nothing changed.
    let back: Scorecard = serde_json::from_str(&report::json(&a)).unwrap();
    assert_eq!(back, a);
    let deltas = aggregation::compare::compare(&back, &b);
    assert_eq!(deltas.len(), 1);
    assert!(deltas.iter().all(|d| !d.regressed() && !d.improved()));
    let dir = std::env::temp_dir().join(format!("mpdccp-agg-test-{}", std::process::id()));
    report::write_all(&dir, &a, "mpdccp bench aggregation --mix lossy").unwrap();
    let png = std::fs::read(dir.join(report::HEATMAP)).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // Width and height from the IHDR chunk: label column plus at least four
    // cell columns, one row (lossy × tcp-bbr) plus title and scale.
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(w >= 600 && h >= 150, "{w}×{h}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(report::JSON)).unwrap()).unwrap();
    assert_eq!(json["cells"][0]["mix"], "lossy");
    assert_eq!(
        json["cells"][0]["ratio_best"],
        a.cells[0].ratio_best.unwrap()
    );
    let csv = std::fs::read_to_string(dir.join(report::CSV)).unwrap();
    assert_eq!(csv.lines().count(), 2);
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("lossy,tcp-bbr,ccid2,"));
    let md = std::fs::read_to_string(dir.join(report::REPORT)).unwrap();
    assert!(md.contains("| lossy |"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_names_and_overrides_are_usage_errors() {
    let bad = |o: Options| aggregation::plan(&o).unwrap_err().to_string();
    assert!(bad(opts("nope", "udp", &["ccid2"], 8.0)).contains("unknown mix `nope`"));
    assert!(bad(opts("equal", "quic?", &["ccid2"], 8.0)).contains("unknown inner traffic"));
    assert!(bad(opts("equal", "udp", &["ccid9"], 8.0)).contains("--cc ccid9"));
    let mut o = opts("equal", "udp", &["ccid2"], 8.0);
    o.sets = vec![("tunnel.cc".into(), "ccid5".into())];
    assert!(bad(o.clone()).contains("use --cc"));
    o.sets = vec![("tunnel.schedulr".into(), "rr".into())];
    assert!(bad(o.clone()).contains("--set tunnel.schedulr"));
    // A valid override reaches every tunnel run.
    o.sets = vec![("tunnel.scheduler".into(), "rr".into())];
    let jobs = aggregation::plan(&o).unwrap();
    assert!(jobs
        .iter()
        .all(|j| j.scenario.to_toml().unwrap().contains("scheduler = \"rr\"")));
}
