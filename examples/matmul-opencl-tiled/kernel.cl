// @peak macros
#define A_AT(r, c) A[(r) * n + (c)]
#define B_AT(r, c) B[(r) * n + (c)]
// @peak device
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_group_id(0) * TILE + tx;
    int row = get_group_id(1) * TILE + ty;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        As[ty][tx] = A_AT(row, t + tx);
        Bs[ty][tx] = B_AT(t + ty, col);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * n + col] = acc;
}
// @peak host
// TILE x TILE work-items per group, one output each; n is a multiple of TILE.
launch("matmul", [n / TILE, n / TILE], [TILE, TILE], 0, A, B, C, n);
