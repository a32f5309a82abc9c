//! The `mpdccp` command line. Each subcommand lives in `cmd/<name>.rs` with its
//! own `Args` and `run`; this file only parses and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Multipath DCCP (RFC 9897) in userspace: a multi-access tunnel, its
/// simulator and the published experiments.
#[derive(Parser, Debug)]
#[command(name = "mpdccp", version, about, long_about = None, after_help = EXIT_ALL)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Exit status of each subcommand (README "Exit status"; 2 is always a
// usage error, as clap reports it, or a value the command rejects before
// it runs).
const EXIT_ALL: &str = "Exit status: 0 success; 1 failure (a failed run or check, an unreachable \
daemon, a configuration error); 2 usage error. Each subcommand's --help says which.";
const EXIT_RUN: &str = "Exit status: 0 the run completed and its output is written; 1 it failed; \
2 usage error.";
const EXIT_SIM: &str = "Exit status: 0 the scenario ran and its outputs are written; 1 the \
scenario was rejected or the run failed; 2 usage error.";
const EXIT_SWEEP: &str = "Exit status: 0 every run finished; 1 a run failed or (--collect) a cell \
has not finished; 2 usage error.";
const EXIT_REPRODUCE: &str =
    "Exit status: 0 every check passed; 1 a check failed or a run failed; \
2 usage error (also an unknown experiment in --only).";
const EXIT_BENCH: &str = "Exit status: 0 the benchmark ran (thresholds are reported); 1 a run \
failed or (--check) a cell failed a threshold; 2 usage error.";
pub(crate) const EXIT_DAEMON: &str =
    "Exit status: 0 after a graceful close (SIGTERM, SIGINT or `mpdccp \
status --close`); 1 the configuration was rejected or a fatal error stopped the daemon (the \
message says which); 2 usage error. systemd restarts it on 1 (Restart=on-failure).";
const EXIT_STATUS: &str = "Exit status: 0 the daemon answered; 1 it could not be reached (no \
socket, not running, no permission); 2 usage error.";
const EXIT_NETEM: &str = "Exit status: 0 after SIGTERM/SIGINT; 1 the emulator could not be set \
up; 2 usage error.";
const EXIT_KEYS: &str = "Exit status: 0 the key is printed; 1 no key (standard input is not a \
base64 X25519 key, or no randomness); 2 usage error.";

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a built-in two-path session in the deterministic harness and write a pcap.
    #[command(after_help = EXIT_RUN)]
    Demo(cmd::demo::Args),
    /// Run one simulated scenario (TOML) and write summary.json, timeseries.csv and plots.
    #[command(after_help = EXIT_SIM)]
    Sim(cmd::sim::Args),
    /// Run a parameter sweep (several scenario files and/or a matrix of --set values).
    #[command(after_help = EXIT_SWEEP)]
    Sweep(cmd::sweep::Args),
    /// Reproduce the published experiments (E1–E6) in the simulator: table, REPORT.md, plots.
    #[command(after_help = EXIT_REPRODUCE)]
    Reproduce(cmd::reproduce::Args),
    /// Benchmarks of the simulator and the tunnel.
    #[command(after_help = EXIT_BENCH)]
    Bench(cmd::bench::Args),
    /// Run the aggregation server (tunnel endpoint) from a TOML config.
    #[command(after_help = EXIT_DAEMON)]
    Server(cmd::server::Args),
    /// Run the client (CPE) tunnel endpoint from a TOML config.
    #[command(after_help = EXIT_DAEMON)]
    Client(cmd::client::Args),
    /// Query a running daemon over its control socket (JSON).
    #[command(after_help = EXIT_STATUS)]
    Status(cmd::status::Args),
    /// Userspace link emulator: delay, rate, buffer, loss and outages on a TUN pair.
    #[command(after_help = EXIT_NETEM)]
    Netem(cmd::netem::Args),
    /// Run a scenario on the real tunnel in network namespaces (needs root).
    #[command(after_help = EXIT_RUN)]
    Testbed(cmd::testbed::Args),
    /// Print a new X25519 private key (base64) for the authenticated mode.
    #[command(after_help = EXIT_KEYS)]
    Genkey(cmd::keys::GenArgs),
    /// Print the public key of the private key read on standard input.
    #[command(after_help = EXIT_KEYS)]
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
