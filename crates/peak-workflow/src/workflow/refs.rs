//! Names: resolving revs, where HEAD is, tags, branches and checkouts.

use git2::{Oid, Repository};
use serde::Serialize;

use crate::attempts::MIRROR_BRANCH;
use crate::error::{GitContext, Result, WorkflowError};
use crate::lock::OP_REFRESH_WORKTREE;

use super::{CHECKPOINT_FILE, CheckpointId, ROOT_TAG, Workflow};

/// Where HEAD is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    pub id: CheckpointId,
    /// `None` when HEAD is detached.
    pub branch: Option<String>,
}

/// A name a user may give a tag or a branch.
fn check_name(repo: &Repository, name: &str, kind: &'static str) -> Result<()> {
    let invalid = |reason: &str| Err(WorkflowError::InvalidName { name: name.to_string(), kind, reason: reason.to_string() });
    if name == "HEAD" || name == ROOT_TAG {
        return invalid("it is a reserved rev name");
    }
    if name == MIRROR_BRANCH {
        return invalid("it is the branch that mirrors the attempts log");
    }
    if name.starts_with('-') {
        return invalid("it starts with '-' and would read as a command-line option");
    }
    if name.len() >= 4 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return invalid("it looks like a checkpoint id");
    }
    if !git2::Reference::is_valid_name(&format!("refs/heads/{name}")) {
        return invalid("git does not allow it as a ref name (no spaces, '~', '^', ':', '..', ...)");
    }
    let (other_ref, other_kind) = if kind == "tag" { (format!("refs/heads/{name}"), "branch") } else { (format!("refs/tags/{name}"), "tag") };
    if repo.find_reference(&other_ref).is_ok() {
        return Err(WorkflowError::NameTaken { name: name.to_string(), kind: other_kind });
    }
    Ok(())
}

impl Workflow {
    /// Resolve a rev (tag, branch, full or short id, `HEAD`, `HEAD~N`, `root`) to a
    /// checkpoint.
    pub fn resolve(&self, rev: &str) -> Result<CheckpointId> {
        self.resolve_oid(rev).map(CheckpointId::from_oid)
    }

    pub(crate) fn resolve_oid(&self, rev: &str) -> Result<Oid> {
        let unknown = || WorkflowError::UnknownRev { rev: rev.to_string() };
        // Refuse option-like and empty revs, which revparse would read in surprising ways.
        if rev.is_empty() || rev.starts_with('-') {
            return Err(unknown());
        }
        let object = match self.repo.revparse_single(rev) {
            Ok(object) => object,
            // A clone has the original's other branches as origin/NAME only; NAME alone
            // should still find them, as `git checkout NAME` does.
            Err(_) => match self.remote_branch(rev)? {
                Some(refname) => self.repo.revparse_single(&refname).map_err(|_| unknown())?,
                None => return Err(unknown()),
            },
        };
        let commit = object.peel_to_commit().map_err(|_| unknown())?;
        let tree = commit.tree().git(format!("read tree of {}", commit.id()))?;
        if tree.get_name(CHECKPOINT_FILE).is_none() {
            return Err(WorkflowError::NotACheckpoint { rev: rev.to_string(), id: commit.id().to_string() });
        }
        Ok(commit.id())
    }

    /// The one remote-tracking branch `refs/remotes/*/name`, if exactly one exists.
    fn remote_branch(&self, name: &str) -> Result<Option<String>> {
        if name == MIRROR_BRANCH || !git2::Reference::is_valid_name(&format!("refs/remotes/x/{name}")) {
            return Ok(None);
        }
        let mut found = Vec::new();
        for reference in self.repo.references_glob(&format!("refs/remotes/*/{name}")).git("list remote branches")? {
            let reference = reference.git("read remote branch")?;
            if let Ok(refname) = reference.name() {
                // The glob's * also spans slashes; keep only REMOTE/NAME.
                if refname.strip_prefix("refs/remotes/").and_then(|r| r.split_once('/')).is_some_and(|(_, n)| n == name) {
                    found.push(refname.to_string());
                }
            }
        }
        Ok(if found.len() == 1 { found.pop() } else { None })
    }

    /// Where HEAD is.
    pub fn head(&self) -> Result<Head> {
        let head = self.repo.head().git("resolve HEAD")?;
        let branch = if head.is_branch() { head.shorthand().ok().map(str::to_string) } else { None };
        let id = head.peel_to_commit().git("resolve HEAD")?.id();
        Ok(Head { id: CheckpointId::from_oid(id), branch })
    }

    /// Name a checkpoint (default: HEAD). Tags never move.
    pub fn tag(&mut self, name: &str, rev: Option<&str>) -> Result<CheckpointId> {
        check_name(&self.repo, name, "tag")?;
        let target = self.resolve_oid(rev.unwrap_or("HEAD"))?;
        self.with_lock("tag", |wf| {
            if let Ok(existing) = wf.repo.revparse_single(&format!("refs/tags/{name}")) {
                let id = existing.peel_to_commit().map(|c| c.id().to_string()).unwrap_or_else(|_| existing.id().to_string());
                return Err(WorkflowError::TagExists { name: name.to_string(), id });
            }
            let object = wf.repo.find_object(target, None).git("find checkpoint")?;
            wf.repo.tag_lightweight(name, &object, false).git(format!("create tag {name}"))?;
            Ok(CheckpointId::from_oid(target))
        })
    }

    /// Start a branch at `from` (default: HEAD). Like `git branch`, HEAD stays where it is;
    /// check the branch out to add checkpoints to it.
    pub fn branch(&mut self, name: &str, from: Option<&str>) -> Result<CheckpointId> {
        check_name(&self.repo, name, "branch")?;
        let target = self.resolve_oid(from.unwrap_or("HEAD"))?;
        self.with_lock("branch", |wf| {
            if let Ok(existing) = wf.repo.find_branch(name, git2::BranchType::Local) {
                let id = existing.get().target().map(|o| o.to_string()).unwrap_or_default();
                return Err(WorkflowError::BranchExists { name: name.to_string(), id });
            }
            let commit = wf.repo.find_commit(target).git("find checkpoint")?;
            wf.repo.branch(name, &commit, false).git(format!("create branch {name}"))?;
            Ok(CheckpointId::from_oid(target))
        })
    }

    /// Restore a checkpoint into the working folder and move HEAD to it: onto the branch
    /// when `target` names one, detached otherwise. Refuses when tracked files in the
    /// working folder have uncommitted edits, unless `force`.
    pub fn checkout(&mut self, target: &str, force: bool) -> Result<Head> {
        self.with_lock("checkout", |wf| {
            if !force {
                let dirty = wf.dirty_files()?;
                if !dirty.is_empty() {
                    return Err(WorkflowError::DirtyWorktree { files: dirty });
                }
            }
            let local = format!("refs/heads/{target}");
            let branch = if target != MIRROR_BRANCH && wf.repo.find_reference(&local).is_ok() {
                Some(target.to_string())
            } else if let Some(remote) = wf.remote_branch(target)? {
                // Like `git checkout NAME` for a branch that exists only on the remote:
                // make the local branch, then switch to it.
                let id = wf.resolve_oid(&remote)?;
                let commit = wf.repo.find_commit(id).git("find checkpoint")?;
                wf.repo.branch(target, &commit, false).git(format!("create branch {target}"))?;
                Some(target.to_string())
            } else {
                None
            };
            let id = wf.resolve_oid(branch.as_deref().map_or(target, |_| local.as_str()))?;
            wf.set_operation(OP_REFRESH_WORKTREE, Some(id))?;
            match &branch {
                Some(_) => wf.repo.set_head(&local).git(format!("switch to branch {target}"))?,
                None => wf.repo.set_head_detached(id).git(format!("detach HEAD at {id}"))?,
            }
            wf.refresh_worktree()?;
            Ok(Head { id: CheckpointId::from_oid(id), branch })
        })
    }
}
