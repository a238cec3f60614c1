// @peak macros
#include <cuda_fp8.h>
#include <cuda_bf16.h>
// @peak device
// out = inp . weight^T + bias with e4m3 inputs and f32 accumulation: inp is M x K row-major,
// weight is N x K row-major (one row per output channel), both __nv_fp8_e4m3; bias has N
// bf16 elements, out is M x N row-major bf16. Each output is summed in f32 and rounded to
// bf16 once, after the bias.
extern "C" __global__ void gemm_nt_bias(const __nv_fp8_e4m3* inp, const __nv_fp8_e4m3* weight, const __nv_bfloat16* bias,
                                        __nv_bfloat16* out, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; ++i) {
            sum += float(inp[row * K + i]) * float(weight[col * K + i]);
        }
        out[row * N + col] = __float2bfloat16(sum + __bfloat162float(bias[col]));
    }
}
// @peak host
// One thread per element of out; BLOCK_X (along N) x BLOCK_Y (along M) threads per block, grid in blocks.
launch("gemm_nt_bias", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, inp, weight, bias, out, M, N, K);
