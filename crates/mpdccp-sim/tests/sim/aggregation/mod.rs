//! The aggregation benchmark (`src/aggregation/`): its scorecard, the CI
//! regression gate and the rows that guard particular fixes.

mod delay_bound;
mod gate;
mod per_flow;
mod scorecard;
