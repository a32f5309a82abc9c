//! `sweep --plan` / `--cell` / `--collect` / `--slurm` (no Slurm needed):
//! cells run as separate processes, in any order, merge into the same files
//! as the local `sweep`; missing cells are named; a bad value stops the
//! sweep before anything runs.

use std::path::Path;

use super::support::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn plan_cells_and_collect_equal_the_local_sweep_byte_for_byte() {
    // CPU-bound: kept off the cores the network tests measure.
    let _serial = crate::support::serial();
    let root = tmp("sweep-cluster");
    let (local, split) = (root.join("local"), root.join("split"));
    let mut args = sweep_args();
    args.extend(["--jobs".into(), "2".into()]);
    sweep_ok(&args, &local);
    let mut plan = sweep_args();
    plan.push("--plan".into());
    sweep_ok(&plan, &split);
    let lines = std::fs::read_to_string(split.join("plan.jsonl")).expect("plan");
    assert_eq!(lines.lines().count(), CELLS, "{lines}");
    let out = split.display().to_string();
    let collect = || {
        mpdccp(
            &["sweep", "--collect", "--out", &out].map(String::from),
            Path::new("/"),
        )
    };
    // Nothing ran yet: every cell is missing, exit 1.
    let o = collect();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("4 of 4 cells missing (not finished): 0-3"),
        "{}",
        stderr(&o)
    );
    // Cells in reverse order, each its own process; all but cell 1 first.
    for i in [3usize, 2, 0] {
        let o = mpdccp(
            &["sweep", "--cell", &i.to_string(), "--out", &out].map(String::from),
            Path::new("/"),
        );
        assert!(o.status.success(), "cell {i}: {}", stderr(&o));
    }
    let o = collect();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("1 of 4 cells missing (not finished): 1"),
        "{}",
        stderr(&o)
    );
    let o = mpdccp(
        &["sweep", "--cell", "1", "--out", &out].map(String::from),
        Path::new("/"),
    );
    assert!(o.status.success(), "cell 1: {}", stderr(&o));
    let o = collect();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_tree(&local, &split);
    // The seeds matter here (loss), so cells.csv has a spread: a check that
    // the comparison is of results, not of empty files.
    let cells = std::fs::read_to_string(local.join("cells.csv")).expect("cells.csv");
    assert!(cells.lines().count() > 4, "{cells}");
    let index = std::fs::read_to_string(local.join("index.csv")).expect("index.csv");
    let header_cols = index.lines().next().unwrap().split(',').count();
    assert!(
        !index.contains("wall"),
        "wall time would break byte identity"
    );
    assert_eq!(header_cols, 18);
    // Planning again into the same directory: nothing is finished yet, the
    // earlier results are not taken for this plan's.
    sweep_ok(&plan, &split);
    let o = collect();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("4 of 4 cells missing"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_invalid_value_stops_the_sweep_before_any_run() {
    // CPU-bound: kept off the cores the network tests measure.
    let _serial = crate::support::serial();
    let root = tmp("sweep-invalid");
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/e2-ccid5.toml");
    let out = root.join("out");
    // ccid2 is valid and comes first; the bad value must still stop everything.
    let a = [
        "sweep",
        scenario,
        "--set",
        "tunnel.cc=ccid2,nonsense",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.display().to_string()])
    .collect::<Vec<_>>();
    let o = mpdccp(&a, Path::new("/"));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nothing was run"), "{}", stderr(&o));
    assert!(!out.join("plan.jsonl").exists());
    assert!(
        !out.join("e2-ccid5__tunnel.cc=ccid2").exists(),
        "a valid cell ran"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_slurm_script_is_an_array_over_the_plan_and_runs_its_task() {
    // CPU-bound: kept off the cores the network tests measure.
    let _serial = crate::support::serial();
    let root = tmp("sweep-sbatch");
    let out = root.join("out");
    let mut args = sweep_args();
    args.extend(["--slurm".into(), "--sbatch=--time=00:10:00".into()]);
    sweep_ok(&args, &out);
    let script = std::fs::read_to_string(out.join("sweep.sbatch")).expect("script");
    assert!(
        script.contains(&format!("#SBATCH --array=0-{}\n", CELLS - 1)),
        "{script}"
    );
    assert!(script.contains("#SBATCH --time=00:10:00\n"), "{script}");
    assert!(
        script.contains("sweep --cell \"$SLURM_ARRAY_TASK_ID\""),
        "{script}"
    );
    assert!(
        out.join("slurm").is_dir(),
        "Slurm does not create the log dir"
    );
    // What a task does: bash runs the script with its task id.
    let o = std::process::Command::new("bash")
        .arg(out.join("sweep.sbatch"))
        .env("SLURM_ARRAY_TASK_ID", "2")
        .output()
        .expect("bash");
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = std::fs::read_to_string(out.join("plan.jsonl")).expect("plan");
    let cell2: serde_json::Value = serde_json::from_str(plan.lines().nth(2).unwrap()).unwrap();
    let dir = out.join(cell2["dir"].as_str().unwrap());
    assert!(dir.join("cell.json").exists() && dir.join("summary.json").exists());
    let finished = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("cell.json").exists())
        .count();
    assert_eq!(finished, 1, "only task 2 ran");
    let _ = std::fs::remove_dir_all(&root);
}
