//! Every case-study tip exported with `peak export` builds with its own build line (issue
//! 27, item 2): the fp32 and fp16 matmul tips as the H200 replayed and retuned them
//! (`bench/results/h200-replayed-*.bundle`, whose performance records give the
//! configuration) and the tip of the deferred NT GEMM with a bias
//! (`examples/workflows/gemm-nt-bias-cuda-deferred.bundle`, which has no record).
//!
//! Here, without a GPU: the exported harness is compiled (`-c`: no CUDA runtime to link
//! against) with the build line's own nvcc options, by nvcc from the CUDA toolkit or from
//! the `nvidia-cuda-nvcc` wheel (scripts/install-nvrtc.sh). That runs cicc and ptxas for
//! every target the line asks for, which is where the fp16 tip's export failed.
//! On a GPU: `sh build.sh`, the harness run, its outputs compared with `peak run`'s at the
//! same configuration byte for byte, and its median time within 5% of `peak run`'s. The
//! record-less tip is tuned on the GPU first (`peak tune`, a small budget) and exported at
//! the winner. Each test skips, saying why, without NVRTC, nvcc or a GPU.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use peak_spec::{DType, HostArray};
use serde_json::Value;
use support::{Env, nvrtc_present, s};

/// A case-study tip: a bundle, its checkpoint, and a configuration to export at where the
/// checkpoint has no performance record.
struct Tip {
    bundle: &'static str,
    checkpoint: &'static str,
    /// `--set` values for the compile check of a tip without a record (the GPU test tunes).
    fallback: &'static [&'static str],
}

const FP32: Tip = Tip { bundle: "bench/results/h200-replayed-matmul-cuda-f32-main.bundle", checkpoint: "HEAD", fallback: &[] };
/// TMA-Store, then Retune: wgmma, setmaxnreg and cluster multicast, all sm_90a-only.
const FP16: Tip = Tip { bundle: "bench/results/h200-replayed-matmul-cuda-f16-tma-store.bundle", checkpoint: "HEAD", fallback: &[] };
const GEMM_NT_BIAS: Tip = Tip {
    bundle: "examples/workflows/gemm-nt-bias-cuda-deferred.bundle",
    checkpoint: "HEAD",
    // The configuration the twelve-step line was designed for (16 x 16 threads, 8 x 16
    // outputs each, float4, two stages).
    fallback: &[
        "M=8192",
        "N=3072",
        "K=768",
        "BLOCK_X=16",
        "BLOCK_Y=16",
        "TRD_X=16",
        "TRD_Y=8",
        "CHUNK_X=4",
        "CHUNK_Y=4",
        "VEC=4",
        "TILE_K=8",
        "NUM_STAGES=2",
        "K_SPLITS=1",
        "OFFSET=1",
        "GROUP_M=8",
    ],
};

/// The relative difference allowed between the harness's median and `peak run`'s.
const TOLERANCE: f64 = 0.05;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// nvcc: on the PATH, in $CUDA_HOME or /usr/local/cuda, or the `nvidia-cuda-nvcc` wheel
/// next to the NVRTC wheel peak loads (`.../nvidia/cu13/bin/nvcc`). None after saying why
/// `test` skips.
fn nvcc(test: &str) -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("nvcc")];
    if let Ok(home) = std::env::var("CUDA_HOME") {
        candidates.push(Path::new(&home).join("bin/nvcc"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    if let Some(include) = peak_cuda::libs::nvrtc().ok().and_then(|i| i.include_dir.clone()) {
        candidates.push(include.join("../bin/nvcc"));
    }
    for c in &candidates {
        if Command::new(c).arg("--version").output().map(|o| o.status.success()).unwrap_or(false) {
            return Some(c.clone());
        }
    }
    eprintln!(
        "SKIPPED {test}: no nvcc (looked on the PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin and next to NVRTC's wheel; pip install nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-cccl, as scripts/install-nvrtc.sh does)"
    );
    None
}

/// Clone the tip's bundle and export its checkpoint, with `set` over its record.
fn export(env: &Env, tip: &Tip, set: &[String]) -> (PathBuf, PathBuf, Value) {
    let wf = env.path("wf");
    if !wf.exists() {
        peak_workflow::clone_bundle(&repo(tip.bundle), &wf).unwrap();
    }
    let out = env.path("out");
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec!["export", tip.checkpoint, "-w", s(&wf), "--to", s(&out), "--json"];
    for v in set {
        args.extend(["--set", v.as_str()]);
    }
    let report = env.json(&args);
    (wf, out, report)
}

fn has_record(env: &Env, tip: &Tip) -> bool {
    let wf = env.path("probe");
    peak_workflow::clone_bundle(&repo(tip.bundle), &wf).unwrap();
    let shown = env.json(&["show", tip.checkpoint, "-w", s(&wf), "--json"]);
    !shown["performance"]["best"].is_null()
}

/// The checkpoint's context: the workflow's working folder, with the checkpoint checked
/// out unless it is HEAD (a fresh clone's working folder holds HEAD).
fn context_of(env: &Env, wf: &Path, checkpoint: &str) -> PathBuf {
    if checkpoint != "HEAD" {
        env.ok(&["checkout", checkpoint, "-w", s(wf)]);
    }
    wf.join("context")
}

/// The build line, from build.sh (its last line), split into words.
fn build_line(out: &Path) -> Vec<String> {
    let script = std::fs::read_to_string(out.join("build.sh")).unwrap();
    let line = script.lines().last().unwrap();
    line.split_whitespace().map(str::to_string).collect()
}

/// Compile the exported harness with the build line's options and `-c` (no link).
fn compile_check(test: &str, tip: &Tip) {
    if !nvrtc_present(test) {
        return;
    }
    let Some(nvcc) = nvcc(test) else { return };
    let env = Env::new();
    let set: Vec<String> = if has_record(&env, tip) { Vec::new() } else { tip.fallback.iter().map(|v| v.to_string()).collect() };
    let (_, out, report) = export(&env, tip, &set);
    let words = build_line(&out);
    assert_eq!(report["build"].as_str().unwrap().split_whitespace().collect::<Vec<_>>(), words, "build.sh runs the reported build line");
    assert_eq!(words[0], "nvcc");
    // The record was measured on (and the limits evaluated for) sm_90a: exactly that cubin.
    assert!(report["build"].as_str().unwrap().contains("-gencode arch=compute_90a,code=sm_90a"), "{}", report["build"]);
    let mut args: Vec<String> = words[1..].to_vec();
    let o = args.iter().position(|w| w == "-o").unwrap();
    args[o + 1] = "harness.o".into();
    args.push("-c".into());
    let built = Command::new(&nvcc).current_dir(&out).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{} {}: failed\n{stderr}", nvcc.display(), args.join(" "));
    assert!(!stderr.contains("not supported on .target"), "{stderr}");
    assert!(out.join("harness.o").metadata().unwrap().len() > 0);
}

#[test]
fn the_fp32_tip_export_compiles_with_its_build_line() {
    compile_check("the_fp32_tip_export_compiles_with_its_build_line", &FP32);
}

#[test]
fn the_fp16_tma_tip_export_compiles_with_its_build_line() {
    compile_check("the_fp16_tma_tip_export_compiles_with_its_build_line", &FP16);
}

#[test]
fn the_gemm_nt_bias_tip_export_compiles_with_its_build_line() {
    compile_check("the_gemm_nt_bias_tip_export_compiles_with_its_build_line", &GEMM_NT_BIAS);
}

/// A CUDA GPU and nvcc, or None after saying why `test` skips.
fn gpu_and_nvcc(test: &str) -> Option<PathBuf> {
    if let Err(e) = peak_cuda::CudaBackend::new() {
        eprintln!("SKIPPED {test}: {e}");
        return None;
    }
    nvcc(test)
}

/// The tip's configuration on this GPU: its record's (export's default), else `peak tune`'s
/// winner on the tip's context with a small budget.
fn gpu_config(env: &Env, tip: &Tip) -> Vec<String> {
    if has_record(env, tip) {
        return Vec::new();
    }
    let ctx = context_of(env, &env.path("probe"), tip.checkpoint);
    let tuned = env.json(&["tune", s(&ctx), "--budget", "12", "--json"]);
    let params = &tuned["winners"][0]["params"];
    assert!(params.is_object(), "peak tune found no winner: {tuned}");
    ["inputs", "tuning"].iter().flat_map(|part| params[part].as_object().unwrap().iter().map(|(k, v)| format!("{k}={v}"))).collect()
}

/// `median_ms: X` from the harness's output.
fn harness_median(stdout: &str) -> f64 {
    let line = stdout.lines().find(|l| l.starts_with("median_ms: ")).unwrap_or_else(|| panic!("no median_ms line:\n{stdout}"));
    line["median_ms: ".len()..].split_whitespace().next().unwrap().parse().unwrap()
}

/// Export the tip, build it with build.sh, run it; its outputs must be `peak run`'s and its
/// median within [`TOLERANCE`] of `peak run`'s (the better of three tries each, so one
/// noisy run does not decide).
fn build_run_and_compare(test: &str, tip: &Tip) {
    let Some(nvcc) = gpu_and_nvcc(test) else { return };
    let env = Env::new();
    let set = gpu_config(&env, tip);
    let (wf, out, report) = export(&env, tip, &set);
    let path = format!(
        "{}:{}",
        nvcc.parent().filter(|p| !p.as_os_str().is_empty()).map(|p| p.display().to_string()).unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    let built = Command::new("sh").arg(out.join("build.sh")).env("PATH", &path).output().unwrap();
    assert!(built.status.success(), "{}: build.sh ({}) failed:\n{}", tip.bundle, report["build"], String::from_utf8_lossy(&built.stderr));

    // peak run at the exported configuration, on the checkpoint's context.
    let ctx = context_of(&env, &wf, tip.checkpoint);
    let mut run_args: Vec<String> = vec!["run".into(), s(&ctx).into(), "--warmup".into(), "3".into(), "--reps".into(), "20".into(), "--json".into()];
    for part in ["inputs", "tuning"] {
        for (k, v) in report["params"][part].as_object().unwrap() {
            run_args.extend(["--set".into(), format!("{k}={v}")]);
        }
    }
    // The harness times without evicting the cache between runs: so does peak run here,
    // where it can evict (like for like).
    let help = env.ok(&["run", "--help"]);
    if help.contains("--no-flush-cache") {
        run_args.push("--no-flush-cache".into());
    }
    let run_args: Vec<&str> = run_args.iter().map(String::as_str).collect();

    let mut ratios = Vec::new();
    for attempt in 0..3 {
        let dump = env.path(&format!("dump{attempt}"));
        std::fs::create_dir_all(&dump).unwrap();
        let ran = Command::new(out.join("harness")).args(["--warmup", "3", "--reps", "20", "--dump"]).arg(&dump).output().unwrap();
        let stdout = String::from_utf8_lossy(&ran.stdout);
        assert!(ran.status.success(), "the harness failed:\n{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
        let harness_ms = harness_median(&stdout);
        let run = env.json(&run_args);
        let outputs = run["outputs"].as_array().unwrap();
        assert!(!outputs.is_empty());
        for o in outputs {
            let name = o["name"].as_str().unwrap();
            let bytes = std::fs::read(dump.join(format!("{name}.bin"))).unwrap();
            let ours = HostArray { dtype: DType::F32, bytes }.digest();
            assert_eq!(ours, o["digest"].as_str().unwrap(), "{}: output {name} of the exported harness differs from peak run's", tip.bundle);
        }
        let ratio = harness_ms / run["median_ms"].as_f64().unwrap();
        eprintln!("{}: harness {harness_ms:.6} ms, peak run {} ms ({ratio:.4}x)", tip.bundle, run["median_ms"]);
        ratios.push(ratio);
        if (ratio - 1.0).abs() <= TOLERANCE {
            return;
        }
    }
    panic!("{}: the exported harness's median is not within {:.0}% of peak run's in three tries: {ratios:?}", tip.bundle, TOLERANCE * 100.0);
}

#[test]
fn the_fp32_tip_export_builds_runs_and_matches_peak_run_on_the_gpu() {
    build_run_and_compare("the_fp32_tip_export_builds_runs_and_matches_peak_run_on_the_gpu", &FP32);
}

#[test]
fn the_fp16_tma_tip_export_builds_runs_and_matches_peak_run_on_the_gpu() {
    build_run_and_compare("the_fp16_tma_tip_export_builds_runs_and_matches_peak_run_on_the_gpu", &FP16);
}

#[test]
fn the_gemm_nt_bias_tip_export_builds_runs_and_matches_peak_run_on_the_gpu() {
    build_run_and_compare("the_gemm_nt_bias_tip_export_builds_runs_and_matches_peak_run_on_the_gpu", &GEMM_NT_BIAS);
}
