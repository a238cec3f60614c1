//! Comparing two checkpoints: code per region, tuning parameters, performance.

use std::collections::BTreeSet;
use std::fmt;

use peak_record::performance::recorded_best_params;

use peak_spec::regions::{Region, Regions};
use serde::Serialize;
use serde_json::Value;
use similar::TextDiff;

use crate::context::{self, Files, MANIFEST};
use crate::error::Result;
use crate::history::Snapshot;
use crate::speedup::{BestTimes, format_inputs};
use crate::workflow::{CONTEXT_DIR, CheckpointId, Workflow, best_time, fmt_ms};

/// What [`Workflow::diff`] returns. `Display` renders it for terminals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowDiff {
    pub a: DiffSide,
    pub b: DiffSide,
    /// Changed context files, by path; unchanged ones are left out.
    pub files: Vec<FileDiff>,
    pub tuning: TuningDiff,
    pub performance: PerformanceDelta,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffSide {
    pub id: CheckpointId,
    pub transformation: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileDiff {
    /// Relative to the context folder.
    pub path: String,
    pub status: FileStatus,
    pub change: FileChange,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    Added,
    Removed,
    Modified,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum FileChange {
    /// The source file, split by region; only changed regions are listed.
    Regions { regions: Vec<RegionDiff> },
    /// Any other text file, as one unified diff.
    Text { unified: String },
    /// Not UTF-8 on at least one side.
    Binary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionDiff {
    pub region: Region,
    /// Unified diff of the region's text (line numbers count from the region's start).
    pub unified: String,
}

/// Tuning-parameter changes between the two manifests; values are their TOML text.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TuningDiff {
    pub params: Vec<ParamChange>,
    pub constraints_added: Vec<String>,
    pub constraints_removed: Vec<String>,
}

impl TuningDiff {
    pub fn is_empty(&self) -> bool {
        self.params.is_empty() && self.constraints_added.is_empty() && self.constraints_removed.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamChange {
    pub name: String,
    /// `None`: added in b.
    pub before: Option<String>,
    /// `None`: removed in b.
    pub after: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerformanceDelta {
    pub a_best_ms: Option<f64>,
    pub b_best_ms: Option<f64>,
    /// a's time over b's: above 1 means b is faster.
    pub speedup: Option<f64>,
    /// The best configurations' parameters (`best.params`).
    pub a_params: Option<Value>,
    pub b_params: Option<Value>,
    /// The inputs `a_best_ms` and `b_best_ms` were measured at (`best.params.inputs`).
    pub a_inputs: Option<Value>,
    pub b_inputs: Option<Value>,
    /// The inputs `speedup` was taken at: b's headline inputs if a was timed there, else
    /// the last inputs both were tuned at.
    pub speedup_inputs: Option<Value>,
    /// Every input size either side was tuned at (`runs`), b's order first.
    pub sizes: Vec<SizeDelta>,
}

/// Both sides' best times at one input size, in [`PerformanceDelta::sizes`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeDelta {
    pub inputs: Value,
    pub a_ms: Option<f64>,
    pub b_ms: Option<f64>,
    /// a's time over b's at these inputs.
    pub speedup: Option<f64>,
}

fn unified(old: &str, new: &str, a_name: &str, b_name: &str) -> String {
    TextDiff::from_lines(old, new).unified_diff().context_radius(3).header(a_name, b_name).to_string()
}

fn as_text(bytes: Option<&Vec<u8>>) -> Option<Option<&str>> {
    match bytes {
        None => Some(None),
        Some(b) => std::str::from_utf8(b).ok().map(Some),
    }
}

/// The source file's name when both sides agree on it and both parse into regions.
fn region_pair<'f>(a: &'f Files, b: &'f Files) -> Option<(String, Regions, Regions)> {
    let source_of = |files: &Files| files.get(MANIFEST).and_then(|m| context::source_name(std::str::from_utf8(m).ok()?));
    let name = source_of(a)?;
    if source_of(b)? != name {
        return None;
    }
    let parse = |files: &'f Files| Regions::parse(&name, std::str::from_utf8(files.get(&name)?).ok()?).ok();
    Some((name.clone(), parse(a)?, parse(b)?))
}

fn file_diffs(a: &Files, b: &Files) -> Vec<FileDiff> {
    let regions = region_pair(a, b);
    let paths: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for path in paths {
        let (old, new) = (a.get(path), b.get(path));
        if old == new {
            continue;
        }
        let status = match (old, new) {
            (None, _) => FileStatus::Added,
            (_, None) => FileStatus::Removed,
            _ => FileStatus::Modified,
        };
        let change = match &regions {
            Some((name, ra, rb)) if name == path => FileChange::Regions {
                regions: Region::ALL
                    .into_iter()
                    .filter(|r| ra.get(*r) != rb.get(*r))
                    .map(|r| RegionDiff {
                        region: r,
                        unified: unified(ra.get(r), rb.get(r), &format!("a/{CONTEXT_DIR}/{path} ({r})"), &format!("b/{CONTEXT_DIR}/{path} ({r})")),
                    })
                    .collect(),
            },
            _ => match (as_text(old), as_text(new)) {
                (Some(o), Some(n)) => FileChange::Text {
                    unified: unified(
                        o.unwrap_or(""),
                        n.unwrap_or(""),
                        &o.map_or("/dev/null".to_string(), |_| format!("a/{CONTEXT_DIR}/{path}")),
                        &n.map_or("/dev/null".to_string(), |_| format!("b/{CONTEXT_DIR}/{path}")),
                    ),
                },
                _ => FileChange::Binary,
            },
        };
        out.push(FileDiff { path: path.clone(), status, change });
    }
    out
}

fn tuning_diff(a: &Files, b: &Files) -> TuningDiff {
    let read = |files: &Files| files.get(MANIFEST).map(|m| context::tuning(&String::from_utf8_lossy(m))).unwrap_or_default();
    let (ta, tb) = (read(a), read(b));
    let names: BTreeSet<&String> = ta.params.keys().chain(tb.params.keys()).collect();
    let params = names
        .into_iter()
        .filter_map(|name| {
            let (before, after) = (ta.params.get(name), tb.params.get(name));
            (before != after).then(|| ParamChange { name: name.clone(), before: before.cloned(), after: after.cloned() })
        })
        .collect();
    let constraints_added = tb.constraints.iter().filter(|c| !ta.constraints.contains(c)).cloned().collect();
    let constraints_removed = ta.constraints.iter().filter(|c| !tb.constraints.contains(c)).cloned().collect();
    TuningDiff { params, constraints_added, constraints_removed }
}

fn performance_delta(a: &Value, b: &Value) -> PerformanceDelta {
    let (ta, tb) = (best_time(a), best_time(b));
    let (times_a, times_b) = (BestTimes::of(a), BestTimes::of(b));
    let speedup = times_b.speedup_over_at(&times_a);
    let mut sizes: Vec<SizeDelta> = Vec::new();
    if times_a.has_runs() || times_b.has_runs() {
        let at = |times: &BestTimes, inputs: &Value| times.sizes().into_iter().find(|(i, _)| i.as_ref() == Some(inputs)).map(|(_, t)| t);
        for (inputs, _) in times_b.sizes().into_iter().chain(times_a.sizes()) {
            let Some(inputs) = inputs else { continue };
            if sizes.iter().any(|s| s.inputs == inputs) {
                continue;
            }
            let (a_ms, b_ms) = (at(&times_a, &inputs), at(&times_b, &inputs));
            sizes.push(SizeDelta { speedup: times_b.speedup_at_inputs(&times_a, &inputs), a_ms, b_ms, inputs });
        }
    }
    PerformanceDelta {
        a_best_ms: ta,
        b_best_ms: tb,
        speedup: speedup.as_ref().map(|s| s.ratio),
        a_params: recorded_best_params(a),
        b_params: recorded_best_params(b),
        a_inputs: times_a.headline_inputs().cloned(),
        b_inputs: times_b.headline_inputs().cloned(),
        speedup_inputs: speedup.and_then(|s| s.inputs),
        sizes,
    }
}

pub(crate) fn diff_snapshots(a: &Snapshot, b: &Snapshot) -> WorkflowDiff {
    WorkflowDiff {
        a: DiffSide { id: CheckpointId::from_oid(a.id), transformation: a.meta.transformation.clone() },
        b: DiffSide { id: CheckpointId::from_oid(b.id), transformation: b.meta.transformation.clone() },
        files: file_diffs(&a.context, &b.context),
        tuning: tuning_diff(&a.context, &b.context),
        performance: performance_delta(&a.performance, &b.performance),
    }
}

impl Workflow {
    /// Compare checkpoint `a` with checkpoint `b` (b is the "new" side).
    pub fn diff(&self, a: &str, b: &str) -> Result<WorkflowDiff> {
        let a = self.load(self.resolve_oid(a)?)?;
        let b = self.load(self.resolve_oid(b)?)?;
        Ok(diff_snapshots(&a, &b))
    }
}

impl fmt::Display for WorkflowDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "checkpoint {} ({}) -> {} ({})", self.a.id.short(), self.a.transformation, self.b.id.short(), self.b.transformation)?;
        let p = &self.performance;
        let time = |t: Option<f64>| t.map(fmt_ms).unwrap_or_else(|| "no timing".to_string());
        let at = |i: Option<&Value>| i.map(|i| format!(" at {}", format_inputs(i))).unwrap_or_default();
        let ratio = |s: f64| if s >= 1.0 { format!("{s:.2}x faster") } else { format!("{:.2}x slower", 1.0 / s) };
        // One "at" after both times when they share their inputs, else one after each.
        let (a_at, b_at) = match (p.a_best_ms, p.b_best_ms) {
            (Some(_), Some(_)) if p.a_inputs == p.b_inputs => (String::new(), at(p.b_inputs.as_ref())),
            _ => (p.a_best_ms.map(|_| at(p.a_inputs.as_ref())).unwrap_or_default(), p.b_best_ms.map(|_| at(p.b_inputs.as_ref())).unwrap_or_default()),
        };
        write!(f, "\nperformance: {}{a_at} -> {}{b_at}", time(p.a_best_ms), time(p.b_best_ms))?;
        match p.speedup {
            Some(s) if p.speedup_inputs.is_some() && p.speedup_inputs != p.b_inputs => writeln!(f, " ({}{})", ratio(s), at(p.speedup_inputs.as_ref()))?,
            Some(s) => writeln!(f, " ({})", ratio(s))?,
            None => writeln!(f)?,
        }
        if p.sizes.len() > 1 {
            let dash = |t: Option<f64>| t.map(fmt_ms).unwrap_or_else(|| "-".to_string());
            for s in &p.sizes {
                write!(f, "  at {}: {} -> {}", format_inputs(&s.inputs), dash(s.a_ms), dash(s.b_ms))?;
                match s.speedup {
                    Some(r) => writeln!(f, " ({})", ratio(r))?,
                    None => writeln!(f)?,
                }
            }
        }
        if p.a_params != p.b_params {
            let params = |v: &Option<Value>| v.as_ref().map_or_else(|| "-".to_string(), Value::to_string);
            writeln!(f, "  best configuration: {} -> {}", params(&p.a_params), params(&p.b_params))?;
        }
        if !self.tuning.is_empty() {
            writeln!(f, "\ntuning parameters:")?;
            for c in &self.tuning.params {
                match (&c.before, &c.after) {
                    (None, Some(after)) => writeln!(f, "  + {} = {after}", c.name)?,
                    (Some(before), None) => writeln!(f, "  - {} = {before}", c.name)?,
                    (Some(before), Some(after)) => writeln!(f, "  ~ {}: {before} -> {after}", c.name)?,
                    (None, None) => {}
                }
            }
            for c in &self.tuning.constraints_added {
                writeln!(f, "  + constraint {c}")?;
            }
            for c in &self.tuning.constraints_removed {
                writeln!(f, "  - constraint {c}")?;
            }
        }
        for file in &self.files {
            match &file.change {
                FileChange::Regions { regions } => {
                    for r in regions {
                        write!(f, "\n{}", r.unified)?;
                    }
                }
                FileChange::Text { unified } => write!(f, "\n{unified}")?,
                FileChange::Binary => writeln!(f, "\nbinary file {CONTEXT_DIR}/{} {:?}", file.path, file.status)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Files {
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    const MANIFEST_A: &str = "[kernel]\nname = \"k\"\nsource = \"k.cl\"\n[tuning]\nA = 1\nB = 2\n";
    const MANIFEST_B: &str = "[kernel]\nname = \"k\"\nsource = \"k.cl\"\n[tuning]\nA = 1\nB = 3\nC = 4\n";

    #[test]
    fn only_changed_regions_are_listed() {
        let a = files(&[(MANIFEST, MANIFEST_A), ("k.cl", "// @peak macros\nM\n// @peak device\nD1\n// @peak host\nH\n")]);
        let b = files(&[(MANIFEST, MANIFEST_A), ("k.cl", "// @peak macros\nM\n// @peak device\nD2\n// @peak host\nH\n")]);
        let diffs = file_diffs(&a, &b);
        assert_eq!(diffs.len(), 1);
        let FileChange::Regions { regions } = &diffs[0].change else { panic!("expected a region diff: {diffs:?}") };
        assert_eq!(regions.len(), 1);
        assert_eq!(regions[0].region, Region::Device);
        assert!(regions[0].unified.contains("-D1\n+D2\n"), "{}", regions[0].unified);
    }

    #[test]
    fn unparsable_source_falls_back_to_a_text_diff_and_added_files_are_marked() {
        let a = files(&[(MANIFEST, MANIFEST_A), ("k.cl", "broken\n")]);
        let b = files(&[(MANIFEST, MANIFEST_A), ("k.cl", "still broken\n"), ("notes.md", "x\n")]);
        let diffs = file_diffs(&a, &b);
        assert_eq!(diffs.iter().map(|d| (d.path.as_str(), d.status)).collect::<Vec<_>>(), [("k.cl", FileStatus::Modified), ("notes.md", FileStatus::Added)]);
        assert!(matches!(&diffs[0].change, FileChange::Text { unified } if unified.contains("+still broken")));
    }

    #[test]
    fn tuning_changes_are_added_changed_and_removed() {
        let t = tuning_diff(&files(&[(MANIFEST, MANIFEST_B)]), &files(&[(MANIFEST, MANIFEST_A)]));
        let got: Vec<_> = t.params.iter().map(|c| (c.name.as_str(), c.before.as_deref(), c.after.as_deref())).collect();
        assert_eq!(got, [("B", Some("3"), Some("2")), ("C", Some("4"), None)]);
    }
}
