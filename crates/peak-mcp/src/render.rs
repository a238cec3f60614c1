//! Texts for the model: what each tool answers, written to be read without the JSON.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Result;
use peak_apply::auto::{AutoEvent, AutoReport, AutoReporter};
use peak_apply::study::{StudyReport, StudyReporter, StudyRun};
use peak_apply::{ApplyOutcome, ApplyReporter, SanitizerRecord};
use peak_eval::compare::CompareReport;
use peak_eval::profile::ProfileReport;
use peak_eval::validate::Outcome as Validation;
use peak_eval::{TuneReport, TuneReporter, ValidationReport};
use peak_record::{PerformanceRecord, Record, ValidationRecord};
use peak_spec::{Context, ExecParams};
use peak_transform::Transformation;
use peak_workflow::{AttemptOutcome, AttemptsLog, CheckpointView};
use serde::Serialize;
use serde_json::json;

use crate::answer::Answer;
use crate::progress::Progress;

// ---------------------------------------------------------------------------------------
// Contexts and transformations.
// ---------------------------------------------------------------------------------------

/// A kernel context found on disk.
#[derive(Debug, Serialize)]
pub struct FoundContext {
    pub path: PathBuf,
    pub name: Option<String>,
    pub backend: Option<String>,
    pub inputs: Vec<String>,
    pub tuning: Vec<String>,
    /// Why the folder's peak.toml could not be loaded.
    pub error: Option<String>,
}

/// Folders that never hold contexts worth listing, and can be huge.
const SKIPPED: [&str; 4] = [".git", "target", "node_modules", ".cache"];
const MAX_DEPTH: usize = 4;

pub fn find_contexts(dir: &Path) -> Result<Vec<FoundContext>> {
    if !dir.is_dir() {
        anyhow::bail!("{}: not a folder", dir.display());
    }
    let mut found = Vec::new();
    walk(dir, 0, &mut found);
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

fn walk(dir: &Path, depth: usize, found: &mut Vec<FoundContext>) {
    if dir.join(peak_spec::MANIFEST_FILE).is_file() {
        found.push(match Context::load(dir) {
            Ok(ctx) => FoundContext {
                path: dir.to_path_buf(),
                name: Some(ctx.name().to_string()),
                backend: Some(ctx.backend().name().to_string()),
                inputs: ctx.manifest.inputs.keys().cloned().collect(),
                tuning: ctx.manifest.tuning.keys().cloned().collect(),
                error: None,
            },
            Err(e) => FoundContext { path: dir.to_path_buf(), name: None, backend: None, inputs: Vec::new(), tuning: Vec::new(), error: Some(e.to_string()) },
        });
        return;
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !SKIPPED.contains(&e.file_name().to_string_lossy().as_ref()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        walk(&sub, depth + 1, found);
    }
}

pub fn contexts_text(dir: &Path, found: &[FoundContext]) -> String {
    if found.is_empty() {
        return format!("no kernel context (folder with peak.toml) under {}", dir.display());
    }
    let mut out = String::new();
    for c in found {
        match (&c.name, &c.error) {
            (Some(name), _) => {
                let _ = writeln!(
                    out,
                    "{}  {} ({})  inputs: {}  tuning: {}",
                    c.path.display(),
                    name,
                    c.backend.as_deref().unwrap_or("?"),
                    c.inputs.join(" "),
                    if c.tuning.is_empty() { "-".to_string() } else { c.tuning.join(" ") }
                );
            }
            (None, error) => {
                let _ = writeln!(out, "{}  (cannot load: {})", c.path.display(), error.as_deref().unwrap_or("?"));
            }
        }
    }
    out
}

pub fn transformations_text(list: &[&Transformation]) -> String {
    let mut out = String::new();
    for t in list {
        let params =
            if t.tuning.is_empty() { "no new tuning parameters".to_string() } else { t.tuning.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(" ") };
        let requires = if t.requires.is_empty() { String::new() } else { format!("; requires {}", t.requires.join(" ")) };
        let _ = writeln!(out, "{}: {} ({} pass{}; {params}{requires})", t.name, t.description, t.passes.len(), if t.passes.len() == 1 { "" } else { "es" });
    }
    if out.is_empty() {
        out.push_str("no transformation matches");
    }
    out
}

// ---------------------------------------------------------------------------------------
// Applying transformations.
// ---------------------------------------------------------------------------------------

/// The apply reporter: forwards everything as progress and keeps the failed tries of
/// this call, which decide whether a waiting prompt is a repair (an error for the model).
pub struct Events<'a> {
    progress: &'a Progress,
    failures: Mutex<Vec<(AttemptOutcome, String)>>,
}

impl<'a> Events<'a> {
    pub fn new(progress: &'a Progress) -> Events<'a> {
        Events { progress, failures: Mutex::new(Vec::new()) }
    }

    /// `(outcome, detail)` of every try that failed during this call.
    pub fn failures(&self) -> Vec<(AttemptOutcome, String)> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ApplyReporter for Events<'_> {
    fn pass(&self, transformation: &str, pass: usize, passes: usize, attempt: u32, title: &str) {
        self.progress.say(format!("{transformation}: pass {pass}/{passes} ({title}), attempt {attempt}"));
    }

    fn attempt(&self, outcome: &AttemptOutcome, detail: &str) {
        if *outcome != AttemptOutcome::Passed {
            self.failures.lock().unwrap_or_else(|e| e.into_inner()).push((outcome.clone(), detail.to_string()));
        }
        self.progress.say(format!("{outcome}: {}", first_line(detail)));
    }

    fn stage(&self, stage: &str) {
        self.progress.say(stage.to_string());
    }

    fn tuning(&self) -> &dyn TuneReporter {
        self.progress
    }

    fn validation(&self) -> &dyn peak_eval::validate::ValidateReporter {
        self.progress
    }
}

/// The autonomous mode's reporter: each logged decision and outcome, and each apply's
/// passes and tries, as progress.
pub struct AutoEvents<'a> {
    apply: Events<'a>,
}

impl<'a> AutoEvents<'a> {
    pub fn new(progress: &'a Progress) -> AutoEvents<'a> {
        AutoEvents { apply: Events::new(progress) }
    }
}

impl AutoReporter for AutoEvents<'_> {
    fn event(&self, event: &AutoEvent) {
        let what = event.transformation.as_deref().or(event.detail.as_deref()).unwrap_or_default();
        self.apply.progress.say(format!("auto step {}: {} {}", event.step, event.event, first_line(what)));
    }

    fn apply(&self) -> &dyn ApplyReporter {
        &self.apply
    }
}

/// The answer to `auto`: why it stopped, the steps, the best checkpoint and the events.
pub fn auto_answer(report: &AutoReport) -> Answer {
    let stopped = serde_json::to_value(report.stopped).unwrap_or_default();
    let best = match &report.best {
        Some((id, ms)) => format!("best checkpoint {} at {ms:.4} ms", &id[..id.len().min(10)]),
        None => "no timed checkpoint".into(),
    };
    let mut text = format!(
        "auto stopped ({}) after {} transformation(s); {best}; HEAD {}",
        stopped.as_str().unwrap_or("?"),
        report.applied,
        &report.head[..report.head.len().min(10)]
    );
    for event in &report.events {
        let what = event.transformation.as_deref().unwrap_or_default();
        let why = event.reasoning.as_deref().or(event.detail.as_deref()).map(first_line).unwrap_or_default();
        text.push_str(&format!("\n  step {}: {} {what} {why}", event.step, event.event));
    }
    let (best_checkpoint, best_ms) = report.best.clone().unzip();
    let data = json!({
        "stopped": stopped, "applied": report.applied, "best_checkpoint": best_checkpoint, "best_ms": best_ms,
        "head": report.head, "branch": report.branch, "events": report.events,
    });
    Answer::ok(text, data)
}

/// A study's reporter: each run's start and end, and its apply's passes and tries, as
/// progress.
pub struct StudyEvents<'a> {
    apply: Events<'a>,
}

impl<'a> StudyEvents<'a> {
    pub fn new(progress: &'a Progress) -> StudyEvents<'a> {
        StudyEvents { apply: Events::new(progress) }
    }
}

impl StudyReporter for StudyEvents<'_> {
    fn run_started(&self, transformation: &str, executor: &str, repeat: usize, of: usize, branch: &str) {
        self.apply.progress.say(format!("{transformation} with {executor} ({repeat}/{of}) on {branch}"));
    }

    fn run_ended(&self, run: &StudyRun) {
        self.apply.progress.say(format!("{}: {}", run.status, first_line(run.error.as_deref().or(run.checkpoint.as_deref()).unwrap_or_default())));
    }

    fn apply(&self) -> &dyn ApplyReporter {
        &self.apply
    }
}

/// The answer to `study`: one line per transformation and executor, then every run; an
/// error where no run reached a model (nothing was measured).
pub fn study_answer(report: &StudyReport) -> Answer {
    let mut text = format!("study from {}; HEAD {} unchanged", &report.from[..report.from.len().min(10)], &report.head[..report.head.len().min(10)]);
    for c in &report.cells {
        let failures = c.failures.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ");
        text.push_str(&format!(
            "\n{} with {}: {} run(s), {} ok ({} first try, {} repaired), {} failed, {} unreachable{}",
            c.transformation,
            c.executor,
            c.runs,
            c.successes,
            c.first_try,
            c.after_repair,
            c.failed,
            c.unreachable,
            if failures.is_empty() { String::new() } else { format!("; failed tries: {failures}") }
        ));
    }
    for run in &report.runs {
        text.push_str(&format!("\n  {} {}: {}", run.branch, run.status, first_line(run.error.as_deref().or(run.checkpoint.as_deref()).unwrap_or_default())));
    }
    if report.reached_a_model() {
        Answer::ok(text, report)
    } else {
        Answer::failed(format!("no run reached a model: check the endpoints and keys\n{text}"), report)
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The answer to a tool that applied (or resumed) a transformation.
/// The outcome's JSON with the rejected tries that led to it, as `failures`: `[{outcome, detail}]`.
fn with_failures(outcome: &ApplyOutcome, failures: &[(AttemptOutcome, String)]) -> serde_json::Value {
    let mut data = serde_json::to_value(outcome).unwrap_or_default();
    if let Some(map) = data.as_object_mut() {
        map.insert("failures".into(), failures.iter().map(|(outcome, detail)| json!({ "outcome": outcome, "detail": detail })).collect());
    }
    data
}

pub fn outcome_answer(workflow: &str, outcome: &ApplyOutcome, failures: &[(AttemptOutcome, String)]) -> Answer {
    match outcome {
        ApplyOutcome::Waiting { transformation, pass, passes, attempt, region, prompt, .. } => {
            let mut text = String::new();
            if let Some((what, detail)) = failures.last() {
                let _ = writeln!(text, "The submission was rejected: {what}.\n{detail}\n");
                let _ = writeln!(text, "Repair it: write the `{region}` region again (pass {pass} of {passes}, attempt {attempt}) following the prompt below.");
            } else {
                let _ = writeln!(text, "{transformation}: pass {pass} of {passes}, attempt {attempt}: write the new `{region}` region.");
            }
            let _ = writeln!(
                text,
                "Answer by calling submit_region with workflow \"{workflow}\" and text = the complete new text of the `{region}` region (the code alone, or one fenced code block). The other regions stay as they are.\n\n----- prompt -----\n{prompt}"
            );
            if failures.is_empty() { Answer::ok(text, outcome) } else { Answer::failed(text, with_failures(outcome, failures)) }
        }
        ApplyOutcome::Checkpoint { id, transformation, verdict, attempts, .. } if *verdict == AttemptOutcome::Deferred => {
            let short = id.get(..10).unwrap_or(id);
            let text = format!(
                "{transformation} compiled: checkpoint {short} is deferred (compile-checked, not yet validated or tuned) after {attempts} attempt{}. `peak replay` validates and tunes it where the GPU is.",
                if *attempts == 1 { "" } else { "s" }
            );
            Answer::ok(text, outcome)
        }
        ApplyOutcome::Checkpoint { id, transformation, best_ms, speedup_over_parent, attempts, .. } => {
            let short = id.get(..10).unwrap_or(id);
            let best = best_ms.map(|ms| format!("best {ms:.4} ms")).unwrap_or_else(|| "no time".into());
            let speedup = speedup_over_parent.map(|s| format!(", {s:.2}x over its parent")).unwrap_or_default();
            let text = format!(
                "{transformation} succeeded: checkpoint {short} ({best}{speedup}) after {attempts} attempt{}; validated against the root and tuned. Use log, diff or show_checkpoint to inspect it.",
                if *attempts == 1 { "" } else { "s" }
            );
            Answer::ok(text, outcome)
        }
        ApplyOutcome::Failed { transformation, attempts, last_outcome, last_error } => {
            let text = format!(
                "{transformation} failed after {attempts} attempts; the workflow stays at its current checkpoint.\nlast outcome: {last_outcome}\n{last_error}\nhint: the attempts tool lists every try; start the transformation again or try another one"
            );
            Answer::failed(text, outcome)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Measuring.
// ---------------------------------------------------------------------------------------

/// The verdicts, and what compute-sanitizer did after them (`None`: the outputs did not
/// pass, so it was not asked), as `peak validate` prints them.
pub fn validation_text(label: &str, report: &ValidationReport, sanitizer: Option<&SanitizerRecord>) -> String {
    let mut out = String::new();
    let sanitizer_failed = sanitizer.is_some_and(|r| r.failure().is_some());
    let word = match report.outcome {
        Validation::Passed if sanitizer_failed => "FAIL",
        Validation::Passed => "PASS",
        Validation::Failed => "FAIL",
        Validation::Inconclusive => "INCONCLUSIVE (every sample was pruned as invalid, nothing was checked)",
    };
    let counts: Vec<String> = report.counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let _ = writeln!(out, "{word}: {label}, {} samples on {}: {}", report.samples.len(), report.device, counts.join(", "));
    for s in &report.samples {
        let _ = writeln!(out, "  {:<16} {}  {}", s.verdict.category(), s.params, s.verdict.summary());
    }
    let _ = writeln!(out, "sanitizer: {}", sanitizer.map_or("not run: the outputs did not pass", |r| r.summary.as_str()));
    out
}

pub fn tune_text(label: &str, ctx: &Context, report: &TuneReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{label} on {}", report.device);
    for r in &report.runs {
        let inputs: Vec<String> = r.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            out,
            "inputs {}: searched {} of {} configurations ({} measured, {} cached), stopped: {:?}",
            inputs.join(" "),
            r.evaluations,
            r.space,
            r.measured,
            r.cached,
            r.stopped
        );
        if r.top.is_empty() {
            let _ = writeln!(out, "  no valid time: {}", r.why);
        }
        for (i, e) in r.top.iter().enumerate() {
            let params = ExecParams { inputs: r.inputs.clone(), tuning: e.tuning.clone() };
            let rate = ctx.flops(&params).map(|f| format!("  {:.3} TFLOP/s", f / (e.median_ms * 1e-3) / 1e12)).unwrap_or_default();
            let tuning: Vec<String> = e.tuning.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "  #{} {:.4} ms{rate}  {}", i + 1, e.median_ms, tuning.join(" "));
        }
        if r.best.is_some() {
            let _ = writeln!(out, "  why: {}", r.why);
        }
        for example in &r.failure_examples {
            let count = r.failures.get(example.verdict.category()).copied().unwrap_or(0);
            let tuning: Vec<String> = example.tuning.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "  failed: {count} {}, e.g. {}: {}", example.verdict.category(), tuning.join(" "), example.verdict.summary());
        }
    }
    out
}

pub fn profile_text(label: &str, params: &ExecParams, report: &ProfileReport) -> String {
    let mut out = format!("{label} {params}\n");
    let h = &report.headline;
    let mut line = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            let _ = writeln!(out, "  {name:<24} {v}");
        }
    };
    line("kernel time", h.duration_ms.map(|ms| format!("{ms:.4} ms")));
    line("achieved", h.achieved_flops_per_s.map(|f| format!("{:.3} TFLOP/s", f / 1e12)));
    line("FP32 (from instructions)", h.fp32_flops_per_s.map(|f| format!("{:.3} TFLOP/s", f / 1e12)));
    line("DRAM bandwidth", h.dram_bytes_per_s.map(|b| format!("{:.1} GB/s", b / 1e9)));
    line("DRAM % of peak", h.dram_pct_of_peak.map(|p| format!("{p:.1}%")));
    line("achieved occupancy", h.achieved_occupancy_pct.map(|p| format!("{p:.1}%")));
    line("shared bank conflicts", h.shared_bank_conflicts.map(|c| format!("{c:.0}")));
    out
}

pub fn compare_text(report: &CompareReport) -> String {
    let side = |s: &peak_eval::compare::Side| {
        format!("{}: {:.4} ms (interquartile {:.4}-{:.4} ms)  {}\n", s.checkpoint, s.median_ms, s.spread.q1_ms, s.spread.q3_ms, s.params)
    };
    format!("{}{}{}\n", side(&report.a), side(&report.b), report.summary())
}

// ---------------------------------------------------------------------------------------
// The workflow.
// ---------------------------------------------------------------------------------------

/// Longest error text shown per attempt; the JSON keeps all of it.
const ERROR_CHARS: usize = 400;

pub fn attempts_text(log: &AttemptsLog) -> String {
    let mut out = String::new();
    for r in log.records.iter().filter(|r| !r.is_start()) {
        let a = &r.attempt;
        let pass = a.pass.map(|p| format!(" pass {p}")).unwrap_or_default();
        let who = match &a.model {
            Some(model) => format!("{} ({model})", a.executor),
            None => a.executor.clone(),
        };
        let produced = a.checkpoint.as_deref().map(|c| format!(" -> {}", c.get(..10).unwrap_or(c))).unwrap_or_default();
        let _ = writeln!(out, "{} {}{pass} by {who}: {}{produced}", r.time, a.transformation, a.outcome);
        if let Some(error) = &a.error {
            let shown: String = error.chars().take(ERROR_CHARS).collect();
            let _ = writeln!(out, "    {}{}", shown.replace('\n', "\n    "), if error.chars().count() > ERROR_CHARS { " ..." } else { "" });
        }
    }
    for u in log.unfinished() {
        let _ = writeln!(out, "{} {}: started, never finished (interrupted)", u.time, u.attempt.transformation);
    }
    if out.is_empty() {
        out.push_str("no attempts recorded yet");
    }
    out
}

pub fn checkpoint_text(view: &CheckpointView, with_transcript: bool) -> String {
    let mut out = String::new();
    let names = view.tags.iter().chain(&view.branches).cloned().collect::<Vec<_>>().join(", ");
    let _ = writeln!(out, "checkpoint {}{}", view.id, if names.is_empty() { String::new() } else { format!(" ({names})") });
    let _ = writeln!(out, "  {}", view.message.lines().next().unwrap_or_default());
    let m = &view.meta;
    let _ = writeln!(out, "  transformation  {}", m.transformation);
    let _ = writeln!(out, "  parent          {}", m.parent.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "  executor        {}{}", m.executor, m.model.as_ref().map(|s| format!(" ({s})")).unwrap_or_default());
    let _ = writeln!(out, "  verdict         {}", m.verdict.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "  created         {}", m.created);
    // Times are shown as JSON writes them (`1.0`, not `1`), as the record holds them.
    if let Some(best) = PerformanceRecord::from_json(&view.performance).unwrap_or_default().best {
        let _ = writeln!(out, "  best            {} ms at {}", json!(best.time_ms), json!(best.params));
    }
    if let Some(counts) = ValidationRecord::from_json(&view.validation).unwrap_or_default().counts {
        let _ = writeln!(out, "  validation      {}", json!(counts));
    }
    for (name, text) in &view.files {
        let _ = writeln!(out, "\n--- context/{name}\n{}", text.trim_end());
    }
    if with_transcript {
        let _ = writeln!(out, "\n--- transcript\n{}", serde_json::to_string_pretty(&view.transcript).unwrap_or_default());
    }
    out
}
