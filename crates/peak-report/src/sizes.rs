//! The input sizes a step was tuned at besides its headline: one row each in the report's
//! step tables, as `peak log --sizes` gives one line each (`performance.json`'s `runs`).

use peak_record::PerformanceRecord;
use peak_spec::ExecParams;
use peak_workflow::LogEntry;
use serde::Serialize;
use serde_json::Value;

/// One more input size a step was tuned at, with its best time and the speedups taken at
/// that same size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSize {
    pub inputs: Value,
    pub best_time_ms: f64,
    /// The root's time at these inputs over this one's; `None` where the root was not timed here.
    pub speedup_over_root: Option<f64>,
    /// The previous step's time at these inputs over this one's.
    pub speedup_over_previous: Option<f64>,
    /// From the manifest's `kernel.flops` at this size's best configuration.
    pub tflops: Option<f64>,
}

/// Every size `entry` was tuned at but its headline's, in the order they were tuned.
/// `tflops` gives the rate of a time at a configuration (`best.params` of a run).
pub(crate) fn other_sizes(entry: &LogEntry, performance: &PerformanceRecord, tflops: impl Fn(&ExecParams, f64) -> Option<f64>) -> Vec<StepSize> {
    entry
        .sizes
        .iter()
        .filter(|s| s.inputs.is_some() && s.inputs != entry.best_inputs)
        .filter_map(|s| {
            let inputs = s.inputs.clone()?;
            let best = serde_json::from_value(inputs.clone()).ok().and_then(|at| performance.run_at(&at)?.best.as_ref());
            Some(StepSize {
                tflops: best.and_then(|b| tflops(&b.params, s.best_time_ms)),
                inputs,
                best_time_ms: s.best_time_ms,
                speedup_over_root: s.speedup_over_root,
                speedup_over_previous: s.speedup_over_parent,
            })
        })
        .collect()
}
