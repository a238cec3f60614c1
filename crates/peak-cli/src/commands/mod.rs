//! One module per command.

pub mod apply;
pub mod auto;
pub mod baseline;
pub mod branch;
pub mod bundle;
pub mod check;
pub mod checkout;
pub mod compare;
pub mod compile;
pub mod diff;
pub mod export;
pub mod fsck;
pub mod info;
pub mod init;
pub mod log;
pub mod mcp;
pub mod new;
pub mod pending;
pub mod profile;
pub mod replay;
pub mod report;
pub mod retune;
pub mod run;
pub mod show;
pub mod study;
pub mod submit;
pub mod tag;
pub mod transformations;
pub mod tune;
pub mod validate;
pub mod worker;

use anyhow::{Context as _, Result};
use peak_spec::{Context, ExecParams, Space};

use crate::cli::SetArgs;
use crate::usage;

/// Load a context folder; an unreadable or invalid one is a usage error.
pub fn load_context(path: &std::path::Path) -> Result<Context> {
    Context::load(path).map_err(usage)
}

/// The context's space restricted by `--set`.
pub fn restricted_space(ctx: &Context, set: &SetArgs) -> Result<Space> {
    let mut space = ctx.space();
    space.apply_overrides(&set.set).map_err(|e| usage(anyhow::anyhow!("--set: {e}")))?;
    Ok(space)
}

/// How `peak run` and `peak baseline` time, from their flags: the one method of
/// `peak_backend::timing`, with the flags' warm-up, repetitions, seed and cache flush.
pub fn timing_options(timing: &crate::cli::TimingArgs) -> peak_backend::RunOptions {
    peak_backend::RunOptions {
        warmup: timing.warmup,
        repetitions: timing.reps,
        data_seed: timing.data_seed,
        flush_cache: timing.cache.flush(),
        ..peak_backend::RunOptions::default()
    }
}

/// The first valid execution parameter after `--set`, or a clear error when none is left.
pub fn first_point(ctx: &Context, space: &Space) -> Result<ExecParams> {
    space
        .iter()
        .next()
        .with_context(|| format!("{}: no execution parameter satisfies the constraints (after --set)", ctx.manifest_path().display()))
        .map_err(usage)
}

/// Open the workflow a command works on; a folder that is not one is a usage error.
pub fn open_workflow(arg: &crate::cli::WorkflowArg) -> Result<peak_workflow::Workflow> {
    peak_workflow::Workflow::open(&arg.workflow).map_err(usage)
}

/// Worker processes for validation and tuning (`peak worker` children), placed where the
/// command was told (`--worker-launcher`, `--devices`).
pub fn workers(placement: &peak_backend::worker::launcher::Placement) -> peak_eval::Workers {
    peak_eval::Workers::peak(peak_backend::worker::PoolOptions::default(), placement.clone())
}

/// Apply settings from the shared measurement flags.
pub fn apply_options(m: &crate::cli::MeasureArgs) -> peak_apply::ApplyOptions {
    peak_apply::ApplyOptions { settings: m.settings(), ..peak_apply::ApplyOptions::default() }
}

/// Print how an apply ended; a failed apply exits 1.
pub fn report_outcome(outcome: &peak_apply::ApplyOutcome, json: bool) -> Result<()> {
    use peak_apply::ApplyOutcome;
    if json {
        crate::output::print_json(outcome)?;
    } else {
        match outcome {
            ApplyOutcome::Checkpoint { id, transformation, verdict, attempts, .. } if *verdict == peak_workflow::AttemptOutcome::Deferred => {
                println!(
                    "{transformation}: checkpoint {} deferred: compile-checked, not yet validated or tuned ({attempts} attempt record(s))",
                    &id[..id.len().min(10)]
                );
                println!("  on the GPU machine: peak bundle WORKFLOW FILE here, then peak replay FILE --into NEW there");
            }
            ApplyOutcome::Checkpoint { id, transformation, best_ms, speedup_over_parent, attempts, .. } => {
                let time = best_ms.map(crate::output::format_ms).unwrap_or_else(|| "-".into());
                let speedup = speedup_over_parent.map(|s| format!(", {s:.2}x over its parent")).unwrap_or_default();
                println!("{transformation}: checkpoint {} ({time}{speedup}; {attempts} attempt record(s))", &id[..id.len().min(10)]);
            }
            ApplyOutcome::Waiting { transformation, pass, passes, attempt, region, prompt_file, .. } => {
                println!("{transformation}: pass {pass}/{passes} (attempt {attempt}) waits for the new {region} region.");
                println!("  prompt: {}", prompt_file.display());
                println!("  write the region to a file, then: peak submit FILE");
            }
            ApplyOutcome::Failed { transformation, attempts, last_outcome, last_error } => {
                println!("{transformation}: failed after {attempts} attempt(s); last: {last_outcome}: {}", last_error.lines().next().unwrap_or_default());
                println!("  the workflow stays at its parent; every attempt is in the attempts log");
            }
        }
    }
    if matches!(outcome, ApplyOutcome::Failed { .. }) { Err(crate::Failed.into()) } else { Ok(()) }
}
