//! One module per subcommand.
//!
//! The doc comments of the `Args` here are the CLI's `--help` text (clap
//! derive), written for a terminal: `[tunnel]` and `<scenario name>` are
//! literal, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

/// Writes what `mpdccp client` and `mpdccp server` share: the `Args`
/// (`--config FILE`, documented by the caller's doc comment, and
/// `--control-socket`) and the `run` that loads the TOML configuration,
/// applies the override and runs the daemon until it closes. The two differ
/// only in their configuration type, daemon and documented keys.
macro_rules! daemon_command {
    (
        $(#[$config_doc:meta])*
        config: $config:ty,
        daemon: $daemon:path $(,)?
    ) => {
        #[derive(clap::Args, Debug)]
        #[command(after_long_help = $crate::cmd::kind_names_help())]
        pub struct Args {
            $(#[$config_doc])*
            #[arg(long, short, verbatim_doc_comment)]
            config: std::path::PathBuf,
            /// Override `ops.control_socket`.
            #[arg(long)]
            control_socket: Option<std::path::PathBuf>,
        }

        pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
            let mut cfg = <$config>::load(&args.config)?;
            if let Some(s) = args.control_socket {
                cfg.ops.control_socket = s;
            }
            $daemon(cfg)?;
            Ok(std::process::ExitCode::SUCCESS)
        }
    };
}

/// The valid `cc`, `scheduler` and `reorder` names, from the core's enums
/// (the one list of each), for help texts.
pub fn kind_names_help() -> String {
    use mpdccp_proto::cc::CcKind;
    use mpdccp_proto::reorder::ReorderKind;
    use mpdccp_proto::sched::SchedulerKind;
    format!(
        "tunnel.cc: {}\ntunnel.scheduler: {}\ntunnel.reorder: {}\n\n{}",
        CcKind::valid_names().join(", "),
        SchedulerKind::valid_names().join(", "),
        ReorderKind::valid_names().join(", "),
        crate::EXIT_DAEMON
    )
}

pub mod bench;
pub mod bench_aggregation;
pub mod client;
pub mod demo;
pub mod keys;
pub mod netem;
pub mod reproduce;
pub mod server;
pub mod sim;
pub mod status;
pub mod sweep;
pub mod sweep_collect;
pub mod sweep_plan;
pub mod sweep_slurm;
pub mod sweep_stats;
pub mod testbed;
