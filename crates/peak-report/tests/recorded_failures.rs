//! A workflow whose records hold what the shipped ones lack: failed tries with the sample
//! and validator that caught them, tuning curves, times. Written through peak-workflow's
//! API (no device), then reported.

use std::path::Path;

use peak_report::{figures, gather_one, tables};
use peak_workflow::{Attempt, AttemptOutcome, CheckpointInput, RootInput, Workflow};
use serde_json::json;

fn performance(ms: f64, curve: &[(u64, f64)]) -> serde_json::Value {
    let params = json!({"inputs": {"n": 256}, "tuning": {"BLOCK_X": 16, "BLOCK_Y": 16}});
    json!({
        "best": {"params": params, "time_ms": ms},
        "elapsed_s": 4.0,
        "runs": [{"inputs": {"n": 256}, "evaluations": 8, "curve": curve.iter().map(|(e, b)| json!({"evaluations": e, "best_ms": b})).collect::<Vec<_>>()}],
    })
}

#[test]
fn failures_curves_and_times_are_reported_where_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let context = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/matmul-opencl-naive");
    let root = RootInput { reference: json!({"seed": 1}), performance: Some(performance(20.0, &[(1, 30.0), (3, 20.0)])), ..RootInput::default() };
    let mut wf = Workflow::init_with(tmp.path().join("wf"), &context, root).unwrap();
    let base = Attempt { transformation: "TB-Tiling".into(), executor: "openai".into(), model: Some("m".into()), ..Attempt::default() };
    let tries = [
        ("unparsable-reply", 0, None, None),
        ("compile-failed", 1, Some(1), None),
        ("wrong-output", 2, Some(5), Some("output")),
        ("sanitizer-finding", 3, Some(2), Some("sanitizer")),
    ];
    for (outcome, retry, sample, validator) in tries {
        wf.record_attempt(Attempt { outcome: outcome.into(), retry, sample, validator: validator.map(Into::into), ..base.clone() }).unwrap();
    }
    let id = wf
        .checkpoint(CheckpointInput {
            context_dir: context.clone(),
            transformation: "TB-Tiling".into(),
            executor: "openai".into(),
            model: Some("m".into()),
            validation: json!({"verdict": "passed", "elapsed_s": 6.0}),
            performance: performance(5.0, &[(1, 9.0), (2, 6.0), (6, 5.0)]),
            transcript: json!({"entries": [{"latency_ms": 1500}, {"latency_ms": 500}]}),
            ..CheckpointInput::default()
        })
        .unwrap();
    wf.record_attempt(Attempt { outcome: AttemptOutcome::Passed, retry: 4, checkpoint: Some(id.to_string()), ..base.clone() }).unwrap();

    let w = gather_one(&tmp.path().join("wf")).unwrap();
    let steps = &w.series[0].steps;
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].speedup_over_root, Some(4.0));
    // TFLOP/s from the manifest's flops (2 n^3) at n = 256 in 5 ms.
    let tflops = steps[1].tflops.unwrap();
    assert!((tflops - 2.0 * 256f64.powi(3) / 5e-3 / 1e12).abs() < 1e-9, "{tflops}");

    let row = &w.success[0];
    assert_eq!((row.applies, row.tries, row.first_try, row.after_repair, row.failed), (1, 5, 0, 1, 0));
    for kind in ["bad-reply", "compile-failed", "wrong-output", "sanitizer-finding"] {
        assert_eq!(row.failures.get(kind), Some(&1), "{kind}: {:?}", row.failures);
    }
    // The reply error is no validation failure; the others are, each placed.
    let depth: Vec<(&str, Option<u32>)> = w.depth.iter().map(|d| (d.validator.as_str(), d.first_failing_sample)).collect();
    assert_eq!(depth, [("compiler", Some(1)), ("output", Some(5)), ("sanitizer", Some(2))]);
    assert_eq!(w.samples_enough, Some(5));

    assert_eq!((w.time.validation_s, w.time.tuning_s, w.time.transformation_s), (6.0, 8.0, 2.0));
    assert_eq!(w.convergence.len(), 2);
    assert_eq!(w.convergence[1].curve, [(1, 9.0), (2, 6.0), (6, 5.0)]);
    assert!(w.missing.iter().all(|m| !m.starts_with("evaluation depth") && !m.starts_with("convergence") && !m.starts_with("time")), "{:?}", w.missing);

    let text = tables::render_workflow(&w);
    assert!(text.contains("samples that would have been enough: 5"), "{text}");
    let figs = figures::all(&w).unwrap();
    let svg = |id: &str| figs.iter().find(|f| f.id == id).unwrap().svg.clone();
    assert!(svg("fig-depth").contains("sample 5") && svg("fig-depth").contains("sanitizer"), "{}", svg("fig-depth"));
    assert!(svg("fig-success").contains("openai (m) · TB-Tiling") && svg("fig-success").contains("sanitizer-finding"));
    assert!(svg("fig-convergence").contains("TB-Tiling (n=256)"));
}
