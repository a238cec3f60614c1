//! Kernel files in the shape people bring them, written for peak's tests
//! (tests/fixtures/import/realistic; the README there says what each one is): a file of
//! several training kernels with host code and a local header, a GEMM tutorial header, an
//! OpenCL kernel. Each becomes a context that loads, keeps the kernel and what it uses and
//! nothing of the host code, and gets a launch read from how the kernel indexes its
//! threads. `crates/peak-cli/tests/import_fixtures.rs` runs the same files through
//! `peak new`, compiles the CUDA ones with NVRTC and runs the OpenCL one.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use peak_spec::import::{ImportChoices, import_file};
use peak_spec::{Context, DType, Region};

const TRAINING: &str = "realistic/training_kernels.cu";
/// The first line of every fixture: the file's leading comment stays at the top.
const HEADER: &str = "// Test fixture for peak new, written for peak's tests (MIT, like peak).\n";

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import").join(path)
}

/// `--size A=EXPR`-style pairs.
fn pairs(list: &[(&str, &str)]) -> indexmap::IndexMap<String, String> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// `--input NAME=VALUE`-style pairs.
fn inputs(list: &[(&str, i64)]) -> indexmap::IndexMap<String, Vec<i64>> {
    list.iter().map(|(n, v)| (n.to_string(), vec![*v])).collect()
}

/// Import `file` with `choices` into a fresh folder; the context, the notes, and the folder.
fn import(file: &str, choices: ImportChoices) -> (Context, Vec<String>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("ctx");
    let (ctx, notes) = import_file(&fixture(file), &to, None, &choices).unwrap_or_else(|e| panic!("{file}: {e}"));
    let loaded = Context::load(&to).unwrap_or_else(|e| panic!("{file}: the context does not load: {e}"));
    assert_eq!(loaded.regions, ctx.regions);
    (loaded, notes, dir)
}

fn launch_line(ctx: &Context) -> &str {
    ctx.region(Region::Host).lines().find(|l| l.starts_with("launch(")).expect("a launch line")
}

/// Host code, host-only headers and macros, and the other kernels never reach the device
/// region.
fn assert_device_only(ctx: &Context, kernel: &str) {
    let device = ctx.region(Region::Device);
    let macros = ctx.region(Region::Macros);
    for host in ["int main(", "cudaMalloc", "CUDA_TRY(", "report_cuda_failure", "host_uniform", "_reference(", "<<<", "printf(", "dim3"] {
        assert!(!device.contains(host), "{kernel}: `{host}` in the device region:\n{device}");
    }
    for header in ["<stdio.h>", "<stdlib.h>", "<string.h>", "<math.h>", "<float.h>", "<cuda_runtime.h>", "<assert.h>", "<cstdio>", "<cublas_v2.h>"] {
        assert!(!macros.lines().any(|l| l.starts_with("#include") && l.contains(header)), "{kernel}: {header} kept:\n{macros}");
    }
    for gone in ["#pragma once", "#define CUDA_TRY", "RESIDENT_BLOCKS_HINT", "__CUDA_ARCH__"] {
        assert!(!macros.contains(gone) && !device.contains(gone), "{kernel}: `{gone}` kept:\n{macros}\n{device}");
    }
    assert_eq!(device.matches("__global__").count(), 1, "{kernel}: only the chosen kernel:\n{device}");
    assert!(device.contains(&format!("extern \"C\" __global__ void {kernel}(")), "{device}");
}

/// What every kernel of training_kernels.cu leaves out: its host headers (the header's
/// own after the file's), the host functions of both files, the other kernels.
fn assert_training_notes(notes: &str, others: &str, unused: usize) {
    for said in [
        "left out #include <stdio.h>, <stdlib.h>, <math.h>, <float.h>, <cuda_runtime.h>, <assert.h>, <string.h>: NVRTC compiles the device code alone",
        "left out host functions (report_cuda_failure, host_uniform, device_copy_of, matches_reference, gelu_reference, layernorm_reference and 8 more)",
        &format!("the other kernels ({others})"),
        "host variables (g_device)",
        &format!("{unused} device declarations the kernel does not use"),
    ] {
        assert!(notes.contains(said), "notes say `{said}`:\n{notes}");
    }
}

#[test]
fn layernorm_gets_one_thread_per_row_and_its_eps_from_a_flag() {
    let choices = ImportChoices {
        kernel: Some("layernorm_rows_forward".into()),
        sizes: pairs(&[("out", "rows * width"), ("mean", "rows"), ("rstd", "rows"), ("inp", "rows * width"), ("scale", "width"), ("shift", "width")]),
        inputs: inputs(&[("rows", 1024), ("width", 768)]),
        scalars: [("eps".to_string(), 1e-5)].into_iter().collect(),
        validation: [("rows".to_string(), vec![7])].into_iter().collect(),
        library: Some("torch.nn.functional.layer_norm(inp.view(rows, width), (width,), scale, shift, 1e-5)".into()),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, choices);
    // What the flags say lands in the manifest, and the pattern is read off the code and said.
    assert_eq!(ctx.manifest.validation.inputs["rows"].expand().unwrap(), vec![7]);
    assert!(ctx.manifest.kernel.library.as_deref().is_some_and(|l| l.starts_with("torch.nn.functional.layer_norm")));
    assert_eq!(ctx.manifest.kernel.pattern, Some(peak_spec::Pattern::RowReduction));
    assert!(notes.iter().any(|n| n.starts_with("pattern row-reduction read off the code (the kernel's name `layernorm_rows_forward`)")), "{notes:?}");
    assert_eq!(
        launch_line(&ctx),
        "launch(\"layernorm_rows_forward\", ceil_div(rows, BLOCK_X), BLOCK_X, 0, out, mean, rstd, inp, scale, shift, rows, width, eps);"
    );
    let host = ctx.region(Region::Host);
    assert!(host.contains("row = blockIdx.x * blockDim.x + threadIdx.x, guarded by `row < rows`"), "{host}");
    assert!(host.contains("out has rows * width elements: each thread handles several"), "{host}");
    assert!(host.contains("passed by name from [scalars] in peak.toml (given with --scalar): eps = 1.0e-5."), "{host}");
    assert!(!host.contains("copy("), "out is written through an alias, never read: {host}");
    let roles: Vec<(&str, bool)> = ctx.manifest.arrays.iter().map(|a| (a.name.as_str(), a.output)).collect();
    assert_eq!(roles, [("out", true), ("mean", true), ("rstd", true), ("inp", false), ("scale", false), ("shift", false)]);
    assert_device_only(&ctx, "layernorm_rows_forward");
    let macros = ctx.region(Region::Macros);
    assert!(macros.starts_with(HEADER), "the file's leading comment stays at the top:\n{macros}");
    assert!(
        macros.contains("\n#define ENABLE_BF16\n") && macros.contains("#define GELU_TANH_SCALE sqrtf(2.0f / M_PI)"),
        "the file's own macros are kept: {macros}"
    );
    assert!(!ctx.region(Region::Device).contains("floatX"), "{}", ctx.region(Region::Device));
    let notes = notes.join("\n");
    assert!(notes.contains("read helpers.h: the kernel uses nothing of it"), "{notes}");
    assert_training_notes(&notes, "gelu_bf16_forward, softmax_rows_forward, softmax_block_forward, linear_forward_naive", 4);
}

#[test]
fn softmax_keeps_infinity_for_the_prelude() {
    let choices = ImportChoices {
        kernel: Some("softmax_rows_forward".into()),
        sizes: pairs(&[("probs", "rows * cols"), ("logits", "rows * cols")]),
        inputs: inputs(&[("rows", 1024), ("cols", 1024)]),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, choices);
    assert_eq!(launch_line(&ctx), "launch(\"softmax_rows_forward\", ceil_div(rows, BLOCK_X), BLOCK_X, 0, probs, logits, rows, cols);");
    assert!(ctx.region(Region::Host).contains("r = threadIdx.x + blockIdx.x * blockDim.x, guarded by `r < rows`"), "{}", ctx.region(Region::Host));
    assert!(ctx.region(Region::Device).contains("-INFINITY"));
    assert_device_only(&ctx, "softmax_rows_forward");
    assert_training_notes(&notes.join("\n"), "gelu_bf16_forward, layernorm_rows_forward, softmax_block_forward, linear_forward_naive", 4);
}

#[test]
fn a_block_per_row_softmax_gets_a_block_per_row_and_shared_memory_per_thread() {
    let choices = ImportChoices {
        kernel: Some("softmax_block_forward".into()),
        sizes: pairs(&[("probs", "rows * cols"), ("logits", "rows * cols")]),
        inputs: inputs(&[("rows", 1024), ("cols", 1024)]),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, choices);
    assert_eq!(launch_line(&ctx), "launch(\"softmax_block_forward\", rows, BLOCK_X, BLOCK_X * 4, probs, logits, rows, cols);");
    let host = ctx.region(Region::Host);
    assert!(host.contains("row = its block index, guarded by `row >= rows`") && host.contains("dynamic shared memory of float"), "{host}");
    let device = ctx.region(Region::Device);
    assert!(device.contains("extern __shared__ float partial[];") && device.contains("-FLT_MAX"), "{device}");
    assert_device_only(&ctx, "softmax_block_forward");
    let notes = notes.join("\n");
    assert!(!notes.contains("added #include"), "a float kernel needs no half-precision header: {notes}");
    assert_training_notes(&notes, "gelu_bf16_forward, layernorm_rows_forward, softmax_rows_forward, linear_forward_naive", 4);
}

#[test]
fn gelu_follows_floatx_through_the_header_to_bf16() {
    let choices = ImportChoices {
        kernel: Some("gelu_bf16_forward".into()),
        sizes: pairs(&[("out", "n"), ("inp", "n")]),
        inputs: inputs(&[("n", 1 << 20)]),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, choices);
    assert!(ctx.manifest.arrays.iter().all(|a| a.dtype == DType::Bf16), "#define ENABLE_BF16 picks helpers.h's bf16 floatX: {:?}", ctx.manifest.arrays);
    assert_eq!(launch_line(&ctx), "launch(\"gelu_bf16_forward\", ceil_div(n, BLOCK_X), BLOCK_X, 0, out, inp, n);");
    assert!(
        ctx.region(Region::Host).contains("i = blockIdx.x * blockDim.x + threadIdx.x, guarded by `i >= n`"),
        "an early return is a bound: {}",
        ctx.region(Region::Host)
    );
    let macros = ctx.region(Region::Macros);
    assert!(macros.contains("\n#include <cuda_bf16.h>\n") && macros.contains("#define GELU_TANH_SCALE sqrtf(2.0f / M_PI)"), "{macros}");
    let device = ctx.region(Region::Device);
    assert!(
        device.starts_with("typedef __nv_bfloat16 floatX;\n\n__device__ inline float gelu_tanh(float x) {"),
        "the header's typedef, then the helper the kernel calls:\n{device}"
    );
    assert!(!device.contains("typedef float floatX") && !device.contains("lane_sum") && !device.contains("ceil_div"), "{device}");
    let notes = notes.join("\n");
    for said in ["added #include <cuda_bf16.h>: the kernel uses __nv_bfloat16", "took from helpers.h what the kernel uses: floatX"] {
        assert!(notes.contains(said), "notes say `{said}`:\n{notes}");
    }
    assert_training_notes(&notes, "layernorm_rows_forward, softmax_rows_forward, softmax_block_forward, linear_forward_naive", 2);
    assert_device_only(&ctx, "gelu_bf16_forward");
}

#[test]
fn a_linear_layer_gets_a_2d_grid() {
    let choices = ImportChoices {
        kernel: Some("linear_forward_naive".into()),
        sizes: pairs(&[("out", "tokens * out_dim"), ("inp", "tokens * in_dim"), ("weight", "out_dim * in_dim"), ("bias", "out_dim")]),
        inputs: inputs(&[("tokens", 256), ("in_dim", 256), ("out_dim", 512)]),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, choices);
    assert_eq!(
        launch_line(&ctx),
        "launch(\"linear_forward_naive\", [ceil_div(out_dim, BLOCK_X), ceil_div(tokens, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, out, inp, weight, bias, tokens, in_dim, out_dim);"
    );
    assert_eq!(ctx.manifest.constraints.tuning, ["BLOCK_X * BLOCK_Y >= 32", "BLOCK_X * BLOCK_Y <= 1024"]);
    let outputs: Vec<&str> = ctx.manifest.arrays.iter().filter(|a| a.output).map(|a| a.name.as_str()).collect();
    assert_eq!(outputs, ["out"], "bias is const, whatever the kernel does with its pointer");
    assert_device_only(&ctx, "linear_forward_naive");
    assert_training_notes(&notes.join("\n"), "gelu_bf16_forward, layernorm_rows_forward, softmax_rows_forward, softmax_block_forward", 4);
}

#[test]
fn a_gemm_header_takes_alpha_and_beta_and_updates_c_in_place() {
    let choices = ImportChoices {
        sizes: pairs(&[("A", "M * K"), ("B", "K * N"), ("C", "M * N")]),
        inputs: inputs(&[("M", 256), ("N", 256), ("K", 256)]),
        scalars: [("alpha".to_string(), 1.0), ("beta".to_string(), 0.5)].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import("realistic/sgemm_alpha_beta.cuh", choices);
    assert_eq!(
        launch_line(&ctx),
        "launch(\"gemm_naive_alpha_beta\", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, M, N, K, alpha, beta);"
    );
    let host = ctx.region(Region::Host);
    assert!(
        host.contains("The kernel reads C as well as writing it: in place") && !host.contains("copy(") && host.contains("alpha = 1.0, beta = 0.5"),
        "C = alpha A B + beta C reads C: {host}"
    );
    assert!(
        host.contains("col = blockIdx.x * blockDim.x + threadIdx.x, guarded by `col < N`")
            && host.contains("row = blockIdx.y * blockDim.y + threadIdx.y, guarded by `row < M`"),
        "{host}"
    );
    let roles: Vec<(&str, bool, bool)> = ctx.manifest.arrays.iter().map(|a| (a.name.as_str(), a.output, a.inout)).collect();
    assert_eq!(roles, [("A", false, false), ("B", false, false), ("C", true, true)], "C in place: output and inout");
    assert_device_only(&ctx, "gemm_naive_alpha_beta");
    assert!(ctx.region(Region::Device).contains("const uint col"), "uint is the prelude's to define");
    assert!(ctx.region(Region::Macros).starts_with(HEADER));
    let notes = notes.join("\n");
    assert!(
        notes.contains("left out #include <cstdio>, <cstdlib>, <cuda_runtime.h>, <cublas_v2.h>: NVRTC")
            && notes.contains("host functions (run_gemm_naive_alpha_beta)"),
        "{notes}"
    );
}

#[test]
fn an_opencl_axpy_without_a_bound_keeps_blocks_inside_the_array() {
    let choices = ImportChoices {
        sizes: pairs(&[("xs", "4096"), ("ys", "4096")]),
        scalars: [("alpha".to_string(), 2.0)].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, _, _dir) = import("realistic/axpy.cl", choices);
    assert_eq!(launch_line(&ctx), "launch(\"axpy_inplace\", ceil_div(4096, BLOCK_X), BLOCK_X, 0, alpha, xs, ys);");
    assert_eq!(ctx.manifest.constraints.tuning, ["4096 % BLOCK_X == 0"]);
    let roles: Vec<(&str, bool, bool)> = ctx.manifest.arrays.iter().map(|a| (a.name.as_str(), a.output, a.inout)).collect();
    assert_eq!(roles, [("xs", false, false), ("ys", true, true)], "xs is not const, but the kernel only reads it; ys is updated in place");
    let host = ctx.region(Region::Host);
    assert!(host.contains("idx = get_global_id(0), which it never checks against a bound") && !host.contains("copy("), "{host}");
    assert!(ctx.region(Region::Macros).starts_with(HEADER));
    assert!(ctx.region(Region::Device).starts_with("__kernel void axpy_inplace(const float alpha,"), "{}", ctx.region(Region::Device));
}

#[test]
fn a_linear_layer_takes_its_gemm_shaping_and_tolerance_from_the_import() {
    let linear = |shaping: &str| ImportChoices {
        kernel: Some("linear_forward_naive".into()),
        sizes: pairs(&[("out", "tokens * out_dim"), ("inp", "tokens * in_dim"), ("weight", "out_dim * in_dim"), ("bias", "out_dim")]),
        inputs: inputs(&[("tokens", 256), ("in_dim", 256), ("out_dim", 512)]),
        shaping: [("inp".to_string(), peak_spec::import::array_shaping(shaping).unwrap())].into_iter().collect(),
        tolerance: Some(peak_spec::import::tolerance(&[("f32".into(), "1e-4".into())]).unwrap()),
        matmul: Some(
            peak_spec::import::matmul_shape(
                "m = \"tokens\", n = \"out_dim\", k = \"in_dim\", a = \"inp\", b = \"weight\", c = \"out\", b_layout = \"col\", bias = \"bias\"",
            )
            .unwrap(),
        ),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, linear("init = \"normal\", scale = 0.5"));
    let m = &ctx.manifest;
    assert_eq!(m.kernel.matmul.as_ref().map(|g| (g.b_layout, g.bias.as_deref())), Some((peak_spec::Layout::Col, Some("bias"))));
    assert_eq!(m.kernel.flops.as_deref(), Some("2 * (tokens) * (out_dim) * (in_dim)"));
    assert_eq!(ctx.pattern().unwrap().pattern, peak_spec::Pattern::Gemm);
    assert!(!notes.join("\n").contains("read off the code"), "a GEMM described is not guessed: {notes:?}");
    assert_eq!(m.tolerance.as_ref().and_then(|t| t.f32), Some(1e-4));
    let inp = m.arrays.iter().find(|a| a.name == "inp").unwrap();
    let written = std::fs::read_to_string(ctx.dir.join("peak.toml")).unwrap();
    assert!(written.contains("init = \"normal\"") && written.contains("scale = 0.5"), "{written}");
    assert!(inp.seed.is_some(), "the import's seed stays: {inp:?}");

    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("ctx");
    let e = import_file(&fixture(TRAINING), &to, None, &linear("range = [0, 10]")).unwrap_err();
    assert!(e.contains("range") && e.contains("inp"), "a float array cannot take an integer range: {e}");
    assert!(!to.exists(), "nothing is left behind");
}

#[test]
fn a_declared_pattern_wins_over_the_code() {
    let choices = ImportChoices {
        kernel: Some("softmax_rows_forward".into()),
        sizes: pairs(&[("probs", "rows * cols"), ("logits", "rows * cols")]),
        inputs: inputs(&[("rows", 64), ("cols", 64)]),
        pattern: Some(peak_spec::Pattern::Elementwise),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import(TRAINING, choices);
    assert_eq!(ctx.pattern().unwrap().pattern, peak_spec::Pattern::Elementwise);
    assert!(!notes.join("\n").contains("read off the code"), "{notes:?}");
}
