//! `peak export --dispatch` for CUDA (issue 25, item 4): one kernel file, `kernels.cuh`
//! (the file once per configuration, each in its own namespace, its `extern "C"` kernels
//! renamed), `dispatch.h` and an nvcc harness that runs every tuned shape through
//! `peak_dispatch`.
//!
//! Without a GPU: the tip of the twelve-step NT GEMM line with a bias
//! (`examples/workflows/gemm-nt-bias-cuda-deferred.bundle`), given the four GEMMs of a
//! transformer layer as named shapes and a performance record choosing three
//! configurations among them, is exported; `kernels.cuh` compiles with NVRTC for sm_90a
//! (and not without its renames), and `harness.cu` with nvcc `-c` where nvcc is found.
//! The fp16 TMA tip's record (two sizes) exports with each shape's tensor maps encoded over
//! its own buffers, and compiles likewise. The HIP export (the HIP matmul at two named shapes) writes `harness.hip` for hipcc over
//! the same `kernels.cuh`, which compiles through peak's HIP-on-NVRTC prelude.
//! On a GPU: the naive CUDA GEMM at three small odd named shapes is tuned by `peak init`
//! (one best per shape), exported, built with its build.sh and run; each shape's output is
//! `peak run`'s at that shape and configuration, byte for byte.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use peak_backend::Backend;
use peak_record::{PerformanceRecord, Record};
use peak_spec::{Context, DType, HostArray};
use serde_json::{Value, json};
use support::{Env, context_at, example, nvrtc_present, s, unbundle};

/// The GEMMs of a transformer layer (issue 25): MLP up and down, QKV, a decode step.
const LAYER: [(i64, i64, i64); 4] = [(8192, 3072, 768), (8192, 768, 3072), (8192, 2304, 768), (16, 4096, 4096)];

/// Three configurations of the twelve-step line: the design's (16 x 16 threads, 16 x 8
/// outputs each), a narrower one, and one that splits K for the decode step.
fn configs() -> [Value; 3] {
    let design = json!({"BLOCK_X": 16, "BLOCK_Y": 16, "TRD_X": 16, "TRD_Y": 8, "CHUNK_X": 4, "CHUNK_Y": 4, "VEC": 4, "TILE_K": 8, "NUM_STAGES": 2, "K_SPLITS": 1, "OFFSET": 1, "GROUP_M": 8});
    let mut narrow = design.clone();
    narrow["TRD_X"] = json!(8);
    narrow["NUM_STAGES"] = json!(3);
    let mut split = design.clone();
    split["K_SPLITS"] = json!(4);
    split["GROUP_M"] = json!(1);
    [design, narrow, split]
}

/// `ctx` with its inputs replaced by named shapes.
fn with_shapes(ctx: &Path, shapes: &[(i64, i64, i64)]) {
    let mut context = Context::load(ctx).unwrap();
    context.manifest.inputs.clear();
    context.manifest.shapes =
        shapes.iter().map(|&(m, n, k)| [("M".to_string(), m), ("N".to_string(), n), ("K".to_string(), k)].into_iter().collect()).collect();
    context.save(ctx).unwrap();
    let again = Context::load(ctx).unwrap();
    assert!(again.manifest.inputs_from_shapes && again.manifest.shapes.len() == shapes.len());
}

/// nvcc on the PATH, in $CUDA_HOME or /usr/local/cuda, or next to NVRTC's wheel.
fn find_nvcc() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("nvcc")];
    if let Ok(home) = std::env::var("CUDA_HOME") {
        candidates.push(Path::new(&home).join("bin/nvcc"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    if let Some(include) = peak_cuda::libs::nvrtc().ok().and_then(|i| i.include_dir.clone()) {
        candidates.push(include.join("../bin/nvcc"));
    }
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().map(|o| o.status.success()).unwrap_or(false))
}

/// `kernels.cuh` with the kernel file's text in place of its includes, for NVRTC.
fn inlined(out: &Path) -> String {
    let kernel = std::fs::read_to_string(out.join("kernel.cu")).unwrap();
    std::fs::read_to_string(out.join("kernels.cuh")).unwrap().replace("#include \"kernel.cu\"", &kernel)
}

fn nvrtc(source: String) -> Result<peak_cuda::nvrtc::Cubin, peak_backend::BackendError> {
    nvrtc_as(source, peak_cuda::Dialect::Cuda)
}

fn nvrtc_as(source: String, dialect: peak_cuda::Dialect) -> Result<peak_cuda::nvrtc::Cubin, peak_backend::BackendError> {
    let request = peak_backend::CompileRequest { source, defines: Vec::new(), file_name: "kernels.cuh".into() };
    peak_cuda::nvrtc::compile(&request, dialect, &peak_cuda::Arch::parse("sm_90a").unwrap())
}

/// HIP takes the same structure: `harness.hip` for hipcc, the same `kernels.cuh`, which
/// compiles through peak's HIP-on-NVRTC prelude (hipcc itself is not here).
#[test]
fn the_hip_dispatch_export_writes_a_hipcc_harness_over_the_same_instances() {
    let test = "the_hip_dispatch_export_writes_a_hipcc_harness_over_the_same_instances";
    if !nvrtc_present(test) {
        return;
    }
    let env = Env::new();
    let ctx = env.path("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    for file in ["peak.toml", "matmul.hip"] {
        std::fs::copy(Path::new(&example("matmul-hip-f32")).join(file), ctx.join(file)).unwrap();
    }
    let mut context = Context::load(&ctx).unwrap();
    context.manifest.inputs.clear();
    context.manifest.shapes = [256, 512].iter().map(|&n| [("n".to_string(), n)].into_iter().collect()).collect();
    context.save(&ctx).unwrap();
    let runs: Vec<Value> = [(256, 16, 16), (512, 32, 8)]
        .iter()
        .map(|&(n, x, y)| json!({"inputs": {"n": n}, "best": {"params": {"inputs": {"n": n}, "tuning": {"BLOCK_X": x, "BLOCK_Y": y}}, "time_ms": 1.0}}))
        .collect();
    let mut source = peak_export::Source::context(&ctx).unwrap();
    source.performance = PerformanceRecord::from_json(&json!({"best": runs[1]["best"], "runs": runs})).unwrap();
    let backend = peak_cuda::OfflineBackend::new(peak_cuda::Dialect::Hip, peak_cuda::Arch::parse("sm_90a").unwrap()).unwrap();
    let target = peak_export::Target { device: backend.device().clone(), functions: backend.script_functions() };
    let out = env.path("out");
    let report = peak_export::export(&source, &target, &peak_export::ExportOptions { to: out.clone(), set: Vec::new(), force: false, dispatch: true }).unwrap();
    assert_eq!(report.files, ["matmul.hip", "dispatch.h", "kernels.cuh", "harness.hip", "build.sh", "Makefile", "README.txt"]);
    assert!(report.build.starts_with("hipcc "), "{}", report.build);
    let harness = std::fs::read_to_string(out.join("harness.hip")).unwrap();
    assert!(harness.contains("#define cudaFree hipFree") && harness.contains("peak_config_1::matmul_peak_c1<<<"), "{harness}");
    let instances =
        std::fs::read_to_string(out.join("kernels.cuh")).unwrap().replace("#include \"matmul.hip\"", &std::fs::read_to_string(out.join("matmul.hip")).unwrap());
    let cubin = nvrtc_as(instances, peak_cuda::Dialect::Hip).unwrap_or_else(|e| panic!("kernels.cuh does not compile as HIP: {e}"));
    let mut names: Vec<&str> = cubin.kernels.iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["matmul_peak_c0", "matmul_peak_c1"]);
}

#[test]
fn the_cuda_dispatch_export_of_the_gemm_tip_compiles_with_nvrtc() {
    let test = "the_cuda_dispatch_export_of_the_gemm_tip_compiles_with_nvrtc";
    if !nvrtc_present(test) {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    unbundle(&format!("{}/../../examples/workflows/gemm-nt-bias-cuda-deferred.bundle", env!("CARGO_MANIFEST_DIR")), &wf);
    let ctx = context_at(&env, &wf, "HEAD");
    with_shapes(&ctx, &LAYER);

    // The record: the design at the MLP shapes, the narrow tile at QKV, K split at decode.
    let configs = configs();
    let chosen = [0usize, 0, 1, 2];
    let runs: Vec<Value> = LAYER
        .iter()
        .zip(chosen)
        .enumerate()
        .map(|(i, (&(m, n, k), c))| {
            let inputs = json!({"K": k, "M": m, "N": n});
            json!({"inputs": inputs, "best": {"params": {"inputs": inputs, "tuning": configs[c]}, "time_ms": 0.5 + i as f64}})
        })
        .collect();
    let mut source = peak_export::Source::context(&ctx).unwrap();
    source.performance =
        PerformanceRecord::from_json(&json!({"best": runs[3]["best"], "runs": runs, "device": "cuda NVIDIA H200 sm_90a (test record)"})).unwrap();
    let backend = peak_cuda::OfflineBackend::new(peak_cuda::Dialect::Cuda, peak_cuda::Arch::parse("sm_90a").unwrap()).unwrap();
    let target = peak_export::Target { device: backend.device().clone(), functions: backend.script_functions() };
    let out = env.path("out");
    let options = peak_export::ExportOptions { to: out.clone(), set: Vec::new(), force: false, dispatch: true };
    let report = peak_export::export(&source, &target, &options).unwrap();

    assert_eq!(report.files, ["kernel.cu", "dispatch.h", "kernels.cuh", "harness.cu", "build.sh", "Makefile", "README.txt"]);
    let table = report.dispatch.as_ref().unwrap();
    assert_eq!(table.configs.len(), 3);
    assert_eq!(table.shapes.iter().map(|s| s.config).collect::<Vec<_>>(), chosen);
    assert_eq!(table.fallback, 2, "the record's best is the decode step's");
    assert!(report.build.contains("-gencode arch=compute_90a,code=sm_90a"), "{}", report.build);

    let instances = std::fs::read_to_string(out.join("kernels.cuh")).unwrap();
    for c in 0..3 {
        assert!(instances.contains(&format!("namespace peak_config_{c} {{\n#include \"kernel.cu\"\n}}")), "{instances}");
        assert!(instances.contains(&format!("#define gemm_nt_bias gemm_nt_bias_peak_c{c}\n")), "{instances}");
    }
    assert!(instances.contains("#define K_SPLITS 4\n"), "{instances}");
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    assert!(harness.contains("#include \"dispatch.h\"") && harness.contains("#include \"kernels.cuh\""));
    for (i, c) in chosen.iter().enumerate() {
        assert!(harness.contains(&format!("if (config != {c}) {{")), "shape {i}");
    }
    assert!(harness.contains("peak_launch(peak_config_2::gemm_nt_bias_peak_c2, "), "the decode step launches the split-K copy");
    assert!(harness.contains("peak_launch(peak_config_2::gemm_nt_bias_splitk_reduce_peak_c2, "), "and its reduction");
    assert!(!harness.contains("peak_launch(peak_config_0::gemm_nt_bias_splitk_reduce_peak_c0, "), "no reduction where K is not split");
    // Each shape's kernels are NVRTC's build of the kernel file at its configuration (peak's).
    assert!(harness.contains("static const char *peak_defines_s3[] = { ") && harness.contains("\"-DK_SPLITS=4\""), "{harness}");
    assert_eq!(harness.matches("int config = peak_dispatch(inputs);").count(), 4);

    // Every configuration in one translation unit, each kernel under its own name.
    let cubin = nvrtc(inlined(&out)).unwrap_or_else(|e| panic!("kernels.cuh does not compile with NVRTC: {e}"));
    let mut names: Vec<&str> = cubin.kernels.iter().map(|k| k.name.as_str()).filter(|n| n.starts_with("gemm_nt_bias")).collect();
    names.sort();
    // The split-K reduction is extern "C" too: renamed in every copy, launched only where K is split.
    let expected = [
        "gemm_nt_bias_peak_c0",
        "gemm_nt_bias_peak_c1",
        "gemm_nt_bias_peak_c2",
        "gemm_nt_bias_splitk_reduce_peak_c0",
        "gemm_nt_bias_splitk_reduce_peak_c1",
        "gemm_nt_bias_splitk_reduce_peak_c2",
    ];
    assert_eq!(names, expected, "{:?}", cubin.kernels);
    // Without the renames the extern "C" kernels collide across the namespaces.
    let unrenamed: String =
        inlined(&out).lines().filter(|l| !l.ends_with("_peak_c0") && !l.ends_with("_peak_c1") && !l.ends_with("_peak_c2")).collect::<Vec<_>>().join("\n");
    assert!(nvrtc(unrenamed).is_err(), "the same extern \"C\" kernel in three namespaces should not compile");

    // The harness itself, host code included, where nvcc is found (-c: no CUDA runtime to link).
    let Some(nvcc) = find_nvcc() else {
        eprintln!("SKIPPED {test} (nvcc part): no nvcc on the PATH, in $CUDA_HOME, /usr/local/cuda or next to NVRTC's wheel");
        return;
    };
    let mut args: Vec<String> = report.build.split_whitespace().skip(1).map(str::to_string).collect();
    let o = args.iter().position(|w| w == "-o").unwrap();
    args[o + 1] = "harness.o".into();
    args.push("-c".into());
    let built = Command::new(&nvcc).current_dir(&out).args(&args).output().unwrap();
    assert!(built.status.success(), "{} {}:\n{}", nvcc.display(), args.join(" "), String::from_utf8_lossy(&built.stderr));
}

#[test]
fn the_cuda_dispatch_harness_runs_every_named_shape_on_the_gpu() {
    let test = "the_cuda_dispatch_harness_runs_every_named_shape_on_the_gpu";
    if let Err(e) = peak_cuda::CudaBackend::new() {
        eprintln!("SKIPPED {test}: {e}");
        return;
    }
    let Some(nvcc) = find_nvcc() else {
        eprintln!("SKIPPED {test}: no nvcc on the PATH, in $CUDA_HOME, /usr/local/cuda or next to NVRTC's wheel");
        return;
    };
    let env = Env::new();
    let ctx = env.path("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    for file in ["peak.toml", "kernel.cu"] {
        std::fs::copy(Path::new(&example("gemm-nt-bias-cuda")).join(file), ctx.join(file)).unwrap();
    }
    let shapes = [(61, 47, 33), (100, 37, 129), (17, 200, 65)];
    with_shapes(&ctx, &shapes);
    let wf = env.path("wf");
    env.ok(&["init", s(&wf), "--from", s(&ctx), "--samples", "2", "--budget", "8"]);
    let shown = env.json(&["show", "HEAD", "-w", s(&wf), "--json"]);
    let runs = shown["performance"]["runs"].as_array().unwrap();
    let tuned: Vec<(i64, i64, i64)> =
        runs.iter().map(|r| (r["inputs"]["M"].as_i64().unwrap(), r["inputs"]["N"].as_i64().unwrap(), r["inputs"]["K"].as_i64().unwrap())).collect();
    assert_eq!(tuned, shapes, "one tuning run per named shape, in order");
    assert!(runs.iter().all(|r| r["best"].is_object()), "{shown}");

    let out = env.path("out");
    let report = env.json(&["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--dispatch", "--json"]);
    let path = format!(
        "{}:{}",
        nvcc.parent().filter(|p| !p.as_os_str().is_empty()).map(|p| p.display().to_string()).unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    let built = Command::new("sh").arg(out.join("build.sh")).env("PATH", &path).output().unwrap();
    assert!(built.status.success(), "build.sh ({}) failed:\n{}", report["build"], String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(out.join("harness")).args(["--warmup", "1", "--reps", "3", "--dump"]).arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "the harness failed:\n{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(stdout.matches("median_ms: ").count(), 3, "{stdout}");
    for (i, shape) in report["dispatch"]["shapes"].as_array().unwrap().iter().enumerate() {
        let params = &shape["params"];
        let label = ["K", "M", "N"].map(|n| format!("{n}={}", params["inputs"][n])).join(",");
        assert!(stdout.contains(&format!("shape {label}: configuration {}", shape["config"])), "shape {i}: {stdout}");
        let mut args: Vec<String> =
            vec!["run".into(), s(&wf.join("context")).into(), "--reps".into(), "1".into(), "--warmup".into(), "0".into(), "--json".into()];
        for part in ["inputs", "tuning"] {
            for (k, v) in params[part].as_object().unwrap() {
                args.extend(["--set".to_string(), format!("{k}={v}")]);
            }
        }
        let run = env.json(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let digest = run["outputs"][0]["digest"].as_str().unwrap();
        let bytes = std::fs::read(out.join(format!("out.{label}.bin"))).unwrap();
        assert_eq!(HostArray { dtype: DType::F32, bytes }.digest(), digest, "{label}: the dispatch harness's output differs from peak run's");
    }
}

/// Tensor maps per shape: the fp16 TMA tip as the H200 replayed it (its record tuned n =
/// 2048 and 4096) exported with --dispatch through the CLI encodes each shape's maps over
/// its own buffers; kernels.cuh compiles with NVRTC and harness.cu with nvcc `-c` for sm_90a
/// (wgmma, setmaxnreg and multicast assemble there only).
#[test]
fn the_dispatch_export_of_the_fp16_tma_tip_encodes_tensor_maps_per_shape() {
    let test = "the_dispatch_export_of_the_fp16_tma_tip_encodes_tensor_maps_per_shape";
    if !nvrtc_present(test) {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    unbundle(&format!("{}/../../bench/results/h200-replayed-matmul-cuda-f16-tma-store.bundle", env!("CARGO_MANIFEST_DIR")), &wf);
    let out = env.path("out");
    let report = env.json(&["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--dispatch", "--json"]);
    let shapes: Vec<i64> = report["dispatch"]["shapes"].as_array().unwrap().iter().map(|t| t["params"]["inputs"]["n"].as_i64().unwrap()).collect();
    assert_eq!(shapes, [2048, 4096], "{report}");
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    for i in 0..2 {
        assert!(
            harness.contains(&format!("static PeakMap peak_maps_s{i}[3];")) && harness.contains(&format!("peak_encode(&peak_maps_s{i}[0].map")),
            "shape {i}"
        );
    }
    let kernel = std::fs::read_to_string(out.join("matmul.cu")).unwrap();
    let instances = std::fs::read_to_string(out.join("kernels.cuh")).unwrap().replace("#include \"matmul.cu\"", &kernel);
    nvrtc(instances).unwrap_or_else(|e| panic!("kernels.cuh does not compile with NVRTC: {e}"));
    let Some(nvcc) = find_nvcc() else {
        eprintln!("SKIPPED {test} (nvcc part): no nvcc on the PATH, in $CUDA_HOME, /usr/local/cuda or next to NVRTC's wheel");
        return;
    };
    let build = report["build"].as_str().unwrap();
    assert!(build.contains("-gencode arch=compute_90a,code=sm_90a"), "{build}");
    let mut args: Vec<String> = build.split_whitespace().skip(1).map(str::to_string).collect();
    let o = args.iter().position(|w| w == "-o").unwrap();
    args[o + 1] = "harness.o".into();
    args.push("-c".into());
    let built = Command::new(&nvcc).current_dir(&out).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success() && !stderr.contains("not supported on .target"), "{} {}:\n{stderr}", nvcc.display(), args.join(" "));
}
