// @peak macros
#include <cuda_fp16.h>
// @peak device
// out = inp . weight^T + bias in f16 with f32 accumulation: inp is M x K row-major, weight
// is N x K row-major (one row per output channel), bias has N elements, out is M x N
// row-major. Each output is summed in f32 and rounded to f16 once, after the bias.
extern "C" __global__ void gemm_nt_bias(const __half* inp, const __half* weight, const __half* bias,
                                        __half* out, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; ++i) {
            sum += __half2float(inp[row * K + i]) * __half2float(weight[col * K + i]);
        }
        out[row * N + col] = __float2half(sum + __half2float(bias[col]));
    }
}
// @peak host
// One thread per element of out; BLOCK_X (along N) x BLOCK_Y (along M) threads per block, grid in blocks.
launch("gemm_nt_bias", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, inp, weight, bias, out, M, N, K);
