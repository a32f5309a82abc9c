//! `sweep --slurm`: an `sbatch` job-array script for a plan — task I runs
//! `mpdccp sweep --cell I`, one CPU each (a simulation is single-threaded).
//! The logs go to `<out>/slurm/`, which must exist before the job starts
//! (Slurm does not create it).

use std::fmt::Write as _;
use std::path::Path;

/// The script; `exe`, `workdir` and `out` should be absolute so a task on
/// another node (with a shared file system) finds them.
pub fn script(cells: usize, exe: &Path, workdir: &Path, out: &Path, extra: &[String]) -> String {
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(
        s,
        "# mpdccp sweep: {cells} cells from {}",
        out.join(super::sweep_plan::PLAN_FILE).display()
    );
    s.push_str("#SBATCH --job-name=mpdccp-sweep\n");
    let _ = writeln!(s, "#SBATCH --array=0-{}", cells.saturating_sub(1));
    s.push_str("#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n");
    let _ = writeln!(s, "#SBATCH --chdir={}", workdir.display());
    let _ = writeln!(s, "#SBATCH --output={}/slurm/%A_%a.log", out.display());
    for e in extra {
        let _ = writeln!(s, "#SBATCH {e}");
    }
    let _ = writeln!(
        s,
        "exec {} sweep --cell \"$SLURM_ARRAY_TASK_ID\" --out {}",
        sh_quote(&exe.display().to_string()),
        sh_quote(&out.display().to_string())
    );
    s
}

/// Single-quotes a word for the shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
