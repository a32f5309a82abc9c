//! The `mpdccp` command line. Each subcommand lives in `cmd/<name>.rs` with its
//! own `Args` and `run`; this file only parses and dispatches.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Multipath DCCP (RFC 9897) in userspace: a multi-access tunnel, its
/// simulator and the published experiments.
#[derive(Parser, Debug)]
#[command(name = "mpdccp", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a built-in two-path session in the deterministic harness and write a pcap.
    Demo(cmd::demo::Args),
    /// Run one simulated scenario (TOML) and write summary.json, timeseries.csv and plots.
    Sim(cmd::sim::Args),
    /// Run a parameter sweep (several scenario files and/or a matrix of --set values).
    Sweep(cmd::sweep::Args),
    /// Reproduce the published experiments (E1–E6) in the simulator: table, REPORT.md, plots.
    Reproduce(cmd::reproduce::Args),
    /// Benchmarks of the simulator and the tunnel.
    Bench(cmd::bench::Args),
    /// Run the aggregation server (tunnel endpoint) from a TOML config.
    Server(cmd::server::Args),
    /// Run the client (CPE) tunnel endpoint from a TOML config.
    Client(cmd::client::Args),
    /// Query a running daemon over its control socket (JSON).
    Status(cmd::status::Args),
    /// Userspace link emulator: delay, rate, buffer, loss and outages on a TUN pair.
    Netem(cmd::netem::Args),
    /// Run a scenario on the real tunnel in network namespaces (needs root).
    Testbed(cmd::testbed::Args),
    /// Print a new X25519 private key (base64) for the authenticated mode.
    Genkey(cmd::keys::GenArgs),
    /// Print the public key of the private key read on standard input.
    Pubkey(cmd::keys::PubArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    if !matches!(cli.command, Command::Server(_) | Command::Client(_)) {
        mpdccp_net::process::default_sigpipe();
    }
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::Reproduce(a) => cmd::reproduce::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Server(a) => cmd::server::run(a),
        Command::Client(a) => cmd::client::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Netem(a) => cmd::netem::run(a),
        Command::Testbed(a) => cmd::testbed::run(a),
        Command::Genkey(a) => cmd::keys::genkey(a),
        Command::Pubkey(a) => cmd::keys::pubkey(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: warnings).
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // No ANSI colour codes in a log file or a pipe.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}
