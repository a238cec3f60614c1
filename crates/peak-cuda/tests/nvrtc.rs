//! NVRTC without a GPU: compiling, resource reports, errors, the HIP prelude and
//! compile-only mode over the examples. Each test skips, saying why, where NVRTC is
//! missing (`scripts/install-nvrtc.sh` installs it).

use std::path::{Path, PathBuf};

use peak_backend::{BackendError, CompileRequest};
use peak_cuda::compile_only::{CompileOnlyOptions, compile_context, variants};
use peak_cuda::nvrtc::{self, Arch, Dialect};
use peak_spec::Context;

fn nvrtc_present(test: &str) -> bool {
    match peak_cuda::libs::nvrtc() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            false
        }
    }
}

fn request(source: &str, defines: &[(&str, &str)]) -> CompileRequest {
    CompileRequest {
        source: source.to_string(),
        defines: defines.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        file_name: "ctx/kernel.cu".into(),
    }
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

const RESOURCES: &str = r#"
extern "C" __global__ void tile(const float* a, float* out, int n) {
    __shared__ float s[TILE];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % TILE];
}
extern "C" __global__ void local_array(const float* a, float* out, int n) {
    float v[512];
    for (int i = 0; i < 512; ++i) v[i] = a[i * n + threadIdx.x];
    out[threadIdx.x] = v[n & 511] + v[(n >> 3) & 511];
}
"#;

#[test]
fn resources_come_from_ptxas_per_kernel_and_defines_reach_the_code() {
    if !nvrtc_present("resources_come_from_ptxas_per_kernel_and_defines_reach_the_code") {
        return;
    }
    for tile in [64, 256] {
        let cubin = nvrtc::compile(&request(RESOURCES, &[("TILE", &tile.to_string())]), Dialect::Cuda, &Arch::default()).unwrap();
        assert!(cubin.image.starts_with(b"\x7fELF"), "a cubin is an ELF image");
        let names: Vec<&str> = cubin.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let tile_k = cubin.kernels.iter().find(|k| k.name == "tile").unwrap();
        assert_eq!(tile_k.shared_bytes, Some(tile * 4), "static shared memory follows the TILE define");
        assert!(tile_k.registers.unwrap() > 0);
        let local = cubin.kernels.iter().find(|k| k.name == "local_array").unwrap();
        assert!(local.local_bytes.unwrap() >= 2048, "a run-time-indexed float[512] lives in local memory: {local:?}");
        assert!(cubin.options.iter().any(|o| o == "--gpu-architecture=sm_90a"), "{:?}", cubin.options);
        assert!(cubin.options.iter().any(|o| o == &format!("-DTILE={tile}")));
    }
}

#[test]
fn compile_errors_keep_the_log_the_file_name_and_the_options() {
    if !nvrtc_present("compile_errors_keep_the_log_the_file_name_and_the_options") {
        return;
    }
    let source = "// line 1\n// line 2\nextern \"C\" __global__ void k(float* o) { o[0] = undeclared_thing; }\n";
    match nvrtc::compile(&request(source, &[("X", "1")]), Dialect::Cuda, &Arch::default()) {
        Err(BackendError::Compile { log, options }) => {
            assert!(log.contains("undeclared_thing"), "{log}");
            assert!(log.contains("ctx/kernel.cu(3)"), "messages name the context's file and line: {log}");
            assert!(options.contains("--gpu-architecture=sm_90a") && options.contains("-DX=1"), "{options}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn hip_source_compiles_through_the_prelude() {
    if !nvrtc_present("hip_source_compiles_through_the_prelude") {
        return;
    }
    // No #include at all, as hipcc allows; every covered name used once.
    let source = r#"
#include <hip/hip_fp16.h>
extern "C" __global__ void k(const __half* a, float* out, int n) {
    HIP_DYNAMIC_SHARED(float, dyn)
    __shared__ float fixed[32];
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x + hipThreadIdx_y + hipThreadIdx_z
          + hipBlockIdx_y + hipBlockIdx_z + hipBlockDim_y + hipBlockDim_z + hipGridDim_x + hipGridDim_y + hipGridDim_z;
    float v = i < n ? __half2float(__hadd(a[i], __float2half(1.0f))) : 0.0f;
    v += __shfl_down(v, 1) + __shfl_xor(v, 2) + __shfl_up(v, 1) + __shfl(v, 0);
    fixed[__lane_id()] = v;
    dyn[hipThreadIdx_x] = v;
    __syncthreads();
    __threadfence_block();
    unsigned long long mask = __ballot(v > 0.0f);
    if (__any(v > 1.0f) && __all(v > -1.0f) && i < n) out[i] = fixed[31 - __lane_id()] + dyn[0] + (float)(mask & 1);
}
"#;
    let cubin = nvrtc::compile(&request(source, &[]), Dialect::Hip, &Arch::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cubin.kernels.len(), 1);
    assert_eq!(cubin.kernels[0].shared_bytes, Some(128), "the static array; dynamic shared memory is set at launch");
    // The same source is not CUDA: the prelude is what makes it compile.
    let err = nvrtc::compile(&request(source, &[]), Dialect::Cuda, &Arch::default()).unwrap_err();
    assert!(err.to_string().contains("hip/hip_fp16.h"), "{err}");
}

/// What nvcc's host headers give and NVRTC lacks, written as kernels from the wild use it.
const NVCC_NAMES: &str = r#"
#define FLT_EPSILON 1.1920928955078125e-07F
constexpr float NEG_INF = -INFINITY;
extern "C" __global__ void k(float* out, uint n) {
    ushort lane = threadIdx.x;
    float v = fmaxf(NEG_INF, (float)M_PI) + FLT_MAX * 0.0f + FLT_MIN + FLT_EPSILON + (float)M_SQRT1_2 + (float)INT_MAX;
    if (lane < n && !isnan(NAN)) out[lane] = v;
}
"#;

#[test]
fn the_prelude_gives_what_nvcc_host_headers_would() {
    if !nvrtc_present("the_prelude_gives_what_nvcc_host_headers_would") {
        return;
    }
    for dialect in [Dialect::Cuda, Dialect::Hip] {
        let cubin = nvrtc::compile(&request(NVCC_NAMES, &[]), dialect, &Arch::default()).unwrap_or_else(|e| panic!("{dialect:?}: {e}"));
        assert_eq!(cubin.kernels.len(), 1);
        // The source's own FLT_EPSILON wins without a word: it is the same value.
        assert!(!cubin.log.contains("FLT_EPSILON"), "{}", cubin.log);
    }
    // Messages still name the context's file and its own lines.
    let err = nvrtc::compile(&request("extern \"C\" __global__ void k(float* o) {\n o[0] = INFINITY + missing; }\n", &[]), Dialect::Cuda, &Arch::default())
        .unwrap_err();
    assert!(err.to_string().contains("ctx/kernel.cu(2)"), "{err}");
}

#[test]
fn a_repeated_compile_still_reports_resources() {
    if !nvrtc_present("a_repeated_compile_still_reports_resources") {
        return;
    }
    // NVRTC 12.9+ serves repeats from a disk cache that skips ptxas and its report, unless
    // told not to; seen on the H200, where a tuner's second look at a kernel found nothing.
    let source = "extern \"C\" __global__ void again(float* o) { o[threadIdx.x] = 2.0f * o[threadIdx.x]; }\n";
    for round in 0..2 {
        let cubin = nvrtc::compile(&request(source, &[]), Dialect::Cuda, &Arch::default()).unwrap();
        assert_eq!(cubin.kernels.len(), 1, "round {round}: {:?}", cubin.kernels);
        assert!(cubin.options.iter().any(|o| o == "--no-cache"));
    }
}

#[test]
fn mangled_kernels_are_reported_under_their_mangled_names() {
    if !nvrtc_present("mangled_kernels_are_reported_under_their_mangled_names") {
        return;
    }
    let cubin = nvrtc::compile(&request("__global__ void plain(float* o) { o[0] = 1.0f; }\n", &[]), Dialect::Cuda, &Arch::default()).unwrap();
    assert_eq!(cubin.kernels.len(), 1);
    assert!(cubin.kernels[0].name.starts_with("_Z") && cubin.kernels[0].name.contains("plain"), "{:?}", cubin.kernels);
}

#[test]
fn every_cuda_and_hip_example_compiles_in_every_variant() {
    if !nvrtc_present("every_cuda_and_hip_example_compiles_in_every_variant") {
        return;
    }
    for name in ["matmul-cuda-f32", "matmul-cuda-f16", "matmul-hip-f32", "matmul-hip-f16"] {
        let ctx = Context::load(example(name)).unwrap();
        // Two inputs and 51 block shapes: each block shape compiles once.
        let (tunings, points) = variants(&ctx, &[]).unwrap();
        assert_eq!(points, 2 * tunings.len(), "{name}");
        let options = CompileOnlyOptions { offload_arch: None, ..CompileOnlyOptions::default() };
        let report = compile_context(&ctx, &[], &options).unwrap();
        assert_eq!(report.variants.len(), tunings.len());
        assert_eq!(report.failures(), 0, "{name}: {:?}", report.variants.iter().find(|v| !v.nvrtc.ok()));
        for v in &report.variants {
            let k = &v.nvrtc.kernels;
            assert_eq!(k.len(), 1, "{name}");
            assert_eq!(k[0].name, "matmul");
            assert!(k[0].registers.unwrap() > 0 && k[0].spill_stores_bytes == Some(0), "{name}: {k:?}");
        }
    }
}

#[test]
fn set_overrides_narrow_the_variants_and_bad_ones_are_errors() {
    if !nvrtc_present("set_overrides_narrow_the_variants_and_bad_ones_are_errors") {
        return;
    }
    let ctx = Context::load(example("matmul-cuda-f32")).unwrap();
    let set = ["BLOCK_X=16,32".to_string(), "BLOCK_Y=8".to_string(), "n=2048".to_string()];
    let report = compile_context(&ctx, &set, &CompileOnlyOptions::default()).unwrap();
    assert_eq!(report.points, 2);
    let blocks: Vec<i64> = report.variants.iter().map(|v| v.tuning["BLOCK_X"]).collect();
    assert_eq!(blocks, [16, 32]);
    assert!(report.hipcc_skipped.is_none() && report.offload_arch.is_none(), "hipcc is for HIP contexts only");
    let err = compile_context(&ctx, &["BLOKC_X=4".to_string()], &CompileOnlyOptions::default()).unwrap_err();
    assert!(err.to_string().contains("BLOKC_X"), "{err}");
    let err = compile_context(&ctx, &["BLOCK_X=1".to_string(), "BLOCK_Y=1".to_string()], &CompileOnlyOptions::default()).unwrap_err();
    assert!(err.to_string().contains("no execution parameter"), "a 1-thread block breaks the one-warp constraint: {err}");
}

#[test]
fn a_kernel_that_fails_in_one_variant_is_a_result_not_an_abort() {
    if !nvrtc_present("a_kernel_that_fails_in_one_variant_is_a_result_not_an_abort") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("peak.toml"),
        "[kernel]\nname = \"k\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n\n[inputs]\nn = { values = [4] }\n\n[[arrays]]\nname = \"C\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n\n[tuning]\nV = { values = [1, 2] }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("k.cu"),
        "// @peak macros\n// @peak device\n#if V == 2\n#error V=2 is refused\n#endif\nextern \"C\" __global__ void k(float* c, int n) { c[0] = V; }\n// @peak host\nlaunch(\"k\", 1, 1, 0, C, n);\n",
    )
    .unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    let report = compile_context(&ctx, &[], &CompileOnlyOptions::default()).unwrap();
    assert_eq!(report.failures(), 1);
    assert!(report.variants[0].nvrtc.ok());
    let failed = &report.variants[1].nvrtc;
    assert_eq!(failed.status, "compile-failed");
    assert!(failed.log.contains("V=2 is refused") && failed.log.contains("k.cu(4)"), "{}", failed.log);
}

#[test]
fn hip_examples_compile_for_gfx90a_with_hipcc() {
    if !nvrtc_present("hip_examples_compile_for_gfx90a_with_hipcc") {
        return;
    }
    if peak_cuda::hip::hipcc_path().is_none() {
        eprintln!("SKIPPED hip_examples_compile_for_gfx90a_with_hipcc: no hipcc on the PATH (apt-get install hipcc)");
        return;
    }
    for name in ["matmul-hip-f32", "matmul-hip-f16"] {
        let ctx = Context::load(example(name)).unwrap();
        let set = ["BLOCK_X=32".to_string(), "BLOCK_Y=8,16".to_string()];
        let report = compile_context(&ctx, &set, &CompileOnlyOptions::default()).unwrap();
        assert_eq!(report.offload_arch.as_deref(), Some("gfx90a"));
        assert_eq!(report.variants.len(), 2);
        for v in &report.variants {
            let amd = v.hipcc.as_ref().expect("hipcc ran");
            assert!(amd.ok(), "{name}: {}", amd.log);
            assert_eq!(amd.kernels.len(), 1, "{name}: {:?}", amd.kernels);
            assert_eq!(amd.kernels[0].name, "matmul");
            assert!(amd.kernels[0].registers.unwrap() > 0, "VGPRs: {:?}", amd.kernels);
        }
    }
    // A HIP error from hipcc keeps its log and names the context's file.
    let bad = CompileRequest {
        source: "extern \"C\" __global__ void k(float* o) { o[0] = undeclared_thing; }\n".into(),
        defines: vec![],
        file_name: "ctx/k.hip".into(),
    };
    match peak_cuda::hip::hipcc_check(&bad, "gfx90a") {
        Err(BackendError::Compile { log, options }) => {
            assert!(log.contains("undeclared_thing") && log.contains("ctx/k.hip:1"), "{log}");
            assert!(options.contains("--offload-arch=gfx90a"), "{options}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn opening_the_backend_never_panics_and_explains_a_missing_driver() {
    match peak_cuda::CudaBackend::new() {
        Ok(backend) => {
            // An opened backend describes a real device: what the runner and the cache key read.
            let d = peak_backend::Backend::device(&backend);
            assert_eq!(d.backend, "cuda", "{d:?}");
            assert!(!d.name.is_empty() && !d.driver.is_empty(), "{d:?}");
            assert!(d.arch.starts_with("sm_") && d.arch[3..].chars().all(|c| c.is_ascii_alphanumeric()) && d.arch.len() > 3, "{d:?}");
            assert_eq!(d.warp_size, 32, "{d:?}");
            assert!(d.compute_units > 0 && d.max_threads_per_block >= 1024 && d.max_shared_bytes >= 48 * 1024 && d.global_memory_bytes > 0, "{d:?}");
            eprintln!("a CUDA device is present: {}", d.name);
        }
        Err(BackendError::Unavailable { reason, hint, .. }) => {
            assert!(!reason.is_empty() && !hint.is_empty());
            eprintln!("no CUDA device here, as expected on a CPU machine: {reason}");
        }
        Err(other) => panic!("a missing driver must be Unavailable, got {other}"),
    }
}

#[test]
fn opencl_contexts_are_refused_by_compile_only() {
    let ctx = Context::load(example("matmul-opencl-naive")).unwrap();
    let err = compile_context(&ctx, &[], &CompileOnlyOptions::default()).unwrap_err();
    assert!(err.to_string().contains("\"opencl\""), "{err}");
}
