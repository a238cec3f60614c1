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
//! `retune` searches the current checkpoint's space again, further, and records the result
//! as a `Retune` checkpoint (same code, better configuration), which `replay` repeats.
//!
//! The agent executor answers "waiting" until someone submits the region; the apply then
//! stops and `submit` resumes it later, even from another process. Resuming simply runs
//! the apply again: the agent's earlier replies are on disk, validation references and
//! tuning results are cached, so nothing is asked or measured twice.

mod apply;
mod defer;
mod feasible;
mod fsck;
mod init;
mod manifest;
pub mod outcome;
mod replay;
mod retune;
mod sanitize;
mod state;
mod winner;

use std::path::PathBuf;
use std::time::Duration;

pub use apply::{abandon, abandon_in, apply, apply_in, pending, resume, submit};
pub use defer::{Defer, is_deferred};
pub use fsck::fsck;
pub use init::{InitOptions, init_workflow, measure};
use peak_workflow::AttemptOutcome;
pub use replay::replay;
pub use retune::retune;
pub use sanitize::{Plan, Record as SanitizerRecord, Sanitize};
use serde::Serialize;

/// What to apply and how.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// A transformation name from the library (case and punctuation are forgiven).
    pub transformation: String,
    /// `agent`, or an LLM as `provider:model` (see `peak_transform::ExecutorSpec`).
    pub executor: String,
    /// Repair tries after the first, for a bad reply, a compile error or a wrong output.
    pub retries: u32,
    /// Execution parameters sampled for validation.
    pub samples: usize,
    /// compute-sanitizer tools run on validation samples and on the tuned winner.
    pub sanitize: Sanitize,
    /// Validation samples the sanitizer runs on (at most `samples`, at small inputs).
    pub sanitize_samples: usize,
    /// Sanitize the tuned winner before recording it, falling back along the top-K.
    pub sanitize_winner: bool,
    /// `NAME=VALUE` input sizes the sanitizer runs at where a configuration is valid there
    /// (smaller than the manifest's: a sanitized run is 10 to 1000 times slower).
    pub sanitize_at: Vec<String>,
    pub seed: u64,
    /// Tuning budget in evaluations per input configuration (`None`: the whole space).
    pub budget: Option<usize>,
    pub time_limit: Option<Duration>,
    /// `NAME=VALUE` restrictions of validation and tuning (e.g. one input size). The input
    /// sizes the workflow was created at (`init --set`) fill in the names this leaves out.
    pub set: Vec<String>,
    /// Extra transformation folders layered over the built-in library.
    pub library_dirs: Vec<PathBuf>,
    /// Results and reference caches (default: `peak_eval::default_cache_dir()`).
    pub cache_dir: Option<PathBuf>,
    /// Compile-check instead of validating and tuning, for a GPU that is elsewhere.
    pub defer: Option<Defer>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            transformation: String::new(),
            executor: "agent".into(),
            retries: 3,
            samples: 16,
            // The paper sanitized 16 samples too.
            sanitize: Sanitize::Auto,
            sanitize_samples: 16,
            sanitize_winner: true,
            sanitize_at: Vec::new(),
            seed: 1,
            budget: None,
            time_limit: None,
            set: Vec::new(),
            library_dirs: Vec::new(),
            cache_dir: None,
            defer: None,
        }
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
