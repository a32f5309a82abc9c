//! README's two example files (issue 26: the Security snippet interleaved
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

use mpdccp_lab::netns::{root_or_skip, veth_pair, Netns, Proc};
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

#[test]
fn the_readme_files_run_side_by_side_and_carry_a_ping() {
    if !root_or_skip("the_readme_files_run_side_by_side_and_carry_a_ping") {
        return;
    }
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

    let dir: PathBuf = std::env::temp_dir().join(format!("mpdccp-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server_pub = genkey(&dir, "server.key");
    let client_pub = genkey(&dir, "client.key");
    // The operator's one edit: the public keys the commands printed.
    let example_client_pub = {
        let t: toml::Table = server_toml.parse().unwrap();
        t["peer"].as_array().unwrap()[0]["public_key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let example_server_pub = string_value(&client_toml, "server_public_key");
    std::fs::write(
        dir.join("server.toml"),
        server_toml.replace(&example_client_pub, &client_pub),
    )
    .unwrap();
    std::fs::write(
        dir.join("client.toml"),
        client_toml.replace(&example_server_pub, &server_pub),
    )
    .unwrap();

    // The gateway at 192.0.2.1 (the client's `server`), the CPE with
    // eth1 (DSL) and wwan0 (LTE) as the client file names them.
    let tag = std::process::id() % 100_000;
    let gw = Netns::new(&format!("mpdrd-gw-{tag}")).expect("namespace");
    let cpe = Netns::new(&format!("mpdrd-cpe-{tag}")).expect("namespace");
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

    let cfg = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let server_cfg = cfg("server.toml");
    let client_cfg = cfg("client.toml");
    let mut procs: Vec<Proc> = Vec::new();
    procs.push(
        gw.spawn_logged(
            exe(),
            &["server", "--config", &server_cfg],
            &dir.join("server.log"),
        )
        .unwrap(),
    );
    wait_for(Duration::from_secs(10), || status(&server_sock).is_some())
        .unwrap_or_else(|e| panic!("server: {e}: {}", log(&dir, "server")));
    procs.push(
        cpe.spawn_logged(
            exe(),
            &["client", "--config", &client_cfg],
            &dir.join("client.log"),
        )
        .unwrap(),
    );
    let up = wait_for(Duration::from_secs(15), || {
        status(&client_sock).is_some_and(|s| s["connections"][0]["established"] == true)
    });
    up.unwrap_or_else(|e| {
        panic!(
            "client: {e}: {}\n{}",
            log(&dir, "client"),
            log(&dir, "server")
        )
    });
    let ping = cpe
        .output("ping", &["-c", "5", "-i", "0.2", "-W", "2", "10.99.0.1"])
        .unwrap_or_else(|e| panic!("{e:#}\n{}", log(&dir, "client")));
    let st = status(&server_sock).expect("server status");
    let cst = status(&client_sock).expect("client status");
    for mut p in procs.into_iter().rev() {
        p.stop();
    }
    drop((gw, cpe));
    let _ = std::fs::remove_dir_all(&dir);
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

fn log(dir: &Path, who: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{who}.log"))).unwrap_or_default()
}
