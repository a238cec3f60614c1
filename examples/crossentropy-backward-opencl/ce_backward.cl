// @peak macros
// GPT-2 cross-entropy + softmax backward, ported from llm.c's
// dev/cuda/crossentropy_softmax_backward.cu (crossentropy_softmax_backward_kernel1) to
// OpenCL C: dlogits[b, t, v] += (probs[b, t, v] - (v == targets[b, t])) * dlosses[b, t].
// Brought in by `peak new` from ce_backward.cl:
// @peak device
__kernel void crossentropy_softmax_backward_kernel1(__global float* dlogits, __global const float* dlosses,
                                                    __global const float* probs, __global const int* targets,
                                                    int B, int T, int V) {
    int i = get_global_id(0);
    if (i < B * T * V) {
        int b = i / (T * V);
        int t = (i / V) % T;
        int v = i % V;
        __global float* dlogits_bt = dlogits + b * T * V + t * V;
        __global const float* probs_bt = probs + b * T * V + t * V;
        float dloss = dlosses[b * T + t];
        int ix = targets[b * T + t];
        float p = probs_bt[v];
        float indicator = v == ix ? 1.0f : 0.0f;
        dlogits_bt[v] += (p - indicator) * dloss;
    }
}
// @peak host
// Proposed by `peak new` from how `crossentropy_softmax_backward_kernel1` indexes its threads:
//   i = get_global_id(0), guarded by `i < B * T * V`
// so one thread per `i` below B * T * V, BLOCK_X threads per block.
// The kernel reads dlogits as well as writing it: in place (output and inout in peak.toml), every run starts it from its random init.
launch("crossentropy_softmax_backward_kernel1", ceil_div(B * T * V, BLOCK_X), BLOCK_X, 0, dlogits, dlosses, probs, targets, B, T, V);
