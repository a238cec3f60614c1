// @peak macros
// GPT-2 encoder backward, ported from llm.c's dev/cuda/encoder_backward.cu
// (encoder_backward_kernel1's parallel form, as encoder_backward_kernel2 launches it: one
// work-item per element of dout) to OpenCL C:
//   dwte[inp[b, t], c] += dout[b, t, c];  dwpe[t, c] += dout[b, t, c]
// Several positions hold the same token and every b the same position, so both updates
// are atomic (OpenCL C has no float atomic add: a compare-and-swap loop on the bits).
// Brought in by `peak new` from encoder_backward.cl:
// @peak device
void atomic_add_float(volatile __global float* p, float v) {
    union { unsigned int u; float f; } old, updated;
    do {
        old.f = *p;
        updated.f = old.f + v;
    } while (atomic_cmpxchg((volatile __global unsigned int*)p, old.u, updated.u) != old.u);
}

__kernel void encoder_backward_kernel(__global float* dwte, __global float* dwpe,
                                      __global const float* dout, __global const int* inp,
                                      int B, int T, int C) {
    int idx = get_global_id(0);
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        __global const float* dout_btc = dout + b * T * C + t * C + c;
        __global float* dwte_ix = dwte + ix * C + c;
        __global float* dwpe_tc = dwpe + t * C + c;
        atomic_add_float(dwte_ix, *dout_btc);
        atomic_add_float(dwpe_tc, *dout_btc);
    }
}
// @peak host
// Proposed by `peak new` from how `encoder_backward_kernel` indexes its threads:
//   idx = get_global_id(0), guarded by `idx < N`
// so one thread per `idx` below (B * T * C), BLOCK_X threads per block.
// dwte has V*C elements: each thread handles several.
// The kernel reads dwte as well as writing it: in place (output and inout in peak.toml), every run starts it from its random init.
// The kernel reads dwpe as well as writing it: in place (output and inout in peak.toml), every run starts it from its random init.
launch("encoder_backward_kernel", ceil_div((B * T * C), BLOCK_X), BLOCK_X, 0, dwte, dwpe, dout, inp, B, T, C);
