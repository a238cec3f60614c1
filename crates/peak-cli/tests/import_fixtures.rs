//! `peak new` on kernel files from public codebases (issue 24): each imports with the
//! flags a user would give, the CUDA ones compile with NVRTC (`peak compile`, no GPU), and
//! the OpenCL one runs on PoCL, where a float parameter is checked to reach the kernel as
//! f32. The files and their origin: crates/peak-spec/tests/fixtures/import/README.md.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{Env, nvrtc_present, opencl_present, s};

fn fixture(path: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../peak-spec/tests/fixtures/import").join(path)).to_string()
}

/// `peak new FILE --to NAME FLAGS... --json`.
fn new(env: &Env, file: &str, name: &str, flags: &[&str]) -> Value {
    let (file, to) = (fixture(file), env.arg(name));
    let args: Vec<&str> = ["new", file.as_str(), "--to", to.as_str()].into_iter().chain(flags.iter().copied()).chain(["--json"]).collect();
    env.json(&args)
}

fn launch_line(made: &Value) -> &str {
    made["launch"].as_str().unwrap().lines().find(|l| l.starts_with("launch(")).unwrap()
}

/// `peak compile` over the given tuning values: every variant compiles, the kernel is there.
fn compiles(env: &Env, name: &str, kernel: &str, set: &[&str]) {
    let ctx = env.arg(name);
    let args: Vec<&str> = ["compile", ctx.as_str(), "--json"].into_iter().chain(set.iter().flat_map(|s| ["--set", *s])).collect();
    let report = env.json(&args);
    let variants = report["variants"].as_array().unwrap();
    assert!(!variants.is_empty(), "{report}");
    for v in variants {
        assert_eq!(v["nvrtc"]["status"], "ok", "{name}: {}", v["nvrtc"]["log"]);
        assert_eq!(v["nvrtc"]["kernels"][0]["name"], kernel, "{v}");
    }
}

#[test]
fn llmc_kernels_import_and_compile_with_nvrtc() {
    let env = Env::new();
    let layernorm = new(&env, "llm.c/layernorm_forward.cu", "layernorm", &[
        "--kernel", "layernorm_forward_kernel1", "--size", "out=N*C", "--size", "mean=N", "--size", "rstd=N", "--size", "inp=N*C",
        "--size", "weight=C", "--size", "bias=C", "--input", "N=1024", "--input", "C=768",
    ]);
    assert_eq!(launch_line(&layernorm), "launch(\"layernorm_forward_kernel1\", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, mean, rstd, inp, weight, bias, N, C);");
    let notes = layernorm["notes"].to_string();
    assert!(notes.contains("left out #include <stdio.h>, <stdlib.h>, <cuda_runtime.h>, <assert.h>") && notes.contains("host functions (cuda_check"), "{notes}");

    let softmax = new(&env, "llm.c/softmax_forward.cu", "softmax", &["--kernel", "softmax_forward_kernel1", "--size", "out=N*C", "--size", "inp=N*C", "--input", "N=1024", "--input", "C=1024"]);
    assert_eq!(launch_line(&softmax), "launch(\"softmax_forward_kernel1\", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, N, C);");

    let gelu = new(&env, "llm.c/gelu_forward.cu", "gelu", &["--kernel", "gelu_forward_kernel1", "--size", "out=N", "--size", "inp=N", "--input", "N=1048576"]);
    assert_eq!(gelu["arrays"][0]["type"], "bf16", "floatX is common.h's bf16: {gelu}");

    let matmul = new(&env, "llm.c/matmul_forward.cu", "matmul", &[
        "--kernel", "matmul_forward_kernel1", "--size", "out=BT*OC", "--size", "inp=BT*C", "--size", "weight=OC*C", "--size", "bias=OC",
        "--input", "BT=256", "--input", "C=256", "--input", "OC=512",
    ]);
    assert_eq!(launch_line(&matmul), "launch(\"matmul_forward_kernel1\", [ceil_div(BT, BLOCK_X), ceil_div(OC, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, out, inp, weight, bias, BT, C, OC);");

    if !nvrtc_present("llmc_kernels_import_and_compile_with_nvrtc") {
        return;
    }
    compiles(&env, "layernorm", "layernorm_forward_kernel1", &["BLOCK_X=128"]);
    compiles(&env, "softmax", "softmax_forward_kernel1", &["BLOCK_X=128"]);
    compiles(&env, "gelu", "gelu_forward_kernel1", &["BLOCK_X=128"]);
    compiles(&env, "matmul", "matmul_forward_kernel1", &["BLOCK_X=16", "BLOCK_Y=16"]);
}

#[test]
fn sgemm_naive_takes_its_floats_from_flags_and_compiles() {
    let env = Env::new();
    let file = fixture("SGEMM_CUDA/1_naive.cuh");
    let to = env.arg("sgemm");
    // What the signature does not say is asked for all at once, each with its flag.
    let out = env.peak(&["new", &file, "--to", &to, "--input", "M=256", "--input", "N=256", "--input", "K=256"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--size A=EXPR --size B=EXPR --size C=EXPR") && err.contains("--scalar alpha=VALUE --scalar beta=VALUE"), "{err}");
    let bad = env.peak(&["new", &file, "--to", &to, "--scalar", "alpha=fast"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--scalar alpha=fast: `fast` is not a number"), "{}", String::from_utf8_lossy(&bad.stderr));

    let made = new(&env, "SGEMM_CUDA/1_naive.cuh", "sgemm", &[
        "--size", "A=M*K", "--size", "B=K*N", "--size", "C=M*N", "--input", "M=256", "--input", "N=256", "--input", "K=256", "--scalar", "alpha=1",
        "--scalar", "beta=0.5",
    ]);
    assert_eq!(launch_line(&made), "launch(\"sgemm_naive\", [ceil_div(M, BLOCK_X), ceil_div(N, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, M, N, K, 1.0, A, B, 0.5, C);");
    assert!(made["launch"].as_str().unwrap().contains("copy(C_in, C);"), "{made}");
    if nvrtc_present("sgemm_naive_takes_its_floats_from_flags_and_compiles") {
        compiles(&env, "sgemm", "sgemm_naive", &["BLOCK_X=32", "BLOCK_Y=8"]);
    }
}

/// saxpy with `a` given as `value`, and a reference context computing `y = factor * x + y`
/// with no float parameter at all: the same arrays, seeds and launch, `a` spelled out.
fn saxpy_and_reference(env: &Env, name: &str, value: &str, factor: &str) -> (String, String) {
    new(env, "OpenCL-SDK/saxpy.cl", name, &["--size", "x=4096", "--size", "y=4096", "--scalar", &format!("a={value}")]);
    let reference = env.path(&format!("{name}-reference"));
    std::fs::create_dir(&reference).unwrap();
    for file in ["peak.toml", "saxpy.cl"] {
        let text = std::fs::read_to_string(env.path(name).join(file)).unwrap();
        let text = text.replace("fma(a, x[gid], y[gid])", &format!("{factor} * x[gid] + y[gid]"));
        std::fs::write(reference.join(file), text).unwrap();
    }
    (env.arg(name), s(&reference).to_string())
}

#[test]
fn an_opencl_kernel_runs_on_pocl_with_its_float_as_f32() {
    let env = Env::new();
    let made = new(&env, "OpenCL-SDK/saxpy.cl", "saxpy", &["--size", "x=4096", "--size", "y=4096", "--scalar", "a=2"]);
    assert_eq!(launch_line(&made), "launch(\"saxpy\", ceil_div(4096, BLOCK_X), BLOCK_X, 0, 2.0, x, y);");
    assert_eq!(made["constraints"]["tuning"][0], "4096 % BLOCK_X == 0", "saxpy checks no bound: {made}");
    if !opencl_present("an_opencl_kernel_runs_on_pocl_with_its_float_as_f32") {
        return;
    }
    let run = env.json(&["run", &env.arg("saxpy"), "--set", "BLOCK_X=64", "--json"]);
    let y = &run["outputs"][0];
    assert_eq!((y["name"].as_str(), y["elements"].as_u64(), y["nan"].as_u64()), (Some("y"), Some(4096), Some(0)), "{run}");

    // `a=1` is written as the float 1.0: as an int its bits would be a denormal, not 1.
    for (name, value, factor) in [("one", "1", "1.0f"), ("quarter", "2.5e-1", "0.25f")] {
        let (candidate, reference) = saxpy_and_reference(&env, name, value, factor);
        let check = env.json(&["check", &candidate, "--against", &reference, "--samples", "2", "--json"]);
        assert_eq!((check["passed"].as_u64(), check["failed"].as_u64()), (Some(2), Some(0)), "a={value}: {check}");
    }
    // And the comparison tells the values apart.
    let check = env.peak(&["check", &env.arg("one"), "--against", &env.arg("quarter-reference"), "--samples", "1", "--json"]);
    assert!(!check.status.success(), "a = 1 is not a = 0.25: {}", String::from_utf8_lossy(&check.stdout));
}
