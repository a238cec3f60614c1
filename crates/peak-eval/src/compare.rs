//! Timing two contexts against each other: the same inputs on both sides, repetitions
//! interleaved (A, B, A, B, ...) so drift in clocks or temperature hits both alike, each
//! run in the crash-isolated worker. Used by `peak compare` and the MCP server.

use peak_backend::RunOptions;
use peak_backend::Spread;
use peak_backend::worker::Job;
use peak_record::{PerformanceRecord, Record};
use peak_spec::{Context, ExecParams};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::EvalError;
use crate::hash::device_identity;
use crate::workers::Workers;
use crate::workers::absolute;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    pub checkpoint: String,
    pub params: ExecParams,
    pub median_ms: f64,
    /// Count, min, quartiles and max of this side's repetitions.
    pub spread: Spread,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareReport {
    pub a: Side,
    pub b: Side,
    /// time(a) / time(b): above 1 means B is faster.
    pub speedup_b_over_a: f64,
    /// The two sides' interquartile ranges overlap: the difference is within the noise
    /// of the measurement.
    pub within_spread: bool,
    pub repetitions: usize,
    pub device: String,
}

/// What a line says of a speedup within the spread of the times it compares.
pub const WITHIN_SPREAD: &str = "within spread";

impl CompareReport {
    /// `speedup of B over A: 1.004x, within spread (...) (20 interleaved repetitions on DEVICE)`.
    pub fn summary(&self) -> String {
        let note = if self.within_spread {
            format!(", {WITHIN_SPREAD}: the interquartile ranges overlap, so the difference is within the noise")
        } else {
            String::new()
        };
        format!(
            "speedup of {} over {}: {:.3}x{note} ({} interleaved repetitions on {})",
            self.b.checkpoint, self.a.checkpoint, self.speedup_b_over_a, self.repetitions, self.device
        )
    }
}

/// A checkpoint's best configuration from its `performance.json` when it has one the
/// restricted space allows, else the first point of the space. `set` narrows either.
pub fn best_params(performance: &Value, ctx: &Context, set: &[String]) -> Result<ExecParams, EvalError> {
    let mut space = ctx.space();
    space.apply_overrides(set).map_err(|e| EvalError::Space { context: ctx.dir.display().to_string(), message: format!("--set: {e}") })?;
    // A record that does not read has no best: the space's first point stands in.
    if let Some(best) = PerformanceRecord::from_json(performance).ok().and_then(|p| p.best)
        && space.iter().any(|p| p == best.params)
    {
        return Ok(best.params);
    }
    space.iter().next().ok_or_else(|| EvalError::Space {
        context: ctx.dir.display().to_string(),
        message: "no execution parameter satisfies the constraints (after --set)".into(),
    })
}

/// Time `a` and `b` (label, context, parameters) `reps` times each, interleaved, as every
/// time in peak is (`peak_backend::timing`; `flush_cache`: the cache flushed before each
/// run). B runs with A's inputs, so both sides solve the same problem.
pub fn compare(
    workers: &mut Workers,
    a: (&str, &Context, ExecParams),
    b: (&str, &Context, ExecParams),
    reps: usize,
    flush_cache: bool,
) -> Result<CompareReport, EvalError> {
    let (label_a, ctx_a, params_a) = a;
    let (label_b, ctx_b, mut params_b) = b;
    for (name, value) in &params_a.inputs {
        params_b.inputs.insert(name.clone(), *value);
    }
    let options = RunOptions { warmup: 1, repetitions: 1, data_seed: 1, flush_cache, ..RunOptions::default() };
    let mut once = |ctx: &Context, params: &ExecParams| -> Result<f64, EvalError> {
        let job = Job::new(absolute(&ctx.dir), params.clone(), options.clone());
        match workers.pool(ctx.backend().name())?.run(job)? {
            Ok(report) => report.median_ms().ok_or_else(|| EvalError::RunFailed {
                context: ctx.dir.display().to_string(),
                params: params.to_string(),
                category: "no-time".into(),
                message: "the run reported no time".into(),
            }),
            Err(failure) => Err(EvalError::RunFailed {
                context: ctx.dir.display().to_string(),
                params: params.to_string(),
                category: failure.category.name().into(),
                message: failure.message,
            }),
        }
    };
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        ta.push(once(ctx_a, &params_a)?);
        tb.push(once(ctx_b, &params_b)?);
    }
    let (sa, sb) = (Spread::of(&ta).expect("at least one repetition"), Spread::of(&tb).expect("at least one repetition"));
    let device = device_identity(workers.pool(ctx_a.backend().name())?.device());
    Ok(CompareReport {
        a: Side { checkpoint: label_a.to_string(), params: params_a, median_ms: sa.median_ms, spread: sa },
        b: Side { checkpoint: label_b.to_string(), params: params_b, median_ms: sb.median_ms, spread: sb },
        speedup_b_over_a: sa.median_ms / sb.median_ms,
        within_spread: sa.overlaps(&sb),
        repetitions: reps.max(1),
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(a: &[f64], b: &[f64]) -> CompareReport {
        let side = |name: &str, times: &[f64]| {
            let spread = Spread::of(times).unwrap();
            Side { checkpoint: name.into(), params: ExecParams::default(), median_ms: spread.median_ms, spread }
        };
        let (a, b) = (side("A", a), side("B", b));
        CompareReport { speedup_b_over_a: a.median_ms / b.median_ms, within_spread: a.spread.overlaps(&b.spread), a, b, repetitions: 3, device: "dev".into() }
    }

    #[test]
    fn the_summary_says_when_a_difference_is_within_the_spread() {
        let near = report(&[1.0, 1.1, 1.2], &[1.05, 1.15, 1.25]);
        assert!(near.within_spread && near.summary().contains(WITHIN_SPREAD), "{}", near.summary());
        let far = report(&[2.0, 2.1, 2.2], &[1.0, 1.1, 1.2]);
        assert!(!far.within_spread && !far.summary().contains(WITHIN_SPREAD), "{}", far.summary());
        assert!(far.summary().starts_with("speedup of B over A: 1.909x"), "{}", far.summary());
    }
}
