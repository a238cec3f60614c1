//! CUDA-only behaviour on a real GPU: the launch-script functions (dynamic shared memory,
//! Hopper tensor maps), argument checks, cache flushing and the cuBLASLt baseline. Without
//! an NVIDIA GPU every test prints why it skipped.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use peak_backend::runner::{RunOptions, run};
use peak_backend::{Backend, CompileRequest};
use peak_cuda::CudaBackend;
use peak_cuda::baseline::run_baseline;
use peak_spec::Context;
use support::gpu;

/// A one-kernel CUDA context: `arrays` is manifest text, `n` the only input.
fn context(device: &str, host: &str, arrays: &str, n: i64) -> (tempfile::TempDir, Context) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = format!("[kernel]\nname = \"t\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n\n[inputs]\nn = {{ values = [{n}] }}\n\n{arrays}");
    std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
    std::fs::write(dir.path().join("k.cu"), format!("// @peak macros\n// @peak device\n{device}// @peak host\n{host}")).unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    (dir, ctx)
}

fn array(name: &str, size: &str, output: bool) -> String {
    let init = if output { "zeros" } else { "random" };
    format!("[[arrays]]\nname = \"{name}\"\ntype = \"f32\"\nsize = \"{size}\"\ninit = \"{init}\"\noutput = {output}\n\n")
}

fn quick() -> RunOptions {
    RunOptions { warmup: 1, repetitions: 2, ..RunOptions::default() }
}

const BIG_SHARED: &str = r#"extern "C" __global__ void big(const float* a, float* out, int n) {
    extern __shared__ float buf[];
    int words = 100 * 1024 / 4;
    for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = a[i % n];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[i] + buf[words - 1 - (i % words)];
}
"#;

#[test]
fn dynamic_shared_memory_above_48k_needs_the_script_function() {
    let Some(backend) = gpu("dynamic_shared_memory_above_48k_needs_the_script_function") else { return };
    let arrays = format!("{}{}", array("A", "n", false), array("C", "n", true));
    let launch = "launch(\"big\", 1, 256, 100 * 1024, A, C, n);\n";
    let (_d, ctx) = context(BIG_SHARED, launch, &arrays, 4096);
    let params = ctx.space().iter().next().unwrap();
    let err = run(&backend, &ctx, &params, &quick()).expect_err("100 KB of dynamic shared memory needs the opt-in");
    assert_eq!(err.category(), "invalid-config", "{err}");
    assert!(err.to_string().contains("cuda_max_dynamic_shared(\"big\", 102400)"), "{err}");

    let raised = format!("cuda_max_dynamic_shared(\"big\", 100 * 1024);\n{launch}");
    let (_d, ctx) = context(BIG_SHARED, &raised, &arrays, 4096);
    let result = run(&backend, &ctx, &params, &quick()).unwrap_or_else(|e| panic!("{e}"));
    let a = peak_backend::runner::generate_arrays(&peak_backend::runner::size_arrays(&ctx, &params).unwrap(), 0);
    let words = 100 * 1024 / 4;
    let out = &result.outputs[0].1;
    for i in [0usize, 1, 4095] {
        let expected = a[0].get_f64(i) as f32 + a[0].get_f64((words - 1 - i) % 4096) as f32;
        assert_eq!(out.get_f64(i) as f32, expected, "element {i}");
    }

    let too_much = format!("cuda_max_dynamic_shared(\"big\", 1024 * 1024);\n{launch}");
    let (_d, ctx) = context(BIG_SHARED, &too_much, &arrays, 4096);
    let err = run(&backend, &ctx, &params, &quick()).expect_err("1 MB of shared memory exists on no GPU");
    assert_eq!(err.category(), "invalid-config", "{err}");
}

/// One block per 32 × 32 tile: thread 0 starts a bulk tensor copy of the block's tile into
/// shared memory through the tensor map, every thread waits on the mbarrier, then writes
/// the tile doubled.
const TMA: &str = r#"struct __align__(64) TensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void tma_copy(const __grid_constant__ TensorMap map, float* out, int n) {
    __shared__ __align__(128) float tile[32 * 32];
    __shared__ __align__(8) unsigned long long bar;
    unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned tile_addr = (unsigned)__cvta_generic_to_shared(tile);
    int x = blockIdx.x * 32, y = blockIdx.y * 32;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_addr), "r"(32 * 32 * 4) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(tile_addr), "l"(&map), "r"(x), "r"(y), "r"(bar_addr) : "memory");
    }
    asm volatile("{\n.reg .pred done;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n@!done bra WAIT;\n}\n" :: "r"(bar_addr) : "memory");
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) {
        out[(y + i / 32) * n + x + i % 32] = tile[i] * 2.0f;
    }
}
"#;

#[test]
fn a_tensor_map_feeds_the_bulk_copy_engine() {
    let Some(backend) = gpu("a_tensor_map_feeds_the_bulk_copy_engine") else { return };
    if !backend.arch().as_str().starts_with("sm_9") && !backend.arch().as_str().starts_with("sm_1") {
        eprintln!("SKIPPED a_tensor_map_feeds_the_bulk_copy_engine: {} has no tensor memory accelerator (Hopper or newer)", backend.arch());
        return;
    }
    let arrays = format!("{}{}", array("A", "n * n", false), array("C", "n * n", true));
    let host = "let map = cuda_tensor_map(A, \"f32\", [n, n], [n * 4], [32, 32], \"none\");\nlaunch(\"tma_copy\", [n / 32, n / 32], 128, 0, map, C, n);\n";
    let (_d, ctx) = context(TMA, host, &arrays, 256);
    let params = ctx.space().iter().next().unwrap();
    let result = run(&backend, &ctx, &params, &quick()).unwrap_or_else(|e| panic!("{e}"));
    let a = peak_backend::runner::generate_arrays(&peak_backend::runner::size_arrays(&ctx, &params).unwrap(), 0);
    let out = &result.outputs[0].1;
    for i in 0..256 * 256 {
        assert_eq!(out.get_f64(i), 2.0 * a[0].get_f64(i), "element {i}");
    }

    // A map reaching past its buffer fails before anything runs on the device.
    let past_end = host.replace("[n, n], [n * 4]", "[n, n + 1], [n * 4]");
    let (_d, ctx) = context(TMA, &past_end, &arrays, 256);
    let err = run(&backend, &ctx, &params, &quick()).expect_err("the map is one row too long");
    assert_eq!(err.category(), "launch-failed", "{err}");
    assert!(err.to_string().contains("reaches"), "{err}");

    // A box too wide for the swizzle depends on tuning parameters: pruned, not failed.
    let wide = host.replace("\"none\"", "\"64b\"");
    let (_d, ctx) = context(TMA, &wide, &arrays, 256);
    assert_eq!(run(&backend, &ctx, &params, &quick()).unwrap_err().category(), "invalid-config");
}

#[test]
fn arguments_are_checked_against_the_kernel_parameters() {
    let Some(backend) = gpu("arguments_are_checked_against_the_kernel_parameters") else { return };
    let device = "extern \"C\" __global__ void k(float* out, long long n) { if (threadIdx.x < n) out[threadIdx.x] = 1.0f; }\n\
                  __global__ void mangled(float* out) { out[0] = 2.0f; }\n";
    let arrays = array("C", "n", true);
    let cases = [
        ("launch(\"k\", 1, 32, 0, C);\n", "takes 2 arguments"),
        ("launch(\"k\", 1, 32, 0, C, n);\n", "argument 1 is 4 bytes"),
        ("launch(\"mangled\", 1, 1, 0, C);\n", "extern \"C\""),
    ];
    for (host, needle) in cases {
        let (_d, ctx) = context(device, host, &arrays, 64);
        let params = ctx.space().iter().next().unwrap();
        let err = run(&backend, &ctx, &params, &quick()).expect_err(host);
        assert_eq!(err.category(), "launch-failed", "{err}");
        assert!(err.to_string().contains(needle), "{host}: {err}");
    }
    let (_d, ctx) = context(device, "launch(\"k\", 1, 32, 0, C, i64(n));\n", &arrays, 64);
    let params = ctx.space().iter().next().unwrap();
    let result = run(&backend, &ctx, &params, &quick()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.outputs[0].1.get_f64(31), 1.0);
    assert!(result.outputs[0].1.get_f64(32).is_nan(), "only 32 threads ran");
}

#[test]
fn the_driver_reports_each_kernels_resources() {
    let Some(backend) = gpu("the_driver_reports_each_kernels_resources") else { return };
    let request = CompileRequest {
        source: "extern \"C\" __global__ void k(float* o) { __shared__ float s[300]; s[threadIdx.x] = 1.0f; __syncthreads(); o[threadIdx.x] = s[299 - threadIdx.x]; }\n".into(),
        defines: vec![],
        file_name: "k.cu".into(),
    };
    let module = backend.compile(&request).unwrap();
    let k = &module.kernels[0];
    assert_eq!(k.shared_bytes, Some(1200));
    assert!(k.registers.unwrap() > 0);
    assert!(k.max_threads_per_block.unwrap() >= 256, "{k:?}");
    assert_eq!(backend.device().arch, backend.arch().to_string());
}

#[test]
fn timing_with_cache_flushes_runs() {
    let Some(backend) = gpu("timing_with_cache_flushes_runs") else { return };
    let device = "extern \"C\" __global__ void scale(const float* a, float* out, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = 3.0f * a[i]; }\n";
    let arrays = format!("{}{}", array("A", "n", false), array("C", "n", true));
    let (_d, ctx) = context(device, "launch(\"scale\", ceil_div(n, 256), 256, 0, A, C, n);\n", &arrays, 1 << 20);
    let params = ctx.space().iter().next().unwrap();
    let options = RunOptions { flush_cache: true, input_sets: 2, repetitions: 5, ..RunOptions::default() };
    let result = run(&backend, &ctx, &params, &options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.times_ms.len(), 5);
    assert!(result.times_ms.iter().all(|t| *t > 0.0));
}

#[test]
fn the_cublaslt_baseline_agrees_with_every_example() {
    let Some(backend) = gpu("the_cublaslt_baseline_agrees_with_every_example") else { return };
    for (name, hip) in [("matmul-cuda-f32", false), ("matmul-cuda-f16", false), ("matmul-hip-f32", true), ("matmul-hip-f16", true)] {
        let ctx = Context::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).unwrap();
        let mut space = ctx.space();
        space.apply_overrides(&["n=2048", "BLOCK_X=32", "BLOCK_Y=8"]).unwrap();
        let params = space.iter().next().unwrap();
        let hip_backend;
        let backend = if hip {
            hip_backend = CudaBackend::hip().unwrap();
            &hip_backend
        } else {
            &backend
        };
        let report = run_baseline(backend, &ctx, &params, &quick()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(report.validation.passed, "{name}: the kernel disagrees with cuBLASLt: {:?}", report.validation);
        assert!(report.percent_of_cublas > 0.0 && report.cublas_timing.tflops > 0.0, "{name}");
        assert_eq!(report.kernel_timing.times_ms.len(), 2);
    }
}
