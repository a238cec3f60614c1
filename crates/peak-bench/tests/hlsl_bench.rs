//! `peak-hlsl-bench` in a child process, so the environment can break the Vulkan setup: a
//! missing driver or compiler is `Unavailable` with a hint, not a panic. Needs a working
//! HLSL backend here (lavapipe in CI); skips with a printed reason otherwise.

use peak_backend::testsuite::opened_or_skip;
use peak_hlsl::HlslBackend;

fn backend() -> Option<HlslBackend> {
    opened_or_skip(HlslBackend::new(), "HLSL")
}

/// The bench binary in a child process, so the environment can break the setup.
fn bench_with_env(var: &str, value: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_peak-hlsl-bench"))
        .args(["--context", "../../examples/matmul-hlsl-f32", "--n", "64"])
        .env(var, value)
        .output()
        .expect("the bench binary runs");
    assert!(!out.status.success(), "{var}={value} should make the setup fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_missing_driver_is_unavailable_with_a_hint() {
    if backend().is_none() {
        return;
    }
    let err = bench_with_env("VK_DRIVER_FILES", "/nonexistent/icd.json");
    assert!(err.contains("Vulkan is not available") && err.contains("hint:") && err.contains("VK_DRIVER_FILES"), "{err}");
}

#[test]
fn a_missing_compiler_is_unavailable_with_a_hint() {
    if backend().is_none() {
        return;
    }
    let err = bench_with_env("PEAK_GLSLANG", "/nonexistent/glslangValidator");
    assert!(err.contains("is not available") && err.contains("glslang-tools"), "{err}");
}
