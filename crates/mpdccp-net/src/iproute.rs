//! `ip` (iproute2) and other helper programs, run to completion: the daemon
//! configures its TUN with them, so what it does can be reproduced by hand
//! from the log (the lab's namespaces use them too).

use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use tracing::debug;

/// Runs `ip ARGS…`, failing with its stderr.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    run("ip", args)
}

/// Runs a program to completion, failing with its stderr.
pub fn run(prog: &str, args: &[&str]) -> anyhow::Result<()> {
    debug!(cmd = %format!("{prog} {}", args.join(" ")), "run");
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run `{prog}`"))?;
    if !out.status.success() {
        bail!(
            "`{prog} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
