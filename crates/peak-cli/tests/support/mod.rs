//! What the whole-command tests share: a scratch folder with its own cache, the `peak`
//! binary run in it, paths to the examples and fixtures, and the NVRTC probe.
// Each test file uses its own part of this module.
#![allow(dead_code)]
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A scratch folder; `peak` runs with its results cache inside it.
pub struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env { tmp: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// The same path as a command-line argument.
    pub fn arg(&self, name: &str) -> String {
        s(&self.path(name)).to_string()
    }

    pub fn peak(&self, args: &[&str]) -> Output {
        self.peak_with(args, &[])
    }

    /// `peak` with extra environment variables (an LLM endpoint and its key, say).
    pub fn peak_with(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_peak"));
        cmd.args(args).env("PEAK_CACHE_DIR", self.path("cache"));
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().expect("peak runs")
    }

    /// Run `peak`, insist it succeeds without git's branch-name hint, return its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, &[])
    }

    pub fn ok_with(&self, args: &[&str], vars: &[(&str, &str)]) -> String {
        let out = self.peak_with(args, vars);
        assert!(out.status.success(), "peak {args:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("hint: Using 'master'"), "git's hint leaked from peak {args:?}:\n{stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        json(&self.ok(args))
    }
}

pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

pub fn example(name: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).to_string()
}

pub fn fixture(name: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).to_string()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether NVRTC can be loaded; says why the test skips when not.
pub fn nvrtc_present(test: &str) -> bool {
    match peak_cuda::libs::nvrtc() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            false
        }
    }
}

/// Whether an OpenCL device (PoCL here) is present; says why a test skips when not.
pub fn opencl_present(test: &str) -> bool {
    match peak_opencl::list_devices() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIPPED {test}: no OpenCL device (install pocl-opencl-icd): {e}");
            false
        }
    }
}

/// Whether a Vulkan device (lavapipe here) is present; says why a test skips when not.
pub fn vulkan_present(test: &str) -> bool {
    match peak_hlsl::list_devices() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIPPED {test}: no Vulkan device (install mesa-vulkan-drivers for lavapipe): {e}");
            false
        }
    }
}

/// The fp32 GEMM line, as its recorded workflows walk it (CUDA, OpenCL and HLSL).
pub const GEMM_LINE: [&str; 12] = [
    "Refactor",
    "TB-Tiling",
    "Thread-Tiling",
    "Thread-Cache",
    "Transpose",
    "Thread-Chunk",
    "Vectorize",
    "Split-K",
    "Pipelining",
    "Register-Staging",
    "Offset",
    "Block-Swizzle",
];

/// The chain from the root to the tip of `wf`'s current branch, through first parents,
/// oldest first (the root included).
pub fn first_parent_chain(env: &Env, wf: &Path) -> Vec<Value> {
    let log = env.json(&["log", "-w", s(wf), "--json"]);
    let by_id = |id: &str| log.as_array().unwrap().iter().find(|e| e["id"] == id).unwrap_or_else(|| panic!("{id} is not in the log")).clone();
    let mut line = vec![by_id(env.json(&["show", "HEAD", "-w", s(wf), "--json"])["id"].as_str().unwrap())];
    while let Some(parent) = line.last().unwrap()["parents"].as_array().unwrap().first().map(|p| p.as_str().unwrap().to_string()) {
        line.push(by_id(&parent));
    }
    line.reverse();
    line
}

/// Validation and tuning flags small enough for PoCL: one size, three samples, four
/// evaluations.
pub const MEASURE: [&str; 6] = ["--set", "n=256", "--samples", "3", "--budget", "4"];

/// An OpenCL workflow whose step Refactor (tagged `refactored`) was written by the agent
/// executor with `--defer`: compile-checked, not yet validated or tuned.
pub fn deferred_refactor(env: &Env) -> PathBuf {
    let wf = env.path("authored");
    let w = s(&wf);
    env.ok(&["init", w, "--from", &example("matmul-opencl-naive"), "--no-measure", "--set", "n=256"]);
    env.ok(&["apply", "refactor", "--defer", "--samples", "3", "--set", "n=256", "-w", w]);
    env.ok(&["submit", &fixture("refactor/macros.c"), "-w", w]);
    let done = env.json(&["submit", &fixture("refactor/device.c"), "-w", w, "--json"]);
    assert_eq!(done["verdict"], "deferred", "{done}");
    env.ok(&["tag", "refactored", "-w", w]);
    wf
}

/// A workflow's checkpoints, newest first: (transformation, verdict).
pub fn steps(env: &Env, wf: &Path) -> Vec<(String, String)> {
    let log = env.json(&["log", "-w", s(wf), "--json"]);
    log.as_array().unwrap().iter().map(|e| (e["transformation"].as_str().unwrap().to_string(), e["verdict"].as_str().unwrap().to_string())).collect()
}

/// A recorded bundle cloned into `into`, as `peak` unpacks one.
pub fn unbundle(bundle: &str, into: &Path) {
    peak_workflow::clone_bundle(Path::new(bundle), into).unwrap_or_else(|e| panic!("{bundle}: {e}"));
}

/// The context of checkpoint `rev` (a tag, `HEAD`, `HEAD~1`) of the workflow at `wf`,
/// written to a folder of its own in `env`.
pub fn context_at(env: &Env, wf: &Path, rev: &str) -> PathBuf {
    let dir = env.path(&format!("context-{}", rev.replace('~', "-")));
    peak_workflow::Workflow::open(wf).unwrap().materialize(rev, &dir).unwrap_or_else(|e| panic!("{rev}: {e}"));
    dir
}
