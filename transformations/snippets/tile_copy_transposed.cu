// PEAK_TILE_COPY_T: the whole block copies a ROWS x COLS tile of a row-major global
// matrix into a 2-D shared array TRANSPOSED, so that dst[c][r] holds the tile's element
// (r, c). Reads stay coalesced (consecutive threads take consecutive columns of one row);
// the stores of consecutive threads land one row of dst apart, all in one bank when the
// row length is a multiple of 32 words: padding the rows of dst (the Offset
// transformation) removes those conflicts. Elements outside the matrix are stored as zero.
//   dst         shared array indexed dst[c][r]: the tile's column index first (any padding of its rows is fine)
//   src, ld     global matrix and its row length
//   row0, col0  top-left element of the tile in the matrix
//   rows, cols  matrix extent (for the bounds check)
//   tid, nthr   this thread's linear index in the block, and the block's thread count
// Zero is stored with peak_zero (below), which every element type accepts.
#ifndef PEAK_ZERO_DEFINED
#define PEAK_ZERO_DEFINED
// peak_zero(x): store zero in a tile element of any type: f32, f16, bf16 or fp8 (the 8-bit
// types take no plain float, and __half's many assignment operators make `x = {}` ambiguous).
template <typename T>
__device__ __forceinline__ void peak_zero(T& x) { x = T(0.0f); }
#endif
#define PEAK_TILE_COPY_T(dst, src, ld, row0, col0, ROWS, COLS, rows, cols, tid, nthr)      \
    for (int peak_i = (tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {                 \
        const int peak_r = peak_i / (COLS), peak_c = peak_i % (COLS);                      \
        const int peak_gr = (row0) + peak_r, peak_gc = (col0) + peak_c;                    \
        if (peak_gr < (rows) && peak_gc < (cols)) (dst)[peak_c][peak_r] = (src)[(size_t)peak_gr * (ld) + peak_gc]; \
        else peak_zero((dst)[peak_c][peak_r]);                                      \
    }
