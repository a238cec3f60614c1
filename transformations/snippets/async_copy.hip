// Global -> shared copies for multi-stage pipelines, with the same interface as the CUDA
// cp.async version. AMD GPUs have no asynchronous global-to-LDS copy that HIP exposes, so
// the copy happens at once and commit/wait are no-ops; the pipeline still overlaps the
// loads of later stages with the math of the current one.
//   PEAK_ASYNC_COPY(dst, src, index, in_bounds)  dst = src[index], or zero when !in_bounds
//   PEAK_ASYNC_COMMIT()  close the group of copies started since the last commit
//   PEAK_ASYNC_WAIT(N)   wait until at most N committed groups are in flight; follow it
//       with a barrier before reading the data
template <typename T>
__device__ __forceinline__ void peak_async_copy(T* dst, const T* src, bool in_bounds) {
    *dst = in_bounds ? *src : T{};
}
#define PEAK_ASYNC_COPY(dst, src, index, in_bounds) \
    peak_async_copy(&(dst), (in_bounds) ? &(src)[index] : &(src)[0], (in_bounds))
#define PEAK_ASYNC_COMMIT() ((void)0)
#define PEAK_ASYNC_WAIT(N) ((void)0)
