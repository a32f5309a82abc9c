//! # mpdccp-proto — the sans-IO Multipath DCCP core
//!
//! This crate is the protocol: DCCP (RFC 4340) and Multipath DCCP (RFC 9897) on
//! the wire, the connection state machines, congestion control, path schedulers
//! and receiver reordering. It owns no socket, thread, clock or OS randomness:
//!
//! * every input carries `now` (an [`Instant`] supplied by the caller);
//! * every output is polled (`poll_transmit`, `poll_timeout`, `poll_event`);
//! * randomness comes from a seed given at construction (ChaCha);
//! * bytes from the network are untrusted: malformed input yields an error value
//!   and bumps a counter, never a panic and never unbounded memory.
//!
//! The real daemon (`mpdccp-net`) and the simulator (`mpdccp-sim`) drive this
//! same code, so a simulated result is a statement about the shipped core.
//!
//! Module map (top-down):
//! * [`auth`]    — authenticated mode: peers, Noise IK handshake, cookies,
//!   rate limits, payload protection (see docs/SECURITY.md).
//! * [`wire`]    — packet and option parsing/emitting (RFC 4340, 9897, 6773).
//! * [`conn`]    — `Connection` (MP-DCCP meta state) and its DCCP subflows.
//! * `harness` — a deterministic N-path test harness on a virtual clock
//!   (feature `harness`: for tests, benchmarks, fuzzing and demos; not part
//!   of the protocol API).
//! * [`cc`]      — the congestion-control trait and every controller.
//! * [`sched`]   — the scheduler trait and the schedulers.
//! * [`reorder`] — the receiver reordering trait and its strategies.
//! * [`time`], [`path`] — the shared vocabulary: time and the per-path view.
//! * `inner` — the inner packet's flow key and transport protocol, read by
//!   the send queue's flow queues ([`conn`]) and by `per-flow` reordering
//!   ([`reorder`]); at the root so neither imports the other.

pub mod auth;
pub mod cc;
pub mod conn;
#[cfg(feature = "harness")]
pub mod harness;
mod inner;
mod kind;
pub mod path;
pub mod reorder;
pub mod sched;
pub mod time;
pub mod wire;

pub use conn::{
    AckConfig, ConnError, ConnStats, Connection, ConnectionConfig, DropPolicy, Endpoint,
    EndpointConfig, Event, LifetimeConfig, LossConfig, MpConfig, PathConfig, Role, SendError,
    SendQueueConfig, Transmit, TunnelSettings,
};
pub use kind::UnknownName;
pub use path::{PathId, PathState, PathView};
pub use time::Instant;
