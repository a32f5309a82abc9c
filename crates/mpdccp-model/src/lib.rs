//! # mpdccp-model — shared by the simulator and the real testbed
//!
//! * [`scenario`] — the scenario TOML files (`docs/SCENARIOS.md`): types,
//!   loading, validation, `--set` overrides;
//! * [`link`] — the sans-IO link model (rate schedule, delay schedule, drop-tail
//!   buffer, seeded loss, outages, mahimahi trace links) that the simulator
//!   steps on a virtual clock and `mpdccp netem` steps on the real one
//!   ([`netem`] maps the OS clock onto it);
//! * [`results`] — the result contract: the [`Recorder`] both drivers feed,
//!   `summary.json` ([`Summary`]), `timeseries.csv` ([`TimeSeries`]) and
//!   [`write_outputs`];
//! * [`plot`] — PNG plots with an embedded font; [`heatmap`] — a table of
//!   ratios as coloured cells (the aggregation benchmark's scorecard).
//!
//! Nothing here reads a clock or OS randomness except [`netem::WallClock`].

#![forbid(unsafe_code)]

pub mod compare;
pub mod heatmap;
pub mod link;
pub mod netem;
pub mod plot;
pub mod results;
pub mod scenario;

pub use link::{Delivery, Link, LinkDrop, LinkStats};
pub use plot::{
    decimate, plot_bars, plot_grid, plot_grouped_bars, plot_grouped_bars_with_ranges, plot_lines,
    plot_time_series, Marker, Panel, Series,
};
pub use results::{
    write_outputs, FlowSummary, LatencyMs, PathSummary, Recorder, Summary, TimeSeries, TsKind,
    TsRow, WindowSummary,
};
pub use scenario::{
    DelayPoint, Direction, FlowKind, FlowSpec, Outage, PathSpec, RatePoint, Scenario,
    ScenarioError, Trace, TunnelSpec, WindowSpec,
};
