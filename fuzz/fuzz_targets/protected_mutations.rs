//! Mutated copies of genuine established-state packets against a live
//! protected two-path session (run with `cargo +nightly fuzz
//! run protected_mutations` from `fuzz/`, or `fuzz/ci.sh`).
//!
//! The input is decoded by `harness::mutation::decode` into mutations
//! (which genuine packet of which path and direction, which bytes to flip,
//! where to cut it short, how long to wait first); each copy gets its
//! checksum fixed and goes to its receiver as from the peer's address.
//! Beyond "no panic": every changed copy is counted by a rejection counter
//! (an unmodified one may win the race against its original), no
//! end closes, both paths stay Active at both ends, and every packet sent
//! afterwards arrives exactly once (`harness::mutation::run`). The same
//! property runs as a proptest in `cargo test`
//! (`crates/mpdccp-proto/tests/proto/hostile/protected_mutations.rs`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::auth::SessionKeys;
use mpdccp_proto::harness::mutation::{decode, protected_session, run};
use mpdccp_proto::harness::session_keys;

fuzz_target!(|data: &[u8]| {
    // One Noise handshake per process, not per input (the handshake is
    // not what this fuzzes).
    static KEYS: OnceLock<(SessionKeys, SessionKeys)> = OnceLock::new();
    let keys = KEYS.get_or_init(|| session_keys(28)).clone();
    let muts = decode(data);
    let mut h = protected_session(Some(keys));
    match run(&mut h, &muts) {
        Err(e) => panic!("{e}"),
        Ok((_, Some(disturbed))) => panic!("session disturbed: {disturbed}"),
        Ok((_, None)) => {}
    }
});
