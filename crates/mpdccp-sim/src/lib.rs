//! # mpdccp-sim — the deterministic simulator
//!
//! A discrete-event engine on a virtual clock drives the unchanged
//! `mpdccp-proto` core over emulated links (rate schedule, delay, drop-tail
//! buffer, seeded loss, outages, trace links), with traffic sources (UDP CBR,
//! bulk, inner TCP). Same scenario and seed give byte-identical results.
