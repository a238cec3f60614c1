// @peak macros
// @peak device
// A batch of GEMMs, C[b] = alpha * A[b] . B[b] + beta * C[b] for b < BATCH, as a strided
// batched BLAS call does it: A[b] is M x K stored K-major (element (m, k) at
// a[b * M * K + k * M + m]: the operand arrives transposed), B[b] is K x N row-major and
// C[b] is M x N row-major, each problem right after the previous one.
__kernel void bmm_tn(__global const float* a, __global const float* bm, __global float* c,
                     int BATCH, int M, int N, int K, float alpha, float beta) {
    int col = get_global_id(0);
    int row = get_global_id(1);
    int b = get_global_id(2);
    if (b < BATCH && row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += a[b * M * K + k * M + row] * bm[b * K * N + k * N + col];
        }
        int o = b * M * N + row * N + col;
        c[o] = alpha * sum + beta * c[o];
    }
}
// @peak host
// One work-item per element of C; BLOCK_X (along N) x BLOCK_Y (along M) per work-group, one problem per grid layer.
launch("bmm_tn", [ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y), BATCH], [BLOCK_X, BLOCK_Y, 1], 0, a, bm, c, BATCH, M, N, K, 0.75, 0.5);
