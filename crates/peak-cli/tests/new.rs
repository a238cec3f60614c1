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
        "new",
        &file,
        "--to",
        &ctx,
        "--size",
        "x=n",
        "--size",
        "y=n",
        "--input",
        "n=1000,4096",
        "--input",
        "bias=3",
        "--domain",
        "elementwise",
        "--description",
        "y = 2 x + bias",
        "--json",
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

const LINEAR: &str = "__kernel void linear(__global float* out, __global const float* inp, __global const float* w, __global const float* b, const int M, const int N, const int K) {\n    int n = get_global_id(0), m = get_global_id(1);\n    if (m >= M || n >= N) return;\n    float acc = b[n];\n    for (int k = 0; k < K; k++) acc += inp[m * K + k] * w[n * K + k];\n    out[m * N + n] = acc;\n}\n";

#[test]
fn the_gemm_its_inputs_and_tolerance_come_from_flags() {
    let env = Env::new();
    std::fs::write(env.path("linear.cl"), LINEAR).unwrap();
    let file = env.arg("linear.cl");
    let base = ["--size", "out=M*N", "--size", "inp=M*K", "--size", "w=N*K", "--size", "b=N", "--input", "M=61", "--input", "N=47", "--input", "K=33"];
    let gemm = "m = \"M\", n = \"N\", k = \"K\", a = \"inp\", b = \"w\", c = \"out\", b_layout = \"col\", bias = \"b\"";
    let ctx = env.arg("linear");
    let mut args = vec!["new", &file, "--to", &ctx];
    args.extend(base);
    args.extend(["--matmul", gemm, "--init", "inp=normal", "--init", "w=init = \"uniform\", scale = 0.1, offset = -0.05", "--tolerance", "f32=1e-4", "--json"]);
    env.json(&args);
    let manifest = std::fs::read_to_string(env.path("linear/peak.toml")).unwrap();
    for said in ["[kernel.matmul]", "b_layout = \"col\"", "flops = \"2 * (M) * (N) * (K)\"", "init = \"normal\"", "scale = 0.1", "[tolerance]", "f32 = 0.0001"]
    {
        assert!(manifest.contains(said), "`{said}` in:\n{manifest}");
    }

    // Each setting that does not read is a usage error naming the flag and the key.
    for (flag, value, said) in [
        ("--matmul", "m = \"M\", n = \"N\", k = \"K\", a = \"inp\", b = \"w\", c = \"out\", b_layot = \"col\"", "b_layot"),
        ("--tolerance", "fp32=1e-4", "fp32"),
        ("--init", "inp=range = [0, 4]", "range"),
        ("--init", "nosuch=normal", "nosuch"),
        ("--pattern", "elementwize", "elementwise"),
    ] {
        let to = env.arg("bad");
        let mut args = vec!["new", &file, "--to", &to];
        args.extend(base);
        args.extend([flag, value]);
        let out = env.peak(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(said), "{flag} {value}: {err}");
        assert!(!env.path("bad").exists(), "{flag} {value}: nothing written");
    }
}
