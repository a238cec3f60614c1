//! Whole-command tests of `peak compile` and `peak baseline`. Compiling needs only NVRTC
//! (`scripts/install-nvrtc.sh`); timing against cuBLAS needs an NVIDIA GPU. Each test
//! skips, saying why, where its part is missing.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{example, nvrtc_present};

fn peak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_peak")).args(args).output().expect("peak runs")
}

#[test]
fn compile_reports_every_variant_of_the_cuda_and_hip_examples() {
    if !nvrtc_present("compile_reports_every_variant_of_the_cuda_and_hip_examples") {
        return;
    }
    for name in ["matmul-cuda-f32", "matmul-cuda-f16", "matmul-hip-f32", "matmul-hip-f16"] {
        let out = peak(&["compile", &example(name), "--set", "BLOCK_Y=4,8", "--no-hipcc", "--json"]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
        let variants = json["variants"].as_array().unwrap();
        // BLOCK_Y=4 pairs with BLOCK_X 8..256, BLOCK_Y=8 with 4..128: 6 + 6 shapes.
        assert_eq!(variants.len(), 12, "{name}");
        assert_eq!(json["points"], 24, "two sizes of n share each variant");
        for v in variants {
            assert_eq!(v["nvrtc"]["status"], "ok");
            assert!(v["nvrtc"]["kernels"][0]["registers"].as_u64().unwrap() > 0);
        }
    }
    let out = peak(&["compile", &example("matmul-cuda-f32"), "--set", "BLOCK_X=32", "--set", "BLOCK_Y=32"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("BLOCK_X=32 BLOCK_Y=32") && stdout.contains("regs") && stdout.contains("spills 0/0 B"), "{stdout}");
}

#[test]
fn compile_failures_exit_1_with_the_log_and_bad_usage_exits_2() {
    if !nvrtc_present("compile_failures_exit_1_with_the_log_and_bad_usage_exits_2") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = example("matmul-cuda-f32");
    std::fs::copy(Path::new(&src).join("peak.toml"), dir.path().join("peak.toml")).unwrap();
    let source = std::fs::read_to_string(Path::new(&src).join("matmul.cu")).unwrap().replace("acc += A", "acc += Q");
    std::fs::write(dir.path().join("matmul.cu"), source).unwrap();
    let out = peak(&["compile", dir.path().to_str().unwrap(), "--set", "BLOCK_X=32", "--set", "BLOCK_Y=8"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("identifier \"Q\" is undefined") && stderr.contains("matmul.cu(9)"), "{stderr}");

    for args in [
        vec!["compile", &src, "--arch", "compute_90"],
        vec!["compile", &src, "--set", "NOPE=1"],
        vec!["compile", &example("matmul-opencl-naive")],
        vec!["baseline", &example("matmul-opencl-naive")],
    ] {
        let out = peak(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn baseline_reports_both_rates_from_one_run_or_explains_the_missing_gpu() {
    let out = peak(&["baseline", &example("matmul-cuda-f32"), "--set", "n=2048", "--set", "BLOCK_X=32", "--set", "BLOCK_Y=8", "--reps", "3", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if peak_cuda::CudaBackend::new().is_err() {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("hint:"), "a missing GPU comes with a hint: {stderr}");
        eprintln!("SKIPPED the timed half of baseline_reports_both_rates_from_one_run_or_explains_the_missing_gpu: no CUDA device");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["cublas"]["routine"], "cublasLtMatmul");
    assert_eq!(json["cublas"]["layout"], "NN");
    assert_eq!(json["cublas"]["compute_type"], "CUBLAS_COMPUTE_32F", "f32 without TF32");
    assert!(json["percent_of_cublas"].as_f64().unwrap() > 0.0);
    assert_eq!(json["kernel_timing"]["times_ms"].as_array().unwrap().len(), 3);
    assert_eq!(json["validation"]["passed"], true);
}
