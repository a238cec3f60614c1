//! Applying transformations through the `peak` binary on OpenCL (PoCL in CI): the agent
//! flow, the LLM repair loop against a local fake server, and the replay of the recorded
//! workflow in examples/workflows.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use peak_transform::testing::{FakeLlmServer, Scripted};

struct Env {
    _tmp: tempfile::TempDir,
    cache: PathBuf,
    wf: PathBuf,
}

fn setup() -> Option<Env> {
    if peak_opencl::list_devices().is_err() {
        eprintln!("SKIPPED: no OpenCL device (install pocl-opencl-icd)");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let env = Env { cache: tmp.path().join("cache"), wf: tmp.path().join("wf"), _tmp: tmp };
    ok(&env, &["init", s(&env.wf), "--from", s(&example("matmul-opencl-naive")), "--set", "n=256", "--budget", "6"], &[]);
    Some(env)
}

fn peak(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_peak"));
    cmd.args(args).env("PEAK_CACHE_DIR", &env.cache);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("peak runs")
}

fn ok(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> String {
    let out = peak(env, args, vars);
    assert!(out.status.success(), "peak {args:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const FAST: [&str; 6] = ["--set", "n=256", "--samples", "3", "--budget", "4"];

fn attempts(env: &Env) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(env.wf.join(".git/peak/attempts.jsonl")).unwrap_or_default();
    text.lines().map(json).filter(|r| r["outcome"] != "started").collect()
}

#[test]
fn agent_flow_waits_for_each_region_and_checkpoints() {
    let Some(env) = setup() else { return };
    let w = s(&env.wf);
    let first = json(&ok(&env, &[&["apply", "refactor", "-w", w, "--json"][..], &FAST].concat(), &[]));
    assert_eq!(first["status"], "waiting");
    assert_eq!(first["pass"], 1);
    assert_eq!(first["region"], "macros");
    assert!(first["prompt"].as_str().unwrap().contains("# Answer format"));
    let pending = ok(&env, &["pending", "-w", w], &[]);
    assert!(pending.contains("You edit the **macros** region"), "{pending}");

    // A second apply while one waits is refused clearly.
    let busy = peak(&env, &["apply", "tb-tiling", "-w", w], &[]);
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("already in progress"));

    let second = json(&ok(&env, &["submit", s(&fixture("refactor/macros.c")), "-w", w, "--json"], &[]));
    assert_eq!((second["status"].as_str(), second["pass"].as_u64(), second["region"].as_str()), (Some("waiting"), Some(2), Some("device")));
    let done = json(&ok(&env, &["submit", s(&fixture("refactor/device.c")), "-w", w, "--json"], &[]));
    assert_eq!(done["status"], "checkpoint", "{done}");

    let log = json(&ok(&env, &["log", "-w", w, "--json"], &[]));
    let head = &log.as_array().unwrap()[0];
    assert_eq!(head["transformation"], "Refactor");
    assert_eq!(head["executor"], "agent");
    assert!(head["speedup_over_root"].as_f64().unwrap() > 0.0);
    let show = json(&ok(&env, &["show", "HEAD", "-w", w, "--json"], &[]));
    let entries = show["transcript"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e["producer"] == "agent"), "the transcript must say the agent wrote it");
    assert!(show["files"]["kernel.cl"].as_str().unwrap().contains("#define A_AT(r, c)"));
    assert!(ok(&env, &["pending", "-w", w], &[]).is_empty(), "nothing waits after the checkpoint");
}

fn fenced(path: &str) -> String {
    format!("Here is the region.\n\n```c\n{}```\n", std::fs::read_to_string(fixture(path)).unwrap())
}

fn llm_vars(server: &FakeLlmServer) -> Vec<(&'static str, String)> {
    vec![("PEAK_OPENAI_BASE_URL", server.openai_base_url()), ("OPENAI_API_KEY", "test-key-not-secret".into())]
}

#[test]
fn compile_error_is_repaired_on_the_next_try() {
    let Some(env) = setup() else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let broken = fenced("refactor/device.c").replace("A_AT(ROW, k)", "A_AT(ROW, kk)");
    let server = runtime
        .block_on(FakeLlmServer::start([Scripted::reply(fenced("refactor/macros.c")), Scripted::reply(broken), Scripted::reply(fenced("refactor/device.c"))]))
        .unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = json(&ok(&env, &[&["apply", "refactor", "--executor", "openai:fake-model", "-w", s(&env.wf), "--json"][..], &FAST].concat(), &vars));
    assert_eq!(out["status"], "checkpoint", "{out}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let repair = requests[2].prompt().unwrap();
    assert!(repair.contains("kk"), "the repair prompt carries the compiler log");
    let outcomes: Vec<String> = attempts(&env).iter().map(|a| a["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes, ["compile-failed", "passed"]);
    let log = json(&ok(&env, &["log", "-w", s(&env.wf), "--json"], &[]));
    assert_eq!(log.as_array().unwrap()[0]["executor"], "openai");
}

#[test]
fn wrong_output_exhausts_the_retries_and_leaves_the_parent() {
    let Some(env) = setup() else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let wrong = fenced("refactor/device.c").replace("C_AT(ROW, COL) = acc;", "C_AT(ROW, COL) = 2.0f * acc;");
    let server =
        runtime.block_on(FakeLlmServer::start([Scripted::reply(fenced("refactor/macros.c")), Scripted::reply(wrong.clone()), Scripted::reply(wrong)])).unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = peak(&env, &[&["apply", "refactor", "--executor", "openai:fake-model", "--retries", "1", "-w", s(&env.wf), "--json"][..], &FAST].concat(), &vars);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let result = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(result["status"], "failed");
    assert_eq!(result["last_outcome"], "wrong-output");
    let outcomes: Vec<String> = attempts(&env).iter().map(|a| a["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes, ["wrong-output", "wrong-output"]);
    // Each rejection names the device that judged it.
    for attempt in attempts(&env) {
        assert!(attempt["error"].as_str().unwrap().contains(" (on opencl "), "{attempt}");
    }
    assert!(result["last_error"].as_str().unwrap().contains(" (on opencl "), "{result}");
    let log = json(&ok(&env, &["log", "-w", s(&env.wf), "--json"], &[]));
    assert_eq!(log.as_array().unwrap().len(), 1, "no checkpoint was made");
    assert!(ok(&env, &["fsck", "-w", s(&env.wf)], &[]).contains("consistent"));
}

#[test]
fn two_code_blocks_are_an_attempt_outcome_not_a_crash() {
    let Some(env) = setup() else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let two = format!("{}\n{}", fenced("refactor/macros.c"), fenced("refactor/macros.c"));
    let server = runtime.block_on(FakeLlmServer::start([Scripted::reply(two)])).unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = peak(&env, &[&["apply", "refactor", "--executor", "openai:fake-model", "--retries", "0", "-w", s(&env.wf), "--json"][..], &FAST].concat(), &vars);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&String::from_utf8_lossy(&out.stdout))["last_outcome"], "unparsable-reply");
}

#[test]
fn recorded_agent_workflow_replays_end_to_end() {
    if peak_opencl::list_devices().is_err() {
        eprintln!("SKIPPED: no OpenCL device (install pocl-opencl-icd)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let env = Env { cache: tmp.path().join("cache"), wf: tmp.path().join("replayed"), _tmp: tempfile::tempdir().unwrap() };
    let recorded = tmp.path().join("recorded");
    let clone = Command::new("git").args(["clone", "-q", s(&example("workflows/matmul-opencl-agent.bundle")), s(&recorded)]).output().unwrap();
    assert!(clone.status.success(), "{}", String::from_utf8_lossy(&clone.stderr));
    ok(&env, &["replay", s(&recorded), "--into", s(&env.wf), "--set", "n=256", "--samples", "4", "--budget", "24"], &[]);
    // The recorded line the replay follows: HEAD's first parents, newest first (the bundle
    // holds other branches too, which `peak log` lists as well).
    let recorded_line = Command::new("git").args(["-C", s(&recorded), "log", "--first-parent", "--format=%s"]).output().unwrap();
    let original: Vec<String> = String::from_utf8_lossy(&recorded_line.stdout).lines().map(|l| l.split(':').next().unwrap().to_string()).collect();
    let replayed = json(&ok(&env, &["log", "-w", s(&env.wf), "--json"], &[]));
    let steps = |log: &serde_json::Value| log.as_array().unwrap().iter().map(|e| e["transformation"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(steps(&replayed), original);
    assert_eq!(steps(&replayed), ["Thread-Tiling", "TB-Tiling", "Refactor", "init"]);
    for entry in replayed.as_array().unwrap().iter().filter(|e| e["transformation"] != "init") {
        assert_eq!(entry["verdict"], "passed");
        assert!(entry["speedup_over_root"].as_f64().unwrap() > 0.0 && entry["speedup_over_parent"].as_f64().unwrap() > 0.0);
        assert_eq!(entry["executor"], "replay");
        assert_eq!(entry["model"], "agent", "a replay says whose responses it re-ran");
    }
}

#[test]
fn retune_records_the_same_code_better_searched_and_replays_its_budget() {
    let Some(env) = setup() else { return };
    let w = s(&env.wf);
    let done = json(&ok(&env, &["retune", "-w", w, "--set", "n=256", "--budget", "12", "--json"], &[]));
    assert_eq!((done["status"].as_str(), done["transformation"].as_str()), (Some("checkpoint"), Some("Retune")), "{done}");

    let show = json(&ok(&env, &["show", "HEAD", "-w", w, "--json"], &[]));
    let root = json(&ok(&env, &["show", "root", "-w", w, "--json"], &[]));
    assert_eq!(show["files"], root["files"], "a retune changes no code");
    assert_eq!(show["transcript"]["retune"]["budget"], 12);
    assert_eq!(show["transcript"]["producer"], "user", "the records say who asked for it");
    let evaluated = |view: &serde_json::Value| view["performance"]["runs"][0]["evaluations"].as_u64().unwrap();
    assert!(evaluated(&show) > evaluated(&root), "the root was tuned with 6, the retune with 12: {} vs {}", evaluated(&show), evaluated(&root));
    let best = |view: &serde_json::Value| view["performance"]["best"]["time_ms"].as_f64().unwrap();
    assert!(best(&show) > 0.0);

    // A replay repeats the recorded search, not its own smaller budget.
    let replayed = env.wf.with_extension("replayed");
    ok(&env, &["replay", w, "--into", s(&replayed), "--set", "n=256", "--samples", "3", "--budget", "4"], &[]);
    let log = json(&ok(&env, &["log", "-w", s(&replayed), "--json"], &[]));
    assert_eq!(log[0]["transformation"], "Retune");
    let again = json(&ok(&env, &["show", "HEAD", "-w", s(&replayed), "--json"], &[]));
    assert!(evaluated(&again) > 4, "replayed with the recorded budget (12), not --budget 4: {}", evaluated(&again));

    // Once the whole space (36 configurations at n=256) is measured, there is nothing left.
    ok(&env, &["retune", "-w", w, "--set", "n=256", "--budget", "100"], &[]);
    let done = peak(&env, &["retune", "-w", w, "--set", "n=256"], &[]);
    assert!(!done.status.success());
    assert!(
        String::from_utf8_lossy(&done.stderr).contains("36 at n=256") && String::from_utf8_lossy(&done.stderr).contains("nothing left to search"),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );

    // Not while an apply waits for its regions.
    assert_eq!(json(&ok(&env, &[&["apply", "refactor", "-w", w, "--json"][..], &FAST].concat(), &[]))["status"], "waiting");
    let busy = peak(&env, &["retune", "-w", w], &[]);
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("in progress"), "{}", String::from_utf8_lossy(&busy.stderr));
}

#[test]
fn a_reply_that_changes_nothing_is_not_a_checkpoint() {
    let Some(env) = setup() else { return };
    let library = env.wf.with_file_name("library");
    std::fs::create_dir_all(&library).unwrap();
    std::fs::write(
        library.join("note.toml"),
        "name = \"Note\"\ndescription = \"comment the kernel\"\npatterns = [\"gemm\"]\n[[passes]]\nregion = \"device\"\ntitle = \"comment\"\ninstructions = \"Add a comment above the kernel.\"\n",
    )
    .unwrap();
    let device = std::fs::read_to_string(example("matmul-opencl-naive").join("kernel.cl")).unwrap();
    let device = device.split("// @peak device\n").nth(1).unwrap().split("// @peak host").next().unwrap().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let unchanged = format!("```c\n{device}```\n");
    let commented = format!("```c\n// one work-item per output\n{device}```\n");
    let server = runtime.block_on(FakeLlmServer::start([Scripted::reply(unchanged), Scripted::reply(commented)])).unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = [&["apply", "note", "--executor", "openai:fake-model", "-w", s(&env.wf), "--library", s(&library), "--json"][..], &FAST].concat();
    let out = json(&ok(&env, &args, &vars));
    assert_eq!(out["status"], "checkpoint", "{out}");
    let outcomes: Vec<String> = attempts(&env).iter().map(|a| a["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes, ["unchanged", "passed"], "an unchanged answer is a failed try, repaired");
    let repair = server.requests()[1].prompt().unwrap();
    assert!(repair.contains("leave every region exactly as it was"), "{repair}");
}

/// A transformation that asks for the regions back unchanged where the kernel does not
/// fit ("not carried out") is answered by an unchanged reply: the apply ends at once,
/// nothing is asked again and no checkpoint is made.
#[test]
fn an_unchanged_reply_to_a_transformation_that_offers_to_decline_ends_the_apply() {
    let Some(env) = setup() else { return };
    let library = env.wf.with_file_name("library");
    std::fs::create_dir_all(&library).unwrap();
    std::fs::write(
        library.join("rows.toml"),
        "name = \"Rows\"\ndescription = \"rows only\"\npatterns = [\"gemm\"]\noverview = \"Fits a kernel of contiguous rows; for any other return the region exactly as it is (peak then records that the transformation was not carried out).\"\n[[passes]]\nregion = \"device\"\ntitle = \"rows\"\ninstructions = \"Add a comment above the kernel.\"\n",
    )
    .unwrap();
    let device = std::fs::read_to_string(example("matmul-opencl-naive").join("kernel.cl")).unwrap();
    let device = device.split("// @peak device\n").nth(1).unwrap().split("// @peak host").next().unwrap().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let unchanged = format!("```c\n{device}```\n");
    let server = runtime.block_on(FakeLlmServer::start([Scripted::reply(unchanged.clone()), Scripted::reply(unchanged)])).unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = [&["apply", "rows", "--executor", "openai:fake-model", "-w", s(&env.wf), "--library", s(&library), "--json"][..], &FAST].concat();
    let out = peak(&env, &args, &vars);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let result = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["last_outcome"], "unchanged");
    assert!(result["last_error"].as_str().unwrap().contains("not carried out"), "{result}");
    let outcomes: Vec<String> = attempts(&env).iter().map(|a| a["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes, ["unchanged"], "asked once");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(json(&ok(&env, &["log", "-w", s(&env.wf), "--json"], &[])).as_array().unwrap().len(), 1, "no checkpoint was made");
}

#[test]
fn a_key_the_server_quotes_back_reaches_nothing_peak_writes() {
    let Some(env) = setup() else { return };
    let w = s(&env.wf);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(FakeLlmServer::start([Scripted::unauthorized_echoing_key()])).unwrap();
    // Shaped like no provider's key, so only its value can find it.
    let key = "peak-test-key-7f3a9c2e41b8d605";
    let base_url = server.openai_base_url();
    let vars = [("PEAK_OPENAI_BASE_URL", base_url.as_str()), ("OPENAI_API_KEY", key)];
    let out = peak(&env, &[&["apply", "refactor", "--executor", "openai:fake-model", "-w", w, "--json"][..], &FAST].concat(), &vars);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(server.requests()[0].header("authorization").is_some_and(|h| h.contains(key)), "the server was sent the key it quotes back");
    let last = attempts(&env).pop().unwrap();
    assert_eq!(last["outcome"], "http-error");
    assert!(last["error"].as_str().unwrap().contains("Incorrect API key provided: [REDACTED]"), "{last}");
    // Mirrored to the peak-attempts branch, which bundles and clones carry.
    ok(&env, &["bundle", w, s(&env.wf.with_extension("bundle"))], &vars);

    let mut written = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let mut folders = vec![env.wf.clone()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                written.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    // Git's objects are compressed: read every one back as git stores it.
    let objects = Command::new("git").args(["-C", w, "cat-file", "--batch-all-objects", "--batch"]).output().unwrap();
    assert!(objects.status.success());
    let objects = String::from_utf8_lossy(&objects.stdout);
    assert!(objects.contains("[REDACTED]"), "the attempts mirror holds the redacted error");
    written.push_str(&objects);
    assert!(!written.contains(key), "the key was written somewhere under {w} or printed");
}

#[test]
fn the_sizes_given_to_init_are_the_ones_later_steps_validate_and_tune_at() {
    let Some(env) = setup() else { return };
    let w = s(&env.wf);
    let root = json(&ok(&env, &["show", "root", "-w", w, "--json"], &[]));
    assert_eq!(root["reference"]["set"], serde_json::json!(["n=256"]), "init stores its --set");
    // No --set: the manifest lists n = 256, 512 and 1024, the root was made at 256.
    ok(&env, &["apply", "refactor", "-w", w, "--samples", "3", "--budget", "4"], &[]);
    ok(&env, &["submit", s(&fixture("refactor/macros.c")), "-w", w], &[]);
    let done = json(&ok(&env, &["submit", s(&fixture("refactor/device.c")), "-w", w, "--json"], &[]));
    assert_eq!(done["status"], "checkpoint", "{done}");
    let head = json(&ok(&env, &["show", "HEAD", "-w", w, "--json"], &[]));
    let tuned: Vec<&serde_json::Value> = head["performance"]["runs"].as_array().unwrap().iter().map(|r| &r["inputs"]).collect();
    assert_eq!(tuned, [&serde_json::json!({"n": 256})], "tuned only at the size of the reference");
    let validated: Vec<&serde_json::Value> = head["validation"]["samples"].as_array().unwrap().iter().map(|s| &s["params"]["inputs"]["n"]).collect();
    assert!(!validated.is_empty() && validated.iter().all(|n| **n == 256), "validated only at the size of the reference: {validated:?}");
}

#[test]
fn the_sizes_given_to_replay_are_stored_and_the_recorded_ones_kept_otherwise() {
    let Some(env) = setup() else { return };
    let w = s(&env.wf);
    let root = |wf: &Path| json(&ok(&env, &["show", "root", "-w", s(wf), "--json"], &[]));
    let tuned = |view: &serde_json::Value| view["performance"]["runs"].as_array().unwrap().iter().map(|r| r["inputs"].clone()).collect::<Vec<_>>();

    // No --set: the replay makes its root at the recording's sizes, and stores them.
    let kept = env.wf.with_extension("kept");
    ok(&env, &["replay", w, "--into", s(&kept), "--budget", "2"], &[]);
    let view = root(&kept);
    assert_eq!(view["reference"]["set"], serde_json::json!(["n=256"]), "{}", view["reference"]);
    assert_eq!(tuned(&view), [serde_json::json!({"n": 256})]);

    // --set n=64: stored in the replayed workflow, and a later step tunes there alone.
    let other = env.wf.with_extension("other");
    ok(&env, &["replay", w, "--into", s(&other), "--set", "n=64", "--budget", "2"], &[]);
    assert_eq!(root(&other)["reference"]["set"], serde_json::json!(["n=64"]), "replay stores its --set");
    ok(&env, &["retune", "-w", s(&other), "--budget", "2"], &[]);
    let head = json(&ok(&env, &["show", "HEAD", "-w", s(&other), "--json"], &[]));
    assert_eq!(head["meta"]["transformation"], "Retune", "{}", head["meta"]);
    assert_eq!(tuned(&head), [serde_json::json!({"n": 64})], "tuned only at the size the replay was given");
}

#[test]
fn llm_retries_are_reported_as_they_happen() {
    let Some(env) = setup() else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let two = format!("{}\n{}", fenced("refactor/macros.c"), fenced("refactor/macros.c"));
    let server = runtime.block_on(FakeLlmServer::start([Scripted::rate_limited(0), Scripted::reply(two)])).unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = peak(&env, &[&["apply", "refactor", "--executor", "openai:fake-model", "--retries", "0", "-w", s(&env.wf)][..], &FAST].concat(), &vars);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("fake-model: HTTP 429 from {}; retry 1 of 5 in 0.0 s", server.openai_base_url())), "{stderr}");
}

#[test]
fn samples_the_launch_script_prunes_are_drawn_again() {
    // A step whose launch script refuses all but one of eight configurations: one sample
    // (--samples 1) is most likely a pruned one, which says nothing of the kernel; validation
    // draws others until one runs, so the step is judged instead of refused as inconclusive.
    let Some(env) = setup() else { return };
    // Prune: a host pass that refuses every P but 8 of eight.
    let library = fixture("prune-library");
    let host = std::fs::read_to_string(example("matmul-opencl-naive").join("kernel.cl")).unwrap();
    let host = host.split("// @peak host\n").nth(1).unwrap().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reply = format!("```rhai\nif P != 8 {{ invalid(\"only P = 8 runs\"); }}\n{host}```\n");
    let server = runtime.block_on(FakeLlmServer::start([Scripted::reply(reply)])).unwrap();
    let vars = llm_vars(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = [
        "apply",
        "prune",
        "--executor",
        "openai:fake-model",
        "-w",
        s(&env.wf),
        "--library",
        s(&library),
        "--json",
        "--set",
        "n=256",
        "--samples",
        "1",
        "--budget",
        "64",
        "--seed",
        "3",
    ];
    let out = json(&ok(&env, &args, &vars));
    assert_eq!(out["status"], "checkpoint", "{out}");
    let show = json(&ok(&env, &["show", "HEAD", "-w", s(&env.wf), "--json"], &[]));
    let ran: Vec<&serde_json::Value> = show["validation"]["samples"].as_array().unwrap().iter().filter(|s| s["verdict"]["category"] == "passed").collect();
    assert!(!ran.is_empty(), "a sample that ran: {}", show["validation"]);
    assert!(ran.iter().all(|s| s["params"]["tuning"]["P"] == 8), "{}", show["validation"]);
}
