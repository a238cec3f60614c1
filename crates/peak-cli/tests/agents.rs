//! `peak mcp` and `peak auto` as commands: the MCP server speaks JSON-RPC on stdio and
//! nothing else, and the autonomous mode's usage errors and a planner that stops at once.
//! (The tools and the autonomous mode are tested in depth in `crates/peak-mcp/tests`.)

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use peak_transform::testing::{FakeLlmServer, Scripted};
use serde_json::{Value, json};

fn peak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_peak")).args(args).output().expect("peak runs")
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

#[test]
fn peak_mcp_answers_json_rpc_on_stdout_and_nothing_else() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_peak")).arg("mcp").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_region", "arguments": {"region": "device", "context": example("matmul-opencl-naive")}}}),
    ];
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    // Requests after `initialize` may be answered in any order; collect by id.
    let mut by_id = std::collections::BTreeMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC, not {line:?}: {e}"));
        if let Some(id) = message["id"].as_u64() {
            by_id.insert(id, message);
        }
        if by_id.len() == 3 {
            break;
        }
    }
    let answers: Vec<Value> = (1..=3).map(|id| by_id.remove(&id).unwrap_or_else(|| panic!("no answer to request {id}"))).collect();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "peak mcp ends cleanly when the client closes stdin");

    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "peak");
    assert!(answers[0]["result"]["instructions"].as_str().unwrap().contains("submit_region"));
    let tools: Vec<&str> = answers[1]["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"start_transformation") && tools.contains(&"tune") && tools.len() >= 20, "{tools:?}");
    let call = &answers[2]["result"];
    assert_eq!(call["isError"], false);
    assert!(call["content"][0]["text"].as_str().unwrap().contains("__kernel void matmul"), "{call}");
}

#[test]
fn peak_auto_refuses_the_agent_executor_and_bad_thresholds() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = tmp.path().to_str().unwrap();
    for (args, needle) in [
        (vec!["auto", wf, "--executor", "agent"], "needs PROVIDER:MODEL"),
        (vec!["auto", wf, "--executor", "openai:gpt-4.1", "--planner", "gpt"], "invalid executor 'gpt'"),
        (vec!["auto", wf, "--executor", "openai:gpt-4.1", "--regression=-5"], "--regression -5"),
        (vec!["auto", wf], "--executor"),
    ] {
        let out = peak(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn peak_auto_logs_the_planners_stop_with_its_reasoning() {
    let tmp = tempfile::tempdir().unwrap();
    let wf_dir = tmp.path().join("wf");
    // A root without timings: nothing here needs a device.
    peak_workflow::Workflow::init(&wf_dir, example("matmul-opencl-naive"), json!({"backend": "opencl", "seed": 1, "inputs": [{"n": 256}]})).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = runtime
        .block_on(FakeLlmServer::start([Scripted::reply(r#"{"action": "stop", "transformation": "", "reasoning": "the budget is better spent elsewhere"}"#)]))
        .unwrap();
    let executor = format!("openai-compat:{}:planner-model", server.openai_base_url());

    let out = peak(&["auto", wf_dir.to_str().unwrap(), "--executor", &executor, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((report["stopped"].as_str(), report["applied"].as_u64()), (Some("planner"), Some(0)), "{report}");

    let log = std::fs::read_to_string(wf_dir.join(".git/peak/auto-log.jsonl")).unwrap();
    let events: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 1, "{log}");
    assert_eq!((events[0]["event"].as_str(), events[0]["reasoning"].as_str()), (Some("stop"), Some("the budget is better spent elsewhere")));

    let prompt = server.requests()[0].prompt().unwrap();
    assert!(
        prompt.contains("Reply with exactly one JSON object") && prompt.contains("- TB-Tiling:") && prompt.contains("Nothing has been tried yet"),
        "{prompt}"
    );
}
