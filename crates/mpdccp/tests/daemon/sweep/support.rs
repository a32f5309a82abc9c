//! Shared by the sweep tests: a small sweep whose seeds matter, running
//! `mpdccp sweep`, and comparing two sweep directories file by file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// E2 (CCID5) with 1 % loss on path 1 so that the seeds change the result,
/// over two congestion controls and two seeds: 4 cells.
pub fn sweep_args() -> Vec<String> {
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/e2-ccid5.toml");
    [
        scenario,
        "--set",
        "tunnel.cc=ccid2,ccid5",
        "--set",
        "path.p1.loss=0.01",
        "--seeds",
        "1,2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub const CELLS: usize = 4;

pub fn mpdccp(args: &[String], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mpdccp"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run mpdccp")
}

/// `mpdccp sweep ARGS --out DIR`, asserting success.
pub fn sweep_ok(args: &[String], out: &Path) {
    let mut a = vec!["sweep".to_string()];
    a.extend_from_slice(args);
    a.extend(["--out".to_string(), out.display().to_string()]);
    let o = mpdccp(&a, Path::new("/"));
    assert!(
        o.status.success(),
        "mpdccp {a:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every file under `dir`, relative, sorted; `cell.json` (the wall time),
/// the Slurm script and its logs are left out: they differ by design.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).expect("read_dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).expect("prefix").to_owned();
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "cell.json" || name == "sweep.sbatch" || name == "slurm" {
                continue;
            }
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Asserts both directories hold the same files with the same bytes, and
/// that they hold the merged results at all.
pub fn assert_same_tree(local: &Path, other: &Path) {
    let (a, b) = (files(local), files(other));
    assert_eq!(a, b, "different file lists");
    for must in ["index.csv", "cells.csv", "plan.jsonl"] {
        assert!(a.iter().any(|p| p == Path::new(must)), "no {must}");
    }
    assert!(a.len() > CELLS * 2, "too few files: {a:?}");
    for rel in &a {
        let (x, y) = (
            std::fs::read(local.join(rel)).expect("read"),
            std::fs::read(other.join(rel)).expect("read"),
        );
        assert!(x == y, "{} differs", rel.display());
    }
}

pub fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpdccp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}
