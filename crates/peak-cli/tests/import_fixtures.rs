//! `peak new` on kernel files in the shape people bring them (issue 24), written for peak's
//! tests: each imports with the flags a user would give, the CUDA ones compile with NVRTC
//! (`peak compile`, no GPU), and the OpenCL one runs on PoCL, where a float parameter is
//! checked to reach the kernel as f32. The files: crates/peak-spec/tests/fixtures/import/
//! (its README says what each one exercises).
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::{Env, nvrtc_present, opencl_present, s};

fn fixture(path: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../peak-spec/tests/fixtures/import/realistic").join(path)).to_string()
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
fn training_kernels_import_and_compile_with_nvrtc() {
    let env = Env::new();
    let file = "training_kernels.cu";
    // Several kernels: which one is asked for, naming them all.
    let out = env.peak(&["new", &fixture(file), "--to", &env.arg("which"), "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("gelu_bf16_forward, layernorm_rows_forward, softmax_rows_forward, softmax_block_forward, linear_forward_naive"),
        "{err}"
    );

    let layernorm = new(
        &env,
        file,
        "layernorm",
        &[
            "--kernel",
            "layernorm_rows_forward",
            "--size",
            "out=rows*width",
            "--size",
            "mean=rows",
            "--size",
            "rstd=rows",
            "--size",
            "inp=rows*width",
            "--size",
            "scale=width",
            "--size",
            "shift=width",
            "--input",
            "rows=1024",
            "--input",
            "width=768",
            "--scalar",
            "eps=1e-5",
        ],
    );
    assert_eq!(
        launch_line(&layernorm),
        "launch(\"layernorm_rows_forward\", ceil_div(rows, BLOCK_X), BLOCK_X, 0, out, mean, rstd, inp, scale, shift, rows, width, eps);"
    );
    let notes = layernorm["notes"].to_string();
    assert!(
        notes.contains("left out #include <stdio.h>, <stdlib.h>, <math.h>, <float.h>, <cuda_runtime.h>, <assert.h>, <string.h>")
            && notes.contains("host functions (report_cuda_failure")
            && notes.contains("read helpers.h: the kernel uses nothing of it"),
        "{notes}"
    );

    let softmax = new(
        &env,
        file,
        "softmax",
        &["--kernel", "softmax_rows_forward", "--size", "probs=rows*cols", "--size", "logits=rows*cols", "--input", "rows=1024", "--input", "cols=1024"],
    );
    assert_eq!(launch_line(&softmax), "launch(\"softmax_rows_forward\", ceil_div(rows, BLOCK_X), BLOCK_X, 0, probs, logits, rows, cols);");

    let block = new(
        &env,
        file,
        "softmax-block",
        &["--kernel", "softmax_block_forward", "--size", "probs=rows*cols", "--size", "logits=rows*cols", "--input", "rows=1024", "--input", "cols=1024"],
    );
    assert_eq!(launch_line(&block), "launch(\"softmax_block_forward\", rows, BLOCK_X, BLOCK_X * 4, probs, logits, rows, cols);");

    let gelu = new(&env, file, "gelu", &["--kernel", "gelu_bf16_forward", "--size", "out=n", "--size", "inp=n", "--input", "n=1048576"]);
    assert_eq!((gelu["arrays"][0]["type"].as_str(), gelu["arrays"][1]["type"].as_str()), (Some("bf16"), Some("bf16")), "floatX is helpers.h's bf16: {gelu}");
    assert_eq!(launch_line(&gelu), "launch(\"gelu_bf16_forward\", ceil_div(n, BLOCK_X), BLOCK_X, 0, out, inp, n);");

    let linear = new(
        &env,
        file,
        "linear",
        &[
            "--kernel",
            "linear_forward_naive",
            "--size",
            "out=tokens*out_dim",
            "--size",
            "inp=tokens*in_dim",
            "--size",
            "weight=out_dim*in_dim",
            "--size",
            "bias=out_dim",
            "--input",
            "tokens=256",
            "--input",
            "in_dim=256",
            "--input",
            "out_dim=512",
        ],
    );
    assert_eq!(
        launch_line(&linear),
        "launch(\"linear_forward_naive\", [ceil_div(out_dim, BLOCK_X), ceil_div(tokens, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, out, inp, weight, bias, tokens, in_dim, out_dim);"
    );

    if !nvrtc_present("training_kernels_import_and_compile_with_nvrtc") {
        return;
    }
    compiles(&env, "layernorm", "layernorm_rows_forward", &["BLOCK_X=128"]);
    compiles(&env, "softmax", "softmax_rows_forward", &["BLOCK_X=128"]);
    compiles(&env, "softmax-block", "softmax_block_forward", &["BLOCK_X=256"]);
    compiles(&env, "gelu", "gelu_bf16_forward", &["BLOCK_X=128"]);
    compiles(&env, "linear", "linear_forward_naive", &["BLOCK_X=16", "BLOCK_Y=16"]);
}

#[test]
fn a_gemm_header_takes_its_floats_from_flags_and_compiles() {
    let env = Env::new();
    let file = fixture("sgemm_alpha_beta.cuh");
    let to = env.arg("sgemm");
    // What the signature does not say is asked for all at once, each with its flag.
    let out = env.peak(&["new", &file, "--to", &to, "--input", "M=256", "--input", "N=256", "--input", "K=256"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--size A=EXPR --size B=EXPR --size C=EXPR") && err.contains("--scalar alpha=VALUE --scalar beta=VALUE"), "{err}");
    let bad = env.peak(&["new", &file, "--to", &to, "--scalar", "alpha=fast"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--scalar alpha=fast: `fast` is not a number"), "{}", String::from_utf8_lossy(&bad.stderr));

    let made = new(
        &env,
        "sgemm_alpha_beta.cuh",
        "sgemm",
        &[
            "--size", "A=M*K", "--size", "B=K*N", "--size", "C=M*N", "--input", "M=256", "--input", "N=256", "--input", "K=256", "--scalar", "alpha=1",
            "--scalar", "beta=0.5",
        ],
    );
    assert_eq!(
        launch_line(&made),
        "launch(\"gemm_naive_alpha_beta\", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, M, N, K, alpha, beta);"
    );
    // C = alpha A B + beta C reads C: in place, it starts every run from its init, and no copy is timed.
    let launch = made["launch"].as_str().unwrap();
    assert!(launch.contains("The kernel reads C as well as writing it: in place") && !launch.contains("copy("), "{made}");
    if nvrtc_present("a_gemm_header_takes_its_floats_from_flags_and_compiles") {
        compiles(&env, "sgemm", "gemm_naive_alpha_beta", &["BLOCK_X=32", "BLOCK_Y=8"]);
    }
}

/// axpy with `alpha` given as `value`, and a reference context computing
/// `ys = factor * xs + ys` that ignores its float parameter: the same arrays, seeds and
/// launch, the factor spelled out.
fn axpy_and_reference(env: &Env, name: &str, value: &str, factor: &str) -> (String, String) {
    new(env, "axpy.cl", name, &["--size", "xs=4096", "--size", "ys=4096", "--scalar", &format!("alpha={value}")]);
    let reference = env.path(&format!("{name}-reference"));
    std::fs::create_dir(&reference).unwrap();
    for file in ["peak.toml", "axpy.cl"] {
        let text = std::fs::read_to_string(env.path(name).join(file)).unwrap();
        let text = text.replace("alpha * xs[idx]", &format!("{factor} * xs[idx]"));
        std::fs::write(reference.join(file), text).unwrap();
    }
    assert!(std::fs::read_to_string(reference.join("axpy.cl")).unwrap().contains(&format!("ys[idx] = {factor} * xs[idx] + ys[idx];")));
    (env.arg(name), s(&reference).to_string())
}

#[test]
fn an_opencl_kernel_runs_on_pocl_with_its_float_as_f32() {
    let env = Env::new();
    let made = new(&env, "axpy.cl", "axpy", &["--size", "xs=4096", "--size", "ys=4096", "--scalar", "alpha=2"]);
    assert_eq!(launch_line(&made), "launch(\"axpy_inplace\", ceil_div(4096, BLOCK_X), BLOCK_X, 0, alpha, xs, ys);");
    // The value is the manifest's, `[scalars]`, which the launch passes by name as an f32.
    let toml = std::fs::read_to_string(env.path("axpy").join("peak.toml")).unwrap();
    assert!(toml.contains("[scalars]\nalpha = 2.0"), "{toml}");
    assert_eq!(made["constraints"]["tuning"][0], "4096 % BLOCK_X == 0", "axpy checks no bound: {made}");
    if !opencl_present("an_opencl_kernel_runs_on_pocl_with_its_float_as_f32") {
        return;
    }
    let run = env.json(&["run", &env.arg("axpy"), "--set", "BLOCK_X=64", "--json"]);
    let ys = &run["outputs"][0];
    assert_eq!((ys["name"].as_str(), ys["elements"].as_u64(), ys["nan"].as_u64()), (Some("ys"), Some(4096), Some(0)), "{run}");

    // `alpha=1` is written as the float 1.0: as an int its bits would be a denormal, not 1.
    for (name, value, factor) in [("one", "1", "1.0f"), ("quarter", "2.5e-1", "0.25f")] {
        let (candidate, reference) = axpy_and_reference(&env, name, value, factor);
        let check = env.json(&["check", &candidate, "--against", &reference, "--samples", "2", "--json"]);
        assert_eq!((check["passed"].as_u64(), check["failed"].as_u64()), (Some(2), Some(0)), "alpha={value}: {check}");
    }
    // And the comparison tells the values apart.
    let check = env.peak(&["check", &env.arg("one"), "--against", &env.arg("quarter-reference"), "--samples", "1", "--json"]);
    assert!(!check.status.success(), "alpha = 1 is not alpha = 0.25: {}", String::from_utf8_lossy(&check.stdout));
}
