//! Fuse-Epilogue (issue 24, fused epilogues): a kernel that maps another kernel's output
//! element by element is folded into that kernel's stores. Our OpenCL RMS normalisation
//! followed by a gain-and-GELU kernel over a scratch intermediate
//! (examples/rmsnorm-gelu-opencl), fused by the agent executor following the prompt
//! literally, is replayed on PoCL; a context whose launch script runs one kernel is
//! refused before anything is asked.

mod support;

use support::{Env, example, opencl_present, s};

#[test]
fn rmsnorm_then_gelu_fuses_into_one_kernel_on_replay() {
    if !opencl_present("rmsnorm_then_gelu_fuses_into_one_kernel_on_replay") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    env.ok(&["replay", &example("workflows/rmsnorm-gelu-opencl-agent.bundle"), "--into", s(&wf), "--samples", "2", "--budget", "3", "--set", "rows=64"]);
    let log = env.json(&["log", "-w", s(&wf), "--json"]);
    let tip = &log[0];
    assert_eq!(
        (tip["transformation"].as_str(), tip["verdict"].as_str(), tip["model"].as_str()),
        (Some("Fuse-Epilogue"), Some("passed"), Some("agent")),
        "{tip}"
    );
    let show = env.json(&["show", "HEAD", "-w", s(&wf), "--json"]);
    let source = show["files"]["kernel.cl"].as_str().unwrap();
    let host = source.split("// @peak host").nth(1).unwrap();
    assert_eq!(host.matches("launch(").count(), 1, "one launch left:\n{host}");
    assert!(!host.contains("alloc(") && !source.contains("gain_gelu"), "the scratch and the consumer are gone:\n{source}");
}

#[test]
fn a_single_kernel_is_refused_before_anything_is_asked() {
    let env = Env::new();
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &example("gelu-bf16-opencl"), "--no-measure", "--samples", "2"]);
    let out = env.peak(&["apply", "fuse-epilogue", "-w", &wf, "--executor", "agent"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("needs a launch script that runs at least 2 kernels, and this one runs 1 (gelu)"), "{err}");
    assert!(!env.path("wf/.git/peak/apply").exists(), "no apply was started");
}
