//! Verifying a workflow, and repairing what can be repaired without losing anything.

use std::fmt;

use git2::Oid;
use serde::Serialize;

use crate::attempts;
use crate::context;
use crate::error::Result;
use crate::lock::{self, LockState};
use crate::secrets;
use crate::workflow::{CheckpointId, ROOT_TAG, Workflow};

/// What kind of problem a [`Finding`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// HEAD or another checkpoint ref does not lead to a commit.
    BrokenRef,
    /// The `root` tag is missing.
    MissingRoot,
    /// A checkpoint misses a file, or a file does not parse.
    BrokenCheckpoint,
    /// A checkpoint's parents are wrong: a merge, a second root, or `checkpoint.json`'s
    /// parent disagreeing with the commit's.
    BrokenHistory,
    /// Git cannot read an object the history needs.
    MissingObject,
    /// A transcript holds something key-shaped (written by something other than peak).
    SecretInTranscript,
    /// A writer was killed mid-operation: it left its record in peak's lock file, or a
    /// git lock file (`index.lock`, `refs/heads/NAME.lock`) that would block later writes.
    StaleLock,
    /// A live process holds the lock; other findings may be transient.
    LockHeld,
    /// Lines of the attempts log (local or a mirror) that cannot be read.
    AttemptsDamaged,
    /// Tracked files in the working folder differ from HEAD.
    WorktreeDiffers,
    /// An apply's files (`.git/peak/apply`) that no running command owns and no prompt
    /// waits on: an apply that was interrupted, one whose checkpoint was made but whose
    /// outcome was not recorded, or one that can no longer go on. Found by `peak_apply`,
    /// which owns that folder; the message names the command that clears it.
    InterruptedApply,
}

impl FindingKind {
    /// Whether the finding means recorded data is lost or wrong, as opposed to a state
    /// that is expected after a crash or while another writer works.
    pub fn is_corruption(self) -> bool {
        matches!(
            self,
            FindingKind::BrokenRef
                | FindingKind::MissingRoot
                | FindingKind::BrokenCheckpoint
                | FindingKind::BrokenHistory
                | FindingKind::MissingObject
                | FindingKind::SecretInTranscript
        )
    }
}

/// What a finding that `fsck --repair` would fix says it with: the one command to run.
const REPAIR_HINT: &str = "\nhint: `peak fsck --repair` clears it";

/// One problem found by [`Workflow::fsck`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// What it is about: a checkpoint's short id, a ref, a file.
    pub subject: String,
    pub message: String,
    /// The repair run fixed it.
    pub repaired: bool,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = serde_json::to_value(self.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        write!(f, "{kind}: {}: {}", self.subject, self.message)?;
        if self.repaired {
            f.write_str(" (repaired)")?;
        }
        Ok(())
    }
}

impl Workflow {
    /// Verify the workflow; an empty list means it is clean.
    ///
    /// Checks that HEAD and every branch and tag lead to a commit; that every reachable
    /// checkpoint holds a parsable `checkpoint.json`, the four other JSON files and a
    /// context whose manifest names a source with all three regions; that parents chain
    /// to the one root; that no transcript holds a key; the lock; the attempts log and its
    /// mirrors; and that the working folder matches HEAD.
    ///
    /// With `repair`, fixes what can be fixed without losing anything: a dead holder's lock
    /// record and git lock files are cleared (finishing the working-folder refresh if the
    /// holder died in one), damaged
    /// lines are dropped from the local attempts log and the mirror branch is rewritten
    /// from what is readable. Edits in the working folder are never touched; they are
    /// reported with [`FindingKind::WorktreeDiffers`].
    pub fn fsck(&mut self, repair: bool) -> Result<Vec<Finding>> {
        let mut findings = Vec::new();
        let lock_held = self.fsck_lock(repair, &mut findings)?;
        self.fsck_history(&mut findings)?;
        self.fsck_attempts(repair && !lock_held, &mut findings)?;
        let dirty = self.dirty_files()?;
        if !dirty.is_empty() {
            findings.push(Finding {
                kind: FindingKind::WorktreeDiffers,
                subject: dirty.join(", "),
                message: "differs from HEAD (uncommitted edits; `checkout HEAD` with force restores them)".to_string(),
                repaired: false,
            });
        }
        Ok(findings)
    }

    /// Returns whether a live process holds the lock (then nothing is repaired).
    fn fsck_lock(&mut self, repair: bool, findings: &mut Vec<Finding>) -> Result<bool> {
        let path = self.lock_path();
        // Holding the lock ourselves (a session), we recovered whatever was stale when we
        // took it; inspecting would only see our own hold.
        let state = if self.holds_lock() { LockState::Free } else { lock::inspect(&path, false)? };
        let stale = match state {
            LockState::Held(holder) => {
                let who = holder.map_or_else(|| "a process whose record is not readable yet".to_string(), |h| h.to_string());
                let message = format!("held by {who}");
                findings.push(Finding { kind: FindingKind::LockHeld, subject: path.display().to_string(), message, repaired: false });
                return Ok(true);
            }
            LockState::Stale(holder) => Some(holder),
            LockState::Free => None,
        };
        let git_locks = self.git_lock_files()?;
        // Decided before repairing: the repair's own recovery makes it moot.
        let refresh = stale.as_ref().is_some_and(|h| self.cut_short_refresh(h));
        let fix = repair && (stale.is_some() || !git_locks.is_empty());
        if fix {
            // Taking the lock runs the recovery every writer runs after a crash (which
            // also removes git's lock files); a clean release then empties the record.
            self.with_lock("fsck-repair", |wf| wf.remove_git_locks())?;
        }
        if let Some(holder) = stale {
            let who = holder.as_ref().map_or_else(|| "a process whose record was cut short".to_string(), |h| h.to_string());
            let mut message = format!("left by {who}, which is gone");
            if fix && refresh {
                message.push_str("; restored the working folder from HEAD, which it was rewriting");
            }
            if !fix {
                message.push_str(REPAIR_HINT);
                message.push_str(" (as does the next command that writes here)");
            }
            findings.push(Finding { kind: FindingKind::StaleLock, subject: path.display().to_string(), message, repaired: fix });
        }
        for lock_file in git_locks {
            findings.push(Finding {
                kind: FindingKind::StaleLock,
                subject: lock_file.display().to_string(),
                message: format!("git lock file left by a writer that died (or by a git command running right now){}", if fix { "" } else { REPAIR_HINT }),
                repaired: fix,
            });
        }
        Ok(false)
    }

    fn fsck_history(&self, findings: &mut Vec<Finding>) -> Result<()> {
        let labels = self.labels()?;
        for (name, reason) in &labels.broken {
            findings.push(Finding { kind: FindingKind::BrokenRef, subject: name.clone(), message: reason.clone(), repaired: false });
        }
        let root = match self.repo.revparse_single(&format!("refs/tags/{ROOT_TAG}")).and_then(|o| o.peel_to_commit()) {
            Ok(c) => Some(c.id()),
            Err(e) => {
                findings.push(Finding {
                    kind: FindingKind::MissingRoot,
                    subject: format!("tag {ROOT_TAG}"),
                    message: format!("does not lead to a commit ({})", e.message()),
                    repaired: false,
                });
                None
            }
        };
        let commits = match self.walk(&labels.starts()) {
            Ok(commits) => commits,
            Err(e) => {
                findings.push(Finding { kind: FindingKind::MissingObject, subject: "history".to_string(), message: e.to_string(), repaired: false });
                return Ok(());
            }
        };
        for id in commits {
            self.fsck_commit(id, root, findings);
        }
        Ok(())
    }

    fn fsck_commit(&self, id: Oid, root: Option<Oid>, findings: &mut Vec<Finding>) {
        let subject = CheckpointId::from_oid(id).short().to_string();
        let mut push = |kind, message: String| findings.push(Finding { kind, subject: subject.clone(), message, repaired: false });
        let snap = match self.load(id) {
            Ok(snap) => snap,
            Err(e) => {
                let kind = if matches!(e, crate::WorkflowError::Git { .. }) { FindingKind::MissingObject } else { FindingKind::BrokenCheckpoint };
                push(kind, e.to_string());
                return;
            }
        };
        if let Err((file, message)) = context::check_files(&snap.context) {
            push(FindingKind::BrokenCheckpoint, format!("context/{file}: {message}"));
        }
        if let Some((pointer, kind)) = secrets::find_in_json(&snap.transcript) {
            push(FindingKind::SecretInTranscript, format!("transcript.json {pointer} holds what looks like a {kind}"));
        }
        match snap.parents.as_slice() {
            [] if root.is_some_and(|r| r != id) => {
                push(FindingKind::BrokenHistory, format!("a second root (the workflow's root is {})", root.map(|r| r.to_string()).unwrap_or_default()))
            }
            [] => {}
            [parent] => {
                if snap.meta.parent.as_deref() != Some(parent.to_string().as_str()) {
                    push(FindingKind::BrokenHistory, format!("checkpoint.json names parent {:?} but the commit's parent is {parent}", snap.meta.parent));
                }
            }
            many => push(FindingKind::BrokenHistory, format!("a merge of {} commits; checkpoints have one parent", many.len())),
        }
    }

    fn fsck_attempts(&mut self, repair: bool, findings: &mut Vec<Finding>) -> Result<()> {
        let local = self.attempts_path();
        let (_, local_damage) = attempts::read_local(&local)?;
        let mirror_damage: Vec<_> = self.mirror_logs()?.into_values().flat_map(|(_, bad)| bad).collect();
        let local_mirror = format!("refs/heads/{}", attempts::MIRROR_BRANCH);
        // A damaged line in the local log or the local mirror is rewritten away; remote
        // mirrors belong to their owners and are only reported.
        let repairable = |source: &str| source == "local" || source == local_mirror;
        let do_repair = repair && local_damage.iter().chain(&mirror_damage).any(|d| repairable(&d.source));
        if do_repair {
            self.with_lock("fsck-repair", |wf| {
                attempts::drop_damaged(&local)?;
                wf.sync_attempts_locked()
            })?;
        }
        for d in local_damage.iter().chain(&mirror_damage) {
            let what = if d.torn { "torn last line (a write cut short by a crash)" } else { "unreadable line" };
            findings.push(Finding {
                kind: FindingKind::AttemptsDamaged,
                subject: if d.source == "local" { local.display().to_string() } else { d.source.clone() },
                message: format!("line {}: {what}: {}{}", d.line, d.reason, if repairable(&d.source) && !do_repair { REPAIR_HINT } else { "" }),
                repaired: do_repair && repairable(&d.source),
            });
        }
        Ok(())
    }
}
