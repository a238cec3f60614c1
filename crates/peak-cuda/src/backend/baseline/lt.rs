//! A [`Gemm`] as one `cublasLtMatmul` call.
//!
//! cuBLASLt is column-major and peak's C[m, n] row-major. The same memory read
//! column-major is Cᵀ[n, m] with leading dimension ldc, and Cᵀ = Bᵀ·Aᵀ: cuBLASLt's first
//! operand is our B, its second our A, its (m, n, k) our (n, m, k). Any stored matrix read
//! column-major has its runs as columns: a row-major B[k, n] (`b_layout = "row"`, runs of
//! n) reads as Bᵀ[n, k], which is what cuBLASLt's A must be, so no transpose; a
//! column-major one (`"col"`, runs of k: the weight of `x · Wᵀ`) reads as B[k, n] and is
//! transposed. A alike. So a manifest `NT` (llm.c's matmul_forward) is cuBLASLt's
//! `transa = T, transb = N`. The bias, one value per column of C, is one per row of Cᵀ:
//! cuBLASLt's bias vector, which its epilogue adds along D's rows.

use std::ffi::{CStr, c_void};

use cudarc::cublaslt::sys::{
    self as lt, cublasComputeType_t, cublasLtEpilogue_t, cublasLtMatmulAlgo_t, cublasLtMatmulAlgoConfigAttributes_t as AlgoAttr,
    cublasLtMatmulDescAttributes_t as DescAttr, cublasLtMatmulPreferenceAttributes_t as PrefAttr, cublasLtMatrixLayoutAttribute_t as LayoutAttr,
    cublasStatus_t, cudaDataType,
};
use peak_spec::{Activation, DType, Layout};
use serde::{Deserialize, Serialize};

use super::BaselineError;
use super::gemm::{Gemm, Storage};
use crate::backend::CudaBackend;

/// What peak asks of every GEMM: fp32 accumulation, never TF32 (that is
/// `CUBLAS_COMPUTE_32F_FAST_TF32`), with the half types on tensor cores.
pub const COMPUTE_TYPE: cublasComputeType_t = cublasComputeType_t::CUBLAS_COMPUTE_32F;
/// alpha and beta are f32 for every element type.
pub const SCALE_TYPE: cudaDataType = cudaDataType::CUDA_R_32F;
/// The workspace cuBLASLt may use, as PyTorch gives it on Hopper.
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// cuBLAS's `cublasOperation_t`, an `int32_t` attribute of the matmul descriptor (cudarc's
/// cuBLASLt bindings leave that enum to its cuBLAS ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    N = 0,
    T = 1,
}

/// One of cuBLASLt's matrices, in its column-major terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matrix {
    pub dtype: DType,
    pub rows: u64,
    pub cols: u64,
    pub ld: i64,
    pub batch: i32,
    pub stride: i64,
}

impl Matrix {
    /// A stored matrix read column-major: each run is a column.
    fn of(storage: Storage, dtype: DType, batch: usize) -> Matrix {
        Matrix { dtype, rows: storage.inner as u64, cols: storage.outer as u64, ld: storage.ld as i64, batch: batch as i32, stride: storage.stride as i64 }
    }
}

/// `cublasLtMatmul`'s arguments for a [`Gemm`], before any handle exists.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub transa: Op,
    pub transb: Op,
    /// cuBLASLt's A: our B.
    pub a: Matrix,
    /// cuBLASLt's B: our A.
    pub b: Matrix,
    /// C and D alike.
    pub c: Matrix,
    pub epilogue: cublasLtEpilogue_t,
    pub alpha: f32,
    pub beta: f32,
    /// cuBLASLt's C is the residual array (D = A·B + 1 · residual), not D's old contents.
    pub c_is_residual: bool,
    /// fp8 operands: the bias type is set (bf16 with an f32 C) and the accumulation is
    /// `CUBLASLT_MATMUL_DESC_FAST_ACCUM`: every product summed into the f32 accumulators
    /// across all of K, as a wgmma kernel does, rather than promoted to a second
    /// accumulator every few k-blocks, which costs cuBLASLt time a kernel doing the
    /// plain sum does not spend (PyTorch's `_scaled_mm(use_fast_accum=True)`).
    pub fp8: Option<Fp8Call>,
}

/// What an fp8 GEMM adds to the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8Call {
    pub bias_type: DType,
    pub fast_accum: bool,
}

impl Call {
    pub fn new(gemm: &Gemm) -> Call {
        let op = |layout: Layout| if layout == Layout::Col { Op::T } else { Op::N };
        Call {
            transa: op(gemm.b_layout),
            transb: op(gemm.a_layout),
            a: Matrix::of(gemm.b_storage, gemm.b.dtype, gemm.batch),
            b: Matrix::of(gemm.a_storage, gemm.a.dtype, gemm.batch),
            c: Matrix::of(gemm.c_storage, gemm.c.dtype, gemm.batch),
            epilogue: epilogue(gemm.bias.is_some(), gemm.activation),
            alpha: gemm.alpha as f32,
            beta: if gemm.residual.is_some() { 1.0 } else { gemm.beta as f32 },
            c_is_residual: gemm.residual.is_some(),
            fp8: gemm.a.dtype.is_fp8().then(|| Fp8Call { bias_type: super::gemm::bias_type(gemm.a.dtype, gemm.c.dtype), fast_accum: true }),
        }
    }

    /// cuBLASLt's (transa, transb) as letters: `TN` for a manifest's `NT`.
    pub fn ops(&self) -> String {
        format!("{:?}{:?}", self.transa, self.transb)
    }
}

/// The epilogue that adds the bias and applies the activation, in that order, as the
/// manifest's GEMM does. cuBLASLt's GELU is the tanh approximation (PyTorch checks its
/// fused `_addmm_activation(use_gelu=True)` against `gelu(approximate="tanh")`).
pub fn epilogue(bias: bool, activation: Activation) -> cublasLtEpilogue_t {
    use cublasLtEpilogue_t::*;
    match (bias, activation) {
        (false, Activation::None) => CUBLASLT_EPILOGUE_DEFAULT,
        (true, Activation::None) => CUBLASLT_EPILOGUE_BIAS,
        (false, Activation::Relu) => CUBLASLT_EPILOGUE_RELU,
        (true, Activation::Relu) => CUBLASLT_EPILOGUE_RELU_BIAS,
        (false, Activation::GeluTanh) => CUBLASLT_EPILOGUE_GELU,
        (true, Activation::GeluTanh) => CUBLASLT_EPILOGUE_GELU_BIAS,
    }
}

pub fn data_type(dtype: DType) -> cudaDataType {
    match dtype {
        DType::F32 => cudaDataType::CUDA_R_32F,
        DType::F16 => cudaDataType::CUDA_R_16F,
        DType::Bf16 => cudaDataType::CUDA_R_16BF,
        DType::E4m3 => cudaDataType::CUDA_R_8F_E4M3,
        DType::E5m2 => cudaDataType::CUDA_R_8F_E5M2,
        // Refused by `gemm::resolve` before any call; named for completeness.
        DType::I32 => cudaDataType::CUDA_R_32I,
        DType::U32 => cudaDataType::CUDA_R_32U,
    }
}

/// The largest power of two up to 256 dividing every value: cuBLASLt's heuristic assumes
/// 256-byte-aligned operands unless told, and may pick a kernel that needs them.
pub fn alignment(values: impl IntoIterator<Item = u64>) -> u32 {
    values.into_iter().filter(|v| *v != 0).fold(256, |acc, v| acc.min(1 << v.trailing_zeros().min(8)))
}

/// Device addresses of one input set, in the manifest's terms (A, B, C, D = the output).
#[derive(Debug, Clone, Copy)]
pub struct Pointers {
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub d: u64,
    pub bias: Option<u64>,
}

/// A cuBLASLt object, destroyed on every path.
struct Owned<X> {
    raw: *mut X,
    destroy: unsafe fn(*mut X) -> cublasStatus_t,
}

impl<X> Owned<X> {
    fn create(call: &str, destroy: unsafe fn(*mut X) -> cublasStatus_t, make: impl FnOnce(&mut *mut X) -> cublasStatus_t) -> Result<Owned<X>, BaselineError> {
        let mut raw = std::ptr::null_mut();
        check(make(&mut raw), call)?;
        Ok(Owned { raw, destroy })
    }
}

impl<X> Drop for Owned<X> {
    fn drop(&mut self) {
        unsafe {
            (self.destroy)(self.raw);
        }
    }
}

pub fn check(status: cublasStatus_t, call: &str) -> Result<(), BaselineError> {
    if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    Err(BaselineError::Cublaslt { call: call.into(), status: status_text(status) })
}

fn status_text(status: cublasStatus_t) -> String {
    let text = unsafe { lt::cublasLtGetStatusString(status) };
    if text.is_null() { format!("{status:?}") } else { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() }
}

fn set_desc<T>(desc: &Owned<lt::cublasLtMatmulDescOpaque_t>, attr: DescAttr, value: &T) -> Result<(), BaselineError> {
    let status = unsafe { lt::cublasLtMatmulDescSetAttribute(desc.raw, attr, (value as *const T).cast(), size_of::<T>()) };
    check(status, &format!("cublasLtMatmulDescSetAttribute({attr:?})"))
}

fn set_layout<T>(layout: &Owned<lt::cublasLtMatrixLayoutOpaque_t>, attr: LayoutAttr, value: &T) -> Result<(), BaselineError> {
    let status = unsafe { lt::cublasLtMatrixLayoutSetAttribute(layout.raw, attr, (value as *const T).cast(), size_of::<T>()) };
    check(status, &format!("cublasLtMatrixLayoutSetAttribute({attr:?})"))
}

fn set_pref<T>(pref: &Owned<lt::cublasLtMatmulPreferenceOpaque_t>, attr: PrefAttr, value: &T) -> Result<(), BaselineError> {
    let status = unsafe { lt::cublasLtMatmulPreferenceSetAttribute(pref.raw, attr, (value as *const T).cast(), size_of::<T>()) };
    check(status, &format!("cublasLtMatmulPreferenceSetAttribute({attr:?})"))
}

fn matrix_layout(m: &Matrix) -> Result<Owned<lt::cublasLtMatrixLayoutOpaque_t>, BaselineError> {
    let layout = Owned::create("cublasLtMatrixLayoutCreate", lt::cublasLtMatrixLayoutDestroy, |raw| unsafe {
        lt::cublasLtMatrixLayoutCreate(raw, data_type(m.dtype), m.rows, m.cols, m.ld)
    })?;
    if m.batch > 1 {
        set_layout(&layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &m.batch)?;
        set_layout(&layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride)?;
    }
    Ok(layout)
}

/// A prepared `cublasLtMatmul`: handle, descriptors and the heuristic's algorithm, for
/// every input set.
pub struct Matmul {
    call: Call,
    /// One descriptor per input set: the bias address lives in the descriptor, and setting
    /// it between timed calls would put host work inside the timed span.
    descs: Vec<Owned<lt::cublasLtMatmulDescOpaque_t>>,
    /// cuBLASLt's A, B and C (which D shares).
    layouts: [Owned<lt::cublasLtMatrixLayoutOpaque_t>; 3],
    algo: cublasLtMatmulAlgo_t,
    workspace: u64,
    /// The algorithm's index (`CUBLASLT_ALGO_CONFIG_ID`) and the workspace it asked for.
    pub algorithm: i32,
    pub workspace_needed: usize,
    // Last: the handle outlives the objects made with it.
    handle: Owned<lt::cublasLtContext>,
}

impl Matmul {
    /// Describe `gemm` for the input sets `sets` and ask cuBLASLt's heuristic for its best
    /// algorithm within `WORKSPACE_BYTES` of workspace at `workspace`.
    pub fn new(gemm: &Gemm, sets: &[Pointers], workspace: u64) -> Result<Matmul, BaselineError> {
        let call = Call::new(gemm);
        let handle = Owned::create("cublasLtCreate", lt::cublasLtDestroy, |raw| unsafe { lt::cublasLtCreate(raw) })?;
        let descs = sets.iter().map(|set| descriptor(&call, set.bias)).collect::<Result<Vec<_>, _>>()?;
        let layouts = [matrix_layout(&call.a)?, matrix_layout(&call.b)?, matrix_layout(&call.c)?];
        let pref = preference(&call, sets)?;
        let mut result: lt::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
        let mut found = 0;
        let status = unsafe {
            let [a, b, c] = [&layouts[0], &layouts[1], &layouts[2]].map(|l| l.raw);
            lt::cublasLtMatmulAlgoGetHeuristic(handle.raw, descs[0].raw, a, b, c, c, pref.raw, 1, &mut result, &mut found)
        };
        if status != cublasStatus_t::CUBLAS_STATUS_SUCCESS || found == 0 || result.state != cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            let why = if status != cublasStatus_t::CUBLAS_STATUS_SUCCESS { status_text(status) } else { status_text(result.state) };
            return Err(BaselineError::NoAlgorithm { gemm: gemm.summary(), status: why });
        }
        let mut algorithm = 0i32;
        let mut written = 0;
        let status = unsafe {
            lt::cublasLtMatmulAlgoConfigGetAttribute(
                &result.algo,
                AlgoAttr::CUBLASLT_ALGO_CONFIG_ID,
                (&mut algorithm as *mut i32).cast(),
                size_of::<i32>(),
                &mut written,
            )
        };
        check(status, "cublasLtMatmulAlgoConfigGetAttribute(CUBLASLT_ALGO_CONFIG_ID)")?;
        Ok(Matmul { call, descs, layouts, algo: result.algo, workspace, algorithm, workspace_needed: result.workspaceSize, handle })
    }

    pub fn call(&self) -> &Call {
        &self.call
    }

    /// Enqueue the GEMM of input set `set` on the backend's stream.
    pub fn enqueue(&self, set: usize, p: &Pointers, backend: &CudaBackend) -> Result<(), BaselineError> {
        let stream = backend.raw_stream() as lt::cudaStream_t;
        let [a, b, c] = [&self.layouts[0], &self.layouts[1], &self.layouts[2]].map(|l| l.raw);
        let status = unsafe {
            lt::cublasLtMatmul(
                self.handle.raw,
                self.descs[set].raw,
                (&self.call.alpha as *const f32).cast(),
                // cuBLASLt's A is our B and its B our A (Cᵀ = Bᵀ·Aᵀ).
                p.b as *const c_void,
                a,
                p.a as *const c_void,
                b,
                (&self.call.beta as *const f32).cast(),
                p.c as *const c_void,
                c,
                p.d as *mut c_void,
                c,
                &self.algo,
                self.workspace as *mut c_void,
                WORKSPACE_BYTES,
                stream,
            )
        };
        check(status, "cublasLtMatmul")
    }
}

fn descriptor(call: &Call, bias: Option<u64>) -> Result<Owned<lt::cublasLtMatmulDescOpaque_t>, BaselineError> {
    let desc =
        Owned::create("cublasLtMatmulDescCreate", lt::cublasLtMatmulDescDestroy, |raw| unsafe { lt::cublasLtMatmulDescCreate(raw, COMPUTE_TYPE, SCALE_TYPE) })?;
    set_desc(&desc, DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, &(call.transa as i32))?;
    set_desc(&desc, DescAttr::CUBLASLT_MATMUL_DESC_TRANSB, &(call.transb as i32))?;
    set_desc(&desc, DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE, &call.epilogue)?;
    if let Some(fp8) = call.fp8 {
        // The A, B, C and D scale pointers stay unset: every scale is 1.0.
        set_desc(&desc, DescAttr::CUBLASLT_MATMUL_DESC_FAST_ACCUM, &i8::from(fp8.fast_accum))?;
        if bias.is_some() {
            set_desc(&desc, DescAttr::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &data_type(fp8.bias_type))?;
        }
    }
    if let Some(bias) = bias {
        // One bias for every problem of a batch: the bias batch stride stays 0.
        set_desc(&desc, DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &(bias as *const c_void))?;
    }
    Ok(desc)
}

fn preference(call: &Call, sets: &[Pointers]) -> Result<Owned<lt::cublasLtMatmulPreferenceOpaque_t>, BaselineError> {
    let pref = Owned::create("cublasLtMatmulPreferenceCreate", lt::cublasLtMatmulPreferenceDestroy, |raw| unsafe { lt::cublasLtMatmulPreferenceCreate(raw) })?;
    set_pref(&pref, PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &(WORKSPACE_BYTES as u64))?;
    // Every problem of a batch starts `stride` elements on, so its alignment counts too.
    let align = |matrix: &Matrix, address: fn(&Pointers) -> u64| {
        let stride = if matrix.batch > 1 { matrix.stride as u64 * matrix.dtype.size_bytes() as u64 } else { 0 };
        alignment(sets.iter().map(address).chain([stride]))
    };
    // cuBLASLt's A is our B.
    set_pref(&pref, PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align(&call.a, |p| p.b))?;
    set_pref(&pref, PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align(&call.b, |p| p.a))?;
    set_pref(&pref, PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align(&call.c, |p| p.c))?;
    set_pref(&pref, PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align(&call.c, |p| p.d))?;
    Ok(pref)
}

/// cuBLASLt's version as `major.minor.patch`.
pub fn version() -> String {
    let v = unsafe { lt::cublasLtGetVersion() };
    format!("{}.{}.{}", v / 10_000, v / 100 % 100, v % 100)
}

#[cfg(test)]
mod tests {
    use super::super::gemm::Operand;
    use super::*;

    /// A 37 x 45 x 29 GEMM of f16 with tight storage, as `resolve` would give it.
    fn gemm(a_layout: Layout, b_layout: Layout) -> Gemm {
        let operand = |name: &str, index| Operand { name: name.into(), index, dtype: DType::F16 };
        let (m, n, k) = (37, 45, 29);
        let a_storage = Storage::new(a_layout, m, k, if a_layout == Layout::Row { k } else { m }, m * k);
        let b_storage = Storage::new(b_layout, k, n, if b_layout == Layout::Row { n } else { k }, k * n);
        Gemm {
            m,
            n,
            k,
            batch: 1,
            a_layout,
            b_layout,
            a_storage,
            b_storage,
            c_storage: Storage::new(Layout::Row, m, n, n, m * n),
            alpha: 1.0,
            beta: 0.0,
            activation: Activation::None,
            a: operand("A", 0),
            b: operand("B", 1),
            c: operand("C", 2),
            bias: None,
            residual: None,
        }
    }

    fn matrix(rows: u64, cols: u64, ld: i64) -> Matrix {
        Matrix { dtype: DType::F16, rows, cols, ld, batch: 1, stride: rows as i64 * cols as i64 }
    }

    #[test]
    fn row_major_c_is_computed_as_column_major_c_transposed_with_the_operands_swapped() {
        // D = Cᵀ is n x m with ld = n in every case.
        for (a, b, ops, cublas_a, cublas_b) in [
            // NN: B by rows reads as Bᵀ (n x k), A by rows as Aᵀ (k x m): nothing to transpose.
            (Layout::Row, Layout::Row, "NN", matrix(45, 29, 45), matrix(29, 37, 29)),
            // NT (x · Wᵀ): W by rows of k reads as B (k x n), transposed to Bᵀ.
            (Layout::Row, Layout::Col, "TN", matrix(29, 45, 29), matrix(29, 37, 29)),
            // TN: A stored by columns of m reads as A (m x k), transposed to Aᵀ.
            (Layout::Col, Layout::Row, "NT", matrix(45, 29, 45), matrix(37, 29, 37)),
            (Layout::Col, Layout::Col, "TT", matrix(29, 45, 29), matrix(37, 29, 37)),
        ] {
            let gemm = gemm(a, b);
            let call = Call::new(&gemm);
            assert_eq!(call.ops(), ops, "{}", gemm.layout_name());
            assert_eq!((call.a, call.b), (cublas_a, cublas_b), "{}", gemm.layout_name());
            assert_eq!(call.c, matrix(45, 37, 45));
            // op(A) is n x k and op(B) k x m, as D = n x m needs.
            let shape = |m: Matrix, op: Op| if op == Op::N { (m.rows, m.cols) } else { (m.cols, m.rows) };
            assert_eq!(shape(call.a, call.transa), (45, 29));
            assert_eq!(shape(call.b, call.transb), (29, 37));
        }
        assert_eq!(gemm(Layout::Row, Layout::Col).layout_name(), "NT");
    }

    #[test]
    fn padded_and_batched_storage_keeps_its_leading_dimension_and_stride() {
        let mut gemm = gemm(Layout::Col, Layout::Col);
        gemm.batch = 3;
        gemm.a_storage = Storage { ld: 40, stride: 29 * 40, ..gemm.a_storage };
        gemm.b_storage = Storage { stride: 0, ..gemm.b_storage };
        gemm.c_storage = Storage { ld: 48, stride: 37 * 48 + 5, ..gemm.c_storage };
        let call = Call::new(&gemm);
        assert_eq!(call.b, Matrix { dtype: DType::F16, rows: 37, cols: 29, ld: 40, batch: 3, stride: 29 * 40 });
        assert_eq!((call.a.batch, call.a.stride), (3, 0));
        assert_eq!(call.c, Matrix { dtype: DType::F16, rows: 45, cols: 37, ld: 48, batch: 3, stride: 37 * 48 + 5 });
    }

    #[test]
    fn bias_activation_and_residual_become_the_epilogue_and_c() {
        use cublasLtEpilogue_t::*;
        for (bias, activation, expected) in [
            (false, Activation::None, CUBLASLT_EPILOGUE_DEFAULT),
            (true, Activation::None, CUBLASLT_EPILOGUE_BIAS),
            (false, Activation::Relu, CUBLASLT_EPILOGUE_RELU),
            (true, Activation::Relu, CUBLASLT_EPILOGUE_RELU_BIAS),
            (false, Activation::GeluTanh, CUBLASLT_EPILOGUE_GELU),
            (true, Activation::GeluTanh, CUBLASLT_EPILOGUE_GELU_BIAS),
        ] {
            assert_eq!(epilogue(bias, activation), expected);
        }
        let mut plain = gemm(Layout::Row, Layout::Col);
        plain.alpha = 0.5;
        plain.beta = 0.25;
        let call = Call::new(&plain);
        assert_eq!((call.alpha, call.beta, call.c_is_residual), (0.5, 0.25, false));
        plain.beta = 0.0;
        plain.residual = Some(Operand { name: "R".into(), index: 3, dtype: DType::F16 });
        let call = Call::new(&plain);
        assert_eq!((call.beta, call.c_is_residual), (1.0, true), "D = A·B + 1 · residual");
    }

    #[test]
    fn fp8_operands_set_the_bias_type_and_fast_accumulation() {
        let mut fp8 = gemm(Layout::Row, Layout::Col);
        fp8.a.dtype = DType::E4m3;
        fp8.b.dtype = DType::E5m2;
        fp8.c.dtype = DType::F32;
        let call = Call::new(&fp8);
        assert_eq!(call.ops(), "TN", "cuBLASLt's fp8 form: its A (our B) transposed");
        assert_eq!((call.a.dtype, call.b.dtype), (DType::E5m2, DType::E4m3), "its A is our B");
        assert_eq!(call.fp8, Some(Fp8Call { bias_type: DType::Bf16, fast_accum: true }));
        fp8.c.dtype = DType::Bf16;
        assert_eq!(Call::new(&fp8).fp8.map(|f| f.bias_type), Some(DType::Bf16));
        fp8.c.dtype = DType::F16;
        assert_eq!(Call::new(&fp8).fp8.map(|f| f.bias_type), Some(DType::F16));
        assert_eq!(Call::new(&gemm(Layout::Row, Layout::Col)).fp8, None);
        assert_eq!([DType::E4m3, DType::E5m2].map(data_type), [cudaDataType::CUDA_R_8F_E4M3, cudaDataType::CUDA_R_8F_E5M2]);
    }

    #[test]
    fn alignment_is_the_largest_power_of_two_every_address_shares() {
        assert_eq!(alignment([0x7f00_0000_0000u64, 0x7f00_0000_0100]), 256);
        assert_eq!(alignment([0x7f00_0000_0000u64, 0x7f00_0000_0010]), 16);
        assert_eq!(alignment([0x7f00_0000_0000u64, 29 * 2]), 2, "a batch stride of 29 halves");
        assert_eq!(alignment([0u64]), 256, "a zero stride (a shared operand) constrains nothing");
    }

    #[test]
    fn the_compute_type_never_rounds_f32_to_tf32() {
        assert_eq!(COMPUTE_TYPE, cublasComputeType_t::CUBLAS_COMPUTE_32F);
        assert_eq!(SCALE_TYPE, cudaDataType::CUDA_R_32F);
        assert_eq!([DType::F32, DType::F16, DType::Bf16].map(data_type), [cudaDataType::CUDA_R_32F, cudaDataType::CUDA_R_16F, cudaDataType::CUDA_R_16BF]);
    }
}
