//! The cells of a sweep and `plan.jsonl`, the file that lets them run
//! anywhere: one JSON object per line, line I = cell I, so a job array's
//! task I runs `mpdccp sweep --cell I` (format in docs/SCENARIOS.md). The
//! local `sweep` writes and runs the same plan, which is what makes a
//! collected cluster result equal to a local one byte for byte.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// The plan's file name inside the sweep directory.
pub const PLAN_FILE: &str = "plan.jsonl";

/// One run: a scenario file with `--set` values and a seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Position in the plan (0-based) = the job array's task id.
    pub cell: usize,
    /// Run id (scenario stem, settings, seed) = its output directory.
    pub id: String,
    /// The scenario file as given on the command line (relative paths are
    /// relative to the directory `--plan` ran in).
    pub scenario: PathBuf,
    /// `KEY=VALUE` settings, applied in order.
    pub set: Vec<String>,
    /// The seed, or `null` for the scenario's own.
    pub seed: Option<u64>,
    /// Output directory, relative to the sweep directory.
    pub dir: String,
}

/// Parses `--set KEY=V1,V2` flags into axes (a key given twice adds values).
fn axes(set: &[String]) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for s in set {
        let (k, v) = s
            .split_once('=')
            .with_context(|| format!("--set `{s}`: expected KEY=V1,V2"))?;
        let vals: Vec<String> =
            if v.trim_start().starts_with('[') || v.trim_start().starts_with('{') {
                vec![v.to_owned()]
            } else {
                v.split(',').map(|x| x.trim().to_owned()).collect()
            };
        match axes.iter_mut().find(|(key, _)| key == k) {
            Some((_, existing)) => existing.extend(vals),
            None => axes.push((k.to_owned(), vals)),
        }
    }
    Ok(axes)
}

/// Every cell: scenario files × the cartesian product of the axes × seeds,
/// in that nesting order. Each distinct setting combination is loaded
/// first, so an invalid value stops the sweep before anything runs.
pub fn build(scenarios: &[PathBuf], set: &[String], seeds: &[u64]) -> anyhow::Result<Vec<Cell>> {
    let mut combos: Vec<Vec<String>> = vec![Vec::new()];
    for (k, vals) in &axes(set)? {
        let mut next = Vec::new();
        for c in &combos {
            for v in vals {
                let mut c = c.clone();
                c.push(format!("{k}={v}"));
                next.push(c);
            }
        }
        combos = next;
    }
    let seeds: Vec<Option<u64>> = if seeds.is_empty() {
        vec![None]
    } else {
        seeds.iter().map(|s| Some(*s)).collect()
    };
    let mut cells: Vec<Cell> = Vec::new();
    for file in scenarios {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for c in &combos {
            super::sim::load(file, c).with_context(|| {
                format!("{} with {}: nothing was run", file.display(), c.join(";"))
            })?;
            for seed in &seeds {
                let mut id = stem.clone();
                for kv in c {
                    id.push_str(&format!("__{kv}"));
                }
                if let Some(s) = seed {
                    id.push_str(&format!("__seed={s}"));
                }
                let id: String = id
                    .chars()
                    .map(|ch| {
                        if ch.is_ascii_alphanumeric() || "-_.=".contains(ch) {
                            ch
                        } else {
                            '_'
                        }
                    })
                    .collect();
                if cells.iter().any(|x| x.id == id) {
                    bail!("two runs would share the directory `{id}` (same scenario stem, settings and seed)");
                }
                cells.push(Cell {
                    cell: cells.len(),
                    dir: id.clone(),
                    id,
                    scenario: file.clone(),
                    set: c.clone(),
                    seed: *seed,
                });
            }
        }
    }
    Ok(cells)
}

pub fn write(out: &Path, cells: &[Cell]) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let mut s = String::new();
    for c in cells {
        s.push_str(&serde_json::to_string(c)?);
        s.push('\n');
    }
    std::fs::write(out.join(PLAN_FILE), s)?;
    Ok(())
}

pub fn read(out: &Path) -> anyhow::Result<Vec<Cell>> {
    let path = out.join(PLAN_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (write it with `sweep --plan`)", path.display()))?;
    let mut cells = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let c: Cell = serde_json::from_str(line)
            .with_context(|| format!("{} line {}", path.display(), i + 1))?;
        if c.cell != i {
            bail!(
                "{} line {}: cell {} out of order",
                path.display(),
                i + 1,
                c.cell
            );
        }
        cells.push(c);
    }
    Ok(cells)
}

/// Whether the plan has several seeds (then `collect` writes `cells.csv`).
pub fn several_seeds(cells: &[Cell]) -> bool {
    let mut seeds: Vec<Option<u64>> = cells.iter().map(|c| c.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    seeds.len() > 1
}
