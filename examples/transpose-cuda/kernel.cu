// @peak macros
// @peak device
extern "C" __global__ void transpose(const float* A, float* B, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        B[c * rows + r] = A[r * cols + c];
    }
}
// @peak host
// One work-item per element of A; BLOCK_X x BLOCK_Y work-items per work-group.
launch("transpose", [ceil_div(cols, BLOCK_X), ceil_div(rows, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, rows, cols);
