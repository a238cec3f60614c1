//! The autonomous mode (`peak auto`): an LLM plans, peak applies, and bad steps are
//! backtracked.
//!
//! Each step, the planner is shown the current checkpoint (its code, its performance
//! summary, profile metrics when the checkpoint has them, the transformations on its line
//! since the root), the best checkpoint so far, the transformation library for the
//! backend, and the history of attempts; it answers one strict JSON object:
//!
//! ```json
//! {"action": "apply", "transformation": "TB-Tiling", "reasoning": "..."}
//! {"action": "stop", "transformation": "", "reasoning": "..."}
//! ```
//!
//! The chosen transformation is carried out by [`crate::apply`], exactly as
//! `peak apply` does. When it fails (retries exhausted), or its checkpoint is slower than
//! the best one by more than the regression threshold, the search goes back to the best
//! checkpoint: a new branch `auto-N` is made there and checked out, so the next plan
//! starts from the best kernel, with the failure in its history, and the failed line stays
//! in the workflow for the record. A plan that repeats a transformation which already
//! failed or regressed from the current checkpoint in this run is refused like an
//! unusable reply, so the search moves on to a different branch.
//!
//! Every decision, with the planner's reasoning, and every outcome is appended to
//! `.git/peak/auto-log.jsonl` (one JSON object per line), beside the attempts log the
//! applies write. A reply that is not such an object is a *decision failure*: it is
//! logged with the reply and the reason, and the planner is asked again with the reason,
//! up to [`AutoOptions::plan_retries`] times in a row.
//!
//! The workflow's lock is held for the whole run, planner questions included: another
//! writer (a `peak checkout`, an apply) is refused, naming `auto`, rather than moving HEAD
//! under the next step.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use peak_eval::Workers;
use peak_record::{PerformanceRecord, Record, ReferenceRecord};
use peak_spec::Region;
use peak_transform::{Executor, ExecutorSpec, Library, Outcome, PassRequest};
use peak_workflow::{CheckpointView, LogEntry, Workflow};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{ApplyOptions, ApplyOutcome, ApplyReporter};

/// The file the decisions go to, inside the workflow's `.git/peak`.
pub const AUTO_LOG: &str = "auto-log.jsonl";

#[derive(Debug, Clone)]
pub struct AutoOptions {
    /// Who carries the chosen transformations out: `provider:model`.
    pub executor: String,
    /// Who chooses them: `provider:model`; the executor when `None`.
    pub planner: Option<String>,
    /// Transformations to apply at most.
    pub budget: usize,
    /// No new step starts after this much time (a step in progress finishes).
    pub time_limit: Option<Duration>,
    /// A checkpoint slower than the best one by more than this fraction (0.05: 5%) is a
    /// regression and is backtracked.
    pub regression: f64,
    /// Unusable planner replies in a row before the run gives up.
    pub plan_retries: u32,
    /// How each transformation is applied (retries, validation samples, tuning budget,
    /// restrictions, library folders, caches); its transformation and executor are
    /// filled in per step.
    pub apply: ApplyOptions,
}

impl Default for AutoOptions {
    fn default() -> Self {
        AutoOptions { executor: String::new(), planner: None, budget: 10, time_limit: None, regression: 0.05, plan_retries: 2, apply: ApplyOptions::default() }
    }
}

/// One line of `auto-log.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoEvent {
    pub time: String,
    /// The run this event belongs to (its start time), so several runs in one log part.
    pub run: String,
    /// 1-based planning step.
    pub step: usize,
    /// `plan`, `decision-failure`, `checkpoint`, `regression`, `failed`, `backtrack`,
    /// `stop`, `budget-spent`, `time-up` or `error`.
    pub event: String,
    /// The checkpoint the step started from (for a backtrack: the one it left).
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformation: Option<String>,
    /// The planner's reasoning, for `plan` and `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// What happened: an error, the unusable reply, why a step was backtracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The checkpoint a step produced, or the one backtracked to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_ms: Option<f64>,
    /// The branch made and checked out by a backtrack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stopped {
    /// The planner said stop.
    Planner,
    /// The budget of transformations was spent.
    Budget,
    /// The time limit passed.
    Time,
}

#[derive(Debug, Clone, Serialize)]
pub struct AutoReport {
    pub stopped: Stopped,
    /// Transformations applied (successful or not).
    pub applied: usize,
    /// The fastest checkpoint in the workflow at the end, and its time.
    pub best: Option<(String, f64)>,
    /// HEAD at the end, and its branch.
    pub head: String,
    pub branch: Option<String>,
    /// This run's events, as written to the log.
    pub events: Vec<AutoEvent>,
}

/// Told about each event as it is logged; applies report through [`Self::apply`].
pub trait AutoReporter {
    fn event(&self, _event: &AutoEvent) {}
    fn apply(&self) -> &dyn ApplyReporter {
        &()
    }
}

impl AutoReporter for () {}

/// What the planner answers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub action: PlanAction,
    #[serde(default)]
    pub transformation: String,
    pub reasoning: String,
}

/// What the planner decided: apply a transformation, or stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum PlanAction {
    Apply,
    Stop,
}

impl TryFrom<String> for PlanAction {
    type Error = String;
    fn try_from(action: String) -> Result<Self, String> {
        match action.as_str() {
            "apply" => Ok(PlanAction::Apply),
            "stop" => Ok(PlanAction::Stop),
            other => Err(format!("`action` must be \"apply\" or \"stop\", not {other:?}")),
        }
    }
}

/// Read a planner reply strictly: one JSON object with `action` (`apply` or `stop`),
/// `transformation` (a library name, for `apply`) and `reasoning`, and nothing else. The
/// only leniency is reasoning-model thinking and a single fence around the object.
pub fn parse_plan(reply: &str, library: &Library, backend: peak_transform::Language) -> Result<Plan, String> {
    let visible = peak_transform::reply::strip_thinking(reply);
    let mut text = visible.trim();
    if let Some(inner) = text.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        text = inner.strip_suffix("```").ok_or("the reply opens a code fence it never closes")?.trim();
    }
    let mut plan: Plan = serde_json::from_str(text).map_err(|e| format!("the reply is not the JSON object asked for: {e}"))?;
    match plan.action {
        PlanAction::Stop => Ok(plan),
        PlanAction::Apply => {
            if plan.transformation.trim().is_empty() {
                return Err("`action` is \"apply\" but `transformation` is empty".into());
            }
            let t = library.get(&plan.transformation).map_err(|e| e.to_string())?;
            if !t.applies_to(backend) {
                return Err(format!("{} does not apply to {} kernels", t.name, backend.name()));
            }
            plan.transformation = t.name.clone();
            Ok(plan)
        }
    }
}

/// Run the autonomous mode on a workflow until the planner stops, the budget is spent or
/// the time is up.
pub fn run(workflow: &Path, options: &AutoOptions, workers: &mut Workers, reporter: &dyn AutoReporter) -> Result<AutoReport> {
    let started = Instant::now();
    let wf = Workflow::open(workflow)?;
    let dir = wf.dir().to_path_buf();
    drop(wf);
    if crate::pending(&dir)?.is_some() {
        bail!("a transformation is waiting for a region in {}\nhint: submit it with `peak submit`, or abandon it with `peak apply --abandon`", dir.display());
    }
    let planner = reachable_planner(&dir, options)?;
    let library = library(&options.apply.settings.library_dirs)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let log = EventLog { file: dir.join(".git").join("peak").join(AUTO_LOG), run: peak_workflow::now_rfc3339(), events: Vec::new() };
    let mut session = Session { options, reporter, planner, library, runtime, log };

    // One lock from the first write to the last: no other writer moves HEAD while the
    // planner thinks, or between a step and its backtrack.
    let mut wf = Workflow::open(&dir)?;
    wf.hold_lock("auto")?;
    session.leave_detached_head(&mut wf)?;
    let (stopped, applied) = session.steps(&mut wf, workers, started)?;

    let state = State::read(&wf)?;
    let head = wf.head()?;
    Ok(AutoReport { stopped, applied, best: state.best, head: head.id.to_string(), branch: head.branch, events: session.log.events })
}

/// The planner, once both it and the executor are known to be LLMs that answer: endpoints
/// that are down fail here, in seconds, before the planner is asked anything (not after a
/// minute of retries) and before the workflow is touched.
fn reachable_planner(dir: &Path, options: &AutoOptions) -> Result<Box<dyn Executor>> {
    let executor_spec: ExecutorSpec = options.executor.parse()?;
    let planner_spec: ExecutorSpec = options.planner.as_deref().unwrap_or(&options.executor).parse()?;
    if executor_spec == ExecutorSpec::Agent || planner_spec == ExecutorSpec::Agent {
        bail!(
            "the autonomous mode needs LLM executors (provider:model), not `agent`\nhint: to drive peak yourself, use `peak apply --executor agent` or the MCP server"
        );
    }
    let planner = planner_spec.build(&dir.join(".git/peak/unused-agent"), |var| std::env::var(var).ok())?;
    let executor = executor_spec.build(&dir.join(".git/peak/unused-agent"), |var| std::env::var(var).ok())?;
    for (role, endpoint) in [("the planner", &planner), ("the executor", &executor)] {
        endpoint.check_reachable().map_err(|e| {
            anyhow!("{role}: {e}\nhint: start the server, or point peak at a running one (its base-URL variable, e.g. PEAK_OPENAI_BASE_URL); nothing was asked of it")
        })?;
    }
    Ok(planner)
}

/// What a run's steps share: its settings, the planner and what it is shown, and the log.
struct Session<'a> {
    options: &'a AutoOptions,
    reporter: &'a dyn AutoReporter,
    planner: Box<dyn Executor>,
    library: Library,
    runtime: tokio::runtime::Runtime,
    log: EventLog,
}

impl Session<'_> {
    /// Checkpoints go on branches only: from a detached HEAD, start a branch there.
    fn leave_detached_head(&mut self, wf: &mut Workflow) -> Result<()> {
        if wf.head()?.branch.is_some() {
            return Ok(());
        }
        let branch = free_branch(wf)?;
        let at = wf.head()?.id.to_string();
        wf.branch(&branch, Some(&at))?;
        wf.checkout(&branch, false)?;
        let event = AutoEvent {
            event: "backtrack".into(),
            checkpoint: Some(at),
            branch: Some(branch),
            detail: Some("HEAD was detached; new checkpoints need a branch".into()),
            ..self.log.event(0, wf)?
        };
        self.log.write(self.reporter, event)
    }

    /// Plan and apply, one transformation a step, until the planner stops or the budget
    /// or the time runs out: why it stopped, and how many transformations were applied.
    fn steps(&mut self, wf: &mut Workflow, workers: &mut Workers, started: Instant) -> Result<(Stopped, usize)> {
        let mut applied = 0usize;
        let mut step = 0usize;
        let stopped = loop {
            if let Some(stopped) = self.out_of_budget_or_time(wf, step, applied, started)? {
                break stopped;
            }
            step += 1;
            let state = State::read(wf)?;
            let plan = self.ask_planner(wf, step, &state)?;
            if plan.action == PlanAction::Stop {
                let event = AutoEvent { event: "stop".into(), reasoning: Some(plan.reasoning), ..self.log.event(step, wf)? };
                self.log.write(self.reporter, event)?;
                break Stopped::Planner;
            }
            let event = AutoEvent {
                event: "plan".into(),
                transformation: Some(plan.transformation.clone()),
                reasoning: Some(plan.reasoning.clone()),
                ..self.log.event(step, wf)?
            };
            self.log.write(self.reporter, event)?;

            applied += 1;
            if let Some(why) = self.apply(wf, workers, step, &state, &plan.transformation)? {
                backtrack(wf, &mut self.log, self.reporter, step, &plan.transformation, &why)?;
            }
        };
        Ok((stopped, applied))
    }

    /// Whether the run must end before step `step + 1` (logged): the budget is spent or
    /// the time limit has passed.
    fn out_of_budget_or_time(&mut self, wf: &Workflow, step: usize, applied: usize, started: Instant) -> Result<Option<Stopped>> {
        if applied >= self.options.budget {
            let event = AutoEvent { event: "budget-spent".into(), detail: Some(format!("{applied} transformations applied")), ..self.log.event(step, wf)? };
            self.log.write(self.reporter, event)?;
            return Ok(Some(Stopped::Budget));
        }
        if self.options.time_limit.is_some_and(|limit| started.elapsed() >= limit) {
            let event =
                AutoEvent { event: "time-up".into(), detail: Some(format!("{:.0} s elapsed", started.elapsed().as_secs_f64())), ..self.log.event(step, wf)? };
            self.log.write(self.reporter, event)?;
            return Ok(Some(Stopped::Time));
        }
        Ok(None)
    }

    /// Ask the planner until the reply is usable: each unusable one is logged as a
    /// decision failure and its reason goes back with the next question, up to
    /// [`AutoOptions::plan_retries`] times in a row.
    fn ask_planner(&mut self, wf: &Workflow, step: usize, state: &State) -> Result<Plan> {
        let prompt = planner_prompt(wf, state, &self.library, &self.log.events)?;
        let mut feedback: Option<String> = None;
        let mut tries = 0u32;
        loop {
            tries += 1;
            let text = match &feedback {
                None => prompt.clone(),
                Some(reason) => format!("{prompt}\n\n## Your previous reply could not be used\n\n{reason}\n\nReply again with only the JSON object."),
            };
            let request = PassRequest { transformation: "planner".into(), pass: step, attempt: tries, prompt: text };
            let reply = match self.runtime.block_on(self.planner.execute(&request)) {
                Ok(Outcome::Reply(response)) => response.text,
                Ok(Outcome::Waiting(_)) => bail!("the planner executor asked for an agent's answer"),
                Err(e) => {
                    let event = AutoEvent { event: "error".into(), detail: Some(format!("planner: {e}")), ..self.log.event(step, wf)? };
                    self.log.write(self.reporter, event)?;
                    return Err(anyhow!(e).context("asking the planner"));
                }
            };
            match parse_plan(&reply, &self.library, state.backend).and_then(|plan| not_repeated(plan, &self.log.events, &state.head)) {
                Ok(plan) => return Ok(plan),
                Err(reason) => {
                    let shown: String = reply.chars().take(2000).collect();
                    let event = AutoEvent { event: "decision-failure".into(), detail: Some(format!("{reason}\nreply: {shown}")), ..self.log.event(step, wf)? };
                    self.log.write(self.reporter, event)?;
                    if tries > self.options.plan_retries {
                        bail!(
                            "the planner gave {tries} unusable replies in a row; the last: {reason}\nhint: `{}` in the workflow's .git/peak has every reply",
                            AUTO_LOG
                        );
                    }
                    feedback = Some(reason);
                }
            }
        }
    }

    /// Apply the planned transformation as `peak apply` does and log its outcome: why the
    /// search should go back to the best checkpoint, if it should.
    fn apply(&mut self, wf: &mut Workflow, workers: &mut Workers, step: usize, state: &State, transformation: &str) -> Result<Option<String>> {
        let apply_options = ApplyOptions { transformation: transformation.to_string(), executor: self.options.executor.clone(), ..self.options.apply.clone() };
        let outcome = match crate::apply_in(wf, &apply_options, workers, self.reporter.apply()) {
            Ok(outcome) => outcome,
            Err(e) => {
                // Leave the workflow ready for the next command, not mid-apply.
                let _ = crate::abandon_in(wf);
                let event = AutoEvent {
                    event: "error".into(),
                    transformation: Some(transformation.to_string()),
                    detail: Some(format!("{e:#}")),
                    ..self.log.event(step, wf)?
                };
                self.log.write(self.reporter, event)?;
                return Err(e.context("applying the planned transformation"));
            }
        };
        // Outcomes are recorded at the checkpoint the step started from.
        let from = |event: AutoEvent| AutoEvent { at: state.head.clone(), ..event };
        match &outcome {
            ApplyOutcome::Checkpoint { id, best_ms, .. } => {
                let regression = self.regression(*best_ms, state);
                let event = if regression.is_some() { "regression" } else { "checkpoint" };
                let event = from(AutoEvent {
                    event: event.into(),
                    transformation: Some(transformation.to_string()),
                    checkpoint: Some(id.clone()),
                    best_ms: *best_ms,
                    detail: regression.clone(),
                    ..self.log.event(step, wf)?
                });
                self.log.write(self.reporter, event)?;
                Ok(regression)
            }
            ApplyOutcome::Failed { attempts, last_outcome, last_error, .. } => {
                let detail = format!("{last_outcome} after {attempts} attempts: {last_error}");
                let event = from(AutoEvent {
                    event: "failed".into(),
                    transformation: Some(transformation.to_string()),
                    detail: Some(detail.clone()),
                    ..self.log.event(step, wf)?
                });
                self.log.write(self.reporter, event)?;
                Ok(Some(detail))
            }
            ApplyOutcome::Waiting { .. } => {
                let _ = crate::abandon_in(wf);
                bail!("the executor {} waits for a submission; the autonomous mode needs an LLM executor", self.options.executor);
            }
        }
    }

    /// Why a checkpoint taking `best_ms` is a regression: slower than the best checkpoint
    /// by more than [`AutoOptions::regression`].
    fn regression(&self, best_ms: Option<f64>, state: &State) -> Option<String> {
        match (best_ms, &state.best) {
            (Some(ms), Some((_, best))) if ms > best * (1.0 + self.options.regression) => {
                Some(format!("{ms:.4} ms is {:.1}% slower than the best checkpoint ({best:.4} ms)", (ms / best - 1.0) * 100.0))
            }
            _ => None,
        }
    }
}

/// Refuse a plan that repeats what already failed or regressed from this checkpoint in
/// this run: the search must try something else (or stop).
fn not_repeated(plan: Plan, events: &[AutoEvent], head: &str) -> Result<Plan, String> {
    let repeated = events
        .iter()
        .find(|e| matches!(e.event.as_str(), "failed" | "regression") && e.at == head && e.transformation.as_deref() == Some(plan.transformation.as_str()));
    match repeated {
        Some(e) => Err(format!(
            "{} already {} from this checkpoint; choose another transformation, or stop",
            plan.transformation,
            if e.event == "failed" { "failed" } else { "made the kernel slower" }
        )),
        None => Ok(plan),
    }
}

/// Go back to the best checkpoint on a new branch, unless HEAD is already there.
fn backtrack(wf: &mut Workflow, log: &mut EventLog, reporter: &dyn AutoReporter, step: usize, transformation: &str, why: &str) -> Result<()> {
    let state = State::read(wf)?;
    let Some((best, _)) = &state.best else { return Ok(()) };
    if *best == state.head {
        // The step failed from the best checkpoint itself: there is nothing to go back
        // to, and the planner sees the failure in its history.
        return Ok(());
    }
    let branch = free_branch(wf)?;
    wf.branch(&branch, Some(best))?;
    wf.checkout(&branch, false)?;
    log.write(
        reporter,
        AutoEvent {
            event: "backtrack".into(),
            transformation: Some(transformation.to_string()),
            checkpoint: Some(best.clone()),
            branch: Some(branch),
            detail: Some(why.to_string()),
            at: state.head.clone(),
            ..log.event(step, wf)?
        },
    )
}

/// The first of `auto-1`, `auto-2`, ... that names no branch or tag yet.
fn free_branch(wf: &Workflow) -> Result<String> {
    (1..).map(|n| format!("auto-{n}")).find(|name| wf.resolve(name).is_err()).ok_or_else(|| anyhow!("no free branch name"))
}

fn library(dirs: &[PathBuf]) -> Result<Library> {
    let mut library = Library::builtin()?;
    for dir in dirs {
        library.add_dir(dir)?;
    }
    Ok(library)
}

struct EventLog {
    file: PathBuf,
    run: String,
    events: Vec<AutoEvent>,
}

impl EventLog {
    /// An event at HEAD with the common fields filled in.
    fn event(&self, step: usize, wf: &Workflow) -> Result<AutoEvent> {
        Ok(AutoEvent {
            time: peak_workflow::now_rfc3339(),
            run: self.run.clone(),
            step,
            event: String::new(),
            at: wf.head()?.id.to_string(),
            transformation: None,
            reasoning: None,
            detail: None,
            checkpoint: None,
            best_ms: None,
            branch: None,
        })
    }

    /// Append one line; the log is append-only, one object per line, so a crash loses at
    /// most the line being written.
    fn write(&mut self, reporter: &dyn AutoReporter, event: AutoEvent) -> Result<()> {
        // Planner replies and errors pass through here: no key may reach the file.
        let mut line = peak_workflow::redact_secrets(&serde_json::to_string(&event)?).into_owned();
        line.push('\n');
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.file).with_context(|| format!("opening {}", self.file.display()))?;
        file.write_all(line.as_bytes()).with_context(|| format!("writing {}", self.file.display()))?;
        reporter.event(&event);
        self.events.push(event);
        Ok(())
    }
}

/// Read every event of `auto-log.jsonl` (all runs); damaged lines are skipped.
pub fn read_log(workflow: &Path) -> Result<Vec<AutoEvent>> {
    let wf = Workflow::open(workflow)?;
    let file = wf.dir().join(".git").join("peak").join(AUTO_LOG);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

/// What the planner is told about the workflow.
struct State {
    head: String,
    backend: peak_transform::Language,
    entries: Vec<LogEntry>,
    /// The fastest checkpoint (any branch) and its time.
    best: Option<(String, f64)>,
}

impl State {
    fn read(wf: &Workflow) -> Result<State> {
        let entries = wf.log()?;
        let head = wf.head()?.id.to_string();
        let view = wf.show("HEAD")?;
        let recorded = ReferenceRecord::from_json(&view.reference).ok().map(|r| r.backend).filter(|b| !b.is_empty());
        let backend_name = recorded.or_else(|| {
            let manifest = view.files.get(peak_spec::MANIFEST_FILE)?;
            peak_spec::Manifest::parse(peak_spec::MANIFEST_FILE, manifest).ok().map(|m| m.kernel.backend.name().to_string())
        });
        let backend = backend_name.ok_or_else(|| anyhow!("cannot tell the workflow's backend"))?.parse().map_err(|e: String| anyhow!(e))?;
        let best = entries.iter().filter_map(|e| e.best_time_ms.map(|ms| (e.id.to_string(), ms))).min_by(|a, b| a.1.total_cmp(&b.1));
        Ok(State { head, backend, entries, best })
    }

    /// The transformations from the root to HEAD, oldest first.
    fn line(&self) -> Vec<&LogEntry> {
        let mut line = Vec::new();
        let mut at = Some(self.head.clone());
        while let Some(id) = at {
            let Some(entry) = self.entries.iter().find(|e| e.id.to_string() == id) else { break };
            line.push(entry);
            at = entry.parents.first().map(|p| p.to_string());
        }
        line.reverse();
        line
    }
}

fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

fn planner_prompt(wf: &Workflow, state: &State, library: &Library, events: &[AutoEvent]) -> Result<String> {
    let view = wf.show("HEAD")?;
    let mut p = String::new();
    let _ = writeln!(
        p,
        "You are planning the optimisation of a GPU kernel ({} backend) with natural transformations: optimisations written in plain language that \
         another model carries out, each result checked against the initial kernel's outputs and autotuned. Choose the ONE transformation most likely to \
         make the current kernel faster next, or stop when none is likely to help.\n",
        state.backend.name()
    );
    write_checkpoint(&mut p, &view, state);
    write_transformations(&mut p, &view, library, state.backend);
    write_history(&mut p, wf, events)?;
    let _ = writeln!(
        p,
        "\n## Answer\n\nDo not choose a transformation that already failed from the current checkpoint, or one marked NOT applicable. Reply with exactly one JSON \
         object and nothing else:\n{{\"action\": \"apply\", \"transformation\": \"<a name from the list>\", \"reasoning\": \"<why, in one or two sentences>\"}}\nor, \
         when no transformation is likely to help:\n{{\"action\": \"stop\", \"transformation\": \"\", \"reasoning\": \"<why>\"}}"
    );
    Ok(p)
}

/// The prompt's current checkpoint: its line from the root, its times and profile, the
/// best checkpoint of the workflow, and its source.
fn write_checkpoint(p: &mut String, view: &CheckpointView, state: &State) {
    let _ = writeln!(p, "## Current checkpoint {}\n", short(&state.head));
    let line: Vec<String> = state
        .line()
        .iter()
        .map(|e| {
            format!("{} ({})", e.transformation.as_deref().unwrap_or("?"), e.best_time_ms.map(|ms| format!("{ms:.4} ms")).unwrap_or_else(|| "not timed".into()))
        })
        .collect();
    let _ = writeln!(p, "Transformations applied from the root to here: {}", line.join(" -> "));
    // Times are shown as JSON writes them (`1.0`, not `1`), as the record holds them.
    let perf = PerformanceRecord::from_json(&view.performance).unwrap_or_default();
    match &perf.best {
        Some(best) => {
            let _ = writeln!(p, "Best time: {} ms at {}", json!(best.time_ms), json!(best.params));
        }
        None => {
            let _ = writeln!(p, "Not timed.");
        }
    }
    if perf.top_k().len() > 1 {
        let shown: Vec<String> = perf.top_k().iter().take(5).map(|e| format!("{} ms {}", json!(e.time_ms), json!(e.params.tuning))).collect();
        let _ = writeln!(p, "Fastest configurations: {}", shown.join("; "));
    }
    // Fields of records from elsewhere (a profiled checkpoint), which this peak keeps as read.
    for key in ["profile", "metrics"] {
        if let Some(metrics) = perf.extra.get(key).filter(|m| !m.is_null()) {
            let _ = writeln!(p, "Profile metrics: {metrics}");
        }
    }
    if let Some((id, ms)) = &state.best {
        let where_ = if *id == state.head { " (this checkpoint)".to_string() } else { String::new() };
        let _ = writeln!(p, "Best checkpoint of the workflow: {} at {ms:.4} ms{where_}", short(id));
    }
    let _ = writeln!(p, "\nThe kernel's source (regions: macros, device, host):\n");
    if let Some(source) = view.files.iter().find(|(name, _)| name.as_str() != peak_spec::MANIFEST_FILE).map(|(_, text)| text) {
        let _ = writeln!(p, "```\n{}\n```", source.trim_end());
    }
}

/// The prompt's list of the backend's transformations, each marked NOT applicable where
/// it needs a parameter the current kernel lacks, so the planner need not guess.
fn write_transformations(p: &mut String, view: &CheckpointView, library: &Library, backend: peak_transform::Language) {
    let tuning_names: Vec<String> = view
        .files
        .get(peak_spec::MANIFEST_FILE)
        .and_then(|m| peak_spec::Manifest::parse(peak_spec::MANIFEST_FILE, m).ok())
        .map(|m| m.tuning.keys().chain(m.inputs.keys()).cloned().collect())
        .unwrap_or_default();

    let _ = writeln!(p, "\n## Transformations\n");
    for t in library.list().iter().filter(|t| t.applies_to(backend)) {
        let missing: Vec<&String> = t.requires.iter().filter(|r| !tuning_names.contains(r)).collect();
        let params = if t.tuning.is_empty() {
            String::new()
        } else {
            format!(" Introduces {}.", t.tuning.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", "))
        };
        let regions: Vec<&str> = t.passes.iter().map(|x| x.region).collect::<std::collections::BTreeSet<Region>>().into_iter().map(Region::name).collect();
        let usable = if missing.is_empty() {
            String::new()
        } else {
            format!(" NOT applicable now: needs {}.", missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))
        };
        let _ = writeln!(p, "- {}: {} ({} passes over {}).{params}{usable}", t.name, t.description, t.passes.len(), regions.join(", "));
    }
}

/// The prompt's history: every finished attempt in the workflow, and this run's
/// regressions and backtracks, so the planner does not repeat what went wrong.
fn write_history(p: &mut String, wf: &Workflow, events: &[AutoEvent]) -> Result<()> {
    let _ = writeln!(p, "\n## History\n");
    let attempts = wf.attempts()?;
    let finished: Vec<_> = attempts.records.iter().filter(|r| !r.is_start()).collect();
    if finished.is_empty() && events.is_empty() {
        let _ = writeln!(p, "Nothing has been tried yet.");
    }
    for r in finished {
        let a = &r.attempt;
        let from = a.parent.as_deref().map(|x| format!(" from {}", short(x))).unwrap_or_default();
        let to = a.checkpoint.as_deref().map(|x| format!(" -> checkpoint {}", short(x))).unwrap_or_default();
        let error = a.error.as_deref().map(|e| format!(": {}", e.lines().next().unwrap_or_default())).unwrap_or_default();
        let _ = writeln!(p, "- {}{from}: {}{to}{error}", a.transformation, a.outcome);
    }
    for e in events.iter().filter(|e| matches!(e.event.as_str(), "regression" | "backtrack")) {
        let _ = writeln!(p, "- {} {}: {}", e.event, e.transformation.as_deref().unwrap_or(""), e.detail.as_deref().unwrap_or(""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn library() -> Library {
        Library::builtin().expect("the built-in library loads")
    }

    #[test]
    fn plans_parse_strictly() {
        let lib = library();
        let b = peak_transform::Language::Opencl;
        let plan = parse_plan(r#"{"action": "apply", "transformation": "tb-tiling", "reasoning": "reuse"}"#, &lib, b).unwrap();
        assert_eq!((plan.action, plan.transformation.as_str()), (PlanAction::Apply, "TB-Tiling"), "names are resolved to the library's spelling");
        let fenced = "<think>hmm</think>\n```json\n{\"action\": \"stop\", \"transformation\": \"\", \"reasoning\": \"done\"}\n```";
        assert_eq!(parse_plan(fenced, &lib, b).unwrap().action, PlanAction::Stop);

        for (reply, expect) in [
            ("apply TB-Tiling", "not the JSON object"),
            (r#"{"action": "apply", "transformation": "TB-Tiling"}"#, "reasoning"),
            (r#"{"action": "apply", "transformation": "TB-Tiling", "reasoning": "x", "confidence": 0.9}"#, "confidence"),
            (r#"{"action": "maybe", "transformation": "TB-Tiling", "reasoning": "x"}"#, "must be \"apply\" or \"stop\""),
            (r#"{"action": "apply", "transformation": "", "reasoning": "x"}"#, "empty"),
            (r#"{"action": "apply", "transformation": "Teleport", "reasoning": "x"}"#, "Teleport"),
            ("```json\n{\"action\": \"stop\", \"reasoning\": \"x\"}", "never closes"),
            (r#"{"action": "apply", "transformation": "Tensor-Core", "reasoning": "x"}"#, "does not apply to opencl"),
        ] {
            let err = parse_plan(reply, &lib, b).unwrap_err();
            assert!(err.contains(expect), "{reply}: {err}");
        }
    }
}
