// @peak macros
// GPT-2 GELU backward, ported from llm.c's dev/cuda/gelu_backward.cu (gelu_backward1) to
// OpenCL C: dinp[i] = local_grad(inp[i]) * dout[i], the derivative of the tanh
// approximation of GELU.
// Brought in by `peak new` from gelu_backward.cl:
#define GELU_SCALING_FACTOR 0.7978845608f  // sqrt(2 / pi)
// @peak device
__kernel void gelu_backward1(__global float* dinp, __global const float* inp, __global const float* dout, int N) {
    int i = get_global_id(0);
    if (i < N) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        float tanh_out = tanh(tanh_arg);
        float coshf_out = cosh(tanh_arg);
        float sech_out = 1.0f / (coshf_out * coshf_out);
        float local_grad = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech_out * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local_grad * dout[i];
    }
}
// @peak host
// Proposed by `peak new` from how `gelu_backward1` indexes its threads:
//   i = get_global_id(0), guarded by `i < N`
// so one thread per `i` below N, BLOCK_X threads per block.
launch("gelu_backward1", ceil_div(N, BLOCK_X), BLOCK_X, 0, dinp, inp, dout, N);
