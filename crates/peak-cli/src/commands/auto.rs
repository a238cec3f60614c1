//! `peak auto WORKFLOW --executor PROVIDER:MODEL`: the autonomous mode.
//!
//! An LLM planner chooses the next transformation from the workflow's state, it is
//! applied as `peak apply` would apply it, and a failure or a regression sends the search
//! back to the best checkpoint on a new branch (see `peak_apply::auto`). Decisions print on
//! stderr as they are made and are kept in `.git/peak/auto-log.jsonl`; the summary (or
//! with `--json` the whole report) goes to stdout.

use std::time::Duration;

use anyhow::{Result, anyhow};
use peak_apply::auto::{AutoEvent, AutoOptions, AutoReporter, Stopped};
use peak_backend::worker::launcher::Placement;
use peak_transform::ExecutorSpec;

use super::workers;
use crate::cli::AutoArgs;
use crate::output::{format_ms, print_json};
use crate::progress::ApplyProgress;
use crate::usage;

/// Decisions as lines above the apply's progress.
struct Progress {
    apply: ApplyProgress,
}

impl AutoReporter for Progress {
    fn event(&self, e: &AutoEvent) {
        let what = e.transformation.as_deref().unwrap_or("");
        let line = match e.event.as_str() {
            "plan" => format!("[{}] plan: apply {what}: {}", e.step, e.reasoning.as_deref().unwrap_or("")),
            "stop" => format!("[{}] plan: stop: {}", e.step, e.reasoning.as_deref().unwrap_or("")),
            "checkpoint" => {
                format!("[{}] {what}: checkpoint {} ({})", e.step, short(e.checkpoint.as_deref()), e.best_ms.map(format_ms).unwrap_or_else(|| "-".into()))
            }
            "backtrack" => format!("[{}] backtrack to {} on branch {}", e.step, short(e.checkpoint.as_deref()), e.branch.as_deref().unwrap_or("?")),
            other => format!(
                "[{}] {other}{}: {}",
                e.step,
                if what.is_empty() { String::new() } else { format!(" {what}") },
                e.detail.as_deref().unwrap_or("").lines().next().unwrap_or("")
            ),
        };
        self.apply.println(line);
    }

    fn apply(&self) -> &dyn peak_apply::ApplyReporter {
        &self.apply
    }
}

fn short(id: Option<&str>) -> &str {
    id.map(|id| id.get(..10).unwrap_or(id)).unwrap_or("?")
}

pub fn run(args: AutoArgs, placement: &Placement) -> Result<()> {
    for spec in std::iter::once(&args.executor).chain(&args.planner) {
        match spec.parse::<ExecutorSpec>().map_err(|e| usage(anyhow!(e)))? {
            ExecutorSpec::Agent => {
                return Err(usage(anyhow!(
                    "--executor/--planner agent: the autonomous mode needs PROVIDER:MODEL\nhint: to write the regions yourself, use `peak apply --executor agent`"
                )));
            }
            ExecutorSpec::Llm { .. } => {}
        }
    }
    if args.regression.is_nan() || args.regression < 0.0 {
        return Err(usage(anyhow!("--regression {}: give a percentage, 0 or more", args.regression)));
    }
    let options = AutoOptions {
        executor: args.executor.clone(),
        planner: args.planner.clone(),
        budget: args.budget,
        time_limit: args.time.map(Duration::from_secs_f64),
        regression: args.regression / 100.0,
        plan_retries: args.plan_retries,
        apply: peak_apply::ApplyOptions {
            retries: args.retries,
            settings: peak_apply::Settings {
                samples: args.samples,
                seed: args.seed,
                tuning: peak_apply::TuningSettings { budget: args.tune_budget, time_limit: args.tune_time.map(Duration::from_secs_f64) },
                set: args.set.set.clone(),
                library_dirs: args.library.clone(),
                ..peak_apply::Settings::default()
            },
            ..peak_apply::ApplyOptions::default()
        },
    };
    let progress = Progress { apply: ApplyProgress::new(!args.json) };
    let report = peak_apply::auto::run(&args.workflow, &options, &mut workers(placement), &progress);
    progress.apply.finish();
    let report = report?;
    if args.json {
        return print_json(&report);
    }
    let why = match report.stopped {
        Stopped::Planner => "the planner stopped",
        Stopped::Budget => "the budget of transformations was spent",
        Stopped::Time => "the time was up",
    };
    println!("{why} after {} transformation(s)", report.applied);
    if let Some((id, ms)) = &report.best {
        println!("  best checkpoint {} ({})", short(Some(id)), format_ms(*ms));
    }
    println!("  HEAD {} on {}", short(Some(&report.head)), report.branch.as_deref().unwrap_or("(detached)"));
    let dir = peak_workflow::Workflow::open(&args.workflow)?.dir().join(".git").join("peak").join(peak_apply::auto::AUTO_LOG);
    println!("  decisions: {}", dir.display());
    Ok(())
}
