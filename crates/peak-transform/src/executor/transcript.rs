//! The record of every request and reply of one transformation, failed attempts included.
//!
//! Stored as JSON beside a checkpoint; [`super::ReplayExecutor`] plays it back. It holds
//! prompts and replies only: keys never reach an executor's output, so they cannot reach
//! a transcript.

use std::path::Path;

pub use peak_record::TranscriptEntry;
use serde::{Deserialize, Serialize};

use super::{ExecutorError, PassRequest, Response};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript {
    pub entries: Vec<TranscriptEntry>,
}

/// The entry of one request and its reply: the record type every reader of `transcript.json`
/// shares.
fn entry(request: &PassRequest, response: &Response) -> TranscriptEntry {
    TranscriptEntry {
        pass: request.pass,
        attempt: request.attempt,
        producer: response.producer.clone(),
        prompt: request.prompt.clone(),
        response: response.text.clone(),
        tokens_in: response.tokens_in,
        tokens_out: response.tokens_out,
        latency_ms: response.latency_ms,
    }
}

impl Transcript {
    pub fn push(&mut self, request: &PassRequest, response: &Response) {
        self.entries.push(entry(request, response));
    }

    pub fn load(path: &Path) -> Result<Transcript, ExecutorError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExecutorError::Io { path: path.to_path_buf(), source })?;
        serde_json::from_str(&text).map_err(|e| ExecutorError::BadFile { file: path.to_path_buf(), message: format!("not a transcript: {e}") })
    }

    pub fn save(&self, path: &Path) -> Result<(), ExecutorError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| ExecutorError::BadFile { file: path.to_path_buf(), message: e.to_string() })?;
        std::fs::write(path, text + "\n").map_err(|source| ExecutorError::Io { path: path.to_path_buf(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_round_trip_and_strictness() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let mut transcript = Transcript::default();
        let request = PassRequest { transformation: "Refactor".into(), pass: 1, attempt: 1, prompt: "p".into() };
        let response = Response { producer: "agent".into(), text: "r".into(), tokens_in: None, tokens_out: Some(3), latency_ms: 7 };
        transcript.push(&request, &response);
        transcript.save(&path).unwrap();
        assert_eq!(Transcript::load(&path).unwrap(), transcript);

        std::fs::write(&path, r#"{"entries": [], "extra": 1}"#).unwrap();
        let err = Transcript::load(&path).unwrap_err().to_string();
        assert!(err.contains("t.json") && err.contains("extra"), "{err}");
    }
}
