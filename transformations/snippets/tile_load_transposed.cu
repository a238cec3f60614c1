// PEAK_TILE_LOAD_T: the whole block fills a ROWS x COLS tile stored TRANSPOSED,
// dst[c][r] = AT(row0 + r, col0 + c), through an accessor macro, so the tile holds the
// operand's logical elements whatever its layout, and zero outside the matrix (row0 + r >=
// rows or col0 + c >= cols). Consecutive threads take consecutive c: the coalesced read for
// an operand contiguous along the tile's column index (A[m, k] at a[m * lda + k], a tile
// of A kept k-major in __shared__ memory).
// PEAK_TILE_LOAD_T_COLMAJOR: the same tile, consecutive threads taking consecutive r: the
// coalesced read for an operand contiguous along the tile's row index (A[m, k] at
// a[k * lda + m]); its stores into dst are then contiguous too.
//   dst         __shared__ array indexed dst[c][r] (any padding of its rows is fine)
//   AT          accessor macro: AT(i, j) is element (i, j) of the logical matrix (A_AT, B_AT)
//   row0, col0  logical coordinates of the tile's top-left element
//   ROWS, COLS  tile extent (of the logical tile, before transposition)
//   rows, cols  the logical matrix's extent (for the bounds check)
//   tid, nthr   this thread's linear index in the group, and the group's size
// Zero is stored with peak_zero (below), which every element type accepts.
#ifndef PEAK_ZERO_DEFINED
#define PEAK_ZERO_DEFINED
// peak_zero(x): store zero in a tile element of any type: f32, f16, bf16 or fp8 (the 8-bit
// types take no plain float, and __half's many assignment operators make `x = {}` ambiguous).
template <typename T>
__device__ __forceinline__ void peak_zero(T& x) { x = T(0.0f); }
#endif
#define PEAK_TILE_LOAD_T(dst, AT, row0, col0, ROWS, COLS, rows, cols, tid, nthr)           \
    for (int peak_i = (tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {            \
        const int peak_r = peak_i / (COLS), peak_c = peak_i % (COLS);                      \
        const int peak_gr = (row0) + peak_r, peak_gc = (col0) + peak_c;          \
        if (peak_gr < (rows) && peak_gc < (cols)) (dst)[peak_c][peak_r] = AT(peak_gr, peak_gc); \
        else peak_zero((dst)[peak_c][peak_r]);                                      \
    }
#define PEAK_TILE_LOAD_T_COLMAJOR(dst, AT, row0, col0, ROWS, COLS, rows, cols, tid, nthr)  \
    for (int peak_i = (tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {            \
        const int peak_r = peak_i % (ROWS), peak_c = peak_i / (ROWS);                      \
        const int peak_gr = (row0) + peak_r, peak_gc = (col0) + peak_c;          \
        if (peak_gr < (rows) && peak_gc < (cols)) (dst)[peak_c][peak_r] = AT(peak_gr, peak_gc); \
        else peak_zero((dst)[peak_c][peak_r]);                                      \
    }
