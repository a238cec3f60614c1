//! A study (RQ2 at scale, `peak study`, the MCP tool `study`): each listed transformation
//! is applied from one checkpoint with each listed LLM executor, N times, as `apply`
//! applies it, but every run goes on its own side branch
//! `study/<transformation>/<executor>/<n>`, so the workflow's HEAD, its branch and its
//! working folder are where they were afterwards (restored on error too). Every try lands
//! in the attempts log with the executor and the model, which is what `peak report` reads
//! for its success figure; a successful run is a checkpoint on its branch. Failed runs are
//! data, not errors. A run whose model could not be connected to is counted apart
//! (`unreachable`), never as the model's failure; a study where no run reached a model
//! measured nothing, which [`StudyReport::reached_a_model`] tells the caller. The
//! workflow's lock is held from the first checkout to the last, so no other writer moves
//! HEAD between runs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use peak_eval::Workers;
use peak_transform::{ExecutorSpec, Library};
use peak_workflow::{AttemptOutcome, Workflow};
use serde::Serialize;

use crate::{ApplyOptions, ApplyOutcome, ApplyReporter, abandon_in, apply_in};

/// What a study runs.
#[derive(Debug, Clone)]
pub struct StudyOptions {
    /// The checkpoint every run starts from.
    pub from: String,
    /// Transformation names (the library's spelling is recorded).
    pub transformations: Vec<String>,
    /// LLM executors, `provider:model`.
    pub executors: Vec<String>,
    /// Runs of each transformation with each executor.
    pub repeat: usize,
    /// How each run applies (retries, settings); its transformation and executor are
    /// filled in per run.
    pub apply: ApplyOptions,
}

/// One run: one apply of one transformation by one executor.
#[derive(Debug, Clone, Serialize)]
pub struct StudyRun {
    pub transformation: String,
    pub executor: String,
    /// 1-based, within this transformation and executor.
    pub repeat: usize,
    pub branch: String,
    /// `checkpoint`, `failed` (the model's answers did not pass), `unreachable` (no
    /// connection to the model's server), or `error` (the apply stopped otherwise, e.g. a
    /// key refused).
    pub status: String,
    pub checkpoint: Option<String>,
    pub best_ms: Option<f64>,
    /// Every try's outcome, in order (`passed`, `compile-failed`, `unparsable-reply`, ...).
    pub tries: Vec<AttemptOutcome>,
    pub error: Option<String>,
}

/// Runs of one transformation by one executor, summed.
#[derive(Debug, Clone, Serialize)]
pub struct StudyCell {
    pub transformation: String,
    pub executor: String,
    pub runs: usize,
    pub successes: usize,
    pub first_try: usize,
    pub after_repair: usize,
    /// Runs that did not succeed, whatever stopped them, apart from `unreachable` ones.
    pub failed: usize,
    /// Runs that could not connect to the model's server: nothing was asked of the model.
    pub unreachable: usize,
    pub tries: usize,
    /// Failed tries by kind, as `peak report` names them (bad-reply, compile-failed, ...).
    pub failures: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StudyReport {
    pub from: String,
    /// HEAD before and after the study (unchanged).
    pub head: String,
    pub branch: Option<String>,
    pub cells: Vec<StudyCell>,
    pub runs: Vec<StudyRun>,
}

impl StudyReport {
    /// Whether some run got an answer from its model: it made a checkpoint, or its
    /// answers were tried and failed. A study where none did measured nothing.
    pub fn reached_a_model(&self) -> bool {
        self.runs.iter().any(|r| r.status == CHECKPOINT || r.status == FAILED)
    }

    /// Runs that could not connect to their model's server.
    pub fn unreachable(&self) -> usize {
        self.runs.iter().filter(|r| r.status == UNREACHABLE).count()
    }
}

/// Told where each run starts and how it ended; its applies report through
/// [`Self::apply`].
pub trait StudyReporter {
    fn run_started(&self, _transformation: &str, _executor: &str, _repeat: usize, _of: usize, _branch: &str) {}
    fn run_ended(&self, _run: &StudyRun) {}
    fn apply(&self) -> &dyn ApplyReporter {
        &()
    }
}

impl StudyReporter for () {}

const CHECKPOINT: &str = "checkpoint";
const FAILED: &str = "failed";
const ERROR: &str = "error";
/// The status of a run that could not connect to its model's server.
const UNREACHABLE: &str = "unreachable";

impl StudyOptions {
    /// Refuse what cannot run (the agent executor, no repeats, a transformation the
    /// library does not have) before anything moves; the transformations in the
    /// library's spelling, which is what the attempts log and `peak report` use.
    pub fn checked_transformations(&self) -> Result<Vec<String>> {
        for spec in &self.executors {
            if let ExecutorSpec::Agent = spec.parse::<ExecutorSpec>().map_err(|e| anyhow!(e))? {
                bail!("executors: agent: a study needs provider:model executors (the agent executor waits for a person)");
            }
        }
        if self.repeat == 0 {
            bail!("repeat 0: give 1 or more");
        }
        let mut library = Library::builtin()?;
        for dir in &self.apply.settings.library_dirs {
            library.add_dir(dir)?;
        }
        self.transformations.iter().map(|name| Ok(library.get(name)?.name.clone())).collect()
    }
}

/// Run the study on the workflow at `workflow` (options checked first, see
/// [`StudyOptions::checked_transformations`]).
pub fn run(workflow: &Path, options: &StudyOptions, workers: &mut Workers, reporter: &dyn StudyReporter) -> Result<StudyReport> {
    let transformations = options.checked_transformations()?;
    let mut wf = Workflow::open(workflow)?;
    // One lock for the whole study, its applies and the branches and checkouts between
    // them: another writer is refused, naming the study, until HEAD is back.
    wf.hold_lock("study")?;
    let from = wf.resolve(&options.from)?.to_string();
    let head = wf.head()?;
    let restore_to = head.branch.clone().unwrap_or_else(|| head.id.to_string());
    // Fails here, before anything moved, when the working folder has uncommitted edits.
    wf.checkout(&restore_to, false)?;

    let mut runs = Vec::new();
    let result = run_all(&mut wf, options, &transformations, &from, workers, reporter, &mut runs);
    // Put HEAD, the branch and the working folder back, whatever happened.
    let restored = wf.checkout(&restore_to, true);
    result?;
    let after = restored?;
    Ok(StudyReport { from, head: after.id.to_string(), branch: after.branch, cells: cells(&runs), runs })
}

fn run_all(
    wf: &mut Workflow,
    options: &StudyOptions,
    transformations: &[String],
    from: &str,
    workers: &mut Workers,
    reporter: &dyn StudyReporter,
    runs: &mut Vec<StudyRun>,
) -> Result<()> {
    for transformation in transformations {
        for executor in &options.executors {
            for repeat in 1..=options.repeat {
                let prefix = format!("study/{}/{}", slug(transformation), slug(executor));
                let branch = (1..).map(|n| format!("{prefix}/{n}")).find(|name| wf.resolve(name).is_err()).ok_or_else(|| anyhow!("no free branch name"))?;
                wf.branch(&branch, Some(from))?;
                wf.checkout(&branch, true)?;
                reporter.run_started(transformation, executor, repeat, options.repeat, &branch);
                let apply = ApplyOptions { transformation: transformation.clone(), executor: executor.clone(), ..options.apply.clone() };
                let run = one_run(wf, &apply, repeat, branch, workers, reporter)?;
                reporter.run_ended(&run);
                runs.push(run);
            }
        }
    }
    Ok(())
}

/// One apply on its branch, and what it came to.
fn one_run(wf: &mut Workflow, apply: &ApplyOptions, repeat: usize, branch: String, workers: &mut Workers, reporter: &dyn StudyReporter) -> Result<StudyRun> {
    let before = wf.attempts()?.records.len();
    let outcome = apply_in(wf, apply, workers, reporter.apply());
    let tries: Vec<AttemptOutcome> = wf.attempts()?.records.into_iter().skip(before).filter(|r| !r.is_start()).map(|r| r.attempt.outcome).collect();
    let mut run = StudyRun {
        transformation: apply.transformation.clone(),
        executor: apply.executor.clone(),
        repeat,
        branch,
        status: String::new(),
        checkpoint: None,
        best_ms: None,
        tries,
        error: None,
    };
    match outcome {
        Ok(ApplyOutcome::Checkpoint { id, best_ms, .. }) => {
            run.status = CHECKPOINT.into();
            run.checkpoint = Some(id);
            run.best_ms = best_ms;
        }
        Ok(ApplyOutcome::Failed { last_outcome, last_error, .. }) => {
            run.status = FAILED.into();
            run.error = Some(format!("{last_outcome}: {}", last_error.lines().next().unwrap_or_default()));
        }
        Ok(ApplyOutcome::Waiting { .. }) => {
            abandon_in(wf)?;
            run.status = ERROR.into();
            run.error = Some("the executor waits for a reply; a study needs an LLM executor".into());
        }
        Err(e) => {
            // Leave no apply in progress behind, or the next run would be refused.
            let _ = abandon_in(wf);
            // The apply records a connection failure as its last try.
            let connection = run.tries.last() == Some(&AttemptOutcome::Connection);
            run.status = if connection { UNREACHABLE } else { ERROR }.into();
            run.error = Some(peak_workflow::redact_secrets(&format!("{e:#}")).into_owned());
        }
    }
    Ok(run)
}

/// A branch-name component: letters, digits, `-` and `_`; anything else becomes `-`.
fn slug(s: &str) -> String {
    let s: String = s.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect();
    s.trim_matches('-').to_string()
}

fn cells(runs: &[StudyRun]) -> Vec<StudyCell> {
    let mut cells: Vec<StudyCell> = Vec::new();
    for run in runs {
        let i = match cells.iter().position(|c| c.transformation == run.transformation && c.executor == run.executor) {
            Some(i) => i,
            None => {
                cells.push(StudyCell {
                    transformation: run.transformation.clone(),
                    executor: run.executor.clone(),
                    runs: 0,
                    successes: 0,
                    first_try: 0,
                    after_repair: 0,
                    failed: 0,
                    unreachable: 0,
                    tries: 0,
                    failures: BTreeMap::new(),
                });
                cells.len() - 1
            }
        };
        let cell = &mut cells[i];
        cell.runs += 1;
        cell.tries += run.tries.len();
        match run.status.as_str() {
            CHECKPOINT => {
                cell.successes += 1;
                if run.tries.len() <= 1 { cell.first_try += 1 } else { cell.after_repair += 1 }
            }
            UNREACHABLE => cell.unreachable += 1,
            _ => cell.failed += 1,
        }
        // Connection failures are the endpoint's, counted in `unreachable`, not the model's.
        for outcome in run.tries.iter().filter(|o| !o.is_success() && **o != AttemptOutcome::Connection) {
            *cell.failures.entry(outcome.failure_kind().to_string()).or_default() += 1;
        }
        if run.status == ERROR {
            *cell.failures.entry(ERROR.into()).or_default() += 1;
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(transformation: &str, status: &str, tries: &[AttemptOutcome]) -> StudyRun {
        StudyRun {
            transformation: transformation.into(),
            executor: "openai:m".into(),
            repeat: 1,
            branch: String::new(),
            status: status.into(),
            checkpoint: None,
            best_ms: None,
            tries: tries.to_vec(),
            error: None,
        }
    }

    #[test]
    fn cells_sum_runs_and_count_unreachable_runs_apart_from_the_models_failures() {
        use AttemptOutcome as O;
        let runs = [
            run("Tile", CHECKPOINT, &[O::Passed]),
            run("Tile", CHECKPOINT, &[O::CompileFailed, O::Passed]),
            run("Tile", FAILED, &[O::WrongOutput, O::UnparsableReply]),
            run("Tile", UNREACHABLE, &[O::Connection]),
        ];
        let cells = cells(&runs);
        assert_eq!(cells.len(), 1);
        let c = &cells[0];
        assert_eq!((c.runs, c.successes, c.first_try, c.after_repair, c.failed, c.unreachable, c.tries), (4, 2, 1, 1, 1, 1, 6));
        let kinds: Vec<(&str, usize)> = c.failures.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(kinds, [("bad-reply", 1), ("compile-failed", 1), ("wrong-output", 1)]);
        let report = StudyReport { from: String::new(), head: String::new(), branch: None, cells, runs: runs.to_vec() };
        assert!(report.reached_a_model());
        assert_eq!(report.unreachable(), 1);
        let only_down = StudyReport { runs: vec![run("Tile", UNREACHABLE, &[O::Connection])], ..report };
        assert!(!only_down.reached_a_model());
    }

    #[test]
    fn branch_names_keep_letters_digits_dashes_and_underscores() {
        assert_eq!(slug("TB-Tiling"), "tb-tiling");
        assert_eq!(slug("openai:gpt-4.1"), "openai-gpt-4-1");
        assert_eq!(slug("ollama:qwen2.5-coder:7b"), "ollama-qwen2-5-coder-7b");
    }
}
