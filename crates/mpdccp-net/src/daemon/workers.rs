//! `workers = N`: the server as N packet threads.
//!
//! Each worker is the single-threaded server loop (`serve.rs`) with its
//! own `Endpoint`, its own UDP socket on the listen address (one
//! `SO_REUSEPORT` group) and its own queue of the TUN (`IFF_MULTI_QUEUE`).
//! The main thread keeps the signals and the ops socket and asks the workers
//! for their status over a channel.
//!
//! How packets reach the worker that owns their connection, and what the
//! workers share: `shard.rs`.

use std::os::fd::AsRawFd;
use std::time::Duration;

use tracing::{info, warn};

use super::config::ServerConfig;
use super::driver::{drive, Control};
use super::ops::OpsServer;
use super::plan::RunPlan;
use super::serve::{endpoint, Server, Workers};
use super::shard;
use super::transport::Listeners;
use super::{PollSet, SignalPipe};
use crate::tun::Tun;
use crate::udp::{PathSocket, PathSocketConfig};
use status::status;

mod status;

/// Binds the listening socket(s). With `n > 1`: first an exclusive bind
/// (no `SO_REUSEPORT`) as a probe, so a port another server holds — alone
/// or as a group of its own — fails here with `cannot bind udp ADDR` as it
/// does for one worker; then, the probe closed, `n` sockets in one
/// `SO_REUSEPORT` group, and the group's steering program, which only ever
/// picks one of these `n`: a socket that joins later (the kernel admits
/// only the same effective UID) receives nothing unless it replaces the
/// program (docs/SECURITY.md §7).
pub(super) fn bind_listeners(config: &ServerConfig, n: usize) -> anyhow::Result<Vec<PathSocket>> {
    let mut cfg = PathSocketConfig {
        device: None,
        local: Some(config.listen),
        buffer_bytes: config.tunnel.socket_buffer_bytes,
    };
    let probe = PathSocket::bind(&cfg, config.listen)?;
    if n == 1 {
        return Ok(vec![probe]);
    }
    // Port 0: the group takes the port the probe was given.
    cfg.local = Some(probe.local_addr());
    drop(probe);
    let mut socks = Vec::with_capacity(n);
    for _ in 0..n {
        socks.push(PathSocket::bind_reuseport(&cfg, config.listen)?);
    }
    crate::sockopt::attach_reuseport_steering(&socks[0], n as u32)
        .map_err(|e| anyhow::anyhow!("udp {}: reuseport steering program: {e}", config.listen))?;
    Ok(socks)
}

/// Starts the workers and serves signals and the ops socket until closed.
pub(super) fn run(
    config: &ServerConfig,
    plan: RunPlan,
    socks: Vec<PathSocket>,
    tuns: Vec<Tun>,
    ops: &OpsServer,
    signals: &SignalPipe,
) -> anyhow::Result<()> {
    let n = socks.len();
    let tun_mtu = plan.tun_mtu.tun_mtu(None);
    let (shared, shards) = shard::group(n, plan.conn.wire_profile, config.max_clients, tun_mtu)?;
    let started = crate::clock::now();
    let mut threads = Vec::with_capacity(n);
    let busy_poll = Duration::from_micros(config.tunnel.busy_poll_us);
    for (id, ((sock, tun), sh)) in socks.into_iter().zip(tuns).zip(shards).enumerate() {
        let ep = endpoint(config, plan.conn.clone(), n)?;
        let links = Listeners::new(sock, None, Vec::new());
        let workers = Workers::Shard(sh);
        let (config, tun_mtu) = (config.clone(), plan.tun_mtu);
        // Built on its thread: the receive and send batches stay there.
        let t = std::thread::Builder::new()
            .name(format!("mpdccp-w{id}"))
            .spawn(move || {
                let mut s = Server::new(&config, ep, tun, tun_mtu, links, workers);
                drive(&mut s, Control::Worker, busy_poll)
            })?;
        threads.push(t);
    }
    info!(workers = n, "server workers started");
    let mut closing = false;
    let mut poll = PollSet::with_capacity(2);
    loop {
        if threads.iter().all(|t| t.is_finished()) {
            break;
        }
        if !closing && threads.iter().any(|t| t.is_finished()) {
            warn!("a server worker stopped: closing the others");
            shared.close_all();
            closing = true;
        }
        poll.clear();
        let i_sig = poll.add(signals.as_raw_fd());
        let i_ops = poll.add(ops.wake_fd());
        let now = crate::clock::now();
        poll.wait(now, Some(now + Duration::from_millis(200)))?;
        if poll.readable(i_sig) && signals.take() && !closing {
            info!("signal: closing all connections gracefully (MP_CLOSE)");
            super::notify::stopping();
            shared.close_all();
            closing = true;
        }
        if poll.readable(i_ops) {
            let status = || status(&shared, started);
            if ops.handle_requests(&status) && !closing {
                shared.close_all();
                closing = true;
            }
        }
    }
    join(threads)
}

/// Waits for every worker; the first error (or panic) is the server's.
fn join(threads: Vec<std::thread::JoinHandle<anyhow::Result<()>>>) -> anyhow::Result<()> {
    let mut first_err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow::anyhow!("a server worker panicked"));
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}
