//! Carrying a natural transformation out on a workflow.
//!
//! `apply` starts from the workflow's current checkpoint and runs the transformation's
//! passes in order: each builds a prompt, the executor (an LLM, the agent, or a replayed
//! recording) returns a new version of one region, and the region is spliced in. After
//! the last pass the candidate is validated against the workflow's reference (the root
//! checkpoint) and, on CUDA and HIP, under compute-sanitizer (`sanitize`); on a compile
//! error, a wrong output or a sanitizer finding the executor is shown the log or the
//! verdict and retries, and a candidate that passes is tuned, seeded from the parent's
//! top-K, its winner sanitized (`winner`), and recorded as a checkpoint. Every try,
//! failed ones included, lands in the workflow's attempts log. Where no GPU is in reach,
//! a deferred apply (`defer`) compile-checks the candidate instead and records it as
//! `deferred`, for `replay` to validate and tune where the GPU is.
//!
//! `auto` (the autonomous mode) lets an LLM planner choose the transformations, applying
//! each as `apply` does and backtracking from failures and regressions.
//!
//! `study` applies transformations with several LLM executors, N times each, on side
//! branches, for the success-rate research question; HEAD stays put.
//!
//! `retune` searches the current checkpoint's space again, further, and records the result
//! as a `Retune` checkpoint (same code, better configuration), which `replay` repeats.
//!
//! The agent executor answers "waiting" until someone submits the region; the apply then
//! stops and `submit` resumes it later, even from another process. Resuming simply runs
//! the apply again: the agent's earlier replies are on disk, validation references and
//! tuning results are cached, so nothing is asked or measured twice.

mod apply;
pub mod auto;
mod defer;
mod feasible;
mod fsck;
mod init;
mod manifest;
pub mod outcome;
mod replay;
mod retune;
mod sanitize;
mod settings;
mod state;
pub mod study;
mod winner;

use std::path::PathBuf;

pub use apply::{abandon, abandon_in, apply, apply_in, pending, resume, submit};
pub use defer::{Defer, is_deferred};
pub use fsck::fsck;
pub use init::{InitOptions, init_workflow, measure};
use peak_workflow::AttemptOutcome;
pub use replay::replay;
pub use retune::retune;
pub use sanitize::{Plan, Record as SanitizerRecord, Sanitize};
use serde::Serialize;
pub use settings::{SanitizerSettings, Settings, TuningSettings};

/// What to apply and how.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// A transformation name from the library (case and punctuation are forgiven).
    pub transformation: String,
    /// `agent`, or an LLM as `provider:model` (see `peak_transform::ExecutorSpec`).
    pub executor: String,
    /// Repair tries after the first, for a bad reply, a compile error or a wrong output.
    pub retries: u32,
    /// How the candidate is validated, sanitized and tuned.
    pub settings: Settings,
    /// Compile-check instead of validating and tuning, for a GPU that is elsewhere.
    pub defer: Option<Defer>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions { transformation: String::new(), executor: "agent".into(), retries: 3, settings: Settings::default(), defer: None }
    }
}

/// How an apply ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum ApplyOutcome {
    /// A new checkpoint on the current branch; `verdict` is `passed`, or `deferred` (only
    /// compile-checked, so untimed).
    Checkpoint { id: String, transformation: String, verdict: AttemptOutcome, best_ms: Option<f64>, speedup_over_parent: Option<f64>, attempts: usize },
    /// The agent executor waits for `submit` with the new text of `region`.
    Waiting { transformation: String, pass: usize, passes: usize, attempt: u32, region: String, prompt_file: PathBuf, prompt: String },
    /// Retries exhausted; the workflow stays at the parent, the attempts are recorded.
    Failed { transformation: String, attempts: usize, last_outcome: AttemptOutcome, last_error: String },
}

/// Progress of an apply, for a terminal or an MCP client. Every method has a no-op default.
pub trait ApplyReporter {
    /// A pass is about to be asked for.
    fn pass(&self, _transformation: &str, _pass: usize, _passes: usize, _attempt: u32, _title: &str) {}
    /// One try ended: `outcome` is an attempt category (`passed`, `compile-failed`,
    /// `unparsable-reply`, ...), `detail` a one-line summary.
    fn attempt(&self, _outcome: &AttemptOutcome, _detail: &str) {}
    /// A stage began: `validate`, `tune`, or `sanitize` (the tuned winner's check).
    fn stage(&self, _stage: &str) {}
    /// Drawn during tuning.
    fn tuning(&self) -> &dyn peak_eval::TuneReporter {
        &()
    }
    /// Told of every sample judged while validating against the reference.
    fn validation(&self) -> &dyn peak_eval::validate::ValidateReporter {
        &()
    }
}

impl ApplyReporter for () {}
