//! The working folder: kept a checkout of HEAD, checked for edits, and checkpoints
//! materialised into other folders.

use std::path::Path;

use crate::context;
use crate::error::{GitContext, IoContext, Result, WorkflowError};

use super::init::is_fresh_dir;
use super::objects::{read_tree_dir, tree_files};
use super::{CONTEXT_DIR, Workflow};

impl Workflow {
    /// Make the working folder and the index match HEAD, like `git checkout --force`:
    /// every file of HEAD is written (unless already identical), files the index tracked
    /// that HEAD lacks are deleted, untracked files are left alone, and the index is
    /// rebuilt from the files just written. Done by hand because libgit2's checkout
    /// compares against HEAD, which has already moved to the target at this point, and
    /// would then skip files the working folder already holds without re-indexing them.
    pub(crate) fn refresh_worktree(&self) -> Result<()> {
        let tree = self.repo.head().and_then(|h| h.peel_to_tree()).git("resolve HEAD")?;
        let files = tree_files(&self.repo, &tree).git("read HEAD's files")?;
        let mut index = self.repo.index().git("open the index")?;
        let tracked: Vec<String> = index.iter().map(|e| String::from_utf8_lossy(&e.path).into_owned()).collect();
        for (rel, bytes) in &files {
            let path = self.workdir.join(rel);
            if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).at(dir)?;
                }
                std::fs::write(&path, bytes).at(&path)?;
            }
        }
        for rel in tracked.iter().filter(|rel| !files.contains_key(*rel)) {
            let path = self.workdir.join(rel);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(&path),
            }
            // Drop folders the removal emptied; remove_dir refuses non-empty ones.
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| *d != self.workdir && d.starts_with(&self.workdir)) {
                if std::fs::remove_dir(d).is_err() {
                    break;
                }
                dir = d.parent();
            }
        }
        index.clear().git("clear the index")?;
        for rel in files.keys() {
            index.add_path(Path::new(rel)).git(format!("index {rel}"))?;
        }
        index.write().git("write the index")
    }

    /// Tracked files whose working-folder copy differs from HEAD.
    pub(crate) fn dirty_files(&self) -> Result<Vec<String>> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(false).include_ignored(false).exclude_submodules(true);
        let statuses = self.repo.statuses(Some(&mut opts)).git("read working-folder status")?;
        Ok(statuses.iter().filter(|s| s.status() != git2::Status::CURRENT).map(|s| s.path().unwrap_or("<non-UTF-8 path>").to_string()).collect())
    }

    /// Write a checkpoint's context into `into` (a missing or empty folder), for instance
    /// to measure two checkpoints side by side.
    pub fn materialize(&self, rev: &str, into: impl AsRef<Path>) -> Result<()> {
        let into = into.as_ref();
        if !is_fresh_dir(into)? {
            return Err(WorkflowError::DirNotEmpty { path: into.to_path_buf() });
        }
        let oid = self.resolve_oid(rev)?;
        let commit = self.repo.find_commit(oid).git("find checkpoint")?;
        let tree = commit.tree().git("read checkpoint tree")?;
        let files = read_tree_dir(&self.repo, &tree, CONTEXT_DIR).git(format!("read {CONTEXT_DIR}/ of {oid}"))?;
        std::fs::create_dir_all(into).at(into)?;
        context::write_dir(into, &files)
    }
}
