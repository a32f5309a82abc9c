//! # mpdccp-net — the core on real Linux I/O
//!
//! TUN devices, one UDP socket per path (RFC 6773 encapsulation), the daemon
//! and its path manager, the userspace link emulator and the
//! network-namespace testbed.
