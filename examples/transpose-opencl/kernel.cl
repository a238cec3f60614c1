// @peak macros
// @peak device
__kernel void transpose(__global const float* A, __global float* B, int rows, int cols) {
    int c = get_global_id(0);
    int r = get_global_id(1);
    if (r < rows && c < cols) {
        B[c * rows + r] = A[r * cols + c];
    }
}
// @peak host
// One work-item per element of A; BLOCK_X x BLOCK_Y work-items per work-group.
launch("transpose", [ceil_div(cols, BLOCK_X), ceil_div(rows, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, rows, cols);
