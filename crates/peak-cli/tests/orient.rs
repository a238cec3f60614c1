//! A GEMM written tokens first (x along the rows of C), as training code writes a linear
//! layer, goes through the GEMM line (issue 24: Refactor followed literally on such a
//! kernel covered only ceil(N / BLOCK_Y) * BLOCK_Y rows). Orient-Grid turns the threads
//! round, then Refactor applies as to any GEMM: our OpenCL `linear_forward`
//! (out = inp . weight^T + bias, no size dividing a tile), walked by the agent executor
//! following the prompts literally, replayed on PoCL and validated at 61 x 47 x 33.

mod support;

use support::{Env, example, opencl_present, s};

#[test]
fn a_tokens_first_linear_layer_is_turned_round_then_refactored() {
    if !opencl_present("a_tokens_first_linear_layer_is_turned_round_then_refactored") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let sizes = ["--set", "tokens=200", "--set", "outputs=150", "--set", "channels=100"];
    let bundle = example("workflows/linear-tokens-opencl-agent.bundle");
    let mut args = vec!["replay", &bundle, "--into", s(&wf), "--samples", "2", "--budget", "4"];
    args.extend(sizes);
    env.ok(&args);
    let log = env.json(&["log", "-w", s(&wf), "--json"]);
    let steps: Vec<(&str, &str)> =
        log.as_array().unwrap().iter().rev().map(|e| (e["transformation"].as_str().unwrap(), e["verdict"].as_str().unwrap_or("-"))).collect();
    assert_eq!(&steps[1..], [("Orient-Grid", "passed"), ("Refactor", "passed")], "{log}");
    let file = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"])["files"]["kernel.cl"].as_str().unwrap().to_string();
    let turned = file("HEAD~1");
    assert!(turned.contains("[ceil_div(outputs, BLOCK_X), ceil_div(tokens, BLOCK_Y)]"), "x over the columns of out:\n{turned}");
    let refactored = file("HEAD");
    assert!(refactored.contains("#define COL (BX * BLOCK_X + TX)") && refactored.contains("C_AT(ROW, COL) = EPILOGUE(acc, ROW, COL)"), "{refactored}");
}
