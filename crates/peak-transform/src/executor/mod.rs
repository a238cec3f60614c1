//! Executors carry a pass out: given its prompt, they return a reply.
//!
//! - [`LlmExecutor`]: an OpenAI-compatible server or Anthropic's Messages API, with
//!   retries on 429/5xx and a time-out.
//! - [`AgentExecutor`]: a person, or the AI agent driving peak, writes the region. The
//!   prompt goes to a file and the executor answers [`Outcome::Waiting`]; `peak submit`
//!   hands the new region in and the apply resumes.
//! - [`ReplayExecutor`]: the responses of a recorded [`Transcript`], in order.
//!
//! One object-safe trait lets the CLI hold any of them as `Box<dyn Executor>` chosen from
//! an [`ExecutorSpec`] at run time. Every reply records who produced it, so transcripts
//! answer "which model did this" long after the fact; no executor ever records a key.

mod agent;
mod llm;
mod replay;
mod spec;
mod transcript;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

pub use agent::{AgentExecutor, Submitted};
pub use llm::{LlmConfig, LlmExecutor, RetryPolicy};
pub use replay::ReplayExecutor;
pub use spec::{ExecutorSpec, Protocol, Provider, SpecError};
pub use transcript::{Transcript, TranscriptEntry};

/// The producer name of replies written through the agent executor.
pub const AGENT_PRODUCER: &str = "agent";

/// A boxed future, so that [`Executor`] stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One request: a pass's prompt, for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassRequest {
    pub transformation: String,
    /// 1-based pass number.
    pub pass: usize,
    /// 1-based attempt number: 1 for the pass itself, 2.. for repairs.
    pub attempt: u32,
    pub prompt: String,
}

/// A reply and how it was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Who wrote it: the model name, or [`AGENT_PRODUCER`].
    pub producer: String,
    pub text: String,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub latency_ms: u64,
}

/// A prompt handed to a person or agent, not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub pass: usize,
    pub attempt: u32,
    /// Where the prompt was written.
    pub prompt_file: PathBuf,
}

/// What an executor did with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Reply(Response),
    /// The agent executor wrote the prompt out; the caller stops and resumes after
    /// `peak submit`.
    Waiting(Pending),
}

/// Something that turns a pass's prompt into a reply.
pub trait Executor: Send + Sync {
    /// Who this executor's replies are recorded as produced by (a model name, `agent`,
    /// or for a replay the producer of the recording).
    fn producer(&self) -> String;

    fn execute<'a>(&'a self, request: &'a PassRequest) -> BoxFuture<'a, Result<Outcome, ExecutorError>>;

    /// Whether the executor can be reached at all, asked before an apply writes anything,
    /// so an endpoint that is down fails in seconds instead of after every retry. Only an
    /// executor behind a network connection has anything to check.
    fn check_reachable(&self) -> Result<(), ExecutorError> {
        Ok(())
    }
}

impl ExecutorSpec {
    /// The executor this spec names. The agent's prompts go to `agent_dir`; keys and
    /// base-URL overrides are read through `env`.
    pub fn build(&self, agent_dir: &std::path::Path, env: impl Fn(&str) -> Option<String>) -> Result<Box<dyn Executor>, ExecutorError> {
        match self {
            ExecutorSpec::Agent => Ok(Box::new(AgentExecutor::new(agent_dir))),
            ExecutorSpec::Llm { provider, model } => Ok(Box::new(LlmExecutor::new(LlmConfig::from_provider(provider, model, env)?)?)),
        }
    }
}

/// Why an executor produced no reply. A reply that cannot be used is not an error here;
/// see [`crate::ReplyError`].
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    #[error("{provider} needs an API key: set {env_var}")]
    MissingApiKey { provider: String, env_var: String },

    #[error("{model}: the server answered HTTP {status}: {body}")]
    Http { model: String, status: u16, body: String },

    #[error("{model}: still HTTP {status} after {attempts} attempts: {body}")]
    RetriesExhausted { model: String, status: u16, attempts: u32, body: String },

    #[error("{model}: no answer within {} s", after.as_secs_f64())]
    Timeout { model: String, after: Duration },

    #[error("{model}: cannot reach {url}: {detail}")]
    Connection { model: String, url: String, detail: String },

    #[error("{model}: the server's answer is not a valid response: {detail}")]
    MalformedResponse { model: String, detail: String },

    #[error("{model}: the response holds no text")]
    EmptyResponse { model: String },

    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    #[error("no prompt is waiting for a submission in {}", dir.display())]
    NothingPending { dir: PathBuf },

    #[error("{}: the submission is empty", file.display())]
    EmptySubmission { file: PathBuf },

    #[error("{}: {message}", file.display())]
    BadFile { file: PathBuf, message: String },

    #[error("the recording has no response for pass {pass}, attempt {attempt} (it holds {recorded} responses)")]
    ReplayExhausted { pass: usize, attempt: u32, recorded: usize },

    #[error(
        "the recording's next response is for pass {recorded_pass}, attempt {recorded_attempt}, but pass {pass}, attempt {attempt} was asked for; the replay has diverged"
    )]
    ReplayDiverged { pass: usize, attempt: u32, recorded_pass: usize, recorded_attempt: u32 },
}

impl ExecutorError {
    /// The kind of [`ExecutorError::Connection`]: the server could not be reached, so no
    /// model was asked (what `peak study` counts apart from a model's failures).
    pub const CONNECTION: &'static str = "connection";

    /// A stable, short name for records and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            ExecutorError::MissingApiKey { .. } => "missing-api-key",
            ExecutorError::Http { .. } => "http-error",
            ExecutorError::RetriesExhausted { .. } => "retries-exhausted",
            ExecutorError::Timeout { .. } => "timeout",
            ExecutorError::Connection { .. } => Self::CONNECTION,
            ExecutorError::MalformedResponse { .. } => "malformed-response",
            ExecutorError::EmptyResponse { .. } => "empty-response",
            ExecutorError::Io { .. } => "io",
            ExecutorError::NothingPending { .. } => "nothing-pending",
            ExecutorError::EmptySubmission { .. } => "empty-submission",
            ExecutorError::BadFile { .. } => "bad-file",
            ExecutorError::ReplayExhausted { .. } => "replay-exhausted",
            ExecutorError::ReplayDiverged { .. } => "replay-diverged",
        }
    }
}
