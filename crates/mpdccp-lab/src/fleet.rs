//! A gateway fleet in network namespaces, for the fleet benchmark
//! (`crate::fleet_bench`); net_fleet's tests build the same one with the
//! addresses, keys and BIRD configurations of this module (docs/FLEET.md):
//!
//! ```text
//!  client k ─pa─┐            ┌── g1  (service 10.200.0.1 on lo, unicast 10.0.1.2)
//!               ├─ router ───┼── g2  (…, unicast 10.0.2.2)
//!  client k ─pb─┘  ECMP, L4  └── g3  (…, unicast 10.0.3.2)
//! ```
//!
//! The router runs BIRD 2 and learns over BGP, with ECMP (`merge paths`)
//! and L4 hashing (`fib_multipath_hash_policy = 1`), what each gateway's
//! BIRD exports: the kernel routes `mpdccp server` installs with
//! `proto 200` (the service address while it serves, each connected
//! peer's `allowed_ips`). The router's "Internet" address 10.201.0.1
//! reaches client k's inner address 10.77.k.1 through its gateway.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::netns::{unique_prefix, veth_pair, Netns, Proc};
use crate::topo::{lab_private_key, wait_for};
use mpdccp_net::daemon::keyfile::encode_key;

pub const SERVICE: &str = "10.200.0.1";
/// An "Internet" address on the router, reached through the tunnel.
pub const INTERNET: &str = "10.201.0.1";
pub const PORT: u16 = 6773;

/// Gateway `i` (1-based)'s unicast address.
pub fn unicast(i: usize) -> String {
    format!("10.0.{i}.2")
}

/// Client `k` (1-based)'s inner address and prefix (its `allowed_ips`).
pub fn inner(k: usize) -> String {
    format!("10.77.{k}.1")
}
pub fn inner_prefix(k: usize) -> String {
    format!("10.77.{k}.0/24")
}

/// The lab key of client `k` (the server's is role 0).
pub fn client_key(k: usize) -> [u8; 32] {
    lab_private_key(100 + u8::try_from(k).expect("k < 156"))
}

/// BGP timers: connect at once, retry every second, notice a dead
/// neighbour within 3 s.
const BGP_TIMERS: &str = "hold time 3; keepalive time 1; connect delay time 1; \
                          connect retry time 1; error wait time 1, 2;";

/// The router: learns from every gateway, installs ECMP (`merge paths`).
pub fn router_bird(gateways: usize) -> String {
    let mut c = String::from(
        "router id 10.0.1.1;\nprotocol device { scan time 1; }\n\
         protocol kernel { merge paths on; ipv4 { import none; export all; }; }\n",
    );
    for i in 1..=gateways {
        c += &format!(
            "protocol bgp g{i} {{ local 10.0.{i}.1 as 65000; neighbor {uni} as 6500{i}; {BGP_TIMERS}\n\
             ipv4 {{ import all; export none; }}; }}\n",
            uni = unicast(i)
        );
    }
    c
}

/// A gateway: announces the kernel routes `mpdccp server` tags `proto 200`.
pub fn gateway_bird(i: usize) -> String {
    format!(
        "router id {uni};\nprotocol device {{ scan time 1; }}\n\
         protocol kernel {{ learn; scan time 1; ipv4 {{ import where krt_source = 200; export none; }}; }}\n\
         protocol bgp upstream {{ local {uni} as 6500{i}; neighbor 10.0.{i}.1 as 65000; passive on; {BGP_TIMERS}\n\
         ipv4 {{ import none; export all; next hop self; }}; }}\n",
        uni = unicast(i)
    )
}

/// The namespaces, their daemons and BIRDs; everything goes on drop.
pub struct FleetLab {
    pub dir: PathBuf,
    exe: PathBuf,
    // Processes first: they must stop before their namespaces go.
    client_procs: Vec<Option<Proc>>,
    gw_procs: Vec<Option<Proc>>,
    birds: Vec<Proc>,
    pub clients: Vec<Netns>,
    pub router: Netns,
    gws: Vec<Netns>,
}

impl Drop for FleetLab {
    fn drop(&mut self) {
        self.client_procs.clear();
        self.gw_procs.clear();
        self.birds.clear();
    }
}

impl FleetLab {
    /// Namespaces, links, keys and BIRD for `gateways` hosts and `clients`
    /// two-path clients; no daemon runs yet.
    pub fn build(exe: &Path, dir: &Path, gateways: usize, clients: usize) -> anyhow::Result<Self> {
        let p = format!("{}fb", unique_prefix());
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let router = Netns::new(&format!("{p}r"))?;
        let gws = (1..=gateways)
            .map(|i| Netns::new(&format!("{p}g{i}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let cls = (1..=clients)
            .map(|k| Netns::new(&format!("{p}c{k}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for ns in cls.iter().chain(gws.iter()).chain([&router]) {
            ns.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
            ns.sysctl("net.ipv4.conf.default.rp_filter", "0")?;
            ns.sysctl("net.ipv4.ip_forward", "1")?;
        }
        router.sysctl("net.ipv4.fib_multipath_hash_policy", "1")?;
        for (k, client) in cls.iter().enumerate() {
            link_client(&router, client, k + 1)?;
        }
        router.ip(&["addr", "add", &format!("{INTERNET}/32"), "dev", "lo"])?;
        for (i, g) in gws.iter().enumerate() {
            link_gateway(&router, g, i + 1)?;
        }
        write_keys(dir, clients)?;
        let mut lab = FleetLab {
            dir: dir.to_path_buf(),
            exe: exe.to_path_buf(),
            client_procs: (0..clients).map(|_| None).collect(),
            gw_procs: (0..gateways).map(|_| None).collect(),
            birds: Vec::new(),
            clients: cls,
            router,
            gws,
        };
        lab.start_bird(None, &router_bird(gateways))?;
        for i in 1..=gateways {
            lab.start_bird(Some(i), &gateway_bird(i))?;
        }
        Ok(lab)
    }

    fn start_bird(&mut self, gateway: Option<usize>, conf: &str) -> anyhow::Result<()> {
        let who = gateway.map_or("r".to_string(), |i| format!("g{i}"));
        let f = self.dir.join(format!("bird-{who}.conf"));
        std::fs::write(&f, conf)?;
        let ns = gateway.map_or(&self.router, |i| &self.gws[i - 1]);
        let ctl = self.dir.join(format!("bird-{who}.ctl"));
        let pid = self.dir.join(format!("bird-{who}.pid"));
        let args = ["-f", "-c", path_str(&f), "-s", path_str(&ctl)];
        let args = [&args[..], &["-P", path_str(&pid)]].concat();
        let p = ns.spawn_logged("bird", &args, &self.log(&format!("bird-{who}")))?;
        self.birds.push(p);
        Ok(())
    }

    fn sock(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.sock"))
    }

    pub fn log(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.log"))
    }

    /// Starts `mpdccp server` on gateway `i` (every peer listed, host id `i`).
    pub fn start_gateway(&mut self, i: usize) -> anyhow::Result<()> {
        let cfg = gateway_config(
            &self.dir,
            &self.sock(&format!("g{i}")),
            i,
            self.clients.len(),
        );
        let who = format!("g{i}");
        let p = self.spawn_daemon(&self.gws[i - 1], "server", &who, &cfg)?;
        self.gw_procs[i - 1] = Some(p);
        let s = self.sock(&who);
        wait_for(Duration::from_secs(10), || s.exists()).context("gateway up")
    }

    /// Starts (or restarts) client `k`'s daemon with its two paths.
    pub fn start_client(&mut self, k: usize) -> anyhow::Result<()> {
        self.client_procs[k - 1] = None;
        let cfg = format!(
            "server = \"{SERVICE}:{PORT}\"\nauth = \"authenticated\"\n\
             rejoin_backoff_ms = 200\njoin_advertised_address = true\n\
             private_key_file = \"{dir}/client{k}.key\"\nserver_public_key = \"{spk}\"\n\
             [tun]\nname = \"mpd0\"\naddresses = [\"{inner}/24\"]\nroutes = [\"{INTERNET}/32\"]\n\
             [ops]\ncontrol_socket = \"{sock}\"\n\
             [[path]]\ninterface = \"pa\"\n[[path]]\ninterface = \"pb\"\n",
            dir = self.dir.display(),
            inner = inner(k),
            sock = self.sock(&format!("c{k}")).display(),
            spk = encode_key(&mpdccp_proto::auth::public_key(&lab_private_key(0))),
        );
        let p = self.spawn_daemon(&self.clients[k - 1], "client", &format!("c{k}"), &cfg)?;
        self.client_procs[k - 1] = Some(p);
        Ok(())
    }

    /// Stops every client daemon (SIGTERM: MP_CLOSE).
    pub fn stop_clients(&mut self) {
        for p in &mut self.client_procs {
            *p = None;
        }
    }

    fn spawn_daemon(&self, ns: &Netns, role: &str, who: &str, cfg: &str) -> anyhow::Result<Proc> {
        let f = self.dir.join(format!("{who}.toml"));
        std::fs::write(&f, cfg)?;
        let _ = std::fs::remove_file(self.sock(who));
        let exe = path_str(&self.exe);
        let args = ["RUST_LOG=info", exe, role, "--config", path_str(&f)];
        // `env` execs the daemon in place: the pid is the daemon's.
        ns.spawn_logged("env", &args, &self.log(who))
    }

    /// Gateway `i`'s daemon pid, while it runs.
    pub fn gateway_pid(&self, i: usize) -> Option<u32> {
        self.gw_procs[i - 1].as_ref()?.id()
    }

    /// Every running client daemon's pid.
    pub fn client_pids(&self) -> Vec<u32> {
        self.client_procs
            .iter()
            .flatten()
            .filter_map(Proc::id)
            .collect()
    }

    fn status(&self, who: &str) -> Value {
        mpdccp_net::daemon::ops::query(&self.sock(who), "status").unwrap_or(Value::Null)
    }

    /// Each running gateway's peers that have both paths Active there.
    fn owners(&self) -> BTreeMap<usize, usize> {
        let mut out = BTreeMap::new();
        for i in (1..=self.gws.len()).filter(|&i| self.gw_procs[i - 1].is_some()) {
            let st = self.status(&format!("g{i}"));
            for c in st["connections"].as_array().into_iter().flatten() {
                let active = c["paths"]
                    .as_array()
                    .map_or(0, |ps| ps.iter().filter(|p| p["state"] == "Active").count());
                let peer = c["peer"]["identity"].as_str().unwrap_or("");
                if let (2, Some(k)) = (active, peer.strip_prefix("cpe")) {
                    out.insert(k.parse().unwrap_or(0), i);
                }
            }
        }
        out
    }

    /// Every client's gateway, once each has both paths there and the
    /// router routes its prefix there alone.
    pub fn wait_settled(&self, within: Duration) -> anyhow::Result<BTreeMap<usize, usize>> {
        let n = self.clients.len();
        let mut owners = BTreeMap::new();
        let settled = |owners: &BTreeMap<usize, usize>| {
            owners.len() == n
                && owners.iter().all(|(&k, &o)| {
                    let r = self.router_route(&inner_prefix(k));
                    r.contains(&format!("via {} ", unicast(o))) && r.matches("via").count() == 1
                })
        };
        wait_for(within, || {
            owners = self.owners();
            settled(&owners)
        })
        .with_context(|| format!("clients not settled: owners {owners:?}"))?;
        Ok(owners)
    }

    /// Whether the router reaches the service address over exactly `hosts`.
    pub fn service_via(&self, hosts: &[usize]) -> bool {
        let r = self.router_route(SERVICE);
        (1..=self.gws.len())
            .all(|i| hosts.contains(&i) == r.contains(&format!("via {} ", unicast(i))))
    }

    fn router_route(&self, dst: &str) -> String {
        self.router
            .output("ip", &["route", "show", dst])
            .unwrap_or_default()
    }
}

/// Gateway `i`'s `mpdccp server` configuration: host id `i`, the fleet's
/// key in `dir`, every one of the `clients` peers listed.
pub fn gateway_config(dir: &Path, sock: &Path, i: usize, clients: usize) -> String {
    let mut cfg = format!(
        "listen = \"0.0.0.0:{PORT}\"\nauth = \"authenticated\"\nseed = {i}\n\
         private_key_file = \"{dir}/server.key\"\n\
         [tun]\nname = \"mpd0\"\naddresses = [\"100.64.0.1/32\"]\n\
         [ops]\ncontrol_socket = \"{sock}\"\n\
         [fleet]\nhost_id = {i}\nservice_address = \"{SERVICE}\"\n\
         unicast_address = \"{uni}\"\nroute_protocol = 200\n",
        dir = dir.display(),
        sock = sock.display(),
        uni = unicast(i),
    );
    for k in 1..=clients {
        cfg += &format!(
            "[[peer]]\nname = \"cpe{k}\"\npublic_key = \"{pk}\"\nallowed_ips = [\"{pfx}\"]\n",
            pk = encode_key(&mpdccp_proto::auth::public_key(&client_key(k))),
            pfx = inner_prefix(k),
        );
    }
    cfg
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Client `k`'s two access networks 10.n.k.0/24 (`pa`: n = 1, `pb`: 2),
/// each with the default route of its interface.
fn link_client(router: &Netns, client: &Netns, k: usize) -> anyhow::Result<()> {
    for (n, (iface, side)) in [(1, ("pa", 'a')), (2, ("pb", 'b'))] {
        let rif = format!("c{k}{side}");
        veth_pair(iface, Some(client), &rif, Some(router))?;
        client.ip(&["addr", "add", &format!("10.{n}.{k}.2/24"), "dev", iface])?;
        client.ip(&["link", "set", iface, "up"])?;
        router.ip(&["addr", "add", &format!("10.{n}.{k}.1/24"), "dev", &rif])?;
        router.ip(&["link", "set", &rif, "up"])?;
        let (gw, metric) = (format!("10.{n}.{k}.1"), n.to_string());
        client.ip(&[
            "route", "add", "default", "via", &gw, "dev", iface, "metric", &metric,
        ])?;
    }
    Ok(())
}

/// Gateway `i`'s link to the router, its unicast address, and the
/// service address on its loopback.
fn link_gateway(router: &Netns, g: &Netns, i: usize) -> anyhow::Result<()> {
    let rif = format!("g{i}");
    veth_pair(&rif, Some(router), "wan", Some(g))?;
    router.ip(&["addr", "add", &format!("10.0.{i}.1/24"), "dev", &rif])?;
    router.ip(&["link", "set", &rif, "up"])?;
    g.ip(&["addr", "add", &format!("{}/24", unicast(i)), "dev", "wan"])?;
    g.ip(&["link", "set", "wan", "up"])?;
    g.ip(&["addr", "add", &format!("{SERVICE}/32"), "dev", "lo"])?;
    g.ip(&["route", "add", "default", "via", &format!("10.0.{i}.1")])
}

/// The server's and each client's key file, mode 0600.
pub fn write_keys(dir: &Path, clients: usize) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut keys = vec![("server.key".to_string(), lab_private_key(0))];
    keys.extend((1..=clients).map(|k| (format!("client{k}.key"), client_key(k))));
    for (name, key) in keys {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(name))?;
        writeln!(f, "{}", encode_key(&key))?;
    }
    Ok(())
}
