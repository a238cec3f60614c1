// @peak macros
// @peak device
__kernel void permute(__global float* out, __global const float* inp, int P, int Q, int R, int D) {
    int i = get_global_id(0);
    if (i < P * Q * R * D) {
        int e = i % D;
        int q = (i / D) % Q;
        int p = (i / (D * Q)) % P;
        int r = i / (D * Q * P);
        out[i] = inp[((p * Q + q) * R + r) * D + e];
    }
}
// @peak host
// One work-item per element of out; BLOCK_X work-items per work-group.
launch("permute", ceil_div(P * Q * R * D, BLOCK_X), BLOCK_X, 0, out, inp, P, Q, R, D);
