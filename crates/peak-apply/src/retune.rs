//! Tuning the current checkpoint again, further, recorded as a checkpoint of its own.
//!
//! A line of work is walked with a small tuning budget per step: a step's ranking only has
//! to seed the next step's search. The tip deserves more. `retune` searches the current
//! checkpoint's space again with a larger budget, starting from its recorded top-K (so the
//! search refines rather than restarts), sanitizes the winner as every tuned checkpoint's
//! is, and records the result as a `Retune` checkpoint: the same code, a better
//! configuration, and the budget and seed it took, so `peak replay` repeats the search.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use indexmap::IndexMap;
use peak_eval::Workers;
use peak_record::{PerformanceRecord, Record, TranscriptRecord};
use peak_spec::Space;
use peak_workflow::{Attempt, AttemptOutcome, CheckpointInput, Workflow};
use serde_json::{Value, json};

use crate::init::{measure, ranked_tunings, restricted, validation_space, with_stored_set};
use crate::sanitize::Plan;
use crate::state::{self, fresh_context, retune_dir};
use crate::winner::check_winner;
use crate::{ApplyOptions, ApplyOutcome, ApplyReporter, Settings, TuningSettings};

/// The name a retune's checkpoint is recorded under (not a transformation of the library).
pub const RETUNE: &str = "Retune";

/// Tune the workflow's current checkpoint again with `options`' budget, time limit, seed
/// and sanitizer settings, and record the result as a `Retune` checkpoint on top of it.
/// `who` is who asked for it (`user`, `agent`, or `replay`).
pub fn retune(workflow: &Path, options: &ApplyOptions, who: &str, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<ApplyOutcome> {
    retune_in(&mut Workflow::open(workflow)?, options, who, workers, reporter)
}

/// [`retune`] on an open workflow, whose lock the caller may already hold for longer (a
/// replay, from its first step to its last).
pub(crate) fn retune_in(wf: &mut Workflow, options: &ApplyOptions, who: &str, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<ApplyOutcome> {
    // Held to the end: two retunes, or a retune and an apply, would both tune from one
    // parent and only the first could record its checkpoint.
    wf.hold_lock("retune")?;
    let dir = wf.dir().to_path_buf();
    state::refuse_if_pending(&dir)?;
    let head = wf.head()?;
    let parent = wf.show(&head.id.to_string())?;
    let parent_performance = PerformanceRecord::from_json(&parent.performance)?;
    if parent_performance.best.is_none() {
        bail!(
            "checkpoint {} ({}) has no tuning results to start from (deferred, or recorded without measuring)\nhint: replay it where the GPU is (`peak replay`), then retune there",
            head.id.short(),
            parent.meta.transformation
        );
    }

    let work = retune_dir(&dir);
    let context_dir = work.join("context");
    let ctx = fresh_context(wf, &head.id.to_string(), &context_dir)?;
    let root = fresh_context(wf, "root", &work.join("root"))?;
    let plan = Plan::for_context(&options.settings.sanitizer.tools, &options.settings.sanitizer.at, &ctx)?;
    let space = restricted(&ctx, &with_stored_set(wf, &options.settings.set)?)?;
    // Judged on the space this retune searches: a `--set` may widen what the checkpoint's
    // tuning was pinned to (a replay's pins) or move it to other sizes.
    if let Some(sizes) = exhausted(&parent_performance, &space) {
        bail!(
            "checkpoint {} ({}) already measured every configuration of its space ({sizes}): a retune has nothing left to search",
            head.id.short(),
            parent.meta.transformation
        );
    }

    reporter.stage("tune");
    let start_from = recorded_rankings(&parent_performance);
    let mut performance = measure(workers, &ctx, &space, Some(&root), &options.settings, start_from, reporter.tuning())?;
    if options.settings.sanitizer.winner && plan.runs() {
        reporter.stage("sanitize");
    }
    let base = Attempt { transformation: RETUNE.into(), executor: who.into(), parent: Some(head.id.to_string()), ..Attempt::default() };
    if let Some(why) = check_winner(
        &mut *workers,
        options.settings.sanitizer.winner.then_some(&plan),
        &ctx,
        &validation_space(&ctx, &with_stored_set(wf, &options.settings.set)?)?,
        options.settings.seed,
        &mut performance,
    )? {
        wf.record_attempt(Attempt { outcome: AttemptOutcome::SanitizerFinding, error: Some(why.clone()), ..base })?;
        let _ = std::fs::remove_dir_all(&work);
        return Ok(ApplyOutcome::Failed { transformation: RETUNE.into(), attempts: 1, last_outcome: AttemptOutcome::SanitizerFinding, last_error: why });
    }

    // The code is the parent's, already validated there; every configuration tuned here
    // had its outputs checked against the root's, which is this step's validation.
    let validation = json!({
        "verdict": AttemptOutcome::Passed,
        "retune_of": head.id.to_string(),
        "note": "same code as its parent; every tuned configuration's outputs were checked against the root's reference",
        "elapsed_s": 0.0,
    });
    let transcript = json!({
        "transformation": RETUNE,
        "executor": who,
        "producer": who,
        "entries": [],
        "retune": RetuneSettings::of(options).to_json(),
    });
    let best_ms = performance.best_ms();
    let performance = performance.to_json();
    let speedup_over_parent = peak_workflow::speedup(&parent.performance, &performance);
    let id = wf.checkpoint(CheckpointInput {
        parent: Some(head.id.to_string()),
        context_dir: context_dir.clone(),
        transformation: RETUNE.into(),
        executor: who.into(),
        model: None,
        validation,
        performance,
        transcript,
        attempt: None,
        force: false,
    })?;
    wf.record_attempt(Attempt { outcome: AttemptOutcome::Passed, checkpoint: Some(id.to_string()), ..base })?;
    let _ = std::fs::remove_dir_all(&work);
    reporter.attempt(&AttemptOutcome::Passed, &format!("checkpoint {}", id.short()));
    Ok(ApplyOutcome::Checkpoint {
        id: id.to_string(),
        transformation: RETUNE.into(),
        verdict: AttemptOutcome::Passed,
        best_ms,
        speedup_over_parent,
        attempts: 1,
    })
}

/// What a retune searched with, as `transcript.json` records it for `peak replay`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetuneSettings {
    pub tuning: TuningSettings,
    pub seed: u64,
}

impl RetuneSettings {
    fn of(options: &ApplyOptions) -> RetuneSettings {
        RetuneSettings { tuning: options.settings.tuning.clone(), seed: options.settings.seed }
    }

    fn to_json(&self) -> Value {
        let TuningSettings { budget, time_limit } = &self.tuning;
        json!({ "budget": budget, "time_limit_s": time_limit.map(|d| d.as_secs_f64()), "seed": self.seed, "strategy": "auto" })
    }

    /// The settings a recorded retune's transcript holds.
    pub fn recorded(transcript: &Value) -> Result<RetuneSettings> {
        let Some(r) = TranscriptRecord::from_json(transcript).ok().and_then(|t| t.retune) else {
            return Err(anyhow!("transcript.json has no `retune` settings"));
        };
        let tuning = TuningSettings { budget: r.budget.map(|b| b as usize), time_limit: r.time_limit_s.map(Duration::from_secs_f64) };
        Ok(RetuneSettings { tuning, seed: r.seed.unwrap_or(1) })
    }

    /// `options` with these settings in place of its own.
    pub fn over(&self, options: &ApplyOptions) -> ApplyOptions {
        let settings = Settings { tuning: self.tuning.clone(), seed: self.seed, ..options.settings.clone() };
        ApplyOptions { settings, ..options.clone() }
    }
}

/// "60 at n=2048, 60 at n=4096" when every input configuration's search evaluated its whole
/// space, else `None`.
fn exhausted(performance: &PerformanceRecord, space: &Space) -> Option<String> {
    let runs = performance.runs();
    if runs.is_empty() {
        return None;
    }
    let mut measured = BTreeMap::new();
    let mut sizes = Vec::new();
    for run in runs {
        let (evaluated, whole) = (run.evaluations?, run.space?);
        if evaluated < whole {
            return None;
        }
        let inputs: BTreeMap<String, String> = run.inputs.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
        sizes.push(format!("{whole} at {}", inputs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")));
        measured.insert(inputs, whole);
    }
    // The searched space, counted per input size, no further than one point past what was
    // measured: a larger space, or one at other sizes, has something left.
    let mut searched: BTreeMap<BTreeMap<String, String>, u64> = BTreeMap::new();
    let total: u64 = measured.values().sum();
    for point in space.iter().take(total as usize + 1) {
        *searched.entry(point.inputs.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()).or_default() += 1;
    }
    (searched == measured).then(|| sizes.join(", "))
}

/// Every configuration the checkpoint's tuning ranked, at every input size, best first and
/// without repeats: where the search starts again.
fn recorded_rankings(performance: &PerformanceRecord) -> Vec<IndexMap<String, i64>> {
    let rankings = performance.runs().iter().map(|run| run.top_k.as_slice()).chain(std::iter::once(performance.top_k()));
    let mut seeds: Vec<IndexMap<String, i64>> = Vec::new();
    for tuning in rankings.flat_map(ranked_tunings) {
        if !seeds.contains(&tuning) {
            seeds.push(tuning);
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(performance: Value) -> PerformanceRecord {
        PerformanceRecord::from_json(&performance).unwrap()
    }

    #[test]
    fn rankings_of_every_size_are_joined_without_repeats() {
        let entry = |x: i64| json!({"params": {"inputs": {"n": 1}, "tuning": {"X": x}}, "time_ms": 1.0});
        let performance = json!({
            "top_k": [entry(3), entry(1)],
            "runs": [{"top_k": [entry(1), entry(2)]}, {"top_k": [entry(3), entry(1)]}],
        });
        let xs: Vec<i64> = recorded_rankings(&record(performance)).iter().map(|t| t["X"]).collect();
        assert_eq!(xs, vec![1, 2, 3]);
    }

    #[test]
    fn a_space_measured_whole_has_nothing_left_to_retune() {
        let space = |tuning: &str| {
            let manifest = peak_spec::Manifest::parse(
                "peak.toml",
                &format!("[kernel]\nname = \"k\"\nbackend = \"opencl\"\nsource = \"k.cl\"\n[inputs]\nn = {{ values = [2048, 4096] }}\n[tuning]\nX = {{ values = [{tuning}] }}\n"),
            )
            .unwrap();
            Space::new(&manifest).unwrap()
        };
        let run = |evaluations: u64, whole: u64, n: u64| json!({"inputs": {"n": n}, "evaluations": evaluations, "space": whole});
        let whole = record(json!({"runs": [run(3, 3, 2048), run(3, 3, 4096)]}));
        assert_eq!(exhausted(&whole, &space("1, 2, 3")).as_deref(), Some("3 at n=2048, 3 at n=4096"));
        assert_eq!(exhausted(&record(json!({"runs": [run(3, 3, 2048), run(2, 3, 4096)]})), &space("1, 2, 3")), None);
        assert_eq!(exhausted(&record(json!({"runs": []})), &space("1, 2, 3")), None, "nothing recorded is not exhausted");
        // A --set that widens a pinned space, or tunes at a size never measured, has work left.
        assert_eq!(exhausted(&whole, &space("1, 2, 3, 4")), None);
        assert_eq!(exhausted(&record(json!({"runs": [run(3, 3, 2048)]})), &space("1, 2, 3")), None);
    }

    #[test]
    fn recorded_settings_round_trip_and_replace_the_replays_own() {
        let tuning = TuningSettings { budget: Some(512), time_limit: Some(Duration::from_secs(90)) };
        let options = ApplyOptions { settings: Settings { tuning, seed: 7, ..Settings::default() }, ..ApplyOptions::default() };
        let transcript = json!({ "retune": RetuneSettings::of(&options).to_json() });
        let settings = RetuneSettings::recorded(&transcript).unwrap();
        assert_eq!(settings, RetuneSettings::of(&options));
        let replay_tuning = TuningSettings { budget: Some(64), time_limit: None };
        let replay = ApplyOptions { settings: Settings { tuning: replay_tuning, seed: 1, samples: 4, ..Settings::default() }, ..ApplyOptions::default() };
        let merged = settings.over(&replay).settings;
        assert_eq!((merged.tuning.budget, merged.seed, merged.samples), (Some(512), 7, 4));
        assert!(RetuneSettings::recorded(&json!({"entries": []})).is_err());
    }
}
