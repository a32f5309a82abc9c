//! The integration tests of `mpdccp-net`: one binary, whose modules follow
//! `src/`. They need root (network namespaces, TUN devices) and are
//! `#[ignore]`d; CI runs them with `--include-ignored`.

mod tun;
