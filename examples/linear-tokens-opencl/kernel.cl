// @peak macros
// @peak device
// A linear layer as training code writes it: tokens first. Work-item x numbers the token
// (a row of out), y the output channel; weight is stored output-channel-major.
__kernel void linear_forward(__global float* out, __global const float* inp, __global const float* weight,
                             __global const float* bias, int tokens, int channels, int outputs) {
    int t = get_global_id(0);
    int o = get_global_id(1);
    if (t < tokens && o < outputs) {
        float acc = bias[o];
        for (int c = 0; c < channels; c++) {
            acc += inp[t * channels + c] * weight[o * channels + c];
        }
        out[t * outputs + o] = acc;
    }
}
// @peak host
// One work-item per output: x over the tokens, y over the output channels.
launch("linear_forward", [ceil_div(tokens, BLOCK_X), ceil_div(outputs, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, out, inp, weight, bias, tokens, channels, outputs);
