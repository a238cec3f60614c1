// @peak macros
#if VEC == 1
#define floatV float
#define HSUM(v) (v)
#define ZERO 0.0f
#define FMA_V(acc, a, b) acc += (a) * (b)
#elif VEC == 2
#define floatV float2
#define HSUM(v) ((v).x + (v).y)
#define ZERO make_float2(0.0f, 0.0f)
#define FMA_V(acc, a, b) { acc.x += (a).x * (b).x; acc.y += (a).y * (b).y; }
#else
#define floatV float4
#define HSUM(v) ((v).x + (v).y + (v).z + (v).w)
#define ZERO make_float4(0.0f, 0.0f, 0.0f, 0.0f)
#define FMA_V(acc, a, b) { acc.x += (a).x * (b).x; acc.y += (a).y * (b).y; acc.z += (a).z * (b).z; acc.w += (a).w * (b).w; }
#endif
// @peak device
extern "C" __global__ void __launch_bounds__(WG) gemv(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int n) {
    const int row0 = (blockIdx.x * WG + threadIdx.x) * RPI;
    const floatV* xv = reinterpret_cast<const floatV*>(x);
    for (int r = 0; r < RPI; ++r) {
        const int row = row0 + r;
        const floatV* a = reinterpret_cast<const floatV*>(A + (long)row * n);
        floatV acc = ZERO;
        for (int k = 0; k < n / VEC; k += UNROLL) {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) FMA_V(acc, a[k + u], xv[k + u]);
        }
        y[row] = HSUM(acc);
    }
}
// @peak host
launch("gemv", n / (WG * RPI), WG, 0, A, X, Y, n);
