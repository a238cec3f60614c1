"""DIAGNOSTIC ONLY (the kernels it writes compute wrong results, to time a change in isolation):
the fp32 NT joint-staging tip with B's staged vectors stored whole along shared rows (mode
rowstore: no transposed stores) and, in mode rowload, also read as if B were K x N row-major
(coalesced 512-byte warp reads instead of 16 rows x 32 bytes). Usage: f32-diagnose.py KERNEL MODE."""
import sys
src, mode = sys.argv[1], sys.argv[2]
k = open(src).read()
macro = r'''
// DIAGNOSTIC ONLY (wrong results): B's staged vectors stored whole along a shared row.
#define STAGE_STORE_ROWV(regs, SHARE, dst, ROWS, COLS)                                     \
    _Pragma("unroll") for (int peak_s = 0; peak_s < (SHARE); ++peak_s) {                   \
        const int peak_v = TID + peak_s * NTHREADS;                                        \
        if (peak_v < (ROWS) * (COLS) / VEC) {                                              \
            const int peak_r = peak_v / ((COLS) / VEC), peak_c = (peak_v % ((COLS) / VEC)) * VEC; \
            PEAK_VLOAD(&(dst)[peak_r][peak_c], (regs)[peak_s]);                            \
        }                                                                                  \
    }
#define B_ROW(r, c) weight[(size_t)(r) * (N) + (c)]
// @peak device'''
k = k.replace("// @peak device", macro, 1)
n = k.count("STAGE_STORE_COLMAJOR(b_stage, B_SHARE, Bs[")
k = k.replace("STAGE_STORE_COLMAJOR(b_stage, B_SHARE, Bs[", "STAGE_STORE_ROWV(b_stage, B_SHARE, Bs[")
if mode == "rowload":
    k = k.replace("STAGE_LOAD_INSIDE_COLMAJOR(b_stage, B_SHARE, B_AT, K_BEGIN, tile_col0, TILE_K, TILE_N)", "STAGE_LOAD_INSIDE_T(b_stage, B_SHARE, B_ROW, K_BEGIN, tile_col0, TILE_K, TILE_N)")
    k = k.replace("STAGE_LOAD_INSIDE_COLMAJOR(b_stage, B_SHARE, B_AT, next_k0, tile_col0, TILE_K, TILE_N)", "STAGE_LOAD_INSIDE_T(b_stage, B_SHARE, B_ROW, next_k0, tile_col0, TILE_K, TILE_N)")
    k = k.replace("STAGE_LOAD_COLMAJOR(b_stage, B_SHARE, B_AT, K_BEGIN, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N)", "STAGE_LOAD_T(b_stage, B_SHARE, B_ROW, K_BEGIN, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N)")
    k = k.replace("STAGE_LOAD_COLMAJOR(b_stage, B_SHARE, B_AT, next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N)", "STAGE_LOAD_T(b_stage, B_SHARE, B_ROW, next_k0, tile_col0, TILE_K, TILE_N, GEMM_K, GEMM_N)")
    assert "STAGE_LOAD_INSIDE_COLMAJOR(b_stage" not in k.split("// @peak device")[1] and "STAGE_LOAD_COLMAJOR(b_stage" not in k.split("// @peak device")[1]
print(n)
open(src, "w").write(k)
