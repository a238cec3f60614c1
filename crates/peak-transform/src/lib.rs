//! Natural transformations: optimizations written in plain language, carried out one
//! region at a time by an LLM, a person or an agent.
//!
//! - [`format`]: the transformation file (TOML) — name, description, the tuning
//!   parameters it introduces and their constraints, passes that each edit one region,
//!   snippets inserted as-is, per-backend translation tables.
//! - [`library`]: the shipped library (embedded at compile time) and user folders layered
//!   over it, with lookup by forgiving name and a `show` rendering.
//! - [`prompt`]: the prompt for a pass and for repairing it; [`PassPrompt::accept`] turns a
//!   reply into the region's new text.
//! - [`reply`]: reply parsing; an unusable reply is a typed [`ReplyError`], an attempt
//!   outcome rather than a crash.
//! - [`executor`]: LLM providers, the agent file protocol, and replay of a [`Transcript`].
//!
//! This crate knows nothing of compiling, running or storing: the workflow splices each
//! accepted region into the context, validates and tunes the result, and on failure comes
//! back for a [`Library::repair_prompt`].

pub mod error;
pub mod executor;
pub mod format;
pub mod library;
pub mod prompt;
pub mod reply;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{LibraryError, PromptError};
pub use executor::{
    AGENT_PRODUCER, AgentExecutor, Executor, ExecutorError, ExecutorSpec, LlmConfig, LlmExecutor, Outcome, PassRequest, Pending, Protocol, Provider,
    ReplayExecutor, Response, RetryPolicy, Transcript, TranscriptEntry,
};
pub use format::{Domain, Language, Pass, Transformation, TuningParam};
pub use library::{Library, Snippet};
pub use prompt::{ContextParam, Feedback, KernelBrief, PassPrompt, PromptContext};
pub use reply::{ReplyError, parse_reply};
