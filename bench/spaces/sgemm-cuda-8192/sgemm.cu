// @peak macros
#define BM (BY * TY)
#define BN (BX * TX)
#define THREADS (BX * BY)
// @peak device
extern "C" __global__ void __launch_bounds__(THREADS) sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n) {
    // A's slice is stored transposed (As[k][row]) so the inner loop reads both slices by k.
    __shared__ float As[KT][BM];
    __shared__ float Bs[KT][BN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * BX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TY][TX];
#pragma unroll
    for (int y = 0; y < TY; ++y)
#pragma unroll
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
        __syncthreads();
#pragma unroll
        for (int k = 0; k < KT; ++k) {
            float a[TY], b[TX];
            // Strided ownership (rows ty, ty+BY, ...; columns tx, tx+BX, ...): neighbouring
            // threads read neighbouring words of Bs and store neighbouring words of C.
#pragma unroll
            for (int y = 0; y < TY; ++y) a[y] = As[k][ty + y * BY];
#pragma unroll
            for (int x = 0; x < TX; ++x) b[x] = Bs[k][tx + x * BX];
#pragma unroll
            for (int y = 0; y < TY; ++y)
#pragma unroll
                for (int x = 0; x < TX; ++x) acc[y][x] += a[y] * b[x];
        }
        __syncthreads();
    }
#pragma unroll
    for (int y = 0; y < TY; ++y)
#pragma unroll
        for (int x = 0; x < TX; ++x) C[(row0 + ty + y * BY) * n + col0 + tx + x * BX] = acc[y][x];
}
// @peak host
// BX x BY threads per block, one (BY*TY) x (BX*TX) tile of C per block; grid in blocks.
launch("sgemm", [n / (BX * TX), n / (BY * TY)], [BX, BY], 0, A, B, C, n);
