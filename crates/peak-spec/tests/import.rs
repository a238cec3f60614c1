//! Kernel files from public codebases, brought in as a user would (tests/fixtures/import,
//! whose README names each file's origin): each becomes a context that loads, keeps the
//! kernel and what it uses and nothing of the host code, and gets a launch read from how
//! the kernel indexes its threads. `crates/peak-cli/tests/import_fixtures.rs` runs the
//! same files through `peak new`, compiles the CUDA ones with NVRTC and runs the OpenCL
//! one.

use std::path::{Path, PathBuf};

use peak_spec::import::{ImportChoices, import_file};
use peak_spec::{Context, DType, Region};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import").join(path)
}

/// `--size A=EXPR`-style pairs.
fn pairs(list: &[(&str, &str)]) -> indexmap::IndexMap<String, String> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
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

/// Host code, host-only headers and the other kernels never reach the device region.
fn assert_device_only(ctx: &Context, kernel: &str) {
    let device = ctx.region(Region::Device);
    let macros = ctx.region(Region::Macros);
    for host in ["int main(", "cudaMalloc", "cudaCheck(cuda", "<<<", "printf("] {
        assert!(!device.contains(host), "{kernel}: `{host}` in the device region:\n{device}");
    }
    for header in ["<stdio.h>", "<stdlib.h>", "<cuda_runtime.h>", "<assert.h>", "<cublas_v2.h>", "<cooperative_groups.h>"] {
        assert!(!macros.lines().any(|l| l.starts_with("#include") && l.contains(header)), "{kernel}: {header} kept:\n{macros}");
    }
    assert_eq!(device.matches("__global__").count(), 1, "{kernel}: only the chosen kernel:\n{device}");
    assert!(device.contains(&format!("extern \"C\" __global__ void {kernel}(")), "{device}");
}

#[test]
fn llmc_layernorm_gets_one_thread_per_row() {
    let choices = ImportChoices {
        kernel: Some("layernorm_forward_kernel1".into()),
        sizes: pairs(&[("out", "N * C"), ("mean", "N"), ("rstd", "N"), ("inp", "N * C"), ("weight", "C"), ("bias", "C")]),
        inputs: [("N".to_string(), vec![1024]), ("C".to_string(), vec![768])].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import("llm.c/layernorm_forward.cu", choices);
    assert_eq!(launch_line(&ctx), "launch(\"layernorm_forward_kernel1\", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, mean, rstd, inp, weight, bias, N, C);");
    let host = ctx.region(Region::Host);
    assert!(host.contains("idx = blockIdx.x * blockDim.x + threadIdx.x, guarded by `idx < N`"), "{host}");
    assert!(host.contains("out has N * C elements: each thread handles several"), "{host}");
    assert_device_only(&ctx, "layernorm_forward_kernel1");
    assert!(ctx.region(Region::Macros).starts_with("/*\n * From https://github.com/karpathy/llm.c"), "the licence stays at the top");
    let notes = notes.join("\n");
    assert!(notes.contains("read llm.c/common.h: the kernel uses nothing of it") || notes.contains("read common.h: the kernel uses nothing of it"), "{notes}");
    assert!(notes.contains("the other kernels (mean_kernel, rstd_kernel, normalization_kernel, layernorm_forward_kernel3"), "{notes}");
}

#[test]
fn llmc_softmax_keeps_infinity_for_the_prelude() {
    let choices = ImportChoices {
        kernel: Some("softmax_forward_kernel1".into()),
        sizes: pairs(&[("out", "N * C"), ("inp", "N * C")]),
        inputs: [("N".to_string(), vec![1024]), ("C".to_string(), vec![1024])].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, _, _dir) = import("llm.c/softmax_forward.cu", choices);
    assert_eq!(launch_line(&ctx), "launch(\"softmax_forward_kernel1\", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, N, C);");
    assert!(ctx.region(Region::Device).contains("-INFINITY"));
    assert_device_only(&ctx, "softmax_forward_kernel1");
}

#[test]
fn llmc_gelu_follows_floatx_through_the_header_to_bf16() {
    let choices = ImportChoices {
        kernel: Some("gelu_forward_kernel1".into()),
        sizes: pairs(&[("out", "N"), ("inp", "N")]),
        inputs: [("N".to_string(), vec![1 << 20])].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, notes, _dir) = import("llm.c/gelu_forward.cu", choices);
    assert!(ctx.manifest.arrays.iter().all(|a| a.dtype == DType::Bf16), "#define ENABLE_BF16 picks common.h's bf16 floatX: {:?}", ctx.manifest.arrays);
    assert_eq!(launch_line(&ctx), "launch(\"gelu_forward_kernel1\", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, N);");
    let macros = ctx.region(Region::Macros);
    assert!(macros.contains("#include <cuda_bf16.h>") && macros.contains("#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)"), "{macros}");
    assert!(ctx.region(Region::Device).starts_with("typedef __nv_bfloat16 floatX;"), "{}", ctx.region(Region::Device));
    assert!(notes.iter().any(|n| n.contains("what the kernel uses: floatX")), "{notes:?}");
    assert_device_only(&ctx, "gelu_forward_kernel1");
}

#[test]
fn llmc_matmul_gets_a_2d_grid() {
    let choices = ImportChoices {
        kernel: Some("matmul_forward_kernel1".into()),
        sizes: pairs(&[("out", "BT * OC"), ("inp", "BT * C"), ("weight", "OC * C"), ("bias", "OC")]),
        inputs: [("BT".to_string(), vec![256]), ("C".to_string(), vec![256]), ("OC".to_string(), vec![512])].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, _, _dir) = import("llm.c/matmul_forward.cu", choices);
    assert_eq!(
        launch_line(&ctx),
        "launch(\"matmul_forward_kernel1\", [ceil_div(BT, BLOCK_X), ceil_div(OC, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, out, inp, weight, bias, BT, C, OC);"
    );
    assert_eq!(ctx.manifest.constraints.tuning, ["BLOCK_X * BLOCK_Y >= 32", "BLOCK_X * BLOCK_Y <= 1024"]);
    assert_device_only(&ctx, "matmul_forward_kernel1");
}

#[test]
fn sgemm_naive_takes_alpha_and_beta_and_starts_c_from_an_input() {
    let choices = ImportChoices {
        sizes: pairs(&[("A", "M * K"), ("B", "K * N"), ("C", "M * N")]),
        inputs: [("M".to_string(), vec![256]), ("N".to_string(), vec![256]), ("K".to_string(), vec![256])].into_iter().collect(),
        scalars: [("alpha".to_string(), 1.0), ("beta".to_string(), 0.5)].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, _, _dir) = import("SGEMM_CUDA/1_naive.cuh", choices);
    assert_eq!(launch_line(&ctx), "launch(\"sgemm_naive\", [ceil_div(M, BLOCK_X), ceil_div(N, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, M, N, K, 1.0, A, B, 0.5, C);");
    let host = ctx.region(Region::Host);
    assert!(host.contains("copy(C_in, C);") && host.contains("alpha = 1.0, beta = 0.5"), "C = alpha A B + beta C reads C: {host}");
    assert_device_only(&ctx, "sgemm_naive");
    assert!(!ctx.region(Region::Macros).contains("#pragma once"));
}

#[test]
fn khronos_saxpy_without_a_bound_keeps_blocks_inside_the_array() {
    let choices = ImportChoices {
        sizes: pairs(&[("x", "4096"), ("y", "4096")]),
        scalars: [("a".to_string(), 2.0)].into_iter().collect(),
        ..ImportChoices::default()
    };
    let (ctx, _, _dir) = import("OpenCL-SDK/saxpy.cl", choices);
    assert_eq!(launch_line(&ctx), "launch(\"saxpy\", ceil_div(4096, BLOCK_X), BLOCK_X, 0, 2.0, x, y);");
    assert_eq!(ctx.manifest.constraints.tuning, ["4096 % BLOCK_X == 0"]);
    let roles: Vec<(&str, bool)> = ctx.manifest.arrays.iter().map(|a| (a.name.as_str(), a.output)).collect();
    assert_eq!(roles, [("x", false), ("y", true), ("y_in", false)], "x is not const, but the kernel only reads it");
    assert!(ctx.region(Region::Host).contains("gid = get_global_id(0), which it never checks against a bound"), "{}", ctx.region(Region::Host));
    assert!(ctx.region(Region::Macros).starts_with("/*\n * Copyright (c) 2021 The Khronos Group Inc."));
}
