//! The congestion controllers (`src/cc/`): each alone, over a simulated
//! link, and as property tests.

mod ccid2;
mod ccid5_link;
mod ccid5_pacer;
mod coupled;
mod cubic;
mod link;
mod props;
mod validation;
