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
//! * results follow the contract of `SCENARIOS.md` via
//!   `mpdccp_model::results` ([`run`] returns them, [`write`] stores them).
//!
//! Modules, top-down: [`sim`] (the topology and event loop), [`flow`]
//! (sources and sinks, inner TCP), [`packet`] (flow packet format),
//! [`queue`] (the `(time, seq)` event heap).

pub mod flow;
pub mod packet;
pub mod queue;
