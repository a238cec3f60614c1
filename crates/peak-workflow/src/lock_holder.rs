//! [`LockHolder`]: the record a writer keeps in the lock file while it holds the lock
//! (`lock.rs`), which a second writer's error names (`WorkflowError::Locked`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The record a lock holder writes into the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    pub pid: u32,
    pub host: String,
    /// The holder's command line, with anything key-shaped redacted.
    pub command: String,
    /// When the lock was taken (RFC 3339, UTC).
    pub started: String,
    /// The command holding the lock for its whole run (`apply`, `submit`, `retune`, ...),
    /// if one does; `None` for a single operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The operation in progress (`checkpoint`, `checkout`, ..., or `idle` between the
    /// operations of a session that keeps the lock).
    pub operation: String,
    /// With operation `refresh-worktree`: the commit HEAD is being moved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.session {
            Some(session) => write!(
                f,
                "pid {} on {} (`{}`), running {session} (now: {}), holding the lock since {}",
                self.pid, self.host, self.command, self.operation, self.started
            ),
            None => write!(f, "pid {} on {} (`{}`), doing {}, holding the lock since {}", self.pid, self.host, self.command, self.operation, self.started),
        }
    }
}
