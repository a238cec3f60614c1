//! The timing method's records on PoCL: every time has its spread beside it (count, min,
//! quartiles, max, in order), and `log` and `compare` say when a difference is within it
//! (issue 26, item 1). What is inside the timed interval is tested on a fake device in
//! `crates/peak-backend/tests/timing.rs`.

mod support;

use serde_json::{Value, json};
use support::{Env, example, opencl_present};

/// The spread's fields, in order, and its count.
fn assert_ordered(spread: &Value, count: u64) {
    let at = |k: &str| spread[k].as_f64().unwrap_or_else(|| panic!("no {k} in {spread}"));
    let order = [at("min_ms"), at("q1_ms"), at("median_ms"), at("q3_ms"), at("max_ms")];
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "min <= q1 <= median <= q3 <= max: {spread}");
    assert!(order[0] > 0.0, "{spread}");
    assert_eq!(spread["count"], count, "{spread}");
}

const NAIVE: [&str; 6] = ["--set", "n=64", "--set", "BLOCK_X=8", "--set", "BLOCK_Y=8"];

#[test]
fn run_and_tune_record_the_spread_beside_every_time() {
    if !opencl_present("run_and_tune_record_the_spread_beside_every_time") {
        return;
    }
    let env = Env::new();
    let naive = example("matmul-opencl-naive");
    let run = env.json(&[&["run", &naive, "--reps", "7", "--json"][..], &NAIVE].concat());
    assert_ordered(&run["spread"], 7);
    assert_eq!(run["spread"]["median_ms"], run["median_ms"], "{run}");

    let wf = env.arg("wf");
    env.ok(&[&["init", &wf, "--from", &naive][..], &NAIVE].concat());
    let root = env.json(&["show", "root", "-w", &wf, "--json"]);
    let performance = &root["performance"];
    assert_ordered(&performance["best"]["spread"], 7);
    assert_eq!(performance["best"]["spread"]["median_ms"], performance["best"]["time_ms"], "{performance}");
    for entry in performance["top_k"].as_array().unwrap().iter().chain(performance["runs"][0]["top_k"].as_array().unwrap()) {
        assert_ordered(&entry["spread"], 7);
    }
}

#[test]
fn log_and_compare_say_when_a_difference_is_within_the_spread() {
    if !opencl_present("log_and_compare_say_when_a_difference_is_within_the_spread") {
        return;
    }
    let env = Env::new();
    let naive = example("matmul-opencl-naive");
    let wf = env.arg("wf");
    env.ok(&[&["init", &wf, "--from", &naive][..], &NAIVE].concat());
    let root = env.json(&["show", "root", "-w", &wf, "--json"]);
    let time = root["performance"]["best"]["time_ms"].as_f64().unwrap();
    // A step measured just like the root (same spread), then one three times as fast
    // with a narrow spread.
    let step = |name: &str, performance: Value| {
        let mut workflow = peak_workflow::Workflow::open(env.path("wf")).unwrap();
        workflow
            .checkpoint(peak_workflow::CheckpointInput {
                context_dir: env.path("wf").join("context"),
                transformation: name.into(),
                executor: "agent".into(),
                validation: json!({"verdict": "passed"}),
                performance,
                transcript: json!({"entries": []}),
                ..Default::default()
            })
            .unwrap();
    };
    step("Same", root["performance"].clone());
    let fast = time / 3.0;
    let mut faster = root["performance"].clone();
    faster["best"]["time_ms"] = json!(fast);
    faster["best"]["spread"] =
        json!({"count": 7, "min_ms": fast * 0.99, "q1_ms": fast * 0.995, "median_ms": fast, "q3_ms": fast * 1.005, "max_ms": fast * 1.01});
    faster["runs"][0]["best"] = faster["best"].clone();
    step("Faster", faster);

    let log = env.ok(&["log", "-w", &wf]);
    let line = |name: &str| log.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("no {name} in\n{log}")).to_string();
    assert!(line("Same").contains("(within spread)"), "{log}");
    assert!(!line("Faster").contains("within spread"), "{log}");
    let entries = env.json(&["log", "-w", &wf, "--json"]);
    let within: Vec<&Value> = entries.as_array().unwrap().iter().map(|e| &e["within_spread_of_parent"]).collect();
    assert_eq!(within, [&json!(false), &json!(true), &Value::Null], "newest first; the root has no parent: {entries}");

    let compared = env.json(&["compare", "root", "HEAD", "-w", &wf, "--reps", "3", "--json"]);
    assert_ordered(&compared["a"]["spread"], 3);
    assert_ordered(&compared["b"]["spread"], 3);
    let overlap = |a: &Value, b: &Value| a["q1_ms"].as_f64() <= b["q3_ms"].as_f64() && b["q1_ms"].as_f64() <= a["q3_ms"].as_f64();
    assert_eq!(compared["within_spread"], json!(overlap(&compared["a"]["spread"], &compared["b"]["spread"])), "{compared}");
    let text = env.ok(&["compare", "root", "HEAD", "-w", &wf, "--reps", "3"]);
    assert_eq!(text.matches(" spread ").count(), 2, "a spread line for each side:\n{text}");
}
