//! The files of `deploy/`: the systemd units are
//! valid (`systemd-analyze verify` when the machine has it, and always our
//! own check of the lines that matter: capabilities, no root, the command
//! and its config), and the example configurations load with the daemon's
//! own parser and match the units' paths. Nothing is started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::process::Command;
use std::time::Duration;

use mpdccp_lab::netns::{require_root, Netns, Proc};
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
        // DynamicUser cannot read a root-owned key: systemd hands it over.
        assert_eq!(
            one(&u, "Service.LoadCredential"),
            format!("{role}.key:/etc/mpdccp/{role}.key")
        );
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
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn nftables_example_loads() {
    if !require_root("nftables_example_loads") {
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

/// `/dev/net/tun` with the mode udev's default rules give it
/// (`50-udev-default.rules`: `KERNEL=="tun", MODE="0666"`), which is how a
/// unit's unprivileged user holding CAP_NET_ADMIN opens it. A machine
/// without udev (a microVM) may leave it 0600; the old mode is put back
/// when the guard drops.
struct UdevTunMode {
    old: Option<u32>,
}

impl UdevTunMode {
    const PATH: &'static str = "/dev/net/tun";

    fn ensure() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(Self::PATH)
            .map(|m| m.permissions().mode() & 0o7777)
            .expect("/dev/net/tun exists");
        if mode & 0o666 == 0o666 {
            return UdevTunMode { old: None };
        }
        std::fs::set_permissions(Self::PATH, std::fs::Permissions::from_mode(0o666))
            .expect("chmod /dev/net/tun");
        UdevTunMode { old: Some(mode) }
    }
}

impl Drop for UdevTunMode {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if let Some(mode) = self.old {
            let _ = std::fs::set_permissions(Self::PATH, std::fs::Permissions::from_mode(mode));
        }
    }
}

/// The server unit as systemd would run it, as far as this machine allows
/// (PID 1 here is no systemd, so no `systemd-run`): the unit's
/// `ExecStart=` command with the example configuration, as an unprivileged
/// user (a DynamicUser stand-in, uid 61_234) holding only the unit's
/// ambient capabilities, with no new privileges, and the key where
/// `LoadCredential=` puts it: `$CREDENTIALS_DIRECTORY/server.key`, owned
/// by that user, mode 0400. The configured `/etc/mpdccp/server.key` does
/// not exist here. The server must come up (TUN, listener, peers loaded);
/// without the credential it must stop with an error naming the key file.
#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn the_server_unit_runs_as_its_user_with_the_key_as_a_credential() {
    use std::os::unix::fs::{chown, PermissionsExt};
    if !require_root("the_server_unit_runs_as_its_user_with_the_key_as_a_credential") {
        return;
    }
    const UID: u32 = 61_234;
    let text = std::fs::read_to_string(unit_path("server")).unwrap();
    let u = parse_unit(&text).unwrap();
    let exec: Vec<String> = one(&u, "Service.ExecStart")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let (cred_name, cred_src) = one(&u, "Service.LoadCredential")
        .split_once(':')
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .unwrap();
    let caps: Vec<String> = one(&u, "Service.AmbientCapabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let caps = caps.join(",");

    let dir = std::env::temp_dir().join(format!("mpdccp-unit-{}", std::process::id()));
    let creds = dir.join("credentials");
    let runtime = dir.join("run");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::create_dir_all(&runtime).unwrap();
    // The example config at the unit's --config path's file name.
    let cfg_name = Path::new(exec.last().unwrap()).file_name().unwrap();
    let cfg = dir.join(cfg_name);
    std::fs::copy(repo().join("deploy/examples/server.toml"), &cfg).unwrap();
    let loaded = ServerConfig::load(&cfg).unwrap();
    assert_eq!(
        loaded.private_key_file.as_deref(),
        Some(Path::new(&cred_src)),
        "the credential is the configured key file"
    );
    let key = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .arg("genkey")
        .output()
        .unwrap()
        .stdout;
    let key_path = creds.join(&cred_name);
    std::fs::write(&key_path, key).unwrap();
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o400)).unwrap();
    chown(&key_path, Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o500)).unwrap();
    chown(&creds, Some(UID), Some(UID)).unwrap();
    // RuntimeDirectory=mpdccp: owned by the service's user.
    chown(&runtime, Some(UID), Some(UID)).unwrap();
    let sock = runtime.join("server.sock");

    let _tun_mode = UdevTunMode::ensure();
    let ns = Netns::new(&format!("mpdccp-unit-{}", std::process::id() % 100_000)).unwrap();
    let run = |with_credential: bool| {
        let mut c = ns.command("setpriv");
        c.args([
            &format!("--reuid={UID}"),
            &format!("--regid={UID}"),
            "--clear-groups",
            &format!("--inh-caps=-all,{caps}"),
            &format!("--ambient-caps=-all,{caps}"),
            &format!("--bounding-set=-all,{caps}"),
            "--no-new-privs",
            env!("CARGO_BIN_EXE_mpdccp"),
        ]);
        // ExecStart='s arguments, the config from our directory, the
        // control socket in the stand-in runtime directory.
        c.args(&exec[1..exec.len() - 1]).arg(&cfg);
        c.arg("--control-socket").arg(&sock);
        c.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        for e in u.get("Service.Environment").into_iter().flatten() {
            if let Some((k, v)) = e.split_once('=') {
                c.env(k, v);
            }
        }
        if with_credential {
            c.env("CREDENTIALS_DIRECTORY", &creds);
        }
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    // Without the credential: the key file is missing, and it says so.
    let out = run(false).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&cred_src), "{err}");

    let child = run(true).spawn().unwrap();
    let mut proc = Proc::new("server unit".into(), child);
    let up = mpdccp_lab::topo::wait_for(Duration::from_secs(10), || {
        Command::new(env!("CARGO_BIN_EXE_mpdccp"))
            .args(["status", "--json", "--socket"])
            .arg(&sock)
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
            .is_some_and(|v| v["auth"]["mode"] == "authenticated" && v["auth"]["peers"] == 2)
    });
    let uid = proc.id().and_then(|pid| {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
    });
    let status = proc.stop();
    let mut stderr = String::new();
    let _ = up.as_ref().map_err(|e| stderr = format!("{e}"));
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        up.is_ok(),
        "the server did not come up as uid {UID}: {stderr}"
    );
    assert_eq!(uid.as_deref(), Some(UID.to_string().as_str()));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
