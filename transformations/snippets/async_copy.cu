// Asynchronous global -> shared copies for multi-stage pipelines.
//   PEAK_ASYNC_COPY(dst, src, index, in_bounds)  start copying src[index] into the shared
//       element or vector `dst` (an lvalue); stores zero instead when !in_bounds.
//   PEAK_ASYNC_COMMIT()  close the group of copies started since the last commit.
//   PEAK_ASYNC_WAIT(N)   wait until at most N committed groups are still in flight
//       (N a compile-time constant, e.g. NUM_STAGES - 2); then a barrier makes the
//       landed data visible to the whole block.
// On sm_80 and newer these are cp.async: the copy bypasses registers and overlaps with
// the math. Elements of 4, 8 or 16 bytes go asynchronously (copy 2-byte halves as
// half2 or wider vectors); anything else, and older GPUs, copy synchronously.
template <typename T>
__device__ __forceinline__ void peak_async_copy(T* dst, const T* src, bool in_bounds) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16) {
        const unsigned int s = static_cast<unsigned int>(__cvta_generic_to_shared(dst));
        // src-size 0 reads nothing and zero-fills the destination.
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(sizeof(T)), "r"(in_bounds ? (int)sizeof(T) : 0) : "memory");
        return;
    }
#endif
    *dst = in_bounds ? *src : T{};
}
#define PEAK_ASYNC_COPY(dst, src, index, in_bounds) \
    peak_async_copy(&(dst), (in_bounds) ? &(src)[index] : &(src)[0], (in_bounds))
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PEAK_ASYNC_COMMIT() asm volatile("cp.async.commit_group;\n" ::: "memory")
#define PEAK_ASYNC_WAIT(N) asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory")
#else
#define PEAK_ASYNC_COMMIT() ((void)0)
#define PEAK_ASYNC_WAIT(N) ((void)0)
#endif
