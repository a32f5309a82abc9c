//! The namespace topology of the testbed and the tests.
//!
//! ```text
//!  client ns                router ns r1 (netem)            server ns
//!  p1 10.1.1.2/24 ─veth─ c 10.1.1.1 │ s 10.1.2.1 ─veth─ p1 10.1.2.2/24
//!  p2 10.2.1.2/24 ─veth─ c 10.2.1.1 │ s 10.2.2.1 ─veth─ p2 10.2.2.2/24
//!  …                         router ns r2 …
//! ```
//! Path `i` (1-based) uses 10.i.1.0/24 on the client side and 10.i.2.0/24 on
//! the server side; each router namespace runs one `mpdccp netem` that holds
//! the packets of both directions. Names carry a per-process prefix, and all
//! of it — processes first, then namespaces (which take their veths with
//! them) — is removed when the [`Topology`] drops.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant as StdInstant};

use anyhow::{bail, Context};

use crate::netns::{self, veth_pair, Netns, Proc};

/// Addresses and interface names of one path.
#[derive(Clone, Debug)]
pub struct PathAddrs {
    /// Interface name in the client and in the server namespace (`p1`, …).
    pub iface: String,
    pub client_ip: Ipv4Addr,
    pub router_client_ip: Ipv4Addr,
    pub router_server_ip: Ipv4Addr,
    pub server_ip: Ipv4Addr,
}

impl PathAddrs {
    fn new(i: usize) -> PathAddrs {
        let n = i as u8;
        PathAddrs {
            iface: format!("p{i}"),
            client_ip: Ipv4Addr::new(10, n, 1, 2),
            router_client_ip: Ipv4Addr::new(10, n, 1, 1),
            router_server_ip: Ipv4Addr::new(10, n, 2, 1),
            server_ip: Ipv4Addr::new(10, n, 2, 2),
        }
    }
}

/// Client, one router per path, server. Field order matters: processes are
/// stopped before the namespaces are deleted.
pub struct Topology {
    pub procs: Vec<Proc>,
    pub client: Netns,
    pub server: Netns,
    pub routers: Vec<Netns>,
    pub paths: Vec<PathAddrs>,
    /// Scratch directory for ready files and logs, removed on drop.
    pub dir: PathBuf,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Topology {
    /// Builds `n_paths` paths (1..=9). Needs root.
    pub fn build(n_paths: usize) -> anyhow::Result<Topology> {
        if !netns::is_root() {
            bail!("building network namespaces needs root (CAP_NET_ADMIN); run as root");
        }
        if !(1..=9).contains(&n_paths) {
            bail!("1..=9 paths supported, got {n_paths}");
        }
        let prefix = format!(
            "{}x{}",
            netns::unique_prefix(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(format!("mpdccp-{prefix}"));
        std::fs::create_dir_all(&dir)?;
        let client = Netns::new(&format!("{prefix}c"))?;
        let server = Netns::new(&format!("{prefix}s"))?;
        let mut topo = Topology {
            procs: Vec::new(),
            client,
            server,
            routers: Vec::new(),
            paths: Vec::new(),
            dir,
        };
        for i in 1..=n_paths {
            let r = Netns::new(&format!("{prefix}r{i}"))?;
            let a = PathAddrs::new(i);
            veth_pair(&a.iface, Some(&topo.client), "c", Some(&r))?;
            veth_pair("s", Some(&r), &a.iface, Some(&topo.server))?;
            let cidr = |ip: Ipv4Addr| format!("{ip}/24");
            topo.client
                .ip(&["addr", "add", &cidr(a.client_ip), "dev", &a.iface])?;
            topo.client.ip(&["link", "set", &a.iface, "up"])?;
            r.ip(&["addr", "add", &cidr(a.router_client_ip), "dev", "c"])?;
            r.ip(&["addr", "add", &cidr(a.router_server_ip), "dev", "s"])?;
            r.ip(&["link", "set", "c", "up"])?;
            r.ip(&["link", "set", "s", "up"])?;
            topo.server
                .ip(&["addr", "add", &cidr(a.server_ip), "dev", &a.iface])?;
            topo.server.ip(&["link", "set", &a.iface, "up"])?;
            let net = |ip: Ipv4Addr| {
                let o = ip.octets();
                format!("{}.{}.{}.0/24", o[0], o[1], o[2])
            };
            topo.client.ip(&[
                "route",
                "add",
                &net(a.server_ip),
                "via",
                &a.router_client_ip.to_string(),
            ])?;
            topo.server.ip(&[
                "route",
                "add",
                &net(a.client_ip),
                "via",
                &a.router_server_ip.to_string(),
            ])?;
            // Without an emulator the router forwards directly (unshaped path).
            r.sysctl("net.ipv4.ip_forward", "1")?;
            topo.routers.push(r);
            topo.paths.push(a);
        }
        for ns in [&topo.client, &topo.server] {
            // Replies must leave by the interface they came in on, whatever rp_filter thinks.
            ns.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
            ns.sysctl("net.ipv4.conf.default.rp_filter", "0")?;
        }
        Ok(topo)
    }

    /// Starts `mpdccp netem` in router `i` (0-based) with `args` describing
    /// the path (e.g. `["--delay-ms","20"]` or `["--scenario",F,"--path",N]`),
    /// and waits until its TUNs and rules are in place.
    pub fn start_emulator(&mut self, exe: &Path, i: usize, args: &[&str]) -> anyhow::Result<()> {
        let ready = self.dir.join(format!("netem{i}.ready"));
        let _ = std::fs::remove_file(&ready);
        let ready_s = ready.to_string_lossy().into_owned();
        let mut all: Vec<&str> = vec![
            "netem",
            "--client-if",
            "c",
            "--server-if",
            "s",
            "--ready-file",
            &ready_s,
        ];
        all.extend_from_slice(args);
        let exe_s = exe.to_string_lossy().into_owned();
        let mut p = self.routers[i].spawn(&exe_s, &all)?;
        let deadline = StdInstant::now() + Duration::from_secs(10);
        while !ready.exists() {
            if let Ok(Some(st)) = p.try_wait() {
                bail!("netem in router {} exited early: {st}", i + 1);
            }
            if StdInstant::now() > deadline {
                bail!("netem in router {} not ready after 10 s", i + 1);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.procs.push(p);
        Ok(())
    }

    /// Spawns a process in the client or server namespace and keeps its guard.
    pub fn spawn_in(&mut self, server: bool, prog: &str, args: &[&str]) -> anyhow::Result<usize> {
        let ns = if server { &self.server } else { &self.client };
        let p = ns
            .spawn(prog, args)
            .with_context(|| format!("spawn {prog}"))?;
        self.procs.push(p);
        Ok(self.procs.len() - 1)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Stop processes in reverse start order before namespaces go.
        while let Some(mut p) = self.procs.pop() {
            p.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
