//! `mpdccp server`: the aggregation end. One UDP port for every client and
//! path (RFC 6773); with `dccp_listen`, native DCCP (IP protocol 33) too,
//! on one raw socket per listed address; with `udccp_listen`, a second UDP
//! socket that speaks U-DCCP (`udccp.rs`). One TUN for all clients.
//!
//! `run` opens all of that, then runs one packet loop (`serve.rs`) or,
//! with `workers > 1`, N of them on threads (`workers.rs`).

use tracing::info;

use super::config::ServerConfig;
use super::driver::{drive, Control};
use super::ops::OpsServer;
use super::plan::run_plan;
use super::serve::{endpoint, Server, Workers};
use super::transport::Listeners;
use super::SignalPipe;
use crate::clock;
use crate::raw::RawDccpSocket;

/// Runs the server until SIGTERM/SIGINT (or `close` on the control socket).
pub fn run(config: ServerConfig) -> anyhow::Result<()> {
    clock::set_precise_timers();
    super::request_sched_slice(config.tunnel.sched_slice_us);
    let n = config.workers.max(1);
    // The listening socket(s) first: a second server on this port fails
    // here, with the address in the error, before touching any TUN.
    let sock_buf = config.tunnel.socket_buffer_bytes;
    // With systemd socket activation the port was bound before we started
    // (`activation.rs`); `_passed` holds the other family's socket then.
    let (mut socks, _passed) = super::activation::listeners(&config, n)?;
    // The port in the other address family too (docs/SECURITY.md §7),
    // held until the server exits.
    let _hold = if _passed.is_empty() {
        super::hold::hold_other_family(socks[0].local_addr(), &socks[0])?
    } else {
        None
    };
    let setup = config.tun_setup();
    let plan = run_plan(&setup, &config.tunnel)?;
    let mut tuns = super::open_tun_queues(&setup, &plan, n)?;
    let udccp = super::udccp::bind_listener(config.udccp_listen, sock_buf, config.tunnel.offload)?;
    let mut raw: Vec<RawDccpSocket> = Vec::new();
    for &a in &config.dccp_listen {
        raw.push(super::native::open(a, None, sock_buf)?);
        info!(listen = %a, "server listening (native DCCP)");
        eprintln!("server listening on dccp {a}");
    }
    for sock in &socks {
        sock.set_gro(config.tunnel.offload);
    }
    let local = socks[0].local_addr();
    info!(listen = %local, workers = n, "server listening");
    eprintln!("server listening on udp {local}");
    let ops = OpsServer::bind(&config.ops.control_socket, config.ops.prometheus)?;
    let signals = SignalPipe::new()?;
    super::notify::ready(&format!("listening on udp {local}"));
    if n > 1 {
        // Validated: workers serve UDP only (no raw or U-DCCP socket).
        return super::workers::run(&config, plan, socks, tuns, &ops, &signals);
    }
    let links = Listeners::new(socks.remove(0), udccp, raw);
    let ep = endpoint(&config, plan.conn, 1)?;
    let tun = tuns.remove(0);
    let mut s = Server::new(&config, ep, tun, plan.tun_mtu, links, Workers::One);
    let control = Control::Main {
        signals: &signals,
        ops: &ops,
    };
    let busy_poll = std::time::Duration::from_micros(config.tunnel.busy_poll_us);
    drive(&mut s, control, busy_poll)
}
