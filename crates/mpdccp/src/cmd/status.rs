//! `mpdccp status`: asks a running daemon over its control socket and prints
//! its status: a table per connection for humans (per path: state, cwnd,
//! srtt, rate, loss, packets; the counters that are not zero), or the whole
//! JSON document with `--json`.

use std::path::PathBuf;
use std::process::ExitCode;

use mpdccp_net::daemon::status::Status;
use mpdccp_net::daemon::status_render::render;
use serde::Deserialize;

/// Show the status of a running `mpdccp server` or `mpdccp client`, or ask
/// it to shut down gracefully.
///
/// Exit status: 0 success, 1 the daemon could not be reached.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The daemon's control socket (`ops.control_socket` in its config).
    #[arg(long, short, default_value = "/run/mpdccp.sock")]
    socket: PathBuf,
    /// Print the whole status document as JSON (every counter, per path and
    /// per connection) instead of the tables.
    #[arg(long)]
    json: bool,
    /// Ask the daemon to close every connection gracefully (MP_CLOSE on
    /// each subflow, at most 3 s) and exit, as SIGTERM does; prints its
    /// JSON reply.
    #[arg(long)]
    close: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cmd = if args.close { "close" } else { "status" };
    let v = mpdccp_net::daemon::ops::query(&args.socket, cmd)
        .map_err(|e| anyhow::anyhow!("{}: {e} (is the daemon running?)", args.socket.display()))?;
    if args.json || args.close {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let status = Status::deserialize(&v).map_err(|e| {
            anyhow::anyhow!("{}: not a status document: {e}", args.socket.display())
        })?;
        print!("{}", render(&status));
    }
    Ok(ExitCode::SUCCESS)
}
