"""Compile the CUDA snippets with NVRTC, as peak's CUDA backend does (no CUDA headers on the
include path), for sm_90a: catches anything that only compiles under nvcc's implicit headers.

    python3 nvrtc_snippets.py      # needs CuPy; exits non-zero if a snippet does not compile
"""
import pathlib
import sys

import cupy

SNIPPETS = pathlib.Path(__file__).resolve().parent.parent / "snippets"
USES = {
    "tile_copy": "float t[4][8]; PEAK_TILE_COPY(t, A, n, 0, 0, 4, 8, n, n, threadIdx.x, blockDim.x); C[0] = t[0][0];",
    "tile_copy_transposed": "float t[8][4]; PEAK_TILE_COPY_T(t, A, n, 0, 0, 4, 8, n, n, threadIdx.x, blockDim.x); C[0] = t[0][0];",
    "tile_load": "float t[4][8], u[8][4]; PEAK_TILE_LOAD(t, A_AT, 0, 0, 4, 8, n, n, threadIdx.x, blockDim.x); PEAK_TILE_LOAD_COLMAJOR(u, W_AT, 0, 0, 8, 4, n, n, threadIdx.x, blockDim.x); C[0] = t[0][0] + u[0][0];",
    "async_copy": "__shared__ float s[32]; PEAK_ASYNC_COPY(s[threadIdx.x], A, threadIdx.x, threadIdx.x < n); PEAK_ASYNC_COMMIT(); PEAK_ASYNC_WAIT(0); __syncthreads(); C[0] = s[0];",
    "mma_sync": "__shared__ __align__(16) unsigned short s[16 * 16]; unsigned a[4], b[4]; float d[4] = {}; peak_ldmatrix_a(a, s); peak_ldmatrix_b(b, s); peak_mma_16816(d, a, b); peak_mma_16816_bf16(d, a, b); peak_ldmatrix_b_k8(b, s); peak_mma_16832_e4m3(d, a, b); peak_mma_16832_e5m2(d, a, b); C[0] = d[0];",
    "tma": "__shared__ __align__(128) float box[64]; __shared__ unsigned long long bar; if (threadIdx.x == 0) { peak_mbar_init(&bar, 1); peak_fence_mbar_init(); } __syncthreads(); if (threadIdx.x == 0) { peak_mbar_arrive_expect_tx(&bar, 256); peak_tma_load_2d(box, &tmap, 0, 0, &bar); } peak_mbar_wait(&bar, 0); C[0] = box[0];",
    "tma_store": "__shared__ __align__(1024) unsigned char box[64 * 128]; *reinterpret_cast<float*>(box + peak_swizzle_128b(threadIdx.x % 64, 4 * (threadIdx.x / 64))) = A[0]; peak_fence_proxy_async(); peak_bar_sync(1, blockDim.x); if (threadIdx.x == 0) { peak_tma_store_2d(&tmap, 0, 0, box); peak_tma_store_wait(); } C[0] = 0.0f;",
    "tma_store_ring": "if (threadIdx.x == 0) { peak_tma_store_commit(); peak_tma_store_wait_read<1>(); } C[0] = 0.0f;",
    "stmatrix": "__shared__ __align__(1024) unsigned char s[8192]; peak_stmatrix_x4(s + 16 * (threadIdx.x % 32), peak_pack_16x2(__float_as_uint(A[0])), 0u, 0u, 0u); __syncthreads(); C[0] = s[threadIdx.x];",
    "cluster_reduce": "__shared__ __align__(8) unsigned long long bar; C[threadIdx.x] = A[0]; peak_fence_cluster(); __syncthreads(); if (threadIdx.x == 0) peak_mbar_arrive_release(&bar, 0); peak_mbar_wait_acquire(&bar, 0); C[0] = __ldcg(&C[1]);",
    "named_barrier": "if (threadIdx.x < 64) peak_bar_arrive(1, 128); else asm volatile(\"bar.sync 1, 128;\" ::: \"memory\"); C[0] = 0.0f;",
    "wgmma_fp8": "__shared__ __align__(1024) unsigned char s[64 * 128]; float d[128]; unsigned long long desc = peak_wgmma_desc(s, 16, 1024); peak_wgmma_fence(); peak_wgmma_e4m3_m64n128k32(d, desc, desc, 0); peak_wgmma_e5m2_m64n64k32(d, desc, desc, 1); peak_wgmma_e4m3_m64n192k32(d, desc, desc, 1); peak_wgmma_e4m3_m64n256k32(d, desc, desc, 1); peak_wgmma_commit(); peak_wgmma_wait<0>(); C[0] = d[0];",
    "wgmma": "__shared__ __align__(1024) unsigned short s[64 * 64]; float d[64]; unsigned long long desc = peak_wgmma_desc(s, 16, 1024); peak_wgmma_fence(); peak_wgmma_m64n128k16(d, desc, desc, 0); peak_wgmma_bf16_m64n128k16<0>(d, desc, desc, 1); peak_wgmma_f16_m64n64k16<1>(d, desc, desc, 1); peak_wgmma_commit(); peak_wgmma_wait<0>(); C[0] = d[0];",
}

failed = 0
for name, use in USES.items():
    text = (SNIPPETS / f"{name}.cu").read_text()
    # tma_store builds on tma's types and helpers, as a kernel that uses it already has them.
    if name == "tma_store":
        text = (SNIPPETS / "tma.cu").read_text() + text
    # wgmma_fp8 builds on wgmma's descriptor and protocol, as a kernel that uses it already has them.
    if name == "wgmma_fp8":
        text = (SNIPPETS / "wgmma.cu").read_text() + text
    tma_param = ", const __grid_constant__ PeakTensorMap tmap" if name in ("tma", "tma_store") else ""
    if name == "tile_load":
        text += "\n#define A_AT(r, c) A[(r) * n + (c)]\n#define W_AT(r, c) A[(c) * n + (r)]\n"
    source = f'{text}\nextern "C" __global__ void k(const float* A, float* C, int n{tma_param}) {{ {use} }}\n'
    try:
        module = cupy.RawModule(code=source, options=("--gpu-architecture=sm_90a", "--std=c++17"))
        module.get_function("k")
        print(f"ok   {name}.cu compiles with NVRTC")
    except Exception as e:  # CuPy raises its own compile error type with the log
        failed += 1
        print(f"FAIL {name}.cu: {e}")
sys.exit(1 if failed else 0)
