//! A report command whose reader goes away (`mpdccp sim … | head -1`) stops
//! quietly instead of panicking on `EPIPE`.

use std::process::{Command, Stdio};

#[test]
fn sim_into_a_closed_pipe_exits_without_a_panic() {
    let dir = std::env::temp_dir().join(format!("mpdccp-pipe-{}", std::process::id()));
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/e1-dccp-ccid2.toml"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(["sim", scenario, "--out"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the table is printed: every write is EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    // Killed by SIGPIPE (the shell convention), not exit code 101 of a panic.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc_sigpipe()),
        "status {:?}",
        out.status
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const fn libc_sigpipe() -> i32 {
    13 // SIGPIPE on Linux (signal(7))
}
