//! The reordering strategies (`src/reorder/`).

mod per_flow;
mod prop;
mod strategies;
