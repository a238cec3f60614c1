// @peak macros
// @peak device
__kernel void layernorm(__global float* out, __global const float* inp, __global const float* weight, __global const float* bias, int N, int C) {
    int row = get_global_id(0);
    if (row < N) {
        __global const float* x = inp + row * C;
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
        float s = 1.0f / sqrt(var + 1e-5f);
        __global float* o = out + row * C;
        for (int i = 0; i < C; i++) {
            o[i] = s * (x[i] - mean) * weight[i] + bias[i];
        }
    }
}
// @peak host
// One work-item per row; BLOCK_X rows per work-group.
launch("layernorm", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, weight, bias, N, C);
