//! `checkpoint.json`: what a checkpoint is, in a few fields. `peak-workflow` writes it
//! with every commit.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Record;

/// `checkpoint.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// Format version of this file (it has carried one from the start).
    pub format: u32,
    /// The transformation that produced the checkpoint, or `init` for the root.
    pub transformation: String,
    /// The parent checkpoint's id (duplicates the commit's parent so the file is
    /// self-describing, and fsck can check the two agree).
    #[serde(default)]
    pub parent: Option<String>,
    /// `validation.json`'s `verdict`, copied for `git log` readers and quick listings.
    #[serde(default)]
    pub verdict: Option<String>,
    pub executor: String,
    #[serde(default)]
    pub model: Option<String>,
    /// RFC 3339, UTC.
    pub created: String,
    /// The attempt that produced it, if the caller recorded one.
    #[serde(default)]
    pub attempt: Option<String>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Record for CheckpointMeta {
    const FILE: &'static str = "checkpoint.json";
    fn format(&self) -> Option<u32> {
        Some(self.format)
    }
}
