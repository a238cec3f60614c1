//! The GEMM line (Refactor, TB-Tiling, Thread-Tiling, Thread-Cache, Transpose,
//! Thread-Chunk, Vectorize, Split-K, Pipelining, Register-Staging, Offset, Block-Swizzle)
//! on a GEMM other than the paper's
//! (issue 25): `out = inp . weight^T + bias`, weight stored output-channel-major, M, N
//! and K independent and dividing no tile (examples/gemm-nt-bias-opencl, 1000 x 777 x
//! 513, validated at 61 x 47 x 33). Its agent-written workflow replays on OpenCL (PoCL
//! in CI): every step validates against the naive root, is tuned and timed, and ends on
//! the recorded code, which reads the operands through the layout-hiding accessors and
//! stores every output through EPILOGUE (the bias). The CUDA twin's workflow carries the
//! same chain, compile-checked (`--defer`).
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::{Env, GEMM_LINE, example, first_parent_chain, opencl_present, s, unbundle};

/// What the GEMM line's vocabulary promises, in the code of a tip: the sizes and the
/// layout in macros, tiles filled through the accessors (A kept k-major in shared memory,
/// both operands read along k, their contiguous direction, with vectors only where a whole
/// one is inside and, on CUDA, aligned), every accumulator stored through the epilogue
/// under the M x N guard (or summed by the split-k reduction, which applies it once), and
/// the grouped block order over GEMM_M and GEMM_N.
fn assert_gemm_vocabulary(source: &str) {
    for expected in [
        "#define GEMM_M (M)",
        "#define GEMM_K (K)",
        "#define B_AT(r, c) weight[(c) * (K) + (r)]",
        "#define EPILOGUE(acc, r, c) ((acc) + bias[(c)])",
        "#define PEAK_TILE_LOAD(",
        "#define AS(r, k) AsT[stage][k][r]",
        "#define PEAK_TILE_LOAD_T(",
        // The block's place in C is computed once, outside the k loop (BX and BY are
        // divisions by run-time sizes after Block-Swizzle), and every staged load takes it.
        "const int tile_row0 = BY * TILE_M, tile_col0 = BX * TILE_N;",
        "STAGE_LOAD_T(a_stage, A_SHARE, A_AT, tile_row0, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K);",
        "STAGE_LOAD_COLMAJOR(b_stage, B_SHARE, B_AT, next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N);",
        // A tile wholly inside the matrix is loaded with no per-vector test: one test per
        // tile, uniform across the block; the entry's own check vanishes where NTHREADS
        // divides the tile.
        "(row0) + (ROWS) <= (rows) && (col0) + (COLS) <= (cols)",
        "if ((SHARE) * NTHREADS == (ROWS) * (COLS) / VEC || peak_v < (ROWS) * (COLS) / VEC) {",
        "if (peak_gr + VEC <= (rows) && peak_gc < (cols)",
        "#if K_SPLITS == 1\n                if (C_ROW(i) < GEMM_M && C_COL(j) < GEMM_N) C_AT(C_ROW(i), C_COL(j)) = EPILOGUE(acc[i][j], C_ROW(i), C_COL(j));",
        "C_AT(r, c) = EPILOGUE(sum, r, c);",
        "#define K_END (min((GEMM_K), K_BEGIN + K_CHUNK))",
        "#define GRID_M (((GEMM_M) + TILE_M - 1) / TILE_M)",
        "ceil_div(N, BLOCK_X * TRD_X), ceil_div(M, BLOCK_Y * TRD_Y), K_SPLITS]",
    ] {
        assert!(source.contains(expected), "missing {expected:?} in:\n{source}");
    }
    let device = source.split("@peak device").nth(1).unwrap();
    assert!(!device.contains("bias["), "the bias lives in EPILOGUE only:\n{device}");
    // From the k loop to the epilogue's store (after Fragment-Prefetch the k-step's barrier
    // sits inside the slice loop).
    let k_loop = device.split("for (int t = 0; t < KT; ++t)").nth(1).unwrap().split("#if K_SPLITS == 1").next().unwrap();
    assert!(!k_loop.contains("BY") && !k_loop.contains("BX"), "the k loop reads the block's place, never BX or BY:\n{k_loop}");
}

/// `peak replay` of `bundle` into `replayed` with two validation samples and two tuning
/// evaluations a step, at `sizes` with the tuning parameters `pins` (`NAME=VALUE` each;
/// PoCL compiles each register-tiled variant for seconds, so every parameter is pinned from
/// the step that introduces it on).
fn pinned_replay<'a>(bundle: &'a str, replayed: &'a Path, sizes: &[&'a str], pins: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["replay", bundle, "--into", s(replayed), "--samples", "2", "--budget", "2"];
    args.extend(sizes.iter().chain(pins).flat_map(|set| ["--set", *set]));
    args
}

/// Where the OpenCL GEMM's lines replay in CI: smaller than the recording's sizes, still
/// dividing no tile along M, N or K; every tuning parameter pinned, so the twelve steps take
/// seconds, not half an hour.
const NT_BIAS_SIZES: [&str; 3] = ["M=250", "N=199", "K=129"];
const NT_BIAS_PINS: [&str; 12] =
    ["BLOCK_X=4", "BLOCK_Y=8", "TRD_X=4", "TRD_Y=4", "CHUNK_X=2", "CHUNK_Y=2", "VEC=2", "TILE_K=8", "K_SPLITS=2", "NUM_STAGES=2", "OFFSET=1", "GROUP_M=4"];

/// `peak replay` of the branch `branch` of `bundle` pinned (`sizes`, `pins`): every step
/// passes and was written by the agent, and the replay ends on the recorded code. The
/// line's step names and the tip's kernel file.
fn replay_branch(bundle: &str, branch: &str, sizes: &[&str], pins: &[&str]) -> (Vec<String>, String) {
    let env = Env::new();
    let bundle = example(bundle);
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);
    let mut args = pinned_replay(&bundle, &replayed, sizes, pins);
    args.extend(["--branch", branch]);
    env.ok(&args);
    let line = first_parent_chain(&env, &replayed);
    for entry in &line[1..] {
        assert_eq!(entry["verdict"], "passed", "{entry}");
        assert_eq!(entry["model"], "agent", "the replies were written through the agent executor");
    }
    let tip = kernel_cl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_cl(&env, &recorded, branch), "the replayed tip differs from the recording");
    (line.iter().map(|e| e["transformation"].as_str().unwrap().to_string()).collect(), tip)
}

/// The OpenCL kernel file of checkpoint `rev` of the workflow at `wf`.
fn kernel_cl(env: &Env, wf: &Path, rev: &str) -> String {
    env.json(&["show", rev, "-w", s(wf), "--json"])["files"]["kernel.cl"].as_str().unwrap().to_string()
}

#[test]
fn gemm_nt_bias_workflow_replays_on_opencl() {
    if !opencl_present("gemm_nt_bias_workflow_replays_on_opencl") {
        return;
    }
    let env = Env::new();
    let bundle = example("workflows/gemm-nt-bias-opencl-agent.bundle");
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);
    let args = pinned_replay(&bundle, &replayed, &NT_BIAS_SIZES, &NT_BIAS_PINS);
    // A name no step has is refused before anything runs.
    let mut misspelt = args.clone();
    misspelt.extend(["--set", "TRD_Z=2"]);
    let refused = env.peak(&misspelt);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("no step of the replay has a parameter 'TRD_Z'"), "{err}");
    env.ok(&args);

    let line = first_parent_chain(&env, &replayed);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    let expected: Vec<&str> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).collect();
    assert_eq!(steps, expected, "the replay takes every recorded step");
    let recorded_line = first_parent_chain(&env, &recorded);
    assert_eq!(recorded_line.len(), line.len());
    for entry in &line[1..] {
        assert_eq!(entry["verdict"], "passed", "{entry}");
        assert_eq!(entry["executor"], "replay");
        assert_eq!(entry["model"], "agent", "the replies were written through the agent executor");
        assert!(entry["best_time_ms"].as_f64().unwrap() > 0.0, "every step is timed: {entry}");
        assert!(entry["speedup_over_root"].as_f64().unwrap() > 0.0);
    }
    // The replay reproduces the recorded code exactly, and every step changed it.
    let tip = kernel_cl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_cl(&env, &recorded, "HEAD"), "the replayed tip differs from the recording");
    for pair in line.windows(2) {
        assert_ne!(
            kernel_cl(&env, &replayed, pair[0]["id"].as_str().unwrap()),
            kernel_cl(&env, &replayed, pair[1]["id"].as_str().unwrap()),
            "a step left the kernel unchanged"
        );
    }
    assert_gemm_vocabulary(&tip);

    // The recording was validated where no size divides a tile: the manifest's
    // [validation.inputs], 61 x 47 x 33.
    for entry in &recorded_line[1..] {
        assert_eq!((entry["verdict"].as_str(), entry["executor"].as_str()), (Some("passed"), Some("agent")), "{entry}");
        let show = env.json(&["show", entry["id"].as_str().unwrap(), "-w", s(&recorded), "--json"]);
        let samples = show["validation"]["samples"].as_array().unwrap();
        assert!(samples.iter().any(|s| s["verdict"]["category"] == "passed"), "{show}");
        for sample in samples {
            let inputs = &sample["params"]["inputs"];
            assert_eq!((inputs["M"].as_i64(), inputs["N"].as_i64(), inputs["K"].as_i64()), (Some(61), Some(47), Some(33)), "{sample}");
            // A configuration the launch script prunes (more k splits than k tiles) is no failure.
            let category = sample["verdict"]["category"].as_str();
            assert!(matches!(category, Some("passed" | "invalid-config")), "{sample}");
        }
    }
}

/// The OpenCL GEMM's branch joint-staging: Register-Staging, Offset and Block-Swizzle walked
/// again by the agent from Pipelining with Register-Staging's text of one test per k-step,
/// each validated and tuned on PoCL. Replayed pinned at sizes that divide no tile, it
/// validates at every step and ends on the recorded code: both tiles under one condition,
/// their unchecked loads together.
#[test]
fn gemm_nt_bias_opencl_joint_staging_branch_replays() {
    if !opencl_present("gemm_nt_bias_opencl_joint_staging_branch_replays") {
        return;
    }
    let (steps, tip) = replay_branch("workflows/gemm-nt-bias-opencl-agent.bundle", "joint-staging", &NT_BIAS_SIZES, &NT_BIAS_PINS);
    let expected: Vec<String> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).map(String::from).collect();
    assert_eq!(steps, expected, "the branch walks the same steps from Pipelining on");
    assert_gemm_vocabulary(&tip);
    let joint = "if (STAGE_INSIDE_T(tile_row0, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K) &&\n                STAGE_INSIDE_COLMAJOR(next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N)) {\n                STAGE_LOAD_INSIDE_T(a_stage, A_SHARE, A_AT, tile_row0, next_k0, TILE_M, TILE_K);\n                STAGE_LOAD_INSIDE_COLMAJOR(b_stage, B_SHARE, B_AT, next_k0, tile_col0, TILE_K, TILE_N);\n            } else {";
    assert!(tip.contains(joint), "the k-step's two tiles are not loaded under one test:\n{tip}");
}

/// The OpenCL GEMM's branch fragment-prefetch: Fragment-Prefetch walked by the agent on
/// joint-staging's tip (validated and tuned on PoCL), written with a helper function where
/// the CUDA twin used a lambda. Replayed pinned at sizes that divide no tile, it validates
/// and ends on the recorded code: two fragment sets, the last slice multiplied after the
/// step's barrier.
#[test]
fn gemm_nt_bias_opencl_fragment_prefetch_branch_replays() {
    if !opencl_present("gemm_nt_bias_opencl_fragment_prefetch_branch_replays") {
        return;
    }
    let (steps, tip) = replay_branch("workflows/gemm-nt-bias-opencl-agent.bundle", "fragment-prefetch", &NT_BIAS_SIZES, &NT_BIAS_PINS);
    let expected: Vec<String> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).chain(["Fragment-Prefetch"]).map(String::from).collect();
    assert_eq!(steps, expected, "Fragment-Prefetch follows the joint-staging line");
    assert_gemm_vocabulary(&tip);
    for expected in [
        "float a_frag[2][TRD_Y];",
        "load_fragments(AsT[stage], Bs[stage], kk + 1, a_frag[(kk + 1) % 2], b_frag[(kk + 1) % 2]);",
        "if (t + 1 < KT) load_fragments(AsT[(t + 1) % NUM_STAGES], Bs[(t + 1) % NUM_STAGES], 0, a_frag[0], b_frag[0]);",
        "acc[i][j] += a_frag[kk % 2][i] * b_frag[kk % 2][j];",
    ] {
        assert!(tip.contains(expected), "missing {expected:?}:\n{tip}");
    }
}

/// Where the batched GEMM's lines replay in CI: smaller than the recording's sizes, dividing
/// no tile; two k ranges per problem; a tile of A two rows high read in vectors of 4
/// (Vectorize's fill must fall back to scalars).
const BMM_SIZES: [&str; 4] = ["BATCH=3", "M=50", "N=41", "K=35"];
const BMM_PINS: [&str; 12] =
    ["BLOCK_X=16", "BLOCK_Y=1", "TRD_X=2", "TRD_Y=2", "TILE_K=8", "K_SPLITS=2", "CHUNK_X=2", "CHUNK_Y=2", "VEC=4", "GROUP_M=2", "OFFSET=1", "NUM_STAGES=2"];

/// The batched GEMM's branch joint-staging: Register-Staging walked again by the agent from
/// Pipelining with its text of one test per k-step (validated and tuned on PoCL), on a kernel
/// whose A tile falls back to scalar entries. Replayed pinned, it validates and ends on the
/// recorded code: both tiles under one condition, their unchecked loads together.
#[test]
fn batched_in_place_tn_gemm_joint_staging_branch_replays() {
    if !opencl_present("batched_in_place_tn_gemm_joint_staging_branch_replays") {
        return;
    }
    let (steps, tip) = replay_branch("workflows/bmm-tn-opencl-agent.bundle", "joint-staging", &BMM_SIZES, &BMM_PINS);
    assert_eq!(steps[steps.len() - 2..], ["Pipelining", "Register-Staging"]);
    let joint = "if (STAGE_INSIDE_T_COLMAJOR(tile_row0, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K) &&\n                STAGE_INSIDE(next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N)) {\n                STAGE_LOAD_INSIDE_T_COLMAJOR(a_stage, A_SHARE, A_AT, tile_row0, next_k0, TILE_M, TILE_K);\n                STAGE_LOAD_INSIDE(b_stage, B_SHARE, B_AT, next_k0, tile_col0, TILE_K, TILE_N);\n            } else {";
    assert!(tip.contains(joint), "the k-step's two tiles are not loaded under one test:\n{tip}");
}

/// Interior-Loop carried to the batched in-place TN GEMM, a kernel it was not written for
/// (the batch in the grid's third dimension, A K-major): walked by the agent on the branch
/// joint-staging's tip, validated and tuned on PoCL. Replayed pinned (no tile divides the
/// sizes, so both copies of the k loop run), it validates and ends on the recorded code.
#[test]
fn batched_in_place_tn_gemm_interior_loop_branch_replays() {
    if !opencl_present("batched_in_place_tn_gemm_interior_loop_branch_replays") {
        return;
    }
    let (steps, _) = opencl_interior_loop_branch_replays("workflows/bmm-tn-opencl-agent.bundle", &BMM_SIZES, &BMM_PINS);
    assert_eq!(steps[steps.len() - 3..], ["Pipelining", "Register-Staging", "Interior-Loop"]);
}

/// A kernel the line was not written for: a strided batch of GEMMs with A transposed and
/// C updated in place (`C = 0.75 A B + 0.5 C`: c is `output` and `inout`), walked by the
/// agent on PoCL through the whole fp32 line (Split-K early, Block-Swizzle and Offset before
/// Pipelining and Register-Staging).
/// The batch takes the third grid dimension, which Split-K shares with its k ranges.
#[test]
fn batched_in_place_tn_gemm_replays_on_opencl() {
    if !opencl_present("batched_in_place_tn_gemm_replays_on_opencl") {
        return;
    }
    let env = Env::new();
    let bundle = example("workflows/bmm-tn-opencl-agent.bundle");
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);
    env.ok(&pinned_replay(&bundle, &replayed, &BMM_SIZES, &BMM_PINS));

    let line = first_parent_chain(&env, &replayed);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    let walked = [
        "Refactor",
        "TB-Tiling",
        "Thread-Tiling",
        "Split-K",
        "Thread-Cache",
        "Transpose",
        "Thread-Chunk",
        "Vectorize",
        "Block-Swizzle",
        "Offset",
        "Pipelining",
        "Register-Staging",
    ];
    assert_eq!(steps, std::iter::once("init").chain(walked).collect::<Vec<_>>());
    for entry in &line[1..] {
        assert_eq!(entry["verdict"], "passed", "{entry}");
        assert_eq!(entry["model"], "agent", "the replies were written through the agent executor");
    }
    let tip = kernel_cl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_cl(&env, &recorded, "HEAD"), "the replayed tip differs from the recording");
    // The problem index has a name of its own, and after Split-K it shares the third grid
    // dimension with the k ranges: each problem has its own partial sums.
    assert!(tip.contains("#define PROBLEM ((int)get_group_id(2) / K_SPLITS)"), "{tip}");
    assert!(tip.contains("#define SPLIT ((int)get_group_id(2) % K_SPLITS)"), "{tip}");
    assert!(tip.contains("(GEMM_BATCH) + (PROBLEM))"), "PARTIAL_AT addresses the problem's sums:\n{tip}");
    assert!(tip.contains("BATCH * K_SPLITS]") && tip.contains("K_SPLITS * BATCH * M * N"), "{tip}");
    // beta reads the old C: EPILOGUE reads it through C_AT, once, in the reduction.
    assert!(tip.contains("(beta) * C_AT("), "{tip}");
    // The transposed A is filled along its rows, whose count no constraint ties to VEC: the
    // fills fall back to scalars, and so does the register staging of that tile.
    assert!(tip.contains("if ((ROWS) % VEC != 0)"), "{tip}");
    assert!(tip.contains("#if VEC > 1 && (TILE_M % VEC) == 0"), "{tip}");
}

/// Where the TT GEMM's line replays in CI: smaller than the recording's sizes, dividing no
/// tile; a tile of A eight rows high filled in vectors of 4 along m (A is stored K-major),
/// B's tile in vectors of 4 along k, B's chunk of 4 columns read from shared memory as one
/// vector; k in two splits of 24 and 11 (five k-steps of 8), two stages, rows padded by one
/// vector, bands of two tile-rows (seven tile-rows: the last band is one row high).
const TT_GELU_SIZES: [&str; 3] = ["M=50", "N=41", "K=35"];
const TT_GELU_PINS: [&str; 12] =
    ["BLOCK_X=4", "BLOCK_Y=4", "TRD_X=4", "TRD_Y=2", "TILE_K=8", "CHUNK_X=4", "CHUNK_Y=2", "VEC=4", "K_SPLITS=2", "NUM_STAGES=2", "OFFSET=1", "GROUP_M=2"];

/// A GEMM the line was not walked on before: both operands transposed (TT), every matrix
/// padded (lda = M + 3, ldb = K + 5, ldc = N + 2), alpha = 1.5, a bias, GELU (tanh form)
/// and a residual, `out = gelu_tanh(1.5 A . B + bias) + res`, walked by the agent on PoCL
/// through the whole line, Refactor to Block-Swizzle (see
/// examples/workflows/notes/gemm-tt-gelu-opencl.md). The padding after each row of out is
/// never written, by the root or by any step: the validator matches it unwritten.
#[test]
fn padded_tt_gemm_with_gelu_replays_on_opencl() {
    if !opencl_present("padded_tt_gemm_with_gelu_replays_on_opencl") {
        return;
    }
    let env = Env::new();
    let bundle = example("workflows/gemm-tt-gelu-opencl-agent.bundle");
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);
    env.ok(&pinned_replay(&bundle, &replayed, &TT_GELU_SIZES, &TT_GELU_PINS));

    let line = first_parent_chain(&env, &replayed);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    assert_eq!(steps, std::iter::once("init").chain(GEMM_LINE.iter().copied()).collect::<Vec<_>>());
    for entry in &line[1..] {
        assert_eq!(entry["verdict"], "passed", "{entry}");
        assert_eq!(entry["model"], "agent", "the replies were written through the agent executor");
    }
    let tip = kernel_cl(&env, &replayed, "HEAD");
    assert_eq!(tip, kernel_cl(&env, &recorded, "HEAD"), "the replayed tip differs from the recording");
    // Both operands through their leading dimensions, transposed; the epilogue whole in
    // EPILOGUE (GELU of alpha times the sum plus the bias, then the residual at ldc).
    for expected in [
        "#define A_AT(r, c) a[(c) * (lda) + (r)]",
        "#define B_AT(r, c) b[(c) * (ldb) + (r)]",
        "#define C_AT(r, c) out[(r) * (ldc) + (c)]",
        "#define EPILOGUE(acc, r, c) (GELU_TANH(alpha * (acc) + bias[(c)]) + res[(r) * (ldc) + (c)])",
        // Split-K: the splits store raw sums; the reduction adds them and applies the
        // nonlinear epilogue once, to the whole sum. Thirteen kernel arguments, one array.
        "PARTIAL_AT(SPLIT, C_ROW(i), C_COL(j)) = acc[i][j];",
        "C_AT(pr, pc) = EPILOGUE(sum, pr, pc);",
        "[a, b, bias, res, out, M, N, K, M + 3, K + 5, N + 2, 1.5, partial]);",
        // Staged tiles read along their contiguous direction, A's in vectors only where
        // TILE_M splits into them (else its staging falls back to elements); rows padded.
        "STAGE_LOAD_T_COLMAJOR(a_stage, A_SHARE, A_AT, tile_row0, stg_k0, TILE_M, TILE_K, GEMM_M, GEMM_K);",
        "STAGE_LOAD_COLMAJOR(b_stage, B_SHARE, B_AT, stg_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N);",
        "#if VEC > 1 && TILE_M % VEC == 0",
        "SHARED float AsT[NUM_STAGES][TILE_K][TILE_M + OFFSET * VEC];",
        "#define GRID_M (((GEMM_M) + TILE_M - 1) / TILE_M)",
    ] {
        assert!(tip.contains(expected), "missing {expected:?} in:\n{tip}");
    }
    let device = tip.split("@peak device").nth(1).unwrap();
    assert!(!device.contains("bias[") && !device.contains("GELU_TANH("), "the epilogue lives in EPILOGUE only:\n{device}");
    let k_loop = device.split("for (int t = 0; t < KT; ++t)").nth(1).unwrap().split("#if K_SPLITS == 1").next().unwrap();
    assert!(!k_loop.contains("BY") && !k_loop.contains("BX"), "the k loop reads the block's place, never BX or BY:\n{k_loop}");
}

#[test]
fn gemm_nt_bias_cuda_twin_carries_the_same_chain_deferred() {
    let env = Env::new();
    let wf = env.path("cuda");
    unbundle(&example("workflows/gemm-nt-bias-cuda-deferred.bundle"), &wf);
    let line = first_parent_chain(&env, &wf);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    assert_eq!(&steps[1..], GEMM_LINE);
    for entry in &line[1..] {
        assert_eq!((entry["verdict"].as_str(), entry["executor"].as_str()), (Some("deferred"), Some("agent")), "{entry}");
        let show = env.json(&["show", entry["id"].as_str().unwrap(), "-w", s(&wf), "--json"]);
        let check = &show["validation"]["compile_check"];
        let counts = check["counts"].as_object().unwrap();
        assert!(counts["compiled"].as_u64().unwrap() > 0, "{check}");
        assert!(counts.keys().all(|k| k == "compiled" || k == "invalid-config"), "every sampled variant compiled or was pruned by the launch script: {check}");
    }
    let source = env.json(&["show", "HEAD", "-w", s(&wf), "--json"])["files"]["kernel.cu"].as_str().unwrap().to_string();
    assert!(source.contains("extern \"C\" __global__ void gemm_nt_bias("), "{source}");
    assert_gemm_vocabulary(&source);
    // CUDA vector loads fault when misaligned: a whole vector is loaded only at an aligned
    // address (K = 33 at validation leaves most rows unaligned).
    assert!(source.contains("#define PEAK_VALIGNED(p) (((size_t)(p)) % (VEC * sizeof(float)) == 0)"), "{source}");
    // An interior tile's vectors are all aligned where its first element and the next one
    // across the vectors' direction are (base and leading dimension aligned): one test per tile.
    assert!(source.contains("PEAK_VALIGNED(&AT((row0), (col0))) && PEAK_VALIGNED(&AT((row0) + 1, (col0)))"), "{source}");
    assert!(source.contains("PEAK_VALIGNED(&AT((row0), (col0))) && PEAK_VALIGNED(&AT((row0), (col0) + 1))"), "{source}");
    assert!(source.contains("extern __shared__ __align__(16) unsigned char smem_raw[];"), "{source}");
}

/// The branch joint-staging of the CUDA twin: Register-Staging, Offset and Block-Swizzle
/// walked again from Pipelining with Register-Staging's text of one test per k-step (the
/// compiler made a tile's load wait for the other tile's data when each had a branch of its
/// own), then Launch-Bounds, each written by the agent with `--defer` and compile-checked.
/// The k loop tests both tiles in one condition and issues their unchecked loads together;
/// alignment is computed once per block, never in the loop.
#[test]
fn gemm_nt_bias_cuda_joint_staging_branch_loads_a_k_step_together() {
    let env = Env::new();
    let wf = env.path("cuda");
    unbundle(&example("workflows/gemm-nt-bias-cuda-deferred.bundle"), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let mut chain = vec![show("joint-staging")];
    for _ in 0..4 {
        let parent = show(chain.last().unwrap()["parents"][0].as_str().unwrap());
        chain.push(parent);
    }
    let names: Vec<&str> = chain.iter().map(|c| c["meta"]["transformation"].as_str().unwrap()).collect();
    assert_eq!(names, ["Launch-Bounds", "Block-Swizzle", "Offset", "Register-Staging", "Pipelining"]);
    let main_line = first_parent_chain(&env, &wf);
    let pipelining = main_line.iter().find(|e| e["transformation"] == "Pipelining").unwrap();
    assert_eq!(chain[4]["id"], pipelining["id"], "the branch starts at the main line's Pipelining");
    for entry in &chain[..4] {
        deferred_by_the_agent_and_compiled(entry);
    }
    let tip = chain[0]["files"]["kernel.cu"].as_str().unwrap().to_string();
    assert_gemm_vocabulary(&tip);
    let device = region(&tip, "device");
    let k_loop = device.split("for (int t = 0; t < KT; ++t)").nth(1).unwrap().split("const int stage").next().unwrap();
    // One condition for both tiles, the unchecked loads one after the other inside it.
    let joint = "if (STAGE_INSIDE_T(tile_row0, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K, a_aligned) &&\n                STAGE_INSIDE_COLMAJOR(next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N, b_aligned)) {\n                STAGE_LOAD_INSIDE_T(a_stage, A_SHARE, A_AT, tile_row0, next_k0, TILE_M, TILE_K);\n                STAGE_LOAD_INSIDE_COLMAJOR(b_stage, B_SHARE, B_AT, next_k0, tile_col0, TILE_K, TILE_N);\n            } else {";
    assert!(k_loop.contains(joint), "the k-step's two tiles are not loaded under one test:\n{k_loop}");
    assert!(!k_loop.contains("PEAK_VALIGNED"), "alignment is tested once per block, not per k-step:\n{k_loop}");
    for once in ["const bool a_aligned = PEAK_VALIGNED(&A_AT(tile_row0, K_BEGIN))", "const bool b_aligned = PEAK_VALIGNED(&B_AT(K_BEGIN, tile_col0))"] {
        assert!(device.contains(once), "missing {once:?}:\n{device}");
    }
    // The tuned bound on every kernel of the device region.
    assert_eq!(device.matches("__launch_bounds__(BLOCK_X * BLOCK_Y, MIN_BLOCKS)").count(), 2, "{device}");
}

/// The tip of `branch` of the CUDA twin's bundle and of `parent`, its parent branch, as kernel
/// files (after, before): the tip is `transformation`, its parent is `parent`'s tip, and it
/// was written by the agent with `--defer` and compile-checked.
fn cuda_branch_step(branch: &str, parent: &str, transformation: &str) -> (String, String) {
    let env = Env::new();
    let wf = env.path("cuda");
    unbundle(&example("workflows/gemm-nt-bias-cuda-deferred.bundle"), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let (tip, base) = (show(branch), show(parent));
    assert_eq!(tip["meta"]["transformation"].as_str(), Some(transformation));
    assert_eq!(tip["parents"][0], base["id"], "the branch {branch} starts at {parent}'s tip");
    deferred_by_the_agent_and_compiled(&tip);
    let file = |v: &serde_json::Value| v["files"]["kernel.cu"].as_str().unwrap().to_string();
    (file(&tip), file(&base))
}

/// The paper's own square fp32 kernel (matmul-cuda-f32.bundle, sizes `n`, row-major B, no
/// EPILOGUE: it stores the accumulators into the split-K partial sums, C itself without
/// split-K) walked by the agent from Pipelining through the joint k-step staging (branch
/// joint-staging: Register-Staging, Offset, Block-Swizzle, Launch-Bounds), then Interior-Loop
/// and Epilogue-Vector, each on its own branch, every step with `--defer` and compiled.
#[test]
fn square_f32_case_study_carries_the_joint_staging_line() {
    let env = Env::new();
    let wf = env.path("square");
    unbundle(&example("workflows/matmul-cuda-f32.bundle"), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let kernel = |v: &serde_json::Value| v["files"]["matmul.cu"].as_str().unwrap().to_string();
    // The joint-staging branch, newest first, down to Pipelining on the main line.
    let mut step = show("joint-staging");
    for name in ["Launch-Bounds", "Block-Swizzle", "Offset", "Register-Staging"] {
        assert_eq!(step["meta"]["transformation"].as_str(), Some(name));
        deferred_by_the_agent_and_compiled(&step);
        step = show(step["parents"][0].as_str().unwrap());
    }
    assert_eq!(step["meta"]["transformation"].as_str(), Some("Pipelining"));
    let staged = kernel(&show("joint-staging"));
    let device = region(&staged, "device");
    assert!(!device.contains("PEAK_ASYNC"), "register staging replaces the cp.async pipeline");
    let joint = "if (STAGE_INSIDE(tile_row0, next_k0, TILE_M, TILE_K, n, n, a_aligned) &&\n                STAGE_INSIDE(next_k0, tile_col0, TILE_K, TILE_N, n, n, b_aligned)) {\n                STAGE_LOAD_INSIDE(a_stage, ";
    assert!(device.contains(joint), "a k-step's two tiles are not tested in one condition:\n{device}");

    let (interior, epilogue) = (show("interior-loop"), show("epilogue-vector"));
    assert_eq!(interior["meta"]["transformation"].as_str(), Some("Interior-Loop"));
    assert_eq!(interior["parents"][0], show("joint-staging")["id"]);
    assert_eq!(epilogue["meta"]["transformation"].as_str(), Some("Epilogue-Vector"));
    assert_eq!(epilogue["parents"][0], interior["id"]);
    deferred_by_the_agent_and_compiled(&interior);
    deferred_by_the_agent_and_compiled(&epilogue);
    let parts = ["tile_row0 + TILE_M <= n", "tile_col0 + TILE_N <= n", "(k_end - k_begin) % TILE_K == 0", "a_aligned", "b_aligned"];
    let inside = kernel(&interior);
    interior_loop_copies_the_k_loop(device, region(&inside, "device"), "constexpr bool", &parts);

    // Epilogue-Vector with no EPILOGUE: the macros as they were, only the stores rewritten.
    let stored = kernel(&epilogue);
    assert_eq!(region(&stored, "macros"), region(&inside, "macros"), "no EPILOGUE, nothing to split");
    assert_eq!(region(&stored, "host"), region(&inside, "host"));
    let after = region(&stored, "device");
    assert_eq!(through_the_k_loop(after), through_the_k_loop(region(&inside, "device")), "Epilogue-Vector changed the k loop");
    for expected in [
        "&& n % CHUNK_X == 0 && reinterpret_cast<size_t>(&PARTIAL_AT(SPLIT, 0, 0)) % (CHUNK_X * sizeof(float)) == 0",
        "*reinterpret_cast<float2*>(&PARTIAL_AT(SPLIT, C_ROW(i), C_COL(j0))) = make_float2(acc[i][j0], acc[i][j0 + 1]);",
        "*reinterpret_cast<float4*>(&PARTIAL_AT(SPLIT, C_ROW(i), C_COL(j0))) =",
        "if (C_ROW(i) < n && C_COL(j) < n) PARTIAL_AT(SPLIT, C_ROW(i), C_COL(j)) = acc[i][j];",
    ] {
        assert!(after.contains(expected), "the device region lacks {expected:?}:\n{after}");
    }
}

/// The fp32 kernels' branch warp-tiling (the square case study's and the NT GEMM's): Warp-Tiling
/// on Epilogue-Vector, written by the agent with `--defer` and compile-checked. Each warp owns
/// a patch of (32 / WARP_X) x WARP_X threads and a thread's chunks of CHUNK_Y rows and CHUNK_X
/// columns stay whole inside it (the vector fragment loads and the vector stores rely on them);
/// the launch refuses warp grids that do not tile the block; the device region is the parent's.
#[test]
fn f32_warp_tiling_keeps_each_threads_chunks_inside_its_warps_patch() {
    let env = Env::new();
    for (bundle, file) in [("matmul-cuda-f32.bundle", "matmul.cu"), ("gemm-nt-bias-cuda-deferred.bundle", "kernel.cu")] {
        let (tip, after, before) = branch_step(&env, bundle, "warp-tiling", "epilogue-vector", "Warp-Tiling", file);
        let (after, before) = (after.as_str(), before.as_str());
        assert_eq!(region(after, "device"), region(before, "device"), "{bundle}: Warp-Tiling is a renumbering: the device region stays");
        let macros = region(after, "macros");
        for expected in [
            "#define THREAD_ROW(i) (WARP_ROW * (WARP_Y * TRD_Y) + ((i) / CHUNK_Y) * (WARP_Y * CHUNK_Y) + (LANE / WARP_X) * CHUNK_Y + (i) % CHUNK_Y)",
            "#define THREAD_COL(j) (WARP_COL * (WARP_X * TRD_X) + ((j) / CHUNK_X) * (WARP_X * CHUNK_X) + (LANE % WARP_X) * CHUNK_X + (j) % CHUNK_X)",
            "#define TID (TY * BLOCK_X + TX)",
            "#define WARPS_X (BLOCK_X / WARP_X)",
        ] {
            assert!(macros.contains(expected), "{bundle}: the macros region lacks {expected:?}:\n{macros}");
        }
        let host = region(after, "host");
        assert!(host.contains("if WARP_X > WARP_SIZE || BLOCK_Y % (WARP_SIZE / WARP_X) != 0 {"), "{bundle}: {host}");
        assert!(tip["files"]["peak.toml"].as_str().unwrap().contains("[tuning.WARP_X]"), "{bundle}: WARP_X is tuned");
    }
}

/// The fp32 kernels' branch stream-k (the square case study's and the NT GEMM's): Stream-K on
/// Warp-Tiling, written by the agent with `--defer` and compile-checked. The GEMM kernel keeps
/// its parent's body word for word (only its tile index moves past the stream-K tiles), so the
/// k-loop that runs most tiles compiles as before; a kernel of its own shares the leftover
/// tiles' k-steps out, publishing parts through flags that finishers wait on; the launch runs
/// it first, zeroing the flags each time, and refuses stream-K with split-K.
#[test]
fn f32_stream_k_keeps_the_gemm_kernel_and_shares_the_last_wave_out_in_a_kernel_of_its_own() {
    let env = Env::new();
    for (bundle, file, kernel) in [("matmul-cuda-f32.bundle", "matmul.cu", "matmul"), ("gemm-nt-bias-cuda-deferred.bundle", "kernel.cu", "gemm_nt_bias")] {
        let (tip, after, before) = branch_step(&env, bundle, "stream-k", "warp-tiling", "Stream-K", file);
        let (device, parent_device) = (region(&after, "device"), region(&before, "device"));
        let body = kernel_body(parent_device, kernel);
        assert!(kernel_body(device, kernel).ends_with(body), "{bundle}: the GEMM kernel's body is not its parent's word for word");
        let tile = "#if STREAM_K == 0\n    const int item_tile = BLOCK_LIN;\n#else\n    const int item_tile = sk_tiles + BLOCK_LIN;\n#endif";
        assert!(kernel_body(device, kernel).starts_with(tile), "{bundle}: the GEMM kernel's tile index:\n{}", kernel_body(device, kernel));
        let stream_k = kernel_body(device, &format!("{kernel}_stream_k"));
        for expected in [
            "for (int it = SK_RUN_END(b); it > run_begin;) {",
            "SK_SLOT_AT(b, i, j, TID) = acc[i][j];",
            "atomicExch(&sk_flags[b], 1u);",
            "for (int p = SK_BLOCK_OF(item_tile * K_STEPS); p < b; ++p) {",
            "while (atomicAdd(&sk_flags[p], 0u) == 0u) __nanosleep(32);",
            "__ldcg(&SK_SLOT_AT(p, i, j, TID))",
        ] {
            assert!(stream_k.contains(expected), "{bundle}: the stream-K kernel lacks {expected:?}:\n{stream_k}");
        }
        let macros = region(&after, "macros");
        assert!(
            macros.contains("#define TILE_LIN item_tile") && macros.contains("#define BX ((TILE_LIN % (GROUP_M * GRID_N)) / GROUP_ROWS)"),
            "{bundle}: {macros}"
        );
        let host = region(&after, "host");
        assert!(host.contains(r#"if K_SPLITS > 1 { invalid("stream-K and split-K both divide k: use one"); }"#), "{bundle}: {host}");
        let (fill, first, second) = (
            host.find("fill(sk_flags, 0);").expect("the flags are zeroed"),
            host.find(&format!(r#"launch("{kernel}_stream_k", [sk_blocks, 1, 1]"#)).expect("the stream-K launch"),
            host.find(&format!(r#"launch("{kernel}", [tiles - sk_tiles, 1, 1]"#)).expect("the data-parallel launch"),
        );
        assert!(fill < first && first < second, "{bundle}: flags zeroed, then the stream-K kernel, then the other tiles:\n{host}");
        assert!(tip["files"]["peak.toml"].as_str().unwrap().contains("[tuning.STREAM_K]"), "{bundle}: STREAM_K is tuned");
    }
}

/// The body of `kernel` (a `__global__` function) in a device region: the text between the
/// opening brace ending its signature and the closing brace at the start of a line.
fn kernel_body<'a>(device: &'a str, kernel: &str) -> &'a str {
    let signature = device.find(&format!(" {kernel}(")).unwrap_or_else(|| panic!("no kernel {kernel}"));
    let open = signature + device[signature..].find(") {\n").unwrap() + 4;
    &device[open..open + device[open..].find("\n}\n").unwrap()]
}

/// The branch fragment-prefetch of the CUDA twin: Fragment-Prefetch on joint-staging's
/// Launch-Bounds, written by the agent with `--defer` and compile-checked. Two sets of
/// fragments, slice kk + 1 loaded before slice kk's multiply-adds, and the step's stores and
/// barrier moved before the last slice's multiply-adds, behind the next step's first loads;
/// the global loads and everything after the k loop unchanged.
#[test]
fn gemm_nt_bias_cuda_fragment_prefetch_branch_multiplies_the_last_slice_after_the_barrier() {
    let (after, before) = cuda_branch_step("fragment-prefetch", "joint-staging", "Fragment-Prefetch");
    let device = region(&after, "device");
    for expected in [
        "__align__(16) float a_frag[2][TRD_Y];",
        "__align__(16) float b_frag[2][TRD_X];",
        "load_fragments(a_frag[0], b_frag[0], 0, 0);",
        "load_fragments(a_frag[(kk + 1) % 2], b_frag[(kk + 1) % 2], stage, kk + 1);",
        "if (t + 1 < KT) load_fragments(a_frag[0], b_frag[0], (t + 1) % NUM_STAGES, 0);",
        "acc[i][j] += a_frag[kk % 2][i] * b_frag[kk % 2][j];",
    ] {
        assert!(device.contains(expected), "missing {expected:?}:\n{device}");
    }
    // The step's end sits inside the slice loop, before the last slice's multiply-adds.
    let slices = device.split("for (int kk = 0; kk < TILE_K; ++kk) {").nth(1).unwrap();
    let end = slices.find("BARRIER();").expect("the barrier moved into the slice loop");
    assert!(end < slices.find("acc[i][j] +=").unwrap(), "the barrier comes before the last slice's multiply-adds");
    assert_eq!(device.matches("BARRIER();").count(), 2, "the first stage's barrier and the step's, nothing more:\n{device}");
    // The global loads of the next step and the epilogue are as they were.
    let next_loads = |text: &str| text.split("for (int t = 0; t < KT; ++t) {").nth(1).unwrap().split("const int stage").next().unwrap().to_string();
    assert_eq!(next_loads(device), next_loads(region(&before, "device")));
    let epilogue = |text: &str| text.split("#if K_SPLITS == 1").nth(1).unwrap().to_string();
    assert_eq!(epilogue(device), epilogue(region(&before, "device")));
    assert_eq!(region(&after, "macros"), region(&before, "macros"));
}

/// The branch interior-loop of the CUDA twin: Interior-Loop on joint-staging's Launch-Bounds,
/// written by the agent with `--defer` and compile-checked. A block wholly inside the
/// matrices, with aligned vectors, runs a copy of the k loop whose load test is a constant.
#[test]
fn gemm_nt_bias_cuda_interior_loop_branch_runs_inside_blocks_without_tests() {
    let (after, before) = cuda_branch_step("interior-loop", "joint-staging", "Interior-Loop");
    let parts = [GEMM_INSIDE.as_slice(), &["a_aligned", "b_aligned"]].concat();
    interior_loop_copies_the_k_loop(region(&before, "device"), region(&after, "device"), "constexpr bool", &parts);
    assert_eq!(region(&after, "macros"), region(&before, "macros"));
    assert_eq!(region(&after, "host"), region(&before, "host"));
}

/// The branch epilogue-vector of the CUDA twin: Epilogue-Vector on Interior-Loop, written by
/// the agent with `--defer` and compile-checked. EPILOGUE's per-column operand is read once
/// per column, and a block wholly inside C (its rows N apart a multiple of CHUNK_X, C's base
/// aligned) stores each run of 2 or 4 columns as one float2 or float4; the k loop is untouched.
#[test]
fn gemm_nt_bias_cuda_epilogue_vector_branch_stores_interior_runs_as_vectors() {
    let (after, before) = cuda_branch_step("epilogue-vector", "interior-loop", "Epilogue-Vector");
    assert!(
        region(&after, "macros").contains("#define EPILOGUE_COL(c) (bias[(c)])")
            && region(&after, "macros").contains("#define EPILOGUE_WITH(acc, col, r, c) ((acc) + (col))")
    );
    let device = region(&after, "device");
    // Everything up to the end of the k loop's two copies is the parent's.
    assert_eq!(through_the_k_loop(device), through_the_k_loop(region(&before, "device")), "Epilogue-Vector changed the k loop");
    for expected in [
        "colv[j] = (C_COL(j) < GEMM_N) ? EPILOGUE_COL(C_COL(j)) : 0.0f;",
        "&& (N) % CHUNK_X == 0 && ((size_t)out) % (CHUNK_X * sizeof(float)) == 0",
        "*reinterpret_cast<float2*>(&C_AT(C_ROW(i), C_COL(j0))) = make_float2(",
        "*reinterpret_cast<float4*>(&C_AT(C_ROW(i), C_COL(j0))) = make_float4(",
    ] {
        assert!(device.contains(expected), "the device region lacks {expected:?}");
    }
    assert_eq!(device.matches("EPILOGUE(").count(), 1, "EPILOGUE is left to the split-K reduction alone");
    assert_eq!(region(&after, "host"), region(&before, "host"));
}

/// The CUDA line's branch epilogue-vector replayed where a CUDA GPU is (the H200 runs it with
/// the gated tests; elsewhere it skips, saying why): from Refactor to Epilogue-Vector every
/// step validates and its winner passes memcheck, pinned without K splits at 250 x 200 x 129,
/// which divides no tile, so that the last step's interior blocks store float2 runs (N a
/// multiple of CHUNK_X = 2) and its edge blocks element by element; the tip is the recorded code.
#[test]
fn gemm_nt_bias_cuda_epilogue_vector_branch_replays_on_the_gpu() {
    let test = "gemm_nt_bias_cuda_epilogue_vector_branch_replays_on_the_gpu";
    if let Err(e) = peak_cuda::CudaBackend::new() {
        eprintln!("SKIPPED {test}: {e}");
        return;
    }
    let env = Env::new();
    let bundle = example("workflows/gemm-nt-bias-cuda-deferred.bundle");
    let (recorded, replayed) = (env.path("recorded"), env.path("replayed"));
    unbundle(&bundle, &recorded);
    let pins = [
        "BLOCK_X=16",
        "BLOCK_Y=8",
        "TRD_X=4",
        "TRD_Y=4",
        "CHUNK_X=2",
        "CHUNK_Y=2",
        "VEC=4",
        "TILE_K=8",
        "K_SPLITS=1",
        "NUM_STAGES=2",
        "OFFSET=1",
        "GROUP_M=4",
        "MIN_BLOCKS=1",
    ];
    let mut args = pinned_replay(&bundle, &replayed, &["M=250", "N=200", "K=129"], &pins);
    args.extend(["--branch", "epilogue-vector"]);
    env.ok(&args);
    let line = first_parent_chain(&env, &replayed);
    assert_eq!(line.last().unwrap()["transformation"], "Epilogue-Vector");
    for entry in &line[1..] {
        assert_eq!(entry["verdict"], "passed", "{entry}");
    }
    let kernel = |wf: &Path, rev: &str| env.json(&["show", rev, "-w", s(wf), "--json"])["files"]["kernel.cu"].as_str().unwrap().to_string();
    assert_eq!(kernel(&replayed, "HEAD"), kernel(&recorded, "epilogue-vector"), "the replayed tip differs from the recording");
}

/// The OpenCL GEMM's branch interior-loop: Interior-Loop walked by the agent on
/// joint-staging's tip (validated and tuned on PoCL). Replayed pinned at sizes that divide no
/// tile, so that both copies of the k loop run, it validates and ends on the recorded code.
#[test]
fn gemm_nt_bias_opencl_interior_loop_branch_replays() {
    if !opencl_present("gemm_nt_bias_opencl_interior_loop_branch_replays") {
        return;
    }
    let (steps, tip) = opencl_interior_loop_branch_replays("workflows/gemm-nt-bias-opencl-agent.bundle", &NT_BIAS_SIZES, &NT_BIAS_PINS);
    let expected: Vec<String> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).chain(["Interior-Loop"]).map(String::from).collect();
    assert_eq!(steps, expected, "Interior-Loop follows the joint-staging line");
    assert_gemm_vocabulary(&tip);
}

/// The OpenCL NT GEMM's branch epilogue-vector: Epilogue-Vector walked by the agent on the
/// interior-loop tip (validated and tuned on PoCL).
#[test]
fn gemm_nt_bias_opencl_epilogue_vector_branch_replays() {
    if !opencl_present("gemm_nt_bias_opencl_epilogue_vector_branch_replays") {
        return;
    }
    // N = 200: C's rows start at multiples of CHUNK_X (2), while 250 x 200 leaves edge blocks.
    let (steps, tip) = opencl_epilogue_vector_branch_replays(
        "workflows/gemm-nt-bias-opencl-agent.bundle",
        &["M=250", "N=200", "K=129"],
        &NT_BIAS_PINS,
        ("(bias[(c)])", "((acc) + (col))"),
    );
    let expected: Vec<String> =
        std::iter::once("init").chain(GEMM_LINE.iter().copied()).chain(["Interior-Loop", "Epilogue-Vector"]).map(String::from).collect();
    assert_eq!(steps, expected, "Epilogue-Vector follows Interior-Loop");
    // The line's vocabulary but for the stores, which the helper checks in their new form.
    assert!(tip.contains("#define B_AT(r, c) weight[(c) * (K) + (r)]") && tip.contains("const int tile_row0 = BY * TILE_M, tile_col0 = BX * TILE_N;"));
}

/// Epilogue-Vector on a GEMM with no EPILOGUE whose threads' columns are BLOCK_X apart: the
/// OpenCL case-study kernel after Thread-Tiling (square `n`), walked by the agent on PoCL. No
/// macros to split, no runs to make vectors: interior blocks store element by element with no
/// test, the others as before. Replayed where 61 leaves edge blocks beside interior ones.
#[test]
fn square_opencl_gemm_without_epilogue_epilogue_vector_branch_replays() {
    if !opencl_present("square_opencl_gemm_without_epilogue_epilogue_vector_branch_replays") {
        return;
    }
    let pins = ["BLOCK_X=8", "BLOCK_Y=4", "TRD_X=2", "TRD_Y=2", "TILE_K=8"];
    let (steps, tip) = replay_branch("workflows/matmul-opencl-agent.bundle", "epilogue-vector", &["n=61"], &pins);
    assert_eq!(steps, ["init", "Refactor", "TB-Tiling", "Thread-Tiling", "Epilogue-Vector"]);
    assert!(!tip.contains("EPILOGUE"), "a kernel with no EPILOGUE gains none");
    let device = region(&tip, "device");
    let (interior, edge) = device.split_once("} else {").expect("an interior and an edge copy");
    assert!(interior.contains("if (c_inside) {") && interior.contains("C_AT(C_ROW(i), C_COL(j)) = acc[i][j];"), "{device}");
    assert!(!interior.contains("< n &&") && !interior.contains("vstore"), "the interior copy tests nothing and has no runs: {interior}");
    assert!(edge.contains("if (C_ROW(i) < n && C_COL(j) < n) {"), "the edge copy keeps its guard: {edge}");
}

/// The padded TT GEMM with GELU and a residual, a kernel Epilogue-Vector was not written for:
/// walked by the agent on the line's tip (Block-Swizzle), its per-column operand the bias
/// inside the GELU, its residual read per element, its rows ldc = N + 2 apart.
#[test]
fn padded_tt_gemm_with_gelu_epilogue_vector_branch_replays() {
    if !opencl_present("padded_tt_gemm_with_gelu_epilogue_vector_branch_replays") {
        return;
    }
    // N = 42: ldc = 44 is a multiple of CHUNK_X (4), while 50 x 42 leaves edge blocks.
    let (steps, _) = opencl_epilogue_vector_branch_replays(
        "workflows/gemm-tt-gelu-opencl-agent.bundle",
        &["M=50", "N=42", "K=35"],
        &TT_GELU_PINS,
        ("(bias[(c)])", "(GELU_TANH(alpha * (acc) + (col)) + res[(r) * (ldc) + (c)])"),
    );
    let expected: Vec<String> = std::iter::once("init").chain(GEMM_LINE.iter().copied()).chain(["Epilogue-Vector"]).map(String::from).collect();
    assert_eq!(steps, expected, "Epilogue-Vector follows the line's tip");
}

/// `replay_branch` of an OpenCL bundle's branch epilogue-vector, pinned without K splits (the
/// step changes only the stores that apply EPILOGUE) at sizes where C's row stride is a
/// multiple of CHUNK_X and the tiles do not divide C, so that the replay validates both the
/// interior blocks' vector stores and the edge blocks' checked ones. The tip splits EPILOGUE
/// into `col_with` (EPILOGUE_COL's and EPILOGUE_WITH's bodies), reads the per-column operand
/// once per column, stores interior runs with vstore, and leaves EPILOGUE to the split-K
/// reduction alone. The line's steps and the tip's kernel.
fn opencl_epilogue_vector_branch_replays(bundle: &str, sizes: &[&str], pins: &[&str], col_with: (&str, &str)) -> (Vec<String>, String) {
    let pins: Vec<&str> = pins.iter().map(|p| if p.starts_with("K_SPLITS=") { "K_SPLITS=1" } else { *p }).collect();
    let (steps, tip) = replay_branch(bundle, "epilogue-vector", sizes, &pins);
    for expected in [format!("#define EPILOGUE_COL(c) {}", col_with.0), format!("#define EPILOGUE_WITH(acc, col, r, c) {}", col_with.1)] {
        assert!(region(&tip, "macros").contains(&expected), "the macros lack {expected:?}");
    }
    let device = region(&tip, "device");
    for expected in [
        "colv[j] = (C_COL(j) < GEMM_N) ? EPILOGUE_COL(C_COL(j)) : 0.0f;",
        "if (c_inside) {",
        "vstore2((float2)(EPILOGUE_WITH(acc[i][j0 + 0], colv[j0 + 0], C_ROW(i), C_COL(j0 + 0)),",
        "vstore4((float4)(EPILOGUE_WITH(acc[i][j0 + 0], colv[j0 + 0], C_ROW(i), C_COL(j0 + 0)),",
        "C_AT(C_ROW(i), C_COL(j)) = EPILOGUE_WITH(acc[i][j], colv[j], C_ROW(i), C_COL(j));",
    ] {
        assert!(device.contains(expected), "the device region lacks {expected:?}");
    }
    assert_eq!(device.matches("EPILOGUE(").count(), 1, "EPILOGUE is left to the split-K reduction alone");
    (steps, tip)
}

/// `replay_branch` of an OpenCL bundle's branch interior-loop, whose tip must be its
/// joint-staging parent with the k loop copied (`interior_loop_copies_the_k_loop`; OpenCL's
/// loads need no alignment flag). The line's steps and the tip's kernel.
fn opencl_interior_loop_branch_replays(bundle: &str, sizes: &[&str], pins: &[&str]) -> (Vec<String>, String) {
    let (steps, tip) = replay_branch(bundle, "interior-loop", sizes, pins);
    let env = Env::new();
    let recorded = env.path("recorded");
    unbundle(&example(bundle), &recorded);
    let parent = kernel_cl(&env, &recorded, "joint-staging");
    interior_loop_copies_the_k_loop(region(&parent, "device"), region(&tip, "device"), "const bool", &GEMM_INSIDE);
    (steps, tip)
}

/// What `block_inside` tests in a GEMM that names its sizes GEMM_M, GEMM_N and splits k.
const GEMM_INSIDE: [&str; 3] = ["tile_row0 + TILE_M <= GEMM_M", "tile_col0 + TILE_N <= GEMM_N", "(K_END - K_BEGIN) % TILE_K == 0"];

/// Interior-Loop's change between two device regions: `block_inside` computed once, with every
/// part in `parts` (the tile's rows and columns, a k range of whole steps, alignment flags); then the
/// parent's k loop twice, each copy unchanged but for its step test, `inside || (...)`, with
/// `inside` a `decl` constant, true in the copy `block_inside` takes. Comments aside, nothing
/// else in the region changes.
fn interior_loop_copies_the_k_loop(parent: &str, tip: &str, decl: &str, parts: &[&str]) {
    let code = |text: &str| text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let (parent, tip) = (code(parent), code(tip));
    let start = parent.find("    for (int t = 0; t < KT; ++t) {").expect("the parent's k loop");
    let end = start + parent[start..].find("\n    }\n").expect("the end of the parent's k loop") + "\n    }".len();
    let copy = parent[start..end]
        .lines()
        .scan(false, |in_test, line| {
            // The step test spans two lines: `if (STAGE_INSIDE...(A's tile) &&`, then B's `) {`.
            let line = if line.trim_start().starts_with("if (STAGE_INSIDE") {
                *in_test = true;
                line.replacen("if (STAGE_INSIDE", "if (inside || (STAGE_INSIDE", 1)
            } else if std::mem::take(in_test) {
                line.replacen(")) {", "))) {", 1)
            } else {
                line.to_string()
            };
            Some(if line.is_empty() { line } else { format!("    {line}") })
        })
        .collect::<Vec<_>>()
        .join("\n");
    let test_from = tip.find("    const bool block_inside = ").expect("block_inside is computed before the loop");
    let test = &tip[test_from..test_from + tip[test_from..].find(';').unwrap() + 1];
    let words: String = test.split_whitespace().collect::<Vec<_>>().join(" ");
    for part in parts {
        assert!(words.contains(part), "block_inside lacks {part:?}: {words}");
    }
    let expected = format!(
        "{}{test}\n    if (block_inside) {{\n        {decl} inside = true;\n{copy}\n    }} else {{\n        {decl} inside = false;\n{copy}\n    }}{}",
        &parent[..start],
        &parent[end..]
    );
    assert_eq!(tip, expected, "Interior-Loop changed more than the k loop");
}

/// The texts of the GEMM line speak its vocabulary, never the paper's square row-major
/// problem, and keep the shape recorded workflows replay against: the same passes, in the
/// same regions, with the same parameters, requirements and constraints.
#[test]
fn the_gemm_line_speaks_sizes_accessors_and_epilogue() {
    let env = Env::new();
    for (name, regions, tuning, requires, constraints) in [
        ("refactor", &["macros", "device"][..], &[][..], &["BLOCK_X", "BLOCK_Y"][..], &[][..]),
        (
            "tb-tiling",
            &["macros", "device", "device", "device", "device", "host"],
            &["TILE_K"],
            &["BLOCK_X", "BLOCK_Y"],
            &["(BLOCK_X + BLOCK_Y) * TILE_K <= 12288"],
        ),
        (
            "thread-tiling",
            &["macros", "device", "host"],
            &["TRD_X", "TRD_Y"],
            &["BLOCK_X", "BLOCK_Y", "TILE_K"],
            &["TRD_X * TRD_Y <= 128", "(BLOCK_X * TRD_X + BLOCK_Y * TRD_Y) * TILE_K <= 12288"],
        ),
        ("thread-cache", &["device"], &[], &["TRD_X", "TRD_Y"], &[]),
        ("transpose", &["macros", "device"], &[], &["TILE_K"], &[]),
        (
            "thread-chunk",
            &["macros", "device"],
            &["CHUNK_X", "CHUNK_Y"],
            &["BLOCK_X", "BLOCK_Y", "TRD_X", "TRD_Y"],
            &["TRD_X % CHUNK_X == 0", "TRD_Y % CHUNK_Y == 0"],
        ),
        // No constraint ties VEC to the GEMM's sizes: the copies check bounds and alignment.
        ("vectorize", &["macros", "device"], &["VEC"], &["BLOCK_X", "TILE_K"], &["TILE_K % VEC == 0", "BLOCK_X % VEC == 0"]),
        ("split-k", &["macros", "device", "host"], &["K_SPLITS"], &["TILE_K"], &[]),
        ("pipelining", &["macros", "device", "host"], &["NUM_STAGES"], &["TILE_K"], &[]),
        ("register-staging", &["macros", "device"], &[], &["TILE_K"], &[]),
        ("offset", &["device", "host"], &["OFFSET"], &["TILE_K"], &[]),
        ("block-swizzle", &["macros"], &["GROUP_M"], &["TILE_K"], &[]),
    ] {
        let shown = env.json(&["transformations", "show", name, "--json"]);
        let passes = shown["passes"].as_array().unwrap();
        let got: Vec<&str> = passes.iter().map(|p| p["region"].as_str().unwrap()).collect();
        assert_eq!(got, regions, "{name}: recorded workflows replay by (pass, attempt)");
        let params: Vec<&str> = shown["tuning"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(params, tuning, "{name}");
        assert_eq!(shown["requires"], serde_json::json!(requires), "{name}");
        assert_eq!(shown["constraints"], serde_json::json!(constraints), "{name}");
        let text = serde_json::to_string(&shown).unwrap();
        for stale in [
            "row-major n x n",
            "k < n",
            "ROW < n",
            "(r) * n + (c)",
            "PEAK_TILE_COPY(As, A, n",
            "= acc[i][j];",
            "C = A x B",
            "n % VEC",
            "(n) + TILE_N",
            "below n * n",
        ] {
            assert!(!text.contains(stale), "{name} still says {stale:?}");
        }
        // (`show` gives the passes, not the overview.) Offset only pads shared rows and
        // Block-Swizzle only renumbers blocks (over GEMM_M and GEMM_N): neither touches a
        // store; the passes of Thread-Cache, Vectorize and Register-Staging name no size.
        let terms: &[&str] = match name {
            "offset" => &[],
            "block-swizzle" => &["GEMM_"],
            "thread-cache" | "vectorize" | "register-staging" => &["EPILOGUE"],
            _ => &["GEMM_", "EPILOGUE"],
        };
        for term in terms {
            assert!(text.contains(term), "{name} does not speak of {term}");
        }
    }
}

/// The Hopper line, Refactor to TMA-Store, on the bf16 twin
/// (examples/gemm-nt-bias-cuda-bf16: `out = inp . weight^T + bias` in bf16 with f32
/// accumulation, weight stored N x K, validated at 200 x 136 x 88 where no size divides a
/// tile), written by the agent executor with `--defer`: every step compile-checked by
/// NVRTC for sm_90a, none failed, and the tip keeps the roles the prompts ask for: the
/// K-major weight read by wgmma without the transpose bit, the bf16 kind, the bias applied
/// A checkpoint (`peak show --json`) written by the agent executor with `--defer`: recorded as
/// deferred, and every sampled variant compiled by NVRTC or pruned by the launch script.
fn deferred_by_the_agent_and_compiled(show: &serde_json::Value) {
    let meta = &show["meta"];
    assert_eq!((meta["verdict"].as_str(), meta["executor"].as_str()), (Some("deferred"), Some("agent")), "{meta}");
    let check = &show["validation"]["compile_check"];
    let counts = check["counts"].as_object().unwrap();
    assert!(counts["compiled"].as_u64().unwrap() > 0, "{check}");
    assert!(counts.keys().all(|k| k == "compiled" || k == "invalid-config"), "every sampled variant compiled or was pruned by the launch script: {check}");
}

/// The tip of `branch` in the recorded `bundle`: a `transformation` checkpoint written by the
/// agent (deferred, compiled) whose parent is the tip of `parent`; its `file` after and before.
fn branch_step(env: &Env, bundle: &str, branch: &str, parent: &str, transformation: &str, file: &str) -> (serde_json::Value, String, String) {
    let wf = env.path(bundle);
    unbundle(&example(&format!("workflows/{bundle}")), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let (tip, parent_tip) = (show(branch), show(parent));
    assert_eq!(tip["meta"]["transformation"].as_str(), Some(transformation), "{bundle}");
    assert_eq!(tip["parents"][0], parent_tip["id"], "{bundle}: the branch {branch} starts at the tip of {parent}");
    deferred_by_the_agent_and_compiled(&tip);
    let text = |show: &serde_json::Value| show["files"][file].as_str().unwrap().to_string();
    let (after, before) = (text(&tip), text(&parent_tip));
    (tip, after, before)
}

/// through EPILOGUE inside C only before the clipped TMA store.
const HOPPER_CHAIN: [&str; 11] = [
    "Refactor",
    "TB-Tiling",
    "Warp-Tiling",
    "Tensor-Core",
    "Tensor-Tiling",
    "Pipelining",
    "TMA-Pipeline",
    "WGMMA",
    "Warp-Specialize",
    "TMA-Multicast",
    "TMA-Store",
];

/// The steps after TMA-Store on the Hopper line's main branch, up to the tip the lead replays.
const AFTER_TMA_STORE: [&str; 8] =
    ["Persistent-Tiles", "Consumer-Overlap", "Epilogue-Hoist", "Epilogue-Ring", "Shared-Window", "Uniform-Warpgroup", "Stmatrix-Staging", "Pair-Round"];

/// The 16-bit twin `dtype` ("bf16" or "f16": its C type, its conversions and its wgmma
/// kind) walked through HOPPER_CHAIN, as the bundle records it.
fn hopper_twin_walks_the_line(dtype: &str, ty: &str, to_float: &str, from_float: &str) {
    let env = Env::new();
    let wf = env.path(dtype);
    unbundle(&example(&format!("workflows/gemm-nt-bias-cuda-{dtype}-deferred.bundle")), &wf);
    let line = first_parent_chain(&env, &wf);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    // The eleven steps, then the steps after TMA-Store on the same line (the tip the lead replays).
    assert_eq!(&steps[1..=HOPPER_CHAIN.len()], HOPPER_CHAIN);
    assert_eq!(&steps[HOPPER_CHAIN.len() + 1..], AFTER_TMA_STORE);
    let file = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"])["files"]["kernel.cu"].as_str().unwrap().to_string();
    for pair in line.windows(2) {
        assert_ne!(file(pair[0]["id"].as_str().unwrap()), file(pair[1]["id"].as_str().unwrap()), "a step left the kernel unchanged");
    }
    for entry in &line[1..] {
        deferred_by_the_agent_and_compiled(&env.json(&["show", entry["id"].as_str().unwrap(), "-w", s(&wf), "--json"]));
    }
    // The context the lead replays: 16-bit operands, bias and output, the NT layout and the
    // bias for cuBLASLt, validation at sizes that divide no tile (multiples of 8 for TMA).
    let manifest = std::fs::read_to_string(example(&format!("gemm-nt-bias-cuda-{dtype}/peak.toml"))).unwrap();
    for expected in [
        "b_layout = \"col\"".to_string(),
        "bias = \"bias\"".into(),
        format!("type = \"{dtype}\""),
        "M = { values = [200] }".into(),
        "N = { values = [136] }".into(),
        "K = { values = [88] }".into(),
    ] {
        assert!(manifest.contains(&expected), "missing {expected:?} in the manifest");
    }
    // TMA-Store's checkpoint, one block per tile.
    let tip = file("HEAD~8");
    for expected in [
        "#define GEMM_M (M)".to_string(),
        "#define B_AT(r, c) weight[(c) * (K) + (r)]".into(),
        format!("#define EPILOGUE(acc, r, c) ({from_float}((acc) + {to_float}(bias[(c)])))"),
        // wgmma of the type's kind with the weight K-major: no transpose bit, A's descriptor geometry.
        format!("#define PEAK_WGMMA peak_wgmma_{dtype}_m64n128k16<0>"),
        format!("wgmma.mma_async.sync.aligned.m64n128k16.f32.{dtype}.{dtype}"),
        "const unsigned long long db = peak_wgmma_desc(b_stage, 16, 1024);".into(),
        "PEAK_WGMMA(acc, da + 2 * k, db + 2 * k, 1);".into(),
        // The weight's rows are its output channels: boxes at (k, n), multicast across the cluster.
        "peak_tma_load_2d_multicast(b_stage + c * 8192, &tma_b, t * 64, BX * TILE_N + 64 * c,".into(),
        // The epilogue runs inside C only; the store clips the rest.
        "(gr < GEMM_M && gc < GEMM_N) ? EPILOGUE(acc[4 * j + 2 * h], gr, gc) : zero;".into(),
        "peak_tma_store_2d(&tma_c, BX * TILE_N + 64 * b, BY * TILE_M,".into(),
        format!("cuda_tensor_map(weight, \"{dtype}\", [K, N], [K * 2], [64, 64], \"128b\")"),
        format!("cuda_tensor_map(out, \"{dtype}\", [N, M], [N * 2], [64, tile_m], \"128b\")"),
        "launch(\"gemm_nt_bias\", [ceil_div(N, WGMMA_N), ceil_div(M, tile_m)], [BLOCK_X, BLOCK_Y + 1], smem,".into(),
    ] {
        assert!(tip.contains(&expected), "missing {expected:?} in the tip:\n{tip}");
    }
    let device = region(&tip, "device");
    assert!(!device.contains("bias["), "the bias lives in EPILOGUE only");
    assert!(device.contains(&format!("const {ty} zero")), "the staged tile is of C's type {ty}");
    let other = if dtype == "bf16" { "__half" } else { "__nv_bfloat16" };
    assert!(!device.contains(other), "no {other} in a {dtype} kernel");
    persistent_tip_walks_the_tiles(&file("HEAD~7"), ty);
    consumer_overlap_tip_keeps_a_batch_in_flight(&file("HEAD~6"), dtype, ty);
    epilogue_hoist_keeps_the_values(&file("HEAD~5"), &file("HEAD~6"));
    epilogue_ring_stages_box_by_box(&file("HEAD~4"));
    shared_window_changes_only_the_base(&file("HEAD~4"), &file("HEAD~3"));
    uniform_warpgroup_changes_only_the_index(&file("HEAD~3"), &file("HEAD~2"));
    stmatrix_staging_keeps_the_values(&file("HEAD~2"), &file("HEAD~1"));
    pair_round_rounds_each_pair_once(&file("HEAD~1"), &file("HEAD"), dtype);
}

/// The text of region `name` ("macros", "device" or "host") of a kernel file: from its
/// `// @peak NAME` marker to the next marker or the end.
/// A device region from its start to where its k loop ends (the first `BARRIER();` that closes
/// the loop and the block around it at the kernel's indentation): what Epilogue-Vector must
/// leave as it was.
fn through_the_k_loop(device: &str) -> &str {
    let end = "            BARRIER();\n        }\n    }\n";
    &device[..device.find(end).expect("the k loop's end") + end.len()]
}

fn region<'a>(source: &'a str, name: &str) -> &'a str {
    source.split(&format!("@peak {name}")).nth(1).unwrap_or_else(|| panic!("no {name} region")).split("// @peak").next().unwrap()
}

/// The one line two checkpoints differ in, before and after; it fails unless exactly one
/// line changed.
fn the_one_changed_line<'a>(parent: &'a str, tip: &'a str, step: &str) -> (&'a str, &'a str) {
    let (before, after): (Vec<&str>, Vec<&str>) = (parent.lines().collect(), tip.lines().collect());
    assert_eq!(before.len(), after.len(), "{step} adds or removes lines");
    let changed: Vec<(&str, &str)> = before.iter().zip(&after).filter(|(a, b)| a != b).map(|(a, b)| (*a, *b)).collect();
    assert_eq!(changed.len(), 1, "{step} changes one line: {changed:#?}");
    changed[0]
}

/// Uniform-Warpgroup on the Hopper tip: the consumer's warpgroup index, which the wgmma
/// descriptors are computed from, is read from lane 0, and nothing else changed.
fn uniform_warpgroup_changes_only_the_index(parent: &str, tip: &str) {
    let (before, after) = the_one_changed_line(parent, tip, "Uniform-Warpgroup");
    assert_eq!(before.trim(), "const int wg = WG_ID - 1;");
    assert!(after.trim().starts_with("const int wg = __shfl_sync(0xffffffff, WG_ID - 1, 0);"), "{after:?}");
}

/// Row-Box on a Hopper tip whose rows of A are `rows` (GEMM_M, or a square kernel's n): A's
/// rows per box (`rows` rounded up to 8 below one tile) defined once, the stage barrier
/// expecting those rows and B's full bytes, and A's tensor-map box of the same rows (`map`);
/// nothing else in the kernel changed, and NUM_STAGES may now reach 12.
fn row_box_expects_the_rows_that_exist(parent: &str, tip: &str, manifest: &str, rows: &str, map: &str) {
    let (device_before, device_after) = (region(parent, "device"), region(tip, "device"));
    let define = format!("#define A_BOX_ROWS ({rows} < TILE_M ? ({rows} + 7) / 8 * 8 : TILE_M)");
    assert!(device_after.contains(&define), "missing {define:?}");
    let block = format!("// A's box covers the rows that exist ({rows} rounded up to 8) when {rows} is smaller than it.\n{define}\n\n");
    let without_define = device_after.replacen(&block, "", 1);
    let (before, after) = the_one_changed_line(device_before, &without_define, "Row-Box's device pass");
    assert_eq!(before.trim(), "peak_mbar_arrive_expect_tx(&full[s], STAGE_BYTES);");
    assert!(after.trim().starts_with("peak_mbar_arrive_expect_tx(&full[s], A_BOX_ROWS * 64 * 2 + B_STAGE_BYTES);"), "{after:?}");
    assert!(region(tip, "host").contains(map), "missing {map:?} in Row-Box's host region");
    assert_eq!(region(parent, "macros"), region(tip, "macros"), "Row-Box changed the macros");
    assert!(manifest.contains("values = [2, 3, 4, 5, 6, 8, 10, 12]"), "NUM_STAGES is not widened to 12:\n{manifest}");
}

/// The branch three-consumers of each Hopper bundle: Three-Consumers on the main line's tip,
/// written by the agent with `--defer` and compile-checked. Only the two register budgets
/// changed (now following WG_M: 40 / 232 up to two consumers, 32 / 160 for three), with a
/// comment that says why, and WG_M and BLOCK_Y may be 3.
#[test]
fn three_consumers_branch_budgets_registers_by_wg_m() {
    let env = Env::new();
    for dtype in ["bf16", "f16", "e4m3"] {
        let wf = env.path(dtype);
        unbundle(&example(&format!("workflows/gemm-nt-bias-cuda-{dtype}-deferred.bundle")), &wf);
        let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
        let (tip, main) = (show("three-consumers"), show("main"));
        assert_eq!(tip["meta"]["transformation"].as_str(), Some("Three-Consumers"), "{dtype}");
        assert_eq!(tip["parents"][0], main["id"], "{dtype}: the branch starts at the main line's tip");
        deferred_by_the_agent_and_compiled(&tip);
        three_consumers_changes_only_the_budgets(main["files"]["kernel.cu"].as_str().unwrap(), &tip, dtype);
    }
}

/// The branch multicast-a of each Hopper bundle and of the square NN f16 kernel (one it was
/// not written for: sizes `n`, B row-major): Multicast-A on Three-Consumers, written by the
/// agent with `--defer` and compile-checked. With MCAST_A = 0 the kernel is its parent's.
/// Also on the case study's own f16 kernel, which takes one tile per block (no persistent
/// units): there the cluster itself lies along the grid's columns.
#[test]
fn multicast_a_branch_shares_a_and_keeps_the_parent_under_mcast_a_0() {
    let env = Env::new();
    let lines = [
        ("gemm-nt-bias-cuda-bf16-deferred.bundle", "kernel.cu", "three-consumers"),
        ("gemm-nt-bias-cuda-f16-deferred.bundle", "kernel.cu", "three-consumers"),
        ("gemm-nt-bias-cuda-e4m3-deferred.bundle", "kernel.cu", "three-consumers"),
        ("matmul-cuda-f16-consumer-overlap-deferred.bundle", "matmul.cu", "three-consumers"),
        ("matmul-cuda-f16.bundle", "matmul.cu", "tma-multicast"),
    ];
    for (bundle, file, parent) in lines {
        let (tip, after, before) = branch_step(&env, bundle, "multicast-a", parent, "Multicast-A", file);
        multicast_a_shares_a(&before, &after, tip["files"]["peak.toml"].as_str().unwrap(), bundle);
    }
}

/// Column-Stage on the Hopper NT lines (branch `column-stage` from Multicast-A in the bf16,
/// f16 and fp8 bundles), walked by the agent: the producer copies the tile's columns of the
/// bias into a slot of the tile's last stage by TMA, counted in that stage's barrier; the
/// consumers read them there, before the release of that stage; the mainloop is the parent's.
#[test]
fn column_stage_branch_stages_the_bias_with_the_last_k_step() {
    let env = Env::new();
    // (bundle, the bias's element type: the fp8 GEMM's bias and output are bf16)
    for (bundle, bias) in [
        ("gemm-nt-bias-cuda-bf16-deferred.bundle", "bf16"),
        ("gemm-nt-bias-cuda-f16-deferred.bundle", "f16"),
        ("gemm-nt-bias-cuda-e4m3-deferred.bundle", "bf16"),
    ] {
        let (_, after, before) = branch_step(&env, bundle, "column-stage", "multicast-a", "Column-Stage", "kernel.cu");
        column_stage_stages_the_bias(&before, &after, bias, bundle);
    }
}

/// Column-Pairs on the Hopper NT lines (branch `column-pairs` from Column-Stage in the bf16,
/// f16 and fp8 bundles), walked by the agent: each consumer thread reads its two neighbouring
/// columns of the staged bias with one 32-bit load of the pair type and keeps them packed,
/// widened where each is added; everything else of the kernel is the parent's.
#[test]
fn column_pairs_branch_reads_the_bias_a_pair_at_a_time() {
    let env = Env::new();
    // (bundle, the pair type of the bias: the fp8 GEMM's bias is bf16)
    for (bundle, pair) in [
        ("gemm-nt-bias-cuda-bf16-deferred.bundle", "__nv_bfloat162"),
        ("gemm-nt-bias-cuda-f16-deferred.bundle", "__half2"),
        ("gemm-nt-bias-cuda-e4m3-deferred.bundle", "__nv_bfloat162"),
    ] {
        let (_, after, before) = branch_step(&env, bundle, "column-pairs", "column-stage", "Column-Pairs", "kernel.cu");
        let (after, before) = (after.as_str(), before.as_str());
        for name in ["macros", "host"] {
            assert_eq!(region(after, name), region(before, name), "{bundle}: Column-Pairs changed the {name} region");
        }
        let device = region(after, "device");
        let load = format!("colp[j] = reinterpret_cast<const {pair}*>(col_slot)[4 * j + q];");
        assert!(device.contains(&load), "{bundle}: missing {load:?}");
        assert!(device.contains("__low2float(colp[j])") && device.contains("__high2float(colp[j])"), "{bundle}: the halves are not widened where used");
        assert!(!device.contains("colv["), "{bundle}: an f32 register per column is left");
        // Still read before the tile's last stage is released.
        let read = device.find("col_slot)[4 * j + q]").unwrap();
        let drain = device.find("peak_wgmma_wait<0>();").unwrap();
        assert!(read < drain + device[drain..].find("peak_mbar_arrive_cluster(&empty[(it - 1) % NUM_STAGES], r);").unwrap(), "{bundle}");
        // Apart from the operands' load and its uses, the device region is the parent's.
        let rest = |text: &str| -> String {
            let text = text.replace("COLV(j, 0)", "colv[j][0]").replace("COLV(j, 1)", "colv[j][1]");
            let from = text.find("const __nv_bfloat16* col_slot").or_else(|| text.find("const __half* col_slot")).unwrap();
            let to = from + text[from..].find("peak_wgmma_wait<0>();").unwrap();
            format!("{}{}", &text[..from], &text[to..])
        };
        assert_eq!(rest(device), rest(region(before, "device")), "{bundle}: Column-Pairs changed more than the operands' load");
    }
}

/// Column-Stage between two kernel files (see the test above).
fn column_stage_stages_the_bias(before: &str, after: &str, bias: &str, what: &str) {
    assert_eq!(region(after, "macros"), region(before, "macros"), "{what}: Column-Stage changed the macros");
    let device = region(after, "device");
    for expected in [
        "peak_mbar_arrive_expect_tx(&full[s], STAGE_BYTES + (last ? COL_BOX_BYTES : 0));",
        "if (last) peak_tma_load_2d(col_slots + s * COL_SLOT_BYTES, &tma_col, bx * TILE_N, 0, &full[s]);",
        "const __grid_constant__ PeakTensorMap tma_col,",
        "EPILOGUE_COL_STAGED(col_slot, gc - bx * TILE_N)",
    ] {
        assert!(device.contains(expected), "{what}: missing {expected:?} in the device region");
    }
    assert!(!device.contains("EPILOGUE_COL(gc)"), "{what}: the consumers still load the bias from global memory");
    // Read from the tile's last stage before that stage is released (the arrival after the drain).
    let read = device.find("EPILOGUE_COL_STAGED(col_slot").unwrap();
    let drain = device.find("peak_wgmma_wait<0>();").unwrap();
    let release = drain + device[drain..].find("peak_mbar_arrive_cluster(&empty[(it - 1) % NUM_STAGES], r);").unwrap();
    assert!(read < release, "{what}: the slot is read after its stage is released");
    // The consumers' mainloop, up to the per-column operands, is the parent's (comments and the
    // slot's pointer aside).
    let mainloop = |text: &str| -> String {
        let from = text.find("peak_setmaxnreg_inc").unwrap();
        let to = from + text[from..].find("float colv[").unwrap();
        text[from..to].lines().map(str::trim).filter(|l| !l.starts_with("//") && !l.contains("col_slot")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(mainloop(device), mainloop(region(before, "device")), "{what}: the consumers' mainloop changed");
    let host = region(after, "host");
    let map = format!("cuda_tensor_map(bias, \"{bias}\", [N, 1], [N * 2], [WGMMA_N, 1], \"none\")");
    for expected in [map.as_str(), "NUM_STAGES * ((WGMMA_N * 2 + 127) / 128 * 128)"] {
        assert!(host.contains(expected), "{what}: missing {expected:?} in the host region:\n{host}");
    }
}

/// Multicast-A between two kernel files: the device region with MCAST_A = 0 (every `#if
/// MCAST_A` part dropped, its `#else` part kept) is the parent's; the MCAST_A = 1 parts give
/// the cluster's blocks one tile-row (`bx = uc * CLUSTER_M + rank` for the producer and the
/// consumers alike) and copy A's tile in CLUSTER_M multicast parts, B by each block alone; the
/// host checks whole clusters along N and cuts A's box; the macros are untouched.
fn multicast_a_shares_a(before: &str, after: &str, manifest: &str, what: &str) {
    let (device, mut with_0, mut with_1) = (region(after, "device"), String::new(), String::new());
    // (inside an `#if MCAST_A`, in its `#else`, nested `#if` depth)
    let (mut state, mut depth) = (None, 0);
    for line in device.lines() {
        let t = line.trim();
        match (state, t) {
            (None, "#if MCAST_A") => state = Some(false),
            (Some(false), "#else") if depth == 0 => state = Some(true),
            (Some(_), "#endif") if depth == 0 => state = None,
            _ => {
                if state.is_some() && t.starts_with("#if") {
                    depth += 1;
                } else if state.is_some() && t == "#endif" {
                    depth -= 1;
                }
                match state {
                    Some(false) => with_1.push_str(&format!("{line}\n")),
                    _ => with_0.push_str(&format!("{line}\n")),
                }
            }
        }
    }
    // One tile per block: the cluster's shape is the one line outside `#if MCAST_A` (comments aside).
    let (clusters_along_m, either) = ("__cluster_dims__(1, CLUSTER_M, 1)", "__cluster_dims__(MCAST_A ? CLUSTER_M : 1, MCAST_A ? 1 : CLUSTER_M, 1)");
    let persistent = !device.contains(either);
    let code = |text: &str| text.trim_end().lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let parent = if persistent { region(before, "device").to_string() } else { region(before, "device").replace(clusters_along_m, either) };
    assert_eq!(code(&with_0), code(&parent), "{what}: with MCAST_A = 0 the device region is not the parent's");
    if persistent {
        assert_eq!(with_1.matches("const int bx = uc * CLUSTER_M + rank;").count(), 2, "{what}: the producer and the consumers place tiles alike:\n{with_1}");
    }
    assert!(with_1.contains("peak_tma_load_2d_multicast(a_stage + rank * (A_STAGE_BYTES / CLUSTER_M), &tma_a, "), "{what}:\n{with_1}");
    // The tile's first row (`by` placed by the schedule, or BY from the block index) plus this block's part.
    assert!(with_1.contains(" * TILE_M + rank * (TILE_M / CLUSTER_M), &full[s], (unsigned short)((1 << CLUSTER_M) - 1));"), "{what}:\n{with_1}");
    assert!(
        with_1.contains("peak_tma_load_2d(b_stage + c * 8192, &tma_b, ") && !with_1.contains("&tma_b, t * 64, bx * TILE_N + 64 * c, &full[s], (unsigned"),
        "{what}: B loaded by each block alone:\n{with_1}"
    );
    let host = region(after, "host");
    for expected in ["invalid(\"the column blocks do not form whole clusters of CLUSTER_M\")", "if MCAST_A == 1 { tile_m / CLUSTER_M } else { tile_m }"] {
        assert!(host.contains(expected), "{what}: missing {expected:?} in the host region:\n{host}");
    }
    assert_eq!(region(after, "macros"), region(before, "macros"), "{what}: Multicast-A changed the macros");
    assert!(manifest.contains("[tuning.MCAST_A]\nvalues = [0, 1]"), "{what}: MCAST_A is not a tuning parameter:\n{manifest}");
}

/// Three-Consumers on a warp-specialised tip (`parent`'s source, the step's `show`): only the
/// two register budgets changed (now following WG_M), beside a comment that says why, and WG_M
/// and BLOCK_Y may be 3 with the accumulator bound for three consumers.
fn three_consumers_changes_only_the_budgets(parent: &str, tip: &serde_json::Value, what: &str) {
    let files = tip["files"].as_object().unwrap();
    let after = files.iter().find(|(name, _)| name.ends_with(".cu")).map(|(_, text)| text.as_str().unwrap()).unwrap();
    let budgets = parent
        .replace("peak_setmaxnreg_dec<40>();", "peak_setmaxnreg_dec<(WG_M > 2 ? 32 : 40)>();")
        .replace("peak_setmaxnreg_inc<232>();", "peak_setmaxnreg_inc<(WG_M > 2 ? 160 : 232)>();");
    let without_comment: String = after
        .lines()
        .filter(|l| !l.contains("share the SM's 65,536 registers") && !l.contains("= 64,512 with two consumers"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(without_comment.trim_end(), budgets.trim_end(), "{what}: Three-Consumers changed more than the two budgets");
    let manifest = tip["files"]["peak.toml"].as_str().unwrap();
    for name in ["WG_M", "BLOCK_Y"] {
        assert!(manifest.contains(&format!("[tuning.{name}]\nvalues = [1, 2, 3]")), "{what}: {name} is not widened to 3:\n{manifest}");
    }
    assert!(manifest.contains("WG_M < 3 || FRAG_M * WGMMA_N <= 128"), "{what}: the accumulator bound for three consumers is missing");
}

/// Cluster-Split-K on the decode tip: the K_SPLITS splits of a unit are blocks of one cluster
/// (CLUSTER_M tile-rows x K_SPLITS splits, the split the block's, not the item's), multicast
/// and stage releases stay among the blocks of one split, each warpgroup counts its splits in
/// on two alternating barriers (release and acquire at cluster scope) and adds its share of
/// the partial sums in split order from L2; the reduction kernel and its launch are gone; the
/// unsplit epilogue is unchanged.
fn cluster_split_k_reduces_in_the_cluster(parent: &str, tip: &str) {
    let unsplit = |text: &str| text.split("#if K_SPLITS == 1").nth(1).unwrap().split("#else").next().unwrap().to_string();
    assert_eq!(unsplit(parent), unsplit(tip), "the K_SPLITS == 1 epilogue changed");
    assert!(parent.contains("gemm_nt_bias_splitk_reduce"), "the parent reduces in a second kernel");
    assert!(!tip.contains("gemm_nt_bias_splitk_reduce"), "the reduction kernel is still there");
    let (device, host) = (region(tip, "device"), region(tip, "host"));
    for expected in [
        "__cluster_dims__(1, CLUSTER_M * K_SPLITS, 1)",
        "const unsigned rank = crank % CLUSTER_M;",
        "const int split = crank / CLUSTER_M;",
        "clusters = gridDim.y / (CLUSTER_M * K_SPLITS)",
        "(unsigned short)(((1 << CLUSTER_M) - 1) << (split * CLUSTER_M))",
        "split * CLUSTER_M + r);",
        "peak_mbar_init(&reduced[i][b], K_SPLITS);",
        "peak_fence_cluster();",
        "peak_mbar_arrive_release(&reduced[wg][done % 2], s * CLUSTER_M + rank);",
        "peak_mbar_wait_acquire(&reduced[wg][done % 2], (done / 2) & 1);",
        // The share: rows inside C only, column pairs, every load of a batch before its first add.
        "const int rows = min(64 * FRAG_M, GEMM_M - row0);",
        "part[b][s] = __ldcg(reinterpret_cast<const float2*>(&PARTIAL_AT(s, gr, gc)));",
        "for (int s = 0; s < K_SPLITS; ++s) { sum.x += part[b][s].x; sum.y += part[b][s].y; }",
        "C_AT(gr, gc) = EPILOGUE(sum.x, gr, gc);",
        "C_AT(gr, gc + 1) = EPILOGUE(sum.y, gr, gc + 1);",
        "mbarrier.arrive.release.cluster.shared::cluster.b64",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
    ] {
        assert!(device.contains(expected), "missing {expected:?} in the Cluster-Split-K device region");
    }
    assert!(!device.contains("u % units") && !device.contains("< work"), "the blocks still walk work items");
    for expected in [
        "if CLUSTER_M * K_SPLITS > 8 {",
        "let most = COMPUTE_UNITS / (CLUSTER_M * K_SPLITS);",
        "let clusters = ceil_div(units, TILES_PER_CTA);",
        "[1, clusters * CLUSTER_M * K_SPLITS]",
        "WG_M * 2 * 8 > MAX_SHARED_BYTES",
    ] {
        assert!(host.contains(expected), "missing {expected:?} in the Cluster-Split-K host region");
    }
}

/// Pair-Round on a Hopper tip of C's type `dtype` ("bf16" or "f16"): EPILOGUE_F32 and
/// EPILOGUE_F32_WITH are EPILOGUE and EPILOGUE_WITH without their final rounding (the old
/// macros kept), and every pair the staging rounded element by element and packed is
/// rounded in one call from those f32 values, with the same guards and zero outside C.
fn pair_round_rounds_each_pair_once(parent: &str, tip: &str, dtype: &str) {
    let (round, pack, pair) = if dtype == "bf16" {
        ("__float2bfloat16", "__halves2bfloat162(e0, e1)", "__floats2bfloat162_rn(f0, f1)")
    } else {
        ("__float2half", "__halves2half2(e0, e1)", "__floats2half2_rn(f0, f1)")
    };
    let define =
        |text: &str, name: &str| text.lines().find(|l| l.starts_with(&format!("#define {name}("))).map(|l| l.split("//").next().unwrap().trim().to_string());
    for (old, new) in [("EPILOGUE", "EPILOGUE_F32"), ("EPILOGUE_WITH", "EPILOGUE_F32_WITH")] {
        let before = define(parent, old).unwrap();
        assert_eq!(define(tip, old).as_deref(), Some(before.as_str()), "{old} changed");
        // `#define NAME(args) (ROUND(VALUE))` in the parent; `#define NEW(args) (VALUE)` in the tip.
        let (head, body) = before.split_once(") (").unwrap();
        let value = body.strip_prefix(&format!("{round}(")).and_then(|v| v.strip_suffix("))")).unwrap_or_else(|| panic!("{before}"));
        let expected = format!("{}) ({value})", head.replacen(old, new, 1));
        assert_eq!(define(tip, new).as_deref(), Some(expected.as_str()), "{new} is {old} without its rounding");
    }
    let device = |text: &str| region(text, "device").to_string();
    let (before, after) = (device(parent), device(tip));
    let packs = before.matches(pack).count();
    assert!(packs > 0, "the parent packs rounded pairs");
    assert!(!after.contains(pack), "a pair is still rounded element by element");
    assert_eq!(after.matches(pair).count(), packs, "one paired rounding per pair the parent packed");
    for line in before.lines().filter(|l| l.contains("EPILOGUE")) {
        let line = line.trim();
        let expected = line.replace("EPILOGUE_WITH(", "EPILOGUE_F32_WITH(").replace("EPILOGUE(", "EPILOGUE_F32(").replace(" : zero;", " : 0.0f;");
        let expected = expected.replace(&format!("const {} e", if dtype == "bf16" { "__nv_bfloat16" } else { "__half" }), "const float f");
        assert!(after.contains(&expected) || line.starts_with("//"), "the value {line:?} is not kept as {expected:?}");
    }
}

/// Stmatrix-Staging on a Hopper tip: every loop that staged accumulator pairs with one 4-byte
/// store each now stages four 8 x 8 blocks per stmatrix, at the address the prompt gives
/// (row rr of block bi = lane / 8, the block's group jj + bi / 2 and row half bi % 2); the
/// pairs are made by the same expressions (every EPILOGUE line of the parent is still there,
/// and each two-element vector it built is now packed for stmatrix); nothing outside the
/// device region changed.
fn stmatrix_staging_keeps_the_values(parent: &str, tip: &str) {
    for name in ["macros", "host"] {
        assert_eq!(region(parent, name), region(tip, name), "Stmatrix-Staging changed the {name} region");
    }
    let (before, after) = (region(parent, "device"), region(tip, "device"));
    let staging_stores: Vec<&str> = before.lines().filter(|l| l.contains("*>(box + peak_swizzle_128b(r, (c % 64) * 2)) = ")).collect();
    assert!(!staging_stores.is_empty(), "the parent stages pairs with 4-byte stores");
    assert!(!after.contains("*>(box + peak_swizzle_128b(r, (c % 64) * 2)) = "), "a 4-byte staging store is left");
    assert!(after.contains("stmatrix.sync.aligned.m8n8.x4.shared.b16"), "the stmatrix snippet");
    assert!(after.contains("const int bi = (WG_THREAD % 32) / 8, rr = WG_THREAD % 8;"));
    let address = "const unsigned char* row = box + peak_swizzle_128b(16 * w + 8 * (bi % 2) + rr, 16 * ((jj + bi / 2) % 8));";
    assert_eq!(after.matches(address).count(), staging_stores.len(), "one stmatrix loop per staging loop");
    assert_eq!(after.matches("peak_stmatrix_x4(row, p[0], p[1], p[2], p[3]);").count(), staging_stores.len());
    assert_eq!(after.matches("const int j = jj + t / 2, h = t % 2;").count(), staging_stores.len(), "block t is group jj + t / 2, half t % 2");
    for store in staging_stores {
        let pair = store.split(" = ").nth(1).unwrap().trim_end_matches(';');
        assert!(after.contains(&format!("peak_pack_16x2({pair});")), "the pair {pair} is no longer packed");
    }
    for line in before.lines().filter(|l| l.contains("EPILOGUE")) {
        assert!(after.contains(line.trim()), "the value line {:?} changed", line.trim());
    }
}

/// Shared-Window on the Hopper tip: the dynamic base, rounded up to 1024 bytes, is the shared
/// array plus an offset (so every access through it is a shared one), and no other line of
/// the kernel changed.
fn shared_window_changes_only_the_base(parent: &str, tip: &str) {
    let (before, after) = the_one_changed_line(parent, tip, "Shared-Window");
    assert!(before.contains("reinterpret_cast<size_t>(smem_raw)"), "{before:?}");
    assert_eq!(after.trim(), "unsigned char* base = smem_raw + ((1024 - (peak_smem_u32(smem_raw) & 1023)) & 1023);");
}

/// Epilogue-Ring carried to a kernel it was not written for: the case study's square NN f16
/// matmul (no EPILOGUE, no bounds checks, a row-major B), on the branch `persistent` of
/// examples/workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle after
/// Consumer-Overlap, written by the agent following the prompt and compiled by NVRTC. Its
/// staging keeps the plain conversion, box by box.
#[test]
fn epilogue_ring_carries_to_the_square_f16_kernel() {
    let env = Env::new();
    let wf = env.path("square");
    unbundle(&example("workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle"), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let stmatrix = show("HEAD");
    let ring = show(stmatrix["parents"][0].as_str().unwrap());
    let overlap = show(ring["parents"][0].as_str().unwrap());
    assert_eq!(
        (stmatrix["meta"]["transformation"].as_str(), ring["meta"]["transformation"].as_str(), overlap["meta"]["transformation"].as_str()),
        (Some("Stmatrix-Staging"), Some("Epilogue-Ring"), Some("Consumer-Overlap"))
    );
    deferred_by_the_agent_and_compiled(&ring);
    deferred_by_the_agent_and_compiled(&stmatrix);
    let tip = ring["files"]["matmul.cu"].as_str().unwrap();
    epilogue_ring_stages_box_by_box(tip);
    assert!(tip.contains("__floats2half2_rn(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1])"), "the plain conversion, as before");
    // Stmatrix-Staging carried there too: the same conversion, packed for stmatrix.
    stmatrix_staging_keeps_the_values(tip, stmatrix["files"]["matmul.cu"].as_str().unwrap());
}

/// Row-Box and Three-Consumers carried to a kernel they were not written for: the square NN
/// f16 case-study kernel (Stmatrix-Staging tip of the branch persistent), each on its own
/// branch, written by the agent following the prompts and compiled by NVRTC. Its rows are the
/// argument `n` (no GEMM_M), which Row-Box's text now names.
#[test]
fn row_box_and_three_consumers_carry_to_the_square_f16_kernel() {
    let env = Env::new();
    let wf = env.path("square");
    unbundle(&example("workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle"), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let tip = show("persistent");
    let parent = tip["files"]["matmul.cu"].as_str().unwrap();
    let (row_box, three) = (show("row-box"), show("three-consumers"));
    for (step, name) in [(&row_box, "Row-Box"), (&three, "Three-Consumers")] {
        assert_eq!(step["meta"]["transformation"].as_str(), Some(name));
        assert_eq!(step["parents"][0], tip["id"], "{name} starts at the square kernel's tip");
        deferred_by_the_agent_and_compiled(step);
    }
    let map = "cuda_tensor_map(A, \"f16\", [n, n], [n * 2], [64, if n < tile_m { ceil_div(n, 8) * 8 } else { tile_m }], \"128b\")";
    row_box_expects_the_rows_that_exist(parent, row_box["files"]["matmul.cu"].as_str().unwrap(), row_box["files"]["peak.toml"].as_str().unwrap(), "n", map);
    three_consumers_changes_only_the_budgets(parent, &three, "square f16");
}

/// Epilogue-Ring on any line: the staging buffer is a ring of EPI_BOXES boxes per consumer
/// warpgroup, each box written only after the issuing thread has seen the store that last
/// read its slot finish reading (at most EPI_BOXES - 1 younger groups pending), one bulk
/// group per box, the slot counted across tiles, the final wait before the block exits, and
/// the host sizing the ring instead of the tile.
fn epilogue_ring_stages_box_by_box(tip: &str) {
    let device = region(tip, "device");
    let host = region(tip, "host");
    for expected in [
        "int boxes = 0;",
        "staging + (wg * EPI_BOXES + ",
        "boxes % EPI_BOXES",
        "if (WG_THREAD == 0) peak_tma_store_wait_read<EPI_BOXES - 1>();",
        "peak_tma_store_commit();",
        "++boxes;",
        "for (int j = 8 * b; j < 8 * b + 8; ++j) {",
    ] {
        assert!(device.contains(expected), "missing {expected:?} in Epilogue-Ring's device region");
    }
    let count = device.find("int boxes = 0;").unwrap();
    let tiles = device[count..].find("for (").unwrap() + count;
    assert!(device[count..tiles].lines().count() <= 2, "the count is declared right before the loop over tiles, not per tile");
    assert_eq!(device.matches("peak_tma_store_wait();").count(), 1, "one full wait: before the block exits");
    assert!(host.contains("WG_M * EPI_BOXES * 8192"), "the host sizes the ring");
    assert!(!host.contains("tile_m * WGMMA_N * 2"), "not the whole tile");
}

/// Epilogue-Hoist on any line (`before` is its parent): EPILOGUE split into EPILOGUE_COL (the
/// bias, read per column) and EPILOGUE_WITH with EPILOGUE itself kept; the per-column values
/// loaded into registers after the k-loop and before the wait that lets the accumulators be
/// read; the staging loop twice, the interior copy without a bounds check, the other with the
/// guard it had; EPILOGUE no longer called per element; the stores and barriers unchanged.
fn epilogue_hoist_keeps_the_values(after: &str, before: &str) {
    let macros = region(after, "macros");
    for expected in ["#define EPILOGUE(acc, r, c)", "#define EPILOGUE_COL(c) (", "bias[(c)]", "#define EPILOGUE_WITH(acc, col, r, c) ("] {
        assert!(macros.contains(expected), "missing {expected:?} in Epilogue-Hoist's macros");
    }
    let device = region(after, "device");
    let load = device.find("colv[j][e] = (gc < GEMM_N) ? EPILOGUE_COL(gc) : 0.0f;").expect("the per-column values are loaded");
    let wait = device[load..].find("peak_wgmma_wait<0>();").expect("before the accumulators are read");
    assert!(!device[load..load + wait].contains("PEAK_WGMMA("), "loaded after the k-loop's last wgmma");
    let interior = device.find("if (interior) {").unwrap();
    let otherwise = device[interior..].find("} else {").unwrap() + interior;
    assert!(!device[interior..otherwise].contains("GEMM_M &&"), "the interior copy stages without bounds checks");
    assert!(device[otherwise..].contains("(gr < GEMM_M && gc + 1 < GEMM_N) ? EPILOGUE_WITH("), "the edge copy keeps the guard");
    assert!(!device.contains("EPILOGUE(acc["), "no per-element EPILOGUE left");
    let count = |text: &str, what: &str| text.matches(what).count();
    let before_device = region(before, "device");
    for unchanged in ["peak_tma_store_2d(", "peak_bar_sync(", "peak_fence_proxy_async();"] {
        assert_eq!(count(device, unchanged), count(before_device, unchanged), "{unchanged} as before");
    }
}

/// Persistent-Tiles' code on the twin: a grid of at most one block per SM whose producer and
/// consumers loop over the tiles with one running k-step counter (stage and phase never reset
/// per tile), the epilogue staged in a buffer of its own that the previous tile's TMA stores
/// must have finished reading, and the tile's place in C from the loop, not the block index.
/// At the validation size (200 x 136 x 88: 2 to 12 tiles) every TILES_PER_CTA above 1 gives
/// fewer blocks than tiles, so the sampled configurations with it run the tile loop more
/// than once per block; at the tuned sizes it is declared invalid where the SMs cap the grid.
fn persistent_tip_walks_the_tiles(tip: &str, ty: &str) {
    let device = region(tip, "device");
    let host = region(tip, "host");
    for expected in [
        "const int cluster = blockIdx.y / CLUSTER_M, clusters = gridDim.y / CLUSTER_M;",
        "unsigned char* staging = base + NUM_STAGES * (A_STAGE_BYTES + B_STAGE_BYTES);",
        "peak_grouped_tile(u, unit_rows, tiles_n, 8, ur, bx);",
        "if (it >= NUM_STAGES) peak_mbar_wait(&empty[s], ((it / NUM_STAGES) - 1) & 1);",
        "peak_mbar_wait(&full[s], (it / NUM_STAGES) & 1);",
        "peak_tma_load_2d(a_stage, &tma_a, t * 64, by * TILE_M, &full[s]);",
        "peak_tma_store_2d(&tma_c, bx * TILE_N + 64 * b, by * TILE_M, staging + b * (64 * WG_M * 128));",
    ] {
        assert!(device.contains(expected), "missing {expected:?} in the persistent tip:\n{device}");
    }
    // Producer and consumers both walk the tiles, and both k-loops advance the running counter.
    assert_eq!(device.matches("for (int u = cluster; u < units; u += clusters)").count(), 2, "{device}");
    assert_eq!(device.matches("for (int t = 0; t < KT; ++t, ++it)").count(), 2, "{device}");
    assert!(!device.contains("BX *") && !device.contains("BY *"), "the tile comes from the loop");
    // Inside the consumers' tile loop: wait for the previous stores' reads, then the barrier,
    // stage (C's type), issue the stores without waiting; the last tile's stores are waited
    // for after the loop.
    let consumers = device.split("peak_setmaxnreg_inc<232>();").nth(1).unwrap();
    let wait = consumers.find("peak_tma_store_wait();").expect("the staging buffer is waited for");
    let barrier = consumers.find("peak_bar_sync(1, 128 * WG_M);").unwrap();
    let stage = consumers.find(&format!("const {ty} e0")).unwrap();
    let store = consumers.find("peak_tma_store_2d(").unwrap();
    assert!(wait < barrier && barrier < stage && stage < store, "{consumers}");
    let after = consumers[store..].find("peak_tma_store_wait();").map(|i| store + i).expect("the last stores are waited for");
    assert!(consumers[store..after].matches('}').count() >= 2, "the final wait is outside the tile loop: {consumers}");
    for expected in [
        "let most = COMPUTE_UNITS / CLUSTER_M;",
        "let clusters = ceil_div(units, TILES_PER_CTA);",
        "if TILES_PER_CTA > 1 && ceil_div(units, TILES_PER_CTA) >= most { invalid(",
        "tile_m * WGMMA_N * 2",
        "launch(\"gemm_nt_bias\", [1, clusters * CLUSTER_M], [BLOCK_X, BLOCK_Y + 1], smem,",
    ] {
        assert!(host.contains(expected), "missing {expected:?} in the persistent host:\n{host}");
    }
}

/// Consumer-Overlap's code on the twin (after Persistent-Tiles): each consumer warpgroup keeps
/// one wgmma batch in flight (`peak_wgmma_wait<1>()` in the k-loop) and releases a stage one
/// k-step late (`empty[(it - 1) % NUM_STAGES]`, inside the loop from t = 1 and once after it,
/// after `peak_wgmma_wait<0>()`), so every k-step is released exactly once; each warpgroup
/// computes FRAG_M blocks of 64 rows (TILE_M = 64 * FRAG_M * WG_M) and runs its epilogue alone:
/// its own boxes of 64 x 64, its own named barrier `1 + wg` of 128 threads, its own TMA stores
/// of 64-row boxes and its own wait for their reads. WGMMA_N = 192 has its instruction, and
/// the host stores C in boxes of [64, 64] with the staging buffer still the whole tile.
fn consumer_overlap_tip_keeps_a_batch_in_flight(tip: &str, dtype: &str, ty: &str) {
    let macros = region(tip, "macros");
    let device = region(tip, "device");
    let host = region(tip, "host");
    for expected in [
        "#define TILE_M (64 * FRAG_M * WG_M)".to_string(),
        format!("#elif WGMMA_N == 192\n#define PEAK_WGMMA peak_wgmma_{dtype}_m64n192k16<0>\n#else"),
        // The snippet wgmma_n192, inserted by peak.
        format!("wgmma.mma_async.sync.aligned.m64n192k16.f32.{dtype}.{dtype}"),
    ] {
        assert!(macros.contains(&expected), "missing {expected:?} in the macros:\n{macros}");
    }
    for expected in [
        // The schedule and the producer as Persistent-Tiles left them.
        "if (it >= NUM_STAGES) peak_mbar_wait(&empty[s], ((it / NUM_STAGES) - 1) & 1);".to_string(),
        "peak_tma_load_2d(a_stage, &tma_a, t * 64, by * TILE_M, &full[s]);".into(),
        "peak_mbar_wait(&full[s], (it / NUM_STAGES) & 1);".into(),
        // FRAG_M blocks of 64 rows per warpgroup, one wgmma each per k16 slice.
        "float acc[FRAG_M][WGMMA_N / 2];".into(),
        "peak_wgmma_desc(a_stage + (wg * FRAG_M + i) * 64 * 128, 16, 1024);".into(),
        "PEAK_WGMMA(acc[i], da + 2 * k, db + 2 * k, 1);".into(),
        // The warpgroup's own boxes, rows and stores.
        "unsigned char* box = staging + ((wg * FRAG_M + i) * (WGMMA_N / 64) + c / 64) * 8192;".into(),
        "const int gr = by * TILE_M + 64 * (wg * FRAG_M + i) + r, gc = bx * TILE_N + c;".into(),
        "(gr < GEMM_M && gc < GEMM_N) ? EPILOGUE(acc[i][4 * j + 2 * h], gr, gc) : zero;".into(),
        format!("const {ty} zero"),
        "peak_tma_store_2d(&tma_c, bx * TILE_N + 64 * b, by * TILE_M + 64 * (wg * FRAG_M + i), staging + ((wg * FRAG_M + i) * (WGMMA_N / 64) + b) * 8192);"
            .into(),
    ] {
        assert!(device.contains(&expected), "missing {expected:?} in the consumer-overlap tip:\n{device}");
    }
    assert_eq!(device.matches("for (int u = cluster; u < units; u += clusters)").count(), 2, "{device}");
    assert_eq!(device.matches("for (int t = 0; t < KT; ++t, ++it)").count(), 2, "{device}");
    let consumers = device.split("peak_setmaxnreg_inc<232>();").nth(1).unwrap();
    // One batch in flight in the k-loop; all retired before the epilogue; the late release,
    // inside the loop (from t = 1) and once after it, never of the current stage.
    let release = "peak_mbar_arrive_cluster(&empty[(it - 1) % NUM_STAGES], r);";
    assert_eq!(consumers.matches(release).count(), 2, "{consumers}");
    assert!(!consumers.contains("peak_mbar_arrive_cluster(&empty[s]"), "no release of the current stage: {consumers}");
    assert_eq!(consumers.matches("peak_wgmma_wait<1>();").count(), 1, "{consumers}");
    assert_eq!(consumers.matches("peak_wgmma_wait<0>();").count(), 1, "{consumers}");
    let kloop = consumers.find("for (int t = 0; t < KT; ++t, ++it)").unwrap();
    let commit = consumers.find("peak_wgmma_commit();").unwrap();
    let in_flight = consumers.find("peak_wgmma_wait<1>();").unwrap();
    let late = consumers.find("if (t > 0 && WG_THREAD == 0)").expect("the release waits for k-step 1");
    let first_release = consumers.find(release).unwrap();
    let drained = consumers.find("peak_wgmma_wait<0>();").unwrap();
    let last_release = consumers.rfind(release).unwrap();
    assert!(
        kloop < commit && commit < in_flight && in_flight < late && late < first_release && first_release < drained && drained < last_release,
        "{consumers}"
    );
    assert!(consumers[first_release..drained].contains('}'), "wait<0> is after the k-loop: {consumers}");
    // Each warpgroup's epilogue alone: wait for its previous stores' reads, its own barrier,
    // stage, fence, its barrier again, its stores; its last stores waited for after the loop.
    assert!(
        !consumers.contains("peak_bar_sync(1, 128 * WG_M)") && !consumers.contains("wg == 0 &&"),
        "no barrier or thread shared by the warpgroups: {consumers}"
    );
    assert!(!device.contains("__syncthreads()"), "{device}");
    assert_eq!(consumers.matches("peak_bar_sync(1 + wg, 128);").count(), 2, "{consumers}");
    assert_eq!(consumers.matches("if (WG_THREAD == 0) peak_tma_store_wait();").count(), 2, "{consumers}");
    let wait = consumers.find("if (WG_THREAD == 0) peak_tma_store_wait();").unwrap();
    let barrier = consumers.find("peak_bar_sync(1 + wg, 128);").unwrap();
    let stage = consumers.find(&format!("const {ty} e0")).unwrap();
    let fence = consumers.find("peak_fence_proxy_async();").unwrap();
    let barrier2 = consumers.rfind("peak_bar_sync(1 + wg, 128);").unwrap();
    let store = consumers.find("peak_tma_store_2d(").unwrap();
    let after = consumers.rfind("if (WG_THREAD == 0) peak_tma_store_wait();").unwrap();
    assert!(last_release < wait && wait < barrier && barrier < stage && stage < fence && fence < barrier2 && barrier2 < store && store < after, "{consumers}");
    assert!(consumers[store..after].matches('}').count() >= 2, "the final wait is outside the tile loop: {consumers}");
    for expected in [
        "let tile_m = 64 * FRAG_M * WG_M;".to_string(),
        // The staging buffer is still the whole tile: WG_M * FRAG_M * WGMMA_N / 64 boxes of 64 x 64.
        "tile_m * WGMMA_N * 2".into(),
        format!("cuda_tensor_map(inp, \"{dtype}\", [K, M], [K * 2], [64, tile_m], \"128b\")"),
        format!("cuda_tensor_map(out, \"{dtype}\", [N, M], [N * 2], [64, 64], \"128b\")"),
        "launch(\"gemm_nt_bias\", [1, clusters * CLUSTER_M], [BLOCK_X, BLOCK_Y + 1], smem,".into(),
    ] {
        assert!(host.contains(&expected), "missing {expected:?} in the consumer-overlap host:\n{host}");
    }
}

#[test]
fn gemm_nt_bias_bf16_walks_the_hopper_line_deferred() {
    hopper_twin_walks_the_line("bf16", "__nv_bfloat16", "__bfloat162float", "__float2bfloat16");
}

#[test]
fn gemm_nt_bias_f16_twin_walks_the_same_line_deferred() {
    hopper_twin_walks_the_line("f16", "__half", "__half2float", "__float2half");
}

/// The fp8 twin (examples/gemm-nt-bias-cuda-e4m3: e4m3 inp and weight, bf16 bias and out,
/// f32 accumulation, validated at 200 x 136 x 80) walked by the agent through the same line
/// with `--defer`, the prompts generalised to 8-bit inputs rather than overridden: both
/// shared tiles K-major from Tensor-Core on (ldmatrix cannot transpose bytes) with the k32
/// MMA, 16-byte copies of 16 fp8 (B's K-major tile through BT_AT), and from WGMMA on the k32
/// wgmma of the e4m3 kind, one 128-byte row (K_STEP = 128 fp8) per stage, e4m3 tensor maps
/// for the operands and a bf16 one for out.
#[test]
fn gemm_nt_bias_e4m3_walks_the_hopper_line_deferred() {
    let env = Env::new();
    let wf = env.path("e4m3");
    unbundle(&example("workflows/gemm-nt-bias-cuda-e4m3-deferred.bundle"), &wf);
    let line = first_parent_chain(&env, &wf);
    let steps: Vec<&str> = line.iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    assert_eq!(&steps[1..=HOPPER_CHAIN.len()], HOPPER_CHAIN);
    assert_eq!(&steps[HOPPER_CHAIN.len() + 1..], AFTER_TMA_STORE);
    for entry in &line[1..] {
        deferred_by_the_agent_and_compiled(&env.json(&["show", entry["id"].as_str().unwrap(), "-w", s(&wf), "--json"]));
    }
    let file = |i: usize| env.json(&["show", line[i]["id"].as_str().unwrap(), "-w", s(&wf), "--json"])["files"]["kernel.cu"].as_str().unwrap().to_string();
    let tensor_core = file(1 + HOPPER_CHAIN.iter().position(|t| *t == "Tensor-Core").unwrap());
    for expected in [
        "#define BS(k, c) Bs[c][k]",
        "PEAK_TILE_LOAD_T_COLMAJOR(Bs, B_AT, k0, BX * TILE_N, TILE_K, TILE_N, GEMM_K, GEMM_N, TID, NTHREADS);",
        "peak_ldmatrix_a(a, &AS(WARP_TILE_ROW + LANE % 16, kk + (LANE / 16) * 16));",
        "peak_ldmatrix_b_k8(b, &BS(kk + (LANE / 8) % 2 * 16, WARP_TILE_COL + LANE % 8 + (LANE / 16) * 8));",
        "peak_mma_16832_e4m3(acc[0], a, &b[0]);",
        "if TILE_K % 32 != 0 {",
    ] {
        assert!(tensor_core.contains(expected), "missing {expected:?} at Tensor-Core");
    }
    let pipelining = file(1 + HOPPER_CHAIN.iter().position(|t| *t == "Pipelining").unwrap());
    assert!(pipelining.contains("PEAK_TILE_LOAD_ASYNC_VEC(Bs[load_s], BT_AT, BX * TILE_N, load_k0, TILE_N, TILE_K, GEMM_N, GEMM_K, TID, NTHREADS);"));
    let tip = file(HOPPER_CHAIN.len() + 2);
    for expected in [
        "#define K_STEP (128 / (int)sizeof(__nv_fp8_e4m3))",
        "#define PEAK_WGMMA peak_wgmma_e4m3_m64n128k32",
        "#define PEAK_WGMMA peak_wgmma_e4m3_m64n192k32",
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
        "const int KT = (GEMM_K + K_STEP - 1) / K_STEP;",
        "#define EPILOGUE(acc, r, c) (__float2bfloat16((acc) + __bfloat162float(bias[(c)])))",
        "cuda_tensor_map(inp, \"e4m3\", [K, M], [K * elem_bytes], [k_step, tile_m], \"128b\")",
        "cuda_tensor_map(weight, \"e4m3\", [K, N], [K * elem_bytes], [k_step, 64], \"128b\")",
        "cuda_tensor_map(out, \"bf16\", [N, M], [N * 2], [64, 64], \"128b\")",
    ] {
        assert!(tip.contains(expected), "missing {expected:?} in the tip");
    }
    let device = region(&tip, "device");
    assert!(!device.contains("peak_wgmma_bf16") && !device.contains("k16<"), "8-bit wgmma only");
    consumer_overlap_tip_keeps_a_batch_in_flight_fp8(device);
    epilogue_hoist_keeps_the_values(&file(HOPPER_CHAIN.len() + 3), &tip);
    epilogue_ring_stages_box_by_box(&file(HOPPER_CHAIN.len() + 4));
    shared_window_changes_only_the_base(&file(HOPPER_CHAIN.len() + 4), &file(HOPPER_CHAIN.len() + 5));
    uniform_warpgroup_changes_only_the_index(&file(HOPPER_CHAIN.len() + 5), &file(HOPPER_CHAIN.len() + 6));
    stmatrix_staging_keeps_the_values(&file(HOPPER_CHAIN.len() + 6), &file(HOPPER_CHAIN.len() + 7));
    pair_round_rounds_each_pair_once(&file(HOPPER_CHAIN.len() + 7), &file(HOPPER_CHAIN.len() + 8), "bf16");
    // The branch ping-pong: Ping-Pong, Epilogue-Hoist and Epilogue-Ring on the Consumer-Overlap tip.
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let ring = show("ping-pong");
    let hoist = show(ring["parents"][0].as_str().unwrap());
    let turns = show(hoist["parents"][0].as_str().unwrap());
    assert_eq!(ring["meta"]["transformation"].as_str(), Some("Epilogue-Ring"));
    assert_eq!((hoist["meta"]["transformation"].as_str(), turns["meta"]["transformation"].as_str()), (Some("Epilogue-Hoist"), Some("Ping-Pong")));
    assert_eq!(turns["parents"][0], line[HOPPER_CHAIN.len() + 2]["id"], "Ping-Pong follows Consumer-Overlap");
    let source = |entry: &serde_json::Value| entry["files"]["kernel.cu"].as_str().unwrap().to_string();
    assert!(source(&turns).contains("peak_bar_arrive(3 + (1 - wg), 256);"));
    epilogue_hoist_keeps_the_values(&source(&hoist), &source(&turns));
    epilogue_ring_stages_box_by_box(&source(&ring));
}

/// Consumer-Overlap's device code on the fp8 line: the same schedule as the 16-bit tip.
fn consumer_overlap_tip_keeps_a_batch_in_flight_fp8(device: &str) {
    for expected in ["peak_wgmma_wait<1>();", "const __nv_bfloat16 zero", "PEAK_WGMMA(acc[i], da + 2 * k, db + 2 * k, 1);"] {
        assert!(device.contains(expected), "missing {expected:?} in the Consumer-Overlap tip");
    }
}

/// The branch `ping-pong` of the 16-bit twin `dtype`: Ping-Pong then Persistent-Split-K on the
/// Consumer-Overlap tip, and the branch `split-k-fixup` one step further (Split-K-Fixup, slower
/// on the H200 and so off the line the table measures), each written by the agent and
/// compile-checked (`--defer`). Ping-Pong:
/// whole tiles per consumer warpgroup, alternate tiles, turns on named barriers 3 and 4, one
/// owner's release per k-step (so `empty` expects CLUSTER_M arrivals). Persistent-Split-K:
/// KT counts one split's k-steps, the loops run over units * K_SPLITS items, the loads read
/// the split's k range, and with K_SPLITS > 1 raw f32 sums go to `partial` and a reduction
/// kernel applies EPILOGUE once, launched only then. Split-K-Fixup: that reduction moves into
/// the GEMM kernel, done by the split that counts in last (fence, count, fence, sum in split
/// order), on counters the host zeroes before every split launch only.
fn ping_pong_branch_takes_turns_and_splits_k(dtype: &str, ty: &str) {
    let env = Env::new();
    let wf = env.path(dtype);
    unbundle(&example(&format!("workflows/gemm-nt-bias-cuda-{dtype}-deferred.bundle")), &wf);
    let show = |rev: &str| env.json(&["show", rev, "-w", s(&wf), "--json"]);
    let parent = |entry: &serde_json::Value| show(entry["parents"][0].as_str().unwrap());
    let fixup = show("split-k-fixup");
    let hoist = show("ping-pong");
    let split = parent(&hoist);
    assert_eq!(fixup["parents"][0], split["id"], "Split-K-Fixup follows Persistent-Split-K");
    assert_eq!(hoist["meta"]["transformation"].as_str(), Some("Epilogue-Hoist"), "the branch ends with Epilogue-Hoist");
    let turns = parent(&split);
    let overlap = parent(&turns);
    assert_eq!(
        parent(&parent(&parent(&parent(&parent(&parent(&show("HEAD")))))))["id"],
        overlap["id"],
        "the bundle's HEAD (Epilogue-Hoist, Epilogue-Ring, Shared-Window, Uniform-Warpgroup, Stmatrix-Staging, Pair-Round) follows the Consumer-Overlap checkpoint the branch starts from"
    );
    for (entry, name) in [(&fixup, "Split-K-Fixup"), (&split, "Persistent-Split-K"), (&turns, "Ping-Pong"), (&overlap, "Consumer-Overlap")] {
        assert_eq!(entry["meta"]["transformation"].as_str(), Some(name), "{}", entry["meta"]);
    }
    for entry in [&fixup, &hoist, &split, &turns] {
        deferred_by_the_agent_and_compiled(entry);
    }
    // The branch decode: Shared-Window and Uniform-Warpgroup on the Persistent-Split-K
    // checkpoint (the decode rows' tip), one line each, then Stmatrix-Staging on its staging
    // of the whole tile (the form TMA-Store wrote, which Epilogue-Ring never ringed here),
    // then Cluster-Split-K and Row-Box.
    let row_box = show("decode");
    let cluster = parent(&row_box);
    let stmatrix = parent(&cluster);
    let uniform = parent(&stmatrix);
    let window = parent(&uniform);
    assert_eq!(window["parents"][0], split["id"], "the decode branch starts at Persistent-Split-K");
    for entry in [&row_box, &cluster, &stmatrix, &uniform, &window] {
        deferred_by_the_agent_and_compiled(entry);
    }
    let source = |entry: &serde_json::Value| entry["files"]["kernel.cu"].as_str().unwrap().to_string();
    shared_window_changes_only_the_base(&source(&split), &source(&window));
    uniform_warpgroup_changes_only_the_index(&source(&window), &source(&uniform));
    stmatrix_staging_keeps_the_values(&source(&uniform), &source(&stmatrix));
    cluster_split_k_reduces_in_the_cluster(&source(&stmatrix), &source(&cluster));
    let map = format!("cuda_tensor_map(inp, \"{dtype}\", [K, M], [K * 2], [64, if M < tile_m {{ ceil_div(M, 8) * 8 }} else {{ tile_m }}], \"128b\")");
    row_box_expects_the_rows_that_exist(&source(&cluster), &source(&row_box), row_box["files"]["peak.toml"].as_str().unwrap(), "GEMM_M", &map);
    let (last, tip, ping_pong) = (source(&fixup), source(&split), source(&turns));
    epilogue_hoist_keeps_the_values(&source(&hoist), &source(&split));
    let turns_device = region(&ping_pong, "device");
    for expected in [
        "peak_mbar_init(&empty[s], CLUSTER_M);",
        "if (wg == 1) peak_bar_arrive(3, 256);",
        "peak_bar_sync(3 + wg, 256);",
        "peak_bar_arrive(3 + (1 - wg), 256);",
        "const int it = tile * KT + t;",
        "const int gr = by * TILE_M + 64 * i + r, gc = bx * TILE_N + c;",
    ] {
        assert!(turns_device.contains(expected), "missing {expected:?} in Ping-Pong's device region:\n{turns_device}");
    }
    // The turn: the other warpgroup is let in after the last issue, before the drain.
    let handoff = turns_device.find("peak_bar_arrive(3 + (1 - wg), 256);").unwrap();
    assert!(handoff < turns_device.find("peak_wgmma_wait<0>();").unwrap(), "{turns_device}");
    assert!(region(&ping_pong, "macros").contains("#define TILE_M (64 * FRAG_M)"));
    assert!(region(&ping_pong, "host").contains("WG_M * tile_m * WGMMA_N * 2"));

    let device = region(&tip, "device");
    let host = region(&tip, "host");
    assert!(region(&tip, "macros").contains("#define PARTIAL_AT(s, r, c) partial[((size_t)(s) * (GEMM_M) + (r)) * (GEMM_N) + (c)]"));
    for expected in [
        format!("{ty}* out, int M, int N, int K, float* partial)"),
        "const int KT = (((GEMM_K) + TILE_K - 1) / TILE_K + K_SPLITS - 1) / K_SPLITS;".into(),
        "const int work = units * K_SPLITS;".into(),
        "for (int u = cluster; u < work; u += clusters)".into(),
        "for (int tile = wg; cluster + tile * clusters < work; tile += 2)".into(),
        "peak_tma_load_2d(a_stage, &tma_a, (split * KT + t) * TILE_K, by * TILE_M, &full[s]);".into(),
        "#if K_SPLITS == 1".into(),
        "*reinterpret_cast<float2*>(&PARTIAL_AT(split, gr, gc))".into(),
        format!("gemm_nt_bias_splitk_reduce(const {ty}* bias, {ty}* out, int M, int N, int K, float* partial)"),
        "for (int s = 0; s < K_SPLITS; ++s) sum += PARTIAL_AT(s, r, c);".into(),
        "C_AT(r, c) = EPILOGUE(sum, r, c);".into(),
    ] {
        assert!(device.contains(&expected), "missing {expected:?} in Persistent-Split-K's device region:\n{device}");
    }
    assert_eq!(device.matches("peak_grouped_tile(u % units, unit_rows, tiles_n, 8, ur, bx);").count(), 2, "{device}");
    // Only the unsplit build stores C from the GEMM kernel; the split build never stages it.
    let (unsplit, split_build) = device.split_once("#else").unwrap();
    assert!(unsplit.contains("peak_tma_store_2d(") && !split_build.split("#endif").next().unwrap().contains("peak_tma_store_2d("), "{device}");
    for expected in [
        "if (K_SPLITS - 1) * k_per_split >= k_steps { invalid(",
        "let partial = alloc(\"f32\", if K_SPLITS > 1 { K_SPLITS * M * N } else { 1 });",
        "let clusters = ceil_div(units * K_SPLITS, TILES_PER_CTA);",
        "bias, out, M, N, K, partial);\nif K_SPLITS > 1 {\n    launch(\"gemm_nt_bias_splitk_reduce\", [ceil_div(M * N, 256)], [256], 0, bias, out, M, N, K, partial);",
    ] {
        assert!(host.contains(expected), "missing {expected:?} in Persistent-Split-K's host region:\n{host}");
    }

    // bf16 only: the same transformation walked on the cooperative line (Consumer-Overlap,
    // whose consumers keep a running `it`), following its text as written: KT per split
    // keeps that counter exact with no other change.
    if dtype == "bf16" {
        let cooperative = show("split-k-cooperative");
        assert_eq!(cooperative["meta"]["transformation"].as_str(), Some("Persistent-Split-K"), "{}", cooperative["meta"]);
        assert_eq!(cooperative["parents"][0], overlap["id"]);
        let code = source(&cooperative);
        let device = region(&code, "device");
        assert_eq!(device.matches("for (int u = cluster; u < work; u += clusters)").count(), 2, "{device}");
        assert_eq!(device.matches("int it = 0;").count(), 2, "both running counters stay: {device}");
        assert!(
            device.contains("const int gr = by * TILE_M + 64 * (wg * FRAG_M + i) + r, gc = bx * TILE_N + c;") && device.contains("PARTIAL_AT(split, gr, gc)"),
            "{device}"
        );
    }

    let device = region(&last, "device");
    let host = region(&last, "host");
    assert!(device.contains("float* partial, int* arrivals)") && !device.contains("_splitk_reduce"), "{device}");
    let split_build = device.split_once("#else").unwrap().1.split("#endif").next().unwrap();
    let order = [
        "*reinterpret_cast<float2*>(&PARTIAL_AT(split, gr, gc))",
        "__threadfence();",
        "peak_bar_sync(1 + wg, 128);",
        "if (WG_THREAD == 0) last_split[wg] = atomicAdd(&arrivals[slot], 1) == K_SPLITS - 1;",
        "if (last_split[wg]) {",
        "for (int s = 0; s < K_SPLITS; ++s) {",
        "__ldcg(reinterpret_cast<const float2*>(&PARTIAL_AT(s, gr, gc)))",
        "C_AT(gr, gc + 1) = EPILOGUE(sum.y, gr, gc + 1);",
    ];
    let places: Vec<usize> = order.iter().map(|piece| split_build.find(piece).unwrap_or_else(|| panic!("missing {piece:?}:\n{split_build}"))).collect();
    assert!(places.windows(2).all(|p| p[0] < p[1]), "fence, count, then reduce, in that order:\n{split_build}");
    assert_eq!(split_build.matches("peak_bar_sync(1 + wg, 128);").count(), 2, "{split_build}");
    assert!(host.contains("if K_SPLITS > 1 { fill(arrivals, 0); }"), "{host}");
    assert!(host.contains("bias, out, M, N, K, partial, arrivals);") && !host.contains("_splitk_reduce"), "{host}");
}

#[test]
fn gemm_nt_bias_bf16_ping_pong_branch_takes_turns_and_splits_k() {
    ping_pong_branch_takes_turns_and_splits_k("bf16", "__nv_bfloat16");
}

#[test]
fn gemm_nt_bias_f16_ping_pong_branch_takes_turns_and_splits_k() {
    ping_pong_branch_takes_turns_and_splits_k("f16", "__half");
}

/// The Hopper transformations speak roles (M, N, K, the operands' layouts, the element type,
/// the epilogue) and keep the shape the recorded f16 workflow
/// (examples/workflows/matmul-cuda-f16.bundle) replays against: the same passes in the
/// same regions.
#[test]
fn the_hopper_line_speaks_sizes_layouts_types_and_epilogue() {
    let env = Env::new();
    for (name, regions) in [
        ("warp-tiling", &["macros", "host"][..]),
        ("tensor-core", &["macros", "device", "host"]),
        ("tensor-tiling", &["macros", "device", "host"]),
        ("tma-pipeline", &["macros", "device", "host"]),
        ("wgmma", &["macros", "device", "host"]),
        ("warp-specialize", &["device", "host"]),
        ("tma-multicast", &["device", "host"]),
        ("tma-store", &["device", "host"]),
        ("persistent-tiles", &["device", "host"]),
    ] {
        let shown = env.json(&["transformations", "show", name, "--json"]);
        let got: Vec<&str> = shown["passes"].as_array().unwrap().iter().map(|p| p["region"].as_str().unwrap()).collect();
        assert_eq!(got, regions, "{name}: recorded workflows replay by (pass, attempt)");
        let text = serde_json::to_string(&shown).unwrap();
        for stale in ["C = A x B", "check against n", "ceil_div(n, ", "[n, n]", "(n % 8 == 0)", "no bounds checks: the store clips"] {
            assert!(!text.contains(stale), "{name} still says {stale:?}");
        }
        let terms: &[&str] = match name {
            "warp-tiling" => &[],
            "tensor-tiling" | "warp-specialize" => &["EPILOGUE", "GEMM_N"],
            "tensor-core" | "wgmma" | "tma-store" => &["EPILOGUE", "GEMM_M", "bf16"],
            // Where B's boxes are laid out, for either layout.
            "tma-multicast" => &["GEMM_M", "K-major"],
            // Sizes and the epilogue, the running k-step counter, the staging buffer's wait.
            "persistent-tiles" => &["GEMM_M", "GEMM_N", "EPILOGUE", "(it / NUM_STAGES) & 1", "peak_tma_store_wait()", "COMPUTE_UNITS"],
            _ => &["GEMM_N", "K-major"],
        };
        for term in terms {
            assert!(text.contains(term), "{name} does not speak of {term}");
        }
    }
    // Both layouts of B are spelled out where wgmma reads it: the transpose bit for a
    // row-major B, none for a K-major one.
    let wgmma = serde_json::to_string(&env.json(&["transformations", "show", "wgmma", "--json"])).unwrap();
    for expected in [
        "peak_wgmma_bf16_m64n{64,128,256}k16<1>",
        "`peak_wgmma_bf16_m64n{N}k16<0>`",
        "db = peak_wgmma_desc(b_stage, 16, 1024)",
        "`peak_wgmma_e4m3_m64n{N}k32`",
        "K_STEP",
    ] {
        assert!(wgmma.contains(expected), "wgmma does not say {expected:?}");
    }
    // 8-bit inputs are spelled out where the MMA is chosen: the k32 instruction and the
    // K-major B fragments ldmatrix can load without a transpose.
    let tensor_core = serde_json::to_string(&env.json(&["transformations", "show", "tensor-core", "--json"])).unwrap();
    for expected in ["peak_mma_16832_e4m3", "peak_ldmatrix_b_k8", "PEAK_TILE_LOAD_T_COLMAJOR"] {
        assert!(tensor_core.contains(expected), "tensor-core does not say {expected:?}");
    }
}
