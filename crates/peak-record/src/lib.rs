//! The records a checkpoint holds, as serde types, and [`AttemptOutcome`].
//!
//! A checkpoint commits five JSON files beside its context (`peak-workflow` writes them as
//! given and reads them back as opaque values): `checkpoint.json` ([`CheckpointMeta`]),
//! `performance.json` ([`PerformanceRecord`]), `validation.json` ([`ValidationRecord`]),
//! `transcript.json` ([`TranscriptRecord`]) and `reference.json` ([`ReferenceRecord`]).
//! Every crate that writes or reads one goes through these types, so a field is spelled
//! once, here, and no caller indexes a record by string.
//!
//! # Design
//!
//! Records are research data that outlive the peak that wrote them (bundles travel, and
//! `peak report` and `peak replay` read them years later), so the types are written for
//! reading old files:
//! - **A format version.** Every record carries `format` ([`FORMAT`]); a record written
//!   before versions existed has none and reads as format 1, the layout it has.
//!   [`Record::from_json`] refuses a record of a newer format, naming it, rather than
//!   misreading it.
//! - **Nothing is lost.** A field this peak does not know (a newer peak's, or an older
//!   one's that was dropped) does not fail the read: each record keeps them in its
//!   flattened `extra` map and writes them back, so reading and writing a record loses
//!   nothing. Fields older records lack are `Option`s or default.
//! - **The bytes peak writes stay as they were.** Fields are declared in the order the
//!   writers have always put them (serde_json keeps insertion order in the binary), and
//!   absent optional fields are skipped, so the committed bundles under
//!   `examples/workflows/` and `bench/results/` read and compare as before.
//!
//! Parts of a record whose type belongs to a crate above this one (a `peak_eval::Verdict`,
//! a validation sample, the sanitizer's record) are kept as `serde_json::Value`, read by
//! that crate with its own type.

pub mod checkpoint;
pub mod outcome;
pub mod performance;
pub mod reference;
pub mod spread;
pub mod transcript;
pub mod validation;

pub use checkpoint::CheckpointMeta;
pub use outcome::AttemptOutcome;
pub use performance::{Baseline, CurvePoint, NOT_AVAILABLE, PerformanceRecord, Ranked, Rejected, Run, SanitizerWinner};
pub use reference::ReferenceRecord;
pub use spread::Spread;
pub use transcript::{RetuneRecord, TranscriptEntry, TranscriptRecord};
pub use validation::{CompileCheckSummary, ValidationRecord};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The format version this peak writes in every record.
pub const FORMAT: u32 = 1;

/// A record that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{file}: {message}")]
    Malformed { file: &'static str, message: String },
    #[error("{file} has format {format}, newer than this peak reads ({FORMAT}); upgrade peak")]
    Newer { file: &'static str, format: u32 },
}

/// What every record type shares: its file name, its format, and reading and writing it
/// as the JSON value `peak-workflow` stores.
pub trait Record: Serialize + DeserializeOwned + Default {
    /// The file name in a checkpoint (`performance.json`).
    const FILE: &'static str;

    /// The recorded format; `None` for a record written before formats existed.
    fn format(&self) -> Option<u32>;

    /// Read a stored record. `null` (a file not written) reads as the empty record.
    fn from_json(value: &Value) -> Result<Self, RecordError> {
        if value.is_null() {
            return Ok(Self::default());
        }
        let record = Self::deserialize(value).map_err(|e| RecordError::Malformed { file: Self::FILE, message: e.to_string() })?;
        match record.format() {
            Some(format) if format > FORMAT => Err(RecordError::Newer { file: Self::FILE, format }),
            _ => Ok(record),
        }
    }

    /// The value to store (`CheckpointInput`'s fields).
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a record is plain data and always serialises")
    }
}

/// `Some(FORMAT)`: the `format` of a record written now.
pub fn current() -> Option<u32> {
    Some(FORMAT)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_record_of_a_newer_format_is_refused_naming_the_file_and_the_format() {
        let err = PerformanceRecord::from_json(&json!({"format": FORMAT + 1, "best": null})).unwrap_err().to_string();
        assert!(err.contains("performance.json") && err.contains(&format!("format {}", FORMAT + 1)) && err.contains("upgrade peak"), "{err}");
        // This peak's own format, and none at all (written before formats), read.
        assert!(ValidationRecord::from_json(&json!({"format": FORMAT, "verdict": "passed"})).is_ok());
        assert_eq!(ValidationRecord::from_json(&json!({"verdict": "passed"})).unwrap().format(), None);
    }

    #[test]
    fn a_malformed_record_names_the_file_and_what_was_expected() {
        let err = PerformanceRecord::from_json(&json!({"best": {"params": {"inputs": {}, "tuning": {}}, "time_ms": "fast"}})).unwrap_err().to_string();
        assert!(err.starts_with("performance.json: ") && err.contains("expected f64"), "{err}");
        // A file never written reads as the empty record.
        assert_eq!(CheckpointMeta::from_json(&Value::Null).unwrap(), CheckpointMeta::default());
    }
}
