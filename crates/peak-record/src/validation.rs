//! `validation.json`: how a checkpoint's code was judged. Four writers, one layout: a
//! validated step (`peak_eval::ValidationReport`'s fields, then `verdict`, `elapsed_s`
//! and the sanitizer's record), a deferred one (`verdict`, `why`, `compile_check`,
//! `elapsed_s`), a retune (`verdict`, `retune_of`, `note`, `elapsed_s`) and the root
//! (`verdict`: `reference`). The fields are declared in that one order, which each
//! writer's follows, so every writer's bytes are as before.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Record;

/// `verdict` of a deferred checkpoint.
pub const DEFERRED: &str = "deferred";
/// `verdict` of the root.
pub const REFERENCE: &str = "reference";

/// `validation.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
    // `peak_eval::ValidationReport`'s fields, in its order.
    /// The candidate's folder when it was validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validators: Option<Vec<String>>,
    /// `passed`, `failed` or `inconclusive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Samples per deciding verdict category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<BTreeMap<String, u64>>,
    /// `peak_eval::SampleReport`s, as written (opaque here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices_served: Option<Vec<u64>>,
    /// `passed`, `deferred`, or `reference` for the root; copied into `checkpoint.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// Why a deferred checkpoint was not validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// A deferred checkpoint's compile check (`peak_apply::defer::CompileCheck`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_check: Option<CompileCheckSummary>,
    /// The checkpoint a retune tuned again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retune_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Wall seconds validation took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// The sanitizer plan's record (`peak_apply::sanitize::Record`), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<Value>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ValidationRecord {
    /// Whether the checkpoint was compile-checked only (`--defer`), to be validated by
    /// `peak replay`.
    pub fn is_deferred(&self) -> bool {
        self.verdict.as_deref() == Some(DEFERRED)
    }
}

impl Record for ValidationRecord {
    const FILE: &'static str = "validation.json";
    fn format(&self) -> Option<u32> {
        self.format
    }
}

/// What a deferred checkpoint's compile check says in brief: where it compiled, and how
/// many samples ended how; the samples themselves are kept as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompileCheckSummary {
    /// The device (or named architecture) it was compiled for.
    #[serde(default)]
    pub target: String,
    /// Samples per status (`compiled`, `invalid-config`, ...).
    #[serde(default)]
    pub counts: BTreeMap<String, u64>,
    /// The samples and anything else, as written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
