//! The `mpdccp` daemon's integration tests, one binary: the command line
//! (`cli`), the tunnel between network namespaces (`net`), interop with
//! the reference kernel (`interop`), the sweeps (`sweep`), the README's
//! examples (`docs`) and the files the daemon ships with. Each runs the
//! real `mpdccp` executable (`CARGO_BIN_EXE_mpdccp`).
//!
//! Root tests are `#[ignore = "needs root …"]`; run them as root with
//! `cargo test --release -p mpdccp --test daemon -- --include-ignored`,
//! or one group with a filter (`--test daemon net::tunnel::`). The
//! network tests take turns through [`support::serial`].

mod cli;
mod config_equivalence;
mod demo;
mod deploy_files;
mod docs;
mod interop;
mod net;
mod overhead;
mod reproduce_seeds;
mod support;
mod sweep;
mod wireshark_lua;
