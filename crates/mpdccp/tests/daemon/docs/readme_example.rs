//! README's two example files (once the Security snippet interleaved
//! two files in columns, neither had an `[ops]` section, so on one host
//! both daemons took `/run/mpdccp.sock` and the client failed with
//! "Address already in use"). Here they run as written, side by side on
//! one host: each daemon in a network namespace of its own with the
//! interfaces and addresses the files name, sharing the file system (the
//! control sockets under /run/mpdccp). The one edit is the operator's:
//! the two public keys, from freshly made key files beside the configs.
//! Then a ping goes through the tunnel. Needs root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, veth_pair, Netns, Proc};
use mpdccp_lab::topo::wait_for;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_mpdccp")
}

/// The ```toml block of README.md whose first line starts with `first`.
fn readme_block(first: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let mut blocks = readme.split("```toml\n").skip(1);
    let block = blocks
        .find(|b| b.starts_with(first))
        .unwrap_or_else(|| panic!("no ```toml block starting {first:?} in README.md"));
    block.split("```").next().unwrap().to_string()
}

/// The value of `key = "..."` in a TOML text.
fn string_value(text: &str, key: &str) -> String {
    let t: toml::Table = text.parse().expect("README block is TOML");
    t[key].as_str().expect(key).to_string()
}

fn genkey(dir: &Path, name: &str) -> String {
    let out = Command::new(exe()).arg("genkey").output().unwrap();
    assert!(out.status.success());
    let path = dir.join(name);
    std::fs::write(&path, &out.stdout).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut child = Command::new(exe())
        .arg("pubkey")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn status(socket: &str) -> Option<serde_json::Value> {
    let out = Command::new(exe())
        .args(["status", "--json", "--socket", socket])
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// The README's two files in namespaces of one host ([module docs]).
struct Setup {
    dir: PathBuf,
    server_sock: String,
    client_sock: String,
    server_toml: String,
    client_toml: String,
    // Dropped after the processes (declared first, dropped last).
    gw: Netns,
    cpe: Netns,
}

impl Setup {
    /// Namespaces, interfaces and the key files; the configs as written
    /// but for the public keys (the operator's one edit), then `edit`.
    fn new(tag: &str) -> Setup {
        let server_toml = readme_block("# server.toml");
        let client_toml = readme_block("# client.toml");
        let sock = |text: &str| {
            let t: toml::Table = text.parse().expect("README block is TOML");
            t["ops"]["control_socket"]
                .as_str()
                .expect("[ops] control_socket")
                .to_string()
        };
        let (server_sock, client_sock) = (sock(&server_toml), sock(&client_toml));
        assert_ne!(server_sock, client_sock, "one host: two control sockets");
        for s in [&server_sock, &client_sock] {
            assert!(
                !Path::new(s).exists() || status(s).is_none(),
                "{s}: a daemon already runs there"
            );
        }
        let dir = std::env::temp_dir().join(format!("mpdccp-readme-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let server_pub = genkey(&dir, "server.key");
        let client_pub = genkey(&dir, "client.key");
        let example_client_pub = {
            let t: toml::Table = server_toml.parse().unwrap();
            t["peer"].as_array().unwrap()[0]["public_key"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let example_server_pub = string_value(&client_toml, "server_public_key");
        let server_toml = server_toml.replace(&example_client_pub, &client_pub);
        let client_toml = client_toml.replace(&example_server_pub, &server_pub);

        // The gateway at 192.0.2.1 (the client's `server`), the CPE with
        // eth1 (DSL) and wwan0 (LTE) as the client file names them.
        let n = std::process::id() % 100_000;
        let gw = Netns::new(&format!("mpdrd-gw{tag}-{n}")).expect("namespace");
        let cpe = Netns::new(&format!("mpdrd-cpe{tag}-{n}")).expect("namespace");
        veth_pair("eth1", Some(&cpe), "dsl0", Some(&gw)).unwrap();
        veth_pair("wwan0", Some(&cpe), "lte0", Some(&gw)).unwrap();
        for (ns, dev, addr) in [
            (&gw, "dsl0", "192.0.2.1/24"),
            (&gw, "lte0", "198.51.100.1/24"),
            (&cpe, "eth1", "192.0.2.2/24"),
            (&cpe, "wwan0", "198.51.100.2/24"),
        ] {
            ns.ip(&["addr", "add", addr, "dev", dev]).unwrap();
            ns.ip(&["link", "set", dev, "up"]).unwrap();
        }
        // LTE reaches the gateway's address through its own link.
        cpe.ip(&[
            "route",
            "add",
            "192.0.2.1/32",
            "via",
            "198.51.100.1",
            "dev",
            "wwan0",
            "metric",
            "100",
        ])
        .unwrap();
        Setup {
            dir,
            server_sock,
            client_sock,
            server_toml,
            client_toml,
            gw,
            cpe,
        }
    }

    fn start(&self, server: bool) -> Proc {
        let (who, text, ns) = if server {
            ("server", &self.server_toml, &self.gw)
        } else {
            ("client", &self.client_toml, &self.cpe)
        };
        let cfg = self.dir.join(format!("{who}.toml"));
        std::fs::write(&cfg, text).unwrap();
        let cfg = cfg.to_string_lossy().into_owned();
        let log = self.dir.join(format!("{who}.log"));
        ns.spawn_logged(exe(), &[who, "--config", &cfg], &log)
            .unwrap()
    }

    fn log(&self, who: &str) -> String {
        log(&self.dir, who)
    }

    fn wait_server(&self) {
        wait_for(Duration::from_secs(10), || {
            status(&self.server_sock).is_some()
        })
        .unwrap_or_else(|e| panic!("server: {e}: {}", self.log("server")));
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn the_readme_files_run_side_by_side_and_carry_a_ping() {
    if !require_root("the_readme_files_run_side_by_side_and_carry_a_ping") {
        return;
    }
    // The two runs share /run/mpdccp's socket names: one at a time.
    let _serial = crate::support::serial();
    let s = Setup::new("a");
    let mut server = s.start(true);
    s.wait_server();
    let mut client = s.start(false);
    // Established, and both README paths listed: a status read at the
    // first sign of the connection once listed only one of them.
    let up = wait_for(Duration::from_secs(15), || {
        status(&s.client_sock).is_some_and(|st| {
            let c = &st["connections"][0];
            let named = |n: &str| {
                c["paths"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == n))
            };
            c["established"] == true && named("dsl") && named("lte")
        })
    });
    up.unwrap_or_else(|e| panic!("client: {e}: {}\n{}", s.log("client"), s.log("server")));
    let ping = s
        .cpe
        .output("ping", &["-c", "5", "-i", "0.2", "-W", "2", "10.99.0.1"])
        .unwrap_or_else(|e| panic!("{e:#}\n{}", s.log("client")));
    let st = status(&s.server_sock).expect("server status");
    let cst = status(&s.client_sock).expect("client status");
    client.stop();
    server.stop();
    assert!(ping.contains(" 0% packet loss"), "{ping}");
    assert_eq!(
        st["connections"][0]["peer"]["identity"], "cpe-berlin",
        "{st}"
    );
    let names: Vec<&str> = cst["connections"][0]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"dsl") && names.contains(&"lte"),
        "{names:?}"
    );
}

/// Configuration mistakes, each with the message it gets:
/// - a wrong `server_public_key`: the client says the server did not
///   answer its handshake and names `server_public_key` and the server's
///   `[[peer]]` list (it used to print only "join failed; retrying");
/// - a client sending from outside its `allowed_ips`: the server's warning
///   names the peer and the address (it used to print `src=Some(..)`,
///   `conn=0`).
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn mistakes_get_messages_that_name_them() {
    if !require_root("mistakes_get_messages_that_name_them") {
        return;
    }
    let _serial = crate::support::serial();
    // Wrong key: the example's server key instead of ours.
    let mut s = Setup::new("b");
    let right = string_value(&s.client_toml, "server_public_key");
    let wrong = mpdccp_net::daemon::keyfile::encode_key(&[7u8; 32]);
    s.client_toml = s.client_toml.replace(&right, &wrong);
    let mut server = s.start(true);
    s.wait_server();
    let mut client = s.start(false);
    let hint = "the server did not answer our handshake";
    let said = wait_for(Duration::from_secs(30), || s.log("client").contains(hint));
    client.stop();
    let clog = s.log("client");
    said.unwrap_or_else(|e| panic!("{e}: client log:\n{clog}"));
    let line = clog.lines().find(|l| l.contains(hint)).unwrap();
    assert!(
        line.contains("server_public_key") && line.contains("[[peer]]"),
        "{line}"
    );

    // The right key, the client's tunnel address outside its allowed_ips.
    s.client_toml = s.client_toml.replace(&wrong, &right);
    s.client_toml = s.client_toml.replace("10.99.1.2/16", "10.99.3.2/16");
    let mut client = s.start(false);
    wait_for(Duration::from_secs(15), || {
        status(&s.client_sock).is_some_and(|st| st["connections"][0]["established"] == true)
    })
    .unwrap_or_else(|e| panic!("client: {e}: {}", s.log("client")));
    let ping = s
        .cpe
        .output("ping", &["-c", "3", "-i", "0.2", "-W", "1", "10.99.0.1"]);
    let warned = wait_for(Duration::from_secs(5), || {
        s.log("server").contains("outside the peer's allowed_ips")
    });
    client.stop();
    server.stop();
    assert!(ping.is_err(), "a source outside allowed_ips got through");
    let slog = s.log("server");
    warned.unwrap_or_else(|e| panic!("{e}: server log:\n{slog}"));
    let line = slog
        .lines()
        .find(|l| l.contains("outside the peer's allowed_ips"))
        .unwrap();
    assert!(
        line.contains("peer=cpe-berlin")
            && line.contains("src=10.99.3.2")
            && !line.contains("Some("),
        "{line}"
    );
}

fn log(dir: &Path, who: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{who}.log"))).unwrap_or_default()
}
