// @peak macros
// @peak device
// Two kernels as a model's code often has them: a row normalisation writes an
// intermediate, and an elementwise kernel maps it (gain, then GELU) into the result.
__kernel void rms_normalize(__global float* normed, __global const float* x, int rows, int cols) {
    int r = get_global_id(0);
    if (r >= rows) return;
    float sum = 0.0f;
    for (int c = 0; c < cols; c++) {
        float v = x[r * cols + c];
        sum += v * v;
    }
    float inv = 1.0f / sqrt(sum / (float)cols + 1e-6f);
    for (int c = 0; c < cols; c++) {
        normed[r * cols + c] = x[r * cols + c] * inv;
    }
}

__kernel void gain_gelu(__global float* out, __global const float* normed, __global const float* gain, int rows, int cols) {
    int i = get_global_id(0);
    if (i >= rows * cols) return;
    float v = normed[i] * gain[i % cols];
    out[i] = 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
}
// @peak host
// The intermediate lives in a scratch buffer; one work-item per row, then one per element.
let normed = alloc("f32", rows * cols);
launch("rms_normalize", ceil_div(rows, BLOCK_X), BLOCK_X, 0, normed, x, rows, cols);
launch("gain_gelu", ceil_div(rows * cols, BLOCK_X), BLOCK_X, 0, out, normed, gain, rows, cols);
