//! The one error type of this crate.
//!
//! Every variant names what it is about (a folder, a file inside a checkpoint, a rev, a
//! lock holder) so the CLI can print it as is and add a `hint:` where one helps.

use std::path::PathBuf;

use crate::lock_holder::LockHolder;

#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    #[error("{}: not a peak workflow ({reason})", path.display())]
    NotAWorkflow { path: PathBuf, reason: String },

    #[error("{}: already exists and is not empty; a workflow is created in a new or empty folder", path.display())]
    DirNotEmpty { path: PathBuf },

    #[error("{}: {message}", path.display())]
    InvalidContext { path: PathBuf, message: String },

    #[error("unknown checkpoint '{rev}' (expected a tag, a branch, a checkpoint id, HEAD, HEAD~N or root)")]
    UnknownRev { rev: String },

    #[error("'{rev}' resolves to {id}, which is not a checkpoint (it has no checkpoint.json)")]
    NotACheckpoint { rev: String, id: String },

    #[error("tag '{name}' already exists (at {id})")]
    TagExists { name: String, id: String },

    #[error("branch '{name}' already exists (at {id})")]
    BranchExists { name: String, id: String },

    #[error("'{name}' is already a {kind}; tag and branch names must not overlap, so every name means one checkpoint")]
    NameTaken { name: String, kind: &'static str },

    #[error("'{name}' cannot be used as a {kind} name: {reason}")]
    InvalidName { name: String, kind: &'static str, reason: String },

    #[error("HEAD is detached at {id}; checkpoints are only added to a branch (create one with `branch NAME` from this checkpoint and check it out)")]
    DetachedHead { id: String },

    #[error("branch '{branch}' is at {tip}, but this checkpoint was made from {parent}; another writer added a checkpoint in between")]
    StaleParent { branch: String, parent: String, tip: String },

    #[error("the working folder has uncommitted changes to {}; commit them as a checkpoint or force the operation", files.join(", "))]
    DirtyWorktree { files: Vec<String> },

    #[error("the transcript contains what looks like a {kind} at {pointer}; API keys must never be stored in a workflow")]
    SecretInTranscript { pointer: String, kind: &'static str },

    #[error("{}: the workflow is locked by {}", path.display(), holder_text(holder))]
    Locked { path: PathBuf, holder: Option<Box<LockHolder>> },

    #[error("{}: gave up after waiting {waited_ms} ms for the lock held by {}", path.display(), holder_text(holder))]
    LockTimeout { path: PathBuf, waited_ms: u128, holder: Option<Box<LockHolder>> },

    #[error("checkpoint {id}: {file}: {message}")]
    CorruptCheckpoint { id: String, file: String, message: String },

    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    #[error("git: {op}: {source}")]
    Git { op: String, source: git2::Error },

    /// The `git` program, for what libgit2 cannot do (bundles).
    #[error("`{command}` failed: {message}")]
    GitCommand { command: String, message: String },

    #[error("{what}: {source}")]
    Json { what: String, source: serde_json::Error },
}

fn holder_text(holder: &Option<Box<LockHolder>>) -> String {
    match holder {
        Some(h) => h.to_string(),
        // The holder writes its record right after taking the lock; an empty or partial
        // record means we looked in between.
        None => "another process (its holder record is not readable yet)".to_string(),
    }
}

pub type Result<T, E = WorkflowError> = std::result::Result<T, E>;

/// Attach an operation name to git2 errors: `repo.find_commit(id).git("find commit")?`.
pub(crate) trait GitContext<T> {
    fn git(self, op: impl Into<String>) -> Result<T>;
}

impl<T> GitContext<T> for std::result::Result<T, git2::Error> {
    fn git(self, op: impl Into<String>) -> Result<T> {
        self.map_err(|source| WorkflowError::Git { op: op.into(), source })
    }
}

/// Attach a path to io errors.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| WorkflowError::Io { path: path.into(), source })
    }
}
