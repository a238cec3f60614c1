//! compute-sanitizer in workflows, through the `peak` binary, on a machine without it or
//! without a GPU: what is recorded where it cannot run, and the errors when it is asked for
//! explicitly. (Findings themselves need an NVIDIA GPU; the fallback logic is unit-tested
//! in peak-apply with a fake checker.)

mod support;

use support::{Env, example, fixture, json};

#[test]
fn an_explicit_sanitizer_without_the_binary_fails_at_once_with_a_hint() {
    if let Some(path) = peak_eval::sanitizer::locate_tool("compute-sanitizer") {
        eprintln!("SKIPPED: compute-sanitizer is installed here ({})", path.display());
        return;
    }
    let env = Env::new();
    let wf = env.arg("wf");
    // Not measured, so no GPU is needed to make the workflow.
    env.ok(&["init", &wf, "--from", &example("matmul-cuda-f32"), "--no-measure"]);

    let out = env.peak(&["apply", "refactor", "-w", &wf, "--sanitize", "memcheck,racecheck"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--sanitize memcheck,racecheck: compute-sanitizer: not found on PATH"), "{stderr}");
    assert!(stderr.contains("hint: install the CUDA toolkit"), "{stderr}");
    assert!(env.ok(&["pending", "-w", &wf]).is_empty(), "no apply is left waiting");
    assert!(env.ok(&["apply", "--abandon", "-w", &wf]).contains("no apply was in progress"));

    // The root's winner check asks for it before tuning anything.
    let out = env.peak(&["init", &env.arg("wf2"), "--from", &example("matmul-cuda-f32"), "--sanitize", "memcheck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sanitize memcheck: compute-sanitizer: not found"));
}

#[test]
fn sanitizer_flags_are_checked() {
    let env = Env::new();
    let out = env.peak(&["apply", "refactor", "-w", &env.arg("wf"), "--sanitize", "asan"]);
    assert_eq!(out.status.code(), Some(2), "a misspelt tool is bad usage");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown sanitizer tool 'asan'"));

    let out = env.peak(&["init", &env.arg("wf"), "--from", &example("matmul-opencl-naive"), "--sanitize", "racecheck"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("CUDA and HIP kernels only; this kernel is opencl") && stderr.contains("--sanitize none"), "{stderr}");
}

#[test]
fn an_opencl_workflow_records_that_no_sanitizer_runs() {
    if peak_opencl::list_devices().is_err() {
        eprintln!("SKIPPED: no OpenCL device (install pocl-opencl-icd)");
        return;
    }
    let env = Env::new();
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &example("matmul-opencl-naive"), "--set", "n=256", "--budget", "4"]);
    let root = json(&env.ok(&["show", "root", "-w", &wf, "--json"]));
    assert_eq!(root["performance"]["sanitizer_winner"], serde_json::json!({ "ran": false, "summary": "none for opencl" }));

    let fast = ["--set", "n=256", "--samples", "3", "--budget", "4", "--sanitize-samples", "2"];
    env.ok(&[&["apply", "refactor", "-w", &wf][..], &fast].concat());
    env.ok(&["submit", &fixture("refactor/macros.c"), "-w", &wf]);
    let done = json(&env.ok(&["submit", &fixture("refactor/device.c"), "-w", &wf, "--json"]));
    assert_eq!(done["status"], "checkpoint", "{done}");

    let head = json(&env.ok(&["show", "HEAD", "-w", &wf, "--json"]));
    let sanitizer = &head["validation"]["sanitizer"];
    assert_eq!(sanitizer["summary"], "none for opencl", "{sanitizer}");
    assert_eq!(sanitizer["requested_samples"], 2);
    assert_eq!(sanitizer["tools"], serde_json::json!([]));
    assert_eq!(sanitizer["samples"], serde_json::json!([]));
    assert!(sanitizer.get("outcome").is_none(), "nothing ran, so there is no outcome: {sanitizer}");
    assert_eq!(head["performance"]["sanitizer_winner"]["summary"], "none for opencl");
}

#[test]
fn peak_validate_resolves_the_sanitizer_as_apply_does_when_not_told() {
    if let Some(path) = peak_eval::sanitizer::locate_tool("compute-sanitizer") {
        eprintln!("SKIPPED: compute-sanitizer is installed here ({})", path.display());
        return;
    }
    let env = Env::new();
    // A CUDA kernel: `auto` wants memcheck and racecheck, and says it skips them here (the
    // validation itself needs a GPU; the plan is made, and said, before anything runs).
    let cuda = example("matmul-cuda-f32");
    let out = env.peak(&["validate", &cuda, "--against", &cuda, "--samples", "1", "--set", "n=256"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sanitizer skipped (compute-sanitizer not found): cuda candidates are validated without memcheck and racecheck"), "{stderr}");
    // Asked for by name, a missing sanitizer is an error before anything runs, as in apply.
    let out = env.peak(&["validate", &cuda, "--against", &cuda, "--sanitize", "memcheck"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sanitize memcheck: compute-sanitizer: not found"), "{}", String::from_utf8_lossy(&out.stderr));

    // An OpenCL kernel: `auto` means no sanitizer, and the report says so.
    if peak_opencl::list_devices().is_err() {
        eprintln!("SKIPPED (the OpenCL half): no OpenCL device (install pocl-opencl-icd)");
        return;
    }
    let naive = example("matmul-opencl-naive");
    let report = json(&env.ok(&["validate", &naive, "--against", &naive, "--samples", "2", "--set", "n=64", "--json"]));
    assert_eq!(report["outcome"], "passed", "{report}");
    assert_eq!(report["sanitizer"]["summary"], "none for opencl", "{report}");
    assert_eq!(report["sanitizer"]["requested_samples"], 16, "apply's default count: {report}");
    let text = env.ok(&["validate", &naive, "--against", &naive, "--samples", "2", "--set", "n=64"]);
    assert!(text.contains("sanitizer: none for opencl"), "{text}");
}

#[test]
fn peak_validate_places_the_sanitizer_as_apply_does() {
    let env = Env::new();
    let naive = example("matmul-opencl-naive");
    // `--sanitize-at` is apply's flag, checked against the kernel's inputs before anything
    // runs, whether or not the sanitizer runs on this backend.
    let out = env.peak(&["validate", &naive, "--against", &naive, "--sanitize-at", "m=4"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--sanitize-at m=4: `m` is not an input of this kernel (its inputs: n)"), "{stderr}");
    let out = env.peak(&["validate", &naive, "--against", &naive, "--sanitize", "none", "--sanitize-at", "n"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sanitize-at n: expected NAME=INTEGER"));
}
