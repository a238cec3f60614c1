//! The fp32 GEMM line carried to HLSL (issue 28): examples/matmul-hlsl-f32, walked from the
//! naive kernel through Refactor, TB-Tiling, Thread-Tiling, Thread-Cache, Transpose,
//! Thread-Chunk, Vectorize, Split-K, Pipelining, Register-Staging, Offset and Block-Swizzle
//! by the agent executor on lavapipe (validated and tuned at n = 97, which divides no tile
//! and no vector), recorded in examples/workflows/matmul-hlsl-f32-line.bundle. Its chain
//! replays on lavapipe here: every step validates against the naive root at n = 61, is
//! tuned and timed, and ends on the recorded code.

mod support;

use std::path::{Path, PathBuf};

use support::{Env, GEMM_LINE, example, first_parent_chain, s, unbundle, vulkan_present};

/// n = 61 divides no tile and no vector; every tuning parameter pinned from the step that
/// introduces it on, K_SPLITS = 2 so the reduction kernel runs, so the steps take seconds.
const PINS: [&str; 12] =
    ["BLOCK_X=8", "BLOCK_Y=8", "TRD_X=4", "TRD_Y=4", "CHUNK_X=2", "CHUNK_Y=2", "VEC=2", "TILE_K=8", "K_SPLITS=2", "NUM_STAGES=2", "OFFSET=1", "GROUP_M=4"];

/// The HLSL line's bundle unpacked as it was recorded, and replayed pinned at n = 61 (`branch`
/// of it, else its HEAD; `k_splits` the K_SPLITS pin): the two workflows' folders.
fn recorded_and_replayed(env: &Env, branch: Option<&str>, k_splits: &'static str) -> (PathBuf, PathBuf) {
    let bundle = example("workflows/matmul-hlsl-f32-line.bundle");
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);
    let mut args = vec!["replay", bundle.as_str(), "--into", s(&replayed), "--samples", "2", "--budget", "2", "--set", "n=61"];
    args.extend(branch.iter().flat_map(|b| ["--branch", *b]));
    args.extend(PINS.iter().map(|p| if p.starts_with("K_SPLITS=") { k_splits } else { *p }).flat_map(|p| ["--set", p]));
    env.ok(&args);
    (recorded, replayed)
}

/// The kernel file of checkpoint `rev` of the workflow at `wf`.
fn kernel_hlsl(env: &Env, wf: &Path, rev: &str) -> String {
    env.json(&["show", rev, "-w", s(wf), "--json"])["files"]["kernel.hlsl"].as_str().expect("a checkpoint of the HLSL line has kernel.hlsl").to_string()
}

#[test]
fn hlsl_gemm_line_replays_on_lavapipe() {
    if !vulkan_present("hlsl_gemm_line_replays_on_lavapipe") {
        return;
    }
    let env = Env::new();
    let (recorded, replayed) = recorded_and_replayed(&env, None, "K_SPLITS=2");

    let line = first_parent_chain(&env, &replayed);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    let expected: Vec<&str> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).collect();
    assert_eq!(steps, expected, "the replay takes every recorded step");
    for entry in &line[1..] {
        assert_eq!(entry["verdict"], "passed", "{entry}");
        assert_eq!(entry["executor"], "replay");
        assert_eq!(entry["model"], "agent", "the replies were written through the agent executor");
        assert!(entry["best_time_ms"].as_f64().unwrap() > 0.0, "every step is timed: {entry}");
    }
    let tip = kernel_hlsl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_hlsl(&env, &recorded, "HEAD"), "the replayed tip differs from the recording");
    for pair in line.windows(2) {
        assert_ne!(
            kernel_hlsl(&env, &replayed, pair[0]["id"].as_str().unwrap()),
            kernel_hlsl(&env, &replayed, pair[1]["id"].as_str().unwrap()),
            "a step left the kernel unchanged"
        );
    }
    // The GEMM line's vocabulary in HLSL: sizes, accessors and epilogue in macros, the A
    // tile k-major and both tiles staged and padded, the split-k reduction as a second entry
    // point of a 1-D block (as the launch runs it), the grouped block order, and no read
    // under HLSL's both-sided `?:` at an unclamped coordinate.
    for expected in [
        "#define GEMM_M (n)",
        "#define A_AT(r, c) A[(r) * (n) + (c)]",
        "#define EPILOGUE(acc, r, c) (acc)",
        "#define AS(r, k) AsT[stage][k][r]",
        "SHARED float AsT[NUM_STAGES][TILE_K][TILE_M + OFFSET];",
        "STAGE_LOAD_T(a_stage, A_SHARE, A_AT, BY * TILE_M, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K);",
        "[numthreads(BLOCK_X * BLOCK_Y, 1, 1)]\nvoid main_splitk_reduce(",
        "C_AT(r, c) = EPILOGUE(sum, r, c);",
        "#define BLOCK_LIN ((int)gid.y * GRID_N + (int)gid.x)",
        "launch(\"main_splitk_reduce\", [ceil_div(n * n, threads)], [threads], 0, A, B, C, n, partial);",
    ] {
        assert!(tip.contains(expected), "missing {expected:?} in:\n{tip}");
    }
    assert!(!tip.contains("? AT(peak_gr, peak_gc"), "an accessor read under ?: at unclamped coordinates:\n{tip}");

    // The recording was validated at n = 97 and every step passed there.
    let recorded_line = first_parent_chain(&env, &recorded);
    assert_eq!(recorded_line.len(), line.len());
    for entry in &recorded_line[1..] {
        assert_eq!((entry["verdict"].as_str(), entry["executor"].as_str()), (Some("passed"), Some("agent")), "{entry}");
        let show = env.json(&["show", entry["id"].as_str().unwrap(), "-w", s(&recorded), "--json"]);
        for sample in show["validation"]["samples"].as_array().unwrap() {
            assert_eq!(sample["params"]["inputs"]["n"].as_i64(), Some(97), "{sample}");
            assert!(matches!(sample["verdict"]["category"].as_str(), Some("passed" | "invalid-config")), "{sample}");
        }
    }
}

/// Fragment-Prefetch carried to HLSL by the agent on lavapipe (branch fragment-prefetch, from
/// the line's Block-Swizzle): written inline, without a helper (HLSL has no pointers to
/// groupshared rows), with one load site in the slice loop that takes slice kk + 1 or, after
/// the step's stores and barrier, the next step's slice 0. Replayed pinned at n = 61, it
/// validates and ends on the recorded code.
#[test]
fn hlsl_fragment_prefetch_branch_replays_on_lavapipe() {
    if !vulkan_present("hlsl_fragment_prefetch_branch_replays_on_lavapipe") {
        return;
    }
    let env = Env::new();
    let (recorded, replayed) = recorded_and_replayed(&env, Some("fragment-prefetch"), "K_SPLITS=2");
    let line = first_parent_chain(&env, &replayed);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    let expected: Vec<&str> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).chain(["Fragment-Prefetch"]).collect();
    assert_eq!(steps, expected);
    assert_eq!(line.last().unwrap()["verdict"], "passed");
    let tip = kernel_hlsl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_hlsl(&env, &recorded, "fragment-prefetch"), "the replayed tip differs from the recording");
    for expected in ["float a_frag[2][TRD_Y];", "load_stage = (t + 1) % NUM_STAGES;", "acc[i][j] += a_frag[kk % 2][i] * b_frag[kk % 2][j];"] {
        assert!(tip.contains(expected), "missing {expected:?} in:\n{tip}");
    }
}

/// The branch epilogue-vector: Epilogue-Vector carried to HLSL by the agent after the line's
/// Block-Swizzle. HLSL has no vector store into C's structured buffer and its `?:` reads both
/// sides, so the per-column operand (none here: EPILOGUE_COL is 0) is read once per column
/// under an `if`, and a block wholly inside C stores element by element with no test.
/// Replayed pinned at n = 61 without K splits (the step changes only the stores that apply
/// EPILOGUE): the first 32 x 32 tile is interior, the others reach an edge, and both validate.
#[test]
fn hlsl_epilogue_vector_branch_replays_on_lavapipe() {
    if !vulkan_present("hlsl_epilogue_vector_branch_replays_on_lavapipe") {
        return;
    }
    let env = Env::new();
    let (recorded, replayed) = recorded_and_replayed(&env, Some("epilogue-vector"), "K_SPLITS=1");
    let line = first_parent_chain(&env, &replayed);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    let expected: Vec<&str> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).chain(["Epilogue-Vector"]).collect();
    assert_eq!(steps, expected);
    assert_eq!(line.last().unwrap()["verdict"], "passed");
    let tip = kernel_hlsl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_hlsl(&env, &recorded, "epilogue-vector"), "the replayed tip differs from the recording");
    for expected in [
        "#define EPILOGUE_COL(c) (0.0f)",
        "#define EPILOGUE_WITH(acc, col, r, c) (acc)",
        "if (C_COL(j) < GEMM_N) colv[j] = EPILOGUE_COL(C_COL(j));",
        "if (c_inside) {",
        "C_AT(C_ROW(i), C_COL(j)) = EPILOGUE_WITH(acc[i][j], colv[j], C_ROW(i), C_COL(j));",
    ] {
        assert!(tip.contains(expected), "missing {expected:?} in:\n{tip}");
    }
    assert!(!tip.contains("? EPILOGUE_COL"), "a per-column read under HLSL's both-sided ?:");
}
