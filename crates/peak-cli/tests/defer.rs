//! Authoring where there is no GPU: `peak apply --defer` compile-checks CUDA with NVRTC
//! alone (no device, no driver) and records a deferred checkpoint; `peak bundle` packs
//! the workflow and `peak replay FILE.bundle` validates and tunes it where a device is
//! (PoCL here, on an OpenCL workflow). Tests skip, saying why, where NVRTC or an OpenCL
//! device is missing.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{Env, MEASURE, deferred_refactor, example, fixture, nvrtc_present, opencl_present, s, steps};

fn outcomes(wf: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(wf.join(".git/peak/attempts.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["outcome"].as_str().unwrap().to_string()).filter(|o| o != "started").collect()
}

#[test]
fn deferred_cuda_apply_compile_checks_repairs_and_records_a_deferred_checkpoint() {
    if !nvrtc_present("deferred_cuda_apply_compile_checks_repairs_and_records_a_deferred_checkpoint") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = s(&wf);
    // No CUDA device here: a CUDA workflow starts unmeasured.
    env.ok(&["init", w, "--from", &example("matmul-cuda-f32"), "--no-measure"]);
    let first = env.json(&["apply", "refactor", "--defer", "--samples", "4", "-w", w, "--json"]);
    assert_eq!((first["status"].as_str(), first["region"].as_str()), (Some("waiting"), Some("macros")));

    // `submit` is a new process: the defer choice comes from the apply's state file.
    let second = env.json(&["submit", &fixture("refactor-cuda/macros.cu"), "-w", w, "--json"]);
    assert_eq!((second["status"].as_str(), second["region"].as_str()), (Some("waiting"), Some("device")));
    let broken = env.path("broken.cu");
    std::fs::write(&broken, std::fs::read_to_string(fixture("refactor-cuda/device.cu")).unwrap().replace("A_AT(ROW, k)", "A_AT(ROW, kk)")).unwrap();
    let repair = env.json(&["submit", s(&broken), "-w", w, "--json"]);
    assert_eq!((repair["status"].as_str(), repair["pass"].as_u64(), repair["attempt"].as_u64()), (Some("waiting"), Some(2), Some(2)), "{repair}");
    let prompt = repair["prompt"].as_str().unwrap();
    assert!(prompt.contains("does not compile") && prompt.contains("\"kk\" is undefined"), "the repair prompt carries NVRTC's log:\n{prompt}");
    assert_eq!(outcomes(&wf), ["compile-failed"]);

    let done = env.json(&["submit", &fixture("refactor-cuda/device.cu"), "-w", w, "--json"]);
    assert_eq!((done["status"].as_str(), done["verdict"].as_str()), (Some("checkpoint"), Some("deferred")), "{done}");
    assert_eq!(done["best_ms"], Value::Null);
    assert_eq!(outcomes(&wf), ["compile-failed", "deferred"]);

    let log = env.json(&["log", "-w", w, "--json"]);
    let head = &log.as_array().unwrap()[0];
    assert_eq!((head["transformation"].as_str(), head["verdict"].as_str()), (Some("Refactor"), Some("deferred")));
    assert_eq!(head["best_time_ms"], Value::Null);
    assert!(env.ok(&["log", "-w", w]).lines().next().unwrap().contains("deferred"));

    let show = env.json(&["show", "HEAD", "-w", w, "--json"]);
    assert_eq!(show["performance"], serde_json::json!({}), "nothing was timed");
    let check = &show["validation"]["compile_check"];
    assert!(check["target"].as_str().unwrap().contains("sm_90a"), "{check}");
    let samples = check["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 4, "the validation sample, compile-checked");
    let compiled: Vec<&Value> = samples.iter().filter(|s| s["status"] == "compiled").collect();
    assert!(!compiled.is_empty() && compiled.iter().all(|s| s["kernels"][0]["registers"].as_u64().unwrap() > 0), "{check}");
    assert!(samples.iter().all(|s| s["params"]["inputs"]["n"].as_i64().is_some()), "checked at the manifest's inputs");
    let text = env.ok(&["show", "HEAD", "-w", w]);
    assert!(text.contains("verdict         deferred") && text.contains("compile-checked"), "{text}");
}

#[test]
fn a_compile_error_in_the_macros_region_sends_the_repair_to_the_macros_pass() {
    if !nvrtc_present("a_compile_error_in_the_macros_region_sends_the_repair_to_the_macros_pass") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = s(&wf);
    env.ok(&["init", w, "--from", &example("matmul-cuda-f32"), "--no-measure"]);
    env.ok(&["apply", "refactor", "--defer", "--samples", "2", "-w", w]);
    let macros = env.path("macros.cu");
    std::fs::write(&macros, std::fs::read_to_string(fixture("refactor-cuda/macros.cu")).unwrap() + "static int oops = ;\n").unwrap();
    env.ok(&["submit", s(&macros), "-w", w]);
    // NVRTC writes `matmul.cu(12): error`; the line is in the macros region, so pass 1 is asked again.
    let repair = env.json(&["submit", &fixture("refactor-cuda/device.cu"), "-w", w, "--json"]);
    assert_eq!((repair["pass"].as_u64(), repair["region"].as_str(), repair["attempt"].as_u64()), (Some(1), Some("macros"), Some(2)), "{repair}");
}

/// An OpenCL workflow authored with deferred steps: the checkpoint `Refactor` (tagged
/// `refactored`) on main, and a branch `alt` at the root that is checked out.
fn authored(env: &Env) -> PathBuf {
    let wf = deferred_refactor(env);
    let w = s(&wf);
    env.ok(&["branch", "alt", "--from", "root", "-w", w]);
    env.ok(&["checkout", "alt", "-w", w]);
    wf
}

#[test]
fn a_bundle_carries_a_deferred_workflow_and_replay_validates_and_tunes_it() {
    if !opencl_present("a_bundle_carries_a_deferred_workflow_and_replay_validates_and_tunes_it") {
        return;
    }
    let env = Env::new();
    let wf = authored(&env);
    env.ok(&["checkout", "main", "-w", s(&wf)]);
    let file = env.path("authored.bundle");
    let packed = env.json(&["bundle", s(&wf), s(&file), "--json"]);
    for r in ["refs/heads/main", "refs/heads/alt", "refs/heads/peak-attempts", "refs/tags/refactored"] {
        assert!(packed["refs"].as_array().unwrap().iter().any(|x| x == r), "{r} is not in {packed}");
    }
    assert_eq!(packed["attempts"], 1, "the attempts log travels");

    // The GPU machine's side: the bundle file itself is the source.
    let verified = env.path("verified");
    env.ok(&[&["replay", s(&file), "--into", s(&verified)][..], &MEASURE].concat());
    assert_eq!(steps(&env, &verified), [("Refactor".into(), "passed".into()), ("init".into(), "reference".into())]);
    let head = &env.json(&["log", "-w", s(&verified), "--json"])[0];
    assert!(head["speedup_over_root"].as_f64().unwrap() > 0.0, "validated and tuned: {head}");
    assert_eq!(head["tags"], serde_json::json!(["refactored"]), "the recorded tag names the replayed checkpoint");

    // And back: the verified workflow packs the same way, and git clones it.
    let back = env.path("verified.bundle");
    env.ok(&["bundle", s(&verified), s(&back)]);
    let home = env.path("home");
    let clone = Command::new("git").args(["-c", "init.defaultBranch=main", "clone", "-q", s(&back), s(&home)]).output().unwrap();
    assert!(clone.status.success() && clone.stderr.is_empty(), "{}", String::from_utf8_lossy(&clone.stderr));
    assert_eq!(steps(&env, &home), steps(&env, &verified));
    assert!(env.ok(&["fsck", "-w", s(&home)]).contains("consistent"));
}

#[test]
fn replay_follows_the_current_branch_or_the_one_named() {
    if !opencl_present("replay_follows_the_current_branch_or_the_one_named") {
        return;
    }
    let env = Env::new();
    let wf = authored(&env);
    // `alt` is checked out and holds the root alone.
    let current = env.path("current");
    env.ok(&[&["replay", s(&wf), "--into", s(&current)][..], &MEASURE].concat());
    assert_eq!(steps(&env, &current), [("init".into(), "reference".into())]);
    // A branch, or a tag, names the chain; each replay starts again from the root.
    for (name, into) in [("main", "by-branch"), ("refactored", "by-tag")] {
        let into = env.path(into);
        env.ok(&[&["replay", s(&wf), "--branch", name, "--into", s(&into)][..], &MEASURE].concat());
        assert_eq!(steps(&env, &into), [("Refactor".into(), "passed".into()), ("init".into(), "reference".into())], "--branch {name}");
    }
    let unknown = env.peak(&[&["replay", s(&wf), "--branch", "nope", "--into", s(&env.path("none"))][..], &MEASURE].concat());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(!unknown.status.success() && stderr.contains("--branch nope") && stderr.contains("unknown checkpoint"), "{stderr}");
}

#[test]
fn a_deferred_step_that_compiles_but_is_wrong_stops_the_replay_naming_it() {
    if !opencl_present("a_deferred_step_that_compiles_but_is_wrong_stops_the_replay_naming_it") {
        return;
    }
    let env = Env::new();
    let wf = env.path("authored");
    let w = s(&wf);
    env.ok(&["init", w, "--from", &example("matmul-opencl-naive"), "--no-measure", "--set", "n=256"]);
    env.ok(&["apply", "refactor", "--defer", "--samples", "3", "--set", "n=256", "-w", w]);
    env.ok(&["submit", &fixture("refactor/macros.c"), "-w", w]);
    // Compiles, so the compile check lets it through; only a device can tell it is wrong.
    let wrong = env.path("wrong.c");
    std::fs::write(&wrong, std::fs::read_to_string(fixture("refactor/device.c")).unwrap().replace("C_AT(ROW, COL) = acc;", "C_AT(ROW, COL) = 2.0f * acc;"))
        .unwrap();
    assert_eq!(env.json(&["submit", s(&wrong), "-w", w, "--json"])["verdict"], "deferred");

    let verified = env.path("verified");
    let out = env.peak(&[&["replay", w, "--into", s(&verified)][..], &MEASURE].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Refactor") && stderr.contains("deferred where it was written, does not pass here: wrong-output"), "{stderr}");
    assert_eq!(steps(&env, &verified), [("init".into(), "reference".into())], "the steps before it stay replayed");
}

#[test]
fn a_replay_cut_short_resumes_where_it_stopped_and_refuses_another_chain() {
    if !opencl_present("a_replay_cut_short_resumes_where_it_stopped_and_refuses_another_chain") {
        return;
    }
    let env = Env::new();
    let wf = authored(&env);
    // As a batch job's time limit leaves it: the root replayed, the step after it not.
    let into = env.path("into");
    env.ok(&[&["replay", s(&wf), "--branch", "root", "--into", s(&into)][..], &MEASURE].concat());
    let root_id = env.json(&["log", "-w", s(&into), "--json"])[0]["id"].clone();

    let resumed = env.json(&[&["replay", s(&wf), "--branch", "main", "--into", s(&into), "--json"][..], &MEASURE].concat());
    assert_eq!(resumed.as_array().map(Vec::len), Some(1), "only the missing step is replayed: {resumed}");
    assert_eq!(steps(&env, &into), [("Refactor".into(), "passed".into()), ("init".into(), "reference".into())]);
    assert_eq!(env.json(&["log", "-w", s(&into), "--json"])[1]["id"], root_id, "the replayed root is kept, not redone");

    // A workflow that is not the start of the chain asked for is left alone.
    let out = env.peak(&[&["replay", s(&wf), "--branch", "root", "--into", s(&into)][..], &MEASURE].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("not the start of this replay") && stderr.contains("its steps: [Refactor]"), "{stderr}");
    assert_eq!(steps(&env, &into).len(), 2, "nothing was added or removed");
}

#[test]
fn a_deferred_compile_check_draws_again_where_the_launch_script_pruned_every_sample() {
    // A step whose launch script refuses all but one of eight configurations: one sample
    // (--samples 1) is most likely a pruned one, which says nothing of the kernel; as on a
    // GPU, the compile check draws others until one compiles, instead of sending the step
    // back to the executor as if its code were wrong.
    if !nvrtc_present("a_deferred_compile_check_draws_again_where_the_launch_script_pruned_every_sample") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = s(&wf);
    env.ok(&["init", w, "--from", &example("matmul-cuda-f32"), "--no-measure"]);
    // Prune: a host pass that refuses every P but 8 of eight.
    let library = fixture("prune-library");
    let source = std::fs::read_to_string(Path::new(&example("matmul-cuda-f32")).join("matmul.cu")).unwrap();
    let host = env.path("host.rhai");
    std::fs::write(&host, format!("if P != 8 {{ invalid(\"only P = 8 runs\"); }}\n{}", source.split("// @peak host\n").nth(1).unwrap())).unwrap();
    let args = ["apply", "prune", "--executor", "agent", "--defer", "--samples", "1", "--seed", "3", "--library", &library, "-w", w, "--json"];
    assert_eq!(env.json(&args)["region"], "host");
    let done = env.json(&["submit", s(&host), "-w", w, "--json"]);
    assert_eq!((done["status"].as_str(), done["verdict"].as_str()), (Some("checkpoint"), Some("deferred")), "{done}");
    assert_eq!(outcomes(&wf), ["deferred"], "no attempt went back to the executor");
    let show = env.json(&["show", "HEAD", "-w", w, "--json"]);
    let samples = show["validation"]["compile_check"]["samples"].as_array().unwrap().clone();
    let compiled: Vec<&Value> = samples.iter().filter(|s| s["status"] == "compiled").collect();
    assert!(!compiled.is_empty() && compiled.iter().all(|s| s["params"]["tuning"]["P"] == 8), "{samples:?}");
}
