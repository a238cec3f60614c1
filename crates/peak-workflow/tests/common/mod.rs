//! Helpers shared by the integration tests: inline kernel contexts and result JSON.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]
#![allow(dead_code)] // each test binary uses its own subset of these helpers

use std::path::{Path, PathBuf};

use peak_workflow::{CheckpointId, CheckpointInput, Workflow};
use serde_json::{Value, json};

/// Write a context (peak.toml + kernel.cl) into `dir`, creating it.
pub fn write_context(dir: &Path, device: &str, tuning: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("peak.toml"), format!("[kernel]\nname = \"k\"\nbackend = \"opencl\"\nsource = \"kernel.cl\"\n\n[tuning]\n{tuning}")).unwrap();
    std::fs::write(
        dir.join("kernel.cl"),
        format!("// @peak macros\n#define IDX(i) (i)\n// @peak device\n{device}// @peak host\nlaunch(\"k\", [n], [BLOCK], 0, A);\n"),
    )
    .unwrap();
    dir.to_path_buf()
}

pub const DEVICE_0: &str = "__kernel void k(__global float* a) {\n  int i = get_global_id(0);\n  a[IDX(i)] = 0.0f;\n}\n";
pub const DEVICE_1: &str =
    "__kernel void k(__global float* a) {\n  int i = get_global_id(0) * TILE;\n  for (int t = 0; t < TILE; t++) a[IDX(i + t)] = 0.0f;\n}\n";
pub const DEVICE_2: &str =
    "__kernel void k(__global float* a) {\n  int i = get_global_id(0) * TILE * 2;\n  for (int t = 0; t < 2 * TILE; t++) a[IDX(i + t)] = 0.0f;\n}\n";
pub const TUNING_0: &str = "BLOCK = { values = [64, 128] }\n";
pub const TUNING_1: &str = "BLOCK = { values = [64, 128, 256] }\nTILE = { values = [2, 4, 8] }\n";

pub fn perf(time_ms: f64, params: Value) -> Value {
    json!({"best": {"params": params, "time_ms": time_ms}, "top_k": [{"params": params, "time_ms": time_ms}], "device": "pocl"})
}

pub fn passed() -> Value {
    json!({"verdict": "passed", "samples": 4})
}

pub fn reference() -> Value {
    json!({"inputs": [{"n": 1024}], "seeds": {"A": 1}})
}

/// A checkpoint input with the given context folder, transformation and best time.
pub fn input(context_dir: &Path, transformation: &str, time_ms: f64, params: Value) -> CheckpointInput {
    CheckpointInput {
        context_dir: context_dir.to_path_buf(),
        transformation: transformation.to_string(),
        executor: "openai".to_string(),
        model: Some("gpt-test".to_string()),
        validation: passed(),
        performance: perf(time_ms, params),
        transcript: json!({"messages": [{"role": "user", "content": "tile it"}], "tokens_in": 100, "tokens_out": 50}),
        ..CheckpointInput::default()
    }
}

/// A fresh workflow whose root takes 4 ms, in `base/wf`.
pub fn new_workflow(base: &Path) -> Workflow {
    let ctx = write_context(&base.join("ctx0"), DEVICE_0, TUNING_0);
    Workflow::init_with(
        base.join("wf"),
        &ctx,
        peak_workflow::RootInput { reference: reference(), performance: Some(perf(4.0, json!({"BLOCK": 64}))), ..Default::default() },
    )
    .unwrap()
}

/// Checkpoint a context with `device` code on the current branch.
pub fn add(wf: &mut Workflow, base: &Path, name: &str, device: &str, time_ms: f64) -> CheckpointId {
    let ctx = write_context(&base.join(format!("ctx-{name}")), device, TUNING_1);
    wf.checkpoint(input(&ctx, name, time_ms, json!({"BLOCK": 128, "TILE": 4}))).unwrap()
}

/// Run git in `dir`, asserting success; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().expect("git is installed");
    assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
