//! The MCP server driven by rmcp's own client, in process over an in-memory duplex pipe:
//! the tool list and its schemas, a whole transformation through the agent flow on
//! OpenCL (a compile error and its repair included), validation and tuning with progress
//! notifications, an LLM executor (the scripted server) through `apply_transformation`,
//! and which failures are tool errors rather than protocol errors.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::Failed;
use peak_mcp::PeakServer;
use peak_transform::testing::{FakeLlmServer, Scripted};
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};

fn main() {
    common::main(vec![
        ("tools_are_listed_with_described_parameters", false, tools_are_listed_with_described_parameters),
        ("bad_input_is_a_tool_error_and_unknown_tools_are_protocol_errors", false, bad_input_is_a_tool_error_and_unknown_tools_are_protocol_errors),
        ("an_agent_imports_a_kernel_file_as_a_context", false, an_agent_imports_a_kernel_file_as_a_context),
        ("agent_carries_refactor_through_to_a_checkpoint", true, agent_carries_refactor_through_to_a_checkpoint),
        ("a_deferred_transformation_is_compile_checked_only", true, a_deferred_transformation_is_compile_checked_only),
        ("validate_and_tune_report_verdicts_and_progress", true, validate_and_tune_report_verdicts_and_progress),
        ("an_llm_executor_applies_through_the_tool", true, an_llm_executor_applies_through_the_tool),
        ("the_autonomous_mode_runs_as_a_tool", true, the_autonomous_mode_runs_as_a_tool),
        ("a_study_runs_as_a_tool_and_leaves_head_alone", true, a_study_runs_as_a_tool_and_leaves_head_alone),
    ]);
}

/// A client that keeps every progress notification it is sent.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

impl Recorder {
    /// The messages sent since the last call.
    fn take(&self) -> Vec<String> {
        self.take_all().into_iter().map(|p| p.message.unwrap_or_default()).collect()
    }

    fn take_all(&self) -> Vec<ProgressNotificationParam> {
        std::mem::take(&mut *self.progress.lock().unwrap())
    }
}

/// A server and a connected client, on a runtime of their own.
struct Session {
    runtime: tokio::runtime::Runtime,
    client: RunningService<RoleClient, Recorder>,
    recorder: Recorder,
    /// Each tool's output schema, which every answer is checked against.
    outputs: std::collections::HashMap<String, Value>,
    _cache: tempfile::TempDir,
}

impl Session {
    fn start() -> Session {
        let cache = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let server = PeakServer::new(common::settings(cache.path()));
        let recorder = Recorder::default();
        let client = runtime.block_on(async {
            let (server_io, client_io) = tokio::io::duplex(1 << 20);
            tokio::spawn(async move {
                let service = server.serve(server_io).await.expect("the server starts");
                let _ = service.waiting().await;
            });
            recorder.clone().serve(client_io).await.expect("the client connects")
        });
        let tools = runtime.block_on(client.list_all_tools()).expect("tools/list");
        let outputs = tools.into_iter().map(|t| (t.name.to_string(), Value::Object(t.output_schema.map(|o| (*o).clone()).unwrap_or_default()))).collect();
        Session { runtime, client, recorder, outputs, _cache: cache }
    }

    fn call_raw(&self, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        let Value::Object(map) = args else { panic!("arguments must be an object") };
        let result = self.runtime.block_on(self.client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map)))?;
        self.conforms(tool, &result);
        Ok(result)
    }

    /// A successful answer holds an object matching the tool's output schema; a failed
    /// one holds none or a matching one.
    fn conforms(&self, tool: &str, result: &CallToolResult) {
        let Some(data) = &result.structured_content else {
            assert!(result.is_error == Some(true), "{tool}: a successful answer without structuredContent");
            return;
        };
        let schema = self.outputs.get(tool).unwrap_or_else(|| panic!("{tool} has no output schema"));
        let wrong = common::schema::violations(schema, data, "$");
        assert!(wrong.is_empty(), "{tool}: structuredContent departs from the output schema: {wrong:?}");
    }

    /// Call a tool; returns (is_error, text).
    fn call(&self, tool: &str, args: Value) -> (bool, String) {
        let result = self.call_raw(tool, args).unwrap_or_else(|e| panic!("{tool}: protocol error: {e}"));
        let text = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n");
        (result.is_error.unwrap_or(false), text)
    }

    fn ok(&self, tool: &str, args: Value) -> String {
        let (error, text) = self.call(tool, args.clone());
        assert!(!error, "{tool} {args} failed:\n{text}");
        text
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn tools_are_listed_with_described_parameters() -> Result<(), Failed> {
    let session = Session::start();
    let tools = session.runtime.block_on(session.client.list_all_tools())?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "abandon_transformation",
            "apply_transformation",
            "attempts",
            "auto",
            "branch",
            "checkout",
            "compare",
            "diff",
            "import_kernel",
            "init_workflow",
            "list_contexts",
            "list_transformations",
            "log",
            "pending_pass",
            "profile",
            "read_region",
            "report",
            "retune",
            "show_checkpoint",
            "show_context",
            "show_transformation",
            "start_transformation",
            "study",
            "submit_region",
            "tag",
            "tune",
            "validate",
        ]
    );
    for tool in &tools {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.len() >= 60, "{}: the description is too thin for a model to use it unaided: {description:?}", tool.name);
        let schema = Value::Object((*tool.input_schema).clone());
        // Every parameter says what it is: that text is all a model sees.
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            assert!(property.get("description").and_then(Value::as_str).is_some_and(|d| d.len() >= 15), "{}.{name} has no description: {property}", tool.name);
            // One type per property and no null defaults: clients that map schemas onto
            // a single-type dialect (Gemini's) reject `["integer", "null"]`.
            assert!(property["type"].is_string(), "{}.{name}: {property}", tool.name);
            assert!(property.get("default").is_none_or(|d| !d.is_null()), "{}.{name}: {property}", tool.name);
        }
    }
    for tool in &tools {
        // An output schema per tool, an object, and no numeric `format` (schemars' "uint",
        // "uint64", "double" are not JSON Schema's) in either schema.
        let output = tool.output_schema.as_ref().map(|o| Value::Object((**o).clone())).unwrap_or_else(|| panic!("{} has no output schema", tool.name));
        assert_eq!(output["type"], "object", "{}", tool.name);
        let input = Value::Object((*tool.input_schema).clone());
        for schema in [&input, &output] {
            let text = schema.to_string();
            for format in ["\"uint", "\"int", "\"double\"", "\"float\""] {
                assert!(!text.contains(&format!("\"format\":{format}")), "{}: a numeric format: {text}", tool.name);
            }
        }
    }
    let schema = |name: &str| Value::Object((*tools.iter().find(|t| t.name == name).unwrap().input_schema).clone());
    let required = |name: &str| {
        let mut r: Vec<String> = schema(name)["required"].as_array().into_iter().flatten().map(|v| v.as_str().unwrap().to_string()).collect();
        r.sort();
        r
    };
    assert_eq!(required("submit_region"), ["text", "workflow"]);
    assert_eq!(required("start_transformation"), ["transformation", "workflow"]);
    assert_eq!(required("apply_transformation"), ["executor", "transformation", "workflow"]);
    assert_eq!(required("auto"), ["executor", "workflow"]);
    assert_eq!(required("study"), ["executors", "transformations", "workflow"]);
    assert_eq!(required("read_region"), ["region"]);
    let validate = schema("validate");
    for property in ["context", "workflow", "checkpoint", "against", "samples", "seed", "set"] {
        assert!(validate["properties"].get(property).is_some(), "validate lacks {property}: {validate}");
    }
    // The sanitizer settings, as `peak apply`'s flags name them, on every tool that
    // validates, tunes a winner or both.
    for tool in ["start_transformation", "apply_transformation", "auto", "init_workflow", "retune", "validate"] {
        let properties = &schema(tool)["properties"];
        for (property, kind) in [("sanitize", "string"), ("sanitize_samples", "integer"), ("sanitize_winner", "boolean"), ("sanitize_at", "array")] {
            assert_eq!(properties[property]["type"], kind, "{tool}.{property}: {properties}");
        }
        let described = properties["sanitize"]["description"].as_str().unwrap_or_default();
        assert!(described.contains("`auto`") && described.contains("`none`") && described.contains("memcheck"), "{tool}.sanitize: {described}");
    }
    // Where the call's workers run, as `--worker-launcher` and `--devices`, on every tool
    // that starts workers.
    for tool in
        ["init_workflow", "start_transformation", "submit_region", "apply_transformation", "auto", "study", "retune", "validate", "tune", "profile", "compare"]
    {
        let properties = &schema(tool)["properties"];
        for property in ["worker_launcher", "devices"] {
            assert_eq!(properties[property]["type"], "string", "{tool}.{property}: {properties}");
        }
    }
    let read_only = |name: &str| tools.iter().find(|t| t.name == name).unwrap().annotations.as_ref().and_then(|a| a.read_only_hint);
    assert_eq!(read_only("log"), Some(true));
    assert_eq!(read_only("submit_region"), None);
    Ok(())
}

fn bad_input_is_a_tool_error_and_unknown_tools_are_protocol_errors() -> Result<(), Failed> {
    let session = Session::start();
    let nowhere = tempfile::tempdir()?;

    // Mistakes a model makes are tool errors it can read and correct.
    let (error, text) = session.call("log", json!({ "workflow": s(nowhere.path()) }));
    assert!(error && text.contains("not a peak workflow"), "{text}");
    let (error, text) = session.call("read_region", json!({ "region": "kernel", "context": s(&common::example("matmul-opencl-naive")) }));
    assert!(error && text.contains("unknown region 'kernel'") && text.contains("macros, device or host"), "{text}");
    let (error, text) = session.call("show_context", json!({}));
    assert!(error && text.contains("give `context`"), "{text}");
    let (error, text) = session.call("show_transformation", json!({ "name": "TB-Tilng" }));
    assert!(error && text.contains("TB-Tiling"), "a near miss suggests the name: {text}");
    let (error, text) = session.call("apply_transformation", json!({ "workflow": s(nowhere.path()), "transformation": "Refactor", "executor": "agent" }));
    assert!(error && text.contains("start_transformation"), "{text}");
    let (error, text) = session.call("profile", json!({ "context": s(&common::example("matmul-opencl-naive")), "set": ["n=256"] }));
    assert!(error && text.contains("ncu"), "no Nsight Compute here, said as a tool error: {text}");

    // Arguments that do not match the schema are answered in-band too (rmcp's choice,
    // as the MCP spec asks, so the model can correct them); an unknown tool is a
    // protocol error.
    let (error, text) = session.call("validate", json!({ "context": "x", "samples": "many" }));
    assert!(error && text.contains("invalid type: string \"many\""), "{text}");
    let (error, text) = session.call("submit_region", json!({ "workflow": "x" }));
    assert!(error && text.contains("missing field `text`"), "{text}");
    // Sanitizer settings are parsed as the CLI's flags are, and a bad one is named.
    let naive = common::example("matmul-opencl-naive");
    let (error, text) = session.call("validate", json!({ "context": s(&naive), "against": s(&naive), "sanitize": "asan" }));
    assert!(error && text.contains("sanitize: unknown sanitizer tool 'asan'") && text.contains("`none`"), "{text}");
    let (error, text) = session.call("start_transformation", json!({ "workflow": s(nowhere.path()), "transformation": "Refactor", "sanitize": "" }));
    assert!(error && text.contains("sanitize: name sanitizer tools"), "{text}");
    let (error, text) =
        session.call("apply_transformation", json!({ "workflow": "x", "transformation": "Refactor", "executor": "ollama:m", "sanitize_at": ["n"] }));
    assert!(error && text.contains("sanitize_at: \"n\": expected NAME=INTEGER"), "{text}");
    let (error, text) = session.call("validate", json!({ "context": s(&naive), "against": s(&naive), "sanitize_at": ["m=4"] }));
    assert!(error && text.contains("`m` is not an input of this kernel"), "checked against the kernel's inputs: {text}");
    let (error, text) = session.call("validate", json!({ "context": s(&naive), "against": s(&naive), "sanitize": "racecheck" }));
    assert!(error && text.contains("CUDA and HIP kernels only; this kernel is opencl"), "{text}");
    // A setting the tool has no use for is refused, not dropped.
    let (error, text) = session.call("validate", json!({ "context": s(&naive), "against": s(&naive), "sanitize_winner": false }));
    assert!(error && text.contains("sanitize_winner: validate tunes nothing"), "{text}");
    let (error, text) = session.call("retune", json!({ "workflow": s(nowhere.path()), "sanitize_samples": 2 }));
    assert!(error && text.contains("sanitize_samples: retune validates no samples"), "{text}");
    let (error, text) = session.call("validate", json!({ "context": s(&naive), "against": s(&naive), "sanitize_samples": "all" }));
    assert!(error && text.contains("invalid type: string \"all\""), "{text}");
    let unknown = session.call_raw("make_it_fast", json!({}));
    assert!(unknown.is_err(), "an unknown tool: {unknown:?}");

    // Read-only tools on a plain folder work without a device.
    let listed = session.ok("list_contexts", json!({ "dir": s(&common::example("")) }));
    assert!(listed.contains("matmul-opencl-naive") && listed.contains("(opencl)") && listed.contains("BLOCK_X"), "{listed}");
    let region = session.ok("read_region", json!({ "region": "host", "context": s(&common::example("matmul-opencl-naive")) }));
    assert!(region.contains("launch(\"matmul\""), "{region}");
    let listed = session.ok("list_transformations", json!({ "backend": "opencl" }));
    assert!(listed.contains("Refactor:") && listed.contains("Once:") && !listed.contains("Tensor-Core:"), "{listed}");
    Ok(())
}

/// Refactor's two regions, written by hand as an agent would write them.
const MACROS: &str = "\
#define TX ((int)get_local_id(0))
#define TY ((int)get_local_id(1))
#define BX ((int)get_group_id(0))
#define BY ((int)get_group_id(1))
#define ROW (BY * BLOCK_Y + TY)
#define COL (BX * BLOCK_X + TX)
#define A_AT(r, c) A[(r) * n + (c)]
#define B_AT(r, c) B[(r) * n + (c)]
#define C_AT(r, c) C[(r) * n + (c)]
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define SHARED __local
";

const DEVICE: &str = "\
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {
    if (ROW < n && COL < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) {
            acc += A_AT(ROW, k) * B_AT(k, COL);
        }
        C_AT(ROW, COL) = acc;
    }
}
";

fn an_agent_imports_a_kernel_file_as_a_context() -> Result<(), Failed> {
    let session = Session::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scale.cu");
    std::fs::write(&file, "#include <stdio.h>\n__global__ void scale(const float* x, float* y, int n, float k) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = k * x[i]; }\n").unwrap();
    let ctx = dir.path().join("scale");
    let (error, text) = session.call("import_kernel", json!({ "file": s(&file), "context": s(&ctx), "sizes": ["x=n"], "inputs": ["n=1024"] }));
    assert!(error && text.contains("--size y=EXPR") && text.contains("--scalar k=VALUE"), "what is missing is named: {text}");
    let text = session.ok(
        "import_kernel",
        json!({ "file": s(&file), "context": s(&ctx), "sizes": ["x=n", "y=n"], "inputs": ["n=1024"], "scalars": ["k=2"], "domain": "elementwise" }),
    );
    // The float parameter is named in [scalars] and passed by name.
    assert!(text.contains("launch(\"scale\", ceil_div(n, BLOCK_X), BLOCK_X, 0, x, y, n, k);"), "{text}");
    assert!(text.contains("left out #include <stdio.h>"), "what the import left out is said: {text}");
    let loaded = peak_spec::Context::load(&ctx).expect("the imported context loads");
    assert_eq!(loaded.manifest.kernel.domain(), Some("elementwise"));
    assert_eq!(loaded.manifest.scalars.get("k"), Some(&2.0));
    assert!(loaded.regions.get(peak_spec::Region::Device).starts_with("extern \"C\" __global__ void scale("));
    Ok(())
}

fn agent_carries_refactor_through_to_a_checkpoint() -> Result<(), Failed> {
    let session = Session::start();
    let tmp = tempfile::tempdir()?;
    let wf = tmp.path().join("wf");
    let wf = s(&wf);

    let init = session.ok("init_workflow", json!({ "workflow": wf, "context": s(&common::example("matmul-opencl-naive")), "set": ["n=256"], "budget": 4 }));
    assert!(init.contains("root checkpoint"), "{init}");
    let progress = session.recorder.take();
    assert!(progress.iter().any(|m| m.starts_with("tune")), "the root's tuning reports progress: {progress:?}");

    let apply = json!({
        "workflow": wf, "transformation": "refactor", "samples": 3, "budget": 4, "set": ["n=256"], "retries": 2,
        "sanitize": "none", "sanitize_samples": 2, "sanitize_at": ["n=64"],
    });
    let first = session.ok("start_transformation", apply.clone());
    assert!(first.contains("pass 1 of 2") && first.contains("`macros` region") && first.contains("submit_region"), "{first}");
    assert!(first.contains("#define TX get_local_id(0)") || first.contains("get_local_id(0)"), "the prompt speaks OpenCL: {first}");
    let pending = session.ok("pending_pass", json!({ "workflow": wf }));
    assert!(pending.contains("pass 1 of 2"), "{pending}");
    let (error, twice) = session.call("start_transformation", apply);
    assert!(error && twice.contains("already in progress"), "{twice}");

    let second = session.ok("submit_region", json!({ "workflow": wf, "text": MACROS }));
    assert!(
        second.contains("pass 2 of 2") && second.contains("`device` region") && second.contains("#define A_AT"),
        "the device prompt shows the new macros: {second}"
    );

    // A device region that does not compile: a tool error with the log and a repair prompt.
    let broken = DEVICE.replace("float acc = 0.0f;", "float acc = UNDECLARED_START;");
    let (error, repair) = session.call("submit_region", json!({ "workflow": wf, "text": broken }));
    assert!(error, "a failed compile is a tool error:\n{repair}");
    assert!(repair.contains("compile-failed") && repair.contains("UNDECLARED_START") && repair.contains("attempt 2"), "{repair}");

    let done = session.ok("submit_region", json!({ "workflow": wf, "text": format!("```c\n{DEVICE}```\n") }));
    assert!(done.contains("Refactor succeeded: checkpoint") && done.contains("after 2 attempts"), "{done}");
    let progress = session.recorder.take();
    assert!(progress.iter().any(|m| m == "validate") && progress.iter().any(|m| m.starts_with("tune")), "validation and tuning report progress: {progress:?}");

    let log = session.ok("log", json!({ "workflow": wf }));
    assert!(log.contains("Refactor") && log.contains("init"), "{log}");
    let pending = session.ok("pending_pass", json!({ "workflow": wf }));
    assert!(pending.contains("no transformation is waiting"), "{pending}");
    let region = session.ok("read_region", json!({ "workflow": wf, "region": "device" }));
    assert!(region.contains("A_AT(ROW, k)"), "HEAD holds the submitted kernel: {region}");
    let diff = session.ok("diff", json!({ "workflow": wf, "a": "root" }));
    assert!(diff.contains("+#define A_AT(r, c)") || diff.contains("A_AT"), "{diff}");
    let attempts = session.ok("attempts", json!({ "workflow": wf }));
    assert!(attempts.contains("compile-failed") && attempts.contains("Refactor") && attempts.contains("passed"), "{attempts}");
    // The report counts the failed try by kind, and says which validator caught it.
    let report = session.ok("report", json!({ "workflows": [wf] }));
    let refactor = report.lines().find(|l| l.trim_start().starts_with("agent") && l.contains("Refactor")).unwrap_or_else(|| panic!("{report}"));
    let counts: Vec<u32> = refactor.split_whitespace().filter_map(|c| c.parse().ok()).collect();
    // applies, tries, first try, after repair, failed, then the failure kinds (compile-failed second).
    assert_eq!(counts[..5], [1, 2, 0, 1, 0], "{report}");
    assert_eq!(counts[6], 1, "one compile-failed try: {report}");
    // Every sample fails to compile, so the first one caught it: one sample was enough.
    let depth = report.lines().find(|l| l.contains("compile-failed  compiler")).unwrap_or_else(|| panic!("{report}"));
    assert!(depth.trim_end().ends_with("  1"), "caught at the first sample: {depth}");
    assert!(report.contains("samples that would have been enough: 1"), "{report}");
    let shown = session.ok("show_checkpoint", json!({ "workflow": wf }));
    assert!(shown.contains("transformation  Refactor") && shown.contains("executor        agent"), "{shown}");
    // The sanitizer settings reached the apply (and its saved state, which submit_region
    // resumed from): turned off, not `auto`'s "none for opencl".
    let head = session.call_raw("show_checkpoint", json!({ "workflow": wf }))?.structured_content.unwrap_or_default();
    let sanitizer = &head["validation"]["sanitizer"];
    assert_eq!(sanitizer["summary"], "none (turned off)", "{sanitizer}");
    assert_eq!(sanitizer["requested_samples"], 2, "{sanitizer}");
    assert_eq!(head["performance"]["sanitizer_winner"]["summary"], "none (turned off)", "{head}");

    // Lines of work: tag, branch from the root, check it out, and compare.
    session.ok("tag", json!({ "workflow": wf, "name": "refactored" }));
    session.ok("branch", json!({ "workflow": wf, "name": "other", "from": "root" }));
    let checkout = session.ok("checkout", json!({ "workflow": wf, "target": "other" }));
    assert!(checkout.contains("on branch other"), "{checkout}");
    let compare = session.ok("compare", json!({ "workflow": wf, "a": "root", "b": "refactored", "set": ["n=256"], "reps": 2 }));
    assert!(compare.contains("speedup of refactored over root"), "{compare}");
    let log = session.ok("log", json!({ "workflow": wf }));
    assert!(log.contains("other") && log.contains("refactored"), "{log}");
    Ok(())
}

fn a_deferred_transformation_is_compile_checked_only() -> Result<(), Failed> {
    let session = Session::start();
    let tmp = tempfile::tempdir()?;
    let wf = tmp.path().join("wf");
    let wf = s(&wf);
    session.ok(
        "init_workflow",
        json!({ "workflow": wf, "context": s(&common::example("matmul-opencl-naive")), "set": ["n=256"], "budget": 4, "sanitize": "none" }),
    );
    let root = session.call_raw("show_checkpoint", json!({ "workflow": wf, "checkpoint": "root" }))?.structured_content.unwrap_or_default();
    assert_eq!(root["performance"]["sanitizer_winner"]["summary"], "none (turned off)", "init_workflow takes the sanitizer settings: {root}");
    session.recorder.take();
    session.ok("start_transformation", json!({ "workflow": wf, "transformation": "refactor", "samples": 3, "set": ["n=256"], "defer": true }));
    session.ok("submit_region", json!({ "workflow": wf, "text": MACROS }));
    let done = session.ok("submit_region", json!({ "workflow": wf, "text": DEVICE }));
    assert!(done.contains("Refactor compiled: checkpoint") && done.contains("deferred") && done.contains("peak replay"), "{done}");
    let progress = session.recorder.take();
    assert!(progress.iter().any(|m| m == "compile-check") && !progress.iter().any(|m| m == "validate" || m.starts_with("tune")), "{progress:?}");
    let shown = session.ok("show_checkpoint", json!({ "workflow": wf }));
    assert!(shown.contains("verdict         deferred") || shown.contains("\"verdict\": \"deferred\""), "{shown}");
    Ok(())
}

fn validate_and_tune_report_verdicts_and_progress() -> Result<(), Failed> {
    let session = Session::start();
    let naive = common::example("matmul-opencl-naive");
    let passed = session.ok("validate", json!({ "context": s(&common::example("matmul-opencl-tiled")), "against": s(&naive), "samples": 2, "set": ["n=256"] }));
    assert!(passed.starts_with("PASS") && passed.contains("sanitizer: none for opencl"), "auto runs nothing on OpenCL, and says so: {passed}");
    let progress = session.recorder.take_all();
    let counted: Vec<(f64, Option<f64>)> = progress.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(counted, [(1.0, Some(2.0)), (2.0, Some(2.0))], "one progress notification per sample, with the total: {progress:?}");

    let (error, failed) = session.call("validate", json!({ "context": s(&common::fixture("wrong")), "against": s(&naive), "samples": 2, "set": ["n=256"] }));
    assert!(error && failed.starts_with("FAIL") && failed.contains("wrong-output"), "a wrong output is a tool error:\n{failed}");
    assert!(failed.contains("sanitizer: not run: the outputs did not pass"), "{failed}");
    session.recorder.take();

    // `sanitize: none` as `peak validate --sanitize none`: recorded as turned off.
    let off = json!({ "context": s(&naive), "against": s(&naive), "samples": 2, "set": ["n=256"], "sanitize": "none", "sanitize_samples": 1 });
    let result = session.call_raw("validate", off)?;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let sanitizer = &result.structured_content.unwrap_or_default()["sanitizer"];
    assert_eq!(sanitizer["summary"], "none (turned off)", "{sanitizer}");
    assert_eq!(sanitizer["requested_samples"], 1, "{sanitizer}");
    session.recorder.take();

    let tuned = session.ok("tune", json!({ "context": s(&naive), "budget": 3, "set": ["n=256"], "top": 2 }));
    assert!(tuned.contains("inputs n=256") && tuned.contains("#1 ") && tuned.contains("#2 "), "{tuned}");
    let progress = session.recorder.take_all();
    assert!(progress.iter().any(|p| p.message.as_deref().is_some_and(|m| m.starts_with("tune n=256"))), "{progress:?}");
    // The run's start gives its total: the start itself and the three configurations.
    assert_eq!(progress[0].total, Some(4.0), "{progress:?}");
    assert!(progress.windows(2).all(|w| w[1].progress > w[0].progress), "progress rises: {progress:?}");
    assert!(progress.iter().all(|p| p.total.is_some_and(|t| p.progress <= t)), "{progress:?}");
    Ok(())
}

fn an_llm_executor_applies_through_the_tool() -> Result<(), Failed> {
    let session = Session::start();
    let tmp = tempfile::tempdir()?;
    let wf = tmp.path().join("wf");
    let wf = s(&wf);
    session.ok("init_workflow", json!({ "workflow": wf, "context": s(&common::fixture("repeat")) }));
    // The model's first reply has no code block: repaired, as the attempts show.
    let server = session.runtime.block_on(FakeLlmServer::start([Scripted::reply("Set REPEAT to 1."), Scripted::reply("```c\n#define REPEAT 1\n```")]))?;
    let executor = format!("openai-compat:{}:fake-coder", server.openai_base_url());
    session.recorder.take();

    let done = session.ok("apply_transformation", json!({ "workflow": wf, "transformation": "Once", "executor": executor, "samples": 2 }));
    assert!(done.contains("Once succeeded: checkpoint") && done.contains("after 2 attempts"), "{done}");
    let progress = session.recorder.take();
    assert!(progress.iter().any(|m| m.starts_with("Once: pass 1/1 (One repetition), attempt 2")), "{progress:?}");
    assert!(progress.iter().any(|m| m.starts_with("unparsable-reply")), "{progress:?}");
    let shown = session.ok("show_checkpoint", json!({ "workflow": wf, "transcript": true }));
    assert!(shown.contains("fake-coder") && shown.contains("#define REPEAT 1"), "the checkpoint records the model and its reply: {shown}");
    assert_eq!(server.requests().len(), 2);
    Ok(())
}

/// `auto`, the autonomous mode as a tool: the scripted planner picks Once, the scripted
/// executor writes it, the planner stops; the answer says why it stopped and what it did,
/// and the decisions arrive as progress.
fn the_autonomous_mode_runs_as_a_tool() -> Result<(), Failed> {
    let session = Session::start();
    let tmp = tempfile::tempdir()?;
    let wf = tmp.path().join("wf");
    let wf = s(&wf);
    session.ok("init_workflow", json!({ "workflow": wf, "context": s(&common::fixture("repeat")) }));
    let script = [
        Scripted::reply(r#"{"action": "apply", "transformation": "Once", "reasoning": "one repetition is enough"}"#),
        Scripted::reply("```c\n#define REPEAT 1\n```"),
        Scripted::reply(r#"{"action": "stop", "transformation": "", "reasoning": "fast enough"}"#),
    ];
    let server = session.runtime.block_on(FakeLlmServer::start(script))?;
    let executor = format!("openai-compat:{}:fake-coder", server.openai_base_url());
    session.recorder.take();

    let done = session.ok("auto", json!({ "workflow": wf, "executor": executor, "steps": 3, "samples": 2 }));
    assert!(done.starts_with("auto stopped (planner) after 1 transformation(s); best checkpoint"), "{done}");
    assert!(done.contains("step 1: plan Once one repetition is enough") && done.contains("step 2: stop"), "{done}");
    let progress = session.recorder.take();
    assert!(progress.iter().any(|m| m == "auto step 1: plan Once"), "{progress:?}");
    assert!(progress.iter().any(|m| m.starts_with("Once: pass 1/1")), "{progress:?}");
    let log = session.ok("log", json!({ "workflow": wf }));
    assert!(log.contains("Once"), "{log}");
    assert_eq!(server.requests().len(), 3);
    let (error, text) = session.call("auto", json!({ "workflow": wf, "executor": "agent" }));
    assert!(error && text.contains("auto needs an LLM executor"), "{text}");
    Ok(())
}

/// `study`, as `peak study`: one run of Once with the scripted model on a side branch,
/// tallied, HEAD where it was; an agent executor is refused before anything moves.
fn a_study_runs_as_a_tool_and_leaves_head_alone() -> Result<(), Failed> {
    let session = Session::start();
    let tmp = tempfile::tempdir()?;
    let wf = tmp.path().join("wf");
    let wf = s(&wf);
    session.ok("init_workflow", json!({ "workflow": wf, "context": s(&common::fixture("repeat")) }));
    let before = session.ok("log", json!({ "workflow": wf }));
    let server = session.runtime.block_on(FakeLlmServer::start([Scripted::reply("```c\n#define REPEAT 1\n```")]))?;
    let executor = format!("openai-compat:{}:fake-coder", server.openai_base_url());
    session.recorder.take();

    let done = session.ok("study", json!({ "workflow": wf, "transformations": ["once"], "executors": [executor], "samples": 2 }));
    assert!(done.contains(&format!("Once with {executor}: 1 run(s), 1 ok (1 first try, 0 repaired), 0 failed, 0 unreachable")), "{done}");
    assert!(done.contains("study/once/openai-compat-") && done.contains(" checkpoint: "), "{done}");
    let progress = session.recorder.take();
    assert!(progress.iter().any(|m| m.starts_with(&format!("Once with {executor} (1/1) on study/once/"))), "{progress:?}");
    let after = session.ok("log", json!({ "workflow": wf }));
    let head = |log: &str| log.lines().find(|l| l.starts_with('*')).map(str::to_string);
    assert!(head(&before).is_some_and(|h| h.contains("(HEAD, main")), "{before}");
    assert_eq!(head(&before), head(&after), "HEAD stays where it was: {after}");
    let (error, text) = session.call("study", json!({ "workflow": wf, "transformations": ["Once"], "executors": ["agent"] }));
    assert!(error && text.contains("a study needs provider:model executors"), "{text}");
    Ok(())
}
