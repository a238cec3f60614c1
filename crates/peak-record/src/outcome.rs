//! [`AttemptOutcome`]: how one try at a transformation ended, the `outcome` of an
//! attempts-log record.
//!
//! # Design
//!
//! The outcome names are research data that outlives the code that wrote them: logs
//! written by older peaks travel inside bundles and clones, and `peak report` reads them
//! years later. So the type is closed for writing (every outcome peak records is a variant
//! here, spelled once) but open for reading: a name this peak does not know, whether from
//! an older or a newer peak, reads as [`AttemptOutcome::Other`] with its text kept, and is
//! written back unchanged. Failing the whole log, or dropping the name for a catch-all, would
//! lose records; the fallback variant keeps them, while code that compares outcomes matches
//! on variants instead of strings.
//!
//! The names are those of the producers' own vocabularies, kept identical: a verdict's
//! category (`peak_eval::Verdict::category`), a reply error (`unparsable-reply`,
//! `edit-outside-region`) and an executor error's kind
//! (`peak_transform::ExecutorError::kind`). This crate sees none of those crates, so the
//! mappings from their types live in `peak-apply` (`peak_apply::outcome`), each tested to give
//! the producer's own string.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! outcomes {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// How one attempt ended. Serialised as its kebab-case name (`"compile-failed"`).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum AttemptOutcome {
            $($(#[$doc])* $variant,)*
            /// A name this peak does not know (written by another version), kept as read.
            Other(String),
        }

        impl AttemptOutcome {
            /// Every named outcome, in declaration order (not [`AttemptOutcome::Other`]).
            pub const ALL: &'static [AttemptOutcome] = &[$(AttemptOutcome::$variant,)*];

            /// The name as recorded.
            pub fn as_str(&self) -> &str {
                match self {
                    $(AttemptOutcome::$variant => $name,)*
                    AttemptOutcome::Other(name) => name,
                }
            }

            /// The outcome of a recorded name; unknown names are [`AttemptOutcome::Other`].
            pub fn parse(name: &str) -> AttemptOutcome {
                match name {
                    $($name => AttemptOutcome::$variant,)*
                    other => AttemptOutcome::Other(other.to_string()),
                }
            }
        }
    };
}

outcomes! {
    /// A start marker: the attempt began. Written by
    /// [`Workflow::start_attempt`](crate::Workflow::start_attempt).
    Started => "started",
    /// The candidate validated, and a checkpoint was written.
    Passed => "passed",
    /// Compile-checked only (`--defer`); a checkpoint was written, to be validated later.
    Deferred => "deferred",
    // Verdicts against a candidate (`peak_eval::Verdict::category`).
    /// The candidate did not compile.
    CompileFailed => "compile-failed",
    /// Every sampled configuration was pruned.
    InvalidConfig => "invalid-config",
    LaunchFailed => "launch-failed",
    Crashed => "crashed",
    TimedOut => "timed-out",
    WrongOutput => "wrong-output",
    /// An input array not marked `inout` changed during the run.
    ModifiedInput => "modified-input",
    /// compute-sanitizer reported a finding (during validation or on the tuned winner).
    SanitizerFinding => "sanitizer-finding",
    // Replies that could not be used.
    /// No usable code block in the reply.
    UnparsableReply => "unparsable-reply",
    /// The reply changed a region other than the pass's.
    EditOutsideRegion => "edit-outside-region",
    /// The answers left every region exactly as it was.
    Unchanged => "unchanged",
    // Executor failures (`peak_transform::ExecutorError::kind`).
    MissingApiKey => "missing-api-key",
    HttpError => "http-error",
    RetriesExhausted => "retries-exhausted",
    Timeout => "timeout",
    /// The server could not be reached, so no model was asked.
    Connection => "connection",
    MalformedResponse => "malformed-response",
    EmptyResponse => "empty-response",
    Io => "io",
    NothingPending => "nothing-pending",
    EmptySubmission => "empty-submission",
    BadFile => "bad-file",
    ReplayExhausted => "replay-exhausted",
    ReplayDiverged => "replay-diverged",
}

impl AttemptOutcome {
    /// An outcome that produced a checkpoint (`passed`, `deferred`).
    pub fn is_success(&self) -> bool {
        matches!(self, AttemptOutcome::Passed | AttemptOutcome::Deferred)
    }

    /// The kind of failure a failed try counts as in `peak report`'s and `peak study`'s
    /// tables (one of [`FAILURE_KINDS`]).
    pub fn failure_kind(&self) -> &'static str {
        use AttemptOutcome as O;
        match self {
            O::UnparsableReply | O::EditOutsideRegion => "bad-reply",
            O::CompileFailed => "compile-failed",
            O::WrongOutput | O::ModifiedInput => "wrong-output",
            O::SanitizerFinding => "sanitizer-finding",
            O::Crashed | O::LaunchFailed => "crashed",
            O::TimedOut => "timed-out",
            O::InvalidConfig => "invalid",
            _ => "other",
        }
    }
}

/// The failure kinds, in the order tables and figures show them.
pub const FAILURE_KINDS: [&str; 8] = ["bad-reply", "compile-failed", "wrong-output", "sanitizer-finding", "crashed", "timed-out", "invalid", "other"];

/// A start marker, so that `..Attempt::default()` describes an attempt that has begun.
impl Default for AttemptOutcome {
    fn default() -> Self {
        AttemptOutcome::Started
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AttemptOutcome {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(AttemptOutcome::parse(s))
    }
}

impl From<&str> for AttemptOutcome {
    fn from(s: &str) -> Self {
        AttemptOutcome::parse(s)
    }
}

impl Serialize for AttemptOutcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AttemptOutcome {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(AttemptOutcome::parse(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_round_trips_through_json_as_its_kebab_case_name() {
        for outcome in AttemptOutcome::ALL {
            let json = serde_json::to_string(outcome).unwrap();
            assert_eq!(json, format!("\"{}\"", outcome.as_str()));
            let name = outcome.as_str();
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{name} is kebab-case");
            assert_eq!(&serde_json::from_str::<AttemptOutcome>(&json).unwrap(), outcome);
            assert!(!matches!(AttemptOutcome::parse(name), AttemptOutcome::Other(_)), "{name} parses to its variant");
        }
        let names: std::collections::HashSet<&str> = AttemptOutcome::ALL.iter().map(AttemptOutcome::as_str).collect();
        assert_eq!(names.len(), AttemptOutcome::ALL.len(), "no two variants share a name");
    }

    #[test]
    fn the_names_recorded_today_read_as_their_variants() {
        let cases = [
            ("passed", AttemptOutcome::Passed),
            ("compile-failed", AttemptOutcome::CompileFailed),
            ("sanitizer-finding", AttemptOutcome::SanitizerFinding),
            ("wrong-output", AttemptOutcome::WrongOutput),
            ("unparsable-reply", AttemptOutcome::UnparsableReply),
            ("started", AttemptOutcome::Started),
            ("deferred", AttemptOutcome::Deferred),
        ];
        for (name, want) in cases {
            assert_eq!(serde_json::from_str::<AttemptOutcome>(&format!("\"{name}\"")).unwrap(), want);
        }
    }

    #[test]
    fn an_unknown_name_reads_and_writes_back_unchanged() {
        let read: AttemptOutcome = serde_json::from_str("\"quantum-decoherence\"").unwrap();
        assert_eq!(read, AttemptOutcome::Other("quantum-decoherence".into()));
        assert!(!read.is_success());
        assert_eq!(serde_json::to_string(&read).unwrap(), "\"quantum-decoherence\"");
        assert_eq!(read.to_string(), "quantum-decoherence");
    }
}
