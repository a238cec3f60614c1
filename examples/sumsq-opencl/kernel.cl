// @peak macros
// @peak device
// total += v, atomically. OpenCL 1.2 has no atomic add on floats: read the total, add,
// and swap the sum's bits in only if the total still holds what was read; else retry.
inline void atomic_add_float(volatile __global float* total, float v) {
    union { unsigned int u; float f; } seen, sum;
    do {
        seen.f = *total;
        sum.f = seen.f + v;
    } while (atomic_cmpxchg((volatile __global unsigned int*)total, seen.u, sum.u) != seen.u);
}

__kernel void sum_squares(__global const float* X, __global float* total, int n) {
    __local float part[BLOCK_X];
    const int t = get_local_id(0);
    const int i = get_global_id(0);
    const float x = i < n ? X[i] : 0.0f;
    part[t] = x * x;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (t < s) part[t] += part[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) atomic_add_float(total, part[0]);
}
// @peak host
// The total starts at zero; one work-item per element, BLOCK_X per work-group, each
// work-group adding its partial sum to the total.
fill(total, 0.0);
launch("sum_squares", ceil_div(n, BLOCK_X), BLOCK_X, 0, X, total, n);
