//! The output schema of every tool: what its `structuredContent` holds, always a JSON
//! object. Each names the keys a program reads at the top level, their types and what
//! they mean; deeper records are described, not spelt out, and may grow. Every key has one
//! type: a value that is not known is left out (the server drops null members), so keys
//! that are not always there are not `required`.
//!
//! The official SDK clients validate every result against these (tests/clients).

use rmcp::model::JsonObject;
use serde_json::{Value, json};

/// The output schema of `tool`, if it is one of peak's.
pub(crate) fn schema(tool: &str) -> Option<JsonObject> {
    let schema = match tool {
        "list_contexts" => object(&[("dir", string("The folder searched.")), ("contexts", list("The contexts found.", context_found()))], &["dir", "contexts"]),
        "show_context" => show_context(),
        "read_region" => object(
            &[("region", string("macros, device or host.")), ("target", string("The context or checkpoint read.")), ("text", string("The region's text."))],
            &["region", "target", "text"],
        ),
        "list_transformations" => object(&[("transformations", list("One summary per transformation.", transformation()))], &["transformations"]),
        "show_transformation" => transformation(),
        "import_kernel" => import_kernel(),
        "init_workflow" => object(
            &[("workflow", string("The workflow folder.")), ("root", string("The root checkpoint's id.")), ("log", log_entries())],
            &["workflow", "root", "log"],
        ),
        "start_transformation" | "submit_region" | "pending_pass" | "apply_transformation" | "retune" => outcome(),
        "auto" => object(
            &[
                ("stopped", string("Why the run stopped: planner (the planner said stop), budget (steps spent) or time.")),
                ("applied", integer("Transformations applied, successful or not.")),
                ("best_checkpoint", string("The fastest checkpoint in the workflow at the end; absent when none is timed.")),
                ("best_ms", number("Its time in milliseconds.")),
                ("head", string("The current checkpoint at the end.")),
                ("branch", string("Its branch; absent when detached.")),
                (
                    "events",
                    list(
                        "This run's decisions and outcomes, as written to .git/peak/auto-log.jsonl.",
                        record("One event: step, event, at, transformation, reasoning, detail, checkpoint, best_ms, branch."),
                    ),
                ),
            ],
            &["stopped", "applied", "head", "events"],
        ),
        "study" => object(
            &[
                ("from", string("The checkpoint every run started from.")),
                ("head", string("HEAD after the study: where it was before.")),
                ("branch", string("HEAD's branch; absent when detached.")),
                (
                    "cells",
                    list(
                        "One summary per transformation and executor.",
                        record(
                            "transformation, executor, runs, successes, first_try, after_repair, failed, unreachable, tries, failures (failed tries by kind).",
                        ),
                    ),
                ),
                (
                    "runs",
                    list(
                        "Every run.",
                        record("transformation, executor, repeat, branch, status (checkpoint, failed, unreachable, error), checkpoint, best_ms, tries, error."),
                    ),
                ),
            ],
            &["from", "head", "cells", "runs"],
        ),
        "abandon_transformation" => object(&[("abandoned", boolean("Whether a transformation was in progress."))], &["abandoned"]),
        "validate" => validation(),
        "tune" => tuning(),
        "profile" => profile(),
        "log" => object(&[("log", log_entries())], &["log"]),
        "attempts" => attempts(),
        "report" => object(
            &[(
                "workflows",
                list(
                    "One report per workflow or bundle: series of steps with speedups, success per executor, evaluation depth, time spent, convergence.",
                    record("A workflow's report."),
                ),
            )],
            &["workflows"],
        ),
        "show_checkpoint" => checkpoint(),
        "diff" => diff(),
        "tag" => object(&[("tag", string("The tag.")), ("checkpoint", string("The checkpoint it names."))], &["tag", "checkpoint"]),
        "branch" => object(&[("branch", string("The branch.")), ("checkpoint", string("The checkpoint it starts at."))], &["branch", "checkpoint"]),
        "checkout" => {
            object(&[("id", string("The current checkpoint.")), ("branch", string("The checked-out branch; absent when detached (at a tag or id)."))], &["id"])
        }
        "compare" => compare(),
        _ => return None,
    };
    match schema {
        Value::Object(object) => Some(object),
        _ => unreachable!("schemas are objects"),
    }
}

fn object(properties: &[(&str, Value)], required: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> = properties.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn integer(description: &str) -> Value {
    json!({ "type": "integer", "description": description })
}

fn number(description: &str) -> Value {
    json!({ "type": "number", "description": description })
}

fn boolean(description: &str) -> Value {
    json!({ "type": "boolean", "description": description })
}

fn list(description: &str, items: Value) -> Value {
    json!({ "type": "array", "description": description, "items": items })
}

/// An object whose keys are described rather than listed.
fn record(description: &str) -> Value {
    json!({ "type": "object", "description": description })
}

fn strings(description: &str) -> Value {
    list(description, json!({ "type": "string" }))
}

fn context_found() -> Value {
    object(
        &[
            ("path", string("The context folder.")),
            ("name", string("The kernel's name; absent when its peak.toml does not load.")),
            ("backend", string("opencl, cuda, hip or hlsl; absent when its peak.toml does not load.")),
            ("inputs", strings("Its input names.")),
            ("tuning", strings("Its tuning parameter names.")),
            ("error", string("Why its peak.toml does not load; absent when it does.")),
        ],
        &["path", "inputs", "tuning"],
    )
}

fn show_context() -> Value {
    object(
        &[
            ("name", string("The kernel's name.")),
            ("backend", string("opencl, cuda, hip or hlsl.")),
            ("target", string("The context folder or checkpoint shown.")),
            ("manifest", string("peak.toml as written.")),
            ("source_file", string("The source file's name.")),
            ("regions", record("Each region's text: macros, device, host.")),
            ("valid_execution_parameters", integer("How many execution parameters satisfy the constraints (counting stops at 100000).")),
            ("more_than_counted", boolean("Whether counting stopped before the end: there are more.")),
        ],
        &["name", "backend", "target", "manifest", "source_file", "regions"],
    )
}

fn transformation() -> Value {
    object(
        &[
            ("name", string("The transformation's name.")),
            ("description", string("What it does.")),
            ("applies_to", strings("The backends it applies to.")),
            ("patterns", strings("The kinds of kernel it is written for.")),
            ("requires", strings("Macros the kernel must have.")),
            (
                "tuning",
                list(
                    "The tuning parameters it introduces.",
                    object(&[("name", string("The parameter.")), ("description", string("What it sets."))], &["name"]),
                ),
            ),
            ("constraints", strings("The constraints it adds.")),
            ("passes", list("Its passes: the region each edits, and its title.", record("A pass."))),
        ],
        &["name", "description", "passes"],
    )
}

fn import_kernel() -> Value {
    object(
        &[
            ("context", string("The context folder written.")),
            ("manifest", record("The peak.toml written, as JSON.")),
            ("launch", string("The proposed launch script (the host region).")),
            ("notes", strings("What the import read, left out or guessed.")),
        ],
        &["context", "manifest", "launch", "notes"],
    )
}

fn log_entries() -> Value {
    let entry = object(
        &[
            ("id", string("The checkpoint's id.")),
            ("parents", strings("Its parents' ids.")),
            ("branches", strings("Branches at it.")),
            ("tags", strings("Tags naming it.")),
            ("head", boolean("Whether it is the current checkpoint.")),
            ("transformation", string("The transformation that made it.")),
            ("verdict", string("passed, deferred, ...")),
            ("best_time_ms", number("Its best tuned time in milliseconds; absent when untimed.")),
            (
                "baseline",
                object(
                    &[
                        (
                            "kind",
                            string(
                                "The yardstick at the best time's inputs: cublaslt (a GEMM on CUDA or HIP), copy (a device-to-device copy of the bytes the kernel moves), or n/a.",
                            ),
                        ),
                        ("time_ms", number("The yardstick's median time in milliseconds; absent for n/a.")),
                        ("percent", number("The yardstick's time over the best time, in percent: 100 when the kernel is as fast.")),
                        ("reason", string("n/a: why nothing was timed.")),
                    ],
                    &["kind"],
                ),
            ),
        ],
        &["id"],
    );
    list("The checkpoints, newest first, with times and speedups over the root and the parent.", entry)
}

fn outcome() -> Value {
    let failure =
        object(&[("outcome", string("compile-failed, wrong-output, ...")), ("detail", string("The compiler log or the verdict."))], &["outcome", "detail"]);
    object(
        &[
            (
                "status",
                json!({ "type": "string", "enum": ["checkpoint", "waiting", "failed", "idle"], "description": "checkpoint: a new checkpoint was recorded; waiting: a pass waits for submit_region; failed: retries exhausted; idle: nothing in progress." }),
            ),
            ("id", string("checkpoint: the new checkpoint's id.")),
            ("transformation", string("The transformation carried out.")),
            ("verdict", string("checkpoint: passed, or deferred (compile-checked only).")),
            ("best_ms", number("checkpoint: the best tuned time in milliseconds; absent when deferred.")),
            ("speedup_over_parent", number("checkpoint: the speedup over the parent checkpoint; absent when unknown.")),
            ("attempts", integer("checkpoint, failed: tries made.")),
            ("pass", integer("waiting: the pass asked for (from 1).")),
            ("passes", integer("waiting: the transformation's passes.")),
            ("attempt", integer("waiting: the try this is (from 1).")),
            ("region", string("waiting: the region to write (macros, device or host).")),
            ("prompt_file", string("waiting: the file holding the prompt.")),
            ("prompt", string("waiting: the prompt.")),
            ("last_outcome", string("failed: the last try's outcome.")),
            ("last_error", string("failed: the last try's error.")),
            ("failures", list("The tries this call rejected (a repair is asked for).", failure)),
        ],
        &["status"],
    )
}

fn validation() -> Value {
    object(
        &[
            ("context", string("The context validated.")),
            ("source_hash", string("The hash of its source.")),
            ("device", string("The device it ran on.")),
            ("validators", strings("The validators that judged it.")),
            ("outcome", string("passed, failed, or all-pruned.")),
            ("counts", record("Samples per verdict.")),
            ("samples", list("Each sample's execution parameters and verdict.", record("A sample."))),
            (
                "sanitizer",
                record(
                    "What compute-sanitizer did once every output was right: summary (the tools and samples, or why nothing ran, e.g. `none for opencl`), requested_samples, tools, outcome, samples with their verdicts. Absent when the outputs did not pass.",
                ),
            ),
        ],
        &["context", "device", "outcome", "counts", "samples"],
    )
}

fn tuning() -> Value {
    object(
        &[
            ("context", string("The context tuned.")),
            ("source_hash", string("The hash of its source.")),
            ("device", string("The device it ran on.")),
            ("reference", string("What its outputs were checked against.")),
            ("cache", record("The results cache used.")),
            ("runs", list("One run per input configuration: strategy, evaluations, failures, the best configurations (top-K).", record("A tuning run."))),
            ("worker_restarts", integer("Workers restarted after a crash.")),
        ],
        &["context", "device", "runs"],
    )
}

fn profile() -> Value {
    object(
        &[
            ("params", record("The execution parameters profiled.")),
            ("kernels", list("Each kernel launch's metrics.", record("A kernel's metrics."))),
            ("headline", record("Achieved FLOP/s, DRAM bandwidth, occupancy, bank conflicts.")),
        ],
        &["params", "kernels", "headline"],
    )
}

fn attempts() -> Value {
    object(
        &[
            ("records", list("Every try: transformation, pass, executor and model, outcome, error.", record("An attempt."))),
            ("damaged", list("Lines of the attempts log that do not read.", record("A damaged line: where, and why."))),
        ],
        &["records", "damaged"],
    )
}

fn checkpoint() -> Value {
    object(
        &[
            ("id", string("The checkpoint's id.")),
            ("parents", strings("Its parents' ids.")),
            ("branches", strings("Branches at it.")),
            ("tags", strings("Tags naming it.")),
            ("message", string("Its commit message.")),
            ("meta", record("Transformation, executor and model, verdict, time.")),
            ("validation", record("Its validation report; absent when it has none.")),
            ("performance", record("Its tuning results (best configuration and time, top-K); absent when untuned.")),
            ("reference", record("What it is validated against.")),
            ("files", record("Its context's files by name.")),
            ("transcript", record("With transcript: the prompts and replies that produced it.")),
        ],
        &["id", "parents", "meta", "files"],
    )
}

fn diff() -> Value {
    object(
        &[
            ("a", record("The older checkpoint.")),
            ("b", record("The newer checkpoint.")),
            ("files", list("A unified diff per changed file.", record("A file's change."))),
            ("tuning", record("Tuning parameters added, removed or changed.")),
            ("performance", record("The best times of both and the speedup, per size.")),
        ],
        &["a", "b", "files", "tuning", "performance"],
    )
}

fn compare() -> Value {
    let side = record("A checkpoint, the parameters it ran at, and its median time in milliseconds.");
    object(
        &[
            ("a", side.clone()),
            ("b", side),
            ("speedup_b_over_a", number("a's time over b's.")),
            ("repetitions", integer("Timed repetitions of each side.")),
            ("device", string("The device both ran on.")),
        ],
        &["a", "b", "speedup_b_over_a", "repetitions", "device"],
    )
}
