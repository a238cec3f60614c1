//! Whole-command tests of `peak export`: a recorded OpenCL workflow's checkpoint and an
//! OpenCL example context are exported, their harnesses built with `cc -lOpenCL` and run
//! on PoCL, and the outputs compared bit for bit with `peak run`'s on the same inputs; the
//! CUDA case study's checkpoint is exported and its kernel file compiled alone with NVRTC
//! (`peak compile`), and its harness checked against the kernels' signatures. Each test
//! skips, saying why, where PoCL, a C compiler, the OpenCL headers or NVRTC are missing.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use peak_spec::{DType, HostArray};
use serde_json::Value;
use support::{Env, example, nvrtc_present, opencl_present, s};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// A C compiler and the OpenCL headers and library, or the reason there are none.
fn c_opencl_present(test: &str) -> bool {
    if !opencl_present(test) {
        return false;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("probe.c");
    std::fs::write(
        &src,
        "#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\nint main(void) { cl_uint n; return clGetPlatformIDs(0, 0, &n) != CL_SUCCESS; }\n",
    )
    .unwrap();
    match Command::new("cc").arg(&src).arg("-o").arg(dir.path().join("probe")).arg("-lOpenCL").output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            eprintln!(
                "SKIPPED {test}: cc cannot build against OpenCL (install ocl-icd-opencl-dev and opencl-headers: scripts/install-deps.sh): {}",
                String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or_default()
            );
            false
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: no C compiler `cc` ({e})");
            false
        }
    }
}

/// Build the exported folder with its build.sh, run the harness dumping its outputs into
/// the folder, and return the median time it printed.
fn build_and_run(dir: &Path) -> f64 {
    build_and_run_output(dir, "C")
}

fn build_and_run_output(dir: &Path, output: &str) -> f64 {
    let built = Command::new("sh").arg(dir.join("build.sh")).output().unwrap();
    assert!(built.status.success(), "build.sh failed:\n{}\n{}", String::from_utf8_lossy(&built.stdout), String::from_utf8_lossy(&built.stderr));
    let out = Command::new(dir.join("harness")).args(["--warmup", "1", "--reps", "3", "--dump"]).arg(dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the harness failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find(|l| l.starts_with("median_ms: ")).unwrap_or_else(|| panic!("no median_ms line:\n{stdout}"));
    let ms: f64 = line["median_ms: ".len()..].split_whitespace().next().unwrap().parse().unwrap();
    assert!(ms > 0.0 && ms.is_finite(), "{line}");
    assert!(stdout.contains(&format!("output {output}: ")) && stdout.contains(", 0 NaN"), "{stdout}");
    ms
}

/// `peak run` at the exported configuration; each output's digest by name.
fn peak_digests(env: &Env, context: &str, params: &Value) -> Vec<(String, String)> {
    let mut args = vec!["run".to_string(), context.to_string(), "--reps".into(), "1".into(), "--warmup".into(), "0".into(), "--json".into()];
    for part in ["inputs", "tuning"] {
        for (k, v) in params[part].as_object().unwrap() {
            args.push("--set".into());
            args.push(format!("{k}={v}"));
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = env.json(&args);
    run["outputs"].as_array().unwrap().iter().map(|o| (o["name"].as_str().unwrap().to_string(), o["digest"].as_str().unwrap().to_string())).collect()
}

fn assert_same_outputs(dir: &Path, digests: &[(String, String)]) {
    assert!(!digests.is_empty());
    for (name, digest) in digests {
        let bytes = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let ours = HostArray { dtype: DType::F32, bytes }.digest();
        assert_eq!(&ours, digest, "output {name}: the exported harness's bytes differ from peak run's");
    }
}

#[test]
fn a_recorded_opencl_checkpoint_exports_builds_runs_and_matches_peak() {
    let test = "a_recorded_opencl_checkpoint_exports_builds_runs_and_matches_peak";
    if !c_opencl_present(test) {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    peak_workflow::clone_bundle(&repo("examples/workflows/matmul-opencl-agent.bundle"), &wf).unwrap();
    let out = env.path("out");
    let report = env.json(&["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--json"]);

    // The best configuration of the record, with where it came from.
    assert_eq!(report["params"]["inputs"]["n"], 256, "{report}");
    assert_eq!(report["params"]["tuning"]["TILE_K"], 16);
    assert_eq!(report["origin"]["transformation"], "Thread-Tiling");
    assert!(report["recorded_time_ms"].as_f64().unwrap() > 0.0);
    let files: Vec<&str> = report["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files, ["kernel.cl", "harness.c", "build.sh", "Makefile", "README.txt"]);
    let kernel = std::fs::read_to_string(out.join("kernel.cl")).unwrap();
    assert!(kernel.contains("#define TILE_K 16") && kernel.contains("#define BLOCK_X 16") && !kernel.contains("@peak"), "{kernel}");
    // The launch the script makes: ceil(256 / (16 * 2)) x ceil(256 / (4 * 8)) groups of 16 x 4.
    let steps = report["sequence"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["grid"], serde_json::json!([8, 8, 1]));
    assert_eq!(steps[0]["block"], serde_json::json!([16, 4, 1]));
    let readme = std::fs::read_to_string(out.join("README.txt")).unwrap();
    assert!(readme.contains("cc -O2 -std=c99 -o harness harness.c -lOpenCL") && readme.contains("launch matmul grid [8, 8, 1] block [16, 4, 1]"), "{readme}");

    build_and_run(&out);
    let digests = peak_digests(&env, s(&wf.join("context")), &report["params"]);
    assert_same_outputs(&out, &digests);
}

#[test]
fn an_opencl_context_exports_with_set_and_bad_input_is_refused() {
    let test = "an_opencl_context_exports_with_set_and_bad_input_is_refused";
    if !c_opencl_present(test) {
        return;
    }
    let env = Env::new();
    let ctx = example("matmul-opencl-tiled");
    let out = env.path("out");

    // A context has no performance record: every parameter is needed, and named.
    let missing = env.peak(&["export", &ctx, "--to", s(&out)]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("missing parameter(s) n, TILE") && stderr.contains("--set TILE=VALUE"), "{stderr}");
    assert!(!out.exists(), "nothing is written on a refusal");
    let broken = env.peak(&["export", &ctx, "--to", s(&out), "--set", "n=96", "--set", "TILE=64"]);
    assert_eq!(broken.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&broken.stderr).contains("does not satisfy the constraints"));
    let unknown = env.peak(&["export", &ctx, "--to", s(&out), "--set", "NOPE=1"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not an input or tuning parameter"));

    let report = env.json(&["export", &ctx, "--to", s(&out), "--set", "n=64", "--set", "TILE=8", "--json"]);
    assert_eq!(report["origin"]["kind"], "context");
    assert!(report["recorded_time_ms"].is_null());
    build_and_run(&out);
    assert_same_outputs(&out, &peak_digests(&env, &ctx, &report["params"]));

    // The folder is not empty now: refused, unless --force.
    let again = env.peak(&["export", &ctx, "--to", s(&out), "--set", "n=64", "--set", "TILE=8"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty") && String::from_utf8_lossy(&again.stderr).contains("--force"));
    env.ok(&["export", &ctx, "--to", s(&out), "--set", "n=64", "--set", "TILE=4", "--force"]);
    assert!(std::fs::read_to_string(out.join("kernel.cl")).unwrap().contains("#define TILE 4"));

    // Unknown checkpoints and HLSL contexts are refused with what was expected.
    let wf = env.path("wf");
    peak_workflow::clone_bundle(&repo("examples/workflows/matmul-opencl-agent.bundle"), &wf).unwrap();
    let nope = env.peak(&["export", "no-such-tag", "-w", s(&wf), "--to", &env.arg("x")]);
    assert_eq!(nope.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nope.stderr).contains("unknown checkpoint `no-such-tag`"), "{}", String::from_utf8_lossy(&nope.stderr));
    // A checkpoint with no performance record names what it lacks, and exports with --set.
    let unmeasured = env.path("unmeasured");
    env.ok(&["init", s(&unmeasured), "--from", &example("matmul-opencl-naive"), "--no-measure", "--set", "n=256"]);
    let bare = env.peak(&["export", "root", "-w", s(&unmeasured), "--to", &env.arg("bare")]);
    assert_eq!(bare.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bare.stderr);
    assert!(stderr.contains("missing parameter(s) n, BLOCK_X, BLOCK_Y: the checkpoint has no performance record"), "{stderr}");
    let given =
        env.json(&["export", "root", "-w", s(&unmeasured), "--to", &env.arg("bare"), "--set", "n=256", "--set", "BLOCK_X=8", "--set", "BLOCK_Y=8", "--json"]);
    assert_eq!(given["origin"]["transformation"], "init");
    assert_eq!(given["param_sources"][1], serde_json::json!(["BLOCK_X", "--set"]));

    let hlsl = env.peak(&["export", &example("matmul-hlsl-f32"), "--to", &env.arg("h"), "--set", "n=64"]);
    assert_eq!(hlsl.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&hlsl.stderr).contains("does not support HLSL"), "{}", String::from_utf8_lossy(&hlsl.stderr));
}

/// `name(params)` of every `__global__` kernel in a CUDA file: name and parameter count.
/// Attributes between `__global__` and the name (`__launch_bounds__(...)`,
/// `__cluster_dims__(...)`) are skipped.
fn kernel_signatures(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("__global__") {
        rest = &rest[i + "__global__".len()..];
        loop {
            rest = rest.trim_start();
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap();
            let (word, after) = rest.split_at(end);
            let after = after.trim_start();
            if word.starts_with("__") && after.starts_with('(') {
                rest = &after[balanced(after).len() + 2..];
            } else if word == "void" || word.is_empty() {
                rest = after;
                if word.is_empty() {
                    panic!("cannot read the kernel after __global__: {}", &rest[..rest.len().min(80)]);
                }
            } else {
                out.push((word.to_string(), count_top_level(&balanced(after))));
                rest = after;
                break;
            }
        }
    }
    out
}

/// The text inside the parentheses `text` starts with.
fn balanced(text: &str) -> String {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return text[1..i].to_string();
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced: {text}");
}

fn count_top_level(args: &str) -> usize {
    if args.trim().is_empty() {
        return 0;
    }
    let mut depth = 0;
    let mut n = 1;
    for c in args.chars() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' | '>' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => n += 1,
            _ => {}
        }
    }
    n
}

#[test]
fn the_cuda_case_study_checkpoint_exports_a_kernel_nvrtc_compiles_alone() {
    let test = "the_cuda_case_study_checkpoint_exports_a_kernel_nvrtc_compiles_alone";
    if !nvrtc_present(test) {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    peak_workflow::clone_bundle(&repo("bench/results/h200-replayed-matmul-cuda-f32-main.bundle"), &wf).unwrap();
    let out = env.path("out");
    // The tip's best configuration splits nothing: export one of its top configurations
    // from an earlier replay, which splits k four ways (a second kernel and a scratch buffer).
    let split_k = [
        "BLOCK_X=16",
        "BLOCK_Y=8",
        "CHUNK_X=2",
        "CHUNK_Y=2",
        "GROUP_M=1",
        "K_SPLITS=4",
        "NUM_STAGES=4",
        "OFFSET=1",
        "TILE_K=16",
        "TRD_X=8",
        "TRD_Y=8",
        "VEC=4",
    ];
    let mut args = vec!["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--json", "--set", "n=4096"];
    for set in &split_k {
        args.extend(["--set", set]);
    }
    let report = env.json(&args);
    assert_eq!(report["params"]["tuning"]["K_SPLITS"], 4, "{report}");
    assert_eq!(report["params"]["inputs"]["n"], 4096);
    let files: Vec<&str> = report["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files, ["matmul.cu", "harness.cu", "build.sh", "Makefile", "README.txt"]);
    assert!(report["build"].as_str().unwrap().starts_with("nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a "), "{}", report["build"]);

    // Split-K: the matmul into a scratch buffer of K_SPLITS * n * n, then the reduction;
    // 4 stages of 16 x (64 + 4) and 16 x (128 + 4) f32 tiles need the opt-in shared memory.
    let seq = &report["sequence"];
    let kernels: Vec<&str> = seq["steps"].as_array().unwrap().iter().map(|s| s["kernel"].as_str().unwrap()).collect();
    assert_eq!(kernels, ["matmul", "matmul_splitk_reduce"]);
    assert_eq!(seq["steps"][0]["shared_bytes"], 51200);
    assert_eq!(seq["steps"][0]["grid"], serde_json::json!([32, 64, 4]));
    assert_eq!(seq["setup"][0], serde_json::json!({"kind": "max_dynamic_shared", "kernel": "matmul", "bytes": 51200}));
    let scratch = &seq["buffers"][3];
    assert_eq!((scratch["role"].as_str(), scratch["count"].as_u64()), (Some("scratch"), Some(4 * 4096 * 4096)));

    let kernel = std::fs::read_to_string(out.join("matmul.cu")).unwrap();
    assert!(kernel.contains("#define K_SPLITS 4") && !kernel.contains("@peak"));
    compiles_alone_and_the_harness_matches(&env, &out, "matmul.cu", &["matmul", "matmul_splitk_reduce"]);
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    assert!(harness.contains("cudaFuncSetAttribute((const void *)matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, 51200)"));
    assert!(harness.contains("cudaMalloc(&peak_buf[3], 268435456ull)"), "the scratch buffer at its exported size");
}

/// The exported kernel file compiles on its own with NVRTC (`peak compile` on a context
/// around it with no tuning parameters, so no -D options, only what the file defines), and
/// every launch in the harness includes it and passes as many arguments as its kernel takes
/// (nvcc is not here to compile the harness itself; nvcc's signature check there is
/// peak-export's test).
fn compiles_alone_and_the_harness_matches(env: &Env, out: &Path, file: &str, kernels: &[&str]) {
    let kernel = std::fs::read_to_string(out.join(file)).unwrap();
    let alone = env.path("alone");
    let _ = std::fs::remove_dir_all(&alone);
    std::fs::create_dir(&alone).unwrap();
    std::fs::write(alone.join(file), format!("// @peak macros\n// @peak device\n{kernel}// @peak host\nlaunch(\"{}\", 1, 1, 0);\n", kernels[0])).unwrap();
    std::fs::write(
        alone.join("peak.toml"),
        format!("[kernel]\nname = \"{}\"\nbackend = \"cuda\"\nsource = \"{file}\"\n\n[[arrays]]\nname = \"C\"\ntype = \"f32\"\nsize = \"16\"\ninit = \"zeros\"\noutput = true\n", kernels[0]),
    )
    .unwrap();
    let compiled = env.json(&["compile", s(&alone), "--json"]);
    let variant = &compiled["variants"][0]["nvrtc"];
    assert_eq!(variant["status"], "ok", "{compiled}");
    assert!(!variant["options"].as_str().unwrap().contains(" -D"), "{}", variant["options"]);
    let compiled_kernels: Vec<&str> = variant["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    for k in kernels {
        assert!(compiled_kernels.contains(k), "{k} not in {compiled_kernels:?}");
    }

    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    assert!(harness.contains(&format!("#include \"{file}\"")));
    let signatures = kernel_signatures(&kernel);
    assert_eq!(signatures.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), kernels);
    for (name, params) in &signatures {
        // peak_launch(kernel, NVRTC's function, "name", grid, block, shared bytes, arguments...):
        // NVRTC's build (peak's) runs, with the arguments converted to nvcc's signature.
        let at = harness.find(&format!("    peak_launch({name}, ")).unwrap_or_else(|| panic!("no launch of {name} in harness.cu"));
        let args = balanced(&harness[at + "    peak_launch".len()..]);
        assert_eq!(count_top_level(&args) - 6, *params, "{name}: the harness passes ({args}), the kernel takes {params} parameters");
    }
}

#[test]
fn the_tma_case_study_checkpoint_exports_its_tensor_maps() {
    let test = "the_tma_case_study_checkpoint_exports_its_tensor_maps";
    if !nvrtc_present(test) {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    peak_workflow::clone_bundle(&repo("bench/results/h200-replayed-matmul-cuda-f16-tma-multicast.bundle"), &wf).unwrap();
    let out = env.path("out");
    let report = env.json(&["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--json"]);
    assert_eq!(report["origin"]["transformation"], "TMA-Multicast", "{report}");
    let n = report["params"]["inputs"]["n"].as_u64().unwrap();
    let tile_m = 64 * report["params"]["tuning"]["WG_M"].as_u64().unwrap();
    // cuda_tensor_map(A, "f16", [n, n], [n * 2], [64, tile_m], "128b") and B's [64, 64] box.
    let maps = report["sequence"]["tensor_maps"].as_array().unwrap();
    assert_eq!(maps.len(), 2);
    assert_eq!(maps[0], serde_json::json!({"buffer": 0, "dtype": "f16", "dims": [n, n], "strides": [n * 2], "box_dims": [64, tile_m], "swizzle": "128b"}));
    assert_eq!(maps[1]["box_dims"], serde_json::json!([64, 64]));
    let args = &report["sequence"]["steps"][0]["args"];
    assert_eq!(args[0], serde_json::json!({"kind": "tensor_map", "map": 0}));
    assert_eq!(args[1], serde_json::json!({"kind": "tensor_map", "map": 1}));

    compiles_alone_and_the_harness_matches(&env, &out, "matmul.cu", &["matmul"]);
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    assert!(harness.contains("#include <cuda.h>") && harness.contains("cuTensorMapEncodeTiled"));
    assert!(harness.contains(&format!("const cuuint32_t box[] = {{ 64u, {tile_m}u }}")), "{harness}");
    assert!(harness.contains("    peak_launch(matmul, peak_fn[0], \"matmul\", ") && harness.contains(", peak_maps[0], peak_maps[1], PeakPtr{peak_buf[2]}, "));
}

/// A context whose launch script allocates scratch, fills it, launches with a float
/// argument and `__local` memory, and copies the scratch into the output: every step kind
/// the harnesses write.
fn steps_context(dir: &Path, backend: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let (file, device) = match backend {
        "opencl" => (
            "axpy.cl",
            "__kernel void axpy(__global const float* X, __global float* Y, float a, int n, __local float* tile) {\n    int i = get_global_id(0);\n    tile[get_local_id(0)] = X[i];\n    barrier(CLK_LOCAL_MEM_FENCE);\n    if (i < n) Y[i] += a * tile[get_local_id(0)] * SCALE;\n}\n",
        ),
        _ => (
            "axpy.hip",
            "extern \"C\" __global__ void axpy(const float* X, float* Y, float a, int n) {\n    extern __shared__ float tile[];\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    tile[threadIdx.x] = X[i];\n    __syncthreads();\n    if (i < n) Y[i] += a * tile[threadIdx.x] * SCALE;\n}\n",
        ),
    };
    let host = "let t = alloc(\"f32\", n);\nfill(t, 1.5);\nlaunch(\"axpy\", [n / BLOCK], [BLOCK], BLOCK * 4, X, t, f32(0.25), n);\ncopy(t, Y);\n";
    std::fs::write(dir.join(file), format!("// @peak macros\n// @peak device\n{device}// @peak host\n{host}")).unwrap();
    std::fs::write(
        dir.join("peak.toml"),
        format!(
            "[kernel]\nname = \"axpy\"\nbackend = \"{backend}\"\nsource = \"{file}\"\n\n[inputs]\nn = {{ values = [1024] }}\n\n[[arrays]]\nname = \"X\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"random\"\nseed = 3\n\n[[arrays]]\nname = \"Y\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n\n[tuning]\nBLOCK = {{ values = [64] }}\nSCALE = {{ values = [2] }}\n\n[constraints]\ntuning = [\"n % BLOCK == 0\"]\n"
        ),
    )
    .unwrap();
}

#[test]
fn scratch_fill_copy_and_local_memory_export_to_opencl_and_match_peak() {
    let test = "scratch_fill_copy_and_local_memory_export_to_opencl_and_match_peak";
    if !c_opencl_present(test) {
        return;
    }
    let env = Env::new();
    let ctx = env.path("axpy");
    steps_context(&ctx, "opencl");
    let out = env.path("out");
    let report = env.json(&["export", s(&ctx), "--to", s(&out), "--set", "n=1024", "--set", "BLOCK=64", "--set", "SCALE=2", "--json"]);
    let kinds: Vec<&str> = report["sequence"]["steps"].as_array().unwrap().iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["fill", "launch", "copy"], "{report}");
    let harness = std::fs::read_to_string(out.join("harness.c")).unwrap();
    assert!(harness.contains("clEnqueueFillBuffer") && harness.contains("clEnqueueCopyBuffer") && harness.contains("256, NULL)); /* __local"), "{harness}");
    build_and_run_output(&out, "Y");
    let digests = peak_digests(&env, s(&ctx), &report["params"]);
    assert_same_outputs(&out, &digests);
}

#[test]
fn a_hip_export_builds_with_hipcc() {
    let test = "a_hip_export_builds_with_hipcc";
    if Command::new("hipcc").arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("SKIPPED {test}: no hipcc on the PATH (apt-get install hipcc)");
        return;
    }
    if !nvrtc_present(test) {
        return;
    }
    let env = Env::new();
    let ctx = env.path("axpy");
    steps_context(&ctx, "hip");
    let out = env.path("out");
    let report = env.json(&["export", s(&ctx), "--to", s(&out), "--set", "n=1024", "--set", "BLOCK=64", "--set", "SCALE=2", "--json"]);
    assert_eq!(report["build"], "hipcc -O3 -std=c++17 -o harness harness.hip");
    // No AMD GPU here to run it: compile and link it for one.
    let built = Command::new("hipcc").current_dir(&out).args(["--offload-arch=gfx90a", "-O3", "-std=c++17", "-o", "harness", "harness.hip"]).output().unwrap();
    assert!(built.status.success(), "hipcc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    assert!(out.join("harness").is_file());
    // And the matmul example, exported at a configuration of its own.
    let out2 = env.path("out2");
    env.ok(&["export", &example("matmul-hip-f32"), "--to", s(&out2), "--set", "n=256", "--set", "BLOCK_X=16", "--set", "BLOCK_Y=16"]);
    let built = Command::new("hipcc").current_dir(&out2).args(["--offload-arch=gfx90a", "-O3", "-std=c++17", "-o", "harness", "harness.hip"]).output().unwrap();
    assert!(built.status.success(), "hipcc failed:\n{}", String::from_utf8_lossy(&built.stderr));
}
