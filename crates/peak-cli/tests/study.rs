//! `peak study` against a local fake LLM server (no LLM API is reachable from CI): two
//! executors, two runs each, with scripted good, broken and malformed replies. The study
//! must leave HEAD and its branch alone, count what the script made happen, record every
//! try in the attempts log with its model, and feed `peak report`'s success figure.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;

use peak_transform::testing::{FakeLlmServer, Scripted};
use support::{Env, example, fixture, json};

fn fenced(path: &str) -> String {
    format!("Here is the region.\n\n```c\n{}```\n", std::fs::read_to_string(fixture(path)).unwrap())
}

fn git(wf: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(wf).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn study_records_every_run_on_side_branches_and_leaves_head_alone() {
    if peak_opencl::list_devices().is_err() {
        eprintln!("SKIPPED: no OpenCL device (install pocl-opencl-icd)");
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    env.ok_with(&["init", wf.to_str().unwrap(), "--from", &example("matmul-opencl-naive"), "--set", "n=256", "--budget", "4"], &[]);
    let head_before = git(&wf, &["rev-parse", "HEAD"]);
    let branch_before = git(&wf, &["symbolic-ref", "--short", "HEAD"]);
    let kernel_before = std::fs::read_to_string(wf.join("context/kernel.cl")).unwrap();

    let good = || [Scripted::reply(fenced("refactor/macros.c")), Scripted::reply(fenced("refactor/device.c"))];
    let malformed = Scripted::reply(format!("{}\n{}", fenced("refactor/macros.c"), fenced("refactor/macros.c")));
    let broken = fenced("refactor/device.c").replace("A_AT(ROW, k)", "A_AT(ROW, kk)");
    let wrong = fenced("refactor/device.c").replace("C_AT(ROW, COL) = acc;", "C_AT(ROW, COL) = 2.0f * acc;");
    // The study runs in order: openai:model-a twice, then anthropic:model-b twice.
    let script: Vec<Scripted> = [
        good().to_vec(),
        good().to_vec(),
        // Run 1 of model-b: a reply with two code blocks (unusable), then good regions.
        std::iter::once(malformed).chain(good()).collect(),
        // Run 2 of model-b: a compile error, then a wrong output; with --retries 1 it fails.
        vec![Scripted::reply(fenced("refactor/macros.c")), Scripted::reply(broken), Scripted::reply(wrong)],
    ]
    .concat();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(FakeLlmServer::start(script)).unwrap();
    let (openai, anthropic) = (server.openai_base_url(), server.anthropic_base_url());
    let vars = [
        ("PEAK_OPENAI_BASE_URL", openai.as_str()),
        ("OPENAI_API_KEY", "test-key-not-secret"),
        ("PEAK_ANTHROPIC_BASE_URL", anthropic.as_str()),
        ("ANTHROPIC_API_KEY", "test-key-not-secret"),
    ];
    let w = wf.to_str().unwrap();
    let args = [
        "study",
        "-w",
        w,
        "--from",
        "HEAD",
        "--transformations",
        "REFACTOR",
        "--executors",
        "openai:model-a,anthropic:model-b",
        "--repeat",
        "2",
        "--retries",
        "1",
        "--set",
        "n=256",
        "--samples",
        "2",
        "--budget",
        "2",
        "--json",
    ];
    let out = json(&env.ok_with(&args, &vars));
    assert_eq!(server.remaining(), 0, "every scripted reply was asked for: {out:#}");

    // HEAD, its branch and the working folder are where they were.
    assert_eq!(git(&wf, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git(&wf, &["symbolic-ref", "--short", "HEAD"]), branch_before);
    assert_eq!(std::fs::read_to_string(wf.join("context/kernel.cl")).unwrap(), kernel_before);
    assert_eq!(out["head"], head_before.as_str());

    let cells = out["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{out:#}");
    let a = &cells[0];
    assert_eq!(a["transformation"], "Refactor", "the library's spelling, as the attempts log has it");
    assert_eq!(
        (a["executor"].as_str(), a["runs"].as_u64(), a["successes"].as_u64(), a["first_try"].as_u64(), a["failed"].as_u64()),
        (Some("openai:model-a"), Some(2), Some(2), Some(2), Some(0)),
        "{a}"
    );
    let b = &cells[1];
    assert_eq!(
        (b["executor"].as_str(), b["runs"].as_u64(), b["successes"].as_u64(), b["after_repair"].as_u64(), b["failed"].as_u64()),
        (Some("anthropic:model-b"), Some(2), Some(1), Some(1), Some(1)),
        "{b}"
    );
    assert_eq!(b["failures"], serde_json::json!({"bad-reply": 1, "compile-failed": 1, "wrong-output": 1}), "{b}");

    // Each run has its own branch; a success is a checkpoint there.
    let runs = out["runs"].as_array().unwrap();
    let branches: Vec<&str> = runs.iter().map(|r| r["branch"].as_str().unwrap()).collect();
    assert_eq!(
        branches,
        ["study/refactor/openai-model-a/1", "study/refactor/openai-model-a/2", "study/refactor/anthropic-model-b/1", "study/refactor/anthropic-model-b/2"]
    );
    for run in &runs[..3] {
        assert_eq!(run["status"], "checkpoint", "{run}");
        assert_eq!(git(&wf, &["rev-parse", run["branch"].as_str().unwrap()]), run["checkpoint"].as_str().unwrap());
    }
    assert_eq!(runs[2]["tries"], serde_json::json!(["unparsable-reply", "passed"]));
    assert_eq!(runs[3]["status"], "failed");
    assert_eq!(runs[3]["tries"], serde_json::json!(["compile-failed", "wrong-output"]));
    assert_eq!(git(&wf, &["rev-parse", "study/refactor/anthropic-model-b/2"]), head_before, "a failed run's branch stays at --from");

    // The attempts log holds every try with its executor and model.
    let text = std::fs::read_to_string(wf.join(".git/peak/attempts.jsonl")).unwrap();
    let tries: Vec<(String, String, String)> = text
        .lines()
        .map(json)
        .filter(|r| r["outcome"] != "started")
        .map(|r| (r["executor"].as_str().unwrap().to_string(), r["model"].as_str().unwrap_or("").to_string(), r["outcome"].as_str().unwrap().to_string()))
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("openai", "model-a", "passed"),
        ("openai", "model-a", "passed"),
        ("anthropic", "model-b", "unparsable-reply"),
        ("anthropic", "model-b", "passed"),
        ("anthropic", "model-b", "compile-failed"),
        ("anthropic", "model-b", "wrong-output"),
    ]
    .iter()
    .map(|(e, m, o)| (e.to_string(), m.to_string(), o.to_string()))
    .collect();
    assert_eq!(tries, expected);

    // `peak report` counts them in its success figure.
    let report = json(&env.ok_with(&["report", w, "--json"], &[]));
    let success = report["workflows"][0]["success"].as_array().unwrap();
    let row = |executor: &str| success.iter().find(|r| r["executor"] == executor).unwrap_or_else(|| panic!("no {executor} row: {success:?}")).clone();
    let a = row("openai (model-a)");
    assert_eq!((a["applies"].as_u64(), a["first_try"].as_u64(), a["failed"].as_u64()), (Some(2), Some(2), Some(0)), "{a}");
    let b = row("anthropic (model-b)");
    assert_eq!((b["applies"].as_u64(), b["after_repair"].as_u64(), b["failed"].as_u64(), b["tries"].as_u64()), (Some(2), Some(1), Some(1), Some(4)), "{b}");

    // The table a person reads; a second study numbers its branches on.
    for answer in good() {
        server.push(answer);
    }
    let table = env.ok_with(
        &[
            "study",
            "-w",
            w,
            "--transformations",
            "refactor",
            "--executors",
            "openai:model-a",
            "--repeat",
            "1",
            "--set",
            "n=256",
            "--samples",
            "2",
            "--budget",
            "2",
        ],
        &vars,
    );
    println!("{table}");
    assert!(table.contains("openai:model-a") && table.contains("study/refactor/openai-model-a/3"), "{table}");
    assert_eq!(git(&wf, &["rev-parse", "HEAD"]), head_before);

    // An unknown transformation is refused before any branch is made.
    let branches = git(&wf, &["branch", "--list", "study/*"]);
    let refused = env.peak_with(&["study", "-w", w, "--transformations", "refactor,no-such-thing", "--executors", "openai:model-a"], &vars);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(git(&wf, &["branch", "--list", "study/*"]), branches);
}

#[test]
fn a_study_that_reaches_no_model_fails_and_counts_connections_apart() {
    if peak_opencl::list_devices().is_err() {
        eprintln!("SKIPPED: no OpenCL device (install pocl-opencl-icd)");
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = wf.to_str().unwrap();
    env.ok(&["init", w, "--from", &example("matmul-opencl-naive"), "--set", "n=256", "--budget", "4"]);
    // A port nothing listens on: the one a listener had a moment ago.
    let down = format!("http://{}/v1", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let good = || [Scripted::reply(fenced("refactor/macros.c")), Scripted::reply(fenced("refactor/device.c"))];
    let server = runtime.block_on(FakeLlmServer::start([good(), good()].concat())).unwrap();
    let up = server.anthropic_base_url();
    let vars = [
        ("PEAK_OPENAI_BASE_URL", down.as_str()),
        ("OPENAI_API_KEY", "test-key-not-secret"),
        ("PEAK_ANTHROPIC_BASE_URL", up.as_str()),
        ("ANTHROPIC_API_KEY", "test-key-not-secret"),
    ];
    let study = |executors: &str| {
        let args = [
            "study",
            "-w",
            w,
            "--transformations",
            "refactor",
            "--executors",
            executors,
            "--repeat",
            "2",
            "--set",
            "n=256",
            "--samples",
            "2",
            "--budget",
            "2",
            "--json",
        ];
        env.peak_with(&args, &vars)
    };

    // Every endpoint down: nothing was measured, and the study says so, at once.
    let started = std::time::Instant::now();
    let out = study("openai:model-a");
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "an endpoint that is down must not be retried for minutes: {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run reached a model"), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&String::from_utf8_lossy(&out.stdout));
    let cell = &report["cells"][0];
    assert_eq!((cell["runs"].as_u64(), cell["unreachable"].as_u64(), cell["failed"].as_u64()), (Some(2), Some(2), Some(0)), "{cell}");
    assert_eq!(cell["failures"], serde_json::json!({}), "a connection failure is not the model's: {cell}");
    assert!(report["runs"].as_array().unwrap().iter().all(|r| r["status"] == "unreachable" && r["tries"] == serde_json::json!(["connection"])), "{report:#}");

    // One model reached: the study measured something and exits 0, the other counted apart.
    let out = study("anthropic:model-b,openai:model-a");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&String::from_utf8_lossy(&out.stdout));
    let (b, a) = (&report["cells"][0], &report["cells"][1]);
    assert_eq!((b["successes"].as_u64(), b["unreachable"].as_u64()), (Some(2), Some(0)), "{b}");
    assert_eq!(server.remaining(), 0);
    assert_eq!((a["failed"].as_u64(), a["unreachable"].as_u64()), (Some(0), Some(2)), "{a}");
}

/// The lock file's record, once a writer has written it whole (it is rewritten in place).
fn lock_record(wf: &Path) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(wf.join(".git/peak/lock")).unwrap_or_default();
        if let Ok(record) = serde_json::from_str::<serde_json::Value>(text.trim()) {
            return record;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "no lock record: {text:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Wait until the server has been asked `n` questions (the study sits in its n-th run).
fn asked(server: &FakeLlmServer, study: &mut std::process::Child, n: usize) {
    let started = std::time::Instant::now();
    while server.requests().len() < n {
        assert!(study.try_wait().unwrap().is_none(), "the study ended before its run {n} asked the model");
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "run {n} never asked the model");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_study_holds_the_lock_from_its_first_run_to_its_last() {
    let env = Env::new();
    let wf = env.path("wf");
    let w = wf.to_str().unwrap();
    env.ok(&["init", w, "--from", &example("matmul-opencl-naive"), "--no-measure"]);
    let head_before = git(&wf, &["rev-parse", "HEAD"]);
    // Each run's one question is answered late, with no code: the run fails, nothing runs.
    let late = || Scripted::reply("I would rather not.").delayed(std::time::Duration::from_millis(1500));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(FakeLlmServer::start([late(), late()])).unwrap();
    let url = server.openai_base_url();
    let mut study = Command::new(env!("CARGO_BIN_EXE_peak"))
        .args(["study", "-w", w, "--transformations", "refactor", "--executors", "openai:model-a", "--repeat", "2", "--retries", "0", "--json"])
        .env("PEAK_CACHE_DIR", env.path("cache"))
        .env("PEAK_OPENAI_BASE_URL", &url)
        .env("OPENAI_API_KEY", "test-key-not-secret")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    asked(&server, &mut study, 1);
    let first = lock_record(&wf);
    assert_eq!((first["pid"].as_u64(), first["session"].as_str()), (Some(study.id() as u64), Some("study")), "the study holds the lock: {first}");
    let checkout = env.peak(&["checkout", "root", "-w", w]);
    let said = String::from_utf8_lossy(&checkout.stderr);
    assert_eq!(checkout.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("locked by pid {}", study.id())) && said.contains("running study"), "the refusal names the study: {said}");

    asked(&server, &mut study, 2);
    let second = lock_record(&wf);
    // Let go and taken again between the runs, the record would be a new one.
    assert_eq!(second["started"], first["started"], "the lock was released between the runs: {first} then {second}");

    let out = study.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&String::from_utf8_lossy(&out.stdout));
    let statuses: Vec<&str> = report["runs"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "failed"], "{report:#}");
    assert_eq!(git(&wf, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(std::fs::read_to_string(wf.join(".git/peak/lock")).unwrap(), "", "released at the end");
}
