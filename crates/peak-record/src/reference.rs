//! `reference.json`: what the root was measured against, written once by `peak init`
//! (`peak_apply::init_workflow`) and carried by every checkpoint.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Record;

/// `reference.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
    /// The context's name.
    #[serde(default)]
    pub context: String,
    /// The backend's name (`cuda`, `opencl`, ...).
    #[serde(default)]
    pub backend: String,
    /// The seed every input was drawn from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The input configurations the root was measured at.
    #[serde(default)]
    pub inputs: Vec<IndexMap<String, i64>>,
    /// The `--set` sizes given to `init`, which later steps default to; absent in records
    /// made before they were stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<String>>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Record for ReferenceRecord {
    const FILE: &'static str = "reference.json";
    fn format(&self) -> Option<u32> {
        self.format
    }
}
