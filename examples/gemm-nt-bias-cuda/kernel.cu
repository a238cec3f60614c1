// @peak macros
// @peak device
// out = inp . weight^T + bias: inp is M x K row-major, weight is N x K row-major (one row
// per output channel), bias has N elements, out is M x N row-major.
extern "C" __global__ void gemm_nt_bias(const float* inp, const float* weight, const float* bias,
                                        float* out, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; ++i) {
            sum += inp[row * K + i] * weight[col * K + i];
        }
        out[row * N + col] = sum + bias[col];
    }
}
// @peak host
// One thread per element of out; BLOCK_X (along N) x BLOCK_Y (along M) threads per block, grid in blocks.
launch("gemm_nt_bias", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, inp, weight, bias, out, M, N, K);
