//! Creating a workflow, and measuring a context into a `performance.json`.

use std::path::Path;

use anyhow::{Result, bail};
use indexmap::IndexMap;
use peak_eval::tune::Entry;
use peak_eval::{StrategyKind, TuneOptions, TuneReporter, TuneSetup, Workers, default_cache_dir, time_yardstick, tune_context};
use peak_record::{CurvePoint, PerformanceRecord, Ranked, Record, ReferenceRecord, Run};
use peak_spec::{Context, ExecParams, Space};
use peak_workflow::{ROOT_TAG, RootInput, Workflow};
use serde_json::{Map, Value, json};

use crate::Settings;
use crate::sanitize::Plan;
use crate::winner::check_winner;

#[derive(Debug, Clone)]
pub struct InitOptions {
    /// Tune the root so later checkpoints have a speedup over it.
    pub measure: bool,
    /// The seed of the reference inputs and of the search, how the root is tuned and how
    /// its winner is sanitized (`settings.sanitizer.winner`: check it, falling back along
    /// its top-K); its validation-sample counts are not used (the root is the reference).
    pub settings: Settings,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions { measure: true, settings: Settings::default() }
    }
}

/// The space a command works on: the context's, narrowed by `NAME=VALUE` restrictions.
pub fn restricted(ctx: &Context, set: &[String]) -> Result<Space> {
    let mut space = ctx.space();
    space.apply_overrides(set)?;
    if space.iter().next().is_none() {
        bail!("{}: no execution parameter satisfies the constraints (after --set)", ctx.manifest_path().display());
    }
    Ok(space)
}

/// The space validation samples from: `restricted`, with the inputs moved to the
/// manifest's `[validation] inputs` sizes (those `set` does not fix).
pub fn validation_space(ctx: &Context, set: &[String]) -> Result<Space> {
    let mut space = restricted(ctx, set)?;
    space.at_validation_sizes(&ctx.manifest, set)?;
    if space.iter().next().is_none() {
        bail!("{}: no execution parameter satisfies the constraints at the [validation] sizes", ctx.manifest_path().display());
    }
    Ok(space)
}

/// Create a workflow whose root checkpoint is `context_dir`, measured unless asked not to.
/// The `set` restrictions of input sizes are stored in `reference.json`, and later steps
/// work at those sizes unless told otherwise ([`with_stored_set`]).
pub fn init_workflow(dir: &Path, context_dir: &Path, options: &InitOptions, workers: &mut Workers, reporter: &dyn TuneReporter) -> Result<Workflow> {
    // Checked before the root is tuned: a folder taken fails in a moment, not after minutes.
    Workflow::check_new_dir(dir)?;
    let ctx = Context::load(context_dir)?;
    let space = restricted(&ctx, &options.settings.set)?;
    let mut inputs: Vec<Value> = Vec::new();
    for point in space.iter() {
        let value = serde_json::to_value(&point.inputs)?;
        if !inputs.contains(&value) {
            inputs.push(value);
        }
    }
    let sizes: Vec<&String> = options.settings.set.iter().filter(|s| setting_name(s).is_some_and(|n| ctx.manifest.inputs.contains_key(n))).collect();
    let reference = json!({ "context": ctx.name(), "backend": ctx.backend().name(), "seed": options.settings.seed, "inputs": inputs, "set": sizes });
    let performance = if options.measure {
        // Resolved before tuning, so a sanitizer asked for but missing fails at once.
        let plan = if options.settings.sanitizer.winner {
            Some(Plan::for_context(&options.settings.sanitizer.tools, &options.settings.sanitizer.at, &ctx)?)
        } else {
            None
        };
        let mut performance = measure(workers, &ctx, &space, None, &options.settings, Vec::new(), reporter)?;
        if let Some(why) = check_winner(workers, plan.as_ref(), &ctx, &validation_space(&ctx, &options.settings.set)?, options.settings.seed, &mut performance)?
        {
            bail!("{}: {why}\nhint: fix the kernel, or record it unchecked with `--no-sanitize-winner`", context_dir.display());
        }
        Some(performance.to_json())
    } else {
        None
    };
    Ok(Workflow::init_with(dir, context_dir, RootInput { reference, performance, executor: Some("user".into()), ..RootInput::default() })?)
}

/// The name a `NAME=VALUE` setting restricts.
pub(crate) fn setting_name(setting: &str) -> Option<&str> {
    setting.split_once('=').map(|(name, _)| name.trim())
}

/// `given` settings, followed by the `stored` ones (a `reference.json`'s `set`: the input
/// sizes the workflow was created at) whose names `given` does not restrict.
pub(crate) fn merge_set(given: &[String], stored: &[String]) -> Vec<String> {
    let named: Vec<&str> = given.iter().filter_map(|s| setting_name(s)).collect();
    let kept = stored.iter().filter(|s| setting_name(s).is_none_or(|n| !named.contains(&n)));
    given.iter().chain(kept).cloned().collect()
}

/// The `--set` sizes a root was made at (`reference.json`'s `set`); none where the record
/// names none or does not read (older records stored none).
pub(crate) fn stored_set(reference: &Value) -> Vec<String> {
    ReferenceRecord::from_json(reference).ok().and_then(|r| r.set).unwrap_or_default()
}

/// `given` settings with the input sizes `peak init` (or `peak replay`) was given for the
/// workflow: a step validates and tunes at the sizes its reference was made at unless
/// `--set` names other ones.
pub(crate) fn with_stored_set(wf: &Workflow, given: &[String]) -> Result<Vec<String>> {
    Ok(merge_set(given, &stored_set(&wf.show(ROOT_TAG)?.reference)))
}

/// The tuning of every entry of a ranking `measure` wrote (a `top_k` list), best first.
pub(crate) fn ranked_tunings(ranking: &[Ranked]) -> impl Iterator<Item = IndexMap<String, i64>> + '_ {
    ranking.iter().map(|e| e.params.tuning.clone())
}

/// Tune `ctx` over `space` (checking outputs against `reference`, or against the
/// context's own first configuration) and summarise it as `performance.json`:
/// `best` is the fastest configuration of the last input configuration (the largest
/// problem, as manifests list sizes in increasing order); `runs` holds every input
/// configuration's best and top-K; `baseline` is the yardstick timed at `best`'s inputs
/// (`peak_eval::yardstick`: cuBLASLt for a GEMM, a copy of the bytes moved otherwise, or
/// `"n/a"` with the reason). The search follows `settings` (its tuning limits, seed and
/// cache) and starts at `start_from` (a parent's top-K, or nothing).
pub fn measure(
    workers: &mut Workers,
    ctx: &Context,
    space: &Space,
    reference: Option<&Context>,
    settings: &Settings,
    start_from: Vec<IndexMap<String, i64>>,
    reporter: &dyn TuneReporter,
) -> Result<PerformanceRecord> {
    let cache_dir = settings.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let options = TuneOptions {
        strategy: StrategyKind::Auto,
        budget: settings.tuning.budget,
        time_limit: settings.tuning.time_limit,
        top_k: 128,
        seed: settings.seed,
        start_from,
    };
    let setup = TuneSetup { prune_spills: true, ..TuneSetup::new(ctx, space, reference, &cache_dir, options) };
    let report = tune_context(workers, &setup, reporter)?;
    let runs: Vec<Run> = report
        .runs
        .iter()
        .map(|run| Run {
            inputs: run.inputs.clone(),
            best: run.best.as_ref().map(|b| timed_entry(&run.inputs, b)),
            top_k: run.top.iter().map(|e| timed_entry(&run.inputs, e)).collect(),
            evaluations: Some(run.evaluations as u64),
            space: Some(run.space as u64),
            strategy: Some(run.strategy.clone()),
            why: Some(run.why.clone()),
            elapsed_s: Some(run.elapsed_s),
            // Best so far after each improvement, for `peak report`'s convergence curves.
            curve: Some(run.curve.iter().map(|p| CurvePoint { evaluations: p.evaluations as u64, best_ms: p.best_ms }).collect()),
            extra: Map::new(),
        })
        .collect();
    let Some((best, top_k)) = runs.iter().rev().find_map(|r| Some((r.best.clone()?, r.top_k.clone()))) else {
        let failures: Vec<String> = report.runs.iter().flat_map(|r| r.failure_examples.iter().map(|f| f.verdict.summary())).collect();
        bail!("{}: no configuration ran successfully{}", ctx.dir.display(), failures.first().map(|f| format!(" (e.g. {f})")).unwrap_or_default());
    };
    // Only the inputs matter to the yardstick; the winner may still change (check_winner),
    // they do not.
    let baseline = time_yardstick(workers, ctx, &best.params);
    Ok(PerformanceRecord {
        best: Some(best),
        top_k: Some(top_k),
        // Seconds spent tuning, every input configuration together (the paper's Table 5).
        elapsed_s: Some(report.runs.iter().map(|r| r.elapsed_s).sum::<f64>()),
        device: Some(report.device),
        source_hash: Some(report.source_hash),
        runs: Some(runs),
        baseline: Some(baseline),
        ..PerformanceRecord::default()
    })
}

/// One ranked configuration as `performance.json` holds it: its parameters, its median
/// time and, beside it, the spread of the repetitions it came from (count, min, quartiles,
/// max: `peak_backend::timing`).
fn timed_entry(inputs: &IndexMap<String, i64>, entry: &Entry) -> Ranked {
    Ranked { params: ExecParams { inputs: inputs.clone(), tuning: entry.tuning.clone() }, time_ms: entry.median_ms, spread: entry.spread, extra: Map::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_sizes_fill_in_what_set_does_not_name() {
        let stored = stored_set(&json!({"context": "x", "backend": "opencl", "inputs": [], "set": ["n=256", "batch=4"]}));
        assert_eq!(merge_set(&[], &stored), ["n=256", "batch=4"]);
        assert_eq!(merge_set(&["n=512".into(), "BM=16".into()], &stored), ["n=512", "BM=16", "batch=4"]);
        // A workflow made before sizes were stored has none.
        let older = stored_set(&json!({"context": "x", "backend": "opencl", "inputs": []}));
        assert_eq!(merge_set(&["n=512".into()], &older), ["n=512"]);
    }
}
