//! # mpdccp-lab — the tunnel under test
//!
//! What runs the real daemon (`mpdccp-net`) in a laboratory: the userspace
//! link emulator, network namespaces, the client / router-per-path / server
//! topology, the probe generator, scenarios on the real tunnel and the
//! tunnel benchmark. Everything it creates on the host (namespaces, veth
//! pairs, processes) is owned by a guard that removes it on drop.
//!
//! Module map:
//! * [`netns`] — namespaces, veth pairs, child processes (RAII).
//! * [`emu`] — the userspace link emulator (`mpdccp netem`).
//! * [`topo`] — client / router-per-path / server namespace topology.
//! * [`flows`] — QUIC (aioquic) and kernel MPTCP bulk flows (`flows/lab_flows.py`).
//! * [`iperf`] — iperf3 runs from the client's to the server's namespace.
//! * [`probe`] — UDP CBR probe generator/receiver with exact one-way delay.
//! * [`testbed`] — scenarios on the real tunnel in namespaces (`mpdccp testbed`).
//! * [`aggregation`] — the reduced aggregation matrix on the real tunnel
//!   (`mpdccp testbed --aggregation`).
//! * [`bench`](mod@bench) — tunnel benchmark (`mpdccp testbed --bench`).
//! * [`peers`] — wireguard-go beside our tunnel in the benchmark.
//! * [`loadgen`] — many clients on one server (`mpdccp bench clients`).
//! * [`fleet`] — three gateways with BIRD behind an ECMP router, two-path clients.
//! * [`fleet_bench`] — aggregate TCP through one gateway, then three (`mpdccp testbed --fleet-bench`).

pub mod aggregation;
pub mod bench;
pub mod bench_goals;
pub mod emu;
pub mod fleet;
pub mod fleet_bench;
pub mod flows;
pub mod iperf;
pub mod loadgen;
pub mod netns;
pub mod peers;
pub mod probe;
pub mod testbed;
pub mod topo;
pub mod video;
