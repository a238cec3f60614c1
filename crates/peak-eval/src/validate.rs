//! Validators: a wrong kernel never passes as right.
//!
//! A candidate is judged on N sampled execution parameters (default 16; seeded, so the
//! same seed gives the same sample). Each sample draws fresh random inputs (its own data
//! seed), so a kernel that ignores its inputs or returns a constant fails; the runner
//! poisons outputs before every run, so an unwritten element fails; NaN never passes; and
//! inputs must come back bit-identical unless the manifest marks them `inout`.
//!
//! [`Validator`] is the extension point: the output comparison is one, compute-sanitizer
//! another, and static checkers can be added without touching the driver loop.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use peak_backend::RunOptions;
use peak_backend::worker::{Failure, Job, OutputMode, ReferenceArray, RunReport};
use peak_spec::rng::mix_seed;
use peak_spec::{Context, DType, ExecParams, Space, default_tolerance};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::hash::{device_identity, source_hash};
use crate::reference::{ReferenceStore, check_compatible};
use crate::verdict::{Verdict, WrongOutput};
use crate::workers::Workers;
use crate::workers::absolute;

/// One sampled execution parameter and the data seed of its fresh inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub index: usize,
    pub params: ExecParams,
    pub data_seed: u64,
}

/// `n` execution parameters sampled from `space` with `seed`, each with its own data seed.
pub fn samples(space: &Space, n: usize, seed: u64) -> Vec<Sample> {
    space
        .sample(n, seed)
        .into_iter()
        .enumerate()
        .map(|(index, params)| Sample { index, params, data_seed: mix_seed(seed, "validation-sample", index as u64 + 1) })
        .collect()
}

/// Judges one sample. Returns `None` when it has nothing to say about this sample (a
/// sanitizer that only looks at the first few, a static checker that does not apply).
pub trait Validator {
    fn name(&self) -> String;
    /// Called with every sample before the first `check`: a validator whose runs can go to
    /// several devices at once starts them all here, and `check` reads their results.
    fn prepare(&mut self, _workers: &mut Workers, _candidate: &Context, _samples: &[Sample]) -> Result<(), EvalError> {
        Ok(())
    }
    fn check(&mut self, workers: &mut Workers, candidate: &Context, sample: &Sample) -> Result<Option<Verdict>, EvalError>;
}

/// The portable validator: run the candidate and compare its outputs with the reference's
/// on the same inputs.
pub struct OutputValidator {
    reference: Context,
    store: ReferenceStore,
    /// How long one candidate run may take once started.
    pub timeout: Option<Duration>,
    /// References recorded during this validation (the rest came from disk).
    pub recorded: usize,
    pub repaired: usize,
    /// The runs `prepare` spread over several devices, by sample index.
    spread: HashMap<usize, Result<RunReport, Failure>>,
}

impl OutputValidator {
    pub fn new(reference: Context, store: ReferenceStore) -> OutputValidator {
        OutputValidator { reference, store, timeout: None, recorded: 0, repaired: 0, spread: HashMap::new() }
    }

    /// The compared run of `candidate` on `sample`, its reference recorded first if need be.
    fn job(&mut self, workers: &mut Workers, candidate: &Context, sample: &Sample) -> Result<Job, EvalError> {
        let reference = self.store.get_or_record(workers.pool(self.reference.backend().name())?, &self.reference, &sample.params.inputs, sample.data_seed)?;
        self.recorded += usize::from(reference.recorded);
        self.repaired += usize::from(reference.repaired);
        let references = reference
            .meta
            .arrays
            .iter()
            .map(|a| ReferenceArray {
                name: a.name.clone(),
                path: reference.path(&a.name),
                tolerance: tolerance(candidate, &self.reference, a.dtype, &sample.params),
            })
            .collect();
        let options = RunOptions { warmup: 0, repetitions: 0, check_inputs: true, data_seed: sample.data_seed, ..RunOptions::default() };
        Ok(Job { outputs: OutputMode::Compare { references }, timeout: self.timeout, ..Job::new(absolute(&candidate.dir), sample.params.clone(), options) })
    }
}

impl Validator for OutputValidator {
    fn name(&self) -> String {
        "output".into()
    }

    /// With several devices, every sample's run is started at once, one worker per device
    /// (the references are recorded first, on the validating worker); with one, the
    /// samples run one by one in `check`.
    fn prepare(&mut self, workers: &mut Workers, candidate: &Context, samples: &[Sample]) -> Result<(), EvalError> {
        self.spread.clear();
        let backend = candidate.backend().name();
        if samples.len() < 2 || !workers.spreads(backend) {
            return Ok(());
        }
        check_compatible(candidate, &self.reference)?;
        let jobs = samples.iter().map(|sample| self.job(workers, candidate, sample)).collect::<Result<Vec<_>, _>>()?;
        let results = workers.dispatch(backend)?.run_all(jobs)?;
        self.spread = samples.iter().map(|s| s.index).zip(results).collect();
        Ok(())
    }

    fn check(&mut self, workers: &mut Workers, candidate: &Context, sample: &Sample) -> Result<Option<Verdict>, EvalError> {
        check_compatible(candidate, &self.reference)?;
        if let Some(result) = self.spread.remove(&sample.index) {
            return judge(result).map(Some);
        }
        let job = self.job(workers, candidate, sample)?;
        let result = workers.pool(candidate.backend().name())?.run(job)?;
        judge(result).map(Some)
    }
}

/// The verdict on one compared run.
pub fn judge(result: Result<RunReport, Failure>) -> Result<Verdict, EvalError> {
    let report = match result {
        Err(failure) => return Ok(failure.into()),
        Ok(report) => report,
    };
    let mut worst: Option<WrongOutput> = None;
    for output in &report.outputs {
        if let Some(error) = &output.compare_error {
            return Err(EvalError::Replay(format!("cannot compare output {}: {error}", output.name)));
        }
        let Some(c) = &output.comparison else {
            return Err(EvalError::Replay(format!("the worker did not compare output {}", output.name)));
        };
        if c.passed {
            continue;
        }
        let wrong = WrongOutput { array: output.name.clone(), comparison: c.clone() };
        let rank = |w: &WrongOutput| (w.comparison.non_finite, w.comparison.relative_error);
        if worst.as_ref().is_none_or(|w| rank(&wrong) > rank(w)) {
            worst = Some(wrong);
        }
    }
    Ok(match worst {
        Some(w) => Verdict::WrongOutput(w),
        None if !report.modified_inputs.is_empty() => Verdict::ModifiedInput { arrays: report.modified_inputs },
        None => Verdict::Passed,
    })
}

/// Tolerance for one output: the candidate's manifest override, else the reference's,
/// else the default for the element type, whose half-precision values grow with the
/// accumulation depth (`[tolerance] accumulation`, else the matmul's `k`).
pub fn tolerance(candidate: &Context, reference: &Context, dtype: DType, params: &ExecParams) -> f64 {
    let explicit = |ctx: &Context| ctx.manifest.tolerance.as_ref()?.for_dtype(dtype);
    if let Some(t) = explicit(candidate).or_else(|| explicit(reference)) {
        return t;
    }
    let depth_expr = |ctx: &Context| {
        ctx.manifest.tolerance.as_ref().and_then(|t| t.accumulation.clone()).or_else(|| ctx.manifest.kernel.matmul.as_ref().map(|m| m.k.clone()))
    };
    let depth = depth_expr(candidate).or_else(|| depth_expr(reference)).and_then(|text| candidate.eval_input_expr(&text, params));
    default_tolerance(dtype, depth)
}

/// What every validator said about one sample.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SampleReport {
    pub index: usize,
    pub params: ExecParams,
    pub data_seed: u64,
    /// The deciding verdict: the first failure, else pruned, else passed.
    pub verdict: Verdict,
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    pub validator: String,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every sample that could run passed, and at least one could.
    Passed,
    Failed,
    /// No sample could run here (all pruned as invalid).
    Inconclusive,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationReport {
    pub context: PathBuf,
    pub source_hash: String,
    pub device: String,
    pub validators: Vec<String>,
    pub outcome: Outcome,
    /// Samples per deciding verdict category.
    pub counts: BTreeMap<String, usize>,
    pub samples: Vec<SampleReport>,
    /// Runs each device's worker answered, when the samples were spread over several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices_served: Vec<usize>,
}

/// Told about each sample as it is judged (the CLI draws a progress line).
pub trait ValidateReporter {
    fn sample(&self, _done: usize, _total: usize, _report: &SampleReport) {}
}

impl ValidateReporter for () {}

/// Judge `candidate` on `samples` with every validator in order. A sample that fails or
/// is pruned by one validator is not shown to the later ones (sanitizing a kernel that
/// does not compile tells nothing).
pub fn validate(
    workers: &mut Workers,
    candidate: &Context,
    samples: &[Sample],
    validators: &mut [Box<dyn Validator>],
    reporter: &dyn ValidateReporter,
) -> Result<ValidationReport, EvalError> {
    if samples.is_empty() {
        return Err(EvalError::Space {
            context: candidate.dir.display().to_string(),
            message: "no execution parameter to validate (the space is empty after constraints)".into(),
        });
    }
    let backend = candidate.backend().name();
    let served_before = workers.served(backend);
    for validator in validators.iter_mut() {
        validator.prepare(workers, candidate, samples)?;
    }
    let devices_served = workers.served(backend).iter().enumerate().map(|(i, n)| n - served_before.get(i).copied().unwrap_or(0)).collect();
    let mut reports = Vec::with_capacity(samples.len());
    for sample in samples {
        let mut checks = Vec::new();
        for validator in validators.iter_mut() {
            let Some(verdict) = validator.check(workers, candidate, sample)? else { continue };
            let stop = verdict != Verdict::Passed;
            checks.push(Check { validator: validator.name(), verdict });
            if stop {
                break;
            }
        }
        let verdict = checks
            .iter()
            .find(|c| c.verdict.is_failure())
            .or_else(|| checks.iter().find(|c| matches!(c.verdict, Verdict::InvalidConfig { .. })))
            .map(|c| c.verdict.clone())
            .unwrap_or(Verdict::Passed);
        let report = SampleReport { index: sample.index, params: sample.params.clone(), data_seed: sample.data_seed, verdict, checks };
        reporter.sample(reports.len() + 1, samples.len(), &report);
        reports.push(report);
    }
    let mut counts = BTreeMap::new();
    for r in &reports {
        *counts.entry(r.verdict.category().to_string()).or_insert(0) += 1;
    }
    let failed = reports.iter().any(|r| r.verdict.is_failure());
    let ran = reports.iter().any(|r| r.verdict == Verdict::Passed);
    let device = workers.pool(candidate.backend().name())?.device().clone();
    Ok(ValidationReport {
        context: candidate.dir.clone(),
        source_hash: source_hash(candidate),
        device: device_identity(&device),
        validators: validators.iter().map(|v| v.name()).collect(),
        outcome: if failed {
            Outcome::Failed
        } else if ran {
            Outcome::Passed
        } else {
            Outcome::Inconclusive
        },
        counts,
        samples: reports,
        devices_served,
    })
}
