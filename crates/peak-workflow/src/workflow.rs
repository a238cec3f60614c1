//! The workflow store: opening, creating and writing checkpoints, names and checkouts.
//!
//! [`Workflow`] is defined here; its methods are spread over one file per job: `init`
//! (creating and opening), `checkpoint` (writing a checkpoint), `refs` (revs, tags,
//! branches, checkout), `worktree` (the working folder and `materialize`), `record` (the
//! attempts log), `locking` (the writer lock and recovery) and `objects` (git plumbing).

mod checkpoint;
mod init;
mod locking;
mod objects;
mod record;
mod refs;
mod worktree;

pub(crate) use checkpoint::best_time;
pub use checkpoint::{CheckpointInput, CheckpointMeta, fmt_ms};
pub use init::RootInput;
pub(crate) use objects::{read_tree_dir, read_tree_file};
pub use refs::Head;

use std::fmt;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::lock::{LockMode, WorkflowLock};

/// Folder of the working tree that holds the checkpoint's kernel context.
pub const CONTEXT_DIR: &str = "context";
pub(crate) const CHECKPOINT_FILE: &str = "checkpoint.json";
pub(crate) const VALIDATION_FILE: &str = "validation.json";
pub(crate) const PERFORMANCE_FILE: &str = "performance.json";
pub(crate) const TRANSCRIPT_FILE: &str = "transcript.json";
pub(crate) const REFERENCE_FILE: &str = "reference.json";
/// The tag init puts on the root checkpoint, so `root` is an ordinary rev everywhere,
/// plain git included.
pub const ROOT_TAG: &str = "root";
/// The branch a new workflow starts on.
pub const DEFAULT_BRANCH: &str = "main";
/// The transformation name of the root checkpoint.
pub const INIT_TRANSFORMATION: &str = "init";
const META_FORMAT: u32 = 1;

/// A checkpoint's id: the full hex id of its git commit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CheckpointId(String);

impl CheckpointId {
    pub(crate) fn from_oid(oid: Oid) -> Self {
        CheckpointId(oid.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 7-digit abbreviation git shows.
    pub fn short(&self) -> &str {
        &self.0[..self.0.len().min(7)]
    }

    pub(crate) fn oid(&self) -> Oid {
        Oid::from_str(&self.0).expect("a CheckpointId always holds a valid id")
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A workflow folder, opened.
pub struct Workflow {
    pub(crate) repo: Repository,
    pub(crate) workdir: PathBuf,
    pub(crate) peak_dir: PathBuf,
    lock_mode: LockMode,
    /// The lock while an operation or a session (see [`Workflow::hold_lock`]) holds it.
    held: Option<WorkflowLock>,
}

impl fmt::Debug for Workflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workflow").field("dir", &self.workdir).field("lock_mode", &self.lock_mode).finish()
    }
}

impl Workflow {
    /// The workflow folder (the git working tree).
    pub fn dir(&self) -> &Path {
        &self.workdir
    }

    /// The working folder's copy of the current checkpoint's context.
    pub fn context_dir(&self) -> PathBuf {
        self.workdir.join(CONTEXT_DIR)
    }
}
