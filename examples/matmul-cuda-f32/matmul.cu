// @peak macros
// @peak device
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) {
            acc += A[row * n + k] * B[k * n + col];
        }
        C[row * n + col] = acc;
    }
}
// @peak host
// One thread per element of C; BLOCK_X x BLOCK_Y threads per block, grid in blocks.
launch("matmul", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
