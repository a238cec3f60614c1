//! The HLSL example contexts on whatever Vulkan device is present (lavapipe in CI), at a
//! small n: the naive kernels against a host reference, and the hand-written tiled stages
//! against the naive kernel's outputs with `peak_spec::compare`, as `peak check` does.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use peak_backend::runner::{generate_arrays, size_arrays};
use peak_backend::testsuite::opened_or_skip;
use peak_backend::{Backend, RunOptions, run};
use peak_hlsl::HlslBackend;
use peak_spec::{Context, DType, ExecParams, HostArray, compare, default_tolerance};

/// Small enough for lavapipe on two cores, large enough for every tile shape to divide
/// it in some configurations.
const N: i64 = 128;

fn backend() -> Option<HlslBackend> {
    opened_or_skip(HlslBackend::new(), "HLSL")
}

fn example(name: &str) -> Context {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    Context::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The valid points of `ctx` at n = N: the first and a reproducible random sample.
fn points(ctx: &Context, sample: usize) -> Vec<ExecParams> {
    let mut space = ctx.space();
    space.restrict("n", vec![N]).unwrap();
    let first = space.iter().next().expect("a valid configuration at the test size");
    let rest = space.sample(sample, 7).into_iter().filter(|p| p != &first);
    std::iter::once(first.clone()).chain(rest).collect()
}

fn once() -> RunOptions {
    RunOptions { repetitions: 0, warmup: 0, ..RunOptions::default() }
}

/// C = A x B on the host, in f64, from the arrays the runner generates for `params`.
fn host_matmul(ctx: &Context, params: &ExecParams, dtype: DType) -> HostArray {
    let arrays = generate_arrays(&size_arrays(ctx, params).unwrap(), 0);
    let n = N as usize;
    let mut bytes = Vec::new();
    for r in 0..n {
        for c in 0..n {
            let acc: f64 = (0..n).map(|k| arrays[0].get_f64(r * n + k) * arrays[1].get_f64(k * n + c)).sum();
            bytes.extend(HostArray::filled(dtype, 1, acc).bytes);
        }
    }
    HostArray { dtype, bytes }
}

fn output(backend: &HlslBackend, ctx: &Context, params: &ExecParams) -> HostArray {
    let result = run(backend, ctx, params, &once()).unwrap_or_else(|e| panic!("{} {params}: {e}", ctx.dir.display()));
    result.outputs.into_iter().next().expect("one output").1
}

#[test]
fn naive_f32_matches_the_host() {
    let Some(backend) = backend() else { return };
    let ctx = example("matmul-hlsl-f32");
    let tolerance = default_tolerance(DType::F32, Some(N));
    let points = points(&ctx, 3);
    let reference = host_matmul(&ctx, &points[0], DType::F32);
    for params in &points {
        let cmp = compare(&output(&backend, &ctx, params), &reference, tolerance);
        assert!(cmp.passed, "naive {params}: {cmp:?}");
    }
}

#[test]
fn naive_f16_matches_the_host() {
    let Some(backend) = backend() else { return };
    let ctx = example("matmul-hlsl-f16");
    let params = &points(&ctx, 0)[0];
    if !backend.supports_f16() {
        let err = run(&backend, &ctx, params, &once()).expect_err("f16 without device support must fail");
        assert!(err.to_string().contains("shaderFloat16"), "{err}");
        eprintln!("SKIPPED f16 results: {} lacks shaderFloat16/storageBuffer16BitAccess", backend.device().name);
        return;
    }
    let reference = host_matmul(&ctx, params, DType::F16);
    let cmp = compare(&output(&backend, &ctx, params), &reference, default_tolerance(DType::F16, Some(N)));
    assert!(cmp.passed, "f16 naive {params}: {cmp:?}");
}

/// Each hand-written stage, in several configurations, against the naive kernel.
fn stage_matches_naive(stage: &str) {
    let Some(backend) = backend() else { return };
    let naive = example("matmul-hlsl-f32");
    let reference = output(&backend, &naive, &points(&naive, 0)[0]);
    let ctx = example(stage);
    let tolerance = default_tolerance(DType::F32, Some(N));
    let points = points(&ctx, 5);
    assert!(points.len() >= 4, "{stage}: only {} configurations at n={N}", points.len());
    for params in &points {
        let cmp = compare(&output(&backend, &ctx, params), &reference, tolerance);
        assert!(cmp.passed, "{stage} {params}: {cmp:?}");
    }
}

#[test]
fn tb_tiled_stage_matches_naive() {
    stage_matches_naive("matmul-hlsl-f32-tiled");
}

#[test]
fn thread_tiled_stage_matches_naive() {
    stage_matches_naive("matmul-hlsl-f32-thread-tiled");
}
