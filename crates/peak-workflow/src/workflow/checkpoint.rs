//! Writing a checkpoint: `checkpoint.json`, the commit message, and the commit on the branch.

use std::path::{Path, PathBuf};

use git2::{Oid, Tree};
use peak_record::{PerformanceRecord, Record, ValidationRecord};
use serde_json::Value;

use crate::context::{self, Files};
use crate::error::{GitContext, Result, WorkflowError};
use crate::lock::OP_REFRESH_WORKTREE;
use crate::secrets;
use crate::speedup::{BestTimes, positive};
use crate::time::now_rfc3339;

use super::objects::{json_bytes, read_tree_file, write_tree};
use super::{
    CHECKPOINT_FILE, CheckpointId, INIT_TRANSFORMATION, META_FORMAT, PERFORMANCE_FILE, REFERENCE_FILE, ROOT_TAG, TRANSCRIPT_FILE, VALIDATION_FILE, Workflow,
};

pub use peak_record::CheckpointMeta;

/// A new checkpoint.
#[derive(Debug, Clone, Default)]
pub struct CheckpointInput {
    /// The checkpoint the transformation started from. It must still be the tip of the
    /// current branch: a check that nobody added a checkpoint while the transformation ran.
    /// `None` means "the current tip".
    pub parent: Option<String>,
    /// The new kernel context. It may be the workflow's own `context/` folder (edited in
    /// place) or any other folder.
    pub context_dir: PathBuf,
    pub transformation: String,
    pub executor: String,
    pub model: Option<String>,
    /// Stored as `validation.json`; its `verdict` string is copied into `checkpoint.json`.
    pub validation: Value,
    /// Stored as `performance.json`; `best.time_ms` drives speedups.
    pub performance: Value,
    /// Stored as `transcript.json`; refused if it contains something key-shaped.
    pub transcript: Value,
    /// The attempt that produced this checkpoint (see [`Workflow::start_attempt`]).
    pub attempt: Option<String>,
    /// Overwrite uncommitted edits in the working folder (only relevant when
    /// `context_dir` is not the working folder's own `context/`).
    pub force: bool,
}

pub(super) fn check_context(dir: &Path) -> Result<Files> {
    let files = context::read_dir(dir)?;
    context::check_files(&files).map_err(|(file, message)| WorkflowError::InvalidContext { path: dir.join(file), message })?;
    Ok(files)
}

/// Replace every configured key's value in these records (a server's error text that
/// echoed the key, say) before they are written: a committed key travels with every clone.
pub(super) fn redact_key_values(records: &mut [&mut Value]) {
    for record in records.iter_mut() {
        secrets::redact_json_values(record);
    }
}

pub(super) fn check_transcript(transcript: &Value) -> Result<()> {
    match secrets::find_in_json(transcript) {
        Some((pointer, kind)) => Err(WorkflowError::SecretInTranscript { pointer, kind }),
        None => Ok(()),
    }
}

/// `performance.json`'s `best.time_ms`, if present and a number.
pub(crate) fn best_time(performance: &Value) -> Option<f64> {
    PerformanceRecord::from_json(performance).ok()?.best_ms().and_then(positive)
}

/// `validation.json`'s `verdict`, copied into `checkpoint.json`.
pub(crate) fn verdict_of(validation: &Value) -> Option<String> {
    ValidationRecord::from_json(validation).ok()?.verdict
}

/// Milliseconds with three significant digits or so: `0.0123 ms`, `1.23 ms`, `123 ms`.
pub fn fmt_ms(ms: f64) -> String {
    let decimals = if ms >= 100.0 {
        0
    } else if ms >= 10.0 {
        1
    } else if ms >= 1.0 {
        2
    } else {
        // Enough decimals for three significant digits of small times.
        (2 - ms.log10().floor() as i32).clamp(2, 9) as usize
    };
    format!("{ms:.decimals$} ms")
}

/// The human-readable commit message (`TB-Tiling: 1.23 ms (3.40x over root)`).
/// The checkpoint's commit message; `over_root` and `over_parent` are its speedups.
pub(super) fn commit_message(meta: &CheckpointMeta, kernel: Option<&str>, best: Option<f64>, over_root: Option<f64>, over_parent: Option<f64>) -> String {
    let summary = match (meta.parent.is_some(), best, over_root) {
        (false, Some(t), _) => format!("{INIT_TRANSFORMATION}: kernel {} ({})", kernel.unwrap_or("?"), fmt_ms(t)),
        (false, None, _) => format!("{INIT_TRANSFORMATION}: kernel {}", kernel.unwrap_or("?")),
        (true, Some(t), Some(s)) => format!("{}: {} ({s:.2}x over root)", meta.transformation, fmt_ms(t)),
        (true, Some(t), None) => format!("{}: {}", meta.transformation, fmt_ms(t)),
        (true, None, _) => format!("{}: {}", meta.transformation, meta.verdict.as_deref().unwrap_or("no timing")),
    };
    let mut body = format!("\n\nverdict: {}\nexecutor: {}", meta.verdict.as_deref().unwrap_or("none"), meta.executor);
    if let Some(model) = &meta.model {
        body.push_str(&format!(" ({model})"));
    }
    if let Some(s) = over_parent {
        body.push_str(&format!("\nspeedup over parent: {s:.2}x"));
    }
    body.push('\n');
    summary + body.as_str()
}

impl Workflow {
    /// Add a checkpoint on the current branch and make it the working folder's content.
    ///
    /// Crash safety: every object is written first, then the branch moves in one atomic
    /// ref update (compare-and-swap against the expected tip), then the working folder is
    /// rewritten. A crash before the ref update leaves only unreachable objects; a crash
    /// after it leaves the working folder behind HEAD, which the next writer or
    /// `fsck(repair)` restores (the lock record says the refresh was under way).
    pub fn checkpoint(&mut self, mut input: CheckpointInput) -> Result<CheckpointId> {
        redact_key_values(&mut [&mut input.validation, &mut input.performance, &mut input.transcript]);
        check_transcript(&input.transcript)?;
        let files = check_context(&input.context_dir)?;
        let in_place = match (input.context_dir.canonicalize(), self.context_dir().canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        self.with_lock("checkpoint", |wf| wf.checkpoint_locked(input, files, in_place))
    }

    fn checkpoint_locked(&mut self, input: CheckpointInput, files: Files, in_place: bool) -> Result<CheckpointId> {
        let (new, tip, branch_ref, summary) = self.commit_checkpoint(input, files, in_place)?;
        self.set_operation(OP_REFRESH_WORKTREE, Some(new))?;
        self.repo.reference_matching(&branch_ref, new, true, tip, &format!("peak checkpoint: {summary}")).git(format!("move {branch_ref}"))?;
        self.refresh_worktree()?;
        self.set_operation("sync-attempts", None)?;
        self.sync_attempts_locked()?;
        Ok(CheckpointId::from_oid(new))
    }

    /// Write the checkpoint's objects. Returns the new commit, the tip it goes on, the
    /// branch's ref name and the message's summary line.
    fn commit_checkpoint(&self, input: CheckpointInput, files: Files, in_place: bool) -> Result<(Oid, Oid, String, String)> {
        let head = self.repo.head().git("resolve HEAD")?;
        let tip = head.peel_to_commit().git("resolve HEAD")?;
        if !head.is_branch() {
            return Err(WorkflowError::DetachedHead { id: tip.id().to_string() });
        }
        let branch_ref = head.name().git("read HEAD's branch name")?.to_string();
        let branch = head.shorthand().unwrap_or(&branch_ref).to_string();
        drop(head);
        let tip_tree = tip.tree().git("read the tip's tree")?;
        if tip_tree.get_name(CHECKPOINT_FILE).is_none() {
            return Err(WorkflowError::NotACheckpoint { rev: branch, id: tip.id().to_string() });
        }
        if let Some(parent) = &input.parent {
            let parent = self.resolve_oid(parent)?;
            if parent != tip.id() {
                return Err(WorkflowError::StaleParent { branch, parent: parent.to_string(), tip: tip.id().to_string() });
            }
        }
        if !in_place && !input.force {
            let dirty = self.dirty_files()?;
            if !dirty.is_empty() {
                return Err(WorkflowError::DirtyWorktree { files: dirty });
            }
        }

        let meta = CheckpointMeta {
            format: META_FORMAT,
            transformation: input.transformation,
            parent: Some(tip.id().to_string()),
            verdict: verdict_of(&input.validation),
            executor: input.executor,
            model: input.model,
            created: now_rfc3339(),
            attempt: input.attempt,
            extra: Default::default(),
        };
        let times = BestTimes::of(&input.performance);
        let over_parent = times.speedup_over(&self.best_times_of(&tip_tree));
        let over_root = self.resolve_oid(ROOT_TAG).ok().and_then(|root| {
            let tree = self.repo.find_commit(root).ok()?.tree().ok()?;
            times.speedup_over(&self.best_times_of(&tree))
        });
        let message = commit_message(&meta, None, times.headline(), over_root, over_parent);

        let mut blobs = self.context_blobs(&files)?;
        for (name, value) in [
            (CHECKPOINT_FILE, serde_json::to_value(&meta).expect("CheckpointMeta serializes")),
            (VALIDATION_FILE, input.validation),
            (PERFORMANCE_FILE, input.performance),
            (TRANSCRIPT_FILE, input.transcript),
        ] {
            blobs.insert(name.to_string(), self.repo.blob(&json_bytes(&value)).git(format!("write {name}"))?);
        }
        // The reference identity is fixed at init; every checkpoint carries the same blob so
        // each commit is self-contained.
        let reference = tip_tree.get_name(REFERENCE_FILE).map(|e| e.id()).ok_or_else(|| WorkflowError::CorruptCheckpoint {
            id: tip.id().to_string(),
            file: REFERENCE_FILE.to_string(),
            message: "missing; every checkpoint carries the root's reference identity".to_string(),
        })?;
        blobs.insert(REFERENCE_FILE.to_string(), reference);
        let tree = write_tree(&self.repo, &blobs)?;
        let new = self.commit(&[&tip], tree, &message)?;
        let summary = message.lines().next().unwrap_or_default().to_string();
        Ok((new, tip.id(), branch_ref, summary))
    }

    /// The tuned times a checkpoint's `performance.json` records (none if it is unreadable).
    pub(crate) fn best_times_of(&self, tree: &Tree<'_>) -> BestTimes {
        let performance = read_tree_file(&self.repo, tree, PERFORMANCE_FILE).ok().flatten().and_then(|bytes| serde_json::from_slice(&bytes).ok());
        performance.as_ref().map(BestTimes::of).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_about_three_significant_digits() {
        assert_eq!(fmt_ms(1.234), "1.23 ms");
        assert_eq!(fmt_ms(12.34), "12.3 ms");
        assert_eq!(fmt_ms(123.4), "123 ms");
        assert_eq!(fmt_ms(0.01234), "0.0123 ms");
        assert_eq!(fmt_ms(0.5), "0.500 ms");
    }

    #[test]
    fn best_time_ignores_missing_and_nonsense_values() {
        assert_eq!(best_time(&serde_json::json!({"best": {"time_ms": 1.5}})), Some(1.5));
        assert_eq!(best_time(&serde_json::json!({"best": {"time_ms": "fast"}})), None);
        assert_eq!(best_time(&serde_json::json!({"best": {"time_ms": 0.0}})), None);
        assert_eq!(best_time(&serde_json::json!({})), None);
    }
}
