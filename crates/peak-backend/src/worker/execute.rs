//! The run stage of the worker: inputs generated (once per input configuration), the
//! launch plan checked against the compiled resources, the kernels run on the device.

use std::sync::Arc;
use std::time::Instant;

use peak_spec::{Context, ExecParams, HostArray};

use crate::backend::{Backend, BufferId};
use crate::error::BackendError;
use crate::plan::LaunchPlan;
use crate::runner::{self, RunError, SizedArray, StageTimes, ms_since};
use crate::yardstick::{self, Ask};

use super::compile::Compiled;
use super::protocol::{Failure, FailureKind, Job, OutputMode, RunReport};
use super::resources::{COMPILE_REPORT, check_resources};

/// The arrays of the last input configuration, on the host and, once a run needed them,
/// on the device. Generating them costs tens of milliseconds at matmul sizes, more than a
/// fast kernel runs, and moving them to the device costs milliseconds more for every run;
/// a tuning run uses the same inputs for every variant.
#[derive(Default)]
pub(super) struct InputCache {
    last: Option<(String, Arc<HostInputs>)>,
    /// Device copies of the last configuration's input arrays (by array index, `None` for
    /// outputs), written from the host once. A run fills its own buffers from them with
    /// device-to-device copies, so no kernel is ever given one of these.
    pristine: Option<Vec<Option<BufferId>>>,
}

/// The arrays of one input configuration, sized, and their initial contents.
type HostInputs = (Vec<SizedArray>, Vec<HostArray>);

impl InputCache {
    fn key(ctx: &Context, params: &ExecParams, data_seed: u64) -> String {
        format!("{}\0{}\0{:?}\0{data_seed}", ctx.source_path().display(), serde_json::to_string(&ctx.manifest.arrays).unwrap_or_default(), params.inputs)
    }

    /// Whether a run of `job` would take its inputs from device copies an earlier run made.
    pub(super) fn holds_copies_for(&self, ctx: &Context, job: &Job) -> bool {
        self.pristine.is_some()
            && matches!(job.outputs, OutputMode::Compare { .. })
            && self.last.as_ref().is_some_and(|(k, _)| *k == Self::key(ctx, &job.params, job.options.data_seed))
    }

    fn get(&mut self, backend: &dyn Backend, ctx: &Context, params: &ExecParams, data_seed: u64) -> Result<Arc<HostInputs>, RunError> {
        let key = Self::key(ctx, params, data_seed);
        if let Some((k, arrays)) = &self.last
            && *k == key
        {
            return Ok(arrays.clone());
        }
        // Other inputs (or another seed): the device copies hold the old contents.
        self.forget_device_copies(backend);
        let sized = runner::size_arrays(ctx, params)?;
        runner::fits_device(&sized, backend.device())?;
        let host = runner::generate_arrays(&sized, data_seed);
        let arrays = Arc::new((sized, host));
        self.last = Some((key, arrays.clone()));
        Ok(arrays)
    }

    /// Device copies of `inputs` (the configuration [`InputCache::get`] returned last), and
    /// whether they were made by an earlier run: such copies have lived through other
    /// kernels, and only they can have been damaged by one. `None` where they would take
    /// more than an eighth of the device's memory or cannot be allocated: the run then
    /// writes from the host, as it always may.
    fn device_copies(&mut self, backend: &dyn Backend, inputs: &HostInputs) -> Option<(Vec<Option<BufferId>>, bool)> {
        if let Some(copies) = &self.pristine {
            return Some((copies.clone(), true));
        }
        let (sized, host) = inputs;
        let bytes: u64 = sized.iter().zip(host).filter(|(a, _)| !a.spec.starts_poisoned()).map(|(_, h)| h.bytes.len() as u64).sum();
        if bytes > backend.device().global_memory_bytes / 8 {
            return None;
        }
        let mut copies: Vec<Option<BufferId>> = Vec::with_capacity(sized.len());
        for (array, data) in sized.iter().zip(host) {
            if array.spec.starts_poisoned() {
                copies.push(None);
                continue;
            }
            let written = backend.alloc(data.bytes.len()).and_then(|id| {
                copies.push(Some(id));
                backend.write(id, &data.bytes)
            });
            if written.is_err() {
                copies.into_iter().flatten().for_each(|id| backend.free(id));
                return None;
            }
        }
        self.pristine = Some(copies.clone());
        Some((copies, false))
    }

    /// Drop the device copies; the next run that wants them writes them again.
    pub(super) fn forget_device_copies(&mut self, backend: &dyn Backend) {
        for id in self.pristine.take().into_iter().flatten().flatten() {
            backend.free(id);
        }
    }
}

/// How a run's input buffers are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InputSource {
    /// From the worker's device copies where it has them (see [`InputCache`]).
    Kept,
    /// From the host, as for a run made again because kept copies may have been damaged.
    Host,
}

/// A run that finished on the device, waiting for its outputs to be judged.
pub(super) struct Executed {
    pub(super) result: runner::RunResult,
    pub(super) ctx: Arc<Context>,
    pub(super) compiled: Arc<Compiled>,
    pub(super) start: Instant,
    /// The inputs came from device copies an earlier run had made (see [`InputCache`]).
    pub(super) inputs_kept: bool,
}

/// Run `job` on the device. `waits` are the device thread's waits before it (the stages
/// the runner cannot see), added to the run's own stages.
pub(super) fn execute(
    backend: &dyn Backend,
    ctx: &Arc<Context>,
    compiled: &Arc<Compiled>,
    job: &Job,
    inputs: &mut InputCache,
    source: InputSource,
    waits: StageTimes,
) -> Result<Executed, Failure> {
    let start = Instant::now();
    let fail = |e: RunError| Failure::from(&e);
    let clock = Instant::now();
    let arrays = inputs.get(backend, ctx, &job.params, job.options.data_seed).map_err(fail)?;
    let host_ms = ms_since(clock);
    let (sized, host) = (&arrays.0, &arrays.1);
    let clock = Instant::now();
    let plan = checked_plan(backend, ctx, compiled, job, sized)?;
    let plan_ms = ms_since(clock);
    // Kept copies only where outputs are compared: a copy a wild write damaged then shows
    // as a failed comparison, and the run is made again from the host (see `serve`). A
    // digest, or outputs written as a reference, would carry the damage unseen.
    let clock = Instant::now();
    let copies = match (source, &job.outputs) {
        (InputSource::Kept, OutputMode::Compare { .. }) => inputs.device_copies(backend, &arrays),
        _ => None,
    };
    let copies_ms = ms_since(clock);
    let inputs_kept = copies.as_ref().is_some_and(|(_, earlier)| *earlier);
    let prepared = runner::Prepared { arrays: sized, host, plan: &plan, pristine: copies.as_ref().map(|(ids, _)| ids.as_slice()) };
    let mut result = runner::run_prepared(backend, &compiled.module, &job.options, &prepared).map_err(fail)?;
    result.stages.add(&waits);
    result.stages.plan_ms += plan_ms;
    result.stages.inputs_ms += host_ms + copies_ms;
    Ok(Executed { result, ctx: ctx.clone(), compiled: compiled.clone(), start, inputs_kept })
}

/// The launch script's plan, once the compiled kernels' resources are known to fit it.
fn checked_plan(backend: &dyn Backend, ctx: &Context, compiled: &Compiled, job: &Job, sized: &[SizedArray]) -> Result<LaunchPlan, Failure> {
    let plan = runner::plan(backend, ctx, &job.params, sized).map_err(|e| Failure::from(&e))?;
    if let Err(reason) = check_resources(&compiled.module.kernels, &plan.steps, backend.device(), job.prune_spills) {
        return Err(Failure::new(FailureKind::InvalidConfig, format!("{COMPILE_REPORT}{reason}")));
    }
    Ok(plan)
}

/// A `compile_only` job's answer: the compile, the launch script and the resource check,
/// with no outputs and no times. Arrays are sized, never filled.
pub(super) fn check_compiled(backend: &dyn Backend, ctx: &Context, compiled: &Compiled, job: &Job) -> Result<RunReport, Failure> {
    let start = Instant::now();
    // Sized, never filled: the host here is not where the kernel will run.
    let sized = runner::size_arrays_unfilled(ctx, &job.params).map_err(|e| Failure::from(&e))?;
    runner::fits_device(&sized, backend.device()).map_err(|e| Failure::from(&e))?;
    let plan = checked_plan(backend, ctx, compiled, job, &sized)?;
    Ok(RunReport {
        outputs: Vec::new(),
        modified_inputs: Vec::new(),
        times_ms: Vec::new(),
        launches: plan.launches(),
        kernels: compiled.module.kernels.clone(),
        compile_log: compiled.module.log.clone(),
        compile_ms: compiled.compile_ms,
        run_ms: start.elapsed().as_secs_f64() * 1e3,
        stages: StageTimes::default(),
        yardstick: None,
    })
}

/// A yardstick job's answer ([`Job::yardstick`]): the context loaded, nothing compiled, the
/// yardstick timed as the job's options say; its times are the report's `times_ms`.
pub(super) fn run_yardstick(backend: &dyn Backend, job: &Job, ask: Ask) -> Result<RunReport, Failure> {
    let start = Instant::now();
    let ctx = Context::load(&job.context).map_err(|e| Failure::new(FailureKind::LaunchFailed, format!("cannot load the context: {e}")))?;
    let (measured, times_ms) = yardstick::measure(backend, &ctx, &job.params, ask, &job.options).map_err(|e| match e {
        BackendError::Unsupported(what) => Failure::new(FailureKind::InvalidConfig, format!("{what} is not supported")),
        other => Failure::from(&RunError::from(other)),
    })?;
    Ok(RunReport {
        outputs: Vec::new(),
        modified_inputs: Vec::new(),
        times_ms,
        launches: 0,
        kernels: Vec::new(),
        compile_log: String::new(),
        compile_ms: 0.0,
        run_ms: start.elapsed().as_secs_f64() * 1e3,
        stages: StageTimes::default(),
        yardstick: Some(measured),
    })
}
