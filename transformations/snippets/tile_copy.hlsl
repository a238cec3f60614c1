// PEAK_TILE_COPY: the whole group copies a ROWS x COLS tile of a row-major buffer into a
// 2-D groupshared array, coalesced and without bank conflicts: consecutive threads take
// consecutive columns of one row. Elements outside the matrix are stored as zero, so a
// partial tile at the edge computes correctly. HLSL has no pointers, so this is a macro
// over the array and buffer names.
//   dst         groupshared array indexed dst[r][c] (any padding of its rows is fine)
//   src, ld     buffer holding the matrix, and its row length
//   row0, col0  top-left element of the tile in the matrix
//   rows, cols  matrix extent (for the bounds check)
//   tid, nthr   this thread's linear index in the group (SV_GroupIndex), and the group's size
#define PEAK_TILE_COPY(dst, src, ld, row0, col0, ROWS, COLS, rows, cols, tid, nthr)        \
    for (int peak_i = (int)(tid); peak_i < (ROWS) * (COLS); peak_i += (nthr)) {            \
        const int peak_r = peak_i / (COLS), peak_c = peak_i % (COLS);                      \
        const int peak_gr = (int)(row0) + peak_r, peak_gc = (int)(col0) + peak_c;          \
        if (peak_gr < (int)(rows) && peak_gc < (int)(cols)) dst[peak_r][peak_c] = src[peak_gr * (ld) + peak_gc]; \
        else dst[peak_r][peak_c] = 0;                                                      \
    }
