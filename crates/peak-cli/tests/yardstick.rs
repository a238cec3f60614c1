//! Yardsticks. `peak baseline` on a memory-bound kernel: the kernel against a
//! device-to-device copy of the bytes it moves, in the same process (issue 14). And the
//! yardstick every tuned checkpoint records beside its best time (issue 26, item 4).

mod support;

use support::{Env, example, opencl_present};

#[test]
fn a_memory_bound_kernel_is_judged_against_a_copy_of_its_bytes() {
    if !opencl_present("a_memory_bound_kernel_is_judged_against_a_copy_of_its_bytes") {
        return;
    }
    let env = Env::new();
    let softmax = example("softmax-opencl");
    let report = env.json(&["baseline", &softmax, "--set", "rows=256", "--set", "cols=256", "--reps", "5", "--json"]);
    // X is read, Y written: 256 x 256 f32 each.
    assert_eq!(report["traffic"]["read_bytes"], 262_144, "{report}");
    assert_eq!(report["traffic"]["written_bytes"], 262_144, "{report}");
    assert_eq!(report["copy_bytes"], 262_144, "a copy of half the bytes moves as many: {report}");
    let (kernel_ms, copy_ms, percent) =
        (report["kernel_ms"].as_f64().unwrap(), report["copy_ms"].as_f64().unwrap(), report["percent_of_copy"].as_f64().unwrap());
    assert!(kernel_ms > 0.0 && copy_ms > 0.0, "{report}");
    assert!((percent - 100.0 * copy_ms / kernel_ms).abs() < 1e-9, "{report}");

    let wrong = env.peak(&["baseline", &softmax, "--against", "cublaslt"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("needs a cuda or hip context"), "{}", String::from_utf8_lossy(&wrong.stderr));
    let unknown = env.peak(&["baseline", &softmax, "--against", "memcpy"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("expected cublaslt or copy"));
}

/// Every tuned checkpoint records its yardstick at the headline's inputs (issue 26, item 4):
/// for a kernel that names no GEMM, a copy of the bytes it moves, timed in the worker as
/// the kernel is, with its spread; `peak log` shows the best time as a percentage of it.
#[test]
fn a_tuned_checkpoint_records_a_copy_yardstick_with_its_spread() {
    if !opencl_present("a_tuned_checkpoint_records_a_copy_yardstick_with_its_spread") {
        return;
    }
    let env = Env::new();
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &example("softmax-opencl"), "--set", "rows=256", "--set", "cols=256", "--budget", "2"]);
    let performance = &env.json(&["show", "HEAD", "-w", &wf, "--json"])["performance"];
    let baseline = &performance["baseline"];
    assert_eq!(baseline["kind"], "copy", "{baseline}");
    assert_eq!(baseline["inputs"], performance["best"]["params"]["inputs"], "timed at the headline's inputs: {performance}");
    // X is read and Y written, 256 x 256 f32 each: a copy of half those bytes moves as many.
    assert_eq!(baseline["bytes"], 262_144, "{baseline}");
    let spread = &baseline["spread"];
    let (time, q1, q3) = (baseline["time_ms"].as_f64().unwrap(), spread["q1_ms"].as_f64().unwrap(), spread["q3_ms"].as_f64().unwrap());
    assert!(time > 0.0 && q1 <= time && time <= q3, "{baseline}");
    assert_eq!(spread["count"], performance["best"]["spread"]["count"], "as many timed runs as the kernel's time: {performance}");

    let log = env.json(&["log", "-w", &wf, "--json"]);
    let entry = &log[0];
    let percent = entry["baseline"]["percent"].as_f64().unwrap_or_else(|| panic!("{entry}"));
    let best = entry["best_time_ms"].as_f64().unwrap();
    assert!((percent - 100.0 * time / best).abs() < 1e-9, "{entry}");
    assert_eq!(entry["baseline"]["kind"], "copy");
    let text = env.ok(&["log", "-w", &wf]);
    assert!(text.contains(&format!("{percent:.1}% copy")), "{text}");
    let show = env.ok(&["show", "HEAD", "-w", &wf]);
    assert!(show.contains(&format!("(kernel at {percent:.1}% of copy)")), "{show}");
}

/// A GEMM is judged against a vendor GEMM, never against a copy (a "% of copy" of
/// compute-bound work would read as a failure): on OpenCL, where peak calls no vendor
/// library, the checkpoint records "n/a" with the reason, and the log says so.
#[test]
fn a_gemm_without_a_vendor_library_records_why_it_has_no_yardstick() {
    if !opencl_present("a_gemm_without_a_vendor_library_records_why_it_has_no_yardstick") {
        return;
    }
    let env = Env::new();
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &example("matmul-opencl-naive"), "--set", "n=64", "--budget", "2"]);
    let baseline = &env.json(&["show", "HEAD", "-w", &wf, "--json"])["performance"]["baseline"];
    assert_eq!(baseline["kind"], "n/a", "{baseline}");
    assert_eq!(baseline["inputs"], serde_json::json!({"n": 64}));
    assert!(baseline.get("time_ms").is_none(), "{baseline}");
    let reason = baseline["reason"].as_str().unwrap();
    assert!(reason.contains("opencl") && reason.contains("a copy is no yardstick"), "{reason}");

    let entry = &env.json(&["log", "-w", &wf, "--json"])[0];
    assert!(entry["baseline"].get("percent").is_none(), "{entry}");
    assert!(env.ok(&["log", "-w", &wf]).contains("- vendor"));
    assert!(env.ok(&["show", "HEAD", "-w", &wf]).contains(&format!("yardstick       n/a at n=64: {reason}")));
}

/// On a GPU, a CUDA GEMM's checkpoint records cuBLASLt doing the same work.
#[test]
fn a_cuda_gemm_records_cublaslt_as_its_yardstick() {
    let test = "a_cuda_gemm_records_cublaslt_as_its_yardstick";
    if let Err(e) = peak_cuda::CudaBackend::new().map(|_| ()).and_then(|()| peak_cuda::libs::cublaslt().map(|_| ())) {
        eprintln!("SKIPPED {test}: {e}");
        return;
    }
    let env = Env::new();
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &example("matmul-cuda-f32"), "--set", "n=512", "--budget", "4"]);
    let baseline = &env.json(&["show", "HEAD", "-w", &wf, "--json"])["performance"]["baseline"];
    assert_eq!(baseline["kind"], "cublaslt", "{baseline}");
    assert!(baseline["time_ms"].as_f64().is_some_and(|t| t > 0.0), "{baseline}");
    assert!(baseline["what"].as_str().unwrap().contains("cublasLtMatmul"), "{baseline}");
    assert!(baseline["flushed_bytes"].as_u64().is_some(), "the L2 is flushed as for the kernel: {baseline}");
    let entry = &env.json(&["log", "-w", &wf, "--json"])[0];
    assert!(entry["baseline"]["percent"].as_f64().is_some_and(|p| p > 0.0), "{entry}");
    assert!(env.ok(&["log", "-w", &wf]).contains("% cuBLASLt"));
}
