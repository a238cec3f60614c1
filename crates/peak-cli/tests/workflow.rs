//! The workflow commands end to end: init, a checkpoint, tag, branch, checkout, diff,
//! compare and fsck, through the `peak` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn peak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_peak")).args(args).output().expect("peak runs")
}

fn ok(args: &[&str]) -> String {
    let out = peak(args);
    assert!(out.status.success(), "peak {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

#[test]
fn init_checkpoint_tag_branch_checkout_diff_compare_fsck() {
    let tmp = tempfile::tempdir().unwrap();
    let wf_dir = tmp.path().join("wf");
    let wf = wf_dir.to_str().unwrap();
    let init: serde_json::Value =
        serde_json::from_str(&ok(&["init", wf, "--from", example("matmul-opencl-naive").to_str().unwrap(), "--no-measure", "--json"])).unwrap();
    assert_eq!(init["reference"]["inputs"].as_array().unwrap().len(), 3, "one reference configuration per n");

    // A second checkpoint, as `peak apply` would make it: the tiled kernel.
    let mut workflow = peak_workflow::Workflow::open(&wf_dir).unwrap();
    workflow
        .checkpoint(peak_workflow::CheckpointInput {
            context_dir: example("matmul-opencl-tiled"),
            transformation: "TB-Tiling".into(),
            executor: "agent".into(),
            validation: serde_json::json!({"verdict": "passed"}),
            performance: serde_json::json!({"best": {"params": {"inputs": {"n": 256}, "tuning": {"TILE": 16}}, "time_ms": 1.0}}),
            transcript: serde_json::json!({"entries": []}),
            ..Default::default()
        })
        .unwrap();
    drop(workflow);

    let log = ok(&["log", "-w", wf]);
    assert!(log.contains("TB-Tiling") && log.contains("init"), "{log}");
    let log_json: serde_json::Value = serde_json::from_str(&ok(&["log", "-w", wf, "--json"])).unwrap();
    assert_eq!(log_json.as_array().unwrap().len(), 2);

    ok(&["tag", "tiled", "-w", wf]);
    ok(&["branch", "retry", "--from", "root", "-w", wf]);
    let checkout = ok(&["checkout", "retry", "-w", wf]);
    assert!(checkout.contains("on branch retry"), "{checkout}");
    let restored = std::fs::read_to_string(wf_dir.join("context/kernel.cl")).unwrap();
    assert_eq!(restored, std::fs::read_to_string(example("matmul-opencl-naive").join("kernel.cl")).unwrap());

    let diff = ok(&["diff", "root", "tiled", "-w", wf]);
    assert!(diff.contains("__local float As[TILE][TILE];"), "the device-region diff shows the new code:\n{diff}");
    assert!(diff.contains("TILE"), "{diff}");

    let show: serde_json::Value = serde_json::from_str(&ok(&["show", "tiled", "-w", wf, "--json"])).unwrap();
    assert_eq!(show["meta"]["transformation"], "TB-Tiling");

    if peak_opencl::list_devices().is_ok() {
        let cmp: serde_json::Value = serde_json::from_str(&ok(&["compare", "root", "tiled", "--set", "n=256", "--reps", "3", "-w", wf, "--json"])).unwrap();
        assert_eq!(cmp["a"]["params"]["inputs"]["n"], 256);
        assert_eq!(cmp["b"]["params"]["inputs"]["n"], 256, "both sides run the same inputs");
        assert!(cmp["speedup_b_over_a"].as_f64().unwrap() > 0.0);
    } else {
        eprintln!("SKIPPED compare: no OpenCL device");
    }

    let fsck = ok(&["fsck", "-w", wf]);
    assert!(fsck.contains("consistent"), "{fsck}");
}

#[test]
fn commands_outside_a_workflow_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = peak(&["log", "-w", tmp.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("workflow"), "{}", String::from_utf8_lossy(&out.stderr));
}
