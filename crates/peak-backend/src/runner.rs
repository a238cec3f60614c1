//! Running one execution parameter of a context on a backend.
//!
//! The steps are always the same, whatever the backend: size and fill the arrays, compile
//! the device code with the tuning parameters as defines, run the launch script to get a
//! plan, poison the outputs, run once for the outputs, then time repetitions as
//! [`crate::timing`] does for every time in peak (warm-up, cache flushed, device events). Everything the device allocates is freed on every path.

use std::time::Instant;

use peak_spec::expr::{Expr, expression_engine};
use peak_spec::rng::mix_seed;
use peak_spec::{Context, ExecParams, Fill, HostArray, Region};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::{Backend, BufferId, CompileRequest, KernelArg, Launch, Module};
use crate::error::BackendError;
pub use crate::measurement::RunOptions;
use crate::plan::{BufRef, LaunchPlan, PlanArg, Step};
pub use crate::plan::{MAX_ARRAY_BYTES, fits_in_memory};
use crate::script::{ScriptArray, ScriptError, ScriptInput, build_plan};
use crate::timing::{Spread, Timed, time_runs};

/// Why one execution parameter did not produce a result. Each maps to a verdict.
#[derive(Debug, Clone, Error)]
pub enum RunError {
    #[error("{0}")]
    Compile(BackendError),
    #[error("{0}")]
    Script(ScriptError),
    /// Pruned: the configuration cannot run here. Not a failure of the kernel.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("{0}")]
    Launch(BackendError),
    #[error("{0}")]
    Fault(BackendError),
    #[error("{0}")]
    Setup(String),
}

impl RunError {
    fn from_backend(err: BackendError) -> RunError {
        match err {
            BackendError::InvalidConfig(reason) => RunError::Invalid(reason),
            BackendError::Compile { .. } => RunError::Compile(err),
            BackendError::Fault(_) => RunError::Fault(err),
            other => RunError::Launch(other),
        }
    }

    /// The verdict category this error stands for.
    pub fn category(&self) -> &'static str {
        match self {
            RunError::Compile(_) => "compile-failed",
            RunError::Script(ScriptError::Invalid { .. }) | RunError::Invalid(_) => "invalid-config",
            RunError::Script(_) | RunError::Launch(_) | RunError::Setup(_) => "launch-failed",
            RunError::Fault(_) => "crashed",
        }
    }
}

impl From<BackendError> for RunError {
    fn from(e: BackendError) -> Self {
        RunError::from_backend(e)
    }
}

impl From<ScriptError> for RunError {
    fn from(e: ScriptError) -> Self {
        match e {
            ScriptError::Invalid { reason } => RunError::Invalid(reason),
            other => RunError::Script(other),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunResult {
    /// Output arrays after the first run, in manifest order.
    pub outputs: Vec<(String, HostArray)>,
    /// Inputs (not marked `inout`) whose bytes changed during the run.
    pub modified_inputs: Vec<String>,
    pub times_ms: Vec<f64>,
    /// Bytes written to evict the cache before every timed run; `None`: not flushed
    /// ([`crate::timing`]).
    pub flushed_bytes: Option<usize>,
    pub launches: usize,
    /// Where the run's time went (the device stages; a worker adds its own).
    pub stages: StageTimes,
}

/// Where one run's wall time went, stage by stage, in milliseconds. The tuner adds these
/// up over a run (`time_breakdown` in `peak tune --json`), so that the cost of each
/// configuration beyond its kernels' own time can be seen and attacked where it is.
///
/// The runner fills the device stages; a worker adds the waits of its device thread, the
/// launch script and the output comparison. A stage nobody measured stays 0, and a record
/// written before these existed reads as all zeros.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageTimes {
    /// The device thread idle before this job, with no request outstanding: the parent
    /// sent it late (0 for a worker's first job, which has no earlier one to wait after).
    pub request_wait_ms: f64,
    /// Requests there but none compiled, the device thread waiting for a compile to end:
    /// compiles fell behind.
    pub compile_wait_ms: f64,
    /// The launch script run and its launches checked against the compiled resources.
    pub plan_ms: f64,
    /// The arrays made ready: inputs generated on the host (once per input configuration)
    /// and put on the device, outputs and scratch poisoned, the plan's setup operations.
    pub inputs_ms: f64,
    /// The run whose outputs are judged, until the device is done with it.
    pub check_run_ms: f64,
    /// Outputs (and inputs, when they are checked) read back to the host.
    pub read_back_ms: f64,
    /// Warm-up and timed repetitions.
    pub timing_ms: f64,
    /// The device drained and the run's buffers given back.
    pub release_ms: f64,
    /// Outputs compared with their references, hashed or written, off the device thread.
    pub compare_ms: f64,
    /// Runs that were discarded and made again (see the worker's `serve`); their stages
    /// are counted above.
    pub reruns: usize,
}

impl StageTimes {
    /// The sum of two runs' stages (a run made again counts both).
    pub fn add(&mut self, other: &StageTimes) {
        self.request_wait_ms += other.request_wait_ms;
        self.compile_wait_ms += other.compile_wait_ms;
        self.plan_ms += other.plan_ms;
        self.inputs_ms += other.inputs_ms;
        self.check_run_ms += other.check_run_ms;
        self.read_back_ms += other.read_back_ms;
        self.timing_ms += other.timing_ms;
        self.release_ms += other.release_ms;
        self.compare_ms += other.compare_ms;
        self.reruns += other.reruns;
    }
}

/// Milliseconds since `start`.
pub fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

impl RunResult {
    pub fn median_ms(&self) -> Option<f64> {
        median(&self.times_ms)
    }

    /// The timed repetitions' spread; `None` when none ran.
    pub fn spread(&self) -> Option<Spread> {
        Spread::of(&self.times_ms)
    }
}

pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) { (v[mid - 1] + v[mid]) / 2.0 } else { v[mid] })
}

/// One array, sized and its init evaluated for one execution parameter.
#[derive(Debug, Clone)]
pub struct SizedArray {
    pub spec: peak_spec::ArraySpec,
    pub count: usize,
    pub fill: Fill,
}

/// Evaluate every array's size expression for `params`, refusing arrays the host cannot
/// hold ([`fits_host`]): every array is generated on the host before a run, and an
/// allocation beyond its memory would abort the process, not fail.
pub fn size_arrays(ctx: &Context, params: &ExecParams) -> Result<Vec<SizedArray>, RunError> {
    let arrays = size_arrays_unfilled(ctx, params)?;
    fits_host(&arrays)?;
    Ok(arrays)
}

/// [`size_arrays`] without the host's memory check, for what sizes arrays and never fills
/// them: a compile-only check, made on a machine other than the one the kernel runs on.
pub fn size_arrays_unfilled(ctx: &Context, params: &ExecParams) -> Result<Vec<SizedArray>, RunError> {
    let engine = expression_engine();
    let names: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
    let mut scope = params.scope();
    ctx.manifest
        .arrays
        .iter()
        .map(|spec| {
            let expr = Expr::compile(&engine, &spec.size, &names).map_err(RunError::Setup)?;
            let count = expr.eval_int(&engine, &mut scope).map_err(|m| RunError::Setup(format!("array {}: size: {m}", spec.name)))?;
            if count <= 0 {
                return Err(RunError::Invalid(format!("array {} would have {count} elements", spec.name)));
            }
            if !fits_in_memory(count, spec.dtype) {
                return Err(RunError::Invalid(format!(
                    "array {} would have {count} elements of {}, more than the {MAX_ARRAY_BYTES} bytes one array may take",
                    spec.name, spec.dtype
                )));
            }
            let mut eval = |text: &str| Expr::compile(&engine, text, &names)?.eval_int(&engine, &mut scope);
            let fill = spec.init.fill(spec.dtype, count as usize, &mut eval).map_err(|m| RunError::Setup(format!("array {}: {m}", spec.name)))?;
            Ok(SizedArray { spec: spec.clone(), count: count as usize, fill })
        })
        .collect()
}

fn array_bytes(array: &SizedArray) -> u64 {
    array.count as u64 * array.spec.dtype.size_bytes() as u64
}

/// Bytes for a person: `40.0 GB`, `6.3 MB`, `512 bytes`.
fn gigabytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000_000 => format!("{:.1} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} kB", b as f64 / 1e3),
        b => format!("{b} bytes"),
    }
}

/// Refuse arrays that together take more than `limit` bytes of `memory`, naming each array
/// and its bytes.
fn refuse_beyond(arrays: &[SizedArray], limit: u64, memory: &str) -> Result<(), RunError> {
    let total: u64 = arrays.iter().map(array_bytes).sum();
    if total <= limit {
        return Ok(());
    }
    let each: Vec<String> = arrays.iter().map(|a| format!("{} {}", a.spec.name, gigabytes(array_bytes(a)))).collect();
    Err(RunError::Invalid(format!("the arrays take {total} bytes ({}: {}), more than the {} of {memory}", gigabytes(total), each.join(", "), gigabytes(limit))))
}

/// The memory the host can give now without swapping (`MemAvailable` in
/// `/proc/meminfo`), where the system says.
fn host_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuse arrays beyond the memory the host has available (not checked where the system
/// does not say).
pub fn fits_host(arrays: &[SizedArray]) -> Result<(), RunError> {
    match host_available_bytes() {
        Some(available) => refuse_beyond(arrays, available, "memory available on this host"),
        None => Ok(()),
    }
}

/// Refuse arrays beyond the device's memory (a device that reports none is not checked).
pub fn fits_device(arrays: &[SizedArray], device: &crate::backend::DeviceInfo) -> Result<(), RunError> {
    if device.global_memory_bytes == 0 {
        return Ok(());
    }
    refuse_beyond(arrays, device.global_memory_bytes, &format!("memory of {}", device.name))
}

/// The initial contents of every array; `data_seed` salts the random ones.
pub fn generate_arrays(arrays: &[SizedArray], data_seed: u64) -> Vec<HostArray> {
    arrays
        .iter()
        .map(|a| {
            let seed = mix_seed(a.spec.seed.unwrap_or(1), &a.spec.name, data_seed);
            HostArray::init(a.spec.dtype, a.count, a.fill, seed)
        })
        .collect()
}

/// Compile the context's device code for one set of tuning parameters.
pub fn compile(backend: &dyn Backend, ctx: &Context, params: &ExecParams) -> Result<Module, RunError> {
    let request = CompileRequest { source: ctx.regions.device_source(), defines: params.defines(), file_name: ctx.source_path().display().to_string() };
    backend.compile(&request).map_err(RunError::from_backend)
}

/// Run the launch script for `params`.
pub fn plan(backend: &dyn Backend, ctx: &Context, params: &ExecParams, arrays: &[SizedArray]) -> Result<LaunchPlan, RunError> {
    let script_arrays: Vec<ScriptArray> = arrays.iter().map(|a| ScriptArray { name: a.spec.name.clone(), dtype: a.spec.dtype, count: a.count }).collect();
    let file = ctx.source_path().display().to_string();
    let extensions = backend.script_functions();
    Ok(build_plan(&ScriptInput {
        file: &file,
        source: ctx.region(Region::Host),
        first_line: ctx.regions.first_line(Region::Host),
        params,
        arrays: &script_arrays,
        scalars: &ctx.manifest.scalars.iter().map(|(n, v)| (n.clone(), *v)).collect::<Vec<_>>(),
        device: backend.device(),
        extensions: &extensions,
    })?)
}

/// Compile, plan and run one execution parameter.
pub fn run(backend: &dyn Backend, ctx: &Context, params: &ExecParams, options: &RunOptions) -> Result<RunResult, RunError> {
    let module = compile(backend, ctx, params)?;
    run_compiled(backend, ctx, &module, params, options)
}

/// Run with an already compiled module (the tuner compiles ahead, in parallel).
pub fn run_compiled(backend: &dyn Backend, ctx: &Context, module: &Module, params: &ExecParams, options: &RunOptions) -> Result<RunResult, RunError> {
    let arrays = size_arrays(ctx, params)?;
    fits_device(&arrays, backend.device())?;
    let host = generate_arrays(&arrays, options.data_seed);
    let plan = plan(backend, ctx, params, &arrays)?;
    run_prepared(backend, module, options, &Prepared { arrays: &arrays, host: &host, plan: &plan, pristine: None })
}

/// Everything a run needs besides the module: the sized arrays, their initial contents
/// and the launch plan. A worker keeps the arrays of the last input configuration, since
/// generating them can cost more than running a fast kernel.
pub struct Prepared<'a> {
    pub arrays: &'a [SizedArray],
    pub host: &'a [HostArray],
    pub plan: &'a LaunchPlan,
    /// Device buffers already holding the initial contents of the input arrays (by array
    /// index; `None` for outputs that start poisoned), kept by a worker between runs of the
    /// same inputs. The run's own buffers are filled from them by device-to-device copies
    /// instead of from the host; the kernels never see these buffers themselves.
    pub pristine: Option<&'a [Option<BufferId>]>,
}

/// Run with a compiled module and prepared arrays and plan.
pub fn run_prepared(backend: &dyn Backend, module: &Module, options: &RunOptions, prepared: &Prepared) -> Result<RunResult, RunError> {
    let Prepared { arrays, host, plan, pristine } = *prepared;
    let mut stages = StageTimes::default();
    let clock = Instant::now();
    let mut device = DeviceArrays { backend, sets: Vec::new(), scratch: Vec::new() };
    let sets = options.input_sets.max(1);
    for s in 0..sets {
        let mut set = Vec::with_capacity(arrays.len());
        for (i, (array, data)) in arrays.iter().zip(host).enumerate() {
            let id = backend.alloc(data.bytes.len()).map_err(RunError::from_backend)?;
            set.push(id);
            if array.spec.starts_poisoned() {
                let poison = HostArray::poison_pattern(array.spec.dtype);
                backend.fill(id, &poison, data.bytes.len()).map_err(RunError::from_backend)?;
            } else if let Some(source) = pristine.and_then(|p| p.get(i).copied().flatten()) {
                // A copy on the device of bytes that came from the host earlier: the same
                // contents, without moving them over the bus again for every run.
                backend.copy(source, id, data.bytes.len()).map_err(RunError::from_backend)?;
            } else if s == 0 {
                backend.write(id, &data.bytes).map_err(RunError::from_backend)?;
            } else {
                // Further sets copy the first on the device, before any kernel ran: the
                // same bytes without another transfer from the host.
                backend.copy(device.sets[0][i], id, data.bytes.len()).map_err(RunError::from_backend)?;
            }
        }
        device.sets.push(set);
    }
    for scratch in &plan.scratch {
        let bytes = scratch.count * scratch.dtype.size_bytes();
        let id = backend.alloc(bytes).map_err(RunError::from_backend)?;
        device.scratch.push(id);
        // Scratch starts poisoned too: a kernel relying on zeroed scratch must fill() it.
        backend.fill(id, &HostArray::poison_pattern(scratch.dtype), bytes).map_err(RunError::from_backend)?;
    }

    for op in &plan.setup {
        let lookup = |r: &BufRef| device.resolve(0, r);
        backend.run_op(module, op, &lookup).map_err(RunError::from_backend)?;
    }
    // Wait for the copies and fills, so that they are not counted as the check run's.
    backend.synchronize().map_err(RunError::from_backend)?;
    stages.inputs_ms = ms_since(clock);

    let clock = Instant::now();
    device.run_steps(module, plan, arrays, 0)?;
    backend.synchronize().map_err(RunError::from_backend)?;
    stages.check_run_ms = ms_since(clock);

    let clock = Instant::now();
    let mut outputs = Vec::new();
    let mut modified_inputs = Vec::new();
    for (i, (array, data)) in arrays.iter().zip(host).enumerate() {
        let check = array.spec.output || (options.check_inputs && !array.spec.inout);
        if !check {
            continue;
        }
        let mut bytes = vec![0u8; data.bytes.len()];
        backend.read(device.sets[0][i], &mut bytes).map_err(RunError::from_backend)?;
        if array.spec.output {
            outputs.push((array.spec.name.clone(), HostArray { dtype: array.spec.dtype, bytes }));
        } else if bytes != data.bytes {
            modified_inputs.push(array.spec.name.clone());
        }
    }
    stages.read_back_ms = ms_since(clock);

    let clock = Instant::now();
    let Timed { times_ms, flushed_bytes } = time_runs(backend, options, sets, |set| device.run_steps(module, plan, arrays, set))?;
    stages.timing_ms = ms_since(clock);

    let clock = Instant::now();
    drop(device);
    stages.release_ms = ms_since(clock);
    Ok(RunResult { outputs, modified_inputs, times_ms, flushed_bytes, launches: plan.launches(), stages })
}

/// Device buffers of one run; freed when dropped, whatever happened.
struct DeviceArrays<'a> {
    backend: &'a dyn Backend,
    sets: Vec<Vec<BufferId>>,
    scratch: Vec<BufferId>,
}

impl DeviceArrays<'_> {
    fn resolve(&self, set: usize, r: &BufRef) -> BufferId {
        match r {
            BufRef::Array(i) => self.sets[set][*i],
            BufRef::Scratch(i) => self.scratch[*i],
        }
    }

    fn run_steps(&self, module: &Module, plan: &LaunchPlan, arrays: &[SizedArray], set: usize) -> Result<(), RunError> {
        let lookup = |r: &BufRef| self.resolve(set, r);
        for step in &plan.steps {
            match step {
                Step::Launch { kernel, grid, block, shared_bytes, args, .. } => {
                    let args = args
                        .iter()
                        .map(|a| {
                            Ok(match a {
                                PlanArg::Buffer(r) => KernelArg::Buffer(self.resolve(set, r)),
                                PlanArg::I32(v) => KernelArg::I32(*v),
                                PlanArg::U32(v) => KernelArg::U32(*v),
                                PlanArg::I64(v) => KernelArg::I64(*v),
                                PlanArg::F32(v) => KernelArg::F32(*v),
                                PlanArg::Op(op) => self.backend.op_argument(module, op, &lookup).map_err(RunError::from_backend)?,
                            })
                        })
                        .collect::<Result<Vec<_>, RunError>>()?;
                    let launch = Launch { kernel: kernel.clone(), grid: *grid, block: *block, shared_bytes: *shared_bytes, args };
                    self.backend.launch(module, &launch).map_err(RunError::from_backend)?;
                }
                Step::Fill { buffer, value, .. } => {
                    let (dtype, count) = self.describe(plan, arrays, buffer);
                    let pattern = HostArray::filled(dtype, 1, *value).bytes;
                    self.backend.fill(self.resolve(set, buffer), &pattern, count * dtype.size_bytes()).map_err(RunError::from_backend)?;
                }
                Step::Copy { src, dst, .. } => {
                    let (dtype, count) = self.describe(plan, arrays, src);
                    self.backend.copy(self.resolve(set, src), self.resolve(set, dst), count * dtype.size_bytes()).map_err(RunError::from_backend)?;
                }
                Step::Op(op) => self.backend.run_op(module, op, &lookup).map_err(RunError::from_backend)?,
            }
        }
        Ok(())
    }

    fn describe(&self, plan: &LaunchPlan, arrays: &[SizedArray], r: &BufRef) -> (peak_spec::DType, usize) {
        match r {
            BufRef::Array(i) => (arrays[*i].spec.dtype, arrays[*i].count),
            BufRef::Scratch(i) => (plan.scratch[*i].dtype, plan.scratch[*i].count),
        }
    }
}

impl Drop for DeviceArrays<'_> {
    fn drop(&mut self) {
        // Wait for queued work first: freeing a buffer a kernel still uses is undefined.
        let _ = self.backend.synchronize();
        for id in self.sets.iter().flatten().chain(&self.scratch) {
            self.backend.free(*id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use peak_spec::{Manifest, Regions, Values};

    use super::*;

    const MANIFEST: &str = r#"
[kernel]
name = "xent"
backend = "cuda"
source = "k.cu"

[inputs]
rows = { values = [8] }
cols = { values = [16, 12] }

[[arrays]]
name = "logits"
type = "f32"
size = "rows * 16"
init = "normal"
outliers = { row = "cols", count = 2, scale = 20.0 }

[[arrays]]
name = "labels"
type = "i32"
size = "rows"
init = "random"
range = [0, "cols"]

[[arrays]]
name = "loss"
type = "f32"
size = "rows"
init = "zeros"
output = true
"#;

    fn sized(cols: i64) -> Result<Vec<SizedArray>, RunError> {
        let manifest = Manifest::parse("peak.toml", MANIFEST).unwrap();
        let ctx = Context { dir: PathBuf::from("/nonexistent/ctx"), manifest, regions: Regions::new("", "", "") };
        let mut params = ExecParams::default();
        params.inputs.insert("rows".into(), 8);
        params.inputs.insert("cols".into(), cols);
        size_arrays(&ctx, &params)
    }

    #[test]
    fn init_expressions_are_evaluated_for_the_inputs() {
        let arrays = sized(16).unwrap();
        assert_eq!(arrays[0].fill.outliers.map(|o| (o.row, o.count)), Some((16, 2)));
        assert_eq!(arrays[1].fill.values, Values::Integers { lo: 0, hi: 16 });
        let labels = &generate_arrays(&arrays, 3)[1];
        assert!((0..labels.len()).all(|i| (0.0..16.0).contains(&labels.get_f64(i))));
    }

    #[test]
    fn an_init_that_does_not_fit_the_inputs_is_a_setup_error() {
        // 128 logits are not a whole number of rows of 12.
        let err = sized(12).unwrap_err();
        assert!(matches!(err, RunError::Setup(_)), "{err:?}");
        assert!(err.to_string().starts_with("array logits: 128 elements are not a whole number of rows of 12"), "{err}");
    }
}
