// @peak macros
#if VEC == 1
#define floatV float
#define HSUM(v) (v)
#elif VEC == 2
#define floatV float2
#define HSUM(v) ((v).s0 + (v).s1)
#elif VEC == 4
#define floatV float4
#define HSUM(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3)
#else
#define floatV float8
#define HSUM(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3 + (v).s4 + (v).s5 + (v).s6 + (v).s7)
#endif
// @peak device
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void gemv(__global const float* restrict A, __global const float* restrict x, __global float* restrict y, int n) {
    const int row0 = get_global_id(0) * RPI;
    __global const floatV* xv = (__global const floatV*)x;
    for (int r = 0; r < RPI; ++r) {
        const int row = row0 + r;
        __global const floatV* a = (__global const floatV*)(A + (long)row * n);
        floatV acc = (floatV)(0.0f);
        for (int k = 0; k < n / VEC; k += UNROLL) {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) acc += a[k + u] * xv[k + u];
        }
        y[row] = HSUM(acc);
    }
}
// @peak host
launch("gemv", n / (WG * RPI), WG, 0, A, X, Y, n);
