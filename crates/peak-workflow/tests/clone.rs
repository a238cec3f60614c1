//! A workflow shared with plain `git clone` keeps its history and its attempts.

mod common;

use common::*;
use peak_workflow::{Attempt, AttemptOutcome, Workflow};

#[test]
fn git_clone_carries_history_names_and_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let mut wf = new_workflow(base);
    wf.record_attempt(Attempt {
        transformation: "TB-Tiling".into(),
        outcome: AttemptOutcome::WrongOutput,
        error: Some("max rel err 0.3".into()),
        ..Attempt::default()
    })
    .unwrap();
    let c1 = add(&mut wf, base, "TB-Tiling", DEVICE_1, 2.0);
    wf.tag("tiled", None).unwrap();
    wf.branch("alt", Some("root")).unwrap();
    wf.checkout("alt", false).unwrap();
    add(&mut wf, base, "Offset", DEVICE_2, 3.0);
    // An attempt after the last checkpoint reaches the mirror through an explicit sync.
    wf.record_attempt(Attempt { transformation: "Split-K".into(), outcome: AttemptOutcome::CompileFailed, ..Attempt::default() }).unwrap();
    wf.sync_attempts().unwrap();
    wf.checkout("main", false).unwrap();

    let clone = base.join("clone");
    let out = std::process::Command::new("git").arg("clone").arg("-q").arg(wf.dir()).arg(&clone).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let cloned = Workflow::open(&clone).unwrap();
    let (orig_log, clone_log) = (wf.log().unwrap(), cloned.log().unwrap());
    let key = |log: &[peak_workflow::LogEntry]| {
        let mut v: Vec<_> = log
            .iter()
            .map(|e| (e.id.clone(), e.parents.clone(), e.transformation.clone(), e.tags.clone(), e.best_time_ms, e.speedup_over_root, e.speedup_over_parent))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(clone_log.len(), 3);
    assert_eq!(key(&clone_log), key(&orig_log));
    // The clone's local branch is the original's HEAD; the other arrives as origin/alt.
    let offset = clone_log.iter().find(|e| e.transformation.as_deref() == Some("Offset")).unwrap();
    assert_eq!(offset.branches, ["origin/alt"]);
    assert_eq!(cloned.head().unwrap().id, c1);
    assert_eq!(cloned.resolve("alt").unwrap(), offset.id);

    let (orig, copy) = (wf.attempts().unwrap(), cloned.attempts().unwrap());
    assert_eq!(copy.records.len(), 2);
    assert_eq!(copy.records, orig.records);
    assert!(copy.damaged.is_empty());

    // Working in the clone: the remote-only branch checks out as a local branch, and the
    // clone's fsck is clean.
    let mut cloned = cloned;
    let head = cloned.checkout("alt", false).unwrap();
    assert_eq!((head.id, head.branch.as_deref()), (offset.id.clone(), Some("alt")));
    assert_eq!(cloned.fsck(false).unwrap(), []);
    assert_eq!(cloned.diff("root", "tiled").unwrap().performance.speedup, Some(2.0));
}
