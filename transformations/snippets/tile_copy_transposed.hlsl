#ifndef PEAK_ZERO_DEFINED
#define PEAK_ZERO_DEFINED
// A zero of the same type as the argument. glslang's HLSL front end converts no literal to
// half implicitly, so zero-filling goes through these overloads, picked by the type of
// the destination element.
float peak_zero(float x) { return 0.0f; }
float2 peak_zero(float2 x) { return (float2)0.0f; }
float4 peak_zero(float4 x) { return (float4)0.0f; }
half peak_zero(half x) { return (half)0.0f; }
half2 peak_zero(half2 x) { return (half2)(half)0.0f; }
half4 peak_zero(half4 x) { return (half4)(half)0.0f; }
int peak_zero(int x) { return 0; }
uint peak_zero(uint x) { return 0u; }
#endif

// PEAK_TILE_COPY_T: the whole group copies a ROWS x COLS tile of a row-major global
// matrix into a 2-D groupshared array TRANSPOSED, so that dst[c][r] holds the tile's element
// (r, c). Reads stay coalesced (consecutive threads take consecutive columns of one row);
// the stores of consecutive threads land one row of dst apart, all in one bank when the
// row length is a multiple of 32 words: padding the rows of dst (the Offset
// transformation) removes those conflicts. Elements outside the matrix are stored as zero.
//   dst         groupshared array indexed dst[c][r]: the tile's column index first (any padding of its rows is fine)
//   src, ld     buffer holding the matrix, and its row length
//   row0, col0  top-left element of the tile in the matrix
//   rows, cols  matrix extent (for the bounds check)
//   tid, nthr   this thread's linear index in the group (SV_GroupIndex), and the group's size
#define PEAK_TILE_COPY_T(dst, src, ld, row0, col0, ROWS, COLS, rows, cols, tid, nthr)      \
    for (int peak_i = (int)(tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {            \
        const int peak_r = peak_i / (COLS), peak_c = peak_i % (COLS);                      \
        const int peak_gr = (int)(row0) + peak_r, peak_gc = (int)(col0) + peak_c;          \
        if (peak_gr < (int)(rows) && peak_gc < (int)(cols)) dst[peak_c][peak_r] = src[peak_gr * (ld) + peak_gc]; \
        else dst[peak_c][peak_r] = peak_zero(dst[peak_c][peak_r]);                         \
    }
