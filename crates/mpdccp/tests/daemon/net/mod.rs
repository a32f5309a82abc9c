//! The daemons end to end between network namespaces (most need root).

mod aggregate;
mod aggregation_real;
mod attack_support;
mod attacks;
mod attacks_matrix;
mod bench_peers;
mod blackhole;
mod common;
mod fleet;
mod lifecycle;
mod loadgen;
mod mtu;
mod netem;
mod ops;
mod prio;
mod raw_dccp;
mod rebind;
mod security;
mod testbed;
mod tunnel;
mod tunnel_dccp;
mod tunnel_udccp;
mod video;
mod workers;
