//! Reading the history: the checkpoint DAG, one checkpoint in full, and resume state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use git2::{Oid, Sort};
use serde::Serialize;
use serde_json::Value;

use crate::attempts::{AttemptRecord, MIRROR_BRANCH};
use crate::context::Files;
use crate::error::{GitContext, Result, WorkflowError};
use crate::speedup::{BestTimes, SpeedupAt, format_inputs};
use crate::workflow::{
    CHECKPOINT_FILE, CONTEXT_DIR, CheckpointId, CheckpointMeta, Head, PERFORMANCE_FILE, REFERENCE_FILE, TRANSCRIPT_FILE, VALIDATION_FILE, Workflow, fmt_ms,
    read_tree_dir, read_tree_file,
};
use crate::yardstick::Yardstick;

/// One checkpoint in [`Workflow::log`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogEntry {
    pub id: CheckpointId,
    pub parents: Vec<CheckpointId>,
    /// Local branches, and remote-tracking ones as `REMOTE/NAME`, pointing here.
    pub branches: Vec<String>,
    pub tags: Vec<String>,
    /// HEAD points here.
    pub head: bool,
    /// `None` when `checkpoint.json` is missing or unreadable (fsck says why).
    pub transformation: Option<String>,
    pub verdict: Option<String>,
    pub executor: Option<String>,
    pub model: Option<String>,
    pub created: Option<String>,
    /// `performance.json`'s `best.time_ms`.
    pub best_time_ms: Option<f64>,
    /// The inputs `best_time_ms` was measured at (`best.params.inputs`).
    pub best_inputs: Option<Value>,
    /// Root's best time over this one's (2.0 = twice as fast as the root), at the
    /// headline's inputs if the root was timed there, else at the last inputs both share.
    pub speedup_over_root: Option<f64>,
    /// The inputs `speedup_over_root` was taken at.
    pub speedup_over_root_inputs: Option<Value>,
    /// Parent's best time over this one's, chosen as `speedup_over_root` is.
    pub speedup_over_parent: Option<f64>,
    /// The inputs `speedup_over_parent` was taken at.
    pub speedup_over_parent_inputs: Option<Value>,
    /// The two times of `speedup_over_parent` are within each other's spread (their
    /// interquartile ranges overlap): the step made no measurable difference. `None`
    /// where either record holds no spread.
    pub within_spread_of_parent: Option<bool>,
    /// The yardstick the checkpoint was measured against at its headline inputs
    /// (`performance.json`'s `baseline`: cuBLASLt, a copy, or `n/a` with the reason), with
    /// the best time as a percentage of it. Absent in records made before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Yardstick>,
    /// The best time at every input size tuned (`performance.json`'s `runs`, in order),
    /// with the speedups at that same size.
    pub sizes: Vec<SizeEntry>,
    /// The commit message's first line.
    pub summary: String,
}

/// One input size a checkpoint was tuned at, in [`LogEntry::sizes`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeEntry {
    /// `None` for a record that names no inputs.
    pub inputs: Option<Value>,
    pub best_time_ms: f64,
    /// The root's time at these inputs over this one's; `None` where the root was not timed here.
    pub speedup_over_root: Option<f64>,
    /// The parent's time at these inputs over this one's.
    pub speedup_over_parent: Option<f64>,
}

/// One checkpoint in full, for [`Workflow::show`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointView {
    pub id: CheckpointId,
    pub parents: Vec<CheckpointId>,
    pub branches: Vec<String>,
    pub tags: Vec<String>,
    pub message: String,
    pub meta: CheckpointMeta,
    pub validation: Value,
    pub performance: Value,
    pub transcript: Value,
    pub reference: Value,
    /// The context files by path relative to the context folder (non-UTF-8 bytes are
    /// shown as U+FFFD; use [`Workflow::materialize`] for exact bytes).
    pub files: BTreeMap<String, String>,
}

/// Where an interrupted session picks up, from [`Workflow::resume_state`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeState {
    /// HEAD: the latest checkpoint of the current branch (or the detached checkpoint).
    pub head: Head,
    pub transformation: String,
    pub best_time_ms: Option<f64>,
    /// Attempts that started and never ended, and produced no checkpoint: the work the
    /// interruption cut short, oldest first.
    pub interrupted: Vec<AttemptRecord>,
}

/// A checkpoint read in full; any missing or malformed file is an error naming it.
pub(crate) struct Snapshot {
    pub id: Oid,
    pub parents: Vec<Oid>,
    pub message: String,
    pub meta: CheckpointMeta,
    pub validation: Value,
    pub performance: Value,
    pub transcript: Value,
    pub reference: Value,
    pub context: Files,
}

/// Ref names pointing at each commit, and where to start walking.
#[derive(Default)]
pub(crate) struct Labels {
    pub branches: HashMap<Oid, Vec<String>>,
    pub tags: HashMap<Oid, Vec<String>>,
    pub head: Option<Oid>,
    /// Refs that do not lead to a commit: (ref name, git's reason).
    pub broken: Vec<(String, String)>,
}

impl Labels {
    pub fn starts(&self) -> Vec<Oid> {
        let mut starts: Vec<Oid> = self.branches.keys().chain(self.tags.keys()).copied().chain(self.head).collect();
        starts.sort();
        starts.dedup();
        starts
    }
}

/// A commit of the DAG as `log` and `resume` need it; meta is `None` when unreadable.
struct Node {
    id: Oid,
    parents: Vec<Oid>,
    meta: Option<CheckpointMeta>,
    times: BestTimes,
    summary: String,
}

impl Workflow {
    /// The refs that name checkpoints: branches (local and remote-tracking, except the
    /// attempts mirror), tags, and HEAD.
    pub(crate) fn labels(&self) -> Result<Labels> {
        let mut labels = Labels::default();
        for reference in self.repo.references().git("list refs")? {
            let reference = reference.git("read ref")?;
            let Ok(name) = reference.name().map(str::to_string) else { continue };
            let (is_tag, label) = if let Some(branch) = name.strip_prefix("refs/heads/") {
                if branch == MIRROR_BRANCH {
                    continue;
                }
                (false, branch.to_string())
            } else if let Some(remote) = name.strip_prefix("refs/remotes/") {
                let branch = remote.split_once('/').map_or(remote, |(_, b)| b);
                if branch == "HEAD" || branch == MIRROR_BRANCH {
                    continue;
                }
                (false, remote.to_string())
            } else if let Some(tag) = name.strip_prefix("refs/tags/") {
                (true, tag.to_string())
            } else {
                continue;
            };
            match reference.peel_to_commit() {
                Ok(commit) => {
                    let map = if is_tag { &mut labels.tags } else { &mut labels.branches };
                    map.entry(commit.id()).or_default().push(label);
                }
                Err(e) => labels.broken.push((name, e.message().to_string())),
            }
        }
        match self.repo.head().and_then(|h| h.peel_to_commit()) {
            Ok(commit) => labels.head = Some(commit.id()),
            Err(e) => labels.broken.push(("HEAD".to_string(), e.message().to_string())),
        }
        for names in labels.branches.values_mut().chain(labels.tags.values_mut()) {
            names.sort();
        }
        Ok(labels)
    }

    /// Every commit reachable from `starts`, children before parents.
    pub(crate) fn walk(&self, starts: &[Oid]) -> Result<Vec<Oid>> {
        let mut walk = self.repo.revwalk().git("walk history")?;
        walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME).git("walk history")?;
        for start in starts {
            walk.push(*start).git(format!("walk history from {start}"))?;
        }
        walk.collect::<std::result::Result<Vec<_>, _>>().git("walk history")
    }

    fn nodes(&self, labels: &Labels) -> Result<Vec<Node>> {
        self.walk(&labels.starts())?
            .into_iter()
            .map(|id| {
                let commit = self.repo.find_commit(id).git(format!("read commit {id}"))?;
                let tree = commit.tree().git(format!("read tree of {id}"))?;
                let meta =
                    read_tree_file(&self.repo, &tree, CHECKPOINT_FILE).ok().flatten().and_then(|bytes| serde_json::from_slice::<CheckpointMeta>(&bytes).ok());
                Ok(Node {
                    id,
                    parents: commit.parent_ids().collect(),
                    meta,
                    times: self.best_times_of(&tree),
                    summary: commit.summary().ok().flatten().unwrap_or_default().to_string(),
                })
            })
            .collect()
    }

    /// The checkpoint DAG over all branches and tags, newest first (children always
    /// before their parents).
    pub fn log(&self) -> Result<Vec<LogEntry>> {
        let labels = self.labels()?;
        let nodes = self.nodes(&labels)?;
        // Parents come after children, so walk backwards to know each root's time first.
        let mut root_of: HashMap<Oid, Oid> = HashMap::new();
        let times: HashMap<Oid, BestTimes> = nodes.iter().map(|n| (n.id, n.times.clone())).collect();
        for node in nodes.iter().rev() {
            let root = node.parents.first().and_then(|p| root_of.get(p).copied()).unwrap_or(node.id);
            root_of.insert(node.id, root);
        }
        Ok(nodes
            .into_iter()
            .map(|node| {
                let (root, parent) = (times.get(&root_of[&node.id]), node.parents.first().and_then(|p| times.get(p)));
                let over = |base: Option<&BestTimes>| node.times.speedup_over_at(base?);
                let (over_root, over_parent) = (over(root), over(parent));
                let sizes = node
                    .times
                    .sizes()
                    .into_iter()
                    .map(|(inputs, time)| {
                        // At exactly these inputs; a record without runs has its headline only.
                        let at = |base: Option<&BestTimes>, headline: &Option<SpeedupAt>| match &inputs {
                            Some(i) if node.times.has_runs() => node.times.speedup_at_inputs(base?, i),
                            _ => headline.as_ref().map(|s| s.ratio),
                        };
                        SizeEntry { speedup_over_root: at(root, &over_root), speedup_over_parent: at(parent, &over_parent), inputs, best_time_ms: time }
                    })
                    .collect();
                let meta = node.meta;
                LogEntry {
                    id: CheckpointId::from_oid(node.id),
                    parents: node.parents.iter().copied().map(CheckpointId::from_oid).collect(),
                    branches: labels.branches.get(&node.id).cloned().unwrap_or_default(),
                    tags: labels.tags.get(&node.id).cloned().unwrap_or_default(),
                    head: labels.head == Some(node.id),
                    transformation: meta.as_ref().map(|m| m.transformation.clone()),
                    verdict: meta.as_ref().and_then(|m| m.verdict.clone()),
                    executor: meta.as_ref().map(|m| m.executor.clone()),
                    model: meta.as_ref().and_then(|m| m.model.clone()),
                    created: meta.as_ref().map(|m| m.created.clone()),
                    best_time_ms: node.times.headline(),
                    best_inputs: node.times.headline_inputs().cloned(),
                    speedup_over_root: over_root.as_ref().map(|s| s.ratio),
                    speedup_over_root_inputs: over_root.and_then(|s| s.inputs),
                    speedup_over_parent: over_parent.as_ref().map(|s| s.ratio),
                    within_spread_of_parent: over_parent.as_ref().and_then(|s| s.within_spread),
                    speedup_over_parent_inputs: over_parent.and_then(|s| s.inputs),
                    baseline: Yardstick::of(&node.times),
                    sizes,
                    summary: node.summary,
                }
            })
            .collect())
    }

    /// Read a checkpoint in full; any missing or malformed file is an error naming it.
    pub(crate) fn load(&self, id: Oid) -> Result<Snapshot> {
        let corrupt = |file: &str, message: String| WorkflowError::CorruptCheckpoint { id: id.to_string(), file: file.to_string(), message };
        let commit = self.repo.find_commit(id).git(format!("read commit {id}"))?;
        let tree = commit.tree().git(format!("read tree of {id}"))?;
        let json = |file: &str| -> Result<Value> {
            let bytes = read_tree_file(&self.repo, &tree, file)
                .map_err(|e| corrupt(file, e.message().to_string()))?
                .ok_or_else(|| corrupt(file, "missing".to_string()))?;
            serde_json::from_slice(&bytes).map_err(|e| corrupt(file, e.to_string()))
        };
        let meta: CheckpointMeta = serde_json::from_value(json(CHECKPOINT_FILE)?).map_err(|e| corrupt(CHECKPOINT_FILE, e.to_string()))?;
        let context = read_tree_dir(&self.repo, &tree, CONTEXT_DIR).map_err(|e| corrupt(CONTEXT_DIR, e.message().to_string()))?;
        Ok(Snapshot {
            id,
            parents: commit.parent_ids().collect(),
            message: commit.message().unwrap_or_default().to_string(),
            meta,
            validation: json(VALIDATION_FILE)?,
            performance: json(PERFORMANCE_FILE)?,
            transcript: json(TRANSCRIPT_FILE)?,
            reference: json(REFERENCE_FILE)?,
            context,
        })
    }

    /// One checkpoint in full.
    pub fn show(&self, rev: &str) -> Result<CheckpointView> {
        let snap = self.load(self.resolve_oid(rev)?)?;
        let labels = self.labels()?;
        Ok(CheckpointView {
            id: CheckpointId::from_oid(snap.id),
            parents: snap.parents.iter().copied().map(CheckpointId::from_oid).collect(),
            branches: labels.branches.get(&snap.id).cloned().unwrap_or_default(),
            tags: labels.tags.get(&snap.id).cloned().unwrap_or_default(),
            message: snap.message,
            meta: snap.meta,
            validation: snap.validation,
            performance: snap.performance,
            transcript: snap.transcript,
            reference: snap.reference,
            files: snap.context.into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect(),
        })
    }

    /// Where to continue after an interruption: HEAD, and the attempts that were cut short.
    /// An attempt whose checkpoint was written counts as finished even if its outcome
    /// record was not, so nothing that reached the workflow is redone.
    pub fn resume_state(&self) -> Result<ResumeState> {
        let head = self.head()?;
        let labels = self.labels()?;
        let nodes = self.nodes(&labels)?;
        let produced: HashSet<String> = nodes.iter().filter_map(|n| n.meta.as_ref()?.attempt.clone()).collect();
        let head_node = nodes.iter().find(|n| n.id == head.id.oid());
        let transformation = head_node.and_then(|n| n.meta.as_ref()).map(|m| m.transformation.clone()).unwrap_or_default();
        let best_time_ms = head_node.and_then(|n| n.times.headline());
        let log = self.attempts()?;
        let interrupted = log.unfinished().into_iter().filter(|r| !produced.contains(&r.id)).cloned().collect();
        Ok(ResumeState { head, transformation, best_time_ms, interrupted })
    }
}

/// The log as a table for terminals: one line per checkpoint, newest first, with the
/// parent's short id so the DAG can be followed. Each time is printed with the inputs it
/// was measured at, and a speedup taken at other inputs names them (`1.05x root @n=256`);
/// `(+2 sizes)` says the checkpoint was tuned at more sizes than the one shown, which
/// [`render_log_sizes`] lists.
pub fn render_log(entries: &[LogEntry]) -> String {
    render(entries, false)
}

/// [`render_log`] with a line under each checkpoint for every other size it was tuned
/// at: the best time there and the speedups over the root and the parent at that size.
pub fn render_log_sizes(entries: &[LogEntry]) -> String {
    render(entries, true)
}

/// What a log line says after a speedup within the spread of the times it compares.
pub const WITHIN_SPREAD: &str = "within spread";

fn spread_note(within: Option<bool>) -> String {
    if within == Some(true) { format!(" ({WITHIN_SPREAD})") } else { String::new() }
}

/// The checkpoint's best time as a percentage of its yardstick (`62.1% cuBLASLt`), taken
/// at the headline's inputs (named where they are not); `- vendor` where none was timed.
fn yardstick_cell(e: &LogEntry) -> String {
    let Some(y) = &e.baseline else { return format!("{:>6} vendor", "-") };
    let mut cell = y.cell();
    if let Some(at) = y.inputs.as_ref().filter(|at| y.percent.is_some() && Some(*at) != e.best_inputs.as_ref()) {
        let _ = write!(cell, " @{}", format_inputs(at));
    }
    cell
}

fn render(entries: &[LogEntry], all_sizes: bool) -> String {
    let speed = |s: Option<f64>| s.map(|s| format!("{s:.2}x")).unwrap_or_else(|| "-".to_string());
    let inputs = |i: Option<&Value>| i.map(format_inputs).unwrap_or_else(|| "-".to_string());
    // A speedup's cell, naming its inputs where they are not the time's.
    let ratio = |s: Option<f64>, at: Option<&Value>, time_at: Option<&Value>, what: &str| {
        let mut cell = format!("{:>8} {what}", speed(s));
        if let Some(at) = at.filter(|at| s.is_some() && Some(*at) != time_at) {
            let _ = write!(cell, " @{}", format_inputs(at));
        }
        cell
    };
    // Cells: mark and id, transformation, verdict, time, inputs, root, parent, the
    // yardstick (a column only where some checkpoint records one), the rest.
    let yardsticks = entries.iter().any(|e| e.baseline.is_some());
    let mut rows: Vec<[String; 9]> = Vec::new();
    for e in entries {
        let mut names: Vec<String> = Vec::new();
        if e.head {
            names.push("HEAD".to_string());
        }
        names.extend(e.branches.iter().cloned());
        names.extend(e.tags.iter().map(|t| format!("tag: {t}")));
        let time = e.best_time_ms.map(fmt_ms).unwrap_or_else(|| "-".to_string());
        let executor = match (&e.executor, &e.model) {
            (Some(x), Some(m)) => format!("{x} ({m})"),
            (Some(x), None) => x.clone(),
            (None, _) => "-".to_string(),
        };
        let parent = e.parents.first().map_or("-", |p| p.short());
        let mut rest = format!("{executor}  from {parent}");
        if !names.is_empty() {
            let _ = write!(rest, "  ({})", names.join(", "));
        }
        let others: Vec<&SizeEntry> = e.sizes.iter().filter(|s| s.inputs.is_some() && s.inputs != e.best_inputs).collect();
        let mut at = if e.best_time_ms.is_some() { inputs(e.best_inputs.as_ref()) } else { String::new() };
        if !all_sizes && !others.is_empty() {
            let _ = write!(at, " (+{} size{})", others.len(), if others.len() == 1 { "" } else { "s" });
        }
        rows.push([
            format!("{} {}", if e.head { '*' } else { ' ' }, e.id.short()),
            e.transformation.as_deref().unwrap_or("(unreadable)").to_string(),
            e.verdict.as_deref().unwrap_or("-").to_string(),
            time,
            at,
            ratio(e.speedup_over_root, e.speedup_over_root_inputs.as_ref(), e.best_inputs.as_ref(), "root"),
            format!(
                "{}{}",
                ratio(e.speedup_over_parent, e.speedup_over_parent_inputs.as_ref(), e.best_inputs.as_ref(), "parent"),
                spread_note(e.within_spread_of_parent)
            ),
            yardstick_cell(e),
            rest,
        ]);
        if all_sizes {
            for s in others {
                rows.push([
                    String::new(),
                    String::new(),
                    String::new(),
                    fmt_ms(s.best_time_ms),
                    inputs(s.inputs.as_ref()),
                    ratio(s.speedup_over_root, None, None, "root"),
                    ratio(s.speedup_over_parent, None, None, "parent"),
                    String::new(),
                    String::new(),
                ]);
            }
        }
    }
    let width = |i: usize, min: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0).max(min);
    let widths = [width(0, 0), 20, 14, 11, width(4, 0), width(5, 0), width(6, 0), width(7, 0)];
    let mut out = String::new();
    for r in &rows {
        let pad = |i: usize| " ".repeat(widths[i].saturating_sub(r[i].chars().count()));
        let yardstick = if yardsticks { format!("  {}{}", r[7], pad(7)) } else { String::new() };
        let line = format!(
            "{}{} {}{} {}{} {}{} {}{} {}{} {}{}{yardstick}  {}",
            r[0],
            pad(0),
            r[1],
            pad(1),
            r[2],
            pad(2),
            pad(3),
            r[3],
            r[4],
            pad(4),
            r[5],
            pad(5),
            r[6],
            pad(6),
            r[8]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
