//! Every time in `peak report` carries the inputs it was measured at, and a checkpoint tuned
//! at several sizes gives one row per size, in the terminal tables and in the HTML page
//! (issue 26, item 3). Written through peak-workflow's API: no device.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use peak_report::{gather_one, html, tables};
use peak_workflow::{CheckpointInput, RootInput, Workflow};
use serde_json::{Value, json};

/// A record tuned at each `(n, ms)` in turn; the last one is the headline.
fn tuned(sizes: &[(u64, f64)]) -> Value {
    let params = |n: u64| json!({"inputs": {"n": n}, "tuning": {"BLOCK_X": 16, "BLOCK_Y": 16}});
    let runs: Vec<Value> = sizes.iter().map(|(n, ms)| json!({"inputs": {"n": n}, "best": {"params": params(*n), "time_ms": ms}})).collect();
    let (n, ms) = sizes.last().unwrap();
    json!({"best": {"params": params(*n), "time_ms": ms}, "runs": runs})
}

#[test]
fn each_size_tuned_is_a_row_with_its_inputs_in_the_tables_and_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let context = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/matmul-opencl-naive");
    let root = RootInput { reference: json!({"seed": 1}), performance: Some(tuned(&[(256, 2.0), (1024, 64.0)])), ..RootInput::default() };
    let mut wf = Workflow::init_with(tmp.path().join("wf"), &context, root).unwrap();
    wf.checkpoint(CheckpointInput {
        context_dir: context.clone(),
        transformation: "TB-Tiling".into(),
        executor: "agent".into(),
        validation: json!({"verdict": "passed"}),
        performance: tuned(&[(256, 1.0), (1024, 16.0)]),
        transcript: json!({"entries": []}),
        ..CheckpointInput::default()
    })
    .unwrap();

    let w = gather_one(&tmp.path().join("wf")).unwrap();
    let step = &w.series[0].steps[1];
    assert_eq!((step.best_time_ms, step.best_inputs.as_ref()), (Some(16.0), Some(&json!({"n": 1024}))));
    assert_eq!(step.sizes.len(), 1, "the headline is not repeated: {:?}", step.sizes);
    let other = &step.sizes[0];
    assert_eq!((&other.inputs, other.best_time_ms, other.speedup_over_root), (&json!({"n": 256}), 1.0, Some(2.0)));
    // 2 n^3 flops at n = 256 in 1 ms.
    assert!((other.tflops.unwrap() - 2.0 * 256f64.powi(3) / 1e-3 / 1e12).abs() < 1e-9, "{other:?}");

    let text = tables::render_workflow(&w);
    let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("speedup per step")).skip(2).take_while(|l| !l.trim().is_empty()).collect();
    assert_eq!(rows.len(), 4, "a row per size of each step:\n{text}");
    let cells = |line: &str| line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(cells(rows[2])[4..], ["16.0 ms", "4.00x", "4.00x", "0.13", "-", "n=1024"], "{text}");
    assert_eq!(cells(rows[3]), ["1.00 ms", "2.00x", "2.00x", "0.0336", "n=256"], "the other size, its speedups taken there:\n{text}");

    let page = html::render(&peak_report::Report { workflows: vec![w] }).unwrap();
    assert!(page.contains("<th>inputs</th>"), "the page's step table has an inputs column");
    assert!(page.contains("<td class=\"may-wrap\">n=1024</td>") && page.contains("<td class=\"n\">16.0 ms</td>"), "the headline row names its inputs");
    let size_row = page.split("<tr class=\"size\">").nth(2).expect("a size row under each step").split("</tr>").next().unwrap();
    assert!(size_row.contains("1.00 ms") && size_row.contains("2.00x") && size_row.contains("<td>n=256</td>"), "{size_row}");
    assert!(page.contains("<small>at n=1024</small>"), "the final time card names its inputs");
}
