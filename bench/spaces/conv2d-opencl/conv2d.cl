// @peak macros
#define TW (BX * PX)
#define TH (BY * PY)
// @peak device
__kernel __attribute__((reqd_work_group_size(BX, BY, 1)))
void conv2d(__global const float* restrict in, __global const float* restrict w, __global float* restrict out, int n) {
    const int gx = get_group_id(0) * TW, gy = get_group_id(1) * TH;
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int stride = n + 4;
#if USE_LOCAL
    __local float tile[TH + 4][TW + 4];
    for (int i = ly * BX + lx; i < (TH + 4) * (TW + 4); i += BX * BY) {
        const int r = i / (TW + 4), c = i % (TW + 4);
        tile[r][c] = in[(gy + r) * stride + gx + c];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#define AT(r, c) tile[(r) - gy][(c) - gx]
#else
#define AT(r, c) in[(r) * stride + (c)]
#endif
    for (int py = 0; py < PY; ++py) {
        for (int px = 0; px < PX; ++px) {
            const int y = gy + ly + py * BY, x = gx + lx + px * BX;
            float acc = 0.0f;
            for (int i = 0; i < 5; ++i)
                for (int j = 0; j < 5; ++j) acc += AT(y + i, x + j) * w[i * 5 + j];
            out[y * n + x] = acc;
        }
    }
}
// @peak host
launch("conv2d", [n / (BX * PX), n / (BY * PY)], [BX, BY], 0, IN, W, OUT, n);
