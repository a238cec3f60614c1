//! The vendor baseline: cuBLASLt on the same GEMM, in the same process, timed the same way.
//!
//! A context is matmul-shaped when its manifest has a `[kernel.matmul]` table
//! (`peak_spec::MatmulShape`): sizes, layouts, leading dimensions, batch and strides as
//! expressions over the inputs, alpha and beta, and an epilogue of bias, activation and
//! residual. [`gemm::resolve`] evaluates it for one execution parameter and checks every
//! array against it; `lt::Call` maps it onto one `cublasLtMatmul` (row-major operands
//! onto cuBLASLt's column-major convention, the epilogue onto `CUBLASLT_EPILOGUE_*`):
//!
//! | A, B | C | compute | scale |
//! |---|---|---|---|
//! | f32 | f32 | `CUBLAS_COMPUTE_32F` (no TF32) | f32 |
//! | f16 | f16 or f32 | `CUBLAS_COMPUTE_32F` | f32 |
//! | bf16 | bf16 or f32 | `CUBLAS_COMPUTE_32F` | f32 |
//!
//! The algorithm is the first of cuBLASLt's heuristic, with 32 MiB of workspace, as
//! PyTorch runs its GEMMs. A residual is fused as cuBLASLt's C with beta = 1 where that
//! computes the same thing (no activation, beta = 0); otherwise the manifest is refused.
//!
//! Both sides get the same inputs (the runner's arrays for the same data seed) and one
//! timing method, `peak_backend::timing::time_runs` (the same warm-up, cache flush before
//! every run outside the events, input-set rotation, and the median with its spread); every "% of cuBLASLt" comes from one such run. The kernel's
//! output is also checked against cuBLASLt's, on the elements the GEMM writes.

pub mod gemm;
mod lt;

use peak_backend::runner::{self, RunError, RunOptions};
use peak_backend::timing::{Spread, Timed, time_runs};
use peak_backend::yardstick::VendorRun;
use peak_backend::{Backend, BackendError, BufferId};
use peak_spec::data::Comparison;
use peak_spec::expr::{Expr, expression_engine};
use peak_spec::{Context, DType, ExecParams, HostArray, compare, default_tolerance};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::CudaBackend;
use crate::libs;
pub use gemm::{Gemm, Operand, Storage};
use lt::{Matmul, Pointers};

#[derive(Debug, Error)]
pub enum BaselineError {
    #[error(
        "{file}: no [kernel.matmul] table, so peak does not know which GEMM this context computes\nhint: add [kernel.matmul] with m, n, k (expressions over the inputs) and a, b, c (array names)"
    )]
    NotMatmul { file: String },
    #[error("{file}: kernel.matmul.{field}: {message}")]
    Field { file: String, field: String, message: String },
    /// The context's own kernel did not run; its category says how.
    #[error("the kernel failed ({category}): {error}", category = .0.category(), error = .0)]
    Kernel(RunError),
    #[error("{0}")]
    Backend(#[from] BackendError),
    #[error("{call} failed: {status}")]
    Cublaslt { call: String, status: String },
    #[error("cuBLASLt's heuristic offers no algorithm for {gemm} on this device: {status}")]
    NoAlgorithm { gemm: String, status: String },
}

/// One timed side of the comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    /// Count, min, quartiles and max of `times_ms` (`peak_backend::timing`).
    pub spread: Spread,
    pub times_ms: Vec<f64>,
    pub tflops: f64,
}

impl Timing {
    fn new(times_ms: Vec<f64>, flops: f64) -> Result<Timing, BaselineError> {
        let spread = Spread::of(&times_ms).ok_or_else(|| BaselineError::Kernel(RunError::Setup("no timed repetitions".into())))?;
        Ok(Timing { median_ms: spread.median_ms, min_ms: spread.min_ms, spread, tflops: flops / (spread.median_ms * 1e-3) / 1e12, times_ms })
    }
}

/// The element types cuBLASLt was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmTypes {
    pub a: DType,
    pub b: DType,
    pub c: DType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<DType>,
}

/// What cuBLASLt ran, so that a "% of cuBLASLt" is read against the same work.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CublasLtInfo {
    /// `cublaslt`.
    pub library: String,
    pub routine: String,
    /// The manifest's layout: `NT` is `x · Wᵀ` with W stored by rows (see [`Gemm::layout_name`]).
    pub layout: String,
    /// cuBLASLt's own `transa`, `transb` (its A is the manifest's B: `TN` for an `NT`).
    pub cublaslt_ops: String,
    /// `CUBLASLT_EPILOGUE_DEFAULT`, `_BIAS`, `_GELU_BIAS`, ...
    pub epilogue: String,
    /// How the residual was fused, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<String>,
    pub types: GemmTypes,
    pub compute_type: String,
    pub scale_type: String,
    /// The heuristic's first algorithm (`CUBLASLT_ALGO_CONFIG_ID`).
    pub algorithm: i32,
    pub workspace_bytes: usize,
    /// What that algorithm asked for, of `workspace_bytes`.
    pub workspace_needed: usize,
    pub version: String,
    pub path: String,
}

impl CublasLtInfo {
    /// One line for people: `cublasLtMatmul, NT m=4096 n=4096 k=4096, f16 x f16 -> f16, bias
    /// (cuBLASLt TN, CUBLASLT_EPILOGUE_BIAS, CUBLAS_COMPUTE_32F, algorithm 6)`.
    pub fn describe(&self, gemm: &Gemm) -> String {
        format!("{}, {} (cuBLASLt {}, {}, {}, algorithm {})", self.routine, gemm.summary(), self.cublaslt_ops, self.epilogue, self.compute_type, self.algorithm)
    }
}

/// cuBLASLt's side alone: its output and times.
#[derive(Debug, Clone)]
pub struct CublasLtRun {
    pub gemm: Gemm,
    /// The elements of C the GEMM writes, packed ([`Storage::gather`]), from the first call.
    pub output: HostArray,
    pub times_ms: Vec<f64>,
    /// Bytes written before every timed run to evict the L2 (absent: not flushed).
    pub flushed_bytes: Option<usize>,
    pub info: CublasLtInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineReport {
    pub context: String,
    pub kernel: String,
    pub backend: String,
    pub device: String,
    pub params: ExecParams,
    pub gemm: Gemm,
    pub warmup: usize,
    pub repetitions: usize,
    pub data_seed: u64,
    /// Bytes written before every timed run, on both sides, to evict the L2 (absent: not
    /// flushed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flushed_bytes: Option<usize>,
    pub kernel_timing: Timing,
    /// cuBLASLt's (part of cuBLAS; the name is kept for the scripts that read it).
    pub cublas_timing: Timing,
    pub cublas: CublasLtInfo,
    /// The kernel's rate as a percentage of cuBLASLt's, from this one run.
    pub percent_of_cublas: f64,
    /// The kernel's output compared with cuBLASLt's.
    pub validation: Comparison,
}

/// Run the context's kernel for `params`, then cuBLASLt on the same inputs, both timed as
/// `options` says, and compare.
pub fn run_baseline(backend: &CudaBackend, ctx: &Context, params: &ExecParams, options: &RunOptions) -> Result<BaselineReport, BaselineError> {
    // The manifest and the library are checked before anything runs.
    let arrays = runner::size_arrays(ctx, params).map_err(BaselineError::Kernel)?;
    let gemm = gemm::resolve(ctx, params, &arrays)?;
    libs::cublaslt()?;
    let options = RunOptions { repetitions: options.repetitions.max(1), ..options.clone() };

    let kernel_run = runner::run(backend, ctx, params, &options).map_err(BaselineError::Kernel)?;
    let kernel_c = kernel_run
        .outputs
        .iter()
        .find(|(name, _)| *name == gemm.c.name)
        .map(|(_, c)| gemm.c_storage.gather(c, gemm.batch))
        .ok_or_else(|| BaselineError::Kernel(RunError::Setup(format!("array {} was not among the outputs", gemm.c.name))))?;
    let vendor = cublaslt(backend, gemm, &runner::generate_arrays(&arrays, options.data_seed), &options)?;
    let validation = compare(&kernel_c, &vendor.output, tolerance(ctx, params, vendor.gemm.c.dtype, vendor.gemm.k));

    let flops = vendor.gemm.flops();
    let flushed_bytes = kernel_run.flushed_bytes;
    let kernel_timing = Timing::new(kernel_run.times_ms, flops)?;
    let cublas_timing = Timing::new(vendor.times_ms, flops)?;
    Ok(BaselineReport {
        context: ctx.dir.display().to_string(),
        kernel: ctx.name().to_string(),
        backend: ctx.backend().to_string(),
        device: backend.device().name.clone(),
        params: params.clone(),
        gemm: vendor.gemm,
        warmup: options.warmup,
        repetitions: options.repetitions,
        data_seed: options.data_seed,
        flushed_bytes,
        percent_of_cublas: 100.0 * kernel_timing.tflops / cublas_timing.tflops,
        kernel_timing,
        cublas_timing,
        cublas: vendor.info,
        validation,
    })
}

/// [`Backend::vendor_call`](peak_backend::Backend::vendor_call) for CUDA and HIP: cuBLASLt
/// on the manifest's GEMM (the checkpoint's yardstick); `None` for a context that names
/// no GEMM (`[kernel.matmul]`).
pub(crate) fn vendor_call(backend: &CudaBackend, ctx: &Context, params: &ExecParams, options: &RunOptions) -> Option<Result<VendorRun, BackendError>> {
    ctx.manifest.kernel.matmul.as_ref()?;
    let run = run_cublaslt(backend, ctx, params, options).map_err(|e| match e {
        BaselineError::Backend(e) => e,
        BaselineError::Kernel(RunError::Invalid(reason)) => BackendError::InvalidConfig(reason),
        BaselineError::NotMatmul { .. } | BaselineError::Field { .. } => BackendError::InvalidConfig(e.to_string()),
        other => BackendError::Launch { kernel: "cublasLtMatmul".into(), message: other.to_string() },
    });
    Some(run.map(|run| VendorRun {
        library: run.info.library.clone(),
        call: run.info.describe(&run.gemm),
        timed: Timed { times_ms: run.times_ms, flushed_bytes: run.flushed_bytes },
    }))
}

/// cuBLASLt alone on the context's GEMM for `params`, on the runner's inputs for
/// `options.data_seed`, timed as `options` says.
pub fn run_cublaslt(backend: &CudaBackend, ctx: &Context, params: &ExecParams, options: &RunOptions) -> Result<CublasLtRun, BaselineError> {
    let arrays = runner::size_arrays(ctx, params).map_err(BaselineError::Kernel)?;
    let gemm = gemm::resolve(ctx, params, &arrays)?;
    cublaslt(backend, gemm, &runner::generate_arrays(&arrays, options.data_seed), options)
}

fn cublaslt(backend: &CudaBackend, gemm: Gemm, host: &[HostArray], options: &RunOptions) -> Result<CublasLtRun, BaselineError> {
    let path = libs::cublaslt()?;
    let mut buffers = Buffers { backend, ids: Vec::new() };
    let (sets, outputs): (Vec<Pointers>, Vec<BufferId>) =
        (0..options.input_sets.max(1)).map(|_| buffers.input_set(&gemm, host)).collect::<Result<Vec<_>, _>>()?.into_iter().unzip();
    let workspace = backend.device_ptr(buffers.workspace(lt::WORKSPACE_BYTES)?)?;
    backend.bind()?;
    let matmul = Matmul::new(&gemm, &sets, workspace)?;

    // The first call's output, from fresh buffers, is the one compared.
    matmul.enqueue(0, &sets[0], backend)?;
    backend.synchronize()?;
    let mut d = HostArray { dtype: gemm.c.dtype, bytes: vec![0; host[gemm.c.index].bytes.len()] };
    backend.read(outputs[0], &mut d.bytes)?;
    let output = gemm.c_storage.gather(&d, gemm.batch);

    // Timed as the kernel's side is (peak_backend::timing): the same warm-up, flush and events.
    let timed = time_runs(backend, options, sets.len(), |set| matmul.enqueue(set, &sets[set], backend))?;
    let info = CublasLtInfo {
        library: "cublaslt".into(),
        routine: "cublasLtMatmul".into(),
        layout: gemm.layout_name(),
        cublaslt_ops: matmul.call().ops(),
        epilogue: format!("{:?}", matmul.call().epilogue),
        residual: gemm.residual.as_ref().map(|r| format!("{} as cuBLASLt's C, beta = 1, written to D = {}", r.name, gemm.c.name)),
        types: GemmTypes { a: gemm.a.dtype, b: gemm.b.dtype, c: gemm.c.dtype, bias: gemm.bias.as_ref().map(|b| b.dtype) },
        compute_type: format!("{:?}", lt::COMPUTE_TYPE),
        scale_type: format!("{:?}", lt::SCALE_TYPE),
        algorithm: matmul.algorithm,
        workspace_bytes: lt::WORKSPACE_BYTES,
        workspace_needed: matmul.workspace_needed,
        version: lt::version(),
        path: path.display().to_string(),
    };
    drop(matmul);
    drop(buffers);
    Ok(CublasLtRun { gemm, output, times_ms: timed.times_ms, flushed_bytes: timed.flushed_bytes, info })
}

/// The tolerance the kernel's output must meet against cuBLASLt's.
fn tolerance(ctx: &Context, params: &ExecParams, dtype: DType, k: usize) -> f64 {
    let tol = ctx.manifest.tolerance.as_ref();
    let fixed = tol.and_then(|t| t.for_dtype(dtype));
    let depth = tol.and_then(|t| t.accumulation.as_ref()).and_then(|text| {
        let engine = expression_engine();
        let names: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
        Expr::compile(&engine, text, &names).ok()?.eval_int(&engine, &mut params.scope()).ok()
    });
    fixed.unwrap_or_else(|| default_tolerance(dtype, Some(depth.unwrap_or(k as i64))))
}

/// Device buffers of the cuBLASLt side, freed on every path.
struct Buffers<'a> {
    backend: &'a CudaBackend,
    ids: Vec<BufferId>,
}

impl Buffers<'_> {
    fn alloc(&mut self, data: &HostArray, poison: bool) -> Result<BufferId, BackendError> {
        let id = self.backend.alloc(data.bytes.len())?;
        self.ids.push(id);
        if poison {
            self.backend.fill(id, &HostArray::poison_pattern(data.dtype), data.bytes.len())?;
        } else {
            self.backend.write(id, &data.bytes)?;
        }
        Ok(id)
    }

    fn workspace(&mut self, bytes: usize) -> Result<BufferId, BackendError> {
        let id = self.backend.alloc(bytes)?;
        self.ids.push(id);
        Ok(id)
    }

    /// One input set's buffers and the output's, whose id is returned beside the addresses.
    /// The output is poisoned, so an element cuBLASLt should write and does not shows,
    /// unless beta reads its old contents: then it starts as the runner starts the
    /// kernel's.
    fn input_set(&mut self, gemm: &Gemm, host: &[HostArray]) -> Result<(Pointers, BufferId), BackendError> {
        let mut upload = |op: &Operand| -> Result<u64, BackendError> {
            let id = self.alloc(&host[op.index], false)?;
            self.backend.device_ptr(id)
        };
        let (a, b) = (upload(&gemm.a)?, upload(&gemm.b)?);
        let bias = gemm.bias.as_ref().map(&mut upload).transpose()?;
        let residual = gemm.residual.as_ref().map(&mut upload).transpose()?;
        let d_id = self.alloc(&host[gemm.c.index], gemm.beta == 0.0)?;
        let d = self.backend.device_ptr(d_id)?;
        Ok((Pointers { a, b, c: residual.unwrap_or(d), d, bias }, d_id))
    }
}

impl Drop for Buffers<'_> {
    fn drop(&mut self) {
        let _ = self.backend.synchronize();
        for id in &self.ids {
            self.backend.free(*id);
        }
    }
}
