// @peak macros
// @peak device
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) {
            acc += A[row * n + k] * B[k * n + col];
        }
        C[row * n + col] = acc;
    }
}
// @peak host
// One work-item per element of C; BLOCK_X x BLOCK_Y work-items per work-group.
launch("matmul", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
