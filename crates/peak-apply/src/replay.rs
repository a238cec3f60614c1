//! Re-running a recorded workflow's responses on this machine: every step is validated
//! and tuned again here, so anyone can reproduce a workflow without the model that made it.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use peak_eval::Workers;
use peak_transform::{ReplayExecutor, Transcript};
use peak_workflow::Workflow;

use crate::apply::apply_with;
use crate::init::{InitOptions, init_workflow};
use crate::{ApplyOptions, ApplyOutcome, ApplyReporter};

/// Replay the checkpoints on `source`'s current branch (root first) into a new workflow at
/// `into`. `options` carries the validation, tuning and library settings; its
/// transformation and executor are taken from each recorded step.
pub fn replay(source: &Path, into: &Path, options: &ApplyOptions, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<Vec<ApplyOutcome>> {
    let recorded = Workflow::open(source)?;
    let mut chain = Vec::new();
    let mut rev = recorded.head()?.id.to_string();
    loop {
        let view = recorded.show(&rev)?;
        let parent = view.parents.first().map(|p| p.to_string());
        chain.push(view);
        match parent {
            Some(p) => rev = p,
            None => break,
        }
    }
    chain.reverse();
    let root = chain.first().ok_or_else(|| anyhow!("{}: the workflow has no checkpoints", source.display()))?;
    let seed = root.reference["seed"].as_u64().unwrap_or(options.seed);
    let root_dir = into.with_extension("root-context");
    let _ = std::fs::remove_dir_all(&root_dir);
    recorded.materialize(&root.id.to_string(), &root_dir)?;
    let init = InitOptions {
        seed,
        measure: true,
        sanitize: options.sanitize.clone(),
        sanitize_winner: options.sanitize_winner,
        budget: options.budget,
        time_limit: options.time_limit,
        set: options.set.clone(),
        cache_dir: options.cache_dir.clone(),
    };
    let result = init_workflow(into, &root_dir, &init, workers, reporter.tuning());
    let _ = std::fs::remove_dir_all(&root_dir);
    result.with_context(|| format!("replaying the root of {}", source.display()))?;

    let mut outcomes = Vec::new();
    for step in &chain[1..] {
        let transcript: Transcript = serde_json::from_value(step.transcript["entries"].clone())
            .map(|entries| Transcript { entries })
            .with_context(|| format!("checkpoint {}: transcript.json has no replayable entries", step.id.short()))?;
        let repairs = transcript.entries.iter().map(|e| e.attempt).max().unwrap_or(1).saturating_sub(1);
        let step_options = ApplyOptions { transformation: step.meta.transformation.clone(), retries: repairs, ..options.clone() };
        let producers: Vec<&str> = transcript.entries.iter().map(|e| e.producer.as_str()).collect();
        let label = format!("replay of {}", producers.first().copied().unwrap_or("nothing"));
        let executor = ReplayExecutor::new(transcript.clone());
        let outcome = apply_with(into, &step_options, "replay", &executor, workers, reporter)?;
        if !matches!(outcome, ApplyOutcome::Checkpoint { .. }) {
            bail!("replaying {} ({label}) did not reproduce checkpoint {}: {outcome:?}", step.meta.transformation, step.id.short());
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}
