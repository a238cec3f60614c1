//! The apply loop: passes, repair, validation, tuning, checkpoint.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};
use indexmap::IndexMap;
use peak_eval::validate::{Outcome as Validation, Sample, samples};
use peak_eval::{OutputValidator, ReferenceStore, ValidationReport, Validator, Verdict, Workers, default_cache_dir};
use peak_record::{PerformanceRecord, Record, ValidationRecord};
use peak_spec::{Context, ExecParams, Region, Space};
use peak_transform::{
    AgentExecutor, Executor, ExecutorSpec, Feedback, KernelBrief, Library, Outcome, PassPrompt, PassRequest, PromptContext, ReplyError, Transcript,
    Transformation,
};
use peak_workflow::{Attempt, AttemptOutcome, CheckpointInput, CheckpointView, Workflow};
use serde_json::json;

use crate::defer::{self, CompileCheck};
use crate::feasible;
use crate::init::{measure, ranked_tunings, restricted, validation_space, with_stored_set};
use crate::manifest::{extend, prompt_params};
use crate::outcome;
use crate::sanitize::{self, Plan};
use crate::state::{self, ApplyState, agent_dir, apply_dir, fresh_context};
use crate::winner::check_winner;
use crate::{ApplyOptions, ApplyOutcome, ApplyReporter, Settings};

/// Further draws of validation samples when the launch script pruned every one drawn.
const RESAMPLE_ROUNDS: u64 = 3;

/// The workflow at `workflow`, with its writer lock held for the whole run of `session`:
/// no other command writes between this one's reads and its checkpoint. The lock is held
/// while the command runs, not while an agent is asked (the process exits meanwhile);
/// a waiting apply is kept from others by `state::refuse_if_pending`.
fn open_locked(workflow: &Path, session: &str) -> Result<Workflow> {
    let mut wf = Workflow::open(workflow)?;
    wf.hold_lock(session)?;
    Ok(wf)
}

/// Apply a transformation from the workflow's current checkpoint.
pub fn apply(workflow: &Path, options: &ApplyOptions, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<ApplyOutcome> {
    apply_in(&mut open_locked(workflow, "apply")?, options, workers, reporter)
}

/// [`apply`] on an open workflow. A caller that already holds its lock (`peak study`,
/// `peak auto`: one lock from their first write to their last, so no other writer gets in
/// between their applies) keeps holding it, under its own name, after the apply.
pub fn apply_in(wf: &mut Workflow, options: &ApplyOptions, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<ApplyOutcome> {
    wf.hold_lock("apply")?;
    let dir = wf.dir().to_path_buf();
    state::refuse_if_pending(&dir)?;
    let spec: ExecutorSpec = options.executor.parse()?;
    let library = library(&options.settings.library_dirs)?;
    // Resolve the name now, so a typo fails before anything is written.
    let name = library.get(&options.transformation)?.name.clone();
    let parent = wf.head()?.id.to_string();
    let executor = spec.build(&agent_dir(&dir), |var| std::env::var(var).ok())?;
    // An endpoint that is down fails here, in seconds, recorded as a try that reached no model.
    if let Err(e) = executor.check_reachable() {
        let (kind, model) = who(executor.as_ref(), &spec.to_string());
        wf.record_attempt(Attempt {
            transformation: name,
            executor: kind,
            model,
            parent: Some(parent),
            pass: Some(1),
            outcome: outcome::of_executor(&e),
            error: Some(e.to_string()),
            ..Attempt::default()
        })?;
        bail!("{e}\nhint: start the server, or point peak at a running one (its base-URL variable, e.g. PEAK_OPENAI_BASE_URL); nothing was asked of it");
    }
    let mut state = ApplyState::new(options, parent);
    state.transformation = name;
    state.executor = spec.to_string();
    state.settings.set = with_stored_set(wf, &options.settings.set)?;
    state::save(&dir, &state)?;
    run(wf, state, executor.as_ref(), &library, workers, reporter)
}

/// Apply with a given executor (replay): `label` is what the records call it.
pub(crate) fn apply_with(
    wf: &mut Workflow,
    options: &ApplyOptions,
    label: &str,
    executor: &dyn Executor,
    workers: &mut Workers,
    reporter: &dyn ApplyReporter,
) -> Result<ApplyOutcome> {
    wf.hold_lock("replay")?;
    let library = library(&options.settings.library_dirs)?;
    let mut state = ApplyState::new(options, wf.head()?.id.to_string());
    state.transformation = library.get(&options.transformation)?.name.clone();
    state.executor = label.to_string();
    state.settings.set = with_stored_set(wf, &options.settings.set)?;
    state::save(wf.dir(), &state)?;
    run(wf, state, executor, &library, workers, reporter)
}

/// Hand in the agent's new region (a bare region or a fenced reply) and resume.
pub fn submit(workflow: &Path, file: &Path, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<ApplyOutcome> {
    let mut wf = open_locked(workflow, "submit")?;
    let dir = wf.dir().to_path_buf();
    let state = state::load(&dir)?.ok_or_else(|| {
        anyhow!("no apply is waiting for a submission in {}\nhint: start one with `peak apply TRANSFORMATION --executor agent`", dir.display())
    })?;
    let agent = AgentExecutor::new(agent_dir(&dir));
    if let Err(e) = agent.submit(file) {
        // The apply took its last submission and stopped before recording the outcome (a
        // killed process, a closed terminal): it has nothing to ask, only to finish.
        if matches!(e, peak_transform::ExecutorError::NothingPending { .. }) {
            bail!(
                "{e}: the {} apply here was interrupted after its last submission\nhint: finish it with `peak apply --resume -w {}`",
                state.transformation,
                dir.display()
            );
        }
        return Err(e.into());
    }
    let library = library(&state.settings.library_dirs)?;
    run(&mut wf, state, &agent, &library, workers, reporter)
}

/// Continue an interrupted apply (a crash, a closed terminal) from where it stopped:
/// replies already given are reused, results already measured come from the caches.
pub fn resume(workflow: &Path, workers: &mut Workers, reporter: &dyn ApplyReporter) -> Result<ApplyOutcome> {
    let mut wf = open_locked(workflow, "apply --resume")?;
    let dir = wf.dir().to_path_buf();
    let state = state::load(&dir)?.ok_or_else(|| anyhow!("no apply is in progress in {}", dir.display()))?;
    // Stopped after its checkpoint was committed: nothing is left but to record it.
    if let Some(done) = finish_committed(&mut wf, &state)? {
        if let ApplyOutcome::Checkpoint { id, verdict, .. } = &done {
            reporter.attempt(verdict, &format!("checkpoint {} (committed before the apply was interrupted)", &id[..id.len().min(7)]));
        }
        return Ok(done);
    }
    let library = library(&state.settings.library_dirs)?;
    let spec: ExecutorSpec = state.executor.parse()?;
    let executor = spec.build(&agent_dir(&dir), |var| std::env::var(var).ok())?;
    executor.check_reachable()?;
    run(&mut wf, state, executor.as_ref(), &library, workers, reporter)
}

/// The checkpoint an apply already made: HEAD, when it carries the attempt id the apply
/// saved just before committing (its process stopped after the commit).
pub(crate) fn committed(wf: &Workflow, state: &ApplyState) -> Result<Option<CheckpointView>> {
    let Some(attempt) = &state.checkpoint_attempt else { return Ok(None) };
    let head = wf.show("HEAD")?;
    Ok((head.meta.attempt.as_ref() == Some(attempt)).then_some(head))
}

/// Finish an apply whose checkpoint was committed before its process stopped: record the
/// outcome if that record was not written, and forget the apply. `None` when it made no
/// checkpoint yet.
pub(crate) fn finish_committed(wf: &mut Workflow, state: &ApplyState) -> Result<Option<ApplyOutcome>> {
    let (Some(view), Some(attempt)) = (committed(wf, state)?, state.checkpoint_attempt.as_deref()) else { return Ok(None) };
    let verdict = view.meta.verdict.as_deref().map_or(AttemptOutcome::Passed, AttemptOutcome::parse);
    if !wf.attempts()?.records.iter().any(|r| r.id == attempt && !r.is_start()) {
        wf.finish_attempt(
            attempt,
            Attempt {
                transformation: view.meta.transformation.clone(),
                executor: view.meta.executor.clone(),
                model: view.meta.model.clone(),
                parent: Some(state.parent.clone()),
                outcome: verdict.clone(),
                checkpoint: Some(view.id.to_string()),
                retry: state.recorded_attempts as u32,
                ..Attempt::default()
            },
        )?;
    }
    state::clear(wf.dir())?;
    let parent = wf.show(&state.parent)?;
    Ok(Some(ApplyOutcome::Checkpoint {
        id: view.id.to_string(),
        transformation: view.meta.transformation.clone(),
        verdict,
        best_ms: PerformanceRecord::from_json(&view.performance).unwrap_or_default().best_ms(),
        speedup_over_parent: peak_workflow::speedup(&parent.performance, &view.performance),
        attempts: state.recorded_attempts + 1,
    }))
}

/// The pass the agent executor is waiting for, if any.
pub fn pending(workflow: &Path) -> Result<Option<ApplyOutcome>> {
    let wf = Workflow::open(workflow)?;
    let dir = wf.dir().to_path_buf();
    let Some(state) = state::load(&dir)? else { return Ok(None) };
    let Some(p) = AgentExecutor::new(agent_dir(&dir)).pending()? else { return Ok(None) };
    let library = library(&state.settings.library_dirs)?;
    let t = library.get(&state.transformation)?;
    let prompt = std::fs::read_to_string(&p.prompt_file).with_context(|| format!("reading {}", p.prompt_file.display()))?;
    // A repair may ask for another region than its pass edits; the prompt says which.
    let asked = PassPrompt::region_asked(&prompt).or_else(|| t.passes.get(p.pass - 1).map(|pass| pass.region));
    let region = asked.map(|r| r.name().to_string()).unwrap_or_default();
    Ok(Some(ApplyOutcome::Waiting {
        transformation: t.name.clone(),
        pass: p.pass,
        passes: t.passes.len(),
        attempt: p.attempt,
        region,
        prompt_file: p.prompt_file,
        prompt,
    }))
}

/// Forget an apply in progress (or the files of one cut short before it saved its state);
/// the workflow is untouched. Whether there was anything to forget.
pub fn abandon(workflow: &Path) -> Result<bool> {
    abandon_in(&mut open_locked(workflow, "apply --abandon")?)
}

/// [`abandon`] on an open workflow, whose lock the caller may already hold (see [`apply_in`]).
pub fn abandon_in(wf: &mut Workflow) -> Result<bool> {
    wf.hold_lock("apply --abandon")?;
    let had = apply_dir(wf.dir()).exists();
    state::clear(wf.dir())?;
    Ok(had)
}

pub(crate) fn library(dirs: &[PathBuf]) -> Result<Library> {
    let mut library = Library::builtin()?;
    for dir in dirs {
        library.add_dir(dir)?;
    }
    Ok(library)
}

/// Who ran a step, for checkpoints and attempts: the executor kind and the model.
fn who(executor: &dyn Executor, spec: &str) -> (String, Option<String>) {
    let producer = executor.producer();
    match spec.split_once(':') {
        Some((provider, _)) => (provider.to_string(), Some(producer)),
        None if spec == "replay" => ("replay".to_string(), Some(producer)),
        None => (producer, None),
    }
}

/// Writes attempt records, skipping the ones a resumed apply already wrote.
struct AttemptLog<'a> {
    wf: &'a mut Workflow,
    state: ApplyState,
    seen: usize,
    count: usize,
}

impl AttemptLog<'_> {
    fn record(&mut self, attempt: Attempt) -> Result<()> {
        self.seen += 1;
        self.count += 1;
        if self.seen <= self.state.recorded_attempts {
            return Ok(());
        }
        self.wf.record_attempt(attempt)?;
        self.state.recorded_attempts = self.seen;
        state::save(self.wf.dir(), &self.state)
    }
}

fn run(
    wf: &mut Workflow,
    state: ApplyState,
    executor: &dyn Executor,
    library: &Library,
    workers: &mut Workers,
    reporter: &dyn ApplyReporter,
) -> Result<ApplyOutcome> {
    let dir = wf.dir().to_path_buf();
    let work = apply_dir(&dir);
    let options = state.options();
    let (executor_kind, model) = who(executor, &state.executor);

    // Fresh copies every run: a resumed apply may find the last run's.
    let parent = fresh_context(wf, &state.parent, &work.join("parent"))?;
    let root = fresh_context(wf, "root", &work.join("root"))?;
    let backend: peak_transform::Language = parent.backend().name().parse().map_err(|e: String| anyhow!(e))?;
    let generic = library.get(&state.transformation)?;
    let (t, plan) = match prepare(generic, &parent, &root, library, &options, workers) {
        Ok(prepared) => prepared,
        Err(e) => {
            state::clear(&dir)?;
            return Err(e);
        }
    };
    let (tuning, inputs) = prompt_params(&parent);
    let constraints = parent.manifest.constraints.tuning.clone();
    let (kernel_text, pattern) = kernel_brief(&parent, &root);
    let kernel = KernelBrief { pattern, description: &kernel_text };
    let first = PromptContext { kernel, regions: &parent.regions, backend, tuning: &tuning, inputs: &inputs, constraints: &constraints };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;

    let base = Attempt {
        transformation: t.name.clone(),
        executor: executor_kind.clone(),
        model: model.clone(),
        parent: Some(state.parent.clone()),
        ..Attempt::default()
    };
    let mut log = AttemptLog { wf, state, seen: 0, count: 0 };
    let mut tries =
        Tries { regions: parent.regions.clone(), transcript: Transcript::default(), pass: 1, attempt: 1, repairs: 0, feedback: None, fault_region: None };
    let candidate_dir = work.join("candidate");
    // Seconds spent validating candidates, failed tries included (the paper's Table 5).
    let mut validation_s = 0.0;

    let (candidate, judged) = loop {
        if let Some(ended) = ask_passes(&mut tries, &t, &first, library, executor, &runtime, &mut log, &base, options.retries, reporter, &dir)? {
            return Ok(ended);
        }

        if tries.regions == parent.regions {
            let err = ReplyError::Unchanged;
            let failed = outcome::of_reply(&err);
            reporter.attempt(&failed, &err.to_string());
            log.record(Attempt {
                pass: Some(t.passes.len() as u32),
                outcome: failed.clone(),
                error: Some(err.to_string()),
                retry: tries.repairs,
                ..base.clone()
            })?;
            // A transformation that tells the executor to return the regions as they are
            // where the kernel does not fit (its text says peak records it as "not carried
            // out") has been answered, not failed: asking again would push the executor to
            // change a kernel the transformation does not fit.
            if offers_to_decline(&t) {
                return give_up(
                    &dir,
                    &t,
                    log.count,
                    failed,
                    &format!("not carried out: the executor returned every region as it was, as {} asks where the kernel does not fit its premise", t.name),
                );
            }
            if tries.repairs >= options.retries {
                return give_up(&dir, &t, log.count, failed, &err.to_string());
            }
            tries.repairs += 1;
            tries.attempt += 1;
            tries.pass = t.passes.len();
            tries.feedback = Some(Feedback::BadReply(err));
            continue;
        }
        let candidate = write_candidate(&parent, &t, &tries.regions, &candidate_dir)?;
        let (verdict, caught, device) = match judge(&candidate, &root, &options, &plan, workers, reporter, &mut validation_s)? {
            Judgement::Accepted(judged) => break (candidate, judged),
            Judgement::Rejected { verdict, caught, device } => (verdict, caught, device),
        };
        // Which device judged it (the line, the attempts log, a failed replay's error): a
        // wrong output that one device gives and another does not is then read, not guessed.
        let summary = device.map_or_else(|| verdict.summary(), |d| format!("{} (on {d})", verdict.summary()));
        let failed = outcome::of_verdict(&verdict);
        reporter.attempt(&failed, &summary);
        let (sample, validator) = caught.map_or((None, None), |(i, v)| (Some(i), v));
        log.record(Attempt { outcome: failed.clone(), error: Some(summary.clone()), retry: tries.repairs, sample, validator, ..base.clone() })?;
        if tries.repairs >= options.retries {
            return give_up(&dir, &t, log.count, failed, &summary);
        }
        tries.repairs += 1;
        tries.attempt += 1;
        (tries.pass, tries.fault_region) = repair_target(&t, &verdict, &candidate);
        tries.feedback = Some(feedback_for(&verdict));
    };

    let step = Step { t: &t, base, dir: &dir, executor_kind, model, repairs: tries.repairs, validation_s, transcript: tries.transcript };
    record(log, step, executor, candidate, &candidate_dir, judged, &root, &options, &plan, workers, reporter)
}

/// The repair loop's state: the regions as written so far, the executor's replies, where
/// the next question goes (pass, attempt, repairs used), what the executor is told about
/// the last failure, and the region a repair must go to when no pass edits it.
struct Tries {
    regions: peak_spec::Regions,
    transcript: Transcript,
    pass: usize,
    attempt: u32,
    repairs: u32,
    feedback: Option<Feedback>,
    fault_region: Option<Region>,
}

/// Ask the executor for every pass from `tries.pass` on, splicing each accepted reply in
/// and asking again after an unusable one. `Some` ends the apply: the executor waits for
/// an agent's reply, or the repairs ran out.
#[allow(clippy::too_many_arguments)]
fn ask_passes(
    tries: &mut Tries,
    t: &Transformation,
    first: &PromptContext,
    library: &Library,
    executor: &dyn Executor,
    runtime: &tokio::runtime::Runtime,
    log: &mut AttemptLog,
    base: &Attempt,
    retries: u32,
    reporter: &dyn ApplyReporter,
    dir: &Path,
) -> Result<Option<ApplyOutcome>> {
    while tries.pass <= t.passes.len() {
        let prompt_ctx = PromptContext { regions: &tries.regions, ..*first };
        let prompt = match &tries.feedback {
            None => library.pass_prompt(t, tries.pass, &prompt_ctx)?,
            Some(f) => match tries.fault_region {
                Some(region) => library.repair_prompt_in(t, tries.pass, &prompt_ctx, f, region)?,
                None => library.repair_prompt(t, tries.pass, &prompt_ctx, f)?,
            },
        };
        reporter.pass(&t.name, tries.pass, t.passes.len(), tries.attempt, &t.passes[tries.pass - 1].title);
        let request = PassRequest { transformation: t.name.clone(), pass: tries.pass, attempt: tries.attempt, prompt: prompt.text.clone() };
        let response = match runtime.block_on(executor.execute(&request)) {
            Ok(Outcome::Reply(response)) => response,
            Ok(Outcome::Waiting(p)) => {
                return Ok(Some(ApplyOutcome::Waiting {
                    transformation: t.name.clone(),
                    pass: tries.pass,
                    passes: t.passes.len(),
                    attempt: tries.attempt,
                    region: prompt.region.name().to_string(),
                    prompt_file: p.prompt_file,
                    prompt: prompt.text,
                }));
            }
            Err(e) => {
                log.record(Attempt {
                    pass: Some(tries.pass as u32),
                    outcome: outcome::of_executor(&e),
                    error: Some(e.to_string()),
                    retry: tries.repairs,
                    ..base.clone()
                })?;
                state::clear(dir)?;
                return Err(anyhow!(e).context(format!("{}: pass {} could not be carried out", t.name, tries.pass)));
            }
        };
        tries.transcript.push(&request, &response);
        let usage = Attempt {
            pass: Some(tries.pass as u32),
            tokens_in: response.tokens_in,
            tokens_out: response.tokens_out,
            latency_ms: Some(response.latency_ms),
            retry: tries.repairs,
            ..base.clone()
        };
        match prompt.accept(&response.text, &tries.regions) {
            Ok(text) => {
                tries.regions.replace(prompt.region, text);
                tries.feedback = None;
                // A repair in another region fixed what the pass wrote: the pass is
                // done and is not asked again.
                tries.pass += 1;
                tries.fault_region = None;
            }
            Err(err) => {
                let failed = outcome::of_reply(&err);
                reporter.attempt(&failed, &err.to_string());
                log.record(Attempt { outcome: failed.clone(), error: Some(err.to_string()), ..usage })?;
                if tries.repairs >= retries {
                    return give_up(dir, t, log.count, failed, &err.to_string()).map(Some);
                }
                tries.repairs += 1;
                tries.attempt += 1;
                tries.feedback = Some(Feedback::BadReply(err));
            }
        }
    }
    Ok(None)
}

/// What an apply settles before any pass is asked or recorded: the transformation in the
/// context's own names (its `[kernel.roles]`) and the sanitizer plan. Each refusal here
/// ends the apply at once: roles the context lacks, a sanitizer asked for but missing, a
/// deferred apply's missing compiler, a transformation written for another kind of kernel
/// or relying on names the context lacks, constraints no configuration satisfies.
fn prepare(
    generic: &Transformation,
    parent: &Context,
    root: &Context,
    library: &Library,
    options: &ApplyOptions,
    workers: &mut Workers,
) -> Result<(Transformation, Plan)> {
    let backend: peak_transform::Language = parent.backend().name().parse().map_err(|e: String| anyhow!(e))?;
    let t = generic.with_roles(&parent.manifest.kernel.roles, backend)?;
    // A deferred apply runs nothing to sanitize.
    let plan = match &options.defer {
        Some(defer) => defer::prepare(workers, parent.backend().name(), defer).map(|()| Plan::Off { reason: "deferred".into() })?,
        None => Plan::for_context(&options.settings.sanitizer.tools, &options.settings.sanitizer.at, parent)?,
    };
    let (tuning, inputs) = prompt_params(parent);
    let constraints = parent.manifest.constraints.tuning.clone();
    let (kernel_text, pattern) = kernel_brief(parent, root);
    let kernel = KernelBrief { pattern, description: &kernel_text };
    let first = PromptContext { kernel, regions: &parent.regions, backend, tuning: &tuning, inputs: &inputs, constraints: &constraints };
    library.pass_prompt(&t, 1, &first)?;
    feasible::check(parent, &t, &options.settings.set)?;
    Ok((t, plan))
}

/// The kernel as the prompts describe it, and its pattern. The pattern is read off the
/// root, the kernel as the user wrote it: later steps reshape the code, not what it
/// computes.
fn kernel_brief(parent: &Context, root: &Context) -> (String, Option<peak_spec::Pattern>) {
    let pattern = root.pattern().ok();
    let mut text = parent.manifest.describe_kernel();
    if let Some(inferred) = pattern.as_ref().filter(|_| parent.manifest.kernel.declared_pattern().is_none()) {
        text.push_str(&format!("\nPattern: {} (read off the code: {}).", inferred.pattern.meaning(), inferred.evidence));
    }
    (text, pattern.map(|p| p.pattern))
}

/// Who wrote an accepted candidate and what it took, for its checkpoint and attempt record.
struct Step<'a> {
    t: &'a Transformation,
    base: Attempt,
    dir: &'a Path,
    executor_kind: String,
    model: Option<String>,
    repairs: u32,
    validation_s: f64,
    /// The executor's replies, in order.
    transcript: Transcript,
}

/// The last stage: tune a validated candidate and sanitize its winner (a deferred one is
/// neither), then write its checkpoint and its attempt record.
#[allow(clippy::too_many_arguments)]
fn record(
    mut log: AttemptLog,
    step: Step,
    executor: &dyn Executor,
    candidate: Context,
    candidate_dir: &Path,
    judged: Judged,
    root: &Context,
    options: &ApplyOptions,
    plan: &Plan,
    workers: &mut Workers,
    reporter: &dyn ApplyReporter,
) -> Result<ApplyOutcome> {
    let Step { t, base, dir, executor_kind, model, repairs, validation_s, transcript } = step;
    let parent_view = log.wf.show(&log.state.parent)?;
    let (verdict, detail, validation, performance) = match judged {
        // Nothing ran, so nothing was timed: `peak replay` validates and tunes it on the GPU.
        Judged::Deferred(check) => {
            (AttemptOutcome::Deferred, format!(": {}", defer::summary(&check)), check.validation(validation_s), PerformanceRecord::default())
        }
        Judged::Validated { report, sanitized } => {
            reporter.stage("tune");
            let space = restricted(&candidate, &options.settings.set)?;
            let start_from = seeds_from_parent(&PerformanceRecord::from_json(&parent_view.performance).unwrap_or_default(), t);
            let mut performance = measure(workers, &candidate, &space, Some(root), &options.settings, start_from, reporter.tuning())?;
            if options.settings.sanitizer.winner && plan.runs() {
                reporter.stage("sanitize");
            }
            // The sanitizer runs the winner at the validation sizes: under compute-sanitizer a
            // run at tuning sizes (a GEMM of 8192 x 3072 x 768) takes minutes.
            let checked_at = validation_space(&candidate, &options.settings.set)?;
            if let Some(why) =
                check_winner(workers, options.settings.sanitizer.winner.then_some(plan), &candidate, &checked_at, options.settings.seed, &mut performance)?
            {
                reporter.attempt(&AttemptOutcome::SanitizerFinding, &why);
                log.record(Attempt { outcome: AttemptOutcome::SanitizerFinding, error: Some(why.clone()), retry: repairs, ..base.clone() })?;
                return give_up(dir, t, log.count, AttemptOutcome::SanitizerFinding, &why);
            }
            // The report's fields, then the verdict: `ValidationRecord`'s order.
            let validation = ValidationRecord {
                verdict: Some(AttemptOutcome::Passed.to_string()),
                elapsed_s: Some(validation_s),
                sanitizer: Some(serde_json::to_value(&sanitized)?),
                ..ValidationRecord::from_json(&serde_json::to_value(&report)?)?
            };
            (AttemptOutcome::Passed, String::new(), validation.to_json(), performance)
        }
    };
    let transcript_json = json!({ "transformation": t.name, "executor": log.state.executor, "producer": executor.producer(), "entries": transcript.entries });
    let best_ms = performance.best_ms();
    let performance = performance.to_json();
    let speedup_over_parent = peak_workflow::speedup(&parent_view.performance, &performance);
    // Saved before the commit: if the process stops right after it, the next run finds
    // this id on HEAD and finishes there (`finish_committed`).
    let attempt_id = peak_workflow::attempts::new_id();
    log.state.checkpoint_attempt = Some(attempt_id.clone());
    state::save(dir, &log.state)?;
    let id = log.wf.checkpoint(CheckpointInput {
        parent: Some(log.state.parent.clone()),
        context_dir: candidate_dir.to_path_buf(),
        transformation: t.name.clone(),
        executor: executor_kind,
        model,
        validation,
        performance,
        transcript: transcript_json,
        attempt: Some(attempt_id.clone()),
        force: false,
    })?;
    log.count += 1;
    log.wf.finish_attempt(&attempt_id, Attempt { outcome: verdict.clone(), checkpoint: Some(id.to_string()), retry: repairs, ..base })?;
    reporter.attempt(&verdict, &format!("checkpoint {}{detail}", id.short()));
    let attempts = log.count;
    state::clear(dir)?;
    Ok(ApplyOutcome::Checkpoint { id: id.to_string(), transformation: t.name.clone(), verdict, best_ms, speedup_over_parent, attempts })
}

/// The samples of resampling round `round` (1-based), where the launch script pruned every
/// sample so far: twice as many each round, so that a space the launch script prunes to a
/// few points is still found in three rounds, and never one already tried (added to `tried`).
fn fresh_samples(space: &Space, settings: &Settings, round: u64, tried: &mut Vec<ExecParams>) -> Vec<Sample> {
    let want = settings.samples << round;
    let fresh: Vec<Sample> =
        samples(space, want * 4, settings.seed.wrapping_add(round)).into_iter().filter(|s| !tried.contains(&s.params)).take(want).collect();
    tried.extend(fresh.iter().map(|s| s.params.clone()));
    fresh
}

/// How validation (or, deferred, the compile check) judged a candidate.
enum Judgement {
    Accepted(Judged),
    /// The verdict, and where validation caught it: the 1-based sample (in validation
    /// order) and the validator, for the attempts log (`peak report`'s evaluation depth);
    /// the device it ran on (none for a compile check), for the line that reports it.
    Rejected {
        verdict: Verdict,
        caught: Option<(u32, Option<String>)>,
        device: Option<String>,
    },
}

/// Judge `candidate`: compile-check it where the apply is deferred, else validate it against
/// `root` on sampled execution parameters (drawing more where the launch script pruned them
/// all) and sanitize right outputs as `plan` says. Adds the time it took to `validation_s`.
fn judge(
    candidate: &Context,
    root: &Context,
    options: &ApplyOptions,
    plan: &Plan,
    workers: &mut Workers,
    reporter: &dyn ApplyReporter,
    validation_s: &mut f64,
) -> Result<Judgement> {
    let space = validation_space(candidate, &options.settings.set)?;
    let mut picked = samples(&space, options.settings.samples, options.settings.seed);
    let started = std::time::Instant::now();
    // Where validation first caught the failure: the 1-based sample (in validation
    // order) and the validator, for the attempts log (`peak report`'s evaluation depth).
    let mut caught: Option<(u32, Option<String>)> = None;
    let mut device = None;
    let verdict = match &options.defer {
        Some(defer) => {
            reporter.stage("compile-check");
            let mut check = defer::compile_check(workers, candidate, &picked, defer)?;
            // As validation does below: samples the launch script pruned say nothing of
            // the kernel, so where all were, others are compiled before giving up.
            let mut tried: Vec<ExecParams> = picked.iter().map(|s| s.params.clone()).collect();
            for round in 1..=RESAMPLE_ROUNDS {
                if !check.all_pruned() {
                    break;
                }
                let fresh = fresh_samples(&space, &options.settings, round, &mut tried);
                if fresh.is_empty() {
                    break;
                }
                check = defer::compile_check(workers, candidate, &fresh, defer)?;
            }
            *validation_s += started.elapsed().as_secs_f64();
            match check.failure() {
                None => return Ok(Judgement::Accepted(Judged::Deferred(check))),
                Some(verdict) => verdict,
            }
        }
        None => {
            reporter.stage("validate");
            let cache_dir = options.settings.cache_dir.clone().unwrap_or_else(default_cache_dir);
            let mut validators: Vec<Box<dyn Validator>> = vec![Box::new(OutputValidator::new(root.clone(), ReferenceStore::new(cache_dir.join("references"))))];
            let mut report = peak_eval::validate(workers, candidate, &picked, &mut validators, reporter.validation())?;
            // Samples the launch script pruned at the validation sizes say nothing of the
            // kernel: where all were, draw others (never one already tried) before
            // calling the step inconclusive.
            let mut tried: Vec<ExecParams> = picked.iter().map(|s| s.params.clone()).collect();
            for round in 1..=RESAMPLE_ROUNDS {
                if report.outcome != Validation::Inconclusive {
                    break;
                }
                let fresh = fresh_samples(&space, &options.settings, round, &mut tried);
                if fresh.is_empty() {
                    break;
                }
                picked = fresh;
                report = peak_eval::validate(workers, candidate, &picked, &mut validators, reporter.validation())?;
            }
            device = Some(report.device.clone());
            let sanitized = plan.after_outputs(report.outcome, workers, candidate, &space, &picked, options.settings.sanitizer.samples)?;
            *validation_s += started.elapsed().as_secs_f64();
            match (report.outcome, sanitized.as_ref().and_then(sanitize::Record::failure)) {
                (_, Some(finding)) => {
                    let at = sanitized.as_ref().and_then(|r| r.samples.iter().position(|s| s.verdict.is_failure()));
                    caught = at.map(|i| (i as u32 + 1, Some("sanitizer".to_string())));
                    finding
                }
                (Validation::Passed, None) => return Ok(Judgement::Accepted(Judged::Validated { report, sanitized })),
                (Validation::Inconclusive, None) => {
                    Verdict::InvalidConfig { reason: "every sampled execution parameter was pruned as invalid; nothing ran".into() }
                }
                (Validation::Failed, None) => {
                    let (i, sample) =
                        report.samples.iter().enumerate().find(|(_, s)| s.verdict.is_failure()).expect("a failed validation has a failing sample");
                    // A compile error, crash or time-out is the compiler's or the runner's
                    // (left unnamed here); anything else, the failing check's validator.
                    let validator = match sample.verdict {
                        Verdict::CompileFailed { .. } | Verdict::LaunchFailed { .. } | Verdict::Crashed { .. } | Verdict::TimedOut { .. } => None,
                        _ => sample.checks.iter().find(|c| c.verdict.is_failure()).map(|c| c.validator.clone()),
                    };
                    caught = Some((i as u32 + 1, validator));
                    sample.verdict.clone()
                }
            }
        }
    };
    Ok(Judgement::Rejected { verdict, caught, device })
}

/// What the executor is told about a rejected candidate, for its repair.
fn feedback_for(verdict: &Verdict) -> Feedback {
    match verdict {
        Verdict::CompileFailed { log, message, .. } => Feedback::CompileError(if log.is_empty() { message.clone() } else { log.clone() }),
        Verdict::WrongOutput(_) | Verdict::ModifiedInput { .. } => Feedback::WrongOutput(verdict.summary()),
        Verdict::SanitizerFinding { findings } => Feedback::RuntimeError(sanitize::feedback(findings)),
        _ => Feedback::RuntimeError(verdict.summary()),
    }
}

/// What ended the repair loop: a candidate validated on the device (and sanitized), or
/// one compile-checked where there is none.
enum Judged {
    Validated { report: ValidationReport, sanitized: Option<sanitize::Record> },
    Deferred(CompileCheck),
}

/// Whether `t`'s own text asks for every region back unchanged where the kernel does not
/// fit (the phrase the library's transformations use: "not carried out").
fn offers_to_decline(t: &Transformation) -> bool {
    let says = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ").contains("not carried out");
    t.overview.as_deref().is_some_and(says) || t.passes.iter().any(|p| says(&p.instructions))
}

fn give_up(dir: &Path, t: &Transformation, attempts: usize, outcome: AttemptOutcome, error: &str) -> Result<ApplyOutcome> {
    state::clear(dir)?;
    Ok(ApplyOutcome::Failed { transformation: t.name.clone(), attempts, last_outcome: outcome, last_error: error.to_string() })
}

/// The parent's context with the new regions and the transformation's parameters.
fn write_candidate(parent: &Context, t: &Transformation, regions: &peak_spec::Regions, dir: &Path) -> Result<Context> {
    let candidate = Context { dir: dir.to_path_buf(), manifest: extend(&parent.manifest, t), regions: regions.clone() };
    let _ = std::fs::remove_dir_all(dir);
    candidate.save(dir)?;
    Context::load(dir).with_context(|| format!("{} produced an invalid context", t.name))
}

/// Which pass to repeat, and the region to repair when no pass of `t` edits the region at
/// fault: for a compile error or a sanitizer finding, the last pass editing the region its
/// first line falls in (or, when none does, the last pass, asked to fix that region);
/// otherwise the last pass.
fn repair_target(t: &Transformation, verdict: &Verdict, candidate: &Context) -> (usize, Option<Region>) {
    let last = t.passes.len();
    let file = candidate.manifest.kernel.source.as_str();
    let line = match verdict {
        // Compilers write `file:LINE` (OpenCL, glslang) or `file(LINE)` (NVRTC).
        Verdict::CompileFailed { log, message, .. } => {
            let text = format!("{message}\n{log}");
            text.match_indices(file).find_map(|(i, m)| {
                let rest = &text[i + m.len()..];
                let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix('('))?;
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<usize>().ok()
            })
        }
        // Kernels compile with `#line 1 "<source>"`, so findings carry the source's lines.
        Verdict::SanitizerFinding { findings } => {
            findings.iter().filter(|f| f.file.as_deref().is_some_and(|p| p.ends_with(file))).find_map(|f| f.line.map(|l| l as usize))
        }
        _ => None,
    };
    let Some(line) = line else { return (last, None) };
    let region = if line >= candidate.regions.first_line(Region::Device) { Region::Device } else { Region::Macros };
    match t.passes.iter().rposition(|p| p.region == region) {
        Some(i) => (i + 1, None),
        None => (last, Some(region)),
    }
}

/// The parent's top-K, each extended with every combination of the new parameters'
/// values (capped), as starting points of the search.
fn seeds_from_parent(performance: &PerformanceRecord, t: &Transformation) -> Vec<IndexMap<String, i64>> {
    const MAX_SEEDS: usize = 256;
    let mut seeds: Vec<IndexMap<String, i64>> = ranked_tunings(performance.top_k()).collect();
    for param in &t.tuning {
        let values = param.domain.expand().unwrap_or_default();
        let mut next = Vec::new();
        for seed in seeds.iter() {
            for v in &values {
                let mut s = seed.clone();
                s.insert(param.name.clone(), *v);
                next.push(s);
            }
        }
        seeds = next.into_iter().take(MAX_SEEDS).collect();
    }
    seeds
}
