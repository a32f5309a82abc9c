//! `mpdccp server` (placeholder until its issue lands).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`mpdccp server` is not implemented yet")
}
