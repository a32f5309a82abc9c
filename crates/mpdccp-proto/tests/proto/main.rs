//! The integration tests of `mpdccp-proto`: one binary, whose modules follow
//! `src/` (`auth`, `cc`, `conn`, `reorder`, `sched`, `wire`), plus the attacks
//! (`hostile`) and the RFC 9897 conformance checks (`rfc9897`). Most drive
//! connections through the deterministic `harness`; `common` holds the
//! scaffolding several modules share. Proptest keeps the failing cases of a
//! module `a::b` in `tests/proptest-regressions/a/b.txt` (it finds them
//! from `main.rs`).

mod auth;
mod cc;
mod common;
mod conn;
mod hostile;
mod reorder;
mod rfc9897;
mod sched;
mod wire;
