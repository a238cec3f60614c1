//! Workflows in one file, for carrying them between a machine without a GPU and one with
//! it: `git bundle` packs every branch and tag, and the `peak-attempts` branch with them,
//! so the attempts log travels too.
//!
//! libgit2 reads and writes no bundles, so this runs the `git` program. A clone sets
//! the initial branch itself: git would otherwise print its hint about `master` into the
//! middle of a command's output.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::error::{Result, WorkflowError};
use crate::workflow::{DEFAULT_BRANCH, Workflow};

/// What [`Workflow::bundle`] packed.
#[derive(Debug, Clone, Serialize)]
pub struct BundleSummary {
    pub file: PathBuf,
    /// Every ref in the bundle (`refs/heads/main`, `refs/tags/root`, `HEAD`, ...).
    pub refs: Vec<String>,
    pub checkpoints: usize,
    /// Records in the attempts log it carries.
    pub attempts: usize,
    pub bytes: u64,
}

/// Whether `path` is a git bundle: a file that starts like one, or is named `*.bundle`.
pub fn is_bundle(path: &Path) -> bool {
    if !path.is_file() {
        return false;
    }
    let mut head = [0u8; 16];
    let starts_like_one = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .is_ok_and(|n| head[..n].starts_with(b"# v2 git bundle") || head[..n].starts_with(b"# v3 git bundle"));
    starts_like_one || path.extension().is_some_and(|e| e == "bundle")
}

/// Clone the workflow in the bundle `file` into the new folder `into`. Its HEAD is the
/// bundle's; the bundle's other branches are remote branches (`origin/NAME`), which every
/// command also finds by `NAME` alone.
pub fn clone_bundle(file: &Path, into: &Path) -> Result<Workflow> {
    let init_branch = format!("init.defaultBranch={DEFAULT_BRANCH}");
    git(&["-c".as_ref(), init_branch.as_ref(), "clone".as_ref(), "--quiet".as_ref(), file.as_os_str(), into.as_os_str()])?;
    Workflow::open(into)
}

impl Workflow {
    /// Pack the whole workflow into `file`: every branch and tag, and the attempts log,
    /// synced into its `peak-attempts` branch first. `git clone FILE` or
    /// `peak replay FILE` unpacks it.
    pub fn bundle(&mut self, file: &Path) -> Result<BundleSummary> {
        self.sync_attempts()?;
        let io = |source| WorkflowError::Io { path: file.to_path_buf(), source };
        let file = std::path::absolute(file).map_err(io)?;
        git(&["-C".as_ref(), self.dir().as_os_str(), "bundle".as_ref(), "create".as_ref(), "--quiet".as_ref(), file.as_os_str(), "--all".as_ref()])?;
        let heads = git(&["bundle".as_ref(), "list-heads".as_ref(), file.as_os_str()])?;
        let refs = heads.lines().filter_map(|l| l.split_once(' ').map(|(_, name)| name.to_string())).collect();
        Ok(BundleSummary {
            refs,
            checkpoints: self.log()?.len(),
            attempts: self.attempts()?.records.len(),
            bytes: std::fs::metadata(&file).map_err(io)?.len(),
            file,
        })
    }
}

/// Run `git` and return its stdout; a failure keeps git's own message.
fn git(args: &[&OsStr]) -> Result<String> {
    let command = || format!("git {}", args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "));
    let out =
        Command::new("git").args(args).output().map_err(|e| WorkflowError::GitCommand { command: command(), message: format!("{e} (is git installed?)") })?;
    if !out.status.success() {
        return Err(WorkflowError::GitCommand { command: command(), message: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
