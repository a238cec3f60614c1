// @peak macros
// @peak device
// out = gelu_tanh(alpha * A . B + bias) + res, both operands transposed (TT) and every
// matrix padded: A[m, k] at a[k * lda + m] (A stored K-major), B[k, n] at b[n * ldb + k]
// (B stored N-major, as a weight kept output-channel-major), out and res are M x N
// row-major with ldc elements per row; the ldc - N elements of padding after each row of
// out are never written.
__kernel void gemm_tt_gelu(__global const float* a, __global const float* b, __global const float* bias,
                           __global const float* res, __global float* out,
                           int M, int N, int K, int lda, int ldb, int ldc, float alpha) {
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += a[k * lda + row] * b[col * ldb + k];
        }
        float x = alpha * sum + bias[col];
        float g = 0.5f * x * (1.0f + tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
        out[row * ldc + col] = g + res[row * ldc + col];
    }
}
// @peak host
// One work-item per element of out; BLOCK_X (along N) x BLOCK_Y (along M) per work-group.
launch("gemm_tt_gelu", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0,
       a, b, bias, res, out, M, N, K, M + 3, K + 5, N + 2, 1.5);
