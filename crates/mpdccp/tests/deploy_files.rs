//! The files of `deploy/` (issue #13, Operations): the systemd units are
//! valid (`systemd-analyze verify` when the machine has it, and always our
//! own check of the lines that matter: capabilities, no root, the command
//! and its config), and the example configurations load with the daemon's
//! own parser and match the units' paths. Nothing is started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mpdccp_lab::netns::{root_or_skip, Netns};
use mpdccp_net::daemon::config::{ClientConfig, ServerConfig};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn unit_path(role: &str) -> PathBuf {
    repo().join(format!("deploy/systemd/mpdccp-{role}.service"))
}

/// `section.key` → values (a key may repeat), or the first line that is
/// not a section, comment, blank or `Key=Value`.
fn parse_unit(text: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if !["Unit", "Service", "Install"].contains(&s) {
                return Err(format!("line {}: unexpected section [{s}]", n + 1));
            }
            section = Some(s.to_string());
            continue;
        }
        let (Some(sec), Some((k, v))) = (&section, line.split_once('=')) else {
            return Err(format!(
                "line {}: not Key=Value in a section: {line}",
                n + 1
            ));
        };
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("line {}: bad key `{k}`", n + 1));
        }
        out.entry(format!("{sec}.{k}"))
            .or_default()
            .push(v.trim().to_string());
    }
    Ok(out)
}

fn one<'a>(u: &'a BTreeMap<String, Vec<String>>, key: &str) -> &'a str {
    match u.get(key).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn units_hold_only_the_network_capabilities_and_run_the_daemon() {
    for role in ["server", "client"] {
        let text = std::fs::read_to_string(unit_path(role)).expect("unit file");
        let u = parse_unit(&text).unwrap_or_else(|e| panic!("{role}: {e}"));
        let caps = "CAP_NET_ADMIN CAP_NET_RAW";
        assert_eq!(one(&u, "Service.CapabilityBoundingSet"), caps);
        assert_eq!(one(&u, "Service.AmbientCapabilities"), caps);
        assert_eq!(one(&u, "Service.NoNewPrivileges"), "yes");
        // Not root: a dynamic user (or a named one that is not root).
        let dynamic = u.get("Service.DynamicUser").is_some_and(|v| v == &["yes"]);
        let user = u.get("Service.User").map(|v| v[0].as_str());
        assert!(dynamic || user.is_some_and(|x| x != "root" && x != "0"));
        assert_eq!(
            one(&u, "Service.Type"),
            "notify",
            "the daemon sends READY=1"
        );
        assert_eq!(
            one(&u, "Service.ExecStart"),
            format!("/usr/local/bin/mpdccp {role} --config /etc/mpdccp/{role}.toml")
        );
        assert_eq!(one(&u, "Service.RuntimeDirectory"), "mpdccp");
        assert_eq!(one(&u, "Service.DeviceAllow"), "/dev/net/tun rw");
        assert_eq!(one(&u, "Install.WantedBy"), "multi-user.target");
    }
    assert!(parse_unit("[Service]\nExecStart /bin/true\n").is_err());
    assert!(parse_unit("Type=simple\n").is_err());
}

/// `systemd-analyze verify` with ExecStart pointing at the built binary:
/// it warns on stderr (exit status 0) about unknown keys and bad values,
/// so stderr must stay empty. A broken unit shows the check is live.
#[test]
fn units_pass_systemd_analyze_verify() {
    let ok = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP systemd-analyze verify: not installed (the syntax check still ran)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("mpdccp-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let verify = |name: &str, text: &str| -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let out = std::process::Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&p)
            .output()
            .expect("systemd-analyze");
        String::from_utf8_lossy(&out.stderr).into_owned()
            + if out.status.success() { "" } else { "(failed)" }
    };
    let exe = env!("CARGO_BIN_EXE_mpdccp");
    for role in ["server", "client"] {
        let text = std::fs::read_to_string(unit_path(role))
            .unwrap()
            .replace("/usr/local/bin/mpdccp", exe);
        let err = verify(&format!("mpdccp-{role}.service"), &text);
        assert!(err.trim().is_empty(), "{role}: {err}");
    }
    let bad = verify(
        "broken.service",
        &format!("[Service]\nExecStart={exe}\nCapabilityBoundingSett=CAP_NET_ADMIN\n"),
    );
    assert!(bad.contains("CapabilityBoundingSett"), "{bad}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn example_configs_load_and_match_the_units() {
    let ex = repo().join("deploy/examples");
    let s = ServerConfig::load(&ex.join("server.toml")).expect("server example");
    assert!(s.listen.ip().is_unspecified(), "wildcard listen");
    assert!(s.ops.control_socket.starts_with("/run/mpdccp/"));
    let c = ClientConfig::load(&ex.join("client.toml")).expect("client example");
    assert!(c.ops.control_socket.starts_with("/run/mpdccp/"));
    assert_eq!(c.path.len(), 2);
    // The IPv6 default route inside the tunnel, in two halves.
    for r in ["::/1", "8000::/1", "0.0.0.0/1", "128.0.0.0/1"] {
        assert!(c.tun.routes.iter().any(|x| x == r), "{r}");
    }
    assert!(
        c.tun.addresses.iter().any(|a| a.contains(':')),
        "IPv6 inside"
    );
    let nft = std::fs::read_to_string(repo().join("deploy/nftables/server-nat.nft")).unwrap();
    assert!(nft.contains(&format!("udp dport {}", s.listen.port())));
    assert!(nft.contains(&format!("define TUN = \"{}\"", s.tun.name)));
}

/// The server's forwarding/NAT ruleset loads (`nft -c`, check only) in a
/// namespace of its own. Needs root and nft (`.ci/run` installs it).
#[test]
fn nftables_example_loads() {
    if !root_or_skip("nftables_example_loads") {
        return;
    }
    let ns = Netns::new(&format!("mpdccp-nft-{}", std::process::id())).expect("namespace");
    let file = repo().join("deploy/nftables/server-nat.nft");
    let out = ns
        .output("nft", &["-c", "-f", &file.to_string_lossy()])
        .unwrap_or_else(|e| panic!("nft -c -f {}: {e:#}", file.display()));
    assert!(out.trim().is_empty(), "{out}");
    let bad = ns.output("nft", &["-c", "add rule inet mpdccp nosuch accept"]);
    assert!(bad.is_err(), "nft -c checks for real");
}
