//! The vendor baseline: cuBLAS on the same matmul, in the same process, timed the same way.
//!
//! A context is matmul-shaped when its manifest has a `[kernel.matmul]` table naming the
//! shape (m, n, k as expressions over the inputs) and the arrays (a, b, c): row-major
//! `C[m×n] = A[m×k] × B[k×n]`. cuBLAS is column-major, so it computes `Cᵀ = Bᵀ × Aᵀ`,
//! which is the same memory. The routine follows the element types:
//!
//! | A, B | C | routine | accumulation |
//! |---|---|---|---|
//! | f32 | f32 | `cublasSgemm`, `CUBLAS_DEFAULT_MATH` | fp32, no TF32 |
//! | f16 | f16 or f32 | `cublasGemmEx` | `CUBLAS_COMPUTE_32F` |
//!
//! Both sides get the same inputs (the runner's arrays for the same data seed), the same
//! warm-up, the same event-timed repetitions (with the same input-set rotation and cache
//! flushing) and the median; every "% of cuBLAS" comes from one such run. The kernel's
//! output is also checked against cuBLAS's.

use std::ffi::{CStr, c_void};

use cudarc::cublas::sys::{self as cublas, cublasComputeType_t, cublasGemmAlgo_t, cublasHandle_t, cublasMath_t, cublasOperation_t, cublasStatus_t, cudaDataType};
use peak_backend::runner::{self, RunError, RunOptions, median};
use peak_backend::{Backend, BackendError, BufferId};
use peak_spec::data::Comparison;
use peak_spec::expr::{Expr, expression_engine};
use peak_spec::{Context, DType, ExecParams, HostArray, compare, default_tolerance};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::CudaBackend;
use crate::libs;

#[derive(Debug, Error)]
pub enum BaselineError {
    #[error("{file}: no [kernel.matmul] table, so peak does not know which matmul this context computes\nhint: add [kernel.matmul] with m, n, k (expressions over the inputs) and a, b, c (array names)")]
    NotMatmul { file: String },
    #[error("{file}: kernel.matmul.{field}: {message}")]
    Shape { file: String, field: String, message: String },
    #[error("{file}: cuBLAS has no gemm for A {a}, B {b}, C {c} here (supported: f32×f32→f32, f16×f16→f16 or f32)")]
    Types { file: String, a: DType, b: DType, c: DType },
    /// The context's own kernel did not run; its category says how.
    #[error("the kernel failed ({category}): {error}", category = .0.category(), error = .0)]
    Kernel(RunError),
    #[error("{0}")]
    Backend(#[from] BackendError),
    #[error("{call} failed: {status}")]
    Cublas { call: String, status: String },
}

/// The problem cuBLAS solves, resolved for one execution parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl GemmShape {
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// One timed side of the comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub times_ms: Vec<f64>,
    pub tflops: f64,
}

impl Timing {
    fn new(times_ms: Vec<f64>, flops: f64) -> Option<Timing> {
        let median_ms = median(&times_ms)?;
        let min_ms = times_ms.iter().copied().fold(f64::INFINITY, f64::min);
        Some(Timing { median_ms, min_ms, tflops: flops / (median_ms * 1e-3) / 1e12, times_ms })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CublasInfo {
    pub routine: String,
    pub math_mode: String,
    pub compute_type: String,
    pub version: i32,
    pub library: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineReport {
    pub context: String,
    pub kernel: String,
    pub backend: String,
    pub device: String,
    pub params: ExecParams,
    pub shape: GemmShape,
    pub types: [DType; 3],
    pub warmup: usize,
    pub repetitions: usize,
    pub data_seed: u64,
    pub kernel_timing: Timing,
    pub cublas_timing: Timing,
    pub cublas: CublasInfo,
    /// The kernel's rate as a percentage of cuBLAS's, from this one run.
    pub percent_of_cublas: f64,
    /// The kernel's output compared with cuBLAS's.
    pub validation: Comparison,
}

/// A matmul shape from the manifest, resolved for `params`, with the arrays' element types.
pub fn gemm_shape(ctx: &Context, params: &ExecParams) -> Result<(GemmShape, [DType; 3], [usize; 3]), BaselineError> {
    let file = ctx.manifest_path().display().to_string();
    let spec = ctx.manifest.kernel.matmul.as_ref().ok_or_else(|| BaselineError::NotMatmul { file: file.clone() })?;
    let engine = expression_engine();
    let names: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
    let mut scope = params.scope();
    let mut dim = |field: &str, text: &str| -> Result<usize, BaselineError> {
        let shape_err = |message: String| BaselineError::Shape { file: file.clone(), field: field.into(), message };
        let expr = Expr::compile(&engine, text, &names).map_err(|m| shape_err(format!("cannot parse `{text}`: {m}")))?;
        let v = expr.eval_int(&engine, &mut scope).map_err(shape_err)?;
        usize::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| shape_err(format!("`{text}` is {v}, not a positive size")))
    };
    let shape = GemmShape { m: dim("m", &spec.m)?, n: dim("n", &spec.n)?, k: dim("k", &spec.k)? };
    let arrays = runner::size_arrays(ctx, params).map_err(BaselineError::Kernel)?;
    let index = |field: &str, name: &str, needed: usize| -> Result<usize, BaselineError> {
        let shape_err = |message: String| BaselineError::Shape { file: file.clone(), field: field.into(), message };
        let i = arrays.iter().position(|a| a.spec.name == name).ok_or_else(|| shape_err(format!("no array named '{name}'")))?;
        if arrays[i].count < needed {
            return Err(shape_err(format!("array {name} has {} elements, the shape needs {needed}", arrays[i].count)));
        }
        Ok(i)
    };
    let idx = [index("a", &spec.a, shape.m * shape.k)?, index("b", &spec.b, shape.k * shape.n)?, index("c", &spec.c, shape.m * shape.n)?];
    if !arrays[idx[2]].spec.output {
        return Err(BaselineError::Shape { file, field: "c".into(), message: format!("array {} is not an output", spec.c) });
    }
    let types = idx.map(|i| arrays[i].spec.dtype);
    Ok((shape, types, idx))
}

/// The tolerance the kernel's output must meet against cuBLAS's.
fn tolerance(ctx: &Context, params: &ExecParams, dtype: DType, k: usize) -> f64 {
    let tol = ctx.manifest.tolerance.as_ref();
    let fixed = tol.and_then(|t| match dtype {
        DType::F32 => t.f32,
        DType::F16 => t.f16,
        DType::Bf16 => t.bf16,
        _ => None,
    });
    let depth = tol.and_then(|t| t.accumulation.as_ref()).and_then(|text| {
        let engine = expression_engine();
        let names: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
        Expr::compile(&engine, text, &names).ok()?.eval_int(&engine, &mut params.scope()).ok()
    });
    fixed.unwrap_or_else(|| default_tolerance(dtype, Some(depth.unwrap_or(k as i64))))
}

/// A cuBLAS handle on the backend's stream; destroyed on every path.
struct Handle(cublasHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe {
            cublas::cublasDestroy_v2(self.0);
        }
    }
}

fn cublas_check(status: cublasStatus_t, call: &str) -> Result<(), BaselineError> {
    if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    let text = unsafe { cublas::cublasGetStatusString(status) };
    let text = if text.is_null() { format!("{status:?}") } else { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() };
    Err(BaselineError::Cublas { call: call.into(), status: text })
}

/// What one gemm call needs.
struct Gemm {
    shape: GemmShape,
    types: [DType; 3],
    compute: Option<cublasComputeType_t>,
}

impl Gemm {
    fn new(ctx: &Context, shape: GemmShape, types: [DType; 3]) -> Result<Gemm, BaselineError> {
        let compute = match types {
            [DType::F32, DType::F32, DType::F32] => None,
            [DType::F16, DType::F16, DType::F16 | DType::F32] => Some(cublasComputeType_t::CUBLAS_COMPUTE_32F),
            [a, b, c] => return Err(BaselineError::Types { file: ctx.manifest_path().display().to_string(), a, b, c }),
        };
        Ok(Gemm { shape, types, compute })
    }

    fn info(&self, version: i32) -> CublasInfo {
        let library = libs::cublas().map(|p| p.display().to_string()).unwrap_or_default();
        match self.compute {
            None => CublasInfo {
                routine: "cublasSgemm".into(),
                math_mode: "CUBLAS_DEFAULT_MATH".into(),
                compute_type: "fp32 (no TF32)".into(),
                version,
                library,
            },
            Some(_) => CublasInfo {
                routine: "cublasGemmEx".into(),
                math_mode: "CUBLAS_DEFAULT_MATH".into(),
                compute_type: "CUBLAS_COMPUTE_32F".into(),
                version,
                library,
            },
        }
    }

    fn data_type(dtype: DType) -> cudaDataType {
        match dtype {
            DType::F16 => cudaDataType::CUDA_R_16F,
            _ => cudaDataType::CUDA_R_32F,
        }
    }

    /// Row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS's (m, n, k) are our (n, m, k),
    /// its first operand is B with leading dimension n, its second A with leading dimension k.
    fn enqueue(&self, handle: &Handle, a: u64, b: u64, c: u64) -> Result<(), BaselineError> {
        let GemmShape { m, n, k } = self.shape;
        let (m_, n_, k_) = (n as i32, m as i32, k as i32);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let op = cublasOperation_t::CUBLAS_OP_N;
        let status = unsafe {
            match self.compute {
                None => cublas::cublasSgemm_v2(handle.0, op, op, m_, n_, k_, &alpha, b as *const f32, n as i32, a as *const f32, k as i32, &beta, c as *mut f32, n as i32),
                Some(compute) => cublas::cublasGemmEx(
                    handle.0,
                    op,
                    op,
                    m_,
                    n_,
                    k_,
                    (&alpha as *const f32).cast::<c_void>(),
                    b as *const c_void,
                    Self::data_type(self.types[1]),
                    n as i32,
                    a as *const c_void,
                    Self::data_type(self.types[0]),
                    k as i32,
                    (&beta as *const f32).cast::<c_void>(),
                    c as *mut c_void,
                    Self::data_type(self.types[2]),
                    n as i32,
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                ),
            }
        };
        cublas_check(status, if self.compute.is_none() { "cublasSgemm" } else { "cublasGemmEx" })
    }
}

/// Device buffers of the cuBLAS side, freed on every path.
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
}

impl Drop for Buffers<'_> {
    fn drop(&mut self) {
        let _ = self.backend.synchronize();
        for id in &self.ids {
            self.backend.free(*id);
        }
    }
}

/// Run the context's kernel for `params`, then cuBLAS on the same inputs, both timed as
/// `options` says, and compare.
pub fn run_baseline(backend: &CudaBackend, ctx: &Context, params: &ExecParams, options: &RunOptions) -> Result<BaselineReport, BaselineError> {
    let (shape, types, idx) = gemm_shape(ctx, params)?;
    let gemm = Gemm::new(ctx, shape, types)?;
    libs::cublas()?;
    let options = RunOptions { repetitions: options.repetitions.max(1), ..options.clone() };

    let kernel_run = runner::run(backend, ctx, params, &options).map_err(BaselineError::Kernel)?;
    let kernel_c = kernel_run
        .outputs
        .iter()
        .find(|(name, _)| name == &ctx.manifest.kernel.matmul.as_ref().expect("checked by gemm_shape").c)
        .map(|(_, a)| a.clone())
        .ok_or_else(|| BaselineError::Kernel(RunError::Setup("the C array was not among the outputs".into())))?;

    // The runner's inputs for this data seed, so both sides multiply the same matrices.
    let arrays = runner::size_arrays(ctx, params).map_err(BaselineError::Kernel)?;
    let host = runner::generate_arrays(&arrays, options.data_seed);
    let mut buffers = Buffers { backend, ids: Vec::new() };
    let sets = options.input_sets.max(1);
    let mut device = Vec::with_capacity(sets);
    for _ in 0..sets {
        let a = backend.device_ptr(buffers.alloc(&host[idx[0]], false)?)?;
        let b = backend.device_ptr(buffers.alloc(&host[idx[1]], false)?)?;
        let c_id = buffers.alloc(&host[idx[2]], true)?;
        device.push((a, b, backend.device_ptr(c_id)?, c_id));
    }

    backend.bind()?;
    let mut raw: cublasHandle_t = std::ptr::null_mut();
    cublas_check(unsafe { cublas::cublasCreate_v2(&mut raw) }, "cublasCreate")?;
    let handle = Handle(raw);
    cublas_check(unsafe { cublas::cublasSetStream_v2(handle.0, backend.raw_stream() as cublas::cudaStream_t) }, "cublasSetStream")?;
    // Default math never rounds sgemm's inputs to TF32 (that takes CUBLAS_TF32_TENSOR_OP_MATH)
    // and is cuBLAS's fastest exact-precision mode; pedantic math would slow the baseline.
    // The half types' gemm uses tensor cores with fp32 accumulation, set by the compute type.
    cublas_check(unsafe { cublas::cublasSetMathMode(handle.0, cublasMath_t::CUBLAS_DEFAULT_MATH) }, "cublasSetMathMode")?;
    let mut version = 0;
    cublas_check(unsafe { cublas::cublasGetVersion_v2(handle.0, &mut version) }, "cublasGetVersion")?;

    let (a, b, c, c_id) = device[0];
    gemm.enqueue(&handle, a, b, c)?;
    backend.synchronize()?;
    let mut reference = HostArray { dtype: types[2], bytes: vec![0; host[idx[2]].bytes.len()] };
    backend.read(c_id, &mut reference.bytes)?;
    let tol = tolerance(ctx, params, types[2], shape.k);
    let n_out = shape.m * shape.n;
    let prefix = |a: &HostArray| HostArray { dtype: a.dtype, bytes: a.bytes[..n_out * a.dtype.size_bytes()].to_vec() };
    let validation = compare(&prefix(&kernel_c), &prefix(&reference), tol);

    for w in 0..options.warmup {
        let (a, b, c, _) = device[w % sets];
        gemm.enqueue(&handle, a, b, c)?;
    }
    backend.synchronize()?;
    let mut times = Vec::with_capacity(options.repetitions);
    for rep in 0..options.repetitions {
        if options.flush_cache {
            backend.flush_cache()?;
        }
        let (a, b, c, _) = device[rep % sets];
        let start = backend.record_event()?;
        gemm.enqueue(&handle, a, b, c)?;
        let end = backend.record_event()?;
        times.push(backend.elapsed_ms(start, end)?);
    }
    backend.synchronize()?;
    drop(handle);
    drop(buffers);

    let flops = shape.flops();
    let kernel_timing = Timing::new(kernel_run.times_ms, flops).ok_or_else(|| BaselineError::Kernel(RunError::Setup("no timed repetitions".into())))?;
    let cublas_timing = Timing::new(times, flops).ok_or_else(|| BaselineError::Kernel(RunError::Setup("no timed repetitions".into())))?;
    Ok(BaselineReport {
        context: ctx.dir.display().to_string(),
        kernel: ctx.name().to_string(),
        backend: ctx.backend().to_string(),
        device: backend.device().name.clone(),
        params: params.clone(),
        shape,
        types,
        warmup: options.warmup,
        repetitions: options.repetitions,
        data_seed: options.data_seed,
        percent_of_cublas: 100.0 * kernel_timing.tflops / cublas_timing.tflops,
        kernel_timing,
        cublas_timing,
        cublas: gemm.info(version),
        validation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(matmul: &str, a_type: &str) -> (tempfile::TempDir, Context) {
        let dir = tempfile::tempdir().unwrap();
        let manifest = format!(
            "[kernel]\nname = \"mm\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n{matmul}\n[inputs]\nn = {{ values = [64, 128] }}\n\n\
             [[arrays]]\nname = \"A\"\ntype = \"{a_type}\"\nsize = \"n * n\"\ninit = \"random\"\n\n\
             [[arrays]]\nname = \"B\"\ntype = \"f16\"\nsize = \"n * n\"\ninit = \"random\"\n\n\
             [[arrays]]\nname = \"C\"\ntype = \"f16\"\nsize = \"n * n\"\ninit = \"zeros\"\noutput = true\n"
        );
        std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("k.cu"), "// @peak macros\n// @peak device\n// @peak host\n").unwrap();
        let ctx = Context::load(dir.path()).unwrap();
        (dir, ctx)
    }

    const SHAPE: &str = "[kernel.matmul]\nm = \"n\"\nn = \"n\"\nk = \"n\"\na = \"A\"\nb = \"B\"\nc = \"C\"\n";

    #[test]
    fn the_manifest_shape_resolves_per_execution_parameter() {
        let (_d, ctx) = context(SHAPE, "f16");
        let params = ctx.space().iter().nth(1).unwrap();
        let (shape, types, idx) = gemm_shape(&ctx, &params).unwrap();
        assert_eq!(shape, GemmShape { m: 128, n: 128, k: 128 });
        assert_eq!(types, [DType::F16, DType::F16, DType::F16]);
        assert_eq!(idx, [0, 1, 2]);
        assert_eq!(shape.flops(), 2.0 * 128f64.powi(3));
        assert!(Gemm::new(&ctx, shape, types).unwrap().compute.is_some());
    }

    #[test]
    fn contexts_without_a_matmul_table_or_with_bad_arrays_are_refused_with_the_field() {
        let (_d, ctx) = context("", "f16");
        let params = ctx.space().iter().next().unwrap();
        let err = gemm_shape(&ctx, &params).unwrap_err().to_string();
        assert!(err.contains("[kernel.matmul]") && err.contains("hint:"), "{err}");

        let (_d, ctx) = context(&SHAPE.replace("k = \"n\"", "k = \"2 * n\""), "f16");
        let err = gemm_shape(&ctx, &params).unwrap_err().to_string();
        assert!(err.contains("kernel.matmul.a"), "A is n*n but the shape needs n*2n: {err}");

        let (_d, ctx) = context(SHAPE, "f32");
        let (shape, types, _) = gemm_shape(&ctx, &params).unwrap();
        assert!(matches!(Gemm::new(&ctx, shape, types), Err(BaselineError::Types { .. })));
    }
}
