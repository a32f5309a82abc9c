//! Issue #24, a gateway fleet behind one anycast service address
//! (docs/FLEET.md), between network namespaces:
//!
//! ```text
//!  client ─pa─┐            ┌── g1  (service 10.200.0.1 on lo, unicast 10.0.1.2)
//!             ├─ router ───┤
//!  client ─pb─┘  ECMP, L4  └── g2  (service 10.200.0.1 on lo, unicast 10.0.2.2)
//! ```
//!
//! The router reaches the service address over both gateways with an
//! L4-hashed multipath route (`fib_multipath_hash_policy = 1`): static in
//! the first test, learned from BIRD 2 over BGP in the second, where each
//! gateway's BIRD announces what `mpdccp server` puts in the kernel with
//! `proto 200` (the service address; each connected peer's `allowed_ips`).
//!
//! Needs root, `ping` and (second test) `bird`/`birdc`; without them each
//! test prints a skip notice, or fails when `CI` is set.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpdccp_lab::netns::{require_root, require_tool, unique_prefix, veth_pair, Netns, Proc};
use mpdccp_lab::topo::{lab_private_key, wait_for};
use mpdccp_net::daemon::keyfile::encode_key;
use serde_json::Value;

const SERVICE: &str = "10.200.0.1";
/// The client's inner prefix (its `allowed_ips` at the gateways).
const CLIENT_INNER: &str = "10.77.0.1";
const CLIENT_PREFIX: &str = "10.77.0.0/24";
/// An "Internet" address on the router, reached through the tunnel.
const INTERNET: &str = "10.201.0.1";
const PORT: u16 = 6773;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mpdccp"))
}

/// Gateway `i` (1-based)'s unicast address.
fn unicast(i: usize) -> String {
    format!("10.0.{i}.2")
}

struct Fleet {
    dir: PathBuf,
    // Processes first: they must stop before their namespaces go.
    procs: Vec<Proc>,
    gw_procs: Vec<Option<Proc>>,
    birds: Vec<Proc>,
    client: Netns,
    router: Netns,
    gws: Vec<Netns>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.procs.clear();
        self.gw_procs.clear();
        self.birds.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fleet {
    /// Namespaces and links; the router's route to the service address
    /// is static ECMP unless `bgp`.
    fn build(bgp: bool) -> Fleet {
        // The two tests run in parallel in one process: one tag each.
        let p = format!("{}{}", unique_prefix(), if bgp { "b" } else { "s" });
        let dir = std::env::temp_dir().join(format!("{p}-fleet"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let client = Netns::new(&format!("{p}fc")).expect("ns");
        let router = Netns::new(&format!("{p}fr")).expect("ns");
        let gws: Vec<Netns> = (1..=2)
            .map(|i| Netns::new(&format!("{p}fg{i}")).expect("ns"))
            .collect();
        for ns in [&client, &router, &gws[0], &gws[1]] {
            ns.sysctl("net.ipv4.conf.all.rp_filter", "0").unwrap();
            ns.sysctl("net.ipv4.conf.default.rp_filter", "0").unwrap();
            ns.sysctl("net.ipv4.ip_forward", "1").unwrap();
        }
        router
            .sysctl("net.ipv4.fib_multipath_hash_policy", "1")
            .unwrap();
        // The client's two access networks: 10.1.k.0/24, k = 1, 2.
        for (k, iface) in ["pa", "pb"].iter().enumerate() {
            let k = k + 1;
            let rif = format!("c{k}");
            veth_pair(iface, Some(&client), &rif, Some(&router)).unwrap();
            client
                .ip(&["addr", "add", &format!("10.1.{k}.2/24"), "dev", iface])
                .unwrap();
            client.ip(&["link", "set", iface, "up"]).unwrap();
            router
                .ip(&["addr", "add", &format!("10.1.{k}.1/24"), "dev", &rif])
                .unwrap();
            router.ip(&["link", "set", &rif, "up"]).unwrap();
            // Each path's socket is bound to its interface, so the lookup
            // takes the default route of that interface.
            let gw = format!("10.1.{k}.1");
            let metric = k.to_string();
            client
                .ip(&[
                    "route", "add", "default", "via", &gw, "dev", iface, "metric", &metric,
                ])
                .unwrap();
        }
        router
            .ip(&["addr", "add", &format!("{INTERNET}/32"), "dev", "lo"])
            .unwrap();
        for (i, g) in gws.iter().enumerate() {
            let i = i + 1;
            let rif = format!("g{i}");
            veth_pair(&rif, Some(&router), "wan", Some(g)).unwrap();
            router
                .ip(&["addr", "add", &format!("10.0.{i}.1/24"), "dev", &rif])
                .unwrap();
            router.ip(&["link", "set", &rif, "up"]).unwrap();
            g.ip(&["addr", "add", &format!("{}/24", unicast(i)), "dev", "wan"])
                .unwrap();
            g.ip(&["link", "set", "wan", "up"]).unwrap();
            g.ip(&["addr", "add", &format!("{SERVICE}/32"), "dev", "lo"])
                .unwrap();
            g.ip(&["route", "add", "default", "via", &format!("10.0.{i}.1")])
                .unwrap();
        }
        if !bgp {
            router
                .ip(&[
                    "route", "add", SERVICE, "nexthop", "via", "10.0.1.2", "nexthop", "via",
                    "10.0.2.2",
                ])
                .unwrap();
        }
        write_keys(&dir);
        Fleet {
            dir,
            procs: Vec::new(),
            gw_procs: vec![None, None],
            birds: Vec::new(),
            client,
            router,
            gws,
        }
    }

    fn sock(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.sock"))
    }

    fn log(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.log"))
    }

    fn start_gateway(&mut self, i: usize) {
        let cfg = format!(
            "listen = \"0.0.0.0:{PORT}\"\nauth = \"authenticated\"\nseed = {i}\n\
             private_key_file = \"{dir}/server.key\"\n\
             [tun]\nname = \"mpd0\"\naddresses = [\"100.64.0.1/32\"]\n\
             [ops]\ncontrol_socket = \"{sock}\"\n\
             [fleet]\nhost_id = {i}\nservice_address = \"{SERVICE}\"\n\
             unicast_address = \"{uni}\"\nroute_protocol = 200\n\
             [[peer]]\nname = \"cpe\"\npublic_key = \"{pk}\"\nallowed_ips = [\"{CLIENT_PREFIX}\"]\n",
            dir = self.dir.display(),
            sock = self.sock(&format!("g{i}")).display(),
            uni = unicast(i),
            pk = encode_key(&mpdccp_proto::auth::public_key(&lab_private_key(1))),
        );
        let f = self.dir.join(format!("g{i}.toml"));
        std::fs::write(&f, cfg).unwrap();
        let _ = std::fs::remove_file(self.sock(&format!("g{i}")));
        let p = self.gws[i - 1]
            .spawn_logged(
                "env",
                &[
                    "RUST_LOG=info",
                    exe().to_str().unwrap(),
                    "server",
                    "--config",
                    f.to_str().unwrap(),
                ],
                &self.log(&format!("g{i}")),
            )
            .unwrap();
        self.gw_procs[i - 1] = Some(p);
        let s = self.sock(&format!("g{i}"));
        wait_for(Duration::from_secs(10), || s.exists()).expect("gateway up");
    }

    fn start_client(&mut self) {
        let cfg = format!(
            "server = \"{SERVICE}:{PORT}\"\nauth = \"authenticated\"\nseed = 9\n\
             rejoin_backoff_ms = 200\njoin_advertised_address = true\n\
             private_key_file = \"{dir}/client.key\"\nserver_public_key = \"{spk}\"\n\
             [tun]\nname = \"mpd0\"\naddresses = [\"{CLIENT_INNER}/24\"]\nroutes = [\"{INTERNET}/32\", \"100.64.0.1/32\"]\n\
             [ops]\ncontrol_socket = \"{sock}\"\n\
             [[path]]\ninterface = \"pa\"\n[[path]]\ninterface = \"pb\"\n",
            dir = self.dir.display(),
            sock = self.sock("client").display(),
            spk = encode_key(&mpdccp_proto::auth::public_key(&lab_private_key(0))),
        );
        let f = self.dir.join("client.toml");
        std::fs::write(&f, cfg).unwrap();
        let p = self
            .client
            .spawn_logged(
                "env",
                &[
                    "RUST_LOG=info",
                    exe().to_str().unwrap(),
                    "client",
                    "--config",
                    f.to_str().unwrap(),
                ],
                &self.log("client"),
            )
            .unwrap();
        self.procs.push(p);
    }

    fn status(&self, who: &str) -> Value {
        mpdccp_net::daemon::ops::query(&self.sock(who), "status").unwrap_or(Value::Null)
    }

    /// Active paths of the client's connection and their remotes.
    fn client_paths(&self) -> Vec<String> {
        let st = self.status("client");
        st["connections"][0]["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["state"] == "Active")
            .map(|p| p["remote"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// (gateway, its connections' active path counts).
    fn gateway_paths(&self, i: usize) -> Vec<usize> {
        let st = self.status(&format!("g{i}"));
        st["connections"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                c["paths"]
                    .as_array()
                    .map_or(0, |ps| ps.iter().filter(|p| p["state"] == "Active").count())
            })
            .collect()
    }

    fn logs(&self) -> String {
        ["client", "g1", "g2", "bird-r", "bird-g1", "bird-g2"]
            .iter()
            .map(|w| {
                let s = std::fs::read_to_string(self.log(w)).unwrap_or_default();
                let l: Vec<&str> = s.lines().collect();
                format!("--- {w}\n{}", l[l.len().saturating_sub(25)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits for both client paths up; returns the owning gateway (1, 2).
    fn wait_two_paths(&self, within: Duration) -> usize {
        wait_for(within, || {
            self.client_paths().len() == 2 && (1..=2).any(|i| self.gateway_paths(i).contains(&2))
        })
        .unwrap_or_else(|e| panic!("two paths not up: {e:#}\n{}", self.logs()));
        (1..=2)
            .find(|&i| self.gateway_paths(i).contains(&2))
            .unwrap()
    }
}

fn write_keys(dir: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    for (role, name) in [(0u8, "server.key"), (1, "client.key")] {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(name))
            .unwrap();
        writeln!(f, "{}", encode_key(&lab_private_key(role))).unwrap();
    }
}

/// The gateway the router's ECMP route sends a UDP flow to.
fn hashed_to(router: &Netns, src: &str, iif: &str, sport: u16) -> String {
    let out = router
        .output(
            "ip",
            &[
                "route",
                "get",
                SERVICE,
                "from",
                src,
                "iif",
                iif,
                "ipproto",
                "udp",
                "sport",
                &sport.to_string(),
                "dport",
                &PORT.to_string(),
            ],
        )
        .unwrap();
    out.split_whitespace()
        .skip_while(|w| *w != "via")
        .nth(1)
        .unwrap_or("")
        .to_string()
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn every_subflow_of_a_connection_lands_on_the_host_that_owns_it() {
    let test = "every_subflow_of_a_connection_lands_on_the_host_that_owns_it";
    if !require_root(test) || !require_tool(test, "ping") {
        return;
    }
    let mut f = Fleet::build(false);
    // The router's L4 hash really splits flows from one source over both
    // gateways: without the advertised address, a join from the second
    // access network would reach the wrong host for about half the ports.
    let mut seen = std::collections::BTreeSet::new();
    for sport in 40000..40016 {
        seen.insert(hashed_to(&f.router, "10.1.2.2", "c2", sport));
    }
    assert_eq!(
        seen.len(),
        2,
        "ECMP spreads flows over both gateways: {seen:?}"
    );

    f.start_gateway(1);
    f.start_gateway(2);
    let t0 = Instant::now();
    f.start_client();
    let owner = f.wait_two_paths(Duration::from_secs(15));
    let other = 3 - owner;
    eprintln!("two paths on g{owner} after {:?}", t0.elapsed());
    // The first subflow went to the service address, the join to the
    // owner's unicast address (its MP_ADDADDR); then the first subflow
    // moved there too, so no subflow depends on the ECMP hash any more.
    let uni = format!("{}:{PORT}", unicast(owner));
    wait_for(Duration::from_secs(5), || {
        f.client_paths() == [uni.clone(), uni.clone()]
    })
    .unwrap_or_else(|e| panic!("{e:#}: {:?}\n{}", f.client_paths(), f.logs()));
    eprintln!("both subflows at {uni} after {:?}", t0.elapsed());
    let log = std::fs::read_to_string(f.log("client")).unwrap_or_default();
    assert!(
        log.contains(&format!("remote={SERVICE}:{PORT} first=true")),
        "the first subflow went to the service address"
    );
    assert_eq!(f.gateway_paths(owner), vec![2]);
    assert!(f.gateway_paths(other).is_empty(), "{}", f.logs());
    let ep = f.status(&format!("g{other}"))["endpoint"].clone();
    assert_eq!(ep["join_other_host"], 0, "the client never joined blindly");
    // The server's CI carries its host id in the top byte.
    let ci = f.status("client")["connections"][0]["remote_ci"]
        .as_u64()
        .expect("remote_ci");
    assert_eq!(ci >> 24, owner as u64, "CI {ci:#x}");
    // Inner traffic both ways through the owner.
    let out = f
        .client
        .output(
            "ping",
            &[
                "-c",
                "5",
                "-i",
                "0.1",
                "-W",
                "1",
                "-q",
                "-I",
                CLIENT_INNER,
                "100.64.0.1",
            ],
        )
        .unwrap_or_else(|e| panic!("{e:#}\n{}", f.logs()));
    assert!(out.contains(" 0% packet loss"), "{out}");
}

/// BGP timers for a test: connect at once, retry every second, notice a
/// dead neighbour within 3 s.
const BGP_TIMERS: &str = "hold time 3; keepalive time 1; connect delay time 1; \
                          connect retry time 1; error wait time 1, 2;";

/// The router: learns from both gateways, installs ECMP (`merge paths`).
fn router_bird() -> String {
    let mut c = String::from(
        "router id 10.0.1.1;\nprotocol device { scan time 1; }\n\
         protocol kernel { merge paths on; ipv4 { import none; export all; }; }\n",
    );
    for i in 1..=2 {
        c += &format!(
            "protocol bgp g{i} {{ local 10.0.{i}.1 as 65000; neighbor {uni} as 6500{i}; {BGP_TIMERS}\n\
             ipv4 {{ import all; export none; }}; }}\n",
            uni = unicast(i)
        );
    }
    c
}

/// A gateway: announces the kernel routes `mpdccp server` tags `proto 200`.
fn gateway_bird(i: usize) -> String {
    format!(
        "router id {uni};\nprotocol device {{ scan time 1; }}\n\
         protocol kernel {{ learn; scan time 1; ipv4 {{ import where krt_source = 200; export none; }}; }}\n\
         protocol bgp upstream {{ local {uni} as 6500{i}; neighbor 10.0.{i}.1 as 65000; passive on; {BGP_TIMERS}\n\
         ipv4 {{ import none; export all; next hop self; }}; }}\n",
        uni = unicast(i)
    )
}

impl Fleet {
    fn start_bird(&mut self, who: &str, conf: &str) {
        let f = self.dir.join(format!("bird-{who}.conf"));
        std::fs::write(&f, conf).unwrap();
        let ns = match who {
            "r" => &self.router,
            "g1" => &self.gws[0],
            _ => &self.gws[1],
        };
        let ctl = self.dir.join(format!("bird-{who}.ctl"));
        let pid = self.dir.join(format!("bird-{who}.pid"));
        let p = ns
            .spawn_logged(
                "bird",
                &[
                    "-f",
                    "-c",
                    f.to_str().unwrap(),
                    "-s",
                    ctl.to_str().unwrap(),
                    "-P",
                    pid.to_str().unwrap(),
                ],
                &self.log(&format!("bird-{who}")),
            )
            .unwrap();
        self.birds.push(p);
    }

    /// What each BIRD knows (for failure messages).
    fn bird_state(&self) -> String {
        let mut out = String::new();
        for (who, ns) in [
            ("r", &self.router),
            ("g1", &self.gws[0]),
            ("g2", &self.gws[1]),
        ] {
            let ctl = self.dir.join(format!("bird-{who}.ctl"));
            for cmd in [&["show", "protocols"][..], &["show", "route", "all"][..]] {
                let mut a = vec!["-s", ctl.to_str().unwrap()];
                a.extend_from_slice(cmd);
                out += &format!(
                    "--- birdc {who} {}\n{}\n",
                    cmd.join(" "),
                    ns.output("birdc", &a).unwrap_or_else(|e| format!("{e:#}"))
                );
            }
            out += &ns.output("ip", &["route"]).unwrap_or_default();
        }
        out
    }

    /// The router's kernel route to `dst` (`ip route show`).
    fn router_route(&self, dst: &str) -> String {
        self.router
            .output("ip", &["route", "show", dst])
            .unwrap_or_default()
    }
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn bird_announces_the_peer_prefix_from_the_serving_gateway_through_failure_and_drain() {
    let test = "bird_announces_the_peer_prefix_from_the_serving_gateway_through_failure_and_drain";
    if !require_root(test) || !require_tool(test, "ping") || !require_tool(test, "bird") {
        return;
    }
    let mut f = Fleet::build(true);
    f.start_bird("r", &router_bird());
    f.start_bird("g1", &gateway_bird(1));
    f.start_bird("g2", &gateway_bird(2));
    f.start_gateway(1);
    f.start_gateway(2);
    // Each serving gateway announces the service address: ECMP over both.
    let both = |r: &str| r.contains("via 10.0.1.2") && r.contains("via 10.0.2.2");
    wait_for(Duration::from_secs(15), || both(&f.router_route(SERVICE))).unwrap_or_else(|e| {
        panic!(
            "{e:#}: router: {}\n{}\n{}",
            f.router_route(SERVICE),
            f.logs(),
            f.bird_state()
        )
    });
    assert!(f.router_route(CLIENT_PREFIX).is_empty(), "no peer yet");

    f.start_client();
    let owner = f.wait_two_paths(Duration::from_secs(15));
    let other = 3 - owner;
    // The peer's prefix, learned from the gateway that serves it.
    let t = Instant::now();
    let via = |i: usize| format!("via {} ", unicast(i));
    wait_for(Duration::from_secs(10), || {
        f.router_route(CLIENT_PREFIX).contains(&via(owner))
    })
    .unwrap_or_else(|e| panic!("{e:#}: {}\n{}", f.router_route(CLIENT_PREFIX), f.logs()));
    eprintln!(
        "prefix announced by g{owner} {:?} after the client's paths were up",
        t.elapsed()
    );
    assert!(!f.router_route(CLIENT_PREFIX).contains(&via(other)));
    // The "Internet" (the router's address) reaches the client's inner address.
    let ping = |f: &Fleet| {
        f.router
            .output(
                "ping",
                &[
                    "-c",
                    "3",
                    "-i",
                    "0.2",
                    "-W",
                    "1",
                    "-q",
                    "-I",
                    INTERNET,
                    CLIENT_INNER,
                ],
            )
            .unwrap_or_default()
    };
    let out = ping(&f);
    assert!(out.contains(" 0% packet loss"), "{out}\n{}", f.logs());

    // The owner's daemon dies: its TUN and its routes go with it, BIRD
    // withdraws them, the client finds the service address at the other
    // gateway and the prefix follows it.
    let t = Instant::now();
    f.gw_procs[owner - 1].take().unwrap().kill();
    wait_for(Duration::from_secs(20), || {
        f.router_route(CLIENT_PREFIX).contains(&via(other)) && f.gateway_paths(other).contains(&2)
    })
    .unwrap_or_else(|e| panic!("{e:#}: {}\n{}", f.router_route(CLIENT_PREFIX), f.logs()));
    let moved = t.elapsed();
    eprintln!("after g{owner} died: two paths on g{other} and the prefix via it in {moved:?}");
    assert!(!f.router_route(CLIENT_PREFIX).contains(&via(owner)));
    assert!(
        !f.router_route(SERVICE).contains(&via(owner)),
        "{}",
        f.router_route(SERVICE)
    );
    let out = ping(&f);
    assert!(out.contains(" 0% packet loss"), "{out}\n{}", f.logs());

    // The dead host comes back and announces the service address again.
    f.start_gateway(owner);
    wait_for(Duration::from_secs(15), || both(&f.router_route(SERVICE)))
        .unwrap_or_else(|e| panic!("{e:#}: {}\n{}", f.router_route(SERVICE), f.bird_state()));
    // Drain the host now serving (SIGTERM): it withdraws the service
    // address first, then closes its connections (MP_CLOSE); the client
    // reconnects through the service address, which now leads only to
    // the host that came back, and its prefix follows.
    let t = Instant::now();
    let status = f.gw_procs[other - 1].take().unwrap().stop();
    assert!(
        status.is_some_and(|s| s.success()),
        "drained host exits cleanly: {status:?}\n{}",
        f.logs()
    );
    let stopped = t.elapsed();
    wait_for(Duration::from_secs(20), || {
        f.router_route(CLIENT_PREFIX).contains(&via(owner)) && f.gateway_paths(owner).contains(&2)
    })
    .unwrap_or_else(|e| panic!("{e:#}: {}\n{}", f.router_route(CLIENT_PREFIX), f.logs()));
    let drained = t.elapsed();
    eprintln!("drain of g{other}: exited after {stopped:?}, client and prefix on g{owner} after {drained:?}");
    assert!(
        !f.router_route(SERVICE).contains(&via(other)),
        "{}",
        f.router_route(SERVICE)
    );
    let out = ping(&f);
    assert!(out.contains(" 0% packet loss"), "{out}\n{}", f.logs());
}
