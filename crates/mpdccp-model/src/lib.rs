//! # mpdccp-model — shared by the simulator and the real testbed
//!
//! * [`scenario`] — the scenario TOML files (`docs/SCENARIOS.md`): types,
//!   loading, validation, `--set` overrides;
//! * [`link`] — the sans-IO link model (rate schedule, delay schedule, drop-tail
//!   buffer, seeded loss, outages, mahimahi trace links) that the simulator
//!   steps on a virtual clock and `mpdccp netem` steps on the real one
//!   ([`netem`] maps the OS clock onto it);
//! * [`results`] — the result contract: the [`Recorder`] both drivers feed,
//!   `summary.json` ([`Summary`]) and `timeseries.csv` ([`TimeSeries`]);
//!   [`write_outputs`] writes them with the plots;
//! * [`plot`] — PNG plots with an embedded font; [`heatmap`] — a table of
//!   ratios as coloured cells (the aggregation benchmark's scorecard);
//!   [`labels`] — the markers and number labels they carry.
//!
//! Nothing here reads a clock or OS randomness except [`netem::WallClock`].

pub mod compare;
pub mod heatmap;
pub mod labels;
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
    FlowSummary, LatencyMs, PathSummary, Recorder, Summary, TimeSeries, TsKind, TsRow,
    WindowSummary,
};
pub use scenario::{
    DelayPoint, Direction, FlowKind, FlowSpec, Outage, PathSpec, RatePoint, Scenario,
    ScenarioError, Trace, TunnelSpec, WindowSpec,
};

/// Writes `summary.json`, `timeseries.csv` and the PNG plots into `dir`
/// (created if missing).
pub fn write_outputs(
    dir: &std::path::Path,
    summary: &Summary,
    ts: &TimeSeries,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("summary.json"), summary.to_json())?;
    std::fs::write(dir.join("timeseries.csv"), ts.to_csv())?;
    plot::plot_time_series(dir, &summary.scenario, ts)?;
    Ok(())
}
