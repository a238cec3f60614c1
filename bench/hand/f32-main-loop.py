"""Hand experiment (not a recorded step): two changes to the square fp32 NN tip's main loop,
each behind a new tuning parameter whose value 0 is the tip unchanged.

ADDR_INC: how the interior k loop finds the global addresses of step t + 1's tiles. The tip
forms each from the tile's row and column, `(size_t)(row0 + r) * n + k0 + c`, every step:
in its SASS (nvcc 13 for sm_90a) 27 integer instructions, a dependent chain of about 80
cycles of fixed latency, sit between each step's barrier and its first FFMA, in every warp
at once. With ADDR_INC = 1 two pointers advance by one step (TILE_K columns of A, TILE_K
rows of B) and each load adds its thread's constant offset.

WARP_X: lanes of a warp along the columns of its patch of the block's tile. The tip numbers
threads row-major over a BLOCK_Y x BLOCK_X grid, so a warp (32 consecutive threads) spans the
tile's whole width: at its configuration (16 x 16 threads, 16 x 8 outputs each) a 32 x 128
patch, whose B fragments are 16 distinct vectors (two shared-memory wavefronts a load).
cuBLASLt's kernel at this tile (256 x 128 x 8, warps 4 x 2) gives each warp 64 x 64, one
wavefront a load. With WARP_X < BLOCK_X, warp w owns a (32 / WARP_X) x WARP_X grid of
threads, chunks kept contiguous (THREAD_ROW / THREAD_COL), so WARP_X = 8 gives 64 x 64.
WARP_X = BLOCK_X (the value 0 here) is the tip's numbering.

LOAD_KK, STORE_KK: where in a k-step the global loads of step t + 1 are issued and where
their registers are stored to its stage: -1 is the tip's place (the loads before the first
slice, the stores after the last, just before the barrier); k >= 0 is after slice k's FFMAs.
In the tip's SASS both sit in blocks at the step's two ends, between the barrier and the
first FFMA and between the last FFMA and the barrier, where every warp of the block stands
at the same moment; cuBLASLt's kernel spreads its 130 non-FFMA instructions a step among
its FFMAs. Storing during the step is safe: stage t + 1 is not read in step t, and every
warp finished step t + 1 - NUM_STAGES, its previous user, before step t's first barrier.

ASYNC: how step t + 1's tiles reach shared memory in the interior k loop. The tip stages
them through registers: global loads at the step's start, 9 shared stores (8 of them the
transposed A's single elements) at its end, then the barrier. cuBLASLt's kernel at this
tile copies with cp.async (LDGSTS, 12 a step, 4-byte copies transposing on the fly), three
stages deep, and has no shared stores in its loop. With ASYNC = 1 the interior loop does
the same: step s is copied into stage s % NUM_STAGES by cp.async, NUM_STAGES - 1 steps
ahead (4-byte copies for the transposed A, one VEC_T vector for B; ASYNC = 2 orders A's
copies with consecutive threads along k, as cuBLASLt's kernel reads, so that a warp's copies
cover whole 32-byte sectors); each step waits for
its own copies (cp.async.wait_group NUM_STAGES - 2), then one barrier makes them visible and
frees the stage the next copies overwrite, the one step t - 1 used.

Usage: python3 f32-main-loop.py CONTEXT_DIR (rewrites CONTEXT_DIR/matmul.cu and peak.toml)."""
import sys

from source_edit import Source, add_tuning

ctx = sys.argv[1]
k = Source(f"{ctx}/matmul.cu")
k.sub("#define THREAD_ROW(i) (((i) / CHUNK_Y) * (BLOCK_Y * CHUNK_Y) + LROW * CHUNK_Y + (i) % CHUNK_Y)\n"
      "#define THREAD_COL(j) (((j) / CHUNK_X) * (BLOCK_X * CHUNK_X) + LCOL * CHUNK_X + (j) % CHUNK_X)\n",
      "#if WARP_X == 0\n"
      "#define THREAD_ROW(i) (((i) / CHUNK_Y) * (BLOCK_Y * CHUNK_Y) + LROW * CHUNK_Y + (i) % CHUNK_Y)\n"
      "#define THREAD_COL(j) (((j) / CHUNK_X) * (BLOCK_X * CHUNK_X) + LCOL * CHUNK_X + (j) % CHUNK_X)\n"
      "#else\n"
      "// warp w owns a patch of (32 / WARP_X) x WARP_X threads; its lane l sits at row l / WARP_X,\n"
      "// column l % WARP_X of it; chunks of CHUNK_Y rows (CHUNK_X columns) stay contiguous\n"
      "#define WARP_ROWS (32 / WARP_X)\n"
      "#define W_ROW ((TID / 32) / (BLOCK_X / WARP_X))\n"
      "#define W_COL ((TID / 32) % (BLOCK_X / WARP_X))\n"
      "#define LANE (TID % 32)\n"
      "#define THREAD_ROW(i) (W_ROW * (WARP_ROWS * TRD_Y) + ((i) / CHUNK_Y) * (WARP_ROWS * CHUNK_Y) + (LANE / WARP_X) * CHUNK_Y + (i) % CHUNK_Y)\n"
      "#define THREAD_COL(j) (W_COL * (WARP_X * TRD_X) + ((j) / CHUNK_X) * (WARP_X * CHUNK_X) + (LANE % WARP_X) * CHUNK_X + (j) % CHUNK_X)\n"
      "#endif\n")
# the interior blocks' k loop only (the edge blocks' loop tests every tile)
interior, edge = k.text.split("constexpr bool inside = false;")
loads = ("                    STAGE_LOAD_INSIDE(a_stage, A_SHARE, A, n, tile_row0, next_k0, TILE_M, TILE_K);\n"
         "                    STAGE_LOAD_INSIDE(b_stage, B_SHARE, B, n, next_k0, tile_col0, TILE_K, TILE_N);\n")
assert interior.count(loads) == 1
interior = interior.replace(loads, "#if ADDR_INC\n"
    "                    a_next += TILE_K;\n"
    "                    b_next += (size_t)TILE_K * n;\n"
    "                    STAGE_LOAD_INSIDE(a_stage, A_SHARE, a_next, n, 0, 0, TILE_M, TILE_K);\n"
    "                    STAGE_LOAD_INSIDE(b_stage, B_SHARE, b_next, n, 0, 0, TILE_K, TILE_N);\n"
    "#else\n" + loads + "#endif\n")
top = "        constexpr bool inside = true;\n"
assert interior.count(top) == 1
interior = interior.replace(top, top + "#if ADDR_INC\n"
    "        // the first element of step t's tiles; advanced before step t + 1's loads\n"
    "        const float* a_next = A + (size_t)tile_row0 * n + k_begin;\n"
    "        const float* b_next = B + (size_t)k_begin * n + tile_col0;\n"
    "#endif\n")
pristine = interior
i0 = interior.index("            // issue the loads of step t + 1")
i1 = interior.index("            const int stage = t % NUM_STAGES;")
load_block = interior[i0:i1]
s0 = interior.index("            // step t + 1 goes to its own stage")
s1 = interior.index("            BARRIER();", s0)
store_block = interior[s0:s1]
fma_end = "                        acc[i][j] += a_reg[i] * b_reg[j];\n            }\n" + store_block
assert interior.count(fma_end) == 1
indent = lambda block: "".join("    " + line if line.strip() else line for line in block.splitlines(True))
interior = (interior[:i0] + "#if LOAD_KK < 0\n" + load_block + "#endif\n" + interior[i1:s0]
            + "#if STORE_KK < 0\n" + store_block + "#endif\n" + interior[s1:])
interior = interior.replace("                        acc[i][j] += a_reg[i] * b_reg[j];\n            }\n#if STORE_KK < 0",
    "                        acc[i][j] += a_reg[i] * b_reg[j];\n"
    "#if LOAD_KK >= 0\n                if (kk == LOAD_KK) {\n" + indent(indent(load_block)) + "                }\n#endif\n"
    "#if STORE_KK >= 0\n                if (kk == STORE_KK) {\n" + indent(indent(store_block)) + "                }\n#endif\n"
    "            }\n#if STORE_KK < 0", 1)
# ASYNC: the pristine interior loop with its staging replaced by cp.async
l0 = pristine.index("        for (int t = 0; t < KT; ++t) {")
l1 = pristine.index("            // issue the loads of step t + 1")
l2 = pristine.index("            const int stage = t % NUM_STAGES;")
l3 = pristine.index("            // step t + 1 goes to its own stage")
l4 = pristine.index("            BARRIER();\n        }\n", l3)
async_loop = ("        // This thread's copies, their places fixed for the whole loop: entry e of A's share is\n"
    "        // row a_row[e], columns a_col[e] .. + VEC - 1 of the tile (VEC 4-byte copies, stored\n"
    "        // transposed); entry e of B's is one VEC_T vector at row b_row[e], column b_col[e].\n"
    "        const float* a_src[A_SHARE];\n"
    "        const float* b_src[B_SHARE];\n"
    "        int a_row[A_SHARE], a_col[A_SHARE], b_row[B_SHARE], b_col[B_SHARE];\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < A_SHARE; ++e) {\n"
    "            const int v = min(TID + e * NTHREADS, TILE_M * (TILE_K / VEC) - 1);\n"
    "            a_row[e] = v / (TILE_K / VEC); a_col[e] = (v % (TILE_K / VEC)) * VEC;\n"
    "            a_src[e] = A + (size_t)(tile_row0 + a_row[e]) * n + k_begin + a_col[e];\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < B_SHARE; ++e) {\n"
    "            const int v = min(TID + e * NTHREADS, TILE_K * (TILE_N / VEC) - 1);\n"
    "            b_row[e] = v / (TILE_N / VEC); b_col[e] = (v % (TILE_N / VEC)) * VEC;\n"
    "            b_src[e] = B + (size_t)(k_begin + b_row[e]) * n + tile_col0 + b_col[e];\n"
    "        }\n"
    "#if ASYNC == 2\n"
    "        // A element by element instead, consecutive threads along k, so that a warp's copies read\n"
    "        // whole 32-byte sectors: thread TID copies column TID % TILE_K of rows TID / TILE_K +\n"
    "        // e * (NTHREADS / TILE_K), e < TILE_M * TILE_K / NTHREADS; a_el points at the first\n"
    "        const float* a_el = A + (size_t)(tile_row0 + TID / TILE_K) * n + k_begin + TID % TILE_K + TILE_K;\n"
    "        const size_t a_pass = (size_t)(NTHREADS / TILE_K) * n;\n"
    "#endif\n"
    "        // the next step to copy goes to stage w_st; a_src and b_src point at its tiles\n"
    "        int w_st = 1 % NUM_STAGES;\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < A_SHARE; ++e) a_src[e] += TILE_K;\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < B_SHARE; ++e) b_src[e] += (size_t)TILE_K * n;\n"
    "        // that step's tiles by cp.async, then the pointers and the stage move on by one step;\n"
    "        // the caller commits the group\n"
    "        auto copy_next = [&]() {\n"
    "#if ASYNC == 2\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < TILE_M * TILE_K / NTHREADS; ++e)\n"
    "                PEAK_ASYNC_COPY(AsT[w_st][TID % TILE_K][TID / TILE_K + e * (NTHREADS / TILE_K)], a_el, e * a_pass, true);\n"
    "            a_el += TILE_K;\n"
    "#else\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < A_SHARE; ++e)\n"
    "                if (A_SHARE * NTHREADS == TILE_M * TILE_K / VEC || TID + e * NTHREADS < TILE_M * (TILE_K / VEC)) {\n"
    "#pragma unroll\n"
    "                    for (int q = 0; q < VEC; ++q)\n"
    "                        PEAK_ASYNC_COPY(AsT[w_st][a_col[e] + q][a_row[e]], a_src[e], q, true);\n"
    "                }\n"
    "#endif\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < B_SHARE; ++e)\n"
    "                if (B_SHARE * NTHREADS == TILE_K * TILE_N / VEC || TID + e * NTHREADS < TILE_K * (TILE_N / VEC))\n"
    "                    PEAK_ASYNC_COPY(*reinterpret_cast<VEC_T*>(&Bs[w_st][b_row[e]][b_col[e]]), reinterpret_cast<const VEC_T*>(b_src[e]), 0, true);\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < A_SHARE; ++e) a_src[e] += TILE_K;\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < B_SHARE; ++e) b_src[e] += (size_t)TILE_K * n;\n"
    "            w_st = w_st + 1 == NUM_STAGES ? 0 : w_st + 1;\n"
    "        };\n"
    "        // step 0 is in stage 0 already (staged above); steps 1 .. NUM_STAGES - 2 go ahead now\n"
    "        for (int s = 1; s <= NUM_STAGES - 2; ++s) {\n"
    "            if (s < KT) copy_next();\n"
    "            PEAK_ASYNC_COMMIT();\n"
    "        }\n"
    + pristine[l0:l1] +
    "            // step t's copies have landed once at most NUM_STAGES - 2 later groups are in flight;\n"
    "            // the barrier shows them to every thread and frees stage (t - 1) % NUM_STAGES\n"
    "            PEAK_ASYNC_WAIT(NUM_STAGES - 2);\n"
    "            BARRIER();\n"
    "            if (t + NUM_STAGES - 1 < KT) copy_next();\n"
    "            PEAK_ASYNC_COMMIT();\n"
    + pristine[l2:l3] + "        }\n")
loop_start = interior.index("        for (int t = 0; t < KT; ++t) {")
loop_end = interior.index("            BARRIER();\n        }\n", loop_start) + len("            BARRIER();\n        }\n")
interior = (interior[:loop_start] + "#if ASYNC\n" + async_loop + "#else\n" + interior[loop_start:loop_end] + "#endif\n" + interior[loop_end:])
k.text = interior + "constexpr bool inside = false;" + edge
k.save()
add_tuning(f"{ctx}/peak.toml", "ADDR_INC", [0, 1], before="[tuning.BLOCK_X]")
add_tuning(f"{ctx}/peak.toml", "ASYNC", [0, 1, 2], before="[tuning.BLOCK_X]")
add_tuning(f"{ctx}/peak.toml", "LOAD_KK", [-1, 0, 1, 2], before="[tuning.MIN_BLOCKS]")
add_tuning(f"{ctx}/peak.toml", "STORE_KK", [-1, 3, 4, 5, 6, 8], before="[tuning.TILE_K]")
add_tuning(f"{ctx}/peak.toml", "WARP_X", [0, 4, 8, 16], before="[tuning.VEC]")
with open(f"{ctx}/peak.toml") as f:
    text = f.read()
# the warp grid tiles the block: whole warps of whole lane rows (the tip's numbering is 0)
text = text.replace('tuning = ["', 'tuning = ["LOAD_KK < TILE_K", "STORE_KK < TILE_K", "STORE_KK < 0 || STORE_KK > LOAD_KK", "ASYNC < 2 || ((BLOCK_X * BLOCK_Y) % TILE_K == 0 && (BLOCK_Y * TRD_Y * TILE_K) % (BLOCK_X * BLOCK_Y) == 0)", "WARP_X == 0 || (BLOCK_X % WARP_X == 0 && WARP_X <= 32 && (BLOCK_X * BLOCK_Y) % 32 == 0 && BLOCK_Y % (32 / WARP_X) == 0)", "', 1)
with open(f"{ctx}/peak.toml", "w") as f:
    f.write(text)
