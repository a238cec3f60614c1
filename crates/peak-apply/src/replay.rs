//! Re-running a recorded workflow's responses on this machine: every step is validated
//! and tuned again here, so anyone can reproduce a workflow without the model that made it.
//!
//! It is also how a workflow authored where there is no GPU gets its results: its
//! deferred steps (compile-checked only) become validated, tuned checkpoints on the GPU
//! machine. The source may be a workflow folder or a bundle file carried there
//! (`peak bundle`), which is cloned to a temporary folder first; any chain in it can be
//! replayed, by branch, tag or checkpoint. Tags on the chain are carried over.
//!
//! A replay cut short (a batch job's time limit, a lost node) resumes: run it again with the
//! same `--into` and the steps already replayed there are kept, provided they are the
//! recorded chain's first steps, in order.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use peak_eval::Workers;
use peak_record::{Record, ReferenceRecord, TranscriptRecord};
use peak_spec::{MANIFEST_FILE, Manifest};
use peak_transform::{ReplayExecutor, Transcript};
use peak_workflow::{CheckpointView, ROOT_TAG, Workflow, clone_bundle, is_bundle};

use crate::apply::apply_with;
use crate::init::{InitOptions, init_workflow, merge_set, setting_name};
use crate::retune::{RETUNE, RetuneSettings, retune_in};
use crate::{ApplyOptions, ApplyOutcome, ApplyReporter, Settings, is_deferred};

/// Replay the checkpoints from the root to `tip` (a branch, tag or checkpoint of `source`;
/// its current branch when `None`) into a new workflow at `into`. `source` is a workflow or
/// a bundle file. `options` carries the validation, tuning and library settings; its
/// transformation and executor are taken from each recorded step.
pub fn replay(
    source: &Path,
    tip: Option<&str>,
    into: &Path,
    options: &ApplyOptions,
    workers: &mut Workers,
    reporter: &dyn ApplyReporter,
) -> Result<Vec<ApplyOutcome>> {
    // Kept until the replay ends: the unpacked bundle is read step by step.
    let unpacked;
    let recorded = if is_bundle(source) {
        unpacked = tempfile::Builder::new().prefix("peak-replay-").tempdir().context("a temporary folder for the bundle")?;
        clone_bundle(source, &unpacked.path().join("source")).with_context(|| format!("unpacking the bundle {}", source.display()))?
    } else {
        Workflow::open(source)?
    };
    let tip = match tip {
        Some(name) => recorded.resolve(name).with_context(|| format!("--branch {name}: not in {}", source.display()))?.to_string(),
        None => recorded.head()?.id.to_string(),
    };
    let chain = first_parent_chain(&recorded, &tip)?;
    if chain.is_empty() {
        bail!("{}: the workflow has no checkpoints", source.display());
    }
    check_settings_named(&options.settings.set, &chain)?;
    let done = match already_replayed(into, &chain)? {
        Some(replayed) => {
            // A replay stopped between a checkpoint and its tags leaves them unnamed.
            let mut existing = Workflow::open(into)?;
            for (recorded, replayed) in chain.iter().zip(&replayed) {
                let missing: Vec<String> = recorded.tags.iter().filter(|t| !replayed.tags.contains(t)).cloned().collect();
                carry_tags(&mut existing, &missing, &replayed.id.to_string())?;
            }
            replayed.len()
        }
        None => {
            replay_root(&recorded, &chain[0], into, &for_step(options, &chain[0])?, workers, reporter)
                .with_context(|| format!("replaying the root of {}", source.display()))?;
            1
        }
    };
    let mut replayed = Workflow::open(into)?;
    // One lock from the first step to the last: nothing else writes between the steps.
    replayed.hold_lock("replay")?;
    let mut outcomes = Vec::new();
    for step in &chain[done..] {
        // A setting naming a parameter a later step introduces applies from that step on.
        let options = &for_step(options, step)?;
        if step.meta.transformation == RETUNE {
            // No executor to replay: the same search again, with the budget it was given.
            let settings = RetuneSettings::recorded(&step.transcript).with_context(|| format!("checkpoint {}", step.id.short()))?;
            let outcome = retune_in(&mut replayed, &settings.over(options), "replay", workers, reporter)?;
            match &outcome {
                ApplyOutcome::Checkpoint { id, .. } => carry_tags(&mut replayed, &step.tags, id)?,
                _ => bail!("replaying {RETUNE} did not reproduce checkpoint {}: {outcome:?}", step.id.short()),
            }
            outcomes.push(outcome);
            continue;
        }
        let transcript = TranscriptRecord::from_json(&step.transcript)
            .ok()
            .and_then(|record| record.entries)
            .map(|entries| Transcript { entries })
            .with_context(|| format!("checkpoint {}: transcript.json has no replayable entries", step.id.short()))?;
        let repairs = transcript.entries.iter().map(|e| e.attempt).max().unwrap_or(1).saturating_sub(1);
        let step_options = ApplyOptions { transformation: step.meta.transformation.clone(), retries: repairs, ..options.clone() };
        let producers: Vec<&str> = transcript.entries.iter().map(|e| e.producer.as_str()).collect();
        let label = format!("replay of {}", producers.first().copied().unwrap_or("nothing"));
        let executor = ReplayExecutor::new(transcript.clone());
        let outcome = apply_with(&mut replayed, &step_options, "replay", &executor, workers, reporter)?;
        match &outcome {
            ApplyOutcome::Checkpoint { id, .. } => carry_tags(&mut replayed, &step.tags, id)?,
            // Written where nothing ran, so this is the first time it ran at all.
            ApplyOutcome::Failed { last_outcome, last_error, .. } if is_deferred(&step.validation) => bail!(
                "{} ({label}), deferred where it was written, does not pass here: {last_outcome}: {}\n{} holds the root and the {} step(s) before it\nhint: carry the transformation out again from there: `peak apply {} -w {}`",
                step.meta.transformation,
                last_error.lines().next().unwrap_or_default(),
                into.display(),
                done - 1 + outcomes.len(),
                step.meta.transformation,
                into.display()
            ),
            _ => bail!("replaying {} ({label}) did not reproduce checkpoint {}: {outcome:?}", step.meta.transformation, step.id.short()),
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The parameters (scalar inputs and tuning parameters) of a recorded step's context.
fn parameters(step: &CheckpointView) -> Result<Vec<String>> {
    let text = step.files.get(MANIFEST_FILE).with_context(|| format!("checkpoint {}: no {MANIFEST_FILE}", step.id.short()))?;
    let manifest = Manifest::parse(MANIFEST_FILE, text).with_context(|| format!("checkpoint {}", step.id.short()))?;
    Ok(manifest.inputs.keys().chain(manifest.tuning.keys()).cloned().collect())
}

/// `options` with only the `--set` settings that name a parameter of `step`'s context, so
/// `--set TRD_X=2` pins a tuning parameter from the step that introduces it on.
fn for_step(options: &ApplyOptions, step: &CheckpointView) -> Result<ApplyOptions> {
    let names = parameters(step)?;
    let set = options.settings.set.iter().filter(|s| setting_name(s).is_none_or(|n| names.iter().any(|p| p == n))).cloned().collect();
    Ok(ApplyOptions { settings: Settings { set, ..options.settings.clone() }, ..options.clone() })
}

/// Every `--set` names a parameter that some step of the replay has: a misspelt name is an
/// error, not a setting silently applied nowhere.
fn check_settings_named(set: &[String], chain: &[CheckpointView]) -> Result<()> {
    let mut known = BTreeSet::new();
    for step in chain {
        known.extend(parameters(step)?);
    }
    for setting in set {
        if let Some(name) = setting_name(setting).filter(|n| !known.contains(*n)) {
            bail!("--set {setting}: no step of the replay has a parameter '{name}'; its steps have: {}", known.into_iter().collect::<Vec<_>>().join(", "));
        }
    }
    Ok(())
}

/// The checkpoints from the root to `tip`, following first parents.
fn first_parent_chain(workflow: &Workflow, tip: &str) -> Result<Vec<CheckpointView>> {
    let mut chain = Vec::new();
    let mut rev = tip.to_string();
    loop {
        let view = workflow.show(&rev)?;
        let parent = view.parents.first().map(|p| p.to_string());
        chain.push(view);
        match parent {
            Some(p) => rev = p,
            None => break,
        }
    }
    chain.reverse();
    Ok(chain)
}

/// Validate and tune the recorded root's context into a new workflow at `into`.
fn replay_root(
    recorded: &Workflow,
    root: &CheckpointView,
    into: &Path,
    options: &ApplyOptions,
    workers: &mut Workers,
    reporter: &dyn ApplyReporter,
) -> Result<()> {
    let reference = ReferenceRecord::from_json(&root.reference).unwrap_or_default();
    let seed = reference.seed.unwrap_or(options.settings.seed);
    let root_dir = into.with_extension("root-context");
    let _ = std::fs::remove_dir_all(&root_dir);
    recorded.materialize(&root.id.to_string(), &root_dir)?;
    let init = InitOptions {
        measure: true,
        settings: Settings {
            seed,
            // The sizes the recording was made at, unless this replay names others.
            set: merge_set(&options.settings.set, reference.set.as_deref().unwrap_or_default()),
            ..options.settings.clone()
        },
    };
    let result = init_workflow(into, &root_dir, &init, workers, reporter.tuning());
    let _ = std::fs::remove_dir_all(&root_dir);
    carry_tags(&mut result?, &root.tags, "root")
}

/// The checkpoints of the recorded chain (the root included) that a replay cut short
/// already left in `into`, root first, or `None` when there is no workflow there yet. A
/// workflow there that is not the start of this chain is refused rather than added to.
fn already_replayed(into: &Path, chain: &[CheckpointView]) -> Result<Option<Vec<CheckpointView>>> {
    if !into.join(".git").exists() {
        return Ok(None);
    }
    let existing = Workflow::open(into).with_context(|| format!("--into {}: resuming the replay there", into.display()))?;
    let head = existing.head()?.id.to_string();
    let done = first_parent_chain(&existing, &head)?;
    let names = |c: &[CheckpointView]| c.iter().skip(1).map(|v| v.meta.transformation.clone()).collect::<Vec<_>>();
    let (have, want) = (names(&done), names(chain));
    let same_root = done[0].files == chain[0].files;
    if !same_root || have.len() > want.len() || want[..have.len()] != have[..] {
        bail!(
            "--into {}: already holds a workflow that is not the start of this replay (its steps: [{}]; the recorded chain's: [{}])\nhint: replay into a new folder, or remove that one",
            into.display(),
            have.join(", "),
            want.join(", ")
        );
    }
    Ok(Some(done))
}

/// Name the replayed checkpoint `at` as the recorded one was (the root keeps its own tag).
fn carry_tags(replayed: &mut Workflow, tags: &[String], at: &str) -> Result<()> {
    for tag in tags.iter().filter(|t| *t != ROOT_TAG) {
        replayed.tag(tag, Some(at))?;
    }
    Ok(())
}
