//! The inner flows (`src/flow/`) through the engine.

mod inner_flows;
mod inner_tcp;
