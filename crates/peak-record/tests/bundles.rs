//! Every record in the committed bundles (`examples/workflows/*.bundle`,
//! `bench/results/*.bundle`), most written by earlier peaks with no `format` field, reads
//! into its type and writes back to the same JSON: old records keep reading and lose nothing.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use peak_record::{CheckpointMeta, PerformanceRecord, Record, ReferenceRecord, TranscriptRecord, ValidationRecord};
use serde_json::Value;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn bundles() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found = Vec::new();
    for folder in ["examples/workflows", "bench/results"] {
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "bundle") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Read `value` as `T`, check it writes back to the same JSON, and return it.
fn round_trip<T: Record + std::fmt::Debug>(what: &str, value: &Value) -> T {
    let record = T::from_json(value).unwrap_or_else(|e| panic!("{what}: {e}"));
    // Records written before formats existed have none (checkpoint.json always had one);
    // records written since carry this peak's.
    let format = record.format();
    assert!(format.is_none() || format == peak_record::current(), "{what}: format {format:?}");
    let written = record.to_json();
    if let Some(at) = first_difference(&written, value, String::new()) {
        panic!("{what}: written back differently at {at}");
    }
    record
}

/// The JSON pointer of the first place `a` and `b` differ, with both values there.
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, format!("{at}/{k}")),
                (p, q) => Some(format!("{at}/{k}: {p:?} written, {q:?} read")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}")))
        }
        _ => (a != b).then(|| format!("{at}: {a} written, {b} read")),
    }
}

#[test]
fn every_committed_record_reads_and_writes_back_unchanged() {
    if Command::new("git").arg("--version").output().is_err() {
        println!("SKIPPED every_committed_record_reads_and_writes_back_unchanged: no git program");
        return;
    }
    let bundles = bundles();
    assert!(bundles.len() >= 20, "the committed bundles: {bundles:?}");
    let (mut checkpoints, mut measured, mut deferred, mut retuned) = (0, 0, 0, 0);
    for bundle in &bundles {
        let dir = tempfile::tempdir().unwrap();
        let clone = dir.path().join("b");
        let status = Command::new("git").args(["clone", "-q", "--mirror"]).arg(bundle).arg(&clone).status().unwrap();
        assert!(status.success(), "git clone {}", bundle.display());
        let commits = git(&clone, &["rev-list", "--all"]).unwrap();
        for commit in commits.lines() {
            let read = |file: &str| git(&clone, &["show", &format!("{commit}:{file}")]).map(|text| serde_json::from_str::<Value>(&text).unwrap());
            // The attempts branch holds no checkpoint.
            let Some(meta) = read("checkpoint.json") else { continue };
            let what = |file: &str| format!("{} {commit} {file}", bundle.display());
            checkpoints += 1;
            let meta: CheckpointMeta = round_trip(&what("checkpoint.json"), &meta);
            let validation: ValidationRecord = round_trip(&what("validation.json"), &read("validation.json").unwrap());
            assert_eq!(validation.verdict, meta.verdict, "{}", what("validation.json"));
            let performance: PerformanceRecord = round_trip(&what("performance.json"), &read("performance.json").unwrap());
            let transcript: TranscriptRecord = round_trip(&what("transcript.json"), &read("transcript.json").unwrap());
            let reference: ReferenceRecord = round_trip(&what("reference.json"), &read("reference.json").unwrap());
            assert!(!reference.inputs.is_empty() && !reference.backend.is_empty(), "{}", what("reference.json"));
            if validation.is_deferred() {
                deferred += 1;
                assert!(performance.best.is_none() && validation.compile_check.is_some(), "{}", what("performance.json"));
            } else if meta.parent.is_some() {
                measured += 1;
                let best = performance.best.as_ref().unwrap_or_else(|| panic!("{}: no best", what("performance.json")));
                assert!(best.time_ms > 0.0 && !best.params.inputs.is_empty());
                assert!(performance.runs().iter().any(|run| run.best.as_ref() == Some(best)), "{}: the headline is a run's best", what("performance.json"));
            }
            if transcript.retune.is_some() {
                retuned += 1;
                assert_eq!(transcript.transformation.as_deref(), Some("Retune"));
            } else if meta.parent.is_some() {
                assert!(!transcript.entries().is_empty(), "{}", what("transcript.json"));
            }
        }
    }
    println!("{checkpoints} checkpoints: {measured} measured, {deferred} deferred, {retuned} retuned");
    assert!(measured > 0 && deferred > 0 && retuned > 0, "the fixtures cover every kind of step");
}

#[test]
fn a_newer_format_is_refused_and_unknown_fields_are_kept() {
    let newer = serde_json::json!({"format": 2, "best": {"params": {"inputs": {"n": 1}, "tuning": {}}, "time_ms": 1.0}});
    let err = PerformanceRecord::from_json(&newer).unwrap_err().to_string();
    assert!(err.contains("performance.json") && err.contains("format 2"), "{err}");
    let extra = serde_json::json!({"format": 1, "verdict": "passed", "from_the_future": {"x": [1, 2]}});
    let read = ValidationRecord::from_json(&extra).unwrap();
    assert_eq!(read.extra["from_the_future"], serde_json::json!({"x": [1, 2]}));
    assert_eq!(read.to_json(), extra);
    assert_eq!(PerformanceRecord::from_json(&Value::Null).unwrap(), PerformanceRecord::default(), "a file not written reads as empty");
}
