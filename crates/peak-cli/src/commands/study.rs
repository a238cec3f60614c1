//! `peak study`: RQ2 at scale (`peak_apply::study` runs it): each listed transformation is
//! applied from one checkpoint with each listed LLM executor, N times, every run on its own
//! side branch, HEAD left where it was. Failed runs are data, not errors: the command exits
//! 0 once the study ran, unless no run reached a model at all (every endpoint down, every
//! key refused), which measures nothing.

use std::path::PathBuf;

use anyhow::Result;
use peak_apply::study::{StudyOptions, StudyReport, StudyReporter, StudyRun};
use peak_backend::worker::launcher::Placement;
use peak_workflow::AttemptOutcome;

use super::{apply_options, workers};
use crate::cli::StudyArgs;
use crate::output::print_json;
use crate::progress::ApplyProgress;
use crate::usage;

pub fn run(args: StudyArgs, placement: &Placement) -> Result<()> {
    let options = StudyOptions {
        from: args.from.clone(),
        transformations: args.transformations.clone(),
        executors: args.executors.clone(),
        repeat: args.repeat,
        apply: peak_apply::ApplyOptions { retries: args.retries, ..apply_options(&args.measure) },
    };
    // Unknown names and unusable executors are usage errors, refused before anything moves.
    options.checked_transformations().map_err(usage)?;
    let dir: PathBuf = super::open_workflow(&args.workflow)?.dir().to_path_buf();
    let progress = StudyProgress { apply: ApplyProgress::new(!args.json) };
    let report = peak_apply::study::run(&dir, &options, &mut workers(placement), &progress);
    progress.apply.finish();
    let report = report?;
    if args.json {
        print_json(&report)?;
    } else {
        print_table(&report);
    }
    // A study where no model answered measured nothing: that is a failure, not data.
    if !report.reached_a_model() {
        anyhow::bail!(
            "no run reached a model: {} of {} could not connect, the others stopped before any answer\nhint: check the endpoints (PEAK_OPENAI_BASE_URL, PEAK_ANTHROPIC_BASE_URL, ...) and keys, then run the study again",
            report.unreachable(),
            report.runs.len()
        );
    }
    Ok(())
}

/// Each run's start and end as a line above the apply's progress.
struct StudyProgress {
    apply: ApplyProgress,
}

impl StudyReporter for StudyProgress {
    fn run_started(&self, transformation: &str, executor: &str, repeat: usize, of: usize, branch: &str) {
        self.apply.println(format!("{transformation} with {executor} ({repeat}/{of}) on {branch}"));
    }

    fn run_ended(&self, run: &StudyRun) {
        self.apply.println(format!("  {}: {}", run.status, run.error.as_deref().or(run.checkpoint.as_deref()).unwrap_or("")));
    }

    fn apply(&self) -> &dyn peak_apply::ApplyReporter {
        &self.apply
    }
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
