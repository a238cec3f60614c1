//! The attempt outcome of each failure an apply meets: the one place where a verdict, an
//! unusable reply or an executor error becomes a [`AttemptOutcome`] for the attempts log.
//!
//! [`AttemptOutcome`] lives in `peak-workflow`, which sees neither `peak-eval` nor
//! `peak-transform`, so the conversions live here, as exhaustive matches: a new verdict or
//! error kind does not compile until it is given an outcome. The tests check that each
//! outcome's name is the producer's own (`Verdict::category`, `ExecutorError::kind`), so the
//! names in the log do not change.

use peak_eval::Verdict;
use peak_transform::{ExecutorError, ReplyError};
use peak_workflow::AttemptOutcome;

/// The outcome a verdict against a candidate is recorded as (its category).
pub fn of_verdict(verdict: &Verdict) -> AttemptOutcome {
    match verdict {
        Verdict::Passed => AttemptOutcome::Passed,
        Verdict::CompileFailed { .. } => AttemptOutcome::CompileFailed,
        Verdict::InvalidConfig { .. } => AttemptOutcome::InvalidConfig,
        Verdict::LaunchFailed { .. } => AttemptOutcome::LaunchFailed,
        Verdict::Crashed { .. } => AttemptOutcome::Crashed,
        Verdict::TimedOut { .. } => AttemptOutcome::TimedOut,
        Verdict::WrongOutput(_) => AttemptOutcome::WrongOutput,
        Verdict::ModifiedInput { .. } => AttemptOutcome::ModifiedInput,
        Verdict::SanitizerFinding { .. } => AttemptOutcome::SanitizerFinding,
    }
}

/// The outcome of a reply that could not be used: an edit outside the pass's region,
/// answers that change nothing, or (every other reason, the reason itself in the error
/// text) an unparsable reply.
pub fn of_reply(err: &ReplyError) -> AttemptOutcome {
    match err {
        ReplyError::EditOutsideRegion { .. } => AttemptOutcome::EditOutsideRegion,
        ReplyError::Unchanged => AttemptOutcome::Unchanged,
        ReplyError::NoCodeBlock | ReplyError::MultipleCodeBlocks(_) | ReplyError::UnterminatedCodeBlock | ReplyError::EmptyCodeBlock => {
            AttemptOutcome::UnparsableReply
        }
    }
}

/// The outcome of an executor that produced no reply (its kind).
pub fn of_executor(err: &ExecutorError) -> AttemptOutcome {
    match err {
        ExecutorError::MissingApiKey { .. } => AttemptOutcome::MissingApiKey,
        ExecutorError::Http { .. } => AttemptOutcome::HttpError,
        ExecutorError::RetriesExhausted { .. } => AttemptOutcome::RetriesExhausted,
        ExecutorError::Timeout { .. } => AttemptOutcome::Timeout,
        ExecutorError::Connection { .. } => AttemptOutcome::Connection,
        ExecutorError::MalformedResponse { .. } => AttemptOutcome::MalformedResponse,
        ExecutorError::EmptyResponse { .. } => AttemptOutcome::EmptyResponse,
        ExecutorError::Io { .. } => AttemptOutcome::Io,
        ExecutorError::NothingPending { .. } => AttemptOutcome::NothingPending,
        ExecutorError::EmptySubmission { .. } => AttemptOutcome::EmptySubmission,
        ExecutorError::BadFile { .. } => AttemptOutcome::BadFile,
        ExecutorError::ReplayExhausted { .. } => AttemptOutcome::ReplayExhausted,
        ExecutorError::ReplayDiverged { .. } => AttemptOutcome::ReplayDiverged,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_verdict_is_recorded_under_its_own_category() {
        let wrong: Verdict = serde_json::from_value(serde_json::json!({
            "category": "wrong-output", "array": "c", "relative_error": 1.0, "tolerance": 0.001, "max_error": 1.0,
            "mean_error": 0.5, "worst_index": 3, "worst_value": 0.0, "worst_expected": 1.0, "non_finite": 0
        }))
        .unwrap();
        let s = String::new;
        let verdicts = [
            Verdict::Passed,
            Verdict::CompileFailed { message: s(), log: s(), options: s() },
            Verdict::InvalidConfig { reason: s() },
            Verdict::LaunchFailed { message: s() },
            Verdict::Crashed { message: s() },
            Verdict::TimedOut { message: s() },
            wrong,
            Verdict::ModifiedInput { arrays: vec![] },
            Verdict::SanitizerFinding { findings: vec![] },
        ];
        for v in &verdicts {
            assert_eq!(of_verdict(v).as_str(), v.category());
        }
    }

    #[test]
    fn an_executor_error_is_recorded_under_its_own_kind() {
        let (m, p, s) = (|| "m".to_string(), || PathBuf::from("f"), String::new);
        let errors = [
            ExecutorError::MissingApiKey { provider: m(), env_var: m() },
            ExecutorError::Http { model: m(), status: 500, body: s() },
            ExecutorError::RetriesExhausted { model: m(), status: 429, attempts: 3, body: s() },
            ExecutorError::Timeout { model: m(), after: Duration::from_secs(1) },
            ExecutorError::Connection { model: m(), url: s(), detail: s() },
            ExecutorError::MalformedResponse { model: m(), detail: s() },
            ExecutorError::EmptyResponse { model: m() },
            ExecutorError::Io { path: p(), source: std::io::Error::other("x") },
            ExecutorError::NothingPending { dir: p() },
            ExecutorError::EmptySubmission { file: p() },
            ExecutorError::BadFile { file: p(), message: s() },
            ExecutorError::ReplayExhausted { pass: 1, attempt: 0, recorded: 0 },
            ExecutorError::ReplayDiverged { pass: 1, attempt: 0, recorded_pass: 2, recorded_attempt: 0 },
        ];
        for e in &errors {
            assert_eq!(of_executor(e).as_str(), e.kind());
        }
    }

    #[test]
    fn a_reply_that_cannot_be_read_is_an_unparsable_reply() {
        let outside = ReplyError::EditOutsideRegion { target: peak_spec::Region::Device, reason: "x".into() };
        assert_eq!(of_reply(&outside).as_str(), "edit-outside-region");
        assert_eq!(of_reply(&ReplyError::Unchanged).as_str(), ReplyError::Unchanged.kind());
        for err in [ReplyError::NoCodeBlock, ReplyError::UnterminatedCodeBlock, ReplyError::EmptyCodeBlock] {
            assert_eq!(of_reply(&err), AttemptOutcome::UnparsableReply, "{err}");
        }
    }
}
