//! Gathering a report's data from workflows: series of checkpoints, the attempts log,
//! validation and performance records. Everything here is read through
//! `peak_workflow`'s API (`log`, `show`, `diff`, `attempts`); nothing parses git.
//!
//! Records are other crates' JSON, read leniently: a field a record does not hold is
//! `None` here and is named in [`WorkflowReport::missing`], never guessed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use peak_record::{PerformanceRecord, Record, ValidationRecord};
use peak_spec::{Context, ExecParams, Manifest, Regions};
use peak_workflow::{AttemptOutcome, AttemptRecord, CheckpointView, LogEntry, Workflow, clone_bundle, is_bundle};
use serde::Serialize;
use serde_json::{Value, json};

use crate::sizes::{StepSize, other_sizes};

/// Everything `peak report` shows, for one or more workflows.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub workflows: Vec<WorkflowReport>,
}

/// One workflow's part of the report.
#[derive(Debug, Clone, Serialize)]
pub struct WorkflowReport {
    /// The folder or bundle file name, without `.bundle`.
    pub name: String,
    /// As given on the command line.
    pub source: PathBuf,
    pub kernel: Option<String>,
    pub backend: Option<String>,
    /// The device of the last tuned checkpoint (`performance.json`'s `device`).
    pub device: Option<String>,
    /// One per branch tip, the current branch first.
    pub series: Vec<Series>,
    /// Success per executor x transformation, from the attempts log.
    pub success: Vec<SuccessRow>,
    /// Every failed validation try, with where it was caught as far as the log says.
    pub depth: Vec<DepthRow>,
    /// How many samples would have caught every failure, when the log records the sample.
    pub samples_enough: Option<u32>,
    /// The paper's Table 5, over every checkpoint of every series (each counted once).
    pub time: TimeBreakdown,
    /// Best-so-far against evaluations, per tuned checkpoint that recorded its curve.
    pub convergence: Vec<Convergence>,
    /// The first series' last checkpoint: its source and best configuration.
    pub final_kernel: Option<FinalKernel>,
    /// Records this report needed and the workflow does not hold.
    pub missing: Vec<String>,
}

/// The first-parent chain from the root to one branch tip.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// Branch names at the tip (`origin/` dropped for a bundle's branches).
    pub name: String,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// 0 for the root.
    pub index: usize,
    pub id: String,
    pub transformation: String,
    pub verdict: Option<String>,
    pub executor: Option<String>,
    pub best_time_ms: Option<f64>,
    /// As `peak log` computes them: root's best time over this one's, parent's over this one's.
    pub speedup_over_root: Option<f64>,
    pub speedup_over_previous: Option<f64>,
    /// The inputs `best_time_ms` (and `tflops`, `percent_of_vendor`) were measured at.
    pub best_inputs: Option<Value>,
    /// The inputs each speedup was taken at (see `peak log`).
    pub speedup_over_root_inputs: Option<Value>,
    pub speedup_over_previous_inputs: Option<Value>,
    /// From the manifest's `kernel.flops` at the best configuration's inputs.
    pub tflops: Option<f64>,
    /// The vendor library's time (`performance.json`'s `baseline`, cuBLASLt for a GEMM) over
    /// the best time at the same inputs, in percent.
    pub percent_of_vendor: Option<f64>,
    /// For a kernel judged against a copy of the bytes it moves: the copy's time over the
    /// best time, in percent (100: the kernel moves its bytes as fast as a copy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent_of_copy: Option<f64>,
    /// The best configuration (`performance.json`'s `best.params`).
    pub best_params: Option<Value>,
    /// Every other input size the step was tuned at, one row each in the tables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<StepSize>,
    /// `peak diff PREVIOUS THIS`, as the terminal prints it; `None` for the root.
    pub diff: Option<String>,
}

/// Attempts of one transformation by one executor.
#[derive(Debug, Clone, Serialize)]
pub struct SuccessRow {
    pub executor: String,
    pub transformation: String,
    /// Apply runs: a run is the tries from one start to its checkpoint or give-up.
    pub applies: usize,
    /// Every try recorded (each repair is one).
    pub tries: usize,
    pub first_try: usize,
    pub after_repair: usize,
    /// Runs that ended without a checkpoint.
    pub failed: usize,
    /// Failed tries by kind (`AttemptOutcome::failure_kind`).
    pub failures: BTreeMap<String, usize>,
}

/// One failed validation try.
#[derive(Debug, Clone, Serialize)]
pub struct DepthRow {
    pub executor: String,
    pub transformation: String,
    pub retry: u32,
    pub outcome: AttemptOutcome,
    /// The validator the attempts log names, else the one the outcome's category belongs to.
    pub validator: String,
    /// 1-based index of the first sampled execution parameter that failed (in validation
    /// order), when the attempts log records it (`sample`, kept since reports were added).
    pub first_failing_sample: Option<u32>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TimeBreakdown {
    pub rows: Vec<TimeRow>,
    pub validation_s: f64,
    pub transformation_s: f64,
    pub tuning_s: f64,
    /// Checkpoints whose records hold no time at all (recorded before times were kept).
    pub unrecorded: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimeRow {
    pub id: String,
    pub transformation: String,
    /// `validation.json`'s `elapsed_s` (sanitizer included) plus the winner's sanitizer check.
    pub validation_s: Option<f64>,
    /// The executor's latency, summed over the transcript's replies.
    pub transformation_s: Option<f64>,
    /// `performance.json`'s `elapsed_s`.
    pub tuning_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Convergence {
    pub id: String,
    pub transformation: String,
    pub inputs: Value,
    pub evaluations: Option<u64>,
    /// (evaluations so far, best time so far in ms), from `runs[].curve`.
    pub curve: Vec<(u64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FinalKernel {
    pub id: String,
    pub transformation: String,
    pub series: String,
    pub file: String,
    pub source: String,
    pub best_params: Option<Value>,
    pub best_time_ms: Option<f64>,
}

/// A workflow opened for reading; a bundle is unpacked into a temporary folder that
/// lives as long as this.
pub struct Opened {
    pub workflow: Workflow,
    _unpacked: Option<tempfile::TempDir>,
}

/// Open a workflow folder, or a bundle file as `peak replay` does.
pub fn open(path: &Path) -> Result<Opened> {
    if is_bundle(path) {
        let dir = tempfile::Builder::new().prefix("peak-report-").tempdir().context("a temporary folder for the bundle")?;
        let workflow = clone_bundle(path, &dir.path().join("wf")).with_context(|| format!("unpacking the bundle {}", path.display()))?;
        return Ok(Opened { workflow, _unpacked: Some(dir) });
    }
    let workflow = Workflow::open(path).with_context(|| format!("{} is neither a workflow nor a bundle", path.display()))?;
    Ok(Opened { workflow, _unpacked: None })
}

/// Gather the report of every workflow named.
pub fn gather(paths: &[PathBuf]) -> Result<Report> {
    let workflows = paths.iter().map(|p| gather_one(p)).collect::<Result<Vec<_>>>()?;
    Ok(Report { workflows })
}

/// Gather one workflow's report.
pub fn gather_one(path: &Path) -> Result<WorkflowReport> {
    let opened = open(path)?;
    let wf = &opened.workflow;
    let entries = wf.log()?;
    let mut views: HashMap<String, CheckpointView> = HashMap::new();
    let series = all_series(wf, &entries, &mut views)?;

    // Each checkpoint once, in series order.
    let mut seen = HashSet::new();
    let ordered: Vec<&Step> = series.iter().flat_map(|s| &s.steps).filter(|s| seen.insert(s.id.clone())).collect();
    let view_of = |short: &str| views.values().find(|v| v.id.short() == short);

    // Each stage below adds to `missing` what it needed and the records lack; the notes keep the stages' order.
    let mut missing = Vec::new();
    let time = time_breakdown(&ordered, &view_of);
    if time.unrecorded > 0 {
        missing.push(format!(
            "time: {} of {} checkpoints record no validation or tuning time (`elapsed_s` in validation.json / performance.json)",
            time.unrecorded,
            time.rows.len()
        ));
    }
    let convergence = convergence(&ordered, &view_of, &mut missing);
    note_missing_rates(&ordered, &entries, &mut missing);
    let (success, depth, samples_enough) = attempt_tables(wf, &entries, &ordered, &mut missing)?;

    let final_kernel = final_kernel(&series, &view_of);
    let root_manifest = series.first().and_then(|s| s.steps.first()).and_then(|r| view_of(&r.id)).and_then(manifest_of);
    let device = ordered.iter().rev().find_map(|s| performance_of(view_of(&s.id)?).device);
    let name = path.file_name().map(|n| n.to_string_lossy().trim_end_matches(".bundle").to_string()).unwrap_or_else(|| path.display().to_string());
    Ok(WorkflowReport {
        name,
        source: path.to_path_buf(),
        kernel: root_manifest.as_ref().map(|m| m.kernel.name.clone()),
        backend: root_manifest.as_ref().map(|m| m.kernel.backend.name().to_string()),
        device,
        series,
        success,
        depth,
        samples_enough,
        time,
        convergence,
        final_kernel,
        missing,
    })
}

/// One series per branch tip. `views` keeps each checkpoint's records (`peak show`), read
/// once although series share their root and often more.
fn all_series(wf: &Workflow, entries: &[LogEntry], views: &mut HashMap<String, CheckpointView>) -> Result<Vec<Series>> {
    let by_id: HashMap<&str, &LogEntry> = entries.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut series = Vec::new();
    for (name, tip) in tips(entries) {
        let chain = first_parent_chain(tip, &by_id);
        let mut steps = Vec::new();
        for (index, entry) in chain.iter().enumerate() {
            let id = entry.id.to_string();
            if !views.contains_key(&id) {
                views.insert(id.clone(), wf.show(&id)?);
            }
            // The root has no previous step to differ from.
            let diff = match index {
                0 => None,
                _ => Some(wf.diff(chain[index - 1].id.as_str(), &id)?.to_string()),
            };
            steps.push(step(index, entry, &views[&id], diff));
        }
        series.push(Series { name, steps });
    }
    Ok(series)
}

/// The checkpoints from the root to `tip`, following first parents: the line the branch
/// itself took, as `peak log` numbers its steps.
fn first_parent_chain<'a>(tip: &'a LogEntry, by_id: &HashMap<&str, &'a LogEntry>) -> Vec<&'a LogEntry> {
    let mut chain = Vec::new();
    let mut at = Some(tip);
    while let Some(entry) = at {
        chain.push(entry);
        at = entry.parents.first().and_then(|p| by_id.get(p.as_str()).copied());
    }
    chain.reverse();
    chain
}

/// A checkpoint as step `index` of a series: its times, speedups and yardstick as `peak log`
/// has them, its TFLOP/s from its own manifest.
fn step(index: usize, entry: &LogEntry, view: &CheckpointView, diff: Option<String>) -> Step {
    let performance = performance_of(view);
    let best = performance.best.as_ref();
    Step {
        index,
        id: entry.id.short().to_string(),
        transformation: entry.transformation.clone().unwrap_or_else(|| entry.summary.clone()),
        verdict: entry.verdict.clone(),
        executor: entry.executor.clone(),
        best_time_ms: entry.best_time_ms,
        speedup_over_root: entry.speedup_over_root,
        speedup_over_previous: entry.speedup_over_parent,
        best_inputs: entry.best_inputs.clone(),
        speedup_over_root_inputs: entry.speedup_over_root_inputs.clone(),
        speedup_over_previous_inputs: entry.speedup_over_parent_inputs.clone(),
        tflops: best.and_then(|b| tflops(view, &b.params, entry.best_time_ms?)),
        percent_of_vendor: entry.baseline.as_ref().filter(|b| b.kind != "copy").and_then(|b| b.percent),
        percent_of_copy: entry.baseline.as_ref().filter(|b| b.kind == "copy").and_then(|b| b.percent),
        best_params: best.map(|b| json!(b.params)),
        sizes: other_sizes(entry, &performance, |params, ms| tflops(view, params, ms)),
        diff,
    }
}

/// The tuning curve of every run of every checkpoint that recorded one. Runs without a
/// curve (recorded before curves were kept) are counted in `missing`, not drawn flat.
fn convergence<'a>(ordered: &[&Step], view_of: &dyn Fn(&str) -> Option<&'a CheckpointView>, missing: &mut Vec<String>) -> Vec<Convergence> {
    let mut convergence = Vec::new();
    let mut tuned = 0;
    for step in ordered {
        let Some(view) = view_of(&step.id) else { continue };
        for run in performance_of(view).runs() {
            tuned += 1;
            let curve: Vec<(u64, f64)> = run.curve.iter().flatten().map(|p| (p.evaluations, p.best_ms)).collect();
            if !curve.is_empty() {
                convergence.push(Convergence {
                    id: step.id.clone(),
                    transformation: step.transformation.clone(),
                    inputs: json!(run.inputs),
                    evaluations: run.evaluations,
                    curve,
                });
            }
        }
    }
    if tuned > 0 && convergence.len() < tuned {
        missing.push(format!(
            "convergence: {} of {tuned} tuning runs record no curve (`runs[].curve` in performance.json; recorded since this report was added)",
            tuned - convergence.len()
        ));
    }
    convergence
}

/// Says why the % vendor and TFLOP/s columns are empty when checkpoints were timed but
/// none has the rate: a column of dashes is otherwise unexplained.
fn note_missing_rates(ordered: &[&Step], entries: &[LogEntry], missing: &mut Vec<String>) {
    let timed = ordered.iter().any(|s| s.best_time_ms.is_some());
    if timed && ordered.iter().all(|s| s.percent_of_vendor.is_none() && s.percent_of_copy.is_none()) {
        // The yardstick's own reason (no vendor library for this kernel, say) beats a generic one.
        let reason = entries.iter().filter_map(|e| e.baseline.as_ref()?.reason.clone()).next();
        missing.push(match reason {
            Some(reason) => format!("% of vendor library: no checkpoint has a yardstick timed ({reason})"),
            None => {
                "% of vendor library: no checkpoint records a yardstick (`baseline` in performance.json, recorded with every tuning since it was added)".into()
            }
        });
    }
    if timed && ordered.iter().all(|s| s.tflops.is_none()) {
        missing.push("TFLOP/s: the manifest has no `kernel.flops`".into());
    }
}

/// From the attempts log: success per executor and transformation, every failed validation
/// try, and how many samples would have caught them all. What the log cannot say (checkpoints
/// it lacks, an agent's writing time, a failure's sample) goes into `missing`.
fn attempt_tables(wf: &Workflow, entries: &[LogEntry], ordered: &[&Step], missing: &mut Vec<String>) -> Result<(Vec<SuccessRow>, Vec<DepthRow>, Option<u32>)> {
    let log = wf.attempts()?;
    let records: Vec<&AttemptRecord> = log.records.iter().filter(|r| !r.is_start()).collect();
    let recorded: HashSet<&str> = records.iter().filter_map(|r| r.attempt.checkpoint.as_deref()).collect();
    let unlogged: Vec<&str> = entries
        .iter()
        .filter(|e| !e.parents.is_empty() && ordered.iter().any(|s| s.id == e.id.short()) && !recorded.contains(e.id.as_str()))
        .map(|e| e.id.short())
        .collect();
    if !unlogged.is_empty() {
        missing.push(format!("attempts: checkpoint(s) {} have no record in the attempts log the workflow carries", unlogged.join(", ")));
    }
    let executors: HashSet<&str> = ordered.iter().filter(|s| s.index > 0).filter_map(|s| s.executor.as_deref()).collect();
    if executors.iter().any(|e| matches!(*e, "agent" | "replay")) {
        missing.push(
            "transformation time: the agent and replay executors record only how long reading a submitted or recorded reply took, not the writer's time".into(),
        );
    }
    let success = success_rows(&records);
    let depth = depth_rows(&records);
    let unplaced = depth.iter().filter(|d| d.first_failing_sample.is_none()).count();
    if unplaced > 0 {
        missing.push(format!(
            "evaluation depth: {unplaced} of {} failed tries do not record which sampled execution parameter caught them (`sample` in the attempts log, kept since reports were added)",
            depth.len()
        ));
    }
    // Every failure placed: the deepest one says how many samples were needed.
    let samples_enough = if unplaced == 0 { depth.iter().filter_map(|d| d.first_failing_sample).max() } else { None };
    Ok((success, depth, samples_enough))
}

/// The first series' last checkpoint, the kernel the workflow ended with: its source file
/// (named by its own manifest) and the configuration it was timed at.
fn final_kernel<'a>(series: &[Series], view_of: &dyn Fn(&str) -> Option<&'a CheckpointView>) -> Option<FinalKernel> {
    let s = series.first()?;
    let step = s.steps.last()?;
    let view = view_of(&step.id)?;
    let file = manifest_of(view)?.kernel.source;
    Some(FinalKernel {
        id: step.id.clone(),
        transformation: step.transformation.clone(),
        series: s.name.clone(),
        source: view.files.get(&file)?.clone(),
        file,
        best_params: step.best_params.clone(),
        best_time_ms: step.best_time_ms,
    })
}

/// A checkpoint's own manifest; `None` when it is absent or does not parse.
fn manifest_of(view: &CheckpointView) -> Option<Manifest> {
    view.files.get(peak_spec::MANIFEST_FILE).and_then(|t| Manifest::parse(peak_spec::MANIFEST_FILE, t).ok())
}

/// Branch tips, one per commit, the HEAD's first; names without a bundle's `origin/`.
fn tips(entries: &[LogEntry]) -> Vec<(String, &LogEntry)> {
    let mut tips: Vec<(String, &LogEntry)> = entries
        .iter()
        .filter(|e| !e.branches.is_empty())
        .map(|e| {
            let mut names: Vec<String> = e.branches.iter().map(|b| b.strip_prefix("origin/").unwrap_or(b).to_string()).collect();
            names.sort();
            names.dedup();
            (names.join(", "), e)
        })
        .collect();
    if tips.is_empty() {
        tips.extend(entries.iter().find(|e| e.head).map(|e| ("HEAD".to_string(), e)));
    }
    tips.sort_by_key(|(_, e)| !e.head);
    tips
}

/// A checkpoint's `performance.json`; one that does not read is reported as untuned.
fn performance_of(view: &CheckpointView) -> PerformanceRecord {
    PerformanceRecord::from_json(&view.performance).unwrap_or_default()
}

/// Floating-point rate of the best configuration, from the checkpoint's own manifest.
/// TFLOP/s of a time `ms` at the configuration `params` (a `best.params`), from the
/// checkpoint's manifest's `kernel.flops`.
fn tflops(view: &CheckpointView, params: &ExecParams, ms: f64) -> Option<f64> {
    let manifest = Manifest::parse(peak_spec::MANIFEST_FILE, view.files.get(peak_spec::MANIFEST_FILE)?).ok()?;
    manifest.kernel.flops.as_ref()?;
    let source = view.files.get(&manifest.kernel.source)?;
    let regions = Regions::parse(&manifest.kernel.source, source).ok()?;
    let ctx = Context { dir: PathBuf::new(), manifest, regions };
    Some(ctx.flops(params)? / (ms * 1e-3) / 1e12)
}

fn time_breakdown<'a>(steps: &[&Step], view_of: &dyn Fn(&str) -> Option<&'a CheckpointView>) -> TimeBreakdown {
    let mut out = TimeBreakdown::default();
    for step in steps {
        let Some(view) = view_of(&step.id) else { continue };
        let performance = performance_of(view);
        let winner = performance.sanitizer_winner.and_then(|w| w.elapsed_s);
        let validation = ValidationRecord::from_json(&view.validation).unwrap_or_default().elapsed_s.map(|v| v + winner.unwrap_or(0.0));
        let tuning = performance.elapsed_s;
        let latencies = peak_record::transcript::recorded_latencies_ms(&view.transcript);
        let transformation = (!latencies.is_empty()).then(|| latencies.iter().sum::<f64>() / 1e3);
        if validation.is_none() && tuning.is_none() {
            out.unrecorded += 1;
        }
        out.validation_s += validation.unwrap_or(0.0);
        out.tuning_s += tuning.unwrap_or(0.0);
        out.transformation_s += transformation.unwrap_or(0.0);
        out.rows.push(TimeRow {
            id: step.id.clone(),
            transformation: step.transformation.clone(),
            validation_s: validation,
            transformation_s: transformation,
            tuning_s: tuning,
        });
    }
    out
}

/// Outcomes that end an apply with a checkpoint.
pub fn is_success(outcome: &AttemptOutcome) -> bool {
    outcome.is_success()
}

/// The failure kinds, in the order tables and figures show them (`AttemptOutcome::failure_kind`).
pub use peak_record::outcome::FAILURE_KINDS;

fn executor_name(r: &AttemptRecord) -> String {
    match &r.attempt.model {
        Some(model) => format!("{} ({model})", r.attempt.executor),
        None => r.attempt.executor.clone(),
    }
}

/// Tries grouped into apply runs: per executor, transformation and parent, in time order,
/// a run ends at a success, and a try whose repair count does not grow starts a new run.
/// Rows come in the order their first try was recorded.
fn success_rows(records: &[&AttemptRecord]) -> Vec<SuccessRow> {
    let mut rows: BTreeMap<(String, String), SuccessRow> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut open_run: HashMap<(String, String, Option<String>), u32> = HashMap::new();
    for r in records {
        let a = &r.attempt;
        let executor = executor_name(r);
        let row_key = (executor.clone(), a.transformation.clone());
        if !rows.contains_key(&row_key) {
            order.push(row_key.clone());
        }
        let row = rows.entry(row_key).or_insert_with(|| SuccessRow {
            executor: executor.clone(),
            transformation: a.transformation.clone(),
            applies: 0,
            tries: 0,
            first_try: 0,
            after_repair: 0,
            failed: 0,
            failures: BTreeMap::new(),
        });
        row.tries += 1;
        let key = (executor, a.transformation.clone(), a.parent.clone());
        let continues = open_run.get(&key).is_some_and(|last| a.retry > *last);
        if !continues {
            row.applies += 1;
            if open_run.contains_key(&key) {
                // The previous run of this key ended without a checkpoint.
                row.failed += 1;
            }
        }
        if is_success(&a.outcome) {
            open_run.remove(&key);
            if a.retry == 0 { row.first_try += 1 } else { row.after_repair += 1 }
        } else {
            open_run.insert(key, a.retry);
            *row.failures.entry(a.outcome.failure_kind().to_string()).or_default() += 1;
        }
    }
    for (executor, transformation, _) in open_run.into_keys() {
        if let Some(row) = rows.get_mut(&(executor, transformation)) {
            row.failed += 1;
        }
    }
    order.into_iter().filter_map(|k| rows.remove(&k)).collect()
}

/// The validator that reports an outcome, or `None` when the outcome is not a validation's.
fn validator_of(outcome: &AttemptOutcome) -> Option<&'static str> {
    use AttemptOutcome as O;
    match outcome {
        O::CompileFailed => Some("compiler"),
        O::WrongOutput | O::ModifiedInput => Some("output"),
        O::SanitizerFinding => Some("sanitizer"),
        O::Crashed | O::LaunchFailed | O::TimedOut => Some("runner"),
        O::InvalidConfig => Some("constraints"),
        _ => None,
    }
}

fn depth_rows(records: &[&AttemptRecord]) -> Vec<DepthRow> {
    records
        .iter()
        .filter_map(|r| {
            let validator = validator_of(&r.attempt.outcome)?;
            Some(DepthRow {
                executor: executor_name(r),
                transformation: r.attempt.transformation.clone(),
                retry: r.attempt.retry,
                outcome: r.attempt.outcome.clone(),
                validator: r.attempt.validator.clone().unwrap_or_else(|| validator.to_string()),
                first_failing_sample: r.attempt.sample,
                error: r.attempt.error.as_ref().map(|e| e.lines().next().unwrap_or_default().to_string()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use peak_workflow::Attempt;

    fn rec(t: &str, outcome: &str, retry: u32) -> AttemptRecord {
        AttemptRecord {
            id: format!("{t}{outcome}{retry}"),
            time: String::new(),
            attempt: Attempt {
                transformation: t.into(),
                executor: "openai".into(),
                outcome: outcome.into(),
                retry,
                parent: Some("p".into()),
                ..Default::default()
            },
        }
    }

    #[test]
    fn runs_split_at_success_and_at_a_repair_count_that_does_not_grow() {
        let records = [
            rec("T", "passed", 0),
            rec("T", "wrong-output", 0),
            rec("T", "passed", 1),
            rec("T", "unparsable-reply", 0),
            rec("T", "compile-failed", 1),
            rec("T", "crashed", 0),
        ];
        let refs: Vec<&AttemptRecord> = records.iter().collect();
        let rows = success_rows(&refs);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.applies, r.tries, r.first_try, r.after_repair, r.failed), (4, 6, 1, 1, 2));
        assert_eq!(r.failures["wrong-output"], 1);
        assert_eq!(r.failures["bad-reply"], 1);
        assert_eq!(r.failures["crashed"], 1);
        let depth = depth_rows(&refs);
        assert_eq!(depth.iter().map(|d| d.validator.as_str()).collect::<Vec<_>>(), ["output", "compiler", "runner"]);
    }
}
