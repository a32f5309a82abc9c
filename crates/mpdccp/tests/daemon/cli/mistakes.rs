//! Configuration mistakes an operator makes get a message that names the
//! mistake, at once, instead of a daemon that waits silently.

use std::process::Command;

/// A `[[path]]` whose interface does not exist (a typo) stops the client
/// at start with an error naming the interface, before it touches the
/// network (so it needs no root).
#[test]
fn a_client_path_on_a_missing_interface_is_an_error_at_start() {
    let dir = std::env::temp_dir().join(format!("mpdccp-mistake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("client.toml");
    std::fs::write(
        &cfg,
        format!(
            "server = \"127.0.0.1:6773\"\nauth = \"open\"\n[tun]\nname = \"mpdtypo0\"\naddresses = [\"10.99.1.2/16\"]\n[ops]\ncontrol_socket = \"{}\"\n[[path]]\ninterface = \"wwan-typo9\"\n",
            dir.join("c.sock").display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["client", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(
        stderr.contains("\"wwan-typo9\" does not exist"),
        "stderr: {stderr}"
    );
}

/// `reproduce --only` with an experiment that does not exist is a usage
/// error: exit code 2, as the README promises, naming the known ones.
#[test]
fn reproduce_only_an_unknown_experiment_is_a_usage_error() {
    let dir = std::env::temp_dir().join(format!("mpdccp-only-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["reproduce", "--only", "E1,E9", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("E9") && stderr.contains("E1, E2"),
        "{stderr}"
    );
}

/// An authenticated server without a `[[peer]]` stops at start with the
/// mode as the configuration spells it (it printed the internal enum,
/// `Authenticated`).
#[test]
fn an_authenticated_server_without_peers_names_the_config_value() {
    let dir = std::env::temp_dir().join(format!("mpdccp-nopeer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("server.toml");
    std::fs::write(
        &cfg,
        "listen = \"0.0.0.0:6511\"\nauth = \"authenticated\"\nprivate_key_file = \"server.key\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["server", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("auth = \"authenticated\" needs at least one [[peer]]"),
        "{stderr}"
    );
}
