//! One backend test suite, written once, instantiated by every backend crate:
//!
//! ```ignore
//! peak_backend::backend_test_suite!(peak_spec::Language::Opencl, || peak_opencl::OpenClBackend::new().map_err(|e| e.to_string()));
//! ```
//!
//! The constructor returns `Err(reason)` when the backend's library or device is missing;
//! every test then prints that it skipped and why, and passes. Kernels for each source
//! language live here, side by side, so a new backend adds its dialect in one place.

use peak_spec::{Context, ExecParams, HostArray, Language};

use crate::backend::Backend;
use crate::runner::{RunError, RunOptions, run};

/// The opened backend, or `None` after printing why a test skips (`SKIPPED: no NAME backend
/// here: reason`): for tests outside the suite that need one backend.
pub fn opened_or_skip<B, E: std::fmt::Display>(opened: Result<B, E>, name: &str) -> Option<B> {
    match opened {
        Ok(backend) => Some(backend),
        Err(e) => {
            eprintln!("SKIPPED: no {name} backend here: {e}");
            None
        }
    }
}

/// Kernels of the suite in one source language. `{KERNEL}` names the entry point.
pub struct Dialect {
    pub source_file: &'static str,
    /// `out[i] = a[i] + b[i] * SCALE` for i < n, SCALE a tuning define.
    pub vector_add: &'static str,
    /// `out[i] = s[i] + x * i + y` with `x` an f32, `y` an u32 and `s` scratch.
    pub scalar_args: &'static str,
    /// Writes only the first half of `out`.
    pub half_writer: &'static str,
    /// Does not compile: names an undeclared identifier `undeclared_thing`.
    pub broken: &'static str,
    /// How the launch script passes the work size: grid in blocks (CUDA, HLSL) or in
    /// threads (OpenCL's global size is `grid * block`, which the backend handles).
    pub threads_per_block: u32,
}

pub fn dialect(language: Language) -> Dialect {
    match language {
        Language::Opencl => Dialect {
            source_file: "kernel.cl",
            vector_add: "__kernel void vadd(__global const float* a, __global const float* b, __global float* out, int n) {\n  int i = get_global_id(0);\n  if (i < n) out[i] = a[i] + b[i] * SCALE;\n}\n",
            scalar_args: "__kernel void scal(__global const float* s, __global float* out, int n, float x, uint y) {\n  int i = get_global_id(0);\n  if (i < n) out[i] = s[i] + x * (float)i + (float)y;\n}\n",
            half_writer: "__kernel void half_w(__global float* out, int n) {\n  int i = get_global_id(0);\n  if (i < n / 2) out[i] = 1.0f;\n}\n",
            broken: "__kernel void vadd(__global float* out) { out[0] = undeclared_thing; }\n",
            threads_per_block: 64,
        },
        Language::Cuda | Language::Hip => Dialect {
            source_file: if language == Language::Cuda { "kernel.cu" } else { "kernel.hip" },
            vector_add: "extern \"C\" __global__ void vadd(const float* a, const float* b, float* out, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = a[i] + b[i] * SCALE;\n}\n",
            scalar_args: "extern \"C\" __global__ void scal(const float* s, float* out, int n, float x, unsigned y) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = s[i] + x * (float)i + (float)y;\n}\n",
            half_writer: "extern \"C\" __global__ void half_w(float* out, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n / 2) out[i] = 1.0f;\n}\n",
            broken: "extern \"C\" __global__ void vadd(float* out) { out[0] = undeclared_thing; }\n",
            threads_per_block: 64,
        },
        // The launch's kernel name is the HLSL entry point; scalars travel in a push-constant
        // block, which glslang only honours on a ConstantBuffer<T> (a plain `Params p;`
        // lands in the $Global uniform buffer instead).
        Language::Hlsl => Dialect {
            source_file: "kernel.hlsl",
            vector_add: "RWStructuredBuffer<float> a : register(u0);\nRWStructuredBuffer<float> b : register(u1);\nRWStructuredBuffer<float> outp : register(u2);\nstruct Params { int n; };\n[[vk::push_constant]] ConstantBuffer<Params> p;\n[numthreads(64, 1, 1)]\nvoid vadd(uint3 id : SV_DispatchThreadID) {\n  if ((int)id.x < p.n) outp[id.x] = a[id.x] + b[id.x] * SCALE;\n}\n",
            scalar_args: "RWStructuredBuffer<float> s : register(u0);\nRWStructuredBuffer<float> outp : register(u1);\nstruct Params { int n; float x; uint y; };\n[[vk::push_constant]] ConstantBuffer<Params> p;\n[numthreads(64, 1, 1)]\nvoid scal(uint3 id : SV_DispatchThreadID) {\n  if ((int)id.x < p.n) outp[id.x] = s[id.x] + p.x * (float)id.x + (float)p.y;\n}\n",
            half_writer: "RWStructuredBuffer<float> outp : register(u0);\nstruct Params { int n; };\n[[vk::push_constant]] ConstantBuffer<Params> p;\n[numthreads(64, 1, 1)]\nvoid half_w(uint3 id : SV_DispatchThreadID) {\n  if ((int)id.x < p.n / 2) outp[id.x] = 1.0;\n}\n",
            broken: "RWStructuredBuffer<float> outp : register(u0);\n[numthreads(64, 1, 1)]\nvoid vadd(uint3 id : SV_DispatchThreadID) { outp[0] = undeclared_thing; }\n",
            threads_per_block: 64,
        },
    }
}

/// Write a one-kernel context into a temporary folder and load it.
pub fn context(language: Language, device: &str, host: &str, arrays: &str, tuning: &str) -> (tempfile::TempDir, Context) {
    let d = dialect(language);
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = format!(
        "[kernel]\nname = \"suite\"\nbackend = \"{}\"\nsource = \"{}\"\n\n[inputs]\nn = {{ values = [1000] }}\n\n{arrays}\n{tuning}\n",
        language.name(),
        d.source_file
    );
    std::fs::write(dir.path().join("peak.toml"), manifest).expect("suite manifest writes");
    std::fs::write(dir.path().join(d.source_file), format!("// @peak macros\n// @peak device\n{device}// @peak host\n{host}")).expect("suite source writes");
    let ctx = Context::load(dir.path()).expect("suite context loads");
    (dir, ctx)
}

fn array(name: &str, init: &str, output: bool) -> String {
    format!("[[arrays]]\nname = \"{name}\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"{init}\"\noutput = {output}\n")
}

fn first(ctx: &Context) -> ExecParams {
    ctx.space().iter().next().expect("suite context has a point")
}

fn quick() -> RunOptions {
    RunOptions { warmup: 1, repetitions: 3, check_inputs: true, ..RunOptions::default() }
}

fn launch_1d(d: &Dialect, kernel: &str, args: &str) -> String {
    format!("launch(\"{kernel}\", ceil_div(n, {tpb}), {tpb}, 0, {args});\n", tpb = d.threads_per_block)
}

pub fn device_info_is_filled(backend: &dyn Backend) {
    let info = backend.device();
    assert!(!info.name.is_empty(), "device name is empty");
    assert!(!info.backend.is_empty());
    assert!(info.max_threads_per_block >= 64, "max threads per block {}", info.max_threads_per_block);
}

pub fn buffers_round_trip(backend: &dyn Backend) {
    let data: Vec<u8> = (0..4096u32).flat_map(|i| i.to_le_bytes()).collect();
    let a = backend.alloc(data.len()).expect("alloc of the first buffer");
    let b = backend.alloc(data.len()).expect("alloc of the second buffer");
    backend.write(a, &data).expect("write");
    backend.copy(a, b, data.len()).expect("copy");
    let mut back = vec![0u8; data.len()];
    backend.read(b, &mut back).expect("read after copy");
    assert_eq!(back, data, "write + copy + read changed the bytes");
    backend.fill(a, &[1, 2, 3, 4], data.len()).expect("fill");
    backend.read(a, &mut back).expect("read after fill");
    assert!(back.chunks(4).all(|c| c == [1, 2, 3, 4]), "fill did not repeat the pattern");
    backend.free(a);
    backend.free(b);
}

pub fn vector_add_matches_host(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let arrays = [array("A", "random", false), array("B", "random", false), array("C", "zeros", true)].join("\n");
    let (_dir, ctx) = context(language, d.vector_add, &launch_1d(&d, "vadd", "A, B, C, n"), &arrays, "[tuning]\nSCALE = { values = [3] }\n");
    let params = first(&ctx);
    let result = run(backend, &ctx, &params, &quick()).unwrap_or_else(|e| panic!("vector add failed: {e}"));
    let sized = crate::runner::size_arrays(&ctx, &params).expect("the suite's arrays size");
    let host = crate::runner::generate_arrays(&sized, 0);
    let expected: Vec<f32> = (0..1000).map(|i| host[0].get_f64(i) as f32 + host[1].get_f64(i) as f32 * 3.0).collect();
    let out = &result.outputs[0].1;
    for (i, e) in expected.iter().enumerate() {
        assert!((out.get_f64(i) as f32 - e).abs() <= 1e-6, "element {i}: got {} expected {e}", out.get_f64(i));
    }
    assert!(result.modified_inputs.is_empty(), "inputs changed: {:?}", result.modified_inputs);
    assert_eq!(result.times_ms.len(), 3);
    assert!(result.times_ms.iter().all(|t| *t >= 0.0 && t.is_finite()), "bad times {:?}", result.times_ms);
}

pub fn fresh_data_seed_changes_inputs(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let arrays = [array("A", "random", false), array("B", "random", false), array("C", "zeros", true)].join("\n");
    let (_dir, ctx) = context(language, d.vector_add, &launch_1d(&d, "vadd", "A, B, C, n"), &arrays, "[tuning]\nSCALE = { values = [1] }\n");
    let params = first(&ctx);
    let once = |seed| {
        let options = RunOptions { data_seed: seed, repetitions: 0, ..quick() };
        run(backend, &ctx, &params, &options).unwrap_or_else(|e| panic!("vector add failed: {e}")).outputs[0].1.clone()
    };
    assert_eq!(once(5), once(5), "same seed, different outputs");
    assert_ne!(once(5), once(6), "a new data seed must give new inputs");
}

pub fn scalar_args_and_scratch(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let host = format!("let s = alloc(\"f32\", n);\nfill(s, 0.5);\n{}", launch_1d(&d, "scal", "s, C, n, f32(2.0), u32(7)"));
    let (_dir, ctx) = context(language, d.scalar_args, &host, &array("C", "zeros", true), "");
    let result = run(backend, &ctx, &first(&ctx), &quick()).unwrap_or_else(|e| panic!("scalar kernel failed: {e}"));
    let out = &result.outputs[0].1;
    for i in [0usize, 1, 500, 999] {
        assert_eq!(out.get_f64(i), 0.5 + 2.0 * i as f64 + 7.0, "element {i}");
    }
}

pub fn unwritten_outputs_stay_poisoned(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let (_dir, ctx) = context(language, d.half_writer, &launch_1d(&d, "half_w", "C, n"), &array("C", "zeros", true), "");
    let result = run(backend, &ctx, &first(&ctx), &quick()).unwrap_or_else(|e| panic!("half writer failed: {e}"));
    let out: &HostArray = &result.outputs[0].1;
    assert_eq!(out.get_f64(0), 1.0);
    assert!(out.get_f64(999).is_nan(), "an unwritten element must read as poison, got {}", out.get_f64(999));
}

/// An output the kernel also reads (`output` and `inout`: C = alpha A B + beta C) starts
/// from its init, not from poison: what the kernel leaves alone keeps its initial value.
pub fn in_place_outputs_start_from_their_init(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let in_place = format!("{}inout = true\n", array("C", "arange", true));
    let (_dir, ctx) = context(language, d.half_writer, &launch_1d(&d, "half_w", "C, n"), &in_place, "");
    let result = run(backend, &ctx, &first(&ctx), &quick()).unwrap_or_else(|e| panic!("half writer failed: {e}"));
    let out: &HostArray = &result.outputs[0].1;
    assert_eq!(out.get_f64(0), 1.0);
    assert_eq!(out.get_f64(999), 999.0, "an element the kernel did not write keeps its init");
}

pub fn compile_error_keeps_the_log(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let (_dir, ctx) = context(language, d.broken, &launch_1d(&d, "vadd", "C"), &array("C", "zeros", true), "");
    match run(backend, &ctx, &first(&ctx), &quick()) {
        Err(err @ RunError::Compile(_)) => {
            assert!(err.to_string().contains("undeclared_thing"), "compiler log lacks the culprit: {err}");
            assert_eq!(err.category(), "compile-failed");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

pub fn unknown_kernel_is_a_launch_failure(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let arrays = [array("A", "random", false), array("B", "random", false), array("C", "zeros", true)].join("\n");
    let (_dir, ctx) = context(language, d.vector_add, &launch_1d(&d, "no_such_kernel", "A, B, C, n"), &arrays, "[tuning]\nSCALE = { values = [1] }\n");
    let err = run(backend, &ctx, &first(&ctx), &quick()).expect_err("launching a missing kernel must fail");
    assert_eq!(err.category(), "launch-failed", "{err}");
    assert!(err.to_string().contains("no_such_kernel"), "{err}");
}

pub fn oversized_block_is_invalid_config(backend: &dyn Backend, language: Language) {
    let d = dialect(language);
    let mut device = d.vector_add.to_string();
    if language == Language::Hlsl {
        // HLSL fixes the block at compile time with [numthreads]: the shader asks for the
        // oversized block itself, and the launch passes the same numbers.
        let over = backend.device().max_threads_per_block * 2;
        assert!(over > 0, "{:?}", backend.device());
        device = device.replace("[numthreads(64, 1, 1)]", &format!("[numthreads({over}, 1, 1)]"));
        assert_ne!(device, d.vector_add, "the HLSL vector add declares [numthreads(64, 1, 1)]");
    }
    let arrays = [array("A", "random", false), array("B", "random", false), array("C", "zeros", true)].join("\n");
    let host = "launch(\"vadd\", 1, MAX_THREADS_PER_BLOCK * 2, 0, A, B, C, n);\n";
    let (_dir, ctx) = context(language, &device, host, &arrays, "[tuning]\nSCALE = { values = [1] }\n");
    let err = run(backend, &ctx, &first(&ctx), &quick()).expect_err("a block over the device limit must not run");
    assert_eq!(err.category(), "invalid-config", "{err}");
}

/// Instantiate the suite: `backend_test_suite!(language, constructor)`.
#[macro_export]
macro_rules! backend_test_suite {
    ($language:expr, $make:expr) => {
        $crate::backend_test_suite!(@tests $language, $make;
            device_info_is_filled,
            buffers_round_trip);
        $crate::backend_test_suite!(@lang_tests $language, $make;
            vector_add_matches_host,
            fresh_data_seed_changes_inputs,
            scalar_args_and_scratch,
            unwritten_outputs_stay_poisoned,
            in_place_outputs_start_from_their_init,
            compile_error_keeps_the_log,
            unknown_kernel_is_a_launch_failure,
            oversized_block_is_invalid_config);
    };
    (@tests $language:expr, $make:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                let make: fn() -> Result<_, String> = $make;
                match make() {
                    Ok(backend) => $crate::testsuite::$name(&backend),
                    Err(why) => eprintln!("SKIPPED {}: {why}", stringify!($name)),
                }
            }
        )*
    };
    (@lang_tests $language:expr, $make:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                let make: fn() -> Result<_, String> = $make;
                match make() {
                    Ok(backend) => $crate::testsuite::$name(&backend, $language),
                    Err(why) => eprintln!("SKIPPED {}: {why}", stringify!($name)),
                }
            }
        )*
    };
}
