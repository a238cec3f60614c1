//! [`WorkerError`]: what can go wrong with the worker process itself (it would not start,
//! its backend is unavailable, it broke the protocol), as opposed to a job's [`super::Failure`].

use thiserror::Error;

#[derive(Debug, Error)]
pub enum WorkerError {
    #[error("cannot start the worker `{command}`: {message}")]
    Spawn { command: String, message: String },
    #[error("the {backend} backend is not available in the worker: {message}")]
    Unavailable { backend: String, message: String },
    #[error("the worker `{command}` did not start: {message}{}", tail_note(.stderr))]
    Startup { command: String, message: String, stderr: String },
    #[error("the worker broke the protocol: {message}")]
    Protocol { message: String },
    #[error("writing to the worker failed: {0}")]
    Io(String),
}

fn tail_note(stderr: &str) -> String {
    if stderr.trim().is_empty() { String::new() } else { format!("\nits stderr ended with:\n{}", stderr.trim_end()) }
}
