//! The workflow's life: init, checkpoints, names, branches, checkout, diff, log, attempts.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use peak_spec::regions::Region;
use peak_workflow::{Attempt, FileChange, FileStatus, Workflow, WorkflowError};
use serde_json::json;

fn entry<'a>(log: &'a [peak_workflow::LogEntry], transformation: &str) -> &'a peak_workflow::LogEntry {
    log.iter().find(|e| e.transformation.as_deref() == Some(transformation)).unwrap_or_else(|| panic!("no {transformation} in {log:#?}"))
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn init_checkpoints_tag_branch_checkout_diff_and_log() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let mut wf = new_workflow(base);
    let c1 = add(&mut wf, base, "TB-Tiling", DEVICE_1, 2.0);
    let c2 = add(&mut wf, base, "Warp-Tiling", DEVICE_2, 1.0);
    assert_eq!(wf.tag("tiled", Some(c1.short())).unwrap(), c1);
    assert_eq!(wf.branch("alt", Some("tiled")).unwrap(), c1);
    // `branch` does not move HEAD.
    assert_eq!(wf.head().unwrap().id, c2);
    assert_eq!(wf.resolve("HEAD~1").unwrap(), c1);

    let head = wf.checkout("alt", false).unwrap();
    assert_eq!((head.id.clone(), head.branch.as_deref()), (c1.clone(), Some("alt")));
    let restored = std::fs::read_to_string(wf.context_dir().join("kernel.cl")).unwrap();
    assert!(restored.contains("get_global_id(0) * TILE;"), "{restored}");
    let c3 = add(&mut wf, base, "Offset", DEVICE_0, 1.6);

    let log = wf.log().unwrap();
    assert_eq!(log.len(), 4);
    // Children come before parents.
    let pos = |id: &peak_workflow::CheckpointId| log.iter().position(|e| &e.id == id).unwrap();
    assert!(pos(&c2) < pos(&c1) && pos(&c3) < pos(&c1));
    let root = entry(&log, "init");
    assert_eq!(root.tags, ["root"]);
    assert!(root.parents.is_empty());
    assert!(close(root.speedup_over_root, 1.0));
    let tb = entry(&log, "TB-Tiling");
    assert_eq!((tb.tags.as_slice(), tb.verdict.as_deref(), tb.executor.as_deref()), (&["tiled".to_string()][..], Some("passed"), Some("openai")));
    assert!(close(tb.speedup_over_root, 2.0) && close(tb.speedup_over_parent, 2.0), "{tb:?}");
    let warp = entry(&log, "Warp-Tiling");
    assert_eq!(warp.branches, ["main"]);
    assert!(close(warp.speedup_over_root, 4.0) && close(warp.speedup_over_parent, 2.0), "{warp:?}");
    let offset = entry(&log, "Offset");
    assert!(offset.head && offset.branches == ["alt"]);
    assert_eq!(offset.parents, std::slice::from_ref(&c1));
    assert!(close(offset.speedup_over_root, 2.5) && close(offset.speedup_over_parent, 1.25), "{offset:?}");
    assert_eq!(warp.summary, "Warp-Tiling: 1.00 ms (4.00x over root)");
    let table = peak_workflow::render_log(&log);
    assert!(table.contains("Offset") && table.contains("2.50x root") && table.contains("tag: tiled"), "{table}");
    // The log serializes for --json.
    let as_json = serde_json::to_value(&log).unwrap();
    assert_eq!(as_json[pos(&c3)]["speedup_over_parent"], json!(1.25));
    // Records without a yardstick (made before one was kept) read as before: no column, no key.
    assert!(!table.contains("vendor") && as_json[pos(&c3)].get("baseline").is_none(), "{table}");

    let diff = wf.diff("root", "tiled").unwrap();
    let kernel = diff.files.iter().find(|f| f.path == "kernel.cl").expect("kernel.cl changed");
    let FileChange::Regions { regions } = &kernel.change else { panic!("kernel.cl should diff by region: {kernel:?}") };
    assert_eq!(regions.iter().map(|r| r.region).collect::<Vec<_>>(), [Region::Device]);
    assert!(regions[0].unified.contains("-  a[IDX(i)] = 0.0f;"), "{}", regions[0].unified);
    assert!(regions[0].unified.contains("+  for (int t = 0; t < TILE; t++) a[IDX(i + t)] = 0.0f;"), "{}", regions[0].unified);
    assert!(diff.files.iter().any(|f| f.path == "peak.toml" && f.status == FileStatus::Modified));
    let params: Vec<_> = diff.tuning.params.iter().map(|p| (p.name.as_str(), p.before.is_some(), p.after.is_some())).collect();
    assert_eq!(params, [("BLOCK", true, true), ("TILE", false, true)]);
    assert_eq!(diff.tuning.params[1].after.as_deref(), Some("{ values = [2, 4, 8] }"));
    assert!(close(diff.performance.speedup, 2.0));
    assert_eq!(diff.performance.b_params, Some(json!({"BLOCK": 128, "TILE": 4})));
    let text = diff.to_string();
    assert!(text.contains("4.00 ms -> 2.00 ms (2.00x faster)"), "{text}");
    assert!(text.contains("+ TILE = { values = [2, 4, 8] }"), "{text}");
    assert!(text.contains("a/context/kernel.cl (device)"), "{text}");

    let view = wf.show("tiled").unwrap();
    assert_eq!(view.meta.transformation, "TB-Tiling");
    assert_eq!(view.meta.parent.as_deref(), Some(wf.resolve("root").unwrap().as_str()));
    assert_eq!(view.meta.model.as_deref(), Some("gpt-test"));
    assert_eq!(view.reference, reference());
    assert_eq!(view.performance["best"]["time_ms"], json!(2.0));
    assert!(view.files["kernel.cl"].contains("* TILE;"));

    let out = base.join("materialized");
    wf.materialize("main~1", &out).unwrap();
    assert_eq!(std::fs::read(out.join("kernel.cl")).unwrap(), std::fs::read(base.join("ctx-TB-Tiling/kernel.cl")).unwrap());
    assert!(matches!(wf.materialize("root", &out), Err(WorkflowError::DirNotEmpty { .. })));

    // Plain git sees the same history, and the working folder is clean.
    let subjects = git(wf.dir(), &["log", "--format=%s", "main"]);
    assert_eq!(
        subjects.lines().collect::<Vec<_>>(),
        ["Warp-Tiling: 1.00 ms (4.00x over root)", "TB-Tiling: 2.00 ms (2.00x over root)", "init: kernel k (4.00 ms)"]
    );
    assert_eq!(git(wf.dir(), &["status", "--porcelain"]), "");
    assert!(wf.fsck(false).unwrap().is_empty());
}

#[test]
fn checkout_refuses_uncommitted_edits_unless_forced_and_detached_head_takes_no_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    let c1 = add(&mut wf, tmp.path(), "TB-Tiling", DEVICE_1, 2.0);
    let kernel = wf.context_dir().join("kernel.cl");
    std::fs::write(&kernel, "// @peak macros\n// @peak device\nedited\n// @peak host\n").unwrap();

    let err = wf.checkout("root", false).unwrap_err();
    assert!(matches!(&err, WorkflowError::DirtyWorktree { files } if files == &["context/kernel.cl"]), "{err}");
    // fsck reports the edit without touching it.
    let findings = wf.fsck(true).unwrap();
    assert_eq!(findings.iter().map(|f| f.kind).collect::<Vec<_>>(), [peak_workflow::FindingKind::WorktreeDiffers]);
    assert!(std::fs::read_to_string(&kernel).unwrap().contains("edited"));
    // A checkpoint from another folder would overwrite the edit, so it is refused too.
    let other = write_context(&tmp.path().join("other"), DEVICE_2, TUNING_1);
    assert!(matches!(wf.checkpoint(input(&other, "X", 1.0, json!({}))), Err(WorkflowError::DirtyWorktree { .. })));

    let head = wf.checkout("root", true).unwrap();
    assert_eq!(head.branch, None);
    assert_eq!(std::fs::read(&kernel).unwrap(), std::fs::read(tmp.path().join("ctx0/kernel.cl")).unwrap());
    assert!(std::fs::read_to_string(wf.dir().join("performance.json")).unwrap().contains("4.0"));
    let err = wf.checkpoint(input(&other, "X", 1.0, json!({}))).unwrap_err();
    assert!(matches!(&err, WorkflowError::DetachedHead { id } if id == wf.resolve("root").unwrap().as_str()), "{err}");
    assert_eq!(wf.log().unwrap().len(), 2);
    assert_eq!(wf.checkout("main", false).unwrap().id, c1);
}

#[test]
fn checkpoint_in_place_and_removed_files_leave_the_working_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    // An agent edits the working folder's own context and adds a file.
    let ctx = wf.context_dir();
    write_context(&ctx, DEVICE_1, TUNING_1);
    std::fs::write(ctx.join("notes.md"), "why tiling\n").unwrap();
    let c1 = wf.checkpoint(input(&ctx, "TB-Tiling", 2.0, json!({"TILE": 2}))).unwrap();
    assert!(wf.show("HEAD").unwrap().files.contains_key("notes.md"));
    assert_eq!(git(wf.dir(), &["status", "--porcelain"]), "");
    // The next checkpoint, made elsewhere, has no notes.md: it disappears from the folder.
    add(&mut wf, tmp.path(), "Warp-Tiling", DEVICE_2, 1.0);
    assert!(!ctx.join("notes.md").exists());
    let diff = wf.diff(c1.as_str(), "HEAD").unwrap();
    assert!(diff.files.iter().any(|f| f.path == "notes.md" && f.status == FileStatus::Removed));
    assert!(wf.fsck(false).unwrap().is_empty());
}

#[test]
fn open_finds_the_workflow_from_a_subfolder() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = new_workflow(tmp.path());
    let again = Workflow::open(wf.context_dir()).unwrap();
    assert_eq!(again.dir().canonicalize().unwrap(), wf.dir().canonicalize().unwrap());
    assert_eq!(again.log().unwrap().len(), 1);
}

#[test]
fn bad_input_is_refused_with_errors_that_name_it() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();

    let empty = base.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = Workflow::open(&empty).unwrap_err();
    assert!(matches!(err, WorkflowError::NotAWorkflow { .. }), "{err}");
    // A git repository that is not a workflow.
    let plain = base.join("plain");
    std::fs::create_dir(&plain).unwrap();
    git(&plain, &["init", "-q"]);
    std::fs::write(plain.join("f"), "x").unwrap();
    git(&plain, &["add", "f"]);
    git(&plain, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]);
    let err = Workflow::open(&plain).unwrap_err();
    assert!(matches!(err, WorkflowError::NotAWorkflow { .. }), "{err}");
    assert!(err.to_string().contains("the git repository here has no `root` tag"), "{err}");
    // A folder inside some other project's repository (a bundle file in a checkout, say):
    // the error names the folder asked about and says what was found around it.
    let inside = plain.join("examples");
    std::fs::create_dir(&inside).unwrap();
    let err = Workflow::open(&inside).unwrap_err().to_string();
    assert!(err.starts_with(&inside.display().to_string()) && err.contains("no workflow here or in a parent folder (the nearest git repository, at "), "{err}");

    let ctx = write_context(&base.join("ctx"), DEVICE_0, TUNING_0);
    let err = Workflow::init(&plain, &ctx, reference()).unwrap_err();
    assert!(matches!(err, WorkflowError::DirNotEmpty { .. }), "{err}");
    let broken = write_context(&base.join("broken"), DEVICE_0, TUNING_0);
    std::fs::write(broken.join("kernel.cl"), "// @peak macros\n// @peak host\n").unwrap();
    let err = Workflow::init(base.join("wf-broken"), &broken, reference()).unwrap_err();
    assert!(matches!(&err, WorkflowError::InvalidContext { path, .. } if path.ends_with("kernel.cl")), "{err}");
    assert!(!base.join("wf-broken").exists(), "nothing is created for a refused context");

    let mut wf = new_workflow(base);
    let c1 = add(&mut wf, base, "TB-Tiling", DEVICE_1, 2.0);
    for rev in ["nope", "deadbeef", "HEAD~5", "", "--all"] {
        let err = wf.resolve(rev).unwrap_err();
        assert!(matches!(&err, WorkflowError::UnknownRev { rev: r } if r == rev), "{rev}: {err}");
    }
    // The attempts mirror is a branch, but not a checkpoint.
    let err = wf.resolve("peak-attempts").unwrap_err();
    assert!(matches!(err, WorkflowError::NotACheckpoint { .. }), "{err}");

    wf.tag("best", None).unwrap();
    let err = wf.tag("best", Some("root")).unwrap_err();
    assert!(matches!(&err, WorkflowError::TagExists { name, id } if name == "best" && id == c1.as_str()), "{err}");
    assert!(matches!(wf.tag("root", None), Err(WorkflowError::InvalidName { .. })));
    assert!(matches!(wf.branch("best", None), Err(WorkflowError::NameTaken { kind: "tag", .. })));
    assert!(matches!(wf.branch("main", None), Err(WorkflowError::BranchExists { .. })));
    assert!(matches!(wf.tag("main", None), Err(WorkflowError::NameTaken { kind: "branch", .. })));
    for bad in ["has space", "a..b", "cafe1234", "-x", "peak-attempts", "HEAD"] {
        assert!(matches!(wf.branch(bad, None), Err(WorkflowError::InvalidName { .. })), "{bad}");
    }

    // A transcript with a key is refused before anything is written.
    let ctx2 = write_context(&base.join("ctx2"), DEVICE_2, TUNING_1);
    let mut leaky = input(&ctx2, "Warp-Tiling", 1.0, json!({}));
    leaky.transcript = json!({"request": {"headers": {"authorization": "Bearer abcdefghijklmnopqrstuvwxyz0123"}}});
    let err = wf.checkpoint(leaky.clone()).unwrap_err();
    assert!(matches!(&err, WorkflowError::SecretInTranscript { pointer, .. } if pointer == "/request/headers/authorization"), "{err}");
    assert!(!err.to_string().contains("abcdefghijklmnop"), "the error must not repeat the key: {err}");
    leaky.transcript = json!({"note": format!("key sk-ant-api03-{}", "abcdefghijklmnopqrstuvwxyz")});
    assert!(matches!(wf.checkpoint(leaky), Err(WorkflowError::SecretInTranscript { .. })));
    assert_eq!(wf.log().unwrap().len(), 2);

    // A checkpoint from a stale parent: the branch moved since the transformation began.
    let mut stale = input(&ctx2, "Warp-Tiling", 1.0, json!({}));
    stale.parent = Some("root".to_string());
    let err = wf.checkpoint(stale).unwrap_err();
    assert!(matches!(&err, WorkflowError::StaleParent { branch, tip, .. } if branch == "main" && tip == c1.as_str()), "{err}");
    let mut fresh = input(&ctx2, "Warp-Tiling", 1.0, json!({}));
    fresh.parent = Some(c1.to_string());
    wf.checkpoint(fresh).unwrap();
    assert!(wf.fsck(false).unwrap().is_empty());
}

#[test]
fn attempts_are_kept_across_checkouts_and_drive_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    let root = wf.resolve("root").unwrap();
    let attempt = |outcome: &str, retry: u32| Attempt {
        transformation: "TB-Tiling".into(),
        pass: Some(1),
        executor: "openai".into(),
        model: Some("gpt-test".into()),
        outcome: outcome.into(),
        retry,
        tokens_in: Some(1200),
        tokens_out: Some(300),
        latency_ms: Some(4100),
        parent: Some(root.to_string()),
        ..Attempt::default()
    };
    let mut failed = attempt("compile-failed", 0);
    failed.error = Some(format!("error: use of undeclared TILE; also, the request used sk-{}", "abcdefghijklmnopqrstuvwxyz0123"));
    let failed = wf.record_attempt(failed).unwrap();
    assert_eq!(failed.attempt.error.as_deref(), Some("error: use of undeclared TILE; also, the request used [REDACTED]"));
    wf.record_attempt(attempt("unparsable-reply", 1)).unwrap();

    // One attempt produces a checkpoint; its outcome record is written after.
    let done = wf.start_attempt(attempt("ignored: start forces `started`", 2)).unwrap();
    let ctx = write_context(&tmp.path().join("c1"), DEVICE_1, TUNING_1);
    let mut ci = input(&ctx, "TB-Tiling", 2.0, json!({}));
    ci.attempt = Some(done.clone());
    let c1 = wf.checkpoint(ci).unwrap();
    assert_eq!(wf.show("HEAD").unwrap().meta.attempt.as_deref(), Some(done.as_str()));
    // An attempt whose checkpoint exists counts as finished even before its outcome record.
    assert!(wf.resume_state().unwrap().interrupted.is_empty());
    let mut finished = attempt("passed", 2);
    finished.checkpoint = Some(c1.to_string());
    wf.finish_attempt(&done, finished).unwrap();

    // Another starts and is cut short.
    let cut = wf.start_attempt(attempt("", 0)).unwrap();
    let state = wf.resume_state().unwrap();
    assert_eq!((state.head.id.clone(), state.head.branch.as_deref(), state.transformation.as_str()), (c1.clone(), Some("main"), "TB-Tiling"));
    assert_eq!(state.best_time_ms, Some(2.0));
    assert_eq!(state.interrupted.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [cut.as_str()]);

    // Checking out the root rewrites the working folder, never the attempts.
    wf.checkout("root", false).unwrap();
    let log = wf.attempts().unwrap();
    assert!(log.damaged.is_empty());
    let outcomes: Vec<_> = log.records.iter().map(|r| r.attempt.outcome.as_str()).collect();
    assert_eq!(outcomes, ["compile-failed", "unparsable-reply", "started", "passed", "started"]);
    assert_eq!(log.records[0].attempt.tokens_in, Some(1200));
    assert_eq!(log.unfinished().len(), 1);
}

/// `performance.json` of a checkpoint tuned at each `(n, time)` in turn: the headline is the last.
fn tuned_at(sizes: &[(i64, f64)]) -> serde_json::Value {
    let (n, t) = *sizes.last().unwrap();
    let run = |n: i64, t: f64| json!({"inputs": {"n": n}, "best": {"params": {"inputs": {"n": n}, "tuning": {"TILE": 4}}, "time_ms": t}});
    json!({
        "best": {"params": {"inputs": {"n": n}, "tuning": {"TILE": 4}}, "time_ms": t},
        "runs": sizes.iter().map(|(n, t)| run(*n, *t)).collect::<Vec<_>>(),
    })
}

#[test]
fn log_show_and_diff_name_the_inputs_of_every_time_and_speedup() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let ctx0 = write_context(&base.join("ctx0"), DEVICE_0, TUNING_0);
    let root = peak_workflow::RootInput { reference: reference(), performance: Some(tuned_at(&[(256, 8.0)])), ..Default::default() };
    let mut wf = Workflow::init_with(base.join("wf"), &ctx0, root).unwrap();
    // Tuned at a second, larger size: its headline (1769 ms at n=4096) is no slowdown,
    // its speedup over the root is taken at n=256, the one size both share.
    let ctx = write_context(&base.join("ctx1"), DEVICE_1, TUNING_1);
    let mut step = input(&ctx, "Refactor", 0.0, json!({}));
    step.performance = tuned_at(&[(256, 4.0), (4096, 1769.0)]);
    wf.checkpoint(step).unwrap();

    let log = wf.log().unwrap();
    let e = entry(&log, "Refactor");
    assert_eq!((e.best_time_ms, e.best_inputs.clone()), (Some(1769.0), Some(json!({"n": 4096}))));
    assert_eq!((e.speedup_over_root, e.speedup_over_root_inputs.clone()), (Some(2.0), Some(json!({"n": 256}))));
    assert_eq!(e.speedup_over_parent_inputs, Some(json!({"n": 256})));
    let sizes: Vec<_> = e.sizes.iter().map(|s| (s.inputs.clone().unwrap(), s.best_time_ms, s.speedup_over_root)).collect();
    assert_eq!(sizes, [(json!({"n": 256}), 4.0, Some(2.0)), (json!({"n": 4096}), 1769.0, None)]);
    let as_json = serde_json::to_value(&log).unwrap();
    assert_eq!(as_json[0]["best_inputs"], json!({"n": 4096}));
    assert_eq!(as_json[0]["speedup_over_root"], json!(2.0), "the old fields keep their names");

    let table = peak_workflow::render_log(&log);
    let row = table.lines().find(|l| l.contains("Refactor")).unwrap();
    assert!(row.contains("1769 ms n=4096 (+1 size)"), "the time with its size:\n{table}");
    assert!(row.contains("2.00x root @n=256") && row.contains("2.00x parent @n=256"), "the speedups with theirs:\n{table}");
    let init = table.lines().find(|l| l.contains("init")).unwrap();
    assert!(init.contains("8.00 ms n=256") && init.contains("1.00x root") && !init.contains('@'), "{table}");

    let table = peak_workflow::render_log_sizes(&log);
    let lines: Vec<&str> = table.lines().collect();
    let at = lines.iter().position(|l| l.contains("Refactor")).unwrap();
    assert!(lines[at].contains("1769 ms n=4096  ") && !lines[at].contains("(+1 size)"), "{table}");
    let below = lines[at + 1];
    assert!(below.contains("4.00 ms n=256") && below.contains("2.00x root") && !below.contains('@'), "one row per size:\n{table}");

    let diff = wf.diff("root", "HEAD").unwrap();
    assert_eq!((diff.performance.b_inputs.clone(), diff.performance.speedup_inputs.clone()), (Some(json!({"n": 4096})), Some(json!({"n": 256}))));
    let text = diff.to_string();
    assert!(text.contains("performance: 8.00 ms at n=256 -> 1769 ms at n=4096 (2.00x faster at n=256)"), "{text}");
    assert!(text.contains("  at n=256: 8.00 ms -> 4.00 ms (2.00x faster)\n  at n=4096: - -> 1769 ms\n"), "{text}");
}
