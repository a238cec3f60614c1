// @peak macros
// @peak device
extern "C" __global__ void layernorm(float* out, const float* inp, const float* weight, const float* bias, int N, int C) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < N) {
        const float* x = inp + row * C;
        float mean = 0.0f;
        for (int i = 0; i < C; i++) {
            mean += x[i];
        }
        mean = mean / C;
        float var = 0.0f;
        for (int i = 0; i < C; i++) {
            float d = x[i] - mean;
            var += d * d;
        }
        var = var / C;
        float s = 1.0f / sqrtf(var + 1e-5f);
        float* o = out + row * C;
        for (int i = 0; i < C; i++) {
            o[i] = s * (x[i] - mean) * weight[i] + bias[i];
        }
    }
}
// @peak host
// One thread per row; BLOCK_X rows per block.
launch("layernorm", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, weight, bias, N, C);
