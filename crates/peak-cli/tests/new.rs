//! `peak new`: a kernel source file brought in as a context that runs (issue 14).

mod support;

use support::{Env, opencl_present};

const SCALE: &str = "// y = 2 x + bias, elementwise.\n__kernel void scale(__global const float* x, __global float* y, const int n, const int bias) {\n    int i = get_global_id(0);\n    if (i < n) y[i] = 2.0f * x[i] + (float)bias;\n}\n";

#[test]
fn a_kernel_file_becomes_a_context_that_runs() {
    let env = Env::new();
    std::fs::write(env.path("scale.cl"), SCALE).unwrap();
    let file = env.arg("scale.cl");
    let ctx = env.arg("scale");

    // What the signature cannot say is asked for by name, with the flag that gives it.
    let out = env.peak(&["new", &file, "--to", &ctx, "--input", "n=1000,4096"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--size x=EXPR --size y=EXPR") && err.contains("--input bias=256,1024"), "{err}");
    assert!(!env.path("scale").exists(), "nothing is written before the context is whole");

    let made = env.json(&[
        "new", &file, "--to", &ctx, "--size", "x=n", "--size", "y=n", "--input", "n=1000,4096", "--input", "bias=3", "--domain", "elementwise",
        "--description", "y = 2 x + bias", "--json",
    ]);
    assert_eq!(made["kernel"], "scale");
    assert_eq!(made["arrays"][0]["name"], "x");
    assert_eq!(made["arrays"][1]["output"], true, "a written array is the result: {made}");
    assert!(made["launch"].as_str().unwrap().contains("launch(\"scale\", ceil_div(n, BLOCK_X), BLOCK_X, 0, x, y, n, bias);"), "{made}");
    let manifest = std::fs::read_to_string(env.path("scale/peak.toml")).unwrap();
    assert!(manifest.contains("domain = \"elementwise\""), "{manifest}");

    let again = env.peak(&["new", &file, "--to", &ctx, "--size", "x=n", "--size", "y=n", "--input", "n=8", "--input", "bias=1"]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("exists and is not empty"));

    if !opencl_present("a_kernel_file_becomes_a_context_that_runs") {
        return;
    }
    let run = env.json(&["run", &ctx, "--set", "n=1000", "--set", "BLOCK_X=64", "--json"]);
    assert!(run["outputs"].is_array() || run["outputs"].is_object(), "{run}");
    // Another kind of kernel: the MatMul library does not fit it.
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &ctx, "--no-measure", "--set", "n=1000", "--samples", "2"]);
    let refused = env.peak(&["apply", "thread-tiling", "-w", &wf, "--executor", "agent"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("'Thread-Tiling' is written for gemm kernels, and this context's kernel is an elementwise map"), "{err}");
}
