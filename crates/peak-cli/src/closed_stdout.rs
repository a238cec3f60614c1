//! `peak log | head`: once the reader has closed stdout, Rust's print macros panic with
//! "failed printing to stdout: Broken pipe (os error 32)". peak then ends quietly with status
//! 141 (128 + SIGPIPE, what a shell reports for `git log | head` under `pipefail`), after the
//! unwinding has run every `Drop` (workflow locks released, files closed).
//!
//! SIGPIPE itself stays ignored, as Rust sets it: a worker that died must reach its parent as
//! an error on the pipe, which the parent reports, not as a signal that kills the parent.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

/// The status a shell reports for a command killed by SIGPIPE.
const CLOSED_STDOUT_STATUS: u8 = 141;

/// Runs the command; a stdout closed by its reader ends it with [`CLOSED_STDOUT_STATUS`]
/// and no panic message. Every other panic is reported and propagates as before.
pub fn run(command: impl FnOnce() -> ExitCode) -> ExitCode {
    let report = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !is_closed_stdout(info.payload()) {
            report(info);
        }
    }));
    match panic::catch_unwind(AssertUnwindSafe(command)) {
        Ok(code) => code,
        Err(payload) if is_closed_stdout(payload.as_ref()) => ExitCode::from(CLOSED_STDOUT_STATUS),
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// Whether a panic is the print macros' report of EPIPE on stdout (errno 32 on Linux and
/// macOS; the "(os error N)" suffix is not translated, unlike the text before it).
fn is_closed_stdout(payload: &(dyn Any + Send)) -> bool {
    let message = payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied());
    message.is_some_and(|m| m.starts_with("failed printing to stdout") && m.ends_with("(os error 32)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broken_pipe_on_stdout_counts() {
        let closed: Box<dyn Any + Send> = Box::new(String::from("failed printing to stdout: Broken pipe (os error 32)"));
        assert!(is_closed_stdout(closed.as_ref()));
        let full: Box<dyn Any + Send> = Box::new(String::from("failed printing to stdout: No space left on device (os error 28)"));
        assert!(!is_closed_stdout(full.as_ref()));
        let other: Box<dyn Any + Send> = Box::new("index out of bounds (os error 32)");
        assert!(!is_closed_stdout(other.as_ref()));
    }
}
