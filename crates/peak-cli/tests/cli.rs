//! Whole-command tests of `peak info`, `run`, `check` and `tune --json`'s time breakdown on
//! OpenCL (PoCL in CI), and the bad-input cases: each must give a clear error naming the
//! file and field or line.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn peak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_peak")).args(args).output().expect("peak runs")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

fn opencl_present() -> bool {
    let present = peak_opencl::list_devices().is_ok();
    if !present {
        eprintln!("SKIPPED: no OpenCL device (install pocl-opencl-icd)");
    }
    present
}

/// Copy an example into a temp dir, applying text edits to its two files.
fn edited(name: &str, manifest_edit: impl Fn(String) -> String, source_edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = example(name);
    let manifest = std::fs::read_to_string(src.join("peak.toml")).unwrap();
    let source = std::fs::read_to_string(src.join("kernel.cl")).unwrap();
    std::fs::write(dir.path().join("peak.toml"), manifest_edit(manifest)).unwrap();
    std::fs::write(dir.path().join("kernel.cl"), source_edit(source)).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn run_prints_time_and_digests() {
    if !opencl_present() {
        return;
    }
    let out = peak(&["run", s(&example("matmul-opencl-naive")), "--set", "n=256", "--reps", "3"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("median of 3"), "{stdout}");
    assert!(stdout.contains("output   C") && stdout.contains("digest"), "{stdout}");

    let out = peak(&["run", s(&example("matmul-opencl-naive")), "--set", "n=256", "--set", "BLOCK_X=8", "--set", "BLOCK_Y=8", "--reps", "2", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(json["params"]["tuning"]["BLOCK_X"], 8);
    assert!(json["median_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(json["times_ms"].as_array().unwrap().len(), 2);
    assert_eq!(json["outputs"][0]["elements"], 256 * 256);
}

#[test]
fn check_passes_the_tiled_kernel_against_the_naive_one() {
    if !opencl_present() {
        return;
    }
    let out = peak(&["check", s(&example("matmul-opencl-tiled")), "--against", s(&example("matmul-opencl-naive")), "--samples", "3", "--set", "n=256,512"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("PASS: 3 passed"), "{stdout}");
}

#[test]
fn check_fails_a_wrong_kernel() {
    if !opencl_present() {
        return;
    }
    // Drops the last term of every dot product: close, but wrong.
    let wrong = edited("matmul-opencl-tiled", |m| m, |src| src.replace("for (int k = 0; k < TILE; ++k)", "for (int k = 0; k < TILE - (t + TILE >= n); ++k)"));
    let out = peak(&["check", s(wrong.path()), "--against", s(&example("matmul-opencl-naive")), "--samples", "2", "--set", "n=256", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out).1);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["failed"], 2);
    assert_eq!(json["samples"][0]["verdict"], "wrong-output");
    assert!(json["samples"][0]["outputs"][0]["relative_error"].as_f64().unwrap() > 1e-3);
}

#[test]
fn check_fails_a_kernel_that_leaves_outputs_unwritten() {
    if !opencl_present() {
        return;
    }
    let lazy = edited("matmul-opencl-naive", |m| m, |src| src.replace("if (row < n && col < n)", "if (row < n / 2 && col < n)"));
    let out = peak(&["check", s(lazy.path()), "--against", s(&example("matmul-opencl-naive")), "--samples", "1", "--set", "n=256"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("wrong-output") && stdout.contains("non-finite"), "{stdout}");
}

/// `peak tune --json` says, per run, where the time went: every stage present, none
/// negative, the timed runs and the compiles not zero.
#[test]
fn tune_json_breaks_the_time_down() {
    if !opencl_present() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let naive = example("matmul-opencl-naive");
    let args = ["tune", s(&naive), "--set", "n=64", "--set", "BLOCK_X=8", "--strategy", "exhaustive", "--reps", "3", "--cache-dir", s(cache.path()), "--json"];
    let out = peak(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("--json prints JSON");
    let run = &json["runs"][0];
    let spent = run["time_breakdown"].as_object().unwrap_or_else(|| panic!("no time_breakdown: {run}"));
    let stages =
        ["wall_s", "compile_cpu_s", "request_wait_s", "compile_wait_s", "plan_s", "inputs_s", "check_run_s", "read_back_s", "timing_s", "timed_kernels_s"];
    for stage in stages.into_iter().chain(["release_s", "compare_s", "cache_write_s", "strategy_s"]) {
        let seconds = spent.get(stage).and_then(|v| v.as_f64()).unwrap_or_else(|| panic!("no {stage}: {run}"));
        assert!(seconds >= 0.0, "{stage} = {seconds}");
    }
    assert_eq!(spent["answers"], run["measured"], "{run}");
    for stage in ["wall_s", "compile_cpu_s", "check_run_s", "timing_s", "timed_kernels_s", "cache_write_s"] {
        assert!(spent[stage].as_f64().unwrap() > 0.0, "{stage} is zero: {run}");
    }
}

fn assert_usage_error(out: &Output, needles: &[&str]) {
    let (_, stderr) = text(out);
    assert_eq!(out.status.code(), Some(2), "expected a usage error, got {:?}: {stderr}", out.status.code());
    for needle in needles {
        assert!(stderr.contains(needle), "error lacks `{needle}`:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn malformed_manifest_is_a_clear_error() {
    let dir = edited("matmul-opencl-naive", |m| m.replace("[kernel.matmul]", "[kernel.matmul"), |s| s);
    assert_usage_error(&peak(&["run", s(dir.path())]), &["peak.toml", "line"]);
}

#[test]
fn unknown_field_is_a_clear_error() {
    let dir = edited("matmul-opencl-naive", |m| m.replace("init = \"zeros\"", "init = \"zeros\"\noutptu = true"), |s| s);
    assert_usage_error(&peak(&["run", s(dir.path())]), &["peak.toml", "outptu"]);
}

#[test]
fn unparsable_size_expression_is_a_clear_error() {
    let dir = edited("matmul-opencl-naive", |m| m.replacen("size = \"n * n\"", "size = \"n * (n\"", 1), |s| s);
    assert_usage_error(&peak(&["run", s(dir.path())]), &["peak.toml", "arrays[0].size", "n * (n"]);
}

#[test]
fn missing_region_marker_is_a_clear_error() {
    let dir = edited("matmul-opencl-naive", |m| m, |src| src.replace("// @peak host\n", ""));
    assert_usage_error(&peak(&["run", s(dir.path())]), &["kernel.cl", "// @peak host"]);
}

#[test]
fn constraint_naming_an_unknown_parameter_is_a_clear_error() {
    let dir = edited("matmul-opencl-naive", |m| m.replace("BLOCK_X * BLOCK_Y >= 16", "BLOCK_X * BLOCK_Z >= 16"), |s| s);
    assert_usage_error(&peak(&["run", s(dir.path())]), &["peak.toml", "constraints.tuning[1]", "BLOCK_Z"]);
}

#[test]
fn set_of_an_unknown_name_is_a_clear_error() {
    assert_usage_error(&peak(&["run", s(&example("matmul-opencl-naive")), "--set", "BLOCKX=8"]), &["BLOCKX", "BLOCK_X"]);
    assert_usage_error(&peak(&["run", s(&example("matmul-opencl-naive")), "--set", "n=abc"]), &["n=abc", "integers"]);
}

#[test]
fn kernel_that_fails_to_compile_shows_the_compiler_log() {
    if !opencl_present() {
        return;
    }
    let dir = edited("matmul-opencl-naive", |m| m, |src| src.replace("acc += A[row * n + k]", "acc += A[row * n + kk]"));
    let out = peak(&["run", s(dir.path()), "--set", "n=256"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("compilation failed"), "{stderr}");
    assert!(stderr.contains("kk") && stderr.contains("kernel.cl:9"), "the log must point at the file and line:\n{stderr}");
}

#[test]
fn launch_script_that_loops_forever_hits_the_operation_limit() {
    if !opencl_present() {
        return;
    }
    let dir = edited("matmul-opencl-naive", |m| m, |src| src.replace("// One work-item", "let i = 0;\nloop { i += 1; }\n// One work-item"));
    let out = peak(&["run", s(dir.path()), "--set", "n=256"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kernel.cl:16") && stderr.contains("operations"), "{stderr}");
}

#[test]
fn launch_script_errors_name_the_line() {
    if !opencl_present() {
        return;
    }
    let dir = edited("matmul-opencl-naive", |m| m, |src| src.replace("A, B, C, n);", "A, B, C, nn);"));
    let out = peak(&["run", s(dir.path()), "--set", "n=256"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("kernel.cl:16") && stderr.contains("nn"), "{stderr}");
}

#[test]
fn info_reports_every_backend() {
    let out = peak(&["info", "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = json.as_array().unwrap().iter().map(|b| b["backend"].as_str().unwrap()).collect();
    assert_eq!(names, ["opencl", "cuda", "hip", "hlsl"]);
    for b in json.as_array().unwrap() {
        assert!(b["available"].as_bool().unwrap() || !b["reason"].as_str().unwrap().is_empty(), "a missing backend needs a reason: {b}");
    }
}

#[test]
fn hlsl_stages_pass_check_against_the_naive_kernel() {
    if peak_hlsl::list_devices().is_err() {
        eprintln!("SKIPPED: no Vulkan device (install mesa-vulkan-drivers for lavapipe)");
        return;
    }
    for stage in ["matmul-hlsl-f32-tiled", "matmul-hlsl-f32-thread-tiled"] {
        let out = peak(&["check", s(&example(stage)), "--against", s(&example("matmul-hlsl-f32")), "--samples", "2", "--set", "n=256"]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stage}:\n{stdout}\n{stderr}");
        assert!(stdout.contains("PASS: 2 passed"), "{stage}: {stdout}");
    }
}
