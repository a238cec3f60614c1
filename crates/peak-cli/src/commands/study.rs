//! `peak study`: RQ2 at scale. Each listed transformation is applied from one checkpoint
//! with each listed LLM executor, N times, as `peak apply` applies it, but every run goes
//! on its own side branch `study/<transformation>/<executor>/<n>`, so the workflow's HEAD,
//! its branch and its working folder are where they were afterwards (restored on error
//! too). Every try lands in the attempts log with the executor and the model, which is
//! what `peak report` reads for its success figure; a successful run is a checkpoint on
//! its branch. Failed runs are data, not errors: the command exits 0 once the study ran,
//! unless no run reached a model at all (every endpoint down, every key refused), which
//! measures nothing. A run whose model could not be connected to is counted apart
//! (`unreachable`), never as the model's failure. The workflow's lock is held from the
//! first checkout to the last, so no other writer moves HEAD between runs.

use peak_backend::worker::launcher::Placement;
use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::Args;
use peak_apply::ApplyOutcome;
use peak_transform::ExecutorSpec;
use peak_workflow::{AttemptOutcome, Workflow};
use serde::Serialize;

use super::{apply_options, workers};
use crate::cli::{MeasureArgs, WorkflowArg};
use crate::output::print_json;
use crate::progress::ApplyProgress;
use crate::usage;

#[derive(Debug, Args)]
pub struct StudyArgs {
    /// The checkpoint every run starts from.
    #[arg(long, default_value = "HEAD", value_name = "CHECKPOINT")]
    pub from: String,
    /// Transformations to apply, comma-separated (see `peak transformations`).
    #[arg(long, value_delimiter = ',', required = true, value_name = "NAME,...")]
    pub transformations: Vec<String>,
    /// LLM executors, comma-separated PROVIDER:MODEL, e.g. `openai:gpt-5,anthropic:claude-sonnet-4-5`.
    #[arg(long, value_delimiter = ',', required = true, value_name = "PROVIDER:MODEL,...")]
    pub executors: Vec<String>,
    /// Runs of each transformation with each executor.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Repair tries per run after the first (bad reply, compile error, wrong output).
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

/// One run: one apply of one transformation by one executor.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
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

#[derive(Debug, Serialize)]
pub struct StudyReport {
    pub from: String,
    /// HEAD before and after the study (unchanged).
    pub head: String,
    pub branch: Option<String>,
    pub cells: Vec<StudyCell>,
    pub runs: Vec<StudyRun>,
}

pub fn run(args: StudyArgs, placement: &Placement) -> Result<()> {
    for spec in &args.executors {
        match spec.parse::<ExecutorSpec>().map_err(|e| usage(anyhow!(e)))? {
            ExecutorSpec::Agent => {
                return Err(usage(anyhow!("--executors agent: a study needs PROVIDER:MODEL executors (the agent executor waits for a person)")));
            }
            ExecutorSpec::Llm { .. } => {}
        }
    }
    if args.repeat == 0 {
        return Err(usage(anyhow!("--repeat 0: give 1 or more")));
    }
    // Unknown names are refused before anything moves; known ones take the library's
    // spelling, which is what the attempts log and `peak report` use.
    let mut library = peak_transform::Library::builtin()?;
    for dir in &args.measure.library {
        library.add_dir(dir).map_err(|e| usage(anyhow!(e)))?;
    }
    let transformations =
        args.transformations.iter().map(|name| library.get(name).map(|t| t.name.clone()).map_err(|e| usage(anyhow!(e)))).collect::<Result<Vec<_>>>()?;
    let dir: PathBuf = super::open_workflow(&args.workflow)?.dir().to_path_buf();
    let mut wf = Workflow::open(&dir)?;
    // One lock for the whole study, its applies and the branches and checkouts between
    // them: another writer is refused, naming the study, until HEAD is back.
    wf.hold_lock("study")?;
    let from = wf.resolve(&args.from).map_err(usage)?.to_string();
    let head = wf.head()?;
    let restore_to = head.branch.clone().unwrap_or_else(|| head.id.to_string());
    // Fails here, before anything moved, when the working folder has uncommitted edits.
    wf.checkout(&restore_to, false)?;

    let progress = ApplyProgress::new(!args.json);
    let mut runs = Vec::new();
    let result = study(&args, &transformations, &mut wf, &from, &progress, &mut runs, placement);
    // Put HEAD, the branch and the working folder back, whatever happened.
    let restored = wf.checkout(&restore_to, true);
    drop(wf);
    progress.finish();
    result?;
    let after = restored?;

    let report = StudyReport { from, head: after.id.to_string(), branch: after.branch, cells: cells(&runs), runs };
    if args.json {
        print_json(&report)?;
    } else {
        print_table(&report);
    }
    // A study where no model answered measured nothing: that is a failure, not data.
    if !reached_a_model(&report.runs) {
        let unreachable = report.runs.iter().filter(|r| r.status == UNREACHABLE).count();
        anyhow::bail!(
            "no run reached a model: {unreachable} of {} could not connect, the others stopped before any answer\nhint: check the endpoints (PEAK_OPENAI_BASE_URL, PEAK_ANTHROPIC_BASE_URL, ...) and keys, then run the study again",
            report.runs.len()
        );
    }
    Ok(())
}

/// The status of a run that could not connect to its model's server.
const UNREACHABLE: &str = "unreachable";

/// Whether some run got an answer from its model: it made a checkpoint, or its answers
/// were tried and failed.
fn reached_a_model(runs: &[StudyRun]) -> bool {
    runs.iter().any(|r| r.status == "checkpoint" || r.status == "failed")
}

fn study(
    args: &StudyArgs,
    transformations: &[String],
    wf: &mut Workflow,
    from: &str,
    progress: &ApplyProgress,
    runs: &mut Vec<StudyRun>,
    placement: &Placement,
) -> Result<()> {
    let mut workers = workers(placement);
    for transformation in transformations {
        for executor in &args.executors {
            for repeat in 1..=args.repeat {
                let prefix = format!("study/{}/{}", slug(transformation), slug(executor));
                let branch = (1..).map(|n| format!("{prefix}/{n}")).find(|name| wf.resolve(name).is_err()).ok_or_else(|| anyhow!("no free branch name"))?;
                wf.branch(&branch, Some(from))?;
                wf.checkout(&branch, true)?;
                let before = wf.attempts()?.records.len();
                progress.println(format!("{transformation} with {executor} ({repeat}/{}) on {branch}", args.repeat));
                let options = peak_apply::ApplyOptions {
                    transformation: transformation.clone(),
                    executor: executor.clone(),
                    retries: args.retries,
                    ..apply_options(&args.measure)
                };
                let outcome = peak_apply::apply_in(wf, &options, &mut workers, progress);
                let tries: Vec<AttemptOutcome> = wf.attempts()?.records.into_iter().skip(before).filter(|r| !r.is_start()).map(|r| r.attempt.outcome).collect();
                let mut run = StudyRun {
                    transformation: transformation.clone(),
                    executor: executor.clone(),
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
                        run.status = "checkpoint".into();
                        run.checkpoint = Some(id);
                        run.best_ms = best_ms;
                    }
                    Ok(ApplyOutcome::Failed { last_outcome, last_error, .. }) => {
                        run.status = "failed".into();
                        run.error = Some(format!("{last_outcome}: {}", last_error.lines().next().unwrap_or_default()));
                    }
                    Ok(ApplyOutcome::Waiting { .. }) => {
                        peak_apply::abandon_in(wf)?;
                        run.status = "error".into();
                        run.error = Some("the executor waits for a reply; a study needs an LLM executor".into());
                    }
                    Err(e) => {
                        // Leave no apply in progress behind, or the next run would be refused.
                        let _ = peak_apply::abandon_in(wf);
                        // The apply records a connection failure as its last try.
                        let connection = run.tries.last() == Some(&AttemptOutcome::Connection);
                        run.status = if connection { UNREACHABLE } else { "error" }.into();
                        run.error = Some(peak_workflow::redact_secrets(&format!("{e:#}")).into_owned());
                    }
                }
                progress.println(format!("  {}: {}", run.status, run.error.as_deref().or(run.checkpoint.as_deref()).unwrap_or("")));
                runs.push(run);
            }
        }
    }
    Ok(())
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
            "checkpoint" => {
                cell.successes += 1;
                if run.tries.len() <= 1 { cell.first_try += 1 } else { cell.after_repair += 1 }
            }
            UNREACHABLE => cell.unreachable += 1,
            _ => cell.failed += 1,
        }
        // Connection failures are the endpoint's, counted in `unreachable`, not the model's.
        for outcome in run.tries.iter().filter(|o| !o.is_success() && **o != AttemptOutcome::Connection) {
            *cell.failures.entry(peak_report::data::failure_kind(outcome).to_string()).or_default() += 1;
        }
        if run.status == "error" {
            *cell.failures.entry("error".into()).or_default() += 1;
        }
    }
    cells
}

fn print_table(report: &StudyReport) {
    println!("study from {}; HEAD {} on {} (unchanged)", short(&report.from), short(&report.head), report.branch.as_deref().unwrap_or("(detached)"));
    let rows: Vec<[String; 9]> = report
        .cells
        .iter()
        .map(|c| {
            let failures =
                if c.failures.is_empty() { "-".to_string() } else { c.failures.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ") };
            [
                c.transformation.clone(),
                c.executor.clone(),
                c.runs.to_string(),
                c.successes.to_string(),
                c.first_try.to_string(),
                c.after_repair.to_string(),
                c.failed.to_string(),
                c.unreachable.to_string(),
                failures,
            ]
        })
        .collect();
    let header = ["transformation", "executor", "runs", "ok", "first-try", "repaired", "failed", "unreachable", "failed tries by kind"].map(String::from);
    let widths: Vec<usize> = (0..9).map(|i| std::iter::once(&header).chain(&rows).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        println!("{}", line.join("  ").trim_end());
    }
    println!("runs:");
    for run in &report.runs {
        let what = match run.status.as_str() {
            "checkpoint" => format!("checkpoint {}", short(run.checkpoint.as_deref().unwrap_or("?"))),
            other => format!("{other}: {}", run.error.as_deref().unwrap_or("")),
        };
        println!("  {}  [{}]  {what}", run.branch, run.tries.iter().map(AttemptOutcome::as_str).collect::<Vec<_>>().join(", "));
    }
}

fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}
