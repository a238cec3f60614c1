// Uses every HIP snippet once; compiled for gfx90a (MI200) by compile_snippets.sh.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "../snippets/tile_copy.hip"
#include "../snippets/tile_copy_transposed.hip"
#include "../snippets/async_copy.hip"
#include "../snippets/mfma.hip"
#include "../snippets/tile_load.hip"
#define A_AT(r, c) A[(r) * n + (c)]
#define W_AT(r, c) Af[(c) * n + (r)]
extern "C" __global__ void k(const __half* A, const float* Af, float* C, int n) {
    __shared__ __half t[8][16];
    __shared__ __half tt[16][8];
    __shared__ float tf[8][16];
    __shared__ __half tl[8][16];
    __shared__ float tc[16][8];
    PEAK_TILE_LOAD(tl, A_AT, 0, 0, 8, 16, n, n, threadIdx.x, blockDim.x);
    PEAK_TILE_LOAD_COLMAJOR(tc, W_AT, 0, 0, 16, 8, n, n, threadIdx.x, blockDim.x);
    PEAK_TILE_COPY(t, A, n, 0, 0, 8, 16, n, n, threadIdx.x, blockDim.x);
    PEAK_TILE_COPY_T(tt, A, n, 0, 0, 8, 16, n, n, threadIdx.x, blockDim.x);
    PEAK_ASYNC_COPY(tf[0][threadIdx.x % 16], Af, threadIdx.x, threadIdx.x < n);
    PEAK_ASYNC_COMMIT(); PEAK_ASYNC_WAIT(0);
    __syncthreads();
    peak_float4 acc = {0, 0, 0, 0};
    peak_half4 a = {(_Float16)1, (_Float16)2, (_Float16)3, (_Float16)4}, b = a;
    PEAK_MFMA_F16(acc, a, b);
    PEAK_MFMA_F32(acc, Af[0], Af[1]);
    C[threadIdx.x] = acc[0] + __half2float(t[0][0]) + __half2float(tt[0][0]) + tf[0][0] + __half2float(tl[0][0]) + tc[0][0];
}
