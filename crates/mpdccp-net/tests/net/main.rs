//! The integration tests of `mpdccp-net`: one binary, whose modules follow
//! `src/`. They need root (network namespaces, TUN devices) and are
//! `#[ignore]`d; CI runs them with `--include-ignored`.

// TUN devices and namespaces through libc, as in the crate itself.
#![allow(unsafe_code)]

mod tun;
