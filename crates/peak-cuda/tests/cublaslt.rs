//! cuBLASLt's side of `peak baseline` against a CPU reference of the manifest's GEMM, at a
//! shape no tile divides (37 x 45 x 29): the layout mapping, the fused epilogues, leading
//! dimensions, batches and the residual. Without an NVIDIA GPU every test prints why it
//! skipped.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use half::{bf16, f16};
use peak_backend::runner::{self, RunOptions};
use peak_cuda::CudaBackend;
use peak_cuda::baseline::{Gemm, run_cublaslt};
use peak_spec::{Activation, Context, DType, HostArray, Layout, compare, default_tolerance};
use support::gpu;

/// A context of one execution parameter (m = 37, n = 45, k = 29) whose GEMM is `matmul`
/// (the table's lines after m, n, k) over `arrays`: (name, size expression, is output),
/// every one of element type `dtype`. Its kernel is never run.
fn context(matmul: &str, dtype: &str, arrays: &[(&str, &str, bool)]) -> (tempfile::TempDir, Context) {
    let typed: Vec<(&str, &str, &str, bool)> = arrays.iter().map(|(name, size, output)| (*name, dtype, *size, *output)).collect();
    typed_context(matmul, (37, 45, 29), &typed)
}

/// [`context`] at sizes `(m, n, k)` with each array's own type: (name, type, size, is output).
fn typed_context(matmul: &str, (m, n, k): (i64, i64, i64), arrays: &[(&str, &str, &str, bool)]) -> (tempfile::TempDir, Context) {
    let dir = tempfile::tempdir().unwrap();
    let mut manifest = format!(
        "[kernel]\nname = \"gemm\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n\n[kernel.matmul]\nm = \"m\"\nn = \"n\"\nk = \"k\"\n{matmul}\n\
         [inputs]\nm = {{ values = [{m}] }}\nn = {{ values = [{n}] }}\nk = {{ values = [{k}] }}\n"
    );
    for (name, dtype, size, output) in arrays {
        manifest.push_str(&format!("\n[[arrays]]\nname = \"{name}\"\ntype = \"{dtype}\"\nsize = \"{size}\"\ninit = \"random\"\noutput = {output}\n"));
    }
    std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
    std::fs::write(dir.path().join("k.cu"), "// @peak macros\n// @peak device\n// @peak host\n").unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    (dir, ctx)
}

fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044715 * x * x * x)).tanh())
}

/// The manifest's GEMM computed in f64 from the arrays' initial contents, rounded once to
/// C's type: the elements C's storage covers, problem by problem, row by row.
fn reference(gemm: &Gemm, host: &[HostArray]) -> HostArray {
    let at = |array: usize, offset: usize| host[array].get_f64(offset);
    let element = |layout: Layout, ld: usize, stride: usize, p: usize, row: usize, col: usize| {
        p * stride + if layout == Layout::Row { row * ld + col } else { col * ld + row }
    };
    let (sa, sb, sc) = (gemm.a_storage, gemm.b_storage, gemm.c_storage);
    let mut values = Vec::with_capacity(gemm.batch * gemm.m * gemm.n);
    for p in 0..gemm.batch {
        for i in 0..gemm.m {
            for j in 0..gemm.n {
                let acc: f64 = (0..gemm.k)
                    .map(|l| {
                        at(gemm.a.index, element(gemm.a_layout, sa.ld, sa.stride, p, i, l))
                            * at(gemm.b.index, element(gemm.b_layout, sb.ld, sb.stride, p, l, j))
                    })
                    .sum();
                let c_at = p * sc.stride + i * sc.ld + j;
                let mut v = gemm.alpha * acc + gemm.beta * at(gemm.c.index, c_at);
                if let Some(bias) = &gemm.bias {
                    v += at(bias.index, j);
                }
                v = match gemm.activation {
                    Activation::None => v,
                    Activation::Relu => v.max(0.0),
                    Activation::GeluTanh => gelu_tanh(v),
                };
                if let Some(residual) = &gemm.residual {
                    v += at(residual.index, c_at);
                }
                values.push(v);
            }
        }
    }
    let bytes = match gemm.c.dtype {
        DType::F32 => values.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
        DType::F16 => values.iter().flat_map(|v| f16::from_f64(*v).to_le_bytes()).collect(),
        DType::Bf16 => values.iter().flat_map(|v| bf16::from_f64(*v).to_le_bytes()).collect(),
        other => panic!("no reference for {other}"),
    };
    HostArray { dtype: gemm.c.dtype, bytes }
}

/// cuBLASLt's output for the context against the reference, within the half types'
/// accumulation tolerance; also checks what the run says it ran.
fn check(backend: &CudaBackend, ctx: &Context, layout: &str, epilogue: &str) {
    let params = ctx.space().iter().next().unwrap();
    let options = RunOptions { warmup: 1, repetitions: 3, input_sets: 2, data_seed: 7, ..RunOptions::default() };
    let run = run_cublaslt(backend, ctx, &params, &options).unwrap_or_else(|e| panic!("{layout} {epilogue}: {e}"));
    let host = runner::generate_arrays(&runner::size_arrays(ctx, &params).unwrap(), options.data_seed);
    let expected = reference(&run.gemm, &host);
    let comparison = compare(&run.output, &expected, default_tolerance(run.gemm.c.dtype, Some(run.gemm.k as i64)));
    let what = format!("{} {epilogue} {}", run.gemm.summary(), run.info.epilogue);
    assert!(comparison.passed, "{what}: {comparison:?}");
    assert_eq!((run.info.layout.as_str(), run.info.epilogue.as_str()), (layout, epilogue), "{what}");
    assert_eq!(run.info.compute_type, "CUBLAS_COMPUTE_32F", "{what}");
    assert_eq!(run.times_ms.len(), 3, "{what}");
    assert!(run.times_ms.iter().all(|t| *t > 0.0), "{what}");
}

const LINEAR: &[(&str, &str, bool)] = &[("inp", "m * k", false), ("weight", "n * k", false), ("bias", "n", false), ("out", "m * n", true)];

#[test]
fn nt_with_fused_bias_and_gelu_matches_the_cpu_in_every_float_type() {
    let Some(backend) = gpu("nt_with_fused_bias_and_gelu_matches_the_cpu_in_every_float_type") else { return };
    let matmul = "a = \"inp\"\nb = \"weight\"\nc = \"out\"\nb_layout = \"col\"\nbias = \"bias\"\nactivation = \"gelu-tanh\"\n";
    for dtype in ["f32", "f16", "bf16"] {
        let (_dir, ctx) = context(matmul, dtype, LINEAR);
        check(&backend, &ctx, "NT", "CUBLASLT_EPILOGUE_GELU_BIAS");
    }
    let (_dir, ctx) = context(&matmul.replace("activation = \"gelu-tanh\"\n", ""), "f16", LINEAR);
    check(&backend, &ctx, "NT", "CUBLASLT_EPILOGUE_BIAS");
}

#[test]
fn nn_plain_matches_the_cpu() {
    let Some(backend) = gpu("nn_plain_matches_the_cpu") else { return };
    for dtype in ["f32", "f16", "bf16"] {
        let (_dir, ctx) = context("a = \"A\"\nb = \"B\"\nc = \"C\"\n", dtype, &[("A", "m * k", false), ("B", "k * n", false), ("C", "m * n", true)]);
        check(&backend, &ctx, "NN", "CUBLASLT_EPILOGUE_DEFAULT");
    }
}

#[test]
fn transposed_padded_batched_gemms_with_scaling_relu_and_a_residual_match_the_cpu() {
    let Some(backend) = gpu("transposed_padded_batched_gemms_with_scaling_relu_and_a_residual_match_the_cpu") else { return };
    // TN, A padded to 40 per column, two problems sharing one B, C padded to 48 per row,
    // the residual fused as cuBLASLt's C.
    let residual =
        "a = \"A\"\nb = \"B\"\nc = \"C\"\na_layout = \"col\"\nlda = \"40\"\nldc = \"48\"\nbatch = \"2\"\nstride_b = \"0\"\nalpha = 0.5\nresidual = \"R\"\n";
    let (_dir, ctx) = context(residual, "f32", &[("A", "2 * k * 40", false), ("B", "k * n", false), ("R", "2 * m * 48", false), ("C", "2 * m * 48", true)]);
    check(&backend, &ctx, "TN", "CUBLASLT_EPILOGUE_DEFAULT");
    // TT with beta reading C's old contents, a bias and ReLU, in bf16.
    let relu = "a = \"A\"\nb = \"B\"\nc = \"C\"\na_layout = \"col\"\nb_layout = \"col\"\nbeta = 0.5\nbias = \"bias\"\nactivation = \"relu\"\n";
    let (_dir, mut ctx) = context(relu, "bf16", &[("A", "k * m", false), ("B", "n * k", false), ("bias", "n", false), ("C", "m * n", true)]);
    // An in-place result: C starts from its init, which beta reads.
    ctx.manifest.arrays.iter_mut().find(|a| a.name == "C").unwrap().inout = true;
    check(&backend, &ctx, "TT", "CUBLASLT_EPILOGUE_RELU_BIAS");
}

#[test]
fn fp8_tn_with_a_fused_bias_matches_the_cpu() {
    let Some(backend) = gpu("fp8_tn_with_a_fused_bias_matches_the_cpu") else { return };
    // cuBLASLt's fp8 form: A by rows and B stored N x K, both K-major; K and C's rows are
    // whole 16 bytes (k = 64 fp8, n = 48 bf16), M does not divide any tile.
    let matmul = "a = \"inp\"\nb = \"weight\"\nc = \"out\"\nb_layout = \"col\"\nbias = \"bias\"\n";
    for (a, b, c, bias) in [("e4m3", "e4m3", "bf16", "bf16"), ("e4m3", "e5m2", "f16", "f16"), ("e5m2", "e4m3", "f32", "bf16")] {
        let arrays = [("inp", a, "m * k", false), ("weight", b, "n * k", false), ("bias", bias, "n", false), ("out", c, "m * n", true)];
        let (_dir, ctx) = typed_context(matmul, (37, 48, 64), &arrays);
        check(&backend, &ctx, "NT", "CUBLASLT_EPILOGUE_BIAS");
    }
}
