// @peak macros
// @peak device
// out = inp . weight^T + bias: inp is M x K row-major, weight is N x K row-major (one row
// per output channel), bias has N elements, out is M x N row-major.
__kernel void gemm_nt_bias(__global const float* inp, __global const float* weight, __global const float* bias,
                           __global float* out, int M, int N, int K) {
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; ++i) {
            sum += inp[row * K + i] * weight[col * K + i];
        }
        out[row * N + col] = sum + bias[col];
    }
}
// @peak host
// One work-item per element of out; BLOCK_X (along N) x BLOCK_Y (along M) per work-group.
launch("gemm_nt_bias", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, inp, weight, bias, out, M, N, K);
