//! The tunnel daemon: `mpdccp server` and `mpdccp client`.
//!
//! Every packet thread runs one loop, `driver::drive`: the client and a
//! single-threaded server have one such thread; a server with
//! `workers = N` runs N of them (`workers.rs`, `shard.rs`), each with its
//! own endpoint, UDP socket and TUN queue, while the main thread keeps the
//! signals and the operations socket. The loop waits in `ppoll` on the TUN
//! fd, the path sockets, the netlink watcher (client), the signal pipe and
//! the wake-up pipe of the operations listener threads (`ops.rs`: they
//! read requests and write answers, so no client can block the loop), or a
//! worker's mailbox. Each wake-up drains inputs in batches (TUN reads until
//! empty, `recvmmsg`), lets the core act (`handle_timeout` when
//! `poll_timeout` has passed), writes delivered packets to the TUN and
//! flushes `poll_transmit` output with `sendmmsg` / UDP GSO. The sleep is
//! until the core's next deadline, with 1 µs timer slack, so pacing and
//! timers are honoured to within the scheduler's wake-up latency.
//! Buffers are allocated once at start. Per packet the daemon allocates
//! only where these say so: the core's `Event::Delivered` carries a `Vec`
//! the daemon hands back once written (`recycle_delivered`), so the next
//! payload reuses it; a worker's hand-off to another worker copies the
//! packet; an open-mode server routing a TUN packet to a destination no
//! client has sent from lists the connections (`Endpoint::connections`).
//!
//! The files: `client.rs` (its path manager in `client/paths.rs`) and
//! `server.rs` start the daemons; `driver.rs` is the loop; `serve.rs` is
//! the server's side of it; `transport.rs` holds what differs between
//! UDP, native DCCP and U-DCCP; `plan.rs` builds the `ConnectionConfig`
//! the daemons run.
//!
//! With `tunnel.offload` (default) the kernel moves few, big packets: TCP
//! super-packets from the TUN are split ([`drain_tun`], [`crate::offload`]),
//! delivered segments of one flow are merged into one TUN write
//! ([`TunWriter`], flushed at the end of every wake-up so nothing waits),
//! DCCP packets leave as UDP GSO trains and arrive as UDP GRO trains
//! ([`drain_socket`]).

mod activation;
mod backoff;
pub mod client;
pub mod config;
mod counts;
mod dead_peer;
mod fleet;
pub use fleet::FleetConfig;
mod driver;
mod hold;
pub mod iface;
pub mod keyfile;
pub mod metrics;
pub mod native;
pub mod notify;
pub mod ops;
pub mod plan;
mod routes;
mod serve;
pub mod server;
mod shard;
pub mod status;
pub mod status_doc;
pub mod status_render;
mod transport;
mod tun_reader;
pub mod udccp;
pub mod warn;
mod workers;

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use mpdccp_proto::Instant;
use serde::Serialize;
use tracing::info;

use crate::iproute;
use crate::mtu::{MtuPlan, DEFAULT_OPTIONS_BUDGET_BYTES};
use crate::offload::{self, FlowCoalescer, OffloadStats};
use crate::tun::Tun;
use crate::udp::{PathSocket, RecvBatch, SendBatch, MAX_TRAIN_BYTES, SLOT_BYTES};
use config::{parse_cidr, TunConfig};
use mpdccp_proto::conn::PlpmtudConfig;
use warn::{PacketWarning, PacketWarnings};

/// Packets drained from one fd per wake-up before looking at the others.
pub const BATCH: usize = 64;

/// Receive slots for the path sockets: with UDP GRO a slot holds a whole
/// train (up to 64 kB), so fewer slots.
pub fn recv_batch(gro: bool) -> RecvBatch {
    if gro {
        RecvBatch::with_slot_bytes(16, MAX_TRAIN_BYTES)
    } else {
        RecvBatch::with_slot_bytes(BATCH, SLOT_BYTES)
    }
}

/// Most bytes the core may put in one transmit: a UDP GSO train must fit
/// one IP packet (65 535 bytes minus IP and UDP headers).
pub const TRAIN_BUF_BYTES: usize = 65_000;

/// Receives what is queued on `sock` (up to 4 `recvmmsg` calls, so one busy
/// socket cannot starve the others), counts it in `stats`, and hands each
/// DCCP datagram to `deliver(stats, now, from, local, datagram)` — a UDP GRO
/// train split back into its datagrams at the segment size the kernel
/// reported; `local` is the address the peer sent to when the socket is
/// bound to a wildcard address (answer from it), else `None`.
/// `now` is read after each receive: the core takes it as the arrival time
/// (a stale one would shorten RTT samples).
pub fn drain_socket(
    sock: &PathSocket,
    rx: &mut RecvBatch,
    stats: &mut DaemonStats,
    mut deliver: impl FnMut(
        &mut DaemonStats,
        Instant,
        std::net::SocketAddr,
        Option<std::net::IpAddr>,
        &[u8],
    ),
) {
    for _ in 0..4 {
        let n = match sock.recv_batch(rx) {
            Ok(n) => n,
            Err(_) => return,
        };
        let now = crate::clock::now();
        stats.udp_rx_syscalls += 1;
        for i in 0..n {
            let Some((data, from, truncated)) = rx.datagram(i) else {
                continue;
            };
            let (Some(from), false) = (from, truncated) else {
                stats.udp_rx_datagrams += 1;
                stats.udp_rx_bytes += data.len() as u64;
                stats.udp_rx_truncated += u64::from(truncated);
                if truncated {
                    let local = sock.local_addr();
                    stats.warnings.warn(
                        PacketWarning::Truncated,
                        now,
                        format_args!("udp {local}: datagram from {from:?} truncated, dropped"),
                    );
                }
                continue;
            };
            let local = rx.local_ip(i);
            let seg = match rx.gro_segment_bytes(i).filter(|&s| s < data.len()) {
                Some(s) => {
                    stats.udp_rx_gro_trains += 1;
                    s
                }
                None => data.len().max(1),
            };
            for d in data.chunks(seg) {
                stats.udp_rx_datagrams += 1;
                stats.udp_rx_bytes += d.len() as u64;
                deliver(stats, now, from, local, d);
            }
        }
        if n < rx.capacity() {
            return;
        }
    }
}

/// Sends everything queued in `batch`; what the socket refuses (buffer
/// full, error) is dropped and counted — the core sees it as loss.
pub fn flush_batch(sock: &PathSocket, batch: &mut SendBatch, stats: &mut DaemonStats) {
    while !batch.is_empty() {
        match sock.send_batch(batch) {
            Ok(n) if n > 0 => {
                stats.udp_tx_datagrams += n as u64;
                stats.udp_tx_syscalls += 1;
            }
            res => {
                let lost = batch.datagrams() as u64;
                stats.udp_tx_errors += lost;
                batch.clear();
                let why = match res {
                    Err(e) => e.to_string(),
                    Ok(_) => "socket buffer full".into(),
                };
                let local = sock.local_addr();
                stats.warnings.warn(
                    PacketWarning::UdpSend,
                    crate::clock::now(),
                    format_args!("udp {local}: send failed ({why}); {lost} datagrams dropped"),
                );
            }
        }
    }
}

/// Queues one transmit of the core (a datagram or a GSO train, at
/// `data`) on `batch`, flushing first when the batch is full.
pub fn queue_transmit(
    sock: &PathSocket,
    batch: &mut SendBatch,
    stats: &mut DaemonStats,
    data: &[u8],
    segment_bytes: Option<usize>,
    to: std::net::SocketAddr,
) {
    if batch.is_full() {
        flush_batch(sock, batch, stats);
    }
    let slot = batch.next_buf();
    if slot.len() < data.len() {
        stats.udp_tx_errors += 1;
        return;
    }
    slot[..data.len()].copy_from_slice(data);
    commit_transmit(batch, stats, data.len(), segment_bytes, to);
}

/// Queues the transmit of `len` bytes written at `batch.next_buf()` (by
/// [`queue_transmit`], or by the core itself, which saves the copy).
pub fn commit_transmit(
    batch: &mut SendBatch,
    stats: &mut DaemonStats,
    len: usize,
    segment_bytes: Option<usize>,
    to: std::net::SocketAddr,
) {
    if segment_bytes.is_some_and(|s| s < len) {
        stats.udp_tx_gso_trains += 1;
    }
    batch.commit(len, to, segment_bytes);
}

/// `[tunnel] sched_slice_us` for this thread and those it spawns later;
/// a kernel that refuses it leaves the default (logged at debug).
pub(crate) fn request_sched_slice(us: u64) {
    if let Err(e) = crate::clock::request_slice(Duration::from_micros(us)) {
        tracing::debug!("sched_slice_us = {us} not applied: {e}");
    }
}

/// The `auth` mode a connection runs in, as the configuration names it:
/// open without a handshake key, protected with sealed payloads.
pub(crate) fn auth_mode_name(authenticated: bool, protected: bool) -> &'static str {
    match (authenticated, protected) {
        (false, _) => config::AuthMode::Open.name(),
        (true, false) => config::AuthMode::Authenticated.name(),
        (true, true) => config::AuthMode::Protected.name(),
    }
}

/// `stats` as the status document's counters, plus `udp_rx_socket_drops`:
/// the datagrams the kernel dropped at the path sockets because their
/// receive buffer was full (`SO_MEMINFO`, read now: the kernel keeps that
/// count; a client's restarts when a path's socket is reopened; `None` =
/// unknown, 0).
pub(crate) fn daemon_counters(stats: &DaemonStats, drops: Option<u64>) -> status::Counters {
    let mut c = status::Counters::of(stats);
    c.set("udp_rx_socket_drops", drops.unwrap_or(0));
    c
}

/// The status head both daemons start from: role, uptime, TUN device,
/// PLPMTUD and the daemon counters (with the path sockets' `drops`, see
/// [`daemon_counters`]); each daemon adds the fields of its own role.
pub(crate) fn status_head(
    role: &str,
    started: Instant,
    tun: &Tun,
    tun_mtu: u32,
    mtu_policy: &TunMtuPolicy,
    stats: &DaemonStats,
    drops: Option<u64>,
) -> status::StatusHead {
    status::StatusHead {
        role: role.into(),
        uptime_s: (crate::clock::now() - started).as_secs_f64(),
        tun: status::TunStatus {
            name: tun.name().into(),
            mtu: tun_mtu,
        },
        tun_mtu,
        plpmtud: mtu_policy.plpmtud.is_some(),
        daemon: daemon_counters(stats, drops),
        ..status::StatusHead::default()
    }
}

/// Daemon-level counters (the core has its own, see `ConnStats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DaemonStats {
    /// TUN reads / writes (with offload a frame may hold many packets).
    pub tun_rx_frames: u64,
    pub tun_tx_frames: u64,
    /// IP packets from the TUN (after splitting super-packets).
    pub tun_rx_pkts: u64,
    pub tun_rx_bytes: u64,
    pub tun_tx_pkts: u64,
    pub tun_tx_bytes: u64,
    pub tun_tx_errors: u64,
    /// TUN packets the core refused (queue full, too large, closed).
    pub send_rejected: u64,
    /// TUN packets that were not IPv4/IPv6 or too short to route.
    pub tun_rx_malformed: u64,
    /// Client: TUN frames its standby thread read while the packet thread
    /// was late (`tun_reader.rs`; the kernel's ring would have filled).
    pub tun_rx_late_frames: u64,
    /// Server: TUN packets for an inner address no client owns.
    pub no_route: u64,
    pub udp_rx_datagrams: u64,
    pub udp_rx_bytes: u64,
    /// Datagrams larger than a receive slot (cut, dropped).
    pub udp_rx_truncated: u64,
    /// Client: datagrams not from the path's server address (dropped).
    pub udp_rx_foreign: u64,
    pub udp_tx_datagrams: u64,
    pub udp_tx_errors: u64,
    /// Core output for a path whose socket is gone (interface down).
    pub udp_tx_no_socket: u64,
    /// `recvmmsg` / `sendmmsg` calls that moved data (datagrams per call =
    /// `udp_rx_datagrams / udp_rx_syscalls`).
    pub udp_rx_syscalls: u64,
    pub udp_tx_syscalls: u64,
    /// Receive buffers that held a UDP GRO train (several datagrams).
    pub udp_rx_gro_trains: u64,
    /// UDP GSO trains sent (each several datagrams in one kernel packet).
    pub udp_tx_gso_trains: u64,
    /// Native DCCP (`transport = "dccp"`): packets through the raw sockets,
    /// and received ones dropped there (bad IP header, bad checksum).
    pub dccp_rx_packets: u64,
    pub dccp_rx_bytes: u64,
    pub dccp_rx_dropped: u64,
    pub dccp_tx_packets: u64,
    pub dccp_tx_errors: u64,
    /// U-DCCP (`transport = "udccp"`): datagrams received (also in
    /// `udp_rx_*`) and those whose payload did not restore to a DCCP
    /// header (dropped); packets converted for sending, and refused ones.
    pub udccp_rx_packets: u64,
    pub udccp_rx_malformed: u64,
    pub udccp_tx_packets: u64,
    pub udccp_tx_errors: u64,
    pub path_down_events: u64,
    pub path_up_events: u64,
    pub joins_started: u64,
    /// Client: connections given up because no path had been Active for
    /// `dead_peer::DEAD_AFTER` (a new handshake followed).
    pub dead_reconnects: u64,
    /// Server with `workers > 1` (`workers.rs`): datagrams and TUN packets
    /// passed to the worker that owns their connection, those taken from
    /// others, and those dropped because the owner's queue was full.
    pub handoffs: u64,
    pub handoffs_received: u64,
    pub handoff_dropped: u64,
    /// Server with `workers > 1`: new connections' Requests dropped because
    /// all workers together had `max_clients`.
    pub refused_max_clients: u64,
    /// TUN offload: super-packets split and coalesced, checksums completed.
    pub tun_offload: OffloadStats,
    /// The rate limiter of per-packet warnings (not a counter).
    #[serde(skip)]
    pub warnings: PacketWarnings,
}

/// Reads up to [`BATCH`] frames from the TUN (stopping early after
/// [`TUN_PKTS_PER_WAKE`] packets, so one wake-up stays short) and hands
/// every IP packet to `send(stats, packet)` ([`take_tun_frame`]).
pub fn drain_tun(
    tun: &Tun,
    buf: &mut [u8],
    seg: &mut [u8],
    stats: &mut DaemonStats,
    mut send: impl FnMut(&mut DaemonStats, &[u8]),
) {
    let mut pkts = 0usize;
    for _ in 0..BATCH {
        let n = match tun.recv(buf) {
            Ok(n) => n,
            Err(_) => return,
        };
        pkts += take_tun_frame(tun.offload(), &mut buf[..n], seg, stats, &mut send);
        if pkts >= TUN_PKTS_PER_WAKE {
            return;
        }
    }
}

/// One frame read from the TUN: counted, and every IP packet in it handed
/// to `send(stats, packet)` — with offload, super-packets are split into
/// tunnel-MTU packets first (`seg` is their scratch space). Returns the
/// packets.
pub fn take_tun_frame(
    offload: bool,
    frame: &mut [u8],
    seg: &mut [u8],
    stats: &mut DaemonStats,
    send: &mut impl FnMut(&mut DaemonStats, &[u8]),
) -> usize {
    stats.tun_rx_frames += 1;
    if !offload {
        stats.tun_rx_pkts += 1;
        stats.tun_rx_bytes += frame.len() as u64;
        send(stats, frame);
        return 1;
    }
    let mut off = std::mem::take(&mut stats.tun_offload);
    let r = offload::split_in_place(frame, seg, &mut off, |p| {
        stats.tun_rx_pkts += 1;
        stats.tun_rx_bytes += p.len() as u64;
        send(stats, p);
    });
    stats.tun_offload = off;
    r.unwrap_or(0)
}

/// Packets taken from the TUN per wake-up before the loop sends them on.
pub const TUN_PKTS_PER_WAKE: usize = 512;

/// Writes delivered packets to the TUN; with offload, consecutive segments
/// of each TCP flow (up to 8 flows at once, interleaved or not) become one
/// super-packet ([`offload::FlowCoalescer`]). The
/// caller must [`TunWriter::flush`] at the end of each wake-up: nothing is
/// held longer.
pub struct TunWriter {
    coalescer: FlowCoalescer,
}

impl Default for TunWriter {
    fn default() -> Self {
        TunWriter::new()
    }
}

impl TunWriter {
    pub fn new() -> TunWriter {
        TunWriter {
            coalescer: FlowCoalescer::new(),
        }
    }

    pub fn write(&mut self, tun: &Tun, stats: &mut DaemonStats, pkt: &[u8]) {
        stats.tun_tx_pkts += 1;
        stats.tun_tx_bytes += pkt.len() as u64;
        if !tun.offload() {
            stats.tun_tx_frames += 1;
            if let Err(e) = tun.send(pkt) {
                stats.tun_tx_errors += 1;
                warn_tun_write(tun, stats, &e);
            }
            return;
        }
        // UDP GSO super-packets only where the kernel negotiated USO.
        self.coalescer.set_udp_gso(tun.uso());
        let c = &mut self.coalescer;
        write_frames(tun, stats, |st, mut w| c.push(pkt, st, &mut w));
    }

    pub fn flush(&mut self, tun: &Tun, stats: &mut DaemonStats) {
        let c = &mut self.coalescer;
        write_frames(tun, stats, |st, mut w| c.flush(st, &mut w));
    }
}

/// Runs `emit` with a writer that sends each frame it produces to the TUN
/// (with its virtio-net header), counting frames and errors.
fn write_frames(
    tun: &Tun,
    stats: &mut DaemonStats,
    emit: impl FnOnce(&mut OffloadStats, &mut dyn FnMut(&[u8; offload::VNET_HDR_LEN], &[u8])),
) {
    let (mut frames, mut errors, mut last) = (0u64, 0u64, None);
    emit(&mut stats.tun_offload, &mut |h, p| {
        frames += 1;
        if let Err(e) = tun.send_vnet(h, p) {
            errors += 1;
            last = Some(e);
        }
    });
    stats.tun_tx_frames += frames;
    stats.tun_tx_errors += errors;
    if let Some(e) = last {
        warn_tun_write(tun, stats, &e);
    }
}

fn warn_tun_write(tun: &Tun, stats: &mut DaemonStats, e: &io::Error) {
    let name = tun.name();
    stats.warnings.warn(
        PacketWarning::TunWrite,
        crate::clock::now(),
        format_args!("tun {name}: write failed: {e}"),
    );
}

/// The MTU plan of a daemon: from the path MTU, with the TUN MTU lowered to
/// `tun.mtu` when that is set and smaller.
/// `encap_bytes`: UDP header (8) unless every path is native DCCP or U-DCCP (0).
pub fn mtu_plan(cfg: &TunConfig, path_mtu: u32, ipv6_outer: bool, encap_bytes: u32) -> MtuPlan {
    let plan = MtuPlan::with_encap(
        path_mtu,
        ipv6_outer,
        encap_bytes,
        DEFAULT_OPTIONS_BUDGET_BYTES,
    );
    MtuPlan {
        tun_mtu: if cfg.mtu > 0 {
            cfg.mtu.min(plan.tun_mtu)
        } else {
            plan.tun_mtu
        },
        ..plan
    }
}

/// How the TUN MTU follows DPLPMTUD (RFC 8899).
///
/// The PLPMTU the core reports counts DCCP packet bytes (the outer IP and
/// UDP headers are already off); a tunnelled packet is that minus the
/// bounded data header ([`mpdccp_proto::conn::DATA_HEADER_MAX`]) and, with
/// `auth = "protected"`, the AEAD's counter and tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunMtuPolicy {
    /// The core's per-subflow settings; `None`: `tunnel.plpmtud = false`,
    /// the TUN MTU stays at `max`.
    pub plpmtud: Option<PlpmtudConfig>,
    /// DCCP packet bytes that are not tunnelled packet: data header bound
    /// plus payload protection.
    pub dccp_overhead: u32,
    /// The configured TUN MTU (from `path_mtu`, lowered by `tun.mtu`): the
    /// TUN never goes above it (the core refuses larger packets).
    pub max: u32,
    /// The TUN has an IPv6 address: Linux removes a device's IPv6
    /// addresses below 1280 (RFC 8200 §5), so the TUN stays at 1280 when
    /// `max` allows, even if the PLPMTU is smaller (such IPv6 packets may
    /// be lost; IPv4 packets above the PLPMTU too, which is logged).
    pub ipv6_inside: bool,
}

impl TunMtuPolicy {
    /// The TUN MTU for the smallest PLPMTU confirmed (`None`: none yet, the
    /// base size, RFC 8899 §5.1.2), bounded below by the base.
    pub fn tun_mtu(&self, plpmtu: Option<u32>) -> u32 {
        let Some(cfg) = self.plpmtud else {
            return self.max;
        };
        let p = plpmtu.unwrap_or(cfg.base_bytes).max(cfg.base_bytes);
        let m = p.saturating_sub(self.dccp_overhead).min(self.max);
        if self.ipv6_inside && m < crate::mtu::IPV6_MIN_MTU && self.max >= crate::mtu::IPV6_MIN_MTU
        {
            return crate::mtu::IPV6_MIN_MTU;
        }
        m
    }

    /// The largest tunnelled packet the PLPMTU allows (for the log: below
    /// [`TunMtuPolicy::tun_mtu`] only when the IPv6 floor applies).
    pub fn fits(&self, plpmtu: u32) -> u32 {
        plpmtu.saturating_sub(self.dccp_overhead).min(self.max)
    }
}

/// Sets the TUN MTU (`ip link set dev NAME mtu N`, as at start).
pub fn set_tun_mtu(tun: &Tun, mtu: u32) -> anyhow::Result<()> {
    iproute::ip(&["link", "set", "dev", tun.name(), "mtu", &mtu.to_string()])
}

/// What the TUN is opened for: the outer path and the tunnel's options,
/// from which [`plan_tun`] plans the MTU.
#[derive(Clone, Copy)]
pub struct TunSetup<'a> {
    pub tun: &'a TunConfig,
    /// Largest IP packet a path carries (`[tunnel] path_mtu`).
    pub path_mtu: u32,
    /// Outer IPv6 (a longer header than IPv4).
    pub ipv6_outer: bool,
    /// Encapsulation header bytes (UDP's 8 for DCCP-in-UDP).
    pub encap_bytes: u32,
    /// Kernel offloads (`IFF_VNET_HDR`, TSO/USO).
    pub offload: bool,
    /// `auth = "protected"`: every data packet carries the AEAD's bytes.
    pub protected: bool,
    /// With DPLPMTUD on, the largest IP packet searched for (`path_mtu`,
    /// bounded by the interface MTUs).
    pub plpmtud_max_ip: Option<u32>,
}

/// The MTU plan for `setup` (with `protected`, lowered by the payload
/// protection's overhead) and the TUN MTU policy; nothing is opened.
pub fn plan_tun(setup: &TunSetup) -> anyhow::Result<(MtuPlan, TunMtuPolicy)> {
    let TunSetup {
        tun: cfg,
        path_mtu,
        ipv6_outer,
        encap_bytes,
        protected,
        plpmtud_max_ip,
        ..
    } = *setup;
    let mut plan = mtu_plan(cfg, path_mtu, ipv6_outer, encap_bytes);
    let mut extra = 0;
    if protected {
        // `auth = "protected"`: the AEAD's counter and tag ride in every
        // data packet (docs/SECURITY.md §5), so the TUN carries that much less.
        extra = mpdccp_proto::conn::PROTECTION_OVERHEAD as u32;
        plan.dccp_bytes += extra;
        plan.tun_mtu = plan.tun_mtu.saturating_sub(extra);
    }
    let mut ipv6_inside = false;
    for a in &cfg.addresses {
        ipv6_inside |= parse_cidr(a)?.0.is_ipv6();
    }
    let policy = TunMtuPolicy {
        plpmtud: plpmtud_max_ip.map(|max_ip| {
            PlpmtudConfig::for_path(max_ip.min(path_mtu), plan.outer_bytes, ipv6_outer)
        }),
        dccp_overhead: mpdccp_proto::conn::DATA_HEADER_MAX as u32 + extra,
        max: plan.tun_mtu,
        ipv6_inside,
    };
    Ok((plan, policy))
}

/// Opens and configures the TUN device for `setup` as `run` planned it
/// ([`plan::run_plan`]), with `queues` fds of one TUN (`IFF_MULTI_QUEUE`
/// when more than one; a sharded server's workers read one each). With
/// DPLPMTUD on, the TUN starts at what the base size allows (RFC 8899
/// §5.1.2: "the BASE_PLPMTU ... until confirmed"), so nothing is sent
/// oversized while the search runs, and is raised as sizes are confirmed.
/// How long a starting daemon waits for its TUN while another process
/// (the daemon it replaces, still exiting) holds it.
pub const TUN_BUSY_WAIT: Duration = Duration::from_secs(3);

pub fn open_tun_queues(
    setup: &TunSetup,
    run: &plan::RunPlan,
    queues: usize,
) -> anyhow::Result<Vec<Tun>> {
    let TunSetup {
        tun: cfg, offload, ..
    } = *setup;
    let (plan, policy) = (run.mtu, run.tun_mtu);
    let ipv6_inside = policy.ipv6_inside;
    let mtu = policy.tun_mtu(None);
    // A restart right after a stop finds the old TUN still being torn down.
    let open = |offload| Tun::open_queues_waiting(&cfg.name, offload, queues, TUN_BUSY_WAIT);
    let tuns = if offload {
        // Kernels without TUN offloads (or IFF_VNET_HDR) still get a tunnel.
        open(true).or_else(|e| {
            if e.kind() == std::io::ErrorKind::ResourceBusy {
                return Err(e);
            }
            tracing::warn!("TUN offloads unavailable ({e}); one packet per read/write");
            open(false)
        })?
    } else {
        open(false)?
    };
    let name = tuns[0].name().to_string();
    iproute::ip(&["link", "set", "dev", &name, "mtu", &mtu.to_string(), "up"])?;
    if cfg.txqueuelen > 0 {
        let q = cfg.txqueuelen.to_string();
        iproute::ip(&["link", "set", "dev", &name, "txqueuelen", &q])?;
    }
    for a in &cfg.addresses {
        let (ip, _) = parse_cidr(a)?;
        if ip.is_ipv6() {
            // No duplicate address detection on a point-to-point tunnel: the
            // address is usable at once.
            iproute::ip(&["-6", "addr", "add", a, "dev", &name, "nodad"])?;
        } else {
            iproute::ip(&["addr", "add", a, "dev", &name])?;
        }
    }
    for r in &cfg.routes {
        iproute::ip(&["route", "replace", r, "dev", &name])?;
    }
    info!(tun = %name, mtu, "{plan}");
    match policy.plpmtud {
        Some(p) => {
            info!(tun = %name, mtu, base_bytes = p.base_bytes, max_bytes = p.max_bytes,
                "DPLPMTUD on: TUN MTU starts at the base size, raised as larger sizes are confirmed (RFC 8899)");
            eprintln!(
                "tunnel {name}: {plan}; DPLPMTUD searches DCCP packets {}..={} bytes; MTU set to {mtu} until confirmed",
                p.base_bytes, p.max_bytes
            );
        }
        None => eprintln!("tunnel {name}: {plan}; MTU set to {mtu}"),
    }
    if ipv6_inside && plan.tun_mtu < crate::mtu::IPV6_MIN_MTU {
        tracing::warn!(mtu, "tunnel MTU below 1280: IPv6 inside will not work");
    }
    Ok(tuns)
}

/// Applies a new smallest PLPMTU to the TUN (`cause`: the path whose
/// change prompted it, for the log); returns the TUN MTU now in force.
pub fn follow_plpmtu(
    tun: &Tun,
    policy: &TunMtuPolicy,
    current: u32,
    plpmtu: Option<u32>,
    cause: &str,
) -> u32 {
    let want = policy.tun_mtu(plpmtu);
    if want == current {
        return current;
    }
    if let Err(e) = set_tun_mtu(tun, want) {
        tracing::warn!(tun = %tun.name(), mtu = want, "cannot set the TUN MTU: {e}");
        return current;
    }
    info!(tun = %tun.name(), path = %cause, plpmtu = ?plpmtu, from = current, to = want,
        "PLPMTU changed: TUN MTU set");
    if let Some(p) = plpmtu.filter(|&p| policy.fits(p) < want) {
        tracing::warn!(tun = %tun.name(), plpmtu = p, mtu = want,
            "the path carries tunnelled packets of {} bytes only: IPv6 needs 1280, so the TUN stays at 1280 and larger packets may be lost", policy.fits(p));
    }
    want
}

/// SIGTERM/SIGINT delivered as readable bytes on a socket, for the poll loop.
pub struct SignalPipe {
    rx: UnixStream,
    _tx: UnixStream,
}

impl SignalPipe {
    pub fn new() -> io::Result<SignalPipe> {
        let (rx, tx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::low_level::pipe::register(sig, tx.try_clone()?)?;
        }
        Ok(SignalPipe { rx, _tx: tx })
    }

    /// Whether a signal arrived since the last call.
    pub fn take(&self) -> bool {
        use std::io::Read;
        let mut buf = [0u8; 16];
        let mut any = false;
        while let Ok(n) = (&self.rx).read(&mut buf) {
            if n == 0 {
                break;
            }
            any = true;
        }
        any
    }
}

impl AsRawFd for SignalPipe {
    fn as_raw_fd(&self) -> RawFd {
        self.rx.as_raw_fd()
    }
}

/// The poll set of one loop iteration; fds are registered in a fixed order
/// and looked up by the index `add` returned.
pub struct PollSet {
    fds: Vec<libc::pollfd>,
    /// Busy polling (`[tunnel] busy_poll_us`): how long after the last
    /// readable fd `wait` spins with zero timeouts before it sleeps.
    busy: Duration,
    last_ready: Option<Instant>,
}

impl PollSet {
    pub fn with_capacity(n: usize) -> PollSet {
        PollSet {
            fds: Vec::with_capacity(n),
            busy: Duration::ZERO,
            last_ready: None,
        }
    }
    /// Spins up to `busy` after each readable fd instead of sleeping.
    pub fn with_busy_poll(mut self, busy: Duration) -> PollSet {
        self.busy = busy;
        self
    }
    pub fn clear(&mut self) {
        self.fds.clear();
    }
    pub fn add(&mut self, fd: RawFd) -> usize {
        self.fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        self.fds.len() - 1
    }
    pub fn readable(&self, i: usize) -> bool {
        self.fds
            .get(i)
            .is_some_and(|p| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
    }
    /// Waits until an fd is readable or `deadline` (absolute, `clock::now`
    /// time base) passes.
    pub fn wait(&mut self, now: Instant, deadline: Option<Instant>) -> io::Result<usize> {
        let spin_until = self.last_ready.map(|t| t + self.busy);
        if let Some(until) = spin_until.filter(|&u| u > now && !self.busy.is_zero()) {
            // Busy polling: zero-timeout polls until an fd is readable, the
            // spin window closes or the deadline comes (a timer's work).
            let until = deadline.map_or(until, |d| d.min(until));
            loop {
                let r = self.ppoll(Duration::ZERO)?;
                let t = crate::clock::now();
                if r > 0 {
                    self.last_ready = Some(t);
                    return Ok(r);
                }
                if t >= until {
                    if deadline.is_some_and(|d| t >= d) {
                        return Ok(0);
                    }
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let now = crate::clock::now().max(now);
        let d = match deadline {
            Some(t) => t.saturating_duration_since(now).min(Duration::from_secs(1)),
            None => Duration::from_secs(1),
        };
        let r = self.ppoll(d)?;
        if r > 0 && !self.busy.is_zero() {
            self.last_ready = Some(crate::clock::now());
        }
        Ok(r)
    }

    /// One `ppoll` of the set with timeout `d`; an interrupted call is 0.
    fn ppoll(&mut self, d: Duration) -> io::Result<usize> {
        let ts = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        for p in self.fds.iter_mut() {
            p.revents = 0;
        }
        // SAFETY: `fds` is a valid array of its length; `ts` a valid timespec.
        let r = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(io::Error::new(
                e.kind(),
                format!("ppoll on {} fds: {e}", self.fds.len()),
            ));
        }
        Ok(r as usize)
    }
}

/// The inner source address of an IP packet (IPv4 or IPv6), if well formed.
pub fn inner_src(pkt: &[u8]) -> Option<std::net::IpAddr> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(std::net::IpAddr::from(
            <[u8; 4]>::try_from(&pkt[12..16]).ok()?,
        )),
        6 if pkt.len() >= 40 => Some(std::net::IpAddr::from(
            <[u8; 16]>::try_from(&pkt[8..24]).ok()?,
        )),
        _ => None,
    }
}

/// The inner destination address of an IP packet.
pub fn inner_dst(pkt: &[u8]) -> Option<std::net::IpAddr> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(std::net::IpAddr::from(
            <[u8; 4]>::try_from(&pkt[16..20]).ok()?,
        )),
        6 if pkt.len() >= 40 => Some(std::net::IpAddr::from(
            <[u8; 16]>::try_from(&pkt[24..40]).ok()?,
        )),
        _ => None,
    }
}

/// A seed from the OS when the config gives none (keys must be unpredictable).
pub fn os_seed(configured: u64) -> u64 {
    if configured != 0 {
        return configured;
    }
    let mut b = [0u8; 8];
    // SAFETY: `b` is valid for 8 bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        crate::clock::now().as_nanos() ^ u64::from(std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_addresses() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(inner_src(&v4), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(inner_dst(&v4), Some("10.0.0.2".parse().unwrap()));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[23] = 1;
        v6[39] = 2;
        assert_eq!(inner_src(&v6), Some("::1".parse().unwrap()));
        assert_eq!(inner_dst(&v6), Some("::2".parse().unwrap()));
        assert_eq!(inner_dst(&v4[..10]), None);
        assert_eq!(inner_dst(&[0x10; 40]), None);
    }
}
