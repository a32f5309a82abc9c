//! `mpdccp status`: asks a running daemon over its control socket and prints
//! the JSON status (per path: state, cwnd, srtt, rates, losses; reorder stats;
//! every rejection counter).

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's control socket (`ops.control_socket` in its config).
    #[arg(long, short, default_value = "/run/mpdccp.sock")]
    socket: PathBuf,
    /// Print the JSON document as is (default: a short table, then the JSON).
    #[arg(long)]
    json: bool,
    /// Ask the daemon to close gracefully (MP_CLOSE) and exit.
    #[arg(long)]
    close: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cmd = if args.close { "close" } else { "status" };
    let v = mpdccp_net::daemon::ops::query(&args.socket, cmd)
        .map_err(|e| anyhow::anyhow!("{}: {e} (is the daemon running?)", args.socket.display()))?;
    if args.json || args.close {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} up {:.0} s, tun {} mtu {}",
        v["role"],
        v["uptime_s"].as_f64().unwrap_or(0.0),
        v["tun"]["name"],
        v["tun"]["mtu"]
    );
    for c in v["connections"].as_array().into_iter().flatten() {
        println!(
            "connection {}: established={} delivered={} lost={}",
            c["handle"], c["established"], c["stats"]["delivered_pkts"], c["stats"]["lost_pkts"]
        );
        println!(
            "  {:>4} {:<8} {:<12} {:>4} {:>6} {:>9} {:>12}",
            "id", "name", "state", "prio", "cwnd", "srtt_ms", "rate_mbps"
        );
        for p in c["paths"].as_array().into_iter().flatten() {
            println!(
                "  {:>4} {:<8} {:<12} {:>4} {:>6} {:>9.2} {:>12.2}",
                p["id"],
                p["name"].as_str().unwrap_or("-"),
                p["state"].as_str().unwrap_or("?"),
                p["priority"],
                p["cwnd_pkts"],
                p["srtt_ms"].as_f64().unwrap_or(f64::NAN),
                p["delivery_rate_bps"].as_f64().unwrap_or(0.0) / 1e6
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
