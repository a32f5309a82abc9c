//! The integration tests of `mpdccp-sim`: one binary, whose modules follow
//! `src/`: the aggregation benchmark (`aggregation`), the engine and its links
//! (`engine`, for `src/sim/`), the inner flows (`flow`) and the experiments
//! of `reproduce`.

mod aggregation;
mod engine;
mod flow;
mod reproduce;
