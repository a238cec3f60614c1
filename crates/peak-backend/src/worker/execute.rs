//! The run stage of the worker: inputs generated (once per input configuration), the
//! launch plan checked against the compiled resources, the kernels run on the device.

use std::sync::Arc;
use std::time::Instant;

use peak_spec::{Context, ExecParams, HostArray};

use crate::backend::Backend;
use crate::plan::LaunchPlan;
use crate::runner::{self, RunError, SizedArray};

use super::compile::Compiled;
use super::protocol::{Failure, FailureKind, Job, RunReport};
use super::resources::{COMPILE_REPORT, check_resources};

/// The host arrays of the last input configuration. Generating them costs tens of
/// milliseconds at matmul sizes, more than a fast kernel runs, and a tuning run uses the
/// same inputs for every variant.
#[derive(Default)]
pub(super) struct InputCache {
    last: Option<(String, Arc<HostInputs>)>,
}

/// The arrays of one input configuration, sized, and their initial contents.
type HostInputs = (Vec<SizedArray>, Vec<HostArray>);

impl InputCache {
    fn get(&mut self, ctx: &Context, params: &ExecParams, data_seed: u64) -> Result<Arc<HostInputs>, RunError> {
        let key = format!(
            "{}\0{}\0{:?}\0{data_seed}",
            ctx.source_path().display(),
            serde_json::to_string(&ctx.manifest.arrays).unwrap_or_default(),
            params.inputs
        );
        if let Some((k, arrays)) = &self.last
            && *k == key
        {
            return Ok(arrays.clone());
        }
        let sized = runner::size_arrays(ctx, params)?;
        let host = runner::generate_arrays(&sized, data_seed);
        let arrays = Arc::new((sized, host));
        self.last = Some((key, arrays.clone()));
        Ok(arrays)
    }
}

/// A run that finished on the device, waiting for its outputs to be judged.
pub(super) struct Executed {
    pub(super) result: runner::RunResult,
    pub(super) compiled: Arc<Compiled>,
    pub(super) start: Instant,
}

pub(super) fn execute(backend: &dyn Backend, ctx: &Context, compiled: &Arc<Compiled>, job: &Job, inputs: &mut InputCache) -> Result<Executed, Failure> {
    let start = Instant::now();
    let fail = |e: RunError| Failure::from(&e);
    let arrays = inputs.get(ctx, &job.params, job.options.data_seed).map_err(fail)?;
    let (sized, host) = (&arrays.0, &arrays.1);
    let plan = checked_plan(backend, ctx, compiled, job, sized)?;
    let prepared = runner::Prepared { arrays: sized, host, plan: &plan };
    let result = runner::run_prepared(backend, &compiled.module, &job.options, &prepared).map_err(fail)?;
    Ok(Executed { result, compiled: compiled.clone(), start })
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
    let sized = runner::size_arrays(ctx, &job.params).map_err(|e| Failure::from(&e))?;
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
    })
}
