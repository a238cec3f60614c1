// Fast-Math: the f32 functions the kernel calls, precise (FAST_MATH 0: the library's tanhf,
// expf, ... as before) or the hardware's approximations (FAST_MATH 1: tanh.approx.f32 on
// sm_75 and later, __expf, __logf, __sinf, __cosf, __powf).
#ifndef PEAK_FAST_MATH
#define PEAK_FAST_MATH
__device__ __forceinline__ float peak_tanhf(float x) {
#if FAST_MATH && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return tanhf(x);
#endif
}
#if FAST_MATH
__device__ __forceinline__ float peak_expf(float x) { return __expf(x); }
__device__ __forceinline__ float peak_logf(float x) { return __logf(x); }
__device__ __forceinline__ float peak_sinf(float x) { return __sinf(x); }
__device__ __forceinline__ float peak_cosf(float x) { return __cosf(x); }
__device__ __forceinline__ float peak_powf(float x, float y) { return __powf(x, y); }
#else
__device__ __forceinline__ float peak_expf(float x) { return expf(x); }
__device__ __forceinline__ float peak_logf(float x) { return logf(x); }
__device__ __forceinline__ float peak_sinf(float x) { return sinf(x); }
__device__ __forceinline__ float peak_cosf(float x) { return cosf(x); }
__device__ __forceinline__ float peak_powf(float x, float y) { return powf(x, y); }
#endif
#endif
