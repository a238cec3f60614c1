// Uses every OpenCL snippet once; compiled by compile_snippets.sh.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#include "../snippets/tile_copy.cl"
#include "../snippets/tile_copy_transposed.cl"
#include "../snippets/async_copy.cl"
#include "../snippets/tile_load.cl"
#define A_AT(r, c) A[(r) * n + (c)]
#define W_AT(r, c) A[(c) * n + (r)]
#define H_AT(r, c) H[(r) * n + (c)]
__kernel void k(__global const float* A, __global const half* H, __global float* C, int n) {
    __local float t[8][16];
    __local float tt[16][8];
    __local half th[8][16];
    __local float ta[16];
    __local float tl[8][16];
    __local float tc[16][8];
    __local half tlh[8][16];
    int tid = get_local_id(0), nthr = get_local_size(0);
    PEAK_TILE_COPY(t, A, n, 0, 0, 8, 16, n, n, tid, nthr);
    PEAK_TILE_COPY_T(tt, A, n, 0, 0, 8, 16, n, n, tid, nthr);
    PEAK_TILE_COPY(th, H, n, 0, 0, 8, 16, n, n, tid, nthr);
    PEAK_TILE_LOAD(tl, A_AT, 0, 0, 8, 16, n, n, tid, nthr);
    PEAK_TILE_LOAD_COLMAJOR(tc, W_AT, 0, 0, 16, 8, n, n, tid, nthr);
    PEAK_TILE_LOAD(tlh, H_AT, 0, 0, 8, 16, n, n, tid, nthr);
    PEAK_ASYNC_COPY(ta[tid % 16], A, tid, tid < n);
    PEAK_ASYNC_COMMIT(); PEAK_ASYNC_WAIT(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    C[tid] = t[0][0] + tt[0][0] + (float)th[0][0] + ta[0] + tl[0][0] + tc[0][0] + (float)tlh[0][0];
}
