//! The result contract of `docs/SCENARIOS.md`: `summary.json`,
//! `timeseries.csv` and plots, from events the simulator or the testbed feed a
//! [`Recorder`].
//!
//! Contract:
//! * names and units of docs/SCENARIOS.md are kept exactly (`goodput_mbps`,
//!   `owd_ms.p95`, …); extra fields are added beside them;
//! * identical event sequences give byte-identical `summary.json` and
//!   `timeseries.csv`: ordered maps, fields in declaration order, every float
//!   rounded to 6 decimals before printing;
//! * percentiles come from HDR histograms (microsecond resolution, 3
//!   significant digits): a reported percentile is the midpoint of the
//!   histogram bucket holding it, clamped to the exact minimum and maximum
//!   seen; `max` and `mean` are exact. Empty distributions report 0 with
//!   `samples = 0`;
//! * rates: a flow's `goodput_mbps` is delivered payload over its active time
//!   (`start_s` to `stop_s` or the end of the run); a path's `throughput_mbps`
//!   is the bytes it delivered over the run when the driver reports deliveries
//!   ([`Recorder::path_delivered`]), else the bytes sent into it; in a window,
//!   both are over the window's length. An event counts in a window when
//!   `from_s <= t < to_s`;
//! * the time series has one row per 100 ms bin per flow, then per path;
//!   averages are over the samples in the bin, cwnd/srtt/queue the last sample
//!   in the bin; empty cells mean no sample.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use mpdccp_proto::Instant;
use serde::{Deserialize, Serialize};

use crate::scenario::Scenario;

mod dist;
use dist::Dist;

/// What the one-way delay measures (written to `meta.owd_convention`).
pub const OWD_CONVENTION: &str =
    "application one-way delay: sender tunnel entry to receiver tunnel exit, including reordering hold time";

/// Length of one time-series bin.
pub const BIN: Duration = Duration::from_millis(100);

/// `summary.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    pub flows: Vec<FlowSummary>,
    pub paths: Vec<PathSummary>,
    pub windows: BTreeMap<String, WindowSummary>,
    /// Time packets waited in the tunnel's send queue in front of the
    /// scheduler ([`Recorder::send_queue_delay`]; E5's "queuing delay at the
    /// scheduler").
    #[serde(default)]
    pub send_queue_delay_ms: LatencyMs,
    #[serde(default)]
    pub meta: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    pub name: String,
    pub goodput_mbps: f64,
    pub sent_pkts: u64,
    pub delivered_pkts: u64,
    pub lost_pkts: u64,
    pub out_of_order_pkts: u64,
    pub owd_ms: LatencyMs,
    #[serde(default)]
    pub sent_bytes: u64,
    #[serde(default)]
    pub delivered_bytes: u64,
    /// Longest time between two consecutive deliveries (0 with fewer than two).
    #[serde(default)]
    pub max_delivery_gap_ms: f64,
    /// The time the rate is averaged over.
    #[serde(default)]
    pub active_s: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathSummary {
    pub name: String,
    pub throughput_mbps: f64,
    pub sent_pkts: u64,
    pub lost_pkts: u64,
    pub rtt_ms: LatencyMs,
    pub queue_delay_ms: LatencyMs,
    #[serde(default)]
    pub sent_bytes: u64,
    #[serde(default)]
    pub sent_mbps: f64,
    #[serde(default)]
    pub delivered_pkts: u64,
    #[serde(default)]
    pub delivered_bytes: u64,
    #[serde(default)]
    pub delivered_mbps: f64,
    /// `"delivered"` or `"sent"`: what `throughput_mbps` counts.
    #[serde(default)]
    pub throughput_basis: String,
}

/// A delay distribution in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    #[serde(default)]
    pub mean: f64,
    #[serde(default)]
    pub min: f64,
    #[serde(default)]
    pub samples: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    pub from_s: f64,
    pub to_s: f64,
    pub flows: Vec<FlowSummary>,
    pub paths: Vec<PathSummary>,
    #[serde(default)]
    pub send_queue_delay_ms: LatencyMs,
}

impl Summary {
    /// The JSON text of `summary.json` (pretty, with a final newline).
    pub fn to_json(&self) -> String {
        // Serializing plain structs, maps with string keys and finite numbers
        // cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn from_json(s: &str) -> Result<Summary, serde_json::Error> {
        serde_json::from_str(s)
    }

    pub fn flow(&self, name: &str) -> Option<&FlowSummary> {
        self.flows.iter().find(|f| f.name == name)
    }

    pub fn path(&self, name: &str) -> Option<&PathSummary> {
        self.paths.iter().find(|p| p.name == name)
    }
}

impl WindowSummary {
    pub fn flow(&self, name: &str) -> Option<&FlowSummary> {
        self.flows.iter().find(|f| f.name == name)
    }

    pub fn path(&self, name: &str) -> Option<&PathSummary> {
        self.paths.iter().find(|p| p.name == name)
    }
}

/// Rounds to 6 decimals (and maps non-finite values to 0) so printed numbers
/// are short and identical across runs.
pub fn round6(x: f64) -> f64 {
    if !x.is_finite() {
        return 0.0;
    }
    let r = (x * 1e6).round() / 1e6;
    if r == 0.0 {
        0.0 // no "-0.0"
    } else {
        r
    }
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        round6(bytes as f64 * 8.0 / secs / 1e6)
    } else {
        0.0
    }
}

#[derive(Clone, Debug)]
struct FlowAcc {
    sent_pkts: u64,
    sent_bytes: u64,
    delivered_pkts: u64,
    delivered_bytes: u64,
    lost_pkts: u64,
    out_of_order_pkts: u64,
    owd: Dist,
    last_delivery: Option<Instant>,
    max_gap: Duration,
}

impl FlowAcc {
    fn new() -> Self {
        FlowAcc {
            sent_pkts: 0,
            sent_bytes: 0,
            delivered_pkts: 0,
            delivered_bytes: 0,
            lost_pkts: 0,
            out_of_order_pkts: 0,
            owd: Dist::new(),
            last_delivery: None,
            max_gap: Duration::ZERO,
        }
    }

    fn summary(&self, name: &str, active_s: f64) -> FlowSummary {
        FlowSummary {
            name: name.to_owned(),
            goodput_mbps: mbps(self.delivered_bytes, active_s),
            sent_pkts: self.sent_pkts,
            delivered_pkts: self.delivered_pkts,
            lost_pkts: self.lost_pkts,
            out_of_order_pkts: self.out_of_order_pkts,
            owd_ms: self.owd.summary(),
            sent_bytes: self.sent_bytes,
            delivered_bytes: self.delivered_bytes,
            max_delivery_gap_ms: round6(self.max_gap.as_secs_f64() * 1e3),
            active_s: round6(active_s),
        }
    }
}

#[derive(Clone, Debug)]
struct PathAcc {
    sent_pkts: u64,
    sent_bytes: u64,
    delivered_pkts: u64,
    delivered_bytes: u64,
    lost_pkts: u64,
    rtt: Dist,
    queue_delay: Dist,
}

impl PathAcc {
    fn new() -> Self {
        PathAcc {
            sent_pkts: 0,
            sent_bytes: 0,
            delivered_pkts: 0,
            delivered_bytes: 0,
            lost_pkts: 0,
            rtt: Dist::new(),
            queue_delay: Dist::new(),
        }
    }

    fn summary(&self, name: &str, secs: f64, by_delivery: bool) -> PathSummary {
        let sent_mbps = mbps(self.sent_bytes, secs);
        let delivered_mbps = mbps(self.delivered_bytes, secs);
        PathSummary {
            name: name.to_owned(),
            throughput_mbps: if by_delivery {
                delivered_mbps
            } else {
                sent_mbps
            },
            sent_pkts: self.sent_pkts,
            lost_pkts: self.lost_pkts,
            rtt_ms: self.rtt.summary(),
            queue_delay_ms: self.queue_delay.summary(),
            sent_bytes: self.sent_bytes,
            sent_mbps,
            delivered_pkts: self.delivered_pkts,
            delivered_bytes: self.delivered_bytes,
            delivered_mbps,
            throughput_basis: if by_delivery { "delivered" } else { "sent" }.into(),
        }
    }
}

/// One 100 ms bin of one flow.
#[derive(Clone, Copy, Debug, Default)]
struct FlowBin {
    sent_pkts: u64,
    delivered_bytes: u64,
    lost_pkts: u64,
    out_of_order_pkts: u64,
    owd_sum_ns: u128,
    owd_n: u64,
    owd_max_ns: u64,
}

/// One 100 ms bin of one path.
#[derive(Clone, Copy, Debug, Default)]
struct PathBin {
    sent_pkts: u64,
    sent_bytes: u64,
    delivered_bytes: u64,
    lost_pkts: u64,
    rtt_sum_ns: u128,
    rtt_n: u64,
    qd_sum_ns: u128,
    qd_n: u64,
    qd_max_ns: u64,
    cwnd_pkts: Option<f64>,
    srtt: Option<Duration>,
    queue_bytes: Option<usize>,
}

#[derive(Clone, Debug)]
struct Window {
    name: String,
    from: Instant,
    to: Instant,
    from_s: f64,
    to_s: f64,
}

impl Window {
    fn contains(&self, t: Instant) -> bool {
        self.from <= t && t < self.to
    }
}

/// Collects the events of one run. Indices are those of the scenario's
/// `[[flow]]` and `[[path]]` entries; events for other indices are counted in
/// `meta.ignored_events` and otherwise ignored.
#[derive(Clone, Debug)]
pub struct Recorder {
    scenario: String,
    seed: u64,
    duration_s: f64,
    meta: BTreeMap<String, serde_json::Value>,
    flow_names: Vec<String>,
    /// Active interval (seconds) of each flow.
    flow_active_s: Vec<f64>,
    path_names: Vec<String>,
    /// The scenario's events, for the plots ([`Scenario::markers`]).
    markers: Vec<crate::labels::Marker>,
    windows: Vec<Window>,
    /// `flows[i][0]` is the whole run; `flows[i][1 + w]` window `w`.
    flows: Vec<Vec<FlowAcc>>,
    paths: Vec<Vec<PathAcc>>,
    /// Send-queue delay, slots as for flows.
    send_queue: Vec<Dist>,
    flow_bins: Vec<Vec<FlowBin>>,
    path_bins: Vec<Vec<PathBin>>,
    ignored_events: u64,
    n_bins: usize,
}

impl Recorder {
    pub fn new(scenario: &Scenario) -> Self {
        let dur = scenario.duration_s.max(0.0);
        let n_bins = ((dur / BIN.as_secs_f64()) - 1e-9).ceil().max(0.0) as usize;
        let windows: Vec<Window> = scenario
            .window
            .iter()
            .map(|w| Window {
                name: w.name.clone(),
                from: Instant::from_secs_f64(w.from_s),
                to: Instant::from_secs_f64(w.to_s),
                from_s: w.from_s,
                to_s: w.to_s,
            })
            .collect();
        let slots = 1 + windows.len();
        let t = &scenario.tunnel;
        let mut meta = BTreeMap::new();
        meta.insert("cc".into(), t.cc.name().into());
        meta.insert("scheduler".into(), t.scheduler.name().into());
        meta.insert("reorder".into(), t.reorder.name().into());
        if let Some(ms) = t.reorder_timeout_ms {
            meta.insert("reorder_timeout_ms".into(), round6(ms).into());
        }
        meta.insert("owd_convention".into(), OWD_CONVENTION.into());
        meta.insert(
            "delay_convention".into(),
            "path delay_ms is one-way, each direction".into(),
        );
        meta.insert("timeseries_bin_s".into(), BIN.as_secs_f64().into());
        Recorder {
            markers: scenario.markers(),
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            duration_s: dur,
            meta,
            flow_names: scenario.flow.iter().map(|f| f.name.clone()).collect(),
            flow_active_s: scenario
                .flow
                .iter()
                .map(|f| (f.stop_s.unwrap_or(dur).min(dur) - f.start_s.max(0.0)).max(0.0))
                .collect(),
            path_names: scenario.path.iter().map(|p| p.name.clone()).collect(),
            windows,
            flows: vec![vec![FlowAcc::new(); slots]; scenario.flow.len()],
            send_queue: vec![Dist::new(); slots],
            paths: vec![vec![PathAcc::new(); slots]; scenario.path.len()],
            flow_bins: vec![vec![FlowBin::default(); n_bins]; scenario.flow.len()],
            path_bins: vec![vec![PathBin::default(); n_bins]; scenario.path.len()],
            ignored_events: 0,
            n_bins,
        }
    }

    fn flow_ok(&mut self, flow: usize) -> bool {
        let ok = flow < self.flows.len();
        self.ignored_events += u64::from(!ok);
        ok
    }

    fn path_ok(&mut self, path: usize) -> bool {
        let ok = path < self.paths.len();
        self.ignored_events += u64::from(!ok);
        ok
    }

    /// The flow's source handed a packet of `bytes` to the tunnel (or path).
    pub fn flow_sent(&mut self, flow: usize, now: Instant, bytes: usize) {
        if !self.flow_ok(flow) {
            return;
        }
        each_slot(&mut self.flows[flow], &self.windows, now, |a| {
            a.sent_pkts += 1;
            a.sent_bytes += bytes as u64;
        });
        if let Some(b) = bin_of(now, &mut self.flow_bins[flow]) {
            b.sent_pkts += 1;
        }
    }

    /// A packet of the flow reached the receiving application at `now`, `owd`
    /// after it was sent; `out_of_order` if a later-sent packet came first.
    pub fn flow_delivered(
        &mut self,
        flow: usize,
        now: Instant,
        bytes: usize,
        owd: Duration,
        out_of_order: bool,
    ) {
        if !self.flow_ok(flow) {
            return;
        }
        each_slot(&mut self.flows[flow], &self.windows, now, |a| {
            a.delivered_pkts += 1;
            a.delivered_bytes += bytes as u64;
            a.out_of_order_pkts += u64::from(out_of_order);
            a.owd.record(owd);
            if let Some(last) = a.last_delivery {
                a.max_gap = a.max_gap.max(now.saturating_duration_since(last));
            }
            a.last_delivery = Some(now);
        });
        if let Some(b) = bin_of(now, &mut self.flow_bins[flow]) {
            let owd_ns = u64::try_from(owd.as_nanos()).unwrap_or(u64::MAX);
            b.delivered_bytes += bytes as u64;
            b.out_of_order_pkts += u64::from(out_of_order);
            b.owd_sum_ns += owd_ns as u128;
            b.owd_n += 1;
            b.owd_max_ns = b.owd_max_ns.max(owd_ns);
        }
    }

    /// `pkts` of the flow's packets are known lost (never delivered).
    pub fn flow_lost(&mut self, flow: usize, now: Instant, pkts: u64) {
        if !self.flow_ok(flow) {
            return;
        }
        each_slot(&mut self.flows[flow], &self.windows, now, |a| {
            a.lost_pkts += pkts
        });
        if let Some(b) = bin_of(now, &mut self.flow_bins[flow]) {
            b.lost_pkts += pkts;
        }
    }

    /// A datagram of `bytes` was sent on the path.
    pub fn path_sent(&mut self, path: usize, now: Instant, bytes: usize) {
        if !self.path_ok(path) {
            return;
        }
        each_slot(&mut self.paths[path], &self.windows, now, |a| {
            a.sent_pkts += 1;
            a.sent_bytes += bytes as u64;
        });
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            b.sent_pkts += 1;
            b.sent_bytes += bytes as u64;
        }
    }

    /// A datagram of `bytes` came out of the path at `now` (optional: when a
    /// driver reports deliveries, path throughput counts them instead of sends).
    pub fn path_delivered(&mut self, path: usize, now: Instant, bytes: usize) {
        if !self.path_ok(path) {
            return;
        }
        each_slot(&mut self.paths[path], &self.windows, now, |a| {
            a.delivered_pkts += 1;
            a.delivered_bytes += bytes as u64;
        });
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            b.delivered_bytes += bytes as u64;
        }
    }

    /// A datagram came out of the path: [`Recorder::path_delivered`],
    /// [`Recorder::path_rtt`] and [`Recorder::path_queue_delay`] at once,
    /// finding the windows and the bin once (the simulator's per-packet
    /// call); an unknown path counts as those three ignored events.
    pub fn path_delivery(
        &mut self,
        path: usize,
        now: Instant,
        bytes: usize,
        rtt: Duration,
        queue_delay: Duration,
    ) {
        if path >= self.paths.len() {
            self.ignored_events += 3;
            return;
        }
        each_slot(&mut self.paths[path], &self.windows, now, |a| {
            a.delivered_pkts += 1;
            a.delivered_bytes += bytes as u64;
            a.rtt.record(rtt);
            a.queue_delay.record(queue_delay);
        });
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            b.delivered_bytes += bytes as u64;
            b.rtt_sum_ns += rtt.as_nanos();
            b.rtt_n += 1;
            let ns = u64::try_from(queue_delay.as_nanos()).unwrap_or(u64::MAX);
            b.qd_sum_ns += ns as u128;
            b.qd_n += 1;
            b.qd_max_ns = b.qd_max_ns.max(ns);
        }
    }

    /// `pkts` datagrams sent on the path were lost.
    pub fn path_lost(&mut self, path: usize, now: Instant, pkts: u64) {
        if !self.path_ok(path) {
            return;
        }
        each_slot(&mut self.paths[path], &self.windows, now, |a| {
            a.lost_pkts += pkts
        });
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            b.lost_pkts += pkts;
        }
    }

    /// One RTT sample of the path's subflow.
    pub fn path_rtt(&mut self, path: usize, now: Instant, rtt: Duration) {
        if !self.path_ok(path) {
            return;
        }
        each_slot(&mut self.paths[path], &self.windows, now, |a| {
            a.rtt.record(rtt)
        });
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            b.rtt_sum_ns += rtt.as_nanos();
            b.rtt_n += 1;
        }
    }

    /// The queueing delay one packet experienced on the path (e.g.
    /// [`crate::link::Delivery::queue_delay`], or the scheduler's queue).
    pub fn path_queue_delay(&mut self, path: usize, now: Instant, d: Duration) {
        if !self.path_ok(path) {
            return;
        }
        each_slot(&mut self.paths[path], &self.windows, now, |a| {
            a.queue_delay.record(d)
        });
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            b.qd_sum_ns += ns as u128;
            b.qd_n += 1;
            b.qd_max_ns = b.qd_max_ns.max(ns);
        }
    }

    /// A periodic sample of the path's sender state (the last one in each
    /// 100 ms bin is kept).
    pub fn path_sample(
        &mut self,
        path: usize,
        now: Instant,
        cwnd_pkts: f64,
        srtt: Option<Duration>,
        queue_bytes: usize,
    ) {
        if !self.path_ok(path) {
            return;
        }
        if let Some(b) = bin_of(now, &mut self.path_bins[path]) {
            b.cwnd_pkts = cwnd_pkts.is_finite().then_some(cwnd_pkts);
            b.srtt = srtt;
            b.queue_bytes = Some(queue_bytes);
        }
    }

    /// A packet left the tunnel's send queue (in front of the scheduler) at
    /// `now` after waiting `d`.
    pub fn send_queue_delay(&mut self, now: Instant, d: Duration) {
        each_slot(&mut self.send_queue, &self.windows, now, |a| a.record(d));
    }

    /// Builds the summary and the time series. `meta` entries are added to (and
    /// override) the recorder's own (`cc`, `scheduler`, `reorder`,
    /// `owd_convention`, …).
    pub fn finish(self, meta: BTreeMap<String, serde_json::Value>) -> (Summary, TimeSeries) {
        let by_delivery: Vec<bool> = self.paths.iter().map(|p| p[0].delivered_pkts > 0).collect();
        let flows_in = |slot: usize, secs: Option<f64>| -> Vec<FlowSummary> {
            self.flows
                .iter()
                .enumerate()
                .map(|(i, acc)| {
                    acc[slot].summary(&self.flow_names[i], secs.unwrap_or(self.flow_active_s[i]))
                })
                .collect()
        };
        let paths_in = |slot: usize, secs: f64| -> Vec<PathSummary> {
            self.paths
                .iter()
                .enumerate()
                .map(|(i, acc)| acc[slot].summary(&self.path_names[i], secs, by_delivery[i]))
                .collect()
        };
        let mut windows = BTreeMap::new();
        for (w, win) in self.windows.iter().enumerate() {
            let secs = win.to_s - win.from_s;
            windows.insert(
                win.name.clone(),
                WindowSummary {
                    from_s: round6(win.from_s),
                    to_s: round6(win.to_s),
                    flows: flows_in(w + 1, Some(secs)),
                    paths: paths_in(w + 1, secs),
                    send_queue_delay_ms: self.send_queue[w + 1].summary(),
                },
            );
        }
        let mut all_meta = self.meta.clone();
        if self.ignored_events > 0 {
            all_meta.insert("ignored_events".into(), self.ignored_events.into());
        }
        all_meta.extend(meta);
        let summary = Summary {
            scenario: self.scenario.clone(),
            seed: self.seed,
            duration_s: round6(self.duration_s),
            flows: flows_in(0, None),
            paths: paths_in(0, self.duration_s),
            send_queue_delay_ms: self.send_queue[0].summary(),
            windows,
            meta: all_meta,
        };
        let ts = self.time_series(&by_delivery);
        (summary, ts)
    }

    fn time_series(&self, by_delivery: &[bool]) -> TimeSeries {
        let bin_s = BIN.as_secs_f64();
        let n_bins = self.n_bins;
        let ms = |ns: f64| round6(ns / 1e6);
        let mut rows = Vec::with_capacity(n_bins * (self.flow_bins.len() + self.path_bins.len()));
        for b in 0..n_bins {
            let t_s = round6(b as f64 * bin_s);
            for (i, bins) in self.flow_bins.iter().enumerate() {
                let x = bins[b];
                rows.push(TsRow {
                    t_s,
                    kind: TsKind::Flow,
                    name: self.flow_names[i].clone(),
                    throughput_mbps: mbps(x.delivered_bytes, bin_s),
                    sent_pkts: x.sent_pkts,
                    lost_pkts: x.lost_pkts,
                    out_of_order_pkts: x.out_of_order_pkts,
                    owd_ms: (x.owd_n > 0).then(|| ms(x.owd_sum_ns as f64 / x.owd_n as f64)),
                    owd_max_ms: (x.owd_n > 0).then(|| ms(x.owd_max_ns as f64)),
                    ..TsRow::default()
                });
            }
            for (i, bins) in self.path_bins.iter().enumerate() {
                let x = bins[b];
                let bytes = if by_delivery[i] {
                    x.delivered_bytes
                } else {
                    x.sent_bytes
                };
                rows.push(TsRow {
                    t_s,
                    kind: TsKind::Path,
                    name: self.path_names[i].clone(),
                    throughput_mbps: mbps(bytes, bin_s),
                    sent_pkts: x.sent_pkts,
                    lost_pkts: x.lost_pkts,
                    rtt_ms: (x.rtt_n > 0).then(|| ms(x.rtt_sum_ns as f64 / x.rtt_n as f64)),
                    cwnd_pkts: x.cwnd_pkts.map(round6),
                    srtt_ms: x.srtt.map(|d| ms(d.as_nanos() as f64)),
                    queue_bytes: x.queue_bytes.map(|q| q as u64),
                    queue_delay_ms: (x.qd_n > 0).then(|| ms(x.qd_sum_ns as f64 / x.qd_n as f64)),
                    queue_delay_max_ms: (x.qd_n > 0).then(|| ms(x.qd_max_ns as f64)),
                    ..TsRow::default()
                });
            }
        }
        TimeSeries {
            interval_s: bin_s,
            flows: self.flow_names.clone(),
            paths: self.path_names.clone(),
            rows,
            owd_cdf: self.flows.iter().map(|f| f[0].owd.cdf_ms()).collect(),
            markers: self.markers.clone(),
        }
    }
}

/// Applies `f` to the whole-run accumulator (slot 0) and to those of every
/// window containing `now` (slot 1 + window index). No allocation per event.
fn each_slot<T>(accs: &mut [T], windows: &[Window], now: Instant, mut f: impl FnMut(&mut T)) {
    if let Some(a) = accs.first_mut() {
        f(a);
    }
    for (w, win) in windows.iter().enumerate() {
        if win.contains(now) {
            if let Some(a) = accs.get_mut(w + 1) {
                f(a);
            }
        }
    }
}

/// The time-series bin holding `now`, if inside the run.
fn bin_of<T>(now: Instant, bins: &mut [T]) -> Option<&mut T> {
    let i = usize::try_from(now.as_nanos() / BIN.as_nanos() as u64).ok()?;
    bins.get_mut(i)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TsKind {
    #[default]
    Flow,
    Path,
}

impl TsKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TsKind::Flow => "flow",
            TsKind::Path => "path",
        }
    }
}

/// One row of `timeseries.csv`: one entity in one 100 ms bin starting at `t_s`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TsRow {
    pub t_s: f64,
    pub kind: TsKind,
    pub name: String,
    /// Flow: goodput (delivered); path: as its summary's `throughput_basis`.
    pub throughput_mbps: f64,
    pub sent_pkts: u64,
    pub lost_pkts: u64,
    pub out_of_order_pkts: u64,
    /// Mean one-way delay of the packets delivered in the bin (flows).
    pub owd_ms: Option<f64>,
    pub owd_max_ms: Option<f64>,
    /// Mean of the RTT samples in the bin (paths).
    pub rtt_ms: Option<f64>,
    pub cwnd_pkts: Option<f64>,
    pub srtt_ms: Option<f64>,
    pub queue_bytes: Option<u64>,
    pub queue_delay_ms: Option<f64>,
    pub queue_delay_max_ms: Option<f64>,
}

/// The 100 ms time series of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeSeries {
    pub interval_s: f64,
    /// Flow names, scenario order.
    pub flows: Vec<String>,
    /// Path names, scenario order.
    pub paths: Vec<String>,
    /// Bin by bin; within a bin, flows then paths, scenario order.
    pub rows: Vec<TsRow>,
    /// Per flow (scenario order), the whole run's one-way delay CDF as
    /// `(ms, fraction of delivered packets with at most that delay)`.
    pub owd_cdf: Vec<Vec<(f64, f64)>>,
    /// The scenario's events (rate changes, delay changes, outages), drawn
    /// as markers on the time plots; not part of `timeseries.csv`.
    pub markers: Vec<crate::labels::Marker>,
}

/// Columns of `timeseries.csv`, in order.
pub const CSV_COLUMNS: &[&str] = &[
    "t_s",
    "kind",
    "name",
    "throughput_mbps",
    "sent_pkts",
    "lost_pkts",
    "out_of_order_pkts",
    "owd_ms",
    "owd_max_ms",
    "rtt_ms",
    "cwnd_pkts",
    "srtt_ms",
    "queue_bytes",
    "queue_delay_ms",
    "queue_delay_max_ms",
];

impl TimeSeries {
    /// `timeseries.csv` (header line, then one line per row; empty cell = no sample).
    pub fn to_csv(&self) -> String {
        let mut out = String::with_capacity(64 * (self.rows.len() + 1));
        out.push_str(&CSV_COLUMNS.join(","));
        out.push('\n');
        let opt = |v: Option<f64>| v.map(|x| round6(x).to_string()).unwrap_or_default();
        for r in &self.rows {
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                round6(r.t_s),
                r.kind.as_str(),
                csv_field(&r.name),
                round6(r.throughput_mbps),
                r.sent_pkts,
                r.lost_pkts,
                r.out_of_order_pkts,
                opt(r.owd_ms),
                opt(r.owd_max_ms),
                opt(r.rtt_ms),
                opt(r.cwnd_pkts),
                opt(r.srtt_ms),
                r.queue_bytes.map(|q| q.to_string()).unwrap_or_default(),
                opt(r.queue_delay_ms),
                opt(r.queue_delay_max_ms),
            );
        }
        out
    }

    /// `(t_s, value)` points of one entity, skipping bins without a sample.
    pub fn series(
        &self,
        kind: TsKind,
        name: &str,
        field: impl Fn(&TsRow) -> Option<f64>,
    ) -> Vec<(f64, f64)> {
        self.rows
            .iter()
            .filter(|r| r.kind == kind && r.name == name)
            .filter_map(|r| field(r).map(|v| (r.t_s, v)))
            .collect()
    }
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "t"
duration_s = 2
seed = 3
[[path]]
name = "p1"
delay_ms = 5
rate_mbps = 10
[[path]]
name = "p2"
delay_ms = 5
rate_mbps = 10
[tunnel]
cc = "ccid5"
[[flow]]
name = "app"
rate_mbps = 1
start_s = 0.5
[[window]]
name = "late"
from_s = 1
to_s = 2
"#;

    fn ms(x: u64) -> Instant {
        Instant::from_millis(x)
    }

    fn recorder() -> Recorder {
        Recorder::new(&Scenario::from_toml_str(SCENARIO).unwrap())
    }

    /// 1000 packets of 1250 B delivered over 0.5..1.5 s with OWD 1..=1000 ms.
    fn feed(r: &mut Recorder) {
        for i in 0..1000u64 {
            let t = ms(500 + i);
            r.flow_sent(0, t, 1250);
            r.flow_delivered(0, t, 1250, Duration::from_millis(i + 1), i % 10 == 0);
            r.path_sent(i as usize % 2, t, 1300);
            r.path_rtt(0, t, Duration::from_millis(10 + i % 7));
            r.path_queue_delay(1, t, Duration::from_micros(i));
        }
        r.flow_lost(0, ms(1700), 5);
        r.send_queue_delay(ms(100), Duration::from_millis(300));
        r.send_queue_delay(ms(1100), Duration::from_millis(40));
        r.path_lost(1, ms(1700), 2);
        r.path_sample(0, ms(1234), 12.5, Some(Duration::from_millis(11)), 3000);
    }

    #[test]
    fn path_delivery_records_what_its_three_calls_record() {
        let (mut one, mut three) = (recorder(), recorder());
        for i in 0..3000u64 {
            // Across the window's start and the run's end (a bin beyond it).
            let t = Instant::from_micros(700_000 + 517 * i);
            let (rtt, qd) = (
                Duration::from_micros(9_000 + 37 * (i % 101)),
                Duration::from_micros(i * i % 50_000),
            );
            let (path, bytes) = (i as usize % 3, 1000 + i as usize % 500);
            one.path_delivery(path, t, bytes, rtt, qd);
            three.path_delivered(path, t, bytes);
            three.path_rtt(path, t, rtt);
            three.path_queue_delay(path, t, qd);
        }
        let (s1, t1) = one.finish(BTreeMap::new());
        let (s3, t3) = three.finish(BTreeMap::new());
        assert_eq!(s1.to_json(), s3.to_json());
        assert_eq!(t1.to_csv(), t3.to_csv());
    }

    #[test]
    fn summary_numbers_follow_their_definitions() {
        let mut r = recorder();
        feed(&mut r);
        let (s, _) = r.finish(BTreeMap::new());
        let f = &s.flows[0];
        // 1.25 MB over the 1.5 s the flow is active (start_s 0.5, run 2 s).
        assert_eq!(f.goodput_mbps, round6(1_250_000.0 * 8.0 / 1.5 / 1e6));
        assert_eq!(
            (
                f.sent_pkts,
                f.delivered_pkts,
                f.lost_pkts,
                f.out_of_order_pkts
            ),
            (1000, 1000, 5, 100)
        );
        // OWD uniform on 1..=1000 ms: p50 ~ 500, p95 ~ 950, p99 ~ 990, max exact.
        assert!((f.owd_ms.p50 - 500.0).abs() <= 1.0, "{:?}", f.owd_ms);
        assert!((f.owd_ms.p95 - 950.0).abs() <= 1.0, "{:?}", f.owd_ms);
        assert!((f.owd_ms.p99 - 990.0).abs() <= 1.0, "{:?}", f.owd_ms);
        assert_eq!(
            (f.owd_ms.max, f.owd_ms.min, f.owd_ms.mean),
            (1000.0, 1.0, 500.5)
        );
        assert_eq!(f.max_delivery_gap_ms, 1.0);
        let p1 = &s.paths[0];
        assert_eq!(p1.sent_pkts, 500);
        assert_eq!(p1.throughput_basis, "sent");
        assert_eq!(p1.throughput_mbps, round6(500.0 * 1300.0 * 8.0 / 2.0 / 1e6));
        // RTT 10..=16 ms, uniform: p50 = 13 ms within HDR resolution (0.1 %); max exact.
        assert!((p1.rtt_ms.p50 - 13.0).abs() <= 0.013, "{:?}", p1.rtt_ms);
        assert_eq!(p1.rtt_ms.max, 16.0);
        assert_eq!(s.paths[1].lost_pkts, 2);
        assert!(
            (s.paths[1].queue_delay_ms.p95 - 0.95).abs() < 0.002,
            "{:?}",
            s.paths[1].queue_delay_ms
        );
        // Window [1, 2): deliveries at 1000..1499 ms, over 1 s.
        let w = &s.windows["late"];
        assert_eq!((w.from_s, w.to_s), (1.0, 2.0));
        let wf = &w.flows[0];
        assert_eq!((wf.delivered_pkts, wf.lost_pkts), (500, 5));
        assert_eq!(wf.goodput_mbps, 5.0);
        assert_eq!(wf.owd_ms.min, 501.0);
        assert_eq!(
            (s.send_queue_delay_ms.max, s.send_queue_delay_ms.samples),
            (300.0, 2)
        );
        assert_eq!(
            (w.send_queue_delay_ms.max, w.send_queue_delay_ms.samples),
            (40.0, 1)
        );
        assert_eq!(s.meta["cc"], "ccid5");
        assert_eq!(s.meta["owd_convention"], OWD_CONVENTION);
    }

    #[test]
    fn delivered_bytes_define_path_throughput_when_reported() {
        let mut r = recorder();
        r.path_sent(0, ms(10), 1000);
        r.path_sent(0, ms(20), 1000);
        r.path_delivered(0, ms(30), 1000);
        let (s, ts) = r.finish(BTreeMap::new());
        assert_eq!(s.paths[0].throughput_basis, "delivered");
        assert_eq!(s.paths[0].throughput_mbps, mbps(1000, 2.0));
        assert_eq!(s.paths[0].sent_mbps, mbps(2000, 2.0));
        assert_eq!(
            ts.rows
                .iter()
                .find(|r| r.name == "p1")
                .unwrap()
                .throughput_mbps,
            mbps(1000, 0.1)
        );
    }

    #[test]
    fn empty_distributions_report_zero_samples() {
        let (s, _) = recorder().finish(BTreeMap::new());
        assert_eq!(s.flows[0].owd_ms, LatencyMs::default());
        assert_eq!(s.flows[0].goodput_mbps, 0.0);
    }

    #[test]
    fn out_of_range_indices_are_ignored_and_counted() {
        let mut r = recorder();
        r.flow_sent(7, ms(1), 100);
        r.path_rtt(9, ms(1), Duration::from_millis(1));
        let (s, _) = r.finish(BTreeMap::new());
        assert_eq!(s.meta["ignored_events"], 2);
    }

    #[test]
    fn json_has_the_contract_names_and_is_deterministic() {
        let run = || {
            let mut r = recorder();
            feed(&mut r);
            let mut meta = BTreeMap::new();
            meta.insert("cc".into(), serde_json::Value::from("ccid2"));
            r.finish(meta)
        };
        let (a, ta) = run();
        let (b, tb) = run();
        assert_eq!(a.to_json(), b.to_json());
        assert_eq!(ta.to_csv(), tb.to_csv());
        assert_eq!(a.meta["cc"], "ccid2", "caller meta overrides");
        let v: serde_json::Value = serde_json::from_str(&a.to_json()).unwrap();
        for k in [
            "scenario",
            "seed",
            "duration_s",
            "flows",
            "paths",
            "windows",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        let f = &v["flows"][0];
        for k in [
            "name",
            "goodput_mbps",
            "sent_pkts",
            "delivered_pkts",
            "lost_pkts",
            "out_of_order_pkts",
        ] {
            assert!(f.get(k).is_some(), "{k}");
        }
        for k in ["p50", "p95", "p99", "max"] {
            assert!(f["owd_ms"][k].is_f64(), "{k}");
        }
        let p = &v["paths"][0];
        for k in ["name", "throughput_mbps", "sent_pkts", "lost_pkts"] {
            assert!(p.get(k).is_some(), "{k}");
        }
        for k in ["p50", "p95", "max"] {
            assert!(
                p["rtt_ms"][k].is_f64() && p["queue_delay_ms"][k].is_f64(),
                "{k}"
            );
        }
        let w = &v["windows"]["late"];
        assert!(w["from_s"].is_f64() && w["flows"].is_array() && w["paths"].is_array());
        assert_eq!(Summary::from_json(&a.to_json()).unwrap(), a);
    }

    #[test]
    fn time_series_bins_every_100_ms() {
        let mut r = recorder();
        feed(&mut r);
        let (_, ts) = r.finish(BTreeMap::new());
        // 2 s = 20 bins x (1 flow + 2 paths).
        assert_eq!(ts.rows.len(), 60);
        let csv = ts.to_csv();
        assert_eq!(csv.lines().count(), 61);
        assert_eq!(csv.lines().next().unwrap(), CSV_COLUMNS.join(","));
        // Bin 5 (0.5..0.6 s): 100 deliveries of 1250 B = 10 Mbit/s, OWD 1..100 ms.
        let row = ts
            .rows
            .iter()
            .find(|r| r.kind == TsKind::Flow && r.t_s == 0.5)
            .unwrap();
        assert_eq!(row.throughput_mbps, 10.0);
        assert_eq!(row.owd_ms, Some(50.5));
        assert_eq!(row.owd_max_ms, Some(100.0));
        assert_eq!(row.out_of_order_pkts, 10);
        let p1 = ts.series(TsKind::Path, "p1", |r| r.cwnd_pkts);
        assert_eq!(p1, vec![(1.2, 12.5)]);
        let srtt = ts.series(TsKind::Path, "p1", |r| r.srtt_ms);
        assert_eq!(srtt, vec![(1.2, 11.0)]);
        assert_eq!(ts.series(TsKind::Flow, "app", |r| r.owd_ms).len(), 10);
        // Empty cells for bins without samples.
        assert!(
            csv.lines().nth(1).unwrap().ends_with(",,,,,,,,"),
            "{}",
            csv.lines().nth(1).unwrap()
        );
    }

    #[test]
    fn round6_is_stable() {
        assert_eq!(round6(0.1 + 0.2), 0.3);
        assert_eq!(round6(-0.0000001), 0.0);
        assert_eq!(round6(f64::NAN), 0.0);
        assert_eq!(round6(1.23456789), 1.234568);
    }
}
