"""Hand experiment (not a recorded step): the fp32 NT line's Fragment-Prefetch tip with its
register staging replaced by cp.async fills straight into shared memory, 4 bytes an element,
NUM_STAGES - 1 k-steps ahead (CUTLASS's sm80 SIMT multistage main loop; the fill cuBLASLt's
fp32 kernel uses, bench/results/h200-gemm-profile-f32-joint-staging.json). Interior tiles are
copied with no per-element test; edge tiles zero-fill what lies outside the matrix.
Usage: python3 async-fill.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu and peak.toml)."""
import sys

ctx = sys.argv[1]
path = f"{ctx}/kernel.cu"
k = open(path).read()

MACROS = r'''
// One k-step's tile of an operand copied by cp.async (4 bytes an element) straight into its
// shared stage, in the layout the fragments read: ASYNC_FILL_T stores dst[c][r] for element
// (r, c), consecutive threads taking consecutive c (the coalesced order when the operand is
// contiguous along c); ASYNC_FILL_COLMAJOR stores dst[r][c], consecutive threads taking
// consecutive r. `inside` (the whole tile lies in the matrix) drops the per-element test;
// otherwise elements outside are zero-filled (src-size 0 reads nothing).
#define ASYNC_FILL_T(dst, AT, row0, col0, ROWS, COLS, rows, cols, inside)                  \
    _Pragma("unroll") for (int peak_s = 0; peak_s < ((ROWS) * (COLS) + NTHREADS - 1) / NTHREADS; ++peak_s) { \
        const int peak_e = TID + peak_s * NTHREADS;                                        \
        if ((ROWS) * (COLS) % NTHREADS == 0 || peak_e < (ROWS) * (COLS)) {                 \
            const int peak_r = peak_e / (COLS), peak_c = peak_e % (COLS);                  \
            const bool peak_in = (inside) || ((row0) + peak_r < (rows) && (col0) + peak_c < (cols)); \
            PEAK_ASYNC_COPY((dst)[peak_c][peak_r], &AT(peak_in ? (row0) + peak_r : 0, peak_in ? (col0) + peak_c : 0), 0, peak_in); \
        }                                                                                  \
    }
#define ASYNC_FILL_COLMAJOR(dst, AT, row0, col0, ROWS, COLS, rows, cols, inside)           \
    _Pragma("unroll") for (int peak_s = 0; peak_s < ((ROWS) * (COLS) + NTHREADS - 1) / NTHREADS; ++peak_s) { \
        const int peak_e = TID + peak_s * NTHREADS;                                        \
        if ((ROWS) * (COLS) % NTHREADS == 0 || peak_e < (ROWS) * (COLS)) {                 \
            const int peak_c = peak_e / (ROWS), peak_r = peak_e % (ROWS);                  \
            const bool peak_in = (inside) || ((row0) + peak_r < (rows) && (col0) + peak_c < (cols)); \
            PEAK_ASYNC_COPY((dst)[peak_r][peak_c], &AT(peak_in ? (row0) + peak_r : 0, peak_in ? (col0) + peak_c : 0), 0, peak_in); \
        }                                                                                  \
    }
// @peak device'''
assert k.count("// @peak device") == 1
k = k.replace("// @peak device", MACROS, 1)

# The register staging's alignment test and its comment go with it.
for old in ("    // its tiles travel through registers: loaded before step t - 1 is computed, stored after.\n",):
    assert k.count(old) == 1
    k = k.replace(old, "")
lines = k.split("\n")
def find(s, start=0):
    for i in range(start, len(lines)):
        if s in lines[i]:
            return i
    raise SystemExit(f"not found: {s}")
a = find("// Whether every vector of every k-step's tile is aligned")
b = find("// Two sets of fragment registers")
PROLOGUE = r'''    // k-step t's tiles go to stage t % NUM_STAGES by cp.async, issued NUM_STAGES - 1 steps
    // ahead; every step commits one group (empty past the end) so that waiting for all but
    // NUM_STAGES - 2 groups always means "the next step's tiles have landed".
    auto fill = [&](const int t) {
        if (t < KT) {
            const int k0 = K_BEGIN + t * TILE_K;
            float (*a_dst)[TILE_M + OFFSET * VEC] = AsT[t % NUM_STAGES];
            float (*b_dst)[TILE_N + OFFSET * VEC] = Bs[t % NUM_STAGES];
            if (STAGE_INSIDE_T(tile_row0, k0, TILE_M, TILE_K, GEMM_M, GEMM_K, true) &&
                STAGE_INSIDE_COLMAJOR(k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N, true)) {
                ASYNC_FILL_T(a_dst, A_AT, tile_row0, k0, TILE_M, TILE_K, GEMM_M, GEMM_K, true);
                ASYNC_FILL_COLMAJOR(b_dst, B_AT, k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N, true);
            } else {
                ASYNC_FILL_T(a_dst, A_AT, tile_row0, k0, TILE_M, TILE_K, GEMM_M, GEMM_K, false);
                ASYNC_FILL_COLMAJOR(b_dst, B_AT, k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N, false);
            }
        }
        PEAK_ASYNC_COMMIT();
    };
    #pragma unroll
    for (int s = 0; s < NUM_STAGES - 1; ++s) fill(s);
    PEAK_ASYNC_WAIT(NUM_STAGES - 2);
    BARRIER();'''
lines[a:b] = PROLOGUE.split("\n")
t0 = find("for (int t = 0; t < KT; ++t) {")
# the loop ends at the first line that is exactly "    }" after it
t1 = next(i for i in range(t0 + 1, len(lines)) if lines[i] == "    }")
LOOP = r'''    for (int t = 0; t < KT; ++t) {
        const int stage = t % NUM_STAGES;
        #pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            if (kk + 1 < TILE_K) {
                load_fragments(a_frag[(kk + 1) % 2], b_frag[(kk + 1) % 2], stage, kk + 1);
            } else {
                // The step's end: the next step's tiles have landed once all but NUM_STAGES - 2
                // groups are done; the barrier makes them visible and frees this stage.
                PEAK_ASYNC_WAIT(NUM_STAGES - 2);
                BARRIER();
                if (t + 1 < KT) load_fragments(a_frag[0], b_frag[0], (t + 1) % NUM_STAGES, 0);
            }
            // Step t + NUM_STAGES - 1 goes to the stage step t - 1 read, which every thread
            // left at the last step's barrier.
            if (kk == 0) fill(t + NUM_STAGES - 1);
            #pragma unroll
            for (int i = 0; i < TRD_Y; ++i) {
                #pragma unroll
                for (int j = 0; j < TRD_X; ++j) {
                    acc[i][j] += a_frag[kk % 2][i] * b_frag[kk % 2][j];
                }
            }
        }
    }'''
lines[t0:t1 + 1] = LOOP.split("\n")
k = "\n".join(lines)
assert "a_stage" not in k.split("// @peak device")[1].split("// @peak host")[0]
open(path, "w").write(k)

p = f"{ctx}/peak.toml"
s = open(p).read()
old = "[tuning.NUM_STAGES]\nvalues = [2, 3, 4]"
assert s.count(old) == 1
open(p, "w").write(s.replace(old, "[tuning.NUM_STAGES]\nvalues = [2, 3, 4, 5, 6]"))
print(f"rewrote {ctx}")
