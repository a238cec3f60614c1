//! The exit status of a command, the same for every command: 0 success, 1 failure (a check
//! that failed, a kernel that did not run, an apply that gave up), 2 bad usage: what was
//! typed or pointed at cannot be used as given, and typing it differently is the fix.
//!
//! Bad usage is a [`UsageError`] a command raised, or, wherever it comes from (a command
//! or a library below it, through any `context`), an error of the kinds below: a folder
//! that is not a workflow or not a context, a malformed manifest or `--set`, an unknown
//! checkpoint, transformation or executor, a name that cannot be used.

use peak_workflow::WorkflowError;

use crate::{Failed, UsageError};

/// The exit status for a command that ended in `err`.
pub fn code(err: &anyhow::Error) -> u8 {
    if err.is::<Failed>() {
        return 1;
    }
    if err.chain().any(is_bad_usage) { 2 } else { 1 }
}

fn is_bad_usage(cause: &(dyn std::error::Error + 'static)) -> bool {
    if cause.is::<UsageError>() || cause.is::<peak_spec::SpecError>() || cause.is::<peak_transform::executor::SpecError>() {
        return true;
    }
    if let Some(e) = cause.downcast_ref::<peak_transform::LibraryError>() {
        return matches!(e, peak_transform::LibraryError::NotFound { .. });
    }
    if let Some(e) = cause.downcast_ref::<WorkflowError>() {
        return matches!(
            e,
            WorkflowError::NotAWorkflow { .. }
                | WorkflowError::DirNotEmpty { .. }
                | WorkflowError::UnknownRev { .. }
                | WorkflowError::TagExists { .. }
                | WorkflowError::BranchExists { .. }
                | WorkflowError::NameTaken { .. }
                | WorkflowError::InvalidName { .. }
        );
    }
    false
}
