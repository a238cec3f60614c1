//! The writer lock as the workflow holds it, and the recovery after a dead holder.

use std::path::{Path, PathBuf};

use git2::Oid;

use crate::error::{IoContext, Result};
use crate::lock::{self, LockMode, OP_IDLE, OP_REFRESH_WORKTREE, WorkflowLock};
use crate::lock_holder::LockHolder;

use super::Workflow;

impl Workflow {
    /// How writers wait for the lock (default: wait up to 10 s).
    pub fn set_lock_mode(&mut self, mode: LockMode) {
        self.lock_mode = mode;
    }

    /// Take the writer lock for the whole run of a command (`session`: `apply`, `submit`,
    /// `retune`, ...), not just for each write, so no other writer gets in between its
    /// reads and its checkpoint. Another writer is refused at once, naming `session`.
    /// Released by [`Workflow::release_lock`] or on drop.
    pub fn hold_lock(&mut self, session: &str) -> Result<()> {
        if self.held.is_none() {
            self.acquire(OP_IDLE, Some(session))?;
        }
        Ok(())
    }

    /// Take the lock, then finish whatever a dead previous holder cut short.
    fn acquire(&mut self, operation: &str, session: Option<&str>) -> Result<()> {
        let (lock, stale) = WorkflowLock::acquire(&self.lock_path(), self.lock_mode, operation, session)?;
        self.held = Some(lock);
        if let Some(stale) = stale
            && let Err(e) = self.recover(&stale)
        {
            self.held = None;
            return Err(e);
        }
        Ok(())
    }

    /// Release a lock taken by [`Workflow::hold_lock`].
    pub fn release_lock(&mut self) {
        self.held = None;
    }

    pub(crate) fn holds_lock(&self) -> bool {
        self.held.is_some()
    }

    pub(crate) fn lock_path(&self) -> PathBuf {
        lock::lock_path(&self.peak_dir)
    }

    /// Run `f` holding the lock, with `operation` recorded as what the holder is doing.
    pub(crate) fn with_lock<T>(&mut self, operation: &str, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let temporary = self.held.is_none();
        if temporary {
            self.acquire(operation, None)?;
        } else {
            self.set_operation(operation, None)?;
        }
        let result = f(self);
        if temporary {
            self.held = None;
            result
        } else {
            let idle = self.set_operation(OP_IDLE, None);
            result.and_then(|value| idle.map(|()| value))
        }
    }

    pub(crate) fn set_operation(&mut self, operation: &str, target: Option<Oid>) -> Result<()> {
        let path = self.lock_path();
        match self.held.as_mut() {
            Some(lock) => lock.set_operation(&path, operation, target.map(|t| t.to_string())),
            None => Ok(()),
        }
    }

    /// Finish what a dead lock holder cut short. Returns whether the working folder was
    /// restored.
    ///
    /// Git's own lock files (`index.lock`, `refs/heads/main.lock`, ...) the dead writer
    /// left would make every later git write fail, so they go; while our lock is held no
    /// other peak process can own them. The only unfinished work that needs redoing is a
    /// working-folder refresh: everything else a writer does is atomic.
    pub(crate) fn recover(&mut self, stale: &Option<LockHolder>) -> Result<bool> {
        self.remove_git_locks()?;
        if self.cut_short_refresh(stale) {
            self.refresh_worktree()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether a dead holder had moved HEAD and not finished rewriting the working folder.
    pub(crate) fn cut_short_refresh(&self, stale: &Option<LockHolder>) -> bool {
        let Some(holder) = stale else { return false };
        let head = self.repo.head().and_then(|h| h.peel_to_commit()).map(|c| c.id().to_string());
        holder.operation == OP_REFRESH_WORKTREE && head.ok().is_some_and(|h| holder.target.as_deref() == Some(h.as_str()))
    }

    /// Lock files git writers create next to what they update, found in `.git`.
    pub(crate) fn git_lock_files(&self) -> Result<Vec<PathBuf>> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e).at(dir),
            };
            for entry in entries {
                let path = entry.at(dir)?.path();
                if path.is_dir() {
                    walk(&path, out)?;
                } else if path.extension().is_some_and(|e| e == "lock") {
                    out.push(path);
                }
            }
            Ok(())
        }
        let git = self.repo.path();
        let mut out: Vec<PathBuf> = ["index.lock", "HEAD.lock", "packed-refs.lock", "config.lock"].iter().map(|n| git.join(n)).filter(|p| p.exists()).collect();
        walk(&git.join("refs"), &mut out)?;
        walk(&git.join("logs"), &mut out)?;
        Ok(out)
    }

    pub(crate) fn remove_git_locks(&self) -> Result<()> {
        for path in self.git_lock_files()? {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(&path),
            }
        }
        Ok(())
    }
}
