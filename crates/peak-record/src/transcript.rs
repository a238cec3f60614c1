//! `transcript.json`: every request and reply of the transformation that made a
//! checkpoint, failed attempts included (`peak replay` plays it back), or, for a `Retune`
//! step, the settings it tuned with.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Record;

/// `transcript.json`. The root's is empty (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TranscriptRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformation: Option<String>,
    /// The executor as given (`agent`, `openai:gpt-5`, `user` for a retune).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    /// Who wrote the replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<TranscriptEntry>>,
    /// A `Retune` step's settings, which `peak replay` tunes with again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retune: Option<RetuneRecord>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TranscriptRecord {
    /// The recorded requests and replies (none for the root or a retune).
    pub fn entries(&self) -> &[TranscriptEntry] {
        self.entries.as_deref().unwrap_or_default()
    }
}

/// The latency of every recorded reply of a stored `transcript.json`, in milliseconds, read
/// entry by entry rather than as a [`TranscriptRecord`]: an entry that records its latency
/// but lacks another field (a hand-written or truncated transcript) still counts.
pub fn recorded_latencies_ms(transcript: &Value) -> Vec<f64> {
    transcript.get("entries").and_then(Value::as_array).into_iter().flatten().filter_map(|e| e.get("latency_ms")?.as_f64()).collect()
}

impl Record for TranscriptRecord {
    const FILE: &'static str = "transcript.json";
    fn format(&self) -> Option<u32> {
        self.format
    }
}

/// One request and its reply (`peak_transform::Transcript` holds a list of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// 1-based pass number.
    pub pass: usize,
    /// 1-based attempt number within the pass.
    pub attempt: u32,
    /// Who wrote the response: a model name or `agent`.
    pub producer: String,
    pub prompt: String,
    pub response: String,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub latency_ms: u64,
}

/// A `Retune` step's settings (`transcript.json`'s `retune`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetuneRecord {
    pub budget: Option<u64>,
    pub time_limit_s: Option<f64>,
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
