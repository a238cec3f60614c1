// @peak macros
// @peak device
extern "C" __global__ void block_sum(const float* X, float* P, int n, int chunk) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < n / chunk) {
        float acc = 0.0f;
        for (int i = 0; i < chunk; ++i) {
            acc += X[b * chunk + i];
        }
        P[b] = acc;
    }
}
// @peak host
// One work-item per chunk of X; BLOCK_X chunks per work-group.
launch("block_sum", [ceil_div(n / chunk, BLOCK_X)], [BLOCK_X], 0, X, P, n, chunk);
