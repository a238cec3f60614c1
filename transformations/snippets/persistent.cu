// Persistent tile schedule: a grid smaller than the grid of tiles, each block (or cluster)
// walking several tiles one after another.
//
//   peak_grouped_tile(unit, rows, cols, group, row, col)
//       the tile (row, col) that unit `unit` (0 .. rows * cols - 1) of a grid of rows x cols
//       tiles is, in grouped order: bands of `group` tile-rows (the last band may be
//       shorter); inside a band, down the tile-rows of one tile-column before the next
//       tile-column. Every tile comes exactly once, so units u, u + G, u + 2 G, ... for
//       u = 0 .. G - 1 cover the grid; consecutive units share tiles of both operands.
__device__ __forceinline__ void peak_grouped_tile(int unit, int rows, int cols, int group, int& row, int& col) {
    const int band = group * cols;                    // units of one full band
    const int first = (unit / band) * group;          // the band's first tile-row
    const int height = min(rows - first, group);      // its tile-rows
    const int in_band = unit % band;
    row = first + in_band % height;
    col = in_band / height;
}
