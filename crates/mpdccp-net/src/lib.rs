//! # mpdccp-net — the tunnel daemon on real Linux I/O
//!
//! TUN devices, one UDP socket per path (RFC 6773 encapsulation), kernel
//! offloads, and the daemon (`mpdccp server` / `mpdccp client`) with its
//! path manager, control socket and metrics. The lab around it (link
//! emulator, namespaces, testbed, benchmark) is the `mpdccp-lab` crate, so
//! the daemon links neither the simulator's model nor its plotting.
//!
//! Contract: this crate is the only place that touches the OS for the tunnel.
//! It maps the OS clock to the core's `Instant` once ([`clock::now`]), owns
//! every buffer (preallocated, batched I/O; the few per-packet allocations
//! left are named in [`daemon`]'s module docs) and feeds the unchanged
//! sans-IO core from `mpdccp-proto`. It is the one crate of the workspace
//! allowed `unsafe` (ioctl, `recvmmsg`, `sendmmsg`, clocks and scheduling),
//! each use with its `SAFETY` note.
//!
//! Module map:
//! * [`clock`] — OS monotonic clock → core `Instant`, precise timer slack.
//! * [`tun`] — TUN device (ioctl wrapper).
//! * [`udp`] — per-path UDP sockets, `recvmmsg`/`sendmmsg`/GSO.
//! * [`offload`] — TUN TSO split and GRO-style coalescing.
//! * [`mtu`] — tunnel MTU from the path MTU.
//! * [`iproute`] — `ip` and other helper programs.
//! * [`daemon`] — `mpdccp server` / `mpdccp client`: config, event loop, path manager, status.
//! * [`raw`] — native DCCP (IP protocol 33) through raw sockets.
//! * [`process`] — process-wide settings of the CLI (SIGPIPE).

// The workspace denies `unsafe_code` (Cargo.toml); this crate is the exception.
#![allow(unsafe_code)]

pub mod clock;
mod cmsg;
pub mod daemon;
pub mod iproute;
pub mod mtu;
pub mod offload;
pub mod pmtud;
pub mod process;
pub mod raw;
mod sockopt;
pub mod tun;
pub mod udp;
