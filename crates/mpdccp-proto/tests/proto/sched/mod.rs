//! The schedulers (`src/sched/`).

mod fresh;
mod harness;
mod prop;
mod select;
