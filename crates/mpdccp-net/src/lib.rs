//! # mpdccp-net — the core on real Linux I/O
//!
//! TUN devices, one UDP socket per path (RFC 6773 encapsulation), the daemon
//! and its path manager, the userspace link emulator and the
//! network-namespace testbed.
//!
//! Contract: this crate is the only place that touches the OS for the tunnel.
//! It maps the OS clock to the core's `Instant` once ([`clock::now`]), owns
//! every buffer (preallocated, batched I/O, no allocation per packet on the
//! data path) and feeds the unchanged sans-IO core from `mpdccp-proto`.
//! Everything it creates on the host (namespaces, veth pairs, processes) is
//! owned by a guard that removes it on drop.
//!
//! Module map:
//! * [`clock`] — OS monotonic clock → core `Instant`, precise timer slack.
//! * [`tun`] — TUN device (ioctl wrapper).
//! * [`udp`] — per-path UDP sockets, `recvmmsg`/`sendmmsg`/GSO.
//! * [`mtu`] — tunnel MTU from the path MTU.
//! * [`netns`] — namespaces, veth pairs, child processes (RAII).
//! * [`emu`] — the userspace link emulator (`mpdccp netem`).
//! * [`topo`] — client / router-per-path / server namespace topology.
//! * [`daemon`] — `mpdccp server` / `mpdccp client`: config, event loop, path manager, status.
//! * [`raw`] — native DCCP (IP protocol 33) through raw sockets.
//! * [`probe`] — UDP CBR probe generator/receiver with exact one-way delay.
//! * [`testbed`] — scenarios on the real tunnel in namespaces (`mpdccp testbed`).
//! * [`bench`] — tunnel benchmark (`mpdccp testbed --bench`).

pub mod bench;
pub mod clock;
pub mod daemon;
pub mod emu;
pub mod mtu;
pub mod netns;
pub mod offload;
pub mod probe;
pub mod raw;
pub mod testbed;
pub mod topo;
pub mod tun;
pub mod udp;
