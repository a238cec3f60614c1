use std::path::PathBuf;

use peak_backend::worker::WorkerError;
use peak_spec::SpecError;
use thiserror::Error;

/// What can stop a validation or a tuning run as a whole. A failing *variant* is never
/// one of these: it is a [`crate::Verdict`].
#[derive(Debug, Error)]
pub enum EvalError {
    #[error(transparent)]
    Worker(#[from] WorkerError),

    #[error(transparent)]
    Spec(#[from] SpecError),

    #[error("{}: {message}", file.display())]
    Io { file: PathBuf, message: String },

    /// A results cache whose contents cannot be trusted. It is never used, nor rewritten.
    #[error("{}:{line}: the results cache is corrupt: {message}\nhint: move the file aside (or delete it) to start a fresh cache; nothing in it is trusted", file.display())]
    CacheCorrupt { file: PathBuf, line: usize, message: String },

    /// A results cache written for another source, device, compiler or reference.
    #[error("{}: this results cache belongs to {found}, not to {expected}\nhint: each (source, device, compiler, reference) has its own cache file; do not copy or rename them", file.display())]
    CacheForeign { file: PathBuf, expected: String, found: String },

    /// The reference context could not produce outputs, so nothing can be judged.
    #[error("the reference {reference} failed at {params}: {failure}")]
    ReferenceFailed { reference: String, params: String, failure: String },

    #[error("the reference {reference} cannot judge {candidate}: {message}")]
    IncompatibleReference { reference: String, candidate: String, message: String },

    /// The space to search or sample is empty or too large to enumerate.
    #[error("{context}: {message}")]
    Space { context: String, message: String },

    /// An external tool (compute-sanitizer, ncu) is missing or misbehaved.
    #[error("{tool}: {message}\nhint: {hint}")]
    Tool { tool: String, message: String, hint: String },

    /// A run that had to succeed (one side of a comparison) failed; it keeps the
    /// worker's verdict category and message.
    #[error("{context} at {params}: {category}: {message}")]
    RunFailed { context: String, params: String, category: String, message: String },

    /// A recorded cache used for replay lacks a configuration the strategy asked for.
    #[error("{0}")]
    Replay(String),
}

impl EvalError {
    pub(crate) fn io(file: impl Into<PathBuf>, e: impl std::fmt::Display) -> EvalError {
        EvalError::Io { file: file.into(), message: e.to_string() }
    }
}
