// PEAK_TILE_LOAD: the whole block fills a ROWS x COLS shared tile through an accessor
// macro, so the tile holds the operand's logical elements whatever its layout and leading
// dimension: dst[r][c] = AT(row0 + r, col0 + c), and zero outside the matrix (row0 + r >=
// rows or col0 + c >= cols), so a partial tile at an edge computes correctly.
// Consecutive threads take consecutive c (columns of one tile row): coalesced when the
// operand is contiguous along the tile's column index (A stored row-major for a tile of A,
// B stored row-major for a tile of B).
// PEAK_TILE_LOAD_COLMAJOR: the same tile, but consecutive threads take consecutive r
// (down one tile column): the coalesced copy when the operand is contiguous along the
// tile's row index (A stored column-major, or B stored column-major: B[k, n] at
// b[n * ldb + k]). Its stores into dst land one tile row apart, which padding the tile's
// rows (the Offset transformation) spreads over the banks.
//   dst         shared array indexed dst[r][c] (any padding of its rows is fine)
//   AT          accessor macro: AT(i, j) is element (i, j) of the logical matrix (A_AT, B_AT)
//   row0, col0  logical coordinates of the tile's top-left element
//   ROWS, COLS  tile extent
//   rows, cols  the logical matrix's extent (for the bounds check)
//   tid, nthr   this thread's linear index in the block, and the block's thread count
// Zero is stored with peak_zero (below), which every element type accepts.
#ifndef PEAK_ZERO_DEFINED
#define PEAK_ZERO_DEFINED
// peak_zero(x): store zero in a tile element of any type: f32, f16, bf16 or fp8 (the 8-bit
// types take no plain float, and __half's many assignment operators make `x = {}` ambiguous).
template <typename T>
__device__ __forceinline__ void peak_zero(T& x) { x = T(0.0f); }
#endif
#define PEAK_TILE_LOAD(dst, AT, row0, col0, ROWS, COLS, rows, cols, tid, nthr)             \
    for (int peak_i = (tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {                 \
        const int peak_r = peak_i / (COLS), peak_c = peak_i % (COLS);                      \
        const int peak_gr = (row0) + peak_r, peak_gc = (col0) + peak_c;                    \
        if (peak_gr < (rows) && peak_gc < (cols)) (dst)[peak_r][peak_c] = AT(peak_gr, peak_gc); \
        else peak_zero((dst)[peak_r][peak_c]);                                      \
    }
#define PEAK_TILE_LOAD_COLMAJOR(dst, AT, row0, col0, ROWS, COLS, rows, cols, tid, nthr)    \
    for (int peak_i = (tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {                 \
        const int peak_r = peak_i % (ROWS), peak_c = peak_i / (ROWS);                      \
        const int peak_gr = (row0) + peak_r, peak_gc = (col0) + peak_c;                    \
        if (peak_gr < (rows) && peak_gc < (cols)) (dst)[peak_r][peak_c] = AT(peak_gr, peak_gc); \
        else peak_zero((dst)[peak_r][peak_c]);                                      \
    }
