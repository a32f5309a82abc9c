//! The engine (`src/sim/`): determinism, link accounting, timers, the
//! tunnel transports and reordering.

mod basics;
mod reordering;
mod timers;
mod transport;
