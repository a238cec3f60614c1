// @peak macros
// GPT-2 encoder forward, ported from llm.c's dev/cuda/encoder_forward.cu (a kernel per
// output element, as encoder_forward_kernel2) to OpenCL C:
// out[b, t, c] = wte[inp[b, t], c] + wpe[t, c].
// Brought in by `peak new` from encoder.cl:
// @peak device
__kernel void encoder_forward_kernel2(__global float* out, __global const int* inp,
                                      __global const float* wte, __global const float* wpe,
                                      int B, int T, int C) {
    int idx = get_global_id(0);
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        __global float* out_btc = out + b * T * C + t * C + c;
        __global const float* wte_ix = wte + ix * C + c;
        __global const float* wpe_tc = wpe + t * C + c;
        *out_btc = *wte_ix + *wpe_tc;
    }
}
// @peak host
// Proposed by `peak new` from how `encoder_forward_kernel2` indexes its threads:
//   idx = get_global_id(0), guarded by `idx < N`
// so one thread per `idx` below (B * T * C), BLOCK_X threads per block.
launch("encoder_forward_kernel2", ceil_div((B * T * C), BLOCK_X), BLOCK_X, 0, out, inp, wte, wpe, B, T, C);
