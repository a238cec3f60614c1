//! Crash-isolated execution: compiled kernels run in a worker process, one per device.
//!
//! Every kernel is LLM-written code. A bad one can hang the device, leave a CUDA context
//! broken after an illegal address (sticky until the process ends), or crash the process
//! outright (on PoCL a wild write lands in the host process). So the caller never runs a
//! kernel itself: it talks to a child process, `peak worker --backend NAME`, through
//! line-delimited JSON on the child's stdin and stdout, and restarts it when it dies or
//! stops answering. The variant that was running is reported `crashed` or `timed-out`;
//! every other queued variant is sent again to the new worker.
//!
//! ## Protocol (version [`PROTOCOL_VERSION`])
//!
//! Parent → worker, one [`Request`] per line: `{"id":7,"context":"/path","params":{...},
//! "options":{...RunOptions},"outputs":{"mode":"digest"|"bytes"|"compare",...}}`.
//!
//! Worker → parent, one [`Message`] per line, tagged by `event`:
//! - `ready` once at start-up, with the device and the protocol version;
//! - `unavailable` instead, when the backend cannot open (then the worker exits);
//! - `started` when a request's kernels begin to run on the device (the parent's
//!   time-out clock for that request starts here, not while it waits to compile; a
//!   `compile_only` request never starts);
//! - `done` with a [`RunReport`] or a [`Failure`] (category + message + compiler log).
//!
//! Requests are pipelined: the worker compiles up to one request per core at once
//! (`Backend::compile` is `Send + Sync`) while it runs them on the device one at a time,
//! in order. A request whose run faults is answered `crashed`, then the worker exits: the
//! device context is not trusted after a fault.
//!
//! ## Attribution
//!
//! A death while a request is `started` is that request's. A death (or silence past the
//! compile time-out) with nothing started happened while compiling, where several
//! requests are in flight at once; the pool then resends them one at a time until the
//! culprit shows itself, so no innocent variant is ever blamed.
//!
//! ## Process hygiene
//!
//! The worker moves its stdout to a private descriptor and points descriptor 1 at stderr,
//! so a kernel's `printf` cannot corrupt the protocol. On Linux the child asks to be killed
//! when its parent dies (`PR_SET_PDEATHSIG`), and it runs in its own process group, so a
//! time-out also kills whatever it wrapped (compute-sanitizer, Nsight Compute start the
//! real worker as their child).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use peak_spec::{Comparison, Context, DType, ExecParams, HostArray, compare};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::{Backend, BufferId, DeviceInfo, KernelResources, Module};
use crate::error::BackendError;
use crate::plan::{LaunchPlan, Step};
use crate::runner::{self, RunError, RunOptions, SizedArray, median};

/// Bumped whenever a message changes shape; the parent refuses a worker of another version.
pub const PROTOCOL_VERSION: u32 = 2;

/// How an `invalid-config` reason found in the compiler's resource report begins (the
/// others come from the launch script or the launch itself).
pub const COMPILE_REPORT: &str = "compile report: ";

/// Exit status of a worker that stopped on purpose after a device fault.
const FAULT_EXIT: i32 = 70;

/// Compiled modules a worker keeps, so validation samples that share tuning parameters
/// compile once. Bounded because each holds device memory.
const MODULE_CACHE: usize = 64;

/// What to run: one execution parameter of one context.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The context folder. The worker loads it itself, so the parent must not rewrite it
    /// while the job is queued.
    pub context: PathBuf,
    pub params: ExecParams,
    pub options: RunOptions,
    #[serde(default)]
    pub outputs: OutputMode,
    /// Treat kernels that spill registers (by the compiler's report) as invalid.
    #[serde(default)]
    pub prune_spills: bool,
    /// Stop after compiling, running the launch script and checking the kernels' resources
    /// against the device: nothing is allocated or launched. Where no device runs the
    /// kernel (a deferred apply), this is everything that can be known about it.
    #[serde(default)]
    pub compile_only: bool,
    /// How long the run may take once started; `None` takes the pool's default.
    #[serde(skip)]
    pub timeout: Option<Duration>,
}

impl Job {
    pub fn new(context: impl Into<PathBuf>, params: ExecParams, options: RunOptions) -> Job {
        Job { context: context.into(), params, options, outputs: OutputMode::Digest, prune_spills: false, compile_only: false, timeout: None }
    }
}

/// What the worker sends back of the output arrays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum OutputMode {
    /// Digest and element count only.
    #[default]
    Digest,
    /// The bytes too, hex-encoded (small arrays; large ones are better written to files).
    Bytes,
    /// Write each output to `dir/<name>.bin` (raw little-endian elements, written under a
    /// temporary name and renamed), so a large array never crosses the pipe: recording
    /// references.
    Files { dir: PathBuf },
    /// Compare each output in the worker with a reference file of raw little-endian
    /// elements, so large outputs never cross the pipe.
    Compare { references: Vec<ReferenceArray> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceArray {
    pub name: String,
    pub path: PathBuf,
    pub tolerance: f64,
}

/// Parent → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub job: Job,
}

/// Worker → parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Message {
    Ready { protocol: u32, pid: u32, device: DeviceInfo },
    Unavailable { message: String },
    Started { id: u64 },
    Done { id: u64, result: Result<RunReport, Failure> },
}

/// A successful run, as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub outputs: Vec<OutputReport>,
    /// Inputs (not marked `inout`) whose bytes changed, when `check_inputs` was asked.
    pub modified_inputs: Vec<String>,
    pub times_ms: Vec<f64>,
    pub launches: usize,
    /// The compiler's resource report for each kernel of the module.
    pub kernels: Vec<KernelResources>,
    /// Compiler warnings, kept even on success.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compile_log: String,
    /// Wall time of the compile (0 when the worker had the module already).
    pub compile_ms: f64,
    /// Wall time of the whole run: upload, runs, read-back.
    pub run_ms: f64,
}

impl RunReport {
    pub fn median_ms(&self) -> Option<f64> {
        median(&self.times_ms)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputReport {
    pub name: String,
    pub dtype: DType,
    pub elements: usize,
    /// Content hash (not computed when comparing: hashing large outputs costs time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<OutputComparison>,
    /// Why a requested comparison (or file) could not be made: a missing or mis-sized
    /// reference, an unwritable folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_error: Option<String>,
}

impl OutputReport {
    /// The array, when its bytes were asked for.
    pub fn array(&self) -> Option<HostArray> {
        let bytes = hex::decode(self.hex.as_ref()?).ok()?;
        Some(HostArray { dtype: self.dtype, bytes })
    }
}

/// [`Comparison`] in a form that survives JSON: a poisoned output gives an infinite error
/// and NaN values, which plain JSON numbers cannot carry (serde_json writes `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputComparison {
    #[serde(with = "json_f64")]
    pub relative_error: f64,
    #[serde(with = "json_f64")]
    pub tolerance: f64,
    #[serde(with = "json_f64")]
    pub max_error: f64,
    #[serde(with = "json_f64")]
    pub mean_error: f64,
    pub worst_index: usize,
    #[serde(with = "json_f64")]
    pub worst_value: f64,
    #[serde(with = "json_f64")]
    pub worst_expected: f64,
    pub non_finite: usize,
    pub first_non_finite: Option<usize>,
    pub passed: bool,
}

impl From<Comparison> for OutputComparison {
    fn from(c: Comparison) -> Self {
        OutputComparison {
            relative_error: c.relative_error,
            tolerance: c.tolerance,
            max_error: c.max_error,
            mean_error: c.mean_error,
            worst_index: c.worst_index,
            worst_value: c.worst_value,
            worst_expected: c.worst_expected,
            non_finite: c.non_finite,
            first_non_finite: c.first_non_finite,
            passed: c.passed,
        }
    }
}

/// Serde for an `f64` that may be NaN or infinite: finite values are numbers, the others
/// the strings `"NaN"`, `"inf"` and `"-inf"`. Use with `#[serde(with = "json_f64")]`.
pub mod json_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            s.serialize_f64(*value)
        } else if value.is_nan() {
            s.serialize_str("NaN")
        } else if *value > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Number(f64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Number(v) => Ok(v),
            Repr::Text(t) => match t.as_str() {
                "NaN" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                other => Err(serde::de::Error::custom(format!("`{other}` is not a number"))),
            },
        }
    }
}

/// Why a job produced no result. `category` is the verdict it stands for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub category: FailureKind,
    pub message: String,
    /// The compiler's log, for `compile-failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The compiler options used, for `compile-failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    CompileFailed,
    /// Pruned: the configuration cannot run here. Not a failure of the kernel.
    InvalidConfig,
    LaunchFailed,
    Crashed,
    TimedOut,
}

impl FailureKind {
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::CompileFailed => "compile-failed",
            FailureKind::InvalidConfig => "invalid-config",
            FailureKind::LaunchFailed => "launch-failed",
            FailureKind::Crashed => "crashed",
            FailureKind::TimedOut => "timed-out",
        }
    }
}

impl Failure {
    fn new(category: FailureKind, message: impl Into<String>) -> Failure {
        Failure { category, message: message.into(), log: None, options: None }
    }
}

impl From<&RunError> for Failure {
    fn from(err: &RunError) -> Failure {
        let category = match err.category() {
            "compile-failed" => FailureKind::CompileFailed,
            "invalid-config" => FailureKind::InvalidConfig,
            "crashed" => FailureKind::Crashed,
            _ => FailureKind::LaunchFailed,
        };
        match err {
            RunError::Compile(BackendError::Compile { log, options }) => Failure {
                category,
                message: "compilation failed".into(),
                log: Some(log.clone()),
                options: Some(options.clone()),
            },
            RunError::Invalid(reason) => Failure::new(category, reason.clone()),
            other => Failure::new(category, other.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.category.name(), self.message)?;
        if let Some(log) = &self.log {
            write!(f, "\n{log}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The worker side.
// ---------------------------------------------------------------------------------------

/// Tell the parent the backend could not open, then return (the caller exits).
pub fn refuse(reason: &str) -> std::io::Result<()> {
    let mut out = protocol_stdout()?;
    write_message(&mut out, &Message::Unavailable { message: reason.to_string() })
}

/// Serve requests from stdin until it closes. Called by `peak worker --backend NAME`
/// (and by test binaries that stand in for it) with the opened backend.
///
/// Inside, a request passes through four stages, each on its own threads so the device
/// never waits for the host: compile (one thread per core), run (one thread: the device
/// runs one job at a time), finish (comparing or hashing outputs, a few threads), and send
/// (one thread, answering strictly in request order).
pub fn serve(backend: &dyn Backend) -> std::io::Result<()> {
    let out = Mutex::new(protocol_stdout()?);
    let send = |message: &Message| {
        let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
        // A closed pipe means the parent is gone; nothing useful is left to do.
        if write_message(&mut *out, message).is_err() {
            std::process::exit(0);
        }
    };
    send(&Message::Ready { protocol: PROTOCOL_VERSION, pid: std::process::id(), device: backend.device().clone() });

    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let compilers = std::env::var("PEAK_COMPILE_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(cores).max(1);
    let finishers = (cores / 4).clamp(1, 4);
    let (compile_tx, compile_rx) = mpsc::channel::<Arc<WorkerJob>>();
    let compile_rx = Mutex::new(compile_rx);
    let (run_tx, run_rx) = mpsc::channel::<Arc<WorkerJob>>();
    let (finish_tx, finish_rx) = mpsc::channel::<(Arc<WorkerJob>, Executed)>();
    let finish_rx = Mutex::new(finish_rx);
    let (send_tx, send_rx) = mpsc::channel::<Arc<WorkerJob>>();
    let modules = Mutex::new(ModuleCache::default());
    let references = Mutex::new(ReferenceCache::default());

    std::thread::scope(|scope| {
        for _ in 0..compilers {
            scope.spawn(|| {
                loop {
                    let next = compile_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(job) = next else { break };
                    job.prepared.fill(prepare(backend, &job.request.job, &modules));
                }
            });
        }
        scope.spawn(move || {
            let recycler = Recycler::new(backend);
            let mut inputs = InputCache::default();
            for job in run_rx {
                let (ctx, compiled) = match job.prepared.take() {
                    Err(failure) => {
                        job.finished.fill(Err(failure));
                        continue;
                    }
                    Ok(prepared) => prepared,
                };
                if job.request.job.compile_only {
                    job.finished.fill(check_compiled(&recycler, &ctx, &compiled, &job.request.job));
                    continue;
                }
                send(&Message::Started { id: job.request.id });
                match execute(&recycler, &ctx, &compiled, &job.request.job, &mut inputs) {
                    Ok(executed) => {
                        let _ = finish_tx.send((job, executed));
                    }
                    Err(failure) => {
                        let fault = failure.category == FailureKind::Crashed;
                        job.finished.fill(Err(failure));
                        if fault {
                            // Nothing more runs on a device that faulted; the sender exits
                            // once this answer is out.
                            break;
                        }
                    }
                }
            }
        });
        for _ in 0..finishers {
            scope.spawn(|| {
                loop {
                    let next = finish_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((job, executed)) = next else { break };
                    job.finished.fill(Ok(finish(executed, &job.request.job.outputs, &references)));
                }
            });
        }
        scope.spawn(|| {
            for job in send_rx {
                let result = job.finished.take();
                let fault = matches!(&result, Err(f) if f.category == FailureKind::Crashed);
                send(&Message::Done { id: job.request.id, result });
                if fault {
                    std::process::exit(FAULT_EXIT);
                }
            }
        });

        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Request>(&line) {
                Ok(request) => {
                    let job = Arc::new(WorkerJob { request, prepared: Slot::default(), finished: Slot::default() });
                    let _ = compile_tx.send(job.clone());
                    let _ = run_tx.send(job.clone());
                    let _ = send_tx.send(job);
                }
                Err(e) => {
                    // The parent speaks another dialect; say so where a person will see it.
                    eprintln!("peak worker: unreadable request ({e}): {line}");
                    std::process::exit(2);
                }
            }
        }
        drop(compile_tx);
        drop(run_tx);
        drop(send_tx);
    });
    Ok(())
}

/// A value one thread fills and another waits for.
struct Slot<T> {
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot { value: Mutex::new(None), ready: Condvar::new() }
    }
}

impl<T> Slot<T> {
    fn fill(&self, value: T) {
        *self.value.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        self.ready.notify_all();
    }

    fn take(&self) -> T {
        let mut value = self.value.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(v) = value.take() {
                return v;
            }
            value = self.ready.wait(value).unwrap_or_else(|p| p.into_inner());
        }
    }
}

type Prepared = Result<(Arc<Context>, Arc<Compiled>), Failure>;

struct WorkerJob {
    request: Request,
    prepared: Slot<Prepared>,
    finished: Slot<Result<RunReport, Failure>>,
}

struct Compiled {
    module: Module,
    compile_ms: f64,
}

type ModuleKey = (String, String, Vec<(String, String)>);
/// A module being compiled or compiled, shared by every job that needs it.
type ModuleCell = Arc<OnceLock<Result<Arc<Compiled>, Failure>>>;

#[derive(Default)]
struct ModuleCache {
    entries: HashMap<ModuleKey, ModuleCell>,
    order: VecDeque<ModuleKey>,
}

fn prepare(backend: &dyn Backend, job: &Job, modules: &Mutex<ModuleCache>) -> Prepared {
    let ctx = Context::load(&job.context).map_err(|e| Failure::new(FailureKind::LaunchFailed, format!("cannot load the context: {e}")))?;
    let key: ModuleKey = (ctx.source_path().display().to_string(), ctx.regions.device_source(), job.params.defines());
    let cell = {
        let mut cache = modules.lock().unwrap_or_else(|p| p.into_inner());
        match cache.entries.get(&key) {
            Some(cell) => cell.clone(),
            None => {
                let cell = Arc::new(OnceLock::new());
                cache.entries.insert(key.clone(), cell.clone());
                cache.order.push_back(key);
                while cache.order.len() > MODULE_CACHE {
                    if let Some(old) = cache.order.pop_front() {
                        cache.entries.remove(&old);
                    }
                }
                cell
            }
        }
    };
    // Two jobs with the same module: the second blocks here until the first has compiled.
    let mut fresh = false;
    let compiled = cell
        .get_or_init(|| {
            fresh = true;
            let start = Instant::now();
            runner::compile(backend, &ctx, &job.params)
                .map(|module| Arc::new(Compiled { module, compile_ms: start.elapsed().as_secs_f64() * 1e3 }))
                .map_err(|e| Failure::from(&e))
        })
        .clone()?;
    let compiled = if fresh { compiled } else { Arc::new(Compiled { module: compiled.module.clone(), compile_ms: 0.0 }) };
    Ok((Arc::new(ctx), compiled))
}

/// The host arrays of the last input configuration. Generating them costs tens of
/// milliseconds at matmul sizes, more than a fast kernel runs, and a tuning run uses the
/// same inputs for every variant.
#[derive(Default)]
struct InputCache {
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

/// The backend as the device thread sees it: freed buffers are kept for the next job
/// instead of going back to the driver. A tuning run allocates the same few sizes for
/// every variant, and allocating and freeing tens of megabytes (which synchronizes the
/// device) costs more than a fast kernel runs. Every buffer the runner takes is filled
/// (inputs written, outputs and scratch poisoned) before a kernel sees it, so a recycled
/// buffer carries nothing over.
struct Recycler<'a> {
    inner: &'a dyn Backend,
    state: Mutex<Recycled>,
    /// Bytes kept at most: a quarter of the device's memory.
    limit: usize,
}

#[derive(Default)]
struct Recycled {
    sizes: HashMap<BufferId, usize>,
    /// Free buffers, oldest first.
    free: VecDeque<(usize, BufferId)>,
    kept: usize,
}

impl<'a> Recycler<'a> {
    fn new(inner: &'a dyn Backend) -> Recycler<'a> {
        let limit = usize::try_from(inner.device().global_memory_bytes / 4).unwrap_or(usize::MAX).max(64 << 20);
        Recycler { inner, state: Mutex::new(Recycled::default()), limit }
    }
}

impl Drop for Recycler<'_> {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, id) in state.free.drain(..) {
            self.inner.free(id);
        }
    }
}

impl Backend for Recycler<'_> {
    fn device(&self) -> &DeviceInfo {
        self.inner.device()
    }
    fn compile(&self, request: &crate::backend::CompileRequest) -> Result<Module, BackendError> {
        self.inner.compile(request)
    }
    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = state.free.iter().position(|(size, _)| *size == bytes) {
            let (_, id) = state.free.remove(at).expect("position is in range");
            state.kept -= bytes;
            return Ok(id);
        }
        let id = self.inner.alloc(bytes)?;
        state.sizes.insert(id, bytes);
        Ok(id)
    }
    fn free(&self, buffer: BufferId) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(&bytes) = state.sizes.get(&buffer) else { return self.inner.free(buffer) };
        state.free.push_back((bytes, buffer));
        state.kept += bytes;
        while state.kept > self.limit {
            let Some((size, old)) = state.free.pop_front() else { break };
            state.kept -= size;
            state.sizes.remove(&old);
            self.inner.free(old);
        }
    }
    fn write(&self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.inner.write(buffer, data)
    }
    fn read(&self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        self.inner.read(buffer, out)
    }
    fn copy(&self, src: BufferId, dst: BufferId, bytes: usize) -> Result<(), BackendError> {
        self.inner.copy(src, dst, bytes)
    }
    fn fill(&self, buffer: BufferId, pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        self.inner.fill(buffer, pattern, bytes)
    }
    fn launch(&self, module: &Module, launch: &crate::backend::Launch) -> Result<(), BackendError> {
        self.inner.launch(module, launch)
    }
    fn record_event(&self) -> Result<crate::backend::EventId, BackendError> {
        self.inner.record_event()
    }
    fn elapsed_ms(&self, start: crate::backend::EventId, end: crate::backend::EventId) -> Result<f64, BackendError> {
        self.inner.elapsed_ms(start, end)
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        self.inner.synchronize()
    }
    fn script_functions(&self) -> Vec<crate::backend::ScriptFunction> {
        self.inner.script_functions()
    }
    fn run_op(&self, module: &Module, op: &crate::plan::BackendOp, buffers: &crate::backend::BufferLookup) -> Result<(), BackendError> {
        self.inner.run_op(module, op, buffers)
    }
    fn op_argument(&self, module: &Module, op: &crate::plan::BackendOp, buffers: &crate::backend::BufferLookup) -> Result<crate::backend::KernelArg, BackendError> {
        self.inner.op_argument(module, op, buffers)
    }
    fn flush_cache(&self) -> Result<(), BackendError> {
        self.inner.flush_cache()
    }
}

/// A run that finished on the device, waiting for its outputs to be judged.
struct Executed {
    result: runner::RunResult,
    compiled: Arc<Compiled>,
    start: Instant,
}

fn execute(backend: &dyn Backend, ctx: &Context, compiled: &Arc<Compiled>, job: &Job, inputs: &mut InputCache) -> Result<Executed, Failure> {
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
fn check_compiled(backend: &dyn Backend, ctx: &Context, compiled: &Compiled, job: &Job) -> Result<RunReport, Failure> {
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

fn finish(executed: Executed, mode: &OutputMode, references: &Mutex<ReferenceCache>) -> RunReport {
    let Executed { result, compiled, start } = executed;
    let mut outputs = Vec::with_capacity(result.outputs.len());
    for (name, array) in result.outputs {
        let mut report = OutputReport { name: name.clone(), dtype: array.dtype, elements: array.len(), digest: None, hex: None, comparison: None, compare_error: None };
        match mode {
            OutputMode::Digest => report.digest = Some(array.digest()),
            OutputMode::Bytes => {
                report.digest = Some(array.digest());
                report.hex = Some(hex::encode(&array.bytes));
            }
            OutputMode::Files { dir } => {
                report.digest = Some(array.digest());
                if let Err(e) = write_output(dir, &name, &array.bytes) {
                    report.compare_error = Some(format!("cannot write output {name} to {}: {e}", dir.display()));
                }
            }
            OutputMode::Compare { references: wanted } => match wanted.iter().find(|r| r.name == name) {
                None => report.compare_error = Some(format!("no reference given for output {name}")),
                Some(r) => {
                    let loaded = references.lock().unwrap_or_else(|p| p.into_inner()).get(&r.path);
                    match loaded {
                        Err(e) => report.compare_error = Some(e),
                        Ok(bytes) if bytes.len() != array.bytes.len() => {
                            report.compare_error = Some(format!(
                                "reference {} holds {} bytes, the output {name} has {}",
                                r.path.display(),
                                bytes.len(),
                                array.bytes.len()
                            ))
                        }
                        Ok(bytes) => {
                            let reference = HostArray { dtype: array.dtype, bytes: bytes.to_vec() };
                            report.comparison = Some(compare(&array, &reference, r.tolerance).into());
                        }
                    }
                }
            },
        }
        outputs.push(report);
    }
    RunReport {
        outputs,
        modified_inputs: result.modified_inputs,
        times_ms: result.times_ms,
        launches: result.launches,
        kernels: compiled.module.kernels.clone(),
        compile_log: compiled.module.log.clone(),
        compile_ms: compiled.compile_ms,
        run_ms: start.elapsed().as_secs_f64() * 1e3,
    }
}

/// Where [`OutputMode::Files`] puts an output.
pub fn output_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.bin"))
}

fn write_output(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let path = output_file(dir, name);
    let tmp = dir.join(format!(".{name}.bin.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &path)
}

/// Prune before running, from the compiler's own report: a block larger than the kernel's
/// register use allows, more shared memory than the device has, and (when asked) spills.
pub fn check_resources(kernels: &[KernelResources], steps: &[Step], device: &DeviceInfo, prune_spills: bool) -> Result<(), String> {
    for step in steps {
        let Step::Launch { kernel, block, shared_bytes, .. } = step else { continue };
        let Some(res) = kernels.iter().find(|k| &k.name == kernel) else { continue };
        let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
        if let Some(max) = res.max_threads_per_block
            && threads > u64::from(max)
        {
            let regs = res.registers.map(|r| format!(" at {r} registers per thread")).unwrap_or_default();
            return Err(format!("`{kernel}`: a block of {threads} threads exceeds the {max} its resources allow{regs}"));
        }
        let static_shared = res.shared_bytes.unwrap_or(0);
        let total = u64::from(static_shared) + u64::from(*shared_bytes);
        if device.max_shared_bytes > 0 && total > u64::from(device.max_shared_bytes) {
            return Err(format!(
                "`{kernel}`: needs {total} bytes of shared memory ({static_shared} static + {shared_bytes} dynamic), the device allows {}",
                device.max_shared_bytes
            ));
        }
        let spills = res.spill_stores_bytes.unwrap_or(0) + res.spill_loads_bytes.unwrap_or(0);
        if prune_spills && spills > 0 {
            return Err(format!(
                "`{kernel}`: spills registers ({} bytes stored, {} loaded)",
                res.spill_stores_bytes.unwrap_or(0),
                res.spill_loads_bytes.unwrap_or(0)
            ));
        }
    }
    Ok(())
}

/// Reference arrays read from disk, kept while they are in use (a tuning run compares
/// every variant with the same one).
#[derive(Default)]
struct ReferenceCache {
    entries: VecDeque<(PathBuf, Arc<Vec<u8>>)>,
}

impl ReferenceCache {
    const KEEP: usize = 8;

    fn get(&mut self, path: &Path) -> Result<Arc<Vec<u8>>, String> {
        if let Some((_, bytes)) = self.entries.iter().find(|(p, _)| p == path) {
            return Ok(bytes.clone());
        }
        let bytes = Arc::new(std::fs::read(path).map_err(|e| format!("cannot read reference {}: {e}", path.display()))?);
        self.entries.push_back((path.to_path_buf(), bytes.clone()));
        while self.entries.len() > Self::KEEP {
            self.entries.pop_front();
        }
        Ok(bytes)
    }
}

/// Move the real stdout to a private descriptor and send descriptor 1 to stderr, so that
/// nothing but protocol messages (a kernel's printf, a driver's chatter) reaches the parent.
#[cfg(unix)]
fn protocol_stdout() -> std::io::Result<BufWriter<File>> {
    use std::os::fd::FromRawFd;
    std::io::stdout().flush()?;
    // SAFETY: plain descriptor calls; the new descriptor is owned by the File below.
    let private = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if private < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; 1 and 2 stay open for the life of the process.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `private` is a fresh descriptor nothing else owns.
    Ok(BufWriter::new(unsafe { File::from_raw_fd(private) }))
}

#[cfg(not(unix))]
fn protocol_stdout() -> std::io::Result<BufWriter<File>> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "peak workers need a Unix system"))
}

fn write_message(out: &mut impl Write, message: &Message) -> std::io::Result<()> {
    let mut line = serde_json::to_string(message).map_err(std::io::Error::other)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}

// ---------------------------------------------------------------------------------------
// The parent side.
// ---------------------------------------------------------------------------------------

/// How to start a worker: normally `peak worker --backend NAME` (this very executable),
/// in tests another binary that calls [`serve`], under tools a wrapper command line.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Run the worker under another program: `wrapper[0] wrapper[1..] program args`.
    pub wrapper: Vec<OsString>,
}

impl WorkerCommand {
    pub fn new(program: impl Into<PathBuf>) -> WorkerCommand {
        WorkerCommand { program: program.into(), args: Vec::new(), env: Vec::new(), wrapper: Vec::new() }
    }

    /// `<this executable> worker --backend NAME`: what the `peak` binary uses.
    pub fn peak(backend: &str) -> std::io::Result<WorkerCommand> {
        Ok(WorkerCommand::new(std::env::current_exe()?).arg("worker").arg("--backend").arg(backend))
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn wrapped<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, wrapper: I) -> Self {
        self.wrapper = wrapper.into_iter().map(Into::into).collect();
        self
    }

    /// The command line, for messages.
    pub fn display(&self) -> String {
        let mut parts: Vec<String> = self.wrapper.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        parts.push(self.program.display().to_string());
        parts.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        parts.join(" ")
    }

    fn command(&self) -> Command {
        let mut cmd = match self.wrapper.split_first() {
            Some((tool, rest)) => {
                let mut cmd = Command::new(tool);
                cmd.args(rest).arg(&self.program);
                cmd
            }
            None => Command::new(&self.program),
        };
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// How long one job may run once started (a job's own `timeout` wins).
    pub run_timeout: Duration,
    /// How long the worker may stay silent while compiling.
    pub compile_timeout: Duration,
    /// How long a new worker may take to say it is ready (driver start-up, tool wrappers).
    pub startup_timeout: Duration,
    /// Jobs sent ahead, so compiles overlap the device's work.
    pub max_in_flight: usize,
    /// Copy the worker's stderr to ours (otherwise only its tail is kept, for messages).
    pub forward_stderr: bool,
}

impl Default for PoolOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        PoolOptions {
            run_timeout: Duration::from_secs(60),
            compile_timeout: Duration::from_secs(300),
            startup_timeout: Duration::from_secs(120),
            max_in_flight: 2 * cores + 1,
            forward_stderr: false,
        }
    }
}

#[derive(Debug, Error)]
pub enum WorkerError {
    #[error("cannot start the worker `{command}`: {message}")]
    Spawn { command: String, message: String },
    #[error("the {backend} backend is not available in the worker: {message}")]
    Unavailable { backend: String, message: String },
    #[error("the worker `{command}` did not start: {message}{}", tail_note(.stderr))]
    Startup { command: String, message: String, stderr: String },
    #[error("the worker broke the protocol: {message}")]
    Protocol { message: String },
    #[error("writing to the worker failed: {0}")]
    Io(String),
}

fn tail_note(stderr: &str) -> String {
    if stderr.trim().is_empty() { String::new() } else { format!("\nits stderr ended with:\n{}", stderr.trim_end()) }
}

/// One answered job.
#[derive(Debug, Clone)]
pub struct Answer {
    pub id: u64,
    pub result: Result<RunReport, Failure>,
}

/// Runs jobs in a worker process for one device, restarting it after a crash, a fault or
/// a time-out. Jobs are answered in the order they were submitted.
pub struct WorkerPool {
    command: WorkerCommand,
    options: PoolOptions,
    backend: String,
    device: DeviceInfo,
    worker: Option<Worker>,
    next_id: u64,
    /// Submitted, not yet sent to the current worker.
    queue: VecDeque<Request>,
    /// Sent to the current worker, oldest first; answers come in this order.
    in_flight: VecDeque<Request>,
    /// The job now running on the device, and since when.
    started: Option<(u64, Instant)>,
    last_progress: Instant,
    /// After an unattributable death: send one job at a time until this id is answered.
    serial_until: Option<u64>,
    restarts: usize,
    /// What the last discarded worker wrote to stderr, for the failure it is blamed for.
    last_stderr: Option<String>,
}

enum Event {
    Message(Box<Message>),
    Garbage(String),
    Eof,
}

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    events: mpsc::Receiver<Event>,
    stderr: Arc<Mutex<Tail>>,
}

/// The last few kilobytes a worker wrote to stderr.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    const KEEP: usize = 8192;

    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
        if self.0.len() > Self::KEEP {
            let cut = self.0.len() - Self::KEEP;
            self.0.drain(..cut);
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl WorkerPool {
    /// Start a worker and wait until it is ready. `backend` names the backend in messages.
    pub fn start(backend: &str, command: WorkerCommand, options: PoolOptions) -> Result<WorkerPool, WorkerError> {
        let (worker, device) = Worker::spawn(backend, &command, &options)?;
        Ok(WorkerPool {
            command,
            options,
            backend: backend.to_string(),
            device,
            worker: Some(worker),
            next_id: 1,
            queue: VecDeque::new(),
            in_flight: VecDeque::new(),
            started: None,
            last_progress: Instant::now(),
            serial_until: None,
            restarts: 0,
            last_stderr: None,
        })
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    pub fn options(&self) -> &PoolOptions {
        &self.options
    }

    /// How often the worker has been replaced.
    pub fn restarts(&self) -> usize {
        self.restarts
    }

    /// Jobs submitted and not yet answered.
    pub fn pending(&self) -> usize {
        self.queue.len() + self.in_flight.len()
    }

    /// Queue a job; its answer comes from [`WorkerPool::next_answer`] under the returned id.
    pub fn submit(&mut self, job: Job) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back(Request { id, job });
        id
    }

    /// Submit one job and wait for its answer (with nothing else pending).
    pub fn run(&mut self, job: Job) -> Result<Result<RunReport, Failure>, WorkerError> {
        let id = self.submit(job);
        loop {
            match self.next_answer()? {
                Some(answer) if answer.id == id => return Ok(answer.result),
                Some(_) => continue,
                None => return Err(WorkerError::Protocol { message: format!("job {id} was never answered") }),
            }
        }
    }

    /// The next answer, in submission order; `None` when nothing is pending.
    pub fn next_answer(&mut self) -> Result<Option<Answer>, WorkerError> {
        loop {
            if self.pending() == 0 {
                return Ok(None);
            }
            if self.worker.is_none() {
                self.respawn()?;
            }
            self.pump()?;
            let deadline = match self.started {
                Some((id, since)) => since + self.timeout_of(id),
                None => self.last_progress + self.options.compile_timeout,
            };
            let wait = deadline.saturating_duration_since(Instant::now());
            let event = self.worker.as_ref().expect("a live worker").events.recv_timeout(wait);
            match event {
                Ok(Event::Message(message)) => {
                    self.last_progress = Instant::now();
                    match *message {
                        Message::Started { id } => {
                            // The worker may start a job while it still judges the outputs
                            // of earlier ones, so this need not be the oldest in flight.
                            if !self.in_flight.iter().any(|r| r.id == id) {
                                return Err(self.protocol(format!("`started` for job {id}, which is not in flight")));
                            }
                            self.started = Some((id, Instant::now()));
                        }
                        Message::Done { id, result } => {
                            if self.in_flight.front().map(|r| r.id) != Some(id) {
                                return Err(self.protocol(format!("an answer for job {id}, which is not next in line")));
                            }
                            self.in_flight.pop_front();
                            if self.started.is_some_and(|(running, _)| running == id) {
                                self.started = None;
                            }
                            if self.serial_until.is_some_and(|last| id >= last) {
                                self.serial_until = None;
                            }
                            if matches!(&result, Err(f) if f.category == FailureKind::Crashed) {
                                // The worker exits after a fault; do not wait to find out,
                                // and give its other jobs to the next one.
                                self.discard_worker();
                                while let Some(request) = self.in_flight.pop_back() {
                                    self.queue.push_front(request);
                                }
                            }
                            return Ok(Some(Answer { id, result }));
                        }
                        Message::Ready { .. } | Message::Unavailable { .. } => {
                            return Err(self.protocol("a second start-up message".into()));
                        }
                    }
                }
                Ok(Event::Garbage(line)) => return Err(self.protocol(format!("unreadable line: {line}"))),
                Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.discard_worker();
                    let how = describe_exit(status);
                    if let Some(answer) = self.blame(FailureKind::Crashed, &format!("the worker died ({how})")) {
                        return Ok(Some(answer));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let running = self.started.map(|(id, since)| (id, since.elapsed()));
                    self.discard_worker();
                    let message = match running {
                        Some((_, elapsed)) => format!("still running after {:.1} s; the worker was killed", elapsed.as_secs_f64()),
                        None => format!("no word from the worker for {:.0} s while compiling; it was killed", self.options.compile_timeout.as_secs_f64()),
                    };
                    if let Some(answer) = self.blame(FailureKind::TimedOut, &message) {
                        return Ok(Some(answer));
                    }
                }
            }
        }
    }

    fn timeout_of(&self, id: u64) -> Duration {
        self.in_flight.iter().find(|r| r.id == id).and_then(|r| r.job.timeout).unwrap_or(self.options.run_timeout)
    }

    /// The worker is gone: answer for the job it was running, or, when that is unknown,
    /// resend everything one job at a time until the culprit is found.
    fn blame(&mut self, kind: FailureKind, message: &str) -> Option<Answer> {
        // The running job is the culprit only if it is the oldest in flight: a job whose
        // answer is still due may have faulted asynchronously (PoCL runs kernels on its
        // own threads) after the next one started. When in doubt, resend one at a time.
        let oldest = self.in_flight.front().map(|r| r.id);
        let culprit = match self.started.take() {
            Some((id, _)) if Some(id) == oldest => Some(id),
            Some(_) => None,
            None if self.in_flight.len() == 1 => oldest,
            None => None,
        };
        let tail = self.last_stderr.take().unwrap_or_default();
        let tail = if tail.trim().is_empty() { String::new() } else { format!("\nworker stderr:\n{}", last_lines(&tail, 20)) };
        // Everything sent to the dead worker goes back to the front of the queue, in order.
        while let Some(request) = self.in_flight.pop_back() {
            if Some(request.id) == culprit {
                continue;
            }
            self.queue.push_front(request);
        }
        match culprit {
            Some(id) => {
                if self.serial_until.is_some_and(|last| id >= last) {
                    self.serial_until = None;
                }
                Some(Answer { id, result: Err(Failure::new(kind, format!("{message}{tail}"))) })
            }
            None => {
                self.serial_until = self.queue.iter().map(|r| r.id).max();
                None
            }
        }
    }

    /// Send queued jobs while there is room.
    fn pump(&mut self) -> Result<(), WorkerError> {
        let limit = if self.serial_until.is_some() { 1 } else { self.options.max_in_flight.max(1) };
        while self.in_flight.len() < limit {
            let Some(request) = self.queue.pop_front() else { break };
            let worker = self.worker.as_mut().expect("a live worker");
            let mut line = serde_json::to_string(&request).map_err(|e| WorkerError::Io(e.to_string()))?;
            line.push('\n');
            let sent = worker.stdin.as_mut().map(|s| s.write_all(line.as_bytes()).and_then(|()| s.flush()));
            if self.in_flight.is_empty() {
                self.last_progress = Instant::now();
            }
            self.in_flight.push_back(request);
            // A failed write means the worker died; `next` sees the end of its output and
            // attributes the death, so the error itself carries no news.
            if !matches!(sent, Some(Ok(()))) {
                break;
            }
        }
        Ok(())
    }

    fn respawn(&mut self) -> Result<(), WorkerError> {
        let (worker, device) = Worker::spawn(&self.backend, &self.command, &self.options)?;
        // Free-memory figures may differ between starts; the identity must not.
        let identity = |d: &DeviceInfo| (d.backend.clone(), d.name.clone(), d.driver.clone(), d.arch.clone());
        if identity(&device) != identity(&self.device) {
            return Err(WorkerError::Protocol { message: format!("the restarted worker reports another device: {} instead of {}", device.name, self.device.name) });
        }
        self.worker = Some(worker);
        self.restarts += 1;
        self.started = None;
        self.last_progress = Instant::now();
        Ok(())
    }

    /// Kill the current worker (and its process group) and reap it.
    fn discard_worker(&mut self) -> Option<ExitStatus> {
        let mut worker = self.worker.take()?;
        let status = worker.kill();
        self.last_stderr = Some(worker.stderr.lock().unwrap_or_else(|p| p.into_inner()).text());
        status
    }

    fn protocol(&mut self, message: String) -> WorkerError {
        self.discard_worker();
        WorkerError::Protocol { message }
    }
}

impl WorkerPool {
    /// Close the worker's input and give it `grace` to exit on its own before it is
    /// killed. Tools that wrap the worker (compute-sanitizer, Nsight Compute) write their
    /// report as it exits, so they need the time.
    pub fn close(mut self, grace: Duration) -> Option<ExitStatus> {
        self.worker.take().and_then(|mut worker| worker.shutdown(grace))
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            worker.shutdown(Duration::from_secs(2));
        }
    }
}

impl Worker {
    fn spawn(backend: &str, command: &WorkerCommand, options: &PoolOptions) -> Result<(Worker, DeviceInfo), WorkerError> {
        let mut cmd = command.command();
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
            #[cfg(target_os = "linux")]
            // SAFETY: prctl is async-signal-safe, as pre_exec requires.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| WorkerError::Spawn { command: command.display(), message: e.to_string() })?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stdin = child.stdin.take();

        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event = match serde_json::from_str::<Message>(&line) {
                    Ok(message) => Event::Message(Box::new(message)),
                    Err(_) => Event::Garbage(line),
                };
                if tx.send(event).is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Eof);
        });
        let stderr = Arc::new(Mutex::new(Tail::default()));
        let sink = stderr.clone();
        let forward = options.forward_stderr;
        std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if forward {
                    let _ = std::io::stderr().write_all(&buf[..n]);
                }
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(&buf[..n]);
            }
        });

        let mut worker = Worker { child, stdin, events, stderr };
        let startup_failure = |worker: &mut Worker, message: String| {
            let _ = worker.kill();
            WorkerError::Startup { command: command.display(), message, stderr: worker.stderr.lock().unwrap_or_else(|p| p.into_inner()).text() }
        };
        match worker.events.recv_timeout(options.startup_timeout) {
            Ok(Event::Message(message)) => match *message {
                Message::Ready { protocol, device, .. } if protocol == PROTOCOL_VERSION => Ok((worker, device)),
                Message::Ready { protocol, .. } => {
                    Err(startup_failure(&mut worker, format!("it speaks protocol {protocol}, this peak speaks {PROTOCOL_VERSION}; use one peak binary for both")))
                }
                Message::Unavailable { message } => {
                    let _ = worker.kill();
                    Err(WorkerError::Unavailable { backend: backend.to_string(), message })
                }
                other => Err(startup_failure(&mut worker, format!("its first message was {other:?}, not `ready`"))),
            },
            Ok(Event::Garbage(line)) => Err(startup_failure(&mut worker, format!("it printed `{line}` instead of a protocol message"))),
            Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Give the stderr reader a moment to catch the last words.
                std::thread::sleep(Duration::from_millis(50));
                let status = worker.child.wait().ok();
                Err(startup_failure(&mut worker, format!("it exited before it was ready ({})", describe_exit(status))))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(startup_failure(&mut worker, format!("no `ready` within {:.0} s", options.startup_timeout.as_secs_f64())))
            }
        }
    }

    /// Kill the whole process group and reap the child.
    fn kill(&mut self) -> Option<ExitStatus> {
        self.stdin.take();
        #[cfg(unix)]
        // SAFETY: signalling our own child's process group.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        // Let the stderr reader drain what the dying process wrote.
        std::thread::sleep(Duration::from_millis(20));
        status
    }

    /// Close stdin so the worker finishes and exits; kill it if it dawdles.
    fn shutdown(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.stdin.take();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill()
    }
}

/// "exit status 70", "killed by signal 11 (SIGSEGV)", ...
pub fn describe_exit(status: Option<ExitStatus>) -> String {
    let Some(status) = status else { return "exit status unknown".into() };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGILL => " (SIGILL)",
                libc::SIGFPE => " (SIGFPE)",
                libc::SIGKILL => " (SIGKILL)",
                _ => "",
            };
            return format!("killed by signal {signal}{name}");
        }
    }
    match status.code() {
        Some(FAULT_EXIT) => format!("exit status {FAULT_EXIT}: it stopped after a device fault"),
        Some(code) => format!("exit status {code}"),
        None => "exit status unknown".into(),
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> DeviceInfo {
        DeviceInfo {
            backend: "test".into(),
            name: "dev".into(),
            driver: "1".into(),
            arch: String::new(),
            compute_units: 1,
            max_threads_per_block: 1024,
            max_shared_bytes: 48 * 1024,
            warp_size: 32,
            global_memory_bytes: 1 << 30,
        }
    }

    fn launch(kernel: &str, block: [u32; 3], shared: u32) -> Step {
        Step::Launch { kernel: kernel.into(), grid: [1, 1, 1], block, shared_bytes: shared, args: vec![], line: 1 }
    }

    #[test]
    fn messages_round_trip_through_json() {
        let mut params = ExecParams::default();
        params.inputs.insert("n".into(), 64);
        params.tuning.insert("BX".into(), 16);
        let request = Request {
            id: 3,
            job: Job {
                outputs: OutputMode::Compare { references: vec![ReferenceArray { name: "C".into(), path: "/tmp/c.bin".into(), tolerance: 1e-5 }] },
                ..Job::new("/ctx", params.clone(), RunOptions::default())
            },
        };
        let line = serde_json::to_string(&request).unwrap();
        assert!(line.contains("\"mode\":\"compare\""), "{line}");
        let back: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(back.id, 3);
        assert_eq!(back.job.params, params);
        assert_eq!(back.job.outputs, request.job.outputs);

        let failure = Failure { category: FailureKind::CompileFailed, message: "compilation failed".into(), log: Some("x.cl:3: error".into()), options: Some("-D BX=16".into()) };
        let done = Message::Done { id: 3, result: Err(failure.clone()) };
        let line = serde_json::to_string(&done).unwrap();
        assert!(line.contains("\"category\":\"compile-failed\""), "{line}");
        match serde_json::from_str::<Message>(&line).unwrap() {
            Message::Done { id: 3, result: Err(f) } => assert_eq!(f, failure),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn poisoned_comparisons_survive_json() {
        let reference = HostArray::init(DType::F32, 8, peak_spec::Init::Random, 1);
        let poisoned = HostArray::poison(DType::F32, 8);
        let c: OutputComparison = compare(&poisoned, &reference, 1e-5).into();
        assert!(c.max_error.is_infinite() && c.worst_value.is_nan());
        let text = serde_json::to_string(&c).unwrap();
        let back: OutputComparison = serde_json::from_str(&text).unwrap();
        assert!(back.max_error.is_infinite() && back.worst_value.is_nan() && !back.passed, "{text}");
        assert_eq!(back.non_finite, 8);
    }

    #[test]
    fn output_bytes_decode_back() {
        let array = HostArray::init(DType::F32, 10, peak_spec::Init::Arange, 0);
        let report = OutputReport { name: "C".into(), dtype: DType::F32, elements: 10, digest: Some(array.digest()), hex: Some(hex::encode(&array.bytes)), comparison: None, compare_error: None };
        let back: OutputReport = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(back.array().unwrap(), array);
    }

    #[test]
    fn run_errors_map_to_categories_and_keep_the_log() {
        let compile = RunError::Compile(BackendError::Compile { log: "k.cu(3): error: x".into(), options: "-arch=sm_90".into() });
        let f = Failure::from(&compile);
        assert_eq!(f.category, FailureKind::CompileFailed);
        assert_eq!(f.log.as_deref(), Some("k.cu(3): error: x"));
        assert_eq!(f.options.as_deref(), Some("-arch=sm_90"));
        assert_eq!(Failure::from(&RunError::Invalid("too big".into())).category, FailureKind::InvalidConfig);
        assert_eq!(Failure::from(&RunError::Fault(BackendError::Fault("illegal address".into()))).category, FailureKind::Crashed);
        assert_eq!(Failure::from(&RunError::Launch(BackendError::Launch { kernel: "k".into(), message: "m".into() })).category, FailureKind::LaunchFailed);
    }

    #[test]
    fn compile_reports_prune_oversized_blocks_shared_memory_and_spills() {
        let dev = device();
        let mut k = KernelResources { name: "k".into(), registers: Some(128), max_threads_per_block: Some(512), shared_bytes: Some(16384), ..Default::default() };
        assert!(check_resources(std::slice::from_ref(&k), &[launch("k", [16, 16, 1], 0)], &dev, false).is_ok());
        let err = check_resources(std::slice::from_ref(&k), &[launch("k", [32, 32, 1], 0)], &dev, false).unwrap_err();
        assert!(err.contains("1024 threads") && err.contains("128 registers"), "{err}");
        let err = check_resources(std::slice::from_ref(&k), &[launch("k", [8, 8, 1], 40000)], &dev, false).unwrap_err();
        assert!(err.contains("56384 bytes"), "{err}");
        k.spill_stores_bytes = Some(64);
        assert!(check_resources(std::slice::from_ref(&k), &[launch("k", [8, 8, 1], 0)], &dev, false).is_ok());
        let err = check_resources(std::slice::from_ref(&k), &[launch("k", [8, 8, 1], 0)], &dev, true).unwrap_err();
        assert!(err.contains("spills"), "{err}");
        // A kernel the compiler said nothing about is left to the launch to judge.
        assert!(check_resources(&[], &[launch("other", [4096, 1, 1], 0)], &dev, true).is_ok());
    }

    #[test]
    fn exit_descriptions_name_the_signal() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(describe_exit(Some(ExitStatus::from_raw(libc::SIGSEGV))), "killed by signal 11 (SIGSEGV)");
        assert!(describe_exit(Some(ExitStatus::from_raw(FAULT_EXIT << 8))).contains("device fault"));
        assert_eq!(describe_exit(None), "exit status unknown");
    }
}
