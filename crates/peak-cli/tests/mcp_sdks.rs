//! `peak mcp` through the official MCP SDKs, the clients agents are built on: the Python
//! SDK (`mcp` from PyPI) and the TypeScript SDK (`@modelcontextprotocol/sdk` from npm),
//! each calling every tool of crates/peak-mcp/tests/clients/scenario.json on OpenCL and
//! validating every result against the tool's output schema.
//!
//! `scripts/install-deps.sh` installs both SDKs into that folder (`.venv/`,
//! `node_modules/`). Where one is missing its test prints SKIPPED with the reason; with
//! `PEAK_REQUIRE_MCP_SDKS` set (CI) a missing SDK fails instead.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../peak-mcp/tests/clients")
}

/// Skip (or, where the SDKs are required, fail) for `reason`.
fn missing(test: &str, reason: &str) {
    if std::env::var_os("PEAK_REQUIRE_MCP_SDKS").is_some() {
        panic!("{test}: {reason} (PEAK_REQUIRE_MCP_SDKS is set; run scripts/install-deps.sh)");
    }
    eprintln!("SKIPPED {test}: {reason} (scripts/install-deps.sh installs it)");
}

/// Run a client on the `peak` binary; it fails the test with its whole output.
fn run_client(program: &Path, script: &str) {
    let out = Command::new(program).arg(clients().join(script)).arg(env!("CARGO_BIN_EXE_peak")).output().expect("the client starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("tools called"), "{script} did not get through the scenario:\n{stdout}\n{stderr}");
    println!("{stdout}");
}

/// The Python with the SDK: the clients folder's virtual environment, else python3.
fn python_with_sdk() -> Option<PathBuf> {
    let venv = clients().join(".venv/bin/python");
    let python = if venv.exists() { venv } else { PathBuf::from("python3") };
    let probe = Command::new(&python).args(["-c", "import mcp.client.stdio"]).output().ok()?;
    probe.status.success().then_some(python)
}

#[test]
fn the_python_sdk_calls_every_tool() {
    let test = "the_python_sdk_calls_every_tool";
    if !support::opencl_present(test) {
        return;
    }
    match python_with_sdk() {
        Some(python) => run_client(&python, "python_client.py"),
        None => missing(test, "the Python MCP SDK (pip package `mcp`) is not installed"),
    }
}

#[test]
fn the_typescript_sdk_calls_every_tool() {
    let test = "the_typescript_sdk_calls_every_tool";
    if !support::opencl_present(test) {
        return;
    }
    let node = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !node {
        return missing(test, "Node.js is not installed");
    }
    if !clients().join("node_modules/@modelcontextprotocol/sdk/package.json").exists() {
        return missing(test, "the TypeScript MCP SDK (npm package `@modelcontextprotocol/sdk`) is not installed");
    }
    run_client(Path::new("node"), "node_client.mjs");
}
