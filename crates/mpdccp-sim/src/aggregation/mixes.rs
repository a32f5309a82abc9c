//! The benchmark's axes as data: path mixes, tunnel controllers and inner
//! traffic, and the capacity a mix offers over a window.
//!
//! Times of events inside a mix (a rate drop, an outage) are fractions of the
//! run, so a shorter `--duration-s` keeps them inside the steady window.

use std::sync::{Arc, OnceLock};

use mpdccp_model::scenario::{
    Direction, FlowKind, FlowSpec, Outage, PathSpec, RatePoint, Trace, VIA_TUNNEL,
};

/// The tunnel controllers every default matrix covers (every `tunnel.cc`
/// except `reno`, which is no multipath candidate).
pub const DEFAULT_CCS: &[&str] = &[
    "ccid2",
    "ccid5",
    "cubic",
    "bbr3",
    "lia",
    "olia",
    "balia",
    "coupled-cubic",
];

/// Inner TCP and UDP payload per packet, bytes.
const PACKET_BYTES: usize = 1400;

/// The T-Mobile LTE uplink trace (mahimahi format), shipped in the repository.
const TMOBILE_UP: &str = include_str!("../../../../scenarios/traces/TMobile-LTE-short.up");
const TMOBILE_DOWN: &str = include_str!("../../../../scenarios/traces/TMobile-LTE-short.down");

fn tmobile(dir: Direction) -> Arc<Trace> {
    static UP: OnceLock<Arc<Trace>> = OnceLock::new();
    static DOWN: OnceLock<Arc<Trace>> = OnceLock::new();
    let (cell, text) = match dir {
        Direction::Up => (&UP, TMOBILE_UP),
        Direction::Down => (&DOWN, TMOBILE_DOWN),
    };
    cell.get_or_init(|| {
        // The file is in the repository and checked by a test; a parse error
        // is a broken checkout.
        Arc::new(Trace::parse(text).expect("scenarios/traces/TMobile-LTE-short is a valid trace"))
    })
    .clone()
}

/// One path mix: a name, what it stands for, and its paths for a run of
/// `duration_s`.
#[derive(Debug)]
pub struct Mix {
    pub name: &'static str,
    pub about: &'static str,
    pub paths: fn(duration_s: f64) -> Vec<PathSpec>,
}

fn path(name: &str, delay_ms: f64, mbps: f64, buffer_bytes: usize) -> PathSpec {
    PathSpec {
        name: name.into(),
        delay_ms,
        buffer_bytes,
        rate_mbps: Some(mbps),
        ..PathSpec::default()
    }
}

fn lossy(mut p: PathSpec, loss: f64) -> PathSpec {
    p.loss = loss;
    p
}

/// An LTE path driven by the T-Mobile trace in both directions.
fn lte_trace(name: &str, delay_ms: f64, buffer_bytes: usize) -> PathSpec {
    let mut p = PathSpec {
        name: name.into(),
        delay_ms,
        buffer_bytes,
        trace_up: Some("traces/TMobile-LTE-short.up".into()),
        trace_down: Some("traces/TMobile-LTE-short.down".into()),
        ..PathSpec::default()
    };
    p.trace_up_data = Some(tmobile(Direction::Up));
    p.trace_down_data = Some(tmobile(Direction::Down));
    p
}

/// The first four mixes (the ones the published before-table used) keep the
/// simulator's default buffer (150 kB), so those numbers compare; the others
/// use about one bandwidth-delay product, rounded up to 100 kB.
pub const MIXES: &[Mix] = &[
    Mix {
        name: "equal",
        about: "2 × 30 Mbit/s, 8 / 12 ms, 150 kB",
        paths: |_| {
            vec![
                path("a", 8.0, 30.0, 150_000),
                path("b", 12.0, 30.0, 150_000),
            ]
        },
    },
    Mix {
        name: "asym",
        about: "40 Mbit/s 12 ms + 8 Mbit/s 35 ms, 150 kB",
        paths: |_| {
            vec![
                path("a", 12.0, 40.0, 150_000),
                path("b", 35.0, 8.0, 150_000),
            ]
        },
    },
    Mix {
        name: "lossy",
        about: "30 Mbit/s 5 ms 0.3 % loss + 15 Mbit/s 25 ms 0.05 %, 150 kB",
        paths: |_| {
            vec![
                lossy(path("a", 5.0, 30.0, 150_000), 0.003),
                lossy(path("b", 25.0, 15.0, 150_000), 0.0005),
            ]
        },
    },
    Mix {
        name: "trace",
        about: "16 Mbit/s 12 ms + T-Mobile LTE trace 30 ms, 150 kB",
        paths: |_| {
            vec![
                path("a", 12.0, 16.0, 150_000),
                lte_trace("lte", 30.0, 150_000),
            ]
        },
    },
    Mix {
        name: "drop",
        about: "30 → 5 Mbit/s at half-time 10 ms + 20 Mbit/s 20 ms, 100 kB",
        paths: |d| {
            let mut a = path("a", 10.0, 30.0, 100_000);
            a.rate_mbps = None;
            a.rate = vec![
                RatePoint {
                    at_s: 0.0,
                    mbps: 30.0,
                },
                RatePoint {
                    at_s: 0.5 * d,
                    mbps: 5.0,
                },
            ];
            vec![a, path("b", 20.0, 20.0, 100_000)]
        },
    },
    Mix {
        name: "outage",
        about: "30 Mbit/s 10 ms down 40–60 % of the run + 20 Mbit/s 25 ms, 100 kB",
        paths: |d| {
            let mut a = path("a", 10.0, 30.0, 100_000);
            a.down = vec![Outage {
                from_s: 0.4 * d,
                to_s: 0.6 * d,
            }];
            vec![a, path("b", 25.0, 20.0, 100_000)]
        },
    },
    Mix {
        name: "three",
        about: "30 Mbit/s 10 ms + 20 Mbit/s 20 ms + 10 Mbit/s 40 ms, 100 kB",
        paths: |_| {
            vec![
                path("a", 10.0, 30.0, 100_000),
                path("b", 20.0, 20.0, 100_000),
                path("c", 40.0, 10.0, 100_000),
            ]
        },
    },
    Mix {
        // A tunnel over one path must not cost what the path carries alone:
        // the controller's own behaviour, without a scheduler's choices.
        name: "single",
        about: "one path: 40 Mbit/s 12 ms, 150 kB (a one-path tunnel)",
        paths: |_| vec![path("a", 12.0, 40.0, 150_000)],
    },
];

/// Looks a mix up by name.
pub fn mix(name: &str) -> Option<&'static Mix> {
    MIXES.iter().find(|m| m.name == name)
}

/// The real-time flow's name in the `rt` inner traffic (its delay and loss
/// are reported).
pub const RT_FLOW: &str = "rt";

/// One kind of inner traffic: the flows it runs, given the mix's capacity
/// sum (Mbit/s) and where they go (`tunnel` or a path name).
#[derive(Debug)]
pub struct Inner {
    pub name: &'static str,
    pub about: &'static str,
    pub flows: fn(capacity_sum_mbps: f64, via: &str) -> Vec<FlowSpec>,
}

fn tcp(name: &str, cc: &str, via: &str) -> FlowSpec {
    FlowSpec {
        name: name.into(),
        kind: FlowKind::Tcp,
        cc: Some(cc.into()),
        packet_bytes: PACKET_BYTES,
        via: via.into(),
        ..FlowSpec::default()
    }
}

/// A QUIC-like flow as aioquic and quinn run it: packet threshold 3, time
/// threshold 9/8 RTT, NewReno, 1250-byte packets.
fn quic(name: &str, via: &str) -> FlowSpec {
    FlowSpec {
        name: name.into(),
        kind: FlowKind::Quic,
        packet_bytes: 1250,
        via: via.into(),
        ..FlowSpec::default()
    }
}

fn cbr(name: &str, mbps: f64, packet_bytes: usize, via: &str) -> FlowSpec {
    FlowSpec {
        name: name.into(),
        kind: FlowKind::UdpCbr,
        rate_mbps: Some(mbps),
        packet_bytes,
        via: via.into(),
        ..FlowSpec::default()
    }
}

/// The inner-traffic axis. A new inner flow kind (a QUIC-like flow) is one
/// more entry here.
pub const INNERS: &[Inner] = &[
    Inner {
        name: "tcp-cubic",
        about: "one TCP CUBIC bulk flow",
        flows: |_, via| vec![tcp("bulk", "cubic", via)],
    },
    Inner {
        name: "tcp-bbr",
        about: "one TCP BBR (v1, as Linux) bulk flow",
        flows: |_, via| vec![tcp("bulk", "bbr", via)],
    },
    Inner {
        name: "udp",
        about: "UDP CBR at 90 % of the capacity sum, 1400 B",
        flows: |sum, via| vec![cbr("cbr", 0.9 * sum, PACKET_BYTES, via)],
    },
    Inner {
        name: "rt+cubic",
        about: "1 Mbit/s real-time UDP (200 B) beside a TCP CUBIC bulk flow",
        flows: |_, via| vec![cbr(RT_FLOW, 1.0, 200, via), tcp("bulk", "cubic", via)],
    },
    Inner {
        name: "quic",
        about: "one QUIC-like bulk flow (RFC 9002 loss detection, NewReno), 1250 B",
        flows: |_, via| vec![quic("bulk", via)],
    },
];

/// Looks an inner traffic up by name.
pub fn inner(name: &str) -> Option<&'static Inner> {
    INNERS.iter().find(|i| i.name == name)
}

/// `via` for the tunnel.
pub fn tunnel() -> &'static str {
    VIA_TUNNEL
}

/// Mean capacity of a path's up direction (the direction the inner data
/// flows) over `[from_s, to_s)`, Mbit/s: the rate schedule or the trace's
/// delivery opportunities, with outages counted as zero.
pub fn mean_capacity_mbps(p: &PathSpec, from_s: f64, to_s: f64) -> f64 {
    let len = to_s - from_s;
    if len <= 0.0 {
        return 0.0;
    }
    let mut bits = 0.0;
    for (a, b) in up_intervals(p, from_s, to_s) {
        bits += match p.trace(Direction::Up) {
            Some(t) => trace_bits(t, a, b),
            None => schedule_bits(p, a, b),
        };
    }
    bits / len / 1e6
}

/// `[from_s, to_s)` minus the path's outages.
fn up_intervals(p: &PathSpec, from_s: f64, to_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut t = from_s;
    for o in &p.down {
        if o.to_s <= t || o.from_s >= to_s {
            continue;
        }
        if o.from_s > t {
            out.push((t, o.from_s));
        }
        t = o.to_s.max(t);
    }
    if t < to_s {
        out.push((t, to_s));
    }
    out
}

/// Bits the rate schedule carries in `[a, b)`.
fn schedule_bits(p: &PathSpec, a: f64, b: f64) -> f64 {
    let points: Vec<(f64, f64)> = match p.rate_mbps {
        Some(m) => vec![(0.0, m)],
        None => p.rate.iter().map(|r| (r.at_s, r.mbps)).collect(),
    };
    let mut bits = 0.0;
    for (i, &(at, mbps)) in points.iter().enumerate() {
        // The first point's rate applies from time zero.
        let start = if i == 0 { f64::NEG_INFINITY } else { at };
        let end = points.get(i + 1).map_or(f64::INFINITY, |n| n.0);
        let lo = start.max(a);
        let hi = end.min(b);
        if hi > lo {
            bits += mbps * 1e6 * (hi - lo);
        }
    }
    bits
}

/// Bits a looping trace delivers in `[a, b)` seconds: each opportunity at
/// offset `o` recurs at `o + k·period` for every whole `k ≥ 0`.
fn trace_bits(t: &Trace, a: f64, b: f64) -> f64 {
    let period = t.period_ms as f64;
    let (a_ms, b_ms) = (a * 1e3, b * 1e3);
    let mut n = 0i64;
    for &o in &t.opportunities_ms {
        let o = o as f64;
        // Occurrences with o + k·P in [a, b), k ≥ 0.
        let first = ((a_ms - o) / period).ceil().max(0.0);
        let past = ((b_ms - o) / period).ceil().max(0.0);
        n += (past - first).max(0.0) as i64;
    }
    n as f64 * (Trace::OPPORTUNITY_BYTES * 8) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_path_offers_the_traces_mean_over_whole_periods() {
        let p = lte_trace("lte", 30.0, 150_000);
        let t = p.trace(Direction::Up).unwrap().clone();
        let period_s = t.period_ms as f64 / 1e3;
        let mean = t.rate_bps() / 1e6;
        // The shared README's figure for this file.
        assert!((mean - 13.3).abs() < 0.1, "{mean}");
        // From time zero the first period lacks one opportunity (the last
        // line's, at the period itself, opens the second), so start later.
        for start in [0.001, 3.25, 100.0] {
            for periods in [1.0, 2.0] {
                let got = mean_capacity_mbps(&p, start, start + periods * period_s);
                assert!(
                    (got - mean).abs() < 1e-9,
                    "{start} {periods}: {got} vs {mean}"
                );
            }
        }
    }

    #[test]
    fn a_short_trace_counts_its_opportunities_in_the_window() {
        // 3 opportunities per 10 ms period: at 0, 5 and 10 (= period) ms.
        let mut p = PathSpec::default();
        p.set_trace(Direction::Up, Trace::parse("0\n5\n10\n").unwrap());
        // [0, 20 ms): 0, 5, 10 (and 10 again as the next period's 0), 15.
        let bits = 5.0 * 1500.0 * 8.0;
        assert!((mean_capacity_mbps(&p, 0.0, 0.02) - bits / 0.02 / 1e6).abs() < 1e-9);
    }

    #[test]
    fn rate_drops_and_outages_weigh_by_time() {
        let d = 60.0;
        let paths = (mix("drop").unwrap().paths)(d);
        // 30 Mbit/s until 30 s, then 5: over [12, 60) 18 s at 30, 30 s at 5.
        let want = (18.0 * 30.0 + 30.0 * 5.0) / 48.0;
        assert!((mean_capacity_mbps(&paths[0], 12.0, 60.0) - want).abs() < 1e-9);
        let paths = (mix("outage").unwrap().paths)(d);
        // Down from 24 to 36 s: 36 of 48 s up.
        let want = 30.0 * 36.0 / 48.0;
        assert!((mean_capacity_mbps(&paths[0], 12.0, 60.0) - want).abs() < 1e-9);
        assert!((mean_capacity_mbps(&paths[1], 12.0, 60.0) - 20.0).abs() < 1e-9);
    }
}
