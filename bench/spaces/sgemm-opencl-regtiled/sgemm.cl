// @peak macros
#define BM (BY * TY)
#define BN (BX * TX)
#define THREADS (BX * BY)
// @peak device
__kernel __attribute__((reqd_work_group_size(BX, BY, 1)))
void sgemm(__global const float* restrict A, __global const float* restrict B, __global float* restrict C, int n) {
    __local float As[KT][BM];
    __local float Bs[KT][BN];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int tid = ty * BX + tx;
    const int row0 = get_group_id(1) * BM, col0 = get_group_id(0) * BN;
    float acc[TY][TX];
    for (int y = 0; y < TY; ++y)
        for (int x = 0; x < TX; ++x) acc[y][x] = 0.0f;
    for (int k0 = 0; k0 < n; k0 += KT) {
        for (int i = tid; i < BM * KT; i += THREADS) {
            const int r = i / KT, k = i % KT;
            As[k][r] = A[(row0 + r) * n + k0 + k];
        }
        for (int i = tid; i < KT * BN; i += THREADS) {
            const int k = i / BN, c = i % BN;
            Bs[k][c] = B[(k0 + k) * n + col0 + c];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < KT; ++k) {
            float a[TY], b[TX];
            for (int y = 0; y < TY; ++y) a[y] = As[k][ty + y * BY];
            for (int x = 0; x < TX; ++x) b[x] = Bs[k][tx + x * BX];
            for (int y = 0; y < TY; ++y)
                for (int x = 0; x < TX; ++x) acc[y][x] += a[y] * b[x];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int y = 0; y < TY; ++y)
        for (int x = 0; x < TX; ++x) C[(row0 + ty + y * BY) * n + col0 + tx + x * BX] = acc[y][x];
}
// @peak host
launch("sgemm", [n / (BX * TX), n / (BY * TY)], [BX, BY], 0, A, B, C, n);
