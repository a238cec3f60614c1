// @peak macros
#include <cuda_fp16.h>
// @peak device
extern "C" __global__ void matmul(const __half* A, const __half* B, __half* C, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) {
            acc += __half2float(A[row * n + k]) * __half2float(B[k * n + col]);
        }
        C[row * n + col] = __float2half(acc);
    }
}
// @peak host
// One thread per element of C; BLOCK_X x BLOCK_Y threads per block, grid in blocks.
launch("matmul", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
