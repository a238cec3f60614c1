//! Concurrent writers and `kill -9` mid-checkpoint.
//!
//! Real writer processes are this test binary re-executed on the ignored `child_writer`
//! test, with the workflow and a mode passed in environment variables.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use peak_workflow::{Attempt, AttemptOutcome, CheckpointInput, FindingKind, LockMode, Workflow, WorkflowError};
use serde_json::json;

const ENV_DIR: &str = "PEAK_WF_CHILD_DIR";
const ENV_ITERATIONS: &str = "PEAK_WF_CHILD_ITERATIONS";
/// The line a writer prints on stdout after each checkpoint it finished.
const STEP_DONE: &str = "peak-wf-step-done";

/// One checkpoint from a writer: a fresh context (distinct device code and tuning), an
/// attempt around it, and now and then a failed attempt, a tag and a sync.
fn write_step(wf: &mut Workflow, staging: &Path, who: &str, i: u32) {
    let ctx = staging.join(format!("{who}-{i}"));
    let device = format!("__kernel void k(__global float* a) {{ a[get_global_id(0)] = {i}.0f; /* {who} */ }}\n");
    write_context(&ctx, &device, &format!("TILE = {{ values = [{}] }}\n", i + 1));
    let transformation = format!("{who}-step");
    let id = wf.start_attempt(Attempt { transformation: transformation.clone(), executor: who.into(), ..Attempt::default() }).unwrap();
    let made =
        wf.checkpoint(CheckpointInput { attempt: Some(id.clone()), ..input(&ctx, &transformation, 1.0 + f64::from(i % 7), json!({"TILE": i + 1})) }).unwrap();
    wf.finish_attempt(
        &id,
        Attempt { transformation, executor: who.into(), outcome: AttemptOutcome::Passed, checkpoint: Some(made.to_string()), ..Attempt::default() },
    )
    .unwrap();
    if i % 3 == 2 {
        wf.record_attempt(Attempt {
            transformation: "Split-K".into(),
            executor: who.into(),
            outcome: AttemptOutcome::CompileFailed,
            error: Some("boom".into()),
            ..Attempt::default()
        })
        .unwrap();
        wf.tag(&format!("{who}-t{i}"), None).unwrap();
        wf.sync_attempts().unwrap();
    }
    std::fs::remove_dir_all(&ctx).unwrap();
}

/// The writer process. Ignored so a normal test run skips it; the tests below run it.
#[test]
#[ignore = "helper process for the tests in this file; needs PEAK_WF_CHILD_DIR"]
fn child_writer() {
    let dir = PathBuf::from(std::env::var(ENV_DIR).expect("run by the safety tests, which set PEAK_WF_CHILD_DIR"));
    // 0 = until killed.
    let iterations: u32 = std::env::var(ENV_ITERATIONS).ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    let who = format!("p{}", std::process::id());
    let staging = dir.with_extension(format!("staging-{who}"));
    let mut wf = Workflow::open(&dir).unwrap();
    wf.set_lock_mode(LockMode::Wait(Duration::from_secs(60)));
    let mut i = 0;
    while iterations == 0 || i < iterations {
        write_step(&mut wf, &staging, &who, i);
        println!("{STEP_DONE} {i}");
        i += 1;
    }
}

fn spawn_writer(dir: &Path, iterations: u32, report: bool) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV_DIR, dir)
        .env(ENV_ITERATIONS, iterations.to_string())
        .stdout(if report { Stdio::piped() } else { Stdio::null() })
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Every reachable checkpoint reads back whole.
fn assert_all_whole(wf: &Workflow) -> usize {
    let log = wf.log().unwrap();
    for entry in &log {
        let view = wf.show(entry.id.as_str()).unwrap_or_else(|e| panic!("checkpoint {} is not whole: {e}", entry.id));
        assert!(view.files.contains_key("kernel.cl") && view.files.contains_key("peak.toml"));
    }
    log.len()
}

#[test]
fn a_second_writer_is_refused_at_once_naming_the_command_holding_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let mut holder = new_workflow(tmp.path());
    holder.hold_lock("apply").unwrap();

    let dir = holder.dir().to_path_buf();
    let ctx = write_context(&tmp.path().join("other"), DEVICE_1, TUNING_1);
    let mut other = Workflow::open(&dir).unwrap();
    other.set_lock_mode(LockMode::Fail);
    let err = other.checkpoint(input(&ctx, "TB-Tiling", 2.0, json!({}))).unwrap_err();
    let WorkflowError::Locked { holder: Some(who), .. } = &err else { panic!("expected Locked naming the holder, got {err:?}") };
    assert_eq!(who.pid, std::process::id());
    assert!(who.command.contains("safety"), "the holder's command line: {}", who.command);
    let text = err.to_string();
    assert!(text.contains(&format!("pid {}", std::process::id())) && text.contains("locked by") && text.contains("running apply"), "{text}");
    // A whole command runs for minutes: a writer that would wait is refused at once.
    other.set_lock_mode(LockMode::Wait(Duration::from_secs(30)));
    let started = std::time::Instant::now();
    assert!(matches!(other.tag("x", None), Err(WorkflowError::Locked { holder: Some(_), .. })));
    assert!(started.elapsed() < Duration::from_secs(10), "waited {:?}", started.elapsed());
    // fsck sees a live holder, not a stale one.
    assert_eq!(other.fsck(false).unwrap().iter().map(|f| f.kind).collect::<Vec<_>>(), [FindingKind::LockHeld]);

    // Once the command lets go, the next writer gets in.
    holder.release_lock();
    let id = other.checkpoint(input(&ctx, "TB-Tiling", 2.0, json!({}))).unwrap();
    assert_eq!(holder.head().unwrap().id, id);
    assert!(holder.fsck(false).unwrap().is_empty());
}

#[test]
fn concurrent_writer_processes_serialise_and_leave_a_clean_workflow() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    let writers: Vec<Child> = (0..2).map(|_| spawn_writer(wf.dir(), 6, false)).collect();
    for child in writers {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "writer failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let log = wf.log().unwrap();
    assert_eq!(log.len(), 13);
    // One linear chain: each writer's checkpoint went on top of whatever was the tip.
    for pair in log.windows(2) {
        assert_eq!(pair[0].parents, [pair[1].id.clone()]);
    }
    let attempts = wf.attempts().unwrap();
    assert!(attempts.damaged.is_empty());
    assert_eq!(attempts.records.len(), 2 * (6 * 2 + 2));
    assert!(wf.resume_state().unwrap().interrupted.is_empty());
    assert_all_whole(&wf);
    assert_eq!(wf.fsck(false).unwrap(), []);
    assert_eq!(git(wf.dir(), &["fsck", "--strict", "--no-progress", "--no-dangling"]).trim(), "");
}

/// SplitMix64: the kill moments come from a seed, so a failing round can be run again.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The moments each step of a writer finished, read from its stdout as they come.
fn step_reports(child: &mut Child) -> std::sync::mpsc::Receiver<std::time::Instant> {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("a reporting writer's stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with(STEP_DONE) && tx.send(std::time::Instant::now()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Ten writers killed with SIGKILL, each at a moment calibrated on its own progress, not
/// on the clock: after 2 to 4 finished checkpoints (so every round adds some, however
/// slow the machine), then a seeded fraction of its last step's length into the next
/// one, so the kills land at different points of a checkpoint. `PEAK_KILL_SEED` replays
/// a run's moments; the seed is printed.
#[test]
fn kill_9_mid_checkpoint_leaves_every_checkpoint_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    let mut checkpoints = 1;
    let mut stale_seen = 0;
    let seed: u64 = std::env::var("PEAK_KILL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED_0031);
    let mut rng = seed;
    eprintln!("kill -9: PEAK_KILL_SEED={seed}");
    for round in 0..10 {
        let mut child = spawn_writer(wf.dir(), 0, true);
        let steps = step_reports(&mut child);
        let wait = 2 + splitmix(&mut rng) % 3;
        let fraction = (splitmix(&mut rng) % 1000) as f64 / 1000.0;
        let mut done = Vec::new();
        while (done.len() as u64) < wait {
            match steps.recv_timeout(Duration::from_secs(120)) {
                Ok(at) => done.push(at),
                Err(e) => {
                    let _ = child.kill();
                    let out = child.wait_with_output().unwrap();
                    panic!("round {round}: the writer reported {} of {wait} steps ({e}): {}", done.len(), String::from_utf8_lossy(&out.stderr));
                }
            }
        }
        // The last step's length (the first one also starts the process, so it is not used).
        let step = done[done.len() - 1] - done[done.len() - 2];
        std::thread::sleep(step.mul_f64(fraction));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "the writer should have been killed, not finished");

        let mut wf_after = Workflow::open(wf.dir()).unwrap();
        let findings = wf_after.fsck(false).unwrap();
        for f in &findings {
            assert!(!f.kind.is_corruption(), "round {round}: corruption after kill -9: {f}");
            assert!(matches!(f.kind, FindingKind::StaleLock | FindingKind::WorktreeDiffers), "round {round}: unexpected {f}");
        }
        let stale = findings.iter().any(|f| f.kind == FindingKind::StaleLock);
        // The working folder only lags behind HEAD when a writer died rewriting it.
        assert!(stale || !findings.iter().any(|f| f.kind == FindingKind::WorktreeDiffers), "round {round}: {findings:?}");
        stale_seen += usize::from(stale);
        let now = assert_all_whole(&wf_after);
        assert!(now >= checkpoints + wait as usize, "round {round}: checkpoints were lost ({checkpoints} + {wait} finished -> {now})");
        checkpoints = now;
        // Half the rounds repair explicitly; the others leave recovery to the next writer.
        if round % 2 == 0 {
            let repaired = wf_after.fsck(true).unwrap();
            assert!(repaired.iter().all(|f| f.repaired), "round {round}: {repaired:?}");
            assert_eq!(wf_after.fsck(false).unwrap(), [], "round {round}: not clean after repair");
        }
    }
    assert!(checkpoints >= 21, "every round adds at least two checkpoints: {checkpoints}");
    eprintln!("kill -9: {checkpoints} checkpoints over 10 kills (seed {seed}), {stale_seen} kills landed while the lock was held");

    // The workflow stays usable: repair, then one more checkpoint on top.
    wf.fsck(true).unwrap();
    assert_eq!(wf.fsck(false).unwrap(), []);
    let before = wf.head().unwrap().id;
    let next = add(&mut wf, tmp.path(), "after-the-crashes", DEVICE_2, 0.5);
    assert_eq!(wf.show(next.as_str()).unwrap().parents, [before]);
    assert!(wf.attempts().unwrap().damaged.is_empty());
    // Killed writes leave unreachable objects (dangling, which git gc collects); anything
    // else git fsck says is damage.
    assert_eq!(git(wf.dir(), &["fsck", "--strict", "--no-progress", "--no-dangling"]).trim(), "");
    assert_eq!(git(wf.dir(), &["status", "--porcelain"]), "");
}
