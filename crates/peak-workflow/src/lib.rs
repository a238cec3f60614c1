//! Performance workflows: the history of one optimisation effort, stored as git.
//!
//! A workflow is a folder that is a git repository, so `git log`, `git diff`, `git push`
//! and `git clone` work on it unchanged. Each *checkpoint* is a commit; named checkpoints
//! are tags and lines of work are branches.
//!
//! # On disk
//!
//! ```text
//! WORKFLOW/
//!   context/              the checkpoint's kernel context (peak.toml + the source file)
//!   checkpoint.json       transformation, parent id, verdict, executor/model, created, attempt
//!   validation.json       opaque, from the validator ({"verdict": "passed", ...})
//!   performance.json      opaque, from the evaluator ({"best": {"params", "time_ms"}, "top_k", "device"})
//!   transcript.json       opaque, from the executor (prompts, replies, tokens, latencies)
//!   reference.json        the reference outputs' identity, fixed at init, in every commit
//!   .git/
//!     refs/heads/main           the branch a workflow starts on
//!     refs/tags/root            the root checkpoint (also the mark of a workflow)
//!     refs/heads/peak-attempts  mirror of the attempts log (see below)
//!     peak/lock                 writer lock + holder record
//!     peak/attempts.jsonl       the attempts log
//! ```
//!
//! The working-folder files are a checkout of HEAD; the commits are the record. Commit
//! messages read like `TB-Tiling: 1.23 ms (3.40x over root)`.
//!
//! # API
//!
//! ```no_run
//! use peak_workflow::{Attempt, AttemptOutcome, CheckpointInput, LockMode, Workflow};
//! use serde_json::json;
//! # fn main() -> peak_workflow::Result<()> {
//! let mut wf = Workflow::init("wf", "examples/matmul", json!({"inputs": [{"n": 512}], "seed": 1}))?;
//! // or: let mut wf = Workflow::open("wf")?;   (any folder inside works too)
//! wf.set_lock_mode(LockMode::Fail);
//! let attempt = wf.start_attempt(Attempt { transformation: "TB-Tiling".into(), executor: "openai".into(), ..Default::default() })?;
//! let id = wf.checkpoint(CheckpointInput {
//!     context_dir: "/tmp/new-context".into(),
//!     transformation: "TB-Tiling".into(),
//!     executor: "openai".into(),
//!     model: Some("gpt-5".into()),
//!     validation: json!({"verdict": "passed"}),
//!     performance: json!({"best": {"params": {"TILE": 16}, "time_ms": 1.23}}),
//!     transcript: json!({"messages": []}),
//!     attempt: Some(attempt.clone()),
//!     ..Default::default()
//! })?;
//! wf.finish_attempt(&attempt, Attempt { transformation: "TB-Tiling".into(), outcome: AttemptOutcome::Passed,
//!     checkpoint: Some(id.to_string()), ..Default::default() })?;
//! wf.tag("tiled", None)?;
//! wf.branch("try-2", Some("root"))?;
//! wf.checkout("try-2", false)?;
//! print!("{}", peak_workflow::render_log(&wf.log()?));
//! print!("{}", wf.diff("root", "tiled")?);
//! wf.materialize("tiled", "/tmp/tiled")?;
//! for finding in wf.fsck(false)? { eprintln!("{finding}"); }
//! # Ok(()) }
//! ```
//!
//! Revs accepted everywhere: tag and branch names (also `origin/NAME`, and `NAME` alone
//! for a branch that exists only on a remote), full or short ids, `HEAD`, `HEAD~N`,
//! `root`. Tag and branch names may not overlap, so every name means one checkpoint.
//!
//! Every result type is `Serialize` for `--json`; [`WorkflowDiff`], [`Finding`] and
//! [`render_log`] render for terminals.
//!
//! # Design decisions
//!
//! * **Checkpoints go on branches only.** With HEAD detached (after checking out a tag or
//!   an id), [`Workflow::checkpoint`] refuses instead of creating a commit no ref points
//!   at, which `git gc` would eventually delete. Backtracking is `branch` + `checkout`.
//! * **Optimistic parent check.** A transformation runs for minutes without the lock;
//!   [`CheckpointInput::parent`] names where it started, and the checkpoint is refused
//!   if the branch moved meanwhile ([`WorkflowError::StaleParent`]).
//! * **Crash safety.** Objects are written first, then the branch moves with one atomic
//!   compare-and-swap ref update, then the working folder is rewritten. A `kill -9`
//!   leaves a checkpoint whole or absent. If it lands during the working-folder rewrite,
//!   the dead writer's lock record says so and the next writer (or `fsck(true)`) finishes
//!   the rewrite from HEAD; that is safe because the content is already committed.
//!   Objects are not fsynced: `kill -9` cannot lose written data, only a power cut can.
//! * **Lock.** An exclusive `flock` on `.git/peak/lock` (std's `File::try_lock`, the same
//!   call fs4 makes), taken per write or for a whole session with
//!   [`Workflow::hold_lock`]. The kernel drops it when its holder dies, so a crash never
//!   wedges a workflow; the record left behind is reported by fsck as stale. Second
//!   writers fail or wait per [`LockMode`], with errors naming the holder; a holder that
//!   keeps the lock for a whole command is named at once, never waited for.
//! * **Attempts log.** Appended to `.git/peak/attempts.jsonl` (inside `.git`, so checkouts
//!   never rewrite it) and mirrored into the `peak-attempts` branch after each checkpoint
//!   and on [`Workflow::sync_attempts`]. A branch rather than a custom ref because
//!   `git clone` copies only branches and tags. Readers merge the local log with the
//!   local and remote mirrors. Details in [`attempts`].
//! * **Bundles.** [`Workflow::bundle`] packs every branch and tag, the attempts mirror
//!   (synced first) included, into one file for another machine; [`clone_bundle`] unpacks
//!   one. Both run the `git` program, as libgit2 has no bundles.
//! * **Keys.** A transcript containing something shaped like an API key (`sk-...`,
//!   `sk-ant-...`, `Bearer ...`) is refused; key-shaped text in an attempt's error is
//!   redacted (a lost failure record would be worse than a redacted one).
//! * **Opaque results.** validation, performance, transcript and reference JSON are the
//!   other crates' formats; this crate only reads `verdict`, `best.time_ms` and
//!   `best.params`, and tolerates their absence.

pub mod attempts;
mod bundle;
mod context;
mod diff;
mod error;
mod fsck;
mod history;
mod lock;
mod lock_holder;
mod secrets;
mod speedup;
mod time;
mod workflow;
mod yardstick;

pub use attempts::{Attempt, AttemptRecord, AttemptsLog, DamagedLine};
pub use bundle::{BundleSummary, clone_bundle, is_bundle};
pub use diff::{DiffSide, FileChange, FileDiff, FileStatus, ParamChange, PerformanceDelta, RegionDiff, SizeDelta, TuningDiff, WorkflowDiff};
pub use error::{Result, WorkflowError};
pub use fsck::{Finding, FindingKind};
pub use history::{CheckpointView, LogEntry, ResumeState, SizeEntry, WITHIN_SPREAD, render_log, render_log_sizes};
pub use lock::LockMode;
pub use lock_holder::LockHolder;
pub use peak_record::AttemptOutcome;
pub use secrets::{is_key_var, redact as redact_secrets};
pub use speedup::{format_inputs, speedup};
/// The timestamp format of every peak record: RFC 3339, UTC, milliseconds.
pub use time::now_rfc3339;
pub use workflow::fmt_ms as format_ms;
pub use workflow::{CONTEXT_DIR, CheckpointId, CheckpointInput, CheckpointMeta, DEFAULT_BRANCH, Head, INIT_TRANSFORMATION, ROOT_TAG, RootInput, Workflow};
pub use yardstick::{NOT_AVAILABLE, Yardstick, yardstick};
