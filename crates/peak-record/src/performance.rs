//! `performance.json`: how fast a checkpoint's code ran, written by `peak_apply::measure`
//! (tuning every input configuration), then `check_winner` (the sanitizer on the winner).
//! A deferred checkpoint's is empty (`{}`), to be measured by `peak replay`.

use indexmap::IndexMap;
use peak_spec::ExecParams;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Record;
use crate::spread::Spread;

/// `kind` of a yardstick that was not timed (`reason` says why).
pub const NOT_AVAILABLE: &str = "n/a";

/// `performance.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerformanceRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
    /// The fastest configuration of the last input configuration that ran (the largest
    /// problem, as manifests list sizes in increasing order): the headline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<Ranked>,
    /// The headline run's ranking, fastest first (seeds the next step's search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<Vec<Ranked>>,
    /// Seconds spent tuning, every input configuration together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    /// One tuning run per input configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<Run>>,
    /// The yardstick at the headline's inputs; absent in records made before yardsticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Faster configurations the sanitizer found fault with, dropped from `top_k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer_rejected: Option<Vec<Rejected>>,
    /// The sanitizer's check of the winner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer_winner: Option<SanitizerWinner>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PerformanceRecord {
    /// The headline ranking (`top_k`), empty if none was recorded.
    pub fn top_k(&self) -> &[Ranked] {
        self.top_k.as_deref().unwrap_or_default()
    }

    /// The per-input-configuration runs, empty if none were recorded.
    pub fn runs(&self) -> &[Run] {
        self.runs.as_deref().unwrap_or_default()
    }

    /// The headline time, in milliseconds.
    pub fn best_ms(&self) -> Option<f64> {
        self.best.as_ref().map(|b| b.time_ms)
    }

    /// The run at these inputs.
    pub fn run_at(&self, inputs: &IndexMap<String, i64>) -> Option<&Run> {
        self.runs().iter().find(|r| &r.inputs == inputs)
    }
}

/// The headline configuration exactly as a stored `performance.json` holds it (`best`'s
/// `params`), for a reader that shows it without interpreting it (`peak diff`).
pub fn recorded_best_params(performance: &Value) -> Option<Value> {
    performance.get("best")?.get("params").cloned()
}

impl Record for PerformanceRecord {
    const FILE: &'static str = "performance.json";
    fn format(&self) -> Option<u32> {
        self.format
    }
}

/// One ranked configuration: its parameters, its median time and, beside it, the spread
/// of the repetitions it came from (absent in records made before spreads were kept).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// Read leniently: a hand-written or older entry may name only its inputs.
    #[serde(default, deserialize_with = "lenient_params")]
    pub params: ExecParams,
    pub time_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The tuning of one input configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    #[serde(default)]
    pub inputs: IndexMap<String, i64>,
    /// `null` where no configuration ran.
    #[serde(default)]
    pub best: Option<Ranked>,
    #[serde(default)]
    pub top_k: Vec<Ranked>,
    /// Configurations evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations: Option<u64>,
    /// Size of the search space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Why the strategy was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Best so far after each improvement, for `peak report`'s convergence curves; absent
    /// in records made before curves were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<Vec<CurvePoint>>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The best time after `evaluations` configurations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub evaluations: u64,
    pub best_ms: f64,
}

/// A configuration the sanitizer rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    pub params: ExecParams,
    pub time_ms: f64,
    /// Where it was sanitized (a small size, or where it was timed).
    pub sanitized_at: ExecParams,
    /// The `peak_eval::Verdict`, as written.
    pub verdict: Value,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `sanitizer_winner`: the sanitizer's check of the tuned winner.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SanitizerWinner {
    pub ran: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Configurations checked (rejected ones and the clean one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean: Option<bool>,
    /// One line, for people; why it did not run when it did not.
    #[serde(default)]
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Fields this peak does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `performance.json`'s `baseline`: the yardstick (`peak_eval::time_yardstick`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `cublaslt`, `copy`, or [`NOT_AVAILABLE`].
    pub kind: String,
    /// The median, timed as the kernel's times are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// The inputs it was timed at: the headline's.
    pub inputs: IndexMap<String, i64>,
    /// What ran, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// The bytes a copy copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Bytes written before every timed run to evict the cache; absent: not flushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flushed_bytes: Option<usize>,
    /// Why there is no time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Wall seconds the yardstick took, the worker's round trip included; absent in the
    /// records of the first yardsticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
}

/// [`ExecParams`] with either half missing read as empty.
fn lenient_params<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<ExecParams, D::Error> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(default)]
        inputs: IndexMap<String, i64>,
        #[serde(default)]
        tuning: IndexMap<String, i64>,
    }
    let Params { inputs, tuning } = Params::deserialize(deserializer)?;
    Ok(ExecParams { inputs, tuning })
}
