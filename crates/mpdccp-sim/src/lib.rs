//! # mpdccp-sim — the deterministic simulator
//!
//! A discrete-event engine on a virtual clock drives the unchanged
//! `mpdccp-proto` core over emulated links (rate schedule, delay, drop-tail
//! buffer, seeded loss, outages, trace links — `mpdccp_model::link`), with
//! traffic sources (UDP CBR, bulk, inner TCP with its own congestion control).
//!
//! Contract:
//! * same scenario and seed → byte-identical `summary.json` (no wall clock,
//!   no hash-order iteration, all randomness from ChaCha seeded by the
//!   scenario seed; event-time ties broken by insertion order);
//! * results follow the contract of `docs/SCENARIOS.md` via
//!   `mpdccp_model::results` ([`run`] returns them, [`write`](fn@write) stores them).
//!
//! Modules, top-down: [`sim`] (the topology and event loop), [`flow`]
//! (sources and sinks, inner TCP), [`packet`] (flow packet format),
//! [`queue`] (the `(time, seq)` event heap).

pub mod aggregation;
pub mod figures;
pub mod flow;
pub mod packet;
mod pool;
pub mod queue;
pub mod reproduce;
pub mod sim;

use std::path::Path;

use mpdccp_model::scenario::Scenario;
use mpdccp_proto::Instant;

pub use sim::{connection_config, SimOutput, SimStats, Simulation};

/// Why a scenario could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Scenario(String),
    #[error("not supported by the simulator: {0}")]
    Unsupported(String),
    #[error("protocol core refused the setup: {0}")]
    Protocol(String),
    #[error("writing results: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs `scenario` to its end. `progress` is called about every simulated
/// second with the fraction done (0.0..=1.0).
pub fn run(
    scenario: &Scenario,
    seed: Option<u64>,
    mut progress: impl FnMut(f64),
) -> Result<SimOutput, SimError> {
    let mut sim = Simulation::new(scenario, seed)?;
    let end = sim.end();
    let step = std::time::Duration::from_secs(1);
    let mut t = Instant::ZERO;
    while t < end {
        t = (t + step).min(end);
        sim.run_until(t);
        progress(t.as_secs_f64() / end.as_secs_f64().max(1e-9));
    }
    Ok(sim.finish())
}

/// Writes `summary.json`, `timeseries.csv` and the plots into `dir`.
pub fn write(dir: &Path, out: &SimOutput) -> Result<(), SimError> {
    std::fs::create_dir_all(dir)?;
    mpdccp_model::write_outputs(dir, &out.summary, &out.timeseries)?;
    Ok(())
}
