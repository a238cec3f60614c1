//! A workflow packed with `Workflow::bundle` into one file and cloned back keeps its
//! branches, tags and every attempt, failed ones after the last checkpoint included.

mod common;

use common::*;
use peak_workflow::{Attempt, AttemptOutcome, clone_bundle, is_bundle};

#[test]
fn a_bundle_carries_branches_tags_and_unsynced_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let mut wf = new_workflow(base);
    let tiled = add(&mut wf, base, "TB-Tiling", DEVICE_1, 2.0);
    wf.tag("tiled", None).unwrap();
    wf.branch("alt", Some("root")).unwrap();
    wf.checkout("alt", false).unwrap();
    let offset = add(&mut wf, base, "Offset", DEVICE_2, 3.0);
    wf.checkout("main", false).unwrap();
    // Recorded after the last checkpoint and never synced: the bundle syncs it first.
    wf.record_attempt(Attempt { transformation: "Split-K".into(), outcome: AttemptOutcome::CompileFailed, ..Attempt::default() }).unwrap();

    let file = base.join("wf.bundle");
    let summary = wf.bundle(&file).unwrap();
    assert!(is_bundle(&file) && summary.bytes > 0);
    for r in ["refs/heads/main", "refs/heads/alt", "refs/heads/peak-attempts", "refs/tags/root", "refs/tags/tiled", "HEAD"] {
        assert!(summary.refs.iter().any(|x| x == r), "{r} missing from {:?}", summary.refs);
    }
    assert_eq!((summary.checkpoints, summary.attempts), (3, 1));

    // Any file that starts like a bundle is one, whatever its name; folders never are.
    let renamed = base.join("carried");
    std::fs::copy(&file, &renamed).unwrap();
    assert!(is_bundle(&renamed) && !is_bundle(base));

    let cloned = clone_bundle(&renamed, &base.join("clone")).unwrap();
    assert_eq!(cloned.head().unwrap().id, tiled);
    assert_eq!(cloned.resolve("alt").unwrap(), offset);
    assert_eq!(cloned.resolve("tiled").unwrap(), tiled);
    let attempts = cloned.attempts().unwrap();
    assert_eq!(attempts.records.iter().map(|r| r.attempt.outcome.as_str()).collect::<Vec<_>>(), ["compile-failed"]);

    let err = clone_bundle(&base.join("missing.bundle"), &base.join("none")).err().unwrap().to_string();
    assert!(err.contains("git") && err.contains("clone"), "{err}");
}
