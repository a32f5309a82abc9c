//! Network namespaces, veth pairs and child processes with RAII cleanup.
//!
//! Everything is done with iproute2 (`ip netns`, `ip link`, `ip addr`,
//! `ip route`) so a failing testbed can be reproduced by hand from the log.
//! Each guard removes what it created when dropped — on success, on error and
//! on unwinding — so tests and the testbed leave nothing behind. Names should
//! carry the creating process id (see [`unique_prefix`]) so parallel runs never
//! collide.

use std::io;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as StdInstant};

use anyhow::{bail, Context};
pub use mpdccp_net::iproute::{ip, run};
use tracing::warn;

/// A short prefix unique to this process, e.g. `m1234`; interface names are
/// limited to 15 bytes, so keep what follows it short.
pub fn unique_prefix() -> String {
    format!("m{}", std::process::id() % 1_000_000)
}

/// Whether we run with CAP_NET_ADMIN / as root (what namespaces need).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Fails the test `test` unless it runs as root. Tests that need root are
/// `#[ignore]`d (a plain `cargo test` reports them ignored, never passed);
/// `cargo test -- --include-ignored` runs them, and then a missing root is
/// a failure, not a skip. Returns true, so `if !require_root(..)` reads as
/// before.
pub fn require_root(test: &str) -> bool {
    assert!(
        is_root(),
        "{test}: needs root (network namespaces); run as root, as .ci/run does"
    );
    true
}

/// Fails the test `test` unless `tool` is on the PATH (`.ci/run` installs
/// every tool a test uses). Returns true.
pub fn require_tool(test: &str, tool: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(found, "{test}: needs {tool} (see .ci/run for the packages)");
    true
}

/// Runs `ip -n NS ARGS…`.
pub fn ip_in(ns: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Runs `sysctl -w KEY=VALUE` inside namespace `ns`.
pub fn sysctl_in(ns: &str, key: &str, value: &str) -> anyhow::Result<()> {
    run(
        "ip",
        &[
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            &format!("{key}={value}"),
        ],
    )
}

/// Moves the calling thread into network namespace `name` (only this thread:
/// `setns` on a thread of a multi-threaded process affects that thread).
/// Sockets it creates afterwards live in that namespace. Use it on a thread
/// made for the purpose (see [`spawn_in_netns`]).
pub fn enter_netns(name: &str) -> anyhow::Result<()> {
    let path = format!("/var/run/netns/{name}");
    let f = std::fs::File::open(&path).with_context(|| format!("cannot open {path}"))?;
    use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
    move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&f),
        Some(LinkNameSpaceType::Network),
    )
    .with_context(|| format!("setns({name})"))
}

/// Runs `f` on a new thread inside network namespace `name`.
pub fn spawn_in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<anyhow::Result<T>> {
    let name = name.to_string();
    std::thread::spawn(move || {
        enter_netns(&name)?;
        f()
    })
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` with its loopback up.
    pub fn new(name: &str) -> anyhow::Result<Netns> {
        // A stale namespace of the same name (a crashed earlier run with our pid) is replaced.
        let _ = run("ip", &["netns", "del", name]);
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ip_in(name, &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME ARGS…`
    pub fn ip(&self, args: &[&str]) -> anyhow::Result<()> {
        ip_in(&self.name, args)
    }

    pub fn sysctl(&self, key: &str, value: &str) -> anyhow::Result<()> {
        sysctl_in(&self.name, key, value)
    }

    /// A command that runs `prog` inside this namespace.
    pub fn command(&self, prog: &str) -> Command {
        Netns::command_in(&self.name, prog)
    }

    /// A command that runs `prog` inside namespace `name`.
    pub fn command_in(name: &str, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", name, prog]);
        c
    }

    /// Runs `prog ARGS…` inside the namespace to completion and returns stdout.
    pub fn output(&self, prog: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = self
            .command(prog)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run `{prog}` in {}", self.name))?;
        if !out.status.success() {
            bail!(
                "`{prog} {}` in {} failed: {}{}",
                args.join(" "),
                self.name,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Like [`Netns::spawn`], with stdout and stderr appended to `log`.
    pub fn spawn_logged(
        &self,
        prog: &str,
        args: &[&str],
        log: &std::path::Path,
    ) -> anyhow::Result<Proc> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let child = self
            .command(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone()?)
            .stderr(f)
            .spawn()
            .with_context(|| format!("cannot start `{prog}` in {}", self.name))?;
        Ok(Proc::new(format!("{prog}@{}", self.name), child))
    }

    /// Spawns `prog ARGS…` inside the namespace; the process is stopped when the
    /// returned guard drops. Its stdout goes to our stderr: our stdout may be
    /// a JSON document (`--json`) that a tool's chatter would corrupt.
    pub fn spawn(&self, prog: &str, args: &[&str]) -> anyhow::Result<Proc> {
        let child = self
            .command(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::io::stderr())
            .spawn()
            .with_context(|| format!("cannot start `{prog}` in {}", self.name))?;
        Ok(Proc::new(format!("{prog}@{}", self.name), child))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Processes still inside keep the namespace's devices alive until they exit;
        // callers drop their `Proc` guards first (declare them after the namespaces).
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            warn!(ns = %self.name, "cannot delete namespace: {e:#}");
        }
    }
}

/// Creates a veth pair with one end in each namespace (`None` = the current
/// one). Deleting either namespace deletes the pair, so no guard is needed
/// when both ends live in guarded namespaces.
pub fn veth_pair(
    a: &str,
    a_ns: Option<&Netns>,
    b: &str,
    b_ns: Option<&Netns>,
) -> anyhow::Result<()> {
    let mut args = vec!["link", "add", a];
    if let Some(ns) = a_ns {
        args.extend_from_slice(&["netns", ns.name()]);
    }
    args.extend_from_slice(&["type", "veth", "peer", "name", b]);
    if let Some(ns) = b_ns {
        args.extend_from_slice(&["netns", ns.name()]);
    }
    ip(&args)
}

/// A child process, terminated (SIGTERM, then SIGKILL after a grace period) on drop.
#[derive(Debug)]
pub struct Proc {
    label: String,
    child: Option<Child>,
    grace: Duration,
}

impl Proc {
    pub fn new(label: String, child: Child) -> Proc {
        Proc {
            label,
            child: Some(child),
            grace: Duration::from_secs(3),
        }
    }

    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether the process already exited (and with what status).
    pub fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => c.try_wait(),
            None => Ok(None),
        }
    }

    /// Sends SIGTERM and waits up to the grace period, then SIGKILL.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        // `ip netns exec` execs the program in place, so the pid is the program's own.
        if let Some(pid) = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = StdInstant::now() + self.grace;
        while StdInstant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        warn!(proc = %self.label, "did not exit after SIGTERM; killing");
        let _ = child.kill();
        child.wait().ok()
    }

    /// SIGKILL (a crash, as `kill -9`) and waits for the exit.
    pub fn kill(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = child.kill();
        child.wait().ok()
    }

    /// Waits for the process to exit by itself, up to `timeout`, then stops it.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = StdInstant::now() + timeout;
        while StdInstant::now() < deadline {
            match self.try_wait() {
                Ok(Some(st)) => {
                    self.child = None;
                    return Some(st);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        self.stop()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}
