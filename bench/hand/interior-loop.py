"""Hand experiment (not a recorded step): the fp32 NT line's joint-staging tip with the interior
test taken out of the k loop. A block whose every k-step's tiles lie inside the matrices (and are
aligned) runs a copy of the loop whose loads have no test; other blocks run the loop as it was.
In the tip the test splits each k-step's code at a branch: after it, ptxas re-derives the shared
base and issues the first slice's shared loads right before the first FFMA (4-7 instructions,
against 45 in the square NN kernel, which predicates its loads; bench/results/h200-compare-f32-nt-diagnosis-hand.json).
Usage: python3 interior-loop.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu)."""
import sys

path = f"{sys.argv[1]}/kernel.cu"
k = open(path).read()
lines = k.split("\n")
t0 = lines.index("    for (int t = 0; t < KT; ++t) {")
t1 = next(i for i in range(t0 + 1, len(lines)) if lines[i] == "    }")
body = "\n".join("    " + l if l else l for l in lines[t0:t1 + 1])
test = "if (STAGE_INSIDE_T(tile_row0, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K, a_aligned) &&"
assert body.count(test) == 1
body = body.replace(test, "if (inside || (STAGE_INSIDE_T(tile_row0, next_k0, TILE_M, TILE_K, GEMM_M, GEMM_K, a_aligned) &&")
close = "STAGE_INSIDE_COLMAJOR(next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N, b_aligned)) {"
assert body.count(close) == 1
body = body.replace(close, "STAGE_INSIDE_COLMAJOR(next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N, b_aligned))) {")
new = """    // Whether every k-step's tiles of this block lie inside the matrices, aligned: its whole
    // row band and column band, and a k range of whole TILE_K steps. Such a block runs a copy
    // of the k loop whose loads carry no test and no branch (`inside` a literal true there).
    const bool block_inside = tile_row0 + TILE_M <= GEMM_M && tile_col0 + TILE_N <= GEMM_N &&
                              (K_END - K_BEGIN) % TILE_K == 0 && a_aligned && b_aligned;
    if (block_inside) {
        constexpr bool inside = true;
""" + body + """
    } else {
        constexpr bool inside = false;
""" + body + """
    }"""
lines[t0:t1 + 1] = new.split("\n")
k = "\n".join(lines)
open(path, "w").write(k)
print(f"rewrote {path}")
