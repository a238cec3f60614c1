// @peak macros
#define TW (BX * PX)
#define TH (BY * PY)
// @peak device
extern "C" __global__ void __launch_bounds__(BX * BY) conv2d(const float* __restrict__ in, const float* __restrict__ w, float* __restrict__ out, int n) {
    const int gx = blockIdx.x * TW, gy = blockIdx.y * TH;
    const int lx = threadIdx.x, ly = threadIdx.y;
    const int stride = n + 4;
#if USE_LOCAL
    __shared__ float tile[TH + 4][TW + 4];
    for (int i = ly * BX + lx; i < (TH + 4) * (TW + 4); i += BX * BY) {
        const int r = i / (TW + 4), c = i % (TW + 4);
        tile[r][c] = in[(gy + r) * stride + gx + c];
    }
    __syncthreads();
#define AT(r, c) tile[(r) - gy][(c) - gx]
#else
#define AT(r, c) in[(r) * stride + (c)]
#endif
#pragma unroll
    for (int py = 0; py < PY; ++py) {
#pragma unroll
        for (int px = 0; px < PX; ++px) {
            const int y = gy + ly + py * BY, x = gx + lx + px * BX;
            float acc = 0.0f;
#pragma unroll
            for (int i = 0; i < 5; ++i)
#pragma unroll
                for (int j = 0; j < 5; ++j) acc += AT(y + i, x + j) * w[i * 5 + j];
            out[y * n + x] = acc;
        }
    }
}
// @peak host
launch("conv2d", [n / (BX * PX), n / (BY * PY)], [BX, BY], 0, IN, W, OUT, n);
