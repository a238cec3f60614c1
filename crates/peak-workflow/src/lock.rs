//! The writer lock: one process writes to a workflow at a time.
//!
//! The lock is an advisory exclusive `flock` on `.git/peak/lock` (std's `File::try_lock`,
//! the same primitive fs4 wraps). The kernel drops it when the holder exits, however it
//! exits, so a crashed writer can never wedge the workflow. While held, the file holds a
//! one-line JSON [`LockHolder`] record (pid, host, command line, start time, the command
//! holding it for its whole run, if any, and the operation in progress) so a second
//! writer's error names who is in the way. A clean
//! release empties the file; a record found in an unlocked file therefore means its
//! holder died mid-operation. Its `operation` says what was cut short, which is what
//! recovery needs (see `OP_REFRESH_WORKTREE`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{IoContext, Result, WorkflowError};
use crate::lock_holder::LockHolder;
use crate::secrets;
use crate::time::now_rfc3339;

/// What a writer does when another process holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Fail at once with [`WorkflowError::Locked`], naming the holder.
    Fail,
    /// Poll until the lock is free, then fail with [`WorkflowError::LockTimeout`]. A
    /// holder that keeps the lock for a whole command (its record names a `session`) is
    /// refused at once, as with `Fail`: it runs for minutes, not milliseconds.
    Wait(Duration),
}

impl Default for LockMode {
    /// Writes take milliseconds, so a short wait rides out another writer's checkpoint
    /// while still failing fast when a long session holds the lock.
    fn default() -> Self {
        LockMode::Wait(Duration::from_secs(10))
    }
}

/// The operation a writer records, with the commit as `target`, just before it moves HEAD
/// (or HEAD's branch) to that commit and rewrites the working folder to match. If the
/// holder died and HEAD is at `target`, the move happened and the working folder may be
/// half-written; its content is committed, so restoring it from HEAD loses nothing. If
/// HEAD is elsewhere, the move never happened and the working folder is left alone (it
/// may hold edits that were about to become that commit).
pub(crate) const OP_REFRESH_WORKTREE: &str = "refresh-worktree";
pub(crate) const OP_IDLE: &str = "idle";

/// A held lock; released (record emptied, flock dropped) on drop.
#[derive(Debug)]
pub(crate) struct WorkflowLock {
    file: File,
    holder: LockHolder,
}

/// What [`inspect`] found in the lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockState {
    Free,
    /// Unlocked, but a record is left: the holder died. `None` when the record itself was
    /// cut short.
    Stale(Option<LockHolder>),
    /// Held by a live process.
    Held(Option<LockHolder>),
}

fn open(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).at(dir)?;
    }
    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).at(path)
}

fn read_record(file: &mut File, path: &Path) -> Result<Option<String>> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).at(path)?;
    // A record cut short mid-character is still a record; read bytes and decode lossily.
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).at(path)?;
    text.push_str(&String::from_utf8_lossy(&bytes));
    Ok(if text.trim().is_empty() { None } else { Some(text) })
}

fn parse_record(text: &str) -> Option<LockHolder> {
    serde_json::from_str(text.trim()).ok()
}

fn try_lock(file: &File, path: &Path) -> Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e).at(path),
    }
}

fn holder_of(path: &Path) -> Option<LockHolder> {
    std::fs::read_to_string(path).ok().and_then(|t| parse_record(&t))
}

fn boxed_holder_of(path: &Path) -> Option<Box<LockHolder>> {
    holder_of(path).map(Box::new)
}

impl WorkflowLock {
    /// Take the lock, for the whole run of `session` when given. Also returns the record a
    /// dead previous holder left behind, if any, so the caller can finish what it cut short.
    pub(crate) fn acquire(path: &Path, mode: LockMode, operation: &str, session: Option<&str>) -> Result<(Self, Option<Option<LockHolder>>)> {
        let mut file = open(path)?;
        let start = Instant::now();
        while !try_lock(&file, path)? {
            let holder = boxed_holder_of(path);
            match mode {
                LockMode::Fail => return Err(WorkflowError::Locked { path: path.to_path_buf(), holder }),
                LockMode::Wait(_) if holder.as_ref().is_some_and(|h| h.session.is_some()) => {
                    return Err(WorkflowError::Locked { path: path.to_path_buf(), holder });
                }
                LockMode::Wait(limit) => {
                    if start.elapsed() >= limit {
                        return Err(WorkflowError::LockTimeout { path: path.to_path_buf(), waited_ms: start.elapsed().as_millis(), holder });
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let stale = read_record(&mut file, path)?.map(|text| parse_record(&text));
        let holder = LockHolder {
            pid: std::process::id(),
            host: hostname(),
            command: secrets::redact(&std::env::args().collect::<Vec<_>>().join(" ")).into_owned(),
            started: now_rfc3339(),
            session: session.map(str::to_string),
            operation: operation.to_string(),
            target: None,
        };
        let mut lock = WorkflowLock { file, holder };
        lock.write_record(path)?;
        Ok((lock, stale))
    }

    /// Record the operation now in progress, and the commit it moves HEAD to, if any.
    pub(crate) fn set_operation(&mut self, path: &Path, operation: &str, target: Option<String>) -> Result<()> {
        if self.holder.operation != operation || self.holder.target != target {
            self.holder.operation = operation.to_string();
            self.holder.target = target;
            self.write_record(path)?;
        }
        Ok(())
    }

    fn write_record(&mut self, path: &Path) -> Result<()> {
        let mut line = serde_json::to_string(&self.holder).expect("LockHolder serializes");
        line.push('\n');
        self.file.set_len(0).at(path)?;
        self.file.seek(SeekFrom::Start(0)).at(path)?;
        self.file.write_all(line.as_bytes()).at(path)
    }
}

impl Drop for WorkflowLock {
    fn drop(&mut self) {
        // Empty the record before unlocking: a record in an unlocked file must mean "the
        // holder died". Failing here only leaves a record fsck reports as stale.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// Look at the lock without waiting. With `clear_stale`, a dead holder's record is removed.
pub(crate) fn inspect(path: &Path, clear_stale: bool) -> Result<LockState> {
    if !path.exists() {
        return Ok(LockState::Free);
    }
    let mut file = open(path)?;
    if !try_lock(&file, path)? {
        return Ok(LockState::Held(holder_of(path)));
    }
    let state = match read_record(&mut file, path)? {
        None => LockState::Free,
        Some(text) => {
            if clear_stale {
                file.set_len(0).at(path)?;
            }
            LockState::Stale(parse_record(&text))
        }
    };
    file.unlock().at(path)?;
    Ok(state)
}

#[cfg(unix)]
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // when the name fits, and we stop at the first NUL or the buffer's end either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(not(unix))]
fn hostname() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_else(|_| "unknown-host".to_string())
}

/// The lock file inside a workflow's `.git/peak` folder.
pub(crate) fn lock_path(peak_dir: &Path) -> PathBuf {
    peak_dir.join("lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_fails_naming_the_holder_and_release_clears_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peak/lock");
        let (first, stale) = WorkflowLock::acquire(&path, LockMode::Fail, "checkpoint", None).unwrap();
        assert_eq!(stale, None);
        let err = WorkflowLock::acquire(&path, LockMode::Fail, "tag", None).unwrap_err();
        match &err {
            WorkflowError::Locked { holder: Some(h), .. } => {
                assert_eq!(h.pid, std::process::id());
                assert_eq!(h.operation, "checkpoint");
            }
            other => panic!("expected Locked with a holder, got {other:?}"),
        }
        assert!(err.to_string().contains(&format!("pid {}", std::process::id())), "{err}");
        assert!(matches!(inspect(&path, false).unwrap(), LockState::Held(Some(_))));
        drop(first);
        assert_eq!(inspect(&path, false).unwrap(), LockState::Free);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn wait_mode_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let _held = WorkflowLock::acquire(&path, LockMode::Fail, "checkpoint", None).unwrap();
        let err = WorkflowLock::acquire(&path, LockMode::Wait(Duration::from_millis(60)), "tag", None).unwrap_err();
        assert!(matches!(err, WorkflowError::LockTimeout { waited_ms, .. } if waited_ms >= 60), "{err}");
    }

    #[test]
    fn a_whole_command_holding_the_lock_is_named_at_once_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let _held = WorkflowLock::acquire(&path, LockMode::Fail, OP_IDLE, Some("submit")).unwrap();
        let started = Instant::now();
        let err = WorkflowLock::acquire(&path, LockMode::Wait(Duration::from_secs(60)), "checkout", None).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "waited {:?} for a holder that runs for minutes", started.elapsed());
        let WorkflowError::Locked { holder: Some(holder), .. } = &err else { panic!("expected Locked naming the holder, got {err:?}") };
        assert_eq!(holder.session.as_deref(), Some("submit"));
        assert!(err.to_string().contains("running submit"), "{err}");
    }

    #[test]
    fn a_left_record_is_stale_and_handed_to_the_next_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let dead = LockHolder {
            pid: 999_999,
            host: "h".into(),
            command: "peak apply".into(),
            started: "t".into(),
            session: None,
            operation: OP_REFRESH_WORKTREE.into(),
            target: Some("0".repeat(40)),
        };
        std::fs::write(&path, serde_json::to_string(&dead).unwrap()).unwrap();
        assert_eq!(inspect(&path, false).unwrap(), LockState::Stale(Some(dead.clone())));
        let (_lock, stale) = WorkflowLock::acquire(&path, LockMode::Fail, "checkpoint", None).unwrap();
        assert_eq!(stale, Some(Some(dead)));
    }
}
