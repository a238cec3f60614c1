// Checks the CUDA snippets of the transformation library on a GPU: every helper is run
// once and its result compared with a host computation. The Hopper helpers (tma, wgmma)
// (tma, tma_store, wgmma) need compute capability 9.0 and the sm_90a target.
//
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o cuda_snippets cuda_snippets.cu -lcuda
//   ./cuda_snippets        # prints one line per check, exits non-zero on any failure
//
// It includes the snippet files themselves, so it checks exactly the text peak inserts.
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../snippets/async_copy.cu"
#include "../snippets/mma_sync.cu"
#include "../snippets/stmatrix.cu"
#include "../snippets/cluster_reduce.cu"
#include "../snippets/tile_copy.cu"
#include "../snippets/tile_copy_transposed.cu"
#include "../snippets/tma.cu"
#include "../snippets/tma_store.cu"
#include "../snippets/wgmma.cu"
#include "../snippets/wgmma_fp8.cu"

static int failures = 0;

#define CUDA_OK(call)                                                                                  \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));     \
            std::exit(2);                                                                              \
        }                                                                                              \
    } while (0)

static void report(const char* what, bool ok, const char* detail = "") {
    std::printf("%s %s %s\n", ok ? "ok  " : "FAIL", what, detail);
    if (!ok) ++failures;
}

static float value_at(int r, int c) { return (float)(((r * 131 + c * 71) % 17) - 8) / 8.0f; }

// A new device buffer holding `host`.
template <typename T>
static T* to_device(const std::vector<T>& host) {
    T* d;
    CUDA_OK(cudaMalloc(&d, host.size() * sizeof(T)));
    CUDA_OK(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// After a launch: `count` floats of the device buffer `d`, which is freed.
static std::vector<float> from_device(float* d, size_t count) {
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> host(count);
    CUDA_OK(cudaMemcpy(host.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return host;
}

// Report `what` as passed when every element of the rows x cols result `got` is within
// `tolerance` of want(r, c), the host's sum in f32.
template <typename Want>
static void report_max_error(const char* what, const std::vector<float>& got, int rows, int cols, Want want, double tolerance) {
    double worst = 0;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) worst = std::fmax(worst, std::fabs(want(r, c) - got[r * cols + c]));
    char detail[64];
    std::snprintf(detail, sizeof detail, "max abs error %.3g", worst);
    report(what, worst < tolerance, detail);
}

template <typename T> static T from_float(float v);
template <> float from_float<float>(float v) { return v; }
template <> __half from_float<__half>(float v) { return __float2half(v); }
static float to_float(float v) { return v; }
static float to_float(__half v) { return __half2float(v); }

// ---- tile copies: plain, transposed, asynchronous (with zero fill past the matrix) ----
template <typename T, int ROWS, int COLS>
__global__ void copy_tiles(const T* src, int ld, int rows, int cols, int row0, int col0, T* out, T* out_t, T* out_async) {
    __shared__ T tile[ROWS][COLS + 1];
    __shared__ T tile_t[COLS][ROWS + 3];
    __shared__ __align__(16) T tile_a[ROWS][COLS];
    const int tid = threadIdx.x, nthr = blockDim.x;
    PEAK_TILE_COPY(tile, src, ld, row0, col0, ROWS, COLS, rows, cols, tid, nthr);
    PEAK_TILE_COPY_T(tile_t, src, ld, row0, col0, ROWS, COLS, rows, cols, tid, nthr);
    for (int i = tid; i < ROWS * COLS; i += nthr) {
        const int r = i / COLS, c = i % COLS, gr = row0 + r, gc = col0 + c;
        PEAK_ASYNC_COPY(tile_a[r][c], src, gr * ld + gc, gr < rows && gc < cols);
    }
    PEAK_ASYNC_COMMIT();
    PEAK_ASYNC_WAIT(0);
    __syncthreads();
    for (int i = tid; i < ROWS * COLS; i += nthr) {
        const int r = i / COLS, c = i % COLS;
        out[i] = tile[r][c];
        out_t[i] = tile_t[c][r];
        out_async[i] = tile_a[r][c];
    }
}

template <typename T>
static void check_tile_copies(const char* type) {
    constexpr int ROWS = 40, COLS = 24;
    const int rows = 44, cols = 26, ld = cols, row0 = 8, col0 = 4;  // rows 44.. and cols 26.. lie outside
    std::vector<T> host(rows * cols);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) host[r * cols + c] = from_float<T>(value_at(r, c));
    T *src, *out;
    CUDA_OK(cudaMalloc(&src, host.size() * sizeof(T)));
    CUDA_OK(cudaMalloc(&out, 3 * ROWS * COLS * sizeof(T)));
    CUDA_OK(cudaMemcpy(src, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(out, 0x7f, 3 * ROWS * COLS * sizeof(T)));
    copy_tiles<T, ROWS, COLS><<<1, 96>>>(src, ld, rows, cols, row0, col0, out, out + ROWS * COLS, out + 2 * ROWS * COLS);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<T> got(3 * ROWS * COLS);
    CUDA_OK(cudaMemcpy(got.data(), out, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
    const char* names[3] = {"PEAK_TILE_COPY", "PEAK_TILE_COPY_T", "PEAK_ASYNC_COPY"};
    for (int k = 0; k < 3; ++k) {
        int bad = 0;
        for (int r = 0; r < ROWS; ++r)
            for (int c = 0; c < COLS; ++c) {
                const int gr = row0 + r, gc = col0 + c;
                const float want = (gr < rows && gc < cols) ? value_at(gr, gc) : 0.0f;
                if (to_float(got[k * ROWS * COLS + r * COLS + c]) != to_float(from_float<T>(want))) ++bad;
            }
        char what[96], detail[64];
        std::snprintf(what, sizeof what, "%s (%s)", names[k], type);
        std::snprintf(detail, sizeof detail, "%d wrong of %d", bad, ROWS * COLS);
        report(what, bad == 0, detail);
    }
    cudaFree(src);
    cudaFree(out);
}

// 16-byte elements take the cp.async path with the largest copy size.
__global__ void copy_vectors(const float4* src, int count, float4* out) {
    __shared__ __align__(16) float4 tile[64];
    const int i = threadIdx.x;
    PEAK_ASYNC_COPY(tile[i], src, i, i < count);
    PEAK_ASYNC_COMMIT();
    PEAK_ASYNC_WAIT(0);
    __syncthreads();
    out[i] = tile[i];
}

static void check_vector_async_copy() {
    std::vector<float4> host(64);
    for (int i = 0; i < 64; ++i) host[i] = make_float4(i, -i, 0.5f * i, 1.0f + i);
    float4 *src, *out;
    CUDA_OK(cudaMalloc(&src, 64 * sizeof(float4)));
    CUDA_OK(cudaMalloc(&out, 64 * sizeof(float4)));
    CUDA_OK(cudaMemcpy(src, host.data(), 64 * sizeof(float4), cudaMemcpyHostToDevice));
    copy_vectors<<<1, 64>>>(src, 50, out);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float4> got(64);
    CUDA_OK(cudaMemcpy(got.data(), out, 64 * sizeof(float4), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 64; ++i) {
        const float4 want = i < 50 ? host[i] : make_float4(0, 0, 0, 0);
        if (std::memcmp(&want, &got[i], sizeof want) != 0) ++bad;
    }
    report("PEAK_ASYNC_COPY (float4, zero fill)", bad == 0);
    cudaFree(src);
    cudaFree(out);
}

// ---- mma.sync with ldmatrix: one warp, C(16x16) = A(16x16) * B(16x16) ----
__global__ void mma_tile(const __half* A, const __half* B, float* C) {
    __shared__ __align__(16) __half As[16][24];  // padded rows of 48 bytes keep 16-byte alignment
    __shared__ __align__(16) __half Bs[16][24];
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) {
        As[i / 16][i % 16] = A[i];
        Bs[i / 16][i % 16] = B[i];
    }
    __syncwarp();
    unsigned a[4], b[4];
    peak_ldmatrix_a(a, &As[lane % 16][(lane / 16) * 8]);
    peak_ldmatrix_b(b, &Bs[lane % 16][(lane / 16) * 8]);
    float acc[2][4] = {};
    peak_mma_16816(acc[0], a, &b[0]);
    peak_mma_16816(acc[1], a, &b[2]);
    const int g = lane / 4, q = lane % 4;
    for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 4; ++e) C[(g + 8 * (e / 2)) * 16 + 8 * h + 2 * q + e % 2] = acc[h][e];
}

static void check_mma() {
    std::vector<__half> a(256), b(256);
    for (int i = 0; i < 256; ++i) {
        a[i] = __float2half(value_at(i / 16, i % 16));
        b[i] = __float2half(value_at(i % 16 + 3, i / 16 + 5));
    }
    __half *da = to_device(a), *db = to_device(b);
    float* dc;
    CUDA_OK(cudaMalloc(&dc, 1024));
    mma_tile<<<1, 32>>>(da, db, dc);
    const std::vector<float> c = from_device(dc, 256);
    report_max_error("peak_ldmatrix_a/b + peak_mma_16816", c, 16, 16, [&](int r, int col) {
        float want = 0;
        for (int k = 0; k < 16; ++k) want += __half2float(a[r * 16 + k]) * __half2float(b[k * 16 + col]);
        return want;
    }, 1e-3);
    cudaFree(da);
    cudaFree(db);
}

// ---- TMA: tensor maps as the host function cuda_tensor_map(...) is to build them ----
static PeakTensorMap tensor_map(void* ptr, unsigned long long rows, unsigned long long cols, unsigned box_rows, unsigned box_cols, CUtensorMapSwizzle swizzle,
                                CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT16, unsigned elem_bytes = 2) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {cols * elem_bytes};
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t elem[2] = {1, 1};
    const CUresult r = cuTensorMapEncodeTiled(&map, dtype, 2, ptr, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        std::printf("FAIL cuTensorMapEncodeTiled: error %d\n", (int)r);
        std::exit(2);
    }
    PeakTensorMap out;
    static_assert(sizeof(out) == sizeof(map), "PeakTensorMap must be a CUtensorMap's size");
    std::memcpy(&out, &map, sizeof out);
    return out;
}

// Two boxes through one barrier: phase 0 then phase 1, checking the parity rule.
__global__ void tma_boxes(const __grid_constant__ PeakTensorMap tmap, int x0, int y0, int x1, int y1, __half* out) {
    __shared__ __align__(128) __half box[64][32];
    __shared__ __align__(8) unsigned long long bar;
    if (threadIdx.x == 0) {
        peak_mbar_init(&bar, 1);
        peak_fence_mbar_init();
    }
    __syncthreads();
    const int xs[2] = {x0, x1}, ys[2] = {y0, y1};
    for (int phase = 0; phase < 2; ++phase) {
        if (threadIdx.x == 0) {
            peak_mbar_arrive_expect_tx(&bar, sizeof(box));
            peak_tma_load_2d(box, &tmap, xs[phase], ys[phase], &bar);
        }
        peak_mbar_wait(&bar, phase & 1);
        for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) out[phase * 64 * 32 + i] = box[i / 32][i % 32];
        __syncthreads();  // everyone has read the box before the next copy overwrites it
    }
}

static void check_tma() {
    const int rows = 128, cols = 104;  // row pitch 208 bytes: a multiple of 16, as TMA requires
    std::vector<__half> host(rows * cols);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) host[r * cols + c] = __float2half(value_at(r, c));
    __half *src, *out;
    CUDA_OK(cudaMalloc(&src, host.size() * 2));
    CUDA_OK(cudaMalloc(&out, 2 * 64 * 32 * 2));
    CUDA_OK(cudaMemcpy(src, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    const PeakTensorMap map = tensor_map(src, rows, cols, 64, 32, CU_TENSOR_MAP_SWIZZLE_NONE);
    const int x[2] = {16, 80}, y[2] = {32, 96};  // the second box sticks out right and below
    tma_boxes<<<1, 128>>>(map, x[0], y[0], x[1], y[1], out);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<__half> got(2 * 64 * 32);
    CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int p = 0; p < 2; ++p)
        for (int r = 0; r < 64; ++r)
            for (int c = 0; c < 32; ++c) {
                const int gr = y[p] + r, gc = x[p] + c;
                const float want = (gr < rows && gc < cols) ? __half2float(host[gr * cols + gc]) : 0.0f;
                if (__half2float(got[p * 2048 + r * 32 + c]) != want) ++bad;
            }
    char detail[64];
    std::snprintf(detail, sizeof detail, "%d wrong of %d", bad, 2 * 64 * 32);
    report("peak_tma_load_2d + mbarrier phases (zero fill past the edge)", bad == 0, detail);
    cudaFree(src);
    cudaFree(out);
}

// ---- tma_store: a 64-row box of 128-byte rows staged with the 128-byte swizzle, stored by TMA ----
__global__ void tma_store_box(const __grid_constant__ PeakTensorMap tmap, int x, int y) {
    __shared__ __align__(1024) unsigned char box[64 * 128];
    // Element (r, c) of the box holds (r * 64 + c) % 2048 (exact in f16); each thread writes
    // __half2 pairs the way a wgmma epilogue does (8 rows of one warp at a time).
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) {
        const int r = i / 32, c = 2 * (i % 32);
        *reinterpret_cast<__half2*>(box + peak_swizzle_128b(r, c * 2)) = __floats2half2_rn((r * 64 + c) % 2048, (r * 64 + c + 1) % 2048);
    }
    peak_fence_proxy_async();
    peak_bar_sync(1, blockDim.x);
    if (threadIdx.x == 0) {
        peak_tma_store_2d(&tmap, x, y, box);
        peak_tma_store_wait();
    }
}

static void check_tma_store() {
    const int rows = 128, cols = 104;
    __half* dst;
    CUDA_OK(cudaMalloc(&dst, rows * cols * 2));
    CUDA_OK(cudaMemset(dst, 0, rows * cols * 2));
    const PeakTensorMap map = tensor_map(dst, rows, cols, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
    const int x = 56, y = 80;  // sticks out right and below: the store is clipped
    tma_store_box<<<1, 128>>>(map, x, y);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<__half> got(rows * cols);
    CUDA_OK(cudaMemcpy(got.data(), dst, got.size() * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int gr = 0; gr < rows; ++gr)
        for (int gc = 0; gc < cols; ++gc) {
            const int r = gr - y, c = gc - x;
            const float want = (r >= 0 && r < 64 && c >= 0 && c < 64) ? float((r * 64 + c) % 2048) : 0.0f;
            if (__half2float(got[gr * cols + gc]) != want) ++bad;
        }
    char detail[64];
    std::snprintf(detail, sizeof detail, "%d wrong of %d", bad, rows * cols);
    report("peak_swizzle_128b + peak_tma_store_2d (clipped at the edge)", bad == 0, detail);
    cudaFree(dst);
}

// ---- wgmma: one warpgroup, D(64 x N) = A(64 x 64) * B(64 x N), tiles loaded by TMA with the 128-byte swizzle ----
template <int N>
__device__ __forceinline__ void wgmma_step(float* d, unsigned long long da, unsigned long long db, int accumulate) {
    if constexpr (N == 64) peak_wgmma_m64n64k16(d, da, db, accumulate);
    else if constexpr (N == 128) peak_wgmma_m64n128k16(d, da, db, accumulate);
    else peak_wgmma_m64n256k16(d, da, db, accumulate);
}

template <int N>
__global__ void __launch_bounds__(128) wgmma_tile(const __grid_constant__ PeakTensorMap tma, const __grid_constant__ PeakTensorMap tmb, float* D) {
    extern __shared__ unsigned char smem_raw[];
    // 1024-byte alignment for the 128-byte swizzle: round the dynamic base up.
    unsigned char* smem = smem_raw + ((1024 - (peak_smem_u32(smem_raw) & 1023)) & 1023);
    __half* a = reinterpret_cast<__half*>(smem);                 // [64][64]: 8192 bytes
    __half* b = reinterpret_cast<__half*>(smem + 8192);          // N / 64 boxes of [64][64]
    unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + 8192 + N / 64 * 8192);
    if (threadIdx.x == 0) {
        peak_mbar_init(bar, 1);
        peak_fence_mbar_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        peak_mbar_arrive_expect_tx(bar, 8192 + N / 64 * 8192);
        peak_tma_load_2d(a, &tma, 0, 0, bar);
        for (int c = 0; c < N / 64; ++c) peak_tma_load_2d(b + c * 64 * 64, &tmb, c * 64, 0, bar);
    }
    peak_mbar_wait(bar, 0);
    float d[N / 2];
    const unsigned long long da = peak_wgmma_desc(a, 16, 1024), db = peak_wgmma_desc(b, 8192, 1024);
    peak_wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_step<N>(d, da + 2 * k, db + 128 * k, k > 0);
    peak_wgmma_commit();
    peak_wgmma_wait<0>();
    const int t = threadIdx.x, w = t / 32, g = (t % 32) / 4, q = t % 4;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        D[(16 * w + g) * N + 8 * j + 2 * q] = d[4 * j];
        D[(16 * w + g) * N + 8 * j + 2 * q + 1] = d[4 * j + 1];
        D[(16 * w + g + 8) * N + 8 * j + 2 * q] = d[4 * j + 2];
        D[(16 * w + g + 8) * N + 8 * j + 2 * q + 1] = d[4 * j + 3];
    }
}

template <int N>
static void check_wgmma() {
    std::vector<__half> a(64 * 64), b(64 * N);
    for (int r = 0; r < 64; ++r)
        for (int k = 0; k < 64; ++k) a[r * 64 + k] = __float2half(value_at(r, k));
    for (int k = 0; k < 64; ++k)
        for (int c = 0; c < N; ++c) b[k * N + c] = __float2half(value_at(k + 7, c + 3));
    __half *da = to_device(a), *db = to_device(b);
    float* dd;
    CUDA_OK(cudaMalloc(&dd, 64 * N * 4));
    const PeakTensorMap ma = tensor_map(da, 64, 64, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
    const PeakTensorMap mb = tensor_map(db, 64, N, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
    const int smem = 1024 + 8192 + N / 64 * 8192 + 16;
    CUDA_OK(cudaFuncSetAttribute(wgmma_tile<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    wgmma_tile<N><<<1, 128, smem>>>(ma, mb, dd);
    const std::vector<float> d = from_device(dd, 64 * N);
    char what[64];
    std::snprintf(what, sizeof what, "peak_wgmma_m64n%dk16 (A K-major, B N-major, 128B swizzle)", N);
    report_max_error(what, d, 64, N, [&](int r, int c) {
        float want = 0;
        for (int k = 0; k < 64; ++k) want += __half2float(a[r * 64 + k]) * __half2float(b[k * N + c]);
        return want;
    }, 1e-2);
    cudaFree(da);
    cudaFree(db);
}

// ---- 8-bit mma.sync: A (16 x 32) and B (32 x 16) e4m3, both held K-major in shared memory ----
__global__ void mma_tile_e4m3(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* Bt, float* C) {
    __shared__ __align__(16) __nv_fp8_e4m3 As[16][48];  // padded rows of 48 bytes keep 16-byte alignment
    __shared__ __align__(16) __nv_fp8_e4m3 Bs[16][48];  // Bs[n][k]
    const int lane = threadIdx.x;
    for (int i = lane; i < 512; i += 32) {
        As[i / 32][i % 32] = A[i];
        Bs[i / 32][i % 32] = Bt[i];
    }
    __syncwarp();
    unsigned a[4], b[4];
    peak_ldmatrix_a(a, &As[lane % 16][(lane / 16) * 16]);
    peak_ldmatrix_b_k8(b, &Bs[lane % 8 + (lane / 16) * 8][((lane / 8) % 2) * 16]);
    float acc[2][4] = {};
    peak_mma_16832_e4m3(acc[0], a, &b[0]);
    peak_mma_16832_e4m3(acc[1], a, &b[2]);
    const int g = lane / 4, q = lane % 4;
    for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 4; ++e) C[(g + 8 * (e / 2)) * 16 + 8 * h + 2 * q + e % 2] = acc[h][e];
}

static void check_mma_e4m3() {
    std::vector<__nv_fp8_e4m3> a(512), bt(512);  // a[m][k], bt[n][k]
    for (int i = 0; i < 512; ++i) {
        a[i] = __nv_fp8_e4m3(value_at(i / 32, i % 32));
        bt[i] = __nv_fp8_e4m3(value_at(i % 32 + 3, i / 32 + 5));
    }
    __nv_fp8_e4m3 *da = to_device(a), *db = to_device(bt);
    float* dc;
    CUDA_OK(cudaMalloc(&dc, 1024));
    mma_tile_e4m3<<<1, 32>>>(da, db, dc);
    const std::vector<float> c = from_device(dc, 256);
    report_max_error("peak_ldmatrix_a/b_k8 + peak_mma_16832_e4m3 (K-major tiles)", c, 16, 16, [&](int r, int col) {
        float want = 0;
        for (int k = 0; k < 32; ++k) want += float(a[r * 32 + k]) * float(bt[col * 32 + k]);
        return want;
    }, 1e-3);
    cudaFree(da);
    cudaFree(db);
}

// ---- 8-bit wgmma: D(64 x N) = A(64 x 128) * B(128 x N), A and B K-major e4m3 boxes of 128-byte rows ----
template <int N>
__device__ __forceinline__ void wgmma_e4m3_step(float* d, unsigned long long da, unsigned long long db, int accumulate) {
    if constexpr (N == 64) peak_wgmma_e4m3_m64n64k32(d, da, db, accumulate);
    else if constexpr (N == 128) peak_wgmma_e4m3_m64n128k32(d, da, db, accumulate);
    else if constexpr (N == 192) peak_wgmma_e4m3_m64n192k32(d, da, db, accumulate);
    else peak_wgmma_e4m3_m64n256k32(d, da, db, accumulate);
}

template <int N>
__global__ void __launch_bounds__(128) wgmma_e4m3_tile(const __grid_constant__ PeakTensorMap tma, const __grid_constant__ PeakTensorMap tmb, float* D) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = smem_raw + ((1024 - (peak_smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* a = smem;          // [64][128] e4m3: 8192 bytes
    unsigned char* b = smem + 8192;   // [N][128] e4m3 (K-major B): one box
    unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + 8192 + N * 128);
    if (threadIdx.x == 0) {
        peak_mbar_init(bar, 1);
        peak_fence_mbar_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        peak_mbar_arrive_expect_tx(bar, 8192 + N * 128);
        peak_tma_load_2d(a, &tma, 0, 0, bar);
        peak_tma_load_2d(b, &tmb, 0, 0, bar);
    }
    peak_mbar_wait(bar, 0);
    float d[N / 2];
    const unsigned long long da = peak_wgmma_desc(a, 16, 1024), db = peak_wgmma_desc(b, 16, 1024);
    peak_wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_e4m3_step<N>(d, da + 2 * k, db + 2 * k, k > 0);
    peak_wgmma_commit();
    peak_wgmma_wait<0>();
    const int t = threadIdx.x, w = t / 32, g = (t % 32) / 4, q = t % 4;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        D[(16 * w + g) * N + 8 * j + 2 * q] = d[4 * j];
        D[(16 * w + g) * N + 8 * j + 2 * q + 1] = d[4 * j + 1];
        D[(16 * w + g + 8) * N + 8 * j + 2 * q] = d[4 * j + 2];
        D[(16 * w + g + 8) * N + 8 * j + 2 * q + 1] = d[4 * j + 3];
    }
}

template <int N>
static void check_wgmma_e4m3() {
    std::vector<__nv_fp8_e4m3> a(64 * 128), bt(N * 128);  // a[m][k], bt[n][k]
    for (int r = 0; r < 64; ++r)
        for (int k = 0; k < 128; ++k) a[r * 128 + k] = __nv_fp8_e4m3(value_at(r, k));
    for (int c = 0; c < N; ++c)
        for (int k = 0; k < 128; ++k) bt[c * 128 + k] = __nv_fp8_e4m3(value_at(k + 7, c + 3));
    __nv_fp8_e4m3 *da = to_device(a), *db = to_device(bt);
    float* dd;
    CUDA_OK(cudaMalloc(&dd, 64 * N * 4));
    const PeakTensorMap ma = tensor_map(da, 64, 128, 64, 128, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1);
    const PeakTensorMap mb = tensor_map(db, N, 128, N, 128, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1);
    const int smem = 1024 + 8192 + N * 128 + 16;
    CUDA_OK(cudaFuncSetAttribute(wgmma_e4m3_tile<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    wgmma_e4m3_tile<N><<<1, 128, smem>>>(ma, mb, dd);
    const std::vector<float> d = from_device(dd, 64 * N);
    char what[80];
    std::snprintf(what, sizeof what, "peak_wgmma_e4m3_m64n%dk32 (A and B K-major, 128B swizzle)", N);
    report_max_error(what, d, 64, N, [&](int r, int c) {
        float want = 0;
        for (int k = 0; k < 128; ++k) want += float(a[r * 128 + k]) * float(bt[c * 128 + k]);
        return want;
    }, 1e-2);
    cudaFree(da);
    cudaFree(db);
}

// ---- stmatrix: a warpgroup stages a 64 x 64 box of f16 from the wgmma accumulator layout,
// four 8 x 8 blocks per instruction at Stmatrix-Staging's addresses, 128-byte swizzled; read back
// through peak_swizzle_128b it must be the matrix the accumulators held ----
__global__ void __launch_bounds__(128) stmatrix_box(float* out) {
    __shared__ __align__(1024) unsigned char box[8192];
    const int t = threadIdx.x, w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    float acc[32];  // 8 groups j x (row half h, column pair): acc[4 j + 2 h + e]
    for (int j = 0; j < 8; ++j)
        for (int h = 0; h < 2; ++h)
            for (int e = 0; e < 2; ++e) acc[4 * j + 2 * h + e] = float((16 * w + 8 * h + g) * 64 + 8 * j + 2 * q + e - 2048);
    const int bi = lane / 8, rr = lane % 8;
    for (int jj = 0; jj < 8; jj += 2) {
        unsigned p[4];
        for (int i = 0; i < 4; ++i) {
            const int j = jj + i / 2, h = i % 2;
            p[i] = peak_pack_16x2(__halves2half2(__float2half(acc[4 * j + 2 * h]), __float2half(acc[4 * j + 2 * h + 1])));
        }
        peak_stmatrix_x4(box + peak_swizzle_128b(16 * w + 8 * (bi % 2) + rr, 16 * ((jj + bi / 2) % 8)), p[0], p[1], p[2], p[3]);
    }
    __syncthreads();
    for (int i = t; i < 64 * 64; i += 128)
        out[i] = __half2float(*reinterpret_cast<const __half*>(box + peak_swizzle_128b(i / 64, (i % 64) * 2)));
}

static void check_stmatrix() {
    float* out;
    CUDA_OK(cudaMalloc(&out, 64 * 64 * sizeof(float)));
    stmatrix_box<<<1, 128>>>(out);
    // Each element holds its own index less 2048: every integer in [-2048, 2047] is exact in
    // f16 (11 significant bits), where the odd ones from 2049 on are not.
    report_max_error("peak_stmatrix_x4 + peak_pack_16x2 (a 64 x 64 box, 128-byte swizzled)", from_device(out, 64 * 64), 64, 64,
                     [](int r, int c) { return float(r * 64 + c - 2048); }, 0.5);
}

// ---- cluster_reduce: the two blocks of a cluster store 64 values each to global memory,
// count in on both blocks' barriers (release, cluster scope), wait on their own (acquire) and
// add the other block's values read through L2; three rounds on two alternating barriers,
// as Cluster-Split-K uses them ----
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(64) cluster_exchange(float* part, float* out) {
    __shared__ __align__(8) unsigned long long bar[2];
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    if (threadIdx.x == 0) {
        for (int b = 0; b < 2; ++b)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(&bar[b]))) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
    for (int done = 0; done < 3; ++done) {
        part[(done * 2 + rank) * 64 + threadIdx.x] = float(1000 * done + 100 * rank + threadIdx.x);
        peak_fence_cluster();
        __syncthreads();
        if (threadIdx.x == 0)
            for (unsigned r = 0; r < 2; ++r) peak_mbar_arrive_release(&bar[done % 2], r);
        peak_mbar_wait_acquire(&bar[done % 2], (done / 2) & 1);
        out[(done * 2 + rank) * 64 + threadIdx.x] = __ldcg(&part[(done * 2 + (1 - rank)) * 64 + threadIdx.x]);
    }
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

static void check_cluster_reduce() {
    float *part, *out;
    CUDA_OK(cudaMalloc(&part, 6 * 64 * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, 6 * 64 * sizeof(float)));
    cluster_exchange<<<2, 64>>>(part, out);
    cudaFree(part);
    // Block `rank` of round `done` read the other block's value of that round.
    report_max_error("peak_mbar_arrive_release + peak_mbar_wait_acquire (two blocks of a cluster, three rounds)", from_device(out, 6 * 64), 6, 64,
                     [](int row, int t) { return float(1000 * (row / 2) + 100 * (1 - row % 2) + t); }, 0.5);
}

int main() {
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
    check_tile_copies<float>("f32");
    check_tile_copies<__half>("f16");
    check_vector_async_copy();
    check_mma();
    if (prop.major * 10 + prop.minor >= 89) check_mma_e4m3();
    if (prop.major >= 9) {
        check_tma();
        check_tma_store();
        check_stmatrix();
        check_cluster_reduce();
        check_wgmma<64>();
        check_wgmma<128>();
        check_wgmma<256>();
        check_wgmma_e4m3<64>();
        check_wgmma_e4m3<128>();
        check_wgmma_e4m3<192>();
        check_wgmma_e4m3<256>();
    } else {
        std::printf("skip tma and wgmma: they need compute capability 9.0\n");
    }
    std::printf("%s\n", failures == 0 ? "all snippet checks passed" : "SOME SNIPPET CHECKS FAILED");
    return failures == 0 ? 0 : 1;
}
