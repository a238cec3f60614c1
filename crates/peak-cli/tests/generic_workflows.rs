//! The recorded workflows of the kernels beyond MatMul (examples/workflows/*-opencl-agent
//! .bundle: softmax, reduction, transpose, stencil, attention), replayed on OpenCL (PoCL in
//! CI): every generic transformation applies again from its recorded agent replies,
//! validates against the naive root, is tuned and timed, and ends on the same code as the
//! recording (issue 14).
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{Env, context_at, example, opencl_present, s, unbundle};

/// Replay `examples/workflows/<name>-opencl-agent.bundle` at the sizes in `sizes`, check
/// the chain of steps (oldest first after init) and return the replayed log, newest first.
fn replay(name: &str, sizes: &[&str], chain: &[&str]) -> Option<Vec<Value>> {
    replay_branch(name, None, sizes, chain)
}

/// [`replay`] of the chain ending at `branch` of the recording (its current branch when
/// `None`).
fn replay_branch(name: &str, branch: Option<&str>, sizes: &[&str], chain: &[&str]) -> Option<Vec<Value>> {
    if !opencl_present(name) {
        return None;
    }
    let env = Env::new();
    let bundle = example(&format!("workflows/{name}-opencl-agent.bundle"));
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);

    let mut args = vec!["replay", bundle.as_str(), "--into", s(&replayed), "--samples", "4", "--budget", "6"];
    if let Some(branch) = branch {
        args.extend(["--branch", branch]);
    }
    for size in sizes {
        args.extend(["--set", size]);
    }
    env.ok(&args);

    let log = env.json(&["log", "-w", s(&replayed), "--json"]);
    let log = log.as_array().unwrap().clone();
    let steps: Vec<&str> = log.iter().rev().map(|e| e["transformation"].as_str().unwrap()).collect();
    let expected: Vec<&str> = std::iter::once("init").chain(chain.iter().copied()).collect();
    assert_eq!(steps, expected, "{name}: the replay must take every recorded step");
    // The recorded chain, from its tip back to the root through first parents (the
    // recording may hold other branches).
    let tip = branch.unwrap_or("HEAD");
    let original = env.json(&["log", "-w", s(&recorded), "--json"]);
    let parent_of = |id: &str| {
        let entry = original.as_array().unwrap().iter().find(|e| e["id"] == id).unwrap_or_else(|| panic!("{name}: {id} is not in the recorded log"));
        entry["parents"].as_array().unwrap().first().map(|p| p.as_str().unwrap().to_string())
    };
    let mut recorded_chain = vec![env.json(&["show", tip, "-w", s(&recorded), "--json"])["id"].as_str().unwrap().to_string()];
    while let Some(parent) = parent_of(recorded_chain.last().unwrap()) {
        recorded_chain.push(parent);
    }
    assert_eq!(recorded_chain.len(), log.len());

    for entry in log.iter().filter(|e| e["transformation"] != "init") {
        assert_eq!(entry["verdict"], "passed", "{name}: {entry}");
        assert_eq!(entry["executor"], "replay");
        assert_eq!(entry["model"], "agent", "the replies were written through the agent executor");
        assert!(entry["best_time_ms"].as_f64().unwrap() > 0.0, "{name}: every step is timed: {entry}");
        assert!(entry["speedup_over_root"].as_f64().unwrap() > 0.0);
    }
    // The replay reproduces the recorded code exactly, and every step changed it.
    // The kernel's source, whatever `peak new` named it (kernel.cl, encoder.cl).
    let file = |wf: &Path, rev: &str| {
        let shown = env.json(&["show", rev, "-w", s(wf), "--json"]);
        let files = shown["files"].as_object().unwrap();
        let sources: Vec<&Value> = files.iter().filter(|(name, _)| name.ends_with(".cl")).map(|(_, text)| text).collect();
        assert_eq!(sources.len(), 1, "{name}: one OpenCL source: {:?}", files.keys().collect::<Vec<_>>());
        sources[0].as_str().unwrap().to_string()
    };
    assert_eq!(file(&replayed, "HEAD"), file(&recorded, tip), "{name}: the replayed tip differs from the recording");
    let revs: Vec<String> = log.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    for pair in revs.windows(2) {
        assert_ne!(file(&replayed, &pair[0]), file(&replayed, &pair[1]), "{name}: a step left the kernel unchanged");
    }
    Some(log)
}

/// The softmax's main line ends with Register-Row: each work-item's vectors of the row are
/// read once into registers, and the three passes work on them.
/// The recorded bundle cloned, with the contexts of its checkpoint `rev` and of its naive
/// root: a recorded step checked against the root at a test's own sizes and settings.
fn recorded_and_root(env: &Env, bundle: &str, rev: &str) -> (PathBuf, PathBuf, PathBuf) {
    let recorded = env.path("recorded");
    unbundle(&example(&format!("workflows/{bundle}")), &recorded);
    let (candidate, naive) = (context_at(env, &recorded, rev), context_at(env, &recorded, "root"));
    (recorded, candidate, naive)
}

/// The recorded tip of `bundle` validated against its naive root at each of `sizes`, with
/// `settings` beside every one (`--set`s each), on `samples` samples: every case must pass.
fn tip_passes_at(bundle: &str, samples: &str, sizes: &[&[&str]], settings: &[&str]) {
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, bundle, "HEAD");
    for size in sizes {
        let sets: Vec<&str> = size.iter().chain(settings).copied().collect();
        let report = validate_against(&env, &candidate, &naive, samples, &sets);
        assert_eq!(report["outcome"], "passed", "{sets:?}: {report}");
    }
}

/// `peak validate` of `candidate` against `naive` on `samples` samples, the sanitizer off,
/// with each of `sets` given as a `--set`.
fn validate_against(env: &Env, candidate: &Path, naive: &Path, samples: &str, sets: &[&str]) -> Value {
    let mut args = vec!["validate", s(candidate), "--against", s(naive), "--samples", samples, "--sanitize", "none", "--json"];
    args.extend(sets.iter().flat_map(|set| ["--set", *set]));
    env.json(&args)
}

#[test]
fn softmax_workflow_replays() {
    let Some(log) = replay("softmax", &["rows=256", "cols=256"], &["Block-Reduce", "Vectorize-Access", "Unroll-Accumulators", "Register-Row"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Register-Row"));
}

/// The softmax's branch `online-softmax`: after Block-Reduce, Online-Softmax finds the
/// maximum and the sum in one strided pass and combines (maximum, sum) pairs in one tree.
#[test]
fn softmax_online_softmax_branch_replays() {
    let Some(log) = replay_branch("softmax", Some("online-softmax"), &["rows=256", "cols=256"], &["Block-Reduce", "Online-Softmax"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Online-Softmax"));
}

// How fast each step is belongs to the benchmark scripts (bench/h200-kernels.sh), not to a
// test: on a loaded two-core CI machine a speedup of 2.8x on PoCL was measured at 0.88x.
#[test]
fn reduction_workflow_replays() {
    replay("reduction", &["n=262144"], &["Block-Reduce", "Vectorize-Access", "Unroll-Accumulators"]);
}

#[test]
fn transpose_workflow_replays() {
    replay("transpose", &["rows=256", "cols=256"], &["Tile-Staging", "Thread-Coarsen", "Tile-Pad"]);
}

#[test]
fn stencil_workflow_replays() {
    replay("stencil", &["h=256", "w=256"], &["Tile-Staging", "Thread-Coarsen", "Tile-Pad"]);
}

/// The stencil's branch `register-window`, from the naive root: each work-item walks down
/// ITEMS rows of VEC columns with the three input rows it needs in registers, no tile.
#[test]
fn stencil_register_window_branch_replays() {
    let Some(log) = replay_branch("stencil", Some("register-window"), &["h=256", "w=256"], &["Register-Window"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Register-Window"), "{}", log[0]);
}

/// The fused scaled dot-product attention (one work-item per output row, three passes over
/// the keys): Online-Softmax makes it one pass with a rescaled running output,
/// Unroll-Accumulators splits the dot product of each score, and KV-Tile shares tiles of
/// key and value rows among a work-group's query rows, with the rows in registers.
#[test]
fn attention_workflow_replays() {
    let Some(log) = replay("attention", &["seq=64"], &["Online-Softmax", "Unroll-Accumulators", "KV-Tile"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("KV-Tile"));
}

/// The attention's branch `query-tile`, from KV-Tile: Query-Tile stages a work-group's
/// BLOCK_Y * TQ query rows once in local memory and has each work-item compute a register
/// tile of scores (TQ rows x TILE_J / BLOCK_X keys) and of outputs (TQ rows x HEAD_DIM /
/// BLOCK_X elements) from the tiles with 4-element reads, the probabilities shared through
/// local memory. Replayed at seq = 67, which no tile divides.
#[test]
fn attention_query_tile_branch_replays() {
    let Some(log) = replay_branch("attention", Some("query-tile"), &["seq=67"], &["Online-Softmax", "Unroll-Accumulators", "KV-Tile", "Query-Tile"]) else {
        return;
    };
    assert!(log[0]["summary"].as_str().unwrap().contains("Query-Tile"));
}

/// Query-Tile holds at any sequence length and tile shape: the recorded tip is right against
/// the naive root for a single row, a sequence shorter than every tile, and lengths no query
/// or key tile divides (1, 5, 67, 130), at head dimensions 32 and 64, over work-groups of
/// 4 to 16 by 4 to 16 work-items with 1, 2, 4 or 8 rows each and key tiles of 8 to 32 (the
/// combinations the recorded constraints allow).
#[test]
fn attention_query_tile_holds_any_length() {
    if !opencl_present("attention_query_tile_holds_any_length") {
        return;
    }
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "attention-opencl-agent.bundle", "query-tile");
    let source = std::fs::read_to_string(candidate.join("kernel.cl")).unwrap();
    assert!(source.contains("Qs[QT_ROWS][HEAD_DIM + 4]") && source.contains("vload4"), "{source}");
    for dim in ["32", "64"] {
        for seq in ["1", "5", "67", "130"] {
            let report = validate_against(
                &env,
                &candidate,
                &naive,
                "6",
                &["batch=3", &format!("seq={seq}"), &format!("dim={dim}"), "BLOCK_X=4,8,16", "BLOCK_Y=4,8,16", "TQ=1,2,4,8", "TILE_J=8,16,32"],
            );
            assert_eq!(report["outcome"], "passed", "dim={dim} seq={seq}: {report}");
        }
    }
}

/// A bf16 elementwise map a user brings (GELU, one work-item per element, 2^20 + 3
/// elements): Grid-Stride, then Vector-Body with 16-byte vectors of eight bf16s and a scalar
/// tail (issue 24). Validation runs at 1003 elements, tuning at the context's size.
#[test]
fn gelu_bf16_workflow_replays() {
    let Some(log) = replay("gelu-bf16", &[], &["Grid-Stride", "Vector-Body"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Vector-Body"));
}

/// The GELU's branch `stream-hints`: Stream-Hints after Vector-Body marks the input's loads
/// (head, vector body, tail) and the output's stores as streaming (`__builtin_nontemporal_*`
/// on OpenCL), STREAM tuned; the recorded tip is right against the naive root with every
/// STREAM value, at lengths whose head and tail are not empty.
#[test]
fn gelu_bf16_stream_hints_branch_replays() {
    let Some(log) = replay_branch("gelu-bf16", Some("stream-hints"), &[], &["Grid-Stride", "Vector-Body", "Stream-Hints"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Stream-Hints"));
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "gelu-bf16-opencl-agent.bundle", "stream-hints");
    let source = std::fs::read_to_string(candidate.join("kernel.cl")).unwrap();
    assert!(source.contains("LOAD_STREAM(") && source.contains("STORE_STREAM("), "{source}");
    for stream in ["0", "1", "2"] {
        let report = validate_against(&env, &candidate, &naive, "3", &["N=1003,4099", &format!("STREAM={stream}"), "VEC_BYTES=16"]);
        assert_eq!(report["outcome"], "passed", "STREAM={stream}: {report}");
    }
}

/// The GELU's branch `fast-math`: Fast-Math after Stream-Hints calls tanh through
/// `peak_tanhf`, the precise function at FAST_MATH 0 and one built from `native_exp` at 1;
/// the recorded tip is right against the naive root (bf16 results) with both.
#[test]
fn gelu_bf16_fast_math_branch_replays() {
    let Some(log) = replay_branch("gelu-bf16", Some("fast-math"), &[], &["Grid-Stride", "Vector-Body", "Stream-Hints", "Fast-Math"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Fast-Math"));
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "gelu-bf16-opencl-agent.bundle", "fast-math");
    let source = std::fs::read_to_string(candidate.join("kernel.cl")).unwrap();
    assert!(source.contains("peak_tanhf(0.7978845608f"), "{source}");
    for fast in ["0", "1"] {
        let report = validate_against(&env, &candidate, &naive, "3", &["N=1003,4099", &format!("FAST_MATH={fast}"), "STREAM=0,2"]);
        assert_eq!(report["outcome"], "passed", "FAST_MATH={fast}: {report}");
    }
}

/// A layernorm over rows of 1001 floats: rows start at addresses no vector is aligned to,
/// so Vector-Body's scalar head and tail run on every row (issue 24); then Register-Segment
/// keeps each work-item's first ITEMS body vectors in registers for all three passes.
#[test]
fn layernorm_odd_rows_workflow_replays() {
    let Some(log) = replay("layernorm", &["N=64"], &["Block-Reduce", "Vector-Body", "Register-Segment"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Register-Segment"));
}

/// Register-Segment holds at any row length: the recorded tip is right against the naive
/// root where the registers hold a sliver of a row of 1001 (16 work-items x 1 vector: the
/// rest walked from memory in every pass), most of it, and more than all of it (256 x 16
/// vectors of 4), with 1-, 2- and 4-float vectors, at row counts no work-group size divides.
#[test]
fn layernorm_register_segment_holds_any_row_length() {
    if !opencl_present("layernorm_register_segment_holds_any_row_length") {
        return;
    }
    let env = Env::new();
    let (recorded, candidate, naive) = recorded_and_root(&env, "layernorm-opencl-agent.bundle", "HEAD");
    let tip = env.json(&["show", "HEAD", "-w", s(&recorded), "--json"]);
    assert_eq!(tip["meta"]["transformation"], "Register-Segment", "{tip}");
    for (block, items) in [("16", "1"), ("64", "2"), ("256", "16")] {
        let report =
            validate_against(&env, &candidate, &naive, "3", &["C=1001", "N=3", &format!("BLOCK_X={block}"), &format!("ITEMS={items}"), "VEC_BYTES=4,8,16"]);
        assert_eq!(report["outcome"], "passed", "BLOCK_X={block} ITEMS={items}: {report}");
    }
}

/// The layernorm's branch `rows-per-block`: Rows-Per-Block (written for llm.c's layernorm)
/// carried through this layernorm by its prompt alone, with rows of 1001 and a row count
/// ROWS does not divide.
#[test]
fn layernorm_rows_per_block_branch_replays() {
    let Some(log) = replay_branch("layernorm", Some("rows-per-block"), &["N=64"], &["Block-Reduce", "Vector-Body", "Rows-Per-Block"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Rows-Per-Block"));
}

/// The layernorm's branch `stream-hints`: Stream-Hints after Register-Segment streams the
/// last read of each row element (the registers' one load, the normalising walk's loads of
/// a longer row's rest and of the scalar head and tail; the mean and variance walks keep
/// plain loads) and the output's stores, never weight and bias. The recorded tip is right
/// against the naive root with every STREAM value, rows of 1001 (misaligned: the scalar
/// fallback) and 1024, registers holding part of a row or all of it.
#[test]
fn layernorm_stream_hints_branch_replays() {
    let Some(log) = replay_branch("layernorm", Some("stream-hints"), &["N=64"], &["Block-Reduce", "Vector-Body", "Register-Segment", "Stream-Hints"]) else {
        return;
    };
    assert!(log[0]["summary"].as_str().unwrap().contains("Stream-Hints"));
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "layernorm-opencl-agent.bundle", "stream-hints");
    let source = std::fs::read_to_string(candidate.join("kernel.cl")).unwrap();
    assert!(!source.contains("LOAD_STREAM(weight") && !source.contains("LOAD_STREAM(bias"), "{source}");
    for (stream, block, items) in [("0", "64", "2"), ("1", "16", "1"), ("1", "256", "16"), ("2", "64", "2"), ("2", "16", "1")] {
        let report = validate_against(
            &env,
            &candidate,
            &naive,
            "3",
            &["C=1001,1024", "N=3", &format!("STREAM={stream}"), &format!("BLOCK_X={block}"), &format!("ITEMS={items}"), "VEC_BYTES=4,8,16"],
        );
        assert_eq!(report["outcome"], "passed", "STREAM={stream} BLOCK_X={block} ITEMS={items}: {report}");
    }
}

/// The CUDA twins' workflows (for bench/h200-kernels.sh) take the same chains, written by
/// the agent executor and compile-checked only (`--defer`): the H200 replay validates them.
/// The reduction and the softmax go on with Warp-Reduce (CUDA only: PoCL has no subgroups),
/// and the softmax then with Register-Row, as on OpenCL.
#[test]
fn cuda_twins_carry_the_same_chains_deferred() {
    let env = Env::new();
    for (kind, branch, chain) in [
        ("softmax", "main", &["Block-Reduce", "Vectorize-Access", "Unroll-Accumulators", "Warp-Reduce", "Register-Row"][..]),
        ("reduction", "main", &["Block-Reduce", "Vectorize-Access", "Unroll-Accumulators", "Warp-Reduce"]),
        ("transpose", "main", &["Tile-Staging", "Thread-Coarsen", "Tile-Pad"]),
        ("stencil", "main", &["Tile-Staging", "Thread-Coarsen", "Tile-Pad"]),
        ("stencil", "register-window", &["Register-Window"]),
        ("attention", "main", &["Online-Softmax", "Unroll-Accumulators", "KV-Tile"]),
        ("attention", "query-tile", &["Online-Softmax", "Unroll-Accumulators", "KV-Tile", "Query-Tile"]),
        ("gelu-bf16", "main", &["Grid-Stride", "Vector-Body"]),
        ("layernorm", "main", &["Block-Reduce", "Vector-Body", "Warp-Reduce", "Register-Segment"]),
    ] {
        let wf = env.path(&format!("{kind}-{branch}"));
        let bundle = example(&format!("workflows/{kind}-cuda-deferred.bundle"));
        let clone = std::process::Command::new("git").args(["clone", "-q", "--branch", branch, &bundle, s(&wf)]).output().unwrap();
        assert!(clone.status.success(), "{}", String::from_utf8_lossy(&clone.stderr));
        // The chain from the root to the tip, through first parents (a workflow may hold
        // other branches).
        let log = env.json(&["log", "-w", s(&wf), "--json"]);
        let by_id = |id: &str| log.as_array().unwrap().iter().find(|e| e["id"] == id).unwrap_or_else(|| panic!("{kind}: {id} is not in the log")).clone();
        let mut line = vec![by_id(env.json(&["show", "HEAD", "-w", s(&wf), "--json"])["id"].as_str().unwrap())];
        while let Some(parent) = line.last().unwrap()["parents"].as_array().unwrap().first().map(|p| p.as_str().unwrap().to_string()) {
            line.push(by_id(&parent));
        }
        line.reverse();
        let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
        assert_eq!(&steps[1..], chain, "{kind} {branch}");
        for entry in &line[1..] {
            assert_eq!((entry["verdict"].as_str(), entry["executor"].as_str()), (Some("deferred"), Some("agent")), "{kind}: {entry}");
        }
        let show = env.json(&["show", "HEAD", "-w", s(&wf), "--json"]);
        let source = show["files"]["kernel.cu"].as_str().unwrap();
        // Query-Tile's register tiles replace the loops Unroll-Accumulators split (UNROLL is left unused)
        let unrolled = chain.contains(&"Unroll-Accumulators") && !chain.contains(&"Query-Tile");
        assert!(source.contains("__global__") && source.contains("UNROLL") == unrolled, "{kind}: {source}");
        assert_eq!(source.contains("Qs[QT_ROWS][HEAD_DIM + 4]"), chain.contains(&"Query-Tile"), "{kind}: {source}");
    }
}

/// A permute that keeps its innermost axis (P x Q x R x D into R x P x Q x D, one
/// work-item per element): Inner-Vector gives each work-item ITEMS pieces of VEC elements
/// of a run of D, one vector access where the piece is whole and aligned, element by
/// element otherwise. Validation runs at D = 63, 64 and 65.
#[test]
fn permute_workflow_replays() {
    let Some(log) = replay("permute", &["P=4", "Q=32", "R=6", "D=64"], &["Inner-Vector"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Inner-Vector"));
}

/// Inner-Vector holds at any run length and any piece size: the recorded tip is right
/// against the naive root where runs are shorter than a vector (D = 1, 3), where no run
/// after the first starts aligned (D = 63, 65) and where all do (D = 64), with 1-, 2- and
/// 4-float pieces, one, two and four pieces per work-item, and element counts no
/// work-group divides.
#[test]
fn permute_inner_vector_holds_any_run_length() {
    if !opencl_present("permute_inner_vector_holds_any_run_length") {
        return;
    }
    let env = Env::new();
    let (recorded, candidate, naive) = recorded_and_root(&env, "permute-opencl-agent.bundle", "HEAD");
    let tip = env.json(&["show", "HEAD", "-w", s(&recorded), "--json"]);
    assert_eq!(tip["meta"]["transformation"], "Inner-Vector", "{tip}");
    for d in ["1", "3", "63", "64", "65"] {
        let report =
            validate_against(&env, &candidate, &naive, "9", &["P=3", "Q=5", "R=7", &format!("D={d}"), "BLOCK_X=32,64", "ITEMS=1,2,4", "VEC_BYTES=4,8,16"]);
        assert_eq!(report["outcome"], "passed", "D={d}: {report}");
    }
}

/// A column reduction (llm.c's bias gradient: dbias[c] sums column c of dout down its
/// rows), recorded by the agent: Block-Reduce, Vector-Body and Grid-Accumulate return it
/// unchanged (its segments are strided with adjacent columns on consecutive work-items;
/// a walk of one column per work-group would undo the coalescing), Column-Split splits
/// each column's rows over SPLIT work-items along y, then Unroll-Accumulators. The tip is
/// checked against the naive root at sizes no block divides, one row and one column
/// included, with the fewest and the most work-items per column.
#[test]
fn dbias_column_reduction_workflow_replays() {
    let Some(log) = replay("dbias", &["BT=129", "OC=45"], &["Column-Split", "Unroll-Accumulators"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Unroll-Accumulators"));
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "dbias-opencl-agent.bundle", "HEAD");
    for (bt, oc, block, split, unroll) in
        [("1", "130", "32", "32", "8"), ("3", "1", "64", "2", "4"), ("1000", "33", "256", "1", "1"), ("67", "45", "32", "16", "2")]
    {
        let sets = [format!("BT={bt}"), format!("OC={oc}"), format!("BLOCK_X={block}"), format!("SPLIT={split}"), format!("UNROLL={unroll}")];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let report = validate_against(&env, &candidate, &naive, "1", &sets);
        assert_eq!(report["outcome"], "passed", "{sets:?}: {report}");
    }
}

/// llm.c's AdamW update (adamw_kernel2): params, m and v updated in place, seven float
/// hyperparameters named in `[scalars]`, brought in with `peak new`. Grid-Stride,
/// Vector-Body (four arrays at the same indices, the head taken from one and the scalar
/// path where another is aligned differently) and Stream-Hints (only the gradient's loads
/// streamed: the other arrays are written back). Replayed at 1001 parameters; the tip is
/// checked against the naive root at one parameter, a few, and a million and three.
#[test]
fn adamw_in_place_workflow_replays() {
    let Some(log) = replay("adamw", &["num_parameters=1001"], &["Grid-Stride", "Vector-Body", "Stream-Hints"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Stream-Hints"));
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "adamw-opencl-agent.bundle", "HEAD");
    for (n, block, items, waves, vec, stream) in
        [("1", "32", "4", "1", "16", "2"), ("7", "32", "1", "1", "16", "0"), ("4099", "1024", "2", "128", "4", "2"), ("1000003", "64", "4", "2", "8", "1")]
    {
        let sets = [
            format!("num_parameters={n}"),
            format!("BLOCK_X={block}"),
            format!("ITEMS={items}"),
            format!("WAVES={waves}"),
            format!("VEC_BYTES={vec}"),
            format!("STREAM={stream}"),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let report = validate_against(&env, &candidate, &naive, "1", &sets);
        assert_eq!(report["outcome"], "passed", "{sets:?}: {report}");
    }
}

/// llm.c's encoder forward (encoder_forward_kernel2, ported to OpenCL C): a gather of token
/// embedding rows by an int array plus the position's row, one work-item per element, brought
/// in with `peak new`. Inner-Vector (rows of C cut into pieces, the token index read once per
/// piece) and Stream-Hints (only the output's stores streamed: the tables are read again by
/// repeated tokens and positions). Replayed small; the tip is checked against the naive root
/// where a row is one element, where rows leave pieces unaligned, and at GPT-2's 768.
#[test]
fn encoder_gather_workflow_replays() {
    let Some(log) = replay("encoder", &["B=2", "T=5", "C=7", "V=11"], &["Inner-Vector", "Stream-Hints"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Stream-Hints"));
    tip_passes_at(
        "encoder-opencl-agent.bundle",
        "4",
        &[&["B=1", "T=3", "C=1", "V=5"], &["B=3", "T=5", "C=7", "V=11"], &["B=2", "T=4", "C=768", "V=50"]],
        &["VEC_BYTES=4,8,16", "ITEMS=1,4", "STREAM=0,2", "BLOCK_X=32"],
    );
}

/// llm.c's encoder backward: a scatter-add of dout's rows into the token and position
/// gradients, atomic (a compare-and-swap helper: OpenCL C has no float atomic add), the
/// gradients in place (`peak new` follows the pointers derived from them to the atomic
/// helper). Inner-Vector (dout's pieces loaded as vectors, every element's atomic updates kept)
/// and Stream-Hints (dout's loads streamed). The tip is checked against the root where few
/// tokens repeat often and where rows leave pieces unaligned.
#[test]
fn encoder_backward_scatter_add_workflow_replays() {
    let Some(log) = replay("encoder-backward", &["B=2", "T=5", "C=7", "V=3"], &["Inner-Vector", "Stream-Hints"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Stream-Hints"));
    tip_passes_at(
        "encoder-backward-opencl-agent.bundle",
        "4",
        &[&["B=1", "T=3", "C=1", "V=2"], &["B=3", "T=5", "C=7", "V=2"], &["B=2", "T=4", "C=768", "V=3"]],
        &["VEC_BYTES=4,8,16", "ITEMS=1,4", "STREAM=0,1", "BLOCK_X=32"],
    );
}

/// llm.c's softmax + cross-entropy backward (crossentropy_softmax_backward_kernel1): one
/// gradient element per work-item, updated in place from the probabilities, the row's loss
/// gradient and an indicator of the row's target. Named after the loss, read off its code as
/// elementwise. Inner-Vector (rows of V, unaligned when V is odd) and Stream-Hints (the
/// probabilities' loads and the gradient's stores streamed). The tip is checked against the
/// root at rows of 1, 37 and GPT-2's 50,257.
#[test]
fn crossentropy_backward_workflow_replays() {
    let Some(log) = replay("crossentropy-backward", &["B=2", "T=3", "V=37"], &["Inner-Vector", "Stream-Hints"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Stream-Hints"));
    tip_passes_at(
        "crossentropy-backward-opencl-agent.bundle",
        "4",
        &[&["B=1", "T=3", "V=1"], &["B=2", "T=3", "V=37"], &["B=1", "T=2", "V=50257"]],
        &["VEC_BYTES=4,8,16", "ITEMS=1,4", "STREAM=0,2", "BLOCK_X=64"],
    );
}

/// llm.c's GELU backward (gelu_backward1): one element per work-item, tanh and cosh. Vector-Body
/// declines (no loop over a run), Inner-Vector cuts the one run into pieces, Fast-Math routes
/// tanh through its helper (cosh is not in its list and stays). The tip is checked against
/// the root at 1, 7 and 1001 elements with both FAST_MATH values.
#[test]
fn gelu_backward_workflow_replays() {
    let Some(log) = replay("gelu-backward", &["N=1001"], &["Inner-Vector", "Fast-Math"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Fast-Math"));
    tip_passes_at(
        "gelu-backward-opencl-agent.bundle",
        "4",
        &[&["N=1"], &["N=7"], &["N=1001"]],
        &["VEC_BYTES=4,8,16", "ITEMS=1,4", "FAST_MATH=0,1", "BLOCK_X=32"],
    );
}

/// llm.c's fused classifier (the loss half: logsumexp of a row of logits minus the
/// target's logit, gathered through an int array), rows of GPT-2's 50,257 at validation:
/// Block-Reduce, Online-Softmax (one walk for the maximum and the sum), Vector-Body (rows
/// start unaligned) and Rows-Per-Block. Replayed at rows of 1001 to keep it short; the tip
/// is checked against the naive root at rows of 1, 5 and 50,257 with ROWS no row count
/// divides.
#[test]
fn fused_classifier_workflow_replays() {
    let Some(log) = replay("fused-classifier", &["BT=7", "V=1001"], &["Block-Reduce", "Online-Softmax", "Vector-Body", "Rows-Per-Block"]) else { return };
    assert!(log[0]["summary"].as_str().unwrap().contains("Rows-Per-Block"));
    let env = Env::new();
    let (_, candidate, naive) = recorded_and_root(&env, "fused-classifier-opencl-agent.bundle", "HEAD");
    for (bt, v, block, rows) in [("3", "1", "16", "8"), ("5", "5", "128", "8"), ("3", "50257", "16", "2")] {
        let sets = [format!("BT={bt}"), format!("V={v}"), format!("BLOCK_X={block}"), format!("ROWS={rows}"), "VEC_BYTES=4,8,16".to_string()];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let report = validate_against(&env, &candidate, &naive, "3", &sets);
        assert_eq!(report["outcome"], "passed", "{sets:?}: {report}");
    }
}
