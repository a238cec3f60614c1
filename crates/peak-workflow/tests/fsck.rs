//! fsck finds damage made behind peak's back, and repairs only what is safe to repair.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;

use common::*;
use peak_workflow::{Attempt, AttemptOutcome, FindingKind, LockHolder, Workflow};

fn kinds(findings: &[peak_workflow::Finding]) -> Vec<FindingKind> {
    findings.iter().map(|f| f.kind).collect()
}

fn write_lock_record(wf: &Workflow, operation: &str, target: Option<String>) {
    let holder = LockHolder {
        pid: 4_000_000,
        host: "gone".into(),
        command: "peak apply".into(),
        started: "2026-01-01T00:00:00.000Z".into(),
        session: None,
        operation: operation.into(),
        target,
    };
    std::fs::write(wf.dir().join(".git/peak/lock"), serde_json::to_string(&holder).unwrap()).unwrap();
}

#[test]
fn commits_made_with_plain_git_that_break_the_format_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    add(&mut wf, tmp.path(), "TB-Tiling", DEVICE_1, 2.0);
    let dir = wf.dir().to_path_buf();
    std::fs::write(dir.join("context/kernel.cl"), "// @peak macros\n// @peak device\nk\n").unwrap();
    std::fs::write(dir.join("transcript.json"), r#"{"auth": "Bearer abcdefghijklmnopqrstuvwxyz"}"#).unwrap();
    git(&dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "hand edit"]);
    let bad = git(&dir, &["rev-parse", "--short=7", "HEAD"]).trim().to_string();

    let findings = wf.fsck(true).unwrap();
    assert_eq!(kinds(&findings), [FindingKind::BrokenCheckpoint, FindingKind::SecretInTranscript, FindingKind::BrokenHistory], "{findings:#?}");
    assert!(findings.iter().all(|f| f.subject == bad && f.kind.is_corruption() && !f.repaired));
    assert!(findings[0].message.contains("context/kernel.cl") && findings[0].message.contains("// @peak host"), "{}", findings[0]);
    // The damage stays readable in the log rather than hiding the history.
    assert_eq!(wf.log().unwrap().len(), 3);
}

#[test]
fn torn_attempt_lines_and_git_lock_files_are_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    wf.record_attempt(Attempt { transformation: "T".into(), outcome: AttemptOutcome::WrongOutput, ..Attempt::default() }).unwrap();
    let log_path = wf.dir().join(".git/peak/attempts.jsonl");
    std::fs::OpenOptions::new().append(true).open(&log_path).unwrap().write_all(b"{\"id\":\"cut").unwrap();
    std::fs::write(wf.dir().join(".git/index.lock"), b"").unwrap();

    let log = wf.attempts().unwrap();
    assert_eq!((log.records.len(), log.damaged.len(), log.damaged[0].torn), (1, 1, true));
    let findings = wf.fsck(false).unwrap();
    assert_eq!(kinds(&findings), [FindingKind::StaleLock, FindingKind::AttemptsDamaged], "{findings:#?}");
    assert!(findings[0].subject.ends_with("index.lock"));
    assert!(findings[1].message.contains("torn"), "{}", findings[1]);
    // Each names the one command that clears it.
    assert!(findings.iter().all(|f| f.message.ends_with("hint: `peak fsck --repair` clears it")), "{findings:#?}");

    let repaired = wf.fsck(true).unwrap();
    assert!(repaired.iter().all(|f| f.repaired), "{repaired:#?}");
    assert_eq!(wf.fsck(false).unwrap(), []);
    assert!(!wf.dir().join(".git/index.lock").exists());
    wf.record_attempt(Attempt { transformation: "T".into(), outcome: AttemptOutcome::Passed, ..Attempt::default() }).unwrap();
    assert_eq!(wf.attempts().unwrap().records.len(), 2);
}

#[test]
fn a_dead_writer_mid_refresh_is_finished_but_edits_it_never_committed_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    add(&mut wf, tmp.path(), "TB-Tiling", DEVICE_1, 2.0);
    let kernel = wf.context_dir().join("kernel.cl");
    let committed = std::fs::read(&kernel).unwrap();

    // HEAD already moved to the target: the working folder is half-written, restore it.
    std::fs::write(&kernel, "half-written").unwrap();
    write_lock_record(&wf, "refresh-worktree", Some(wf.head().unwrap().id.to_string()));
    let findings = wf.fsck(false).unwrap();
    assert_eq!(kinds(&findings), [FindingKind::StaleLock, FindingKind::WorktreeDiffers], "{findings:#?}");
    assert!(findings[0].message.contains("pid 4000000") && findings[0].message.contains("hint: `peak fsck --repair` clears it"), "{}", findings[0]);
    let repaired = wf.fsck(true).unwrap();
    assert!(repaired[0].repaired && repaired[0].message.contains("restored the working folder") && !repaired[0].message.contains("hint"), "{}", repaired[0]);
    assert_eq!(std::fs::read(&kernel).unwrap(), committed);
    assert_eq!(wf.fsck(false).unwrap(), []);

    // The writer died before moving HEAD: the edits in the folder were never committed,
    // and the next writer must not throw them away.
    std::fs::write(&kernel, "agent's in-place edit").unwrap();
    write_lock_record(&wf, "refresh-worktree", Some("1".repeat(40)));
    let repaired = wf.fsck(true).unwrap();
    assert_eq!(kinds(&repaired), [FindingKind::StaleLock, FindingKind::WorktreeDiffers]);
    assert!(!repaired[0].message.contains("restored"), "{}", repaired[0]);
    assert_eq!(std::fs::read_to_string(&kernel).unwrap(), "agent's in-place edit");
}

#[test]
fn a_writer_recovers_a_dead_writers_refresh_by_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let mut wf = new_workflow(tmp.path());
    add(&mut wf, tmp.path(), "TB-Tiling", DEVICE_1, 2.0);
    std::fs::remove_file(wf.context_dir().join("peak.toml")).unwrap();
    write_lock_record(&wf, "refresh-worktree", Some(wf.head().unwrap().id.to_string()));
    // Without recovery this checkpoint would be refused for uncommitted changes.
    add(&mut wf, tmp.path(), "Warp-Tiling", DEVICE_2, 1.0);
    assert!(wf.context_dir().join("peak.toml").exists());
    assert_eq!(wf.fsck(false).unwrap(), []);
}
