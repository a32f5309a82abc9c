//! What `--help` promises: every subcommand states its exit
//! status, and the daemons' help shows the defaults the daemon applies
//! (it once said `scheduler = "cpf"`, `reorder = "passive"` while the
//! daemon ran acpf and active-adaptive).

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(args)
        .arg("--help")
        .output()
        .expect("mpdccp --help");
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The subcommands `mpdccp --help` lists (but `help`).
fn subcommands() -> Vec<String> {
    let top = help(&[]);
    top.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommand_states_its_exit_status() {
    let subs = subcommands();
    assert!(subs.len() >= 12, "{subs:?}");
    for s in &subs {
        let h = help(&[s]);
        assert!(
            h.contains("Exit status: 0 ") && h.contains("2 usage error"),
            "{s} --help has no exit status:\n{h}"
        );
    }
    // And it is true where it is cheap to check: a key that is not one.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .arg("pubkey")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"not a key\n")
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1));
    let out = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["status", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `key = value` pairs of the help's `[tunnel]` block, as TOML values.
fn tunnel_pairs(h: &str) -> Vec<(String, toml::Value)> {
    let block: String = h
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("[tunnel]"))
        .take_while(|l| !l.trim_start().starts_with("[ops]"))
        .map(|l| l.trim_start().trim_start_matches("[tunnel]"))
        .collect::<Vec<_>>()
        .join(",");
    let mut out = Vec::new();
    for item in block.split(',') {
        let Some((k, v)) = item.split_once(" = ") else {
            continue;
        };
        let k = k.trim();
        // The value up to a comment or explanation in parentheses.
        let v = v.split("  ").next().unwrap_or("").trim();
        let v = v.split(" (").next().unwrap_or("").trim();
        if let Ok(t) = format!("x = {v}").parse::<toml::Table>() {
            out.push((k.to_owned(), t["x"].clone()));
        }
    }
    out
}

#[test]
fn the_daemons_help_shows_the_defaults_they_apply() {
    let defaults = toml::Table::try_from(mpdccp_net::daemon::config::TunnelConfig::default())
        .expect("defaults as TOML");
    for role in ["server", "client"] {
        let h = help(&[role]);
        let pairs = tunnel_pairs(&h);
        let mut checked = Vec::new();
        for (k, v) in &pairs {
            let Some(d) = defaults.get(k) else { continue };
            // `= 0` in help for a value the daemon derives is "derived".
            let same = match (d, v) {
                (toml::Value::Float(a), toml::Value::Integer(b)) => *a == *b as f64,
                (toml::Value::Integer(a), toml::Value::Float(b)) => *a as f64 == *b,
                _ => d == v,
            };
            assert!(same, "{role} --help: {k} = {v}, the daemon applies {d}");
            checked.push(k.as_str());
        }
        for k in [
            "cc",
            "scheduler",
            "reorder",
            "aqm",
            "retransmit_lost",
            "path_mtu",
        ] {
            assert!(
                checked.contains(&k),
                "{role} --help does not show {k}: {checked:?}"
            );
        }
        assert!(checked.len() >= 15, "{role}: only {checked:?}");
    }
}
