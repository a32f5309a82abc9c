//! # mpdccp-model — shared by the simulator and the real testbed
//!
//! * `scenario` — the scenario TOML files (`../shared/SCENARIOS.md`);
//! * `link` — the sans-IO link model (rate schedule, delay, drop-tail buffer,
//!   seeded loss, outages, trace links) that the simulator steps on a virtual
//!   clock and `mpdccp netem` steps on the real one;
//! * `results` — the result contract: `summary.json`, `timeseries.csv`, plots.
