//! `peak fsck` on a workflow and on the apply it may hold in `.git/peak/apply`.
//!
//! The workflow's own checks are `Workflow::fsck`; this adds the apply folder, which only
//! this crate can read. An apply no process is running (the lock is free) and no prompt
//! waits on is one of:
//!
//! - cut short before it saved its state (a missing, empty or torn `state.json`, a
//!   `state.tmp` left beside it): nothing can resume it;
//! - committed: HEAD carries the attempt id it saved before committing, and its process
//!   stopped before recording the outcome;
//! - started from a checkpoint that is gone, or that is no longer the tip of HEAD's
//!   branch: it cannot make its checkpoint;
//! - a step of `peak replay`, which running the same replay again redoes;
//! - interrupted mid-run, its parent still the tip: `peak apply --resume` continues it.
//!
//! Each finding names the one command that clears it. `repair` clears what loses nothing:
//! files nothing can resume, a replay's step (the replay redoes it), and a committed apply
//! (its outcome is recorded, as `--resume` would).

use std::path::Path;

use anyhow::Result;
use peak_transform::AgentExecutor;
use peak_workflow::{Finding, FindingKind, Workflow};

use crate::apply::{committed, finish_committed};
use crate::state::{self, ApplyState, agent_dir, apply_dir};

/// Verify the workflow at `workflow` and the apply it holds; with `repair`, fix what can be
/// fixed without losing anything. An empty list means it is clean.
pub fn fsck(workflow: &Path, repair: bool) -> Result<Vec<Finding>> {
    let mut wf = Workflow::open(workflow)?;
    let mut findings = wf.fsck(repair)?;
    // A live holder may be the apply itself, mid-run: its files are not left over.
    if findings.iter().any(|f| f.kind == FindingKind::LockHeld) {
        return Ok(findings);
    }
    if repair {
        // Held from the look to the repair, so no apply starts in between.
        wf.hold_lock("fsck --repair")?;
    }
    if let Some(LeftApply { message, repair: fix }) = left_apply(&wf)? {
        let repaired = match fix {
            _ if !repair => false,
            Repair::None => false,
            Repair::Clear => {
                state::clear(wf.dir())?;
                true
            }
            Repair::Finish(state) => finish_committed(&mut wf, &state)?.is_some(),
        };
        findings.push(Finding { kind: FindingKind::InterruptedApply, subject: apply_dir(wf.dir()).display().to_string(), message, repaired });
    }
    Ok(findings)
}

/// What `fsck --repair` does to an apply left behind.
enum Repair {
    /// Left alone: its work can still be used, by the command the message names.
    None,
    /// Its files go: nothing can use them.
    Clear,
    /// Its checkpoint exists: the outcome is recorded and the files go.
    Finish(Box<ApplyState>),
}

struct LeftApply {
    message: String,
    repair: Repair,
}

/// The apply in `wf`'s `.git/peak/apply` that nothing runs and nothing waits on, if any.
fn left_apply(wf: &Workflow) -> Result<Option<LeftApply>> {
    let dir = wf.dir();
    if !apply_dir(dir).exists() {
        return Ok(None);
    }
    // As a user types it: the working tree's path comes with a trailing slash.
    let shown = dir.display().to_string();
    let w = shown.strip_suffix('/').filter(|w| !w.is_empty()).unwrap_or(&shown);
    let abandon = format!("`peak apply --abandon -w {w}`");
    let resume = format!("`peak apply --resume -w {w}`");
    let state = match state::load(dir) {
        Ok(Some(state)) => state,
        Ok(None) => {
            let message = format!(
                "an apply's files without its state.json (cut short before it saved its state, or while removing its files); nothing can resume it\nhint: {abandon} removes them"
            );
            return Ok(Some(LeftApply { message, repair: Repair::Clear }));
        }
        Err(e) => {
            let message = format!("{e:#}; nothing can resume it\nhint: {abandon} removes it");
            return Ok(Some(LeftApply { message, repair: Repair::Clear }));
        }
    };
    let what = format!("the apply of {} from {}", state.transformation, short(&state.parent));
    if let Some(view) = committed(wf, &state)? {
        let message = format!("{what} made checkpoint {} and stopped before recording its outcome\nhint: {resume} records it", view.id.short());
        return Ok(Some(LeftApply { message, repair: Repair::Finish(Box::new(state)) }));
    }
    if wf.resolve(&state.parent).is_err() {
        let message = format!("{what}: its parent is not in the workflow any more, so it can never make its checkpoint\nhint: {abandon} drops it");
        return Ok(Some(LeftApply { message, repair: Repair::Clear }));
    }
    if state.executor == "replay" {
        let message =
            format!("{what} is a step of `peak replay` that was cut short\nhint: run the same `peak replay SOURCE --into {w}` again; it redoes the step");
        return Ok(Some(LeftApply { message, repair: Repair::Clear }));
    }
    let head = wf.head()?;
    if head.branch.is_none() || head.id.as_str() != state.parent {
        let at = match &head.branch {
            Some(branch) => format!("branch {branch} is at {}", head.id.short()),
            None => format!("HEAD is detached at {}", head.id.short()),
        };
        let message = format!(
            "{what} cannot make its checkpoint: {at}, and a checkpoint goes on the branch tip it started from\nhint: {abandon} drops it (or check out the branch whose tip is {} and run {resume})",
            short(&state.parent)
        );
        return Ok(Some(LeftApply { message, repair: Repair::None }));
    }
    if AgentExecutor::new(agent_dir(dir)).pending()?.is_some() {
        // Waiting for `peak submit`: the normal state of an agent's apply between passes.
        return Ok(None);
    }
    let message = format!("{what} was interrupted (its process stopped before it finished)\nhint: {resume} continues it");
    Ok(Some(LeftApply { message, repair: Repair::None }))
}

fn short(id: &str) -> &str {
    id.get(..7).unwrap_or(id)
}
